"""The NameNode as a real process: serve() in a subprocess, real gRPC, status codes, kill -9, restart."""

import itertools
import logging
import os
import signal
import subprocess
import sys
import threading

import grpc
import pytest

from conftest import wait_until
from hedgefs.proto import GRPC_OPTIONS, hedgefs_pb2 as pb, hedgefs_pb2_grpc

SERVE = (
    "import logging, sys; logging.basicConfig(level=logging.INFO, stream=sys.stderr); "
    "from hedgefs.namenode.server import serve; "
    "serve(port=int(sys.argv[3]), data_dir=sys.argv[1], port_file=sys.argv[2], default_policy='RS-3-2-1k', "
    "default_block_size=4096, repair_interval_s=0.2)"
)


def start(data_dir, port_file, log_path, port=0):
    log = open(log_path, "ab")
    proc = subprocess.Popen([sys.executable, "-c", SERVE, str(data_dir), str(port_file), str(port)],
                            stdout=log, stderr=log)
    try:
        wait_until(lambda: os.path.exists(port_file) or proc.poll() is not None, 15,
                   "the namenode to write its port file", interval=0.02, detail=lambda: open(log_path).read())
    except AssertionError:
        proc.kill()
        raise
    if not os.path.exists(port_file):
        raise AssertionError(f"namenode exited with {proc.returncode}:\n{open(log_path).read()}")
    port = int(open(port_file).read())
    channel = grpc.insecure_channel(f"127.0.0.1:{port}", options=GRPC_OPTIONS)
    grpc.channel_ready_future(channel).result(timeout=10)
    return proc, channel, hedgefs_pb2_grpc.NameNodeStub(channel)


def refused(call, request, timeout=5):
    with pytest.raises(grpc.RpcError) as err:
        call(request, timeout=timeout)
    return err.value.code(), err.value.details()


