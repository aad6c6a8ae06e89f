"""Hedged striped reads against real DataNodes that are slow, stalled, frozen or corrupt.

Every read checks its bytes. These tests must hold on a busy machine, so time never decides an
outcome by a narrow margin: tests that count hedges use a 1 s threshold (no healthy unit read on
loopback takes that long, loaded or not) against faults of 3 s and more; the counters (hedges,
hedge wins) prove the hedge, and a time bound, where there is one, is the fault itself (the read
did not wait it out), never a speed. Tests that assert *no* hedge use a threshold no read reaches
(60 s), so what they check is counted work (unit reads, rebuilds), not speed. Speed targets live
in bench/.
"""

import gc
import random
import time

import pytest

from conftest import CELL, STRIPE, cli_env, pattern, run_cli, start_cluster, wait_until
from dn_support import faults_fixture
from hedgefs.client.config import HedgeConfig
from hedgefs.client.fs import FileSystem
from hedgefs.proto import hedgefs_pb2 as pb

THRESHOLD_MS = 1000      # hedge threshold of the tests that count hedges
COUNTED = HedgeConfig(threshold_ms=THRESHOLD_MS)
NEVER_BY_TIME = HedgeConfig(threshold_ms=60_000)   # no read hedges by slowness alone


@pytest.fixture(scope="module")
def hcluster(tmp_path_factory, security):
    # Frozen and stalled DataNodes here are never to be declared dead (at load 15-20 a freeze
    # test outlived the usual 3 s, its unit was repaired, and the repair's reads stalled on the
    # next test's stalled DataNode): 30 s, far beyond any test's fault.
    c = start_cluster(tmp_path_factory.mktemp("hedge"), security, dead_interval_s=30.0)
    yield c
    c.down()


faults = faults_fixture("hcluster")   # faults(dn, **knobs); cleared (and every DataNode thawed) after the test


def fault_state(cluster, dn: str) -> pb.FaultState:
    return cluster.datanode_rpc(dn, "GetFaults", pb.FaultClearRequest())


def holders(fs: FileSystem, path: str, group: int = 0) -> list[str]:
    units = fs.stat(path).groups[group].units
    return [units[i].datanode_id for i in sorted(units)]


@pytest.fixture(scope="module")
def two_stripes_data(hcluster):
    data = pattern(2 * STRIPE, seed=11)
    with FileSystem(hcluster.namenode, credentials=hcluster.credentials) as fs:
        fs.mkdir("/h", parents=True)
        fs.write_bytes("/h/two-stripes", data, overwrite=True)
    return data


@pytest.fixture
def two_stripes(hcluster, two_stripes_data):
    """The file's bytes and its units' DataNodes, asked afresh for each test (should a unit ever
    move, a list taken once would point the tests after it at the old DataNode)."""
    with FileSystem(hcluster.namenode, credentials=hcluster.credentials) as fs:
        return two_stripes_data, holders(fs, "/h/two-stripes")


def test_one_datanode_5s_slow_cat_is_hedged_and_does_not_wait_it_out(hcluster, faults, two_stripes):
    data, units = two_stripes
    faults(units[0], read_delay_ms=5000)
    start = time.monotonic()
    hedged = run_cli("cat", "--stats", "--hedge-threshold-ms", str(THRESHOLD_MS), "/h/two-stripes",
                     namenode=hcluster.namenode)
    hedged_s = time.monotonic() - start
    assert hedged.code == 0, hedged.stderr
    assert hedged.stdout == data
    # it did not wait out the delay: the hedge answered first and the slow read never did (counted,
    # not timed: a cat's start-up alone can take seconds on a loaded host)
    assert "hedges=1 hedge_wins=1" in hedged.stderr, hedged.stderr  # one read of unit 0, both stripes
    assert f"{units[0]}: unit_reads=0" in hedged.stderr and "overdue=1" in hedged.stderr, hedged.stderr

    start = time.monotonic()
    plain = run_cli("cat", "--no-hedge", "/h/two-stripes", namenode=hcluster.namenode)
    plain_s = time.monotonic() - start
    assert plain.code == 0 and plain.stdout == data
    assert plain_s >= 5.0, f"unhedged cat took only {plain_s:.2f} s: was the fault applied?"
    print(f"cat with {units[0]} +5 s: hedged {hedged_s:.2f} s, --no-hedge {plain_s:.2f} s")


