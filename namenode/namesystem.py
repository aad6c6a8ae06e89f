"""The namesystem (HDFS's FSNamesystem): the NameNode's state and every decision it makes.

Every NameNode RPC is a plain method here, run under one lock over SQLite: the namespace, block
group placement, DataNode registration, heartbeats and the commands they carry, block reports,
repair planning, fsck. Changes are group-committed (db.py): a locked method answers only once
every change it could have seen is durable (``_locked``). Reads that need only the namespace and
block map (stat, list, policy, browse, fsck) take no lock: they read a snapshot of what is
committed (``_snapshot``), which a change reaches only once it is durable. ``servicer.py`` only unpacks requests, calls these methods and packs the
answers; tests drive this class directly, with an injectable clock. Refusals are
``errors.NameNodeError`` subclasses.

The methods are in three parts: the namespace and writes (here), the DataNode protocol and the
monitor's pass (datanode_protocol.py), the operators' reads (views.py).

Who keeps what:
  namespace.Namespace                directories, files, policies (SQLite)
  blockmap.BlockMap                  groups, unit locations, pending deletes, known DataNodes (SQLite)
  liveness.Liveness                  heartbeats and what DataNodes say about themselves (memory)
  repair_scheduler.RepairScheduler   repairs in flight (memory; after a restart they are planned again)
  health.Health                      counts for the status page and /metrics, kept up to date by
                                     changes (``status`` reads them: no scan per page or scrape)

A DataNode known from SQLite but not yet registered with this process (the NameNode restarted)
serves reads only: it is no placement target, no repair target or source, and no live holder when
a copy elsewhere is judged (``_usable``); it may be long dead, and its report is still to come.

Receipts, not claims: a unit counts only once its DataNode has reported it (``units_stored``, or a
block report). ``complete`` waits up to ``receipt_wait_s`` (outside the lock) for the receipts of
the units the writer says it stored, keeps the units reported by then, and refuses the Complete if
a group has fewer than k.

A unit reported corrupt stays mapped, marked, read only when a group has nothing better, until a
repaired copy replaces it; fsck counts it neither healthy nor missing.

Security: the namespace methods take the caller (``who``, from the servicer) and check file
permissions (namespace.py); a write in progress is its creator's. The cluster id is made when the
namespace is formatted (or given: a secure NameNode's credential names it) and a DataNode of
another cluster is refused. Every unit location handed out carries a block token (``tokens``, in
a secure cluster): a read token in GetFileInfo's locations and repair sources, a write token from
AddBlockGroup. A unit is (group, index, generation): a DataNode's unit of a generation this
namespace never issued is foreign, left alone (blockmap.py).

Commands reach a DataNode in its heartbeat reply. A pending delete is sent (a surplus or corrupt
copy's only once its group is whole again: ``BlockMap.deletes_due``), then re-sent every
``DELETE_RESEND_S`` until a block report no longer lists the unit, or ``DELETE_TTL_S`` passes (a
later block report re-queues what is still there). Repairs are built when delivered, so their
sources are the live units of that moment.
"""

from __future__ import annotations

import logging
import os
import random
import threading
import time
from typing import Callable, Iterable

from hedgefs.ec.policy import DEFAULT_POLICY, Policy
from hedgefs.namenode import placement, purge
from hedgefs.namenode.blockmap import BlockMap, GroupCommit, GroupRow
from hedgefs.namenode.datanode_protocol import DELETE_RESEND_S, DELETE_TTL_S, REPORT_GRACE_S, DataNodeProtocol  # noqa: F401 (tests)
from hedgefs.namenode.db import Backend, Database
from hedgefs.namenode.decommission import Decommissioning
from hedgefs.namenode.errors import FailedPrecondition, InvalidArgument
from hedgefs.namenode.health import Health
from hedgefs.namenode.liveness import Liveness
from hedgefs.namenode.locking import _locked, _snapshot
from hedgefs.namenode.model import (
    Created,
    FileInfo,
    GroupInfo,
    UnitLocation,
    groups_in,
)
from hedgefs.namenode.namespace import LIST_PAGE, LIST_PAGE_BYTES, LIST_PAGE_MAX, SUPER, Entry, Namespace, load_policy
from hedgefs.namenode.repair_scheduler import GroupNeed, RepairScheduler
from hedgefs.namenode.rowcache import RowCache
from hedgefs.namenode.safe_mode import ADMIN, START_UP, SafeMode
from hedgefs.namenode.targets import Targets
from hedgefs.namenode.views import OperatorViews
from hedgefs.security import tokens as token_ops
from hedgefs.security.identity import Identity
from hedgefs.security.tokens import BlockTokens

