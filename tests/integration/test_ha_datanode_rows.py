"""A DataNode's calls whose changes grow with its units, on etcd, where one change holds a few
hundred rows (here 27: --etcd-max-txn-ops 64): receipts (UnitStored), deletes confirmed in a
heartbeat, and a full block report. Each was one change: past the limit it was refused as
"do it in parts", the DataNode sent the same call again for ever, and a heartbeat that carried
the confirmations of a big delete kept failing, so no command reached that DataNode again (seen
as 12 units left on a DataNode's disk in test_ha_purge). Now they go in parts.

A real NameNode process on a real 3-member etcd; the DataNodes are simulated through the real
RPCs (as `hedgefs bench namenode-fleet` does), so the test can say exactly how many units each
call carries.
"""

import pytest
from etcd_support import etcd_cluster, prefix  # noqa: F401  (the fixture)
from ha_support import NameNodeProcess, active_of, ids, stub

from hedgefs.namenode import retry_cache
from hedgefs.namenode.datanode_protocol import DELETE_TTL_S
from hedgefs.namenode.db import TooLarge
from hedgefs.namenode.election import Lease, leader_value
from hedgefs.namenode.errors import NotFound
from hedgefs.namenode.etcd_meta import EtcdMeta, parse_meta_url
from hedgefs.namenode.ha import EtcdBackend
from hedgefs.namenode.namesystem import Namesystem
from hedgefs.proto import hedgefs_pb2 as pb
from hedgefs.s3.multipart import TOO_LARGE

from conftest import wait_until
from nn_support import FakeClock, add_datanodes, generation, heartbeat_all, write_file

GROUPS = 30   # units per DataNode: 30 receipts, 30 confirmations, 30 confirmed by a report (a row each)
FAKES = ("sim0", "sim1", "sim2")
BLOCK = 1 << 20   # REPLICATE-3: a block is one cell (1 MiB), however small --block-size
NN_ARGS = ("--default-policy", "REPLICATE-3", "--block-size", "65536", "--etcd-max-txn-ops", "64",
           "--dead-interval-s", "120")


def _pending(nn: str) -> dict[str, int]:
    return {d.id: d.pending_deletes for d in stub(nn).Report(pb.Empty(), timeout=10).datanodes}


def _heartbeat(nn: str, dn: str, deleted=()) -> list:
    reply = stub(nn).Heartbeat(pb.HeartbeatRequest(datanode_id=dn, deleted=list(deleted)), timeout=10)
    return [c.delete_unit for c in reply.commands if c.WhichOneof("command") == "delete_unit"]


def test_receipts_confirmed_deletes_and_a_report_of_more_units_than_one_etcd_change_holds(etcd_cluster, tmp_path):
    nn = NameNodeProcess(tmp_path, "nn1", etcd_cluster.url(prefix("dnrows")), *NN_ARGS).start()
    try:
        active_of([nn])
        s = stub(nn.address)
        for i, dn in enumerate(FAKES):
            s.RegisterDataNode(pb.RegisterRequest(datanode_id=dn, address=f"127.0.0.1:{9000 + i}",
                                                  data_address=f"127.0.0.1:{9100 + i}"), timeout=10)
            s.BlockReport(pb.BlockReportRequest(datanode_id=dn), timeout=10)
        created = s.Create(pb.CreateRequest(path="/f", client_name="test"), timeout=10, metadata=ids())
        groups = [s.AddBlockGroup(pb.AddBlockGroupRequest(file_id=created.file_id), timeout=10, metadata=ids())
                  for _ in range(GROUPS)]
        held = {dn: [pb.StoredUnit(group_id=g.id, index=u.index, generation=g.generation, length=BLOCK)
                     for g in groups for u in g.units if u.datanode_id == dn] for dn in FAKES}
        assert all(len(units) == GROUPS for units in held.values()), {d: len(u) for d, u in held.items()}

        # receipts: 30 in one call (was: refused, "this change touches 30 rows")
        for dn in FAKES:
            s.UnitStored(pb.UnitStoredRequest(datanode_id=dn, units=held[dn]), timeout=10)
        s.Complete(pb.CompleteRequest(file_id=created.file_id, length=GROUPS * BLOCK,
                                      groups=[pb.GroupCommit(group_id=g.id, length=BLOCK, stored_units=[0, 1, 2])
                                              for g in groups]), timeout=10, metadata=ids())
        assert sum(g.length for g in s.GetFileInfo(pb.PathRequest(path="/f"), timeout=10).groups) == GROUPS * BLOCK

        s.Delete(pb.DeleteRequest(path="/f"), timeout=10, metadata=ids())
        wait_until(lambda: all(n == GROUPS for dn, n in _pending(nn.address).items() if dn in FAKES), 30,
                   "the deleted file's units queued for deletion on every DataNode",
                   detail=lambda: _pending(nn.address))

        # a heartbeat confirms 30 deletes at once (was: refused, for ever: the DataNode died)
        told = {(c.group_id, c.index, c.generation) for c in _heartbeat(nn.address, "sim0")}
        assert told == {(u.group_id, u.index, u.generation) for u in held["sim0"]}
        _heartbeat(nn.address, "sim0", deleted=held["sim0"])
        # a full report without the units confirms the other 30 (was: refused, "touches 30 rows")
        s.BlockReport(pb.BlockReportRequest(datanode_id="sim1"), timeout=10)
        assert {dn: n for dn, n in _pending(nn.address).items() if dn in FAKES} == {"sim0": 0, "sim1": 0, "sim2": 30}
    finally:
        nn.stop()


