"""A real DataNode process (``hedgefs datanode``, which calls ``serve``) over real gRPC.

Its NameNode address is a closed port: heartbeats fail quietly. Every wait on the server's state
polls GetFaults against a deadline; no sleep stands in for synchronisation.
"""

import os
import signal
import socket
import subprocess
import sys
import threading
import time

import grpc
import pytest

from hedgefs.datanode.server import DataNode
from hedgefs.proto import GRPC_OPTIONS
from hedgefs.proto import hedgefs_pb2 as pb
from hedgefs.proto import hedgefs_pb2_grpc

MiB = 1024 * 1024


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch(tmp_path, *extra, name="dn3", env=None, wait=True):
    port_file = tmp_path / f"{name}.port"
    cmd = [sys.executable, "-m", "hedgefs", "datanode", "--id", name, "--port", "0",
           "--data-dir", str(tmp_path / name), "--namenode", f"127.0.0.1:{closed_port()}",
           "--port-file", str(port_file), "--heartbeat-interval-s", "0.2", "--no-fsync", *extra]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=dict(os.environ, **(env or {})))
    return wait_port(proc, port_file) if wait else (proc, port_file)


def wait_port(proc, port_file):
    deadline = time.monotonic() + 20
    while not port_file.exists():
        if proc.poll() is not None:
            raise AssertionError(f"datanode exited: {proc.stderr.read()}")
        assert time.monotonic() < deadline, "datanode did not write its port file"
        time.sleep(0.02)
    return proc, int(port_file.read_text())


def stop(proc):
    proc.send_signal(signal.SIGTERM)
    try:
        assert proc.wait(10) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return proc.stderr.read()


@pytest.fixture(scope="module")
def node(tmp_path_factory):
    proc, port = launch(tmp_path_factory.mktemp("dn"), "--enable-faults")
    channel = grpc.insecure_channel(f"127.0.0.1:{port}", options=GRPC_OPTIONS)
    stub = hedgefs_pb2_grpc.DataNodeStub(channel)
    yield proc, stub
    channel.close()
    log = stop(proc)
    assert "datanode dn3 listening on 127.0.0.1:" in log
    # the closed NameNode port is reported once per outage, not once per heartbeat
    assert log.count("unreachable") == 1


@pytest.fixture
def stub(node):
    stub = node[1]
    stub.ClearFaults(pb.FaultClearRequest())
    yield stub
    stub.ClearFaults(pb.FaultClearRequest())


def write(stub, g, i, data, finalize=True, expected=None, chunk=MiB):
    def messages():
        yield pb.WriteChunk(group_id=g, index=i,
                            expected_length=len(data) if expected is None else expected)
        for s in range(0, len(data), chunk):
            yield pb.WriteChunk(data=data[s:s + chunk])
        if finalize:
            yield pb.WriteChunk(finalize=True)
    return stub.WriteUnit(messages(), timeout=10).length


def read(stub, g, i, off, n, timeout=10):
    return b"".join(c.data for c in stub.ReadUnit(pb.ReadRequest(group_id=g, index=i, offset=off,
                                                                 length=n), timeout=timeout))


def code_of(fn, *args, **kw):
    with pytest.raises(grpc.RpcError) as e:
        fn(*args, **kw)
    return e.value.code(), e.value.details()


def state(stub):
    return stub.GetFaults(pb.FaultClearRequest())


def poll(stub, cond, timeout=10.0):
    deadline = time.monotonic() + timeout
    while True:
        s = state(stub)
        if cond(s):
            return s
        assert time.monotonic() < deadline, f"state never matched: {s}"
        time.sleep(0.01)


DATA = os.urandom(2 * MiB + 12345)


