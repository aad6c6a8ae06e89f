"""Hedged striped reads: the read path as a chain of small steps.

    read the wanted cell ranges of a stripe      (_read_stripe)
      -> a cell read fails: rebuild it now       (_read_cell -> _rebuild)
      -> a cell read is overdue (threshold):     (_read_cell)
           mark its DataNode impaired; if the breaker allows, start a hedge: rebuild the same
           in-cell range from k other units and race it against the original, which keeps
           running. First complete answer wins; the loser is cancelled.
      -> rebuild = gather any k units' ranges    (_gather_k: in-flight reads first, then other
           data units, then parity, healthiest DataNode first; a source that is itself overdue
           or failed brings in the next one) and decode.

The threshold timer of a cell read starts when the read task starts, before its gRPC channel has
connected: a DataNode that accepts TCP but never answers is hedged like one that streams slowly.
"""

import asyncio
import dataclasses
import logging
import time

import grpc

from hedgefs.client.breaker import ALLOWED, REFUSED_BREAKER, CircuitBreaker
from hedgefs.client.config import HedgeConfig
from hedgefs.client.datanode_client import DataNodeClient
from hedgefs.client.errors import DataUnavailable
from hedgefs.client.metrics import ClientMetrics
from hedgefs.ec import layout
from hedgefs.ec.codec import get_codec
from hedgefs.ec.policy import Policy

log = logging.getLogger("hedgefs.client.reader")

# Decoding less than this runs inline on the event loop; more goes to a worker thread.
_INLINE_DECODE_BYTES = 256 * 1024


@dataclasses.dataclass(frozen=True)
class UnitLocation:
    index: int
    datanode_id: str
    address: str


@dataclasses.dataclass(frozen=True)
class GroupLocation:
    id: int
    length: int
    units: dict[int, UnitLocation]


class _Stripe:
    """The cell-range reads of one stripe, shared by the cells being read and their rebuilds."""

    def __init__(self, policy: Policy, group: GroupLocation, stripe: int):
        self.policy = policy
        self.group = group
        self.stripe = stripe
        self.fetches: dict[tuple[int, int, int], asyncio.Task] = {}

    def held(self, unit: int, start: int, end: int) -> int:
        return layout.bytes_held(self.policy, self.group.length, self.stripe, unit, start, end - start)

    def describe(self, unit: int) -> str:
        loc = self.group.units.get(unit)
        where = loc.datanode_id if loc else "no DataNode"
        return f"unit {self.group.id}/{unit} stripe {self.stripe} on {where}"


