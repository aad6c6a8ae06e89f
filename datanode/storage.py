"""Internal blocks on a DataNode's local disk, with CRC32C checksums. No gRPC here.

One internal block ("unit") ``(group_id, index, generation)`` is two files, named from integers
only (``generation`` is the one the NameNode issued with the block group: a unit of the same
group id and index but another generation is another unit, e.g. of a wiped NameNode's
predecessor, and both may sit here side by side)::

    <data_dir>/blocks/<group_id % 256:02x>/<group_id>_<index>_<generation>_<version>.blk   the unit's bytes
    <data_dir>/blocks/<group_id % 256:02x>/<group_id>_<index>_<generation>_<version>.crc   header + CRC32C per 64 KiB
    <data_dir>/tmp/                                                       writes in progress
    <data_dir>/datanode.lock                                              one DataNode per directory
    <data_dir>/VERSION                                                    the cluster id it joined, its storage id

``version`` counts the versions of a unit on this disk
(the first is 1). A unit's version is *committed* once both of its files are in place:

    1 block-synced     the bytes are in tmp/, fsynced
    2 sidecar-synced   the checksums too
    3 block-renamed    tmp block -> <stem>_<version>.blk   (invisible: no sidecar of that version yet)
    4 sidecar-renamed  tmp sidecar -> <stem>_<version>.crc  (the commit point)
    5 dir-synced       the directory entries are on disk
    6 old-removed      the older version's sidecar, then its block, are unlinked

Opening the store recovers from a crash at any step: for each unit it keeps the newest version
whose two files agree (sidecar present, block present and of the length the sidecar states, or
longer: an unfinished append, truncated to that length) and deletes every other file of that
unit, and everything in tmp/. So a crash leaves either the old unit or the new one, never new
checksums over old bytes. ``crash_at`` (a debug knob, the
``HEDGEFS_DEBUG_CRASH_AT`` variable of ``hedgefs datanode``) SIGKILLs the process at one step,
so tests can check exactly that.

Append in place (``append``: a replica of a replicated open tail): the bytes go past the committed
length of the unit's current version, fsynced ("block-synced"), then a new sidecar with the grown
length and the last chunk's CRC continued goes to tmp/ ("sidecar-synced") and is renamed over the
version's sidecar ("sidecar-renamed": the commit point), and the directory is synced ("dir-synced").
An offset other than the committed length is refused (``StaleAppend``); so is an append to a
unit that was written (``NotAppendable``: an EC unit, a repair's or a move's copy is written
once): only a unit made by an APPEND at 0 grows, and its sidecar says so (magic ``HFSCRCA``, a
written unit's ``HFSCRC1``; an older DataNode does not read an ``HFSCRCA`` sidecar: a DataNode
holding open tails' replicas is not downgraded past this). A crash before the commit
point leaves a block longer than its sidecar states: opening the store truncates it back, so the
unit is what it was before the append.

A writer opened ``once=True`` (the data port's) never replaces a stored unit: it is refused
(``UnitExists``) at open and, should another write commit the unit first, at commit.

Read side (stable: the servicer, the scrubber and any data plane use only this; ``generation`` is
a keyword of every call):

    open_unit(g, i) -> OpenUnit   the block file opened for reading (``fileno()`` for sendfile,
                                  offsets are unit offsets: the file holds nothing else), its
                                  ``length``, ``chunk`` (bytes per CRC) and ``crcs`` (one per chunk;
                                  ``chunks_for(offset, length)`` gives the ones a range touches).
                                  Both come from one committed version, taken under the store's
                                  lock: a commit or delete afterwards does not change what it sees.
    read(g, i, offset, length)    the range, every chunk it touches verified, in pieces.

Reads verify every 64 KiB chunk they touch and yield the requested range in pieces, so a large
read is never one buffer.
"""

from __future__ import annotations

import fcntl
import logging
import os
import signal
import threading
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import crc32c

from hedgefs.datanode.unit_files import (  # noqa: F401
    _MAGIC_APPEND,
    ChecksumError,
    ChunkCrcs,
    DataDirInUse,
    LengthMismatch,
    NotAppendable,
    RangeError,
    StaleAppend,
    StorageError,
    Unit,
    UnitExists,
    UnitNotFound,
    _check_ids,
    _datasync,
    _fsync_dir,
    _name,
    _parse_sidecar,
    _read_header,
    parse_name,
    write_sidecar,
)
from hedgefs.datanode.unit_writer import UnitWriter

