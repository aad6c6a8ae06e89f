"""Files that change (issue 45): the namesystem's handlers for a complete file reopened for
writing, and for the end of such a write that a crashed writer left behind.

    append            HDFS's append: a new version of the file, copy-on-write, that shares its
                      full groups (``Reopened.kept_length``); the client writes the rest again
    truncate          a cut on a group boundary at once (one record); elsewhere as an append of
                      nothing after the kept bytes of the group the cut falls in
    rewrite_from      a write in place: the groups before the first changed one are kept
    sync              hflush/hsync: the write so far completed and an append to it begun, in
                      one call (Complete, Reopen and the new last group's AddGroup: one wait)
    recover_lease     HDFS's recoverLease: a crashed writer's write abandoned now
    refuse_rewritten  a file being changed is not moved or replaced meanwhile

The version being written is a write in progress like a new file's (namespace/tree.py: its
``Lease`` names the ``base`` it replaces and the groups it ``kept``); ``Writes.complete``
ends it, and apply.py applies the records. Each handler runs under the writers' lock inside
``Namesystem.change`` (the retry cache, the wait until durable), and logs at most one record.
"""

from __future__ import annotations

import dataclasses
import logging

from hedgefs.ec.layout import group_data_size
from hedgefs.namenode.errors import AlreadyExists, FailedPrecondition, InvalidArgument
from hedgefs.namenode.journal import records as r
from hedgefs.namenode.blocks.blockmap import GroupCommit
from hedgefs.namenode.model import GroupInfo, Reopened
from hedgefs.namenode.namespace import paths
from hedgefs.namenode.namespace.inodes import Dir, Node, load_policy
from hedgefs.namenode.namespace.permissions import WRITE, check
from hedgefs.namenode.namespace.retry_cache import MISS, step
from hedgefs.security.identity import Identity

log = logging.getLogger("hedgefs.namenode")


def tail_code(policy) -> str:
    """The code of an open tail of a file in ``policy``: REPLICATE-(m + 1), so that every hsynced
    byte survives the loss of as many DataNodes as the file's groups do ("" for a replicated
    file: its own groups are copies already)."""
    return "" if policy.replicated else f"REPLICATE-{policy.tolerance + 1}"


