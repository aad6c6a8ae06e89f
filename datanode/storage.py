"""Internal blocks on a DataNode's local disk, with CRC32C checksums. No gRPC here.

One internal block ("unit") ``(group_id, index)`` is two files, named from integers only::

    <data_dir>/blocks/<group_id % 256:02x>/<group_id>_<index>.blk   the bytes
    <data_dir>/blocks/<group_id % 256:02x>/<group_id>_<index>.crc   header + CRC32C per 64 KiB

A write goes to ``<data_dir>/tmp/`` and is renamed into place on commit (sidecar first, then the
block, then the directory is fsynced), so a reader sees the old unit or the new one, never half of
one. Leftovers in ``tmp/`` are unfinished writes and are deleted when the store opens.

Reads verify every 64 KiB chunk they touch and yield the requested range in pieces, so a large
read is never one buffer.
"""

from __future__ import annotations

import itertools
import logging
import os
import struct
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import crc32c

log = logging.getLogger("hedgefs.datanode")

CHECKSUM_CHUNK = 64 * 1024           # bytes covered by one CRC32C
READ_BATCH = 16 * CHECKSUM_CHUNK     # bytes read from disk (and verified) per step of a read
_MAGIC = b"HFSCRC1\0"
_HEADER = struct.Struct("<8sQI")      # magic, unit length, checksum chunk size
_FILE_COUNTER = itertools.count()


class StorageError(Exception):
    """Base class of the errors a servicer maps to status codes."""


class UnitNotFound(StorageError):
    pass


class RangeError(StorageError):
    pass


class LengthMismatch(StorageError):
    pass


class ChecksumError(StorageError):
    def __init__(self, group_id: int, index: int, offset: int):
        super().__init__(f"checksum mismatch in unit {group_id}/{index} at offset {offset}")
        self.group_id, self.index, self.offset = group_id, index, offset


def _check_ids(group_id: int, index: int) -> tuple[int, int]:
    group_id, index = int(group_id), int(index)
    if group_id < 0 or index < 0:
        raise ValueError(f"bad unit id {group_id}/{index}")
    return group_id, index


