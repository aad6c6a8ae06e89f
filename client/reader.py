"""Hedged reads of a block group's data range: one range fetcher per block range.

A read of a group's data range asks each data unit it touches for one contiguous range of
that unit's internal block (a cell range, or a run of cells over several stripes: a unit's
cells sit back to back in its block). Units wanted over the same block range are one fetch
(a whole stripe is one: six data units over one range); each fetch is a ``RangeFetcher``
(range_fetch.py), which reads its units, hedges the late ones, reads around slow DataNodes,
rebuilds failed units from any k others, and decodes. A replicated block (REPLICATE-n) is the
same fetch of its one data unit, which every replica holds (HDFS-5776's hedged pread): the
code's shape is ``ec/sources.py``'s to say (``code_for``), never the fetcher's. What a read may
do (thresholds, hedges, budget, routes, ranks) is the ``ReadPolicy``'s to say (read_policy.py);
the state of each unit read and who owns its buffer, ``UnitRead``'s (unit_reads.py).

Decoding a range that spans stripes is sound: at every block offset the k + m units hold one
codeword, and bytes past a unit's end are zeros, exactly as the encoder padded them.

Every chunk a unit read returns has been checked against the DataNode's stored CRC32C (the
transport does it): a mismatch is a failed unit read like any other (another unit is read
instead), counted in ``checksum_failures`` and reported to the DataNode that sent it, which
checks its copy on disk and, if that is damaged, has the NameNode repair it.

``hedges`` is HDFS's hedgedReadOps and ``hedge_wins`` its hedgedReadOpsWin (a hedge answered
before the read it hedged).

The composition of the read path from a ``HedgeConfig`` is here too: ``make_breaker`` and
``make_policy`` (hedging off; HubSpot's fixed threshold; the adaptive model).
"""

import asyncio
import logging
from typing import Callable

from hedgefs.client.breaker import BudgetBreaker, CircuitBreaker, FixedBreaker
from hedgefs.client.config import HedgeConfig
from hedgefs.client.latency import LatencyModel
from hedgefs.client.locations import GroupLocation, UnitLocation
from hedgefs.client.metrics import ClientMetrics
from hedgefs.client.range_fetch import FetchReport, RangeFetcher
from hedgefs.client.read_policy import AdaptivePolicy, FixedPolicy, ReadPolicy
from hedgefs.client.transport import DataNodeClient
from hedgefs.client.unit_reads import ReadContext
from hedgefs.ec.policy import Policy
from hedgefs.ec.sources import code_for

log = logging.getLogger("hedgefs.client.reader")


def make_breaker(config: HedgeConfig, model: LatencyModel, on_trip: Callable[[], None] = lambda: None,
                 **clock) -> CircuitBreaker:
    """The budget breaker with the adaptive threshold, HubSpot's fixed one with a fixed threshold."""
    if config.adaptive:
        return BudgetBreaker(config, model, on_trip=on_trip, **clock)
    return FixedBreaker(config, on_trip=on_trip, **clock)


def make_policy(config: HedgeConfig, breaker: CircuitBreaker, model: LatencyModel) -> ReadPolicy:
    if config.adaptive:
        threshold = model.threshold
    else:
        fixed = config.threshold_ms / 1000.0
        threshold = lambda nbytes: fixed   # noqa: E731
    if not config.enabled:
        return ReadPolicy(breaker, model, threshold)
    if config.adaptive:
        return AdaptivePolicy(breaker, model, config.read_extra, config.overtaken)
    return FixedPolicy(breaker, model, threshold, config.read_extra)


class HedgedReader:
    def __init__(self, datanodes: DataNodeClient, config: HedgeConfig, breaker: CircuitBreaker, metrics: ClientMetrics,
                 model: LatencyModel,
                 report_bad: Callable[[GroupLocation, int, UnitLocation], None] = lambda group, index, loc: None):
        self.policy = make_policy(config, breaker, model)
        self.context = ReadContext(datanodes, model, metrics, self.policy, report_bad)

    def observe(self, observer: Callable[[FetchReport], None]) -> Callable[[], None]:
        """Call ``observer(report)`` as each range fetch ends, on the event loop, in the context
        of the read it served (a benchmark's trace keeps its per-read record in a context var).
        Returns the call that stops it."""
        self.context.observers.append(observer)
        return lambda: self.context.observers.remove(observer)

    async def read_group_range(self, ec_policy: Policy, group: GroupLocation, offset: int, length: int,
                               out: memoryview, exclude: frozenset[str] = frozenset()) -> None:
        """Fill out[:length] with the group's data bytes [offset, offset+length).

        Units on DataNodes in ``exclude`` are rebuilt from other units where k others exist (a
        second copy of a slow transfer reads a different set of units: distcp's hedges).
        """
        by_range: dict[tuple[int, int], list] = {}
        ranges = code_for(ec_policy).unit_ranges(group.length, offset, length)
        for r in ranges:   # (a wanted unit holds every byte of its range: it is the group's data)
            by_range.setdefault((r.offset_in_block, r.offset_in_block + r.length), []).append(r)
        needed = len(ranges)
        ctx = self.context
        ctx.metrics.incr("unit_reads_needed", needed)
        self.policy.earn(needed)

        async def one(start: int, end: int, ranges) -> None:
            fetcher = RangeFetcher(ctx, ec_policy, group, start, end, [r.index for r in ranges], exclude)
            try:
                data = await fetcher.fetch()
                for r in ranges:
                    unit = data[r.index]
                    for cell in r.cells:
                        src = cell.offset_in_block - start
                        dst = cell.offset_in_group - offset
                        out[dst:dst + cell.length] = unit[src:src + cell.length]
            finally:
                fetcher.close()

        await gather_or_cancel([one(start, end, rs) for (start, end), rs in by_range.items()])


async def gather_or_cancel(coros) -> list:
    """Like asyncio.gather, but the first failure cancels the rest: no work outlives its read."""
    coros = list(coros)
    if len(coros) == 1:   # most reads: one group, one range of units; no task to make and gather
        return [await coros[0]]
    tasks = [asyncio.ensure_future(c) for c in coros]
    try:
        return await asyncio.gather(*tasks)
    except BaseException:
        for task in tasks:
            task.cancel()
        raise