def test_write_and_read_a_unit(stub):
    assert write(stub, 10, 0, DATA) == len(DATA)
    assert read(stub, 10, 0, 0, len(DATA)) == DATA
    assert read(stub, 10, 0, 99_999, MiB + 7) == DATA[99_999:99_999 + MiB + 7]
    chunks = list(stub.ReadUnit(pb.ReadRequest(group_id=10, index=0, offset=0, length=len(DATA))))
    assert all(len(c.data) <= MiB for c in chunks) and len(chunks) >= 3
    assert code_of(read, stub, 10, 1, 0, 1)[0] == grpc.StatusCode.NOT_FOUND
    assert code_of(read, stub, 10, 0, len(DATA), 1)[0] == grpc.StatusCode.OUT_OF_RANGE


def test_expected_length_may_come_with_finalize(stub):
    def messages(length_on_finalize):
        yield pb.WriteChunk(group_id=19, index=4)
        yield pb.WriteChunk(data=b"late length")
        yield pb.WriteChunk(finalize=True, expected_length=length_on_finalize)
    assert stub.WriteUnit(messages(11), timeout=10).length == 11
    assert read(stub, 19, 4, 0, 11) == b"late length"
    with pytest.raises(grpc.RpcError) as e:
        stub.WriteUnit(messages(12), timeout=10)
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT


def test_write_without_finalize_or_with_wrong_length_stores_nothing(stub):
    assert code_of(write, stub, 11, 0, b"abc", finalize=False)[0] == grpc.StatusCode.ABORTED
    code, details = code_of(write, stub, 11, 0, b"abc", expected=4)
    assert code == grpc.StatusCode.INVALID_ARGUMENT and "got 3 bytes, expected 4" in details
    assert code_of(write, stub, 11, 0, b"abcde", expected=4)[0] == grpc.StatusCode.INVALID_ARGUMENT
    assert code_of(read, stub, 11, 0, 0, 0)[0] == grpc.StatusCode.NOT_FOUND


def test_stalled_read_cancelled_by_client(stub):
    write(stub, 12, 0, b"s" * 1000)
    before = state(stub).cancelled_reads
    stub.SetFaults(pb.FaultConfig(stall=True))
    call = stub.ReadUnit(pb.ReadRequest(group_id=12, index=0, offset=0, length=1000))
    poll(stub, lambda s: s.stalled_reads == 1)
    call.cancel()
    s = poll(stub, lambda s: s.stalled_reads == 0 and s.cancelled_reads == before + 1)
    assert s.stall


def test_stalled_read_released_by_clear(stub):
    write(stub, 13, 0, b"r" * 1000)
    stub.SetFaults(pb.FaultConfig(stall=True))
    out = []
    t = threading.Thread(target=lambda: out.append(read(stub, 13, 0, 0, 1000)))
    t.start()
    poll(stub, lambda s: s.stalled_reads == 1)
    stub.SetFaults(pb.FaultConfig(stall=False))
    t.join(10)
    assert out == [b"r" * 1000]


def test_delayed_read_is_freed_by_cancellation(stub):
    write(stub, 14, 0, b"d" * 10)
    before = state(stub).cancelled_reads
    stub.SetFaults(pb.FaultConfig(read_delay_ms=60_000))
    t0 = time.monotonic()
    assert code_of(read, stub, 14, 0, 0, 10, timeout=0.3)[0] == grpc.StatusCode.DEADLINE_EXCEEDED
    poll(stub, lambda s: s.cancelled_reads == before + 1)
    assert time.monotonic() - t0 < 5
    stub.SetFaults(pb.FaultConfig(read_delay_ms=200, probability=1.0))
    t0 = time.monotonic()
    assert read(stub, 14, 0, 0, 10) == b"d" * 10
    assert 0.18 < time.monotonic() - t0 < 5


def test_injected_error_is_unavailable(stub):
    write(stub, 15, 0, b"e")
    stub.SetFaults(pb.FaultConfig(error_probability=1.0))
    assert code_of(read, stub, 15, 0, 0, 1) == (grpc.StatusCode.UNAVAILABLE,
                                                "injected error on dn3")
    assert write(stub, 15, 1, b"writes are never faulted") == 24


