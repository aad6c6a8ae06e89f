"""A new client is not blind (real processes): the DataNodes' own read latencies, which they send
the NameNode in heartbeats, come with a file's locations, and a client with no reads of its own
to a DataNode starts from them.

- A healthy cluster's figures mark nobody slow: a fresh client's whole-file read avoids nobody.
- A DataNode slowed before the client starts (another client's reads of it were hedged and
  cancelled, so its own figures show them slow) is read around on the client's first read:
  counted, never timed: its reads are avoided, none of them goes overdue, nothing is hedged, in
  process and by a fresh ``hedgefs cat``.
- A DataNode frozen before the client starts (its process stopped: no figures, no heartbeats)
  is read around on the client's first read too: the NameNode says how long it has not heard it.
"""

import pytest

from conftest import CELL, STRIPE, pattern, run_cli, start_cluster, wait_until
from dn_support import faults_fixture
from hedgefs.client.cluster_view import slow_by_view
from hedgefs.client.config import HedgeConfig
from hedgefs.client.fs import FileSystem

STRIPES = 8
DATA = pattern(STRIPES * STRIPE, seed=25)
NEVER_BY_TIME = HedgeConfig(threshold_ms=60_000)


@pytest.fixture(scope="module")
def vcluster(tmp_path_factory):
    c = start_cluster(tmp_path_factory.mktemp("view"), dead_interval_s=30.0)   # a frozen DataNode stays in the locations
    with FileSystem(c.namenode) as fs:
        fs.mkdir("/v", parents=True)
        fs.write_bytes("/v/file", DATA)
    yield c
    c.down()


faults = faults_fixture("vcluster")


def view(cluster) -> dict:
    with FileSystem(cluster.namenode, hedge=NEVER_BY_TIME) as fs:
        return fs.stat("/v/file").datanode_reads


def test_a_healthy_clusters_view_marks_nobody_slow(vcluster):
    with FileSystem(vcluster.namenode, hedge=NEVER_BY_TIME) as fs:
        for _ in range(3):                       # every DataNode serves reads: figures to hand out
            assert fs.read_bytes("/v/file") == DATA
    wait_until(lambda: len(view(vcluster)) >= 6, 20, "the DataNodes' read figures to reach the NameNode")
    assert slow_by_view(view(vcluster)) == {}
    with FileSystem(vcluster.namenode) as fs, fs.open("/v/file") as f:
        assert fs.model.slow_datanodes() == frozenset()
        assert f.pread(0, len(DATA)) == DATA
        c = fs.stats().counters
    assert c["avoided"] == 0 and c["probes"] == 0


def test_a_datanode_slowed_before_the_client_starts_is_read_around_on_its_first_read(vcluster, faults):
    with FileSystem(vcluster.namenode) as fs:
        slow = fs.stat("/v/file").groups[0].units[0].datanode_id
    faults(slow, read_delay_ms=3000)
    # Another client reads it first: each read of it is hedged at 100 ms and the loser cancelled,
    # which the DataNode counts as a read that long (its figures go out in its next heartbeat);
    # more of them than the healthy reads of the test before, so its median of the last 60 s is slow.
    with FileSystem(vcluster.namenode, hedge=HedgeConfig(threshold_ms=100)) as other, other.open("/v/file") as f:
        for s in range(24):
            offset = (s % 4) * STRIPE            # unit 0's cells of group 0
            assert f.pread(offset, CELL) == DATA[offset:offset + CELL]
    wait_until(lambda: set(slow_by_view(view(vcluster))) == {slow}, 20,
               f"the NameNode's view to show {slow} slow")

    with FileSystem(vcluster.namenode) as fs, fs.open("/v/file") as f:
        assert fs.model.slow_datanodes() == {slow}    # before its first read
        assert f.pread(0, CELL) == DATA[:CELL]        # unit 0's first cell: read around
        stats = fs.stats()
    row, c = stats.per_datanode[slow], stats.counters
    print(f"fresh client, {slow} +3 s: avoided={row['avoided']} overdue={row['overdue']} hedges={c['hedges']}")
    assert row["avoided"] == 1 and row["overdue"] == 0 and c["hedges"] == 0

    result = run_cli("cat", "--stats", "/v/file", namenode=vcluster.namenode)    # a fresh process
    assert result.code == 0, result.stderr
    assert result.stdout == DATA
    line = next(ln for ln in result.stderr.splitlines() if ln.strip().startswith(f"{slow}:"))
    print(line.strip())
    assert "overdue=0" in line and "SLOW" in line and int(line.split("avoided=")[1].split()[0]) >= 1, line


def test_a_datanode_frozen_before_the_client_starts_is_read_around_on_its_first_read(vcluster, faults):
    with FileSystem(vcluster.namenode) as fs:
        frozen = fs.stat("/v/file").groups[0].units[1].datanode_id
    vcluster.freeze(frozen)   # SIGSTOP (thawed by the faults fixture)
    wait_until(lambda: frozen in slow_by_view(view(vcluster)), 30,
               f"the NameNode's view to show {frozen} unheard for 3 s")
    with FileSystem(vcluster.namenode) as fs, fs.open("/v/file") as f:
        assert frozen in fs.model.slow_datanodes()        # before its first read
        assert f.pread(CELL, CELL) == DATA[CELL:2 * CELL]   # unit 1's first cell: read around
        stats = fs.stats()
    row, c = stats.per_datanode[frozen], stats.counters
    print(f"fresh client, {frozen} frozen: avoided={row['avoided']} overdue={row['overdue']} hedges={c['hedges']}")
    assert row["avoided"] == 1 and row["overdue"] == 0 and c["hedges"] == 0
