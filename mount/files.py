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

import errno
import threading
import time

from hedgefs.client.fs import FileStatus, FileSystem
from hedgefs.client.streams import ReadAhead
from hedgefs.ec.policy import parse_policy
from hedgefs.mount.inodes import Node

MAX_WINDOW = 8 << 20         # read-ahead never runs further ahead than this


class ReadHandle:
    """Reads of one open file (a FileReader), with read-ahead while they come in order."""

    def __init__(self, reader):
        self.reader = reader
        self.length = reader.length
        policy = reader.status.policy
        cell = parse_policy(policy).cell_size if policy else 1 << 20
        self.ahead = ReadAhead(reader, window=cell, max_window=max(cell, MAX_WINDOW), ahead=1)

    def fetch(self, offset: int, size: int):
        """A future of the bytes [offset, offset + size), clipped to the file (see the module)."""
        return self.ahead.fetch(offset, size)

    def read(self, offset: int, size: int) -> bytes:
        """``fetch`` and wait (blocking)."""
        return bytes(self.fetch(offset, size).result())

    def close(self) -> None:
        self.ahead.close()
        self.reader.close()


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
        self.mode = mode              # chmod'ed while being written: applied after the commit
        self.owner: tuple[str, str] | None = None
        self.times: tuple[int | None, int | None] | None = None   # (mtime, atime) ms set meanwhile
        self.started_ms = int(time.time() * 1000)
        self.committed: FileStatus | None = None
        self._fs = fs
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
        """End the file and wait until the NameNode has it complete; then apply a chmod or chown
        made meanwhile. Raises HedgefsError (its errno for close(2))."""
        with self._lock:
            if self.committed is not None:
                return self.committed
            self._writer.close()
            status = self._fs.stat(self.path)
            changed = False
            if self.mode is not None and self.mode != status.permission:
                self._fs.set_permission(self.path, self.mode)
                changed = True
            if self.owner is not None and self.owner != (status.owner, status.group):
                self._fs.set_owner(self.path, *self.owner)
                changed = True
            if self.times is not None:
                self._fs.set_times(self.path, *self.times)
                changed = True
            if changed:
                status = self._fs.stat(self.path)
            self.committed = status
            return status

    def abort(self) -> None:
        self._writer.abort()   # nothing after a commit; before one, the file never appears


def version(status: FileStatus) -> tuple:
    return status.length, status.mtime_ms, tuple(g.id for g in status.groups)


class Writing:
    """A descriptor open for writing. The writer starts at the first write (or a truncation to
    0) of an existing file, at once for a file created here. ``append``: opened O_APPEND (every
    write goes to the end, whatever offset the kernel says)."""

    def __init__(self, node: Node, path: str, length: int, append: bool = False):
        self.node, self.path, self.length, self.append = node, path, length, append
        self.writer: WriteHandle | None = None
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
