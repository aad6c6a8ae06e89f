"""One unit being written (``BlockStore.open_writer``): appended to a temp file, checksummed on
the fly, then committed by the store (storage.py: the commit protocol)."""

from __future__ import annotations

import itertools
import os

from hedgefs.datanode.unit_files import _MAGIC, _MAGIC_APPEND, ChunkCrcs, LengthMismatch, _datasync, write_sidecar

_FILE_COUNTER = itertools.count()


class UnitWriter:
    """One unit being written: appended to a temp file, checksummed on the fly, committed once."""

    def __init__(self, store, group_id: int, index: int, generation: int,
                 expected_length: int | None, *, chunk: int, once: bool = False, appendable: bool = False):
        if expected_length is not None and expected_length < 0:
            raise LengthMismatch(f"bad expected length {expected_length}")
        self.store, self.group_id, self.index, self.generation = store, group_id, index, generation
        self.once = once
        self.appendable = appendable   # made by APPEND (its sidecar says so): APPENDs may grow it
        self.expected_length = expected_length
        self.length = 0
        self.tmp_path = store._tmp / f"{group_id}_{index}_{os.getpid()}_{next(_FILE_COUNTER)}.blk"
        self._f = open(self.tmp_path, "wb")
        self._crcs = ChunkCrcs(chunk)
        self._done = False

    def write(self, data) -> None:
        n = len(data)
        if self.expected_length is not None and self.length + n > self.expected_length:
            raise LengthMismatch(f"unit {self.group_id}/{self.index}: more than the expected "
                                 f"{self.expected_length} bytes")
        self._f.write(data)
        self.length += n
        self._crcs.add(data)

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
        crc_tmp = self.tmp_path.with_suffix(".crc")
        store = self.store
        try:
            if self.length != (self.expected_length or 0):
                raise LengthMismatch(f"unit {self.group_id}/{self.index}: got {self.length} "
                                     f"bytes, expected {self.expected_length}")
            self._f.flush()
            if store.fsync:
                _datasync(self._f.fileno())
            self._f.close()
            store._step("block-synced")
            write_sidecar(crc_tmp, _MAGIC_APPEND if self.appendable else _MAGIC, self.length, self._crcs,
                          sync=store.fsync)
            store._step("sidecar-synced")
            store._commit(self, crc_tmp)
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
