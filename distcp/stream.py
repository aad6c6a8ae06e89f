"""One segment of a source file as a stream a writer can pull from, with read-ahead, a CRC of
every byte that passes, and a cancel that stops the reads in flight (a hedge's loser)."""

from __future__ import annotations

import collections
import threading

import crc32c

from hedgefs.client.errors import HedgefsError

STEP = 4 * 1024 * 1024   # bytes per source read
AHEAD = 2                # source reads in flight per stream


class Cancelled(HedgefsError):
    """This copy of a segment lost the race (or the job stopped): its writer gives up."""


class SourceChanged(HedgefsError):
    """The source file ended early or otherwise stopped matching what was planned."""


class SegmentStream:
    def __init__(self, source, offset: int, length: int, exclude: frozenset[str] = frozenset(), step: int = STEP):
        self._source = source
        self._next = offset
        self._end = offset + length
        self._exclude = exclude
        self._step = step
        self._inflight: collections.deque = collections.deque()
        self._pending = memoryview(b"")
        self._wake = threading.Event()
        self._cancelled = threading.Event()
        self.crc = 0
        self.passed = 0

    def cancel(self) -> None:
        self._cancelled.set()
        self._wake.set()

    @property
    def cancelled(self) -> bool:
        return self._cancelled.is_set()

    def read(self, n: int) -> bytes | memoryview:
        """Up to ``n`` bytes (b"" at the segment's end); raises Cancelled once cancelled."""
        if self._cancelled.is_set():
            self._stop()
            raise Cancelled("cancelled")
        if not self._pending:
            self._pending = self._take()
        out, self._pending = self._pending[:n], self._pending[n:]
        return out

    def _fill(self) -> None:
        while len(self._inflight) < AHEAD and self._next < self._end:
            n = min(self._step, self._end - self._next)
            future = self._source.submit(self._next, n, self._exclude)
            future.add_done_callback(lambda _f: self._wake.set())
            self._inflight.append((future, n))
            self._next += n

    def _take(self) -> memoryview:
        self._fill()
        if not self._inflight:
            return memoryview(b"")
        future, n = self._inflight[0]
        while not future.done():
            self._wake.wait()
            self._wake.clear()
            if self._cancelled.is_set():
                self._stop()
                raise Cancelled("cancelled")
        self._inflight.popleft()
        data = future.result()
        if len(data) != n:
            self._stop()
            raise SourceChanged(f"the source file is shorter than planned (got {len(data)} of {n} bytes)")
        self.crc = crc32c.crc32c(data, self.crc)
        self.passed += n
        self._fill()
        return memoryview(data).cast("B") if len(data) else memoryview(b"")

    def _stop(self) -> None:
        for future, _ in self._inflight:
            future.cancel()
        self._inflight.clear()
