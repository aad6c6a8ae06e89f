"""Open files of the mount: reads through the library's read-ahead, and a sequential writer
committed on close.

Reading: a read the kernel sends at the offset where the last one ended is sequential, and each
one in a row doubles a read-ahead window that starts at the file's cell size (the unit a hedged
read races) and stops at ``MAX_WINDOW``: the ranges ahead are already being read when the kernel
asks for them. A read anywhere else is random: the read-ahead is dropped and the read is exactly
its range (client/streams.py's ReadAhead). Reads never block a thread: the ops await the futures.

Writing: hedgefs files are written from start to end, or appended to, and a version becomes
visible when complete. The kernel's writes go to the library's FileWriter (``FileSystem.create``
or ``append``), whose bounded pipe holds them until the stripes go out; a write anywhere but the
end is refused. ``commit`` (the
first close(2)) closes it: the NameNode's complete, or the error close(2) returns; the file
never appears in part.
"""

import contextlib
import errno
import tempfile
import threading
import time

from hedgefs.client.errors import NotAllowed
from hedgefs.client.fs import FileStatus, FileSystem
from hedgefs.client.streams import ReadAhead
from hedgefs.ec.policy import parse_policy
from hedgefs.mount.inodes import Node

MAX_WINDOW = 8 << 20         # read-ahead never runs further ahead than this
NEW_FILE_MODE = 0o644        # the mode the NameNode gives a new file


class ReadHandle:
    """Reads of one open file (a FileReader), with read-ahead while they come in order."""

    def __init__(self, reader):
        self.node = None   # its inode (ops.open): what the kernel was told of its size
        self.follow(reader)

    def follow(self, reader) -> None:
        """Read on from ``reader`` (a newer version of the file: see ops._follow)."""
        old = getattr(self, "ahead", None)
        self.reader = reader
        self.length = reader.length
        policy = reader.status.policy
        cell = parse_policy(policy).cell_size if policy else 1 << 20
        self.ahead = ReadAhead(reader, window=cell, max_window=max(cell, MAX_WINDOW), ahead=1)
        if old is not None:
            old.close()

    def fetch(self, offset: int, size: int):
        """A future of the bytes [offset, offset + size), clipped to the file (see the module)."""
        return self.ahead.fetch(offset, size)

    def read(self, offset: int, size: int) -> bytes:
        """``fetch`` and wait (blocking)."""
        return bytes(self.fetch(offset, size).result())

    def close(self) -> None:
        self.ahead.close()
        self.reader.close()


def _attributes_set(handle) -> bool:
    """Has a chmod, chown or utimes been recorded on ``handle`` for its commit?"""
    return handle.mode is not None or handle.owner is not None or handle.times is not None


class WriteFailed(Exception):
    def __init__(self, errno_: int, message: str):
        super().__init__(message)
        self.errno = errno_


