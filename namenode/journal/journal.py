"""The journal: every change of the namespace is one record, numbered (its txid), applied, and
made durable by a group commit before its caller is answered (HDFS's edit log and logSync).

``log(record)`` runs under the namesystem's writers' lock: it encodes the record (an error there
changes nothing), takes the next txid (before the tree changes: a reader that saw the change reads
a ``last`` at least its txid), applies it (apply.py; an error there is a bug, and the journal
stops: fail-stop), and queues its frame. Then, the writers' lock released, the caller waits until
its txid is durable (``wait_durable``, HDFS's logSync): the first caller to find its record queued
and nobody writing takes whatever is queued and writes it to the engine as one batch (SQLite: one
INSERT and one COMMIT with its fsync; etcd: one guarded Txn), raises ``durable`` and wakes the
waiters: many records, one fsync, and no thread hand-over for a lone caller. Each waiter waits on
a gate of its own, opened when its record is durable; writers queue the next batch meanwhile. A
reader waits for ``last`` as it was at the end of its read, so nobody is shown a change before it
is durable. A batch the engine could not write fails the journal (``failed``): every change is
refused from then on (StoreFailed), as HDFS's NameNode stops when it cannot write its edit log;
nothing it had queued was acknowledged.

A standby's journal follows another's (``follow``): it applies records as they arrive, and what
it applied is durable by definition (it came from the engine).
"""

from __future__ import annotations

import heapq
import itertools
import logging
import threading
from typing import Callable, Iterator, Protocol

from hedgefs.namenode import faults
from hedgefs.namenode.errors import FailedPrecondition
from hedgefs.namenode.journal import records
from hedgefs.namenode.journal.apply import Applier

log = logging.getLogger("hedgefs.namenode")


class StoreFailed(RuntimeError):
    """The journal could not make a batch durable: its changes are lost, none was acknowledged."""


class CorruptStore(RuntimeError):
    """An image or a journal record that does not check: one line naming where and the txid."""


class RecordTooLarge(FailedPrecondition):
    """A change whose record the engine could not hold (etcd: a key's 1 MiB): refused before
    anything changed (a Concat of some 200,000 groups; no other record comes near)."""


class Engine(Protocol):
    """Where the journal's batches and checkpoint images are kept (sqlite.py, etcd.py)."""

    location: str                                                           # for messages: a file, a URL
    max_record_bytes: int                                                   # one record's payload at most

    def image(self) -> tuple[int, Iterator[bytes]] | None: ...             # the latest: (txid, its chunks)
    def batches(self, after: int) -> Iterator[tuple[int, int, bytes]]: ...  # (first, last, frames) past txid
    def append(self, first: int, last: int, data: bytes) -> None: ...     # durable when it returns
    def write_image(self, txid: int, chunks: Iterator[bytes]) -> None: ...  # stored, not yet the latest
    def publish_image(self, txid: int) -> None: ...                        # the latest from now on
    def truncate(self, txid: int) -> None: ...                             # batches wholly <= txid go
    def record_cluster(self, cluster_id: str) -> None: ...                  # a copy for tools (SQLite's)
    def close(self) -> None: ...


