"""etcd's own failures under the NameNodes: its leader killed under load, quorum lost and back.

A 3-member etcd cluster of this module's own (its members are killed here), two NameNodes. What
a user checks: every write acknowledged before, during and after is there at the end; a write
refused while etcd had no quorum is not there unless its caller could not be told (UNAVAILABLE:
the outcome of a timed-out transaction is unknown, so it may be); the NameNodes come back.
"""

import signal
import threading
import time

import grpc
import pytest

from etcd_support import etcd_cluster, prefix  # noqa: F401  (the fixture)
from ha_support import NameNodeProcess, active_of, ids, role, stat, stub
from hedgefs.namenode.journal import records
from hedgefs.namenode.journal.etcd import EtcdJournal
from hedgefs.namenode.journal.etcd_meta import EtcdMeta, MetaUnavailable, parse_meta_url
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


class Retrier(threading.Thread):
    """Mkdirs of paths of its own, each retried with its call id (the retry cache) until answered,
    as the client library does: what a user sees is an answer, or an error past the retries."""

    def __init__(self, address: str, tag: str):
        super().__init__(daemon=True)
        self.address, self.tag, self.acked, self.errors = address, tag, [], []
        self.stop = threading.Event()

    def run(self):
        s, i = stub(self.address), 0
        while not self.stop.is_set():
            path, call, i = f"/s/{self.tag}{i:05d}", ids(), i + 1
            deadline = time.monotonic() + 30
            while True:
                try:
                    s.Mkdir(pb.MkdirRequest(path=path), timeout=3, metadata=call)
                    self.acked.append(path)
                    break
                except grpc.RpcError as err:
                    retriable = err.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED,
                                               grpc.StatusCode.FAILED_PRECONDITION)
                    if not retriable or time.monotonic() > deadline:
                        self.errors.append((path, err.code().name, err.details()))
                        break
                    time.sleep(0.05)


def test_the_active_rides_out_the_etcd_leaders_death_and_applies_each_write_once(etcd_cluster, tmp_path):
    """The batch Txn the etcd election interrupts is settled (etcd_commit.py), not fail-stopped:
    the active keeps its epoch. A lease long enough that its renewals outlast the election on
    this loaded host: what is tested is the settling, not the TTL budget (bench failover's)."""
    name = prefix("settle")
    nn = NameNodeProcess(tmp_path, "nn1", etcd_cluster.url(name), lease_ttl_s=10).start()
    try:
        active_of([nn])
        stub(nn.address).Mkdir(pb.MkdirRequest(path="/s"), timeout=5, metadata=ids())
        epoch = stub(nn.address).Report(pb.Empty(), timeout=5).namenode.epoch
        writers = [Retrier(nn.address, f"w{k}-") for k in range(4)]
        for w in writers:
            w.start()
        wait_until(lambda: sum(len(w.acked) for w in writers) >= 40, 30, "writes before the fault")
        leader = etcd_cluster.leader()
        etcd_cluster.kill(leader)
        count = sum(len(w.acked) for w in writers)
        try:
            wait_until(lambda: sum(len(w.acked) for w in writers) >= count + 40, 40,
                       "writes after the etcd leader died")
        finally:
            for w in writers:
                w.stop.set()
            for w in writers:
                w.join(40)
            etcd_cluster.start_member(leader, state="existing")
        assert [e for w in writers for e in w.errors] == []
        assert stub(nn.address).Report(pb.Empty(), timeout=5).namenode.epoch == epoch, nn.tail()
        acked = [p for w in writers for p in w.acked]
        page = stub(nn.address).List(pb.ListRequest(path="/s", limit=10000), timeout=10)
        listed = [e.path for e in page.entries]
        assert not page.more and sorted(listed) == sorted(acked) and len(set(acked)) == len(acked)
        # the journal on etcd holds each write once: one Mkdir record per path, txids one after another
        etcd_cluster.wait_healthy()
        meta = EtcdMeta(parse_meta_url(etcd_cluster.url(name)))
        try:
            _, batches = meta.range("j/")
            made, txids = [], []
            for rel, value in batches:
                first, _last, data = EtcdJournal.parse(rel, value)
                for txid, record in records.frames(data, first):
                    txids.append(txid)
                    if isinstance(record, records.Mkdir) and record.path.startswith("/s/"):
                        made.append(record.path)
        finally:
            meta.close()
        assert sorted(made) == sorted(acked)
        assert txids == list(range(txids[0], txids[0] + len(txids)))
    finally:
        nn.stop()


def test_a_lease_renewal_only_an_etcd_leader_cut_off_from_its_quorum_saw_does_not_count(etcd_cluster):
    """etcd 3.4 renews a lease on its leader's word alone: a leader whose followers are gone (or
    one frozen and back before it hears of the next term) acknowledges a renewal the cluster never
    saw, while the others let the lease expire and elect another active (chaos seed 4747002
    --ha). A NameNode must not take such a renewal as more time to serve."""
    leader = etcd_cluster.leader()
    alone = parse_meta_url(f"etcd://127.0.0.1:{etcd_cluster.client_ports[leader]}/{prefix('renew')}")
    meta = EtcdMeta(alone)
    followers = [n for n in etcd_cluster.names if n != leader]
    lease = meta.grant(10)
    assert meta.keepalive(lease, timeout_s=2.0) > 0   # with its quorum: the renewal counts
    try:
        for name in followers:
            etcd_cluster.kill(name, signal.SIGSTOP)
        # within the election timeout (1 s) the leader still leads in its own eyes and renews
        with pytest.raises(MetaUnavailable):
            meta.keepalive(lease, timeout_s=1.0)
    finally:
        for name in followers:
            etcd_cluster.kill(name, signal.SIGCONT)
        meta.close()
    etcd_cluster.wait_healthy()