class WriteHandle:
    """A file being written here: ``write`` in order, then ``commit`` once. Made in a worker
    thread: it creates (or reopens for an append) the file at the NameNode, whose refusal is the
    open's, creat's or write's error.

    ``append``: the library's append (copy-on-write of the file's last block group): the bytes
    written follow the file's, which stays as it was until the commit. A process may write on
    after a close(2) of a duplicate of its descriptor (a shell's ``{ a; b; } > f`` closes the fd
    in every child that exits): each close commits what was written so far, and writing on is
    an append to it."""

    def __init__(self, fs: FileSystem, path: str, overwrite: bool, mode: int | None = None, append: bool = False):
        self.path = path
        self.mode = mode              # chmod'ed while being written: sent with the commit
        self.owner: tuple[str, str] | None = None
        self.times: tuple[int | None, int | None] | None = None   # (mtime, atime) ms set meanwhile
        self.started_ms = int(time.time() * 1000)
        self.committed: FileStatus | None = None
        self._fs = fs
        self._overwrite = overwrite   # a file replaced may keep its old mode: a chmod is always sent
        self._lock = threading.Lock()
        self._writer = fs.append(path) if append else fs.create(path, overwrite=overwrite)
        self.written = self._writer.start + self._writer.written

    def write(self, offset: int, data: bytes) -> int:
        with self._lock:
            if self.committed is not None:
                raise WriteFailed(errno.EBADF, f"{self.path}: already committed")
            if offset != self.written:
                raise WriteFailed(errno.ENOTSUP, f"{self.path}: hedgefs files are written in order "
                                                 f"(write at {offset}, {self.written} written)")
            n = self._writer.write(data)   # the write's failure (a HedgefsError) is write(2)'s
            self.written += n
            return n

    def commit(self) -> FileStatus:
        """End the file and wait until the NameNode has it complete, with the chmod, chown and
        utimes made meanwhile (tar x sends all three on the open descriptor before close(2)): they
        go with the Complete (``FileWriter.set_*``), one NameNode call, one journal record. Raises
        HedgefsError (its errno for close(2)); a refused attribute is EPERM (``as_owner``), and
        the bytes are committed without it.

        The status returned is what this writer knows (length, mode, owner, times), built here:
        the kernel's next getattr asks the NameNode, so no stat is spent (a file of a ``tar x``
        would pay one per file for nothing). A mode is sent only if it is not the one a new file
        gets."""
        with self._lock:
            if self.committed is not None:
                return self.committed
            if self.mode is not None and (self.mode != NEW_FILE_MODE or self._overwrite):
                self._writer.set_permission(self.mode)
            if self.owner is not None:
                self._writer.set_owner(*self.owner)
            mtime, atime = self.times or (None, None)
            if self.times is not None:
                self._writer.set_times(mtime, atime)
            with as_owner(self.path, _attributes_set(self)):
                length = self._writer.close()
            now = int(time.time() * 1000)
            owner, group = self.owner or ("", "")
            self.committed = FileStatus(self.path, False, length, "", 0, now if mtime is None else mtime,
                                        owner=owner, group=group, permission=self.mode or NEW_FILE_MODE,
                                        atime_ms=now if atime is None else atime)
            return self.committed

    def abort(self) -> None:
        self._writer.abort()   # nothing after a commit; before one, the file never appears


