"""Active and standby NameNodes on one etcd prefix: real processes, a real 3-member etcd cluster.

One etcd cluster for the module; each test its own prefix and NameNodes. The client's failover
is not used (it is the client's own work): each NameNode is called directly with a raw stub, so
what a standby answers (the redirect, observer reads) is asserted as such.
"""

import json
import os
import signal
import subprocess
import threading
import time

import grpc
import pytest

from etcd_support import ETCDCTL, etcd_cluster, prefix  # noqa: F401  (the fixture)
from ha_support import DataNodeProcess, NameNodeProcess, active_of, ids, mkdirs, not_active, role, stat, stub, wait_exists
from hedgefs.proto import hedgefs_pb2 as pb

from conftest import assert_one_line_error, pattern, run_cli, wait_until

FAILOVER_S = 20.0   # a bound, not a measure: the TTL is 3 s (bench/ measures failovers)


@pytest.fixture
def pair(etcd_cluster, tmp_path):
    url = etcd_cluster.url(prefix("pair"))
    a = NameNodeProcess(tmp_path, "nn1", url).start()
    active_of([a])
    b = NameNodeProcess(tmp_path, "nn2", url).start()
    wait_until(lambda: role(b.address) == f"standby:{a.address}", 15, "nn2 to be a standby naming nn1")
    yield a, b
    for n in (a, b):
        n.stop()


def test_standby_redirects_serves_observer_reads_and_takes_no_datanode_commands(pair):
    a, b = pair
    mkdirs(a.address, ["/data/2026", "/logs"])
    wait_exists(b.address, "/logs")               # observer read: the standby's view follows etcd (the last write)
    listed = stub(b.address).List(pb.ListRequest(path="/"), timeout=5)
    assert {e.path for e in listed.entries} == {"/data", "/logs"}
    # a client that has seen no revision yet (a new process: hedgefs-rev -1) is sent to the active,
    # so it reads what other processes wrote before it started (HDFS's msync)
    with pytest.raises(grpc.RpcError) as fresh:
        stub(b.address).GetFileInfo(pb.PathRequest(path="/logs"), timeout=5, metadata=(("hedgefs-rev", "-1"),))
    assert not_active(fresh.value) == a.address
    with pytest.raises(grpc.RpcError) as refused:
        stub(b.address).Mkdir(pb.MkdirRequest(path="/nope"), timeout=5, metadata=ids())
    assert not_active(refused.value) == a.address
    assert "not the active" in refused.value.details()
    with pytest.raises(grpc.RpcError) as missing:
        stat(a.address, "/nope")
    assert missing.value.code() == grpc.StatusCode.NOT_FOUND

    # DataNodes report to both: the active says so and its epoch; the standby, active=false, no commands
    reg = pb.RegisterRequest(datanode_id="dn1", address="127.0.0.1:1", data_address="127.0.0.1:2")
    on_active = stub(a.address).RegisterDataNode(reg, timeout=5)
    on_standby = stub(b.address).RegisterDataNode(reg, timeout=5)
    assert on_active.active and on_active.epoch > 0
    assert not on_standby.active and on_standby.cluster_id == on_active.cluster_id
    hb = stub(b.address).Heartbeat(pb.HeartbeatRequest(datanode_id="dn1", address="127.0.0.1:1"), timeout=5)
    assert not hb.active and not hb.commands
    hb = stub(a.address).Heartbeat(pb.HeartbeatRequest(datanode_id="dn1", address="127.0.0.1:1"), timeout=5)
    assert hb.active and hb.epoch == on_active.epoch

    # the operator's view: which NameNode answered, and what it is
    report = run_cli("admin", "report", namenode=b.address)
    assert report.code == 0, report.stderr
    assert f"namenode: standby (view at etcd revision" in report.stdout.decode()
    assert f"the active is {a.address}" in report.stdout.decode()
    report = run_cli("admin", "report", "--json", namenode=a.address)
    assert json.loads(report.stdout)["namenode"]["epoch"] == on_active.epoch


