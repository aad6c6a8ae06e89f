"""New files being written (HDFS's FSDirWriteFileOp): the namesystem's handlers for a write from
its Create to its Complete or Abandon, and for Concat.

    create        an invisible file being written, under its writer's lease; refuses what
                  Complete would refuse, before data moves (``create_and``: with its first
                  group, or whole and empty, in the same call)
    add_group     a new block group for a write in progress, every unit with a write token
    complete      the write made visible, once every group has enough units reported stored
                  (``await_receipts``: the wait for the DataNodes' receipts, the lock released)
    abandon       a write dropped (its groups freed by apply.py)
    concat        one file from parts, in one record
    expire_lease  a writer gone for longer than the lease: its write abandoned (the monitor)

Each handler runs under the writers' lock inside ``Namesystem.change`` (the retry cache, the wait
until durable) and logs at most one record; file_changes.py reopens complete files and ends such
writes through ``complete`` too.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections import OrderedDict
from typing import Iterable

from hedgefs.ec.layout import block_size_for, check_block_size, group_data_size, zero_units
from hedgefs.namenode.blocks.blockmap import GroupCommit, check_commit
from hedgefs.namenode.errors import AlreadyExists, FailedPrecondition, InvalidArgument, NameNodeError, NotFound, \
    PermissionDenied
from hedgefs.namenode.journal import records as r
from hedgefs.namenode.model import CommitAttrs, Created, GroupInfo
from hedgefs.namenode.namespace import paths
from hedgefs.namenode.namespace.inodes import FILE_MODE, SUPER, Lease, Node, Version, load_policy
from hedgefs.namenode.namespace.inodes import policy_name as canonical
from hedgefs.namenode.namespace.permissions import (
    READ,
    WRITE,
    check,
    check_chown,
    check_mode,
    check_owner,
    check_owner_names,
    check_sticky,
    check_times,
)
from hedgefs.namenode.namespace.retry_cache import MISS, step
from hedgefs.security import tokens as token_ops
from hedgefs.security.identity import Identity

log = logging.getLogger("hedgefs.namenode")

COMPLETED_KEPT = 100_000     # completed writes remembered (a Complete retried without retry ids)


class Writes:
    def __init__(self, ns):
        self.ns = ns   # the namesystem (its lock, journal and components)
        self.tree = ns.tree
        self.blocks = ns.blocks
        self.receipts = threading.Condition(ns.lock)   # notified when units are reported stored
        self.completed: OrderedDict[int, int] = OrderedDict()   # file id -> length, of recent Completes

    def create(self, path: str, overwrite: bool, policy_name: str, block_size: int, client_name: str,
                convert_from: Version | None, who: Identity, retry) -> Created:
        """Add an invisible file being written; refuses what Complete would refuse, before data moves.

        ``convert_from`` (``ec convert``): the file at ``path`` must be that version, and the new
        policy another one; the new file will replace it (see ``complete``), keeping its owner,
        group and mode. Permissions (HDFS): w on the parent, and on the file an overwrite or a
        conversion replaces."""
        self.ns.safemode.refuse(f"create {path}")
        parts = paths.components(path)
        if not parts:
            raise FailedPrecondition("is a directory: /")
        chain = self.tree.parent_dir(path, who, parts)
        parent = chain[-1]
        name = parts[-1]
        check(who, parent, WRITE, paths.parent_of(path), f"create {path}")
        existing = parent.children.get(name)
        if convert_from is not None:
            check_version(path, existing, convert_from)
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
            block_size = block_size_for(policy, self.ns.default_block_size)
        try:
            check_block_size(policy, block_size)
        except ValueError as err:
            raise InvalidArgument(str(err)) from None
        self.ns.manager.check_placeable(policy)
        file_id = self.tree.next_id
        name = canonical(policy_name)
        self.ns.log_record(r.Create(path, file_id, name, block_size, bool(overwrite), self.ns.wall_ms(), who.name,
                           parent.group, FILE_MODE, retry))
        log.debug("create %s: file %d, %s, block size %d, client %r (%s)%s", path, file_id, name,
                  block_size, client_name, who.name, " (a conversion)" if convert_from else "")
        return self.created(file_id, name, block_size)

    def create_and(self, created: Created, with_group: bool, empty: bool, who: Identity, retry) -> Created:
        """The rest of a fused create (under the lock, after its Create record or its retry's
        kept answer): each further record has a retry id of its own, derived from the call's, so
        a retry finishes what a crash between the records left undone and repeats nothing."""
        if not (with_group or empty):
            return created
        further = step(retry, "complete" if empty else "group")
        code = r.CODES[r.Complete if empty else r.AddGroup]
        kept = self.ns.retry.lookup(further, code, self.ns.wall_ms()) if further else MISS
        if kept is not MISS:
            return created if empty else dataclasses.replace(created, first_group=self.new_group(*kept))
        try:
            if empty:
                if created.file_id in self.tree.writing:   # else: completed already (a retry without ids)
                    self.complete(created.file_id, 0, [], None, who, further)
                return created
            return dataclasses.replace(created, first_group=self.add_group(created.file_id, (), who, further))
        except NameNodeError:
            # The caller learns no file id, so nobody could finish or abandon this write: it must
            # not hold the path for a lease's length.
            if created.file_id in self.tree.writing:
                self.ns.log_record(r.Abandon(created.file_id))
            raise

    def created(self, file_id: int, policy: str, block_size: int) -> Created:
        return Created(file_id, policy, block_size, int(self.ns.lease_timeout_s * 1000),
                       load_policy(policy).min_stored(self.ns.min_replicas))

    def writing(self, file_id: int, who: Identity = SUPER) -> Lease:
        """A write in progress, if it is ``who``'s (its creator holds its lease; an admin may too)."""
        lease = self.tree.writing.get(file_id)
        if lease is None:
            raise NotFound(f"no file is being written with id {file_id} (completed, abandoned or expired)")
        if who.name != lease.holder and not who.is_admin:
            raise PermissionDenied(f"permission denied: file {file_id} is being written by {lease.holder}, "
                                   f"not by user {who.name}")
        return lease

    def add_group(self, file_id: int, exclude: Iterable[str], who: Identity, retry, code: str = "") -> GroupInfo:
        """A new group at the end of the write; ``code``: its own (an open tail's: its units
        get append tokens, an APPEND at 0 creating each), else the file's."""
        self.ns.safemode.refuse("add a block group")
        lease = self.writing(file_id, who)
        policy = load_policy(code or lease.file.attrs.policy)
        unit_bytes = lease.file.attrs.block_size
        if code:   # an open tail's replica grows to a group's data (less a byte): room for that
            unit_bytes = group_data_size(load_policy(lease.file.attrs.policy), unit_bytes)
        targets = self.ns.manager.choose_targets(policy, exclude, unit_bytes)
        group_id = self.blocks.next_group_id
        self.ns.log_record(r.AddGroup(file_id, group_id, tuple(targets), retry, code))
        return self.new_group(group_id, targets, code)

    def new_group(self, group_id: int, targets, code: str = "") -> GroupInfo:
        generation = self.blocks.generation(group_id)
        op = token_ops.APPEND if code else token_ops.WRITE
        return GroupInfo(group_id, 0, [self.ns.location(j, d, group_id, generation, op)
                                       for j, d in enumerate(targets)], generation, code)

    def complete(self, file_id: int, length: int, groups: list[GroupCommit], convert_from: Version | None,
                  who: Identity, retry, attributes: CommitAttrs | None = None) -> None:
        """Make a write visible, replacing a complete file at its path, if every group has enough
        units reported stored. A replacement's mtime is later than the replaced file's, even within
        one millisecond, so (length, mtime) names one version of a path's bytes; a conversion
        (``convert_from``, which the file must still be) keeps the mtime and the owner, group and
        mode: the bytes are the same. ``attributes``: the chmod, chown and utimes made while it
        was written (``commit_attributes``), in the same record."""
        if self.done_before(file_id, length):
            return
        self.writing(file_id, who)       # someone else's write: refused before anything waits
        self.await_receipts(groups)
        if self.done_before(file_id, length):
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
                     policy.min_stored(self.ns.min_replicas), own, self.blocks.reported_units)
        self.ns.manager.settle(own.values(), file.attrs.block_size)
        path = self.tree.lease_path(lease)
        existing = lease.parent.children.get(file.name)
        if lease.base is not None and existing is not lease.base:   # (a delete drops the write: apply.py)
            raise FailedPrecondition(f"{path} was replaced while being appended to or truncated: this write goes")
        mtime, attrs = self.ns.wall_ms(), None
        if convert_from is not None:
            check_version(path, existing, convert_from)
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
        times = None
        if attributes is not None:
            attrs, times = commit_attributes(who, lease.base or file, attributes, path, attrs)
        kept = tuple(g.id for g in shared) + \
            tuple(c.group_id for c in groups if c.length > 0)   # an empty group goes (HDFS: an empty last block)
        tail = self.tail_kept(lease, length, groups, policy)
        if tail is not None:   # instead of the short group: see tail_kept
            kept = tuple(g.id for g in shared) + (tail.id,)
            log.info("complete %s: its last group %d lacks units, the open tail %d holds every byte with more "
                     "redundancy: the file keeps the tail as its last group", path, groups[-1].group_id, tail.id)
        self.ns.log_record(r.Complete(file_id, length, kept, mtime, attrs, retry, times=times))
        self.completed[file_id] = length
        if len(self.completed) > COMPLETED_KEPT:
            self.completed.popitem(last=False)
        log.debug("complete %s: file %d, %d bytes in %d groups", path, file_id, length, len(kept))

    def tail_kept(self, lease: Lease, length: int, groups: list[GroupCommit], policy):
        """The seal (issue 45): a Complete whose write has an open tail, swapped in as the file's
        last group, replaces it with the group the writer wrote over the same bytes in the file's
        code. That group may be short (the writer lost streams: it is taken with k units, as every
        Complete's is); then the tail, if it holds every byte of the group (the Complete's length
        is the last SyncLength's: close tail-syncs the bytes its replicas lack first) and has more
        redundancy (live replicas - 1 > stored units - k), is kept as the file's last group, in
        its own code, and the short group goes. None: the seal goes ahead. The replicas counted
        are those that took the last length: a SyncLength that names its replicas (close going on
        without one whose DataNode failed) left the others out of the tail.

        Both are judged by the NameNode's own view (review-seal S2): the units reported stored on
        live DataNodes, of the group (the writer's claim may be short of a late stream that still
        stored its unit, or name a DataNode dead since) and of the tail alike."""
        base = lease.base
        if not lease.tail or base is None or not base.groups or base.groups[-1].id != lease.tail:
            return None
        written = [c for c in groups if c.length > 0]
        if length != base.length or len(written) != 1:
            return None
        last, tail = written[0], base.groups[-1]
        group = self.blocks.get(last.group_id)
        if group is None:
            return None
        live = self.ns.liveness.is_live
        stored = {i for i, d in self.blocks.reported_units(group).items() if live(d)} | \
            zero_units(policy, last.length)
        if len(stored) >= policy.units:
            return None   # whole: the seal
        replicas = sum(1 for d in self.blocks.reported_units(tail).values() if live(d))
        return tail if replicas - 1 > len(stored) - policy.k else None

    def done_before(self, file_id: int, length: int) -> bool:
        """A Complete of this write succeeded already: True for its retry, a refusal otherwise."""
        if file_id in self.tree.writing or file_id not in self.completed:
            return False
        if self.completed[file_id] == length:
            return True
        raise FailedPrecondition(f"file {file_id} is already complete with length {self.completed[file_id]}")

    def await_receipts(self, groups: list[GroupCommit]) -> None:
        """Wait (the lock released meanwhile) until every unit the writer claims is reported, or
        ``receipt_wait_s`` passes. Receipts usually arrive before Complete: a DataNode sends one as
        soon as it has stored a unit, and the writer completes only after every unit is stored."""
        deadline = time.monotonic() + self.ns.receipt_wait_s
        blocks = self.blocks
        while True:
            waiting = 0
            for c in groups:
                group = blocks.get(c.group_id)
                pending = blocks.unreported.get(c.group_id) if group is not None else None
                if pending:   # (a dead DataNode's receipt is not worth waiting for)
                    waiting += sum(1 for i in c.stored_units if i in pending
                                   and self.ns.liveness.is_live(blocks.holder(group, i) or ""))
            left = deadline - time.monotonic()
            if not waiting or left <= 0:
                if waiting:
                    log.warning("complete: %d units claimed stored but not reported after %.1f s", waiting,
                                self.ns.receipt_wait_s)
                return
            self.receipts.wait(left)

    def concat(self, target: str, sources: list[str], overwrite: bool, who: Identity, retry) -> None:
        """HDFS's concat, as a rename: the first part becomes the target, the other parts' groups
        are appended to it in order, and the other parts go. Every part but the last must end on a
        block group boundary, and all must share one policy and block size, so that every group
        but the last of the result is full. Permissions (HDFS): r on every part and w on its
        parent (the parts go), w on the target's parent, and on a target an overwrite replaces."""
        self.ns.safemode.refuse(f"concat into {target}")
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
            self.ns.file_changes.refuse_rewritten(chain[-2], node, source, "concat")
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
        mtime = self.ns.wall_ms()
        if existing is not None:
            if existing.is_dir:
                raise FailedPrecondition(f"is a directory: {target}")
            if not overwrite:
                raise AlreadyExists(f"file exists: {target}")
            mtime = max(mtime, existing.mtime + 1)   # a new version of the target: see complete
            check(who, existing, WRITE, target, f"overwrite {target}")
            self.ns.file_changes.refuse_rewritten(parent, existing, target, "replace")
        self.ns.log_record(r.Concat(target, tuple(sources), mtime, retry))
        log.debug("concat %s: %d parts", target, len(sources))

    def abandon(self, file_id: int, who: Identity, retry) -> None:
        if file_id not in self.tree.writing:
            return
        self.writing(file_id, who)
        self.ns.log_record(r.Abandon(file_id, retry))
        log.debug("abandoned file %d", file_id)

    def expired_leases(self) -> list[int]:
        with self.ns.lock:
            now = self.ns.clock()
            return [fid for fid, lease in self.tree.writing.items() if now - lease.renewed > self.ns.lease_timeout_s]

    def expire_lease(self, file_id: int) -> None:
        lease = self.tree.writing.get(file_id)
        if lease is None or self.ns.clock() - lease.renewed <= self.ns.lease_timeout_s:
            return
        path = self.tree.lease_path(lease)
        self.ns.log_record(r.Abandon(file_id))
        log.warning("lease on %s (file %d) expired: the writer is gone, abandoned it", path, file_id)


