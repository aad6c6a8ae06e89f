"""One unit read: a block range of one unit from its DataNode, in an explicit state, owning its buffer.

    ACTIVE ──(threshold; or overtaken, hedged)──> OVERDUE ──┐
      │                                                     ├──> DONE     answered, bytes verified (its buffer held)
      └─────────────────────────────────────────────────────┴──> FAILED   an error, a bad checksum, BUSY, cancelled
                                                            └──> RETIRED  no longer wanted; cancelled, or (a loser
                                                                          the latency model should hear the end of,
                                                                          or a probe) left to run on, detached

A read's receive buffer comes from the transport's pool and has one owner, the read: it goes
back only through ``release()``, which the fetcher that started the read calls once every use
of the bytes (a copy out, a decode) is over. A read released while it still runs gives its
buffer back the moment it ends (nobody can use it then). Nothing else returns a buffer.

The read reports its own timing to the latency model (started, finished, failed, abandoned, and
"overdue" at twice its threshold while it still runs, so a DataNode that stops answering is
judged before its reads end).
"""

from __future__ import annotations

import asyncio
import enum
import logging
from typing import TYPE_CHECKING, Callable

from hedgefs.client.transport import Busy, ChecksumMismatch, DeadlineExceeded, Phases, TransferError

if TYPE_CHECKING:
    from hedgefs.client.latency import LatencyModel, Token
    from hedgefs.client.locations import GroupLocation, UnitLocation
    from hedgefs.client.metrics import ClientMetrics
    from hedgefs.client.transport import DataNodeClient

log = logging.getLogger("hedgefs.client.reader")


class State(enum.Enum):
    ACTIVE = "active"
    OVERDUE = "overdue"
    DONE = "done"
    FAILED = "failed"
    RETIRED = "retired"


class Role(enum.Enum):
    """Why the read was sent (it decides what its lateness triggers)."""
    ORIGINAL = "original"   # a wanted unit's own read (for replicas: the best replica): late, it is hedged
    SOURCE = "source"       # a rebuild's source, a hedge's, a spare: late, one more source may be read
    PROBE = "probe"         # a slow DataNode asked anyway, to see it recover: never waited for


