"""The inode table: which path the kernel means by an inode number, and how long it may hold it.

hedgefs names files by path; FUSE names them by inode. An inode is handed out the first time the
kernel is told about a path (lookup, readdir, create, mkdir) and kept while the kernel holds a
reference to it: each reply that gives the kernel an entry counts one lookup, ``forget`` gives
them back, and at zero the number is dropped (the kernel has forgotten it; a later lookup of the
same path gets a new number). A rename moves the paths under it; an unlink detaches the inode
from its path, and an open file keeps reading what it opened (the reader holds the layout).

``seen`` is the version of the file (length, mtime, block groups) whose bytes the kernel may
hold in its page cache for that inode: an open finds the file unchanged and keeps the cache, or
changed and drops it (see ops.open).
"""

import dataclasses
import threading

ROOT_INODE = 1


@dataclasses.dataclass
class Node:
    inode: int
    path: str | None          # None: unlinked (or replaced) while the kernel still held it
    lookups: int = 0
    seen: tuple | None = None
    writer: object | None = None   # the file's WriteHandle while it is being written here
    size: int = -1                 # the size the kernel was last told (an open file longer than it read: ops._follow)
    dir_status: object | None = None   # a directory's FileStatus as last known, answered to getattr
    dir_until: float = 0.0             # ... until this time.monotonic() (the attribute timeout)
    names: set | None = None           # a directory's every name, as this mount knows it (see ops.lookup)
    names_until: float = 0.0           # ... complete, for a name it lacks, until this time.monotonic()
    changes: int = 0                   # names this mount added here (a listing begun before one is stale)


def child(parent: str, name: str) -> str:
    return f"/{name}" if parent == "/" else f"{parent}/{name}"


class InodeTable:
    def __init__(self):
        self._lock = threading.Lock()
        self._by_inode: dict[int, Node] = {ROOT_INODE: Node(ROOT_INODE, "/", lookups=1)}
        self._by_path: dict[str, Node] = {"/": self._by_inode[ROOT_INODE]}
        self._next = ROOT_INODE + 1

    def __len__(self) -> int:
        return len(self._by_inode)

    def get(self, inode: int) -> Node | None:
        return self._by_inode.get(inode)

    def at(self, path: str) -> Node | None:
        return self._by_path.get(path)

    def learn(self, path: str, lookups: int = 1) -> Node:
        """The node for ``path`` (a new inode if it has none), with ``lookups`` more references."""
        with self._lock:
            node = self._by_path.get(path)
            if node is None:
                node = Node(self._next, path)
                self._next += 1
                self._by_inode[node.inode] = node
                self._by_path[path] = node
            node.lookups += lookups
            return node

    def forget(self, inode: int, n: int) -> None:
        with self._lock:
            node = self._by_inode.get(inode)
            if node is None or inode == ROOT_INODE:
                return
            node.lookups -= n
            if node.lookups <= 0 and node.writer is None:
                del self._by_inode[inode]
                if node.path is not None and self._by_path.get(node.path) is node:
                    del self._by_path[node.path]

    def detach(self, path: str) -> None:
        """``path`` is gone (unlinked, or replaced by a rename onto it)."""
        with self._lock:
            node = self._by_path.pop(path, None)
            if node is not None:
                node.path = None

    def moved(self, src: str, dst: str) -> None:
        """``src`` (and everything under it) is now at ``dst``; whatever was at ``dst`` is gone."""
        with self._lock:
            replaced = self._by_path.pop(dst, None)
            if replaced is not None:
                replaced.path = None
            prefix = src.rstrip("/") + "/"
            for path in [p for p in self._by_path if p == src or p.startswith(prefix)]:
                node = self._by_path.pop(path)
                node.path = dst + path[len(src):]
                self._by_path[node.path] = node