class BlockStore:
    """The units stored under one data directory, plus an in-memory index of their lengths."""

    def __init__(self, data_dir: str | os.PathLike, *, fsync: bool = True):
        self.root = Path(data_dir)
        self.fsync = fsync
        self._blocks = self.root / "blocks"
        self._tmp = self.root / "tmp"
        self._blocks.mkdir(parents=True, exist_ok=True)
        self._tmp.mkdir(parents=True, exist_ok=True)
        # Held while a reader opens a unit's two files and while a commit renames them, so a reader
        # never pairs a new sidecar with an old block.
        self._lock = threading.Lock()
        self._units: dict[tuple[int, int], int] = {}
        self._clean_tmp()
        self._scan()

    # ---------------------------------------------------------------- paths and startup

    def _paths(self, group_id: int, index: int) -> tuple[Path, Path]:
        group_id, index = _check_ids(group_id, index)
        d = self._blocks / f"{group_id % 256:02x}"
        stem = f"{group_id}_{index}"
        return d / f"{stem}.blk", d / f"{stem}.crc"

    def block_path(self, group_id: int, index: int) -> Path:
        return self._paths(group_id, index)[0]

    def _clean_tmp(self) -> None:
        for p in self._tmp.iterdir():
            try:
                p.unlink()
                log.info("deleted unfinished write %s", p.name)
            except OSError as e:
                log.warning("cannot delete %s: %s", p, e)

    def _scan(self) -> None:
        for d in self._blocks.iterdir():
            if not d.is_dir():
                continue
            for p in d.glob("*.crc"):
                blk = p.with_suffix(".blk")
                try:
                    g, i = (int(x) for x in p.stem.split("_"))
                    length = _read_header(p)
                    if not blk.exists():
                        raise StorageError("sidecar without block")
                    if blk.stat().st_size != length:
                        # A crash between the two renames of a replacement: drop both; the
                        # NameNode sees the unit missing in the block report and repairs it.
                        raise StorageError(f"block is {blk.stat().st_size} bytes, "
                                           f"sidecar says {length}")
                except (ValueError, OSError, StorageError) as e:
                    log.warning("dropping damaged unit files %s: %s", p.stem, e)
                    for q in (p, blk):
                        q.unlink(missing_ok=True)
                    continue
                self._units[(g, i)] = length
            for blk in d.glob("*.blk"):
                if not blk.with_suffix(".crc").exists():
                    log.warning("dropping block without sidecar %s", blk.name)
                    blk.unlink(missing_ok=True)

    # ---------------------------------------------------------------- index

    def units(self) -> list[tuple[int, int, int]]:
        """(group_id, index, length) of every stored unit."""
        with self._lock:
            return [(g, i, n) for (g, i), n in self._units.items()]

    def unit_count(self) -> int:
        with self._lock:
            return len(self._units)

    def used_bytes(self) -> int:
        with self._lock:
            return sum(self._units.values())

    def length(self, group_id: int, index: int) -> int:
        with self._lock:
            n = self._units.get(_check_ids(group_id, index))
        if n is None:
            raise UnitNotFound(f"unit {group_id}/{index} not found")
        return n

    def has(self, group_id: int, index: int) -> bool:
        with self._lock:
            return _check_ids(group_id, index) in self._units

    def delete(self, group_id: int, index: int) -> bool:
        """Remove a unit; False if it was not there."""
        blk, crc = self._paths(group_id, index)
        with self._lock:
            present = self._units.pop((int(group_id), int(index)), None) is not None
            blk.unlink(missing_ok=True)
            crc.unlink(missing_ok=True)
        return present

    # ---------------------------------------------------------------- write

    def open_writer(self, group_id: int, index: int, expected_length: int | None) -> UnitWriter:
        """A writer for one unit; ``expected_length`` None = not known yet (given to commit)."""
        return UnitWriter(self, *_check_ids(group_id, index),
                          None if expected_length is None else int(expected_length))

    def _commit(self, w: UnitWriter, crc_tmp: Path) -> None:
        blk, crc = self._paths(w.group_id, w.index)
        if not blk.parent.exists():
            blk.parent.mkdir(exist_ok=True)
            if self.fsync:
                _fsync_dir(self._blocks)
        with self._lock:
            os.replace(crc_tmp, crc)
            os.replace(w.tmp_path, blk)
            self._units[(w.group_id, w.index)] = w.length
        if self.fsync:
            _fsync_dir(blk.parent)

    # ---------------------------------------------------------------- read

    def read(self, group_id: int, index: int, offset: int, length: int, *,
             piece: int = READ_BATCH,
             tamper: Callable[[memoryview, int], None] | None = None) -> Iterator[bytes]:
        """Yield bytes [offset, offset+length) of a unit in pieces of at most ``piece`` bytes.

        Every 64 KiB chunk the range touches is verified before any of its bytes is yielded;
        a mismatch raises ChecksumError. ``tamper(buffer, unit_offset)`` may modify the bytes read
        from disk before they are verified (fault injection: a bad disk).
        Range errors are raised at the call, not at the first ``next()``.
        """
        group_id, index = _check_ids(group_id, index)
        if offset < 0 or length < 0:
            raise RangeError(f"bad range {offset}+{length}")
        blk_path, crc_path = self._paths(group_id, index)
        with self._lock:
            if (group_id, index) not in self._units:
                raise UnitNotFound(f"unit {group_id}/{index} not found")
            try:
                crcs_raw = crc_path.read_bytes()
                f = open(blk_path, "rb", buffering=0)
            except FileNotFoundError:
                raise UnitNotFound(f"unit {group_id}/{index} not found") from None
        try:
            unit_len, chunk, crcs = _parse_sidecar(crcs_raw)
        except StorageError:
            f.close()
            raise ChecksumError(group_id, index, 0) from None  # a damaged sidecar is a bad unit
        if offset + length > unit_len:
            f.close()
            raise RangeError(f"range {offset}+{length} exceeds unit {group_id}/{index} "
                             f"of {unit_len} bytes")
        return self._read_iter(f, group_id, index, offset, length, unit_len, chunk, crcs,
                               max(piece, 1), tamper)

    def _read_iter(self, f, group_id, index, offset, length, unit_len, chunk, crcs, piece, tamper):
        end = offset + length
        batch = max(chunk, READ_BATCH // chunk * chunk)
        buf = bytearray(batch)
        view = memoryview(buf)
        pos = offset // chunk * chunk
        stop = min(unit_len, -(-end // chunk) * chunk)   # end of the last chunk the range touches
        try:
            while pos < end:
                n = min(batch, stop - pos)
                f.seek(pos)
                got = f.readinto(view[:n]) or 0
                if got != n:
                    raise ChecksumError(group_id, index, pos + got)  # truncated on disk
                if tamper is not None:
                    tamper(view[:n], pos)
                for c in range(0, n, chunk):
                    if crc32c.crc32c(view[c:min(c + chunk, n)]) != crcs[(pos + c) // chunk]:
                        raise ChecksumError(group_id, index, pos + c)
                lo = max(offset, pos) - pos
                hi = min(end, pos + n) - pos
                for s in range(lo, hi, piece):
                    yield bytes(view[s:min(s + piece, hi)])
                pos += n
        finally:
            view.release()
            f.close()


class UnitWriter:
    """One unit being written: appended to a temp file, checksummed on the fly, committed once."""

    def __init__(self, store: BlockStore, group_id: int, index: int,
                 expected_length: int | None):
        if expected_length is not None and expected_length < 0:
            raise LengthMismatch(f"bad expected length {expected_length}")
        self.store, self.group_id, self.index = store, group_id, index
        self.expected_length = expected_length
        self.length = 0
        self.tmp_path = store._tmp / f"{group_id}_{index}_{os.getpid()}_{next(_FILE_COUNTER)}.blk"
        self._f = open(self.tmp_path, "wb")
        self._crcs: list[int] = []
        self._crc = 0          # CRC of the current, unfinished chunk
        self._in_chunk = 0     # bytes in it
        self._done = False

    def write(self, data) -> None:
        n = len(data)
        if self.expected_length is not None and self.length + n > self.expected_length:
            raise LengthMismatch(f"unit {self.group_id}/{self.index}: more than the expected "
                                 f"{self.expected_length} bytes")
        self._f.write(data)
        self.length += n
        mv = memoryview(data)
        pos = 0
        while pos < n:
            take = min(CHECKSUM_CHUNK - self._in_chunk, n - pos)
            self._crc = crc32c.crc32c(mv[pos:pos + take], self._crc)
            self._in_chunk += take
            pos += take
            if self._in_chunk == CHECKSUM_CHUNK:
                self._crcs.append(self._crc)
                self._crc, self._in_chunk = 0, 0

    def commit(self, expected_length: int | None = None) -> int:
        """Make the unit visible (replacing any older one); on any failure nothing is left.

        The length written must equal ``expected_length`` (default: the one given at open).
        """
        if expected_length is not None:
            if self.expected_length is not None and expected_length != self.expected_length:
                self.abort()
                raise LengthMismatch(f"unit {self.group_id}/{self.index}: expected length "
                                     f"{expected_length} at finalize, {self.expected_length} "
                                     f"at the start")
            self.expected_length = expected_length
        crcs = self._crcs + ([self._crc] if self._in_chunk else [])
        crc_tmp = self.tmp_path.with_suffix(".crc")
        try:
            if self.length != (self.expected_length or 0):
                raise LengthMismatch(f"unit {self.group_id}/{self.index}: got {self.length} "
                                     f"bytes, expected {self.expected_length}")
            self._f.flush()
            if self.store.fsync:
                os.fsync(self._f.fileno())
            self._f.close()
            with open(crc_tmp, "wb") as cf:
                cf.write(_HEADER.pack(_MAGIC, self.length, CHECKSUM_CHUNK))
                cf.write(struct.pack(f"<{len(crcs)}I", *crcs))
                cf.flush()
                if self.store.fsync:
                    os.fsync(cf.fileno())
            self.store._commit(self, crc_tmp)
            self._done = True
        finally:
            if not self._done:
                self.abort()
                crc_tmp.unlink(missing_ok=True)
        return self.length

    def abort(self) -> None:
        """Forget the write; nothing is left on disk. Safe to call more than once."""
        if self._done:
            return
        self._done = True
        try:
            self._f.close()
        finally:
            self.tmp_path.unlink(missing_ok=True)

    def __enter__(self) -> UnitWriter:
        return self

    def __exit__(self, *exc) -> None:
        self.abort()


def _read_header(path: Path) -> int:
    with open(path, "rb") as f:
        raw = f.read(_HEADER.size)
    magic, length, _chunk = _HEADER.unpack(raw)
    if magic != _MAGIC:
        raise ValueError("bad sidecar magic")
    return length


def _parse_sidecar(raw: bytes) -> tuple[int, int, tuple[int, ...]]:
    if len(raw) < _HEADER.size:
        raise StorageError("sidecar too short")
    magic, length, chunk = _HEADER.unpack_from(raw)
    if magic != _MAGIC or chunk <= 0:
        raise StorageError("bad sidecar header")
    n = -(-length // chunk)
    if len(raw) != _HEADER.size + 4 * n:
        raise StorageError("sidecar has the wrong size")
    return length, chunk, struct.unpack_from(f"<{n}I", raw, _HEADER.size)


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
