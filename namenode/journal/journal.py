"""The journal: every change of the namespace is one record, numbered (its txid), applied, and
made durable by a group commit before its caller is answered (HDFS's edit log and logSync).

``log(record)`` runs under the namesystem's writers' lock: it encodes the record (an error there
changes nothing), takes the next txid (before the tree changes: a reader that saw the change reads
a ``last`` at least its txid), applies it (apply.py; an error there is a bug, and the journal
stops: fail-stop), and queues its frame. One sync thread takes whatever is queued, writes it to
the engine as one batch (SQLite: one INSERT and one COMMIT with its fsync; etcd: one guarded
Txn), off the writers' lock, raises ``durable`` and wakes the waiters: many records, one fsync.
Writers queue the next batch meanwhile. A caller is answered after ``wait_durable(txid)``; a
reader after ``wait_durable(last)`` as it was at the end of its read, so nobody is shown a change
before it is durable. A batch the engine could not write fails the journal (``failed``): every
change is refused from then on (StoreFailed), as HDFS's NameNode stops when it cannot write its
edit log; nothing it had queued was acknowledged.

A standby's journal follows another's (``follow``): it applies records as they arrive, and what
it applied is durable by definition (it came from the engine).
"""

from __future__ import annotations

import logging
import threading
from typing import Callable, Iterator, Protocol

from hedgefs.namenode import faults
from hedgefs.namenode.journal import records
from hedgefs.namenode.journal.apply import Applier

log = logging.getLogger("hedgefs.namenode")


class StoreFailed(RuntimeError):
    """The journal could not make a batch durable: its changes are lost, none was acknowledged."""


class CorruptStore(RuntimeError):
    """An image or a journal record that does not check: one line naming where and the txid."""


class Engine(Protocol):
    """Where the journal's batches and checkpoint images are kept (sqlite.py, etcd.py)."""

    location: str                                                           # for messages: a file, a URL

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
        self._work = threading.Condition(self._lock)    # the sync thread waits for frames
        self._done = threading.Condition(self._lock)    # callers wait for durability
        self._frames: list[bytes] = []
        self._first = 0                # txid of _frames[0]
        self._queued = 0               # txid of _frames[-1]
        self._closing = False
        self._thread: threading.Thread | None = None
        self.on_batch: Callable[[int], None] | None = None   # told each batch's last txid once durable
        self.on_failure: Callable[[str], None] | None = None   # told once when the journal fails

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
        """From now on batches are written by the sync thread."""
        self._thread = threading.Thread(target=self._run, name="namenode-journal", daemon=True)
        self._thread.start()

    # ------------------------------------------------------------------ logging

    def log(self, record: records.Record) -> int:
        """Apply ``record`` and queue it (the caller holds the writers' lock); its txid."""
        if self.failed:
            raise StoreFailed(self.failed)
        payload = records.encode(record)
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
            self._work.notify()
        return txid

    def wait_durable(self, txid: int) -> None:
        """Return once every txid up to ``txid`` is durable; StoreFailed if it never will be."""
        if txid <= self.durable:
            return
        with self._lock:
            while self.durable < txid:
                if self.failed:
                    raise StoreFailed(self.failed)
                self._done.wait()

    def fail(self, why: str) -> None:
        with self._lock:
            first = self.failed is None
            if first:
                self.failed = f"the NameNode's journal failed ({why}); changes are refused"
                log.critical("journal on %s failed: %s", self.engine.location, why)
            self._work.notify_all()
            self._done.notify_all()
        if first and self.on_failure is not None:
            self.on_failure(why)

    def _run(self) -> None:
        while True:
            with self._lock:
                while not self._frames and not self._closing and not self.failed:
                    self._work.wait()
                if self.failed or not self._frames:
                    return
                frames, first, last = self._frames, self._first, self._queued
                self._frames = []
            try:
                self.engine.append(first, last, b"".join(frames))
            except Exception as err:
                self.fail(f"writing txids {first}-{last} to {self.engine.location}: {err}")
                return
            faults.crash_point("journal:committed")
            with self._lock:
                self.durable = last
                self.batches += 1
                self._done.notify_all()
            if self.on_batch is not None:
                self.on_batch(last)

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
        """Write what is queued, stop the sync thread."""
        with self._lock:
            self._closing = True
            self._work.notify_all()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