def test_frozen_datanode_is_hedged_including_connect(hcluster, faults, two_stripes):
    data, units = two_stripes
    hcluster.freeze(units[1])  # SIGSTOP: the kernel still accepts TCP, nothing answers
    start = time.monotonic()
    result = run_cli("cat", "--stats", "--hedge-threshold-ms", str(THRESHOLD_MS), "/h/two-stripes",
                     namenode=hcluster.namenode)
    elapsed = time.monotonic() - start
    assert result.code == 0, result.stderr
    assert result.stdout == data
    # unhedged, a frozen DataNode is waited on for the unit-read timeout (60 s)
    assert elapsed < 30.0, f"cat with a frozen DataNode took {elapsed:.2f} s"
    assert "hedge_wins=1" in result.stderr, result.stderr
    print(f"cat with {units[1]} frozen: {elapsed:.2f} s")


def test_stalled_datanode_loser_is_cancelled_server_side(hcluster, faults, two_stripes):
    data, units = two_stripes
    faults(units[2], stall=True)
    before = fault_state(hcluster, units[2]).cancelled_reads
    with FileSystem(hcluster.namenode, credentials=hcluster.credentials, hedge=COUNTED) as fs:
        with fs.open("/h/two-stripes") as f:
            assert f.pread(2 * CELL, CELL) == data[2 * CELL:3 * CELL]  # exactly unit 2's first cell
        stats = fs.stats()
    assert stats.counters["hedges"] == 1 and stats.counters["hedge_wins"] == 1

    def released():
        state = fault_state(hcluster, units[2])
        return state.cancelled_reads > before and state.stalled_reads == 0

    wait_until(released, 10, "the DataNode to count the losing read cancelled and release its thread")


def test_loser_on_a_pooled_connection_is_cancelled_server_side_at_once(hcluster, faults, two_stripes):
    """The losing read goes out on a connection an earlier read left in the pool. Cancelling it
    must close that socket there and then, so the DataNode stops serving the loser (its thread,
    its --max-streams slot) while the client still runs, not whenever garbage collection finds
    the socket. Failed before the fix: the pooled branch closed only on OSError."""
    data, units = two_stripes
    with FileSystem(hcluster.namenode, credentials=hcluster.credentials, hedge=COUNTED) as fs:
        with fs.open("/h/two-stripes") as f:
            assert f.pread(2 * CELL, CELL) == data[2 * CELL:3 * CELL]   # leaves a pooled connection to unit 2
            faults(units[2], stall=True)
            before = fault_state(hcluster, units[2]).cancelled_reads
            gc.disable()   # no luck from a collection: the socket must be closed by the cancel itself
            try:
                assert f.pread(2 * CELL, CELL) == data[2 * CELL:3 * CELL]
                assert fs.stats().counters["hedge_wins"] == 1

                def released():
                    state = fault_state(hcluster, units[2])
                    return state.cancelled_reads > before and state.stalled_reads == 0

                wait_until(released, 10, "the DataNode to see the pooled loser's hang-up while the client runs")
            finally:
                gc.enable()


@pytest.mark.insecure_only("the breaker's logic")
def test_three_slow_datanodes_trip_the_breaker_and_reads_stay_correct(hcluster, faults, two_stripes):
    data, units = two_stripes
    for dn in units[:3]:
        faults(dn, read_delay_ms=3000)
    with FileSystem(hcluster.namenode, credentials=hcluster.credentials, hedge=COUNTED) as fs, fs.open("/h/two-stripes") as f:
        for unit in range(3):  # one cell each on three slow DataNodes, one after another
            assert f.pread(unit * CELL, CELL) == data[unit * CELL:(unit + 1) * CELL]
        assert fs.breaker.is_open
        start = time.monotonic()
        assert f.pread(0, CELL) == data[:CELL]  # breaker open: this read waits for its DataNode
        waited = time.monotonic() - start
        stats = fs.stats()
    c = stats.counters
    assert stats.breaker_trips == 1
    assert c["hedges"] == 2 and c["hedge_wins"] == 2
    assert c["hedges_refused_breaker"] == 2
    assert waited >= 2.9, "with the breaker open the read should have waited out the delay"


