"""The range fetcher: k units of one block range of one block group, from a ranked list of units.

I am responsible for one block range [start, end) of one group and the data units wanted over
it (for a replicated block, k = 1 and nothing in particular is wanted: any replica will do).
I read each wanted unit from its DataNode, and I finish as soon as I hold every wanted unit,
or any k units (then the missing wanted ones are decoded; for replicas, copied). Each unit
read is in an explicit state (unit_reads.py). One loop (``_loop``) re-runs on every event, a
read ending or a read crossing its threshold, and keeps enough reads *counted on* (active
ones, done ones, and late ones I chose to wait for) to finish:

    target = (every wanted unit, if each has a read counted on; else k) + spare

topping up from the ranking whenever the count falls short. What makes a read stop counting
is the only thing that differs between hedging, read-around and rebuild:

    a wanted unit's read fails                   -> rebuild: sources are read, nobody asked
    a wanted unit's DataNode is slow or silent   -> read around (the policy's route), perhaps
                                                    with a probe of it that races the rebuild
    a wanted unit's read is overtaken            -> hedge (as if overdue), under its threshold:
                                                    later reads of its size to other DataNodes
                                                    answered while it has not (the policy's
                                                    question; once per read)
    a wanted unit's read is overdue              -> hedge, if the policy allows its cost (one
                                                    spare source more, when k > 1); refused,
                                                    I wait for it, asking now and then whether
                                                    its DataNode turned slow or silent (late
                                                    with the reads beside it, a host stall: not
                                                    overdue yet, the policy's ``hedge_later``)
    a source's read is overdue                   -> one more source, if the policy allows
    late binding (whole stripes, read_extra N)   -> spare = N from the start

Reads still running when I finish are retired: cancelled, or left to run on (detached) for
the latency model's sake or as probes; their buffers go back when they end. The caller uses
the returned bytes, then calls ``close()``, which gives every buffer back. A read that
failed for want of sources is tried again (BUSY DataNodes after a pause, then every failed
unit, a few rounds): slow or flaky is not lost; only units that cannot be read at all are.
"""

from __future__ import annotations

import asyncio
import logging

from hedgefs.client.errors import DataUnavailable
from hedgefs.client.breaker import Verdict
from hedgefs.client.read_policy import HEDGE_SPARE, ReadPolicy, Route
from hedgefs.client.overtaking import LEFT_BEHIND_FACTOR
from hedgefs.client.unit_reads import Role, State, UnitRead
from hedgefs.ec import sources
from hedgefs.ec.policy import Policy
from hedgefs.plumbing import describe

log = logging.getLogger("hedgefs.client.reader")

# Rounds of asking failed units again when nothing else is left (BUSY, a flaky link).
RETRY_ROUNDS = 20        # while some of them answered BUSY (--max-streams)
NON_BUSY_ROUNDS = 3      # otherwise
RETRY_BACKOFF_S = 0.02
# Decoding less than this runs inline on the event loop; more goes to a worker thread.
INLINE_DECODE_BYTES = 256 * 1024


