"""The client and DataNode sides of HA against the real thing: two NameNodes on a real 3-member
etcd cluster (``hedgefs namenode --meta etcd://...``), DataNodes reporting to both, a client with
both addresses, and a kill -9 of the active.

It needs the HA NameNode (namenode/ha.py) and its test helpers (tests/etcd_support.py,
tests/ha_support.py) from the NameNode side's branch, and etcd: without them it skips, with
one line saying so.
"""

import os
import subprocess
import sys

import pytest

from conftest import pattern, run_cli, wait_until

pytest.importorskip("hedgefs.namenode.ha", reason="the HA NameNode (metadata on etcd) is not in this tree")
etcd_support = pytest.importorskip("etcd_support", reason="tests/etcd_support.py (the HA NameNode's) is not here")
ha_support = pytest.importorskip("ha_support", reason="tests/ha_support.py (the HA NameNode's) is not here")

from etcd_support import etcd_cluster, prefix  # noqa: E402,F401  (the fixture)
from ha_support import NameNodeProcess, active_of, role  # noqa: E402
from hedgefs.client.fs import FileSystem  # noqa: E402
from hedgefs.datanode.epochs import EPOCH_FILE  # noqa: E402
from hedgefs.plumbing import read_port_file  # noqa: E402

BEFORE, AFTER = pattern(600_000, seed=61), pattern(400_000, seed=62)
NN_ARGS = ("--default-policy", "REPLICATE-3", "--block-size", "262144")


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


def epochs(root, names) -> list[int]:
    out = []
    for name in names:
        try:
            out.append(int((root / name / EPOCH_FILE).read_text()))
        except (FileNotFoundError, ValueError):
            out.append(0)
    return out


def test_clients_and_datanodes_ride_through_a_kill_9_of_the_active(etcd_cluster, tmp_path):
    url = etcd_cluster.url(prefix("edge"))
    a = NameNodeProcess(tmp_path, "nn1", url, *NN_ARGS).start()
    active_of([a])
    b = NameNodeProcess(tmp_path, "nn2", url, *NN_ARGS).start()
    wait_until(lambda: role(b.address) == f"standby:{a.address}", 15, "nn2 to be a standby naming nn1")
    nodes = f"{b.address},{a.address}"   # the standby first: a client must not pin to the first entry
    names = ["dn1", "dn2", "dn3"]
    dns = [start_datanode(tmp_path, name, nodes) for name in names]
    try:
        wait_until(lambda: min(epochs(tmp_path, names)) > 0, 30, "every DataNode to record nn1's epoch")
        first = epochs(tmp_path, names)[0]
        with FileSystem(nodes) as fs:
            fs.write_bytes("/before", BEFORE)
            assert fs.namenodes.active == a.address
            with fs.open("/before") as f:
                a.kill()
                assert f.pread(0, len(BEFORE)) == BEFORE   # the DataNodes alone, mid-failover
            fs.write_bytes("/after", AFTER)                # once nn2 is the active, within the deadline
            assert fs.namenodes.active == b.address
            assert fs.read_bytes("/before") == BEFORE and fs.read_bytes("/after") == AFTER
        wait_until(lambda: min(epochs(tmp_path, names)) > first, 30, "every DataNode to record nn2's epoch")
        cat = run_cli("cat", "/after", namenode=f"{a.address},{b.address}")   # the dead one first
        assert cat.code == 0 and cat.stdout == AFTER, cat.stderr
        a.start(port=a.port)   # back, as a standby: a client with it first still gets to nn2
        wait_until(lambda: role(a.address) == f"standby:{b.address}", 30, "nn1 to be a standby naming nn2")
        put = run_cli("put", "-", "/again", namenode=f"{a.address},{b.address}", input=AFTER)
        assert put.code == 0, put.stderr
    finally:
        for proc in dns:
            proc.terminate()
        for proc in dns:
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()
        for n in (a, b):
            n.stop()
    logs = "".join((tmp_path / f"{n}.log").read_text() for n in names)
    assert "Traceback" not in logs, logs[-3000:]
    assert os.path.exists(tmp_path / "dn1" / EPOCH_FILE)
