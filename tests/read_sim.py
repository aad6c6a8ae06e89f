"""The reader without processes: a scripted DataNode transport on a virtual clock.

``VirtualLoop`` is an asyncio event loop whose clock jumps: when nothing is ready to run it
advances straight to the next timer instead of sleeping, so a 5 s DataNode delay costs no wall
time and every interleaving is the same on every run (no I/O happens: the transport below is
scripted, the only selector use is the loop's own wake-up pipe).

``ScriptedDataNodes`` stands in for ``DataNodeClient``: each (unit index) has a script, a list
of ``Reply`` values consumed one per read (the last repeats), saying after how long the read
answers and whether with the stored bytes, an error, a checksum failure or never. The bytes
come from a real encoding of real data (``Stripe``), in a real ``BufferPool``, poisoned on
return, so a buffer used after it was given back shows up as wrong bytes.

This tier tests the read logic; the integration tests (real DataNode processes) stay.
"""

from __future__ import annotations

import asyncio
import dataclasses
import random
import selectors

from hedgefs.client.config import HedgeConfig
from hedgefs.client.latency import LatencyModel
from hedgefs.client.locations import GroupLocation, UnitLocation
from hedgefs.client.metrics import ClientMetrics
from hedgefs.client.reader import HedgedReader, make_breaker
from hedgefs.client.buffers import BufferPool
from hedgefs.client.transport import Busy, ChecksumMismatch, DeadlineExceeded, TransferError
from hedgefs.ec import layout
from hedgefs.ec.codec import codec_for
from hedgefs.ec.policy import Policy, parse_policy


class _JumpSelector(selectors.DefaultSelector):
    """Never sleeps: a select that would block advances the loop's clock by its timeout."""

    def __init__(self, loop: "VirtualLoop"):
        super().__init__()
        self._loop = loop

    def select(self, timeout=None):
        events = super().select(0)
        if events:
            return events
        if timeout is None:
            raise RuntimeError("deadlock: nothing to run and no timer (a read waits on nothing)")
        self._loop.now += max(0.0, timeout)
        return []


class VirtualLoop(asyncio.SelectorEventLoop):
    def __init__(self):
        self.now = 1000.0
        super().__init__(selector=_JumpSelector(self))

    def time(self) -> float:
        return self.now


def run(coro_fn, timeout: float = 600.0):
    """Run ``coro_fn()`` on a fresh virtual loop and return its result (at most ``timeout``
    virtual seconds); then let what it left running (retired reads, probes) run to its end, as a
    long-lived client's loop would, so their cancellations and buffers are seen too."""
    loop = VirtualLoop()
    try:
        result = loop.run_until_complete(asyncio.wait_for(coro_fn(), timeout))
        loop.run_until_complete(_drain(timeout))
        return result
    finally:
        loop.close()


async def _drain(timeout: float) -> None:
    others = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
    if others:
        _, pending = await asyncio.wait(others, timeout=timeout)
        for task in pending:
            task.cancel()


@dataclasses.dataclass(frozen=True)
class Reply:
    after: float = 0.001            # seconds until it answers
    error: str | None = None        # a TransferError status ("UNAVAILABLE", "BUSY", "CHECKSUM",
                                    # "DEADLINE_EXCEEDED": our own time limit), or None: the bytes
    never: bool = False             # never answers (a frozen DataNode): only a cancel ends it
    cold: bool = False              # opens a new connection (the transport tells the latency model)
    header: float | None = None     # seconds until its response header (a paced DataNode's comes at
                                    # once, its bytes later); None: with the answer


FAST = Reply(0.001)
SLOW = Reply(0.5)
FROZEN = Reply(never=True)
DEAD = Reply(0.0005, error="UNAVAILABLE")
BAD_CRC = Reply(0.001, error="CHECKSUM")
BUSY = Reply(0.0005, error="BUSY")


class Stripe:
    """One block group of real data, encoded by the real codec: its units' internal blocks."""

    def __init__(self, policy_name: str = "RS-6-3-64k", length: int | None = None, seed: int = 7):
        self.policy = parse_policy(policy_name)
        p = self.policy
        self.length = length if length is not None else p.k * p.cell_size * 2   # two full stripes
        self.data = random.Random(seed).randbytes(self.length)
        self.blocks = _encode(p, self.data)

    def location(self, group_id: int = 1) -> GroupLocation:
        units = {i: UnitLocation(i, f"dn{i}", f"ctl{i}", f"127.0.0.1:{10000 + i}") for i in range(self.policy.units)}
        return GroupLocation(group_id, self.length, units, generation=1)