@pytest.fixture
def etcd_nn(etcd_cluster, tmp_path):
    """The NameNode's Namesystem on a real etcd (as ha.py opens it for an active), a fake clock."""
    meta = EtcdMeta(parse_meta_url(etcd_cluster.url(prefix("inproc"))))
    lease = Lease(meta, ttl_s=30)
    epoch, _ = meta.campaign(leader_value("127.0.0.1:1", ""), lease.id)
    clock = FakeClock()
    nn = Namesystem(str(tmp_path / "nn"), default_policy="REPLICATE-3", clock=clock, wall_clock=clock,
                    lease_timeout_s=60, backend=EtcdBackend(meta, epoch, lambda why: None, max_keys=64),
                    db_file="view.db")
    try:
        yield nn, clock, meta
    finally:
        nn.close()
        lease.stop()
        meta.close()


def _remember(nn, name: str) -> None:
    retry_cache.remember(nn.db, ("client", name, "Mkdir"), None, nn.wall_ms())


def _remembered(nn) -> set[str]:
    return {r[0] for r in nn.db.query("SELECT call_id FROM retry_cache")}


def test_the_monitor_expires_more_deletes_retry_entries_and_leases_than_one_etcd_change_holds(etcd_nn):
    """A backlog expires at once (10 minutes after a big delete, the deletes a dead DataNode never
    confirmed; the retry cache's entries of a busy minute), and a dead writer's file of many groups
    is abandoned: one change of each was refused, and so was every monitor pass after it (no repair
    planned, no lease expired)."""
    nn, clock, meta = etcd_nn
    with nn._lock:
        nn.db.each_in_changes(range(GROUPS), lambda i: nn.blocks.queue_delete("gone", i, 0, 1))
        nn.db.each_in_changes(range(GROUPS), lambda i: _remember(nn, f"call{i}"))
    add_datanodes(nn, 3)
    dead_writer = nn.create("/big")
    big = {nn.add_block_group(dead_writer.file_id).id for _ in range(10)}   # 10 groups: 111 rows to remove
    assert nn.blocks.pending_delete_counts() == {"gone": GROUPS}
    clock.advance(DELETE_TTL_S + 1)   # past the retry cache's TTL (as long) and the lease (60 s) too
    heartbeat_all(nn)
    nn.tick()
    nn.db.wait_durable(nn.db.applied)
    assert nn.blocks.pending_delete_counts() == {}
    assert _remembered(nn) == set()
    with pytest.raises(NotFound):   # abandoned: detached at once, then purged
        nn.complete(dead_writer.file_id, 0, [])
    nn.abandon(dead_writer.file_id)   # the writer giving up late: nothing to do, no error
    _purge_all(nn)
    assert not big & {g[0] for g in nn.db.query("SELECT id FROM groups")}
    assert sum(nn.blocks.pending_delete_counts().values()) == 30   # the big file's units, on 3 DataNodes
    _, items = meta.snapshot()   # etcd has the expiries too
    assert not [rel for rel, _ in items if rel.startswith(("t/pending_deletes/gone/", "t/retry_cache/"))]
    assert [rel for rel, _ in items if rel.startswith("t/pending_deletes/")]   # (the keys it checks for)


