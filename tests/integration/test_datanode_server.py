"""A real DataNode process (``hedgefs datanode``, which calls ``serve``): unit reads and writes
over its data port (proto/datatransfer.py, the blocking client), fault knobs over gRPC.

Its NameNode address is a closed port: heartbeats fail quietly. Every wait on the server's state
polls GetFaults against a deadline; no sleep stands in for synchronisation.
"""

import os
import signal
import socket
import struct
import subprocess
import sys
import threading
import time

import grpc
import pytest
from conftest import wait_until
from dn_support import Data, MiB, launch, stop, wait_port

from hedgefs.proto import GRPC_OPTIONS, hedgefs_pb2_grpc
from hedgefs.proto import datatransfer as dt
from hedgefs.proto import hedgefs_pb2 as pb


@pytest.fixture(scope="module")
def node(tmp_path_factory):
    proc, port, data_port = launch(tmp_path_factory.mktemp("dn"), "--enable-faults", "--max-streams", "4")
    channel = grpc.insecure_channel(f"127.0.0.1:{port}", options=GRPC_OPTIONS)
    stub = hedgefs_pb2_grpc.DataNodeStub(channel)
    yield proc, stub, Data(data_port)
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


@pytest.fixture
def data(node, stub):
    return node[2]


def error_of(fn, *args, **kw) -> tuple[str, str]:
    with pytest.raises(dt.TransferError) as e:
        fn(*args, **kw)
    return e.value.status, e.value.message


def state(stub):
    return stub.GetFaults(pb.FaultClearRequest())


DATA = os.urandom(2 * MiB + 12345)


def test_write_and_read_a_unit(data):
    assert data.write(10, 0, DATA) == len(DATA)
    assert data.read(10, 0, 0, len(DATA)) == DATA
    assert data.read(10, 0, 99_999, MiB + 7) == DATA[99_999:99_999 + MiB + 7]
    assert error_of(data.read, 10, 1, 0, 1)[0] == "NOT_FOUND"
    assert error_of(data.read, 10, 0, len(DATA), 1)[0] == "OUT_OF_RANGE"


def test_a_read_sends_whole_checksum_chunks_with_their_crcs(data):
    """The reader can verify every byte it uses: the range is widened to 64 KiB chunks."""
    data.write(20, 0, DATA)
    with data.connect() as s:
        s.sendall(dt.pack_request(dt.OP_READ, 20, 0, 70_000, 10, generation=0))
        dt.recv_response(s, "dn3")
        start, nbytes, chunk, crcs = dt.recv_read_info(s)
        assert (start, nbytes, chunk, len(crcs)) == (65536, 65536, 65536, 1)
        body = bytearray(nbytes)
        dt.recv_exactly(s, memoryview(body))
        assert body == DATA[65536:131072]
        # the same connection carries the next request
        assert bytes(dt.read_range(s, 20, 0, len(DATA) - 5, 5, generation=0)) == DATA[-5:]
        # and the unit's chunk checksums alone (a file checksum is combined from them)
        s.sendall(dt.pack_request(dt.OP_CHECKSUMS, 20, 0, 0, 0, generation=0))
        dt.recv_response(s, "dn3")
        info = bytearray(dt.UNIT_INFO.size)
        dt.recv_exactly(s, memoryview(info))
        assert dt.UNIT_INFO.unpack(info) == (len(DATA), 65536)
        raw = bytearray(4 * 33)
        dt.recv_exactly(s, memoryview(raw))
        assert struct.unpack("<33I", raw)[1] == crcs[0]


def test_expected_length_may_come_with_finalize(data):
    assert data.write(19, 4, b"late length") == 11
    assert data.read(19, 4, 0, 11) == b"late length"
    assert error_of(data.write, 19, 6, b"late length", end_length=12)[0] == "INVALID_ARGUMENT"


