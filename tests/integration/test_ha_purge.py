"""Recursive delete on etcd by detach-and-purge (namenode/purge.py): the tree goes in one
transaction, however large, and is emptied in the background, and a new active finishes a purge
the old one did not (kill -9 of the active mid-purge). Real processes, a real 3-member etcd.
"""

import grpc

from etcd_support import etcd_cluster, prefix  # noqa: F401  (the fixture)
from ha_support import (DataNodeProcess, NameNodeProcess, active_of, ids, missing, mkdirs, role, stat, stub,
                        units_on_disk)
from hedgefs.client.fs import FileSystem
from hedgefs.proto import hedgefs_pb2 as pb

from conftest import pattern, wait_until

BLOCK = 65536
# 64 keys a Txn: a change may touch (64-8)//4 = 14 rows (a REPLICATE-3 group costs 11: one group
# a change; each file below is one group); the tree below has ~130 inodes: tens of changes
NN_ARGS = ("--default-policy", "REPLICATE-3", "--block-size", str(BLOCK), "--etcd-max-txn-ops", "64")
KEEP = pattern(100_000, seed=245)


def _rows(etcd_cluster, name: str, table: str) -> int:
    return sum(f"/{name}/t/{table}/" in k for k in etcd_cluster.keys(f"/{name}/t/{table}/"))


def test_a_recursive_delete_detaches_at_once_and_a_new_active_finishes_the_purge(etcd_cluster, tmp_path):
    name = prefix("purge")
    url = etcd_cluster.url(name)
    a = NameNodeProcess(tmp_path, "nn1", url, *NN_ARGS, env={"HEDGEFS_NAMENODE_CRASH": "purge:3"}).start()
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
        inodes_before, groups_before = _rows(etcd_cluster, name, "inodes"), _rows(etcd_cluster, name, "groups")
        groups_kept = len(stat(a.address, "/keep/f").groups)
        purged = {g.id for i in range(3) for g in stat(a.address, f"/big/files/f{i}").groups}
        kept = {g.id for g in stat(a.address, "/keep/f").groups}
        assert purged and units_on_disk(tmp_path, purged)   # on the DataNodes' disks

        stub(a.address).Delete(pb.DeleteRequest(path="/big", recursive=True), timeout=10, metadata=ids())
        # gone at once, for every reader (the standby once its view has the change); nn1 may already
        # have killed itself (its purge starts within a second and dies on its 3rd change), but while
        # it answers, it answers so
        try:
            assert missing(a.address, "/big")
            assert [e.path for e in stub(a.address).List(pb.ListRequest(path="/"), timeout=5).entries] == ["/keep"]
        except grpc.RpcError as err:
            if err.code() != grpc.StatusCode.UNAVAILABLE:
                raise
        wait_until(lambda: missing(b.address, "/big"), 10, "/big gone on nn2")
        assert [e.path for e in stub(b.address).List(pb.ListRequest(path="/"), timeout=5).entries] == ["/keep"]

        a.proc.wait(30)   # HEDGEFS_NAMENODE_CRASH=purge:3: kill -9 after its 3rd purge change
        assert a.proc.returncode == -9, a.tail()
        # mid-purge: some of its groups gone, most of the tree (120 directories) still in etcd
        left, groups_left = _rows(etcd_cluster, name, "inodes"), _rows(etcd_cluster, name, "groups")
        assert groups_kept <= groups_left < groups_before and 3 < left <= inodes_before, \
            (groups_left, groups_before, left, inodes_before)

        active_of([b])
        # the new active finds the detached tree in etcd and empties it: root, /keep and /keep/f left
        wait_until(lambda: _rows(etcd_cluster, name, "inodes") == 3, 60, "nn2 to finish the purge",
                   detail=lambda: f"{_rows(etcd_cluster, name, 'inodes')} inodes in etcd")
        assert _rows(etcd_cluster, name, "groups") == groups_kept
        # the purged units' deletes reach the DataNodes (those queued by the old active as well):
        # no orphan left on disk, and /keep/f's units untouched
        wait_until(lambda: not units_on_disk(tmp_path, purged), 60, "the purged units deleted on the DataNodes",
                   detail=lambda: f"left on disk: {units_on_disk(tmp_path, purged)}")
        assert len(units_on_disk(tmp_path, kept)) == 3 * len(kept)   # REPLICATE-3
        with FileSystem(f"{b.address}") as fs:
            assert fs.read_bytes("/keep/f") == KEEP
            fs.mkdir("/big/again", parents=True)   # the name is free
        assert "purged every tree detached by a recursive delete" in open(b.log_path).read()

        a.env.pop("HEDGEFS_NAMENODE_CRASH")
        a.start()
        wait_until(lambda: role(a.address) == f"standby:{b.address}", 30, "nn1 back as a standby")
    finally:
        for n in dns + [x for x in (b, a) if x]:
            n.stop()


