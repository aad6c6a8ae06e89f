"""The namesystem (HDFS's FSNamesystem): every NameNode RPC as a plain method, over components.

    tree        namespace/tree.py     directories, files, writes in progress (memory)
    journal     journal/journal.py    one record per change, group-committed (SQLite or etcd)
    applier     journal/apply.py      the only code that changes the tree (and what goes with it)
    retry       namespace/retry_cache.py  answers of retried calls (rebuilt from the records)
    blocks      blocks/blockmap.py    unit locations, pending deletes (memory only)
    manager     blocks/manager.py     the DataNode protocol, placement, repairs, decommission, health
    safe_mode   blocks/safe_mode.py
    checkpointer journal/image.py     checkpoint images
    file_changes file_changes.py      append, truncate, writes in place, lease recovery (the handlers)
    batches     batches.py            batched calls: many items of one kind a call, in holds of the lock
    reports     reports.py            operators' reads: fsck, report, status, the web pages' views

A change: under the writers' lock, the retry cache is asked (a retried call gets its first
answer), the handler checks the request against the tree and builds one record, the journal
applies and queues it; then, the lock released, the caller waits until the record is durable
(group commit), and is answered. A read (stat, list, policy, fsck) takes no lock: it reads the
tree and the block map as they are (tree.py says why that is safe), then waits until what it
could have seen is durable (``seen``). ``servicer.py`` unpacks requests, calls these methods and
packs the answers; tests drive this class directly, with an injectable clock. Refusals are
``errors.NameNodeError`` subclasses.

Receipts, not claims: a unit counts only once its DataNode has reported it (``units_stored``, or
a block report). ``complete`` waits up to ``receipt_wait_s`` (outside the lock) for the receipts
of the units the writer says it stored, keeps the units reported by then, and refuses the
Complete if a group has fewer than k.

Security: the namespace methods take the caller (``who``) and check file permissions as HDFS
does (namespace/permissions.py); a write in progress is its creator's. The cluster id is made when
the namespace is formatted (or given: a secure NameNode's credential names it) and a DataNode of
another cluster is refused. Every unit location handed out carries a block token (``tokens``, in
a secure cluster): a read token in GetFileInfo's locations and repair sources, a write token from
AddBlockGroup.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import random
import secrets
import threading
import time
import uuid
from collections import OrderedDict
from typing import Callable, Iterable

from hedgefs.ec.layout import block_size_for, check_block_size, group_data_size, zero_units
from hedgefs.ec.policy import DEFAULT_POLICY
from hedgefs.namenode.batches import Batches
from hedgefs.namenode.blocks.blockmap import BlockMap, Claim, GroupCommit, check_commit
from hedgefs.namenode.blocks.collector import Collector
from hedgefs.namenode.blocks.liveness import Liveness
from hedgefs.namenode.blocks.manager import (  # noqa: F401 (tests)
    DELETE_RESEND_S,
    DELETE_TTL_S,
    REPORT_GRACE_S,
    BlockManager,
)
from hedgefs.namenode.blocks.balancer import BalanceState
from hedgefs.namenode.blocks.repairs import InFlight, RepairScheduler
from hedgefs.namenode.blocks.safe_mode import Reason, SafeMode
from hedgefs.namenode.errors import (
    AlreadyExists,
    FailedPrecondition,
    InvalidArgument,
    NameNodeError,
    NotFound,
    PermissionDenied,
)
from hedgefs.namenode.file_changes import FileChanges
from hedgefs.namenode.journal import records as r
from hedgefs.namenode.journal.apply import Applier
from hedgefs.namenode.journal.image import Checkpointer
from hedgefs.namenode.journal.journal import Engine, Journal
from hedgefs.namenode.model import (
    ClusterReport,
    ClusterStatus,
    Created,
    DataNodeStats,
    FileInfo,
    FilePage,
    FsckReport,
    GroupInfo,
    HeartbeatReply,
    Listing,
    ReadLatency,
    Reopened,
    SafeModeState,
    UnitLocation,
    UnitsPage,
)
from hedgefs.namenode.namespace import paths
from hedgefs.namenode.reports import Reports
from hedgefs.namenode.namespace.inodes import (
    FILE_MODE,
    MAX_LINK_TARGET,
    MAX_XATTR_SIZE,
    MAX_XATTRS,
    SUPER,
    Dir,
    Entry,
    File,
    Lease,
    Node,
    Version,
    load_policy,
    with_xattrs,
)
from hedgefs.namenode.namespace.inodes import policy_name as canonical
from hedgefs.namenode.namespace.permissions import (
    EXECUTE,
    MAX_MODE,
    READ,
    WRITE,
    allowed,
    check,
    check_owner,
    check_sticky,
)
from hedgefs.namenode.namespace.retry_cache import MISS, RetryCache, step
from hedgefs.namenode.namespace.tree import LIST_PAGE, LIST_PAGE_BYTES, LIST_PAGE_MAX, Tree
from hedgefs.security import tokens as token_ops
from hedgefs.security.identity import Identity, Refused, check_name
from hedgefs.security.tokens import BlockTokens

log = logging.getLogger("hedgefs.namenode")

DB_FILE = "namenode.db"
REPAIR_TIMEOUT_S = 60.0
RECEIPT_WAIT_S = 5.0         # how long Complete waits for receipts (the client's deadline is 10 s)
MIN_REPLICAS = 2             # a replicated block is durable once this many replicas are stored (HDFS's replication.min)
CHECKPOINT_EVERY = 200_000   # records between two checkpoint images
COLLECT_INLINE = 2000        # files a delete's groups are freed of at once (the rest: the monitor, in steps)
COLLECT_STEP = 2_000         # ... and per lock hold of the monitor (HDFS: 1,000 blocks an increment)
EXPIRE_STEP = 50_000         # pending deletes given up per lock hold
COMPLETED_KEPT = 100_000     # completed writes remembered (a Complete retried without retry ids)


class Namesystem:
    def __init__(self, data_dir: str, *, default_policy: str = DEFAULT_POLICY,
                 default_block_size: int = 128 * 1024 * 1024, dead_interval_s: float = 30.0,
                 lease_timeout_s: float = 600.0, repair_timeout_s: float = REPAIR_TIMEOUT_S,
                 receipt_wait_s: float = RECEIPT_WAIT_S, min_replicas: int = MIN_REPLICAS,
                 clock: Callable[[], float] = time.monotonic, wall_clock: Callable[[], float] = time.time,
                 rng: random.Random | None = None, cluster_id: str | None = None,
                 tokens: BlockTokens | None = None, db_file: str = DB_FILE, engine: Engine | None = None,
                 standby: bool = False, safe_mode_share: float | None = None,
                 safe_mode_deadline_s: float | None = None, checkpoint_every: int = CHECKPOINT_EVERY,
                 superuser: str = "hedgefs"):
        """``engine``: where the journal is (default: SQLite, ``db_file`` in ``data_dir``).
        ``standby``: a standby's (HA): it changes nothing itself, it follows another's records
        (``follow``) and keeps the DataNodes' reports, sending no command. ``safe_mode_share``:
        a start-up with groups in the namespace, and a promotion, wait in safe mode until this
        share of the groups is readable from reported DataNodes (safe_mode.py); None: no safe mode."""
        try:
            self.default_policy = load_policy(default_policy).name
        except InvalidArgument as err:
            raise ValueError(f"bad default policy: {err}") from None
        if min_replicas < 1:
            raise ValueError(f"--min-replicas must be >= 1 (got {min_replicas})")
        os.makedirs(data_dir, exist_ok=True)
        self.default_block_size = default_block_size
        self.clock = clock
        self.wall_ms = lambda: int(wall_clock() * 1000)
        self.lease_timeout_s = lease_timeout_s
        self.receipt_wait_s = receipt_wait_s
        self.min_replicas = min_replicas
        self.rng = rng or random.Random()
        self.tokens = tokens            # None: an insecure cluster, no block tokens
        self.standby = standby
        self.lock = threading.RLock()
        self._receipts = threading.Condition(self.lock)   # notified when units are reported stored
        self._completed: OrderedDict[int, int] = OrderedDict()   # file id -> length, of recent Completes
        self.early_receipts: list[tuple[str, tuple[int, int, int]]] = []   # a standby's, of groups still to come
        self.started_ms = self.wall_ms()

        self.tree = Tree(self.default_policy, superuser)
        self.blocks = BlockMap(self.wall_ms, clock)
        self.retry = RetryCache()
        self.collector = Collector(self.tree, self.blocks)
        self.applier = Applier(self.tree, self.blocks, self.retry, self.collector, clock, self.wall_ms)
        if engine is None:
            from hedgefs.namenode.journal.sqlite import SqliteEngine
            engine = SqliteEngine(os.path.join(data_dir, db_file), superuser)
        self.journal = Journal(engine, self.applier)
        self.liveness = Liveness(dead_interval_s, clock)
        self._locations: tuple[dict | None, dict] = (None, {})   # (live view, UnitLocation by (index, id)): _group_info
        self.repairs = RepairScheduler(repair_timeout_s, clock=clock, rng=self.rng)
        self.safemode = SafeMode(self.blocks, safe_mode_share, safe_mode_deadline_s, clock)
        self.manager = BlockManager(self.blocks, self.liveness, self.repairs, self.safemode, self.applier.leaving,
                                    self._read_location, self.rng)
        self.manager.receipt_waiters = self._receipts
        self.manager.passive = standby
        self.health = self.manager.health
        self.checkpointer = Checkpointer(self.journal, self.lock, checkpoint_every)
        self.file_changes = FileChanges(self)
        self.batches = Batches(self)
        self.reports = Reports(self)
        try:
            self.replayed = self.journal.load()
            self.collector.drain()
            if not standby:
                self.journal.start()
                if not self.applier.cluster_id:
                    self.format(cluster_id)
            if cluster_id and self.applier.cluster_id and cluster_id != self.applier.cluster_id:
                raise Refused(f"the namespace in {engine.location} belongs to cluster {self.applier.cluster_id}, "
                              f"not {cluster_id}")
            if self.applier.cluster_id and not standby:
                engine.record_cluster(self.applier.cluster_id)
        except BaseException:
            self.journal.close()
            engine.close()
            raise
        self.manager.started = clock()
        if not standby:
            self.safemode.start(Reason.START_UP)
        self.restart_leases()

    def format(self, cluster_id: str | None) -> None:
        """A new namespace: its cluster id, and where its generations start (a random point of a
        2^61-wide space: the ranges two namespaces issue, a wiped NameNode's and its successor's,
        meet with odds of (n1 + n2) / 2^61)."""
        with self.lock:
            txid = self.journal.log(r.Format(cluster_id or f"CID-{uuid.uuid4()}", secrets.randbelow(1 << 61) + (1 << 40)))
        self.journal.wait_durable(txid)

    @property
    def cluster_id(self) -> str:
        return self.applier.cluster_id

    @property
    def leaving(self) -> set[str]:
        return self.applier.leaving

    @property
    def in_safe_mode(self) -> bool:
        return self.safemode.on

    @property
    def safe_mode_reason(self) -> str:
        return self.safemode.reason.value

    @property
    def token_lifetime_ms(self) -> int:
        return int(self.tokens.lifetime_s * 1000) if self.tokens else 0

    def close(self, checkpoint: bool = True) -> None:
        """Stop: the journal's queue written, an image of the namespace (a clean shutdown's: the
        next start replays nothing), the engine closed."""
        self.checkpointer.stop()
        self.journal.close()
        if checkpoint and not self.standby and not self.journal.failed:
            try:
                self.checkpointer.checkpoint()
            except Exception as err:   # the journal holds everything: the next start replays it
                log.warning("no checkpoint at shutdown: %s", err)
        self.journal.engine.close()

    def checkpoint(self) -> int:
        """An image now (tests, tools): its txid."""
        return self.checkpointer.checkpoint()

    # ------------------------------------------------------------------ how calls run

    def change(self, retry, kind: type, handler: Callable, rebuild: Callable = lambda answer: answer):
        """Run ``handler`` (which logs at most one record) under the writers' lock, unless the
        retry cache has the answer of this call already; answer once durable."""
        with self.lock:
            if retry is not None:
                kept = MISS
                for one in kind if isinstance(kind, tuple) else (kind,):   # (a call that logs one of several)
                    if kept is MISS:
                        kept = self.retry.lookup(retry, r.CODES[one], self.wall_ms())
                if kept is not MISS:
                    result = rebuild(kept)
                    seen = self.journal.last
                else:
                    result = handler()
                    seen = self.journal.last
            else:
                result = handler()
                seen = self.journal.last
        self.journal.wait_durable(seen)
        return result

    def locked(self, handler: Callable):
        """Under the writers' lock, answered once what it saw is durable (no record of its own)."""
        with self.lock:
            result = handler()
            seen = self.journal.last
        self.journal.wait_durable(seen)
        return result

    def seen(self) -> None:
        """A read is answered only once everything it could have seen is durable."""
        self.journal.wait_durable(self.journal.last)

    def log_record(self, record) -> int:
        if self.standby:
            raise FailedPrecondition("this NameNode is a standby: its namespace is changed only by the active")
        return self.journal.log(record)

    # ------------------------------------------------------------------ namespace reads

    def file_info(self, path: str, who: Identity = SUPER, span: tuple[int, int] | None = None,
                  xattrs: bool = False) -> FileInfo:
        """A file's entry and its groups, every unit with a read token (the file must be readable).
        ``span`` (offset, length): only the groups holding those bytes (FileInfo.first_group says
        where they sit): an S3 GET of 64 KiB asks for one group, not every one with its units.
        ``xattrs``: a file's extended attributes too, of the version the answer describes."""
        node, entry = self.tree.stat(path, who, read_file=True)
        if xattrs:
            with_xattrs(entry, node)
        if node.is_dir or node.is_link:
            self.seen()
            return FileInfo(entry, [])
        groups, lengths = node.groups, node.group_lengths()
        count, first = len(groups), 0
        chosen = range(count)
        if span is not None:
            chosen, first = _groups_in(lengths, *span)
        policy = load_policy(node.attrs.policy)
        k = policy.k
        infos = [self.group_info(groups[i], lengths[i], k, op=token_ops.READ) for i in chosen]
        if self.safemode.on and any(len(g.units) + len(zero_units(policy, g.length)) < k for g in infos) \
                and self.manager.reports_due():
            self.safemode.refuse_unlocated(path)
        self.seen()
        return FileInfo(entry, infos, first if span is not None else None, count)

    def list_page(self, path: str, recursive: bool = False, start_after: str = "",
                  limit: int = 0, who: Identity = SUPER, xattrs: bool = False) -> tuple[list[Entry], bool]:
        """One page of a listing (``Tree.list_page``): (entries, more)."""
        limit = min(limit or LIST_PAGE, LIST_PAGE_MAX)
        out = self.tree.list_page(path, recursive, start_after, limit, LIST_PAGE_BYTES, who, xattrs)
        self.seen()
        return out

    def list(self, path: str, recursive: bool = False) -> list[Entry]:
        """Every page of a listing (for tests and tools; the RPC is paged)."""
        out, more = self.list_page(path, recursive)
        while more:
            page, more = self.list_page(path, recursive, out[-1].path)
            out.extend(page)
        return out

    def get_policy(self, path: str, who: Identity = SUPER) -> tuple[str, str]:
        """(policy name, directory it comes from; "" = the cluster default)."""
        out = self.tree.get_policy(path, who)
        self.seen()
        return out

    # ------------------------------------------------------------------ namespace changes

    def mkdir(self, path: str, parents: bool = False, who: Identity = SUPER, retry=None) -> None:
        return self.change(retry, r.Mkdir, lambda: self._mkdir(path, parents, who, retry))

    def _mkdir(self, path: str, parents: bool, who: Identity, retry) -> None:
        """Traverse, and w on the directory a new one goes into (HDFS: the nearest existing ancestor)."""
        self.safemode.refuse(f"mkdir {path}")
        parts = paths.components(path)
        if not parts:
            if parents:
                return
            raise AlreadyExists("directory exists: /")
        node, here = self.tree.root, paths.ROOT
        for i, part in enumerate(parts):
            last = i == len(parts) - 1
            parent_path, here = here, paths.join(here, part)
            if not allowed(who, node, EXECUTE):
                check(who, node, EXECUTE, parent_path, f"look up {path}")
            child = node.children.get(part)
            if child is None:
                if not last and not parents:
                    raise NotFound(f"no such file or directory: {paths.parent_of(path)}")
                check(who, node, WRITE, parent_path, f"create {here}")
                self.log_record(r.Mkdir(path, self.wall_ms(), who.name, self.tree.next_id, retry))
                return
            if not child.is_dir:
                if last:
                    raise AlreadyExists(f"file exists: {here}")
                raise FailedPrecondition(f"not a directory: {here}")
            if last and not parents:
                raise AlreadyExists(f"directory exists: {here}")
            node = child

    def delete(self, path: str, recursive: bool = False, who: Identity = SUPER, retry=None) -> None:
        self.change(retry, r.Delete, lambda: self._delete(path, recursive, who, retry))

    def _delete(self, path: str, recursive: bool, who: Identity, retry) -> None:
        """Permissions (HDFS): w on the parent (and the sticky rule), and rwx on every directory of
        a tree removed with it, so nobody removes what they could not remove piece by piece."""
        self.safemode.refuse(f"delete {path}")
        if path == paths.ROOT:
            raise InvalidArgument("cannot delete the root directory '/'")
        chain = self.tree.walk(path, who)
        node, parent = chain[-1], chain[-2]
        check(who, parent, WRITE, paths.parent_of(path), f"delete {path}")
        check_sticky(who, parent, node, paths.parent_of(path), path, "delete")
        if node.is_dir and not recursive and node.children:
            raise FailedPrecondition(f"directory not empty: {path}")
        if node.is_dir and not who.is_admin:
            for d in self.tree.subtree_dirs(node):
                if not allowed(who, d, READ | WRITE | EXECUTE):
                    where = self.tree.path_of(d)
                    check(who, d, READ | WRITE | EXECUTE, where, f"delete {path} (it holds {where})")
        self.log_record(r.Delete(path, self.wall_ms(), retry))
        self.collector.step(COLLECT_INLINE)
        log.debug("deleted %s for %s", path, who.name)

    def rename(self, src: str, dst: str, who: Identity = SUPER, retry=None) -> None:
        self.change(retry, r.Rename, lambda: self._rename(src, dst, who, retry))

    def _rename(self, src: str, dst: str, who: Identity, retry) -> None:
        """Permissions (HDFS): w on the source's parent (and the sticky rule), w on the target's."""
        self.safemode.refuse(f"rename {src}")
        chain = self.tree.walk(src, who)
        node = chain[-1]
        if node is self.tree.root:
            raise InvalidArgument("cannot rename the root directory '/'")
        check(who, chain[-2], WRITE, paths.parent_of(src), f"move {src}")
        check_sticky(who, chain[-2], node, paths.parent_of(src), src, "move")
        self.file_changes.refuse_rewritten(chain[-2], node, src, "move")
        if not paths.components(dst):
            raise AlreadyExists("directory exists: /")
        parent = self.tree.parent_dir(dst, who)[-1]
        check(who, parent, WRITE, paths.parent_of(dst), f"move {src} to {dst}")
        existing = parent.children.get(dst.rsplit("/", 1)[1])
        if existing is not None:
            raise AlreadyExists(f"{'directory' if existing.is_dir else 'file'} exists: {dst}")
        if node.is_dir and paths.is_under(dst, src):
            raise InvalidArgument(f"cannot move directory {src} into itself: {dst}")
        self.log_record(r.Rename(src, dst, self.wall_ms(), retry))
        log.debug("renamed %s to %s for %s", src, dst, who.name)

    def set_policy(self, path: str, policy: str, who: Identity = SUPER, retry=None) -> None:
        self.change(retry, r.SetPolicy, lambda: self._set_policy(path, policy, who, retry))

    def _set_policy(self, path: str, policy: str, who: Identity, retry) -> None:
        """Set (or with "" clear) a directory's explicit policy. Needs w on the directory (HDFS)."""
        self.safemode.refuse(f"set the policy of {path}")
        if policy:
            self.manager.check_placeable(load_policy(policy))
        node = self.tree.lookup(path, who)
        if not node.is_dir:
            raise FailedPrecondition(f"not a directory: {path} (policies are set on directories)")
        check(who, node, WRITE, path, f"set the policy of {path}")
        name = canonical(policy) if policy else ""
        self.log_record(r.SetPolicy(path, name, retry))
        log.info("policy of %s set to %s", path, name or "(inherited)")

    def set_permission(self, path: str, mode: int, who: Identity = SUPER, retry=None) -> None:
        self.change(retry, r.SetPermission, lambda: self._set_permission(path, mode, who, retry))

    def _set_permission(self, path: str, mode: int, who: Identity, retry) -> None:
        """chmod: the owner or the superuser (HDFS)."""
        self.safemode.refuse(f"chmod {path}")
        if not 0 <= mode <= MAX_MODE:
            raise InvalidArgument(f"bad mode {mode:o}: 0 to {MAX_MODE:o} (rwx for owner, group, others; 1000 = sticky)")
        node = self.tree.lookup(path, who)
        check_owner(who, node, path, "change the mode of")
        self.log_record(r.SetPermission(path, mode, retry))
        log.info("mode of %s set to %04o by %s", path, mode, who.name)

    def set_owner(self, path: str, owner: str = "", group: str = "", who: Identity = SUPER, retry=None) -> None:
        self.change(retry, r.SetOwner, lambda: self._set_owner(path, owner, group, who, retry))

    def _set_owner(self, path: str, owner: str, group: str, who: Identity, retry) -> None:
        """chown: a new owner only by the superuser; a new group by the superuser, or by the owner
        if it is one of the owner's groups (HDFS)."""
        self.safemode.refuse(f"chown {path}")
        if not owner and not group:
            raise InvalidArgument("chown needs an owner, a group, or both")
        for name, what in ((owner, "user"), (group, "group")):
            if name:
                try:
                    check_name(name, what)
                except ValueError as err:
                    raise InvalidArgument(str(err)) from None
        node = self.tree.lookup(path, who)
        if owner and owner != node.owner and not who.is_admin:
            raise PermissionDenied(f"permission denied: only an admin may give {path} to another user "
                                   f"(user {who.name} is not one)")
        if group and group != node.group and not who.is_admin:
            check_owner(who, node, path, "change the group of")
            if group not in who.groups:
                raise PermissionDenied(f"permission denied: user {who.name} is not in group {group}")
        self.log_record(r.SetOwner(path, owner, group, retry))
        log.info("owner of %s set to %s:%s by %s", path, owner or "(same)", group or "(same)", who.name)

    def set_times(self, path: str, mtime_ms: int = -1, atime_ms: int = -1, who: Identity = SUPER,
                  retry=None) -> None:
        """HDFS's setTimes (utimes): -1 leaves a time as it is."""
        self.change(retry, r.SetTimes, lambda: self._set_times(path, mtime_ms, atime_ms, who, retry))

    def _set_times(self, path: str, mtime_ms: int, atime_ms: int, who: Identity, retry) -> None:
        """The owner, or a user who may write the inode (utimes(2); HDFS: w)."""
        self.safemode.refuse(f"set the times of {path}")
        if mtime_ms < -1 or atime_ms < -1:
            raise InvalidArgument(f"bad times for {path}: mtime {mtime_ms}, atime {atime_ms} (ms since the epoch, "
                                  f"-1 = unchanged)")
        node = self.tree.lookup(path, who)
        if who.name != node.owner and not who.is_admin:
            check(who, node, WRITE, path, f"set the times of {path}")
        if mtime_ms == -1 and atime_ms == -1:
            return
        self.log_record(r.SetTimes(path, mtime_ms, atime_ms, retry))

    def symlink(self, target: str, path: str, who: Identity = SUPER, retry=None) -> None:
        """A symbolic link at ``path`` to ``target`` (HDFS's createSymlink; its parent must exist)."""
        self.change(retry, r.Symlink, lambda: self._symlink(target, path, who, retry))

    def _symlink(self, target: str, path: str, who: Identity, retry) -> None:
        self.safemode.refuse(f"symlink {path}")
        if not target or "\0" in target or len(target.encode("utf-8")) > MAX_LINK_TARGET:
            raise InvalidArgument(f"bad symbolic link target {target[:80]!r}: 1 to {MAX_LINK_TARGET} bytes, no NUL")
        parts = paths.components(path)
        if not parts:
            raise AlreadyExists("directory exists: /")
        parent = self.tree.parent_dir(path, who, parts)[-1]
        check(who, parent, WRITE, paths.parent_of(path), f"create {path}")
        existing = parent.children.get(parts[-1])
        if existing is not None:
            raise AlreadyExists(f"{'directory' if existing.is_dir else 'file'} exists: {path}")
        self.log_record(r.Symlink(path, target, self.tree.next_id, self.wall_ms(), who.name, parent.group, retry))

    def get_xattrs(self, path: str, who: Identity = SUPER) -> dict[str, bytes]:
        """Every extended attribute of ``path`` (the user namespace: the only one kept); needs r."""
        node = self.tree.lookup(path, who)
        check(who, node, READ, path, f"read the extended attributes of {path}")
        self.seen()
        return dict(node.extra.xattrs) if node.extra is not None else {}

    def set_xattr(self, path: str, name: str, value: bytes, flags: int = 0, who: Identity = SUPER,
                  retry=None) -> None:
        """HDFS's setXAttr; ``flags``: XATTR_CREATE (1: it must not exist) or XATTR_REPLACE (2: it
        must), 0 either. Needs w (the user namespace's rule, as HDFS and Linux)."""
        self.change(retry, r.SetXAttr, lambda: self._set_xattr(path, name, value, flags, who, retry))

    def _set_xattr(self, path: str, name: str, value: bytes, flags: int, who: Identity, retry) -> None:
        self.safemode.refuse(f"set an extended attribute of {path}")
        _check_xattr_name(name)
        if len(name.encode("utf-8")) + len(value) > MAX_XATTR_SIZE:
            raise InvalidArgument(f"extended attribute {name} of {path}: name and value are "
                                  f"{len(name.encode()) + len(value)} bytes, at most {MAX_XATTR_SIZE}")
        node = self.tree.lookup(path, who)
        check(who, node, WRITE, path, f"set an extended attribute of {path}")
        have = node.extra.xattrs if node.extra is not None else {}
        if flags & XATTR_CREATE and name in have:
            raise AlreadyExists(f"extended attribute {name} of {path} exists")
        if flags & XATTR_REPLACE and name not in have:
            raise NotFound(f"no extended attribute {name} on {path}")
        if name not in have and len(have) >= MAX_XATTRS:
            raise InvalidArgument(f"{path} has {len(have)} extended attributes, the most an inode may have")
        self.log_record(r.SetXAttr(path, name, bytes(value), retry))

    def remove_xattr(self, path: str, name: str, who: Identity = SUPER, retry=None) -> None:
        self.change(retry, r.RemoveXAttr, lambda: self._remove_xattr(path, name, who, retry))

    def _remove_xattr(self, path: str, name: str, who: Identity, retry) -> None:
        self.safemode.refuse(f"remove an extended attribute of {path}")
        _check_xattr_name(name)
        node = self.tree.lookup(path, who)
        check(who, node, WRITE, path, f"remove an extended attribute of {path}")
        if node.extra is None or name not in node.extra.xattrs:
            raise NotFound(f"no extended attribute {name} on {path}")
        self.log_record(r.RemoveXAttr(path, name, retry))

    # ------------------------------------------------------------------ the write path

    def create(self, path: str, overwrite: bool = False, policy: str = "", block_size: int = 0,
               client_name: str = "", convert_from: Version | None = None, who: Identity = SUPER,
               retry=None, with_group: bool = False, empty: bool = False) -> Created:
        """``with_group``: the file's first group placed in the same call (``Created.first_group``),
        so a small file's whole life is Create and Complete. ``empty``: a whole empty file, created
        and completed in this one call (no lease is left behind)."""
        return self.change(retry, r.Create,
                           lambda: self._create_and(self._create(path, overwrite, policy, block_size, client_name,
                                                                  convert_from, who, retry),
                                                     with_group, empty, who, retry),
                           lambda kept: self._create_and(self.created(*kept), with_group, empty, who, retry))

    def _create_and(self, created: Created, with_group: bool, empty: bool, who: Identity, retry) -> Created:
        """The rest of a fused create (under the lock, after its Create record or its retry's
        kept answer): each further record has a retry id of its own, derived from the call's, so
        a retry finishes what a crash between the records left undone and repeats nothing."""
        if not (with_group or empty):
            return created
        further = step(retry, "complete" if empty else "group")
        code = r.CODES[r.Complete if empty else r.AddGroup]
        kept = self.retry.lookup(further, code, self.wall_ms()) if further else MISS
        if kept is not MISS:
            return created if empty else dataclasses.replace(created, first_group=self.new_group(*kept))
        try:
            if empty:
                if created.file_id in self.tree.writing:   # else: completed already (a retry without ids)
                    self.complete_write(created.file_id, 0, [], None, who, further)
                return created
            return dataclasses.replace(created, first_group=self.add_group(created.file_id, (), who, further))
        except NameNodeError:
            # The caller learns no file id, so nobody could finish or abandon this write: it must
            # not hold the path for a lease's length.
            if created.file_id in self.tree.writing:
                self.log_record(r.Abandon(created.file_id))
            raise

    def created(self, file_id: int, policy: str, block_size: int) -> Created:
        return Created(file_id, policy, block_size, int(self.lease_timeout_s * 1000),
                       load_policy(policy).min_stored(self.min_replicas))

    def _create(self, path: str, overwrite: bool, policy_name: str, block_size: int, client_name: str,
                convert_from: Version | None, who: Identity, retry) -> Created:
        """Add an invisible file being written; refuses what Complete would refuse, before data moves.

        ``convert_from`` (``ec convert``): the file at ``path`` must be that version, and the new
        policy another one; the new file will replace it (see ``complete``), keeping its owner,
        group and mode. Permissions (HDFS): w on the parent, and on the file an overwrite or a
        conversion replaces."""
        self.safemode.refuse(f"create {path}")
        parts = paths.components(path)
        if not parts:
            raise FailedPrecondition("is a directory: /")
        chain = self.tree.parent_dir(path, who, parts)
        parent = chain[-1]
        name = parts[-1]
        check(who, parent, WRITE, paths.parent_of(path), f"create {path}")
        existing = parent.children.get(name)
        if convert_from is not None:
            _check_version(path, existing, convert_from)
            if not policy_name:
                raise InvalidArgument("a conversion needs the policy to convert to")
            if canonical(policy_name) == existing.policy:
                raise InvalidArgument(f"{path} is already {existing.policy}: nothing to convert")
            overwrite = True
        if existing is not None:
            if existing.is_dir:
                raise FailedPrecondition(f"is a directory: {path}")
            if not overwrite:
                raise AlreadyExists(f"file exists: {path} (use -f to overwrite)")
            check(who, existing, WRITE, path, f"overwrite {path}")
        writer = self.tree.writers.get((parent, name))
        if writer is not None:   # one writer per path at a time (HDFS's lease: AlreadyBeingCreatedException)
            raise AlreadyExists(f"{path} is being written by {writer.holder or 'another client'} "
                                f"(file {writer.file_id}): try again when that write ends")
        if not policy_name:
            policy_name = self.tree.effective_policy(chain, paths.parent_of(path))[0]
        policy = load_policy(policy_name)
        if block_size == 0:
            block_size = block_size_for(policy, self.default_block_size)
        try:
            check_block_size(policy, block_size)
        except ValueError as err:
            raise InvalidArgument(str(err)) from None
        self.manager.check_placeable(policy)
        file_id = self.tree.next_id
        name = canonical(policy_name)
        self.log_record(r.Create(path, file_id, name, block_size, bool(overwrite), self.wall_ms(), who.name,
                           parent.group, FILE_MODE, retry))
        log.debug("create %s: file %d, %s, block size %d, client %r (%s)%s", path, file_id, name,
                  block_size, client_name, who.name, " (a conversion)" if convert_from else "")
        return self.created(file_id, name, block_size)

    def writing(self, file_id: int, who: Identity = SUPER) -> Lease:
        """A write in progress, if it is ``who``'s (its creator holds its lease; an admin may too)."""
        lease = self.tree.writing.get(file_id)
        if lease is None:
            raise NotFound(f"no file is being written with id {file_id} (completed, abandoned or expired)")
        if who.name != lease.holder and not who.is_admin:
            raise PermissionDenied(f"permission denied: file {file_id} is being written by {lease.holder}, "
                                   f"not by user {who.name}")
        return lease

    def add_block_group(self, file_id: int, exclude: Iterable[str] = (), who: Identity = SUPER,
                        retry=None) -> GroupInfo:
        """A new group for a write in progress (the caller's), every unit with a write token."""
        return self.change(retry, r.AddGroup, lambda: self.add_group(file_id, exclude, who, retry),
                           lambda kept: self.new_group(kept[0], kept[1]))

    def add_group(self, file_id: int, exclude: Iterable[str], who: Identity, retry) -> GroupInfo:
        self.safemode.refuse("add a block group")
        lease = self.writing(file_id, who)
        policy = load_policy(lease.file.attrs.policy)
        targets = self.manager.choose_targets(policy, exclude, lease.file.attrs.block_size)
        group_id = self.blocks.next_group_id
        self.log_record(r.AddGroup(file_id, group_id, tuple(targets), retry))
        return self.new_group(group_id, targets)

    def new_group(self, group_id: int, targets) -> GroupInfo:
        generation = self.blocks.generation(group_id)
        return GroupInfo(group_id, 0, [self._location(j, d, group_id, generation, token_ops.WRITE)
                                       for j, d in enumerate(targets)], generation)

    def renew_lease(self, file_id: int, who: Identity = SUPER) -> None:
        def renew() -> None:
            self.writing(file_id, who).renewed = self.clock()
        self.locked(renew)

    def recover_lease(self, path: str, who: Identity = SUPER, retry=None) -> bool:
        """HDFS's recoverLease: the write in progress at ``path`` (a crashed writer's, whose lease
        would expire only after --lease-timeout-s) is abandoned now, so that another may write:
        a new file's never appears, an append's, truncate's or write in place's leaves the file
        at its last committed version (every hflushed byte). The writer itself, or a user who may
        write the file (or, for a new file, its directory). True if there was one."""
        return self.change(retry, r.Abandon, lambda: self.file_changes.recover_lease(path, who, retry),
                           lambda _kept: True)

    def restart_leases(self) -> None:
        """Every lease counts from now (this process begins to serve as the active: HDFS renews
        every lease at start-up): a writer whose renewals failed while no NameNode served gets one
        whole lease period to renew, not an abandon on the first pass."""
        with self.lock:
            now = self.clock()
            for lease in self.tree.writing.values():
                lease.renewed = now

    def complete(self, file_id: int, length: int, groups: list[GroupCommit],
                 convert_from: Version | None = None, who: Identity = SUPER, retry=None) -> None:
        self.change(retry, r.Complete, lambda: self.complete_write(file_id, length, groups, convert_from, who, retry))

    def complete_write(self, file_id: int, length: int, groups: list[GroupCommit], convert_from: Version | None,
                  who: Identity, retry) -> None:
        """Make a write visible, replacing a complete file at its path, if every group has enough
        units reported stored. A replacement's mtime is later than the replaced file's, even within
        one millisecond, so (length, mtime) names one version of a path's bytes; a conversion
        (``convert_from``, which the file must still be) keeps the mtime and the owner, group and
        mode: the bytes are the same."""
        if self._done_before(file_id, length):
            return
        self.writing(file_id, who)       # someone else's write: refused before anything waits
        self._await_receipts(groups)
        if self._done_before(file_id, length):
            return   # a retry that arrived while this call waited, and won
        lease = self.writing(file_id, who)
        file = lease.file
        policy = load_policy(file.attrs.policy)
        shared = lease.shared()
        kept_length = len(shared) * group_data_size(policy, file.attrs.block_size)
        own = {g.id: g for g in file.groups[lease.kept:]}
        if length < kept_length:
            raise InvalidArgument(f"file {file_id}: length {length} is less than the {kept_length} bytes it keeps")
        check_commit(file_id, length - kept_length, groups, policy, file.attrs.block_size,
                     policy.min_stored(self.min_replicas), own, self.blocks.reported_units)
        self.manager.settle(own.values(), file.attrs.block_size)
        path = self.tree.lease_path(lease)
        existing = lease.parent.children.get(file.name)
        if lease.base is not None and existing is not lease.base:   # (a delete drops the write: apply.py)
            raise FailedPrecondition(f"{path} was replaced while being appended to or truncated: this write goes")
        mtime, attrs = self.wall_ms(), None
        if convert_from is not None:
            _check_version(path, existing, convert_from)
            if length != existing.length:
                raise InvalidArgument(f"{path}: the conversion wrote {length} bytes of {existing.length}")
            mtime, attrs = existing.mtime, (existing.owner, existing.group, existing.mode)
        if existing is not None:
            if existing.is_dir:
                raise FailedPrecondition(f"is a directory: {path}")
            if not lease.overwrite:
                raise AlreadyExists(f"file exists: {path} (use -f to overwrite)")
            if convert_from is None:
                mtime = max(mtime, existing.mtime + 1)
        kept = tuple(g.id for g in shared) + \
            tuple(c.group_id for c in groups if c.length > 0)   # an empty group goes (HDFS: an empty last block)
        self.log_record(r.Complete(file_id, length, kept, mtime, attrs, retry))
        self._completed[file_id] = length
        if len(self._completed) > COMPLETED_KEPT:
            self._completed.popitem(last=False)
        log.debug("complete %s: file %d, %d bytes in %d groups", path, file_id, length, len(kept))

    def _done_before(self, file_id: int, length: int) -> bool:
        """A Complete of this write succeeded already: True for its retry, a refusal otherwise."""
        if file_id in self.tree.writing or file_id not in self._completed:
            return False
        if self._completed[file_id] == length:
            return True
        raise FailedPrecondition(f"file {file_id} is already complete with length {self._completed[file_id]}")

    def _await_receipts(self, groups: list[GroupCommit]) -> None:
        """Wait (the lock released meanwhile) until every unit the writer claims is reported, or
        ``receipt_wait_s`` passes. Receipts usually arrive before Complete: a DataNode sends one as
        soon as it has stored a unit, and the writer completes only after every unit is stored."""
        deadline = time.monotonic() + self.receipt_wait_s
        blocks = self.blocks
        while True:
            waiting = 0
            for c in groups:
                group = blocks.get(c.group_id)
                pending = blocks.unreported.get(c.group_id) if group is not None else None
                if pending:   # (a dead DataNode's receipt is not worth waiting for)
                    waiting += sum(1 for i in c.stored_units if i in pending
                                   and self.liveness.is_live(blocks.holder(group, i) or ""))
            left = deadline - time.monotonic()
            if not waiting or left <= 0:
                if waiting:
                    log.warning("complete: %d units claimed stored but not reported after %.1f s", waiting,
                                self.receipt_wait_s)
                return
            self._receipts.wait(left)

    def concat(self, target: str, sources: list[str], overwrite: bool = False, who: Identity = SUPER,
               retry=None) -> None:
        """One file at ``target`` from the parts ``sources``, in one record: a reader sees no
        target (or the old one) until it is applied, then all of it."""
        self.change(retry, r.Concat, lambda: self._concat(target, sources, overwrite, who, retry))

    def _concat(self, target: str, sources: list[str], overwrite: bool, who: Identity, retry) -> None:
        """HDFS's concat, as a rename: the first part becomes the target, the other parts' groups
        are appended to it in order, and the other parts go. Every part but the last must end on a
        block group boundary, and all must share one policy and block size, so that every group
        but the last of the result is full. Permissions (HDFS): r on every part and w on its
        parent (the parts go), w on the target's parent, and on a target an overwrite replaces."""
        self.safemode.refuse(f"concat into {target}")
        if not sources:
            raise InvalidArgument("concat needs at least one source")
        if len(set(sources)) != len(sources):
            raise InvalidArgument("concat: a source is listed twice")
        if target in sources:
            raise InvalidArgument(f"concat: the target {target} is also a source")
        if not paths.components(target):
            raise FailedPrecondition("is a directory: /")
        parts = []
        for source in sources:
            chain = self.tree.walk(source, who)
            node = chain[-1]
            if node.is_dir:
                raise FailedPrecondition(f"is a directory: {source}")
            check(who, node, READ, source, f"concat {source}")
            check(who, chain[-2], WRITE, paths.parent_of(source), f"concat {source} (it goes)")
            check_sticky(who, chain[-2], node, paths.parent_of(source), source, "concat")
            if node.is_link:
                raise InvalidArgument(f"concat: {source} is a symbolic link")
            self.file_changes.refuse_rewritten(chain[-2], node, source, "concat")
            parts.append(node)
        first = parts[0]
        full = group_data_size(load_policy(first.policy), first.block_size)
        for source, node in zip(sources, parts):
            if (node.policy, node.block_size) != (first.policy, first.block_size):
                raise InvalidArgument(
                    f"concat: {source} is {node.policy} with {node.block_size}-byte blocks, "
                    f"{sources[0]} is {first.policy} with {first.block_size}-byte blocks")
        for source, node in zip(sources[:-1], parts[:-1]):
            if node.length % full:
                raise InvalidArgument(
                    f"concat: {source} is {node.length} bytes, not a multiple of its block group size "
                    f"{full} (only the last part may end inside a group)")
        parent = self.tree.parent_dir(target, who)[-1]
        check(who, parent, WRITE, paths.parent_of(target), f"create {target}")
        existing = parent.children.get(target.rsplit("/", 1)[1])
        mtime = self.wall_ms()
        if existing is not None:
            if existing.is_dir:
                raise FailedPrecondition(f"is a directory: {target}")
            if not overwrite:
                raise AlreadyExists(f"file exists: {target}")
            mtime = max(mtime, existing.mtime + 1)   # a new version of the target: see complete
            check(who, existing, WRITE, target, f"overwrite {target}")
            self.file_changes.refuse_rewritten(parent, existing, target, "replace")
        self.log_record(r.Concat(target, tuple(sources), mtime, retry))
        log.debug("concat %s: %d parts", target, len(sources))

    def sync(self, file_id: int, path: str, length: int, groups: list[GroupCommit], who: Identity = SUPER,
             retry=None) -> Reopened:
        """hflush/hsync (HDFS's fsync with UPDATE_LENGTH): the write so far becomes the file's, as
        Complete makes it, and the write goes on in the same call: an append to that version
        begins (``path``: where the write is), with the group its last, partial group is to be
        written again into. Three records, one wait until durable; Append's answer."""
        return self.change(retry, r.Complete,
                           lambda: self.file_changes.sync(file_id, path, length, groups, who, retry),
                           lambda _kept: self.file_changes.go_on(path, length, who, retry))

    def abandon(self, file_id: int, who: Identity = SUPER, retry=None) -> None:
        self.change(retry, r.Abandon, lambda: self._abandon(file_id, who, retry))

    def _abandon(self, file_id: int, who: Identity, retry) -> None:
        if file_id not in self.tree.writing:
            return
        self.writing(file_id, who)
        self.log_record(r.Abandon(file_id, retry))
        log.debug("abandoned file %d", file_id)

    def append(self, path: str, client_name: str = "", who: Identity = SUPER, retry=None,
               rewrite_from: int | None = None) -> Reopened:
        """Begin an append to the complete file at ``path`` (HDFS's append): a new version of it is
        written copy-on-write: it shares the file's full groups; the client rewrites the bytes of
        its last, partial group (``Reopened.kept_length`` to ``length``) and then the new ones,
        and Complete replaces the file with it. Until then readers see the file as it was; one
        writer per path, as for Create. ``rewrite_from`` (an offset within the file): the new
        version replaces the bytes from there on (a write in place, copy-on-write of the group it
        falls in and those after it): the groups before that one are kept."""
        return self.change(retry, r.Reopen,
                           lambda: self.file_changes.reopen(path, None, client_name, who, retry, rewrite_from),
                           lambda kept: self.file_changes.reopened(kept[0]))

    def truncate(self, path: str, length: int, client_name: str = "", who: Identity = SUPER,
                 retry=None) -> Reopened | None:
        """HDFS's truncate: ``path`` keeps its first ``length`` bytes. A cut on a group boundary
        (or none) is done at once (None); otherwise the group it falls in is rewritten
        copy-on-write, as an append's last group is: the answer says what to rewrite, and
        Complete (length ``length``) ends it. Longer than the file: refused (HDFS's too)."""
        kinds = (r.Reopen, r.Truncate)
        return self.change(retry, kinds, lambda: self.file_changes.reopen(path, length, client_name, who, retry),
                           lambda kept: self.file_changes.reopened(kept[0]) if kept else None)

    # ------------------------------------------------------------------ batched calls (batches.py)

    def file_infos(self, paths_: list[str], who: Identity = SUPER,
                   xattrs: list[bool] | None = None) -> list[FileInfo | NameNodeError]:
        """``file_info`` of each path (``xattrs[i]``: with its extended attributes): its answer,
        or its refusal (one bad path fails alone)."""
        return self.batches.file_infos(paths_, who, xattrs)

    def mkdir_many(self, items: list[tuple[str, bool]], who: Identity = SUPER,
                   retries: list | None = None) -> list[NameNodeError | None]:
        """``mkdir`` of each (path, parents): None, or its refusal."""
        return self.batches.changes(r.Mkdir, "mkdir", items, retries,
                                    lambda item, retry: self._mkdir(item[0], item[1], who, retry))

    def delete_many(self, items: list[tuple[str, bool]], who: Identity = SUPER,
                    retries: list | None = None) -> list[NameNodeError | None]:
        """``delete`` of each (path, recursive): None, or its refusal."""
        return self.batches.changes(r.Delete, "delete", items, retries,
                                    lambda item, retry: self._delete(item[0], item[1], who, retry))

    def create_many(self, items: list[dict], who: Identity = SUPER,
                    retries: list | None = None) -> list[Created | NameNodeError]:
        """``create`` of each (a dict of its keyword arguments): its Created, or its refusal."""
        def one(kw: dict, retry) -> Created:
            fused = kw.get("with_group", False), kw.get("empty", False)
            return self._create_and(self._create(kw["path"], kw.get("overwrite", False), kw.get("policy", ""),
                                                 kw.get("block_size", 0), kw.get("client_name", ""), None, who,
                                                 retry), *fused, who, retry)

        def again(kw: dict, retry, kept) -> Created:
            return self._create_and(self.created(*kept), kw.get("with_group", False), kw.get("empty", False),
                                    who, retry)
        return self.batches.changes(r.Create, "create", items, retries, one, again)

    # ------------------------------------------------------------------ locations

    def _location(self, index: int, datanode_id: str, group_id: int = 0, generation: int = 0,
                  op: int = token_ops.READ) -> UnitLocation:
        token = self.tokens.sign(op, group_id, index, generation) if self.tokens else b""
        return UnitLocation(index, datanode_id, self.liveness.address(datanode_id),
                            self.liveness.data_address(datanode_id), token)

    def _read_location(self, index: int, datanode_id: str, group_id: int, generation: int) -> UnitLocation:
        return self._location(index, datanode_id, group_id, generation, token_ops.READ)

    def group_info(self, group, length: int, k: int, keep_dead: bool = False, op: int | None = None) -> GroupInfo:
        units = self.manager.locations(group, k, keep_dead)
        gid = group.id
        generation = self.blocks.generation(gid)
        tokens = self.tokens if op is not None else None
        live = self.liveness.live()
        if not tokens:   # a unit's location is the same in every answer while the live view is
            made, known = self._locations
            if made is not live:
                known = {}
                self._locations = (live, known)
            locations = []
            for i, d in units.items():   # in index order
                location = known.get((i, d))
                if location is None:
                    address, data_address = live.get(d) or self.liveness.addresses(d)
                    location = known[(i, d)] = UnitLocation(i, d, address, data_address)
                locations.append(location)
            return GroupInfo(gid, length, locations, generation)
        addresses = self.liveness.addresses
        locations = []
        for i, d in units.items():   # in index order
            address, data_address = live.get(d) or addresses(d)
            locations.append(UnitLocation(i, d, address, data_address, tokens.sign(op, gid, i, generation)))
        return GroupInfo(gid, length, locations, generation)

    # ------------------------------------------------------------------ the DataNode protocol

    def register(self, datanode_id: str, address: str, data_address: str = "", cluster_id: str = "",
                 storage_id: str = "", host_id: str = "", rack: str = "") -> str:
        """Returns this namespace's cluster id (the DataNode records it); a DataNode that joined
        another cluster is refused, and so is a second DataNode under the id of a live one with
        another data dir (``storage_id``): its empty block report would hide the real one's units.
        ``host_id`` and ``rack``: where it runs, for placement ("" from an older DataNode: the host
        of its address, the default rack)."""
        return self.locked(lambda: self.manager.register(datanode_id, address, data_address, cluster_id,
                                                          storage_id, self.cluster_id, host_id, rack)
                           or self.cluster_id)

    def heartbeat(self, datanode_id: str, address: str = "", used_bytes: int = 0, units: int = 0,
                  active_repairs: int = 0, stats: DataNodeStats | None = None,
                  data_address: str = "", deleted: Iterable[tuple[int, int, int]] = ()) -> HeartbeatReply:
        return self.locked(lambda: self.manager.heartbeat(datanode_id, address, used_bytes, units, active_repairs,
                                                           stats, data_address, deleted))

    def block_report(self, datanode_id: str, units: Iterable[tuple[int, int, int]], part: int = 0,
                     more: bool = False) -> dict[str, int]:
        """A part of a DataNode's full block report, claimed under one hold of the lock; at the
        last, if the map put units here that the report lacks, the scan for them runs off the
        lock (every group read: seconds at 10 M) and only their drop under it."""
        units = list(units)
        counts, reported = self.locked(lambda: self.manager.report_part(datanode_id, units, part, more))
        if reported is None:
            return counts
        missing = self.blocks.missing_candidates(datanode_id, reported)
        return self.locked(lambda: self.manager.finish_report(datanode_id, reported, missing, counts))

    def units_stored(self, datanode_id: str, units: Iterable[tuple[int, int, int]]) -> list[str]:
        """A DataNode's receipts for units it has just stored (a writer's, or a repair's); returns
        each one's outcome (``Claim`` values)."""
        units = list(units)

        def stored() -> list[str]:
            outcomes = self.manager.units_stored(datanode_id, units)
            if self.standby:   # receipts of groups this standby has not tailed yet: for a promotion
                self.early_receipts.extend((datanode_id, u) for u, o in zip(units, outcomes) if o == Claim.UNKNOWN)
            return [o.value for o in outcomes]
        return self.locked(stored)

    def unit_stored(self, datanode_id: str, group_id: int, index: int, generation: int) -> str:
        return self.units_stored(datanode_id, [(group_id, index, generation)])[0]

    def report_bad_units(self, units: Iterable[tuple[int, int, int, str, str]]) -> None:
        """(group id, unit index, generation, DataNode id, reason) of corrupt copies."""
        units = list(units)
        self.locked(lambda: self.manager.report_bad_units(units))

    # ------------------------------------------------------------------ a standby's

    def inherit_datanodes(self, other: "Namesystem") -> None:
        """What another Namesystem of this process heard from DataNodes (a standby built again
        after a demotion, or after its tail broke): who is live and registered, at which
        addresses. Locations come again with their next reports."""
        with self.lock:
            for node in other.liveness.all():
                self.liveness.adopt(node)
            self.manager.registered |= other.manager.registered & {n.id for n in other.liveness.all()}

    def follow(self, txid: int, record) -> None:
        """A record the active logged (a standby's tailer), applied as the active applied it."""
        with self.lock:
            self.journal.follow(txid, record)
            if isinstance(record, r.Delete):
                self.collector.step(COLLECT_INLINE)

    def promote(self, engine: Engine) -> None:
        """This standby becomes the active: its journal writes to ``engine`` from its last txid
        on; DataNodes that spoke to it are usable at once, and asked to report again before any
        delete goes to them (HDFS-6772); receipts of groups it had not tailed are applied now."""
        with self.lock:
            self.journal.engine = engine
            self.journal.start()
            self.standby = False
            self.manager.adopt({n.id: (n.address, n.data_address) for n in self.liveness.all()
                                if n.id in self.manager.registered or self.liveness.is_live(n.id)})
            self.safemode.start(Reason.FAILOVER)
            self.manager.started = self.clock()
            early, self.early_receipts = self.early_receipts, []
            for datanode_id, unit in early:
                try:
                    self.manager.units_stored(datanode_id, [unit])
                except Exception as err:   # a DataNode gone, a group gone: nothing to keep
                    log.debug("receipt replay from %s: %s", datanode_id, err)
        self.restart_leases()

    # ------------------------------------------------------------------ the monitor's pass

    def tick(self) -> list[InFlight]:
        """One pass of the monitor: expired retry-cache entries and deletes, leases expired,
        deleted trees' groups freed, then liveness changes, health and repair planning. Returns
        the repairs planned in this pass; each part holds the writers' lock for a bounded time."""
        now_ms = self.wall_ms()
        while self.locked(lambda: self.retry.expire(now_ms, EXPIRE_STEP)) >= EXPIRE_STEP:
            pass
        cutoff = now_ms - int(DELETE_TTL_S * 1000)
        while self.locked(lambda: self.manager.expire_deletes(cutoff, EXPIRE_STEP)) >= EXPIRE_STEP:
            pass
        if not self.standby:
            for file_id in self._expired_leases():
                self.locked(lambda: self._expire_lease(file_id))
        while self.collector.pending:
            self.locked(lambda: self.collector.step(COLLECT_STEP))
        if self.standby:
            return []
        while self.locked(self.manager.judge_step):   # a full health pass, a bounded step a hold
            pass
        return self.locked(lambda: self.manager.tick(self.default_block_size))

    def _expired_leases(self) -> list[int]:
        with self.lock:
            now = self.clock()
            return [fid for fid, lease in self.tree.writing.items() if now - lease.renewed > self.lease_timeout_s]

    def _expire_lease(self, file_id: int) -> None:
        lease = self.tree.writing.get(file_id)
        if lease is None or self.clock() - lease.renewed <= self.lease_timeout_s:
            return
        path = self.tree.lease_path(lease)
        self.log_record(r.Abandon(file_id))
        log.warning("lease on %s (file %d) expired: the writer is gone, abandoned it", path, file_id)

    # ------------------------------------------------------------------ administration

    def safe_mode_state(self) -> SafeModeState:
        return self.safemode.state()

    def safe_mode(self, action: str = "get") -> SafeModeState:
        """HDFS's ``dfsadmin -safemode get|enter|leave``."""
        def act() -> SafeModeState:
            if self.safemode.act(action):
                self.manager.scan_needed = True
            return self.safemode.state()
        return self.locked(act)

    def decommission(self, datanode_id: str) -> tuple[str, int]:
        """Start draining ``datanode_id``; (its state, units still mapped to it). Idempotent."""
        def start() -> tuple[str, int]:
            self.manager.check_decommission(datanode_id, self._widest_policy())
            if datanode_id not in self.leaving:
                self.log_record(r.Decommission(datanode_id, True))
                self.manager.placeable_changed()
                self.manager.scan_needed = True
                log.warning("decommissioning %s: no new units; its %d units are copied elsewhere", datanode_id,
                            self.manager.units_left(datanode_id))
            return self.manager.admin_state(datanode_id), self.manager.units_left(datanode_id)
        return self.locked(start)

    def recommission(self, datanode_id: str) -> tuple[str, int]:
        """Put ``datanode_id`` back in service (it takes new units again). Idempotent."""
        def stop() -> tuple[str, int]:
            if not self.liveness.knows(datanode_id):
                raise NotFound(f"no DataNode {datanode_id!r} (hedgefs admin report lists them)")
            if datanode_id in self.leaving:
                self.log_record(r.Decommission(datanode_id, False))
                self.manager.placeable_changed()
                self.manager.scan_needed = True
                log.warning("recommissioned %s: it takes new units again", datanode_id)
            return "", self.manager.units_left(datanode_id)
        return self.locked(stop)

    def admin_state(self, datanode_id: str) -> str:
        return self.manager.admin_state(datanode_id)

    def balance(self, max_bytes: int, threshold_pct: float = 10.0, restart: bool = False) -> BalanceState:
        """A step of the balancer (blocks/balancer.py): moves of at most ``max_bytes`` planned (0:
        only where things stand), ``restart`` a new balance (the map judged again from its start)."""
        if not 0 <= threshold_pct <= 100:
            raise InvalidArgument(f"balance threshold {threshold_pct:g} % is not between 0 and 100")
        if self.standby:
            raise FailedPrecondition("a standby plans no moves: ask the active NameNode")

        def step() -> BalanceState:
            if restart:
                self.manager.balancer.restart()
            return self.manager.balancer.step(max_bytes, threshold_pct)
        return self.locked(step)

    def _widest_policy(self) -> tuple[str, int]:
        """The policy in use (the default, a directory's, a file's) that needs the most DataNodes."""
        names = {self.default_policy} | {p for p, n in self.tree.by_policy.items() if n > 0 and p}
        names |= {d.policy for d in self.tree.subtree_dirs(self.tree.root) if d.policy}
        widths = sorted(((load_policy(n).units, n) for n in names), reverse=True)
        return widths[0][1], widths[0][0]

    # ------------------------------------------------------------------ operators' reads (reports.py)

    def fsck(self, path: str = "/") -> FsckReport:
        return self.reports.fsck(path)

    def report(self) -> ClusterReport:
        return self.reports.report()

    def status(self) -> ClusterStatus:
        return self.reports.status()

    def browse(self, path: str, after: str = "", limit: int = 500) -> FilePage | Listing:
        return self.reports.browse(path, after, limit)

    def datanode_units(self, datanode_id: str, limit: int = 200) -> UnitsPage | None:
        return self.reports.datanode_units(datanode_id, limit)

    def datanode_reads(self, datanode_ids: Iterable[str]) -> dict[str, ReadLatency]:
        return self.reports.datanode_reads(datanode_ids)

    def datanode_heartbeat_ages(self, datanode_ids: Iterable[str]) -> dict[str, float]:
        return self.reports.datanode_heartbeat_ages(datanode_ids)