class FileChanges:
    def __init__(self, ns):
        self.ns = ns   # the namesystem (its lock, journal and components)
        self.tree = ns.tree

    def reopen(self, path: str, cut: int | None, client_name: str, who: Identity, retry,
               rewrite_from: int | None = None) -> Reopened | None:
        what = "append to" if cut is None else "truncate"
        self.ns.safemode.refuse(f"{what} {path}")
        chain = self.tree.walk(path, who)
        node = chain[-1]
        if node.is_dir:
            raise FailedPrecondition(f"is a directory: {path}")
        if node.is_link:
            raise InvalidArgument(f"{path} is a symbolic link (to {node.target}): {what} its target")
        check(who, node, WRITE, path, f"{what} {path}")
        parent = chain[-2]
        writer = self.tree.writers.get((parent, node.name))
        if writer is not None:
            raise AlreadyExists(f"{path} is being written by {writer.holder or 'another client'} "
                                f"(file {writer.file_id}): try again when that write ends")
        if cut is not None:
            if cut < 0 or cut > node.length:
                raise InvalidArgument(f"cannot truncate {path} to {cut} bytes: it has {node.length} "
                                      f"(truncate only shortens)")
            if cut == node.length:
                return None
        policy = load_policy(node.attrs.policy)
        full = group_data_size(policy, node.attrs.block_size)
        if rewrite_from is not None and not 0 <= rewrite_from <= node.length:
            raise InvalidArgument(f"cannot rewrite {path} from byte {rewrite_from}: it has {node.length}")
        end = node.length if cut is None else cut
        if rewrite_from is not None:
            end = rewrite_from
        kept = min(end // full, len(node.groups))
        if cut is not None and cut == kept * full:
            mtime = max(self.ns.wall_ms(), node.mtime + 1)   # a new version: see complete
            self.ns.log_record(r.Truncate(path, cut, kept, mtime, retry))
            log.debug("truncate %s to %d bytes: %d groups kept", path, cut, kept)
            return None
        self.ns.manager.check_placeable(policy)
        self.ns.log_record(r.Reopen(path, kept, who.name, retry))
        log.debug("%s %s (file %d): %d groups kept, %d bytes to rewrite, client %r (%s)", what, path, node.id,
                  kept, end - kept * full, client_name, who.name)
        return self.reopened(node.id)

    def refuse_rewritten(self, parent: Dir, node: Node, path: str, what: str) -> None:
        """A file being appended to or truncated is not moved or replaced meanwhile (its new
        version shares its groups); deleting it ends that write (apply.py)."""
        writer = self.tree.writers.get((parent, node.name))
        if writer is not None and writer.base is node:
            raise AlreadyExists(f"cannot {what} {path}: it is being appended to or truncated by "
                                f"{writer.holder or 'another client'}; try again when that write ends")

    def reopened(self, file_id: int) -> Reopened:
        lease = self.tree.writing.get(file_id)
        if lease is None or lease.base is None:
            raise FailedPrecondition(f"the append or truncate of file {file_id} has ended already")
        file, base = lease.file, lease.base
        full = group_data_size(load_policy(file.attrs.policy), file.attrs.block_size)
        return Reopened(self.ns.writes.created(file_id, file.attrs.policy, file.attrs.block_size), lease.kept * full,
                        base.length, base.mtime)

    def recover_lease(self, path: str, who: Identity, retry) -> bool:
        parts = paths.components(path)
        if not parts:
            raise FailedPrecondition("is a directory: /")
        parent = self.tree.parent_dir(path, who, parts)[-1]
        lease = self.tree.writers.get((parent, parts[-1]))
        if lease is None:
            return False
        if who.name != lease.holder and not who.is_admin:
            target = lease.base if lease.base is not None else parent
            check(who, target, WRITE, path if lease.base is not None else paths.parent_of(path),
                  f"recover the lease of {path}")
        self.ns.log_record(r.Abandon(lease.file_id, retry))
        log.warning("lease of %s (file %d, held by %s) recovered by %s: its write is abandoned", path,
                    lease.file_id, lease.holder, who.name)
        return True

    def sync(self, file_id: int, path: str, length: int, groups: list, who: Identity, retry,
             exclude: tuple[str, ...] = ()) -> Reopened:
        lease = self.ns.writes.writing(file_id, who)
        if self.tree.lease_path(lease) != path:
            raise InvalidArgument(f"file {file_id} is being written at {self.tree.lease_path(lease)}, not {path}")
        self.ns.writes.complete(file_id, length, groups, None, who, retry)
        return self.go_on(path, length, who, retry, exclude)

    def go_on(self, path: str, length: int, who: Identity, retry, exclude: tuple[str, ...] = ()) -> Reopened:
        """The rest of a sync after its Complete (its own, or its retry's kept answer): each
        further record has retry ids of its own, derived from the call's (``step``), so a retry
        finishes what a crash between the records left undone and repeats nothing."""
        again = step(retry, "reopen")
        kept = self.ns.retry.lookup(again, r.CODES[r.Reopen], self.ns.wall_ms()) if again else MISS
        reopened = self.reopened(kept[0]) if kept is not MISS else self.reopen(path, None, "", who, again)
        if reopened.length != length:
            raise FailedPrecondition(f"{path} changed during the sync: it has {reopened.length} bytes, not {length}")
        code = tail_code(load_policy(reopened.created.policy))
        if code:   # an erasure-coded file: the open tail, for the hsyncs that follow (sync_length)
            again = step(retry, "tail")
            kept = self.ns.retry.lookup(again, r.CODES[r.AddGroup], self.ns.wall_ms()) if again else MISS
            tail = (self.ns.writes.new_group(*kept, code) if kept is not MISS
                    else self._place_tail(reopened.created.file_id, exclude, who, again, code))
            if tail is not None:
                reopened = dataclasses.replace(reopened, tail=tail)
        if reopened.kept_length == length:
            return reopened   # it ends on a group boundary: nothing to write again yet
        first = step(retry, "group")
        kept = self.ns.retry.lookup(first, r.CODES[r.AddGroup], self.ns.wall_ms()) if first else MISS
        group = (self.ns.writes.new_group(*kept) if kept is not MISS
                 else self.ns.writes.add_group(reopened.created.file_id, (), who, first))
        return dataclasses.replace(reopened, created=dataclasses.replace(reopened.created, first_group=group))

    def _place_tail(self, file_id: int, exclude: tuple[str, ...], who: Identity, retry, code: str) -> GroupInfo | None:
        """The open tail's group, off ``exclude`` (DataNodes whose replica of the last one failed)
        when the others can hold it, else where placement puts it; None where no m + 1 DataNodes
        have room for a tail (a group's data each): the Complete is logged already, and a Sync is
        never refused for its tail (the write's hsyncs stay Syncs)."""
        for off in ((exclude, ()) if exclude else ((),)):
            try:
                return self.ns.writes.add_group(file_id, off, who, retry, code)
            except (FailedPrecondition, InvalidArgument) as err:
                refused = err
        log.info("file %d: no open tail placed (%s): its hsyncs stay Syncs", file_id, refused)
        return None

    def sync_length(self, file_id: int, length: int, group_id: int, who: Identity,
                    replicas: tuple[int, ...] = ()) -> None:
        """hsync on the write's open tail (``go_on`` placed it): every replica of the tail holds
        the file's bytes up to ``length``. The file the write rewrites grows to it, the tail taking
        its partial last group's place the first time (once every replica is reported stored: it
        is then readable from any of them; at the same length too: the same bytes); one record.
        Only this write's tail (``Lease.tail``: not a tail a recovered writer of the same file
        left, which a zombie of it might still append to). A length already recorded (a retry)
        changes nothing; a shorter one is refused, and so is a whole group's (a full group is
        sealed by a Sync: the tail never becomes a group the next append would keep).

        ``replicas``: the unit indexes that hold the bytes, when not every replica does (close
        going on without a replica whose DataNode failed in the write, as HDFS's pipeline
        recovery goes on with the DataNodes left; empty: every replica, an older client's
        meaning). The others leave the tail in the same record, their copies deleted: the tail
        then counts only the replicas that took the length (``Writes.tail_kept``). At least the
        tail code's min_stored of them, each still the tail's."""
        ns = self.ns
        ns.safemode.refuse("sync the length of a file")
        lease = ns.writes.writing(file_id, who)
        base, tail = lease.base, ns.blocks.get(group_id)
        if base is None or tail is None or group_id != lease.tail:
            raise FailedPrecondition(f"group {group_id} is not the open tail of the write of file {file_id}")
        full = group_data_size(load_policy(lease.file.attrs.policy), lease.file.attrs.block_size)
        start = lease.kept * full
        if not start <= length < start + full:
            raise InvalidArgument(f"file {file_id}: length {length} is outside its open tail "
                                  f"[{start}, {start + full})")
        first = tail.file is lease.file
        if length == base.length and not first:
            return   # recorded already (a retry)
        if length < base.length:
            raise FailedPrecondition(f"file {file_id} has {base.length} bytes: its open tail's length "
                                     f"{length} would lose some")
        code = load_policy(ns.blocks.code_of(group_id))
        held = ns.blocks.units(tail)
        took = set(replicas) if replicas else set(range(code.units) if first else held)   # (empty: every replica)
        if not took <= held.keys():
            raise FailedPrecondition(f"the open tail of file {file_id} has no replica {sorted(took - held.keys())}")
        if len(took) < code.min_stored(ns.min_replicas):
            held_by = f"{len(took)} replica holds" if len(took) == 1 else f"{len(took)} replicas hold"
            raise FailedPrecondition(f"the open tail of file {file_id}: {held_by} its length, "
                                     f"fewer than {code.min_stored(ns.min_replicas)}")
        if first:   # every replica that took it reported, or the tail is no use
            ns.writes.await_receipts([GroupCommit(group_id, length - start, tuple(took))])
            lease = ns.writes.writing(file_id, who)   # (the lock was released meanwhile)
            if lease.base is not base or lease.tail != group_id:
                raise FailedPrecondition(f"the write of file {file_id} changed during its hsync")
            if tail.file is base and base.length >= length:
                return   # a retry that arrived while this call waited, and won
            reported = ns.blocks.reported_units(tail).keys() & took
            if len(reported) < len(took):
                raise FailedPrecondition(f"the open tail of file {file_id} has {len(reported)} of its "
                                         f"{len(took)} replicas reported stored")
        left_out = tuple((i, d) for i, d in sorted(ns.blocks.units(tail).items()) if i not in took)
        mtime = max(ns.wall_ms(), base.mtime + 1)   # a new version: see Writes.complete
        ns.log_record(r.SyncLength(file_id, group_id, length, mtime, left_out))
        if left_out:
            log.info("sync length: file %d goes on without the open tail %d's replicas %s: they lack its %d bytes",
                     file_id, group_id, [f"{i} on {d}" for i, d in left_out], length)
        log.debug("sync length: file %d is %d bytes, its open tail %d", file_id, length, group_id)

