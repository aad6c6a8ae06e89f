"""The namespace: directories and files in the ``inodes`` table, and their policies.

Everything here runs inside the caller's transaction (``Database.tx``) and knows nothing about
block groups: operations that free a file's groups take a ``release(file_ids)`` callback, called
before the inode rows go, in the same transaction.

A file being written has state 'writing' and is invisible to every lookup here; ``complete``
makes it visible, replacing (atomically) a complete file at the same path.

Permissions (permissions.py) are checked here, where the chains of directories are walked, as
HDFS does: each operation names the caller (``who``) and checks what HDFS checks for it (noted
at each method). A new file or directory belongs to its creator and to its parent's group
(HDFS's BSD rule), mode 0644 or 0755 (HDFS's default umask, 022). The superuser (every caller of
an insecure cluster) passes every check.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from hedgefs.namenode import paths
from hedgefs.namenode.db import DIR_MODE, ROOT_ID, Database
from hedgefs.namenode.errors import AlreadyExists, FailedPrecondition, InvalidArgument, NotFound, PermissionDenied

# Entry and load_policy are imported from here by the rest of the NameNode.
from hedgefs.namenode.inodes import SUPER, Entry, Inode, Release, Version, load_policy  # noqa: F401
from hedgefs.namenode.permissions import EXECUTE, MAX_MODE, READ, WRITE, allowed, check, check_owner, check_sticky
from hedgefs.namenode.writes import DETACHED, FileWrites  # noqa: F401 (purge.py)
from hedgefs.security.identity import Identity, check_name

LIST_PAGE = 1000             # entries in a List page unless the caller asks for fewer
LIST_PAGE_MAX = 10000
LIST_PAGE_BYTES = 1 << 20    # a page stops past about this many bytes: far below the 4 MiB message limit


@dataclass
class _Frame:
    """A directory a listing is inside of, and the last name listed in it."""

    id: int
    path: str
    policy: str
    after: str


class Namespace(FileWrites):
    def __init__(self, db: Database, *, default_policy: str, default_block_size: int,
                 wall_ms: Callable[[], int]):
        self.db = db
        self.default_policy = load_policy(default_policy).name
        self.default_block_size = default_block_size
        self.wall_ms = wall_ms

    # ------------------------------------------------------------------ lookups

    def _get(self, inode_id: int) -> Inode | None:
        cache = self.db.cache
        if cache is None:
            row = self.db.one("SELECT * FROM inodes WHERE id = ?", (inode_id,))
            return Inode.from_row(row) if row else None
        node = cache.inode(inode_id)
        if node is None:
            floor = self.db.floor()
            row = self.db.one("SELECT * FROM inodes WHERE id = ?", (inode_id,))
            if row is None:
                return None
            node = Inode.from_row(row)
            cache.put_inode(node, floor)
        return node

    def _child(self, parent_id: int, name: str) -> Inode | None:
        """The visible child ``name`` of ``parent_id`` (from the row cache if it holds it)."""
        cache = self.db.cache
        if cache is None:
            row = self.db.one("SELECT * FROM inodes WHERE parent = ? AND name = ? AND state = 'complete'",
                              (parent_id, name))
            return Inode.from_row(row) if row else None
        node = cache.child(parent_id, name)
        if node is None:
            floor = self.db.floor()
            row = self.db.one("SELECT * FROM inodes WHERE parent = ? AND name = ? AND state = 'complete'",
                              (parent_id, name))
            if row is None:
                return None
            node = Inode.from_row(row)
            cache.put_inode(node, floor, visible=True)
        return node

    def _children(self, parent_id: int) -> list[Inode]:
        rows = self.db.query("SELECT * FROM inodes WHERE parent = ? AND state = 'complete' ORDER BY name",
                             (parent_id,))
        return [Inode.from_row(r) for r in rows]

    def _walk(self, path: str, who: Identity = SUPER) -> list[Inode]:
        """The visible inodes from the root to ``path``; NOT_FOUND / not a directory otherwise.
        Every directory passed through must let ``who`` traverse it (x), as HDFS checks."""
        parts = paths.components(path)
        chain = self._cached_chain(parts)
        if chain is not None:   # every inode from memory; the checks below as for any chain
            for i, node in enumerate(chain[:-1]):
                if not node.is_dir:
                    raise FailedPrecondition(f"not a directory: {'/' + '/'.join(parts[:i])}")
                if not allowed(who, node, EXECUTE):
                    check(who, node, EXECUTE, "/" + "/".join(parts[:i]), f"look up {path}")
            return chain
        node = self._get(ROOT_ID)
        chain = [node]
        for i, part in enumerate(parts):
            if not node.is_dir:
                raise FailedPrecondition(f"not a directory: {'/' + '/'.join(parts[:i])}")
            if not allowed(who, node, EXECUTE):
                check(who, node, EXECUTE, "/" + "/".join(parts[:i]), f"look up {path}")
            node = self._child(node.id, part)
            if node is None:
                raise NotFound(f"no such file or directory: {path}")
            chain.append(node)
        return chain

    def _cached_chain(self, parts: list[str]) -> list[Inode] | None:
        """The inodes from the root along ``parts`` if the row cache holds them all and may
        answer (one check for the walk, not one per entry: ``may_hit``, and nothing became
        visible or durable meanwhile); else None, and the walk goes entry by entry."""
        cache = self.db.cache
        if cache is None or not self.db.may_hit():
            return None
        stamp = self.db.stamp
        inodes, children = cache.inodes, cache.children
        node = inodes.get(ROOT_ID)
        chain = [node]
        for part in parts:
            if node is None or not node.is_dir:
                return None
            node = inodes.get(children.get((node.id, part)))
            chain.append(node)
        if node is None or self.db.stamp != stamp:
            return None
        return chain

    def _parent_dir(self, path: str, who: Identity = SUPER) -> list[Inode]:
        """The chain to the directory that holds (or would hold) non-root ``path``."""
        parent = paths.parent_of(path)
        try:
            chain = self._walk(parent, who)
        except NotFound:
            raise NotFound(f"no such file or directory: {parent}") from None
        if not chain[-1].is_dir:
            raise FailedPrecondition(f"not a directory: {parent}")
        return chain

    def lookup(self, path: str, who: Identity = SUPER) -> Inode:
        return self._walk(path, who)[-1]

    def path_of(self, inode_id: int) -> str:
        names = []
        node = self._get(inode_id)
        while node is not None and node.id != ROOT_ID:
            if node.parent is None:   # in a tree a delete detached (purge.py): no path reaches it
                return f"(deleted, being purged: inode {inode_id})"
            names.append(node.name)
            node = self._get(node.parent)
        return "/" + "/".join(reversed(names))

    def _effective_policy(self, chain: list[Inode], chain_path: str) -> tuple[str, str]:
        """(policy, source path): nearest explicit policy on the chain, else the cluster default."""
        where = chain_path
        for node in reversed(chain):
            if node.policy:
                return node.policy, where
            where = paths.parent_of(where) if where != paths.ROOT else where
        return self.default_policy, ""

    def _entry(self, node: Inode, path: str, dir_policy: str) -> Entry:
        if node.is_dir:
            return Entry(path, True, 0, dir_policy, 0, node.mtime_ms, node.owner, node.group, node.mode)
        return Entry(path, False, node.length, node.policy, node.block_size, node.mtime_ms, node.owner, node.group,
                     node.mode)

    # ------------------------------------------------------------------ reads

    def stat(self, path: str, who: Identity = SUPER, read_file: bool = False) -> tuple[Inode, Entry]:
        """Traverse; ``read_file``: a file must also be readable (its locations are asked for)."""
        chain = self._walk(path, who)
        node = chain[-1]
        if not node.is_dir:
            if read_file and not allowed(who, node, READ):
                check(who, node, READ, path, f"read {path}")
            return node, self._entry(node, path, "")
        return node, self._entry(node, path, self._effective_policy(chain, path)[0])

    def list_page(self, path: str, recursive: bool, start_after: str, limit: int,
                  max_bytes: int, who: Identity = SUPER) -> tuple[list[Entry], bool]:
        """One page of a listing: up to ``limit`` entries after ``start_after`` (a path the last
        page ended with, "" = from the start), stopping early past about ``max_bytes``.
        Returns (entries, more). Depth first, names in byte order; iterative, so depth is no limit.

        A page resumes from the path alone: the directories on it are looked up again, and where
        one is gone the listing carries on after its name in the nearest one still there.

        Permissions: ``path`` needs r-x (HDFS's listStatus); a recursive listing shows the entry
        of a subdirectory ``who`` may not list (r-x) but not what is inside it.
        """
        chain = self._walk(path, who)
        node = chain[-1]
        if not node.is_dir:
            return ([] if start_after else [self._entry(node, path, "")]), False
        check(who, node, READ | EXECUTE, path, f"list {path}")
        policy = self._effective_policy(chain, path)[0]
        frames = self._resume(node, path, policy, start_after, recursive, who)
        out: list[Entry] = []
        size = 0
        while frames:
            frame = frames[-1]
            want = limit - len(out)
            children = self._children_after(frame.id, frame.after, want)
            descended = False
            for child in children:
                child_path = paths.join(frame.path, child.name)
                child_policy = (child.policy or frame.policy) if child.is_dir else ""
                out.append(self._entry(child, child_path, child_policy))
                size += len(child_path) + 64
                frame.after = child.name
                if len(out) >= limit or size >= max_bytes:
                    return out, True
                if recursive and child.is_dir and allowed(who, child, READ | EXECUTE):
                    frames.append(_Frame(child.id, child_path, child_policy, ""))
                    descended = True
                    break
            if not descended and len(children) < want:
                frames.pop()
        return out, False

    def _resume(self, node: Inode, path: str, policy: str, start_after: str, recursive: bool,
                who: Identity) -> list["_Frame"]:
        """The directories a listing of ``path`` is inside of right after ``start_after``, outermost
        first, each with the name to carry on after."""
        frames = [_Frame(node.id, path, policy, "")]
        if not start_after:
            return frames
        rest = paths.components(start_after)[len(paths.components(path)):]
        if not paths.is_under(start_after, path) or not rest or (not recursive and len(rest) > 1):
            raise InvalidArgument(f"start_after {start_after!r} is not an entry of the listing of {path}")
        for name in rest:
            frame = frames[-1]
            frame.after = name
            if not recursive:
                break
            child = self._child(frame.id, name)
            if child is None or not child.is_dir or not allowed(who, child, READ | EXECUTE):
                break   # gone (or a file, or not ours to list): carry on after its name here
            frames.append(_Frame(child.id, paths.join(frame.path, name), child.policy or frame.policy, ""))
        return frames

    def _children_after(self, parent_id: int, after: str, limit: int) -> list[Inode]:
        rows = self.db.query("SELECT * FROM inodes WHERE parent = ? AND state = 'complete' AND name > ? "
                             "ORDER BY name LIMIT ?", (parent_id, after, limit))
        return [Inode.from_row(r) for r in rows]

    def files_under(self, path: str) -> list[tuple[int, str, str]]:
        """(file id, path, policy) of every complete file at or below ``path``, in path order."""
        node = self.lookup(path)
        if not node.is_dir:
            return [(node.id, path, node.policy)]
        out: list[tuple[int, str, str]] = []
        stack = [(node, path)]
        while stack:
            directory, dir_path = stack.pop()
            for child in reversed(self._children(directory.id)):
                child_path = paths.join(dir_path, child.name)
                if child.is_dir:
                    stack.append((child, child_path))
                else:
                    out.append((child.id, child_path, child.policy))
        out.sort(key=lambda f: f[1])
        return out

    def get_policy(self, path: str, who: Identity = SUPER) -> tuple[str, str]:
        chain = self._walk(path, who)
        node = chain[-1]
        if not node.is_dir:
            return node.policy, path
        return self._effective_policy(chain, path)

    # ------------------------------------------------------------------ namespace changes

    def _touch(self, inode_id: int) -> None:
        self.db.conn.execute("UPDATE inodes SET mtime_ms = ? WHERE id = ?", (self.wall_ms(), inode_id))

    def mkdir(self, path: str, parents: bool, who: Identity = SUPER) -> None:
        """Traverse, and w on the directory a new one goes into (HDFS: the nearest existing ancestor)."""
        parts = paths.components(path)
        if not parts:
            if parents:
                return
            raise AlreadyExists("directory exists: /")
        node, here = self._get(ROOT_ID), paths.ROOT
        for i, part in enumerate(parts):
            last = i == len(parts) - 1
            parent_path = here
            here = paths.join(here, part)
            if not allowed(who, node, EXECUTE):
                check(who, node, EXECUTE, parent_path, f"look up {path}")
            child = self._child(node.id, part)
            if child is None:
                if not last and not parents:
                    raise NotFound(f"no such file or directory: {paths.parent_of(path)}")
                check(who, node, WRITE, parent_path, f"create {here}")
                child = Inode.from_row(self.db.conn.execute(
                    "INSERT INTO inodes(parent, name, is_dir, mtime_ms, owner, grp, mode) VALUES (?, ?, 1, ?, ?, ?, ?) "
                    "RETURNING *", (node.id, part, self.wall_ms(), who.name, node.group, DIR_MODE)).fetchall()[0])
                self._touch(node.id)
            elif not child.is_dir:
                if last:
                    raise AlreadyExists(f"file exists: {here}")
                raise FailedPrecondition(f"not a directory: {here}")
            elif last and not parents:
                raise AlreadyExists(f"directory exists: {here}")
            node = child

    _SUBTREE = ("WITH RECURSIVE sub(id) AS (SELECT ? UNION ALL "
                "SELECT i.id FROM inodes i JOIN sub ON i.parent = sub.id) ")

    def _subtree(self, inode_id: int) -> list[tuple[int, bool]]:
        """(id, is_dir) of the inode and everything below it, files being written included."""
        rows = self.db.query(self._SUBTREE + "SELECT inodes.id, inodes.is_dir FROM inodes "
                             "JOIN sub ON inodes.id = sub.id", (inode_id,))
        return [(r[0], bool(r[1])) for r in rows]

    def _remove(self, inode_id: int) -> None:
        """Delete the inode and everything below it: one statement, as the parent foreign key is
        checked at the end of each statement (deleting in chunks, parents first, would break it)."""
        self.db.conn.execute(self._SUBTREE + "DELETE FROM inodes WHERE id IN (SELECT id FROM sub)", (inode_id,))

    def delete(self, path: str, recursive: bool, release: Release, who: Identity = SUPER,
               detach_over: int | None = None, detach_trees_over: int | None = None) -> int:
        """Remove ``path``; returns how many files went at once (a detached tree's go with its
        purge). ``release`` frees their groups first.

        A tree of more than ``detach_trees_over`` inodes, or a file whose removal would touch more
        than ``detach_over`` rows (on etcd, where one change must fit one transaction), is cut
        loose instead, in one change (purge.py empties it later): it gets no parent, so no path
        reaches it; only the files being written in a tree go at once.

        Permissions (HDFS): w on the parent (and the sticky rule), and rwx on every directory of
        a tree removed with it, so nobody removes what they could not remove piece by piece."""
        if path == paths.ROOT:
            paths.check(path)
            raise InvalidArgument("cannot delete the root directory '/'")
        chain = self._walk(path, who)
        node, parent = chain[-1], chain[-2]
        check(who, parent, WRITE, paths.parent_of(path), f"delete {path}")
        check_sticky(who, parent, node, paths.parent_of(path), path, "delete")
        if node.is_dir and not recursive and self._children(node.id):
            raise FailedPrecondition(f"directory not empty: {path}")
        if node.is_dir and not who.is_admin:
            self._check_subtree(node, path, who)
        if node.is_dir and detach_trees_over is not None and self._larger(node.id, detach_trees_over):
            files = self._writing_below(self.path_of(node.id))
            release(files)   # a writer in the tree is told "not found", as after a delete
            self.db.conn.executemany("DELETE FROM inodes WHERE id = ?", [(i,) for i in files])
            self._detach(node.id)
        elif not node.is_dir and self._too_large(node.id, detach_over):
            files = []
            self._detach(node.id)
        else:
            subtree = self._subtree(node.id) if node.is_dir else [(node.id, False)]   # a file has no children
            files = [i for i, is_dir in subtree if not is_dir]
            release(files)
            self._remove(node.id)
        self._touch(node.parent)
        return len(files)

    def _check_subtree(self, node: Inode, path: str, who: Identity) -> None:
        rows = self.db.query(self._SUBTREE + "SELECT inodes.* FROM inodes JOIN sub ON inodes.id = sub.id "
                             "WHERE inodes.is_dir = 1 AND inodes.state = 'complete'", (node.id,))
        for row in rows:
            sub = Inode.from_row(row)
            if not allowed(who, sub, READ | WRITE | EXECUTE):
                where = self.path_of(sub.id)
                check(who, sub, READ | WRITE | EXECUTE, where, f"delete {path} (it holds {where})")

    def rename(self, src: str, dst: str, who: Identity = SUPER) -> None:
        """Permissions (HDFS): w on the source's parent (and the sticky rule), w on the target's."""
        chain = self._walk(src, who)
        node = chain[-1]
        if node.id == ROOT_ID:
            raise InvalidArgument("cannot rename the root directory '/'")
        check(who, chain[-2], WRITE, paths.parent_of(src), f"move {src}")
        check_sticky(who, chain[-2], node, paths.parent_of(src), src, "move")
        if not paths.components(dst):
            raise AlreadyExists("directory exists: /")
        parent = self._parent_dir(dst, who)[-1]
        check(who, parent, WRITE, paths.parent_of(dst), f"move {src} to {dst}")
        name = dst.rsplit("/", 1)[1]
        existing = self._child(parent.id, name)
        if existing is not None:
            kind = "directory" if existing.is_dir else "file"
            raise AlreadyExists(f"{kind} exists: {dst}")
        if node.is_dir and paths.is_under(dst, src):
            raise InvalidArgument(f"cannot move directory {src} into itself: {dst}")
        self.db.conn.execute("UPDATE inodes SET parent = ?, name = ? WHERE id = ?", (parent.id, name, node.id))
        self._touch(node.parent)
        self._touch(parent.id)

    def set_policy(self, path: str, policy_name: str, who: Identity = SUPER) -> str:
        """Set (or with "" clear) a directory's explicit policy; returns the canonical name.
        Needs w on the directory (HDFS)."""
        node = self.lookup(path, who)
        if not node.is_dir:
            raise FailedPrecondition(f"not a directory: {path} (policies are set on directories)")
        check(who, node, WRITE, path, f"set the policy of {path}")
        name = load_policy(policy_name).name if policy_name else None
        self.db.conn.execute("UPDATE inodes SET policy = ? WHERE id = ?", (name, node.id))
        return name or ""

    def set_permission(self, path: str, mode: int, who: Identity = SUPER) -> None:
        """chmod: the owner or the superuser (HDFS)."""
        if not 0 <= mode <= MAX_MODE:
            raise InvalidArgument(f"bad mode {mode:o}: 0 to {MAX_MODE:o} (rwx for owner, group, others; 1000 = sticky)")
        node = self.lookup(path, who)
        check_owner(who, node, path, "change the mode of")
        self.db.conn.execute("UPDATE inodes SET mode = ? WHERE id = ?", (mode, node.id))

    def set_owner(self, path: str, owner: str, group: str, who: Identity = SUPER) -> None:
        """chown: a new owner only by the superuser; a new group by the superuser, or by the owner
        if it is one of the owner's groups (HDFS)."""
        if not owner and not group:
            raise InvalidArgument("chown needs an owner, a group, or both")
        for name, what in ((owner, "user"), (group, "group")):
            if name:
                try:
                    check_name(name, what)
                except ValueError as err:
                    raise InvalidArgument(str(err)) from None
        node = self.lookup(path, who)
        if owner and owner != node.owner and not who.is_admin:
            raise PermissionDenied(f"permission denied: only an admin may give {path} to another user "
                                   f"(user {who.name} is not one)")
        if group and group != node.group and not who.is_admin:
            check_owner(who, node, path, "change the group of")
            if group not in who.groups:
                raise PermissionDenied(f"permission denied: user {who.name} is not in group {group}")
        self.db.conn.execute("UPDATE inodes SET owner = ?, grp = ? WHERE id = ?",
                             (owner or node.owner, group or node.group, node.id))