class Edit:
    """A file changed in place through a descriptor: a write that is not at the end, a read of a
    file being written here, a truncate of it. A working copy on local disk (a temporary file:
    the file's bytes, read once) takes the writes and answers the reads; ``commit`` (fsync(2),
    close(2)) writes the new version copy-on-write (``FileSystem.append(rewrite_from=)``: the
    groups before the first byte changed are kept, the rest is written anew) and it replaces the
    file at once, or the error is the call's and the file stays as it was. The same interface
    as WriteHandle's for the ops; it lasts until the descriptor is released."""

    def __init__(self, fs: FileSystem, path: str):
        self.path = path
        self.mode: int | None = None
        self.owner: tuple[str, str] | None = None
        self.times: tuple[int | None, int | None] | None = None
        self.started_ms = int(time.time() * 1000)
        self._fs = fs
        self._lock = threading.Lock()
        self._copy = tempfile.TemporaryFile(prefix="hedgefs-edit-")
        try:
            with fs.open(path) as reader, reader.stream() as chunks:
                self.status = reader.status
                for chunk in chunks:
                    self._copy.write(chunk)
        except BaseException:
            self._copy.close()
            raise
        self.base = self.size = self.status.length   # the committed length, and the working copy's
        self.dirty_from: int | None = None           # the first byte changed since the last commit

    @property
    def written(self) -> int:
        return self.size

    @property
    def committed(self) -> FileStatus | None:
        return None if self.dirty_from is not None else self.status

    def _changed(self, offset: int) -> None:
        self.dirty_from = offset if self.dirty_from is None else min(self.dirty_from, offset)

    def write(self, offset: int, data: bytes) -> int:
        with self._lock:
            self._copy.seek(offset)
            n = self._copy.write(data)
            self._changed(min(offset, self.size))   # (past the end: the gap reads as zeros, and is new too)
            self.size = max(self.size, offset + n)
            return n

    def read(self, offset: int, size: int) -> bytes:
        with self._lock:
            self._copy.seek(offset)
            return self._copy.read(max(0, min(size, self.size - offset)))

    def truncate(self, size: int) -> None:
        with self._lock:
            self._copy.truncate(size)   # longer: zeros, as POSIX
            self._changed(min(size, self.size))
            self.size = size

    def commit(self) -> FileStatus:
        """The working copy's changes become the file's new version (and a chmod, chown or utimes
        made meanwhile are applied). Raises HedgefsError (its errno for fsync(2) or close(2))."""
        with self._lock:
            changed = self.dirty_from is not None
            if changed:
                start = min(self.dirty_from, self.base)
                with self._fs.append(self.path, rewrite_from=start) as out:
                    self._copy.seek(start)
                    left = self.size - start
                    while left > 0:
                        chunk = self._copy.read(min(left, 1 << 20))
                        out.write(chunk)
                        left -= len(chunk)
                    self._attributes(out)   # with the new version's Complete: on it, not on another's
                    with as_owner(self.path, _attributes_set(self)):
                        out.close()
                self.base, self.dirty_from = self.size, None
            else:
                with as_owner(self.path, True):
                    self._attributes(self._fs, self.path)
            if changed or _attributes_set(self):
                self.mode = self.owner = self.times = None
                self.status = self._fs.stat(self.path)
            return self.status

    def _attributes(self, target, *path) -> None:
        """The chmod, chown and utimes made meanwhile, on ``target``: the FileWriter of the new
        version (no ``path``), or the FileSystem's calls on the file at ``path``."""
        if self.mode is not None:
            target.set_permission(*path, self.mode)
        if self.owner is not None:
            target.set_owner(*path, *self.owner)
        if self.times is not None:
            target.set_times(*path, *self.times)

    def abort(self) -> None:
        """The descriptor is gone: the working copy too (what was not committed is dropped)."""
        self._copy.close()


@contextlib.contextmanager
def as_owner(path: str, attributes: bool):
    """A commit that carries a chmod, chown or utimes (``attributes``): a refusal of who asked
    is EPERM, as chmod(2), chown(2) and utimes(2) say, for close(2) or fsync(2) (the bytes are
    committed without them: client/file_writer.py), not open's EACCES."""
    try:
        yield
    except NotAllowed as err:
        if not attributes:
            raise
        raise WriteFailed(errno.EPERM, f"{path}: {err}") from None


def version(status: FileStatus) -> tuple:
    return status.length, status.mtime_ms, tuple(g.id for g in status.groups)


class Writing:
    """A descriptor open for writing. The writer starts at the first write (or a truncation to
    0) of an existing file, at once for a file created here. ``append``: opened O_APPEND (every
    write goes to the end, whatever offset the kernel says)."""

    def __init__(self, node: Node, path: str, length: int, append: bool = False):
        self.node, self.path, self.length, self.append = node, path, length, append
        self.writer: WriteHandle | Edit | None = None
        self.reader: ReadHandle | None = None   # reads before anything is written (O_RDWR)
        self.error: int = 0


class Listing:
    """A directory open for reading: its entries, fetched as readdir gets to them."""

    def __init__(self, path: str, entries):
        self.path = path
        self.entries: list[FileStatus] = []
        self._source = entries
        self.done = False

    def pull(self, upto: int) -> None:
        """Fetch entries until there are ``upto`` of them or the listing ends (blocking)."""
        while len(self.entries) < upto and not self.done:
            entry = next(self._source, None)
            if entry is None:
                self.done = True
            else:
                self.entries.append(entry)
