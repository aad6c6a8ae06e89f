"""Hedged striped reads: the read path as a chain of small steps.

A read of a block group's data range asks each data unit it touches for one contiguous range
of that unit's internal block (a cell range, or a run of cells over several stripes: a unit's
cells sit back to back in its block). For each such *unit read*:

    start every unit read                      (read_group_range)
      -> it fails: rebuild it now              (_read_unit -> _result_or_rebuild -> _rebuild)
      -> it is overdue (threshold):            (_read_unit)
           mark its DataNode impaired; if the breaker allows, start a hedge: rebuild the same
           block range from k other units and race it against the original, which keeps
           running. The first complete answer wins; the loser is cancelled.   (_race)
      -> rebuild = gather any k units' ranges  (_gather_k: in-flight reads first, then other
           data units, then parity, healthiest DataNode first; a hedge reads one spare; a
           source that is itself overdue or failed brings in the next one) and decode.

Decoding a range that spans stripes is sound: at every block offset the k + m units hold one
codeword, and bytes past a unit's end are zeros, exactly as the encoder padded them.

The threshold timer of a unit read starts when its task starts, before its connection is made:
a DataNode that accepts TCP but never answers is hedged like one that streams slowly.

Every chunk a unit read returns has been checked against the DataNode's stored CRC32C (the
transport does it): a mismatch is a failed unit read like any other (rebuilt from other units),
counted in ``checksum_failures`` and reported to the DataNode that sent it, which checks its
copy on disk and, if that is damaged, has the NameNode repair it.
"""

import asyncio
import dataclasses
import logging
import time
from typing import Callable

from hedgefs.client.breaker import ALLOWED, REFUSED_BREAKER, CircuitBreaker
from hedgefs.client.config import HedgeConfig
from hedgefs.client.transport import Busy, ChecksumMismatch, DataNodeClient, TransferError
from hedgefs.client.errors import DataUnavailable
from hedgefs.client.metrics import ClientMetrics
from hedgefs.ec import layout
from hedgefs.ec.policy import Policy
from hedgefs.plumbing import describe

log = logging.getLogger("hedgefs.client.reader")

# Decoding less than this runs inline on the event loop; more goes to a worker thread.
_INLINE_DECODE_BYTES = 256 * 1024
# A DataNode whose read failed this recently is the last choice as a rebuild source.
_FAILURE_MEMORY_S = 10.0
# Sources that answered BUSY (--max-streams) are asked again, after a pause, once no other is left.
_BUSY_RETRIES = 20
_BUSY_BACKOFF_S = 0.02


@dataclasses.dataclass(frozen=True)
class UnitLocation:
    index: int
    datanode_id: str
    address: str            # gRPC (control)
    data_address: str = ""  # where its unit reads and writes go
    # Its block token (a secure cluster): renewed with every lookup, so not part of where it is.
    token: bytes = dataclasses.field(default=b"", compare=False, repr=False)


@dataclasses.dataclass(frozen=True)
class GroupLocation:
    id: int
    length: int
    units: dict[int, UnitLocation]
    generation: int = 0


class _GroupRead:
    """The unit reads of one read of a group, shared by the units wanted and their rebuilds."""

    def __init__(self, policy: Policy, group: GroupLocation, avoid: frozenset[str] = frozenset()):
        self.policy = policy
        self.group = group
        self.avoid = avoid  # DataNodes to read from only if k units cannot be had otherwise
        self.fetches: dict[tuple[int, int, int], asyncio.Task] = {}

    def avoided(self, index: int) -> bool:
        loc = self.group.units.get(index)
        return loc is not None and loc.datanode_id in self.avoid

    def held(self, index: int, start: int, end: int) -> int:
        return layout.block_bytes_held(self.policy, self.group.length, index, start, end - start)

    def describe(self, index: int, start: int, end: int) -> str:
        loc = self.group.units.get(index)
        where = loc.datanode_id if loc else "no DataNode"
        return f"unit {self.group.id}/{index} [{start}, {end}) on {where}"