log = logging.getLogger("hedgefs.namenode")

DB_FILE = "namenode.db"
REPAIR_TIMEOUT_S = 60.0
RECEIPT_WAIT_S = 5.0         # how long Complete waits for receipts (the client's deadline is 10 s)
MIN_REPLICAS = 2             # a replicated block is durable once this many replicas are stored (HDFS's replication.min)



class Namesystem(DataNodeProtocol, OperatorViews, Decommissioning, SafeMode, Targets):
    def __init__(self, data_dir: str, *, default_policy: str = DEFAULT_POLICY,
                 default_block_size: int = 128 * 1024 * 1024, dead_interval_s: float = 30.0,
                 lease_timeout_s: float = 600.0, repair_timeout_s: float = REPAIR_TIMEOUT_S,
                 receipt_wait_s: float = RECEIPT_WAIT_S, min_replicas: int = MIN_REPLICAS,
                 clock: Callable[[], float] = time.monotonic, wall_clock: Callable[[], float] = time.time,
                 rng: random.Random | None = None, cluster_id: str | None = None,
                 tokens: BlockTokens | None = None, db_file: str = DB_FILE, backend: Backend | None = None,
                 read_only: bool = False, safe_mode_share: float | None = None,
                 safe_mode_deadline_s: float | None = None):
        """``backend``/``read_only``: the file is a view of a namespace on etcd (ha.py), the
        active's (every commit goes to etcd first) or a standby's (no change at all).
        ``safe_mode_share``: a new active's safe mode (no deletes, no repairs) lasts until this
        share of the units is on DataNodes that block-reported to it, and so does a NameNode
        restarted on SQLite with groups in its map (at most ``safe_mode_deadline_s``, and it also
        refuses namespace changes: safe_mode.py); None: no safe mode."""
        try:
            load_policy(default_policy)
        except InvalidArgument as err:
            raise ValueError(f"bad default policy: {err}") from None
        os.makedirs(data_dir, exist_ok=True)
        self._lock = threading.RLock()
        self._local = threading.local()
        self.clock = clock
        self.wall_ms = lambda: int(wall_clock() * 1000)
        self.lease_timeout_s = lease_timeout_s
        self.receipt_wait_s = receipt_wait_s
        if min_replicas < 1:
            raise ValueError(f"--min-replicas must be >= 1 (got {min_replicas})")
        self.min_replicas = min_replicas
        self._receipts = threading.Condition(self._lock)   # notified when units are reported stored
        self.rng = rng or random.Random()
        self.db = Database(os.path.join(data_dir, db_file), cluster_id, backend=backend, read_only=read_only)
        if not read_only:   # a standby's view changes through its follower's connection: no cache
            self.db.cache = RowCache(self.db, self.db.conn)
        self.cluster_id = self.db.cluster_id
        self.tokens = tokens            # None: an insecure cluster, no block tokens
        self.ns = Namespace(self.db, default_policy=default_policy, default_block_size=default_block_size,
                            wall_ms=self.wall_ms)
        self.blocks = BlockMap(self.db, self.wall_ms)
        self.liveness = Liveness(dead_interval_s, clock)
        self._registered: set[str] = set()  # DataNodes that registered with this process
        self.liveness.load(self.blocks.datanodes())
        self._load_leaving()   # DataNodes being decommissioned (decommission.py)
        self.repairs = RepairScheduler(repair_timeout_s, clock=clock, rng=self.rng)
        self._delete_sent: dict[tuple[str, int, int], float] = {}
        self._report_parts: dict[str, tuple[int, set]] = {}  # a report arriving in parts: last part, units so far
        # The repair scan reads every group: run it when something that can create or satisfy
        # a need changed (a unit dropped, a DataNode died or came, a repair ended), else rarely.
        self._scan_needed = True
        self._last_scan = float("-inf")
        self.started_ms = self.wall_ms()
        self._started = clock()
        self.health = Health(self.db)
        self.health.judge_all(self.liveness.live_ids())
        # A new active's (HA) or a restarted NameNode's DataNodes report before it deletes or
        # repairs (HDFS's safe mode and its stale block contents after a failover).
        self._reported: set[str] = set()   # DataNodes whose full block report this process has had
        self._init_safe_mode(safe_mode_share, safe_mode_deadline_s, ha=backend is not None or read_only)
        self._reregister: set[str] = set()  # adopted at a failover (adopt_datanodes), not yet registered here
        self.restart_leases()
        if read_only:
            self.db.guard(self._lock)
        else:
            self.db.start_group_commit(self._lock)

    def close(self) -> None:
        self.db.close()

    # ------------------------------------------------------------------ namespace

    @_locked
    def mkdir(self, path: str, parents: bool = False, who: Identity = SUPER) -> None:
        self._refuse_in_safe_mode(f"mkdir {path}")
        with self.db.tx():
            self.ns.mkdir(path, parents, who)

    @_snapshot
    def file_info(self, path: str, who: Identity = SUPER, span: tuple[int, int] | None = None) -> FileInfo:
        """A file's entry and its groups, every unit with a read token (the file must be readable).
        ``span`` (offset, length): only the groups holding those bytes (FileInfo.first_group says
        where they sit): an S3 GET of 64 KiB asks for one group, not every one with its units."""
        node, entry = self.ns.stat(path, who, read_file=True)
        if node.is_dir:
            return FileInfo(entry, [])
        rows, first = self.blocks.shared_groups(node.id), 0
        count = len(rows)
        if span is not None:
            rows, first = groups_in(rows, *span)
        k = load_policy(node.policy).k
        return FileInfo(entry, [self._group_info(g, k, op=token_ops.READ) for g in rows],
                        first if span is not None else None, count)

    @property
    def token_lifetime_ms(self) -> int:
        return int(self.tokens.lifetime_s * 1000) if self.tokens else 0

    @_snapshot
    def list_page(self, path: str, recursive: bool = False, start_after: str = "",
                  limit: int = 0, who: Identity = SUPER) -> tuple[list[Entry], bool]:
        """One page of a listing (``Namespace.list_page``): (entries, more)."""
        limit = min(limit or LIST_PAGE, LIST_PAGE_MAX)
        return self.ns.list_page(path, recursive, start_after, limit, LIST_PAGE_BYTES, who)

    def list(self, path: str, recursive: bool = False) -> list[Entry]:
        """Every page of a listing (for tests and tools; the RPC is paged)."""
        out, more = self.list_page(path, recursive)
        while more:
            page, more = self.list_page(path, recursive, out[-1].path)
            out.extend(page)
        return out

    @_locked
    def delete(self, path: str, recursive: bool = False, who: Identity = SUPER) -> None:
        self._refuse_in_safe_mode(f"delete {path}")
        with self.db.tx():
            files = self.ns.delete(path, recursive, self.blocks.forget_files, who,
                                   detach_over=purge.file_rows(self.db), detach_trees_over=purge.trees_over(self.db))
        log.debug("deleted %s (%d files) for %s", path, files, who.name)

    @_locked
    def purge_step(self, skip: frozenset[int] = frozenset()) -> tuple[int, int]:
        """One bounded change emptying a tree a recursive delete detached, not one in ``skip``
        (purge.py): (its top inode, rows removed); (0, 0): none left, or in safe mode (start-up or
        an admin's: no namespace change, and the block map not yet confirmed by reports)."""
        if self.in_safe_mode and self.safe_mode_reason in (START_UP, ADMIN):
            return 0, 0
        return purge.step(self, skip)

    @_locked
    def rename(self, src: str, dst: str, who: Identity = SUPER) -> None:
        self._refuse_in_safe_mode(f"rename {src}")
        with self.db.tx():
            self.ns.rename(src, dst, who)
        log.debug("renamed %s to %s for %s", src, dst, who.name)

    @_locked
    def set_policy(self, path: str, policy: str, who: Identity = SUPER) -> None:
        self._refuse_in_safe_mode(f"set the policy of {path}")
        if policy:
            self._check_placeable(load_policy(policy))
        with self.db.tx():
            name = self.ns.set_policy(path, policy, who)
        log.info("policy of %s set to %s", path, name or "(inherited)")

    @_snapshot
    def get_policy(self, path: str, who: Identity = SUPER) -> tuple[str, str]:
        """(policy name, directory it comes from; "" = the cluster default)."""
        return self.ns.get_policy(path, who)

    @_locked
    def set_permission(self, path: str, mode: int, who: Identity = SUPER) -> None:
        self._refuse_in_safe_mode(f"chmod {path}")
        with self.db.tx():
            self.ns.set_permission(path, mode, who)
        log.info("mode of %s set to %04o by %s", path, mode, who.name)

    @_locked
    def set_owner(self, path: str, owner: str = "", group: str = "", who: Identity = SUPER) -> None:
        self._refuse_in_safe_mode(f"chown {path}")
        with self.db.tx():
            self.ns.set_owner(path, owner, group, who)
        log.info("owner of %s set to %s:%s by %s", path, owner or "(same)", group or "(same)", who.name)

    @property
    def default_block_size(self) -> int:
        return self.ns.default_block_size

    # ------------------------------------------------------------------ write path

    @_locked
    def create(self, path: str, overwrite: bool = False, policy: str = "", block_size: int = 0,
               client_name: str = "", convert_from: tuple[int, int] | None = None,
               who: Identity = SUPER) -> Created:
        self._refuse_in_safe_mode(f"create {path}")
        with self.db.tx():
            node, pol = self.ns.create(path, overwrite, policy, block_size, convert_from, who)
            self._check_placeable(pol)
        log.debug("create %s: file %d, %s, block size %d, client %r (%s)%s", path, node.id, pol.name,
                 node.block_size, client_name, who.name, " (a conversion)" if convert_from else "")
        return Created(node.id, pol.name, node.block_size, int(self.lease_timeout_s * 1000),
                       pol.min_stored(self.min_replicas))

    @_locked
    def add_block_group(self, file_id: int, exclude: Iterable[str] = (), who: Identity = SUPER) -> GroupInfo:
        """A new group for a write in progress (the caller's), every unit with a write token."""
        self._refuse_in_safe_mode("add a block group")
        with self.db.tx():
            node = self.ns.writing(file_id, who)
            policy = load_policy(node.policy)
            targets = placement.choose(self._targets_with_room(policy, exclude, node.block_size), policy.units,
                                       self.liveness.load_key, self.rng)
            # Least loaded is not a reason to hold a data unit (reads go to data units first).
            self.rng.shuffle(targets)
            group = self.blocks.add_group(file_id, targets)
            self.ns.renew_lease(file_id)
        for d in targets:
            self.liveness.note_allocated(d, node.block_size)
        return GroupInfo(group.id, 0, [self._location(j, d, group.id, group.generation, token_ops.WRITE)
                                       for j, d in enumerate(targets)], group.generation)

    @_locked
    def renew_lease(self, file_id: int, who: Identity = SUPER) -> None:
        with self.db.tx():
            self.ns.writing(file_id, who)
            self.ns.renew_lease(file_id)

    @_locked
    def complete(self, file_id: int, length: int, groups: list[GroupCommit],
                 convert_from: tuple[int, int] | None = None, who: Identity = SUPER) -> None:
        node = self.ns.file(file_id)
        if node is not None and node.state == "writing":
            self.ns.writing(file_id, who)       # someone else's write: refused before anything waits
        if node is not None and node.state == "complete":
            if node.length == length:
                return  # a retry of a Complete that succeeded
            raise FailedPrecondition(f"file {file_id} is already complete with length {node.length}")
        self._await_receipts(groups)
        node = self.ns.file(file_id)
        if node is not None and node.state == "complete" and node.length == length:
            return  # a retry that arrived while this call waited, and won
        node = self.ns.writing(file_id, who)
        policy = load_policy(node.policy)
        min_units = policy.min_stored(self.min_replicas)
        done = self._commit_in_parts(file_id, length, groups, policy, node.block_size, min_units)
        with self.db.tx():
            node = self.ns.writing(file_id, who)
            self.blocks.commit(file_id, length, groups, policy, node.block_size, min_units, done)
            rows = purge.change_rows(self.db)   # half for the groups (the rest went in parts), half for a replaced file
            path = self.ns.complete(file_id, length, self.blocks.forget_files, convert_from,
                                    purge.FILE_ROWS if rows is None else rows // 2)
        self._scan_needed = True
        log.debug("complete %s: file %d, %d bytes in %d groups", path, file_id, length, len(groups))

    def _commit_in_parts(self, file_id: int, length: int, groups: list[GroupCommit], policy: Policy,
                         block_size: int, min_units: int) -> int:
        """On etcd, a file of more groups than one transaction holds: all but the last groups'
        lengths and order recorded first, in changes of their own (invisible: the file is still
        being written; a retried Complete records them again). Returns how many were."""
        rows = purge.change_rows(self.db)
        per_group = 2 + 2 * policy.units   # the group's row and its units' (updates count twice)
        if rows is None or (len(groups) + 1) * per_group <= rows // 2:
            return 0
        self.blocks.check_commit(file_id, length, groups, policy, block_size, min_units)
        step, done = max(1, rows // 2 // per_group), 0
        while len(groups) - done > step:
            with self.db.tx():
                self.ns.writing(file_id)
                self.blocks.commit_groups(file_id, groups[done:done + step], done)
            done += step
        return done

    def _await_receipts(self, groups: list[GroupCommit]) -> None:
        """Wait (the lock released meanwhile) until every unit the writer claims is reported, or
        ``receipt_wait_s`` passes. Receipts usually arrive before Complete: a DataNode sends one as
        soon as it has stored a unit, and the writer completes only after every unit is stored."""
        deadline = time.monotonic() + self.receipt_wait_s
        while True:
            waiting = 0
            for c in groups:
                found = self.blocks.group(c.group_id)
                if found is not None:   # (a dead DataNode's receipt is not worth waiting for)
                    group = found[0]
                    waiting += sum(1 for i in c.stored_units
                                   if i in group.unreported and self.liveness.is_live(group.units[i]))
            left = deadline - time.monotonic()
            if not waiting or left <= 0:
                if waiting:
                    log.warning("complete: %d units claimed stored but not reported after %.1f s", waiting,
                                self.receipt_wait_s)
                return
            self._receipts.wait(left)

    @_locked
    def concat(self, target: str, sources: list[str], overwrite: bool = False, who: Identity = SUPER) -> None:
        """One file at ``target`` from the parts ``sources``, in one transaction: a reader sees
        no target (or the old one) until the commit, then all of it."""
        self._refuse_in_safe_mode(f"concat into {target}")
        with self.db.tx():   # a replaced target is detached on etcd (the moved groups share this change)
            length = self.ns.concat(target, sources, overwrite, self.blocks.forget_files, self.blocks.append_groups,
                                    who, 0 if self.db.backend is not None else purge.FILE_ROWS)
        self._scan_needed = True
        log.debug("concat %s: %d parts, %d bytes", target, len(sources), length)

    @_locked
    def abandon(self, file_id: int, who: Identity = SUPER) -> None:
        with self.db.tx():
            dropped = self.ns.abandon(file_id, self.blocks.forget_files, who, purge.abandon_over(self.db))
        if dropped:
            log.debug("abandoned file %d", file_id)

    # ------------------------------------------------------------------ health

    def _location(self, index: int, datanode_id: str, group_id: int = 0, generation: int = 0,
                  op: int = token_ops.READ) -> UnitLocation:
        token = self.tokens.sign(op, group_id, index, generation) if self.tokens else b""
        return UnitLocation(index, datanode_id, self.liveness.address(datanode_id),
                            self.liveness.data_address(datanode_id), token)


    def _group_info(self, group: GroupRow, k: int, keep_dead: bool = False, op: int | None = None) -> GroupInfo:
        """Good units. Units on dead DataNodes are left out (a reader would only wait on them), and
        corrupt ones too unless fewer than k are good (a corrupt unit's other chunks still read).
        ``keep_dead`` (the operator's file page): every reported unit. ``op``: sign tokens for it."""
        if keep_dead:
            units = {i: d for i, d in group.units.items() if i not in group.unreported}
        else:
            units = group.good(self.liveness.is_live)
            if len(units) < k:
                units = self._readable_units(group)
        if op is None:
            locations = [self._location(i, d) for i, d in sorted(units.items())]
        else:
            locations = [self._location(i, d, group.id, group.generation, op) for i, d in sorted(units.items())]
        return GroupInfo(group.id, group.length, locations, group.generation)

    def _readable_units(self, group: GroupRow) -> dict[int, str]:
        """Good units and live corrupt ones."""
        return {i: d for i, d in group.units.items() if i not in group.unreported and self.liveness.is_live(d)}

    def _needs(self, candidates: Iterable[int] | None = None) -> list[GroupNeed]:
        """Groups of complete files with units on no live DataNode (of ``candidates`` only: the
        monitor passes the groups ``health`` judges unhealthy, so a pass costs what is broken, not
        the namespace). A unit on a live DataNode that has not registered yet is not missing (its
        report is due) but no repair source: ``GroupNeed.live`` lists only usable ones."""
        needs = []
        for group, policy_name in self.blocks.complete_groups(candidates):
            policy = load_policy(policy_name)
            good = group.good(self._stays)   # a unit on a leaving DataNode is to be copied elsewhere
            if len(good) < policy.units:
                live = {i: d for i, d in group.good(self.liveness.is_live).items() if self._usable(d)}
                needs.append(GroupNeed(group.id, policy.k, live, [i for i in range(policy.units) if i not in good],
                                       frozenset(group.units.values()), policy.replicated, policy.decodable(live)))
        return needs