def test_a_part_too_large_for_one_change_is_halved_and_an_item_too_large_alone_is_refused(etcd_nn):
    """each_in_changes with items of 10 rows: its parts (6 items) are too large, 3 are too, 1 fits;
    an item of 30 rows fits no change: refused, and the parts before it stay done."""
    nn, _clock, _meta = etcd_nn

    def rows(item: tuple[str, int]) -> str:
        name, n = item
        for i in range(n):
            _remember(nn, f"{name}-{i}")
        return name

    with nn._lock:
        assert nn.db.each_in_changes([(f"a{i}", 10) for i in range(7)], rows) == [f"a{i}" for i in range(7)]
        assert _remembered(nn) == {f"a{i}-{j}" for i in range(7) for j in range(10)}
        with pytest.raises(TooLarge, match=TOO_LARGE):   # (the words the S3 gateway recognises)
            nn.db.each_in_changes([("b0", 10), ("b1", 30), ("b2", 10)], rows)
        assert {r for r in _remembered(nn) if r.startswith("b")} == {f"b0-{j}" for j in range(10)}


def _purge_all(nn) -> None:
    for _ in range(100):
        if nn.purge_step() == (0, 0):
            nn.db.wait_durable(nn.db.applied)
            return
    pytest.fail("the purge did not end in 100 steps")


def test_a_file_whose_groups_owe_surplus_deletes_is_deleted_or_replaced_however_many_it_owes(etcd_nn):
    """Removing a file queues a delete of each unit and makes its groups' earlier deletes plain:
    rows the estimate deciding between removing a file at once and detaching it left out, and so
    did the purge's. A file of one group whose surplus copies on 7 DataNodes are owed 21 deletes
    (a returned DataNode's, an over-eager repair's) was estimated at 12 rows (19 allowed) and
    touched 33 of the 27 one change may hold: its delete was refused for ever ("do it in parts");
    a file a Complete replaced was detached (a smaller allowance), and then every purge step of it
    failed. Now the delete detaches it too, and the purge makes the held-back deletes plain in a
    change of their own first."""
    nn, _clock, _meta = etcd_nn
    add_datanodes(nn, 10)
    for path in ("/owes", "/replaced"):
        write_file(nn, path, 1000)
        (group,) = nn.file_info(path).groups
        extra = sorted({f"dn{i}" for i in range(1, 11)} - {u.datanode_id for u in group.units})
        outcomes = [nn.unit_stored(dn, group.id, i, group.generation) for dn in extra for i in range(3)]
        assert outcomes == ["stale"] * 21
    nn.delete("/owes")
    with pytest.raises(NotFound):
        nn.file_info("/owes")
    write_file(nn, "/replaced", 2000, overwrite=True)
    assert sum(g.length for g in nn.file_info("/replaced").groups) == 2000
    write_file(nn, "/rs", 1000, policy="RS-6-3-1024k")   # 9 units: a group costs more than a change,
    nn.delete("/rs")                                      # by the purge's estimate, with nothing held back
    _purge_all(nn)
    assert [tuple(r) for r in nn.db.query("SELECT id FROM groups")] == [(nn.file_info("/replaced").groups[0].id,)]


def test_a_concat_over_a_file_too_large_for_one_change_detaches_it(etcd_nn):
    """A concat replacing a file (the S3 gateway's multipart Complete over an existing object)
    removed the old file inline: one of 4 groups made the change 32 rows of the 27 it may hold, and
    the concat was refused for ever. It is detached now, as a Complete replacing it would be."""
    nn, _clock, _meta = etcd_nn
    add_datanodes(nn, 3)
    write_file(nn, "/part", 1000)
    block = nn.file_info("/part").entry.block_size
    write_file(nn, "/target", 4 * block)
    assert len(nn.file_info("/target").groups) == 4
    nn.concat("/target", ["/part"], overwrite=True)
    assert sum(g.length for g in nn.file_info("/target").groups) == 1000
    _purge_all(nn)
    assert nn.db.query("SELECT COUNT(*) FROM groups")[0][0] == 1
