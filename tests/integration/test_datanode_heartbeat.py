"""The DataNode protocol from the DataNode's side, against a small recording NameNode servicer.

Register -> block report -> heartbeats; periodic block reports; reregister on request; delete and
repair commands from heartbeat replies (the repair reads real in-process DataNodes and ends in
UnitStored); checksum failures reported as bad units; an unreachable NameNode logged once.
"""

import logging
import os
import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import grpc
import pytest

from conftest import wait_until
from hedgefs.datanode.server import DataNode
from hedgefs.datanode.storage import BlockStore
from hedgefs.ec.codec import get_codec
from hedgefs.ec.layout import cell_length, num_stripes
from hedgefs.ec.policy import parse_policy
from hedgefs.proto import GRPC_OPTIONS
from hedgefs.proto import hedgefs_pb2 as pb
from hedgefs.proto import hedgefs_pb2_grpc
from hedgefs.proto.datatransfer import ChecksumMismatch, TransferError, read_range


class RecordingNameNode(hedgefs_pb2_grpc.NameNodeServicer):
    def __init__(self):
        self.lock = threading.Lock()
        self.events: list[tuple] = []
        self.commands: dict[str, list[pb.Command]] = {}   # by DataNode id
        self.reregister = False
        self.fail: grpc.StatusCode | None = None   # every call refused with this code
        self.locations: dict[str, tuple[str, str]] = {}   # DataNode id -> (host_id, rack) it registered with

    def _record(self, *event):
        with self.lock:
            self.events.append(event)

    def of(self, kind):
        with self.lock:
            return [e for e in self.events if e[0] == kind]

    def RegisterDataNode(self, request, context):
        if self.fail:
            context.abort(self.fail, "refused by the test")
        self._record("register", request.datanode_id, request.address)
        with self.lock:
            self.locations[request.datanode_id] = (request.host_id, request.rack)
        return pb.RegisterResponse(cluster_id="CID-recording")

    def BlockReport(self, request, context):
        self._record("report", request.datanode_id,
                     sorted((u.group_id, u.index, u.length) for u in request.units))
        self._record("report-part", request.datanode_id, request.part, request.more, len(request.units))
        return pb.Empty()

    def Heartbeat(self, request, context):
        if self.fail:
            context.abort(self.fail, "refused by the test")
        self._record("heartbeat", request.datanode_id, request.used_bytes, request.units,
                     request.active_repairs)
        if request.stats.HasField("scrub"):
            self._record("scrub", request.datanode_id, request.stats.scrub.passes, request.stats.scrub.bad_units)
        with self.lock:
            commands = self.commands.pop(request.datanode_id, [])
            reregister, self.reregister = self.reregister, False
        return pb.HeartbeatResponse(commands=commands, reregister=reregister)

    def UnitStored(self, request, context):
        for u in request.units:
            self._record("stored", request.datanode_id, u.group_id, u.index, u.length)
        return pb.Empty()

    def ReportBadUnits(self, request, context):
        for u in request.units:
            self._record("bad", u.datanode_id, u.group_id, u.index, u.reason)
        return pb.Empty()


def start_namenode(port=0):
    nn = RecordingNameNode()
    server = grpc.server(ThreadPoolExecutor(8), options=GRPC_OPTIONS)
    hedgefs_pb2_grpc.add_NameNodeServicer_to_server(nn, server)
    port = server.add_insecure_port(f"127.0.0.1:{port}")
    server.start()
    return nn, server, port


@pytest.fixture
def namenode():
    nn, server, port = start_namenode()
    yield nn, f"127.0.0.1:{port}"
    server.stop(0)


def datanode(tmp_path, name, namenode_addr, **kw):
    kw = {"heartbeat_interval_s": 0.05, "fsync": False, **kw}
    dn = DataNode(datanode_id=name, port=0, data_dir=str(tmp_path / name),
                  namenode=namenode_addr, **kw)
    dn.start()
    return dn