def test_kill_9_of_the_active_loses_nothing_acknowledged(pair, etcd_cluster):
    a, b = pair
    done = mkdirs(a.address, [f"/k/{i:03d}" for i in range(30)])
    epoch_a = stub(a.address).RegisterDataNode(pb.RegisterRequest(datanode_id="dn1", address="x:1"), timeout=5).epoch
    a.kill()
    start = time.monotonic()
    active_of([b], timeout=FAILOVER_S)
    took = time.monotonic() - start
    for path in done:
        assert stat(b.address, path).is_dir, path
    mkdirs(b.address, ["/after"])
    epoch_b = stub(b.address).RegisterDataNode(pb.RegisterRequest(datanode_id="dn1", address="x:1"), timeout=5).epoch
    assert epoch_b > epoch_a
    # the old active comes back as a standby of the new one
    a.start()
    wait_until(lambda: role(a.address) == f"standby:{b.address}", 15, "nn1 to come back as a standby")
    wait_exists(a.address, "/after")
    print(f"failover after kill -9: {took:.1f} s")


def test_frozen_active_commits_nothing_after_its_lease_and_comes_back_standby(pair):
    a, b = pair
    mkdirs(a.address, ["/before"])
    a.freeze()
    try:
        # a call that reaches the frozen active: it runs only once the process thaws, past its lease
        late = stub(a.address).Mkdir.future(pb.MkdirRequest(path="/from-the-zombie"), timeout=60, metadata=ids())
        active_of([b], timeout=FAILOVER_S)
        mkdirs(b.address, ["/on-the-new-active"])
    finally:
        a.thaw()
    with pytest.raises(grpc.RpcError) as refused:
        late.result()
    assert refused.value.code() in (grpc.StatusCode.FAILED_PRECONDITION, grpc.StatusCode.INTERNAL,
                                    grpc.StatusCode.UNAVAILABLE), refused.value
    wait_until(lambda: role(a.address) == f"standby:{b.address}", 20, "the thawed NameNode to be a standby")
    with pytest.raises(grpc.RpcError) as gone:
        stat(b.address, "/from-the-zombie")
    assert gone.value.code() == grpc.StatusCode.NOT_FOUND
    assert stat(a.address, "/on-the-new-active").is_dir   # its view is the new active's
    assert a.proc.poll() is None


def test_admin_failover_hands_over_at_once_and_loses_nothing(pair):
    a, b = pair
    done = mkdirs(a.address, [f"/h/{i}" for i in range(5)])
    with pytest.raises(grpc.RpcError) as refused:   # a standby has nothing to hand over: it names the active
        stub(b.address).Failover(pb.Empty(), timeout=5)
    assert not_active(refused.value) == a.address
    start = time.monotonic()
    result = run_cli("admin", "failover", namenode=a.address)
    assert result.code == 0, result.stderr
    active_of([a, b], timeout=FAILOVER_S)
    assert role(b.address) == "active", role(b.address)
    print(f"handover: {time.monotonic() - start:.2f} s, the CLI included")
    for path in done:
        assert stat(b.address, path).is_dir
    wait_until(lambda: role(a.address) == f"standby:{b.address}", 15, "nn1 to be a standby of nn2")


def test_both_down_then_up_the_namespace_is_etcds(pair):
    a, b = pair
    done = mkdirs(a.address, [f"/both/{i}" for i in range(10)])
    stub(a.address).Rename(pb.RenameRequest(src="/both/0", dst="/both/renamed"), timeout=5, metadata=ids())
    a.kill()
    b.kill()
    for n in (a, b):   # the views are rebuilt from etcd: wipe them to be sure nothing local is used
        for name in os.listdir(n.data_dir):
            if name.startswith("etcd-view"):
                os.remove(os.path.join(n.data_dir, name))
    b.start()
    a.start()
    active = active_of([a, b], timeout=FAILOVER_S)
    for path in done[1:] + ["/both/renamed"]:
        assert stat(active.address, path).is_dir
    with pytest.raises(grpc.RpcError):
        stat(active.address, "/both/0")


