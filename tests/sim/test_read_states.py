"""The fetcher's rules as the reader shows them, without processes (tests/read_sim.py): what a
hedge costs, who holds a probe's ticket, what the fetch observer sees, our own deadline, and a
unit read's bytes after release. Checked by bytes, counted unit reads and the breaker's budget.

RS-6-3-64k unless a test says otherwise: units 0-5 data, 6-8 parity; unit i lives on dn<i>.
"""

import asyncio

import pytest

from read_sim import DEAD, FAST, Client, Reply, ScriptedDataNodes, Stripe, run, timed, train

from hedgefs.client.breaker import ALLOWED, BURST
from hedgefs.client.errors import DataUnavailable
from hedgefs.client.range_fetch import RangeFetcher
from hedgefs.client.unit_reads import State

CELL = 64 * 1024


def setup(scripts=None, policy="RS-6-3-64k", **hedge):
    stripe = Stripe(policy)
    dns = ScriptedDataNodes(stripe, scripts or {})
    return stripe, dns, Client(dns, **hedge)


def leave_tokens(client: Client, n: int) -> None:
    """Spend the budget's burst down to ``n`` tokens (a read's own unit read adds 0.05)."""
    assert client.breaker.try_extra(BURST - n) == ALLOWED


# ---------------------------------------------------------------- what a hedge costs


@pytest.mark.parametrize("policy, index, cost, asked", [
    ("RS-6-3-64k", 2, 7, [0, 1, 2, 3, 4, 5, 6, 7]),       # any k others, and one spare
    ("LRC-6-2-2-64k", 4, 3, [3, 4, 5, 7]),                 # its local group, no spare outside it
    ("REPLICATE-3", 0, 1, [0, 1]),                         # another replica
])
def test_a_hedge_is_allowed_when_the_budget_holds_exactly_its_cost(policy, index, cost, asked):
    """A slow unit (2 s) past the 250 ms ceiling of a new client: the hedge asks the budget for
    what it would read, the code's cheapest rescue and its spare, and reads exactly that."""
    at = index * CELL if policy != "REPLICATE-3" else 0
    stripe, dns, client = setup({index: [Reply(2.0)]}, policy=policy)
    leave_tokens(client, cost)
    got, took = run(lambda: timed(client.pread(at, CELL)))
    assert got == stripe.data[at:at + CELL] and took < 0.5
    assert client.counter("hedges") == client.counter("hedge_wins") == 1
    assert sorted(dns.asked) == asked


@pytest.mark.parametrize("policy, index, cost", [("RS-6-3-64k", 2, 7), ("LRC-6-2-2-64k", 4, 3),
                                                 ("REPLICATE-3", 0, 1)])
def test_a_refused_hedge_sends_nothing_and_waits_for_its_read(policy, index, cost):
    """One token short of the hedge's cost: refused, counted, nothing else read; the read is
    still counted on, and its answer (600 ms: past the threshold, short of the 1 s that makes
    its DataNode silent) is the answer."""
    at = index * CELL if policy != "REPLICATE-3" else 0
    stripe, dns, client = setup({index: [Reply(0.6)]}, policy=policy)
    leave_tokens(client, cost - 1)
    got, took = run(lambda: timed(client.pread(at, CELL)))
    assert got == stripe.data[at:at + CELL] and took == pytest.approx(0.6)
    assert client.counter("hedges") == 0 and client.counter("hedges_refused_rate") == 1
    assert dns.asked == [index]


def test_a_hedged_read_that_answers_first_is_used_and_the_rebuild_retired():
    """Unit 2 is hedged at its 100 ms threshold but answers at 110 ms, before its sources (300 ms):
    its own bytes are used, nothing decoded from the sources, the hedge lost."""
    stripe, dns, client = setup({2: [Reply(0.110)], **{i: [Reply(0.3)] for i in (0, 1, 3, 4, 5, 6, 7, 8)}},
                                threshold_ms=100)
    got, took = run(lambda: timed(client.pread(2 * CELL, CELL)))
    assert got == stripe.data[2 * CELL:3 * CELL] and took == pytest.approx(0.110)
    assert client.counter("hedges") == 1 and client.counter("hedge_wins") == 0
    assert sorted(dns.cancelled) == [0, 1, 3, 4, 5, 6, 7]   # the sources, cancelled (fixed: at once)


