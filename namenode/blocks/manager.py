"""The block manager (HDFS's BlockManager and DatanodeManager): the DataNode protocol (registration,
heartbeats and the commands their replies carry, block reports, receipts, bad-unit reports),
where new units may go, repair planning, decommission, and the monitor's pass over them.

Everything here is memory: unit locations (blockmap.py), DataNode liveness (liveness.py), repairs
in flight (repairs.py), deletes owed (deletes.py). The namesystem calls it under its writers'
lock. Only one thing it decides is journaled, and the namesystem logs it: a DataNode entering or
leaving decommission (the Decommission record; ``leaving`` is the applied set).

A DataNode is *usable* once it registered with this process: a NameNode knows only the DataNodes
that spoke to it since it started (their next heartbeat after a restart asks them to register and
report: ``reregister``). Commands reach a DataNode in its heartbeat reply. A pending delete is
sent (a surplus or corrupt copy's only once its group is whole again: ``BlockMap.deletes_due``),
then re-sent every ``DELETE_RESEND_S`` until the DataNode confirms it (``deleted`` in a
heartbeat, or a block report no longer listing the unit), or ``DELETE_TTL_S`` passes (a later
block report re-queues what is still there). No delete goes to a DataNode in safe mode, nor, where
safe mode is on (``--safe-mode-share``), before this process has had its full block report: it
may still change the picture (a restart, a new HA active: HDFS-6772). Repairs are built when delivered, so their sources are the live units of
that moment.

Decommission (HDFS's): a leaving DataNode takes no new units and keeps serving reads while the
repair machinery copies its units elsewhere (to the repair pass a unit on a leaving DataNode is
missing while its copy there is still a source, so the worker copies rather than decodes); once
the map puts no unit on it, it is *decommissioned*.
"""

from __future__ import annotations

import logging
import random
from collections import Counter
from typing import Callable, Iterable

from hedgefs.ec.policy import Policy
from hedgefs.namenode.blocks.placement import Bounds, Candidate, Placement, Shape, misplaced, shape_of
from hedgefs.namenode.blocks.balancer import Balancer
from hedgefs.namenode.blocks.blockmap import REPORT_GRACE_S, BadMark, BlockMap, Claim, Group  # noqa: F401
from hedgefs.namenode.blocks.claims import Claims
from hedgefs.namenode.blocks.expected import ExpectedReports
from hedgefs.namenode.blocks.health import Health
from hedgefs.namenode.blocks.liveness import Liveness
from hedgefs.namenode.blocks.repairs import GroupNeed, InFlight, RepairScheduler
from hedgefs.namenode.blocks.safe_mode import Reason, SafeMode, SafeModeRefusal
from hedgefs.namenode.errors import AlreadyExists, FailedPrecondition, InvalidArgument, NotFound, PermissionDenied
from hedgefs.namenode.model import DataNodeStats, DeleteUnit, HeartbeatReply, RepairUnit, UnitLocation
from hedgefs.namenode.namespace.inodes import load_policy
from hedgefs.topology import Location

log = logging.getLogger("hedgefs.namenode")

DELETE_RESEND_S = 30.0
DELETE_TTL_S = 600.0
MAX_DELETES_PER_HEARTBEAT = 1000
MAX_BAD_UNITS_PER_CALL = 1000
MAX_UNITS_STORED_PER_CALL = 10000
MAX_REPORT_UNITS = 50_000_000  # units in one DataNode's report, all parts together
FULL_SCAN_S = 10.0           # the repair pass runs at least this often even when nothing changed
HEALTH_STEP = 20_000         # groups of a full health pass judged a hold of the writers' lock (~0.1 s)
PLAN_GROUPS = 5_000          # groups a repair pass plans for at most (the rest: the next passes)
LEAVING_SCAN = 200_000       # groups a repair pass looks through for units on leaving DataNodes
PLACEABLE_FOR_S = 0.25       # Create's count of DataNodes that may take units is kept this long
DECOMMISSIONING, DECOMMISSIONED = "decommissioning", "decommissioned"

Locate = Callable[[int, str, int, int], UnitLocation]   # (index, DataNode, group id, generation) -> with a read token


