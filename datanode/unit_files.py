"""How a unit is kept in files: its id, its file names, the checksum sidecar's format, and the
errors of the block store (storage.py says the layout and the commit protocol)."""

from __future__ import annotations

import os
import struct
from pathlib import Path

_MAGIC = b"HFSCRC1\0"
_MAGIC_APPEND = b"HFSCRCA\0"             # a unit made by APPEND (an open tail's replica): the only
                                        # kind an APPEND may grow (a written unit is written once)
_HEADER = struct.Struct("<8sQI")      # magic, unit length, checksum chunk size


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


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
