"""The read logic, without processes: the reader over scripted DataNodes on a virtual clock.

Each scenario scripts when each unit's DataNode answers (tests/read_sim.py), reads, and checks
what a user would: the bytes, byte for byte, against the data that was encoded; and what the
reader did, by counted unit reads (which units were asked, how many hedges, rebuilds,
cancellations). Receive buffers are poisoned when given back, so a buffer used after its
return is wrong bytes here, not luck. Times are virtual: a 5 s DataNode costs no wall time,
and every run interleaves the same way.

RS-6-3-64k unless a scenario says otherwise: units 0-5 hold data, 6-8 parity; a group of two
full stripes (768 KiB). "A cell read" is a read of one 64 KiB cell (one unit, k = 6 others to
rebuild it from); "a stripe read" wants all six data units over one block range.
"""

import asyncio

import pytest

from read_sim import BAD_CRC, BUSY, DEAD, FAST, FROZEN, Client, Reply, ScriptedDataNodes, Stripe, run, timed, train

from hedgefs.client.errors import DataUnavailable

CELL = 64 * 1024
PARITY = {6, 7, 8}


def cell_read(client: Client, index: int, stripe_no: int = 0) -> bytes:
    """Unit ``index``'s cell of stripe ``stripe_no``, as a pread of just that cell."""
    return run(lambda: client.pread((stripe_no * 6 + index) * CELL, CELL))


def stripe_read(client: Client, stripe_no: int = 0) -> bytes:
    return run(lambda: client.pread(stripe_no * 6 * CELL, 6 * CELL))


def cell(stripe: Stripe, index: int, stripe_no: int = 0) -> bytes:
    at = (stripe_no * 6 + index) * CELL
    return stripe.data[at:at + CELL]


def setup(scripts=None, policy="RS-6-3-64k", length=None, **hedge):
    stripe = Stripe(policy, length=length)
    dns = ScriptedDataNodes(stripe, scripts or {})
    return stripe, dns, Client(dns, **hedge)


# ---------------------------------------------------------------- healthy


def test_healthy_cell_read_asks_its_unit_only():
    stripe, dns, client = setup()
    assert cell_read(client, 3) == cell(stripe, 3)
    assert dns.asked == [3]
    assert client.counter("hedges") == 0 and client.counter("unit_reads") == client.counter("unit_reads_needed") == 1


def test_healthy_stripe_read_asks_six_data_units_and_no_parity():
    stripe, dns, client = setup()
    assert stripe_read(client, 1) == stripe.data[6 * CELL:12 * CELL]
    assert sorted(dns.asked) == [0, 1, 2, 3, 4, 5]


def test_read_spanning_cells_and_stripes_is_exact():
    stripe, dns, client = setup()
    got = run(lambda: client.pread(100_000, 500_000))
    assert got == stripe.data[100_000:600_000]
    assert client.counter("hedges") == 0


# ---------------------------------------------------------------- slow and frozen units


def test_slow_data_unit_is_hedged_from_k_plus_one_others_and_the_hedge_wins():
    stripe, dns, client = setup({2: [Reply(2.0)]}, threshold_ms=100)
    got, took = run(lambda: timed(client.pread(2 * CELL, CELL)))
    assert got == cell(stripe, 2)
    assert took < 0.2   # the hedge answered, not the 2 s read
    assert client.counter("hedges") == 1 and client.counter("hedge_wins") == 1
    assert sorted(dns.asked) == [0, 1, 2, 3, 4, 5, 6, 7]     # unit 2, then k + 1 = 7 sources
    assert 2 in dns.cancelled                                  # the loser, cancelled (fixed mode: at once)


def test_frozen_unit_in_a_stripe_read_brings_in_two_parity_units():
    stripe, dns, client = setup({3: [FROZEN]})
    got, took = run(lambda: timed(client.pread(0, 6 * CELL)))
    assert got == stripe.data[:6 * CELL]
    assert took < 1.0
    assert client.counter("hedges") == 1 and client.counter("hedge_wins") == 1
    assert sorted(dns.asked) == [0, 1, 2, 3, 4, 5, 6, 7]     # five data units count; k + 1 - 5 = 2 parity
    assert 3 in dns.cancelled                                  # retired, and cancelled once it told the model