class BlockManager:
    def __init__(self, blocks: BlockMap, liveness: Liveness, repairs: RepairScheduler, safe_mode: SafeMode,
                 leaving: set[str], locate: Locate, rng: random.Random, expected: ExpectedReports | None = None):
        self.blocks, self.liveness, self.repairs, self.safe_mode = blocks, liveness, repairs, safe_mode
        self.expected = expected or ExpectedReports(None, liveness.dead_interval_s, liveness.clock)
        self.claims = Claims(blocks)
        self.health = Health(blocks)
        self.leaving = leaving            # the journaled set (apply.py keeps it)
        self.locate = locate
        self.rng = rng
        self.placement = Placement(rng)
        self.balancer = Balancer(self)
        self.clock = liveness.clock
        self.registered: set[str] = set()   # DataNodes that registered with this process
        self.reregister: set[str] = set()   # adopted at a failover, asked to register and report again
        self.reported: set[str] = set()     # DataNodes whose full block report this process has had
        # adopted at a failover, their report to this process still to come: what the map says
        # they hold dates from the standby's time, and the old active may have deleted some of it
        # since (HDFS's stale block contents): no copy elsewhere is judged surplus on their word
        self.stale: set[str] = set()
        self.delete_sent: dict[tuple[str, int, int], float] = {}
        # a report coming in parts: DataNode id -> (last part, mapped before it, matched, counts, units)
        self._report_parts: dict[str, tuple] = {}
        self.scan_needed = True            # a repair pass is due: something changed, or the last had more to do
        self._last_scan = float("-inf")
        self._leaving_cursor = 0           # where the next pass goes on looking for units on leaving DataNodes
        self.receipt_waiters = None        # a Condition the namesystem waits on for receipts (notified here)
        self._placeable: tuple[float, int] = (float("-inf"), 0)   # (when, how many) DataNodes may take units
        self._placeable_registered = 0

    @property
    def passive(self) -> bool:
        """A standby's: it keeps locations, and units of groups it has not tailed yet
        (``BlockMap.ahead``), and sends no command."""
        return self.blocks.ahead is not None

    @passive.setter
    def passive(self, on: bool) -> None:
        self.blocks.keep_ahead(on)

    # ------------------------------------------------------------------ who may do what

    def usable(self, datanode_id: str) -> bool:
        """Live and registered with this process: may take units, serve repairs, hold a unit."""
        return datanode_id in self.registered and self.liveness.is_live(datanode_id)

    def usable_ids(self) -> list[str]:
        return [d for d in self.liveness.live_ids() if d in self.registered]

    def stays(self, datanode_id: str) -> bool:
        """Live and not leaving: a good holder of a unit (a leaving DataNode's copy is to be moved)."""
        return self.liveness.is_live(datanode_id) and datanode_id not in self.leaving

    def holds(self, datanode_id: str) -> bool:
        """Usable, not leaving, and its units as the map has them confirmed by its report to this
        process (not ``stale``): whose copy of a unit counts when another copy is reported."""
        return self.current(datanode_id) and datanode_id not in self.leaving

    def current(self, datanode_id: str) -> bool:
        """Usable, and not ``stale``: whose copies make a group whole (surplus deletes)."""
        return self.usable(datanode_id) and datanode_id not in self.stale

    def placeable_ids(self) -> list[str]:
        """Usable DataNodes that may take new units (placement, repair targets)."""
        return [d for d in self.usable_ids() if d not in self.leaving]

    def _leaving_note(self) -> str:
        leaving = sorted(d for d in self.leaving if self.liveness.is_live(d))
        return f" and in service ({', '.join(leaving)} decommissioning)" if leaving else ""

    # ------------------------------------------------------------------ placement

    def choose_targets(self, policy: Policy, exclude: Iterable[str], unit_bytes: int) -> list[str]:
        """k+m distinct usable DataNodes with room for a unit, by the placement rule (distinct
        hosts, at most the tolerance a rack: placement.py), least loaded first within it."""
        shape = shape_of(policy.name)
        chosen = self.placement.choose(shape, range(policy.units),
                                       self.candidates(self._targets_with_room(policy, exclude, unit_bytes)),
                                       shuffle=True)
        targets = [chosen[i] for i in range(policy.units)]
        for d in targets:
            self.liveness.note_allocated(d, unit_bytes)
        return targets

    def settle(self, groups: Iterable[Group], unit_bytes: int) -> None:
        """A write's groups are complete: the room their targets were held back (a whole unit of
        ``unit_bytes`` each, ``choose_targets``) goes back at once, not at their next heartbeat.
        Small files need it: 10 DataNodes on one file system of 64 GB free had room for some 50
        RS-6-3 files a heartbeat, and put -r of a tree failed on "no DataNode with room"."""
        for group in groups:
            for datanode_id in self.blocks.units(group).values():
                self.liveness.release(datanode_id, unit_bytes)

    def candidates(self, datanode_ids: Iterable[str]) -> list[Candidate]:
        """The DataNodes as placement sees them: id, host and rack, load."""
        where, load = self.liveness.location, self.liveness.load_key
        return [Candidate(d, where(d), load(d)) for d in datanode_ids]

    def bounds(self, shape: Shape) -> Bounds:
        """The best spread the DataNodes in service allow a group of ``shape``."""
        return Bounds.of(shape, [self.liveness.location(d) for d in self.placeable_ids()])

    def misplaced(self, group: Group, policy: Policy, bounds: Bounds | None = None) -> str:
        """Why ``group``'s units break the placement rule (as far as the cluster allows), or ""."""
        shape = shape_of(policy.name)
        where = self.liveness.location
        units = self.blocks.units(group)
        return misplaced(shape, {i: where(d) for i, d in units.items()}, bounds or self.bounds(shape))

    def placeable_changed(self) -> None:
        """A DataNode began or stopped leaving: Create's count is counted again."""
        self._placeable = (float("-inf"), 0)

    def _live_targets(self, policy: Policy, exclude: Iterable[str] = ()) -> list[str]:
        excluded = set(exclude)
        live = self.placeable_ids()
        usable = [d for d in live if d not in excluded]
        if len(usable) < policy.units:
            if len(live) < policy.units:
                self._refuse_while_datanodes_register(policy, len(live))
            message = (f"policy {policy.name} needs {policy.units} live DataNodes, only {len(live)} are live"
                       f"{self._leaving_note()}")
            if len(live) >= policy.units:
                message = (f"policy {policy.name} needs {policy.units} live DataNodes, only {len(usable)} "
                           f"are live and not excluded ({', '.join(sorted(excluded & set(live)))})")
            raise FailedPrecondition(message)
        return usable

    def _targets_with_room(self, policy: Policy, exclude: Iterable[str], unit_bytes: int) -> list[str]:
        """Usable DataNodes with room for a unit of ``unit_bytes`` (HDFS's remaining-space check)."""
        usable = self._live_targets(policy, exclude)
        roomy = [d for d in usable if self.liveness.has_room(d, unit_bytes)]
        if len(roomy) < policy.units:
            full = sorted(set(usable) - set(roomy))
            raise FailedPrecondition(f"policy {policy.name} needs {policy.units} DataNodes with room for a unit "
                                     f"of {unit_bytes} bytes, only {len(roomy)} have it (full: {', '.join(full)})")
        return roomy

    def check_placeable(self, policy: Policy) -> None:
        """A policy needing more DataNodes than are live is bad input: nothing could be placed.
        (Every Create asks: the count is kept for PLACEABLE_FOR_S, a registration or a
        decommission ending it sooner.)"""
        now = self.clock()
        at, live = self._placeable
        if not 0 <= now - at < PLACEABLE_FOR_S or len(self.registered) != self._placeable_registered:
            live = len(self.placeable_ids())
            self._placeable, self._placeable_registered = (now, live), len(self.registered)
        if live >= policy.units:
            return
        live = len(self.placeable_ids())
        if live < policy.units:
            self._refuse_while_datanodes_register(policy, live)
            raise InvalidArgument(f"policy {policy.name} needs {policy.units} live DataNodes, only {live} are live"
                                  f"{self._leaving_note()}")

    def _refuse_while_datanodes_register(self, policy: Policy, placeable: int) -> None:
        """Too few DataNodes have registered with this process, but enough have spoken to it and
        it started (or became the active) less than a dead interval ago: they register at their
        next heartbeat, so the refusal is one the client retries (safe mode's), not "bad input"."""
        known = len([d for d in self.liveness.live_ids() if d not in self.leaving])
        age = self.clock() - self.started
        if known >= policy.units and age < self.liveness.dead_interval_s:
            raise SafeModeRefusal(f"policy {policy.name} needs {policy.units} live DataNodes: {placeable} of the "
                                  f"{known} known have registered with this NameNode since it started {age:.1f} s "
                                  f"ago; the others have not reported yet", retriable=True)

    started = 0.0   # set by the namesystem when it starts serving

    # ------------------------------------------------------------------ locations

    def locations(self, group: Group, k: int, keep_dead: bool = False) -> dict[int, str]:
        """Good units. Units on dead DataNodes are left out (a reader would only wait on them), and
        corrupt ones too unless fewer than k are good (a corrupt unit's other chunks still read).
        ``keep_dead`` (the operator's file page): every reported unit."""
        if keep_dead:
            return self.blocks.reported_units(group)
        units = self.blocks.good(group, self.liveness.live().__contains__)
        if len(units) + len(self.blocks.zeros(group)) < k:
            units = self.blocks.readable_units(group, self.liveness.is_live)
        return units

    # ------------------------------------------------------------------ the DataNode protocol

    def reports_due(self) -> list[str]:
        """The DataNodes whose block reports may still locate more units since this process
        started serving (expected.py: bounded; ["(any)"] while none has come), else []."""
        if not self.expected.armed:   # before the live ids: the wait is over for good
            return []
        return self.expected.waiting(self.reported, self.liveness.live_ids(),
                                     lambda d: self.liveness.knows(d) and not self.liveness.is_live(d))

    def require_known(self, datanode_id: str) -> None:
        if datanode_id not in self.registered:
            raise FailedPrecondition(f"unknown DataNode {datanode_id!r}: register first")

    def register(self, datanode_id: str, address: str, data_address: str, cluster_id: str, storage_id: str,
                 own_cluster: str, host_id: str = "", rack: str = "") -> None:
        if not datanode_id or not address:
            raise InvalidArgument("RegisterDataNode needs a DataNode id and an address")
        if cluster_id and cluster_id != own_cluster:
            log.warning("refused DataNode %s of cluster %s (this is cluster %s)", datanode_id, cluster_id, own_cluster)
            raise PermissionDenied(f"DataNode {datanode_id} belongs to cluster {cluster_id}; this NameNode's "
                                   f"cluster is {own_cluster}")
        self._check_one_storage(datanode_id, address, storage_id)
        node = self.liveness.seen(datanode_id, address, data_address)
        node.storage_id = storage_id
        place = Location.of(host_id, rack, address)
        if node.place is not None and node.place != place:
            log.warning("datanode %s moved: was host %s rack %s, now host %s rack %s", datanode_id,
                        node.place.host, node.place.rack, place.host, place.rack)
        node.place = place
        self.registered.add(datanode_id)
        self.reregister.discard(datanode_id)
        self.expected.registered(datanode_id)
        # A (re)starting DataNode forgot whatever it was told: plan its repairs again, resend deletes.
        self.repairs.forget_target(datanode_id)
        self._forget_sent(datanode_id)
        self.blocks.forget_recent(datanode_id)   # its next report is made after all it was told so far
        self._report_parts.pop(datanode_id, None)   # a report it was sending in parts is void
        self.scan_needed = True
        log.info("datanode %s registered at %s (host %s, rack %s)", datanode_id, address, place.host, place.rack)

    def _check_one_storage(self, datanode_id: str, address: str, storage_id: str) -> None:
        """One DataNode per id: refuse a registration whose storage differs from the live one's."""
        known = self.liveness.get(datanode_id)
        if known is None or not storage_id or not known.storage_id or known.storage_id == storage_id:
            return
        if datanode_id in self.registered and self.liveness.is_live(datanode_id):
            log.warning("refused a second DataNode %s at %s (storage %s): %s is live at %s with storage %s",
                        datanode_id, address, storage_id, datanode_id, known.address, known.storage_id)
            raise AlreadyExists(f"DataNode id {datanode_id} is taken: a live DataNode at {known.address} has it, "
                                f"with another data dir (storage {known.storage_id}, this one's is {storage_id}); "
                                f"give each DataNode its own --id")
        log.warning("datanode %s registers with another data dir (storage %s, was %s): the old one's units are "
                    "gone with it", datanode_id, storage_id, known.storage_id)

    def adopt(self, heard: dict[str, tuple[str, str]]) -> None:
        """A new active (HA): the DataNodes that reported to it as a standby are usable at once
        (placement, reads), not after their next registration; their first heartbeat still asks
        them to register and report again (nothing is deleted there before that report)."""
        for datanode_id, (address, data_address) in heard.items():
            self.liveness.seen(datanode_id, address, data_address)
            self.registered.add(datanode_id)
            self.reregister.add(datanode_id)
        self.reported.clear()
        self.stale = set(heard)
        self.passive = False
        self.blocks.deletes = type(self.blocks.deletes)(self.clock)   # a standby's: judged again after the reports
        self.delete_sent.clear()
        self.scan_needed = True
        if heard:
            log.info("adopted %d DataNodes that reported to this NameNode as a standby", len(heard))

    def heartbeat(self, datanode_id: str, address: str = "", used_bytes: int = 0, units: int = 0,
                  active_repairs: int = 0, stats: DataNodeStats | None = None,
                  data_address: str = "", deleted: Iterable[tuple[int, int, int]] = ()) -> HeartbeatReply:
        """``deleted``: units (group, index, generation) the DataNode deleted since its last
        heartbeat, at this NameNode's command or another's (HA): pending deletes of them are
        confirmed, and a location the map still puts there is dropped (``Claims.gone``)."""
        # A DataNode that has not registered with this process (it restarted, or became the
        # active) is known from its heartbeat on (its liveness, for the placement refusal's
        # "still registering"), and asked to register and report.
        if address or self.liveness.knows(datanode_id):
            self.liveness.heartbeat(datanode_id, address, used_bytes, units, active_repairs, stats, data_address)
        if datanode_id not in self.registered:
            return HeartbeatReply([], reregister=True)
        if datanode_id in self.reregister:   # adopted at a failover: its registration and report, please
            self.reregister.discard(datanode_id)
            return HeartbeatReply([], reregister=True)
        deleted = list(deleted)[:MAX_UNITS_STORED_PER_CALL]   # more is a bad DataNode; a report covers them
        for unit in deleted:
            if self.blocks.deletes.confirm(datanode_id, unit):
                self.delete_sent.pop((datanode_id, unit[0], unit[1]), None)
                self.scan_needed = True   # a unit of that group may go to this DataNode again
            if self.claims.gone(datanode_id, *unit, passive=self.passive):
                self.scan_needed = True   # its group lacks the unit now: repaired, if this NameNode is the active
                log.debug("unit %d/%d told deleted by %s: its location dropped", unit[0], unit[1], datanode_id)
        if self.passive:
            return HeartbeatReply([])
        commands: list[DeleteUnit | RepairUnit] = self._deletes_to_send(datanode_id)
        for repair in self.repairs.take(datanode_id):
            command = self._repair_command(repair)
            if command is None:
                self.repairs.drop(repair.group_id, repair.index)
                self.scan_needed = True
            else:
                commands.append(command)
                self.blocks.deletes.renewed(datanode_id, repair.group_id, repair.index)   # a new copy: its receipt counts
                log.info("repair of unit %d/%d sent to %s", repair.group_id, repair.index, datanode_id)
        return HeartbeatReply(commands)

    def _deletes_to_send(self, datanode_id: str) -> list[DeleteUnit]:
        now, out = self.clock(), []
        if self.safe_mode.on or (self.safe_mode.share is not None and datanode_id not in self.reported):
            return out
        for group_id, index, generation in self.claims.deletes_due(datanode_id, self.current):
            key = (datanode_id, group_id, index)
            sent = self.delete_sent.get(key)
            if sent is None or now - sent >= DELETE_RESEND_S:
                self.delete_sent[key] = now
                out.append(DeleteUnit(group_id, index, generation))
                if len(out) >= MAX_DELETES_PER_HEARTBEAT:
                    break
        return out

    def _forget_sent(self, datanode_id: str) -> None:
        for key in [k for k in self.delete_sent if k[0] == datanode_id]:
            del self.delete_sent[key]

    def _resend_after_report(self, datanode_id: str) -> None:
        """After a full report: confirmed deletes are gone; those still listed go again with the
        next heartbeat, and stay sent (the DataNode may still carry out the first: ``claim``)."""
        pending = {(g, i) for g, i, _gen in self.blocks.pending_deletes(datanode_id)}
        for key in [k for k in self.delete_sent if k[0] == datanode_id]:
            if (key[1], key[2]) in pending:
                self.delete_sent[key] = float("-inf")
            else:
                del self.delete_sent[key]

    def _repair_command(self, repair: InFlight) -> RepairUnit | None:
        """The command for a planned repair, or None if it is no longer needed or possible."""
        blocks = self.blocks
        group = blocks.get(repair.group_id)
        if group is None or blocks.being_written(group):
            return None
        policy = load_policy(self.blocks.policy_of(group))
        if repair.source:   # a move: while its copy is the mapped good one
            if blocks.good(group, self.stays).get(repair.index) != repair.source:
                return None
        elif repair.index in blocks.good(group, self.stays):   # (a leaving DataNode's copy is to be moved)
            return None
        if repair.target in blocks.units(group).values():  # it got another unit of the group meanwhile
            return None
        generation = blocks.generation(group.id)
        sources = [self.locate(i, d, group.id, generation) for i, d in sorted(blocks.good(group, self.usable).items())]
        if not policy.decodable({s.index for s in sources} | blocks.zeros(group)):   # (zero units: the worker's own)
            return None
        length = group.file.group_lengths()[group.file.groups.index(group)] if group in group.file.groups else 0
        return RepairUnit(group.id, repair.index, policy.name, length, sources, generation)

    def block_report(self, datanode_id: str, units: Iterable[tuple[int, int, int]], part: int = 0,
                     more: bool = False) -> dict[str, int]:
        """A whole report at once (tests, tools): ``report_part`` and, if due, ``finish_report``
        with the missing units' scan under the same hold of the lock."""
        counts, reported = self.report_part(datanode_id, units, part, more)
        if reported is None:
            return counts
        return self.finish_report(datanode_id, reported,
                                  self.claims.missing_candidates(datanode_id, reported), counts)

    def report_part(self, datanode_id: str, units: Iterable[tuple[int, int, int]], part: int = 0,
                    more: bool = False) -> tuple[dict[str, int], set | None]:
        """One part of a DataNode's full list of (group id, index, generation) (parts 0, 1, ...,
        ``more`` on all but the last), its units claimed now: a writer waits for one part, not
        the whole report. Returns (counts, None) once done, or at the last part (counts so far,
        the whole report) when some unit mapped here before the first part was not in it: the
        caller scans for those off the lock (``BlockMap.missing_candidates``) and calls
        ``finish_report``."""
        self.require_known(datanode_id)
        self.liveness.seen(datanode_id)
        held = self._report_parts.pop(datanode_id, None)
        if part != (0 if held is None else held[0] + 1):
            raise InvalidArgument(f"block report part {part} from {datanode_id} out of order (expected "
                                  f"{0 if held is None else held[0] + 1}): send the report again from part 0")
        units = set(units)
        if held is None:
            before, matched, counts, reported = self.blocks.mapped.get(datanode_id, 0), 0, Counter(), units
        else:
            _part, before, matched, counts, reported = held
            reported |= units
        if len(reported) > MAX_REPORT_UNITS:
            raise InvalidArgument(f"block report from {datanode_id} of more than {MAX_REPORT_UNITS:,} units")
        # The same judge of "a good copy elsewhere" as UnitStored's (a leaving DataNode's copy is
        # none): a repair copy reported before its receipt must move the unit, not be "stale".
        got, hits = self.claims.reconcile_part(datanode_id, units, self.holds, self.delete_sent)
        counts.update(got)
        matched += hits
        if got.get(Claim.RECEIVED.value) and self.receipt_waiters is not None:
            self.receipt_waiters.notify_all()
        if more:
            self._report_parts[datanode_id] = (part, before, matched, counts, reported)
            return {"parts_held": part + 1}, None
        if matched < before:   # some unit mapped here is not in the report: find which, off the lock
            return dict(counts), reported
        return self.finish_report(datanode_id, reported, [], counts), None

    def finish_report(self, datanode_id: str, reported: set, missing: list, counts) -> dict[str, int]:
        """The end of a full report: ``missing`` (candidates: ``BlockMap.missing_candidates``)
        dropped, pending deletes it no longer shows confirmed, deletes still listed sent again."""
        counts = Counter(counts)
        dropped = self.claims.drop_missing(datanode_id, reported, missing)
        if dropped:
            counts["missing"] = dropped
        deleted = self.blocks.deletes.confirm_absent(datanode_id, reported)
        if deleted:
            counts["deleted"] = deleted
        self._resend_after_report(datanode_id)
        self.reported.add(datanode_id)
        self.stale.discard(datanode_id)
        self.scan_needed = True
        self.liveness.seen(datanode_id).foreign_units = counts.get(Claim.FOREIGN.value, 0)
        if counts.get(Claim.FOREIGN.value):
            log.warning("%s holds %d units of generations this namespace never issued (another namespace, "
                        "or a wiped NameNode database?): left alone, never served or deleted from here",
                        datanode_id, counts[Claim.FOREIGN.value])
        notable = {k: v for k, v in counts.items() if k != Claim.MAPPED.value}
        if notable:
            log.info("block report from %s: %d units, %s", datanode_id, len(reported),
                     ", ".join(f"{k} {v}" for k, v in sorted(notable.items())))
        return dict(counts)

    def units_stored(self, datanode_id: str, units: list[tuple[int, int, int]]) -> list[Claim]:
        """A DataNode's receipts for units it has just stored (a writer's, or a repair's)."""
        self.require_known(datanode_id)
        self.liveness.seen(datanode_id)
        if len(units) > MAX_UNITS_STORED_PER_CALL:
            raise InvalidArgument(f"at most {MAX_UNITS_STORED_PER_CALL} units per UnitStored, got {len(units)}")
        outcomes = []
        for unit in units:
            move = self.repairs.in_flight.get(unit[:2])
            outcome = None
            if move is not None and move.source and move.target == datanode_id:   # a move's copy: it takes the place
                outcome = self.claims.move(datanode_id, *unit, move.source, self.delete_sent)
                if outcome is not None:
                    self.repairs.moved(move)
                    log.info("unit %d/%d moved from %s to %s", unit[0], unit[1], move.source, datanode_id)
            outcomes.append(outcome or self.claims.claim(datanode_id, *unit, self.holds, self.delete_sent))
        self.scan_needed = True
        for (group_id, index, _gen), outcome in zip(units, outcomes):
            repair = self.repairs.in_flight.get((group_id, index))
            if repair is not None and (repair.target == datanode_id or outcome in (Claim.ADOPTED, Claim.MOVED)):
                self.repairs.drop(group_id, index)
            if repair is not None and repair.source:
                continue
            if outcome in (Claim.ADOPTED, Claim.MOVED):
                self.repairs.done += 1
                log.info("unit %d/%d stored on %s (repair done)", group_id, index, datanode_id)
            elif outcome not in (Claim.MAPPED, Claim.RECEIVED, Claim.WRITING, Claim.AHEAD):
                log.info("unit %d/%d stored on %s: %s", group_id, index, datanode_id, outcome.value)
        if Claim.RECEIVED in outcomes and self.receipt_waiters is not None:
            self.receipt_waiters.notify_all()
        return outcomes

    def report_bad_units(self, units: list[tuple[int, int, int, str, str]]) -> None:
        """(group id, unit index, generation, DataNode id, reason) of corrupt copies."""
        if len(units) > MAX_BAD_UNITS_PER_CALL:
            raise InvalidArgument(f"at most {MAX_BAD_UNITS_PER_CALL} bad units per report, got {len(units)}")
        self.scan_needed = True
        for group_id, index, generation, datanode_id, reason in units:
            outcome = self.claims.mark_bad(datanode_id, group_id, index, generation)
            if outcome == BadMark.MARKED:
                log.warning("unit %d/%d on %s is corrupt (%s): marked, kept until a repaired copy replaces it",
                            group_id, index, datanode_id, reason or "no reason given")
            elif outcome == BadMark.DELETED:
                log.warning("unit %d/%d on %s is corrupt (%s), and not the mapped copy: to be deleted",
                            group_id, index, datanode_id, reason or "no reason given")

    # ------------------------------------------------------------------ decommission

    def units_left(self, datanode_id: str) -> int:
        return self.blocks.mapped.get(datanode_id, 0)

    def admin_state(self, datanode_id: str) -> str:
        """"" (in service), decommissioning (units still mapped to it) or decommissioned."""
        if datanode_id not in self.leaving:
            return ""
        return DECOMMISSIONING if self.units_left(datanode_id) else DECOMMISSIONED

    def check_decommission(self, datanode_id: str, widest: tuple[str, int]) -> None:
        if not self.liveness.knows(datanode_id):
            raise NotFound(f"no DataNode {datanode_id!r} (hedgefs admin report lists them)")
        if datanode_id in self.leaving:
            return
        name, width = widest
        staying = [d for d in self.placeable_ids() if d != datanode_id]
        if len(staying) < width:
            raise FailedPrecondition(f"cannot decommission {datanode_id}: policy {name} needs {width} DataNodes, only "
                                     f"{len(staying)} would be left in service")

    def _leaving_groups(self, limit: int) -> set[int]:
        """Groups with a unit on a live leaving DataNode (the repair pass moves them), up to
        ``limit`` of the next LEAVING_SCAN groups of the map from where the last pass stopped
        (``_leaving_cursor``, 0 once it went round: a decommission takes passes, not one hold of
        the lock over every group)."""
        numbers = {self.blocks.numbers.get(d) for d in self.leaving if self.liveness.is_live(d)}
        numbers.discard(None)
        numbers.discard(0)
        if not numbers:
            self._leaving_cursor = 0
            return set()
        slots = self.blocks.groups.reserve(0)
        out: set[int] = set()
        start = self._leaving_cursor
        end = min(len(slots), start + LEAVING_SCAN)
        gid = start
        for gid in range(start, end):
            group = slots[gid]
            if group is not None and group.locs and not numbers.isdisjoint(self.blocks.unit_numbers(group)):
                out.add(gid)
                if len(out) >= limit:
                    break
        else:
            gid = end - 1
        self._leaving_cursor = gid + 1 if gid + 1 < len(slots) else 0
        return out

    # ------------------------------------------------------------------ repair planning

    def needs(self, candidates: Iterable[int]) -> list[GroupNeed]:
        """Groups of complete files (of ``candidates``) with units on no live DataNode (or on a
        leaving one). A unit on a live DataNode that has not registered yet is not missing (its
        report is due) but no repair source: ``GroupNeed.live`` lists only usable ones."""
        blocks = self.blocks
        out = []
        for gid in sorted(candidates):
            group = blocks.get(gid)
            if group is None or blocks.being_written(group):
                continue
            policy = load_policy(self.blocks.policy_of(group))
            good = blocks.good(group, self.stays)
            lacking = blocks.lacking(group, good)   # (a small file's zero units are never lacking)
            if lacking:
                live = {i: d for i, d in blocks.good(group, self.liveness.is_live).items() if self.usable(d)}
                zeros = blocks.zeros(group)
                out.append(GroupNeed(gid, policy.k - sum(1 for i in zeros if i < policy.k), live, lacking,
                                     frozenset(blocks.units(group).values()), policy.replicated,
                                     policy.decodable(live.keys() | zeros), shape_of(policy.name), good))
        return out

    def tick(self, default_block_size: int) -> list[InFlight]:
        """One pass: liveness changes, repairs timed out, health, safe mode, repair planning.
        Returns the repairs planned in this pass."""
        changed = self.liveness.transitions()
        for datanode_id, live in changed:
            self.scan_needed = True
            if live:
                log.info("datanode %s is live again", datanode_id)
            else:
                log.warning("datanode %s is dead: no heartbeat for %.1f s", datanode_id,
                            self.liveness.age_s(datanode_id))
        if changed and self.health.judged:
            self.health.rescan()
        for repair in self.repairs.expire(self.liveness.is_live):
            if repair.source:
                log.warning("move of unit %d/%d from %s to %s timed out or its target died: dropped (the "
                            "balancer plans again)", repair.group_id, repair.index, repair.source, repair.target)
                continue
            log.warning("repair of unit %d/%d on %s timed out or its target died: planning it again",
                        repair.group_id, repair.index, repair.target)
            self.scan_needed = True
        self.reports_due()   # the wait for block reports ends by itself at its bound (said in the log)
        if self.safe_mode.on:
            if not self.safe_mode.may_leave():
                return []
            self.scan_needed = True
        if not self.health.judged and not self.health.scanning:
            self.health.rescan()   # the first full pass: after safe mode, or at once without one
        self.health.refresh(self.liveness.is_live, HEALTH_STEP)
        if not self.health.judged:
            return []
        if not self.scan_needed and self.clock() - self._last_scan < FULL_SCAN_S:
            return []
        self.scan_needed, self._last_scan = False, self.clock()
        # A bounded pass (one hold of the writers' lock: a lost rack leaves a million groups
        # short): the most short of units first, and a stretch of the map for leaving DataNodes;
        # if either had more, the next pass goes on.
        short = self.health.repair_candidates(PLAN_GROUPS)
        leaving = self._leaving_groups(PLAN_GROUPS)
        if len(short) >= PLAN_GROUPS or self._leaving_cursor:
            self.scan_needed = True
        needs = self.needs(set(short) | leaving)
        deleting = self.blocks.datanodes_deleting(n.group_id for n in needs)
        bounds: dict[Shape, Bounds] = {}
        planned = self.repairs.plan(needs, self.candidates(d for d in self.placeable_ids()
                                                           if self.liveness.has_room(d, default_block_size)),
                                    deleting, lambda shape: bounds.get(shape) or bounds.setdefault(shape, self.bounds(shape)),
                                    self.liveness.location)
        for repair in planned:
            self.liveness.note_allocated(repair.target, default_block_size)
            log.info("repair of unit %d/%d planned on %s", repair.group_id, repair.index, repair.target)
        return planned

    def judge_step(self) -> bool:
        """A step of a full health pass under way (the monitor's, between two holds of the lock);
        True while there is more."""
        if self.safe_mode.on or not self.health.scanning:
            return False
        self.health.refresh(self.liveness.is_live, HEALTH_STEP)
        return self.health.scanning

    def expire_deletes(self, before_ms: int, limit: int) -> int:
        gone = self.blocks.deletes.expire(before_ms, limit)
        for key in gone:
            self.delete_sent.pop(key, None)
        return len(gone)

    def mapped_counts(self) -> Counter:
        return self.blocks.mapped

    def is_safe_mode_start(self) -> bool:
        return self.safe_mode.reason == Reason.START_UP
