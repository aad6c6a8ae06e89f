"""The file objects of ``HedgeFileSystem.open``: ``rb`` over one FileReader, ``wb``/``xb`` as a
streaming write that commits on close.

Reading. A read is a positional read of the library (``FileReader.submit``: hedged, around slow
DataNodes), in pieces while the client is in trouble (``Pieces``). Random reads (pyarrow's footer and column chunks) fetch exactly the bytes
asked for, so a selective read moves no more than it needs. Reads that follow on where the
last one ended are sequential: then the file reads ahead in the background, as much as the reader
last asked for rounded up to whole stripes (at least one: k cells, a unit read on each of k
DataNodes), doubling with each sequential read up to ``MAX_READ_AHEAD``, and never past the end of
the block group (the next one is on other DataNodes and is the next read-ahead's).

Writing. ``open`` starts the library's striped write on a thread of its own and returns once the
NameNode has created the file (so ``xb`` on an existing file, or a path under a file, fails at
``open``); ``write`` hands the bytes to that writer through a bounded pipe (``PIPE_BYTES``), and
``close`` ends the input and waits for the file's commit. The file is visible only then: an
exception inside ``with``, ``discard()``, or a file dropped without ``close`` abandons the write
and no file appears (an overwritten one stays as it was).
"""

from __future__ import annotations

import collections
import concurrent.futures
import threading
from typing import Callable

from fsspec.caching import BaseCache
from fsspec.spec import AbstractBufferedFile

from hedgefs.ec import layout
from hedgefs.ec.policy import parse_policy
from hedgefs.fsspec.errors import translated

MAX_READ_AHEAD = 32 << 20   # pyarrow asks for up to 32 MiB at a time (its coalesced ranges): one ahead
PIECE_BYTES = 8 << 20
PIPE_BYTES = 32 << 20
OPEN_TIMEOUT_S = 60.0


class _Discarded(Exception):
    """Raised into the writer's source read: the write is abandoned (nothing committed)."""