log = logging.getLogger("hedgefs.datanode")

CHECKSUM_CHUNK = 64 * 1024           # bytes covered by one CRC32C
READ_BATCH = 16 * CHECKSUM_CHUNK     # bytes read from disk (and verified) per step of a read
LOCK_FILE = "datanode.lock"
VERSION_FILE = "VERSION"
COMMIT_STEPS = ("block-synced", "sidecar-synced", "block-renamed", "sidecar-renamed", "dir-synced",
                "old-removed")


@dataclass
class OpenUnit:
    """One committed version of a unit, open for reading. Close it (or use ``with``)."""

    group_id: int
    index: int
    generation: int
    length: int
    chunk: int                   # bytes covered by one CRC
    crcs: tuple[int, ...]        # CRC32C of chunk n = bytes [n * chunk, (n + 1) * chunk)
    file: object                 # the block file, opened "rb" without buffering
    path: Path

    def fileno(self) -> int:
        return self.file.fileno()

    def chunks_for(self, offset: int, length: int) -> tuple[int, tuple[int, ...]]:
        """(offset of the first chunk, CRCs of every chunk) that bytes [offset, offset+length) touch."""
        if length <= 0:
            return offset, ()
        first, last = offset // self.chunk, (offset + length - 1) // self.chunk
        return first * self.chunk, self.crcs[first:last + 1]

    def close(self) -> None:
        self.file.close()

    def __enter__(self) -> OpenUnit:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class BlockStore:
    """The units stored under one data directory, plus an in-memory index of their lengths."""

    def __init__(self, data_dir: str | os.PathLike, *, fsync: bool = True, crash_at: str | None = None):
        if crash_at and crash_at not in COMMIT_STEPS:
            raise ValueError(f"unknown commit step {crash_at!r}: use one of {', '.join(COMMIT_STEPS)}")
        self.root = Path(data_dir)
        self.fsync = fsync
        self.crash_at = crash_at or None
        self._blocks = self.root / "blocks"
        self._tmp = self.root / "tmp"
        self.root.mkdir(parents=True, exist_ok=True)
        self._lock_file = _lock_dir(self.root)
        self._blocks.mkdir(exist_ok=True)
        self._tmp.mkdir(exist_ok=True)
        # Held while a reader opens a unit's files and while a commit or delete changes them, so
        # a reader always pairs a block with its own sidecar.
        self._lock = threading.Lock()
        self._units: dict[Unit, tuple[int, int]] = {}   # (g, i, generation) -> (version, length)
        self._append_locks: dict[Unit, threading.Lock] = {}   # one append at a time per unit
        self._clean_tmp()
        self._recover()
        if not self._version().get("storage_id"):
            self._write_version({**self._version(), "storage_id": f"DS-{uuid.uuid4()}"})

    def close(self) -> None:
        """Release the data dir (a second store on it may open after this)."""
        if self._lock_file is not None:
            self._lock_file.close()
            self._lock_file = None

    # ---------------------------------------------------------------- paths and startup

    def _dir(self, group_id: int) -> Path:
        return self._blocks / f"{group_id % 256:02x}"

    def _paths(self, group_id: int, index: int, generation: int, version: int) -> tuple[Path, Path]:
        stem = f"{group_id}_{index}_{generation}_{version}"
        d = self._dir(group_id)
        return d / f"{stem}.blk", d / f"{stem}.crc"

    def block_path(self, group_id: int, index: int, *, generation: int) -> Path:
        """The block file of the unit's committed version (tests flip bytes in it)."""
        key = _check_ids(group_id, index, generation)
        with self._lock:
            entry = self._units.get(key)
        if entry is None:
            raise UnitNotFound(f"unit {_name(key)} not found")
        return self._paths(*key, entry[0])[0]

    def _clean_tmp(self) -> None:
        for p in self._tmp.iterdir():
            try:
                p.unlink()
                log.info("deleted unfinished write %s", p.name)
            except OSError as e:
                log.warning("cannot delete %s: %s", p, e)

    def _recover(self) -> None:
        """Index the newest consistent version of every unit; delete every other unit file."""
        for d in self._blocks.iterdir():
            if not d.is_dir():
                continue
            files: dict[Unit, dict[int, set[str]]] = {}
            for p in d.iterdir():
                parsed = parse_name(p.name)
                if parsed is None:
                    continue
                g, i, generation, version = parsed
                files.setdefault((g, i, generation), {}).setdefault(version, set()).add(p.suffix)
            for key, versions in files.items():
                kept = None
                for version in sorted(versions, reverse=True):
                    if kept is None and versions[version] == {".blk", ".crc"}:
                        blk, crc = self._paths(*key, version)
                        try:
                            length = _read_header(crc)
                            size = blk.stat().st_size
                        except (ValueError, OSError) as e:
                            log.warning("dropping damaged unit files %s: %s", crc.stem, e)
                        else:
                            if size > length:
                                # An append that did not reach its commit point (the sidecar's
                                # rename): its bytes past the committed length are dropped.
                                log.info("unit files %s: block is %d bytes, sidecar says %d: an "
                                         "unfinished append, truncated", crc.stem, size, length)
                                os.truncate(blk, length)
                                size = length
                            if size == length:
                                kept = version
                                self._units[key] = (version, length)
                                continue
                            log.warning("dropping unit files %s: block is %d bytes, sidecar says %d",
                                        crc.stem, size, length)
                    self._unlink_version(key, version, why="superseded" if kept is not None else "incomplete")

    def _unlink_version(self, key: Unit, version: int, why: str = "") -> None:
        blk, crc = self._paths(*key, version)
        if why:
            log.info("removing %s unit files %s", why, blk.stem)
        crc.unlink(missing_ok=True)   # the sidecar first: a block without one is never visible
        blk.unlink(missing_ok=True)

    def _step(self, name: str) -> None:
        if self.crash_at == name:
            log.warning("debug knob: crashing at commit step %s", name)
            os.kill(os.getpid(), signal.SIGKILL)

    # ---------------------------------------------------------------- index

    def units(self) -> list[tuple[int, int, int, int]]:
        """(group_id, index, generation, length) of every stored unit."""
        with self._lock:
            return [(g, i, generation, n) for (g, i, generation), (_version, n) in self._units.items()]

    def unit_count(self) -> int:
        with self._lock:
            return len(self._units)

    def used_bytes(self) -> int:
        with self._lock:
            return sum(n for _version, n in self._units.values())

    def length(self, group_id: int, index: int, *, generation: int) -> int:
        key = _check_ids(group_id, index, generation)
        with self._lock:
            entry = self._units.get(key)
        if entry is None:
            raise UnitNotFound(f"unit {_name(key)} not found")
        return entry[1]

    def has(self, group_id: int, index: int, *, generation: int) -> bool:
        with self._lock:
            return _check_ids(group_id, index, generation) in self._units

    def delete(self, group_id: int, index: int, *, generation: int) -> bool:
        """Remove a unit (of that generation only); False if it was not there."""
        key = _check_ids(group_id, index, generation)
        with self._lock:
            entry = self._units.pop(key, None)
            self._append_locks.pop(key, None)
            if entry is not None:
                self._unlink_version(key, entry[0])
        return entry is not None

    # ---------------------------------------------------------------- the cluster this dir belongs to

    def _version(self) -> dict[str, str]:
        try:
            lines = (self.root / VERSION_FILE).read_text().splitlines()
        except FileNotFoundError:
            return {}
        pairs = (line.partition("=") for line in lines)
        return {key.strip(): value.strip() for key, sep, value in pairs if sep}

    def _write_version(self, fields: dict[str, str]) -> None:
        tmp = self.root / (VERSION_FILE + ".tmp")
        with open(tmp, "w") as f:
            f.write("".join(f"{k}={v}\n" for k, v in fields.items() if v))
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.root / VERSION_FILE)
        _fsync_dir(self.root)

    @property
    def cluster_id(self) -> str:
        """The cluster this data dir joined ("" before its first registration)."""
        return self._version().get("cluster_id", "")

    @property
    def storage_id(self) -> str:
        """This data dir's identity, made at its first start (as HDFS's storage ID): the NameNode
        refuses a second DataNode under the same id with another storage."""
        return self._version().get("storage_id", "")

    def record_cluster_id(self, cluster_id: str) -> None:
        """Remember the cluster joined (atomically, durably): any other one is refused from now on.
        Under the store's lock: the links to an HA cluster's NameNodes may register at once."""
        with self._lock:
            self._write_version({**self._version(), "cluster_id": cluster_id})

    # ---------------------------------------------------------------- write

    def open_writer(self, group_id: int, index: int, expected_length: int | None, *, generation: int,
                    once: bool = False, appendable: bool = False) -> UnitWriter:
        """A writer for one unit; ``expected_length`` None = not known yet (given to commit).
        ``once``: refuse (UnitExists) if the unit is stored, now or by the time of the commit.
        ``appendable``: an APPEND's new replica (later APPENDs may grow it; no written unit)."""
        key = _check_ids(group_id, index, generation)
        if once and self.has(*key[:2], generation=key[2]):
            raise UnitExists(f"unit {_name(key)} is stored already: a unit is written once")
        return UnitWriter(self, *key, None if expected_length is None else int(expected_length),
                          chunk=CHECKSUM_CHUNK, once=once, appendable=appendable)

    def _commit(self, w: UnitWriter, crc_tmp: Path) -> None:
        """Steps 3 to 6 of a commit (see the module docstring)."""
        d = self._dir(w.group_id)
        if not d.exists():
            d.mkdir(exist_ok=True)
            if self.fsync:
                _fsync_dir(self._blocks)
        key = (w.group_id, w.index, w.generation)
        with self._lock:
            old = self._units.get(key)
            if old is not None and w.once:
                raise UnitExists(f"unit {_name(key)} was stored by another write meanwhile: a unit is written once")
            version = (old[0] if old else 0) + 1
            blk, crc = self._paths(*key, version)
            os.replace(w.tmp_path, blk)
            self._step("block-renamed")
            os.replace(crc_tmp, crc)
            self._step("sidecar-renamed")
            self._units[key] = (version, w.length)
        # Readers now open the new version; one that opened the old one keeps its open file.
        if self.fsync:
            _fsync_dir(d)
        self._step("dir-synced")
        if old is not None:
            self._unlink_version(key, old[0])
            self._step("old-removed")

    # ---------------------------------------------------------------- append (a replicated open tail)

    def append(self, group_id: int, index: int, offset: int, data, *, generation: int) -> int:
        """Append ``data`` in place to the unit's committed version; returns its new length.

        ``offset`` must equal the committed length, else ``StaleAppend`` (a writer that missed
        an append, or a second writer): nothing changes. An append at 0 to a unit not stored
        creates it (HDFS's new replica of a pipeline), as a unit is written: once (``UnitExists``
        if another write stored it meanwhile). The bytes go to the block file past the
        committed length and are fsynced; the last chunk's CRC is continued (no read back); the
        sidecar is rewritten to tmp/ and renamed over the old one: the commit point. Until then
        readers see the old length only (an ``OpenUnit`` is a snapshot of length and CRCs, and
        bytes below it never change), and a crash leaves a block longer than its sidecar, which
        opening the store truncates back. One append at a time per unit; the store's lock is held
        only for the rename, never across an fsync.
        """
        key = _check_ids(group_id, index, generation)
        if offset < 0:
            raise RangeError(f"bad append offset {offset}")
        with self._lock:
            lock = self._append_locks.setdefault(key, threading.Lock())
        with lock:
            with self._lock:
                entry = self._units.get(key)
                if entry is not None:
                    version, length = entry
                    blk, crc = self._paths(*key, version)
                    raw = crc.read_bytes()
            if entry is None:
                if offset:
                    raise UnitNotFound(f"unit {_name(key)} not found")
                # the replica's first bytes: written as a new unit
                with self.open_writer(*key[:2], len(data), generation=key[2], once=True, appendable=True) as w:
                    w.write(data)
                    return w.commit()
            try:
                _length, chunk, crcs = _parse_sidecar(raw)
            except StorageError:
                raise ChecksumError(group_id, index, 0) from None   # a damaged sidecar: the unit is bad
            if raw[:len(_MAGIC_APPEND)] != _MAGIC_APPEND:
                raise NotAppendable(f"unit {_name(key)} was written, not made by APPEND: only an open tail's "
                                    f"replica grows in place")
            if offset != length:
                raise StaleAppend(f"unit {_name(key)} holds {length} bytes: an append at {offset} is "
                                  f"refused (a stale writer)")
            n = len(data)
            if n == 0:
                return length
            try:
                f = open(blk, "r+b")
            except FileNotFoundError:
                raise UnitNotFound(f"unit {_name(key)} not found") from None
            with f:
                f.seek(length)
                f.write(data)          # buffered: all of it, then flushed
                f.flush()
                if self.fsync:
                    _datasync(f.fileno())
            self._step("block-synced")
            grown = ChunkCrcs(chunk, crcs, length)
            grown.add(data)
            crc_tmp = self._tmp / f"{group_id}_{index}_{os.getpid()}_append_{uuid.uuid4().hex}.crc"
            try:
                write_sidecar(crc_tmp, _MAGIC_APPEND, length + n, grown, sync=self.fsync)
                self._step("sidecar-synced")
                with self._lock:
                    if self._units.get(key) != entry:      # deleted or replaced meanwhile
                        raise StaleAppend(f"unit {_name(key)} was replaced or deleted during an append")
                    os.replace(crc_tmp, crc)
                    self._step("sidecar-renamed")
                    self._units[key] = (version, length + n)
            finally:
                crc_tmp.unlink(missing_ok=True)
            if self.fsync:
                _fsync_dir(crc.parent)
            self._step("dir-synced")
            return length + n

    # ---------------------------------------------------------------- read

    def open_unit(self, group_id: int, index: int, *, generation: int) -> OpenUnit:
        """The unit's committed version, open (see the module docstring). UnitNotFound if there is
        none; ChecksumError (offset 0) if its sidecar is damaged: the unit is bad."""
        key = _check_ids(group_id, index, generation)
        with self._lock:
            entry = self._units.get(key)
            if entry is None:
                raise UnitNotFound(f"unit {_name(key)} not found")
            blk, crc = self._paths(*key, entry[0])
            try:
                raw = crc.read_bytes()
                f = open(blk, "rb", buffering=0)
            except FileNotFoundError:
                raise UnitNotFound(f"unit {_name(key)} not found") from None
        try:
            length, chunk, crcs = _parse_sidecar(raw)
        except StorageError:
            f.close()
            raise ChecksumError(group_id, index, 0) from None
        return OpenUnit(group_id, index, generation, length, chunk, crcs, f, blk)

    def read(self, group_id: int, index: int, offset: int, length: int, *, generation: int,
             piece: int = READ_BATCH,
             tamper: Callable[[memoryview, int], None] | None = None) -> Iterator[bytes]:
        """Yield bytes [offset, offset+length) of a unit in pieces of at most ``piece`` bytes.

        Every 64 KiB chunk the range touches is verified before any of its bytes is yielded;
        a mismatch raises ChecksumError. ``tamper(buffer, unit_offset)`` may modify the bytes read
        from disk before they are verified (fault injection: a bad disk).
        Range errors are raised at the call, not at the first ``next()``.
        """
        group_id, index, generation = _check_ids(group_id, index, generation)
        if offset < 0 or length < 0:
            raise RangeError(f"bad range {offset}+{length}")
        unit = self.open_unit(group_id, index, generation=generation)
        if offset + length > unit.length:
            unit.close()
            raise RangeError(f"range {offset}+{length} exceeds unit {group_id}/{index} "
                             f"of {unit.length} bytes")
        return _read_iter(unit, offset, length, max(piece, 1), tamper)


