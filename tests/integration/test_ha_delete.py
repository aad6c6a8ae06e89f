"""Deletes on etcd: a recursive delete is one journal record, however large the tree, gone at once
for every reader; its units are deleted on the DataNodes afterwards, also when the active dies
right after it (the new active learns them from the DataNodes' reports: units of groups the
namespace no longer has). Real processes, a real 3-member etcd.
"""

from etcd_support import etcd_cluster, prefix  # noqa: F401  (the fixture)
from ha_support import DataNodeProcess, NameNodeProcess, active_of, ids, missing, mkdirs, role, stat, stub, units_on_disk
from hedgefs.client.fs import FileSystem
from hedgefs.proto import hedgefs_pb2 as pb

from conftest import pattern, wait_until

BLOCK = 65536
NN_ARGS = ("--default-policy", "REPLICATE-3", "--block-size", str(BLOCK), "--etcd-max-txn-ops", "64")
KEEP = pattern(100_000, seed=245)


def test_a_recursive_delete_is_gone_at_once_and_its_units_go_after_a_kill_9_of_the_active(etcd_cluster, tmp_path):
    url = etcd_cluster.url(prefix("delete"))
    a = NameNodeProcess(tmp_path, "nn1", url, *NN_ARGS, env={"HEDGEFS_NAMENODE_CRASH": "after:Delete"}).start()
    b = None
    dns = []
    try:
        active_of([a])
        b = NameNodeProcess(tmp_path, "nn2", url, *NN_ARGS).start()
        wait_until(lambda: role(b.address) == f"standby:{a.address}", 15, "nn2 to be a standby naming nn1")
        dns = [DataNodeProcess(tmp_path, f"dn{i}", f"{a.address},{b.address}").start() for i in range(1, 4)]
        wait_until(lambda: sum(d.state == "live" for d in stub(a.address).Report(pb.Empty(), timeout=2).datanodes)
                   == 3, 30, "3 live DataNodes")
        with FileSystem(f"{a.address},{b.address}") as fs:
            fs.mkdir("/keep")
            fs.mkdir("/big/files", parents=True)
            fs.write_bytes("/keep/f", KEEP)
            for i in range(3):
                fs.write_bytes(f"/big/files/f{i}", pattern(4 * BLOCK, seed=i))
        mkdirs(a.address, [f"/big/dirs/d{i:03d}" for i in range(120)])
        purged = {g.id for i in range(3) for g in stat(a.address, f"/big/files/f{i}").groups}
        kept = {g.id for g in stat(a.address, "/keep/f").groups}
        assert purged and units_on_disk(tmp_path, purged)   # on the DataNodes' disks

        with FileSystem(f"{a.address},{b.address}") as fs:   # the client's retry reaches nn2 once nn1 is gone
            fs.delete("/big", recursive=True)
        a.proc.wait(30)   # HEDGEFS_NAMENODE_CRASH=after:Delete: kill -9 once the delete is durable, unanswered
        assert a.proc.returncode == -9, a.tail()
        active_of([b])
        assert missing(b.address, "/big")
        assert [e.path for e in stub(b.address).List(pb.ListRequest(path="/"), timeout=5).entries] == ["/keep"]
        # the deleted units' deletes reach the DataNodes (learnt from their reports to the new
        # active): no orphan left on disk, and /keep/f's units untouched
        wait_until(lambda: not units_on_disk(tmp_path, purged), 60, "the deleted units gone from the DataNodes",
                   detail=lambda: f"left on disk: {units_on_disk(tmp_path, purged)}")
        assert len(units_on_disk(tmp_path, kept)) == 3 * len(kept)   # REPLICATE-3
        with FileSystem(f"{b.address}") as fs:
            assert fs.read_bytes("/keep/f") == KEEP
            fs.mkdir("/big/again", parents=True)   # the name is free

        a.env.pop("HEDGEFS_NAMENODE_CRASH")
        a.start()
        wait_until(lambda: role(a.address) == f"standby:{b.address}", 30, "nn1 back as a standby")
    finally:
        for n in dns + [x for x in (b, a) if x]:
            n.stop()


def test_a_file_of_many_groups_is_written_deleted_and_overwritten(etcd_cluster, tmp_path):
    """A file of more groups than one etcd transaction held keys (20 groups of REPLICATE-3 at 64
    keys a Txn) was refused "do it in parts" when the namespace's rows were etcd's keys: now its
    Complete, its delete and an overwrite of it are one record each."""
    name = prefix("bigfile")
    a = NameNodeProcess(tmp_path, "nn1", etcd_cluster.url(name), *NN_ARGS).start()
    dns = []
    try:
        active_of([a])
        dns = [DataNodeProcess(tmp_path, f"dn{i}", a.address).start() for i in range(1, 4)]
        wait_until(lambda: sum(d.state == "live" for d in stub(a.address).Report(pb.Empty(), timeout=2).datanodes)
                   == 3, 30, "3 live DataNodes")
        size = 19 * 1048576 + 1000   # 20 groups: REPLICATE-3's block is one cell (1 MiB) however small --block-size
        new = pattern(size, seed=247)
        with FileSystem(a.address) as fs:
            fs.write_bytes("/keep", KEEP)
            for path in ("/deleted", "/replaced"):
                fs.write_bytes(path, pattern(size, seed=246))
            old = {p: {g.id for g in stat(a.address, p).groups} for p in ("/deleted", "/replaced")}
            assert all(len(groups) == 20 for groups in old.values()), old
            fs.delete("/deleted")
            assert missing(a.address, "/deleted")
            fs.write_bytes("/replaced", new, overwrite=True)
            assert fs.read_bytes("/replaced") == new
            gone = old["/deleted"] | old["/replaced"]
            assert not gone & {g.id for g in stat(a.address, "/replaced").groups}
            wait_until(lambda: not units_on_disk(tmp_path, gone), 60, "their units deleted on the DataNodes",
                       detail=lambda: f"left on disk: {units_on_disk(tmp_path, gone)}")
            assert fs.read_bytes("/keep") == KEEP and [e.path for e in fs.list("/")] == ["/keep", "/replaced"]
    finally:
        for n in dns + [a]:
            n.stop()
