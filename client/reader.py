"""Hedged reads of a block group's data range: one range fetcher per block range.

A read of a group's data range asks each data unit it touches for one contiguous range of
that unit's internal block (a cell range, or a run of cells over several stripes: a unit's
cells sit back to back in its block). Units wanted over the same block range are one fetch
(a whole stripe is one: six data units over one range); each fetch is a ``RangeFetcher``
(range_fetch.py), which reads its units, hedges the late ones, reads around slow DataNodes,
rebuilds failed units from any k others, and decodes. A replicated block (REPLICATE-n) is the
same fetch with k = 1: any one replica answers the whole range, and nothing is decoded
(HDFS-5776's hedged pread). What a read may do (thresholds, hedges, budget, routes, ranks) is
the ``ReadPolicy``'s to say (read_policy.py); the state of each unit read and who owns its
buffer, ``UnitRead``'s (unit_reads.py).

Decoding a range that spans stripes is sound: at every block offset the k + m units hold one
codeword, and bytes past a unit's end are zeros, exactly as the encoder padded them.

Every chunk a unit read returns has been checked against the DataNode's stored CRC32C (the
transport does it): a mismatch is a failed unit read like any other (another unit is read
instead), counted in ``checksum_failures`` and reported to the DataNode that sent it, which
checks its copy on disk and, if that is damaged, has the NameNode repair it.

``hedges`` is HDFS's hedgedReadOps and ``hedge_wins`` its hedgedReadOpsWin (a hedge answered
before the read it hedged).
"""

import asyncio
import logging
from typing import Callable

from hedgefs.client.breaker import BudgetBreaker, CircuitBreaker, FixedBreaker
from hedgefs.client.config import HedgeConfig
from hedgefs.client.latency import LatencyModel
from hedgefs.client.locations import GroupLocation, UnitLocation
from hedgefs.client.metrics import ClientMetrics
from hedgefs.client.range_fetch import RangeFetcher
from hedgefs.client.read_policy import make_policy
from hedgefs.client.transport import DataNodeClient
from hedgefs.ec import layout
from hedgefs.ec.policy import Policy

log = logging.getLogger("hedgefs.client.reader")


def make_breaker(config: HedgeConfig, model: LatencyModel, on_trip: Callable[[], None] = lambda: None,
                 **clock) -> CircuitBreaker:
    """The budget breaker with the adaptive threshold, HubSpot's fixed one with a fixed threshold."""
    if config.adaptive:
        return BudgetBreaker(config, model, on_trip=on_trip, **clock)
    return FixedBreaker(config, on_trip=on_trip, **clock)


class HedgedReader:
    def __init__(self, datanodes: DataNodeClient, config: HedgeConfig, breaker: CircuitBreaker, metrics: ClientMetrics,
                 model: LatencyModel,
                 report_bad: Callable[[GroupLocation, int, UnitLocation], None] = lambda group, index, loc: None):
        self._datanodes = datanodes
        self._metrics = metrics
        self._model = model
        self.policy = make_policy(config, breaker, model)
        self._report_bad = report_bad  # (group, index, where): a read of the unit failed its checksum

    async def read_group_range(self, policy: Policy, group: GroupLocation, offset: int, length: int, out: memoryview,
                               exclude: frozenset[str] = frozenset()) -> None:
        """Fill out[:length] with the group's data bytes [offset, offset+length).

        Units on DataNodes in ``exclude`` are rebuilt from other units where k others exist (a
        second copy of a slow transfer reads a different set of units: distcp's hedges).
        """
        from hedgefs.ec.codec import codec_for   # here, not at the top: numpy only once a read needs it

        code = codec_for(policy)
        if policy.replicated:   # any one replica holds the block's bytes as they are (k = 1)
            self._metrics.incr("unit_reads_needed")
            self.policy.earn(1)
            fetcher = self._fetcher(policy, code, group, offset, offset + length, [], exclude)
            try:
                data = (await fetcher.fetch())[0]
                out[:length] = data[:length]
            finally:
                fetcher.close()
            return
        by_range: dict[tuple[int, int], list] = {}
        for r in layout.group_range_to_units(policy, group.length, offset, length):
            by_range.setdefault((r.offset_in_block, r.offset_in_block + r.length), []).append(r)
        needed = sum(1 for (start, end), rs in by_range.items() for r in rs
                     if layout.block_bytes_held(policy, group.length, r.index, start, end - start))
        self._metrics.incr("unit_reads_needed", needed)
        self.policy.earn(needed)

        async def one(start: int, end: int, ranges) -> None:
            fetcher = self._fetcher(policy, code, group, start, end, [r.index for r in ranges], exclude)
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

        await gather_or_cancel(one(start, end, rs) for (start, end), rs in by_range.items())

    def _fetcher(self, policy: Policy, code, group: GroupLocation, start: int, end: int, wanted: list[int],
                 exclude: frozenset[str]) -> RangeFetcher:
        def held(index: int) -> int:
            return layout.block_bytes_held(policy, group.length, index, start, end - start)

        return RangeFetcher(policy=self.policy, layout=policy, code=code, group=group, start=start, end=end, wanted=wanted,
                            held=held, datanodes=self._datanodes, model=self._model, metrics=self._metrics,
                            report_bad=self._report_bad, exclude=exclude)


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
