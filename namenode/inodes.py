"""What the namespace is made of: an inode (a row of ``inodes``), an entry as List and GetFileInfo
show it, and the policies files are written with."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Callable

from hedgefs.ec.policy import Policy, parse_policy
from hedgefs.namenode.errors import InvalidArgument
from hedgefs.security.identity import ADMIN, SUPERUSER, Identity

Release = Callable[[list[int]], None]
Version = tuple[int, int]   # (length, mtime_ms) of a complete file: what a reader saw
SUPER = Identity(SUPERUSER, ADMIN)   # the default caller of tests and tools that drive this directly


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
    owner: str
    group: str
    mode: int

    @classmethod
    def from_row(cls, row) -> "Inode":
        return cls(row["id"], row["parent"], row["name"], bool(row["is_dir"]), row["policy"],
                   row["length"], row["block_size"], row["state"], bool(row["overwrite"]),
                   row["mtime_ms"], row["lease_ms"], row["owner"], row["grp"], row["mode"])


@dataclass(frozen=True)
class Entry:
    """One file or directory as List and GetFileInfo show it (dirs: the effective policy)."""

    path: str
    is_dir: bool
    length: int
    policy: str
    block_size: int
    mtime_ms: int
    owner: str = SUPERUSER
    group: str = "supergroup"
    mode: int = 0