class HedgedReader:
    def __init__(self, datanodes: DataNodeClient, config: HedgeConfig, breaker: CircuitBreaker, metrics: ClientMetrics,
                 report_bad: Callable[[GroupLocation, int, UnitLocation], None] = lambda group, index, loc: None):
        self._datanodes = datanodes
        self._config = config
        self._breaker = breaker
        self._metrics = metrics
        self._report_bad = report_bad  # (group id, index, where): a read of the unit failed its checksum
        self._last_failure: dict[str, float] = {}  # DataNode -> when a read from it last failed

    async def read_group_range(self, policy: Policy, group: GroupLocation, offset: int, length: int, out: memoryview,
                               avoid: frozenset[str] = frozenset()) -> None:
        """Fill out[:length] with the group's data bytes [offset, offset+length).

        Units on DataNodes in ``avoid`` are rebuilt from other units where k others exist (a
        second copy of a slow transfer reads a different set of units: distcp's hedges).
        """
        wanted = layout.group_range_to_units(policy, group.length, offset, length)
        read = _GroupRead(policy, group, avoid)
        # Start every original read before awaiting any, so rebuilds can count them as in flight.
        for r in wanted:
            if r.index in group.units and not read.avoided(r.index):
                self._fetch(read, r.index, r.offset_in_block, r.offset_in_block + r.length)
        try:
            results = await gather_or_cancel(
                self._read_unit(read, r.index, r.offset_in_block, r.offset_in_block + r.length) for r in wanted)
            for r, data in zip(wanted, results):
                for cell in r.cells:
                    src = cell.offset_in_block - r.offset_in_block
                    dst = cell.offset_in_group - offset
                    out[dst:dst + cell.length] = data[src:src + cell.length]
        finally:
            for task in read.fetches.values():
                self._cancel(task)
                if task.done() and not task.cancelled() and task.exception() is None:
                    # Every use of the unit reads' buffers (copies above, decodes) is over.
                    self._datanodes.buffers.give(task.result())

    async def _read_unit(self, read: _GroupRead, index: int, start: int, end: int):
        if index not in read.group.units:
            self._metrics.incr("decodes_on_failure")
            return await self._rebuild(read, index, start, end, reason="no live copy")
        if read.avoided(index):
            return await self._rebuild(read, index, start, end, reason="avoided")
        original = self._fetch(read, index, start, end)
        await asyncio.wait({original}, timeout=self._config.threshold_ms / 1000.0)
        if original.done():
            return await self._result_or_rebuild(read, index, start, end, original)
        datanode = read.group.units[index].datanode_id
        self._metrics.record_overdue(datanode)
        if not self._config.enabled:
            return await self._result_or_rebuild(read, index, start, end, original)

        self._breaker.record_slow(datanode)
        verdict = self._breaker.try_hedge()
        if verdict != ALLOWED:
            self._metrics.incr("hedges_refused_breaker" if verdict == REFUSED_BREAKER else "hedges_refused_rate")
            return await self._result_or_rebuild(read, index, start, end, original)

        self._metrics.incr("hedges")
        log.info("hedging %s: no answer after %.0f ms", read.describe(index, start, end), self._config.threshold_ms)
        hedge = asyncio.ensure_future(self._rebuild(read, index, start, end, reason="hedge"))
        try:
            return await self._race(read, index, start, end, original, hedge)
        finally:
            hedge.cancel()  # if our caller gave up on this read, the hedge goes with it

    async def _race(self, read: _GroupRead, index: int, start: int, end: int, original: asyncio.Task, hedge: asyncio.Future):
        pending = {original, hedge}
        while pending:
            done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
            for task in done:
                if _failed(task):
                    continue
                if task is hedge:
                    self._cancel(original)
                    self._metrics.incr("hedge_wins")
                    log.info("hedge won for %s", read.describe(index, start, end))
                return task.result()
        # Both failed: the rebuild's reason (too few units) says more than the original's.
        raise _as_unavailable(read, index, start, end, None if hedge.cancelled() else hedge.exception())

    async def _result_or_rebuild(self, read: _GroupRead, index: int, start: int, end: int, task: asyncio.Task):
        try:
            return await asyncio.shield(task)
        except (TransferError, asyncio.CancelledError) as err:
            if isinstance(err, asyncio.CancelledError) and not task.cancelled():
                raise  # we were cancelled, not the shared read
            self._metrics.incr("decodes_on_failure")
            log.info("read of %s failed (%s); rebuilding", read.describe(index, start, end), describe(err))
            return await self._rebuild(read, index, start, end, reason="failure")

    def _fetch(self, read: _GroupRead, index: int, start: int, end: int) -> asyncio.Task:
        """The (shared) task reading unit `index`'s block range [start, end)."""
        key = (index, start, end)
        task = read.fetches.get(key)
        if task is None:
            task = read.fetches[key] = asyncio.ensure_future(self._timed_read(read, index, start, end))
        return task

    def _cancel(self, task: asyncio.Future) -> None:
        """Cancel a unit read we no longer need; the DataNode sees the cancellation and stops."""
        if not task.done():
            task.cancel()
            self._metrics.incr("cancelled_reads")

    async def _timed_read(self, read: _GroupRead, index: int, start: int, end: int):
        held = read.held(index, start, end)
        if held == 0:
            return b""
        loc = read.group.units[index]
        self._metrics.incr("cell_reads")
        began = time.monotonic()
        try:
            data = await self._datanodes.read(loc.data_address, read.group.id, index, start, held,
                                              generation=read.group.generation, token=loc.token, peer=loc.datanode_id)
        except TransferError as err:
            self._last_failure[loc.datanode_id] = time.monotonic()
            self._metrics.incr("cell_read_errors")
            if isinstance(err, ChecksumMismatch):
                self._metrics.incr("checksum_failures")
                log.warning("read of %s failed its checksum (%s): rebuilding it; its DataNode will check its copy",
                            read.describe(index, start, end), err)
                self._report_bad(read.group, index, loc)
            raise
        # Only completed reads are latencies: a cancelled or failed read says nothing of speed.
        self._metrics.record_cell_read(loc.datanode_id, time.monotonic() - began)
        return data

    async def _rebuild(self, read: _GroupRead, want: int, start: int, end: int, reason: str):
        """Decode unit `want`'s block range [start, end) from k other units."""
        # A hedge is already late: read one spare source, so one more straggler costs nothing.
        sources = await self._gather_k(read, want, start, end, spare=1 if reason == "hedge" else 0)
        from hedgefs.ec.codec import codec_for  # here, not at the top: a healthy read never loads numpy

        codec = codec_for(read.policy)
        length = end - start
        if length <= _INLINE_DECODE_BYTES:
            decoded = codec.decode(sources, [want], length)
        else:
            decoded = await asyncio.get_running_loop().run_in_executor(None, codec.decode, sources, [want], length)
        log.debug("rebuilt %s from units %s (%s)", read.describe(want, start, end), sorted(sources), reason)
        return decoded[want]

    def _candidates(self, read: _GroupRead, want: int, start: int, end: int) -> list[int]:
        """Units to rebuild from, best first: all zeros (free), in flight, data, parity; within
        each, DataNodes without a recent failure first, then by their median latency."""
        k = read.policy.k
        now = time.monotonic()

        def rank(u: int):
            free = read.held(u, start, end) == 0
            fetch = read.fetches.get((u, start, end))
            in_flight = fetch is not None and not _failed(fetch)
            loc = read.group.units.get(u)
            failed_lately = loc is not None and now - self._last_failure.get(loc.datanode_id, -1e9) < _FAILURE_MEMORY_S
            latency = self._metrics.datanode_p50(loc.datanode_id) if loc else 0.0
            return (not free, read.avoided(u), not in_flight, u >= k, failed_lately, latency, u)

        usable = (u for u in range(read.policy.units)
                  if u != want and (u in read.group.units or read.held(u, start, end) == 0))
        return sorted(usable, key=rank)

    async def _gather_k(self, read: _GroupRead, want: int, start: int, end: int, spare: int = 0) -> dict[int, object]:
        k = read.policy.k
        candidates = self._candidates(read, want, start, end)
        results: dict[int, object] = {}
        active: dict[asyncio.Task, int] = {}
        started: set[asyncio.Task] = set()

        def launch_next() -> None:
            while candidates:
                index = candidates.pop(0)
                existing = read.fetches.get((index, start, end))
                if existing is not None and _failed(existing):
                    continue
                task = self._fetch(read, index, start, end)
                if existing is None:
                    started.add(task)
                active[task] = index
                return

        for _ in range(k + spare):
            launch_next()
        threshold = self._config.threshold_ms / 1000.0
        busy: list[int] = []   # sources that answered BUSY: asked again when nothing else is left
        retries = 0
        try:
            while len(results) < k:
                if not active and busy and retries < _BUSY_RETRIES:
                    retries += 1
                    await asyncio.sleep(_BUSY_BACKOFF_S * retries)
                    for index in busy:
                        read.fetches.pop((index, start, end), None)
                        task = self._fetch(read, index, start, end)
                        started.add(task)
                        active[task] = index
                    busy.clear()
                    continue
                if not active:
                    raise DataUnavailable(
                        f"cannot read group {read.group.id} at block offset {start}: only {len(results)} "
                        f"of the {k} units needed could be read")
                done, _ = await asyncio.wait(set(active), timeout=threshold, return_when=asyncio.FIRST_COMPLETED)
                if not done:
                    launch_next()  # a source is overdue too: bring in one more
                    continue
                for task in done:
                    index = active.pop(task)
                    if _failed(task):
                        if not task.cancelled() and isinstance(task.exception(), Busy):
                            busy.append(index)
                        launch_next()
                    else:
                        results[index] = task.result()
        finally:
            for task in active:
                if task in started:
                    self._cancel(task)
        return results


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


def _as_unavailable(read: _GroupRead, index: int, start: int, end: int, err: BaseException | None) -> DataUnavailable:
    if isinstance(err, DataUnavailable):
        return err
    return DataUnavailable(f"cannot read {read.describe(index, start, end)}" + (f": {describe(err)}" if err else ""))