def test_a_tree_whose_purge_fails_backs_off_logged_once_and_the_others_go_on(tmp_path, caplog):
    """A purge step that fails deterministically (a bug, not the store) must not block the
    other detached trees, nor be retried every second with a traceback forever."""
    import logging

    from hedgefs.namenode import purge
    from nn_support import FakeClock, add_datanodes, make_namenode, write_file

    nn = make_namenode(tmp_path / "nn", FakeClock())
    add_datanodes(nn, 6)
    for name in ("bad", "good"):
        nn.mkdir(f"/{name}/sub", parents=True)
        write_file(nn, f"/{name}/sub/f", 4096)
    bad_file = nn.file_info("/bad/sub/f")
    bad_groups = {g.id for g in bad_file.groups}
    with nn._lock, nn.db.tx():   # detach both, as a recursive delete on etcd does
        for name in ("bad", "good"):
            nn.ns.delete(f"/{name}", True, nn.blocks.forget_files, detach_over=0, detach_trees_over=1)
    assert len(purge.detached(nn.db)) == 2

    forget, attempts = nn.blocks._forget_groups, []

    def broken(groups):   # a bug in the bad tree's groups only
        if {g.id for g in groups} & bad_groups:
            attempts.append(1)
            raise ValueError("a bug")
        forget(groups)

    nn.blocks._forget_groups = broken
    purger = purge.Purger(nn, interval_s=0.01, max_backoff_s=0.2)

    def under_lock(read):   # the purger writes on the NameNode's connection: read as the NameNode does
        with nn._lock:
            return read()

    caplog.set_level(logging.DEBUG, "hedgefs.namenode")
    purger.start()
    try:
        wait_until(lambda: under_lock(lambda: len(purge.detached(nn.db)) == 1) and len(attempts) >= 3, 20,
                   "the good tree purged, the bad one tried again")
        assert under_lock(lambda: nn.db.one("SELECT COUNT(*) FROM inodes")[0]
                          == 1 + len(_subtree(nn, purge.detached(nn.db)[0])))
        tracebacks = [r for r in caplog.records if r.exc_info]
        assert len(tracebacks) == 1 and "a bug" in str(tracebacks[0].exc_info[1]), tracebacks
        backoffs = [b for _, b in purger.failing.values()]
        assert backoffs and max(backoffs) <= 0.2
        nn.blocks._forget_groups = forget   # fixed (say, by an upgrade): the bad tree goes too
        wait_until(lambda: not under_lock(lambda: purge.detached(nn.db)), 20, "the bad tree purged once it can be")
        assert not purger.failing
        assert under_lock(lambda: nn.db.one("SELECT COUNT(*) FROM inodes")[0]) == 1   # the root alone
    finally:
        purger.stop()
        nn.close()


def _subtree(nn, top: int) -> list:
    return nn.db.query("WITH RECURSIVE sub(id) AS (SELECT ? UNION ALL SELECT i.id FROM inodes i JOIN sub "
                       "ON i.parent = sub.id) SELECT id FROM sub", (top,))


def test_a_file_too_large_for_one_transaction_is_written_deleted_and_overwritten(etcd_cluster, tmp_path):
    """A file of more groups than one etcd transaction holds (20 groups of REPLICATE-3 at 64 keys
    a Txn; at the default 1,024, a REPLICATE-3 file of ~63 groups of 128 MiB, 8 GiB) used to be
    refused with "do it in parts" when its writer completed it, and so were a delete of such a
    file and an overwrite of one: the Complete records its groups in parts while the file is
    still invisible, a delete or a replaced file is detached in one change, then purged."""
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
            wait_until(lambda: _rows(etcd_cluster, name, "groups") == 1 + 20, 60, "the old groups purged from etcd",
                       detail=lambda: f"{_rows(etcd_cluster, name, 'groups')} groups in etcd")
            wait_until(lambda: not units_on_disk(tmp_path, gone), 60, "their units deleted on the DataNodes",
                       detail=lambda: f"left on disk: {units_on_disk(tmp_path, gone)}")
            assert fs.read_bytes("/keep") == KEEP and [e.path for e in fs.list("/")] == ["/keep", "/replaced"]
    finally:
        for n in dns + [a]:
            n.stop()
