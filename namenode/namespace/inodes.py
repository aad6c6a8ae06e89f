"""What the namespace is made of, in memory: directories, files, their shared attributes, the
lease of a file being written, and an entry as List and GetFileInfo show it.

Compact on purpose (10 million files should fit in a few GiB): ``__slots__`` records, and the
attributes most files share (owner, group, mode; policy, block size) interned as one ``Attrs``
object that thousands of files point to. A file knows its block groups (``blocks.Group``, whose
locations are the block map's, in memory only) but not their lengths: every group but the last
holds exactly k * block_size bytes (Complete checks it), so they follow from the file's length.

Who changes these: journal/apply.py, and nothing else (readers take them as they are, without a
lock: a field is one store, and a directory's children dict is changed one key at a time).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Callable

from hedgefs.ec.layout import group_data_size
from hedgefs.ec.policy import Policy, parse_policy
from hedgefs.namenode.errors import InvalidArgument
from hedgefs.security.identity import ADMIN, SUPERUSER, Identity

SUPER = Identity(SUPERUSER, ADMIN)   # the default caller of tests and tools that drive this directly
SUPERGROUP = "supergroup"            # HDFS's name for the superusers' group: the root's group
DIR_MODE, FILE_MODE = 0o755, 0o644   # HDFS's defaults (umask 022)
LINK_MODE = 0o777                    # a symbolic link's (its target's decide)
MAX_XATTRS = 32                      # per inode (HDFS's dfs.namenode.fs-limits.max-xattrs-per-inode)
MAX_LINK_TARGET = 4096               # bytes (PATH_MAX)

Version = tuple[int, int]   # (length, mtime_ms) of a complete file: what a reader saw


@lru_cache(maxsize=256)
def load_policy(name: str) -> Policy:
    """parse_policy, with its ValueError turned into INVALID_ARGUMENT."""
    try:
        return parse_policy(name)
    except ValueError as err:
        raise InvalidArgument(str(err)) from None


@lru_cache(maxsize=256)
def policy_name(name: str) -> str:
    """The canonical name of a policy (``load_policy(name).name``, which formats it anew)."""
    return load_policy(name).name


class Attrs:
    """Owner, group and mode bits, and for a file its policy and block size: interned (``of``),
    so equal attributes are one object. Immutable: a change points the inode at another one."""

    __slots__ = ("owner", "group", "mode", "policy", "block_size")
    _interned: dict[tuple, "Attrs"] = {}

    def __init__(self, owner: str, group: str, mode: int, policy: str, block_size: int):
        self.owner, self.group, self.mode, self.policy, self.block_size = owner, group, mode, policy, block_size

    @classmethod
    def of(cls, owner: str, group: str, mode: int, policy: str = "", block_size: int = 0) -> "Attrs":
        key = (owner, group, mode, policy, block_size)
        found = cls._interned.get(key)
        if found is None:
            found = cls._interned.setdefault(key, cls(owner, group, mode, policy, block_size))
        return found

    def with_mode(self, mode: int) -> "Attrs":
        return Attrs.of(self.owner, self.group, mode, self.policy, self.block_size)

    def with_owner(self, owner: str, group: str) -> "Attrs":
        return Attrs.of(owner, group, self.mode, self.policy, self.block_size)


class Node:
    """A directory, a file or a symbolic link: its id (HDFS's INodeId: issued once, never reused,
    kept across renames and appends), its name in its parent, the parent (None: the root, or a
    tree a delete cut loose), its attributes and modification time; ``extra``: what few nodes
    have (an access time set apart from the mtime, extended attributes), None for most."""

    __slots__ = ("id", "name", "parent", "attrs", "mtime", "extra")
    is_dir = False
    is_link = False

    # permissions.Owned
    @property
    def owner(self) -> str:
        return self.attrs.owner

    @property
    def group(self) -> str:
        return self.attrs.group

    @property
    def mode(self) -> int:
        return self.attrs.mode


class Dir(Node):
    """``children``: name -> Node, complete files and directories only. ``policy``: the one set on
    this directory ("" = inherited). ``listing``: (stamp, sorted names), a cache of List's order,
    good while ``stamp`` is the directory's (apply bumps it after each change of the children)."""

    __slots__ = ("children", "policy", "stamp", "listing")
    is_dir = True

    def __init__(self, node_id: int, name: str, parent: "Dir | None", attrs: Attrs, mtime: int, policy: str = ""):
        self.id, self.name, self.parent, self.attrs, self.mtime = node_id, name, parent, attrs, mtime
        self.extra: Extra | None = None
        self.children: dict[str, Node] = {}
        self.policy = policy
        self.stamp = 0
        self.listing: tuple[int, list[str]] | None = None

    def sorted_names(self) -> list[str]:
        """The children's names in byte order (List's order), cached until the next change."""
        cached = self.listing
        stamp = self.stamp
        if cached is not None and cached[0] == stamp:
            return cached[1]
        names = sorted(self.children)   # one C call: atomic under the GIL
        if self.stamp == stamp:   # no change meanwhile: (a stale list would be kept as current)
            self.listing = (stamp, names)
        return names


