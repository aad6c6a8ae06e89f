"""Applying a record: the only code that changes the namespace.

The active applies each record it logs (journal.py), a restart applies the records after its
checkpoint image, a standby the ones it tails from etcd: the same ``apply``, so the three end in
the same tree. Records are checked before they are logged (the namesystem's handlers): apply
trusts them, and a record it cannot apply is a bug (the journal stops: fail-stop).

Determinism: everything a change depends on is in the record (ids, times, owners) or in the
tree; nothing here reads a clock that the tree keeps (a lease's renewal time is memory only and
restarts when a NameNode starts serving).

Besides the tree (namespace/tree.py), a record changes what goes with it: the block map's groups
of files (their ids, their files, a writer's targets), the retry cache, the set of DataNodes
being decommissioned, the cluster's identity.
"""

from __future__ import annotations

import time
from typing import Callable

from hedgefs.namenode.blocks.blockmap import BlockMap
from hedgefs.namenode.blocks.collector import Collector
from hedgefs.namenode.journal import records as r
from hedgefs.namenode.namespace import paths
from hedgefs.namenode.namespace.inodes import DIR_MODE, LINK_MODE, Attrs, Dir, Extra, File, Lease, Link
from hedgefs.namenode.namespace.retry_cache import RetryCache
from hedgefs.namenode.namespace.tree import Tree


