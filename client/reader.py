"""Hedged striped reads: the read path as a chain of small steps.

A read of a block group's data range asks each data unit it touches for one contiguous range
of that unit's internal block (a cell range, or a run of cells over several stripes: a unit's
cells sit back to back in its block). For each such *unit read*:

    route it                                   (read_group_range -> _route)
      -> no live copy, or its DataNode is known slow or silent (the latency model): read
           around it: rebuild the range from k other units at once, never waiting for it;
           now and then the DataNode is asked anyway, as a probe of its recovery
      -> else ask its DataNode                 (_read_unit)
    it fails: rebuild it now                   (_result_or_rebuild -> _rebuild)
    it is overdue (threshold: the model's for its size, or a fixed one):
           if the breaker allows, start a hedge: rebuild the same block range from k other
           units and race it against the original, which keeps running. The first complete
           answer wins; the loser is cancelled.                              (_race)
           Refused (breaker open, budget spent): wait, but go around the DataNode as soon as
           the model calls it slow (breaker closed) or a black hole (always).  (_wait_or_rescue)
    rebuild = gather any k units' ranges       (_gather_k: in-flight reads first, then other
           data units, then parity, best DataNodes first; a hedge reads one spare; a source
           that is itself overdue brings in the next one, budget permitting) and decode.

A replicated block (REPLICATE-n) is read the classic way, HDFS-5776's hedged pread: any one
replica answers the whole range, so there is nothing to decode.     (_read_replicas)

    ask the best replica                       (_replica_order: by the same latency model: not
           slow or silent, no recent failure, fastest; index order among equals)
      -> it fails: ask the next one at once
      -> no answer after the threshold: if the breaker allows, hedge: ask the next one too (and
           again after each further threshold while replicas are left); refused: wait, but go
           around a DataNode the model calls slow or silent, as above
      -> the first answer wins; the losers are retired as EC losers are (_replica_answered)

The same threshold, breaker, budget and counters as EC reads: ``hedges`` is HDFS's
hedgedReadOps and ``hedge_wins`` its hedgedReadOpsWin (a hedge answered before the read it
hedged). A slow replica is probed now and then, racing the best one, so its recovery is seen.

Late binding (``read_extra`` N): a read of whole stripes asks k + N units and decodes from the
first k to answer (EC-Cache), so one straggler among them costs nothing.

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
import math
from typing import Callable

from hedgefs.client.breaker import ALLOWED, REFUSED_BREAKER, CircuitBreaker
from hedgefs.client.config import HedgeConfig
from hedgefs.client.errors import DataUnavailable
from hedgefs.client.latency import LatencyModel
from hedgefs.client.locations import GroupLocation, UnitLocation
from hedgefs.client.metrics import ClientMetrics
from hedgefs.client.transport import Busy, ChecksumMismatch, DataNodeClient, TransferError
from hedgefs.ec import layout
from hedgefs.ec.policy import Policy
from hedgefs.plumbing import describe

log = logging.getLogger("hedgefs.client.reader")

# Decoding less than this runs inline on the event loop; more goes to a worker thread.
_INLINE_DECODE_BYTES = 256 * 1024
# Sources that answered BUSY (--max-streams) are asked again, after a pause, once no other is left.
_BUSY_RETRIES = 20
_BUSY_BACKOFF_S = 0.02
# A read whose hedge was refused looks this often whether its DataNode turned slow or silent.
_RESCUE_POLL_S = 0.05
# Spare sources of a rebuild started because a read is late (a hedge): one more straggler is free.
_HEDGE_SPARE = 1


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

    def datanode(self, index: int) -> str | None:
        loc = self.group.units.get(index)
        return loc.datanode_id if loc else None

    def held(self, index: int, start: int, end: int) -> int:
        return layout.block_bytes_held(self.policy, self.group.length, index, start, end - start)

    def describe(self, index: int, start: int, end: int) -> str:
        loc = self.group.units.get(index)
        where = loc.datanode_id if loc else "no DataNode"
        return f"unit {self.group.id}/{index} [{start}, {end}) on {where}"


class HedgedReader:
    def __init__(self, datanodes: DataNodeClient, config: HedgeConfig, breaker: CircuitBreaker, metrics: ClientMetrics,
                 model: LatencyModel,
                 report_bad: Callable[[GroupLocation, int, UnitLocation], None] = lambda group, index, loc: None):
        self._datanodes = datanodes
        self._config = config
        self._breaker = breaker
        self._metrics = metrics
        self._model = model
        self._adaptive = config.enabled and config.adaptive  # read around what the model says is slow
        self._report_bad = report_bad  # (group id, index, where): a read of the unit failed its checksum
        self._running: dict[asyncio.Task, tuple] = {}  # unit read -> (its model token, bytes)

    def _threshold(self, nbytes: int) -> float:
        if self._config.adaptive:
            return self._model.threshold(nbytes)
        return self._config.threshold_ms / 1000.0

    def _route(self, read: _GroupRead, index: int) -> str | None:
        """Why unit ``index`` is rebuilt from other units instead of asked for (None: ask)."""
        datanode = read.datanode(index)
        if datanode is None:
            return "no live copy"
        if datanode in read.avoid:
            return "avoided"
        if not self._adaptive:
            return None
        if self._model.is_black_hole(datanode):
            return "silent"   # never waited on, breaker or not
        if self._model.is_slow(datanode) and self._breaker.allows_read_around():
            return "slow"
        return None

    async def read_group_range(self, policy: Policy, group: GroupLocation, offset: int, length: int, out: memoryview,
                               avoid: frozenset[str] = frozenset()) -> None:
        """Fill out[:length] with the group's data bytes [offset, offset+length).

        Units on DataNodes in ``avoid`` are rebuilt from other units where k others exist (a
        second copy of a slow transfer reads a different set of units: distcp's hedges).
        """
        read = _GroupRead(policy, group, avoid)
        if policy.replicated:   # any one replica holds the block's bytes as they are (k = 1)
            try:
                data = await self._read_replicas(read, offset, offset + length)
                out[:length] = data[:length]
            finally:
                self._release(read)
            return
        wanted = layout.group_range_to_units(policy, group.length, offset, length)
        needed = sum(1 for r in wanted if read.held(r.index, r.offset_in_block, r.offset_in_block + r.length))
        self._metrics.incr("cell_reads_needed", needed)
        self._breaker.earn(needed)
        try:
            if self._late_binding(read, wanted):
                results = await self._read_late_bound(read, wanted)
            else:
                results = await self._read_units(read, wanted)
            for r, data in zip(wanted, results):
                for cell in r.cells:
                    src = cell.offset_in_block - r.offset_in_block
                    dst = cell.offset_in_group - offset
                    out[dst:dst + cell.length] = data[src:src + cell.length]
        finally:
            self._release(read)

    def _release(self, read: _GroupRead) -> None:
        """The group read is over: cancel its unit reads still running and hand their buffers
        back (every use of them, copies and decodes, is over)."""
        for task in read.fetches.values():
            self._cancel(task)
            if task.done() and not task.cancelled() and task.exception() is None:
                self._datanodes.buffers.give(task.result())

    async def _read_units(self, read: _GroupRead, wanted) -> list:
        routes = {r.index: self._route(read, r.index) for r in wanted}
        probes = set()
        # Start every read we will wait for before awaiting any, so rebuilds can count them as in flight.
        for r in wanted:
            route = routes[r.index]
            if route in ("slow", "silent") and self._model.probe_due(read.datanode(r.index)):
                if self._breaker.try_extra(1) != ALLOWED:
                    self._model.probe_done(read.datanode(r.index))
                    continue
                probes.add(r.index)
            elif route is not None:
                continue
            task = self._fetch(read, r.index, r.offset_in_block, r.offset_in_block + r.length)
            if r.index in probes:
                datanode = read.datanode(r.index)
                self._metrics.record_probe(datanode)
                task.add_done_callback(lambda _t, dn=datanode: self._model.probe_done(dn))
        return await gather_or_cancel(
            self._read_unit(read, r.index, r.offset_in_block, r.offset_in_block + r.length, routes[r.index],
                            r.index in probes)
            for r in wanted)

    async def _read_unit(self, read: _GroupRead, index: int, start: int, end: int, route: str | None = None,
                         probe: bool = False):
        if route == "no live copy":
            self._metrics.incr("decodes_on_failure")
            return await self._rebuild(read, index, start, end, reason=route)
        if route == "avoided":
            return await self._rebuild(read, index, start, end, reason=route)
        if route is not None:
            return await self._read_around(read, index, start, end, route, probe)
        original = self._fetch(read, index, start, end)
        threshold = self._threshold(end - start)
        await asyncio.wait({original}, timeout=threshold)
        if original.done():
            return await self._result_or_rebuild(read, index, start, end, original)
        datanode = read.datanode(index)
        self._metrics.record_overdue(datanode)
        if not self._config.enabled:
            return await self._result_or_rebuild(read, index, start, end, original)

        self._breaker.record_slow(datanode)
        verdict = self._breaker.try_hedge(self._rebuild_cost(read, index, start, end, _HEDGE_SPARE))
        if verdict != ALLOWED:
            self._metrics.incr("hedges_refused_breaker" if verdict == REFUSED_BREAKER else "hedges_refused_rate")
            return await self._wait_or_rescue(read, index, start, end, original)

        self._metrics.incr("hedges")
        log.info("hedging %s: no answer after %.0f ms", read.describe(index, start, end), threshold * 1000)
        hedge = asyncio.ensure_future(self._rebuild(read, index, start, end, reason="hedge"))
        try:
            return await self._race(read, index, start, end, original, hedge)
        finally:
            hedge.cancel()  # if our caller gave up on this read, the hedge goes with it

    async def _read_around(self, read: _GroupRead, index: int, start: int, end: int, why: str, probe: bool):
        """Rebuild a unit read of a slow or silent DataNode from other units. A probe (a read of
        that DataNode sent anyway) races the rebuild; if it loses it still runs to its end, alone,
        so its latency tells whether the DataNode recovered."""
        datanode = read.datanode(index)
        self._metrics.record_avoided(datanode)
        log.debug("reading around %s (%s)", read.describe(index, start, end), why)
        around = asyncio.ensure_future(self._rebuild(read, index, start, end, reason=why))
        if not probe:
            return await around
        key = (index, start, end)
        task = read.fetches[key]
        pending = {task, around}
        try:
            while pending:
                done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
                for t in done:
                    if _failed(t):
                        continue
                    if t is around and not task.done() and read.fetches.get(key) is task:
                        del read.fetches[key]   # detached: the group read's end does not cancel it
                        task.add_done_callback(self._give_back)
                    return t.result()
        finally:
            around.cancel()
        raise _as_unavailable(read, index, start, end, None if around.cancelled() else around.exception())

    def _retire(self, read: _GroupRead, task: asyncio.Task) -> None:
        """A read that lost its race: its answer is no longer needed, but it runs on (detached from
        its group read) until it has run twice its threshold, so the latency model learns whether
        its DataNode is slow; then it is cancelled. (Cancelled at once, a read beaten by a rebuild
        would only ever tell the model "at least this long", and never that it is slow.)"""
        running = self._running.get(task)
        if running is None or task.done() or not self._adaptive:
            return self._cancel(task)
        token, held = running
        left = self._model.slow_after(held) - self._model.age(token)
        if left <= 0:
            return self._cancel(task)
        for key, fetch in list(read.fetches.items()):
            if fetch is task:
                del read.fetches[key]
        task.add_done_callback(self._give_back)
        asyncio.get_running_loop().call_later(left + 0.005, self._cancel, task)

    def _give_back(self, task: asyncio.Task) -> None:
        if not task.cancelled() and task.exception() is None:
            self._datanodes.buffers.give(task.result())

    async def _wait_or_rescue(self, read: _GroupRead, index: int, start: int, end: int, original: asyncio.Task):
        """The hedge was refused: wait for the original, but no longer once the model calls its
        DataNode a black hole (whatever the breaker says) or slow (while reading around is
        allowed); then rebuild it and race the two, as a new read would have gone around."""
        if not self._adaptive:
            return await self._result_or_rebuild(read, index, start, end, original)
        while True:
            await asyncio.wait({original}, timeout=_RESCUE_POLL_S)
            if original.done():
                return await self._result_or_rebuild(read, index, start, end, original)
            why = self._route(read, index)
            if why is None:
                continue
            self._metrics.record_avoided(read.datanode(index))
            log.info("reading around %s: its DataNode is %s", read.describe(index, start, end), why)
            around = asyncio.ensure_future(self._rebuild(read, index, start, end, reason=why))
            try:
                return await self._race(read, index, start, end, original, around, wins=None)
            finally:
                around.cancel()

    async def _race(self, read: _GroupRead, index: int, start: int, end: int, original: asyncio.Task,
                    rebuild: asyncio.Future, wins: str | None = "hedge_wins"):
        pending = {original, rebuild}
        while pending:
            done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
            for task in done:
                if _failed(task):
                    continue
                if task is rebuild:
                    self._retire(read, original)
                    if wins:
                        self._metrics.incr(wins)
                        log.info("hedge won for %s", read.describe(index, start, end))
                return task.result()
        # Both failed: the rebuild's reason (too few units) says more than the original's.
        raise _as_unavailable(read, index, start, end, None if rebuild.cancelled() else rebuild.exception())

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
        token = self._model.started(loc.datanode_id)
        # Still running at twice its threshold: the latency model hears of it then, not at the end.
        task = asyncio.current_task()
        self._running[task] = (token, held)
        late = asyncio.get_running_loop().call_later(
            self._model.slow_after(held), lambda: task.done() or self._model.overdue(token, held))
        try:
            data = await self._datanodes.read(loc.data_address, read.group.id, index, start, held,
                                              generation=read.group.generation, token=loc.token, peer=loc.datanode_id)
        except asyncio.CancelledError:
            self._model.abandoned(token, held)   # a hedge won: it took at least this long
            raise
        except TransferError as err:
            if err.status == "DEADLINE_EXCEEDED":
                self._model.abandoned(token, held)   # our own time limit: no answer
            else:
                self._model.failed(token)
            self._metrics.incr("cell_read_errors")
            if isinstance(err, ChecksumMismatch):
                self._metrics.incr("checksum_failures")
                log.warning("read of %s failed its checksum (%s): rebuilding it; its DataNode will check its copy",
                            read.describe(index, start, end), err)
                self._report_bad(read.group, index, loc)
            raise
        finally:
            late.cancel()
            self._running.pop(task, None)
        self._metrics.record_cell_read(loc.datanode_id, self._model.finished(token, held))
        return data

    def _rebuild_cost(self, read: _GroupRead, want: int, start: int, end: int, spare: int) -> int:
        """Unit reads a rebuild would add: k + spare sources, less the reads already in flight."""
        in_flight = sum(1 for (u, s, e), t in read.fetches.items()
                        if u != want and (s, e) == (start, end) and not _failed(t))
        return max(0, read.policy.k + spare - in_flight)

    async def _rebuild(self, read: _GroupRead, want: int, start: int, end: int, reason: str):
        """Decode unit `want`'s block range [start, end) from k other units."""
        # A hedge is already late: read one spare source, so one more straggler costs nothing.
        sources = await self._gather_k(read, want, start, end, spare=_HEDGE_SPARE if reason == "hedge" else 0)
        decoded = await self._decode(read, sources, [want], end - start)
        log.debug("rebuilt %s from units %s (%s)", read.describe(want, start, end), sorted(sources), reason)
        return decoded[want]

    async def _decode(self, read: _GroupRead, sources: dict, wants: list[int], length: int) -> dict:
        from hedgefs.ec.codec import codec_for  # here, not at the top: a healthy read never loads numpy

        codec = codec_for(read.policy)
        if length * len(wants) <= _INLINE_DECODE_BYTES:
            return codec.decode(sources, wants, length)
        return await asyncio.get_running_loop().run_in_executor(None, codec.decode, sources, wants, length)

    # ---------------------------------------------------------------- replicated blocks

    def _replica_order(self, read: _GroupRead, nbytes: int) -> list[int]:
        """The block's replicas, best first: not avoided; (adaptive) not on a DataNode the model
        calls slow or silent, nor on one with a read out past the threshold now; no recent
        failure; fastest by the model's score, in factor-2 bands (replicas about as fast share
        the load instead of every read herding to the fastest); then replica index (placement
        is random per block, so that spreads the load too, as the NameNode's shuffle does in HDFS)."""
        model = self._model
        threshold = self._threshold(nbytes)

        def rank(index: int):
            dn = read.datanode(index)
            troubled = self._adaptive and (model.is_black_hole(dn) or model.is_slow(dn)
                                           or model.silent_for(dn) >= threshold)
            return (dn in read.avoid, troubled, model.failed_recently(dn), _speed_band(model.score(dn)), index)

        return sorted(read.group.units, key=rank)

    async def _read_replicas(self, read: _GroupRead, start: int, end: int):
        """Bytes [start, end) of a replicated block, from whichever replica answers first."""
        order = self._replica_order(read, end - start)
        if not order:
            raise DataUnavailable(f"block {read.group.id} has no live replica")
        self._metrics.incr("cell_reads_needed")
        self._breaker.earn(1)
        race = _ReplicaRace(read, start, end, order)
        self._ask(race, race.order.pop(0))
        self._ask_more_at_once(race)
        threshold = self._threshold(end - start)
        loop = asyncio.get_running_loop()
        deadline: float | None = loop.time() + threshold   # the timer covers connecting, as for EC reads
        retries = 0
        while True:
            if not race.running:
                if race.busy and retries < _BUSY_RETRIES:
                    retries += 1
                    await asyncio.sleep(_BUSY_BACKOFF_S * retries)
                    for index in race.busy:
                        read.fetches.pop((index, start, end), None)
                        self._ask(race, index)
                    race.busy.clear()
                    deadline = loop.time() + threshold
                    continue
                raise DataUnavailable(f"block {read.group.id}: none of its {len(read.group.units)} live replicas "
                                      f"could be read ({'; '.join(race.errors)})")
            timeout = None if deadline is None else max(0.0, deadline - loop.time())
            done, _ = await asyncio.wait(set(race.running), timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
            if not done:
                deadline = self._replicas_overdue(race, threshold)
                continue
            for task in sorted(done, key=lambda t: not _failed(t)):   # failures first: an answer returns
                index = race.running.pop(task)
                if not _failed(task):
                    return self._replica_answered(race, task, index)
                if self._replica_failed(race, task, index):
                    deadline = loop.time() + threshold   # a new read: its own threshold

    def _ask(self, race: "_ReplicaRace", index: int, hedge: bool = False, probe: bool = False) -> None:
        task = self._fetch(race.read, index, race.start, race.end)
        race.running[task] = index
        if hedge:
            race.hedges.add(task)
        if probe:
            datanode = race.read.datanode(index)
            race.probes.add(task)
            self._metrics.record_probe(datanode)
            task.add_done_callback(lambda _t: self._model.probe_done(datanode))

    def _ask_more_at_once(self, race: "_ReplicaRace") -> None:
        """Besides the best replica: a replica the model finds slow, now and then, so that its
        recovery is noticed (a probe: it races the best and, if it loses, runs on to its end);
        and ``read_extra`` more replicas (late binding: the first answer of 1 + N wins)."""
        if not (self._config.enabled and self._adaptive):
            return
        model = self._model
        for index in list(race.order):
            dn = race.read.datanode(index)
            if (model.is_slow(dn) or _speed_band(model.score(dn)) >= 2) and model.probe_due(dn):
                if self._breaker.try_extra(1) != ALLOWED:
                    model.probe_done(dn)
                    break
                race.order.remove(index)
                log.debug("probing %s, which reads slowly", race.read.describe(index, race.start, race.end))
                self._ask(race, index, probe=True)
                break
        extra = min(self._config.read_extra, len(race.order))
        if extra and self._breaker.allows_read_around() and self._breaker.try_extra(extra) == ALLOWED:
            for _ in range(extra):
                self._ask(race, race.order.pop(0))

    def _replicas_overdue(self, race: "_ReplicaRace", threshold: float) -> float | None:
        """No answer in time. Note every read now overdue; then hedge: ask the next replica too,
        if the breaker allows (and again after each further threshold while replicas are left).
        Refused: wait, but go around a DataNode as soon as the model calls it slow (breaker
        closed) or silent (always), as EC reads do. Returns when to look again (loop time)."""
        read, now = race.read, asyncio.get_running_loop().time()
        waiting = [(task, index) for task, index in race.running.items() if task not in race.probes]
        for task, index in waiting:
            if task not in race.overdue:
                race.overdue.add(task)
                self._metrics.record_overdue(read.datanode(index))
                if self._config.enabled:
                    self._breaker.record_slow(read.datanode(index))
        if not self._config.enabled or not race.order:
            return None
        if race.refused:
            if not self._adaptive:
                return None
            late = next(((i, w) for i, w in ((i, self._route(read, i)) for _, i in waiting) if w in ("slow", "silent")),
                        None)
            if late is None:
                return now + _RESCUE_POLL_S
            index = race.order.pop(0)
            self._metrics.record_avoided(read.datanode(late[0]))
            log.info("block %d [%d, %d): %s is %s; asking %s", read.group.id, race.start, race.end,
                     read.datanode(late[0]), late[1], read.datanode(index))
            race.refused = False
            self._ask(race, index)
            return now + threshold
        verdict = self._breaker.try_hedge(1)
        if verdict != ALLOWED:
            self._metrics.incr("hedges_refused_breaker" if verdict == REFUSED_BREAKER else "hedges_refused_rate")
            race.refused = True
            return now + _RESCUE_POLL_S if self._adaptive else None
        self._metrics.incr("hedges")
        index = race.order.pop(0)
        log.info("hedging block %d [%d, %d): no answer from %s after %.0f ms; asking %s too", read.group.id,
                 race.start, race.end, ", ".join(read.datanode(i) for _, i in waiting), threshold * 1000,
                 read.datanode(index))
        self._ask(race, index, hedge=True)
        return now + threshold

    def _replica_failed(self, race: "_ReplicaRace", task: asyncio.Task, index: int) -> bool:
        """A replica's read failed. With nothing else on its way, ask the next replica at once
        (True). A probe's failure only teaches the model."""
        if task in race.probes:
            return False
        err = task.exception() if not task.cancelled() else None
        race.errors.append(f"{race.read.datanode(index)}: {describe(err) if err else 'cancelled'}")
        if isinstance(err, Busy):
            race.busy.append(index)
        if not race.order or any(t not in race.probes for t in race.running):
            return False
        self._metrics.incr("decodes_on_failure")
        nxt = race.order.pop(0)
        log.info("read of %s failed (%s); asking %s", race.read.describe(index, race.start, race.end),
                 race.errors[-1], race.read.datanode(nxt))
        self._ask(race, nxt)
        return True

    def _replica_answered(self, race: "_ReplicaRace", task: asyncio.Task, index: int):
        """The first answer wins. The reads still running lost: a hedge that beat them counts as a
        win; they are retired (cancelled, in adaptive mode once they have run long enough to tell
        the model their DataNode is slow); a probe that lost runs on alone to its end."""
        read = race.read
        losers = [t for t in race.running if t not in race.probes]
        if task in race.hedges and losers:
            self._metrics.incr("hedge_wins")
            log.info("hedge won for %s", read.describe(index, race.start, race.end))
        for loser in list(race.running):
            if loser in race.probes:
                key = (race.running[loser], race.start, race.end)
                if read.fetches.get(key) is loser:
                    del read.fetches[key]   # detached: the group read's end does not cancel it
                    loser.add_done_callback(self._give_back)
            else:
                self._retire(read, loser)
        race.running.clear()
        return task.result()

    # ---------------------------------------------------------------- late binding

    def _late_binding(self, read: _GroupRead, wanted) -> bool:
        """Read k + N units and use the first k? Only for whole stripes (every data unit wanted,
        over the same block range): a smaller read would need k - j + N more unit reads than the
        j it wants. Not while the breaker is open."""
        k = read.policy.k
        extra = min(self._config.read_extra, read.policy.m)
        if not extra or not self._config.enabled or len(wanted) != k:
            return False
        if len({(r.offset_in_block, r.length) for r in wanted}) != 1 or not self._breaker.allows_read_around():
            return False
        return sum(1 for u in range(read.policy.units) if u in read.group.units and not read.avoided(u)) >= k + 1

    async def _read_late_bound(self, read: _GroupRead, wanted) -> list:
        start, end = wanted[0].offset_in_block, wanted[0].offset_in_block + wanted[0].length
        extra = min(self._config.read_extra, read.policy.m)
        sources = await self._gather_k(read, -1, start, end, spare=extra)
        missing = [r.index for r in wanted if r.index not in sources]
        decoded = await self._decode(read, sources, missing, end - start) if missing else {}
        return [sources[r.index] if r.index in sources else decoded[r.index] for r in wanted]

    # ---------------------------------------------------------------- sources

    def _candidates(self, read: _GroupRead, want: int, start: int, end: int) -> list[int]:
        """Units to rebuild from, best first: all zeros (free), then (adaptive) away from slow or
        silent DataNodes, in flight, data, parity; within each, DataNodes without a recent
        failure first, then the ones the model rates fastest."""
        k = read.policy.k
        model = self._model

        def rank(u: int):
            free = read.held(u, start, end) == 0
            fetch = read.fetches.get((u, start, end))
            in_flight = fetch is not None and not _failed(fetch)
            dn = read.datanode(u)
            troubled = self._adaptive and dn is not None and (model.is_slow(dn) or model.is_black_hole(dn))
            failed_lately = dn is not None and model.failed_recently(dn)
            score = model.score(dn) if dn else 0.0
            return (not free, read.avoided(u), troubled, not in_flight, u >= k, failed_lately, score, u)

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
        threshold = self._threshold(end - start)
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
                    # A source is overdue too: bring in one more, if the budget has one to spare
                    # (always instead of a black hole: that is not extra, it is a failure).
                    silent = self._adaptive and any(self._model.is_black_hole(read.datanode(i)) for i in active.values())
                    if candidates and (silent or self._breaker.try_extra(1) == ALLOWED):
                        launch_next()
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


class _ReplicaRace:
    """One read of a replicated block: the replicas asked so far and why."""

    def __init__(self, read: _GroupRead, start: int, end: int, order: list[int]):
        self.read, self.start, self.end = read, start, end
        self.order = order                          # replicas not asked yet, best first
        self.running: dict[asyncio.Task, int] = {}  # read -> replica index
        self.hedges: set[asyncio.Task] = set()      # asked because the others were overdue
        self.probes: set[asyncio.Task] = set()      # asked to learn a slow DataNode's speed
        self.overdue: set[asyncio.Task] = set()
        self.refused = False                        # the breaker refused a hedge: rescue only
        self.errors: list[str] = []
        self.busy: list[int] = []                   # answered BUSY: asked again once nothing else is left


def _speed_band(score: float) -> int:
    """A DataNode's score (its median recent read as a multiple of the threshold; 0 unknown) in
    factor-2 bands: 0 under the threshold (or unknown: asking it teaches us), 1 up to twice it..."""
    return 0 if score < 1.0 else 1 + int(math.log2(score))


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