def test_injected_corruption_is_data_loss(stub):
    write(stub, 16, 2, DATA)
    stub.SetFaults(pb.FaultConfig(corrupt_probability=1.0))
    code, details = code_of(read, stub, 16, 2, 70_000, 10)
    assert code == grpc.StatusCode.DATA_LOSS
    assert details == "checksum mismatch in unit 16/2 at offset 65536"
    assert state(stub).calls["fault:corrupt"] >= 1
    stub.ClearFaults(pb.FaultClearRequest())
    assert read(stub, 16, 2, 70_000, 10) == DATA[70_000:70_010]   # the disk was never touched


def test_bandwidth_cap(stub):
    write(stub, 17, 0, DATA)
    stub.SetFaults(pb.FaultConfig(bandwidth_bps=4 * MiB))
    t0 = time.monotonic()
    assert read(stub, 17, 0, 0, 2 * MiB) == DATA[:2 * MiB]
    assert 0.3 < time.monotonic() - t0 < 5


def test_set_faults_changes_only_given_fields_and_counts_calls(stub):
    s = stub.SetFaults(pb.FaultConfig(read_delay_ms=5, jitter_ms=1))
    s = stub.SetFaults(pb.FaultConfig(probability=0.5))
    assert (s.enabled, s.read_delay_ms, s.jitter_ms, s.probability) == (True, 5, 1, 0.5)
    assert s.calls["SetFaults"] >= 2 and s.calls["ReadUnit"] >= 1 and s.calls["WriteUnit"] >= 1
    assert code_of(stub.SetFaults, pb.FaultConfig(error_probability=2.0))[0] == \
        grpc.StatusCode.INVALID_ARGUMENT


def test_sink_and_source(stub):
    assert stub.Sink(iter([pb.ReadChunk(data=b"x" * 1000)] * 5)).length == 5000
    sizes = [len(c.data) for c in stub.Source(pb.SourceRequest(total_bytes=2500, chunk_bytes=1000))]
    assert sizes == [1000, 1000, 500]


def test_frozen_process_times_out_then_recovers(node, stub):
    proc = node[0]
    write(stub, 18, 0, b"f" * 100)
    proc.send_signal(signal.SIGSTOP)
    try:
        t0 = time.monotonic()
        code = code_of(read, stub, 18, 0, 0, 100, timeout=1.0)[0]
        assert code == grpc.StatusCode.DEADLINE_EXCEEDED
        assert time.monotonic() - t0 < 3
    finally:
        proc.send_signal(signal.SIGCONT)
    assert read(stub, 18, 0, 0, 100) == b"f" * 100


def test_faults_refused_when_disabled(tmp_path):
    proc, port = launch(tmp_path, name="dn4")
    try:
        with grpc.insecure_channel(f"127.0.0.1:{port}", options=GRPC_OPTIONS) as ch:
            stub = hedgefs_pb2_grpc.DataNodeStub(ch)
            for rpc, req in ((stub.SetFaults, pb.FaultConfig(stall=True)),
                             (stub.ClearFaults, pb.FaultClearRequest()),
                             (stub.GetFaults, pb.FaultClearRequest())):
                assert code_of(rpc, req) == (
                    grpc.StatusCode.PERMISSION_DENIED,
                    "fault injection is disabled on dn4 (start it with --enable-faults)")
            assert write(stub, 1, 0, b"ok") == 2
    finally:
        stop(proc)


@pytest.mark.parametrize("args,message", [
    (["--enable-faults", "--fault", "bogus=1"], "unknown fault 'bogus'"),
    (["--enable-faults", "--fault", "probability=7"], "probability must be between 0 and 1"),
    (["--fault", "read-delay-ms=5"], "fault injection is disabled on dn5"),
    (["--scrub-bandwidth", "fast"], "bad --scrub-bandwidth 'fast': must be a non-negative number of bytes per second"),
])
def test_bad_fault_spec_refuses_to_start(tmp_path, args, message):
    cmd = [sys.executable, "-m", "hedgefs", "datanode", "--id", "dn5", "--data-dir", str(tmp_path),
           "--namenode", "127.0.0.1:1", *args]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
    assert r.returncode == 2
    assert r.stderr.count("\n") == 1 and message in r.stderr, r.stderr