class Applier:
    """The journaled state, and ``apply``. ``leaving``: DataNodes being decommissioned."""

    def __init__(self, tree: Tree, blocks: BlockMap, retry_cache: RetryCache, collector: Collector,
                 clock: Callable[[], float] = time.monotonic, wall_ms: Callable[[], int] | None = None):
        self.tree, self.blocks, self.retry_cache, self.collector = tree, blocks, retry_cache, collector
        self.clock = clock
        self.wall_ms = wall_ms or (lambda: int(time.time() * 1000))
        self.cluster_id = ""
        self.leaving: set[str] = set()
        self.replaying = False   # a restart's replay, or a standby's: no receipts known, no deletes owed
        self._table = {
            r.Format: self._format, r.Mkdir: self._mkdir, r.Create: self._create, r.AddGroup: self._add_group,
            r.Complete: self._complete, r.Abandon: self._abandon, r.Delete: self._delete, r.Rename: self._rename,
            r.SetPolicy: self._set_policy, r.SetPermission: self._set_permission, r.SetOwner: self._set_owner,
            r.Concat: self._concat, r.Decommission: self._decommission, r.SetTimes: self._set_times,
            r.Symlink: self._symlink, r.SetXAttr: self._set_xattr, r.RemoveXAttr: self._remove_xattr,
            r.Reopen: self._reopen, r.Truncate: self._truncate, r.SyncLength: self._sync_length,
        }

    def apply(self, record: r.Record) -> None:
        self._table[type(record)](record)

    def _remember(self, record, answer=None) -> None:
        if record.retry is not None:
            self.retry_cache.remember(tuple(record.retry), r.CODES[type(record)], answer, self.wall_ms())

    def _dir(self, path: str) -> Dir:
        node = self.tree.find(path)
        if node is None or not node.is_dir:
            raise LookupError(f"no directory {path} to apply a record in")
        return node

    def _node(self, path: str):
        node = self.tree.find(path)
        if node is None:
            raise LookupError(f"no {path} to apply a record to")
        return node

    # ------------------------------------------------------------------ the records

    def _format(self, rec: r.Format) -> None:
        self.cluster_id = rec.cluster_id
        self.blocks.generation_base = rec.generation_base
        self.blocks.generation_first = rec.generation_base + 1

    def _mkdir(self, rec: r.Mkdir) -> None:
        tree = self.tree
        node = tree.root
        next_id = rec.first_id
        parts = paths.components(rec.path)
        for i, part in enumerate(parts):
            child = node.children.get(part)
            if child is None:
                mode = rec.mode if rec.mode is not None and i == len(parts) - 1 else DIR_MODE
                child = Dir(next_id, part, node, Attrs.of(rec.owner, node.attrs.group, mode), rec.mtime)
                next_id += 1
                tree.put(node, child)
                tree.set_fields(node, mtime=rec.mtime)
            node = child
        tree.next_id = max(tree.next_id, next_id)
        self._remember(rec)

    def _create(self, rec: r.Create) -> None:
        parent = self._dir(paths.parent_of(rec.path))
        name = rec.path.rsplit("/", 1)[1]
        file = File(rec.file_id, name, parent, Attrs.of(rec.owner, rec.group, rec.mode, rec.policy, rec.block_size),
                    rec.mtime)
        file.writer = Lease(rec.file_id, file, parent, bool(rec.overwrite), rec.owner, self.clock())
        tree = self.tree
        tree.add_lease(file.writer)
        tree.next_id = max(tree.next_id, rec.file_id + 1)
        self._remember(rec, (rec.file_id, rec.policy, rec.block_size))

    def _add_group(self, rec: r.AddGroup) -> None:
        lease = self.tree.writing[rec.file_id]
        group = self.blocks.add_group(lease.file, rec.group_id, rec.targets, rec.policy)
        self.tree.set_fields(lease.file, groups=lease.file.groups + (group,))
        if rec.policy:   # a Sync's open tail: this write's (the SyncLength it may log)
            lease.tail = rec.group_id
        lease.renewed = self.clock()
        self._remember(rec, (rec.group_id, tuple(rec.targets)))

    def _drop_lease(self, file_id: int) -> Lease:
        """A write ends: its open tail, if the base has it, is no longer being written."""
        lease = self.tree.drop_lease(file_id)
        if lease.tail in self.blocks.open_tails:
            self.blocks.open_tails.discard(lease.tail)
            if self.blocks.dirty is not None:   # health judges it again: repairable now
                self.blocks.dirty.add(lease.tail)
        return lease

    def _complete(self, rec: r.Complete) -> None:
        tree, blocks = self.tree, self.blocks
        lease = self._drop_lease(rec.file_id)
        file = lease.file
        shared = {g.id for g in lease.shared()}
        base = lease.base   # an append's or a truncate's: the version it replaces keeps its attributes
        by_id = {g.id: g for g in file.groups}
        if lease.tail in rec.groups and lease.tail not in by_id:   # the open tail kept instead of a short group (Writes.tail_kept)
            tail = base.groups[-1]
            by_id[tail.id] = tail
            shared.add(tail.id)   # the base's group, now this version's, as a shared one
        keep = tuple(by_id.pop(gid) for gid in rec.groups)
        for group in by_id.values():   # groups the writer gave up on (a short one the tail replaced)
            if group.id not in shared:
                blocks.forget(group)
        attrs = base.attrs if base is not None else file.attrs
        if rec.attrs is not None:
            attrs = Attrs.of(rec.attrs[0], rec.attrs[1], rec.attrs[2], file.attrs.policy, file.attrs.block_size)
        mtime, extra = _timed(rec.times or (-1, -1), rec.mtime, base.extra if base is not None else None)
        tree.set_fields(file, length=rec.length, groups=keep, writer=None, mtime=mtime, attrs=attrs, extra=extra)
        for group in keep:
            if group.id in shared:
                group.file = file   # the base's group, now this version's
            else:
                blocks.commit(group, delete_unreported=not self.replaying)
        old = tree.put(lease.parent, file)
        if old is not None:
            self.collector.release(old, keep=shared)
        tree.set_fields(lease.parent, mtime=rec.mtime)
        self._remember(rec)

    def _abandon(self, rec: r.Abandon) -> None:
        lease = self._drop_lease(rec.file_id)
        self._forget_new(lease)
        self._remember(rec)

    def _forget_new(self, lease: Lease) -> None:
        """The groups a write in progress made (not those it shares with the file it rewrites)."""
        for group in lease.file.groups[lease.kept:]:
            self.blocks.forget(group)

    def _delete(self, rec: r.Delete) -> None:
        tree = self.tree
        parent = self._dir(paths.parent_of(rec.path))
        node = tree.take(parent, rec.path.rsplit("/", 1)[1])
        appending = tree.writers.get((parent, node.name)) if not node.is_dir else None
        if appending is not None and appending.base is node:   # its append or truncate goes with it
            self._drop_lease(appending.file_id)
            self._forget_new(appending)
        tree.cut(node)
        tree.set_fields(parent, mtime=rec.mtime)
        if node.is_dir:   # writes in the tree: their writers are told "not found" from now on
            for file_id, lease in list(tree.writing.items()):
                if not tree.is_attached(lease.parent):
                    self._drop_lease(file_id)
                    self._forget_new(lease)
        self.collector.add(node)
        self._remember(rec)

    def _rename(self, rec: r.Rename) -> None:
        tree = self.tree
        src_parent = self._dir(paths.parent_of(rec.src))
        dst_parent = self._dir(paths.parent_of(rec.dst))
        node = tree.take(src_parent, rec.src.rsplit("/", 1)[1])
        tree.set_fields(node, name=rec.dst.rsplit("/", 1)[1])
        tree.put(dst_parent, node)
        tree.set_fields(src_parent, mtime=rec.mtime)
        tree.set_fields(dst_parent, mtime=rec.mtime)
        self._remember(rec)

    def _set_policy(self, rec: r.SetPolicy) -> None:
        node = self._node(rec.path)
        self.tree.set_fields(node, policy=rec.policy)
        self._remember(rec)

    def _set_permission(self, rec: r.SetPermission) -> None:
        node = self._node(rec.path)
        self.tree.set_fields(node, attrs=node.attrs.with_mode(rec.mode))
        self._remember(rec)

    def _set_owner(self, rec: r.SetOwner) -> None:
        node = self._node(rec.path)
        self.tree.set_fields(node, attrs=node.attrs.with_owner(rec.owner or node.attrs.owner,
                                                               rec.group or node.attrs.group))
        self._remember(rec)

    def _concat(self, rec: r.Concat) -> None:
        tree = self.tree
        parts = [self._node(p) for p in rec.sources]
        first = parts[0]
        groups = list(first.groups)
        length = first.length
        for part in parts[1:]:
            for group in part.groups:
                group.file = first
            groups.extend(part.groups)
            length += part.length
            parent = part.parent
            tree.take(parent, part.name)
            tree.set_fields(parent, mtime=rec.mtime)
        first_parent = first.parent
        tree.take(first_parent, first.name)
        tree.set_fields(first_parent, mtime=rec.mtime)
        target_parent = self._dir(paths.parent_of(rec.target))
        tree.set_fields(first, name=rec.target.rsplit("/", 1)[1], length=length, groups=tuple(groups),
                        mtime=rec.mtime)
        old = tree.put(target_parent, first)
        if old is not None:
            self.collector.release(old)
        tree.set_fields(target_parent, mtime=rec.mtime)
        self._remember(rec)

    def _set_times(self, rec: r.SetTimes) -> None:
        node = self._node(rec.path)
        mtime, extra = _timed((rec.mtime, rec.atime), node.mtime, node.extra)
        self.tree.set_fields(node, mtime=mtime, extra=extra)
        self._remember(rec)

    def _symlink(self, rec: r.Symlink) -> None:
        tree = self.tree
        parent = self._dir(paths.parent_of(rec.path))
        link = Link(rec.link_id, rec.path.rsplit("/", 1)[1], parent, Attrs.of(rec.owner, rec.group, LINK_MODE),
                    rec.mtime, rec.target)
        tree.put(parent, link)
        tree.set_fields(parent, mtime=rec.mtime)
        tree.next_id = max(tree.next_id, rec.link_id + 1)
        self._remember(rec)

    def _set_xattr(self, rec: r.SetXAttr) -> None:
        node = self._node(rec.path)
        xattrs = dict(node.extra.xattrs) if node.extra is not None else {}
        xattrs[rec.name] = bytes(rec.value)
        self.tree.set_fields(node, extra=_extra(node.extra, xattrs=xattrs))
        self._remember(rec)

    def _remove_xattr(self, rec: r.RemoveXAttr) -> None:
        node = self._node(rec.path)
        xattrs = dict(node.extra.xattrs) if node.extra is not None else {}
        xattrs.pop(rec.name, None)
        self.tree.set_fields(node, extra=_extra(node.extra, xattrs=xattrs))
        self._remember(rec)

    def _reopen(self, rec: r.Reopen) -> None:
        tree = self.tree
        base = self._node(rec.path)
        parent = base.parent
        file = File(base.id, base.name, parent, base.attrs, base.mtime, 0, base.groups[:rec.kept])
        file.writer = Lease(base.id, file, parent, True, rec.holder, self.clock(), base, rec.kept)
        tree.add_lease(file.writer)
        self._remember(rec, (base.id, rec.kept))

    def _sync_length(self, rec: r.SyncLength) -> None:
        tree, blocks = self.tree, self.blocks
        lease = tree.writing[rec.file_id]
        base, tail = lease.base, blocks.groups[rec.group_id]
        for index, datanode_id in rec.left_out:   # replicas that lack the bytes: out of the tail, deleted
            blocks.leave_out(tail, index, datanode_id)
        if not base.groups or base.groups[-1] is not tail:   # the tail takes the place of the partial group
            for group in base.groups[lease.kept:]:
                blocks.forget(group)
            tree.set_fields(lease.file, groups=tuple(g for g in lease.file.groups if g is not tail))
            tail.file = base
            tree.set_fields(base, groups=base.groups[:lease.kept] + (tail,), length=rec.length, mtime=rec.mtime)
            blocks.commit(tail, delete_unreported=not self.replaying)
            blocks.open_tails.add(tail.id)   # the base's, but still being written
        else:
            tree.set_fields(base, length=rec.length, mtime=rec.mtime)
        lease.renewed = self.clock()

    def _truncate(self, rec: r.Truncate) -> None:
        node = self._node(rec.path)
        groups = node.groups
        for group in groups[rec.kept:]:   # first: the block map counted them as the file was (zero units)
            self.blocks.forget(group)
        self.tree.set_fields(node, length=rec.length, groups=groups[:rec.kept], mtime=rec.mtime)
        self.tree.set_fields(node.parent, mtime=rec.mtime)
        self._remember(rec)

    def _decommission(self, rec: r.Decommission) -> None:
        if rec.leaving:
            self.leaving.add(rec.datanode_id)
        else:
            self.leaving.discard(rec.datanode_id)


_SAME = object()


def _timed(times: tuple[int, int], mtime: int, extra: Extra | None) -> tuple[int, Extra | None]:
    """(mtime, extra) once utimes' ``times`` (mtime, atime; -1: left as it is) are applied to
    an inode's ``mtime`` and ``extra`` (where its atime is kept): SetTimes, and a Complete's."""
    new_mtime, atime = times
    return mtime if new_mtime < 0 else new_mtime, extra if atime < 0 else _extra(extra, atime=atime)


def _extra(extra: Extra | None, atime=_SAME, xattrs=_SAME) -> Extra | None:
    """``extra`` with a field changed: a new object (see inodes.Extra), None when nothing is left."""
    was_atime, was_xattrs = (extra.atime, extra.xattrs) if extra is not None else (None, {})
    return Extra.of(was_atime if atime is _SAME else atime, was_xattrs if xattrs is _SAME else xattrs)