XATTR_CREATE, XATTR_REPLACE = 1, 2   # setxattr(2)'s flags
XATTR_NAMESPACE = "user."            # the one namespace kept (trusted, security, system: the mount says ENOTSUP)


def _check_xattr_name(name: str) -> None:
    if not name.startswith(XATTR_NAMESPACE) or len(name) == len(XATTR_NAMESPACE):
        raise InvalidArgument(f"extended attribute {name!r}: only the user namespace is kept (user.NAME)")


def _check_version(path: str, existing: Node | None, version: Version) -> None:
    """The file a conversion rewrites must be the very one its client read."""
    if existing is None:
        raise NotFound(f"no such file or directory: {path}")
    if existing.is_dir:
        raise FailedPrecondition(f"is a directory: {path}")
    if (existing.length, existing.mtime) != tuple(version):
        raise FailedPrecondition(f"{path} changed during the conversion (now {existing.length} bytes, "
                                 f"mtime {existing.mtime}): left as it is")


def _groups_in(lengths: list[int], offset: int, length: int) -> tuple[range, int]:
    """(the indexes of the groups holding bytes [offset, offset + length), the first), for groups
    of these lengths in order. An empty span past the end: (an empty range, count)."""
    start, end = offset, offset + max(length, 1)
    first, last, at = len(lengths), len(lengths), 0
    for index, n in enumerate(lengths):
        if at < end and at + n > start:
            if first == len(lengths):
                first = index
            last = index + 1
        elif first != len(lengths):
            break
        at += n
    return range(first, last), first


__all__ = ["Namesystem", "GroupCommit", "DB_FILE", "Dir", "File"]