def test_hedging_off_waits_for_a_slow_unit():
    stripe, dns, client = setup({2: [Reply(2.0)]}, enabled=False)
    got, took = run(lambda: timed(client.pread(2 * CELL, CELL)))
    assert got == cell(stripe, 2)
    assert took >= 2.0
    assert dns.asked == [2] and client.counter("hedges") == 0


def test_slow_rebuild_source_brings_in_the_next_one():
    """Unit 0 is dead: rebuilt from 1-6; source 1 is slow, so unit 7 is read too."""
    stripe, dns, client = setup({0: [DEAD], 1: [Reply(3.0)]}, threshold_ms=100)
    got, took = run(lambda: timed(client.pread(0, CELL)))
    assert got == cell(stripe, 0)
    assert took < 0.5
    assert client.counter("rebuilt_on_failure") == 1
    assert sorted(dns.asked) == [0, 1, 2, 3, 4, 5, 6, 7]


# ---------------------------------------------------------------- failures


@pytest.mark.parametrize("failed", [1, 2, 3])
def test_failed_data_units_up_to_m_are_rebuilt_exactly(failed):
    stripe, dns, client = setup({i: [DEAD] for i in range(failed)})
    assert stripe_read(client) == stripe.data[:6 * CELL]
    assert client.counter("rebuilt_on_failure") == failed
    assert sorted(i for i in dns.asked if i in PARITY) == sorted(PARITY)[:failed]


def test_m_plus_one_failures_are_a_clean_error_after_bounded_retries():
    stripe, dns, client = setup({i: [DEAD] for i in (0, 1, 2, 6)})
    with pytest.raises(DataUnavailable, match="only 5 of the 6 units needed"):
        stripe_read(client)
    assert dns.count(0) == 4        # asked, then again in each of three rounds: a dead node is not waited on


def test_checksum_failure_reads_parity_and_reports_the_unit():
    stripe, dns, client = setup({2: [BAD_CRC]})
    assert stripe_read(client) == stripe.data[:6 * CELL]
    assert client.counter("checksum_failures") == 1 and client.reported == [2]
    assert sorted(dns.asked) == [0, 1, 2, 3, 4, 5, 6]


def test_flaky_unit_with_more_than_m_others_down_is_read_again_not_lost():
    """Three units dead and a fourth failing its checksum once: only five could be read in the
    first round; slow or flaky is not lost, so the flaky one is asked again."""
    stripe, dns, client = setup({0: [DEAD], 1: [DEAD], 6: [DEAD], 3: [BAD_CRC, FAST]})
    assert stripe_read(client) == stripe.data[:6 * CELL]
    assert dns.count(3) == 2


def test_busy_unit_is_asked_again_once_nothing_else_is_left():
    stripe, dns, client = setup({6: [DEAD], 7: [DEAD], 8: [DEAD], 0: [BUSY, BUSY, FAST]})
    assert cell_read(client, 0) == cell(stripe, 0)
    assert dns.count(0) == 3


def test_unit_with_no_live_copy_is_rebuilt_without_asking_anyone_for_it():
    stripe, dns, client = setup()
    loc = stripe.location()
    del loc.units[1]
    got = run(lambda: client.pread(CELL, CELL, group=loc))
    assert got == cell(stripe, 1)
    assert 1 not in dns.asked and client.counter("rebuilt_on_failure") == 1


def test_excluded_datanode_is_read_around():
    stripe, dns, client = setup()
    out = bytearray(CELL)

    async def read():
        await client.reader.read_group_range(stripe.policy, stripe.location(), 0, CELL, memoryview(out),
                                             frozenset({"dn0"}))
    run(read)
    assert bytes(out) == cell(stripe, 0)
    assert 0 not in dns.asked and sorted(dns.asked) == [1, 2, 3, 4, 5, 6]