def test_register_report_heartbeat_delete_reregister(tmp_path, namenode):
    nn, addr = namenode
    store = BlockStore(tmp_path / "dn1")
    w = store.open_writer(5, 2, 3, generation=0)
    w.write(b"abc")
    w.commit()
    store.close()
    dn = datanode(tmp_path, "dn1", addr, block_report_interval_s=3600)
    try:
        wait_until(lambda: nn.of("heartbeat"), 10, "a heartbeat at the NameNode")
        assert nn.events[0] == ("register", "dn1", dn.address)
        assert nn.events[1] == ("report", "dn1", [(5, 2, 3)])
        assert nn.of("heartbeat")[0] == ("heartbeat", "dn1", 3, 1, 0)

        with nn.lock:
            nn.commands["dn1"] = [
                pb.Command(delete_unit=pb.DeleteUnitCommand(group_id=5, index=2)),
                pb.Command(delete_unit=pb.DeleteUnitCommand(group_id=9, index=9))]
        wait_until(lambda: nn.of("heartbeat")[-1][2:4] == (0, 0), 10, "a heartbeat with no units left")
        assert dn.store.units() == []

        with nn.lock:
            nn.reregister = True
        wait_until(lambda: len(nn.of("register")) == 2, 10, "the second registration")
        wait_until(lambda: len(nn.of("report")) == 2, 10, "the block report after re-registering")
        assert nn.of("report")[1] == ("report", "dn1", [])
    finally:
        dn.stop()


def test_a_datanode_registers_its_host_and_rack(tmp_path, namenode):
    """--rack and --host-id reach the NameNode in the registration; without them the host is the
    one the DataNode is reached at and the rack HDFS's default. /health says both."""
    import urllib.request

    nn, addr = namenode
    placed = datanode(tmp_path, "dn1", addr, rack="/dc1/r2/", host_id="node7", http_port=0)
    plain = datanode(tmp_path, "dn2", addr)
    try:
        wait_until(lambda: len(nn.locations) == 2, 10, "both registrations")
        assert nn.locations == {"dn1": ("node7", "/dc1/r2"), "dn2": ("127.0.0.1", "/default-rack")}
        with urllib.request.urlopen(f"http://127.0.0.1:{placed.http_port}/health", timeout=10) as reply:
            assert "host node7 rack /dc1/r2" in reply.read().decode().splitlines()
    finally:
        placed.stop()
        plain.stop()


def test_a_large_block_report_goes_in_parts(tmp_path, namenode, monkeypatch):
    from hedgefs.datanode import heartbeat

    monkeypatch.setattr(heartbeat, "BLOCK_REPORT_PART", 2)
    nn, addr = namenode
    store = BlockStore(tmp_path / "dn1")
    for group in range(5):
        w = store.open_writer(group + 1, 0, 1, generation=0)
        w.write(b"x")
        w.commit()
    store.close()
    dn = datanode(tmp_path, "dn1", addr, block_report_interval_s=3600)
    try:
        wait_until(lambda: nn.of("heartbeat"), 10, "the DataNode's first heartbeat")
        assert nn.of("report-part") == [("report-part", "dn1", 0, True, 2), ("report-part", "dn1", 1, True, 2),
                                        ("report-part", "dn1", 2, False, 1)]
    finally:
        dn.stop()


def test_periodic_block_reports(tmp_path, namenode):
    nn, addr = namenode
    dn = datanode(tmp_path, "dn1", addr, block_report_interval_s=0.1)
    try:
        wait_until(lambda: len(nn.of("report")) >= 3, 10, "three block reports")
        assert len(nn.of("register")) == 1
    finally:
        dn.stop()


def test_damaged_unit_is_caught_by_the_reader_and_a_damaged_sidecar_is_reported(tmp_path, namenode):
    """The DataNode sends a unit's bytes without reading them: bad bytes on disk are the
    reader's to catch (end-to-end checksums, reported by the reader); a sidecar the DataNode
    cannot parse it sees itself, and reports."""
    nn, addr = namenode
    dn = datanode(tmp_path, "dn1", addr)
    try:
        for index in (3, 4):
            w = dn.store.open_writer(7, index, 100, generation=0)
            w.write(b"x" * 100)
            w.commit()
        path = dn.store.block_path(7, 3, generation=0)
        path.write_bytes(b"y" + path.read_bytes()[1:])
        sidecar = dn.store.block_path(7, 4, generation=0).with_suffix(".crc")
        sidecar.write_bytes(sidecar.read_bytes()[:-1])
        with socket.create_connection(("127.0.0.1", dn.data_port), timeout=10) as s:
            with pytest.raises(ChecksumMismatch) as e:
                read_range(s, 7, 3, 0, 100, where="dn1", generation=0)
            assert e.value.offset == 0
        with socket.create_connection(("127.0.0.1", dn.data_port), timeout=10) as s:
            with pytest.raises(TransferError) as e:
                read_range(s, 7, 4, 0, 100, where="dn1", generation=0)
            assert e.value.status == "DATA_LOSS"
        bad = wait_until(lambda: nn.of("bad"), 10, "a bad-unit report")
        assert bad == [("bad", "dn1", 7, 4, "checksum mismatch in unit 7/4 at offset 0")]
    finally:
        dn.stop()


