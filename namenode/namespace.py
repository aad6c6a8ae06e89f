"""The namespace: directories and files in the ``inodes`` table, and their policies.

Everything here runs inside the caller's transaction (``Database.tx``) and knows nothing about
block groups: operations that free a file's groups take a ``release(file_ids)`` callback, called
before the inode rows go, in the same transaction.

A file being written has state 'writing' and is invisible to every lookup here; ``complete``
makes it visible, replacing (atomically) a complete file at the same path.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Callable

from hedgefs.ec.layout import block_size_for, check_block_size, group_data_size
from hedgefs.ec.policy import Policy, parse_policy
from hedgefs.namenode import paths
from hedgefs.namenode.db import ROOT_ID, Database
from hedgefs.namenode.errors import AlreadyExists, FailedPrecondition, InvalidArgument, NotFound

Release = Callable[[list[int]], None]
Version = tuple[int, int]   # (length, mtime_ms) of a complete file: what a reader saw


@lru_cache(maxsize=256)
def load_policy(name: str) -> Policy:
    """parse_policy, with its ValueError turned into INVALID_ARGUMENT."""
    try:
        return parse_policy(name)
    except ValueError as err:
        raise InvalidArgument(str(err)) from None


@dataclass(frozen=True)
class Inode:
    id: int
    parent: int | None
    name: str
    is_dir: bool
    policy: str | None
    length: int
    block_size: int
    state: str
    overwrite: bool
    mtime_ms: int
    lease_ms: int | None

    @classmethod
    def from_row(cls, row) -> "Inode":
        return cls(row["id"], row["parent"], row["name"], bool(row["is_dir"]), row["policy"],
                   row["length"], row["block_size"], row["state"], bool(row["overwrite"]),
                   row["mtime_ms"], row["lease_ms"])


@dataclass
class _Frame:
    """A directory a listing is inside of, and the last name listed in it."""

    id: int
    path: str
    policy: str
    after: str


@dataclass(frozen=True)
class Entry:
    """One file or directory as List and GetFileInfo show it (dirs: the effective policy)."""

    path: str
    is_dir: bool
    length: int
    policy: str
    block_size: int
    mtime_ms: int


class Namespace:
    def __init__(self, db: Database, *, default_policy: str, default_block_size: int,
                 wall_ms: Callable[[], int]):
        self.db = db
        self.default_policy = load_policy(default_policy).name
        self.default_block_size = default_block_size
        self.wall_ms = wall_ms

    # ------------------------------------------------------------------ lookups

    def _get(self, inode_id: int) -> Inode | None:
        row = self.db.one("SELECT * FROM inodes WHERE id = ?", (inode_id,))
        return Inode.from_row(row) if row else None

    def _child(self, parent_id: int, name: str) -> Inode | None:
        row = self.db.one("SELECT * FROM inodes WHERE parent = ? AND name = ? AND state = 'complete'",
                          (parent_id, name))
        return Inode.from_row(row) if row else None

    def _children(self, parent_id: int) -> list[Inode]:
        rows = self.db.query("SELECT * FROM inodes WHERE parent = ? AND state = 'complete' ORDER BY name",
                             (parent_id,))
        return [Inode.from_row(r) for r in rows]

    def _walk(self, path: str) -> list[Inode]:
        """The visible inodes from the root to ``path``; NOT_FOUND / not a directory otherwise."""
        node = self._get(ROOT_ID)
        chain, here = [node], paths.ROOT
        for part in paths.components(path):
            if not node.is_dir:
                raise FailedPrecondition(f"not a directory: {here}")
            here = paths.join(here, part)
            node = self._child(node.id, part)
            if node is None:
                raise NotFound(f"no such file or directory: {path}")
            chain.append(node)
        return chain

    def _parent_dir(self, path: str) -> list[Inode]:
        """The chain to the directory that holds (or would hold) non-root ``path``."""
        parent = paths.parent_of(path)
        try:
            chain = self._walk(parent)
        except NotFound:
            raise NotFound(f"no such file or directory: {parent}") from None
        if not chain[-1].is_dir:
            raise FailedPrecondition(f"not a directory: {parent}")
        return chain

    def lookup(self, path: str) -> Inode:
        return self._walk(path)[-1]

    def path_of(self, inode_id: int) -> str:
        names = []
        node = self._get(inode_id)
        while node is not None and node.id != ROOT_ID:
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
            return Entry(path, True, 0, dir_policy, 0, node.mtime_ms)
        return Entry(path, False, node.length, node.policy, node.block_size, node.mtime_ms)

    # ------------------------------------------------------------------ reads

    def stat(self, path: str) -> tuple[Inode, Entry]:
        chain = self._walk(path)
        node = chain[-1]
        return node, self._entry(node, path, self._effective_policy(chain, path)[0])

    def list_page(self, path: str, recursive: bool, start_after: str, limit: int,
                  max_bytes: int) -> tuple[list[Entry], bool]:
        """One page of a listing: up to ``limit`` entries after ``start_after`` (a path the last
        page ended with, "" = from the start), stopping early past about ``max_bytes``.
        Returns (entries, more). Depth first, names in byte order; iterative, so depth is no limit.

        A page resumes from the path alone: the directories on it are looked up again, and where
        one is gone the listing carries on after its name in the nearest one still there.
        """
        chain = self._walk(path)
        node = chain[-1]
        if not node.is_dir:
            return ([] if start_after else [self._entry(node, path, "")]), False
        policy = self._effective_policy(chain, path)[0]
        frames = self._resume(node, path, policy, start_after, recursive)
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
                if recursive and child.is_dir:
                    frames.append(_Frame(child.id, child_path, child_policy, ""))
                    descended = True
                    break
            if not descended and len(children) < want:
                frames.pop()
        return out, False

    def _resume(self, node: Inode, path: str, policy: str, start_after: str, recursive: bool) -> list["_Frame"]:
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
            if child is None or not child.is_dir:
                break   # gone (or a file): carry on after its name here
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

    def get_policy(self, path: str) -> tuple[str, str]:
        chain = self._walk(path)
        node = chain[-1]
        if not node.is_dir:
            return node.policy, path
        return self._effective_policy(chain, path)

    # ------------------------------------------------------------------ namespace changes

    def _touch(self, inode_id: int) -> None:
        self.db.conn.execute("UPDATE inodes SET mtime_ms = ? WHERE id = ?", (self.wall_ms(), inode_id))

    def mkdir(self, path: str, parents: bool) -> None:
        parts = paths.components(path)
        if not parts:
            if parents:
                return
            raise AlreadyExists("directory exists: /")
        node, here = self._get(ROOT_ID), paths.ROOT
        for i, part in enumerate(parts):
            last = i == len(parts) - 1
            here = paths.join(here, part)
            child = self._child(node.id, part)
            if child is None:
                if not last and not parents:
                    raise NotFound(f"no such file or directory: {paths.parent_of(path)}")
                cur = self.db.conn.execute(
                    "INSERT INTO inodes(parent, name, is_dir, mtime_ms) VALUES (?, ?, 1, ?)",
                    (node.id, part, self.wall_ms()))
                self._touch(node.id)
                child = self._get(cur.lastrowid)
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

    def delete(self, path: str, recursive: bool, release: Release) -> int:
        """Remove ``path``; returns how many files went. ``release`` frees their groups first."""
        if path == paths.ROOT:
            paths.check(path)
            raise InvalidArgument("cannot delete the root directory '/'")
        node = self.lookup(path)
        if node.is_dir and not recursive and self._children(node.id):
            raise FailedPrecondition(f"directory not empty: {path}")
        subtree = self._subtree(node.id)
        files = [i for i, is_dir in subtree if not is_dir]
        release(files)
        self._remove(node.id)
        self._touch(node.parent)
        return len(files)

    def rename(self, src: str, dst: str) -> None:
        node = self.lookup(src)
        if node.id == ROOT_ID:
            raise InvalidArgument("cannot rename the root directory '/'")
        if not paths.components(dst):
            raise AlreadyExists("directory exists: /")
        parent = self._parent_dir(dst)[-1]
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

    def set_policy(self, path: str, policy_name: str) -> str:
        """Set (or with "" clear) a directory's explicit policy; returns the canonical name."""
        node = self.lookup(path)
        if not node.is_dir:
            raise FailedPrecondition(f"not a directory: {path} (policies are set on directories)")
        name = load_policy(policy_name).name if policy_name else None
        self.db.conn.execute("UPDATE inodes SET policy = ? WHERE id = ?", (name, node.id))
        return name or ""

    # ------------------------------------------------------------------ write path

    def create(self, path: str, overwrite: bool, policy_name: str, block_size: int,
               convert_from: Version | None = None) -> tuple[Inode, Policy]:
        """Add an invisible 'writing' file; refuses what Complete would refuse, before data moves.

        ``convert_from`` (``ec convert``): the file at ``path`` must be that version, and the new
        policy another one; the new file will replace it (see ``complete``)."""
        if not paths.components(path):
            raise FailedPrecondition("is a directory: /")
        chain = self._parent_dir(path)
        name = path.rsplit("/", 1)[1]
        existing = self._child(chain[-1].id, name)
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
        cur = self.db.conn.execute(
            "INSERT INTO inodes(parent, name, is_dir, policy, block_size, state, overwrite, mtime_ms, lease_ms) "
            "VALUES (?, ?, 0, ?, ?, 'writing', ?, ?, ?)",
            (chain[-1].id, name, policy.name, block_size, int(overwrite), now, now))
        return self._get(cur.lastrowid), policy

    def file(self, file_id: int) -> Inode | None:
        node = self._get(file_id)
        return node if node is not None and not node.is_dir else None

    def writing(self, file_id: int) -> Inode:
        node = self.file(file_id)
        if node is None or node.state != "writing":
            raise NotFound(f"no file is being written with id {file_id} (completed, abandoned or expired)")
        return node

    def renew_lease(self, file_id: int) -> None:
        self.db.conn.execute("UPDATE inodes SET lease_ms = ? WHERE id = ?", (self.wall_ms(), file_id))

    def complete(self, file_id: int, length: int, release: Release, convert_from: Version | None = None) -> str:
        """Make a writing file visible, replacing a complete file at its path. Returns the path.

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
               move_groups: Callable[[list[int], int], None]) -> int:
        """Make the complete files ``sources`` one file at ``target`` (HDFS's concat, as a rename):
        the first part's inode becomes the target, the other parts' groups are appended to it in
        order (``move_groups(from_ids, to_id)``), and the other parts go. Returns the length.

        Every part but the last must end on a block group boundary, and all must share one policy
        and block size, so that every group but the last of the result is full.
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
            node = self.lookup(source)
            if node.is_dir:
                raise FailedPrecondition(f"is a directory: {source}")
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
        chain = self._parent_dir(target)
        name = target.rsplit("/", 1)[1]
        existing = self._child(chain[-1].id, name)
        mtime = self.wall_ms()
        if existing is not None:
            if existing.is_dir:
                raise FailedPrecondition(f"is a directory: {target}")
            if not overwrite:
                raise AlreadyExists(f"file exists: {target}")
            mtime = max(mtime, existing.mtime_ms + 1)   # a new version of the target: see complete
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

    def abandon(self, file_id: int, release: Release) -> bool:
        """Drop a writing file; False if there is none with that id."""
        node = self.file(file_id)
        if node is None or node.state != "writing":
            return False
        release([file_id])
        self._remove(file_id)
        return True

    def expired_leases(self, before_ms: int) -> list[int]:
        rows = self.db.query("SELECT id FROM inodes WHERE state = 'writing' AND lease_ms < ?", (before_ms,))
        return [r[0] for r in rows]
