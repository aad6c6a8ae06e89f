"""`hedgefs cluster up --ha`: 3 etcd members, 2 NameNodes on them, DataNodes reporting to both, a
client with both addresses (real processes, the launcher's). A user's session: write, kill the
active NameNode, write and read on, kill an etcd member, write on; every byte reads back.

It needs DataNodes and clients that take a list of NameNodes (the DataNode and client sides of
HA); without them it skips, saying so.
"""

import socket

import pytest

from etcd_support import ETCD, SKIP_REASON
from hedgefs.cluster.launcher import LocalCluster, Options

from conftest import fork_server, pattern, run_cli

pytest.importorskip("hedgefs.datanode.epochs", reason="DataNodes reporting to every NameNode are not in this tree")
pytestmark = pytest.mark.skipif(ETCD is None, reason=SKIP_REASON)


def _active(c: LocalCluster) -> str:
    report = run_cli("admin", "report", namenode=c.namenode)
    assert report.code == 0, report.stderr
    return report.stdout.decode().splitlines()[0]


def test_cluster_up_ha_survives_its_active_namenode_and_an_etcd_member(tmp_path):
    c = LocalCluster(tmp_path / "c", spawn=fork_server().spawn)
    c.up(Options(datanodes=3, namenode_port=0, policy="REPLICATE-3", block_size=262144, fsync=False, ha=True,
                 heartbeat_interval_s=0.5, dead_interval_s=10.0))
    try:
        assert len(c.namenode.split(",")) == 2 and len(c.etcd_names) == 3
        status = run_cli("cluster", "status", "--dir", str(c.root))
        assert all(name in status.stdout.decode() for name in ("etcd-3", "namenode-2", "dn3"))
        first, second = pattern(700_000, seed=1), pattern(500_000, seed=2)
        assert run_cli("put", "-", "/one.bin", namenode=c.namenode, input=first).code == 0
        assert "namenode: active" in _active(c)
        c.kill("namenode")          # the first one started, the active
        put = run_cli("put", "-", "/two.bin", namenode=c.namenode, input=second)
        assert put.code == 0, put.stderr
        assert run_cli("cat", "/one.bin", namenode=c.namenode).stdout == first
        c.start("namenode")         # back, as a standby of namenode-2; the etcd member killed next may
        # hand it the lease before the DataNodes have reported to it: reads are still served (a
        # standby sends a read it cannot locate to the active, a new active answers "retry" while
        # the reports it expects are due: namenode/blocks/expected.py)
        c.kill("etcd-1")
        put = run_cli("put", "-", "/three.bin", namenode=c.namenode, input=first)
        assert put.code == 0, put.stderr
        for path, data in (("/one.bin", first), ("/two.bin", second), ("/three.bin", first)):
            got = run_cli("cat", path, namenode=c.namenode)
            assert got.stdout == data, (path, got.code, got.stderr)
    finally:
        c.down()


def test_demo_ha_kills_the_active_mid_read_and_mid_write_and_loses_nothing(tmp_path):
    done = run_cli("demo", "--ha", "--size-mib", "1", "--dir", str(tmp_path / "demo"), timeout=300)
    out = done.stdout.decode()
    assert done.code == 0, out + done.stderr
    assert "kill -9 of the active NameNode, namenode," in out
    assert "the open file read on: 1 MiB, identical" in out
    assert "first write acknowledged by the new active" in out and "'namenode-2': 'active" in out
    told = int(out.split("the writer was told ")[1].split()[0])
    assert f": {told} read back exactly" in out and told > 3


def test_demo_ha_writer_that_gets_no_ack_or_stops_is_one_line_not_a_hang(tmp_path):
    """The demo waits for its writer's acknowledgements with a deadline, and notices a writer
    that stopped on an error (it used to loop forever in both cases)."""
    from hedgefs.cli.demo_ha import Writer
    from hedgefs.client.errors import HedgefsError
    from hedgefs.client.fs import FileSystem

    class Broken:   # not a clean HedgefsError: the thread dies
        def write_bytes(self, path, data):
            raise TypeError("a bug")

    dead = Writer(Broken())
    dead.start()
    with pytest.raises(HedgefsError) as err:
        dead.wait_acked(3, timeout_s=30)
    assert "writer stopped (TypeError: a bug)" in str(err.value) and "\n" not in str(err.value)

    with socket.socket() as s:   # a NameNode address nothing answers on: every write fails cleanly
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with FileSystem(f"127.0.0.1:{port}") as fs:
        stuck = Writer(fs)
        stuck.start()
        try:
            with pytest.raises(HedgefsError) as err:
                stuck.wait_acked(3, timeout_s=2)
            assert str(err.value).startswith("demo: 0 of 3 writes acknowledged within 2 s")
            assert "\n" not in str(err.value)
        finally:
            stuck.stop.set()
            stuck.join(30)