def test_corrupt_cell_is_rebuilt_and_bytes_are_exact(hcluster, faults, two_stripes):
    data, units = two_stripes
    faults(units[3], corrupt_probability=1.0)
    with FileSystem(hcluster.namenode, credentials=hcluster.credentials, hedge=NEVER_BY_TIME) as fs:
        assert fs.read_bytes("/h/two-stripes") == data
        stats = fs.stats()
    assert stats.counters["rebuilt_on_failure"] == 1  # one read of unit 3, both stripes
    assert stats.counters["hedges"] == 0


def test_erroring_datanode_is_rebuilt_even_with_hedging_off(hcluster, faults, two_stripes):
    data, units = two_stripes
    faults(units[4], error_probability=1.0)
    with FileSystem(hcluster.namenode, credentials=hcluster.credentials, hedge=HedgeConfig(enabled=False)) as fs:
        assert fs.read_bytes("/h/two-stripes") == data
        assert fs.stats().counters["rebuilt_on_failure"] == 1


def test_hedge_in_short_last_stripe(hcluster, faults):
    tail = CELL + CELL // 2  # last stripe: unit 0 full, unit 1 half a cell, units 2..5 empty
    data = pattern(STRIPE + tail, seed=5)
    with FileSystem(hcluster.namenode, credentials=hcluster.credentials, hedge=COUNTED) as fs:
        fs.write_bytes("/h/short-tail", data, overwrite=True)
        units = holders(fs, "/h/short-tail")
        faults(units[1], read_delay_ms=5000)
        start = time.monotonic()
        with fs.open("/h/short-tail") as f:
            got = f.pread(STRIPE, tail)
        elapsed = time.monotonic() - start
        stats = fs.stats()
    assert got == data[STRIPE:]
    assert elapsed < 5.0, f"hedged read of the short last stripe took {elapsed:.2f} s: it waited out the 5 s delay"
    assert stats.counters["hedge_wins"] == 1


def test_slow_hedge_source_brings_in_another_unit(hcluster, faults, two_stripes):
    """The rebuild itself must not wait on a slow source: a frozen data unit is replaced by parity."""
    data, units = two_stripes
    faults(units[0], read_delay_ms=8000)
    hcluster.freeze(units[1])
    with FileSystem(hcluster.namenode, credentials=hcluster.credentials, hedge=COUNTED) as fs, fs.open("/h/two-stripes") as f:
        start = time.monotonic()
        assert f.pread(0, CELL) == data[:CELL]
        elapsed = time.monotonic() - start
        c = fs.stats().counters
    assert c["hedges"] == c["hedge_wins"] == 1, c    # the one read of unit 0, won by its rebuild
    # hedge at 1 s, the frozen source overdue at 2 s, parity brought in: before the 8 s delay
    assert elapsed < 8.0, f"took {elapsed:.2f} s: it waited out the 8 s delay"


def expected_unit_reads(fs: FileSystem, path: str, offset: int, length: int) -> int:
    """Unit reads a healthy read of [offset, offset+length) makes: one per data unit it touches."""
    from hedgefs.ec import layout
    from hedgefs.ec.policy import parse_policy

    status = fs.stat(path)
    policy = parse_policy(status.policy)
    return sum(len(layout.group_range_to_units(policy, status.groups[p.group_index].length, p.offset_in_group, p.length))
               for p in layout.file_range_to_groups(offset, length, policy, status.block_size, status.length))


def test_healthy_reads_read_each_data_unit_once_over_1000_reads(hcluster, two_stripes):
    """With no fault and no hedge possible by time, a read costs exactly one unit read per data
    unit it touches: no rebuilds, no spare reads, nothing cancelled."""
    data, _ = two_stripes
    rng = random.Random(1)
    expected = 0
    with FileSystem(hcluster.namenode, credentials=hcluster.credentials, hedge=NEVER_BY_TIME) as fs, fs.open("/h/two-stripes") as f:
        for _ in range(1000):
            offset = rng.randrange(0, len(data) - 65536)
            assert f.pread(offset, 65536) == data[offset:offset + 65536]
            expected += expected_unit_reads(fs, "/h/two-stripes", offset, 65536)
        stats = fs.stats()
    c = stats.counters
    assert c["reads"] == 1000
    assert c["unit_reads"] == expected, (c, expected)
    assert c["hedges"] == c["rebuilt_on_failure"] == c["cancelled_reads"] == c["unit_read_errors"] == 0, c


