"""The namesystem (HDFS's FSNamesystem): every NameNode RPC as a plain method, over components.

    tree        namespace/tree.py     directories, files, writes in progress (memory)
    journal     journal/journal.py    one record per change, group-committed (SQLite or etcd)
    applier     journal/apply.py      the only code that changes the tree (and what goes with it)
    retry       namespace/retry_cache.py  answers of retried calls (rebuilt from the records)
    blocks      blocks/blockmap.py    unit locations, pending deletes (memory only)
    manager     blocks/manager.py     the DataNode protocol, placement, repairs, decommission, health
    safe_mode   blocks/safe_mode.py
    expected    blocks/expected.py    the block reports awaited after a start or a promotion (reads wait on them)
    checkpointer journal/image.py     checkpoint images
    namespace_changes namespace_changes.py  mkdir, delete, rename, attributes, links, xattrs (the handlers)
    writes      writes.py             a new file's write: create, add group, complete, abandon; concat
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

import logging
import os
import random
import secrets
import threading
import time
import uuid
from typing import Callable, Iterable

from hedgefs.ec.layout import zero_units
from hedgefs.ec.policy import DEFAULT_POLICY
from hedgefs.namenode.batches import Batches
from hedgefs.namenode.blocks.balancer import BalanceState
from hedgefs.namenode.blocks.blockmap import BlockMap, Claim, GroupCommit
from hedgefs.namenode.blocks.collector import Collector
from hedgefs.namenode.blocks.early_receipts import EarlyReceipts
from hedgefs.namenode.blocks.expected import ExpectedReports
from hedgefs.namenode.blocks.liveness import Liveness
from hedgefs.namenode.blocks.manager import (  # noqa: F401 (tests)
    DELETE_RESEND_S,
    DELETE_TTL_S,
    REPORT_GRACE_S,
    BlockManager,
)
from hedgefs.namenode.blocks.repairs import InFlight, RepairScheduler
from hedgefs.namenode.blocks.safe_mode import Reason, SafeMode
from hedgefs.namenode.errors import FailedPrecondition, InvalidArgument, NameNodeError, NotFound
from hedgefs.namenode.file_changes import FileChanges
from hedgefs.namenode.ha.roles import NotActive
from hedgefs.namenode.journal import records as r
from hedgefs.namenode.journal.apply import Applier
from hedgefs.namenode.journal.image import Checkpointer
from hedgefs.namenode.journal.journal import Engine, Journal
from hedgefs.namenode.model import (
    ClusterReport,
    ClusterStatus,
    CommitAttrs,
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
from hedgefs.namenode.namespace.inodes import SUPER, Dir, Entry, File, Version, load_policy, with_xattrs
from hedgefs.namenode.namespace.permissions import READ, check
from hedgefs.namenode.namespace.retry_cache import MISS, RetryCache
from hedgefs.namenode.namespace.tree import LIST_PAGE, LIST_PAGE_BYTES, LIST_PAGE_MAX, Tree
from hedgefs.namenode import namespace_changes
from hedgefs.namenode.namespace_changes import NamespaceChanges
from hedgefs.namenode.reports import Reports
from hedgefs.namenode.writes import Writes
from hedgefs.security import tokens as token_ops
from hedgefs.security.identity import Identity, Refused
from hedgefs.security.tokens import BlockTokens

log = logging.getLogger("hedgefs.namenode")

DB_FILE = "namenode.db"
REPAIR_TIMEOUT_S = 60.0
RECEIPT_WAIT_S = 5.0         # how long Complete waits for receipts (the client's deadline is 10 s)
MIN_REPLICAS = 2             # a replicated block is durable once this many replicas are stored (HDFS's replication.min)
CHECKPOINT_EVERY = 200_000   # records between two checkpoint images
COLLECT_STEP = 2_000         # ... and per lock hold of the monitor (HDFS: 1,000 blocks an increment)
EXPIRE_STEP = 50_000         # pending deletes given up per lock hold


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
        self.early_receipts = EarlyReceipts()   # a standby's, of groups still to come
        self.active_hint: Callable[[], str] = lambda: ""   # a standby's: the active's address (ha/roles.py sets it)
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
                                    self._read_location, self.rng, ExpectedReports(data_dir, dead_interval_s, clock))
        self.manager.passive = standby
        self.health = self.manager.health
        self.checkpointer = Checkpointer(self.journal, self.lock, checkpoint_every)
        self.namespace_changes = NamespaceChanges(self)
        self.writes = Writes(self)
        self.manager.receipt_waiters = self.writes.receipts
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
            if safe_mode_share is not None and self.blocks.complete_groups:
                self.manager.expected.arm()
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
        pending = ""
        if any(len(g.units) < load_policy(g.policy).k if g.policy else   # (an open tail: its own k)
               len(g.units) + len(zero_units(policy, g.length)) < k for g in infos):
            if self.standby:   # an observer read: the active's map has what this one has not heard (yet)
                raise NotActive(self.active_hint())
            # Reports due: answered at once, marked; only a reader waits on the mark (a stat,
            # an rm, a HEAD need no locations), and a StatMany's other items are not held.
            pending = self.manager.expected.pending(path, self.manager.reports_due)
        self.seen()
        return FileInfo(entry, infos, first if span is not None else None, count, pending)

    def list_page(self, path: str, recursive: bool = False, start_after: str = "",
                  limit: int = 0, who: Identity = SUPER, xattrs: bool = False) -> tuple[list[Entry], bool]:
        """One page of a listing (``Tree.list_page``): (entries, more)."""
        limit = min(limit or LIST_PAGE, LIST_PAGE_MAX)
        out = self.tree.list_page(path, recursive, start_after, limit, LIST_PAGE_BYTES, who, xattrs,
                                  self.blocks.code_of)
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

    def mkdir(self, path: str, parents: bool = False, who: Identity = SUPER, retry=None,
              mode: int | None = None) -> Entry | None:
        """The directory's entry after the mkdir (what a stat would say: a mount asks no more);
        None for a retried call whose directory is gone since."""
        return self.change(retry, r.Mkdir, lambda: self._made_dir(path, parents, who, retry, mode),
                           lambda _kept: self._dir_entry(path, who))

    def _made_dir(self, path: str, parents: bool, who: Identity, retry, mode: int | None) -> Entry | None:
        self.namespace_changes.mkdir(path, parents, who, retry, mode)
        return self._dir_entry(path, who)

    def _dir_entry(self, path: str, who: Identity) -> Entry | None:
        """``path``'s entry if it is a directory ``who`` may stat (under the writers' lock)."""
        try:
            node, found = self.tree.stat(path, who)
        except NameNodeError:
            return None
        return found if node.is_dir else None

    def delete(self, path: str, recursive: bool = False, who: Identity = SUPER, retry=None) -> None:
        self.change(retry, r.Delete, lambda: self.namespace_changes.delete(path, recursive, who, retry))

    def rename(self, src: str, dst: str, who: Identity = SUPER, retry=None) -> None:
        self.change(retry, r.Rename, lambda: self.namespace_changes.rename(src, dst, who, retry))

    def set_policy(self, path: str, policy: str, who: Identity = SUPER, retry=None) -> None:
        self.change(retry, r.SetPolicy, lambda: self.namespace_changes.set_policy(path, policy, who, retry))

    def set_permission(self, path: str, mode: int, who: Identity = SUPER, retry=None) -> None:
        self.change(retry, r.SetPermission, lambda: self.namespace_changes.set_permission(path, mode, who, retry))

    def set_owner(self, path: str, owner: str = "", group: str = "", who: Identity = SUPER, retry=None) -> None:
        self.change(retry, r.SetOwner, lambda: self.namespace_changes.set_owner(path, owner, group, who, retry))

    def set_times(self, path: str, mtime_ms: int = -1, atime_ms: int = -1, who: Identity = SUPER,
                  retry=None) -> None:
        """HDFS's setTimes (utimes): -1 leaves a time as it is."""
        self.change(retry, r.SetTimes, lambda: self.namespace_changes.set_times(path, mtime_ms, atime_ms, who, retry))

    def symlink(self, target: str, path: str, who: Identity = SUPER, retry=None) -> None:
        """A symbolic link at ``path`` to ``target`` (HDFS's createSymlink; its parent must exist)."""
        self.change(retry, r.Symlink, lambda: self.namespace_changes.symlink(target, path, who, retry))

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
        self.change(retry, r.SetXAttr, lambda: self.namespace_changes.set_xattr(path, name, value, flags, who, retry))

    def remove_xattr(self, path: str, name: str, who: Identity = SUPER, retry=None) -> None:
        self.change(retry, r.RemoveXAttr, lambda: self.namespace_changes.remove_xattr(path, name, who, retry))

    # ------------------------------------------------------------------ the write path

    def create(self, path: str, overwrite: bool = False, policy: str = "", block_size: int = 0,
               client_name: str = "", convert_from: Version | None = None, who: Identity = SUPER,
               retry=None, with_group: bool = False, empty: bool = False) -> Created:
        """``with_group``: the file's first group placed in the same call (``Created.first_group``),
        so a small file's whole life is Create and Complete. ``empty``: a whole empty file, created
        and completed in this one call (no lease is left behind)."""
        return self.change(retry, r.Create,
                           lambda: self.writes.create_and(self.writes.create(path, overwrite, policy, block_size, client_name,
                                                                  convert_from, who, retry),
                                                     with_group, empty, who, retry),
                           lambda kept: self.writes.create_and(self.writes.created(*kept), with_group, empty, who, retry))

    def add_block_group(self, file_id: int, exclude: Iterable[str] = (), who: Identity = SUPER,
                        retry=None) -> GroupInfo:
        """A new group for a write in progress (the caller's), every unit with a write token."""
        return self.change(retry, r.AddGroup, lambda: self.writes.add_group(file_id, exclude, who, retry),
                           lambda kept: self.writes.new_group(kept[0], kept[1]))

    def renew_lease(self, file_id: int, who: Identity = SUPER) -> None:
        def renew() -> None:
            self.writes.writing(file_id, who).renewed = self.clock()
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
                 convert_from: Version | None = None, who: Identity = SUPER, retry=None,
                 attributes: CommitAttrs | None = None) -> None:
        self.change(retry, r.Complete,
                    lambda: self.writes.complete(file_id, length, groups, convert_from, who, retry, attributes))

    def concat(self, target: str, sources: list[str], overwrite: bool = False, who: Identity = SUPER,
               retry=None) -> None:
        """One file at ``target`` from the parts ``sources``, in one record: a reader sees no
        target (or the old one) until it is applied, then all of it."""
        self.change(retry, r.Concat, lambda: self.writes.concat(target, sources, overwrite, who, retry))

    def sync(self, file_id: int, path: str, length: int, groups: list[GroupCommit], who: Identity = SUPER,
             retry=None, exclude: tuple[str, ...] = ()) -> Reopened:
        """hflush/hsync (HDFS's fsync with UPDATE_LENGTH): the write so far becomes the file's, as
        Complete makes it, and the write goes on in the same call: an append to that version
        begins (``path``: where the write is), with the group its last, partial group is to be
        written again into (an EC file's open tail too, off ``exclude``). Three records, one wait
        until durable; Append's answer."""
        return self.change(retry, r.Complete,
                           lambda: self.file_changes.sync(file_id, path, length, groups, who, retry, exclude),
                           lambda _kept: self.file_changes.go_on(path, length, who, retry, exclude))

    def sync_length(self, file_id: int, length: int, group_id: int, who: Identity = SUPER,
                    replicas: tuple[int, ...] = ()) -> None:
        """hsync on an open tail (file_changes.sync_length): the file grows to ``length``, its
        bytes on every replica of the tail (or on ``replicas``, the others left out of it). One
        record, no retry id: a repeat changes nothing."""
        self.change(None, r.SyncLength,
                    lambda: self.file_changes.sync_length(file_id, length, group_id, who, replicas))

    def abandon(self, file_id: int, who: Identity = SUPER, retry=None) -> None:
        self.change(retry, r.Abandon, lambda: self.writes.abandon(file_id, who, retry))

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

    def mkdir_many(self, items: list[tuple], who: Identity = SUPER,
                   retries: list | None = None) -> list[Entry | NameNodeError | None]:
        """``mkdir`` of each (path, parents[, mode]): the directory's entry (None: see mkdir), or its refusal."""
        return self.batches.changes(r.Mkdir, "mkdir", items, retries,
                                    lambda item, retry: self._made_dir(item[0], item[1], who, retry,
                                                                       item[2] if len(item) > 2 else None),
                                    lambda item, _retry, _kept: self._dir_entry(item[0], who))

    def delete_many(self, items: list[tuple[str, bool]], who: Identity = SUPER,
                    retries: list | None = None) -> list[NameNodeError | None]:
        """``delete`` of each (path, recursive): None, or its refusal."""
        return self.batches.changes(r.Delete, "delete", items, retries,
                                    lambda item, retry: self.namespace_changes.delete(item[0], item[1], who, retry))

    def create_many(self, items: list[dict], who: Identity = SUPER,
                    retries: list | None = None) -> list[Created | NameNodeError]:
        """``create`` of each (a dict of its keyword arguments): its Created, or its refusal."""
        def one(kw: dict, retry) -> Created:
            fused = kw.get("with_group", False), kw.get("empty", False)
            return self.writes.create_and(self.writes.create(kw["path"], kw.get("overwrite", False), kw.get("policy", ""),
                                                 kw.get("block_size", 0), kw.get("client_name", ""), None, who,
                                                 retry), *fused, who, retry)

        def again(kw: dict, retry, kept) -> Created:
            return self.writes.create_and(self.writes.created(*kept), kw.get("with_group", False), kw.get("empty", False),
                                    who, retry)
        return self.batches.changes(r.Create, "create", items, retries, one, again)

    # ------------------------------------------------------------------ locations

    def location(self, index: int, datanode_id: str, group_id: int = 0, generation: int = 0,
                  op: int = token_ops.READ) -> UnitLocation:
        token = self.tokens.sign(op, group_id, index, generation) if self.tokens else b""
        return UnitLocation(index, datanode_id, self.liveness.address(datanode_id),
                            self.liveness.data_address(datanode_id), token)

    def _read_location(self, index: int, datanode_id: str, group_id: int, generation: int) -> UnitLocation:
        return self.location(index, datanode_id, group_id, generation, token_ops.READ)

    def group_info(self, group, length: int, k: int, keep_dead: bool = False, op: int | None = None) -> GroupInfo:
        gid = group.id
        code = self.blocks.code_of(gid)   # an open tail's own
        if code:
            k = load_policy(code).k
        units = self.manager.locations(group, k, keep_dead)
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
            return GroupInfo(gid, length, locations, generation, code)
        addresses = self.liveness.addresses
        locations = []
        for i, d in units.items():   # in index order
            address, data_address = live.get(d) or addresses(d)
            locations.append(UnitLocation(i, d, address, data_address, tokens.sign(op, gid, i, generation)))
        return GroupInfo(gid, length, locations, generation, code)

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
        missing = self.manager.claims.missing_candidates(datanode_id, reported)
        return self.locked(lambda: self.manager.finish_report(datanode_id, reported, missing, counts))

    def units_stored(self, datanode_id: str, units: Iterable[tuple[int, int, int]]) -> list[str]:
        """A DataNode's receipts for units it has just stored (a writer's, or a repair's); returns
        each one's outcome (``Claim`` values)."""
        units = list(units)

        def stored() -> list[str]:
            outcomes = self.manager.units_stored(datanode_id, units)
            if self.standby:   # receipts of groups this standby has not tailed yet: for a promotion
                self.early_receipts.keep(datanode_id, [u for u, o in zip(units, outcomes) if o == Claim.UNKNOWN])
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
                self.collector.step(namespace_changes.COLLECT_INLINE)

    def promote(self, engine: Engine) -> None:
        """This standby becomes the active: its journal writes to ``engine`` from its last txid
        on; DataNodes that spoke to it are usable at once, and asked to report again before any
        delete goes to them (HDFS-6772); receipts of groups it had not tailed are applied now."""
        with self.lock:
            self.journal.engine = engine
            self.journal.start()
            # Armed before ``standby`` is cleared: a lock-free file_info in between sees the
            # redirect or the wait, never a cold map answered as is.
            if self.safemode.share is not None:
                self.manager.expected.arm(n.id for n in self.liveness.all() if self.liveness.is_live(n.id))
            self.manager.adopt({n.id: (n.address, n.data_address) for n in self.liveness.all()
                                if n.id in self.manager.registered or self.liveness.is_live(n.id)})
            self.standby = False
            self.safemode.start(Reason.FAILOVER)
            self.manager.started = self.clock()
            for datanode_id, unit in self.early_receipts.drain():
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
            for file_id in self.writes.expired_leases():
                self.locked(lambda: self.writes.expire_lease(file_id))
        while self.collector.pending:
            self.locked(lambda: self.collector.step(COLLECT_STEP))
        if self.standby:
            return []
        while self.locked(self.manager.judge_step):   # a full health pass, a bounded step a hold
            pass
        return self.locked(lambda: self.manager.tick(self.default_block_size))

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