class RangeFetcher:
    def __init__(self, *, policy: ReadPolicy, layout: Policy, code, group, start: int, end: int, wanted: list[int],
                 held, datanodes, model, metrics, report_bad, exclude: frozenset[str] = frozenset()):
        self.policy, self.layout, self.code, self.group = policy, layout, code, group
        self.start, self.end = start, end
        self.wanted = wanted
        self.k = code.k
        self._held = held                  # index -> bytes of [start, end) the unit holds
        self._datanodes, self._model, self._metrics, self._report_bad = datanodes, model, metrics, report_bad
        self.exclude = exclude
        self.reads: list[UnitRead] = []    # every read I sent, in order
        self.spare = 0
        self._asked: set[int] = set()      # units sent this round (a failed one is asked again only by _retry)
        self._ranking: list[int] | None = None
        self._rounds = 0
        self._decoding = False

    # ---------------------------------------------------------------- helpers

    def describe(self, index: int) -> str:
        loc = self.group.units.get(index)
        where = loc.datanode_id if loc else "no DataNode"
        return f"unit {self.group.id}/{index} [{self.start}, {self.end}) on {where}"

    def _datanode(self, index: int) -> str | None:
        loc = self.group.units.get(index)
        return loc.datanode_id if loc else None

    def _send(self, index: int, role: Role) -> UnitRead:
        held = self._held(index)
        read = UnitRead(group=self.group, index=index, start=self.start, end=self.end, held=held, role=role,
                        datanodes=self._datanodes, model=self._model, metrics=self._metrics,
                        threshold=self.policy.threshold(held), report_bad=self._report_bad, describe=self.describe)
        self.reads.append(read)
        self._asked.add(index)
        if role is Role.PROBE:
            read.counted = False
            dn = read.datanode
            self._metrics.record_probe(dn)
            read.task.add_done_callback(lambda _t: self._model.probe_done(dn))
        return read

    def _done(self) -> dict[int, UnitRead]:
        out = {}
        for r in self.reads:
            if r.state is State.DONE and r.index not in out:
                out[r.index] = r
        return out

    def _counted(self) -> set[int]:
        return {r.index for r in self.reads if r.counted and r.state in (State.ACTIVE, State.OVERDUE, State.DONE)}

    def _candidates(self) -> list[int]:
        if self._ranking is None:
            units = self.group.units
            if self.code.k == 1:
                self._ranking = self.policy.rank_replicas(
                    [(i, units[i].datanode_id) for i in sorted(units)], self.end - self.start, self.exclude)
            else:
                n = self.code.k + self.code.m
                cands = [(i, self._datanode(i), self._held(i) == 0) for i in range(n)
                         if i in units or self._held(i) == 0]
                self._ranking = self.policy.rank_sources(cands, self.k, self.exclude)
        return [i for i in self._ranking if i not in self._asked]

    def _to_send(self) -> list[int]:
        """The units to ask now so that the reads counted on can give every wanted unit (or, for
        replicas, any one), plus the spare: nothing while every wanted unit has a read counted on
        (but the late-binding spare). Which units is the code's to say: any k for RS, read in
        the policy's order; an LRC's local group first (``ec/sources.py``)."""
        counted = self._counted()
        missing = [w for w in self.wanted if w not in counted]
        if self.wanted and not missing:
            more = len(self.wanted) + self.spare - len(counted)
            # (ranked only when something is to be sent: most reads send nothing past their own)
            return self._candidates()[:more] if more > 0 else []
        candidates = self._candidates()
        if not self.layout.local_groups:   # RS, and replicas (k = 1): any k units
            return candidates[:max(0, self.k + self.spare - len(counted))]
        usable = (set(candidates) | counted) - set(missing)
        troubled = {u for u in usable - counted if self.policy.troubled(self._datanode(u))
                    or self._datanode(u) in self.exclude}
        for available in (usable - troubled, usable):
            try:
                plan = sources.plan(self.layout, missing, available, reading=counted, order=self._ranking)
            except sources.Undecodable:
                continue
            send = [u for u in plan.read if u not in counted]
            if plan.local:
                return send   # a spare outside the group could not stand in for a late peer
            return send + [u for u in candidates if u not in send][:self.spare]
        return []   # nothing decodes with what is left: wait for the reads that run

    def _top_up(self) -> None:
        """Send reads until enough are counted on (or none is left to send)."""
        for index in self._to_send():
            self._send(index, Role.SOURCE)

    # ---------------------------------------------------------------- the loop

    async def fetch(self) -> dict[int, object]:
        """Each wanted unit's bytes of [start, end) (for replicas: {0: the block's bytes})."""
        self._start()
        while True:
            result = self._finished()
            if result is not None:
                return await self._finish(result)
            self._top_up()
            running = [r.task for r in self.reads if r.running]
            if not running:
                if self._retry():
                    await asyncio.sleep(RETRY_BACKOFF_S * self._rounds)
                    continue
                raise self._unavailable()
            timeout = self._next_timer()
            done, _ = await asyncio.wait(running, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
            self._on_ended([r for r in self.reads if r.task in done])
            self._on_time()

    def _start(self) -> None:
        policy = self.policy
        if self.code.k == 1:   # replicas: the best one, and what the policy adds at once
            ranked = self._candidates()
            if not ranked:
                raise DataUnavailable(f"block {self.group.id} has no live replica")
            self._send(ranked[0], Role.ORIGINAL)
            units = self.group.units
            probe = policy.replica_probe([(i, units[i].datanode_id) for i in ranked])
            if probe is not None:
                log.debug("probing %s, which reads slowly", self.describe(probe))
                self._send(probe, Role.PROBE)
            self.spare = policy.extra_replicas(len(self._candidates()))
            return
        for w in self.wanted:
            dn = self._datanode(w)
            route = Route.NO_COPY if dn is None else Route.EXCLUDED if dn in self.exclude else policy.route(dn)
            if route is Route.ASK:
                self._send(w, Role.ORIGINAL)
                continue
            if route is Route.NO_COPY:
                self._metrics.incr("rebuilt_on_failure")
            elif route.around:
                self._metrics.record_avoided(dn)
                log.debug("reading around %s (%s)", self.describe(w), route.value)
                if route is Route.PROBE:
                    self._send(w, Role.PROBE)
        available = sum(1 for u in range(self.code.k + self.code.m)
                        if (u in self.group.units and self._datanode(u) not in self.exclude) or self._held(u) == 0)
        self.spare = policy.late_binding_spare(self.k, self.code.m, len(self.wanted), available)

    def _finished(self) -> dict[int, UnitRead] | None:
        """The done reads, once they give every wanted unit (read, or decodable from them)."""
        done = self._done()
        if self.wanted and all(w in done for w in self.wanted):
            return done
        if self.k == 1:
            return done or None
        missing = [w for w in self.wanted if w not in done]
        if self.layout.local_groups:
            try:
                sources.plan(self.layout, missing, done)
            except sources.Undecodable:
                return None
            return done
        return done if len(done) >= self.k else None

    def _on_ended(self, ended: list[UnitRead]) -> None:
        for read in ended:
            if read.state is not State.FAILED or read.role is Role.PROBE or self._finished():
                continue
            if self.k == 1:
                self._metrics.incr("replica_failovers")   # the next replica is asked
            elif read.role is Role.ORIGINAL:
                self._metrics.incr("rebuilt_on_failure")
            else:
                continue
            log.info("read of %s failed (%s); reading another unit", self.describe(read.index),
                     describe(read.error) if read.error else "cancelled")

    def _on_time(self) -> None:
        """Reads past their threshold become overdue; a wanted unit's read overtaken by later
        reads is hedged early; late reads we wait for are looked at again."""
        now = asyncio.get_running_loop().time()
        for read in self.reads:
            if read.state is State.ACTIVE and read.role is not Role.PROBE and now >= read.overdue_at:
                if (wait := self.policy.hedge_later(read)) > 0:
                    read.overdue_at = now + wait   # late with its peers: the host stalled, not its DataNode
                    continue
                read.mark_overdue()
                self._overdue(read)
            elif self._may_be_overtaken(read) and self.policy.overtaken(read, self._mates(read)):
                self._overtaken(read)
            elif read.state is State.OVERDUE and read.counted and self.policy.rescue_poll_s is not None:
                self._rescue(read)

    def _may_be_overtaken(self, read: UnitRead) -> bool:
        return (read.state is State.ACTIVE and read.role is Role.ORIGINAL and read.counted and not read.overtaken
                and self.policy.overtaken_poll_s is not None)

    def _mates(self, read: UnitRead) -> tuple:
        """The read log entries of the other wanted units' own reads (sent with it: a stripe's)."""
        return tuple(r.token.entry for r in self.reads if r is not read and r.role is Role.ORIGINAL
                     and r.token is not None and r.token.entry is not None)

    def _overdue(self, read: UnitRead) -> None:
        policy, dn = self.policy, read.datanode
        if read.role is Role.SOURCE:
            if self._candidates() and policy.may_add_source(dn):
                read.counted = False
            return
        self._metrics.record_overdue(dn)   # a read the caller waits on directly is late
        policy.note_overdue(dn)
        self._hedge(read, f"no answer after {policy.threshold(read.held) * 1000:.0f} ms")

    def _overtaken(self, read: UnitRead) -> None:
        """Later reads of its size to other DataNodes answered while it has not: its DataNode,
        not the host, is slow. Hedged now, under its threshold, if the budget allows; refused,
        it waits for its threshold like any read."""
        read.overtaken = True
        age = self._model.age(read.token)
        if self._hedge(read, f"overtaken by later reads of its size after {age * 1000:.1f} ms"):
            read.mark_overdue()   # hedged once: its threshold starts nothing more
            self._metrics.incr("hedges_overtaken")

    def _hedge(self, read: UnitRead, why: str) -> bool:
        """Race a wanted unit's late read with the code's cheapest rescue, if the policy allows
        its cost (one spare source more, when k > 1). Refused: the read is waited for."""
        policy = self.policy
        if not policy.hedging:
            return False
        read.counted = False
        spare, self.spare = self.spare, max(self.spare, HEDGE_SPARE if self.k > 1 else 0)
        cost = len(self._to_send())   # what the hedge would read: the code's cheapest, and a spare
        self.spare = spare
        verdict = policy.may_hedge(cost)
        if verdict is not Verdict.ALLOWED:
            read.counted = True
            self._metrics.incr(verdict.counter)
            return False
        read.hedged = True
        if self.k > 1:
            self.spare = max(self.spare, HEDGE_SPARE)
        self._metrics.incr("hedges")
        if read.cold:
            self._metrics.incr("hedges_cold")
        log.info("hedging %s: %s%s", self.describe(read.index), why, " (a new connection)" if read.cold else "")
        return True

    def _rescue(self, read: UnitRead) -> None:
        route = self.policy.rescue(read.datanode)
        if route is None or not self._candidates():
            return
        read.counted = False
        if read.role is Role.ORIGINAL:
            self._metrics.record_avoided(read.datanode)
            log.info("reading around %s: its DataNode is %s", self.describe(read.index), route.value)

    def _next_timer(self) -> float | None:
        """Seconds until the next read crosses its threshold, a read under it is asked again
        whether it is overtaken (every 1 ms, or a quarter of its age: later reads of other
        fetchers do not wake this one), or a late read is looked at again."""
        now = asyncio.get_running_loop().time()
        times = [r.overdue_at for r in self.reads if r.state is State.ACTIVE and r.role is not Role.PROBE]
        ages = [now - r.sent_at for r in self.reads if self._may_be_overtaken(r)]
        if ages:
            times.append(now + max(self.policy.overtaken_poll_s, min(ages) / 4))
            times += [r.sent_at + LEFT_BEHIND_FACTOR * max(m.ended - m.began for m in mates) for r in self.reads
                      if self._may_be_overtaken(r) and (mates := self._mates(r)) and all(m.ended for m in mates)]
        poll = self.policy.rescue_poll_s
        if poll is not None and any(r.state is State.OVERDUE and r.counted for r in self.reads):
            times.append(now + poll)
        return max(0.0, min(times) - now) if times else None

    def _retry(self) -> bool:
        """Nothing runs and nothing is left to send: ask failed units again (a BUSY DataNode, a
        flaky link), a bounded number of rounds. False: give up."""
        failed = {r.index for r in self.reads if r.state is State.FAILED and r.role is not Role.PROBE}
        failed -= set(self._done())
        if not failed or self._rounds >= RETRY_ROUNDS:
            return False
        if not any(r.busy for r in self.reads if r.index in failed) and self._rounds >= NON_BUSY_ROUNDS:
            return False
        self._rounds += 1
        self._asked -= failed
        self._ranking = None   # re-ranked: recent failures now weigh in
        log.info("group %d [%d, %d): asking units %s again (round %d)", self.group.id, self.start, self.end,
                 sorted(failed), self._rounds)
        return True

    def _unavailable(self) -> DataUnavailable:
        done = len(self._done())
        if self.code.k == 1:
            errors = "; ".join(f"{r.datanode}: {describe(r.error) if r.error else 'cancelled'}"
                               for r in self.reads if r.state is State.FAILED)
            return DataUnavailable(f"block {self.group.id}: none of its {len(self.group.units)} live replicas "
                                   f"could be read ({errors})")
        return DataUnavailable(f"cannot read group {self.group.id} at block offset {self.start}: only {done} "
                               f"of the {self.k} units needed could be read")

    # ---------------------------------------------------------------- the end

    async def _finish(self, done: dict[int, UnitRead]) -> dict[int, object]:
        for read in self.reads:
            if read.hedged and read.state is not State.DONE:
                self._metrics.incr("hedge_wins")
                log.info("hedge won for %s", self.describe(read.index))
        self._retire_rest(done)
        if self.code.k == 1:   # replicas: any answer is the block's bytes
            return {0: next(iter(done.values())).data}
        wanted = self.wanted
        missing = [w for w in wanted if w not in done]
        if not missing:
            return {w: done[w].data for w in wanted}
        # Every done unit: RS uses the first k by index (data first), LRC the fewest it needs.
        decoded = await self._decode({i: r.data for i, r in done.items()}, missing)
        return {w: done[w].data if w in done else decoded[w] for w in wanted}

    def _retire_rest(self, done: dict[int, UnitRead]) -> None:
        for read in self.reads:
            if not read.running:
                continue
            if read.role is Role.PROBE:
                read.run_on()
            else:
                read.retire(self.policy.retire_after(read), self._metrics)

    async def _decode(self, units: dict, wants: list[int]) -> dict:
        length = self.end - self.start
        if length * len(wants) <= INLINE_DECODE_BYTES:
            return self.code.decode(units, wants, length)
        self._decoding = True
        result = await asyncio.get_running_loop().run_in_executor(None, self.code.decode, units, wants, length)
        self._decoding = False
        return result

    def close(self) -> None:
        """Every use of the bytes is over: cancel what still runs for us, give every buffer back.
        (Cancelled in the middle of a decode in a worker thread, the sources are left to the
        garbage collector instead: the thread may still be reading them.)"""
        for read in self.reads:
            if read.running and read.state is not State.RETIRED:
                read.cancel(self._metrics)
            if not self._decoding:
                read.release()
