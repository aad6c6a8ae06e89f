"""A read that cannot be served fails promptly; one that slow DataNodes can serve waits for them.

Chaos 4242041 step 207 (RS-6-3, 4 DataNodes lost: one frozen, one stalled, one killed, one
erroring; most of the rest delayed or bandwidth-capped): a group with fewer than k units on
DataNodes that answer was read for 60 s per round (the transport's deadline on the frozen and
stalled DataNodes' reads), four rounds with the relocations, while reads of other files shared
the slow DataNodes with it. Now a range that only *gone* DataNodes could still finish (reads in
flight, not even a response header for 5 s: the latency model's ``is_gone``) fails with
DataUnavailable; a DataNode that is slow but alive (its headers come, its bytes trickle) is
waited for. (Hedging off, a late read is waited for as it always was: to the transport's
deadline, then rebuilt.) RS-6-3-64k, two full stripes (tests/read_sim.py); times are virtual.
"""

import asyncio

import pytest

from read_sim import DEAD, FROZEN, Client, Reply, ScriptedDataNodes, Stripe, run, timed, train

from hedgefs.client.errors import DataUnavailable
from hedgefs.client.latency_rules import GONE_MIN_S

CELL = 64 * 1024
GONE_S = GONE_MIN_S   # a new client's healthy p99 is unknown: the floor


def setup(scripts, policy="RS-6-3-64k", **hedge):
    stripe = Stripe(policy)
    dns = ScriptedDataNodes(stripe, scripts)
    return stripe, dns, Client(dns, **hedge)


@pytest.mark.parametrize("hedge", [{}, {"threshold_ms": 100}], ids=["adaptive", "fixed"])
def test_stripe_read_with_four_units_frozen_fails_once_they_are_gone(hedge):
    stripe, dns, client = setup({i: [FROZEN] for i in (0, 1, 2, 6)}, **hedge)

    async def go():
        with pytest.raises(DataUnavailable, match="only 5 of the 6 units"):
            await client.pread(0, 6 * CELL)
    _, took = run(lambda: timed(go()))
    assert GONE_S <= took < GONE_S + 1.0     # not the transport's 60 s, nor a minute per retry round
    assert sorted(dns.cancelled) == [0, 1, 2, 6]   # nothing left running on the frozen DataNodes


def test_cell_read_fails_once_the_frozen_and_the_dead_leave_too_few():
    stripe, dns, client = setup({0: [FROZEN], 1: [FROZEN], 2: [DEAD], 7: [FROZEN]})

    async def go():
        with pytest.raises(DataUnavailable):
            await client.pread(0, CELL)
    _, took = run(lambda: timed(go()))
    assert took < GONE_S + 1.0
    assert dns.count(2) >= 2   # the failed unit was asked again before giving up (a flaky link is not lost)


def test_all_replicas_frozen_is_a_prompt_clean_error():
    stripe, dns, client = setup({i: [FROZEN] for i in range(3)}, policy="REPLICATE-3")

    async def go():
        with pytest.raises(DataUnavailable, match="none of its 3 live replicas"):
            await client.pread(0, 1000)
    _, took = run(lambda: timed(go()))
    assert took < GONE_S + 1.0


def test_three_frozen_and_a_paced_source_is_served_however_long_it_takes():
    # Units 0-2 frozen; of the six left, unit 6 is on a bandwidth-capped DataNode: its header
    # comes at once, its bytes after 12 s. Only it can make the sixth unit: the read waits for it.
    stripe, dns, client = setup({0: [FROZEN], 1: [FROZEN], 2: [FROZEN], 6: [Reply(12.0, header=0.01)]})
    got, took = run(lambda: timed(client.pread(0, 6 * CELL)))
    assert got == stripe.data[:6 * CELL]
    assert 12.0 <= took < 13.0
    assert client.counter("hedges") >= 1


def test_three_frozen_and_a_source_delayed_past_gone_is_not_waited_for_a_minute():
    # The same, but unit 6's DataNode says nothing at all for 12 s (it is as good as frozen):
    # the read fails when it is gone, and succeeds on a later try once it answers again.
    stripe, dns, client = setup({0: [FROZEN], 1: [FROZEN], 2: [FROZEN], 6: [Reply(12.0), Reply(0.001)]})

    async def go():
        with pytest.raises(DataUnavailable):
            await client.pread(0, 6 * CELL)
    _, took = run(lambda: timed(go()))
    assert took < GONE_S + 1.0


def test_a_frozen_unit_within_tolerance_is_still_just_read_around():
    stripe, dns, client = setup({3: [FROZEN]})
    got, took = run(lambda: timed(client.pread(0, 6 * CELL)))
    assert got == stripe.data[:6 * CELL] and took < 1.0


def test_gone_is_seconds_even_when_most_datanodes_are_slow():
    # A cluster most of whose DataNodes answer in 0.6 s (chaos 4242041 step 207: delays and
    # bandwidth caps on six of eight): silent is 20 x that p99 (12 s), and 5 x silent would
    # outlast the transport's deadline. Gone is max(5 s, 5 x the p99): 5 s.
    stripe, dns, client = setup({i: [FROZEN] for i in (0, 1, 2, 6)})

    async def go():
        train(client.model, {f"dn{i}": 0.6 for i in range(9)})
        await asyncio.sleep(0.1)   # past the thresholds' cache
        assert client.model.silent_after() >= 10.0
        loop = asyncio.get_running_loop()
        began = loop.time()
        with pytest.raises(DataUnavailable):
            await client.pread(0, 6 * CELL)
        return loop.time() - began
    assert run(go) < GONE_S + 1.0
