"""The data plane end to end (real processes): end-to-end checksums, the stream cap, pooling.

- A DataNode whose link flips a byte of every read it sends (the wire-corrupt knob: after its
  storage, where the DataNode could not notice) costs no wrong byte: the reader's checksums catch
  each one, the cell is rebuilt, the failures are counted, and the DataNode, asked to check its
  copy, finds it intact, so no healthy unit is dropped.
- 200 reads at once of one DataNode that serves at most 16 streams all return exact bytes: the
  ones it turns away (BUSY) are rebuilt from other units.
- Reads reuse pooled connections: many reads, few connections.

Timing decides nothing here: the hedge threshold is one no read reaches, counts are asserted.
"""

import concurrent.futures

import pytest

from conftest import CELL, STRIPE, pattern, run_cli, start_cluster
from hedgefs.client.config import HedgeConfig
from hedgefs.client.fs import FileSystem
from hedgefs.proto import hedgefs_pb2 as pb

NEVER_BY_TIME = HedgeConfig(threshold_ms=60_000)


def fault_state(cluster, dn: str) -> pb.FaultState:
    return cluster.datanode_rpc(dn, "GetFaults", pb.FaultClearRequest())


def holder(fs: FileSystem, path: str, index: int) -> str:
    return fs.stat(path).groups[0].units[index].datanode_id


def test_wire_corruption_on_every_read_of_one_datanode_is_caught_and_the_cat_is_exact(cluster):
    data = pattern(2 * STRIPE, seed=31)
    with FileSystem(cluster.namenode) as fs:
        fs.mkdir("/plane", parents=True)
        fs.write_bytes("/plane/wire", data, overwrite=True)
        dn = holder(fs, "/plane/wire", 0)
    cluster.datanode_rpc(dn, "SetFaults", pb.FaultConfig(wire_corrupt_probability=1.0))
    try:
        before = fault_state(cluster, dn)
        result = run_cli("cat", "--stats", "--hedge-threshold-ms", "60000", "/plane/wire", namenode=cluster.namenode)
        after = fault_state(cluster, dn)
    finally:
        cluster.datanode_rpc(dn, "ClearFaults", pb.FaultClearRequest())
    assert result.code == 0, result.stderr
    assert result.stdout == data
    assert "checksum_failures=1\n" in result.stderr, result.stderr   # one read of unit 0: both stripes
    assert "rebuilt_on_failure=1 " in result.stderr, result.stderr
    assert after.calls["fault:wire-corrupt"] == before.calls["fault:wire-corrupt"] + 1
    # The reader had the DataNode check its copy: intact, so the unit stays where it is.
    assert after.calls["VerifyUnit"] == before.calls.get("VerifyUnit", 0) + 1
    with FileSystem(cluster.namenode, hedge=NEVER_BY_TIME) as fs:
        assert holder(fs, "/plane/wire", 0) == dn
        assert fs.read_bytes("/plane/wire") == data
        assert fs.stats().counters["checksum_failures"] == 0


def test_reads_reuse_pooled_connections(cluster):
    data = pattern(STRIPE, seed=32)
    with FileSystem(cluster.namenode) as fs:
        fs.write_bytes("/plane/pooled", data, overwrite=True)
        dn = holder(fs, "/plane/pooled", 0)
    before = fault_state(cluster, dn)
    with FileSystem(cluster.namenode, hedge=NEVER_BY_TIME) as fs:
        with fs.open("/plane/pooled") as f:
            for _ in range(50):
                assert f.pread(0, CELL) == data[:CELL]
    after = fault_state(cluster, dn)
    assert after.calls["ReadUnit"] - before.calls["ReadUnit"] == 50
    assert after.calls["connections"] - before.calls.get("connections", 0) == 1


@pytest.fixture
def busy_cluster(tmp_path):
    # A slow restart of the busy DataNode (a loaded host) must not outlive the dead interval: its
    # unit would be rebuilt elsewhere and the burst would never reach it.
    c = start_cluster(tmp_path / "cluster", dead_interval_s=60.0)
    yield c
    c.down()


def test_200_concurrent_reads_of_a_datanode_with_max_streams_16_all_succeed(busy_cluster):
    data = pattern(STRIPE, seed=33)
    with FileSystem(busy_cluster.namenode) as fs:
        fs.write_bytes("/busy", data)
        dn = holder(fs, "/busy", 0)
    busy_cluster.state["options"]["datanode_args"] = {dn: ["--max-streams", "16"]}
    busy_cluster.restart(dn)
    # Each read holds a stream for 1.5 s, so a burst finds every one of the 16 taken (300 ms was
    # too short on a loaded host: its 200 reads trickled in and never found all 16 busy).
    busy_cluster.datanode_rpc(dn, "SetFaults", pb.FaultConfig(read_delay_ms=1500))
    with FileSystem(busy_cluster.namenode) as fs:
        assert holder(fs, "/busy", 0) == dn
    with FileSystem(busy_cluster.namenode, hedge=NEVER_BY_TIME) as fs, fs.open("/busy") as f:
        with concurrent.futures.ThreadPoolExecutor(200) as pool:
            results = list(pool.map(lambda _: f.pread(0, CELL), range(200)))
        stats = fs.stats()
    assert all(r == data[:CELL] for r in results)
    state = fault_state(busy_cluster, dn)
    assert state.calls["busy"] >= 1, (state.calls, stats.counters)
    c = stats.counters
    assert c["reads"] == 200 and c["hedges"] == 0
    assert 1 <= c["rebuilt_on_failure"] <= 200 - 16, c   # the turned-away reads were rebuilt
    print(f"200 reads of {dn} (--max-streams 16): {state.calls['busy']} BUSY answers, "
          f"{c['rebuilt_on_failure']} rebuilt")
