"""Adaptive hedging on real processes: reading around slow DataNodes, probes, the breaker under
uniform load, silent DataNodes, late binding, and the write side's adaptive deadline.

None of these depends on the machine's speed: faults are seconds long where the client's
reactions take milliseconds, and what is asserted is counted (reads avoided, probes, trips,
unit reads) or bounded far from any margin (a read that must not wait out a frozen DataNode is
bounded by 10 s, where waiting would take 60 s; a put by the old fixed 20 s).
"""

import io
import subprocess
import sys
import threading
import time

import pytest

from conftest import CELL, GROUP, STRIPE, pattern, run_cli, start_cluster, wait_until
from dn_support import faults_fixture
from hedgefs.bench.read import run_read_bench
from hedgefs.client import writer
from hedgefs.client.config import HedgeConfig
from hedgefs.client.fs import FileSystem
from hedgefs.proto import hedgefs_pb2 as pb

AUTO = HedgeConfig()
STRIPES = 8                       # the file: 8 stripes = 2 block groups of 4 stripes (RS-6-3-64k, 256 KiB blocks)
DATA = pattern(STRIPES * STRIPE, seed=12)


@pytest.fixture(scope="module")
def acluster(tmp_path_factory):
    c = start_cluster(tmp_path_factory.mktemp("adaptive"))
    with FileSystem(c.namenode) as fs:
        fs.mkdir("/a", parents=True)
        fs.write_bytes("/a/file", DATA)
    yield c
    c.down()


faults = faults_fixture("acluster")   # faults(dn, **knobs); cleared (and every DataNode thawed) after the test


def unit0(fs: FileSystem) -> tuple[str, list[int]]:
    """The DataNode holding unit 0 of group 0, and the file offsets of its 4 cells there."""
    status = fs.stat("/a/file")
    return status.groups[0].units[0].datanode_id, [s * STRIPE for s in range(4)]


def read_cell(f, offset: int) -> None:
    assert f.pread(offset, CELL) == DATA[offset:offset + CELL]


def test_a_slow_datanode_is_read_around_after_a_few_reads_and_its_recovery_is_noticed(acluster, faults):
    with FileSystem(acluster.namenode, hedge=AUTO) as fs, fs.open("/a/file") as f:
        slow, offsets = unit0(fs)
        faults(slow, read_delay_ms=3000)
        for i in range(20):                     # one-cell reads that all need the slow DataNode
            read_cell(f, offsets[i % 4])
        stats = fs.stats()
        row = stats.per_datanode[slow]
        print(f"{slow} +3 s: {stats.counters['hedges']} hedges, {row['avoided']} avoided, {row['probes']} probes")
        assert fs.model.is_slow(slow) and row["slow"]
        assert stats.counters["hedges"] <= 4            # the first reads hedge (and teach the model) ...
        assert row["avoided"] >= 16 and row["avoided"] + stats.counters["hedges"] == 20   # ... then none waits
        assert stats.breaker_trips == 0

        acluster.datanode_rpc(slow, "ClearFaults", pb.FaultClearRequest())   # it recovers: probes must notice
        reads = 0

        def recovered():
            nonlocal reads
            if not fs.model.is_slow(slow):
                return True
            read_cell(f, offsets[reads % 4])
            reads += 1
            return False

        wait_until(recovered, 60, f"the model to notice {slow} recovered", interval=0)
        probes = fs.stats().per_datanode[slow]["probes"]
        before = fs.stats().per_datanode[slow]
        read_cell(f, offsets[0])
        after = fs.stats().per_datanode[slow]
    print(f"recovered after {reads} more reads, {probes} probes in all")
    assert probes >= 1   # it was asked while avoided (fast probes, or, on a loaded host, slowness forgotten at 10 s)
    assert after["avoided"] == before["avoided"] and after["unit_reads"] == before["unit_reads"] + 1


def test_cli_stats_count_reads_avoided_per_datanode(acluster, faults):
    with FileSystem(acluster.namenode) as fs:
        slow, _ = unit0(fs)
    faults(slow, read_delay_ms=3000)
    # 300 one-cell reads at random over 48 cells: about 25 need the slow DataNode (4 of the cells)
    result = run_cli("bench", "read", "/a/file", "--threads", "1", "--reads", "300", "--stats", "--seed", "3",
                     namenode=acluster.namenode)
    assert result.code == 0, result.stderr
    line = next(ln for ln in result.stderr.splitlines() if ln.strip().startswith(f"{slow}:"))
    print(line.strip())
    assert "avoided=" in line and int(line.split("avoided=")[1].split()[0]) >= 1, result.stderr
    assert "probes=" in line


def test_a_uniformly_slow_loaded_cluster_trips_no_breaker(acluster, faults):
    """Every DataNode 40 +- 20 ms slow and both cores busy: nobody is slower than its peers. The
    same load with a fixed 30 ms threshold (HubSpot's rule: impaired = crossed it) trips."""
    for dn in acluster.datanode_ids:
        faults(dn, read_delay_ms=40, jitter_ms=20)
    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(2)]
    try:
        with FileSystem(acluster.namenode, hedge=AUTO) as fs:
            run = run_read_bench(fs, "/a/file", threads=8, reads=400, seed=4)
            slow = fs.model.slow_datanodes()
        with FileSystem(acluster.namenode, hedge=HedgeConfig(threshold_ms=30)) as fs:
            fixed = run_read_bench(fs, "/a/file", threads=8, reads=100, seed=4)
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()
    s = run.summary()
    print(f"uniformly slow + 2 hogs: p50 {s['p50_ms']} ms, p99 {s['p99_ms']} ms, hedges {s['hedges']}, avoided "
          f"{s['avoided']}, trips {s['breaker_trips']}; fixed 30 ms: trips {fixed.summary()['breaker_trips']}")
    assert run.errors == 0 and s["reads"] == 400
    assert s["breaker_trips"] == 0 and not slow
    assert fixed.summary()["breaker_trips"] >= 1