class File(Node):
    """A file. ``groups``: its block groups in file order (a tuple of blocks.Group; kept as the
    group itself when there is one, as for most files: a tuple costs 56 bytes); ``writer``: its
    Lease while it is being written (not yet in its parent's children), None once complete."""

    __slots__ = ("length", "_groups", "writer")

    def __init__(self, node_id: int, name: str, parent: Dir | None, attrs: Attrs, mtime: int, length: int = 0,
                 groups: tuple = (), writer: "Lease | None" = None):
        self.id, self.name, self.parent, self.attrs, self.mtime = node_id, name, parent, attrs, mtime
        self.length, self.groups, self.writer = length, groups, writer
        self.extra: Extra | None = None

    @property
    def groups(self) -> tuple:
        g = self._groups
        return g if g.__class__ is tuple else (g,)

    @groups.setter
    def groups(self, groups: tuple) -> None:
        self._groups = groups[0] if len(groups) == 1 else tuple(groups)

    @property
    def policy(self) -> str:
        return self.attrs.policy

    @property
    def block_size(self) -> int:
        return self.attrs.block_size

    def group_lengths(self) -> list[int]:
        """Each group's data bytes: all full but the last (a file being written: all 0)."""
        n = len(self.groups)
        if n == 1 and self.writer is None:
            return [self.length]
        if n == 0 or self.writer is not None:
            return [0] * n
        full = group_data_size(load_policy(self.attrs.policy), self.attrs.block_size)
        return [full] * (n - 1) + [self.length - full * (n - 1)]


class Link(File):
    """A symbolic link (HDFS's INodeSymlink): its ``target`` as given, never resolved by the
    NameNode (the client or the kernel follows it). A file of no groups whose length is the
    target's size in bytes (what lstat says), mode 0777, no policy."""

    __slots__ = ("target",)
    is_link = True

    def __init__(self, node_id: int, name: str, parent: Dir | None, attrs: Attrs, mtime: int, target: str):
        super().__init__(node_id, name, parent, attrs, mtime, len(target.encode("utf-8")))
        self.target = target


class Extra:
    """What few inodes have: an access time set by setTimes (None: the mtime is the atime, as
    HDFS's default precision of an hour makes it for most files) and extended attributes of the
    user namespace (name -> value). Immutable: a change gives the node a new one (a checkpoint
    image written meanwhile keeps the old one)."""

    __slots__ = ("atime", "xattrs")

    def __init__(self, atime: int | None = None, xattrs: dict[str, bytes] | None = None):
        self.atime, self.xattrs = atime, xattrs or {}

    @staticmethod
    def of(atime: int | None, xattrs: dict[str, bytes]) -> "Extra | None":
        return Extra(atime, xattrs) if atime is not None or xattrs else None


class Lease:
    """A file being written (HDFS's under-construction file and its lease): the file (``file_id``
    is its id), where it will appear (its parent directory and name: set at Create, a rename of the parent carries it
    along), whether it may replace a file there, and its holder. An append or a truncate
    (``Reopen``) is a new version of the complete file ``base`` written copy-on-write: it shares
    base's first ``kept`` (full) groups and has the id of base; base stays visible, as it was,
    until the Complete replaces it. ``tail``: the id of the open tail its Sync placed (an EC
    file's, file_changes.py), 0 for none: only this write may grow the file on it. ``renewed``
    (monotonic seconds) is memory only: every lease restarts when a NameNode starts serving, as
    HDFS's do."""

    __slots__ = ("file_id", "file", "parent", "overwrite", "holder", "renewed", "base", "kept", "tail")

    def __init__(self, file_id: int, file: File, parent: Dir, overwrite: bool, holder: str, renewed: float,
                 base: File | None = None, kept: int = 0):
        self.file_id, self.file, self.parent, self.overwrite = file_id, file, parent, overwrite
        self.holder, self.renewed = holder, renewed
        self.base, self.kept = base, kept
        self.tail = 0

    def shared(self) -> tuple:
        """The groups this write keeps of the file it rewrites (an append's, a truncate's): its
        first ``kept`` groups, the complete file's own objects, never released by this write."""
        return self.file.groups[:self.kept] if self.kept else ()


@dataclass(slots=True)
class Entry:
    """One file or directory as List and GetFileInfo show it (dirs: the effective policy)."""

    path: str
    is_dir: bool
    length: int
    policy: str
    block_size: int
    mtime_ms: int
    owner: str = SUPERUSER
    group: str = SUPERGROUP
    mode: int = 0
    atime_ms: int = 0      # the mtime unless setTimes set another
    symlink: str = ""      # a symbolic link's target ("" for files and directories)
    file_id: int = 0       # the inode id (kept by appends, truncates and writes in place; not by overwrites)
    xattrs: dict | None = None   # a file's extended attributes, when asked for (``with_xattrs``)
    last_group_code: str = ""    # a listed file's last group's own code (an open or kept tail), "": the file's


def with_xattrs(e: Entry, node: Node) -> Entry:
    """``e`` carrying ``node``'s extended attributes (a file's: those of this very version)."""
    if not node.is_dir and node.extra is not None and node.extra.xattrs:
        e.xattrs = dict(node.extra.xattrs)
    return e


def entry(node: Node, path: str, dir_policy: str = "", code_of: Callable[[int], str] | None = None) -> Entry:
    """``code_of``: a group's own code, "" for none (BlockMap.code_of), for a listing's
    ``last_group_code``."""
    a = node.attrs
    extra = node.extra
    atime = node.mtime if extra is None or extra.atime is None else extra.atime
    if node.is_dir:
        return Entry(path, True, 0, dir_policy, 0, node.mtime, a.owner, a.group, a.mode, atime, "", node.id)
    out = Entry(path, False, node.length, a.policy, a.block_size, node.mtime, a.owner, a.group, a.mode, atime,
                node.target if node.is_link else "", node.id)
    if code_of and node.groups:
        out.last_group_code = code_of(node.groups[-1].id)
    return out