def test_a_retried_call_gets_its_first_answer_across_a_failover(pair):
    a, b = pair
    mkdirs(a.address, ["/r"])
    first = ids("rename-1")
    stub(a.address).Rename(pb.RenameRequest(src="/r", dst="/r2"), timeout=5, metadata=first)
    # the reply was "lost": the same call again, on the same NameNode, then on the next active
    stub(a.address).Rename(pb.RenameRequest(src="/r", dst="/r2"), timeout=5, metadata=first)
    a.kill()
    active_of([b], timeout=FAILOVER_S)
    stub(b.address).Rename(pb.RenameRequest(src="/r", dst="/r2"), timeout=5, metadata=first)
    with pytest.raises(grpc.RpcError) as again:   # a new call is a new call
        stub(b.address).Rename(pb.RenameRequest(src="/r", dst="/r2"), timeout=5, metadata=ids())
    assert again.value.code() == grpc.StatusCode.NOT_FOUND


def test_unreachable_etcd_at_start_is_one_line_and_exit_3(tmp_path):
    result = run_cli("namenode", "--port", "0", "--data-dir", str(tmp_path / "nn"), "--meta",
                     "etcd://127.0.0.1:9/hfs", timeout=60)
    assert result.code == 3
    assert_one_line_error(result, "etcd unreachable")


def test_bad_meta_url_is_usage(tmp_path):
    result = run_cli("namenode", "--data-dir", str(tmp_path / "nn"), "--meta", "etcd://nohost/", timeout=60)
    assert result.code == 2
    assert_one_line_error(result, "--meta")


def test_a_prefix_of_another_cluster_or_not_a_namespace_is_refused(etcd_cluster, tmp_path):
    url = etcd_cluster.url(prefix("owned"))
    a = NameNodeProcess(tmp_path, "nn1", url, "--cluster-id", "CID-ours").start()
    try:
        active_of([a])
        mkdirs(a.address, ["/ours"])
    finally:
        a.stop()
    result = run_cli("namenode", "--port", "0", "--data-dir", str(tmp_path / "other"), "--meta", url,
                     "--cluster-id", "CID-theirs", timeout=60)
    assert result.code == 4
    assert_one_line_error(result, "CID-ours", "CID-theirs")

    foreign = prefix("foreign")
    env = dict(os.environ, ETCDCTL_API="3")
    subprocess.run([ETCDCTL, "--endpoints", etcd_cluster.endpoints, "put", f"/{foreign}/app/config", "x"],
                   check=True, capture_output=True, env=env)
    result = run_cli("namenode", "--port", "0", "--data-dir", str(tmp_path / "f"), "--meta",
                     etcd_cluster.url(foreign), timeout=60)
    assert result.code == 4
    assert_one_line_error(result, "not a hedgefs namespace")


def test_a_change_of_many_directories_is_one_record_and_batches_fit_any_txn_limit(etcd_cluster, tmp_path):
    """A change is one journal record however much it changes (a mkdir -p of 40 levels, a
    recursive delete of a tree), so none is too large for a Txn; and a batch of many records is
    split into as many Txns as etcd's limits need, all of it before its callers are told."""
    a = NameNodeProcess(tmp_path, "nn1", etcd_cluster.url(prefix("large")), "--etcd-max-txn-ops", "24").start()
    try:
        active_of([a])
        deep = "/a/" + "/".join(f"level{i}" for i in range(40))
        stub(a.address).Mkdir(pb.MkdirRequest(path=deep, parents=True), timeout=5, metadata=ids())
        assert stat(a.address, deep).is_dir
        stub(a.address).Delete(pb.DeleteRequest(path="/a", recursive=True), timeout=5, metadata=ids())
        with pytest.raises(grpc.RpcError) as gone:
            stat(a.address, "/a")
        assert gone.value.code() == grpc.StatusCode.NOT_FOUND
        # many small changes at once: one group commit of them, in Txns within the limit
        futures = [stub(a.address).Mkdir.future(pb.MkdirRequest(path=f"/many/{i}", parents=True), timeout=20,
                                                metadata=ids()) for i in range(40)]
        for f in futures:
            f.result()
        assert len(stub(a.address).List(pb.ListRequest(path="/many"), timeout=5).entries) == 40
        assert role(a.address) == "active"
    finally:
        a.stop()