@pytest.fixture
def procs():
    started = []
    yield started
    for proc in started:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_namenode_process_rpcs_error_codes_and_kill_9(tmp_path, procs):
    data_dir, log_path = tmp_path / "nn", tmp_path / "nn.log"
    proc, channel, nn = start(data_dir, tmp_path / "port1", log_path)
    procs.append(proc)
    assert "namenode listening on 127.0.0.1:" in open(log_path).read()

    for i in range(1, 6):
        nn.RegisterDataNode(pb.RegisterRequest(datanode_id=f"dn{i}", address=f"127.0.0.1:{41000 + i}"), timeout=5)
    assert nn.Heartbeat(pb.HeartbeatRequest(datanode_id="dn9"), timeout=5).reregister

    nn.Mkdir(pb.MkdirRequest(path="/a/b", parents=True), timeout=5)
    created = nn.Create(pb.CreateRequest(path="/a/b/f", client_name="test"), timeout=5)
    assert (created.policy, created.block_size) == ("RS-3-2-1k", 4096)
    group = nn.AddBlockGroup(pb.AddBlockGroupRequest(file_id=created.file_id, exclude_datanodes=["dn9"]), timeout=5)
    assert sorted(u.index for u in group.units) == [0, 1, 2, 3, 4]
    assert len({u.datanode_id for u in group.units}) == 5
    # a client that claims units no DataNode reported stored is refused, after a bounded wait
    forged = nn.Create(pb.CreateRequest(path="/a/forged"), timeout=5)
    fgroup = nn.AddBlockGroup(pb.AddBlockGroupRequest(file_id=forged.file_id), timeout=5)
    assert refused(nn.Complete, pb.CompleteRequest(file_id=forged.file_id, length=1000, groups=[
        pb.GroupCommit(group_id=fgroup.id, length=1000, stored_units=[0, 1, 2, 3, 4])]), timeout=10) == (
        grpc.StatusCode.FAILED_PRECONDITION,
        f"group {fgroup.id} has only 0 stored units reported by their DataNodes (the writer claimed 5), "
        "policy RS-3-2-1k needs at least 1 besides its 2 zero units")   # 1000 bytes: units 1, 2 hold none
    assert refused(nn.GetFileInfo, pb.PathRequest(path="/a/forged"))[0] == grpc.StatusCode.NOT_FOUND
    # the DataNodes' receipts, then the Complete
    for u in group.units:
        nn.UnitStored(pb.UnitStoredRequest(datanode_id=u.datanode_id, units=[
            pb.StoredUnit(group_id=group.id, index=u.index, generation=group.generation, length=1000)]), timeout=5)
    nn.Complete(pb.CompleteRequest(file_id=created.file_id, length=1000, groups=[
        pb.GroupCommit(group_id=group.id, length=1000, stored_units=[0, 1, 2, 3, 4])]), timeout=5)
    info = nn.GetFileInfo(pb.PathRequest(path="/a/b/f"), timeout=5)
    assert (info.length, info.policy, len(info.groups), len(info.groups[0].units)) == (1000, "RS-3-2-1k", 1, 5)
    assert info.groups[0].units[0].address.startswith("127.0.0.1:")
    listing = nn.List(pb.ListRequest(path="/", recursive=True), timeout=5)
    assert [e.path for e in listing.entries] == ["/a", "/a/b", "/a/b/f"]
    assert nn.GetPolicy(pb.PathRequest(path="/a"), timeout=5) == pb.PolicyResponse(policy="RS-3-2-1k", source_path="", default_block_size=4096)
    assert nn.Fsck(pb.PathRequest(path="/"), timeout=5).status == "HEALTHY"
    assert len(nn.Report(pb.Empty(), timeout=5).datanodes) == 5

    C = grpc.StatusCode
    assert refused(nn.GetFileInfo, pb.PathRequest(path="/nope")) == (C.NOT_FOUND, "no such file or directory: /nope")
    code, details = refused(nn.Mkdir, pb.MkdirRequest(path="a/b"))
    assert code == C.INVALID_ARGUMENT and details.startswith("invalid path 'a/b': must be absolute")
    assert refused(nn.Create, pb.CreateRequest(path="/a/b/f")) == \
        (C.ALREADY_EXISTS, "file exists: /a/b/f (use -f to overwrite)")
    assert refused(nn.Create, pb.CreateRequest(path="/big", policy="RS-6-3-1024k")) == \
        (C.INVALID_ARGUMENT, "policy RS-6-3-1024k needs 9 live DataNodes, only 5 are live")
    assert refused(nn.Delete, pb.DeleteRequest(path="/a")) == (C.FAILED_PRECONDITION, "directory not empty: /a")
    assert refused(nn.Mkdir, pb.MkdirRequest(path="/a/b/f/x")) == (C.FAILED_PRECONDITION, "not a directory: /a/b/f")
    code, details = refused(nn.SetPolicy, pb.SetPolicyRequest(path="/a", policy="bogus"))
    assert code == C.INVALID_ARGUMENT and details.startswith("unknown policy 'bogus'")
    assert refused(nn.AddBlockGroup, pb.AddBlockGroupRequest(file_id=12345))[0] == C.NOT_FOUND

    # a write in progress when the NameNode dies stays invisible; the completed file survives
    half = nn.Create(pb.CreateRequest(path="/a/half"), timeout=5)
    nn.AddBlockGroup(pb.AddBlockGroupRequest(file_id=half.file_id), timeout=5)
    channel.close()
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=10)

    proc, channel, nn = start(data_dir, tmp_path / "port2", log_path)
    procs.append(proc)
    # Where units are is memory only: until the DataNodes report, the file's status comes marked
    # "locations pending" (a reader asks again; a stat answers as is), not as a file without units.
    marked = nn.GetFileInfo(pb.PathRequest(path="/a/b/f", group_codes=True), timeout=5)
    assert marked.length == 1000 and marked.locations_pending.startswith("cannot read /a/b/f yet: the NameNode is starting")
    assert refused(nn.GetFileInfo, pb.PathRequest(path="/a/half"))[0] == C.NOT_FOUND
    # a DataNode this process has not heard from is asked to register and report
    assert nn.Heartbeat(pb.HeartbeatRequest(datanode_id="dn1"), timeout=5).reregister
    for i in range(1, 6):
        nn.RegisterDataNode(pb.RegisterRequest(datanode_id=f"dn{i}", address=f"127.0.0.1:{41000 + i}"), timeout=5)
        nn.BlockReport(pb.BlockReportRequest(datanode_id=f"dn{i}", units=[
            pb.StoredUnit(group_id=group.id, index=u.index, generation=group.generation)
            for u in info.groups[0].units if u.datanode_id == f"dn{i}"]), timeout=5)
    again = nn.GetFileInfo(pb.PathRequest(path="/a/b/f"), timeout=5)
    for reply in (info, again):   # the cluster's view of the DataNodes (heartbeat ages) moves on
        reply.ClearField("datanode_reads")
        reply.ClearField("datanode_heartbeat_age_ms")
    assert again == info  # same groups, and the same unit locations once reported
    channel.close()
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=15) == 0
    assert "namenode stopping" in open(log_path).read()