def test_token_is_required_when_set(tmp_path):
    dn = DataNode(datanode_id="dn6", port=0, data_dir=str(tmp_path), namenode="127.0.0.1:1",
                  enable_faults=True, token="s3cret", fsync=False)
    port = dn.start()
    try:
        with grpc.insecure_channel(f"127.0.0.1:{port}", options=GRPC_OPTIONS) as ch:
            stub = hedgefs_pb2_grpc.DataNodeStub(ch)
            assert code_of(stub.GetFaults, pb.FaultClearRequest())[0] == \
                grpc.StatusCode.PERMISSION_DENIED
            assert code_of(stub.SetFaults, pb.FaultConfig(token="nope", stall=True))[0] == \
                grpc.StatusCode.PERMISSION_DENIED
            assert stub.SetFaults(pb.FaultConfig(token="s3cret", stall=True)).stall
            assert not stub.ClearFaults(pb.FaultClearRequest(token="s3cret")).stall
    finally:
        dn.stop()


def test_a_second_datanode_on_the_same_data_dir_refuses_to_start(tmp_path):
    proc, _port = launch(tmp_path, name="dn1")
    try:
        cmd = [sys.executable, "-m", "hedgefs", "datanode", "--id", "dn99", "--data-dir", str(tmp_path / "dn1"),
               "--namenode", "127.0.0.1:1", "--port", "0"]
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
        assert r.returncode == 1
        assert r.stderr == (f"hedgefs: datanode dn99: data dir {tmp_path / 'dn1'} is in use by another "
                            f"DataNode (pid {proc.pid})\n")
    finally:
        stop(proc)


def test_a_datanode_killed_at_any_step_of_a_commit_keeps_the_old_unit_or_the_new_one(tmp_path):
    """Each step of storage.COMMIT_STEPS in its own DataNode process (started together), which
    the debug knob SIGKILLs at that step while it replaces unit 5/2; then the data dir is opened
    again, as the restarted DataNode would."""
    from hedgefs.datanode.storage import COMMIT_STEPS, BlockStore

    old, new = pattern_bytes(200_000, 1), pattern_bytes(150_001, 2)
    procs = {}
    for step in COMMIT_STEPS:
        store = BlockStore(tmp_path / step)
        with store.open_writer(5, 2, len(old)) as w:
            w.write(old)
            w.commit()
        store.close()
        procs[step] = launch(tmp_path, name=step, env={"HEDGEFS_DEBUG_CRASH_AT": step}, wait=False)
    outcomes = {}
    for step, (proc, port_file) in procs.items():
        proc, port = wait_port(proc, port_file)
        with grpc.insecure_channel(f"127.0.0.1:{port}", options=GRPC_OPTIONS) as ch:
            assert code_of(write, hedgefs_pb2_grpc.DataNodeStub(ch), 5, 2, new)[0] == grpc.StatusCode.UNAVAILABLE
        assert proc.wait(10) == -signal.SIGKILL
        proc.stdout.close()
        proc.stderr.close()
        store = BlockStore(tmp_path / step)
        data = b"".join(store.read(5, 2, 0, store.length(5, 2)))   # every chunk verified
        outcomes[step] = "new" if data == new else "old" if data == old else "neither"
        files = sorted(p.name for p in (tmp_path / step).rglob("*") if p.is_file() and p.suffix in (".blk", ".crc"))
        assert len(files) == 2, (step, files)   # one version, no leftovers in blocks/ or tmp/
        store.close()
    assert outcomes == {"block-synced": "old", "sidecar-synced": "old", "block-renamed": "old",
                        "sidecar-renamed": "new", "dir-synced": "new", "old-removed": "new"}


def pattern_bytes(n: int, seed: int) -> bytes:
    return bytes((i * 7 + seed * 13 + (i >> 9)) % 256 for i in range(n))