def test_a_file_written_on_the_active_is_on_the_standby_with_its_block_groups(etcd_cluster, tmp_path):
    url = etcd_cluster.url(prefix("data"))
    policy = ("--default-policy", "REPLICATE-3", "--block-size", "65536")
    a = NameNodeProcess(tmp_path, "nn1", url, *policy).start()
    b = dns = None
    try:
        active_of([a])
        b = NameNodeProcess(tmp_path, "nn2", url, *policy).start()
        # DataNodes report to every NameNode: where units are is memory only, each NameNode's own
        dns = [DataNodeProcess(tmp_path, f"dn{i}", f"{a.address},{b.address}").start() for i in range(1, 4)]
        wait_until(lambda: len([d for d in stub(a.address).Report(pb.Empty(), timeout=5).datanodes
                                if d.state == "live"]) == 3, 30, "3 live DataNodes")
        data = pattern(200_000, seed=24)
        put = run_cli("put", "-", "/f.bin", namenode=a.address, input=data)
        assert put.code == 0, put.stderr
        wait_exists(b.address, "/f.bin")
        on_standby = stat(b.address, "/f.bin")
        on_active = stat(a.address, "/f.bin")
        assert on_standby.length == len(data) == on_active.length
        assert [(g.id, g.length, g.generation) for g in on_standby.groups] == \
               [(g.id, g.length, g.generation) for g in on_active.groups]
        # the locations came from the DataNodes' receipts to the standby too (no rebuild at a failover)
        wait_until(lambda: all(len(g.units) == 3 for g in stat(b.address, "/f.bin").groups), 15,
                   "the standby to know every unit's location")
        assert run_cli("cat", "/f.bin", namenode=a.address).stdout == data
    finally:
        for n in (dns or []) + [x for x in (a, b) if x]:
            n.stop()


def test_meta_sqlite_url_puts_the_namespace_where_it_says(tmp_path):
    db = tmp_path / "elsewhere" / "ns.db"
    db.parent.mkdir()
    a = NameNodeProcess(tmp_path, "nn1", f"sqlite://{db}").start()
    try:
        mkdirs(a.address, ["/here"])
        assert db.exists() and not os.path.exists(os.path.join(a.data_dir, "namenode.db"))
        reg = stub(a.address).RegisterDataNode(pb.RegisterRequest(datanode_id="dn1", address="x:1"), timeout=5)
        assert reg.active and reg.epoch == 0          # SQLite: the active, always; epoch 0
        assert role(a.address) == "active"
        refused = run_cli("admin", "failover", namenode=a.address)
        assert_one_line_error(refused, "no standby")
    finally:
        a.stop()


def _behind(nn) -> int:
    """The reads a standby sent to the active after waiting for its view (its /metrics)."""
    import urllib.request

    from hedgefs.plumbing import read_port_file
    port = read_port_file(nn.port_file)["http"]
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
        text = r.read().decode()
    return sum(int(float(line.split()[-1])) for line in text.splitlines()
               if line.startswith("hedgefs_namenode_ha_observer_behind_total"))


def _rev(call) -> int:
    return int(dict(call.trailing_metadata())["hedgefs-rev"])


