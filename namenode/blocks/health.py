"""Which block groups of complete files lack units: what repair planning and fsck's counts and the
status page need, without a scan per look.

A group is *healthy* (every unit good: reported, on a live DataNode, not corrupt), *degraded*
(its good or corrupt-but-readable units decode it: any k for RS, any replica, for LRC a set
``Policy.decodable`` accepts) or *missing* (unreadable). Only the unhealthy ones are kept (a dict
of group id -> (state, units lacking)); the healthy count is the rest of the complete groups.

What changes a group's health: its units (the block map notes it in ``BlockMap.dirty``) and the
liveness of the DataNodes holding them. ``refresh`` judges the dirty groups; a DataNode's death
or return asks for a full pass (``rescan``), done ``budget`` groups at a time by the monitor's
passes. Before the first full pass (a start-up still in safe mode: nothing has reported, every
group would be "missing") nothing is judged: ``judged`` says when the counts mean something.
"""

from __future__ import annotations

import itertools
from collections import Counter
from typing import Callable

from hedgefs.namenode.blocks.blockmap import BlockMap
from hedgefs.namenode.namespace.inodes import load_policy

HEALTHY, DEGRADED, MISSING = "healthy", "degraded", "missing"


class Health:
    def __init__(self, blocks: BlockMap):
        self.blocks = blocks
        # group id -> (state, units without a good copy, replicated: a policy of copies)
        self.unhealthy: dict[int, tuple[str, int, bool]] = {}
        self.counts: Counter[str] = Counter({DEGRADED: 0, MISSING: 0})
        self.units_lacking = 0        # units without a good copy, in degraded groups (repairable)
        self.replicated = 0           # unhealthy groups of replicated policies (under-replicated blocks)
        # degraded group ids by units lacking, each an ordered set (a dict): repair candidates,
        # most lacking first, round robin within a count (``repair_candidates``)
        self._degraded: dict[int, dict[int, None]] = {}
        self.judged = False           # a full pass has been done: the counts are the map's
        self._scan: list[int] = []    # group ids a full pass has still to judge
        self._scanning = False

    @property
    def scanning(self) -> bool:
        """A full pass is under way (``refresh`` goes on with it)."""
        return self._scanning

    @property
    def healthy(self) -> int:
        return max(0, self.blocks.complete_groups - self.counts[DEGRADED] - self.counts[MISSING])

    @property
    def waiting_repair(self) -> int:
        return self.counts[DEGRADED] + self.counts[MISSING]

    def rescan(self) -> None:
        """Judge every group again (a DataNode died or came back, safe mode ended); changes made
        meanwhile are noted to be judged again (``BlockMap.dirty``)."""
        if self.blocks.dirty is None:
            self.blocks.dirty = set()
        self._scan = list(self.blocks.groups)
        self._scanning = True

    def refresh(self, is_live: Callable[[str], bool], budget: int = 1 << 62) -> int:
        """Judge the dirty groups, then up to ``budget`` of a full pass; how many were judged."""
        blocks = self.blocks
        dirty = blocks.dirty or ()
        if blocks.dirty is not None:
            blocks.dirty = set()
        judged = 0
        for gid in dirty:
            self._judge(gid, is_live)
            judged += 1
        while self._scan and budget > 0:
            chunk = self._scan[-min(budget, len(self._scan)):]
            del self._scan[-len(chunk):]
            for gid in chunk:
                self._judge(gid, is_live)
            judged += len(chunk)
            budget -= len(chunk)
        if self._scanning and not self._scan:
            self._scanning = False
            self.judged = True
        return judged

    def _judge(self, gid: int, is_live: Callable[[str], bool]) -> None:
        blocks = self.blocks
        group = blocks.groups.get(gid)
        if group is None or blocks.being_written(group):
            self._set(gid, None)
            return
        policy = load_policy(blocks.policy_of(group))
        zeros = blocks.zeros(group)   # a small file's zero units: never stored, never lacking
        good = len(blocks.good(group, is_live).keys() | zeros)
        if good >= policy.units:
            self._set(gid, None)
            return
        readable = blocks.readable_units(group, is_live).keys() | zeros
        self._set(gid, (DEGRADED if policy.decodable(readable) else MISSING, policy.units - good, policy.replicated))

    def repair_candidates(self, limit: int) -> list[int]:
        """Up to ``limit`` degraded groups to plan repairs for, those lacking most units first
        (the nearest to loss: HDFS's priority queues); each one taken goes to the back of its
        count, so a pass bounded by ``limit`` comes round to every group in turn."""
        out: list[int] = []
        for lacking in sorted(self._degraded, reverse=True):
            bucket = self._degraded[lacking]
            taken = list(itertools.islice(bucket, limit - len(out)))
            for gid in taken:
                del bucket[gid]
                bucket[gid] = None
            out.extend(taken)
            if len(out) >= limit:
                break
        return out

    def _set(self, gid: int, new: tuple[str, int, bool] | None) -> None:
        old = self.unhealthy.pop(gid, None)
        if old is not None:
            self.counts[old[0]] -= 1
            self.replicated -= old[2]
            if old[0] == DEGRADED:
                self.units_lacking -= old[1]
                bucket = self._degraded[old[1]]
                del bucket[gid]
                if not bucket:
                    del self._degraded[old[1]]
        if new is not None:
            self.unhealthy[gid] = new
            self.counts[new[0]] += 1
            self.replicated += new[2]
            if new[0] == DEGRADED:
                self.units_lacking += new[1]
                self._degraded.setdefault(new[1], {})[gid] = None
