"""One segment of a source file as a stream a writer can pull from, with read-ahead (the
library's Stream), a CRC of every byte that passes, and a cancel that stops the reads in flight
(a hedge's loser)."""

from __future__ import annotations

import concurrent.futures
import threading

import crc32c

from hedgefs.client.errors import FileChanged, HedgefsError
from hedgefs.client.streams import Stream

STEP = 4 * 1024 * 1024   # bytes per source read
AHEAD = 2                # source reads in flight per stream


class Cancelled(HedgefsError):
    """This copy of a segment lost the race (or the job stopped): its writer gives up."""


class SourceChanged(HedgefsError):
    """The source file ended early or otherwise stopped matching what was planned."""


class _Excluding:
    """A distcp source as the stream reads it: positional reads around the DataNodes in ``exclude``."""

    def __init__(self, source, exclude: frozenset[str], length: int):
        self._source, self._exclude, self.length = source, exclude, length

    def submit(self, offset: int, length: int) -> concurrent.futures.Future:
        return self._source.submit(offset, length, self._exclude)


class SegmentStream:
    def __init__(self, source, offset: int, length: int, exclude: frozenset[str] = frozenset(), step: int = STEP):
        self._length = length
        self._stream = Stream(_Excluding(source, exclude, offset + length), offset, offset + length, step,
                              read_ahead=AHEAD - 1)
        self._pending = memoryview(b"")
        self._cancelled = threading.Event()
        self.crc = 0
        self.passed = 0

    def cancel(self) -> None:
        """From any thread: the reads in flight are cancelled, and a ``read`` waiting on one raises Cancelled."""
        self._cancelled.set()
        self._stream.close()

    @property
    def cancelled(self) -> bool:
        return self._cancelled.is_set()

    def read(self, n: int) -> bytes | memoryview:
        """Up to ``n`` bytes (b"" at the segment's end); raises Cancelled once cancelled."""
        if not self._pending:
            self._pending = self._take()
        out, self._pending = self._pending[:n], self._pending[n:]
        return out

    def _take(self) -> memoryview:
        try:
            if self._cancelled.is_set():
                raise Cancelled("cancelled")
            data = next(self._stream, None)
        except FileChanged as err:
            raise SourceChanged(f"the source file is shorter than planned ({err})") from None
        except (concurrent.futures.CancelledError, ValueError):   # cancel() closed the stream under us
            if self._cancelled.is_set():
                raise Cancelled("cancelled") from None
            raise
        if data is None:
            return memoryview(b"")
        self.crc = crc32c.crc32c(data, self.crc)
        self.passed += len(data)
        return memoryview(data).cast("B") if len(data) else memoryview(b"")
