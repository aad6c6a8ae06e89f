"""The file objects of ``HedgeFileSystem.open``: ``rb`` over one FileReader, ``wb``/``xb``/``ab``
over one FileWriter (the library's push writer, which commits on close; ``ab``: its append).

Reading. A read is a positional read of the library (``FileReader.submit``: hedged, around slow
DataNodes) through the library's read-ahead (client/streams.py's ``ReadAhead``), in pieces while the
client is in trouble (``HedgeFileSystem.piece``). Random reads (pyarrow's footer and column
chunks) fetch exactly the bytes asked for, so a selective read moves no more than it needs. Reads
that follow on where the last one ended are sequential: then the file reads ahead in the
background, as much as the reader last asked for rounded up to whole stripes (at least one: k
cells, a unit read on each of k DataNodes), doubling with each sequential read up to
``MAX_READ_AHEAD``.

Writing. ``open`` creates the file at the NameNode (so ``xb`` on an existing file, or a path
under a file, fails at ``open``); ``write`` hands the bytes to the FileWriter, and ``close``
commits the file. The file is visible only then: an exception inside ``with``, ``discard()``, or
a file dropped without ``close`` abandons the write and no file appears (an overwritten one stays
as it was).
"""

from __future__ import annotations

import threading
from typing import Callable

from fsspec.caching import BaseCache
from fsspec.spec import AbstractBufferedFile

from hedgefs.client.streams import ReadAhead
from hedgefs.ec.policy import parse_policy
from hedgefs.fsspec.errors import translated

MAX_READ_AHEAD = 32 << 20   # pyarrow asks for up to 32 MiB at a time (its coalesced ranges): one ahead


class Counted:
    """A FileReader whose positional reads are counted (``HedgeFileSystem.fetched``)."""

    def __init__(self, reader, counter: "ByteCounter"):
        self._reader, self._counter = reader, counter
        self.length, self.status = reader.length, reader.status

    def submit(self, offset: int, length: int, *args, **kwargs):
        self._counter.add(length)
        return self._reader.submit(offset, length, *args, **kwargs)


class Cache(BaseCache):
    """fsspec's cache interface (``_fetch(start, stop)``) over the library's read-ahead."""

    name = "hedgefs-readahead"

    def __init__(self, reader, counter: "ByteCounter", size: int, piece: Callable[[], int]):
        super().__init__(0, None, size)
        stripe = parse_policy(reader.status.policy).stripe_data_size
        self.ahead = ReadAhead(Counted(reader, counter), window=stripe, max_window=MAX_READ_AHEAD, align=stripe,
                               ahead=1, piece=piece, start=-1)   # the first read is a random one

    def _fetch(self, start: int | None, stop: int | None) -> bytes:
        start = 0 if start is None else start
        stop = self.size if stop is None else min(stop, self.size)
        if start >= stop:
            return b""
        with translated():
            return bytes(self.ahead.fetch(start, stop - start).result())

    def close(self) -> None:
        self.ahead.close()


class HedgeFile(AbstractBufferedFile):
    """An open hedgefs file for fsspec: ``rb``, ``wb`` or ``xb`` (see the module docstring)."""

    def __init__(self, fs, path: str, mode: str = "rb", block_size="default", autocommit: bool = True,
                 cache_type: str | None = None, cache_options: dict | None = None, policy: str | None = None,
                 **kwargs):
        if mode not in ("rb", "wb", "xb", "ab"):
            raise NotImplementedError(f"hedgefs files open as rb, wb, xb or ab, not {mode!r}")
        if not autocommit:
            raise NotImplementedError("hedgefs commits a file on close: autocommit=False is not supported")
        self._reader = None
        self._writer = None
        if mode == "rb":
            with translated():
                self._reader = fs.client.open(path)
            size = self._reader.length
            super().__init__(fs, path, mode, block_size, cache_type=cache_type or "none",
                             cache_options=cache_options, size=size, **kwargs)
            if cache_type is None:   # ours, unless the caller asked for one of fsspec's
                self.cache = Cache(self._reader, fs.fetched, size, fs.piece)
        else:
            super().__init__(fs, path, mode, block_size, cache_options=cache_options, **kwargs)
            self._start_write(overwrite=mode == "wb", policy=policy or fs.policy, append=mode == "ab")

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

    def _start_write(self, overwrite: bool, policy: str | None, append: bool = False) -> None:
        try:
            if append:   # the library's append (copy-on-write of the last block group); a new file if none
                self._writer = self.fs.append_writer(self.path, policy=policy)
            else:
                self._writer = self.fs.create_writer(self.path, overwrite=overwrite, policy=policy)   # Create's errors here
        except BaseException:
            self.closed = True   # nothing to close or commit
            raise
        self.offset = 0
        self.loc = self._writer.start   # (an append's: tell() is the file's length)

    def write(self, data) -> int:
        if not self.writable():
            raise ValueError("File not in write mode")
        with translated():
            n = self._writer.write(data)   # copied: the caller may reuse its buffer at once
        self.loc += n
        return n

    def flush(self, force: bool = False) -> None:
        if self.closed:
            raise ValueError("Flush on closed file")   # as io's files: bytes go to the writer as written

    def close(self) -> None:
        if self.closed:
            return
        if self._writer is None:
            close = getattr(self.cache, "close", None)   # fsspec's own caches may have none
            if close is not None:
                close()
            self.closed = True
            return
        self.closed = True
        try:
            with translated():
                self._writer.close()
        finally:
            self.fs.invalidate_cache(self.path)
            self.fs.invalidate_cache(self.fs._parent(self.path))

    def discard(self) -> None:
        """Abandon the write: nothing is committed, no file appears."""
        if self._writer is None or self.closed:
            return
        self.closed = True
        self._writer.abort()

    def commit(self) -> None:
        self.close()

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is not None and self._writer is not None:
            self.discard()
        else:
            self.close()

    def __del__(self) -> None:
        if not getattr(self, "closed", True):
            if getattr(self, "_writer", None) is not None:
                self.discard()   # never closed: never committed
            else:
                self.close()


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