def test_short_last_stripe_rebuilds_with_zeros_past_the_units_end():
    stripe, dns, client = setup({0: [DEAD]}, length=6 * CELL + 1000)
    got = run(lambda: client.pread(6 * CELL, 1000))
    assert got == stripe.data[6 * CELL:]
    assert client.counter("rebuilt_on_failure") == 1
    assert set(dns.asked) - {0} <= {6, 7, 8}   # units 1-5 hold nothing there: free zeros, never asked


# ---------------------------------------------------------------- the adaptive policy


def test_datanode_the_model_calls_slow_is_read_around():
    stripe, dns, client = setup({1: [Reply(1.0)]})

    async def go():
        train(client.model, {f"dn{i}": 0.001 for i in (0, 2, 3, 4, 5, 6, 7, 8)}, {"dn1": 1.0})
        assert client.model.is_slow("dn1")
        return await client.pread(CELL, CELL)
    assert run(go) == cell(stripe, 1)
    assert client.counter("avoided") == 1
    assert dns.count(1) == client.counter("probes")   # asked only as a probe, if at all


def test_probe_of_a_slow_datanode_races_the_rebuild_and_runs_on():
    stripe, dns, client = setup({1: [Reply(1.0)]})

    async def go():
        train(client.model, {f"dn{i}": 0.001 for i in (0, 2, 3, 4, 5, 6, 7, 8)}, {"dn1": 1.0})
        await asyncio.sleep(1.0)   # a probe is due
        train(client.model, {}, {"dn1": 1.0}, reads=2)
        return await client.pread(CELL, CELL)
    assert run(go) == cell(stripe, 1)
    assert client.counter("probes") == 1 and dns.count(1) == 1
    assert 1 not in dns.cancelled   # a probe that lost ran on to its end


def test_silent_datanode_is_read_around_with_the_breaker_open():
    stripe, dns, client = setup({4: [FROZEN]}, max_impaired_nodes=0)

    async def go():
        peers = {f"dn{i}": 0.001 for i in range(9) if i != 7}
        train(client.model, peers, {"dn7": 1.0})
        await asyncio.sleep(1.5)
        train(client.model, peers, {"dn7": 1.0})
        assert client.breaker.is_open   # dn7 slow for over a second, more than 0 may be: tripped
        return await timed(client.pread(4 * CELL, CELL))
    got, took = run(go)
    assert got == cell(stripe, 4)
    assert client.counter("hedges_refused_breaker") == 1 and client.counter("avoided") == 1
    assert took < 5.0   # not the transport's 60 s: silent is never waited on


def test_late_binding_reads_one_spare_and_uses_the_first_six():
    stripe, dns, client = setup({5: [Reply(2.0)]}, read_extra=1)
    got, took = run(lambda: timed(client.pread(0, 6 * CELL)))
    assert got == stripe.data[:6 * CELL]
    assert took < 0.1 and client.counter("hedges") == 0
    assert sorted(dns.asked) == [0, 1, 2, 3, 4, 5, 6]


# ---------------------------------------------------------------- buffers and losers


def test_two_rebuilds_in_one_stripe_with_a_retired_source_read_return_the_stored_bytes():
    """Unit 1 fails at once and is rebuilt; unit 0 goes overdue and is hedged, and the hedge
    wins: unit 0's own read is retired but runs on, and answers while unit 1 still needs a
    k-th unit. Failed on the reader before the range fetcher: the retired read gave its buffer
    back (poisoned) while it was unit 1's rebuild source, which decoded it into wrong bytes.
    (The threshold's timeline: overtaken by units 2-5 at 2 ms, 0 and 1 would both be hedged then.)"""
    stripe, dns, client = setup({0: [Reply(0.3)], 1: [Reply(0.1, error="UNAVAILABLE")], 6: [Reply(5.0)]},
                                overtaken=False)
    assert stripe_read(client) == stripe.data[:6 * CELL]
    assert client.counter("rebuilt_on_failure") == 1