def _read_iter(unit: OpenUnit, offset, length, piece, tamper) -> Iterator[bytes]:
    f, chunk, crcs = unit.file, unit.chunk, unit.crcs
    end = offset + length
    batch = max(chunk, READ_BATCH // chunk * chunk)
    buf = bytearray(batch)
    view = memoryview(buf)
    pos = offset // chunk * chunk
    stop = min(unit.length, -(-end // chunk) * chunk)   # end of the last chunk the range touches
    try:
        while pos < end:
            n = min(batch, stop - pos)
            f.seek(pos)
            got = f.readinto(view[:n]) or 0
            if got != n:
                raise ChecksumError(unit.group_id, unit.index, pos + got)  # truncated on disk
            if tamper is not None:
                tamper(view[:n], pos)
            for c in range(0, n, chunk):
                if crc32c.crc32c(view[c:min(c + chunk, n)]) != crcs[(pos + c) // chunk]:
                    raise ChecksumError(unit.group_id, unit.index, pos + c)
            lo = max(offset, pos) - pos
            hi = min(end, pos + n) - pos
            for s in range(lo, hi, piece):
                yield bytes(view[s:min(s + piece, hi)])
            pos += n
    finally:
        view.release()
        unit.close()


def _lock_dir(root: Path):
    """One DataNode per data dir: two would delete each other's temp files and overwrite units."""
    handle = open(root / LOCK_FILE, "a+")
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.seek(0)
        holder = handle.read().strip()
        handle.close()
        raise DataDirInUse(f"data dir {root} is in use by another DataNode"
                           + (f" (pid {holder})" if holder.isdigit() else "")) from None
    handle.seek(0)
    handle.truncate()
    handle.write(f"{os.getpid()}\n")
    handle.flush()
    return handle