def test_write_without_finalize_or_with_wrong_length_stores_nothing(data, stub):
    assert data.write(11, 0, b"abc", finalize=False) is None
    status, details = error_of(data.write, 11, 0, b"abc", expected=4)
    assert status == "INVALID_ARGUMENT" and "got 3 bytes, expected 4" in details
    assert error_of(data.write, 11, 0, b"abcde", expected=4)[0] == "INVALID_ARGUMENT"
    assert error_of(data.read, 11, 0, 0, 0)[0] == "NOT_FOUND"


def test_stalled_write_is_dropped_after_the_idle_deadline(tmp_path):
    proc, _port, data_port = launch(tmp_path, "--write-idle-s", "0.5", name="dn7")
    try:
        with socket.create_connection(("127.0.0.1", data_port), timeout=30) as s:
            s.sendall(dt.pack_request(dt.OP_WRITE, 30, 0, 0, 0, generation=0))
            dt.recv_response(s, "dn7")
            s.sendall(dt.PACKET.pack(dt.PACKET_DATA, 10) + b"12345")   # half a packet, then nothing
            t0 = time.monotonic()
            assert s.recv(1) == b""     # the DataNode hung up on the stalled writer
            assert time.monotonic() - t0 < 20
        assert not list((tmp_path / "dn7" / "tmp").iterdir()), "the temp file of the dropped write is left"
    finally:
        log = stop(proc)
    assert "write of unit 30/0 on dn7: nothing for 0.5 s, dropped" in log


def test_stalled_read_cancelled_by_client(data, stub):
    data.write(12, 0, b"s" * 1000)
    before = state(stub).cancelled_reads
    stub.SetFaults(pb.FaultConfig(stall=True))
    s = data.connect()
    s.sendall(dt.pack_request(dt.OP_READ, 12, 0, 0, 1000, generation=0))
    wait_until(lambda: state(stub).stalled_reads == 1, 10, "the read to stall", interval=0.01)
    s.close()   # closing the connection is the cancel

    def cancelled():
        st = state(stub)
        return st if st.stalled_reads == 0 and st.cancelled_reads == before + 1 else None

    st = wait_until(cancelled, 10, "the stalled read to count as cancelled", interval=0.01,
                    detail=lambda: f"state {state(stub)}")
    assert st.stall


def test_stalled_read_released_by_clear(data, stub):
    data.write(13, 0, b"r" * 1000)
    stub.SetFaults(pb.FaultConfig(stall=True))
    out = []
    t = threading.Thread(target=lambda: out.append(data.read(13, 0, 0, 1000)))
    t.start()
    wait_until(lambda: state(stub).stalled_reads == 1, 10, "the read to stall", interval=0.01)
    stub.SetFaults(pb.FaultConfig(stall=False))
    t.join(10)
    assert out == [b"r" * 1000]


def test_delayed_read_is_freed_by_cancellation(data, stub):
    data.write(14, 0, b"d" * 10)
    before = state(stub).cancelled_reads
    stub.SetFaults(pb.FaultConfig(read_delay_ms=60_000))
    t0 = time.monotonic()
    with pytest.raises(TimeoutError):
        data.read(14, 0, 0, 10, timeout=0.3)
    wait_until(lambda: state(stub).cancelled_reads == before + 1, 10, "the delayed read to count as cancelled",
               interval=0.01)
    assert time.monotonic() - t0 < 5
    stub.SetFaults(pb.FaultConfig(read_delay_ms=200, probability=1.0))
    t0 = time.monotonic()
    assert data.read(14, 0, 0, 10) == b"d" * 10
    assert 0.18 < time.monotonic() - t0 < 5


def test_injected_error_is_unavailable(data, stub):
    data.write(15, 0, b"e")
    stub.SetFaults(pb.FaultConfig(error_probability=1.0))
    assert error_of(data.read, 15, 0, 0, 1) == ("UNAVAILABLE", "injected error on dn3")
    assert data.write(15, 1, b"writes are never faulted") == 24


@pytest.mark.parametrize("knob,counter", [("corrupt_probability", "fault:corrupt"),
                                          ("wire_corrupt_probability", "fault:wire-corrupt")])