def test_repair_command_rebuilds_and_reports_unit_stored(tmp_path, namenode):
    nn, addr = namenode
    policy = parse_policy("RS-3-2-4k")
    codec = get_codec(policy.k, policy.m)
    group_length = 7 * policy.stripe_data_size + 5000
    data = os.urandom(group_length)
    units = [bytearray() for _ in range(policy.units)]
    pos = 0
    for s in range(num_stripes(policy, group_length)):
        cells = []
        for u in range(policy.k):
            n = cell_length(policy, group_length, s, u)
            cells.append(data[pos:pos + n])
            pos += n
        for u, c in enumerate(list(cells) + [p.tobytes() for p in codec.encode(cells)]):
            units[u] += c
    sources = [datanode(tmp_path, f"dn{u + 1}", addr, heartbeat_interval_s=60) for u in (0, 1, 3)]
    target = datanode(tmp_path, "dn9", addr)
    try:
        for dn, u in zip(sources, (0, 1, 3)):
            w = dn.store.open_writer(50, u, len(units[u]), generation=0)
            w.write(bytes(units[u]))
            w.commit()
        cmd = pb.RepairUnitCommand(group_id=50, index=2, policy=policy.name,
                                   group_length=group_length,
                                   sources=[pb.UnitLocation(index=u, datanode_id=dn.datanode_id,
                                                    address=dn.address, data_address=dn.data_address)
                                            for dn, u in zip(sources, (0, 1, 3))])
        with nn.lock:
            nn.commands["dn9"] = [pb.Command(repair_unit=cmd)]
        stored = wait_until(lambda: nn.of("stored"), 10, "a unit-stored receipt")
        assert stored == [("stored", "dn9", 50, 2, len(units[2]))]
        got = b"".join(target.store.read(50, 2, 0, len(units[2]), generation=0))
        assert got == bytes(units[2])
    finally:
        for dn in sources + [target]:
            dn.stop(grace=0)


def test_unreachable_namenode_logged_once_then_recovers(tmp_path, caplog):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    caplog.set_level(logging.INFO, logger="hedgefs.datanode")
    dn = datanode(tmp_path, "dn1", f"127.0.0.1:{port}", heartbeat_interval_s=0.02)
    try:
        wait_until(lambda: "unreachable" in caplog.text, 10, "the unreachable log line")
        time.sleep(0.3)     # not a synchronisation: lets ~15 more beats fail
        assert caplog.text.count("unreachable") == 1
        nn, server, _ = start_namenode(port)
        try:
            wait_until(lambda: nn.of("heartbeat"), 10, "a heartbeat at the NameNode")
            assert nn.of("register")
            wait_until(lambda: "reachable again" in caplog.text, 10, "the reachable-again log line")
        finally:
            server.stop(0)
    finally:
        dn.stop()