def _encode(policy: Policy, data: bytes) -> dict[int, bytes]:
    """Each unit's internal block for a group holding ``data`` (cells round-robin, parity per stripe)."""
    codec = codec_for(policy)
    k, cell = policy.k, policy.cell_size
    stripes = -(-len(data) // (k * cell)) if data else 0
    blocks = {i: bytearray() for i in range(policy.units)}
    for s in range(stripes):
        chunk = data[s * k * cell:(s + 1) * k * cell]
        cells = [chunk[i * cell:(i + 1) * cell].ljust(cell, b"\0") for i in range(k)]
        for i, c in enumerate(cells):
            blocks[i] += c
        for j, p in enumerate(codec.encode(cells)):
            blocks[k + j] += bytes(p)
    # Each unit holds only its own bytes (past its end it is implicitly zeros).
    return {i: bytes(b[:layout.unit_length(policy, len(data), i)]) for i, b in blocks.items()}


class ScriptedDataNodes:
    """``DataNodeClient`` for the reader, answering from scripts on the virtual clock."""

    def __init__(self, stripe: Stripe, scripts: dict[int, list[Reply]] | None = None, poison: bool = True):
        self.stripe = stripe
        self.scripts = {i: list(s) for i, s in (scripts or {}).items()}
        self.buffers = BufferPool(poison=poison)
        self.asked: list[int] = []        # unit index of every read, in order
        self.cancelled: list[int] = []    # reads cancelled before they answered

    def script(self, index: int, *replies: Reply) -> None:
        self.scripts[index] = list(replies)

    def _next(self, index: int) -> Reply:
        script = self.scripts.get(index) or [FAST]
        return script.pop(0) if len(script) > 1 else script[0]

    async def read(self, address: str, group_id: int, index: int, offset: int, length: int, *,
                   generation: int, token: bytes = b"", peer: str = "", phases=None):
        self.asked.append(index)
        reply = self._next(index)
        if reply.cold and phases is not None and phases.on_connect is not None:
            phases.on_connect()
        try:
            if reply.never:
                await asyncio.get_running_loop().create_future()
            if reply.header is not None:
                await asyncio.sleep(reply.header)
                _answered(phases)
            await asyncio.sleep(reply.after - (reply.header or 0.0))
            if reply.header is None:
                _answered(phases)
        except asyncio.CancelledError:
            self.cancelled.append(index)
            raise
        if reply.error == "CHECKSUM":
            raise ChecksumMismatch(group_id, index, offset, address)
        if reply.error == "BUSY":
            raise Busy(f"{address} is busy")
        if reply.error == "DEADLINE_EXCEEDED":
            raise DeadlineExceeded(f"no answer from {address} in time")
        if reply.error:
            raise TransferError(reply.error, f"{address}: scripted failure")
        block = self.stripe.blocks[index]
        buf = self.buffers.take(length)
        view = memoryview(buf)[:length]
        view[:] = block[offset:offset + length]
        return view

    def count(self, index: int) -> int:
        return self.asked.count(index)


def _answered(phases) -> None:
    if phases is not None and phases.on_answer is not None:
        phases.on_answer()


class Client:
    """A reader over scripted DataNodes, with a real latency model and breaker on the virtual clock."""

    def __init__(self, datanodes: ScriptedDataNodes, on_change=lambda datanode, state: None, **hedge):
        self.datanodes = datanodes
        self.config = HedgeConfig(**hedge)
        self.metrics = ClientMetrics()
        self.model = LatencyModel(clock=self._clock, on_change=on_change)
        self.breaker = make_breaker(self.config, self.model, clock=self._clock)
        self.reported: list[int] = []
        self.reader = HedgedReader(datanodes, self.config, self.breaker, self.metrics, self.model,
                                   lambda group, index, loc: self.reported.append(index))

    @staticmethod
    def _clock() -> float:
        try:
            return asyncio.get_running_loop().time()
        except RuntimeError:
            return 0.0

    async def pread(self, offset: int, length: int, group: GroupLocation | None = None,
                    exclude: frozenset[str] = frozenset()) -> bytes:
        stripe = self.datanodes.stripe
        out = bytearray(length)
        await self.reader.read_group_range(stripe.policy, group or stripe.location(), offset, length, memoryview(out),
                                           exclude)
        return bytes(out)

    def counter(self, name: str) -> int:
        return self.metrics.counter(name)


async def timed(aw):
    """(result, virtual seconds it took)."""
    loop = asyncio.get_running_loop()
    began = loop.time()
    result = await aw
    return result, loop.time() - began


def train(model: LatencyModel, fast: dict[str, float], slow: dict[str, float] | None = None, reads: int = 8,
          nbytes: int = 64 * 1024) -> None:
    """Earlier reads, as the reader would have reported them: each DataNode in ``fast`` and
    ``slow`` answered ``reads`` reads of ``nbytes`` in the seconds given (on the model's clock,
    backdated by ending each read at once after starting it ``seconds`` earlier)."""
    for table in (fast, slow or {}):
        for dn, seconds in table.items():
            for _ in range(reads):
                token = model.started(dn)
                token = dataclasses.replace(token, began=token.began - seconds)
                model.finished(token, nbytes)
