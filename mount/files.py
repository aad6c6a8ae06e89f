"""Open files of the mount: reads through the library's read-ahead, and a sequential writer
committed on close.

Reading: a read the kernel sends at the offset where the last one ended is sequential, and each
one in a row doubles a read-ahead window that starts at the file's cell size (the unit a hedged
read races) and stops at ``MAX_WINDOW``: the ranges ahead are already being read when the kernel
asks for them. A read anywhere else is random: the read-ahead is dropped and the read is exactly
its range (client/streams.py's ReadAhead). Reads never block a thread: the ops await the futures.

Writing: hedgefs files are written once, from start to end, and become visible when complete.
The kernel's writes go to the library's FileWriter (``FileSystem.create``), whose bounded pipe
holds them until the stripes go out; a write anywhere but the end is refused. ``commit`` (the
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
NEW_FILE_MODE = 0o644        # the mode the NameNode gives a new file


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
    thread: it creates the file at the NameNode (whose refusal is the open's or creat's error).

    ``prefix``: the file as last committed through the same descriptor (a FileReader). A process
    may write on after a close(2) of a duplicate of its descriptor (a shell's ``{ a; b; } > f``
    closes the fd in every child that exits): each close commits what was written so far, and
    writing on rewrites the file with the committed bytes first (hedgefs has no append)."""

    def __init__(self, fs: FileSystem, path: str, overwrite: bool, mode: int | None = None, prefix=None):
        self.path = path
        self.mode = mode              # chmod'ed while being written: applied after the commit
        self.owner: tuple[str, str] | None = None
        self.started_ms = int(time.time() * 1000)
        self.committed: FileStatus | None = None
        self._fs = fs
        self._overwrite = overwrite   # a file replaced may keep its old mode: a chmod is always sent
        self._lock = threading.Lock()
        self._writer = fs.create(path, overwrite=overwrite)
        if prefix is not None:
            try:
                with prefix.stream() as chunks:
                    for chunk in chunks:
                        self._writer.write(chunk)
            except BaseException:
                self._writer.abort()
                raise
        self.written = self._writer.written

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
        made meanwhile. Raises HedgefsError (its errno for close(2)).

        The status returned is what this writer knows (length, mode, when): the kernel's next
        getattr asks the NameNode, so no stat is spent here (a file of a ``tar x`` would pay
        one per file for nothing). A mode is sent only if it is not the one a new file gets."""
        with self._lock:
            if self.committed is not None:
                return self.committed
            length = self._writer.close()
            if self.mode is not None and (self.mode != NEW_FILE_MODE or self._overwrite):
                self._fs.set_permission(self.path, self.mode)
            if self.owner is not None:
                self._fs.set_owner(self.path, *self.owner)
            self.committed = FileStatus(self.path, False, length, "", 0, int(time.time() * 1000),
                                        permission=self.mode or NEW_FILE_MODE)
            return self.committed

    def abort(self) -> None:
        self._writer.abort()   # nothing after a commit; before one, the file never appears


def version(status: FileStatus) -> tuple:
    return status.length, status.mtime_ms, tuple(g.id for g in status.groups)


class Writing:
    """A descriptor open for writing. The writer starts at the first write (or a truncation to
    0) of an existing file, at once for a file created here."""

    def __init__(self, node: Node, path: str, length: int):
        self.node, self.path, self.length = node, path, length
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