def test_corruption_is_caught_by_the_reader(data, stub, knob, counter):
    """The DataNode sends without reading (sendfile); the reader's checksum check catches a bad
    disk and a bad link alike, at the chunk that was hit."""
    gid = {"corrupt_probability": 16, "wire_corrupt_probability": 23}[knob]
    data.write(gid, 2, DATA)
    stub.SetFaults(pb.FaultConfig(**{knob: 1.0}))
    status, details = error_of(data.read, gid, 2, 70_000, 10)
    assert status == "DATA_LOSS"
    assert details == f"checksum mismatch in unit {gid}/2 at offset 65536 from dn3"
    assert state(stub).calls[counter] >= 1
    stub.ClearFaults(pb.FaultClearRequest())
    assert data.read(gid, 2, 70_000, 10) == DATA[70_000:70_010]   # the disk was never touched


def test_rot_flips_a_bit_on_disk_that_readers_catch_and_the_datanode_says_which(tmp_path):
    """The Rot knob (chaos's bit rot): on disk, so a reader's checksum catches it and it stays
    after the knobs are cleared; the reply names each rotted copy, and a check finds it stored."""
    proc, port, data_port = launch(tmp_path, "--enable-faults", name="dn5")
    try:
        data = Data(data_port)
        for gid in (31, 32, 33):
            data.write(gid, 0, DATA)
        with grpc.insecure_channel(f"127.0.0.1:{port}", options=GRPC_OPTIONS) as ch:
            stub = hedgefs_pb2_grpc.DataNodeStub(ch)
            rotted = stub.Rot(pb.RotRequest(units=2, seed=7)).rotted
            assert len(rotted) == 2 and {u.group_id for u in rotted} < {31, 32, 33}
            stub.ClearFaults(pb.FaultClearRequest())
            for u in rotted:
                chunk = u.offset // (64 * 1024) * (64 * 1024)
                status, details = error_of(data.read, u.group_id, 0, chunk, 1)
                assert (status, details) == ("DATA_LOSS", f"checksum mismatch in unit {u.group_id}/0 at offset "
                                                          f"{chunk} from dn3")
            clean = ({31, 32, 33} - {u.group_id for u in rotted}).pop()
            assert data.read(clean, 0, 0, len(DATA)) == DATA
            assert list(stub.Rot(pb.RotRequest(check=rotted)).still_rotten) == list(rotted)
    finally:
        stop(proc)


def test_bandwidth_cap(data, stub):
    data.write(17, 0, DATA)
    stub.SetFaults(pb.FaultConfig(bandwidth_bps=4 * MiB))
    t0 = time.monotonic()
    assert data.read(17, 0, 0, 2 * MiB) == DATA[:2 * MiB]
    assert 0.3 < time.monotonic() - t0 < 5


def test_set_faults_changes_only_given_fields_and_counts_calls(data, stub):
    data.write(21, 0, b"c")
    data.read(21, 0, 0, 1)
    s = stub.SetFaults(pb.FaultConfig(read_delay_ms=5, jitter_ms=1))
    s = stub.SetFaults(pb.FaultConfig(probability=0.5))
    assert (s.enabled, s.read_delay_ms, s.jitter_ms, s.probability) == (True, 5, 1, 0.5)
    assert s.calls["SetFaults"] >= 2 and s.calls["ReadUnit"] >= 1 and s.calls["WriteUnit"] >= 1
    assert code_of(stub.SetFaults, pb.FaultConfig(error_probability=2.0))[0] == \
        grpc.StatusCode.INVALID_ARGUMENT