# ---------------------------------------------------------------- probes hold their tickets


def test_a_probe_holds_its_ticket_until_its_read_ends():
    """dn1 is slow: a cell read of unit 1 is rebuilt, and dn1 probed. While the probe runs (1 s),
    no other probe of dn1 can be booked, however long past the 250 ms spacing; once it ends, one can."""
    stripe, dns, client = setup({1: [Reply(1.0)]})

    async def go():
        train(client.model, {f"dn{i}": 0.001 for i in (0, 2, 3, 4, 5, 6, 7, 8)}, {"dn1": 1.0})
        await asyncio.sleep(1.0)
        train(client.model, {}, {"dn1": 1.0}, reads=2)
        got = await client.pread(CELL, CELL)
        await asyncio.sleep(0.5)
        during = client.model.book_probe("dn1")
        await asyncio.sleep(1.0)
        after = client.model.book_probe("dn1")
        return got, during, after
    got, during, after = run(go)
    assert got == stripe.data[CELL:2 * CELL]
    assert client.counter("probes") == 1 and during is None and after is not None


# ---------------------------------------------------------------- the fetch observer


def test_each_range_fetch_is_reported_to_the_observers_until_they_stop():
    stripe, dns, client = setup({0: [DEAD]})
    reports = []
    stop = client.reader.observe(reports.append)
    assert run(lambda: client.pread(0, 6 * CELL)) == stripe.data[:6 * CELL]
    (report,) = reports
    assert (report.group_id, report.start, report.end, report.ok) == (1, 0, CELL, True)
    assert report.unit_reads == 7 and report.ended >= report.began   # six data units and one parity
    stop()
    run(lambda: client.pread(0, CELL))
    assert len(reports) == 1


def test_a_failed_fetch_is_reported_too():
    stripe, dns, client = setup({i: [DEAD] for i in range(4)})
    reports = []
    client.reader.observe(reports.append)
    with pytest.raises(DataUnavailable):
        run(lambda: client.pread(0, CELL))
    assert [r.ok for r in reports] == [False]


# ---------------------------------------------------------------- our own deadline, and failures


def test_a_read_past_our_deadline_is_rebuilt_and_is_no_failure_of_its_datanode():
    """The transport's time limit (DeadlineExceeded) means no answer, not a refusal: the unit is
    rebuilt, and dn2 is not marked as failed (a rebuild would then rank it last)."""
    stripe, dns, client = setup({2: [Reply(0.001, error="DEADLINE_EXCEEDED")], 3: [Reply(0.001, error="UNAVAILABLE")]})
    assert run(lambda: client.pread(2 * CELL, 2 * CELL)) == stripe.data[2 * CELL:4 * CELL]
    assert client.counter("rebuilt_on_failure") == 2
    assert not client.model.failed_recently("dn2") and client.model.failed_recently("dn3")


def test_a_unit_reads_bytes_after_release_are_an_error_not_poison():
    stripe, dns, client = setup()
    ctx = client.reader.context

    async def go():
        fetcher = RangeFetcher(ctx, stripe.policy, stripe.location(), 0, CELL, [0])
        data = await fetcher.fetch()
        assert bytes(data[0]) == stripe.data[:CELL]
        (read,) = fetcher.reads
        fetcher.close()
        return read
    read = run(go)
    assert read.state is State.DONE
    with pytest.raises(RuntimeError, match="after release"):
        read.data


def test_replicas_go_on_to_the_next_replica_as_the_wanted_units_read():
    """REPLICATE-3, the first two replicas dead: each failure is a failover, and the third,
    asked next, answers (replicas are the same fetch as any code, with unit 0 wanted)."""
    stripe, dns, client = setup({0: [DEAD], 1: [DEAD], 2: [FAST]}, policy="REPLICATE-3")
    assert run(lambda: client.pread(10, 1000)) == stripe.data[10:1010]
    assert client.counter("replica_failovers") == 2 and dns.asked == [0, 1, 2]
