"""Files being written: Create adds an invisible 'writing' file, Complete makes it visible
(replacing a complete file at its path atomically), Concat, Abandon and lease expiry. A mixin of
``Namespace``: it runs inside the caller's transaction, as the rest of the namespace does."""

from __future__ import annotations

from typing import Callable

from hedgefs.ec.layout import block_size_for, check_block_size, group_data_size
from hedgefs.ec.policy import Policy
from hedgefs.namenode import paths
from hedgefs.namenode.db import FILE_MODE
from hedgefs.namenode.errors import AlreadyExists, FailedPrecondition, InvalidArgument, NotFound, PermissionDenied
from hedgefs.namenode.inodes import SUPER, Inode, Release, Version, load_policy
from hedgefs.namenode.permissions import READ, WRITE, check, check_sticky
from hedgefs.security.identity import Identity

DETACHED = ".purge-"          # the name of a tree or file a delete cut loose (no parent), until purged


class FileWrites:
    """The write path of the namespace; the state (``db``, ``wall_ms``, lookups) is Namespace's."""

    def _detach(self, inode_id: int) -> None:
        """Cut a tree or a file loose in one row (purge.py empties it): no path reaches it."""
        self.db.conn.execute("UPDATE inodes SET parent = NULL, name = ? WHERE id = ?",
                             (f"{DETACHED}{inode_id}", inode_id))

    def _too_large(self, file_id: int, detach_over: int | None) -> bool:
        """Would removing this file at once touch more than ``detach_over`` rows (None: never
        detach)? A group costs its row (and one spare); a unit its row and the delete queued for it
        (and one spare); a delete its groups held back (a surplus or corrupt copy's) is made plain
        (blockmap.forget_files)."""
        if detach_over is None:
            return False
        groups, units, owed = self.db.one(
            "SELECT COUNT(*), (SELECT COUNT(*) FROM units u JOIN groups g ON g.id = u.group_id WHERE g.file_id = ?), "
            "(SELECT COUNT(*) FROM pending_deletes p JOIN groups g ON g.id = p.group_id WHERE g.file_id = ? "
            "AND p.stale != 0) FROM groups WHERE file_id = ?", (file_id, file_id, file_id))   # 0: deletes.PLAIN
        # (a literal: deletes.py imports the namespace, which this module is part of)
        return 1 + 2 * groups + 3 * units + owed > detach_over

    def _larger(self, inode_id: int, inodes: int) -> bool:
        """Has the tree more than ``inodes`` inodes? A walk of ``inodes + 1`` at most."""
        return self.db.one("WITH RECURSIVE sub(id) AS (SELECT ? UNION ALL SELECT i.id FROM inodes i "
                           "JOIN sub ON i.parent = sub.id LIMIT ?) SELECT COUNT(*) FROM sub",
                           (inode_id, inodes + 1))[0] > inodes

    def _writing_below(self, path: str) -> list[int]:
        """The files being written in the tree at ``path``: of every file being written (few, by
        index), those whose path is under it."""
        return [file_id for (file_id,) in self.db.query("SELECT id FROM inodes WHERE state = 'writing'")
                if paths.is_under(self.path_of(file_id), path)]

    def create(self, path: str, overwrite: bool, policy_name: str, block_size: int,
               convert_from: Version | None = None, who: Identity = SUPER) -> tuple[Inode, Policy]:
        """Add an invisible 'writing' file; refuses what Complete would refuse, before data moves.

        ``convert_from`` (``ec convert``): the file at ``path`` must be that version, and the new
        policy another one; the new file will replace it (see ``complete``), keeping its owner,
        group and mode. Permissions (HDFS): w on the parent, and on the file an overwrite or a
        conversion replaces."""
        if not paths.components(path):
            raise FailedPrecondition("is a directory: /")
        chain = self._parent_dir(path, who)
        name = path.rsplit("/", 1)[1]
        check(who, chain[-1], WRITE, paths.parent_of(path), f"create {path}")
        existing, writer = self._named(chain[-1].id, name)
        if convert_from is not None:
            self._check_version(path, existing, convert_from)
            if not policy_name:
                raise InvalidArgument("a conversion needs the policy to convert to")
            if load_policy(policy_name).name == existing.policy:
                raise InvalidArgument(f"{path} is already {existing.policy}: nothing to convert")
            overwrite = True
        if existing is not None:
            if existing.is_dir:
                raise FailedPrecondition(f"is a directory: {path}")
            if not overwrite:
                raise AlreadyExists(f"file exists: {path} (use -f to overwrite)")
            check(who, existing, WRITE, path, f"overwrite {path}")
        if writer is not None:   # one writer per path at a time (HDFS's lease: AlreadyBeingCreatedException)
            raise AlreadyExists(f"{path} is being written by {writer.owner or 'another client'} (file {writer.id}): "
                                f"try again when that write ends")
        if not policy_name:
            policy_name = self._effective_policy(chain, paths.parent_of(path))[0]
        policy = load_policy(policy_name)
        if block_size == 0:
            block_size = block_size_for(policy, self.default_block_size)
        try:
            check_block_size(policy, block_size)
        except ValueError as err:
            raise InvalidArgument(str(err)) from None
        now = self.wall_ms()
        row = self.db.conn.execute(
            "INSERT INTO inodes(parent, name, is_dir, policy, block_size, state, overwrite, mtime_ms, lease_ms, "
            "owner, grp, mode) VALUES (?, ?, 0, ?, ?, 'writing', ?, ?, ?, ?, ?, ?) RETURNING *",
            (chain[-1].id, name, policy.name, block_size, int(overwrite), now, now, who.name, chain[-1].group,
             FILE_MODE)).fetchall()[0]
        return Inode.from_row(row), policy

    _NAMED = ("SELECT * FROM inodes WHERE parent = ? AND name = ? AND state = 'complete' UNION ALL "
              "SELECT * FROM (SELECT * FROM inodes WHERE parent = ? AND name = ? AND state = 'writing' LIMIT 1)")

    def _named(self, parent_id: int, name: str) -> tuple[Inode | None, Inode | None]:
        """(the visible file or directory at the name, a file being written there): one query, for
        Create, which refuses a second writer of a path before any data moves rather than let the
        later writer's Complete win."""
        visible = writer = None
        for row in self.db.conn.execute(self._NAMED, (parent_id, name, parent_id, name)):
            if row["state"] == "complete":
                visible = Inode.from_row(row)
            else:
                writer = Inode.from_row(row)
        return visible, writer

    def file(self, file_id: int) -> Inode | None:
        node = self._get(file_id)
        return node if node is not None and not node.is_dir else None

    def writing(self, file_id: int, who: Identity = SUPER) -> Inode:
        """A write in progress, if it is ``who``'s (its creator holds its lease; an admin may too).
        A detached one (deleted, or abandoned, and too large to go at once) is being purged: none."""
        node = self.file(file_id)
        if node is None or node.state != "writing" or node.parent is None:
            raise NotFound(f"no file is being written with id {file_id} (completed, abandoned or expired)")
        if who.name != node.owner and not who.is_admin:
            raise PermissionDenied(f"permission denied: file {file_id} is being written by {node.owner}, "
                                   f"not by user {who.name}")
        return node

    def renew_lease(self, file_id: int) -> None:
        self.db.conn.execute("UPDATE inodes SET lease_ms = ? WHERE id = ?", (self.wall_ms(), file_id))

    def complete(self, file_id: int, length: int, release: Release, convert_from: Version | None = None,
                 detach_over: int | None = None) -> str:
        """Make a writing file visible, replacing a complete file at its path. Returns the path.
        A replaced file of more than ``detach_over`` rows is detached, then purged.

        A replacement's mtime is later than the replaced file's, even within one millisecond, so
        (length, mtime) names one version of a path's bytes; a conversion (``convert_from``, which
        the file must still be) keeps the mtime: the bytes are the same."""
        node = self.writing(file_id)
        path = self.path_of(file_id)
        existing = self._child(node.parent, node.name)
        mtime = self.wall_ms()
        if convert_from is not None:
            self._check_version(path, existing, convert_from)
            if length != existing.length:
                raise InvalidArgument(f"{path}: the conversion wrote {length} bytes of {existing.length}")
            mtime = existing.mtime_ms
        if existing is not None:
            if existing.is_dir:
                raise FailedPrecondition(f"is a directory: {path}")
            if not node.overwrite:
                raise AlreadyExists(f"file exists: {path} (use -f to overwrite)")
            if convert_from is None:
                mtime = max(mtime, existing.mtime_ms + 1)
            else:   # the same file in another layout: its owner, group and mode stay
                self.db.conn.execute("UPDATE inodes SET owner = ?, grp = ?, mode = ? WHERE id = ?",
                                     (existing.owner, existing.group, existing.mode, file_id))
            if self._too_large(existing.id, detach_over):
                self._detach(existing.id)
            else:
                release([existing.id])
                self._remove(existing.id)
        self.db.conn.execute(
            "UPDATE inodes SET state = 'complete', length = ?, mtime_ms = ?, lease_ms = NULL WHERE id = ?",
            (length, mtime, file_id))
        self._touch(node.parent)
        return path

    @staticmethod
    def _check_version(path: str, existing: Inode | None, version: Version) -> None:
        """The file a conversion rewrites must be the very one its client read."""
        if existing is None:
            raise NotFound(f"no such file or directory: {path}")
        if existing.is_dir:
            raise FailedPrecondition(f"is a directory: {path}")
        if (existing.length, existing.mtime_ms) != version:
            raise FailedPrecondition(f"{path} changed during the conversion (now {existing.length} bytes, "
                                     f"mtime {existing.mtime_ms}): left as it is")

    def concat(self, target: str, sources: list[str], overwrite: bool, release: Release,
               move_groups: Callable[[list[int], int], None], who: Identity = SUPER,
               detach_over: int | None = None) -> int:
        """Make the complete files ``sources`` one file at ``target`` (HDFS's concat, as a rename):
        the first part's inode becomes the target, the other parts' groups are appended to it in
        order (``move_groups(from_ids, to_id)``), and the other parts go. Returns the length. A
        replaced target of more than ``detach_over`` rows is detached, then purged (as complete).

        Every part but the last must end on a block group boundary, and all must share one policy
        and block size, so that every group but the last of the result is full.

        Permissions (HDFS): r on every part and w on its parent (the parts go), w on the
        target's parent, and on a target an overwrite replaces.
        """
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
            chain = self._walk(source, who)
            node = chain[-1]
            if node.is_dir:
                raise FailedPrecondition(f"is a directory: {source}")
            check(who, node, READ, source, f"concat {source}")
            check(who, chain[-2], WRITE, paths.parent_of(source), f"concat {source} (it goes)")
            check_sticky(who, chain[-2], node, paths.parent_of(source), source, "concat")
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
        chain = self._parent_dir(target, who)
        name = target.rsplit("/", 1)[1]
        check(who, chain[-1], WRITE, paths.parent_of(target), f"create {target}")
        existing = self._child(chain[-1].id, name)
        mtime = self.wall_ms()
        if existing is not None:
            if existing.is_dir:
                raise FailedPrecondition(f"is a directory: {target}")
            if not overwrite:
                raise AlreadyExists(f"file exists: {target}")
            mtime = max(mtime, existing.mtime_ms + 1)   # a new version of the target: see complete
            check(who, existing, WRITE, target, f"overwrite {target}")
            if self._too_large(existing.id, detach_over):
                self._detach(existing.id)
            else:
                release([existing.id])
                self._remove(existing.id)
        move_groups([p.id for p in parts[1:]], first.id)
        for node in parts[1:]:
            self._remove(node.id)
            self._touch(node.parent)
        length = sum(p.length for p in parts)
        self.db.conn.execute("UPDATE inodes SET parent = ?, name = ?, length = ?, mtime_ms = ? WHERE id = ?",
                             (chain[-1].id, name, length, mtime, first.id))
        self._touch(first.parent)
        self._touch(chain[-1].id)
        return length

    def abandon(self, file_id: int, release: Release, who: Identity = SUPER, detach_over: int | None = None) -> bool:
        """Drop a writing file; False if there is none with that id. One of more than ``detach_over``
        rows is detached, as a delete of it is (on etcd one change of its removal was refused)."""
        node = self.file(file_id)
        if node is None or node.state != "writing" or node.parent is None:   # (detached: being purged)
            return False
        self.writing(file_id, who)
        if self._too_large(file_id, detach_over):
            self._detach(file_id)
            return True
        release([file_id])
        self._remove(file_id)
        return True

    def expired_leases(self, before_ms: int) -> list[int]:
        """Files being written whose lease ended before ``before_ms`` (a detached one: being purged)."""
        rows = self.db.query("SELECT id FROM inodes WHERE state = 'writing' AND lease_ms < ? AND parent IS NOT NULL",
                             (before_ms,))
        return [r[0] for r in rows]