def test_streams_beyond_max_streams_get_busy_and_the_connection_stays_usable(data, stub):
    """The module's DataNode runs with --max-streams 4: four stalled reads hold every slot."""
    data.write(22, 0, b"b" * 100)
    stub.SetFaults(pb.FaultConfig(stall=True))
    held = [data.connect() for _ in range(4)]
    for s in held:
        s.sendall(dt.pack_request(dt.OP_READ, 22, 0, 0, 100, generation=0))
    wait_until(lambda: state(stub).stalled_reads == 4, 10, "four reads to stall", interval=0.01)
    with data.connect() as extra:
        with pytest.raises(dt.Busy) as e:
            dt.read_range(extra, 22, 0, 0, 100, generation=0)
        assert "4 streams" in e.value.message
        stub.SetFaults(pb.FaultConfig(stall=False))
        for s in held:
            dt.recv_response(s, "dn3")
            s.close()
        # Same connection, served once a slot is free: a held read's slot frees when its last byte
        # has gone out, which may be after its header reached us (on a loaded machine, it was).
        def read_unless_busy():
            try:
                return bytes(dt.read_range(extra, 22, 0, 0, 100, generation=0))
            except dt.Busy:
                return None

        got = wait_until(read_unless_busy, 10, "a slot to free after the stalled reads ended", interval=0.01)
        assert got == b"b" * 100
    assert state(stub).calls["busy"] >= 1


def test_a_foreign_protocol_is_refused_in_one_line(data):
    with data.connect() as s:
        s.sendall(b"GET / HTTP/1.0\r\n\r\n" + bytes(40))
        with pytest.raises(dt.TransferError) as e:
            dt.recv_response(s, "dn3")
        assert e.value.status == "INVALID_ARGUMENT" and f"data transfer version {dt.VERSION}" in e.value.message


def code_of(fn, *args, **kw):
    with pytest.raises(grpc.RpcError) as e:
        fn(*args, **kw)
    return e.value.code(), e.value.details()


def test_frozen_process_times_out_then_recovers(node, data):
    proc = node[0]
    data.write(18, 0, b"f" * 100)
    proc.send_signal(signal.SIGSTOP)
    try:
        t0 = time.monotonic()
        with pytest.raises(TimeoutError):
            data.read(18, 0, 0, 100, timeout=1.0)
        assert time.monotonic() - t0 < 3
    finally:
        proc.send_signal(signal.SIGCONT)
    assert data.read(18, 0, 0, 100) == b"f" * 100


def test_faults_refused_when_disabled(tmp_path):
    proc, port, data_port = launch(tmp_path, name="dn4")
    try:
        with grpc.insecure_channel(f"127.0.0.1:{port}", options=GRPC_OPTIONS) as ch:
            stub = hedgefs_pb2_grpc.DataNodeStub(ch)
            for rpc, req in ((stub.SetFaults, pb.FaultConfig(stall=True)),
                             (stub.ClearFaults, pb.FaultClearRequest()),
                             (stub.GetFaults, pb.FaultClearRequest()),
                             (stub.Rot, pb.RotRequest(units=1))):
                assert code_of(rpc, req) == (
                    grpc.StatusCode.FAILED_PRECONDITION,
                    "fault injection is disabled on dn4 (start it with --enable-faults)")
            assert Data(data_port).write(1, 0, b"ok") == 2
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


def test_a_unit_is_written_once_and_is_the_unit_of_its_generation(data):
    """A WRITE of a stored unit is refused (its bytes stay); (group, index) of another generation
    is another unit, and a read of one generation never gets the other's bytes."""
    assert data.write(24, 1, b"first") == 5
    status, details = error_of(data.write, 24, 1, b"forged")
    assert status == "ALREADY_EXISTS" and "unit 24/1 generation 0 is stored already: a unit is written once" in details
    assert data.read(24, 1, 0, 5) == b"first"
    assert data.write(24, 1, b"other namespace", generation=77) == 15
    assert data.read(24, 1, 0, 5) == b"first" and data.read(24, 1, 0, 15, generation=77) == b"other namespace"
    assert error_of(data.read, 24, 1, 0, 5, generation=78)[0] == "NOT_FOUND"


