"""DataNodes of an HA cluster: they report to every NameNode and obey only the active of the
highest epoch they have seen, kept in their data dir (datanode/epochs.py).

Two tiers. A real cluster (today's SQLite NameNode, real DataNode processes): a DataNode whose
data dir records HA epoch 7 refuses that NameNode's deletes (it sends epoch 0), keeps the unit,
logs and counts the refusal, serves reads, and still refuses after a restart. And the DataNode's
side of the protocol against two recording NameNode servicers of the test's (as in
test_datanode_heartbeat.py) that say the epochs and roles an HA NameNode will: until the real
HA NameNode lands (branch ha-nn) nothing else can send an epoch above 0.
"""

import re
import threading
import urllib.request
from concurrent.futures import ThreadPoolExecutor

import grpc
import pytest

from conftest import assert_one_line_error, client, fetch, pattern, run_cli, start_cluster, wait_until
from dn_support import Data
from hedgefs.datanode.epochs import EPOCH_FILE, EpochGuard
from hedgefs.datanode.server import DataNode
from hedgefs.namenode.blocks.blockmap import GroupCommit
from hedgefs.namenode.namesystem import Namesystem
from hedgefs.namenode.rpc.servicer import NameNodeServicer
from hedgefs.proto import GRPC_OPTIONS, hedgefs_pb2_grpc
from hedgefs.proto import hedgefs_pb2 as pb
from test_datanode_heartbeat import RecordingNameNode

DATA = pattern(300_000, seed=7)


def unit_files(cluster, dn: str, group_id: int) -> list:
    return sorted((cluster.root / dn / "blocks").glob(f"*/{group_id}_*.blk"))


def metric(cluster, dn: str, name: str, **labels) -> float:
    text = fetch(cluster, cluster.state["datanodes"][dn]["http_port"], "/metrics")
    want = "".join(f'(?=[^}}]*{k}="{v}")' for k, v in labels.items())
    found = re.search(rf"^{name}\{{{want}[^}}]*\}} (\S+)$", text, re.M)
    return float(found.group(1)) if found else -1.0


@pytest.fixture(scope="module")
def fenced(tmp_path_factory):
    """Three DataNodes, every file on all three (REPLICATE-3); dn1's data dir records epoch 7."""
    c = start_cluster(tmp_path_factory.mktemp("ha-datanode"), datanodes=3, policy="REPLICATE-3")
    try:
        c.kill("dn1")
        (c.root / "dn1" / EPOCH_FILE).write_text("7\n")
        c.restart("dn1")
        yield c
    finally:
        c.down()


def test_a_datanode_of_epoch_7_refuses_an_sqlite_namenodes_deletes_and_serves_reads(fenced):
    with client(fenced.namenode) as fs:
        fs.write_bytes("/keep", DATA)
        fs.write_bytes("/doomed", DATA)
        keep, doomed = fs.stat("/keep").groups[0].id, fs.stat("/doomed").groups[0].id
        for dn in ("dn1", "dn2", "dn3"):
            assert unit_files(fenced, dn, doomed), dn
        assert run_cli("rm", "/doomed", namenode=fenced.namenode).code == 0
        wait_until(lambda: not unit_files(fenced, "dn2", doomed) and not unit_files(fenced, "dn3", doomed), 30,
                   "dn2 and dn3 to delete their replicas")
        wait_until(lambda: metric(fenced, "dn1", "hedgefs_datanode_commands_refused_total", reason="no_ha") >= 1, 30,
                   "dn1 to count a refused command")
        assert unit_files(fenced, "dn1", doomed), "dn1 deleted a unit on the word of an epoch-0 NameNode"
        log = (fenced.root / "logs" / "dn1.log").read_text()
        line = next(ln for ln in log.splitlines() if "refused" in ln and "delete_unit" in ln)
        assert f"from namenode {fenced.namenode}: epoch 0, highest seen 7" in line and "SQLite" in line
        assert metric(fenced, "dn1", "hedgefs_datanode_namenode_epoch") == 7
        assert metric(fenced, "dn2", "hedgefs_datanode_commands_refused_total", reason="no_ha") == 0

        # Reads go on: dn1 serves its replica (the others are left out of the read).
        with fs.open("/keep") as f:
            assert f.submit(0, len(DATA), exclude=frozenset({"dn2", "dn3"})).result(timeout=60) == DATA
        assert fs.stats().per_datanode["dn1"]["unit_reads"] >= 1

        # The epoch is on disk: restarted, dn1 still refuses (the NameNode still owes it the delete).
        fenced.restart("dn1")
        assert (fenced.root / "dn1" / EPOCH_FILE).read_text().strip() == "7"
        assert metric(fenced, "dn1", "hedgefs_datanode_namenode_epoch") == 7
        assert run_cli("rm", "/keep", namenode=fenced.namenode).code == 0
        wait_until(lambda: not unit_files(fenced, "dn2", keep), 30, "dn2 to delete /keep's replica")
        wait_until(lambda: metric(fenced, "dn1", "hedgefs_datanode_commands_refused_total", reason="no_ha") >= 1, 30,
                   "the restarted dn1 to refuse again")
        assert unit_files(fenced, "dn1", keep) and unit_files(fenced, "dn1", doomed)


