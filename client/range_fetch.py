"""The range fetcher: the wanted units of one block range of one block group, from a ranked list of units.

I am responsible for one block range [start, end) of one group and the units wanted over it
(for a replicated block, unit 0, which every replica holds). I read each wanted unit from its
DataNode, and I finish as soon as the units I hold give every wanted unit, as they are or
decoded. Each unit read is in an explicit state (unit_reads.py). One loop (``fetch``) re-runs
on every event, a read ending or a read crossing its threshold, and keeps enough reads *counted
on* (active ones, done ones, and late ones I chose to wait for: the reads not REPLACED) to
finish:

    target = (every wanted unit, if each has a read counted on; else what the code needs) + spare

topping up from the ranking whenever the count falls short. Which units the code needs, when
they are enough and which of them hold a wanted unit as it is, are the code's to say
(``ec/sources.py``: RS any k, LRC the cheapest plan, copies any one): I never ask which code it
is. What makes a read stop counting (it becomes REPLACED) is the only thing that differs between
hedging, read-around and rebuild:

    a wanted unit's read fails                   -> rebuild: sources are read, nobody asked
    a wanted unit's DataNode is slow or silent   -> read around (the policy's route), perhaps
                                                    with a probe of it that races the rebuild
    a wanted unit's read is overtaken            -> hedge (as if overdue), under its threshold:
                                                    later reads of its size to other DataNodes
                                                    answered while it has not (the policy's
                                                    question; once per read)
    a wanted unit's read is overdue              -> hedge, if the policy allows its cost (the
                                                    code's cheapest rescue and its spare);
                                                    refused, I wait for it, asking now and then
                                                    whether its DataNode turned slow or silent
                                                    (late with the reads beside it, a host stall:
                                                    not overdue yet, the policy's ``hedge_later``)
    a source's read is overdue                   -> one more source, if the policy allows
    late binding (whole stripes, read_extra N)   -> spare = N from the start

When to look at a read again (its threshold, the next time it could be overtaken, the next
look at a late read) is the policy's to say; the decisions I take about a read (hedged, found
overtaken, when it is due) are mine, kept here, never written into the read.

Reads still running when I finish are retired: cancelled, or left to run on (detached) for
the latency model's sake or as probes; their buffers go back when they end. The caller uses
the returned bytes, then calls ``close()``, which gives every buffer back. A read that
failed for want of sources is tried again (BUSY DataNodes after a pause, then every failed
unit, a few rounds): slow or flaky is not lost; only units that cannot be read at all are.

Observers (``ReadContext.observers``) get a ``FetchReport`` as each fetch ends.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging

from hedgefs.client.breaker import ALLOWED
from hedgefs.client.errors import DataUnavailable
from hedgefs.client.read_policy import Route
from hedgefs.client.unit_reads import ReadContext, Role, State, UnitRead
from hedgefs.ec import layout, sources
from hedgefs.ec.policy import Policy
from hedgefs.plumbing import describe

log = logging.getLogger("hedgefs.client.reader")

# Rounds of asking failed units again when nothing else is left (BUSY, a flaky link).
RETRY_ROUNDS = 20        # while some of them answered BUSY (--max-streams)
NON_BUSY_ROUNDS = 3      # otherwise
RETRY_BACKOFF_S = 0.02
# Decoding less than this runs inline on the event loop; more goes to a worker thread.
INLINE_DECODE_BYTES = 256 * 1024
# A read due within this much of now is due now: the loop wakes at a timer's time, which a float
# subtraction and addition may leave a hair short of the time it was computed from.
DUE_SLACK_S = 1e-6
# The counter a failed wanted unit's read adds to, by what replaces it (the code's ``substitute``).
FAILOVER_COUNTERS = {"rebuild": "rebuilt_on_failure", "replica": "replica_failovers"}


@dataclasses.dataclass(frozen=True)
class UnitTiming:
    """One unit read of a fetch: where it went, when, and how it ended (``ended_at`` None: still
    running when the fetch ended, retired or a probe)."""
    index: int
    datanode: str | None
    role: str
    sent_at: float
    ended_at: float | None
    state: str


@dataclasses.dataclass(frozen=True)
class FetchReport:
    """One range fetch, as it ended (times on the event loop's clock, ``time.monotonic``)."""
    group_id: int
    start: int
    end: int
    began: float
    ended: float
    unit_reads: int      # reads it sent, probes included
    decode_s: float      # rebuilding units from others
    ok: bool
    units: tuple[UnitTiming, ...] = ()


class RangeFetcher:
    def __init__(self, ctx: ReadContext, ec_policy: Policy, group, start: int, end: int, wanted: list[int],
                 exclude: frozenset[str] = frozenset()):
        self.ctx, self.policy = ctx, ctx.policy
        self.ec_policy = ec_policy
        self.code = sources.code_for(ec_policy)
        self.group = group
        self.start, self.end = start, end
        self.wanted = wanted
        self.exclude = exclude
        self.reads: list[UnitRead] = []    # every read I sent, in order
        self.spare = 0
        self._asked: set[int] = set()      # units sent this round (a failed one is asked again only by _retry)
        self._ranking: list[int] | None = None
        self._held: dict[int, int] = {}
        self._whole: bool | None = None
        self._due: dict[UnitRead, float] = {}   # when an active read is next looked at: its threshold, or later
        self._hedged: list[UnitRead] = []       # wanted units' reads whose lateness started a hedge
        self._judged: set[UnitRead] = set()     # found overtaken (hedged, or refused: asked once)
        self._rounds = 0
        self._decoding = False
        self._decode_s = 0.0

    # ---------------------------------------------------------------- helpers

    def describe(self, index: int) -> str:
        return f"unit {self.group.id}/{index} [{self.start}, {self.end}) on {self._datanode(index) or 'no DataNode'}"

    def _datanode(self, index: int) -> str | None:
        loc = self.group.units.get(index)
        return loc.datanode_id if loc else None

    def held(self, index: int) -> int:
        """Bytes of [start, end) the unit holds (0: past its end, zeros)."""
        n = self._held.get(index)
        if n is None:
            if self._whole is None:   # the last data unit is a group's shortest: do all units hold it whole?
                self._whole = self.end <= layout.unit_length(self.ec_policy, self.group.length, self.ec_policy.k - 1)
            n = self._held[index] = self.end - self.start if self._whole else layout.block_bytes_held(
                self.ec_policy, self.group.length, index, self.start, self.end - self.start)
        return n

    def _send(self, index: int, role: Role, probe=None) -> UnitRead:
        read = UnitRead(self.ctx, self.group, index, self.start, self.end, self.held(index), role, probe)
        self.reads.append(read)
        self._asked.add(index)
        if role is Role.PROBE:
            self.ctx.metrics.record_probe(read.datanode)
        else:
            self._due[read] = read.sent_at + self.policy.threshold(read.held)
        return read

    def _done(self) -> dict[int, UnitRead]:
        out = {}
        for r in self.reads:
            if r.state is State.DONE and r.index not in out:
                out[r.index] = r
        return out

    def _counted(self, without: UnitRead | None = None) -> set[int]:
        return {r.index for r in self.reads if r is not without and r.counted}

    def _candidates(self) -> list[int]:
        """The units not asked yet, best first (the policy's ranking, by the code's tiers)."""
        if self._ranking is None:
            units = self.group.units
            cands = [(i, units[i].datanode_id if i in units else None, self.held(i) == 0)
                     for i in range(self.code.units) if i in units or self.held(i) == 0]
            self._ranking = self.policy.rank(cands, self.end - self.start, self.exclude, self.code.tier)
        return [i for i in self._ranking if i not in self._asked]

    def _avoid(self, index: int) -> bool:
        dn = self._datanode(index)
        return self.policy.troubled(dn) or dn in self.exclude

    def _to_send(self, counted: set[int], spare: int) -> list[int]:
        """The units to ask now so that the reads counted on give every wanted unit, plus the
        spare: nothing while every wanted unit has a read counted on (but the late-binding
        spare). Which units is the code's to say."""
        missing = self.code.missing(self.wanted, counted)
        if not missing:
            more = len(self.wanted) + spare - len(counted)
            # (ranked only when something is to be sent: most reads send nothing past their own)
            return self._candidates()[:more] if more > 0 else []
        return self.code.to_read(missing, counted, self._candidates(), spare, self._avoid)

    def _top_up(self) -> None:
        """Send reads until enough are counted on (or none is left to send). A read that gives
        a wanted unit no read counted on gives is an ORIGINAL (its lateness is hedged); the
        rest are sources."""
        counted = self._counted()
        send = self._to_send(counted, self.spare)
        if not send:
            return
        covered = self.code.covered(self.wanted, counted)
        for index in send:
            gives = self.code.covered(self.wanted, covered | {index})
            self._send(index, Role.ORIGINAL if len(gives) > len(covered) else Role.SOURCE)
            covered = gives

    # ---------------------------------------------------------------- the loop

    async def fetch(self) -> dict[int, object]:
        """Each wanted unit's bytes of [start, end)."""
        observed = bool(self.ctx.observers)
        loop = asyncio.get_running_loop()
        began, ok = loop.time() if observed else 0.0, False
        try:
            self._start()
            while True:
                result = self._finished()
                if result is not None:
                    out = await self._finish(result)
                    ok = True
                    return out
                self._top_up()
                running = [r.task for r in self.reads if r.running]
                if not running or self._stranded():
                    if self._retry():
                        await asyncio.sleep(RETRY_BACKOFF_S * self._rounds)
                        continue
                    raise self._unavailable()
                timeout = self._next_timer()
                done, _ = await asyncio.wait(running, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
                self._on_ended([r for r in self.reads if r.task in done])
                self._on_time()
        finally:
            if observed:
                units = tuple(UnitTiming(r.index, r.datanode, r.role.value, r.sent_at, r.ended_at, r.state.value)
                              for r in self.reads)
                report = FetchReport(self.group.id, self.start, self.end, began, loop.time(), len(self.reads),
                                     self._decode_s, ok, units)
                for observer in self.ctx.observers:
                    observer(report)

    def _start(self) -> None:
        """The units the code names are routed one by one (asked, or read around); the ranking
        sends the rest; a DataNode passed over may be probed."""
        policy, metrics = self.policy, self.ctx.metrics
        for w in self.code.named(self.wanted):
            dn = self._datanode(w)
            route = Route.NO_COPY if dn is None else Route.EXCLUDED if dn in self.exclude else policy.route(dn)
            if route is Route.ASK:
                self._send(w, Role.ORIGINAL)
            elif route is Route.NO_COPY:
                metrics.incr("rebuilt_on_failure")
            elif route.around:
                metrics.record_avoided(dn)
                log.debug("reading around %s (%s)", self.describe(w), route.value)
        self.spare = policy.late_binding(self._spare_room)
        self._top_up()
        for u in self.code.holding(self.wanted):
            dn = self._datanode(u)
            if u in self._asked or dn is None or dn in self.exclude:
                continue
            ticket = policy.probe(dn)
            if ticket is not None:
                log.debug("probing %s, which reads slowly", self.describe(u))
                self._send(u, Role.PROBE, ticket)

    def _spare_room(self) -> int:
        """The units late binding could add (the code's answer, from the units there are to read)."""
        units = self.group.units
        available = sum(1 for u in range(self.code.units)
                        if (u in units and units[u].datanode_id not in self.exclude) or self.held(u) == 0)
        return self.code.spare_room(self.wanted, available)

    def _finished(self) -> dict[int, UnitRead] | None:
        """The done reads, once they give every wanted unit (read, or decodable from them)."""
        done = self._done()
        return done if self.code.enough(self.wanted, done) else None

    def _on_ended(self, ended: list[UnitRead]) -> None:
        for read in ended:
            if read.state is not State.FAILED or read.role is not Role.ORIGINAL or self._finished():
                continue
            self.ctx.metrics.incr(FAILOVER_COUNTERS[self.code.substitute])
            log.info("read of %s failed (%s); reading another unit", read.describe(),
                     describe(read.error) if read.error else "cancelled")

    def _on_time(self) -> None:
        """Reads past their threshold become overdue; a wanted unit's read overtaken by later
        reads is hedged early; late reads we wait for are looked at again."""
        now = asyncio.get_running_loop().time()
        policy = self.policy
        entries = None
        for read in self.reads:
            if read.role is Role.PROBE:
                continue
            state = read.state
            if state is State.ACTIVE:
                if now + DUE_SLACK_S >= self._due[read]:
                    if (wait := policy.hedge_later(read)) > 0:
                        self._due[read] = now + wait   # late with its peers: the host stalled, not its DataNode
                        continue
                    read.mark_overdue()
                    self._overdue(read)
                elif read.role is Role.ORIGINAL and read not in self._judged:
                    entries = self._entries() if entries is None else entries
                    if policy.overtaken(read, self._mates(read, entries)):
                        self._overtaken(read, now)
            elif state is State.OVERDUE:
                self._rescue(read)

    def _entries(self) -> list:
        """The read-log entries of the wanted units' own reads (a stripe's go out together)."""
        return [r.token.entry for r in self.reads
                if r.role is Role.ORIGINAL and r.token is not None and r.token.entry is not None]

    @staticmethod
    def _mates(read: UnitRead, entries: list) -> tuple:
        own = read.token.entry if read.token is not None else None
        return tuple(e for e in entries if e is not own)

    def _overdue(self, read: UnitRead) -> None:
        policy, dn = self.policy, read.datanode
        if read.role is Role.SOURCE:
            if self._candidates() and policy.may_add_source(dn):
                read.replace()
            return
        self.ctx.metrics.record_overdue(dn)   # a read the caller waits on directly is late
        policy.note_overdue(dn)
        self._hedge(read, f"no answer after {policy.threshold(read.held) * 1000:.0f} ms")

    def _overtaken(self, read: UnitRead, now: float) -> None:
        """Later reads of its size to other DataNodes answered while it has not: its DataNode,
        not the host, is slow. Hedged now, under its threshold, if the budget allows; refused,
        it waits for its threshold like any read."""
        self._judged.add(read)
        self.policy.note_overtaken(read)
        if self._hedge(read, f"overtaken by later reads of its size after {(now - read.sent_at) * 1000:.1f} ms"):
            self.ctx.metrics.incr("hedges_overtaken")

    def _hedge(self, read: UnitRead, why: str) -> bool:
        """Race a wanted unit's late read with the code's cheapest rescue, if the policy allows
        its cost (the rescue, and the code's spare). Refused: the read is waited for."""
        metrics = self.ctx.metrics
        spare = max(self.spare, self.code.hedge_spare)
        cost = len(self._to_send(self._counted(without=read), spare))   # what the hedge would read
        verdict = self.policy.may_hedge(cost)
        if verdict is not ALLOWED:
            if verdict.counter:
                metrics.incr(verdict.counter)
            return False
        read.replace()
        self._hedged.append(read)
        self.spare = spare
        metrics.incr("hedges")
        if read.cold:
            metrics.incr("hedges_cold")
        log.info("hedging %s: %s%s", read.describe(), why, " (a new connection)" if read.cold else "")
        return True

    def _rescue(self, read: UnitRead) -> None:
        route = self.policy.rescue(read.datanode)
        if route is None or not self._candidates():
            return
        read.replace()
        if read.role is Role.ORIGINAL:
            self.ctx.metrics.record_avoided(read.datanode)
            log.info("reading around %s: its DataNode is %s", read.describe(), route.value)

    def _next_timer(self) -> float | None:
        """Seconds until the policy next wants a look at a read: one crossing its threshold, one
        under it that could be overtaken by then, a late one we wait for."""
        now = asyncio.get_running_loop().time()
        policy = self.policy
        poll = policy.rescue_poll_s
        times = []
        entries = None
        for r in self.reads:
            if r.role is Role.PROBE:
                continue
            state = r.state
            if state is State.ACTIVE:
                times.append(self._due[r])
                if r.role is Role.ORIGINAL and r not in self._judged:
                    entries = self._entries() if entries is None else entries
                    at = policy.overtaken_look_at(r, self._mates(r, entries))
                    if at is not None:
                        times.append(at)
            elif state is State.OVERDUE and poll is not None:
                times.append(now + poll)
            if state in (State.OVERDUE, State.REPLACED) and (gone := policy.gone_in(r.datanode)):
                times.append(now + gone)   # when it is gone, if nothing else ends first: stranded?
        return max(0.0, min(times) - now) if times else None

    def _stranded(self) -> bool:
        """Only reads of gone DataNodes (the policy's ``gone_in``: frozen, stalled, no sign of
        life for seconds) could still finish the range: the rest answered, failed, or cannot
        give it; nothing left to ask could either. Their reads stop counting (they run on, and
        win if they answer first) and failed units are asked again a few rounds (``_retry``);
        then the range fails: unavailable now, not at the transport's deadline."""
        if not any(r.state in (State.OVERDUE, State.REPLACED) for r in self.reads):
            return False   # (a gone DataNode's read is long past its threshold: most fetches stop here)
        policy = self.policy
        hope = set(self._done())
        gone = []
        for r in self.reads:
            if r.running:
                if policy.gone_in(r.datanode) == 0.0:
                    gone.append(r)
                else:
                    hope.add(r.index)
        if not gone or self.code.enough(self.wanted, hope):
            return False
        hope.update(i for i in self._candidates() if policy.gone_in(self._datanode(i)) != 0.0)
        if self.code.enough(self.wanted, hope):
            return False
        for r in gone:
            r.replace()
        log.info("group %d [%d, %d): only DataNodes gone silent (%s) could still give it",
                 self.group.id, self.start, self.end, " ".join(sorted({r.datanode for r in gone})))
        return True

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
        errors = "; ".join(f"{r.datanode}: {describe(r.error) if r.error else 'cancelled'}"
                           for r in self.reads if r.state is State.FAILED)
        return DataUnavailable(self.code.shortfall(self.group.id, self.start, len(self._done()),
                                                   len(self.group.units), errors))

    # ---------------------------------------------------------------- the end

    async def _finish(self, done: dict[int, UnitRead]) -> dict[int, object]:
        for read in self._hedged:
            if read.state is not State.DONE:
                self.ctx.metrics.incr("hedge_wins")
                log.info("hedge won for %s", read.describe())
        self._retire_rest()
        holders = self.code.holders(self.wanted, done)
        missing = [w for w in self.wanted if w not in holders]
        if not missing:
            return {w: done[holders[w]].data for w in self.wanted}
        # Every done unit: RS uses the first k by index (data first), LRC the fewest it needs.
        decoded = await self._decode({i: r.data for i, r in done.items()}, missing)
        return {w: done[holders[w]].data if w in holders else decoded[w] for w in self.wanted}

    def _retire_rest(self) -> None:
        for read in self.reads:
            if not read.running:
                continue
            if read.role is Role.PROBE:
                read.run_on()
            else:
                read.retire(self.policy.retire_after(read), self.ctx.metrics)

    async def _decode(self, units: dict, wants: list[int]) -> dict:
        from hedgefs.ec.codec import codec_for   # here: numpy only once a read decodes

        codec = codec_for(self.ec_policy)
        length = self.end - self.start
        loop = asyncio.get_running_loop()
        began = loop.time()
        try:
            if length * len(wants) <= INLINE_DECODE_BYTES:
                return codec.decode(units, wants, length)
            self._decoding = True
            result = await loop.run_in_executor(None, codec.decode, units, wants, length)
            self._decoding = False
            return result
        finally:
            self._decode_s += loop.time() - began

    def close(self) -> None:
        """Every use of the bytes is over: cancel what still runs for us, give every buffer back.
        (Cancelled in the middle of a decode in a worker thread, the sources are left to the
        garbage collector instead: the thread may still be reading them.)"""
        for read in self.reads:
            if read.running and read.state is not State.RETIRED:
                read.cancel(self.ctx.metrics)
            if not self._decoding:
                read.release()