def test_an_append_goes_on_at_the_units_length_and_a_stale_one_is_refused(data, stub):
    """APPEND (a replica of an open tail): bytes appended in place, visible to the next read;
    one at any other offset than the unit's length (a stale writer), or to a unit that was
    written (an EC unit: written once), is refused and changes nothing; the connection carries
    the next request either way."""
    assert data.append(26, 0, 0, b"head") == 4
    assert data.append(26, 0, 4, b"+one") == 8
    assert data.append(26, 0, 8, pattern_bytes(200_000, 3)) == 200_008
    assert data.read(26, 0, 0, 8) == b"head+one"
    assert data.read(26, 0, 8, 200_000) == pattern_bytes(200_000, 3)
    for stale in (4, 8, 300_000):
        status, details = error_of(data.append, 26, 0, stale, b"stale")
        assert status == "FAILED_PRECONDITION" and "holds 200008 bytes" in details
    assert data.read(26, 0, 199_990, 18) == pattern_bytes(200_000, 3)[-18:]
    assert error_of(data.append, 26, 1, 4, b"x")[0] == "NOT_FOUND"     # not stored: it grows only from 0
    assert error_of(data.append, 26, 0, 200_008, b"x", generation=5)[0] == "NOT_FOUND"
    assert data.append(26, 1, 0, b"new replica") == 11                   # an open tail's first bytes
    assert error_of(data.append, 26, 1, 0, b"second writer")[0] == "FAILED_PRECONDITION"
    assert data.read(26, 1, 0, 11) == b"new replica"
    assert data.write(26, 2, b"an EC cell") == 10
    status, details = error_of(data.append, 26, 2, 10, b"grown")
    assert status == "FAILED_PRECONDITION" and "not made by APPEND" in details
    assert data.read(26, 2, 0, 10) == b"an EC cell"
    with data.connect() as s:            # one connection, refused then served
        with pytest.raises(dt.TransferError):
            dt.append(s, 26, 0, 0, b"stale", generation=0)
        assert dt.append(s, 26, 0, 200_008, b"!", generation=0) == 200_009
        assert bytes(dt.read_range(s, 26, 0, 200_004, 5, generation=0)) == pattern_bytes(200_000, 3)[-4:] + b"!"
    assert state(stub).calls["AppendUnit"] >= 8


def closed_by_server(s: socket.socket) -> bool:
    s.settimeout(10)
    try:
        return s.recv(1) == b""
    except ConnectionResetError:
        return True


def unless_busy(fn, *args):
    """``fn``'s answer, the status of its refusal, or None if the DataNode was busy."""
    try:
        return fn(*args)
    except dt.Busy:
        return None
    except dt.TransferError as e:
        return e.status


def test_an_append_turned_away_busy_stores_nothing_and_closes_its_connection(data, stub):
    """An APPEND's bytes follow its request: when every --max-streams slot is held (four stalled
    reads), the DataNode answers BUSY in one line without reading them, so it closes the
    connection (the stream is out of step); the replica is not created."""
    data.write(28, 0, b"b" * 100)
    stub.SetFaults(pb.FaultConfig(stall=True))
    held = [data.connect() for _ in range(4)]
    try:
        for s in held:
            s.sendall(dt.pack_request(dt.OP_READ, 28, 0, 0, 100, generation=0))
        wait_until(lambda: state(stub).stalled_reads == 4, 10, "four reads to stall", interval=0.01)
        busy_before = state(stub).calls["busy"]
        with data.connect() as s:
            # the request alone: bytes left unread would make the close a reset, racing the answer
            s.sendall(dt.pack_request(dt.OP_APPEND, 28, 1, 0, 13, generation=0))
            with pytest.raises(dt.Busy) as e:
                dt.recv_response(s, "dn3")
            assert "4 streams" in e.value.message and "\n" not in e.value.message
            assert closed_by_server(s)
        assert state(stub).calls["busy"] == busy_before + 1
    finally:
        stub.SetFaults(pb.FaultConfig(stall=False))
        for s in held:
            s.close()
    # (a held read's slot frees once its last byte has gone out, maybe after its header reached us)
    assert wait_until(lambda: unless_busy(data.read, 28, 1, 0, 1), 10, "a free slot", interval=0.01) == "NOT_FOUND"
    assert wait_until(lambda: unless_busy(data.append, 28, 1, 0, b"a new replica"), 10, "a free slot",
                      interval=0.01) == 13   # the same APPEND, a slot free: stored