class HedgedReader:
    def __init__(self, datanodes: DataNodeClient, config: HedgeConfig, breaker: CircuitBreaker, metrics: ClientMetrics):
        self._datanodes = datanodes
        self._config = config
        self._breaker = breaker
        self._metrics = metrics

    async def read_group_range(self, policy: Policy, group: GroupLocation, offset: int, length: int, out: memoryview) -> None:
        """Fill out[:length] with the group's data bytes [offset, offset+length)."""
        cells = layout.group_range_to_cells(policy, group.length, offset, length)
        by_stripe: dict[int, list] = {}
        for cell in cells:
            by_stripe.setdefault(cell.stripe, []).append(cell)
        await gather_or_cancel(
            self._read_stripe(_Stripe(policy, group, s), stripe_cells, offset, out) for s, stripe_cells in by_stripe.items()
        )

    async def _read_stripe(self, stripe: _Stripe, cells: list, base: int, out: memoryview) -> None:
        # Start every original read before awaiting any, so rebuilds can count them as in flight.
        for cell in cells:
            if cell.unit in stripe.group.units:
                self._fetch(stripe, cell.unit, cell.offset_in_cell, cell.offset_in_cell + cell.length)
        try:
            results = await gather_or_cancel(self._read_cell(stripe, cell) for cell in cells)
        except BaseException:
            for task in stripe.fetches.values():
                task.cancel()
            raise
        for cell, data in zip(cells, results):
            start = cell.offset_in_group - base
            out[start:start + cell.length] = data[:cell.length]

    async def _read_cell(self, stripe: _Stripe, cell) -> bytes:
        start, end = cell.offset_in_cell, cell.offset_in_cell + cell.length
        if cell.unit not in stripe.group.units:
            self._metrics.incr("decodes_on_failure")
            return await self._rebuild(stripe, cell.unit, start, end, reason="no live copy")
        original = self._fetch(stripe, cell.unit, start, end)
        await asyncio.wait({original}, timeout=self._config.threshold_ms / 1000.0)
        if original.done():
            return await self._result_or_rebuild(stripe, cell.unit, start, end, original)

        datanode = stripe.group.units[cell.unit].datanode_id
        self._breaker.record_slow(datanode)
        if not self._config.enabled:
            return await self._result_or_rebuild(stripe, cell.unit, start, end, original)
        verdict = self._breaker.try_hedge()
        if verdict != ALLOWED:
            self._metrics.incr("hedges_refused_breaker" if verdict == REFUSED_BREAKER else "hedges_refused_rate")
            return await self._result_or_rebuild(stripe, cell.unit, start, end, original)

        self._metrics.incr("hedges")
        log.info("hedging %s: no answer after %.0f ms", stripe.describe(cell.unit), self._config.threshold_ms)
        hedge = asyncio.ensure_future(self._rebuild(stripe, cell.unit, start, end, reason="hedge"))
        return await self._race(stripe, cell.unit, start, end, original, hedge)

    async def _race(self, stripe: _Stripe, unit: int, start: int, end: int, original: asyncio.Task, hedge: asyncio.Future) -> bytes:
        pending = {original, hedge}
        while pending:
            done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
            for task in done:
                if task.cancelled() or task.exception() is not None:
                    continue
                for loser in pending:
                    loser.cancel()
                if task is hedge:
                    self._metrics.incr("hedge_wins")
                    self._metrics.incr("cancelled_reads")
                    log.info("hedge won for %s", stripe.describe(unit))
                    return task.result()
                return _exact(task.result(), end - start)
        # Both failed: the rebuild's reason (too few units) says more than the original's.
        raise _as_unavailable(stripe, unit, None if hedge.cancelled() else hedge.exception())

    async def _result_or_rebuild(self, stripe: _Stripe, unit: int, start: int, end: int, task: asyncio.Task) -> bytes:
        try:
            return _exact(await asyncio.shield(task), end - start)
        except (grpc.RpcError, Exception) as err:  # noqa: BLE001 - every failure is rebuilt the same way
            if isinstance(err, asyncio.CancelledError):
                raise
            self._metrics.incr("decodes_on_failure")
            log.info("read of %s failed (%s); rebuilding", stripe.describe(unit), _short(err))
            return await self._rebuild(stripe, unit, start, end, reason="failure")

    def _fetch(self, stripe: _Stripe, unit: int, start: int, end: int) -> asyncio.Task:
        """The (shared) task reading unit's in-cell range [start, end) of this stripe."""
        key = (unit, start, end)
        task = stripe.fetches.get(key)
        if task is None:
            task = asyncio.ensure_future(self._timed_read(stripe, unit, start, end))
            stripe.fetches[key] = task
        return task

    async def _timed_read(self, stripe: _Stripe, unit: int, start: int, end: int) -> bytes:
        held = stripe.held(unit, start, end)
        if held == 0:
            return b""
        loc = stripe.group.units[unit]
        self._metrics.incr("cell_reads")
        began = time.monotonic()
        try:
            offset = stripe.stripe * stripe.policy.cell_size + start
            return await self._datanodes.read(loc.address, stripe.group.id, unit, offset, held)
        finally:
            self._metrics.record_cell_read(loc.datanode_id, time.monotonic() - began)

    async def _rebuild(self, stripe: _Stripe, want: int, start: int, end: int, reason: str):
        """Decode unit `want`'s in-cell range [start, end) from k other units of the stripe."""
        sources = await self._gather_k(stripe, want, start, end)
        k, length = stripe.policy.k, end - start
        codec = get_codec(stripe.policy.k, stripe.policy.m)
        if length <= _INLINE_DECODE_BYTES:
            decoded = codec.decode(sources, [want], length)
        else:
            decoded = await asyncio.get_running_loop().run_in_executor(None, codec.decode, sources, [want], length)
        log.debug("rebuilt %s from units %s (%s)", stripe.describe(want), sorted(sources)[:k], reason)
        return decoded[want]

    def _candidates(self, stripe: _Stripe, want: int, start: int, end: int) -> list[int]:
        """Units to rebuild from, best first: free (all zeros), in flight, data, parity; healthy first."""
        k = stripe.policy.k
        units = [u for u in range(stripe.policy.units) if u != want]
        def rank(u: int):
            free = stripe.held(u, start, end) == 0
            in_flight = (u, start, end) in stripe.fetches and not _failed(stripe.fetches[(u, start, end)])
            loc = stripe.group.units.get(u)
            latency = self._metrics.datanode_p50(loc.datanode_id) if loc else 0.0
            return (not free, not in_flight, u >= k, latency, u)
        return sorted((u for u in units if u in stripe.group.units or stripe.held(u, start, end) == 0), key=rank)

    async def _gather_k(self, stripe: _Stripe, want: int, start: int, end: int) -> dict[int, bytes]:
        k = stripe.policy.k
        candidates = self._candidates(stripe, want, start, end)
        results: dict[int, bytes] = {}
        active: dict[asyncio.Task, int] = {}
        started: set[asyncio.Task] = set()

        def launch_next() -> bool:
            while candidates:
                unit = candidates.pop(0)
                key = (unit, start, end)
                existing = stripe.fetches.get(key)
                if existing is not None and _failed(existing):
                    continue
                task = self._fetch(stripe, unit, start, end)
                if existing is None:
                    started.add(task)
                active[task] = unit
                return True
            return False

        for _ in range(k):
            launch_next()
        threshold = self._config.threshold_ms / 1000.0
        try:
            while len(results) < k:
                if not active:
                    raise DataUnavailable(
                        f"cannot read group {stripe.group.id} stripe {stripe.stripe}: "
                        f"only {len(results)} of the {k} units needed could be read"
                    )
                done, _ = await asyncio.wait(set(active), timeout=threshold, return_when=asyncio.FIRST_COMPLETED)
                if not done:
                    launch_next()  # a source is overdue too: bring in one more
                    continue
                for task in done:
                    unit = active.pop(task)
                    if _failed(task):
                        launch_next()
                    else:
                        results[unit] = task.result()
        finally:
            for task in active:
                if task in started:
                    task.cancel()
        return dict(sorted(results.items())[:k]) if len(results) > k else results


async def gather_or_cancel(coros) -> list:
    """Like asyncio.gather, but the first failure cancels the rest: no work outlives its read."""
    tasks = [asyncio.ensure_future(c) for c in coros]
    try:
        return await asyncio.gather(*tasks)
    except BaseException:
        for task in tasks:
            task.cancel()
        raise


def _failed(task: asyncio.Future) -> bool:
    return task.done() and (task.cancelled() or task.exception() is not None)


def _exact(data: bytes, length: int) -> bytes:
    return data if len(data) == length else data + bytes(length - len(data))


def _short(err: BaseException) -> str:
    if isinstance(err, grpc.RpcError):
        return f"{err.code().name}: {err.details()}"
    return str(err) or type(err).__name__


def _as_unavailable(stripe: _Stripe, unit: int, err: BaseException | None) -> DataUnavailable:
    if isinstance(err, DataUnavailable):
        return err
    return DataUnavailable(f"cannot read {stripe.describe(unit)}" + (f": {_short(err)}" if err else ""))
