"""File permissions as HDFS checks them (FSPermissionChecker): owner, group, mode bits; pure.

Every file and directory has an owner, a group and POSIX-style mode bits (rwx for owner, group
and others, and the sticky bit). A caller is its owner, else in its group, else other; the first
class that applies is the one checked (as POSIX, and HDFS). An admin is a superuser: nothing is
checked for it. In an insecure cluster everyone is the superuser.

What each operation needs is the namespace's to ask (``Namespace``): *traverse* (x on every
directory on the way), and then read, write or execute on the inode, its parent, or every
directory of a subtree. A sticky directory (``chmod 1777``, as /tmp) lets only an entry's owner,
or the directory's, delete or rename that entry.
"""

from __future__ import annotations

from typing import Protocol

from hedgefs.namenode.errors import InvalidArgument, PermissionDenied
from hedgefs.security.identity import Identity, check_name

READ, WRITE, EXECUTE = 4, 2, 1
STICKY = 0o1000
MAX_MODE = 0o1777


class Owned(Protocol):
    """An inode as far as permissions care."""

    owner: str
    group: str
    mode: int
    is_dir: bool


def describe(action: int) -> str:
    return "".join(c if action & bit else "" for c, bit in (("r", READ), ("w", WRITE), ("x", EXECUTE)))


def mode_string(is_dir: bool, mode: int) -> str:
    """``drwxr-xr-x`` as ls prints it (``t``/``T`` for the sticky bit)."""
    bits = "".join((c if mode & (1 << (8 - i)) else "-") for i, c in enumerate("rwxrwxrwx"))
    if mode & STICKY:
        bits = bits[:8] + ("t" if mode & 1 else "T")
    return ("d" if is_dir else "-") + bits


def allowed(who: Identity, node: Owned, action: int) -> bool:
    if who.is_admin:
        return True
    if who.name == node.owner:
        granted = (node.mode >> 6) & 7
    elif node.group in who.groups:
        granted = (node.mode >> 3) & 7
    else:
        granted = node.mode & 7
    return granted & action == action


def check(who: Identity, node: Owned, action: int, path: str, what: str) -> None:
    """PermissionDenied, naming the user, the inode and what was refused, unless ``who`` may."""
    if not allowed(who, node, action):
        raise PermissionDenied(
            f"permission denied: user {who.name} may not {what} ({describe(action)} needed on {path}, "
            f"{node.owner}:{node.group} {mode_string(node.is_dir, node.mode)})")


def check_sticky(who: Identity, parent: Owned, node: Owned, parent_path: str, path: str, what: str) -> None:
    """In a sticky directory only the entry's owner or the directory's may remove or rename it."""
    if parent.mode & STICKY and not who.is_admin and who.name not in (parent.owner, node.owner):
        raise PermissionDenied(f"permission denied: user {who.name} may not {what} {path}: {parent_path} is "
                               f"sticky and {path} belongs to {node.owner}")


def check_owner(who: Identity, node: Owned, path: str, what: str) -> None:
    if not who.is_admin and who.name != node.owner:
        raise PermissionDenied(f"permission denied: user {who.name} may not {what} {path}: it belongs to {node.owner}")


def check_mode(mode: int) -> None:
    """A mode chmod may set (the owner's, checked apart: ``check_owner``)."""
    if not 0 <= mode <= MAX_MODE:
        raise InvalidArgument(f"bad mode {mode:o}: 0 to {MAX_MODE:o} (rwx for owner, group, others; 1000 = sticky)")


def check_times(path: str, mtime_ms: int, atime_ms: int) -> None:
    """Times utimes may set (HDFS's setTimes): ms since the epoch, -1 = left as it is (who may
    set them is checked apart: the owner, or a writer of the file)."""
    for what, ms in (("mtime", mtime_ms), ("atime", atime_ms)):
        if ms < -1:
            raise InvalidArgument(f"{path}: bad times: {what} {ms} (ms since the epoch, -1 = unchanged)")


def check_owner_names(owner: str, group: str) -> None:
    """Names chown may give: those a certificate may carry ("" = unchanged)."""
    for name, what in ((owner, "user"), (group, "group")):
        if name:
            try:
                check_name(name, what)
            except ValueError as err:
                raise InvalidArgument(str(err)) from None


def check_chown(who: Identity, node: Owned, owner: str, group: str, path: str) -> None:
    """Who may chown (HDFS): a new owner only an admin; a new group an admin, or the owner if it
    is one of the owner's groups."""
    if owner and owner != node.owner and not who.is_admin:
        raise PermissionDenied(f"permission denied: only an admin may give {path} to another user "
                               f"(user {who.name} is not one)")
    if group and group != node.group and not who.is_admin:
        check_owner(who, node, path, "change the group of")
        if group not in who.groups:
            raise PermissionDenied(f"permission denied: user {who.name} is not in group {group}")