def test_fault_cli_sets_shows_and_clears(hcluster, two_stripes):
    _, units = two_stripes
    dn = units[5]
    nn = hcluster.namenode
    set_ = run_cli("fault", "set", dn, "--read-delay-ms", "700", "--probability", "0.5", namenode=nn)
    assert set_.code == 0, set_.stderr
    assert "read-delay 700 ms" in set_.stdout.decode()
    shown = run_cli("fault", "show", dn, namenode=nn)
    assert "read-delay 700 ms (p=0.5" in shown.stdout.decode()
    cleared = run_cli("fault", "clear", dn, namenode=nn)
    assert cleared.code == 0 and "no faults" in cleared.stdout.decode()
    bad = run_cli("fault", "set", "dn99", "--stall", namenode=nn)
    assert bad.code != 0 and "dn99" in bad.stderr and "Traceback" not in bad.stderr


def test_no_hedge_never_trips_the_breaker(hcluster, faults, two_stripes):
    data, units = two_stripes
    for dn in units[:3]:
        faults(dn, read_delay_ms=400)
    with FileSystem(hcluster.namenode, credentials=hcluster.credentials, hedge=HedgeConfig(enabled=False)) as fs, fs.open("/h/two-stripes") as f:
        for unit in range(3):
            assert f.pread(unit * CELL, CELL) == data[unit * CELL:(unit + 1) * CELL]
        stats = fs.stats()
    assert stats.breaker_trips == 0 and stats.counters["hedges"] == 0
    assert [stats.per_datanode[dn]["overdue"] for dn in units[:3]] == [1, 1, 1]


def test_whole_file_reads_of_a_healthy_cluster_make_no_extra_unit_reads(hcluster):
    """Sequential reads keep many unit reads in flight at once (read-ahead); they must neither fail
    nor make work beyond one read per data unit range. The threshold is one no read reaches, so a
    slow machine cannot start a hedge: what is checked is counted, not timed."""
    data = pattern(24 << 20, seed=24)
    with FileSystem(hcluster.namenode, credentials=hcluster.credentials, hedge=NEVER_BY_TIME) as fs:
        fs.write_bytes("/h/big", data, overwrite=True)
        whole = expected_unit_reads(fs, "/h/big", 0, len(data))
        assert fs.read_bytes("/h/big") == data
        assert fs.stats().counters["unit_reads"] == whole
        with fs.open("/h/big") as f:
            assert b"".join(f.chunks()) == data
        stats = fs.stats()
    c = stats.counters
    print(f"2 whole reads of 24 MiB: unit reads={c['unit_reads']} (one pread: {whole})")
    assert c["hedges"] == c["rebuilt_on_failure"] == c["cancelled_reads"] == c["unit_read_errors"] == 0, c
    assert stats.breaker_trips == 0


def test_get_killed_with_sigterm_leaves_no_partial_file(hcluster, faults, two_stripes, tmp_path):
    import os
    import signal
    import subprocess
    import sys

    _, units = two_stripes
    faults(units[4], stall=True)  # with hedging off, the get waits on this DataNode
    env = cli_env(hcluster.namenode)
    target = tmp_path / "copy.bin"
    get = subprocess.Popen([sys.executable, "-m", "hedgefs", "get", "--no-hedge", "/h/two-stripes", str(target)],
                           stderr=subprocess.PIPE, env=env)
    wait_until(lambda: fault_state(hcluster, units[4]).stalled_reads > 0, 30,
               "the get to reach the stalled DataNode")
    assert list(tmp_path.iterdir()), "the get should have its temporary file open by now"
    get.send_signal(signal.SIGTERM)
    _, stderr = get.communicate(timeout=30)
    assert get.returncode == 128 + signal.SIGTERM, stderr
    assert list(tmp_path.iterdir()) == [], "a partial file was left behind"