class Journal:
    def __init__(self, engine: Engine, applier: Applier):
        self.engine, self.applier = engine, applier
        self.last = 0                  # the txid of the last record applied
        self.durable = 0               # every txid up to this one is in the engine
        self.image_txid = 0            # of the latest checkpoint image
        self.failed: str | None = None
        self.batches = 0               # batches written (tests, metrics)
        self._lock = threading.Lock()
        self._waiting: list[tuple[int, int, threading.Lock]] = []   # (txid, ticket, gate): a heap
        self._tickets = itertools.count()
        self._frames: list[bytes] = []
        self._first = 0                # txid of _frames[0]
        self._queued = 0               # txid of _frames[-1]
        self._syncing = False          # a caller is writing a batch
        self.writing = False
        self.on_batch: Callable[[int], None] | None = None   # told each batch's last txid once durable
        self.on_failure: Callable[[str], None] | None = None   # told once when the journal fails
        self.on_first_batch: Callable[[int], None] | None = None   # told once, the first batch written

    # ------------------------------------------------------------------ start-up

    def load(self, apply_record: Callable[[int, records.Record], None] | None = None) -> int:
        """The latest image, then every batch after it, applied: returns the records replayed.
        CorruptStore (naming the engine's location and the txid) when one does not check."""
        from hedgefs.namenode.journal import image

        found = self.engine.image()
        if found is not None:
            txid, chunks = found
            try:
                image.load(self.applier, chunks)
            except image.CorruptImage as err:
                raise CorruptStore(f"{self.engine.location}: the checkpoint image at txid {txid} is corrupt "
                                   f"({err}); nothing was changed") from None
            self.last = self.durable = self.image_txid = txid
        replayed = 0
        apply = apply_record or (lambda txid, rec: self.applier.apply(rec))
        self.applier.replaying = True
        try:
            for first, last, data in self.engine.batches(self.last):
                if first > self.last + 1:
                    raise records.CorruptRecord(self.last + 1, f"missing: the next batch found starts at {first}")
                for txid, record in records.frames(data, first):
                    if txid <= self.last:
                        continue
                    apply(txid, record)
                    self.last = self.durable = txid
                    replayed += 1
        except records.CorruptRecord as err:
            raise CorruptStore(f"{self.engine.location}: {err}; nothing was changed") from None
        finally:
            self.applier.replaying = False
        return replayed

    def start(self) -> None:
        """From now on records are logged and written (a standby's journal only follows)."""
        self.writing = True

    # ------------------------------------------------------------------ logging

    def log(self, record: records.Record) -> int:
        """Apply ``record`` and queue it (the caller holds the writers' lock); its txid."""
        if self.failed:
            raise StoreFailed(self.failed)
        payload = records.encode(record)
        if len(payload) > self.engine.max_record_bytes:
            # (the words the S3 gateway's multipart Complete looks for, to copy the parts instead)
            raise RecordTooLarge(f"{type(record).__name__} of {len(payload):,} bytes: more than one etcd "
                                 f"transaction may hold (a journal record of at most "
                                 f"{self.engine.max_record_bytes:,} bytes); do it in parts")
        txid = self.last + 1
        self.last = txid
        try:
            self.applier.apply(record)
        except Exception as err:
            log.exception("applying %s failed: a bug; the journal stops", type(record).__name__)
            self.fail(f"a record could not be applied ({type(err).__name__}: {err})")
            raise StoreFailed(self.failed) from None
        frame = records.frame(txid, payload)
        with self._lock:
            if not self._frames:
                self._first = txid
            self._frames.append(frame)
            self._queued = txid
            if not self._syncing and self._waiting and self._waiting[0][0] <= txid:
                heapq.heappop(self._waiting)[2].release()   # a reader of this record may write it now
        return txid

    def wait_durable(self, txid: int) -> None:
        """Return once every txid up to ``txid`` is durable; StoreFailed if it never will be.

        HDFS's logSync: the caller whose record is queued and finds nobody writing writes the
        batch itself (everything queued by then), off every lock; the others wait, each on a gate
        of its own, opened when its txid is durable (or, for the first of those left, when it may
        write the next batch): a lone caller writes its own record with no thread to hand over to,
        many callers share one write and one fsync, and a batch wakes only the callers it serves."""
        if txid <= self.durable:
            return
        lock = self._lock
        while True:
            with lock:
                while True:
                    if self.durable >= txid:
                        return
                    if self.failed:
                        raise StoreFailed(self.failed)
                    if not self._syncing and self._queued >= txid:
                        frames, first, last = self._frames, self._first, self._queued
                        self._frames = []
                        self._syncing = True
                        break
                    gate = threading.Lock()
                    gate.acquire()
                    heapq.heappush(self._waiting, (txid, next(self._tickets), gate))
                    lock.release()
                    try:
                        gate.acquire()
                    finally:
                        lock.acquire()
            try:
                self.engine.append(first, last, b"".join(frames))
            except Exception as err:
                with lock:
                    self._syncing = False
                self.fail(f"writing txids {first}-{last} to {self.engine.location}: {err}")
                raise StoreFailed(self.failed) from None
            faults.crash_point("journal:committed")
            with lock:
                self.durable = last
                self.batches += 1
                self._syncing = False
                waiting = self._waiting
                while waiting and waiting[0][0] <= last:
                    heapq.heappop(waiting)[2].release()
                if waiting and waiting[0][0] <= self._queued:   # the next batch: its first caller writes it
                    heapq.heappop(waiting)[2].release()
            if self.on_first_batch is not None:
                told, self.on_first_batch = self.on_first_batch, None
                told(last)
            if self.on_batch is not None:
                self.on_batch(last)

    def fail(self, why: str) -> None:
        with self._lock:
            first = self.failed is None
            if first:
                self.failed = f"the NameNode's journal failed ({why}); changes are refused"
                log.critical("journal on %s failed: %s", self.engine.location, why)
            while self._waiting:
                heapq.heappop(self._waiting)[2].release()
        if first and self.on_failure is not None:
            self.on_failure(why)

    # ------------------------------------------------------------------ a standby's

    def follow(self, txid: int, record: records.Record) -> None:
        """A record another NameNode logged (a standby's tailer): applied, and durable already."""
        self.applier.replaying = True
        try:
            self.applier.apply(record)
        finally:
            self.applier.replaying = False
        self.last = self.durable = txid

    def close(self) -> None:
        """Write what is queued (its callers may be gone: a shutdown)."""
        if self.writing and not self.failed and self._queued > self.durable:
            try:
                self.wait_durable(self._queued)
            except StoreFailed:
                pass