class UnitRead:
    def __init__(self, *, group: "GroupLocation", index: int, start: int, end: int, held: int, role: Role,
                 datanodes: "DataNodeClient", model: "LatencyModel", metrics: "ClientMetrics",
                 threshold: float, report_bad: Callable, describe: Callable[[int], str]):
        self.group, self.index, self.start, self.end, self.held, self.role = group, index, start, end, held, role
        self.loc: "UnitLocation | None" = group.units.get(index)
        self.datanode = self.loc.datanode_id if self.loc else None
        self._state = State.ACTIVE
        self._synced = False
        self.counted = True          # does the fetcher count on it (see range_fetch.py)
        self.hedged = False          # an ORIGINAL whose lateness started a hedge
        self.overtaken = False       # ... asked about being overtaken, and found so (hedged, or refused)
        self.error: BaseException | None = None
        self.token: "Token | None" = None
        self._datanodes, self._model, self._metrics = datanodes, model, metrics
        self._report_bad, self._describe = report_bad, describe
        self._data = None
        self._released = False
        loop = asyncio.get_running_loop()
        self.sent_at = loop.time()
        self.overdue_at = self.sent_at + threshold
        self.task = asyncio.ensure_future(self._run())
        self.task.add_done_callback(self._ended)

    # ---------------------------------------------------------------- the read itself

    async def _run(self):
        if self.held == 0:
            return b""   # past the unit's end: zeros, nothing to ask
        loc = self.loc
        self._metrics.incr("unit_reads")
        model = self._model
        token = self.token = model.started(loc.datanode_id, self.held)
        loop = asyncio.get_running_loop()

        def overdue():   # still running at twice its threshold (a new connection's: the ceiling)
            nonlocal late
            if not self.task.done() and (wait := model.slow_evidence(token, self.held)) > 0:
                late = loop.call_later(wait, overdue)

        late = loop.call_later(model.slow_after(self.held), overdue)
        phases = Phases(on_connect=lambda: model.connecting(token))
        try:
            data = await self._datanodes.read(loc.data_address, self.group.id, self.index, self.start, self.held,
                                              generation=self.group.generation, token=loc.token, peer=loc.datanode_id,
                                              phases=phases)
        except asyncio.CancelledError:
            model.abandoned(token, self.held)   # it took at least this long
            raise
        except TransferError as err:
            if isinstance(err, DeadlineExceeded):
                model.abandoned(token, self.held)   # our own time limit: no answer
            else:
                model.failed(token)
            self._metrics.incr("unit_read_errors")
            if isinstance(err, ChecksumMismatch):
                self._metrics.incr("checksum_failures")
                log.warning("read of %s failed its checksum (%s): reading another unit; its DataNode will check "
                            "its copy", self._describe(self.index), err)
                self._report_bad(self.group, self.index, loc)
            raise
        finally:
            late.cancel()
        seconds = model.finished(token, self.held)
        self._metrics.record_unit_read(loc.datanode_id, seconds)
        if log.isEnabledFor(logging.DEBUG):
            log.debug("unit read on %s: %.2f ms (slot wait %.2f ms, %s)", loc.datanode_id, seconds * 1000,
                      phases.queued_s * 1000, f"new connection, connected in {phases.connect_s * 1000:.2f} ms"
                      if phases.new_connection else "pooled connection")
        return data

    def _sync(self) -> None:
        """The task has ended: take its outcome, once (its bytes, or its error)."""
        if self._synced:
            return
        self._synced = True
        task = self.task
        self.error = asyncio.CancelledError() if task.cancelled() else task.exception()
        if self.error is None:
            self._data = task.result()
        if self._state is not State.RETIRED:
            self._state = State.DONE if self.error is None else State.FAILED

    def _ended(self, task: asyncio.Task) -> None:
        self._sync()
        if self._released:
            self._give_back()   # released while running: nobody will use these bytes

    # ---------------------------------------------------------------- what the fetcher asks

    @property
    def state(self) -> State:
        """Read from the task itself once it has ended, so the fetcher never sees a read that
        has ended as still active (its done-callbacks may not have run yet)."""
        if self.task.done():
            self._sync()
        return self._state

    @property
    def running(self) -> bool:
        return not self.task.done()

    @property
    def cold(self) -> bool:
        """Did it open a new connection (the latency model's ``connecting``)?"""
        return self.token is not None and self.token.entry is not None and self.token.entry.cold

    @property
    def busy(self) -> bool:
        return isinstance(self.error, Busy)

    @property
    def data(self):
        """The bytes it answered; only while DONE and not released (anything else is a bug that
        would hand out a buffer the pool may have given to another read)."""
        if self.state is not State.DONE or self._released:
            raise RuntimeError(f"the bytes of unit {self.group.id}/{self.index} used while {self._state.value}"
                               + (", after release" if self._released else ""))
        return self._data

    def mark_overdue(self) -> None:
        if self.state is State.ACTIVE:
            self._state = State.OVERDUE

    def retire(self, after: float, metrics: "ClientMetrics") -> None:
        """Not wanted any more: cancel now (``after`` 0), or once it has run ``after`` seconds more."""
        if not self.running:
            return
        self._state = State.RETIRED
        if after <= 0:
            self.cancel(metrics)
        else:
            asyncio.get_running_loop().call_later(after + 0.005, self.cancel, metrics)

    def run_on(self) -> None:
        """Not wanted any more, but left to run to its end (a probe: its latency is the point)."""
        if self.running:
            self._state = State.RETIRED

    def cancel(self, metrics: "ClientMetrics") -> None:
        """The DataNode sees the cancellation (the socket closes) and stops."""
        if self.running:
            self.task.cancel()
            metrics.incr("cancelled_reads")

    def release(self) -> None:
        """The fetcher is done with this read's bytes: its buffer goes back (now, or when it ends)."""
        if self._released:
            return
        self._released = True
        if not self.running:
            self._sync()
            self._give_back()

    def _give_back(self) -> None:
        data, self._data = self._data, None
        if isinstance(data, memoryview):
            self._datanodes.buffers.give(data)
