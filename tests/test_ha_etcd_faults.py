"""etcd's own failures under the NameNodes: its leader killed under load, quorum lost and back.

A 3-member etcd cluster of this module's own (its members are killed here), two NameNodes. What
a user checks: every write acknowledged before, during and after is there at the end; a write
refused while etcd had no quorum is not there unless its caller could not be told (UNAVAILABLE:
the outcome of a timed-out transaction is unknown, so it may be); the NameNodes come back.
"""

import threading
import time

import grpc
import pytest

from etcd_support import etcd_cluster, prefix  # noqa: F401  (the fixture)
from ha_support import NameNodeProcess, active_of, ids, role, stat, stub
from hedgefs.proto import hedgefs_pb2 as pb

from conftest import wait_until


class Writer(threading.Thread):
    """Mkdirs one after another, against whichever NameNode is the active (a crude client)."""

    def __init__(self, nodes):
        super().__init__(daemon=True)
        self.nodes, self.acked, self.failed, self.unknown = nodes, [], [], []
        self.stop = threading.Event()

    def run(self):
        i = 0
        while not self.stop.is_set():
            path = f"/w/{i:05d}"
            i += 1
            for n in self.nodes:
                try:
                    stub(n.address).Mkdir(pb.MkdirRequest(path=path, parents=True), timeout=3, metadata=ids())
                    self.acked.append(path)
                    break
                except grpc.RpcError as err:
                    if err.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
                        self.unknown.append(path)   # maybe committed: nobody was told either way
                        break
            else:
                self.failed.append(path)
                time.sleep(0.05)


@pytest.fixture
def pair(etcd_cluster, tmp_path):
    url = etcd_cluster.url(prefix("faults"))
    nodes = [NameNodeProcess(tmp_path, "nn1", url).start()]
    active_of(nodes)
    nodes.append(NameNodeProcess(tmp_path, "nn2", url).start())
    yield nodes
    for n in nodes:
        n.stop()


def _check(nodes, writer):
    active = active_of(nodes, timeout=30)
    listed = {e.path for e in stub(active.address).List(pb.ListRequest(path="/w"), timeout=10).entries}
    assert set(writer.acked) <= listed, sorted(set(writer.acked) - listed)[:5]
    assert not (set(writer.failed) & listed), sorted(set(writer.failed) & listed)[:5]   # refused = not done
    return active


def test_killing_the_etcd_leader_under_load_loses_no_acknowledged_write(pair, etcd_cluster):
    writer = Writer(pair)
    writer.start()
    wait_until(lambda: len(writer.acked) >= 20, 30, "writes before the fault")
    leader = etcd_cluster.leader()
    etcd_cluster.kill(leader)
    count = len(writer.acked)
    try:
        wait_until(lambda: len(writer.acked) >= count + 20, 40, "writes after the etcd leader died")
    finally:
        writer.stop.set()
        writer.join(10)
        etcd_cluster.start_member(leader, state="existing")
    _check(pair, writer)
    etcd_cluster.wait_healthy()


def test_quorum_lost_refuses_writes_and_quorum_back_recovers(pair, etcd_cluster):
    a = active_of(pair)
    stub(a.address).Mkdir(pb.MkdirRequest(path="/w/before", parents=True), timeout=5, metadata=ids())
    down = [n for n in etcd_cluster.names if n != etcd_cluster.leader()][:1] + [etcd_cluster.leader()]
    for name in down:
        etcd_cluster.kill(name)
    try:
        # no quorum: within a lease no NameNode is active any more, and writes are refused
        wait_until(lambda: all(role(n.address) != "active" for n in pair), 20, "no active without quorum")
        with pytest.raises(grpc.RpcError):
            stub(a.address).Mkdir(pb.MkdirRequest(path="/w/during", parents=True), timeout=5, metadata=ids())
    finally:
        for name in down:
            etcd_cluster.start_member(name, state="existing")
    etcd_cluster.wait_healthy()
    active = active_of(pair, timeout=40)
    stub(active.address).Mkdir(pb.MkdirRequest(path="/w/after", parents=True), timeout=5, metadata=ids())
    assert stat(active.address, "/w/before").is_dir
    with pytest.raises(grpc.RpcError) as gone:
        stat(active.address, "/w/during")
    assert gone.value.code() == grpc.StatusCode.NOT_FOUND
