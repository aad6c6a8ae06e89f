"""Exactly-once batch Txns of an active, and settling one whose answer was lost.

When etcd's leader member dies, the Txn in flight may fail with its outcome unknown (the
connection reset, or no answer within the timeout while etcd elects a new leader): etcd may have
committed it or dropped it. Failing the NameNode then (fail-stop) costs a NameNode failover for an
etcd failover. Instead each batch Txn is one link of a chain, and a lost answer is settled:

  the Txn puts the ``commit`` key (etcd_meta.MARKER; the view ignores it) to ``<epoch>:<batch>``,
  guarded by the epoch (the leader key's create revision, the fencing) AND the ``commit`` key's
  mod revision being the one the previous batch left (compare-and-swap): a Txn can land only
  right after its predecessor, so it lands at most once.

On an unknown outcome, while the lease's serve deadline holds (``serving``), with backoff: a
linearizable read of the key (a new etcd leader has committed an entry of its own term before
it answers one, so the batch is in its log or gone for good). It names this batch: committed, at
the key's mod revision. It still names the previous one: the same Txn, the same guard, again (a
late copy of the first send then fails the guard, and cannot land after a later batch either).
Anything else (another epoch wrote it) is Fenced. A guard failure is Fenced unless the read shows
the batch landed (a re-send whose first copy did). Past the deadline: MetaUnavailable, fail-stop
as before. Nobody waits less: writers and readers wait for ``durable`` throughout (db.py).
"""

from __future__ import annotations

import logging
import time
from typing import Callable

from hedgefs.namenode.journal.etcd_meta import Fenced, MetaUnavailable

log = logging.getLogger("hedgefs.namenode")

BACKOFF_S = (0.05, 0.5)    # first and longest wait between two settling tries
TRY_S = 0.5               # one settling call's timeout, per member (under a lease)
UNBOUNDED_S = 10.0         # without a lease to say (tests): settle for this long


class Chain:
    """The batch Txns of one epoch, in order (one in flight: db.py's committer)."""

    def __init__(self, meta, epoch: int, serving: Callable[[], bool] | None = None, clock=time.monotonic):
        self.meta, self.epoch, self.clock = meta, epoch, clock
        self._serving = serving
        self.batch = 0                 # batches committed in this epoch
        self.after: int | None = None  # the ``commit`` key's mod revision the last batch left (None: unread)
        self.settled = 0               # batches whose outcome was unknown and settled (metrics, tests)

    def _name(self, batch: int) -> bytes:
        return f"{self.epoch}:{batch}".encode()

    def commit(self, puts: dict[str, bytes], deletes: list[str]) -> int:
        """One batch as one Txn, exactly once; its revision. Fenced, or MetaUnavailable past the deadline."""
        until = self.clock() + UNBOUNDED_S
        alive = self._serving or (lambda: self.clock() < until)
        if self.after is None:
            self.after = self._read(alive, "reading the last batch's mark")[1]
        name = self._name(self.batch + 1)
        try:
            revision = self.meta.commit(self.epoch, puts, deletes, marker=(name, self.after))
        except MetaUnavailable as err:
            revision = self._settle(name, puts, deletes, alive, err)
        except Fenced:
            revision = self._explain(name)
        self.batch += 1
        self.after = revision
        return revision

    def _explain(self, name: bytes) -> int:
        """A guard failed: committed (a re-send of a batch that had landed) or Fenced."""
        value, mod = self.meta.marker()
        if value == name:
            return mod
        raise Fenced(f"epoch {self.epoch} is no longer the leader's: this NameNode was deposed "
                     f"(the last batch in etcd is {(value or b'none').decode()})")

    def _settle(self, name: bytes, puts, deletes, alive, first: Exception) -> int:
        started, wait, last = self.clock(), BACKOFF_S[0], first
        log.warning("etcd batch %s: outcome unknown (%s); settling it", name.decode(), first)
        while True:
            try:
                value, mod = self.meta.marker(timeout_s=self._timeout())
                if value == name:
                    how = "had committed"
                    break
                if mod != self.after:
                    raise Fenced(f"epoch {self.epoch} is no longer the leader's: this NameNode was deposed "
                                 f"(the last batch in etcd is {(value or b'none').decode()})")
                try:
                    mod = self.meta.commit(self.epoch, puts, deletes, marker=(name, self.after),
                                           timeout_s=self._timeout())
                    how = "committed when sent again"
                    break
                except Fenced:
                    mod = self._explain(name)
                    how = "had committed"
                    break
            except MetaUnavailable as err:
                last = err
            if not alive():
                raise MetaUnavailable(f"{first}; not settled before the serve deadline ({last})")
            time.sleep(wait)
            wait = min(BACKOFF_S[1], wait * 2)
        self.settled += 1
        log.warning("etcd batch %s %s (revision %d), settled in %.2f s", name.decode(), how, mod,
                    self.clock() - started)
        return mod

    def _timeout(self) -> float | None:
        return None if self._serving is None else TRY_S

    def _read(self, alive, what: str) -> tuple[bytes | None, int]:
        wait = BACKOFF_S[0]
        while True:
            try:
                return self.meta.marker(timeout_s=self._timeout())
            except MetaUnavailable as err:
                if not alive():
                    raise MetaUnavailable(f"{what}: {err}") from None
            time.sleep(wait)
            wait = min(BACKOFF_S[1], wait * 2)
