"""The client and DataNode sides of HA against the real thing: two NameNodes on a real 3-member
etcd cluster (``hedgefs namenode --meta etcd://...``), DataNodes reporting to both, a client with
both addresses, and a kill -9 of the active.

It needs the HA NameNode (namenode/ha.py) and its test helpers (tests/etcd_support.py,
tests/ha_support.py) from the NameNode side's branch, and etcd: without them it skips, with
one line saying so.
"""

import subprocess
import sys
import threading

import pytest

from conftest import PausingSource, pattern, run_cli, wait_until

pytest.importorskip("hedgefs.namenode.ha", reason="the HA NameNode (metadata on etcd) is not in this tree")
etcd_support = pytest.importorskip("etcd_support", reason="tests/etcd_support.py (the HA NameNode's) is not here")
ha_support = pytest.importorskip("ha_support", reason="tests/ha_support.py (the HA NameNode's) is not here")

from etcd_support import etcd_cluster, prefix  # noqa: E402,F401  (the fixture)
from ha_support import NameNodeProcess, active_of, epochs, role, stub  # noqa: E402
from hedgefs.client.fs import FileSystem  # noqa: E402
from hedgefs.plumbing import read_port_file  # noqa: E402
from hedgefs.proto import hedgefs_pb2 as pb  # noqa: E402

BEFORE, AFTER = pattern(600_000, seed=61), pattern(400_000, seed=62)
BLOCK = 262144
NN_ARGS = ("--default-policy", "REPLICATE-3", "--block-size", str(BLOCK))


def start_datanode(root, name: str, namenodes: str) -> subprocess.Popen:
    port_file = root / f"{name}.port"
    log = open(root / f"{name}.log", "ab")
    proc = subprocess.Popen([sys.executable, "-m", "hedgefs", "datanode", "--id", name, "--port", "0",
                             "--data-dir", str(root / name), "--namenode", namenodes, "--heartbeat-interval-s", "0.3",
                             "--no-fsync", "--port-file", str(port_file)],
                            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    log.close()
    wait_until(lambda: port_file.exists() or proc.poll() is not None, 30, f"{name} to serve")
    assert proc.poll() is None, (root / f"{name}.log").read_text()[-2000:]
    read_port_file(str(port_file))
    return proc


def serving(nn, datanodes: int, *paths: str) -> bool:
    """Is ``nn`` the active, with ``datanodes`` live and every unit of ``paths`` located? A new
    active learns the DataNodes and their units from their registrations and reports to it as the
    active (the NameNode side's business: until then, ~0.1 s here, it answers a write "only 0 are
    live" and a stat with no locations), so the tests wait for that before a write or a new open."""
    try:
        s = stub(nn.address)
        report = s.Report(pb.Empty(), timeout=2)
        if sum(d.state == "live" for d in report.datanodes) < datanodes:
            return False
        return all(g.units for path in paths for g in s.GetFileInfo(pb.PathRequest(path=path), timeout=2).groups)
    except Exception:
        return False


@pytest.fixture
def ha(etcd_cluster, tmp_path):
    """nn1 (the active) and nn2 (its standby) on a prefix of their own, three DataNodes reporting to both."""
    url = etcd_cluster.url(prefix("edge"))
    a = NameNodeProcess(tmp_path, "nn1", url, *NN_ARGS).start()
    dns = []
    try:
        active_of([a])
        b = NameNodeProcess(tmp_path, "nn2", url, *NN_ARGS).start()
        try:
            wait_until(lambda: role(b.address) == f"standby:{a.address}", 15, "nn2 to be a standby naming nn1")
            names = ["dn1", "dn2", "dn3"]
            for name in names:
                dns.append(start_datanode(tmp_path, name, f"{b.address},{a.address}"))
            wait_until(lambda: min(epochs(tmp_path, names)) > 0, 30, "every DataNode to record nn1's epoch")
            yield a, b, tmp_path, names
        finally:
            for proc in dns:
                proc.terminate()
            for proc in dns:
                try:
                    proc.wait(15)
                except subprocess.TimeoutExpired:
                    proc.kill()
            b.stop()
    finally:
        a.stop()
    logs = "".join((tmp_path / f"{n}.log").read_text() for n in ("dn1", "dn2", "dn3"))
    assert "Traceback" not in logs, logs[-3000:]


def test_clients_and_datanodes_ride_through_a_kill_9_of_the_active(ha):
    a, b, root, names = ha
    first = epochs(root, names)[0]
    nodes = f"{b.address},{a.address}"   # the standby first: a client must not pin to the first entry
    with FileSystem(nodes) as fs:
        fs.write_bytes("/before", BEFORE)
        assert fs.namenodes.active == a.address
        with fs.open("/before") as f:
            a.kill()
            assert f.pread(0, len(BEFORE)) == BEFORE   # the DataNodes alone, mid-failover
        wait_until(lambda: min(epochs(root, names)) > first and serving(b, 3, "/before"), 30,
                   "nn2 to be the active, every DataNode registered with it (its epoch recorded)")
        assert fs.read_bytes("/before") == BEFORE      # the client's first call after the kill: to nn1, then nn2
        fs.write_bytes("/after", AFTER)
        assert fs.namenodes.active == b.address
        assert fs.read_bytes("/after") == AFTER
    cat = run_cli("cat", "/after", namenode=f"{a.address},{b.address}")   # the dead one first
    assert cat.code == 0 and cat.stdout == AFTER, cat.stderr
    a.start(port=a.port)   # back, as a standby: a client with it first still gets to nn2
    wait_until(lambda: role(a.address) == f"standby:{b.address}", 30, "nn1 to be a standby naming nn2")
    put = run_cli("put", "-", "/again", namenode=f"{a.address},{b.address}", input=AFTER)
    assert put.code == 0, put.stderr


def test_a_write_in_flight_when_the_active_dies_completes_on_the_new_one(ha):
    a, b, root, names = ha
    first = epochs(root, names)[0]
    data = pattern(3 * BLOCK + 1000, seed=63)      # four blocks (REPLICATE-3): more groups to add after the kill
    source = PausingSource(data, pause_at=BLOCK + 5)
    outcome: dict = {}

    def put():
        try:
            outcome["written"] = fs.write("/inflight", source)
        except Exception as err:   # reported below
            outcome["error"] = err

    with FileSystem(f"{a.address},{b.address}") as fs:
        writer = threading.Thread(target=put)
        writer.start()
        assert source.reached.wait(30)
        a.kill()                                   # the write holds open streams of its second block
        wait_until(lambda: min(epochs(root, names)) > first and serving(b, 3), 30,
                   "nn2 to be the active, every DataNode registered with it (its epoch recorded)")
        source.go.set()                            # its next AddBlockGroup and its Complete: nn1, then nn2
        writer.join(90)
        assert outcome.get("written") == len(data), outcome
        assert fs.namenodes.active == b.address
        assert fs.read_bytes("/inflight") == data
        assert [s.path for s in fs.list("/")] == ["/inflight"]   # exactly one file