def test_an_append_longer_than_the_limit_is_refused_in_one_line_and_stores_nothing(data):
    """The client library refuses such an APPEND itself; a raw request reaches the server's check,
    which answers before reading the bytes (so it closes the connection)."""
    assert data.append(29, 0, 0, b"head") == 4
    too_long = dt.MAX_APPEND_BYTES + 1
    with data.connect() as s:
        s.sendall(dt.pack_request(dt.OP_APPEND, 29, 0, 4, too_long, generation=0))   # the request alone, as above
        status, message = error_of(dt.recv_response, s, "dn3")
        assert status == "INVALID_ARGUMENT" and "\n" not in message
        assert f"at most {dt.MAX_APPEND_BYTES} bytes, not {too_long}" in message
        assert closed_by_server(s)
    assert data.read(29, 0, 0, 4) == b"head"
    assert error_of(data.read, 29, 0, 0, 5)[0] == "OUT_OF_RANGE"   # still 4 bytes
    assert data.append(29, 0, 4, b"+one") == 8


def test_the_client_librarys_append_grows_a_replica_and_is_refused_when_stale(data):
    """client/unit_writes.append_unit (asyncio, pooled connections): the library's side of OP_APPEND."""
    import asyncio

    from hedgefs.client.transport import DataNodeClient
    from hedgefs.client.unit_writes import append_unit

    address = f"127.0.0.1:{data.port}"
    assert data.append(27, 0, 0, b"") == 0

    async def run():
        client = DataNodeClient()
        lengths = [await append_unit(client, address, 27, 0, n * 4096, pattern_bytes(4096, n), generation=0)
                   for n in range(5)]
        with pytest.raises(dt.TransferError) as stale:
            await append_unit(client, address, 27, 0, 4096, b"late", generation=0)
        again = await append_unit(client, address, 27, 0, 5 * 4096, b"!", generation=0)   # the pool still serves
        return lengths, stale.value.status, again

    lengths, status, again = asyncio.run(run())
    assert lengths == [4096 * (n + 1) for n in range(5)] and status == "FAILED_PRECONDITION" and again == 20481
    assert data.read(27, 0, 0, 20481) == b"".join(pattern_bytes(4096, n) for n in range(5)) + b"!"


def test_a_store_killed_at_any_step_of_an_append_keeps_the_old_length_or_the_new_one(tmp_path):
    """Each step of an append in its own process, SIGKILLed there by the debug knob; opening the
    store again (as the restarted DataNode) finds the unit whole: its old bytes, or old + new."""
    from hedgefs.datanode.storage import BlockStore

    old, more = pattern_bytes(100_000, 1), pattern_bytes(70_001, 2)
    script = ("import sys; from hedgefs.datanode.storage import BlockStore; "
              "s = BlockStore(sys.argv[1], crash_at=sys.argv[2]); "
              "s.append(5, 2, 100_000, open(sys.argv[3], 'rb').read(), generation=9)")
    (tmp_path / "more").write_bytes(more)
    steps = ("block-synced", "sidecar-synced", "sidecar-renamed", "dir-synced")
    procs = {}
    for step in steps:
        store = BlockStore(tmp_path / step)
        assert store.append(5, 2, 0, old, generation=9) == len(old)   # an open tail's replica
        store.close()
        procs[step] = subprocess.Popen([sys.executable, "-c", script, str(tmp_path / step), step, str(tmp_path / "more")])
    outcomes = {}
    for step, proc in procs.items():
        assert proc.wait(30) == -signal.SIGKILL
        outcomes[step] = _what_survived(tmp_path / step, old, old + more)
    assert outcomes == {"block-synced": "old", "sidecar-synced": "old", "sidecar-renamed": "new", "dir-synced": "new"}


def test_a_second_datanode_on_the_same_data_dir_refuses_to_start(tmp_path):
    proc, _port, _data_port = launch(tmp_path, name="dn1")
    try:
        cmd = [sys.executable, "-m", "hedgefs", "datanode", "--id", "dn99", "--data-dir", str(tmp_path / "dn1"),
               "--namenode", "127.0.0.1:1", "--port", "0"]
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
        assert r.returncode == 1
        assert r.stderr == (f"hedgefs: datanode dn99: data dir {tmp_path / 'dn1'} is in use by another "
                            f"DataNode (pid {proc.pid})\n")
    finally:
        stop(proc)