def test_an_open_breaker_never_waits_on_a_frozen_datanode(acluster, faults):
    """The breaker is open (hedging off), and a DataNode freezes: a read that needs it is rebuilt
    once the DataNode has been silent for the silence threshold (1 s), not after 60 s."""
    with FileSystem(acluster.namenode, hedge=HedgeConfig(max_impaired_nodes=0)) as fs, fs.open("/a/file") as f:
        frozen, offsets = unit0(fs)
        other = fs.stat("/a/file").groups[0].units[1].datanode_id
        faults(other, read_delay_ms=3000)     # one slow DataNode is enough to trip (no impaired allowed)
        wait_until(lambda: read_cell(f, CELL) or fs.breaker.is_open, 60, "the breaker to open")
        acluster.freeze(frozen)
        started = time.monotonic()
        read_cell(f, offsets[1])
        waited = time.monotonic() - started
        stats = fs.stats()
    print(f"breaker open, {frozen} frozen: the read took {waited:.2f} s")
    assert stats.counters["hedges_refused_breaker"] >= 1
    assert stats.per_datanode[frozen]["avoided"] >= 1
    assert waited < 10.0


def test_late_binding_reads_k_plus_1_and_a_stalled_unit_costs_nothing(acluster, faults):
    """--read-extra 1: whole-stripe reads ask 7 units and decode from the first 6. With a fixed
    60 s threshold no hedge can help, yet reads around a stalled DataNode come back at once."""
    config = HedgeConfig(threshold_ms=60_000, read_extra=1)
    with FileSystem(acluster.namenode, hedge=config) as fs, fs.open("/a/file") as f:
        for s in range(STRIPES):
            assert f.pread(s * STRIPE, STRIPE) == DATA[s * STRIPE:(s + 1) * STRIPE]
        healthy = fs.stats().counters
        stalled, _ = unit0(fs)
        faults(stalled, stall=True)
        for s in range(4):                     # group 0: every stripe needs the stalled unit 0
            assert f.pread(s * STRIPE, STRIPE) == DATA[s * STRIPE:(s + 1) * STRIPE]
        c = fs.stats().counters
    assert healthy["unit_reads"] == healthy["unit_reads_needed"] + STRIPES == 7 * STRIPES
    assert c["hedges"] == 0 and c["rebuilt_on_failure"] == 0


def test_a_frozen_datanode_during_put_is_dropped_at_the_adaptive_deadline(tmp_path):
    """With 9 DataNodes every group needs the frozen one; each drops it as soon as its 8 peers
    are done with a step (well before the fixed 20 s), and the file is whole after a repair."""
    frozen = "dn5"
    # Frozen, but not dead; its block report after the thaw comes soon, and with it the repair (the
    # NameNode repairs onto it only once it has reported the dropped unit gone: it is the only one
    # of the 9 without a unit of each group).
    cluster = start_cluster(tmp_path / "c9", datanodes=9, dead_interval_s=60.0,
                            datanode_args={frozen: ["--block-report-interval-s", "1"]})
    try:
        data = pattern(3 * GROUP, seed=9)   # 3 block groups
        cluster.freeze(frozen)
        with FileSystem(cluster.namenode) as fs:
            started = time.monotonic()
            fs.write_bytes("/p.bin", data)
            took = time.monotonic() - started
            groups = fs.stat("/p.bin").groups
            cluster.thaw(frozen)
            assert all(frozen not in {u.datanode_id for u in g.units.values()} for g in groups)
            assert all(len(g.units) == 8 for g in groups)
            print(f"put of {len(data)} B with {frozen} frozen: {took:.2f} s for {len(groups)} groups")
            assert took < writer.WRITE_TIMEOUT_S
            wait_until(lambda: fs.admin.fsck("/").status == "HEALTHY", 60, "the repair")
            assert fs.read_bytes("/p.bin") == data
    finally:
        cluster.down()


def test_a_blocked_progress_callback_does_not_stall_the_put(acluster):
    """The progress bar's callback runs on the caller's thread: while it is stuck (a terminal
    nobody reads), the unit streams carry on and the file is complete before it returns."""
    data = pattern(4 * STRIPE + 7, seed=21)
    release, entered, seen = threading.Event(), threading.Event(), []

    def progress(n: int) -> None:
        seen.append(n)
        entered.set()
        release.wait(60)

    with FileSystem(acluster.namenode) as fs:
        put = threading.Thread(target=lambda: fs.write("/a/progress", io.BytesIO(data), progress=progress))
        put.start()
        assert entered.wait(60)
        wait_until(lambda: _complete(fs, "/a/progress", len(data)), 60, "the put to complete")
        assert put.is_alive() and len(seen) == 1    # the callback is still stuck in its first call
        release.set()
        put.join(60)
        assert not put.is_alive()
        assert sum(seen) == len(data) and fs.read_bytes("/a/progress") == data


def _complete(fs: FileSystem, path: str, length: int) -> bool:
    try:
        return fs.stat(path).length == length
    except Exception:  # noqa: BLE001 - not there yet
        return False