def test_a_datanode_whose_block_report_falls_due_while_the_namenode_restarts_registers_again(tmp_path, procs,
                                                                                             caplog):
    """A restarted NameNode knows no DataNode (registrations are memory only) and refuses a block
    report from one that has not registered (FAILED_PRECONDITION). A DataNode whose periodic
    report fell due during the outage sends it before its heartbeat: it must register again, not
    retry the refused report forever (a chaos run's DataNodes stayed unregistered for minutes,
    logging nothing after "unreachable"). ``block_report_interval_s=0``: every beat reports first."""
    from hedgefs.datanode.server import DataNode

    caplog.set_level(logging.INFO, logger="hedgefs.datanode")
    data_dir, log_path = tmp_path / "nn", tmp_path / "nn.log"
    proc, channel, nn = start(data_dir, tmp_path / "port1", log_path)
    procs.append(proc)
    port = int(open(tmp_path / "port1").read())
    dn = DataNode(datanode_id="dn1", port=0, data_dir=str(tmp_path / "dn1"), namenode=f"127.0.0.1:{port}",
                  heartbeat_interval_s=0.05, block_report_interval_s=0, fsync=False)
    dn.start()
    try:
        wait_until(lambda: [d.id for d in nn.Report(pb.Empty(), timeout=5).datanodes] == ["dn1"], 15,
                   "dn1 registered with the first NameNode")
        channel.close()
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
        wait_until(lambda: not dn.link.reachable, 15, "dn1 to see the NameNode gone")

        proc, channel, nn = start(data_dir, tmp_path / "port2", log_path, port=port)
        procs.append(proc)

        def registered():
            return [(d.id, d.state) for d in nn.Report(pb.Empty(), timeout=5).datanodes]
        wait_until(lambda: registered() == [("dn1", "live")], 30, "dn1 registered with the restarted NameNode",
                   detail=registered)
        assert "datanode dn1 registered at" in open(log_path).read().split("namenode listening on")[-1]
        wait_until(lambda: dn.link.reachable, 15, "dn1's link to see the NameNode reachable again")
        assert "does not know dn1 (unknown DataNode 'dn1': register first): registering again" in caplog.text
        channel.close()
    finally:
        dn.stop()


def test_kill_9_during_group_commit_loses_nothing_acknowledged(tmp_path, procs):
    """16 writers (mkdir, and create + complete) share commits; the NameNode is killed while
    their changes are being applied and committed. After a restart every change any writer was
    answered for is there: an answer is sent only once its batch is durable."""
    data_dir, log_path = tmp_path / "nn", tmp_path / "nn.log"
    proc, channel, nn = start(data_dir, tmp_path / "port1", log_path)
    procs.append(proc)
    for i in range(1, 6):   # a create needs its policy placeable
        nn.RegisterDataNode(pb.RegisterRequest(datanode_id=f"dn{i}", address=f"127.0.0.1:{41000 + i}"), timeout=5)
    acked: list[str] = []
    asked: list[str] = []
    errors: list[str] = []
    stop = threading.Event()

    def write(t: int) -> None:
        try:
            for i in itertools.count():
                if stop.is_set():
                    return
                asked.append(f"/crash/t{t}/d{i}")
                nn.Mkdir(pb.MkdirRequest(path=f"/crash/t{t}/d{i}", parents=True), timeout=10)
                acked.append(f"/crash/t{t}/d{i}")
                asked.append(f"/crash/t{t}/f{i}")
                created = nn.Create(pb.CreateRequest(path=f"/crash/t{t}/f{i}"), timeout=10)
                nn.Complete(pb.CompleteRequest(file_id=created.file_id, length=0), timeout=10)
                acked.append(f"/crash/t{t}/f{i}")
        except grpc.RpcError as err:
            if err.code() != grpc.StatusCode.UNAVAILABLE:
                errors.append(err.details())

    writers = [threading.Thread(target=write, args=(t,), daemon=True) for t in range(16)]
    for w in writers:
        w.start()
    wait_until(lambda: len(acked) >= 300, 60, "300 acknowledged changes")
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=10)
    stop.set()
    for w in writers:
        w.join(timeout=20)
    channel.close()
    assert errors == []
    in_flight = set(asked) - set(acked)
    assert in_flight, "no call was in flight at the kill: nothing was tested"

    proc, channel, nn = start(data_dir, tmp_path / "port2", log_path)
    procs.append(proc)
    listed = {e.path for e in nn.List(pb.ListRequest(path="/crash", recursive=True, limit=10000), timeout=10).entries}
    assert [p for p in acked if p not in listed] == []
    # what was asked but not answered may or may not have made it; nothing else appeared
    assert {p for p in listed if p.count("/") == 4} <= set(asked)
    channel.close()
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=15) == 0


