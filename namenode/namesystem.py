"""The namesystem (HDFS's FSNamesystem): the NameNode's state and every decision it makes.

Every NameNode RPC is a plain method here, run under one lock over SQLite: the namespace, block
group placement, DataNode registration, heartbeats and the commands they carry, block reports,
repair planning, fsck. Changes are group-committed (db.py): a locked method answers only once
every change it could have seen is durable (``_locked``). Reads that need only the namespace and
block map (stat, list, policy, browse, fsck) take no lock: they read a snapshot of what is
committed (``_snapshot``), which a change reaches only once it is durable. ``servicer.py`` only unpacks requests, calls these methods and packs the
answers; tests drive this class directly, with an injectable clock. Refusals are
``errors.NameNodeError`` subclasses.

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

import functools
import logging
import os
import random
import threading
import time
from typing import Callable, Iterable

from hedgefs.ec.policy import DEFAULT_POLICY, Policy
from hedgefs.namenode import paths, placement
from hedgefs.namenode.blockmap import BlockMap, GroupCommit, GroupRow
from hedgefs.namenode.db import Database
from hedgefs.namenode.errors import AlreadyExists, FailedPrecondition, InvalidArgument, PermissionDenied
from hedgefs.namenode.health import Health
from hedgefs.namenode.liveness import HEAT_MINUTES, LOW_SPACE_PCT, Liveness
from hedgefs.namenode.model import (
    ClusterReport,
    ClusterStatus,
    Created,
    DataNodeReport,
    DataNodeStats,
    DataNodeStatus,
    DeleteUnit,
    FileInfo,
    FilePage,
    FsckProblem,
    FsckReport,
    GroupInfo,
    HeartbeatReply,
    Listing,
    RepairUnit,
    UnitLocation,
    UnitsPage,
)
from hedgefs.namenode.namespace import SUPER, Entry, Namespace, load_policy
from hedgefs.namenode.repair_scheduler import GroupNeed, InFlight, RepairScheduler
from hedgefs.security import tokens as token_ops
from hedgefs.security.identity import Identity
from hedgefs.security.tokens import BlockTokens

log = logging.getLogger("hedgefs.namenode")

DB_FILE = "namenode.db"
REPORT_GRACE_S = 10.0        # a block report may predate a unit placed this recently: keep it
DELETE_RESEND_S = 30.0
DELETE_TTL_S = 600.0
REPAIR_TIMEOUT_S = 60.0
MAX_DELETES_PER_HEARTBEAT = 1000
MAX_FSCK_PROBLEMS = 1000
RECEIPT_WAIT_S = 5.0         # how long Complete waits for receipts (the client's deadline is 10 s)
MAX_BAD_UNITS_PER_CALL = 1000
LIST_PAGE = 1000             # entries in a List page unless the caller asks for fewer
LIST_PAGE_MAX = 10000
LIST_PAGE_BYTES = 1 << 20    # a page stops past about this many bytes: far below the 4 MiB message limit
MAX_UNITS_STORED_PER_CALL = 10000
MAX_REPORT_UNITS = 50_000_000  # units in one DataNode's report, all parts together
FULL_SCAN_S = 10.0           # the repair scan runs at least this often even when nothing changed
MIN_REPLICAS = 2             # a replicated block is durable once this many replicas are stored (HDFS's replication.min)


def _locked(method):
    """Under the lock; the answer (or the refusal) waits until every change it could have seen,
    its own included, is durable (group commit: ``Database.wait_durable``)."""
    @functools.wraps(method)
    def wrapper(self, *args, **kwargs):
        if getattr(self._local, "locked", False):   # called from a locked method: its caller waits
            with self._lock:
                return method(self, *args, **kwargs)
        self._local.locked = True
        try:
            with self._lock:
                try:
                    result = method(self, *args, **kwargs)
                finally:
                    seen = self.db.applied
        finally:
            self._local.locked = False
        self.db.wait_durable(seen)
        return result
    return wrapper


def _snapshot(method):
    """Off the lock: a read of what is committed (``Database.reading``), which is durable."""
    @functools.wraps(method)
    def wrapper(self, *args, **kwargs):
        with self.db.reading():
            return method(self, *args, **kwargs)
    return wrapper


class Namesystem:
    def __init__(self, data_dir: str, *, default_policy: str = DEFAULT_POLICY,
                 default_block_size: int = 128 * 1024 * 1024, dead_interval_s: float = 30.0,
                 lease_timeout_s: float = 600.0, repair_timeout_s: float = REPAIR_TIMEOUT_S,
                 receipt_wait_s: float = RECEIPT_WAIT_S, min_replicas: int = MIN_REPLICAS,
                 clock: Callable[[], float] = time.monotonic, wall_clock: Callable[[], float] = time.time,
                 rng: random.Random | None = None, cluster_id: str | None = None,
                 tokens: BlockTokens | None = None):
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
        self.db = Database(os.path.join(data_dir, DB_FILE), cluster_id)
        self.cluster_id = self.db.cluster_id
        self.tokens = tokens            # None: an insecure cluster, no block tokens
        self.ns = Namespace(self.db, default_policy=default_policy, default_block_size=default_block_size,
                            wall_ms=self.wall_ms)
        self.blocks = BlockMap(self.db, self.wall_ms)
        self.liveness = Liveness(dead_interval_s, clock)
        self._registered: set[str] = set()  # DataNodes that registered with this process
        self.liveness.load(self.blocks.datanodes())
        self.repairs = RepairScheduler(repair_timeout_s, clock=clock, rng=self.rng)
        self._delete_sent: dict[tuple[str, int, int], float] = {}
        self._report_parts: dict[str, tuple[int, set]] = {}  # a report arriving in parts: last part, units so far
        # The repair scan reads every group: run it when something that can create or satisfy
        # a need changed (a unit dropped, a DataNode died or came, a repair ended), else rarely.
        self._scan_needed = True
        self._last_scan = float("-inf")
        self.started_ms = self.wall_ms()
        self.health = Health(self.db)
        self.health.judge_all(self.liveness.live_ids())
        self.db.start_group_commit(self._lock)

    def close(self) -> None:
        self.db.close()

    # ------------------------------------------------------------------ namespace

    @_locked
    def mkdir(self, path: str, parents: bool = False, who: Identity = SUPER) -> None:
        with self.db.tx():
            self.ns.mkdir(path, parents, who)

    @_snapshot
    def file_info(self, path: str, who: Identity = SUPER) -> FileInfo:
        """A file's entry and its groups, every unit with a read token (the file must be readable)."""
        node, entry = self.ns.stat(path, who, read_file=True)
        groups = [] if node.is_dir else [self._group_info(g, load_policy(node.policy).k, op=token_ops.READ)
                                         for g in self.blocks.groups(node.id)]
        return FileInfo(entry, groups)

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
        with self.db.tx():
            files = self.ns.delete(path, recursive, self.blocks.forget_files, who)
        log.debug("deleted %s (%d files) for %s", path, files, who.name)

    @_locked
    def rename(self, src: str, dst: str, who: Identity = SUPER) -> None:
        with self.db.tx():
            self.ns.rename(src, dst, who)
        log.debug("renamed %s to %s for %s", src, dst, who.name)

    @_locked
    def set_policy(self, path: str, policy: str, who: Identity = SUPER) -> None:
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
        with self.db.tx():
            self.ns.set_permission(path, mode, who)
        log.info("mode of %s set to %04o by %s", path, mode, who.name)

    @_locked
    def set_owner(self, path: str, owner: str = "", group: str = "", who: Identity = SUPER) -> None:
        with self.db.tx():
            self.ns.set_owner(path, owner, group, who)
        log.info("owner of %s set to %s:%s by %s", path, owner or "(same)", group or "(same)", who.name)

    @property
    def default_block_size(self) -> int:
        return self.ns.default_block_size

    # ------------------------------------------------------------------ write path

    def _usable(self, datanode_id: str) -> bool:
        """Live and registered with this process: may take units, serve repairs, hold a unit."""
        return datanode_id in self._registered and self.liveness.is_live(datanode_id)

    def _usable_ids(self) -> list[str]:
        return [d for d in self.liveness.live_ids() if d in self._registered]

    def _live_targets(self, policy: Policy, exclude: Iterable[str] = ()) -> list[str]:
        """Usable DataNodes a group may use; FAILED_PRECONDITION if fewer than k+m."""
        excluded = set(exclude)
        live = self._usable_ids()
        usable = [d for d in live if d not in excluded]
        if len(usable) < policy.units:
            message = f"policy {policy.name} needs {policy.units} live DataNodes, only {len(live)} are live"
            if len(live) >= policy.units:
                message = (f"policy {policy.name} needs {policy.units} live DataNodes, only {len(usable)} "
                           f"are live and not excluded ({', '.join(sorted(excluded & set(live)))})")
            raise FailedPrecondition(message)
        return usable

    def _targets_with_room(self, policy: Policy, exclude: Iterable[str], unit_bytes: int) -> list[str]:
        """_live_targets with room for a unit of ``unit_bytes`` (HDFS's remaining-space check):
        a full disk is never chosen; FAILED_PRECONDITION if fewer than k+m have room."""
        usable = self._live_targets(policy, exclude)
        roomy = [d for d in usable if self.liveness.has_room(d, unit_bytes)]
        if len(roomy) < policy.units:
            full = sorted(set(usable) - set(roomy))
            raise FailedPrecondition(f"policy {policy.name} needs {policy.units} DataNodes with room for a unit "
                                     f"of {unit_bytes} bytes, only {len(roomy)} have it (full: {', '.join(full)})")
        return roomy

    def _check_placeable(self, policy: Policy) -> None:
        """A policy needing more DataNodes than are live is bad input: nothing could be placed."""
        live = len(self._usable_ids())
        if live < policy.units:
            raise InvalidArgument(f"policy {policy.name} needs {policy.units} live DataNodes, only {live} are live")

    @_locked
    def create(self, path: str, overwrite: bool = False, policy: str = "", block_size: int = 0,
               client_name: str = "", convert_from: tuple[int, int] | None = None,
               who: Identity = SUPER) -> Created:
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
        with self.db.tx():
            node = self.ns.writing(file_id, who)
            policy = load_policy(node.policy)
            self.blocks.commit(file_id, length, groups, policy, node.block_size, policy.min_stored(self.min_replicas))
            path = self.ns.complete(file_id, length, self.blocks.forget_files, convert_from)
        self._scan_needed = True
        log.debug("complete %s: file %d, %d bytes in %d groups", path, file_id, length, len(groups))

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
        with self.db.tx():
            length = self.ns.concat(target, sources, overwrite, self.blocks.forget_files, self.blocks.append_groups,
                                    who)
        self._scan_needed = True
        log.debug("concat %s: %d parts, %d bytes", target, len(sources), length)

    @_locked
    def abandon(self, file_id: int, who: Identity = SUPER) -> None:
        with self.db.tx():
            dropped = self.ns.abandon(file_id, self.blocks.forget_files, who)
        if dropped:
            log.debug("abandoned file %d", file_id)

    # ------------------------------------------------------------------ DataNode protocol

    def _require_known(self, datanode_id: str) -> None:
        if not self.liveness.knows(datanode_id):
            raise FailedPrecondition(f"unknown DataNode {datanode_id!r}: register first")

    def _location(self, index: int, datanode_id: str, group_id: int = 0, generation: int = 0,
                  op: int = token_ops.READ) -> UnitLocation:
        token = self.tokens.sign(op, group_id, index, generation) if self.tokens else b""
        return UnitLocation(index, datanode_id, self.liveness.address(datanode_id),
                            self.liveness.data_address(datanode_id), token)

    @_locked
    def register(self, datanode_id: str, address: str, data_address: str = "", cluster_id: str = "",
                 storage_id: str = "") -> str:
        """Returns this namespace's cluster id (the DataNode records it); a DataNode that joined
        another cluster is refused, and so is a second DataNode under the id of a live one with
        another data dir (``storage_id``): its empty block report would hide the real one's units."""
        if not datanode_id or not address:
            raise InvalidArgument("RegisterDataNode needs a DataNode id and an address")
        if cluster_id and cluster_id != self.cluster_id:
            log.warning("refused DataNode %s of cluster %s (this is cluster %s)", datanode_id, cluster_id, self.cluster_id)
            raise PermissionDenied(f"DataNode {datanode_id} belongs to cluster {cluster_id}; this NameNode's "
                                   f"cluster is {self.cluster_id}")
        self._check_one_storage(datanode_id, address, storage_id)
        with self.db.tx():
            self.blocks.save_datanode(datanode_id, address, data_address)
        self.liveness.seen(datanode_id, address, data_address).storage_id = storage_id
        self._registered.add(datanode_id)
        # A (re)starting DataNode forgot whatever it was told: plan its repairs again, resend deletes.
        self.repairs.forget_target(datanode_id)
        self._forget_sent(datanode_id)
        self._report_parts.pop(datanode_id, None)   # a report it was sending in parts is void
        self._scan_needed = True
        log.info("datanode %s registered at %s", datanode_id, address)
        return self.cluster_id

    def _check_one_storage(self, datanode_id: str, address: str, storage_id: str) -> None:
        """One DataNode per id: refuse a registration whose storage differs from the live one's."""
        known = self.liveness.get(datanode_id)
        if known is None or not storage_id or not known.storage_id or known.storage_id == storage_id:
            return
        if datanode_id in self._registered and self.liveness.is_live(datanode_id):
            log.warning("refused a second DataNode %s at %s (storage %s): %s is live at %s with storage %s",
                        datanode_id, address, storage_id, datanode_id, known.address, known.storage_id)
            raise AlreadyExists(f"DataNode id {datanode_id} is taken: a live DataNode at {known.address} has it, "
                                f"with another data dir (storage {known.storage_id}, this one's is {storage_id}); "
                                f"give each DataNode its own --id")
        log.warning("datanode %s registers with another data dir (storage %s, was %s): the old one's units are "
                    "gone with it", datanode_id, storage_id, known.storage_id)

    @_locked
    def heartbeat(self, datanode_id: str, address: str = "", used_bytes: int = 0, units: int = 0,
                  active_repairs: int = 0, stats: DataNodeStats | None = None,
                  data_address: str = "") -> HeartbeatReply:
        if not self.liveness.knows(datanode_id):
            return HeartbeatReply([], reregister=True)
        if datanode_id not in self._registered:
            # Known from SQLite but not yet heard by this NameNode process (it restarted): it
            # stays live for reads, and is asked to register and report its units, so that the
            # block map is rebuilt from what the DataNodes really hold.
            self.liveness.heartbeat(datanode_id, address, used_bytes, units, active_repairs, stats, data_address)
            return HeartbeatReply([], reregister=True)
        if (address and address != self.liveness.address(datanode_id)) or \
                (data_address and data_address != self.liveness.data_address(datanode_id)):
            with self.db.tx():
                self.blocks.save_datanode(datanode_id, address or self.liveness.address(datanode_id),
                                          data_address or self.liveness.data_address(datanode_id))
            log.info("datanode %s now at %s (data %s)", datanode_id, address, data_address)
        self.liveness.heartbeat(datanode_id, address, used_bytes, units, active_repairs, stats, data_address)
        commands: list[DeleteUnit | RepairUnit] = self._deletes_to_send(datanode_id)
        for repair in self.repairs.take(datanode_id):
            command = self._repair_command(repair)
            if command is None:
                self.repairs.drop(repair.group_id, repair.index)
                self._scan_needed = True
            else:
                commands.append(command)
                log.info("repair of unit %d/%d sent to %s", repair.group_id, repair.index, datanode_id)
        return HeartbeatReply(commands)

    def _deletes_to_send(self, datanode_id: str) -> list[DeleteUnit]:
        now, out = self.clock(), []
        for group_id, index, generation in self.blocks.deletes_due(datanode_id, self._usable):
            key = (datanode_id, group_id, index)
            sent = self._delete_sent.get(key)
            if sent is None or now - sent >= DELETE_RESEND_S:
                self._delete_sent[key] = now
                out.append(DeleteUnit(group_id, index, generation))
                if len(out) >= MAX_DELETES_PER_HEARTBEAT:
                    break
        return out

    def _forget_sent(self, datanode_id: str) -> None:
        for key in [k for k in self._delete_sent if k[0] == datanode_id]:
            del self._delete_sent[key]

    def _repair_command(self, repair: InFlight) -> RepairUnit | None:
        """The command for a planned repair, or None if it is no longer needed or possible."""
        found = self.blocks.group(repair.group_id)
        if found is None or found[1] != "complete":
            return None
        group, _, policy_name = found
        policy = load_policy(policy_name)
        if repair.index in group.good(self.liveness.is_live):
            return None
        if repair.target in group.units.values():  # it got another unit of the group meanwhile
            return None
        sources = [self._location(i, d, group.id, group.generation)
                   for i, d in sorted(group.good(self._usable).items())]
        if not policy.decodable(s.index for s in sources):
            return None
        return RepairUnit(group.id, repair.index, policy.name, group.length, sources, group.generation)

    @_locked
    def block_report(self, datanode_id: str, units: Iterable[tuple[int, int, int]], part: int = 0,
                     more: bool = False) -> dict[str, int]:
        """A DataNode's full list of (group id, index, generation), possibly in parts (0, 1, ...,
        ``more`` on all but the last: applied when the last arrives); counts by outcome."""
        self._require_known(datanode_id)
        self.liveness.seen(datanode_id)
        held = self._report_parts.pop(datanode_id, None)
        if part != (0 if held is None else held[0] + 1):
            raise InvalidArgument(f"block report part {part} from {datanode_id} out of order (expected "
                                  f"{0 if held is None else held[0] + 1}): send the report again from part 0")
        reported = set(units) if held is None else held[1].union(units)
        if len(reported) > MAX_REPORT_UNITS:
            raise InvalidArgument(f"block report from {datanode_id} of more than {MAX_REPORT_UNITS:,} units")
        if more:
            self._report_parts[datanode_id] = (part, reported)
            return {"parts_held": part + 1}
        with self.db.tx():
            counts = self.blocks.reconcile(datanode_id, reported, self._usable, int(REPORT_GRACE_S * 1000))
        # Deletes still listed are resent with the next heartbeat; confirmed ones are gone.
        self._forget_sent(datanode_id)
        self._scan_needed = True
        if counts.get("received"):
            self._receipts.notify_all()
        self.liveness.seen(datanode_id).foreign_units = counts.get("foreign", 0)
        if counts.get("foreign"):
            log.warning("%s holds %d units of generations this namespace never issued (another namespace, "
                        "or a wiped NameNode database?): left alone, never served or deleted from here",
                        datanode_id, counts["foreign"])
        notable = {k: v for k, v in counts.items() if k != "mapped"}
        if notable:
            log.info("block report from %s: %d units, %s", datanode_id, len(reported),
                     ", ".join(f"{k} {v}" for k, v in sorted(notable.items())))
        return counts

    @_locked
    def units_stored(self, datanode_id: str, units: Iterable[tuple[int, int, int]]) -> list[str]:
        """A DataNode's receipts for units it has just stored (a writer's, or a repair's); returns
        each one's outcome (``BlockMap.claim``)."""
        self._require_known(datanode_id)
        self.liveness.seen(datanode_id)
        units = list(units)
        if len(units) > MAX_UNITS_STORED_PER_CALL:
            raise InvalidArgument(f"at most {MAX_UNITS_STORED_PER_CALL} units per UnitStored, got {len(units)}")
        with self.db.tx():
            outcomes = [self.blocks.claim(datanode_id, g, i, gen, self._usable) for g, i, gen in units]
        self._scan_needed = True
        for (group_id, index, _gen), outcome in zip(units, outcomes):
            repair = self.repairs.in_flight.get((group_id, index))
            if repair is not None and (repair.target == datanode_id or outcome in ("adopted", "moved")):
                self.repairs.drop(group_id, index)
            if outcome in ("adopted", "moved"):
                self.repairs.done += 1
                log.info("unit %d/%d stored on %s (repair done)", group_id, index, datanode_id)
            elif outcome not in ("mapped", "received", "writing"):
                log.info("unit %d/%d stored on %s: %s", group_id, index, datanode_id, outcome)
        if "received" in outcomes:
            self._receipts.notify_all()
        return outcomes

    def unit_stored(self, datanode_id: str, group_id: int, index: int, generation: int) -> str:
        return self.units_stored(datanode_id, [(group_id, index, generation)])[0]

    @_locked
    def report_bad_units(self, units: Iterable[tuple[int, int, int, str, str]]) -> None:
        """(group id, unit index, generation, DataNode id, reason) of corrupt copies."""
        units = list(units)
        if len(units) > MAX_BAD_UNITS_PER_CALL:
            raise InvalidArgument(f"at most {MAX_BAD_UNITS_PER_CALL} bad units per report, got {len(units)}")
        self._scan_needed = True
        with self.db.tx():
            for group_id, index, generation, datanode_id, reason in units:
                outcome = self.blocks.mark_bad(datanode_id, group_id, index, generation)
                if outcome == "marked":
                    log.warning("unit %d/%d on %s is corrupt (%s): marked, kept until a repaired copy replaces it",
                                group_id, index, datanode_id, reason or "no reason given")
                elif outcome == "deleted":
                    log.warning("unit %d/%d on %s is corrupt (%s), and not the mapped copy: to be deleted",
                                group_id, index, datanode_id, reason or "no reason given")

    # ------------------------------------------------------------------ health

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
            good = group.good(self.liveness.is_live)
            if len(good) < policy.units:
                live = {i: d for i, d in good.items() if self._usable(d)}
                needs.append(GroupNeed(group.id, policy.k, live, [i for i in range(policy.units) if i not in good],
                                       frozenset(group.units.values()), policy.replicated, policy.decodable(live)))
        return needs

    @_snapshot
    def fsck(self, path: str = "/") -> FsckReport:
        files = self.ns.files_under(path)
        groups_by_file = self.blocks.groups_of_files(f[0] for f in files)
        healthy = degraded = missing = corrupt_files = groups = 0
        problems: list[FsckProblem] = []
        for file_id, file_path, policy_name in files:
            policy = load_policy(policy_name)
            file_missing = False
            for group in groups_by_file[file_id]:
                groups += 1
                good = len(group.good(self.liveness.is_live))
                if good >= policy.units:
                    healthy += 1
                    continue
                readable = self._readable_units(group)
                corrupt = len(readable) - good
                status = "DEGRADED" if policy.decodable(readable) else "MISSING"
                if status == "DEGRADED":
                    degraded += 1
                else:
                    missing += 1
                    file_missing = True
                if len(problems) < MAX_FSCK_PROBLEMS:
                    problems.append(FsckProblem(file_path, group.id, good, policy.k, status, corrupt,
                                                policy.units, policy.name))
            corrupt_files += file_missing
        status = "CORRUPT" if missing else "DEGRADED" if degraded else "HEALTHY"
        return FsckReport(len(files), groups, healthy, degraded, missing, status, problems, corrupt_files)

    @_locked
    def report(self) -> ClusterReport:
        deletes = self.blocks.pending_delete_counts()
        nodes = [DataNodeReport(n.id, n.address, self._state(n.id),
                                int(self.liveness.age_s(n.id) * 1000), n.used_bytes, n.units,
                                self.repairs.count_for(n.id), deletes.get(n.id, 0), n.stats.scrub,
                                data_address=n.data_address, foreign_units=n.foreign_units,
                                capacity_bytes=n.stats.capacity_bytes, remaining_bytes=n.stats.remaining_bytes,
                                shares_filesystem_with=tuple(self.liveness.sharing(n.id)),
                                low_space=self.liveness.low_space(n.id))
                 for n in self.liveness.all()]
        needs = self._needs()
        return ClusterReport(nodes, len(needs), self.repairs.done, self.blocks.corrupt_count(),
                             sum(n.replicated for n in needs), LOW_SPACE_PCT)

    def _state(self, datanode_id: str) -> str:
        """live, stale (heartbeat later than a third of the dead interval: the page's word) or dead."""
        if not self.liveness.is_live(datanode_id):
            return "dead"
        return "stale" if self.liveness.age_s(datanode_id) > self.liveness.dead_interval_s / 3 else "live"

    # ------------------------------------------------------------------ the monitor's pass

    @_locked
    def tick(self) -> list[InFlight]:
        """One pass of the monitor: liveness changes, expired leases and deletes, repair planning.

        Returns the repairs planned in this pass.
        """
        changed = self.liveness.transitions()
        for datanode_id, live in changed:
            self._scan_needed = True
            if live:
                log.info("datanode %s is live again", datanode_id)
            else:
                log.warning("datanode %s is dead: no heartbeat for %.1f s", datanode_id,
                            self.liveness.age_s(datanode_id))
        for repair in self.repairs.expire(self.liveness.is_live):
            log.warning("repair of unit %d/%d on %s timed out or its target died: planning it again",
                        repair.group_id, repair.index, repair.target)
            self._scan_needed = True
        now_ms = self.wall_ms()
        with self.db.tx():
            for file_id in self.ns.expired_leases(now_ms - int(self.lease_timeout_s * 1000)):
                path = self.ns.path_of(file_id)
                self.ns.abandon(file_id, self.blocks.forget_files)
                log.warning("lease on %s (file %d) expired: the writer is gone, abandoned it", path, file_id)
            if self.blocks.expire_deletes(now_ms - int(DELETE_TTL_S * 1000)):
                live_keys = {(d, g, i) for d in {k[0] for k in self._delete_sent}
                             for g, i in self.blocks.pending_deletes(d)}
                self._delete_sent = {k: v for k, v in self._delete_sent.items() if k in live_keys}
        self.health.refresh(self.liveness.is_live, [d for d, _ in changed])
        if not self._scan_needed and self.clock() - self._last_scan < FULL_SCAN_S:
            return []
        self._scan_needed, self._last_scan = False, self.clock()
        unit_bytes = self.ns.default_block_size
        planned = self.repairs.plan(self._needs(self.health.unhealthy),
                                    [d for d in self._usable_ids() if self.liveness.has_room(d, unit_bytes)],
                                    self.liveness.load_key, self.blocks.datanodes_deleting())
        for repair in planned:
            self.liveness.note_allocated(repair.target, unit_bytes)
            log.info("repair of unit %d/%d planned on %s", repair.group_id, repair.index, repair.target)
        return planned

    # ------------------------------------------------------------------ the operator's view
    # Each of these is one short read under the lock; the web pages render outside it.

    @_locked
    def status(self) -> ClusterStatus:
        """The overview and the DataNode table: counts kept by ``health``, liveness, repairs."""
        now_ms = self.wall_ms()
        minute = now_ms // 60_000
        first = minute - HEAT_MINUTES + 1
        tallies = self.health.tallies()
        running: dict[str, int] = {}
        for repair in self.repairs.in_flight.values():
            running[repair.target] = running.get(repair.target, 0) + 1
        nodes = []
        for n in sorted(self.liveness.all(), key=lambda n: _natural(n.id)):
            age = self.liveness.age_s(n.id)
            state = self._state(n.id)
            recent = n.stats.recent_reads
            host = n.address.rsplit(":", 1)[0]
            nodes.append(DataNodeStatus(
                n.id, n.address, f"{host}:{n.stats.http_port}" if n.stats.http_port else "", state, round(age, 1),
                n.stats.capacity_bytes, n.used_bytes, n.units, running.get(n.id, 0), n.active_repairs,
                tallies["deletes"].get(n.id, 0), dict(n.stats.faults), recent.reads if recent else 0,
                recent.p50_ms if recent else 0.0, recent.p99_ms if recent else 0.0,
                [n.p99_by_minute.get(m) for m in range(first, minute + 1)],
                n.stats.remaining_bytes, self.liveness.low_space(n.id), tuple(self.liveness.sharing(n.id))))
        live = [d for d in nodes if d.state != "dead"]
        filesystems = {self.liveness.filesystem_key(self.liveness.get(d.id)) or d.id: d for d in live}
        return ClusterStatus(
            cluster_id=self.cluster_id, started_ms=self.started_ms, now_ms=now_ms,
            capacity_bytes=sum(d.capacity_bytes for d in filesystems.values()),
            remaining_bytes=sum(d.remaining_bytes for d in filesystems.values()), low_space_pct=LOW_SPACE_PCT,
            used_bytes=sum(d.used_bytes for d in live),
            files=sum(tallies["files"].values()), directories=sum(tallies["dirs"].values()),
            policies=dict(sorted(tallies["files"].items())),
            groups_healthy=self.health.counts["healthy"], groups_degraded=self.health.counts["degraded"],
            groups_missing=self.health.counts["missing"],
            repairs_queued=max(0, self.health.units_lacking - len(self.repairs.in_flight)),
            repairs_running=len(self.repairs.in_flight), repairs_done=self.repairs.done,
            first_minute=first, datanodes=nodes)

    @_snapshot
    def browse(self, path: str, after: str = "", limit: int = 500) -> FilePage | Listing:
        """A file's groups and units, or one page of a directory (names after ``after``)."""
        node, entry = self.ns.stat(path)
        if not node.is_dir:
            info = FileInfo(entry, [self._group_info(g, 0, keep_dead=True) for g in self.blocks.groups(node.id)])
            holders = {u.datanode_id for g in info.groups for u in g.units}
            return FilePage(info, {d: "live" if self.liveness.is_live(d) else "dead" for d in holders})
        entries, more = self.ns.list_page(path, False, paths.join(path, after) if after else "", limit + 1,
                                          LIST_PAGE_BYTES)
        return Listing(path, entries[:limit], len(entries) > limit or (more and len(entries) < limit + 1))

    @_locked
    def datanode_units(self, datanode_id: str, limit: int = 200) -> UnitsPage | None:
        """A DataNode's row of the table and the first ``limit`` units the block map puts on it."""
        if not self.liveness.knows(datanode_id):
            return None
        row = next(d for d in self.status().datanodes if d.id == datanode_id)
        units = self.blocks.units_on(datanode_id, limit + 1)
        return UnitsPage(row, [(g, i, self.ns.path_of(f)) for g, i, f in units[:limit]], len(units) > limit)


def _natural(name: str) -> tuple:
    """dn2 before dn10."""
    stem = name.rstrip("0123456789")
    digits = name[len(stem):]
    return stem, int(digits) if digits else -1, name