def test_a_standby_answers_a_client_only_once_its_view_has_the_clients_last_write(etcd_cluster, tmp_path):
    """Read your writes through a standby (HDFS's msync): replies carry the etcd revision they
    reflect, the client sends back the highest it saw, and a standby whose view is behind it
    waits (bounded) or redirects to the active; never the stale answer."""
    from hedgefs.client.namenodes import NameNodes

    name, leader = prefix("ryw"), etcd_cluster.leader()
    lagging = next(n for n in etcd_cluster.names if n != leader)   # the standby's only member
    others = ",".join(f"127.0.0.1:{etcd_cluster.client_ports[n]}" for n in etcd_cluster.names if n != lagging)
    a = NameNodeProcess(tmp_path, "nn1", f"etcd://{others}/{name}").start()
    b = None
    try:
        active_of([a])
        b = NameNodeProcess(tmp_path, "nn2", f"etcd://127.0.0.1:{etcd_cluster.client_ports[lagging]}/{name}",
                            "--http-port", "0").start()
        wait_until(lambda: role(b.address) == f"standby:{a.address}", 15, "nn2 to be a standby naming nn1")

        # in step: the standby waits for its view (no redirect), whatever the watch's delay
        _, call = stub(a.address).Mkdir.with_call(pb.MkdirRequest(path="/d1"), timeout=5, metadata=ids())
        seen = _rev(call)
        info, call = stub(b.address).GetFileInfo.with_call(pb.PathRequest(path="/d1"), timeout=5,
                                                           metadata=(("hedgefs-rev", str(seen)),))
        assert info.is_dir and _rev(call) >= seen

        etcd_cluster.kill(lagging, signal.SIGSTOP)   # the standby's view stops; the active commits on
        try:
            _, call = stub(a.address).Mkdir.with_call(pb.MkdirRequest(path="/d2"), timeout=5, metadata=ids())
            seen = _rev(call)
            with pytest.raises(grpc.RpcError) as stale:   # a client that saw nothing: the view as it is
                stat(b.address, "/d2")
            assert stale.value.code() == grpc.StatusCode.NOT_FOUND
            with pytest.raises(grpc.RpcError) as behind:  # one that wrote it: sent to the active
                stub(b.address).GetFileInfo(pb.PathRequest(path="/d2"), timeout=5,
                                            metadata=(("hedgefs-rev", str(seen)),))
            assert not_active(behind.value) == a.address
            assert _behind(b) == 1   # it waited for its view, in vain

            # a write (or anything but an observer read) is redirected at once: no wait for the view
            for call, request in (("Mkdir", pb.MkdirRequest(path="/d4")), ("Delete", pb.DeleteRequest(path="/d1"))):
                with pytest.raises(grpc.RpcError) as redirected:
                    getattr(stub(b.address), call)(request, timeout=5, metadata=(("hedgefs-rev", str(seen)), *ids()))
                assert not_active(redirected.value) == a.address
            assert _behind(b) == 1

            # the client carries the revision by itself, and follows the redirect
            nodes = NameNodes(f"{a.address},{b.address}")
            try:
                nodes.call("Mkdir", pb.MkdirRequest(path="/d3"))
                assert nodes.revision > seen
                nodes.active = b.address   # its next call lands on the standby (as after a timeout)
                assert nodes.call("GetFileInfo", pb.PathRequest(path="/d3")).is_dir
                assert nodes.active == a.address
                # another client object of this process, on the same addresses (in any order),
                # reads the write too: the revision is the process's, not one object's
                other = NameNodes(f"{b.address},{a.address}")
                try:
                    assert other.revision == nodes.revision
                    assert other.call("GetFileInfo", pb.PathRequest(path="/d3")).is_dir
                finally:
                    other.close()
            finally:
                nodes.close()
        finally:
            etcd_cluster.kill(lagging, signal.SIGCONT)
        wait_exists(b.address, "/d3")   # thawed, the view catches up
    finally:
        for n in (b, a):
            if n is not None:
                n.stop()