def test_ls_R_of_100000_entries_is_paged_under_the_4_MiB_message_limit(tmp_path, procs):
    """100 directories of 1,000 files with long names: one answer would be ~10 MB, over the
    NameNode's 4 MiB limit; the CLI gets it in pages and prints every entry in order."""
    from conftest import run_cli
    from hedgefs.namenode.journal import records as r
    from hedgefs.namenode.namesystem import Namesystem

    # Filled in process, by logging the records themselves (100,000 Creates over RPC would take minutes)
    nn = Namesystem(str(tmp_path / "nn"), default_policy="RS-3-2-1k", default_block_size=4096)
    with nn.lock:
        for d in range(100):
            nn.journal.log(r.Mkdir(f"/dir{d:03d}", 0, "hedgefs", nn.tree.next_id))
            for f in range(1000):
                file_id = nn.tree.next_id
                nn.journal.log(r.Create(f"/dir{d:03d}/file-with-a-rather-long-name-to-fill-the-page-{f:04d}", file_id,
                                        "RS-3-2-1k", 4096, False, 0, "hedgefs", "supergroup", 0o644))
                nn.journal.log(r.Complete(file_id, 0, (), 0))
    nn.close()
    proc, channel, nn = start(tmp_path / "nn", tmp_path / "port", tmp_path / "nn.log")
    procs.append(proc)
    with pytest.raises(grpc.RpcError) as err:   # the limit is real: one 5 MiB request is refused
        nn.Mkdir(pb.MkdirRequest(path="/" + "x" * (5 << 20)), timeout=10)
    assert err.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    listing = run_cli("ls", "-R", "/", namenode=f"127.0.0.1:{open(tmp_path / 'port').read()}", timeout=300)
    assert listing.code == 0, listing.stderr
    lines = listing.stdout.decode().splitlines()
    assert len(lines) == 100 * 1001
    assert lines[0].endswith("  /dir000") and lines[1].endswith("  /dir000/file-with-a-rather-long-name-to-fill-the-page-0000")
    assert lines[-1].endswith("  /dir099/file-with-a-rather-long-name-to-fill-the-page-0999")
    assert len(listing.stdout) > 3 * (4 << 20) // 2
    channel.close()


def test_a_1000_level_path_mkdir_p_and_ls_R(tmp_path, procs):
    from conftest import run_cli

    proc, channel, _nn = start(tmp_path / "nn", tmp_path / "port", tmp_path / "nn.log")
    procs.append(proc)
    address = f"127.0.0.1:{open(tmp_path / 'port').read()}"
    deep = "/" + "/".join(f"{i % 10}" for i in range(1000))
    assert run_cli("mkdir", "-p", deep, namenode=address).code == 0
    listing = run_cli("ls", "-R", "/", namenode=address)
    assert listing.code == 0, listing.stderr
    lines = listing.stdout.decode().splitlines()
    assert len(lines) == 1000 and lines[-1].endswith("  " + deep)
    channel.close()
