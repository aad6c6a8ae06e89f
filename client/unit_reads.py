"""One unit read: a block range of one unit from its DataNode, in an explicit state, owning its buffer.

    ACTIVE ──(past its threshold)──> OVERDUE ──(hedged, read around, another source)──> REPLACED
      │  └──────────────────(overtaken, hedged)──────────────────────────────────────────┘  │
      └────────────────────────────┴──────────────────────────────────────────────────────┴──> DONE / FAILED / RETIRED

    DONE      answered, bytes verified (its buffer held)
    FAILED    an error, a bad checksum, BUSY, no answer in time, cancelled
    RETIRED   no longer wanted: cancelled, or (a loser the latency model should hear the end of, or
              a probe) left to run on, detached

The range fetcher (range_fetch.py) *counts on* a read that is ACTIVE, OVERDUE or DONE, unless it
is a probe: REPLACED is the one way a late read stops being counted on (other reads were sent to
stand in for it; it still runs, and wins if it answers first). That rule is the only thing that
differs between hedging, read-around and rebuild.

A read's receive buffer comes from the transport's pool and has one owner, the read: it goes
back only through ``release()``, which the fetcher that started the read calls once every use
of the bytes (a copy out, a decode) is over. A read released while it still runs gives its
buffer back the moment it ends (nobody can use it then). Nothing else returns a buffer. A probe
holds its ticket (the latency model's booking of it) and hands it back when it ends.

The read reports its own timing to the latency model (started, finished, failed, abandoned, and
"overdue" at twice its threshold while it still runs, so a DataNode that stops answering is
judged before its reads end).

``ReadContext`` is what every read of one client shares: the DataNodes' transport, the latency
model, the counters, the read policy, where a bad checksum is reported, and who observes fetches.
"""

from __future__ import annotations

import asyncio
import dataclasses
import enum
import logging
from typing import TYPE_CHECKING, Callable

from hedgefs.client.transport import Busy, ChecksumMismatch, DeadlineExceeded, Phases, TransferError

if TYPE_CHECKING:
    from hedgefs.client.latency import LatencyModel, ProbeTicket, Token
    from hedgefs.client.locations import GroupLocation, UnitLocation
    from hedgefs.client.metrics import ClientMetrics
    from hedgefs.client.transport import DataNodeClient

log = logging.getLogger("hedgefs.client.reader")


@dataclasses.dataclass(frozen=True)
class ReadContext:
    """What every read of one client shares (one per ``HedgedReader``)."""
    datanodes: "DataNodeClient"
    model: "LatencyModel"
    metrics: "ClientMetrics"
    policy: "ReadPolicy"     # read_policy.py (not imported: it knows of unit reads)
    # (group, index, where): a read of the unit failed its checksum
    report_bad: Callable[["GroupLocation", int, "UnitLocation"], None] = lambda group, index, loc: None
    # called with each range fetch's ``FetchReport`` as it ends (range_fetch.py; the bench's trace)
    observers: list = dataclasses.field(default_factory=list)


class State(enum.Enum):
    ACTIVE = "active"
    OVERDUE = "overdue"       # past its threshold, waited for (still counted on)
    REPLACED = "replaced"     # late, no longer counted on: other reads stand in for it
    DONE = "done"
    FAILED = "failed"
    RETIRED = "retired"


COUNTED = (State.ACTIVE, State.OVERDUE, State.DONE)


class Role(enum.Enum):
    """Why the read was sent (it decides what its lateness triggers)."""
    ORIGINAL = "original"   # gives a wanted unit nothing else gives (for replicas: the best replica): late, it is hedged
    SOURCE = "source"       # a rebuild's source, a hedge's, a spare: late, one more source may be read
    PROBE = "probe"         # a slow DataNode asked anyway, to see it recover: never counted on


class UnitRead:
    def __init__(self, ctx: ReadContext, group: "GroupLocation", index: int, start: int, end: int, held: int,
                 role: Role, probe: "ProbeTicket | None" = None):
        self.group, self.index, self.start, self.end, self.held, self.role = group, index, start, end, held, role
        self.loc: "UnitLocation | None" = group.units.get(index)
        self.datanode = self.loc.datanode_id if self.loc else None
        self._state = State.ACTIVE
        self._synced = False
        self.error: BaseException | None = None
        self.token: "Token | None" = None
        self._ctx = ctx
        self._probe = probe
        self._data = None
        self._released = False
        self.sent_at = asyncio.get_running_loop().time()
        self.ended_at: float | None = None
        self.task = asyncio.ensure_future(self._run())
        self.task.add_done_callback(self._ended)

    def __repr__(self) -> str:
        return f"<UnitRead {self.describe()} {self.role.value} {self._state.value}>"

    def describe(self) -> str:
        return f"unit {self.group.id}/{self.index} [{self.start}, {self.end}) on {self.datanode or 'no DataNode'}"

    # ---------------------------------------------------------------- the read itself

    async def _run(self):
        if self.held == 0:
            return b""   # past the unit's end: zeros, nothing to ask
        loc, ctx = self.loc, self._ctx
        ctx.metrics.incr("unit_reads")
        model = ctx.model
        token = self.token = model.started(loc.datanode_id, self.held)
        loop = asyncio.get_running_loop()

        def overdue():   # still running at twice its threshold (a new connection's: the ceiling)
            nonlocal late
            if not self.task.done() and (wait := model.slow_evidence(token, self.held)) > 0:
                late = loop.call_later(wait, overdue)

        late = loop.call_later(model.slow_after(self.held), overdue)
        phases = Phases(on_connect=lambda: model.connecting(token), on_answer=lambda: model.responding(token))
        try:
            data = await ctx.datanodes.read(loc.data_address, self.group.id, self.index, self.start, self.held,
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
            ctx.metrics.incr("unit_read_errors")
            if isinstance(err, ChecksumMismatch):
                ctx.metrics.incr("checksum_failures")
                log.warning("read of %s failed its checksum (%s): reading another unit; its DataNode will check "
                            "its copy", self.describe(), err)
                ctx.report_bad(self.group, self.index, loc)
            raise
        finally:
            late.cancel()
        seconds = model.finished(token, self.held)
        ctx.metrics.record_unit_read(loc.datanode_id, seconds)
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
        self.ended_at = task.get_loop().time()
        self._sync()
        if self._probe is not None:
            self._probe.done()
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
    def counted(self) -> bool:
        """Does the fetcher count on it (see the module's docstring)?"""
        return self.role is not Role.PROBE and self.state in COUNTED

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
            raise RuntimeError(f"the bytes of {self.describe()} used while {self._state.value}"
                               + (", after release" if self._released else ""))
        return self._data

    # ---------------------------------------------------------------- transitions (the fetcher's)

    def mark_overdue(self) -> None:
        """Past its threshold, and waited for."""
        if self.state is State.ACTIVE:
            self._state = State.OVERDUE

    def replace(self) -> None:
        """Late, and no longer counted on: other reads stand in for it (it runs on, and wins if
        it answers first)."""
        if self.state in (State.ACTIVE, State.OVERDUE):
            self._state = State.REPLACED

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
            self._ctx.datanodes.buffers.give(data)
