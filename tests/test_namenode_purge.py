"""A recursive delete of a large tree on SQLite: detached at once, purged in the background.

Inline, a delete holds the writers' lock ~0.1 ms a file (12 s for 100,000 files); a tree of more
than ``purge.TREE_INODES`` inodes is cut loose in one change instead and emptied in bounded
changes, as on etcd (test_ha_purge.py). A kill -9 mid-purge loses nothing: the restarted NameNode
finds the detached trees in its database and finishes. Real processes, a real SQLite file.
"""

import os
import sqlite3

import grpc

from ha_support import DataNodeProcess, NameNodeProcess, ids, mkdirs, stat, stub
from hedgefs.client.fs import FileSystem
from hedgefs.namenode import purge
from hedgefs.proto import hedgefs_pb2 as pb
from nn_support import FakeClock, make_namenode

from conftest import pattern, wait_until

BLOCK = 65536
NN_ARGS = ("--default-policy", "REPLICATE-3", "--block-size", str(BLOCK))
KEEP = pattern(100_000, seed=246)


def test_a_tree_of_more_than_tree_inodes_is_detached_and_a_smaller_one_goes_inline(tmp_path):
    nn = make_namenode(tmp_path / "nn", FakeClock())
    try:
        for top, dirs in (("/small", purge.TREE_INODES - 1), ("/large", purge.TREE_INODES)):
            for i in range(dirs):   # the top and its dirs: TREE_INODES inodes, then one more
                nn.mkdir(f"{top}/d{i}", parents=True)
        nn.delete("/small", recursive=True)
        assert purge.detached(nn.db) == []
        large = nn.ns.lookup("/large").id
        nn.delete("/large", recursive=True)
        assert purge.detached(nn.db) == [large]
        assert [e.path for e in nn.list("/")] == []
        while nn.purge_step()[0]:
            pass
        assert nn.db.one("SELECT COUNT(*) FROM inodes")[0] == 1   # the root alone
    finally:
        nn.close()


def _inodes(db_path: str) -> int:
    with sqlite3.connect(f"file:{db_path}?mode=ro", uri=True) as conn:
        return conn.execute("SELECT COUNT(*) FROM inodes").fetchone()[0]


def _on_disk(root, group_ids: set[int]) -> list[str]:
    """The unit files of these groups on the DataNodes' disks."""
    return sorted(str(p.relative_to(root)) for p in root.glob("dn*/blocks/*/*.blk")
                  if int(p.name.split("_", 1)[0]) in group_ids)


def _missing(address: str, path: str) -> bool:
    try:
        stat(address, path)
        return False
    except grpc.RpcError as err:
        if err.code() != grpc.StatusCode.NOT_FOUND:
            raise
        return True


def test_a_large_delete_is_gone_at_once_and_a_restarted_namenode_finishes_its_purge(tmp_path):
    nn = NameNodeProcess(tmp_path, "nn", "sqlite://", *NN_ARGS, env={"HEDGEFS_NAMENODE_CRASH": "purge:2"})
    dns = []
    try:
        nn.start()
        dns = [DataNodeProcess(tmp_path, f"dn{i}", nn.address).start() for i in range(1, 4)]
        wait_until(lambda: sum(d.state == "live" for d in stub(nn.address).Report(pb.Empty(), timeout=2).datanodes)
                   == 3, 30, "3 live DataNodes")
        with FileSystem(nn.address) as fs:
            fs.mkdir("/keep")
            fs.mkdir("/big/files", parents=True)
            fs.write_bytes("/keep/f", KEEP)
            for i in range(3):
                fs.write_bytes(f"/big/files/f{i}", pattern(4 * BLOCK, seed=i))
        mkdirs(nn.address, [f"/big/dirs/{half}/d{i:03d}" for half in "ab" for i in range(purge.TREE_INODES // 2)])
        db_path = os.path.join(nn.data_dir, "namenode.db")
        before = _inodes(db_path)
        purged = {g.id for i in range(3) for g in stat(nn.address, f"/big/files/f{i}").groups}
        kept = {g.id for g in stat(nn.address, "/keep/f").groups}
        assert purged and len(_on_disk(tmp_path, purged)) == 3 * len(purged)

        stub(nn.address).Delete(pb.DeleteRequest(path="/big", recursive=True), timeout=10, metadata=ids())
        try:   # gone at once; the NameNode may already have killed itself on its 2nd purge change
            assert _missing(nn.address, "/big")
            assert [e.path for e in stub(nn.address).List(pb.ListRequest(path="/"), timeout=5).entries] == ["/keep"]
        except grpc.RpcError as err:
            if err.code() != grpc.StatusCode.UNAVAILABLE:
                raise
        nn.proc.wait(30)   # HEDGEFS_NAMENODE_CRASH=purge:2: kill -9 once its 2nd purge change is durable
        assert nn.proc.returncode == -9, nn.tail()
        assert 3 < _inodes(db_path) < before   # mid-purge: /big itself gone, its two subtrees left

        nn.env.pop("HEDGEFS_NAMENODE_CRASH")
        nn.start()
        # the restarted NameNode finds the detached trees and empties them: root, /keep, /keep/f left
        wait_until(lambda: _inodes(db_path) == 3, 60, "the purge to finish", detail=lambda: f"{_inodes(db_path)} inodes")
        wait_until(lambda: not _on_disk(tmp_path, purged), 60, "the purged units deleted on the DataNodes",
                   detail=lambda: f"left on disk: {_on_disk(tmp_path, purged)}")
        assert len(_on_disk(tmp_path, kept)) == 3 * len(kept)
        with FileSystem(nn.address) as fs:
            assert fs.read_bytes("/keep/f") == KEEP
            fs.mkdir("/big/again", parents=True)   # the name is free
        assert "purged every tree detached by a recursive delete" in open(nn.log_path).read()
    finally:
        for n in dns + [nn]:
            n.stop()
