"""Open files of the mount: a reader with read-ahead, and a sequential writer committed on close.

Reading: a read the kernel sends at the offset where the last one ended is sequential, and each
one in a row doubles a read-ahead window that starts at the file's cell size (the unit a hedged
read races) and stops at ``MAX_WINDOW``: the ranges ahead are already being read (hedged
``submit`` of the client) when the kernel asks for them. A read anywhere else is random: the
read-ahead is dropped and the read goes straight to a hedged ``pread`` of just its range.

Writing: hedgefs files are written once, from start to end, and become visible when complete.
The kernel's writes go into a bounded pipe that a FileSystem.write in a thread of its own
drains into stripes; a write anywhere but the end is refused. ``commit`` (the first close(2))
ends the pipe and waits for the NameNode's complete: a failure there is the error close(2)
returns, and the file never appears in part.
"""

import concurrent.futures
import errno
import threading
import time

from hedgefs.client.errors import HedgefsError
from hedgefs.client.fs import FileStatus, FileSystem
from hedgefs.ec.policy import parse_policy
from hedgefs.mount.inodes import Node

MAX_WINDOW = 8 << 20         # read-ahead never runs further ahead than this
KEEP_BEHIND = 2              # read-ahead ranges kept once read past (the kernel re-reads a little)
PIPE_BYTES = 8 << 20         # written bytes buffered before write(2) waits for the stripes to go


class ReadHandle:
    """Reads of one open file (a FileReader), with read-ahead while they come in order."""

    def __init__(self, reader):
        self.reader = reader
        self.length = reader.length
        policy = reader.status.policy
        self._cell = parse_policy(policy).cell_size if policy else 1 << 20
        self._lock = threading.Lock()
        self._ahead: list[tuple[int, int, concurrent.futures.Future]] = []   # (start, end, future), in order
        self._next = 0            # where a sequential read would start
        self._window = 0          # the read-ahead window now (0: reads are random)

    def plan(self, offset: int, size: int) -> list[tuple[int, int, int, concurrent.futures.Future]]:
        """The reads that answer [offset, offset + size): (lo, hi, start, future) each, the future
        giving the bytes from ``start`` on, of which [lo, hi) are wanted. Never blocks: the ops
        await the futures (the client's I/O thread fills them), no thread waits on them."""
        end = min(self.length, offset + size)
        if offset >= end:
            return []
        with self._lock:
            inside = bool(self._ahead) and self._ahead[0][0] <= offset < self._ahead[-1][1]
            if offset == self._next or inside:
                self._window = min(MAX_WINDOW, max(self._cell, self._window * 2))
                if not inside:
                    self._drop_ahead()
                self._extend(self._ahead[-1][1] if self._ahead else offset, end + self._window)
            else:
                self._drop_ahead()
                self._window = 0
            self._next = max(self._next, end) if inside else end
            parts = [(s, e, f) for s, e, f in self._ahead if s < end and e > offset]
            self._trim(offset)
        if not parts:   # a random read: exactly its range
            return [(offset, end, offset, self.reader.submit(offset, end - offset))]
        return [(max(offset, s), min(end, e), s, f) for s, e, f in parts]

    def read(self, offset: int, size: int) -> bytes:
        """``plan`` and wait (blocking)."""
        out = bytearray()
        for lo, hi, start, future in self.plan(offset, size):
            try:
                data = future.result()
            except concurrent.futures.CancelledError:   # a random read on this descriptor dropped it meanwhile
                data, start = self.reader.submit(lo, hi - lo).result(), lo
            out += memoryview(data)[lo - start:hi - start]
        return bytes(out)

    def _extend(self, start: int, until: int) -> None:
        """Start reads so that [start, until) is being read, a window at a time."""
        until = min(self.length, until)
        while start < until:
            stop = min(self.length, start + self._window)
            self._ahead.append((start, stop, self.reader.submit(start, stop - start)))
            start = stop

    def _trim(self, offset: int) -> None:
        done = sum(1 for _s, e, _f in self._ahead if e <= offset)
        if done > KEEP_BEHIND:
            del self._ahead[:done - KEEP_BEHIND]

    def _drop_ahead(self) -> None:
        for _s, _e, future in self._ahead:
            future.cancel()
        self._ahead.clear()

    def close(self) -> None:
        with self._lock:
            self._drop_ahead()
        self.reader.close()


class WriteFailed(Exception):
    def __init__(self, errno_: int, message: str):
        super().__init__(message)
        self.errno = errno_