def test_a_datanode_killed_at_any_step_of_a_write_keeps_no_unit_or_the_whole_new_one(tmp_path):
    """Each step of storage.COMMIT_STEPS in its own DataNode process (started together), which
    the debug knob SIGKILLs at that step of a write of unit 5/2 over its data port; then the data
    dir is opened again, as the restarted DataNode would. (A first write has no old version to
    remove: that step is reached only by a replace, below.)"""
    from hedgefs.datanode.storage import COMMIT_STEPS

    new = pattern_bytes(150_001, 2)
    steps = [s for s in COMMIT_STEPS if s != "old-removed"]
    procs = {step: launch(tmp_path, name=step, env={"HEDGEFS_DEBUG_CRASH_AT": step}, wait=False) for step in steps}
    outcomes = {}
    for step, (proc, port_file) in procs.items():
        proc, _port, data_port = wait_port(proc, port_file)
        with pytest.raises(ConnectionError):   # the DataNode died mid-commit: no answer
            Data(data_port).write(5, 2, new, generation=9)
        assert proc.wait(10) == -signal.SIGKILL
        proc.stdout.close()
        proc.stderr.close()
        outcomes[step] = _what_survived(tmp_path / step, None, new)
    assert outcomes == {"block-synced": "none", "sidecar-synced": "none", "block-renamed": "none",
                        "sidecar-renamed": "new", "dir-synced": "new"}


def test_a_store_killed_at_any_step_of_a_replace_keeps_the_old_unit_or_the_new_one(tmp_path):
    """The data port never replaces a unit (written once), but the store can (a repair onto a
    copy it holds): each step in its own process that opens the store with the debug knob and
    replaces unit 5/2, SIGKILLed at that step."""
    from hedgefs.datanode.storage import COMMIT_STEPS, BlockStore

    old, new = pattern_bytes(200_000, 1), pattern_bytes(150_001, 2)
    script = ("import sys; from hedgefs.datanode.storage import BlockStore; "
              "s = BlockStore(sys.argv[1], crash_at=sys.argv[2]); w = s.open_writer(5, 2, None, generation=9); "
              "data = open(sys.argv[3], 'rb').read(); w.write(data); w.commit(len(data))")
    (tmp_path / "new").write_bytes(new)
    procs = {}
    for step in COMMIT_STEPS:
        store = BlockStore(tmp_path / step)
        assert store.append(5, 2, 0, old, generation=9) == len(old)   # an open tail's replica
        store.close()
        procs[step] = subprocess.Popen([sys.executable, "-c", script, str(tmp_path / step), step, str(tmp_path / "new")])
    outcomes = {}
    for step, proc in procs.items():
        assert proc.wait(30) == -signal.SIGKILL
        outcomes[step] = _what_survived(tmp_path / step, old, new)
    assert outcomes == {"block-synced": "old", "sidecar-synced": "old", "block-renamed": "old",
                        "sidecar-renamed": "new", "dir-synced": "new", "old-removed": "new"}


def _what_survived(data_dir, old, new) -> str:
    from hedgefs.datanode.storage import BlockStore

    store = BlockStore(data_dir)
    try:
        files = sorted(p.name for p in data_dir.rglob("*") if p.is_file() and p.suffix in (".blk", ".crc"))
        if not store.has(5, 2, generation=9):
            assert files == [], files           # nothing half-written left behind
            return "none"
        data = b"".join(store.read(5, 2, 0, store.length(5, 2, generation=9), generation=9))   # every chunk verified
        assert len(files) == 2, files   # one version, no leftovers in blocks/ or tmp/
        return "new" if data == new else "old" if data == old else "neither"
    finally:
        store.close()


def pattern_bytes(n: int, seed: int) -> bytes:
    return bytes((i * 7 + seed * 13 + (i >> 9)) % 256 for i in range(n))
