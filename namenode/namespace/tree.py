"""The namespace tree in memory (HDFS's FSDirectory): lookups, path walks with their permission
checks, listings; and the few primitives journal/apply.py changes it with.

Readers take no lock. A walk is a chain of dict lookups, each atomic under the GIL, and apply
publishes only complete objects: a new file is in its parent's children with every field set, a
renamed one is put at its new name before it leaves the old (a reader may see it twice for an
instant, never half-made). What a reader saw may not be durable yet: the namesystem answers it
only once the journal says so (``Journal.wait_durable``).

Copy-on-write for checkpoints (journal/image.py): while ``snapshot`` is set, a primitive first
hands the snapshot what it is about to change (a directory's children, a node's fields), so the
image written meanwhile, off the lock, is the tree as it was at the snapshot's txid.

Permissions (permissions.py) are checked where chains of directories are walked, as HDFS does.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Callable, Iterator

from hedgefs.namenode.errors import FailedPrecondition, InvalidArgument, NotFound
from hedgefs.namenode.namespace import paths
from hedgefs.namenode.namespace.inodes import (
    DIR_MODE,
    SUPER,
    SUPERGROUP,
    Attrs,
    Dir,
    Entry,
    File,
    Lease,
    Node,
    entry,
    with_xattrs,
)
from hedgefs.namenode.namespace.permissions import EXECUTE, READ, allowed, check
from hedgefs.security.identity import SUPERUSER, Identity

ROOT_ID = 1
LIST_PAGE = 1000             # entries in a List page unless the caller asks for fewer
LIST_PAGE_MAX = 10000
LIST_PAGE_BYTES = 1 << 20    # a page stops past about this many bytes: far below the 4 MiB message limit


@dataclass
class _Frame:
    """A directory a listing is inside of, and the last name listed in it."""

    dir: Dir
    path: str
    policy: str
    after: str


class Tree:
    """The root, the files being written (by file id), the next inode id."""

    def __init__(self, default_policy: str, superuser: str = SUPERUSER):
        self.default_policy = default_policy
        self.root = Dir(ROOT_ID, "", None, Attrs.of(superuser, SUPERGROUP, DIR_MODE), 0)
        self.writing: dict[int, Lease] = {}
        self.writers: dict[tuple[Dir, str], Lease] = {}   # (directory, name) -> its write in progress
        self.next_id = ROOT_ID + 1     # the next inode id to issue
        self.files = 0                 # complete files
        self.dirs = 1                  # directories, the root included
        self.by_policy: Counter[str] = Counter()   # complete files by policy
        self.snapshot = None           # a journal.image.Snapshot while a checkpoint is written

    # ------------------------------------------------------------------ lookups (no lock)

    def walk(self, path: str, who: Identity = SUPER, parts: list[str] | None = None) -> list[Node]:
        """The visible nodes from the root to ``path`` (``parts``: its components, if the caller
        has them); NOT_FOUND / not a directory otherwise. Every directory passed through must let
        ``who`` traverse it (x), as HDFS checks."""
        if parts is None:
            parts = paths.components(path)
        node: Node = self.root
        chain = [node]
        admin = who.is_admin
        for i, part in enumerate(parts):
            if not node.is_dir:
                raise FailedPrecondition(f"not a directory: {'/' + '/'.join(parts[:i])}")
            if not admin and not allowed(who, node, EXECUTE):
                check(who, node, EXECUTE, "/" + "/".join(parts[:i]), f"look up {path}")
            node = node.children.get(part)
            if node is None:
                raise NotFound(f"no such file or directory: {path}")
            chain.append(node)
        return chain

    def lookup(self, path: str, who: Identity = SUPER) -> Node:
        return self.walk(path, who)[-1]

    def find(self, path: str) -> Node | None:
        """The node at a valid ``path``, or None (no checks: apply's and the handlers' lookup)."""
        node: Node | None = self.root
        if path == paths.ROOT:
            return node
        for part in path[1:].split("/"):
            if node is None or not node.is_dir:
                return None
            node = node.children.get(part)
        return node

    def parent_dir(self, path: str, who: Identity = SUPER, parts: list[str] | None = None) -> list[Node]:
        """The chain to the directory that holds (or would hold) non-root ``path`` (``parts``: its
        components, if the caller has them)."""
        parent = paths.parent_of(path)
        try:
            chain = self.walk(parent, who, parts[:-1] if parts is not None else None)
        except NotFound:
            raise NotFound(f"no such file or directory: {parent}") from None
        if not chain[-1].is_dir:
            raise FailedPrecondition(f"not a directory: {parent}")
        return chain

    def path_of(self, node: Node) -> str:
        """The path of a node; of one in a tree a delete cut loose, a note saying so."""
        names = []
        while node is not self.root:
            if node.parent is None:
                return f"(deleted: {node.name})"
            names.append(node.name)
            node = node.parent
        return "/" + "/".join(reversed(names))

    def lease_path(self, lease: Lease) -> str:
        return paths.join(self.path_of(lease.parent), lease.file.name)

    def add_lease(self, lease: Lease) -> None:
        self.writing[lease.file_id] = lease
        self.writers[(lease.parent, lease.file.name)] = lease

    def drop_lease(self, file_id: int) -> Lease:
        lease = self.writing.pop(file_id)
        if self.writers.get((lease.parent, lease.file.name)) is lease:
            del self.writers[(lease.parent, lease.file.name)]
        return lease

    def is_attached(self, node: Node) -> bool:
        """Is ``node`` in the tree (not under something a delete cut loose)? A file being written
        is when its directory is."""
        if not node.is_dir and node.writer is not None:
            node = node.writer.parent
        root = self.root
        while node is not root:
            parent = node.parent
            if parent is None or parent.children.get(node.name) is not node:
                return False
            node = parent
        return True

    def effective_policy(self, chain: list[Node], chain_path: str) -> tuple[str, str]:
        """(policy, source path): nearest explicit policy on the chain, else the cluster default."""
        where = chain_path
        for node in reversed(chain):
            if node.is_dir and node.policy:
                return node.policy, where
            where = paths.parent_of(where) if where != paths.ROOT else where
        return self.default_policy, ""

    def stat(self, path: str, who: Identity = SUPER, read_file: bool = False) -> tuple[Node, Entry]:
        """Traverse; ``read_file``: a file must also be readable (its locations are asked for)."""
        chain = self.walk(path, who)
        node = chain[-1]
        if not node.is_dir:
            if read_file and not who.is_admin and not allowed(who, node, READ):
                check(who, node, READ, path, f"read {path}")
            return node, entry(node, path)
        return node, entry(node, path, self.effective_policy(chain, path)[0])

    def get_policy(self, path: str, who: Identity = SUPER) -> tuple[str, str]:
        chain = self.walk(path, who)
        node = chain[-1]
        if not node.is_dir:
            return node.policy, path
        return self.effective_policy(chain, path)

    def list_page(self, path: str, recursive: bool, start_after: str, limit: int,
                  max_bytes: int = LIST_PAGE_BYTES, who: Identity = SUPER,
                  xattrs: bool = False, code_of: Callable[[int], str] | None = None) -> tuple[list[Entry], bool]:
        """One page of a listing: up to ``limit`` entries after ``start_after`` (a path the last
        page ended with, "" = from the start), stopping early past about ``max_bytes``.
        Returns (entries, more). Depth first, names in byte order; iterative, so depth is no limit.

        A page resumes from the path alone: the directories on it are looked up again, and where
        one is gone the listing carries on after its name in the nearest one still there.

        Permissions: ``path`` needs r-x (HDFS's listStatus); a recursive listing shows the entry
        of a subdirectory ``who`` may not list (r-x) but not what is inside it. ``xattrs``: each
        file ``who`` may read (r) with its extended attributes (HDFS's getXAttrs needs r).
        ``code_of``: a group's own code, "" for none (BlockMap.code_of): each file's last group's is
        its entry's ``last_group_code`` (du needs no groups).
        """
        chain = self.walk(path, who)
        node = chain[-1]
        if not node.is_dir:
            return ([] if start_after else [entry(node, path, code_of=code_of)]), False
        check(who, node, READ | EXECUTE, path, f"list {path}")
        policy = self.effective_policy(chain, path)[0]
        frames = self._resume(node, path, policy, start_after, recursive, who)
        out: list[Entry] = []
        size = 0
        while frames:
            frame = frames[-1]
            want = limit - len(out)
            children = _children_after(frame.dir, frame.after, want)
            descended = False
            for child in children:
                child_path = paths.join(frame.path, child.name)
                child_policy = (child.policy or frame.policy) if child.is_dir else ""
                shown = entry(child, child_path, child_policy, code_of)
                if xattrs and not child.is_dir and allowed(who, child, READ):
                    with_xattrs(shown, child)
                    size += sum(len(k) + len(v) for k, v in (shown.xattrs or {}).items())
                out.append(shown)
                size += len(child_path) + 64
                frame.after = child.name
                if len(out) >= limit or size >= max_bytes:
                    return out, True
                if recursive and child.is_dir and allowed(who, child, READ | EXECUTE):
                    frames.append(_Frame(child, child_path, child_policy, ""))
                    descended = True
                    break
            if not descended and len(children) < want:
                frames.pop()
        return out, False

    def _resume(self, node: Dir, path: str, policy: str, start_after: str, recursive: bool,
                who: Identity) -> list[_Frame]:
        """The directories a listing of ``path`` is inside of right after ``start_after``, outermost
        first, each with the name to carry on after."""
        frames = [_Frame(node, path, policy, "")]
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
            child = frame.dir.children.get(name)
            if child is None or not child.is_dir or not allowed(who, child, READ | EXECUTE):
                break   # gone (or a file, or not ours to list): carry on after its name here
            frames.append(_Frame(child, paths.join(frame.path, name), child.policy or frame.policy, ""))
        return frames

    def files_under(self, path: str) -> Iterator[tuple[str, File]]:
        """(path, file) of every complete file at or below ``path``, in path order (fsck). Each
        directory is read as a copy of its children at the moment it is reached."""
        node = self.lookup(path)
        if not node.is_dir:
            yield path, node
            return
        stack: list[tuple[Dir, str]] = [(node, path)]
        while stack:
            directory, dir_path = stack.pop()
            children = dict(directory.children)   # a copy: apply may change the live one meanwhile
            subdirs = []
            for name in sorted(children):
                child = children[name]
                child_path = paths.join(dir_path, name)
                if child.is_dir:
                    subdirs.append((child, child_path))
                else:
                    yield child_path, child
            stack.extend(reversed(subdirs))

    def walk_files(self, top: Node) -> Iterator[File]:
        """Every complete file at or below ``top`` (any order; copies of each directory's children)."""
        if not top.is_dir:
            yield top
            return
        stack = [top]
        while stack:
            for child in list(stack.pop().children.values()):
                if child.is_dir:
                    stack.append(child)
                else:
                    yield child

    def subtree_dirs(self, top: Node) -> Iterator[Dir]:
        """Every directory at or below ``top``."""
        if not top.is_dir:
            return
        stack = [top]
        while stack:
            d = stack.pop()
            yield d
            stack.extend(c for c in list(d.children.values()) if c.is_dir)

    # ------------------------------------------------------------------ changes (apply.py only)

    def _keep(self, node: Node) -> None:
        if self.snapshot is not None:
            self.snapshot.keep_node(node)

    def _keep_children(self, d: Dir) -> None:
        if self.snapshot is not None:
            self.snapshot.keep_children(d)

    def set_fields(self, node: Node, **fields) -> None:
        self._keep(node)
        for name, value in fields.items():
            setattr(node, name, value)

    def put(self, parent: Dir, node: Node) -> Node | None:
        """``node`` at its name in ``parent`` (one store: a node it replaces goes at the same
        instant). Returns the node replaced."""
        self._keep_children(parent)
        self._keep(node)
        node.parent = parent
        old = parent.children.get(node.name)
        parent.children[node.name] = node
        parent.stamp += 1
        if not node.is_dir:
            self.by_policy[node.attrs.policy] += 1
        if old is None:
            if node.is_dir:
                self.dirs += 1
            else:
                self.files += 1
        elif not old.is_dir:
            self.by_policy[old.attrs.policy] -= 1
        return old

    def take(self, parent: Dir, name: str) -> Node:
        """Remove the child ``name`` of ``parent`` (it keeps its parent: a reader halfway down a
        walk through it finishes, and ``is_attached`` says it is gone). What is below a
        directory taken stays counted until it is put back, or collected (``cut``)."""
        self._keep_children(parent)
        node = parent.children.pop(name)
        parent.stamp += 1
        if node.is_dir:
            self.dirs -= 1
        else:
            self.files -= 1
            self.by_policy[node.attrs.policy] -= 1
        return node

    def cut(self, node: Node) -> None:
        """``node`` (taken out of its parent) leaves the tree for good: no path reaches it and
        ``is_attached`` says so. Its subtree stays as it is, for the block map's collector to
        empty (blocks/blockmap.py: the files' groups, and the counts), a bounded step at a time."""
        self._keep(node)
        node.parent = None


def _children_after(d: Dir, after: str, limit: int) -> list[Node]:
    import bisect

    names = d.sorted_names()
    start = bisect.bisect_right(names, after) if after else 0
    out = []
    children = d.children
    for name in names[start:]:
        child = children.get(name)
        if child is not None:   # (gone since the names were sorted)
            out.append(child)
            if len(out) >= limit:
                break
    return out