# ---------------------------------------------------------------------------- the protocol side

class HaNameNode(RecordingNameNode):
    """A recording NameNode servicer whose replies carry an epoch and a role, as an HA NameNode's do."""

    def __init__(self, epoch: int, active: bool):
        super().__init__()
        self.epoch, self.active = epoch, active

    def RegisterDataNode(self, request, context):
        reply = super().RegisterDataNode(request, context)
        reply.epoch, reply.active = self.epoch, self.active
        return reply

    def Heartbeat(self, request, context):
        if request.deleted:
            self._record("deleted", request.datanode_id, [(u.group_id, u.index, u.generation) for u in request.deleted])
        reply = super().Heartbeat(request, context)
        reply.epoch, reply.active = self.epoch, self.active
        return reply


class FrozenNameNode(HaNameNode):
    """A standby that takes receipts and never answers (SIGSTOPped, or a host gone without a
    reset: every call waits for its deadline), until ``thaw``."""

    def __init__(self, epoch: int, active: bool):
        super().__init__(epoch, active)
        self.thawed = threading.Event()

    def UnitStored(self, request, context):
        self._record("stored-frozen", request.datanode_id, [(u.group_id, u.index) for u in request.units])
        self.thawed.wait(60)
        return pb.Empty()


def ha_namenode(epoch: int, active: bool, kind=HaNameNode):
    nn = kind(epoch, active)
    server = grpc.server(ThreadPoolExecutor(8), options=GRPC_OPTIONS)
    hedgefs_pb2_grpc.add_NameNodeServicer_to_server(nn, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    return nn, server, f"127.0.0.1:{port}"


def delete(group_id: int, index: int, generation: int = 0) -> pb.Command:
    return pb.Command(delete_unit=pb.DeleteUnitCommand(group_id=group_id, index=index, generation=generation))


def test_a_datanode_reports_to_every_namenode_and_obeys_the_newest_active(tmp_path):
    new, new_server, new_addr = ha_namenode(epoch=5, active=True)
    old, old_server, old_addr = ha_namenode(epoch=3, active=True)   # deposed, and does not know it yet
    dn = DataNode(datanode_id="dn1", port=0, data_dir=str(tmp_path / "dn1"), namenode=f"{new_addr},{old_addr}",
                  heartbeat_interval_s=0.05, fsync=False, http_port=0)
    dn.start()
    try:
        for nn in (new, old):
            wait_until(lambda: nn.of("heartbeat"), 10, "heartbeats at both NameNodes")
            assert nn.of("register") and nn.of("report")
        assert (tmp_path / "dn1" / EPOCH_FILE).read_text() == "5\n"
        for group_id in (1, 2, 3):
            assert Data(dn.data_port).write(group_id, 0, b"u" * 1000, expected=1000) == 1000
        for nn in (new, old):   # receipts and bad-unit reports go to both
            wait_until(lambda: len(nn.of("stored")) == 3, 10, "three receipts at each NameNode")
        dn.report_bad_unit(3, 0, 0, "checksum mismatch")
        for nn in (new, old):
            wait_until(lambda: nn.of("bad"), 10, "the bad unit at each NameNode")

        with old.lock:
            old.commands["dn1"] = [delete(1, 0)]
        with new.lock:
            new.commands["dn1"] = [delete(2, 0)]
        wait_until(lambda: not dn.store.has(2, 0, generation=0), 10, "the active's delete")
        wait_until(lambda: refusals(dn, "stale_epoch") == 1, 10,
                   "the deposed active's delete refused")
        assert dn.store.has(1, 0, generation=0)

        new.active = False   # the epoch-5 NameNode steps down: its commands are refused too
        with new.lock:
            new.commands["dn1"] = [delete(3, 0)]
        wait_until(lambda: refusals(dn, "not_active") == 1, 10,
                   "the standby's delete refused")
        assert dn.store.has(3, 0, generation=0) and dn.store.has(1, 0, generation=0)
        text = fetch_metrics(dn)
        assert 'hedgefs_datanode_commands_refused_total{datanode="dn1",reason="stale_epoch"} 1.0' in text
        assert 'hedgefs_datanode_namenode_epoch{datanode="dn1"} 5.0' in text
    finally:
        dn.stop()
        new_server.stop(0)
        old_server.stop(0)
    assert EpochGuard(tmp_path / "dn1").highest == 5   # what a restart reads


def test_a_frozen_namenode_holds_up_neither_receipts_nor_deletes_to_the_other(tmp_path):
    """review-a M1: one DataNode-wide lock held across the UnitStored call made every receipt to
    the active wait for the frozen standby's 10 s deadline (probe: 9.5-10 s, a put refused). Each
    link waits on its own NameNode only: with the standby's receipt call stuck, a unit stored
    next is receipted to the active at once (within 2 s, far from the 10 s deadline), and a delete
    the active orders is done and told to it at once too."""
    active, active_server, active_addr = ha_namenode(epoch=5, active=True)
    frozen, frozen_server, frozen_addr = ha_namenode(epoch=5, active=False, kind=FrozenNameNode)
    dn = DataNode(datanode_id="dn1", port=0, data_dir=str(tmp_path / "dn1"),
                  namenode=f"{active_addr},{frozen_addr}", heartbeat_interval_s=0.05, fsync=False,
                  block_report_interval_s=3600)
    dn.start()
    try:
        for nn in (active, frozen):
            wait_until(lambda: nn.of("heartbeat"), 10, "heartbeats at both NameNodes")
        assert Data(dn.data_port).write(1, 0, b"u" * 1000, expected=1000) == 1000
        wait_until(lambda: frozen.of("stored-frozen"), 10, "the standby's receipt call under way (stuck)")
        wait_until(lambda: len(active.of("stored")) == 1, 10, "the first receipt at the active")
        assert Data(dn.data_port).write(2, 0, b"v" * 1000, expected=1000) == 1000
        wait_until(lambda: len(active.of("stored")) == 2, 2, "the next receipt at the active (not held up)")
        with active.lock:
            active.commands["dn1"] = [delete(2, 0)]
        wait_until(lambda: ("deleted", "dn1", [(2, 0, 0)]) in active.of("deleted"), 2,
                   "the active's delete done and told to it")
        assert not dn.store.has(2, 0, generation=0)
        assert frozen.of("stored-frozen") == [("stored-frozen", "dn1", [(1, 0)])]   # still the one call
    finally:
        frozen.thawed.set()
        dn.stop()
        active_server.stop(0)
        frozen_server.stop(0)


def test_a_delete_ordered_by_one_namenode_drops_the_location_at_the_other_with_its_next_heartbeat(tmp_path):
    """The race M1's lock was for: the receipt of a unit reaches NameNode A while B (the active)
    orders the unit deleted: A maps a copy that is gone, until the DataNode's next full report
    (here an hour away). Every delete is told to every NameNode, A's after its receipts: A, a real
    NameNode, drops the location with its next heartbeat."""
    # One cluster: A in B's (RecordingNameNode's) cluster id, else the DataNode, whichever it registers
    # with first, gives the other up as a NameNode of another cluster.
    nn_a = Namesystem(str(tmp_path / "nn-a"), default_policy="REPLICATE-1", default_block_size=4096,
                      min_replicas=1, cluster_id="CID-recording")
    a_server = grpc.server(ThreadPoolExecutor(8), options=GRPC_OPTIONS)
    hedgefs_pb2_grpc.add_NameNodeServicer_to_server(NameNodeServicer(nn_a), a_server)
    a_addr = f"127.0.0.1:{a_server.add_insecure_port('127.0.0.1:0')}"
    a_server.start()
    b, b_server, b_addr = ha_namenode(epoch=5, active=True)
    dn = DataNode(datanode_id="dn1", port=0, data_dir=str(tmp_path / "dn1"), namenode=f"{a_addr},{b_addr}",
                  heartbeat_interval_s=0.05, fsync=False, block_report_interval_s=3600)
    dn.start()
    try:
        wait_until(lambda: "dn1" in nn_a.manager.reported and b.of("heartbeat"), 10, "dn1 reported to both")
        created = nn_a.create("/f", policy="REPLICATE-1")
        group = nn_a.add_block_group(created.file_id)
        assert [u.datanode_id for u in group.units] == ["dn1"]
        assert Data(dn.data_port).write(group.id, 0, b"x" * 100, expected=100, generation=group.generation) == 100
        nn_a.complete(created.file_id, 100, [GroupCommit(group.id, 100, (0,))])   # on the receipt
        mapped = nn_a.blocks.get(group.id)
        assert nn_a.blocks.holder(mapped, 0) == "dn1"
        a_reports = []   # A's full reports from here on (the claim is that a heartbeat dropped the location)
        block_report = nn_a.block_report
        nn_a.block_report = lambda *args, **kwargs: (a_reports.append(args[0]), block_report(*args, **kwargs))[1]

        with b.lock:
            b.commands["dn1"] = [delete(group.id, 0, group.generation)]
        wait_until(lambda: nn_a.blocks.holder(mapped, 0) is None, 10, "A's location of the deleted unit dropped")
        assert not dn.store.has(group.id, 0, generation=group.generation)
        assert ("deleted", "dn1", [(group.id, 0, group.generation)]) in b.of("deleted")   # B is told too
        assert a_reports == [] and nn_a.blocks.deletes.count("dn1") == 0   # by a heartbeat
    finally:
        dn.stop()
        a_server.stop(0)
        b_server.stop(0)
        nn_a.close()


def refusals(dn, reason: str) -> float:
    return dn.metrics.registry.get_sample_value("hedgefs_datanode_commands_refused_total",
                                                {"datanode": dn.datanode_id, "reason": reason})


def fetch_metrics(dn) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{dn.http_port}/metrics", timeout=10) as r:
        return r.read().decode()


def test_the_epoch_guard_persists_only_an_actives_higher_epoch(tmp_path):
    refused = []
    guard = EpochGuard(tmp_path, on_refused=lambda reason, n: refused.append((reason, n)))
    assert guard.highest == 0 and guard.admit("nn0", 0, False, [delete(1, 0)])   # no HA: obeyed as always
    assert not (tmp_path / EPOCH_FILE).exists()
    assert guard.saw("standby", 9, False) == 0                # a standby's word raises nothing
    assert guard.admit("nn1", 4, True, [delete(1, 0), delete(2, 0)]) == [delete(1, 0), delete(2, 0)]
    assert (tmp_path / EPOCH_FILE).read_text() == "4\n"
    assert guard.admit("nn1", 3, True, [delete(1, 0)]) == []
    assert guard.admit("nn0", 0, True, [delete(1, 0)]) == []
    assert refused == [("stale_epoch", 1), ("no_ha", 1)]
    assert EpochGuard(tmp_path).highest == 4


def test_a_bad_epoch_file_or_namenode_list_stops_the_datanode_in_one_line(tmp_path):
    (tmp_path / "dn").mkdir()
    (tmp_path / "dn" / EPOCH_FILE).write_text("seven\n")
    bad_file = run_cli("datanode", "--id", "dn1", "--port", "0", "--data-dir", str(tmp_path / "dn"),
                       "--namenode", "127.0.0.1:1", timeout=60)
    assert_one_line_error(bad_file, "does not hold an epoch")
    assert bad_file.code == 2
    bad_list = run_cli("datanode", "--id", "dn1", "--port", "0", "--data-dir", str(tmp_path / "dn2"),
                       "--namenode", "127.0.0.1:1,,127.0.0.1:2", timeout=60)
    assert_one_line_error(bad_list, "an empty entry")
    assert bad_list.code == 2
