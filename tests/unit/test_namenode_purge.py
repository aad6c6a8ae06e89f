"""A recursive delete of a large tree on SQLite: detached at once, purged in the background.

Inline, a delete holds the writers' lock ~0.1 ms a file (12 s for 100,000 files); a tree of more
than ``purge.TREE_INODES`` inodes is cut loose in one change instead and emptied in bounded
changes, as on etcd (test_ha_purge.py). A kill -9 mid-purge loses nothing: the restarted NameNode
finds the detached trees in its database and finishes. Real processes, a real SQLite file.
"""

import os
import sqlite3

import grpc
import pytest

from ha_support import DataNodeProcess, NameNodeProcess, ids, missing, mkdirs, stat, stub, units_on_disk
from hedgefs.client.fs import FileSystem
from hedgefs.namenode import purge
from hedgefs.namenode.errors import NotFound
from hedgefs.proto import hedgefs_pb2 as pb
from nn_support import FakeClock, add_datanodes, make_namenode, write_file

from conftest import pattern, wait_until

BLOCK = 65536
NN_ARGS = ("--default-policy", "REPLICATE-3", "--block-size", str(BLOCK))
KEEP = pattern(100_000, seed=246)


def test_a_tree_of_more_than_tree_inodes_is_detached_and_a_smaller_one_goes_inline(tmp_path):
    nn = make_namenode(tmp_path / "nn", FakeClock())
    try:
        add_datanodes(nn, 6)
        for top, dirs in (("/small", purge.TREE_INODES - 1), ("/large", purge.TREE_INODES)):
            for i in range(dirs):   # the top and its dirs: TREE_INODES inodes, then one more
                nn.mkdir(f"{top}/d{i}", parents=True)
        write_file(nn, "/large/d0/done", 4096)
        writing = nn.create("/large/d1/writing").file_id   # a writer inside the tree
        nn.delete("/small", recursive=True)
        assert purge.detached(nn.db) == []
        large = nn.ns.lookup("/large").id
        nn.delete("/large", recursive=True)
        assert purge.detached(nn.db) == [large]
        assert [e.path for e in nn.list("/")] == []
        with pytest.raises(NotFound):   # its writer is told at once, as after any delete
            nn.complete(writing, 0, [])
        nn.safe_mode("enter")   # no namespace change in an admin's safe mode: the purge waits too
        assert nn.purge_step() == (0, 0)
        nn.safe_mode("leave")
        changes = 0
        while nn.purge_step()[0]:
            changes += 1
        assert changes >= purge.TREE_INODES // purge.SQLITE_CHILDREN_PER_CHANGE   # bounded changes
        assert nn.db.one("SELECT COUNT(*) FROM inodes")[0] == 1   # the root alone
        assert nn.db.one("SELECT COUNT(*) FROM groups")[0] == 0
    finally:
        nn.close()


def test_a_file_of_more_than_file_rows_deleted_or_replaced_is_detached_and_purged(tmp_path, monkeypatch):
    monkeypatch.setattr(purge, "FILE_ROWS", 50)   # 4 RS-3-2 groups: 4 x (2 + 3 x 5) + 1 = 69 rows; one: 18
    nn = make_namenode(tmp_path / "nn", FakeClock())
    try:
        add_datanodes(nn, 6)
        big = write_file(nn, "/big", 4 * 3 * 4096)
        write_file(nn, "/small", 3 * 4096)
        nn.delete("/small")
        assert purge.detached(nn.db) == []
        nn.delete("/big")
        assert purge.detached(nn.db) == [big]
        with pytest.raises(NotFound):
            nn.file_info("/big")
        replaced = write_file(nn, "/again", 4 * 3 * 4096)   # an overwrite replaces a big file: detached too
        write_file(nn, "/again", 3 * 4096, overwrite=True)
        assert purge.detached(nn.db) == [big, replaced] and len(nn.file_info("/again").groups) == 1
        while nn.purge_step()[0]:
            pass
        assert nn.db.one("SELECT COUNT(*) FROM groups")[0] == 1   # the new /again's
        assert sum(nn.blocks.pending_delete_counts().values()) == 9 * 5   # every unit of the 3 files gone
    finally:
        nn.close()


def _rows(db_path: str, table: str = "inodes") -> int:
    with sqlite3.connect(f"file:{db_path}?mode=ro", uri=True) as conn:
        return conn.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0]


def test_a_large_delete_is_gone_at_once_and_a_restarted_namenode_finishes_its_purge(tmp_path):
    nn = NameNodeProcess(tmp_path, "nn", "sqlite://", *NN_ARGS, env={"HEDGEFS_NAMENODE_CRASH": "purge:3"})
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
        before = _rows(db_path)
        purged = {g.id for i in range(3) for g in stat(nn.address, f"/big/files/f{i}").groups}
        kept = {g.id for g in stat(nn.address, "/keep/f").groups}
        assert purged and len(units_on_disk(tmp_path, purged)) == 3 * len(purged)

        stub(nn.address).Delete(pb.DeleteRequest(path="/big", recursive=True), timeout=10, metadata=ids())
        try:   # gone at once; the NameNode may already have killed itself on its 3rd purge change
            assert missing(nn.address, "/big")
            assert [e.path for e in stub(nn.address).List(pb.ListRequest(path="/"), timeout=5).entries] == ["/keep"]
        except grpc.RpcError as err:
            if err.code() != grpc.StatusCode.UNAVAILABLE:
                raise
        nn.proc.wait(30)   # HEDGEFS_NAMENODE_CRASH=purge:3: kill -9 once its 3rd purge change is durable
        assert nn.proc.returncode == -9, nn.tail()
        # mid-purge: /big cut loose from its two subtrees and gone (changes 1, 2), the files' groups
        # forgotten and their units' deletes queued (3), the dirs left
        assert _rows(db_path, "groups") == len(kept) and 3 < _rows(db_path) < before

        nn.env.pop("HEDGEFS_NAMENODE_CRASH")
        nn.start()
        # the restarted NameNode finds the detached trees and empties them: root, /keep, /keep/f left
        wait_until(lambda: _rows(db_path) == 3, 60, "the purge to finish", detail=lambda: f"{_rows(db_path)} inodes")
        wait_until(lambda: not units_on_disk(tmp_path, purged), 60, "the purged units deleted on the DataNodes",
                   detail=lambda: f"left on disk: {units_on_disk(tmp_path, purged)}")
        assert len(units_on_disk(tmp_path, kept)) == 3 * len(kept)
        with FileSystem(nn.address) as fs:
            assert fs.read_bytes("/keep/f") == KEEP
            fs.mkdir("/big/again", parents=True)   # the name is free
        assert "purged every tree detached by a recursive delete" in open(nn.log_path).read()
    finally:
        for n in dns + [nn]:
            n.stop()