class ReadAhead(BaseCache):
    """fsspec's cache interface (``_fetch(start, stop)``) over a FileReader: exact ranges for
    random reads, a growing background read-ahead for sequential ones (see the module)."""

    name = "hedgefs-readahead"

    def __init__(self, reader, counter, size: int, in_pieces: Callable[[], bool] = lambda: True):
        super().__init__(0, None, size)
        self._in_pieces = in_pieces
        self.reader = reader
        self._counter = counter
        policy = parse_policy(reader.status.policy)
        self.stripe = policy.stripe_data_size
        block_size = reader.status.block_size
        self.group = layout.group_data_size(policy, block_size) if block_size else max(1, size)
        self.max_window = max(self.stripe, MAX_READ_AHEAD // self.stripe * self.stripe)
        self.piece = piece_size(policy)
        self.window = 0
        self._buf, self._buf_start = memoryview(b""), 0
        self._ahead: tuple[int, int, Pieces] | None = None   # (start, stop, its read)
        self._last_stop = -1

    def _fetch(self, start: int | None, stop: int | None) -> bytes:
        start = 0 if start is None else start
        stop = self.size if stop is None else min(stop, self.size)
        if start >= stop:
            return b""
        sequential = start == self._last_stop
        if not sequential:
            self._cancel_ahead()
            self.window = 0
        parts, at = [], start
        buf_stop = self._buf_start + len(self._buf)
        if self._buf_start <= at < buf_stop:                       # what the buffer holds
            parts.append(self._buf[at - self._buf_start:min(stop, buf_stop) - self._buf_start])
            at = min(stop, buf_stop)
        if at < stop and self._ahead is not None and self._ahead[0] <= at < self._ahead[1]:   # the read-ahead
            a_start, a_stop, future = self._ahead
            self._ahead = None
            self._buf, self._buf_start = self._wait(future), a_start
            parts.append(self._buf[at - a_start:min(stop, a_stop) - a_start])
            at = min(stop, a_stop)
        if at < stop:                                              # the rest, read now
            self._cancel_ahead()
            self._buf, self._buf_start = self._wait(self._submit(at, stop)), at
            parts.append(self._buf)
        self._last_stop = stop
        if sequential:
            wanted = -(-(stop - start) // self.stripe) * self.stripe
            self.window = min(self.max_window, max(2 * self.window, wanted))
            self._maybe_read_ahead(stop)
        return bytes(parts[0]) if len(parts) == 1 else b"".join(parts)

    def _maybe_read_ahead(self, at: int) -> None:
        """Start the next window in the background once the reader is past half the buffer."""
        buf_stop = self._buf_start + len(self._buf)
        if self._ahead is not None or buf_stop >= self.size or at - self._buf_start < len(self._buf) // 2:
            return
        group_end = (buf_stop // self.group + 1) * self.group
        stop = min(self.size, group_end, buf_stop + self.window)
        self._ahead = (buf_stop, stop, self._submit(buf_stop, stop))

    def _submit(self, start: int, stop: int) -> "Pieces":
        self._counter.add(stop - start)
        return Pieces(self.reader, start, stop, self.piece if self._in_pieces() else stop - start)

    def _cancel_ahead(self) -> None:
        if self._ahead is not None:
            self._ahead[2].cancel()
            self._ahead = None

    @staticmethod
    def _wait(pieces: "Pieces") -> memoryview:
        return memoryview(pieces.result())

    def close(self) -> None:
        self._cancel_ahead()
        self._buf = memoryview(b"")


def piece_size(policy) -> int:
    """The library's own sequential step (``FileReader.chunks``): whole stripes, about 8 MiB."""
    return policy.stripe_data_size * max(1, PIECE_BYTES // policy.stripe_data_size)


class Pieces:
    """One read of [start, stop) as stripe-aligned pieces of ``piece`` bytes, all submitted at once
    to the hedged reader. While the client is in trouble (``HedgeFileSystem.in_trouble``) a 32 MiB
    read is six 6 MiB reads of 1 MiB unit ranges in flight together, not six 5 MiB unit reads: a
    slow DataNode is hedged at the threshold of a 1 MiB read, and the latency model, which judges a
    DataNode slow on several reads, learns of it within the file (later pieces read around it).
    A healthy client reads in one piece: fewer, longer unit reads move more bytes per CPU second."""

    def __init__(self, reader, start: int, stop: int, piece: int):
        piece = max(1, piece)
        edges = [start] + list(range((start // piece + 1) * piece, stop, piece)) + [stop]
        with translated():
            self._futures = [reader.submit(a, b - a) for a, b in zip(edges, edges[1:])]

    def result(self) -> bytes | bytearray:
        with translated():
            if len(self._futures) == 1:
                return self._futures[0].result()
            return b"".join(f.result() for f in self._futures)

    def cancel(self) -> None:
        for f in self._futures:
            f.cancel()


class HedgeFile(AbstractBufferedFile):
    """An open hedgefs file for fsspec: ``rb``, ``wb`` or ``xb`` (see the module docstring)."""

    def __init__(self, fs, path: str, mode: str = "rb", block_size="default", autocommit: bool = True,
                 cache_type: str | None = None, cache_options: dict | None = None, policy: str | None = None,
                 **kwargs):
        if mode not in ("rb", "wb", "xb"):
            raise NotImplementedError(f"hedgefs files open as rb, wb or xb, not {mode!r} (files are write-once)")
        if not autocommit:
            raise NotImplementedError("hedgefs commits a file on close: autocommit=False is not supported")
        self._reader = None
        self._write_future = None
        if mode == "rb":
            with translated():
                self._reader = fs.client.open(path)
            size = self._reader.length
            super().__init__(fs, path, mode, block_size, cache_type=cache_type or "none",
                             cache_options=cache_options, size=size, **kwargs)
            if cache_type is None:   # ours, unless the caller asked for one of fsspec's
                self.cache = ReadAhead(self._reader, fs.fetched, size, fs.in_trouble)
        else:
            super().__init__(fs, path, mode, block_size, cache_options=cache_options, **kwargs)
            self._start_write(overwrite=mode == "wb", policy=policy or fs.policy)

    # ------------------------------------------------------------------ read

    def _fetch_range(self, start: int, end: int) -> bytes:
        """Used only by fsspec's own caches (an explicit ``cache_type``)."""
        self.fs.fetched.add(end - start)
        with translated():
            return self._reader.pread(start, end - start)

    def read(self, length: int = -1) -> bytes:
        out = super().read(length)
        self.fs.asked.add(len(out))
        return out

    # ------------------------------------------------------------------ write

    def _start_write(self, overwrite: bool, policy: str | None) -> None:
        self._pipe = _Pipe(PIPE_BYTES)
        self._write_future = self.fs.start_write(self.path, self._pipe, overwrite=overwrite, policy=policy)
        self._write_future.add_done_callback(lambda f: self._pipe.writer_done(f.exception()))
        self._pipe.wait_started(self._write_future, OPEN_TIMEOUT_S)   # Create's errors come out here
        self.offset = 0

    def write(self, data) -> int:
        if not self.writable():
            raise ValueError("File not in write mode")
        n = len(memoryview(data).cast("B"))
        if n:
            self._pipe.put(bytes(data))
        self.loc += n
        return n

    def flush(self, force: bool = False) -> None:
        if self.closed:
            raise ValueError("Flush on closed file")   # as io's files: bytes go to the writer as written

    def close(self) -> None:
        if self.closed:
            return
        if self._write_future is None:
            close = getattr(self.cache, "close", None)   # fsspec's own caches may have none
            if close is not None:
                close()
            self.closed = True
            return
        self.closed = True
        self._pipe.end()
        try:
            with translated():
                self._write_future.result()
        finally:
            self.fs.invalidate_cache(self.path)
            self.fs.invalidate_cache(self.fs._parent(self.path))

    def discard(self) -> None:
        """Abandon the write: nothing is committed, no file appears."""
        if self._write_future is None or self.closed:
            return
        self.closed = True
        self._pipe.fail(_Discarded("the write was discarded"))
        try:
            self._write_future.result()
        except Exception:
            pass

    def commit(self) -> None:
        self.close()

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is not None and self._write_future is not None:
            self.discard()
        else:
            self.close()

    def __del__(self) -> None:
        if not getattr(self, "closed", True):
            if getattr(self, "_write_future", None) is not None:
                self.discard()   # never closed: never committed
            else:
                self.close()


class _Pipe:
    """Bytes from ``HedgeFile.write`` to the writer's source thread (``read``), at most ``limit``
    bytes waiting; the writer's end (or failure) wakes a blocked ``put``."""

    def __init__(self, limit: int):
        self._limit = limit
        self._chunks: collections.deque[memoryview] = collections.deque()
        self._queued = 0
        self._ended = False
        self._failure: BaseException | None = None   # raised into read(): the write is abandoned
        self._writer_error: BaseException | None = None
        self._writer_finished = False
        self._started = threading.Event()
        self._cond = threading.Condition()

    def wait_started(self, future: concurrent.futures.Future, timeout: float) -> None:
        """Until the writer first reads (the NameNode has created the file) or has failed."""
        if not self._started.wait(timeout):   # set by read(), and by writer_done() on a failure
            raise TimeoutError(f"the NameNode did not create the file within {timeout:.0f} s")
        if future.done() and future.exception() is not None:
            with translated():
                future.result()

    def put(self, data: bytes) -> None:
        with self._cond:
            while self._queued >= self._limit and not self._writer_finished:
                self._cond.wait()
            if self._writer_finished:
                self._raise_writer_error()
            self._chunks.append(memoryview(data))
            self._queued += len(data)
            self._cond.notify_all()

    def _raise_writer_error(self) -> None:
        err = self._writer_error
        if err is None:
            raise OSError("the hedgefs writer stopped reading")
        raise err

    def end(self) -> None:
        with self._cond:
            self._ended = True
            self._cond.notify_all()

    def fail(self, err: BaseException) -> None:
        with self._cond:
            self._failure = err
            self._cond.notify_all()

    def writer_done(self, err: BaseException | None) -> None:
        with self._cond:
            self._writer_finished = True
            self._writer_error = err
            self._cond.notify_all()
        self._started.set()

    def read(self, n: int) -> bytes:
        self._started.set()
        with self._cond:
            while not self._chunks and not self._ended and self._failure is None:
                self._cond.wait()
            if self._failure is not None:
                raise self._failure
            if not self._chunks:
                return b""
            head = self._chunks[0]
            if len(head) <= n:
                self._chunks.popleft()
                out = head
            else:
                out, self._chunks[0] = head[:n], head[n:]
            self._queued -= len(out)
            self._cond.notify_all()
            return bytes(out)


class ByteCounter:
    """Ranges and bytes, counted from several threads (what a selective read moved). ``listener``,
    if set, is called with (ranges, bytes) by the thread that adds a range, before it is read."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.ranges = 0
        self.bytes = 0
        self.listener = None

    def add(self, n: int) -> None:
        with self._lock:
            self.ranges += 1
            self.bytes += n
            ranges, total = self.ranges, self.bytes
        if self.listener is not None:
            self.listener(ranges, total)

    def reset(self) -> None:
        with self._lock:
            self.ranges = self.bytes = 0


class ChunkSource:
    """``read(n)`` over an iterator of chunks (a FileReader's ``chunks()``): a writer's source."""

    def __init__(self, chunks):
        self._chunks = chunks
        self._pending = memoryview(b"")

    def read(self, n: int = -1) -> bytes:
        if not self._pending:
            chunk = next(self._chunks, None)
            if chunk is None:
                return b""
            self._pending = memoryview(chunk)
        n = len(self._pending) if n < 0 else n
        out, self._pending = self._pending[:n], self._pending[n:]
        return bytes(out)