class _Pipe:
    """Bytes from the kernel's writes to the writer's reads, at most PIPE_BYTES in between."""

    def __init__(self):
        self._cond = threading.Condition()
        self._chunks: list[bytes] = []
        self._buffered = 0
        self._closed = False
        self._broken = False

    def put(self, data: bytes) -> bool:
        """False if the reading side has gone (the write failed)."""
        with self._cond:
            self._cond.wait_for(lambda: self._buffered < PIPE_BYTES or self._broken)
            if self._broken:
                return False
            self._chunks.append(data)
            self._buffered += len(data)
            self._cond.notify_all()
            return True

    def read(self, n: int) -> bytes:
        with self._cond:
            self._cond.wait_for(lambda: self._chunks or self._closed)
            if self._broken:   # abandoned (unmounted mid-write): an error, never an end that commits
                raise OSError("the write was abandoned before close")
            if not self._chunks:
                return b""
            chunk = self._chunks.pop(0)
            if len(chunk) > n:
                chunk, rest = chunk[:n], chunk[n:]
                self._chunks.insert(0, rest)
            self._buffered -= len(chunk)
            self._cond.notify_all()
            return chunk

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    def break_(self) -> None:
        with self._cond:
            self._broken = self._closed = True
            self._chunks.clear()
            self._cond.notify_all()


class WriteHandle:
    """A file being written here: ``write`` in order, then ``commit`` once.

    ``prefix``: the file as last committed through the same descriptor (a FileReader). A process
    may write on after a close(2) of a duplicate of its descriptor (a shell's ``{ a; b; } > f``
    closes the fd in every child that exits): each close commits what was written so far, and
    writing on rewrites the file with the committed bytes first (hedgefs has no append)."""

    def __init__(self, fs: FileSystem, path: str, overwrite: bool, mode: int | None = None, prefix=None):
        self.path = path
        self.mode = mode              # chmod'ed while being written: applied after the commit
        self.owner: tuple[str, str] | None = None
        self.start = prefix.length if prefix is not None else 0
        self.written = self.start
        self.started_ms = int(time.time() * 1000)
        self.committed: FileStatus | None = None
        self._fs = fs
        self._pipe = _Pipe()
        self._prefix = prefix.chunks() if prefix is not None else None
        self._left = b""
        self._result: concurrent.futures.Future = concurrent.futures.Future()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, args=(overwrite,), name=f"hedgefs-mount-write {path}",
                                        daemon=True)
        self._thread.start()

    def _run(self, overwrite: bool) -> None:
        try:
            self._result.set_result(self._fs.write(self.path, self, overwrite=overwrite))
        except BaseException as err:   # noqa: BLE001 - handed to whoever closes the file
            self._result.set_exception(err)
            self._pipe.break_()

    def read(self, n: int) -> bytes:
        """The writer's source: the committed prefix (if any), then what the kernel writes."""
        while self._prefix is not None and not self._left:
            chunk = next(self._prefix, None)
            if chunk is None:
                self._prefix = None
            else:
                self._left = bytes(chunk)
        if self._left:
            out, self._left = self._left[:n], self._left[n:]
            return out
        return self._pipe.read(n)

    def write(self, offset: int, data: bytes) -> int:
        with self._lock:
            if self.committed is not None:
                raise WriteFailed(errno.EBADF, f"{self.path}: already committed")
            if offset != self.written:
                raise WriteFailed(errno.ENOTSUP, f"{self.path}: hedgefs files are written in order "
                                                 f"(write at {offset}, {self.written} written)")
            if not self._pipe.put(data):
                self._raise_failure()
            self.written += len(data)
            return len(data)

    def commit(self) -> FileStatus:
        """End the file and wait until the NameNode has it complete; then apply a chmod or chown
        made meanwhile. Raises WriteFailed (with the errno for close(2)) or HedgefsError."""
        with self._lock:
            if self.committed is not None:
                return self.committed
            self._pipe.close()
            try:
                self._result.result()
            except HedgefsError:
                raise
            except Exception:   # noqa: BLE001
                self._raise_failure()
            status = self._fs.stat(self.path)
            changed = False
            if self.mode is not None and self.mode != status.permission:
                self._fs.set_permission(self.path, self.mode)
                changed = True
            if self.owner is not None and self.owner != (status.owner, status.group):
                self._fs.set_owner(self.path, *self.owner)
                changed = True
            if changed:
                status = self._fs.stat(self.path)
            self.committed = status
            return status

    def abort(self) -> None:
        self._pipe.break_()

    def _raise_failure(self):
        err = self._result.exception() if self._result.done() else None
        if isinstance(err, HedgefsError):
            raise err
        raise WriteFailed(errno.EIO, f"{self.path}: the write failed: {err}")


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
