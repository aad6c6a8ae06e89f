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
- The sending is done by one of the waiting callers' own threads (the leader), not by a thread of
  the batcher's: nothing to start or stop, and no hop to another thread and back. A leader done
  with its batch hands its place to the first caller still queued (or gives it up); each caller
  sleeps on a lock of its own, woken once its answer is in or when it is to lead: one wake-up a
  caller, not every waiter's at each answer (a Condition's notify_all was a quarter of a 16-thread
  stat load's client CPU).
- ``send(items)`` returns one answer per item, in order: a value, or an exception for that item
  alone (raised in its caller only: one bad path fails only its own stat). An exception raised by
  ``send`` itself (the NameNode unreachable) is every item's. A KeyboardInterrupt (Ctrl-C) is the
  interrupted thread's alone: its place goes on to the next caller, and the other callers of a batch
  it was sending get a clean HedgefsError, never the interrupt and never a wait without end.
- Each item is the caller's own request, with its own retry id: a batch resent after a failover
  is applied once per item, as the same calls one by one would be.
"""

from __future__ import annotations

import collections
import itertools
import threading
from typing import Callable, Generic, Sequence, TypeVar

from hedgefs.client.errors import HedgefsError

T = TypeVar("T")
R = TypeVar("R")


class _Slot:
    __slots__ = ("item", "done", "lead", "woken", "wake", "value", "error")

    def __init__(self, item):
        self.item = item
        self.done = False    # its answer is in
        self.lead = False    # it holds an in-flight place: its caller sends the next batch
        self.woken = False   # ``wake`` released and not yet taken by its caller
        self.wake = threading.Lock()
        self.wake.acquire()   # its caller sleeps on it (released: done, or to lead)
        self.value = None
        self.error: BaseException | None = None


class Batcher(Generic[T, R]):
    def __init__(self, send: "Callable[[list[T]], Sequence[R | BaseException]]", *, max_batch: int = 256,
                 max_in_flight: int = 2):
        if max_batch < 1 or max_in_flight < 1:
            raise ValueError("max_batch and max_in_flight >= 1")
        self._send = send
        self.max_batch = max_batch
        self.max_in_flight = max_in_flight
        self._lock = threading.Lock()
        self._queue: collections.deque[_Slot] = collections.deque()
        self._in_flight = 0   # places held: by leaders, and by callers woken to lead
        # What it did (tests, benchmarks): batches sent, items sent, the largest batch.
        self.batches = 0
        self.items = 0
        self.largest = 0

    def call(self, item: T) -> R:
        """Send ``item`` (in a batch with whatever else waits) and return its answer, or raise its error."""
        slot = _Slot(item)
        try:
            # The place a caller holds is ``slot.lead``, from the moment it is taken (or handed to
            # it) until ``_hand_off`` clears it and passes it on, in one step under the lock: an
            # interrupt (Ctrl-C) anywhere between finds it still set, and the ``except`` passes it on.
            with self._lock:
                self._queue.append(slot)
                if self._in_flight < self.max_in_flight:
                    self._in_flight += 1
                    slot.lead = True
            while True:
                with self._lock:   # both flags at once: a slot may be handed a place and answered by
                    holding, done = slot.lead, slot.done   # another leader between two unlocked reads
                if holding:
                    self._lead(slot)
                    continue
                if done:
                    break
                slot.wake.acquire()
                with self._lock:
                    slot.woken = False
        except BaseException:   # interrupted (Ctrl-C) while queued or about to lead: leave no place behind
            with self._lock:
                if slot in self._queue:
                    self._queue.remove(slot)
                if slot.lead:
                    self._hand_off(slot)
            raise
        if slot.error is not None:
            raise slot.error
        return slot.value

    def _lead(self, leader: _Slot) -> None:
        """With ``leader``'s in-flight place: send one batch of what is queued (up to
        ``max_batch``), then hand the place to the first caller still queued, or give it up.
        Interrupted (a KeyboardInterrupt in the leader's thread, in ``send`` or around it), every
        slot it took and did not answer gets a clean error, so no other caller waits forever."""
        batch: list[_Slot] = []
        try:
            with self._lock:
                batch = list(itertools.islice(self._queue, self.max_batch))   # (one C call: all or none)
                for _ in batch:
                    self._queue.popleft()
            if batch:
                self._run(batch)
        except BaseException as err:
            with self._lock:
                self._abandon(batch, leader, err)
            raise
        finally:
            with self._lock:
                if leader.lead:   # (an interrupt at _hand_off's entry: the caller's except passes it on)
                    self._hand_off(leader)

    def _abandon(self, batch: list[_Slot], leader: _Slot, err: BaseException) -> None:
        """(The lock held.) The leader was interrupted holding ``batch``: every slot it took off
        the queue and did not answer is answered with a clean error (the leader's own with
        ``err``, raised in its thread anyway); one still queued (the interrupt came amid the pops)
        stays for the next leader."""
        interrupted = HedgefsError(f"interrupted: the thread sending this call in a batch stopped "
                                   f"({type(err).__name__}); whether a change took effect is unknown")
        for s in batch:
            if s in self._queue:
                continue
            if not s.done:
                s.error = err if s is leader else interrupted
                s.done = True
            if not s.woken:
                s.woken = True
                s.wake.release()

    def _hand_off(self, holder: _Slot) -> None:
        """(The lock held.) ``holder``'s place is free: to the first caller still queued, or given up.
        The search first (an interrupt there changes nothing), then the state changes in a straight
        line of stores, no call between (Python raises a KeyboardInterrupt only at a call or a loop)."""
        successor = None
        for s in self._queue:
            if not s.lead:
                successor = s
                break
        holder.lead = False
        if successor is None:
            self._in_flight -= 1
        else:
            successor.lead = True
            if not successor.woken:
                successor.woken = True
                successor.wake.release()

    def _run(self, batch: list[_Slot]) -> None:
        """Send one batch (no lock held) and give each slot its answer. A KeyboardInterrupt (or
        SystemExit) raised in ``send`` is the leader's, not the batch's answer: it goes up to
        ``_lead``, which answers the others."""
        try:
            answers = list(self._send([s.item for s in batch]))
            if len(answers) != len(batch):
                raise RuntimeError(f"a batch of {len(batch)} got {len(answers)} answers")
        except Exception as err:   # noqa: BLE001 - the whole batch's failure is each item's
            answers = [err] * len(batch)
        with self._lock:
            self.batches += 1
            self.items += len(batch)
            self.largest = max(self.largest, len(batch))
            for s, answer in zip(batch, answers):
                if isinstance(answer, BaseException):
                    s.error = answer
                else:
                    s.value = answer
                s.done = True   # answered and woken with no call between (see _hand_off)
                if not s.woken:
                    s.woken = True
                    s.wake.release()
