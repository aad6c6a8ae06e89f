"""Coalescing: operations of one kind issued concurrently by many threads, sent as one batched call.

A long-lived process (the mount, the S3 gateway, fsspec, ``put -r``) has many threads each asking
the NameNode one thing at a time; at gRPC Python's ~0.5 ms of CPU a call, the calls, not the
NameNode's work, are the cost. A ``Batcher`` takes each thread's operation (``call``), and sends
what is waiting as one call of ``send`` (a batched RPC: many items, an answer per item):

- No waiting when idle: a thread whose operation finds a free slot (fewer than ``max_in_flight``
  batches on the way) sends at once, its own operation alone if nothing else waits, so a lone
  caller pays no linger. While batches are in flight, new operations queue; the next free slot
  takes every queued one (up to ``max_batch``) in one call: the busier the callers, the bigger
  the batches (group commit's rule, on the client side).
- ``linger_s`` > 0 holds a batch that is not full for up to that long before it goes, for callers
  that arrive just apart (off by default).
- The sending is done by one of the waiting callers' own threads (the leader), not by a thread of
  the batcher's: nothing to start or stop, and no hop to another thread and back.
- ``send(items)`` returns one answer per item, in order: a value, or an exception for that item
  alone (raised in its caller only: one bad path fails only its own stat). An exception raised by
  ``send`` itself (the NameNode unreachable) is every item's.
- Each item is the caller's own request, with its own retry id: a batch resent after a failover
  is applied once per item, as the same calls one by one would be.
"""

from __future__ import annotations

import collections
import threading
import time
from typing import Callable, Generic, Sequence, TypeVar

T = TypeVar("T")
R = TypeVar("R")


class _Slot:
    __slots__ = ("item", "done", "value", "error")

    def __init__(self, item):
        self.item = item
        self.done = False
        self.value = None
        self.error: BaseException | None = None


class Batcher(Generic[T, R]):
    def __init__(self, send: "Callable[[list[T]], Sequence[R | BaseException]]", *, max_batch: int = 256,
                 max_in_flight: int = 2, linger_s: float = 0.0):
        if max_batch < 1 or max_in_flight < 1 or linger_s < 0:
            raise ValueError("max_batch and max_in_flight >= 1, linger_s >= 0")
        self._send = send
        self.max_batch = max_batch
        self.max_in_flight = max_in_flight
        self.linger_s = linger_s
        self._cond = threading.Condition()
        self._queue: collections.deque[_Slot] = collections.deque()
        self._in_flight = 0
        # What it did (tests, benchmarks): batches sent, items sent, the largest batch.
        self.batches = 0
        self.items = 0
        self.largest = 0

    def call(self, item: T) -> R:
        """Send ``item`` (in a batch with whatever else waits) and return its answer, or raise its error."""
        slot = _Slot(item)
        with self._cond:
            self._queue.append(slot)
            while not slot.done:
                if self._in_flight < self.max_in_flight and self._queue:
                    self._in_flight += 1   # before the linger: one leader lingers for a slot
                    try:
                        batch = self._take()
                        if batch:
                            self._cond.release()
                            try:
                                self._run(batch)
                            finally:
                                self._cond.acquire()
                    finally:
                        self._in_flight -= 1
                        self._cond.notify_all()
                else:
                    self._cond.wait()
        if slot.error is not None:
            raise slot.error
        return slot.value

    def _take(self) -> list[_Slot]:
        """Up to ``max_batch`` queued slots, after the linger (with the lock held; it waits on it)."""
        if self.linger_s and len(self._queue) < self.max_batch:
            deadline = time.monotonic() + self.linger_s
            while len(self._queue) < self.max_batch:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._cond.wait(left)
        n = min(len(self._queue), self.max_batch)
        return [self._queue.popleft() for _ in range(n)]

    def _run(self, batch: list[_Slot]) -> None:
        """Send one batch (no lock held) and give each slot its answer."""
        try:
            answers = list(self._send([s.item for s in batch]))
            if len(answers) != len(batch):
                raise RuntimeError(f"a batch of {len(batch)} got {len(answers)} answers")
        except BaseException as err:   # noqa: BLE001 - the whole batch's failure is each item's
            answers = [err] * len(batch)
        with self._cond:
            self.batches += 1
            self.items += len(batch)
            self.largest = max(self.largest, len(batch))
            for s, answer in zip(batch, answers):
                if isinstance(answer, BaseException):
                    s.error = answer
                else:
                    s.value = answer
                s.done = True
            self._cond.notify_all()
