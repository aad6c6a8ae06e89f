"""Reading an open file ahead of its reader: the one read-ahead (``ReadAhead``) and the ranged
stream over it (``Stream``: ``FileReader.stream`` and ``chunks``).

``ReadAhead.fetch(offset, size)`` answers a read with a Future, never blocking. A read that starts
where the last one ended (or inside what is read ahead) is sequential: the window grows (doubling,
from ``window`` up to ``max_window``, in multiples of ``align``) and ``ahead`` further windows are
read in the background, each one positional read of the hedged reader (``FileReader.submit``),
or several of at most ``piece()`` bytes (many shorter unit reads while the client is in trouble:
a slow DataNode is then hedged at a short read's threshold). A read anywhere else is random:
what was read ahead is dropped and exactly its range is read. The mount (kernel reads of 128 KiB)
and fsspec (a cache's ``_fetch``) use it as it is; a ``Stream`` walks it window by window.

Buffers. A chunk of a ``Stream`` is its own (a new bytearray) unless the stream was opened with
``reuse=True``: then its chunks are views of ``read_ahead + 1`` buffers read into again and
again, each valid until the next chunk is asked for (``next()``, ``read``, ``close``): a lease.
The view handed out is released then (using it raises ValueError), and in poison mode
(``HEDGEFS_POISON_BUFFERS=1``: every test, ``hedgefs chaos``) its buffer is filled with 0xDB and
never read into again, so a consumer that kept a copy of the view sees poison, never the bytes of
a later chunk. A copy to a file or a pipe wants the lease (no fresh, zeroed, page-faulted buffer
per chunk); anything that hands chunks to code it does not own wants owned chunks.
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import dataclasses
import os
import threading
from typing import Callable, Protocol

from hedgefs.client.errors import FileChanged


class Positional(Protocol):
    """What the read-ahead reads from: an open file (FileReader), or anything with its length
    and its cancellable positional reads (a distcp source)."""

    length: int

    def submit(self, offset: int, length: int, *, into: bytearray | None = None) -> concurrent.futures.Future: ...

POISON = 0xDB   # as the receive buffers' (buffers.py)
KEEP_BEHIND = 2  # windows kept once read past: a kernel re-reads a little


def poisoning() -> bool:
    return os.environ.get("HEDGEFS_POISON_BUFFERS") == "1"


class _Buffers:
    """The buffers of one leased stream: taken for a window's read, given back once the reader
    has moved past it (poisoned and dropped in poison mode)."""

    def __init__(self, size: int, poison: bool):
        self._size = size
        self._free: list[bytearray] = []
        self.poison = poison

    def take(self) -> bytearray:
        return self._free.pop() if self._free else bytearray(self._size)

    def give(self, buf: bytearray) -> None:
        if self.poison:
            buf[:] = bytes([POISON]) * len(buf)   # and never read into again: a kept view shows poison
        else:
            self._free.append(buf)


@dataclasses.dataclass
class _Window:
    start: int
    stop: int
    future: concurrent.futures.Future
    buf: bytearray | None = None


INLINE_JOIN = 1 << 20   # bytes a joined read copies on the thread that completes it; more: on a joiner thread
_JOINS: list[concurrent.futures.ThreadPoolExecutor] = []
_JOINS_LOCK = threading.Lock()


def _joins() -> concurrent.futures.ThreadPoolExecutor:
    with _JOINS_LOCK:
        if not _JOINS:
            _JOINS.append(concurrent.futures.ThreadPoolExecutor(2, thread_name_prefix="hedgefs-join"))
        return _JOINS[0]


def _done(value) -> concurrent.futures.Future:
    future: concurrent.futures.Future = concurrent.futures.Future()
    future.set_result(value)
    return future


class ReadAhead:
    """Reads of one open file that run ahead of the reader while it reads in order (see the module)."""

    def __init__(self, reader: Positional, *, window: int, max_window: int, align: int = 1, ahead: int = 1,
                 keep_behind: int = KEEP_BEHIND, piece: Callable[[], int] | None = None, start: int = 0,
                 end: int | None = None, buffers: _Buffers | None = None):
        self._reader = reader
        self.length = reader.length if end is None else min(end, reader.length)   # nothing read past it
        self._align = max(1, align)
        self._min = self._aligned(window)
        self._max = max(self._min, self._aligned(max_window))
        self._ahead_n = ahead
        self._keep = keep_behind
        self._piece = piece
        self._buffers = buffers
        self._lock = threading.Lock()
        self._windows: collections.deque[_Window] = collections.deque()
        self._next = start    # where a sequential read starts
        self.window = 0       # the window now (0: reads are random)

    def _aligned(self, n: int) -> int:
        return max(self._align, -(-n // self._align) * self._align)

    # ---------------------------------------------------------------- reads

    def fetch(self, offset: int, size: int) -> concurrent.futures.Future:
        """A Future of the bytes [offset, offset + size) (clipped to the file): owned ``bytes``, or
        a window's own buffer when the read is exactly one window."""
        end = min(self.length, offset + size)
        if offset >= end:
            return _done(b"")
        with self._lock:
            parts = self._advance(offset, end)
        if not parts:
            return self._read(offset, end)
        if len(parts) == 1 and (parts[0].start, parts[0].stop) == (offset, end):
            return parts[0].future
        return self._joined(parts, offset, end)

    def window_at(self, offset: int) -> tuple[int, concurrent.futures.Future]:
        """The window a sequential reader at ``offset`` (a window's start) reads next: its end and
        its read. The windows behind it are let go (a leased stream's buffers given back)."""
        with self._lock:
            self._next = offset   # in order by construction
            parts = self._advance(offset, min(self.length, offset + 1))
        window = parts[0]
        return window.stop, window.future

    def _advance(self, offset: int, end: int) -> list[_Window]:
        ws = self._windows
        inside = bool(ws) and ws[0].start <= offset < ws[-1].stop
        if offset == self._next or inside:
            self.window = min(self._max, max(self._min, 2 * self.window, self._aligned(end - offset)))
            self._trim(offset)
            if not inside:
                self._drop()
            self._extend(ws[-1].stop if ws else offset, end)
        else:
            self._drop()
            self.window = 0
        self._next = max(self._next, end) if inside else end
        return [w for w in ws if w.start < end and w.stop > offset]

    def _extend(self, at: int, end: int) -> None:
        """Read windows from ``at`` until [.., end) is covered and ``ahead`` more are in flight."""
        while at < self.length:
            beyond = sum(1 for w in self._windows if w.start >= end)
            if at >= end and beyond >= self._ahead_n:
                return
            stop = min(self.length, at + self.window)
            buf = self._buffers.take() if self._buffers is not None else None
            self._windows.append(_Window(at, stop, self._read(at, stop, buf), buf))
            at = stop

    def _trim(self, offset: int) -> None:
        behind = sum(1 for w in self._windows if w.stop <= offset)
        for _ in range(behind - self._keep):
            window = self._windows.popleft()
            if window.buf is not None:
                self._buffers.give(window.buf)

    def _drop(self) -> None:
        """Cancel what was read ahead; its buffers are not reused (a cancelled read may not have
        stopped writing into one yet)."""
        for w in self._windows:
            w.future.cancel()
        self._windows.clear()

    def _read(self, start: int, stop: int, into: bytearray | None = None) -> concurrent.futures.Future:
        piece = self._piece() if self._piece is not None and into is None else 0
        if piece:
            piece = max(self._align, piece // self._align * self._align)   # whole stripes
        if into is not None:
            return self._reader.submit(start, stop - start, into=into)
        if not piece or stop - start <= piece:
            return self._reader.submit(start, stop - start)
        edges = [start, *range((start // piece + 1) * piece, stop, piece), stop]
        parts = [_Window(a, b, self._reader.submit(a, b - a)) for a, b in zip(edges, edges[1:])]
        return self._joined(parts, start, stop)

    def _joined(self, parts: list[_Window], offset: int, end: int) -> concurrent.futures.Future:
        """One Future of [offset, end) over the reads ``parts``; a part cancelled meanwhile (a
        random read dropped it) is read again."""
        out: concurrent.futures.Future = concurrent.futures.Future()
        left = [len(parts)]
        lock = threading.Lock()

        def finish() -> None:
            try:
                pieces = []
                for p in parts:
                    lo, hi = max(offset, p.start), min(end, p.stop)
                    if p.future.cancelled():
                        pieces.append(self._reader.submit(lo, hi - lo).result())
                    else:
                        pieces.append(memoryview(p.future.result())[lo - p.start:hi - p.start])
                out.set_result(b"".join(pieces))
            except BaseException as err:   # noqa: BLE001 - handed to whoever waits
                out.set_exception(err)

        def one_done(_f) -> None:
            with lock:
                left[0] -= 1
                last = left[0] == 0
            if not last:
                return
            if end - offset <= INLINE_JOIN and not any(p.future.cancelled() for p in parts):
                finish()
            else:   # a long copy (or a read again, which waits) off the thread that ended the read: the client's I/O loop
                _joins().submit(finish)

        for p in parts:
            p.future.add_done_callback(one_done)
        return out

    def close(self) -> None:
        with self._lock:
            self._drop()


class Stream:
    """Bytes [start, end) of an open file, in order, ``read_ahead`` windows in flight: iterate
    for chunks (``async for`` from another event loop: an HTTP server's), or ``read(n)``.

    A context manager: leaving it (or ``close``) cancels the reads in flight. With ``reuse``, a
    chunk is valid until the next is asked for (see the module)."""

    def __init__(self, reader: Positional, start: int, end: int, window: int, read_ahead: int = 2,
                 reuse: bool = False, poison: bool | None = None):
        self.start, self.end = start, end
        buffers = _Buffers(window, poisoning() if poison is None else poison) if reuse else None
        self._ahead = ReadAhead(reader, window=window, max_window=window, ahead=read_ahead, keep_behind=0,
                                start=start, end=end, buffers=buffers)
        self._at = start
        self._handed: memoryview | None = None   # a leased chunk: released when the next is asked for
        self._pending = memoryview(b"")
        self._closed = False

    def _next_read(self) -> tuple[int, concurrent.futures.Future] | None:
        self._let_go()
        if self._closed:
            raise ValueError("the stream is closed")
        if self._at >= self.end:
            return None
        stop, future = self._ahead.window_at(self._at)
        return stop, future

    def _took(self, stop: int, chunk):
        if len(chunk) != stop - self._at:   # a source shorter than it said: never a shifted byte after it
            self.close()
            raise FileChanged(f"the file ended early: {len(chunk)} of {stop - self._at} bytes at {self._at}")
        self._at = stop
        if self._ahead._buffers is not None:
            chunk = chunk if isinstance(chunk, memoryview) else memoryview(chunk)
            self._handed = chunk
        return chunk

    def _let_go(self) -> None:
        handed, self._handed = self._handed, None
        if handed is not None:
            try:
                handed.release()   # the chunk just used: an error to use again
            except BufferError:
                pass   # something holds an export of it: the poison still shows

    def __iter__(self) -> "Stream":
        return self

    def __next__(self):
        step = self._next_read()
        if step is None:
            raise StopIteration
        stop, future = step
        try:
            return self._took(stop, future.result())
        except BaseException:
            self.close()
            raise

    def __aiter__(self) -> "Stream":
        return self

    async def __anext__(self):
        step = self._next_read()
        if step is None:
            raise StopAsyncIteration
        stop, future = step
        try:
            return self._took(stop, await asyncio.wrap_future(future))
        except BaseException:
            self.close()
            raise

    def read(self, n: int = -1) -> bytes:
        """Up to ``n`` bytes (all that is left: -1), b"" at the end: a writer's source."""
        if n < 0:
            return bytes(self._pending) + b"".join(bytes(c) for c in self)
        if not self._pending:
            chunk = next(self, None)
            if chunk is None:
                return b""
            self._pending = memoryview(chunk)
        out, self._pending = self._pending[:n], self._pending[n:]
        return bytes(out)

    def close(self) -> None:
        self._closed = True
        self._pending = memoryview(b"")
        self._let_go()
        self._ahead.close()

    def __enter__(self) -> "Stream":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self) -> None:
        if not getattr(self, "_closed", True):
            self._ahead.close()