def check_version(path: str, existing: Node | None, version: Version) -> None:
    """The file a conversion rewrites must be the very one its client read."""
    if existing is None:
        raise NotFound(f"no such file or directory: {path}")
    if existing.is_dir:
        raise FailedPrecondition(f"is a directory: {path}")
    if (existing.length, existing.mtime) != tuple(version):
        raise FailedPrecondition(f"{path} changed during the conversion (now {existing.length} bytes, "
                                 f"mtime {existing.mtime}): left as it is")


def commit_attributes(who: Identity, node: Node, attributes: CommitAttrs, path: str,
                      attrs: tuple | None) -> tuple[tuple, tuple | None]:
    """The Complete record's (owner, group, mode) and (mtime, atime) for a version committed with
    ``attributes`` (``node``: the file being written, or for an append the version it replaces;
    ``attrs``: what the commit gives it otherwise). Checked as chmod, chown and utimes are (the
    writer may set the times: it may write the file); a refusal names ``path``."""
    a = attributes
    owner, group, mode = attrs if attrs is not None else (node.owner, node.group, node.mode)
    try:
        if a.mode is not None:
            check_mode(a.mode)
        check_owner_names(a.owner, a.group)
    except InvalidArgument as err:
        raise InvalidArgument(f"{path}: {err}") from None
    times = None
    if a.mtime_ms is not None or a.atime_ms is not None:
        times = (-1 if a.mtime_ms is None else a.mtime_ms, -1 if a.atime_ms is None else a.atime_ms)
        check_times(path, *times)
    if a.mode is not None:
        check_owner(who, node, path, "change the mode of")
    check_chown(who, node, a.owner, a.group, path)
    attrs = (a.owner or owner, a.group or group, mode if a.mode is None else a.mode)
    return attrs, times
