"""How a unit is kept in files: its id, its file names, the checksum sidecar's format, and the
errors of the block store (storage.py says the layout and the commit protocol)."""

from __future__ import annotations

import os
import struct
from pathlib import Path

import crc32c

_MAGIC = b"HFSCRC1\0"
_MAGIC_APPEND = b"HFSCRCA\0"             # a unit made by APPEND (an open tail's replica): the only
                                        # kind an APPEND may grow (a written unit is written once)
_HEADER = struct.Struct("<8sQI")      # magic, unit length, checksum chunk size

# A unit's bytes and its sidecar need their data and length on disk, not their timestamps:
# fdatasync(2) skips the inode-only flush fsync(2) adds (Linux; elsewhere fsync).
_datasync = getattr(os, "fdatasync", os.fsync)


class StorageError(Exception):
    """Base class of the errors a servicer maps to status codes."""


class UnitNotFound(StorageError):
    pass


class RangeError(StorageError):
    pass


class LengthMismatch(StorageError):
    pass


class DataDirInUse(StorageError):
    pass


class UnitExists(StorageError):
    """A unit is written once: this one is stored already."""


class StaleAppend(StorageError):
    """An append at an offset other than the unit's committed length (a stale writer)."""


class NotAppendable(StorageError):
    """An append to a unit that was written (an EC unit, a repair's or a move's copy), not made by
    APPEND: a written unit never grows."""


class ChecksumError(StorageError):
    def __init__(self, group_id: int, index: int, offset: int):
        super().__init__(f"checksum mismatch in unit {group_id}/{index} at offset {offset}")
        self.group_id, self.index, self.offset = group_id, index, offset


Unit = tuple[int, int, int]   # (group id, index, generation)


def _check_ids(group_id: int, index: int, generation: int) -> Unit:
    group_id, index, generation = int(group_id), int(index), int(generation)
    if group_id < 0 or index < 0 or generation < 0:
        raise ValueError(f"bad unit id {group_id}/{index} generation {generation}")
    return group_id, index, generation


def _name(key: Unit) -> str:
    g, i, generation = key
    return f"{g}/{i} generation {generation}"


def parse_name(name: str) -> tuple[int, int, int, int] | None:
    """(group id, index, generation, version) of a unit file name: ``7_3_1234_2.blk``."""
    stem, dot, suffix = name.rpartition(".")
    if not dot or suffix not in ("blk", "crc"):
        return None
    parts = stem.split("_")
    if len(parts) != 4 or not all(p.isdigit() for p in parts):
        return None
    g, i, generation, version = (int(p) for p in parts)
    return g, i, generation, version


def _read_header(path: Path) -> int:
    with open(path, "rb") as f:
        raw = f.read(_HEADER.size)
    if len(raw) < _HEADER.size:
        raise ValueError("sidecar too short")
    magic, length, _chunk = _HEADER.unpack(raw)
    if magic not in (_MAGIC, _MAGIC_APPEND):
        raise ValueError("bad sidecar magic")
    return length


def _parse_sidecar(raw: bytes) -> tuple[int, int, tuple[int, ...]]:
    if len(raw) < _HEADER.size:
        raise StorageError("sidecar too short")
    magic, length, chunk = _HEADER.unpack_from(raw)
    if magic not in (_MAGIC, _MAGIC_APPEND) or chunk <= 0:
        raise StorageError("bad sidecar header")
    n = -(-length // chunk)
    if len(raw) != _HEADER.size + 4 * n:
        raise StorageError("sidecar has the wrong size")
    return length, chunk, struct.unpack_from(f"<{n}I", raw, _HEADER.size)


class ChunkCrcs:
    """The CRC32C of each ``chunk`` bytes of a unit, continued as bytes are added: a unit being
    written starts empty; an append continues the stored ``crcs`` of ``length`` bytes (the last,
    partial chunk's CRC is carried on, not recomputed from the bytes on disk)."""

    def __init__(self, chunk: int, crcs=(), length: int = 0):
        self.chunk = chunk
        self._crcs = list(crcs)
        self._in_chunk = length % chunk          # bytes in the current, unfinished chunk
        self._crc = self._crcs.pop() if self._in_chunk else 0   # and its CRC so far

    def add(self, data) -> None:
        mv, pos, n = memoryview(data), 0, len(data)
        while pos < n:
            take = min(self.chunk - self._in_chunk, n - pos)
            self._crc = crc32c.crc32c(mv[pos:pos + take], self._crc)
            self._in_chunk += take
            pos += take
            if self._in_chunk == self.chunk:
                self._crcs.append(self._crc)
                self._crc, self._in_chunk = 0, 0

    def all(self) -> list[int]:
        """One CRC per chunk, the last (partial) one included."""
        return self._crcs + ([self._crc] if self._in_chunk else [])


def write_sidecar(path: Path, magic: bytes, length: int, crcs: ChunkCrcs, *, sync: bool) -> None:
    """The checksum sidecar of a unit of ``length`` bytes, written to ``path`` (a tmp/ file the
    caller renames into place) and, if ``sync``, on disk."""
    values = crcs.all()
    with open(path, "wb") as f:
        f.write(_HEADER.pack(magic, length, crcs.chunk))
        f.write(struct.pack(f"<{len(values)}I", *values))
        f.flush()
        if sync:
            _datasync(f.fileno())


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