def test_retired_loser_whose_bytes_arrive_late_gives_its_buffer_back_once():
    stripe, dns, client = setup({2: [Reply(0.3), FAST]})

    async def go():
        first = await client.pread(2 * CELL, CELL)   # hedged at 250 ms; the loser answers at 300 ms
        await asyncio.sleep(1.0)
        second = await client.pread(2 * CELL, 6 * CELL)   # reuses the pool's buffers
        return first, second
    first, second = run(go)
    assert first == cell(stripe, 2) and second == stripe.data[2 * CELL:8 * CELL]
    assert client.counter("hedge_wins") == 1
    assert 2 not in dns.cancelled   # it ran on to its end (the model heard it), then gave its buffer back


def test_cancelled_read_cancels_every_unit_read():
    stripe, dns, client = setup({i: [FROZEN] for i in range(9)})

    async def go():
        task = asyncio.ensure_future(client.pread(0, 6 * CELL))
        await asyncio.sleep(0.1)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    run(go)
    assert sorted(dns.cancelled) == [0, 1, 2, 3, 4, 5]


# ---------------------------------------------------------------- replicas (k = 1)


def test_slow_first_replica_is_hedged_by_the_next():
    stripe, dns, client = setup({0: [Reply(2.0)], 1: [Reply(2.0)], 2: [Reply(2.0)]}, policy="REPLICATE-3",
                                threshold_ms=100)
    dns.script(1, FAST)
    got, took = run(lambda: timed(client.pread(0, 200_000)))
    assert got == stripe.data[:200_000] and took < 0.2
    assert client.counter("hedges") == 1 and client.counter("hedge_wins") == 1
    assert dns.asked[:2] == [0, 1] and 2 not in dns.asked


def test_all_replicas_but_one_dead_reads_the_last():
    stripe, dns, client = setup({0: [DEAD], 1: [DEAD]}, policy="REPLICATE-3")
    assert run(lambda: client.pread(1000, 5000)) == stripe.data[1000:6000]
    assert client.counter("replica_failovers") == 2 and dns.asked[-1] == 2


def test_all_replicas_dead_is_a_clean_error():
    stripe, dns, client = setup({0: [DEAD], 1: [DEAD], 2: [DEAD]}, policy="REPLICATE-3")
    with pytest.raises(DataUnavailable, match="none of its 3 live replicas"):
        run(lambda: client.pread(0, 100))


# ---------------------------------------------------------------- LRC-6-2-2: the code's cheapest rescue
# Units 0-5 data in two local groups (0-2 and 3-5), 6 and 7 their local parities, 8 and 9 global.


def test_lrc_cell_read_around_a_slow_datanode_reads_exactly_its_three_group_peers():
    stripe, dns, client = setup({4: [Reply(2.0)]}, policy="LRC-6-2-2-64k", threshold_ms=100)
    got, took = run(lambda: timed(client.pread(4 * CELL, CELL)))
    assert got == cell(stripe, 4) and took < 0.5
    assert client.counter("hedges") == 1 and client.counter("hedge_wins") == 1
    assert sorted(dns.asked) == [3, 4, 5, 7]   # unit 4, then its group: 3, 5 and local parity 7 (not 6 units)


def test_lrc_dead_unit_is_rebuilt_from_its_local_group():
    stripe, dns, client = setup({1: [DEAD]}, policy="LRC-6-2-2-64k")
    assert cell_read(client, 1) == cell(stripe, 1)
    assert sorted(dns.asked) == [0, 1, 2, 6] and client.counter("rebuilt_on_failure") == 1


def test_lrc_stripe_read_with_a_frozen_unit_reads_one_local_parity():
    stripe, dns, client = setup({2: [FROZEN]}, policy="LRC-6-2-2-64k")
    assert stripe_read(client) == stripe.data[:6 * CELL]
    assert sorted(i for i in dns.asked if i > 5) == [6]   # group 0's local parity stands in for unit 2: one read


def test_lrc_whole_local_group_lost_is_decoded_globally():
    stripe, dns, client = setup({0: [DEAD], 1: [DEAD], 2: [DEAD]}, policy="LRC-6-2-2-64k")
    assert stripe_read(client) == stripe.data[:6 * CELL]
    assert client.counter("rebuilt_on_failure") == 3