def test_a_namenode_answering_errors_is_logged_apart_from_one_that_is_down(tmp_path, caplog):
    """The outage's line says how it fails; when it starts failing another way (the NameNode is
    back but refuses every call) that is logged too, once: not hidden behind "unreachable"."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    caplog.set_level(logging.INFO, logger="hedgefs.datanode")
    dn = datanode(tmp_path, "dn1", f"127.0.0.1:{port}", heartbeat_interval_s=0.02)
    try:
        wait_until(lambda: "UNAVAILABLE" in caplog.text, 10, "the unreachable log line")
        nn, server, _ = start_namenode(port)
        nn.fail = grpc.StatusCode.INTERNAL
        try:
            wait_until(lambda: "INTERNAL: refused by the test" in caplog.text, 10, "the changed failure logged")
            nn.fail = None
            wait_until(lambda: nn.of("heartbeat"), 10, "a heartbeat at the NameNode")
            wait_until(lambda: "reachable again" in caplog.text, 10, "the reachable-again log line")
        finally:
            server.stop(0)
        assert caplog.text.count("INTERNAL: refused by the test") == 1
    finally:
        dn.stop()


def test_a_written_unit_is_receipted_and_a_scrub_pass_finds_a_flipped_byte(tmp_path, namenode):
    nn, addr = namenode
    dn = datanode(tmp_path, "dn1", addr, scrub_interval_s=0.1, scrub_bandwidth_bps=0)
    try:
        from dn_support import Data

        assert Data(dn.data_port).write(9, 4, b"z" * 70_000, expected=70_000) == 70_000
        stored = wait_until(lambda: nn.of("stored"), 10, "a unit-stored receipt")
        assert stored == [("stored", "dn1", 9, 4, 70_000)]
        # a clean pass: nothing reported
        wait_until(lambda: any(e[2] >= 1 for e in nn.of("scrub")), 10, "a heartbeat counting a scrub pass")
        assert nn.of("bad") == []
        path = dn.store.block_path(9, 4, generation=0)
        raw = bytearray(path.read_bytes())
        raw[66_000] ^= 1                                                 # in the second 64 KiB chunk
        path.write_bytes(raw)
        bad = wait_until(lambda: nn.of("bad"), 10, "a bad-unit report")
        assert bad[0] == ("bad", "dn1", 9, 4, "scrub: checksum mismatch in unit 9/4 at offset 65536")
        # and the heartbeat says so
        wait_until(lambda: any(e[3] >= 1 for e in nn.of("scrub")), 10, "a heartbeat counting a scrub finding")
    finally:
        dn.stop()


def test_receipts_wait_while_the_namenode_is_away_and_go_when_it_is_back(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    dn = datanode(tmp_path, "dn1", f"127.0.0.1:{port}", block_report_interval_s=3600)
    try:
        dn.link.reports.retry_s = 0.05
        dn.link.unit_stored(3, 1, 0, 10)
        dn.link.report_bad_unit(3, 2, 0, "checksum mismatch")
        assert dn.link.reports.pending() == (1, 1)
        nn, server, _ = start_namenode(port)
        try:
            bad = wait_until(lambda: nn.of("bad"), 10, "a bad-unit report")
            assert bad == [("bad", "dn1", 3, 2, "checksum mismatch")]
            # the receipt names a unit this DataNode does not hold (nothing was written): not sent
            wait_until(lambda: dn.link.reports.pending() == (0, 0), 10, "no reports pending")
            assert nn.of("stored") == []
        finally:
            server.stop(0)
    finally:
        dn.stop()


def test_a_datanode_records_the_cluster_it_joins_and_refuses_a_namenode_of_another(tmp_path, namenode):
    nn, addr = namenode
    dn = datanode(tmp_path, "dn1", addr)
    try:
        wait_until(lambda: nn.of("heartbeat"), 10, "a heartbeat at the NameNode")
        assert "cluster_id=CID-recording" in (tmp_path / "dn1" / "VERSION").read_text().splitlines()
    finally:
        dn.stop()
    (tmp_path / "dn2").mkdir()
    (tmp_path / "dn2" / "VERSION").write_text("cluster_id=CID-elsewhere\n")
    refusals = []
    dn = DataNode(datanode_id="dn2", port=0, data_dir=str(tmp_path / "dn2"), namenode=addr,
                  heartbeat_interval_s=0.05, fsync=False)
    dn.on_fatal = refusals.append
    dn.start()
    try:
        wait_until(lambda: refusals, 10, "the DataNode to refuse the NameNode")
        assert refusals == [f"namenode {addr} is of cluster CID-recording; this DataNode's data dir belongs to "
                            f"cluster CID-elsewhere"]
        assert [e for e in nn.of("heartbeat") if e[1] == "dn2"] == []   # it never went on to heartbeat
        assert "cluster_id=CID-elsewhere" in (tmp_path / "dn2" / "VERSION").read_text().splitlines()
    finally:
        dn.stop()


def test_a_datanode_does_not_share_its_port_with_another_server(tmp_path, namenode):
    """gRPC servers set SO_REUSEPORT unless told not to: a DataNode started on a port another
    gRPC server holds would have shared it silently, the kernel handing some connections to the
    other. It refuses to start instead."""
    _, addr = namenode
    other = grpc.server(ThreadPoolExecutor(2))   # gRPC's defaults: SO_REUSEPORT on
    port = other.add_insecure_port("127.0.0.1:0")
    other.start()
    try:
        dn = DataNode(datanode_id="dn1", port=port, data_dir=str(tmp_path / "dn1"), namenode=addr, fsync=False)
        with pytest.raises(OSError, match=f"cannot listen on 127.0.0.1:{port}"):
            dn.start()
        dn.stop()
    finally:
        other.stop(0)
