"""What the kernel is told about a file: stat fields from a FileStatus, owners by name, errnos.

Owners: the NameNode names users and groups; the kernel wants numbers. A name is mapped to the
local user (group) of that name; the cluster user the mount acts as (its credential's name, or
the insecure cluster's superuser) is the user who mounted; any other name is ``nobody``. The
reverse (chown) maps a number to its local name.

Errors: every HedgefsError becomes the errno a program expects (ENOENT, EEXIST, ENOTEMPTY,
EACCES, ...): one table (``ERRNO``) over the client's error classes.
"""

import errno
import grp
import os
import pwd
import stat

import pyfuse3

from hedgefs.client import errors
from hedgefs.client.errors import HedgefsError
from hedgefs.client.fs import FileStatus

NOBODY = 65534
INSECURE_USER = "hedgefs"   # who an insecure cluster's clients are (the NameNode's superuser)
BLOCK = 512                 # st_blocks counts 512-byte blocks


class Owners:
    def __init__(self, cluster_user: str):
        self.cluster_user = cluster_user
        self.uid, self.gid = os.getuid(), os.getgid()
        self._uids: dict[str, int] = {}
        self._gids: dict[str, int] = {}

    def uid_of(self, name: str) -> int:
        if name == self.cluster_user or not name:
            return self.uid
        if name not in self._uids:
            try:
                self._uids[name] = pwd.getpwnam(name).pw_uid
            except KeyError:
                self._uids[name] = NOBODY
        return self._uids[name]

    def gid_of(self, name: str) -> int:
        if not name:
            return self.gid
        if name not in self._gids:
            try:
                self._gids[name] = grp.getgrnam(name).gr_gid
            except KeyError:
                self._gids[name] = self.gid if name == "supergroup" else NOBODY
        return self._gids[name]

    @staticmethod
    def user_name(uid: int) -> str:
        try:
            return pwd.getpwuid(uid).pw_name
        except KeyError:
            raise pyfuse3.FUSEError(errno.EINVAL) from None   # a number no local user has: no name to send

    @staticmethod
    def group_name(gid: int) -> str:
        try:
            return grp.getgrgid(gid).gr_name
        except KeyError:
            raise pyfuse3.FUSEError(errno.EINVAL) from None


def attributes(status: FileStatus, inode: int, owners: Owners, timeout: float,
               size: int | None = None) -> pyfuse3.EntryAttributes:
    """``size``: the bytes written so far, for a file being written here."""
    a = pyfuse3.EntryAttributes()
    a.st_ino = inode
    a.generation = 0
    a.entry_timeout = timeout
    a.attr_timeout = timeout
    kind = stat.S_IFDIR if status.is_dir else stat.S_IFLNK if status.is_link else stat.S_IFREG
    a.st_mode = kind | (status.permission & 0o7777 or (0o755 if status.is_dir else 0o644))
    # 1 for directories too: "unknown", so find and fts count no subdirectories from it.
    a.st_nlink = 1
    a.st_uid = owners.uid_of(status.owner)
    a.st_gid = owners.gid_of(status.group)
    a.st_rdev = 0
    a.st_size = status.length if size is None else size
    a.st_blksize = 128 * 1024
    a.st_blocks = (a.st_size + BLOCK - 1) // BLOCK
    ns = status.mtime_ms * 1_000_000
    a.st_mtime_ns = a.st_ctime_ns = ns
    a.st_atime_ns = (status.atime_ms or status.mtime_ms) * 1_000_000
    return a


# What close(2), open(2), mkdir(2)... return for each client error (client/errors.py).
ERRNO = {
    errors.NotFound: errno.ENOENT,
    errors.AlreadyExists: errno.EEXIST,
    errors.IsADirectory: errno.EISDIR,
    errors.NotADirectory: errno.ENOTDIR,
    errors.DirectoryNotEmpty: errno.ENOTEMPTY,
    errors.NotAllowed: errno.EACCES,
    errors.FileChanged: errno.ESTALE,   # replaced or deleted under an open file
    errors.UsageError: errno.EINVAL,
}


def errno_of(err: HedgefsError) -> int:
    return errors.translate(err, ERRNO, errno.EIO)   # data unavailable, NameNode unreachable, ...
