"""The pipelined group commit on real etcd: the view runs ahead, no answer does.

A real 3-member etcd cluster for the module (tests/etcd_support.py); the active's Database on
its view file with an EtcdBackend, as ha.py builds it after an election. Freezing every etcd
member (SIGSTOP) while a write's Txn is in flight holds the change in the view, COMMITted, but
neither its writer nor a reader of it is answered until etcd is thawed and has it; a Txn etcd
refuses after the local COMMIT (the epoch deposed) is never answered nor served, and steps down.
"""

import signal
import sqlite3
import threading

import pytest
from conftest import wait_until
from etcd_support import etcd_cluster, prefix  # noqa: F401  (the fixture)

from hedgefs.namenode.db import _SCHEMA, SCHEMA_VERSION, Database, StoreFailed
from hedgefs.namenode.election import Lease, leader_value
from hedgefs.namenode.etcd_meta import EtcdMeta, parse_meta_url
from hedgefs.namenode.follower import Follower
from hedgefs.namenode.ha import EtcdBackend


class Active:
    """An elected NameNode's store: lease, epoch, backend, view, committer."""

    def __init__(self, etcd_cluster, tmp_path, name: str):
        # a Txn may wait out the freeze: 10 s, not the NameNode's 2 s
        self.meta = EtcdMeta(parse_meta_url(etcd_cluster.url(prefix(name))), timeout_s=10.0)
        self.lease = Lease(self.meta, ttl_s=30)
        self.epoch, _ = self.meta.campaign(leader_value("127.0.0.1:1", ""), self.lease.id)
        assert self.epoch > 0
        self.fatal: list[str] = []
        self.backend = EtcdBackend(self.meta, self.epoch, self.fatal.append)
        self.path = str(tmp_path / f"{name}.db")
        self.db = Database(self.path, backend=self.backend)
        self.lock = threading.RLock()
        self.db.start_group_commit(self.lock)

    def mkdir(self, name: str) -> int:
        with self.lock:
            with self.db.tx() as c:
                c.execute("INSERT INTO inodes(parent, name, is_dir, mtime_ms) VALUES (1, ?, 1, 0)", (name,))
            seen = self.db.applied
        self.db.wait_durable(seen)
        return self.backend.revision   # what the reply carries (hedgefs-rev)

    def stat(self, name: str) -> bool:
        with self.db.reading():
            return self.db.one("SELECT 1 FROM inodes WHERE name = ?", (name,)) is not None

    def in_view_file(self, name: str) -> bool:
        conn = sqlite3.connect(self.path)
        try:
            return conn.execute("SELECT 1 FROM inodes WHERE name = ?", (name,)).fetchone() is not None
        finally:
            conn.close()

    def in_etcd(self, name: str) -> int:
        """The mod revision of ``name``'s row in etcd, 0 if it has none (a standby's view: built from etcd)."""
        _, items = self.meta.snapshot()
        for rel, value in items:
            if rel.startswith("t/inodes/") and f'"name":"{name}"' in value.decode():
                got = self.meta.get(rel)
                return got[1] if got else 0
        return 0

    def close(self) -> None:
        try:
            self.db.close()
        finally:
            self.lease.stop()
            self.meta.close()


def _run(fn, *args) -> tuple[threading.Thread, list]:
    out: list = []

    def go():
        try:
            out.append(fn(*args))
        except Exception as err:
            out.append(err)

    t = threading.Thread(target=go, daemon=True)
    t.start()
    return t, out


@pytest.fixture
def active(etcd_cluster, tmp_path):
    a = Active(etcd_cluster, tmp_path, "pipe")
    yield a
    a.close()


def _freeze(etcd_cluster, sig) -> None:
    for name in etcd_cluster.names:
        etcd_cluster.kill(name, sig)


def test_a_stat_waits_for_etcd_while_the_view_already_holds_the_mkdir(active, etcd_cluster):
    active.mkdir("warm")
    _freeze(etcd_cluster, signal.SIGSTOP)
    try:
        writer, told = _run(active.mkdir, "frozen")
        wait_until(lambda: active.in_view_file("frozen"), 8, "the view to COMMIT the mkdir locally")
        reader, seen = _run(active.stat, "frozen")
        reader.join(0.5)
        assert reader.is_alive() and writer.is_alive() and seen == [] and told == []
    finally:
        _freeze(etcd_cluster, signal.SIGCONT)
    writer.join(15)
    reader.join(15)
    assert seen == [True] and len(told) == 1 and isinstance(told[0], int), (seen, told)
    # the revision the writer's reply carries is etcd's commit of it: a standby reads it there
    assert 0 < active.in_etcd("frozen") <= told[0]
    assert active.fatal == []


def test_a_txn_refused_after_the_local_commit_is_never_answered_nor_served(active, etcd_cluster, tmp_path):
    active.mkdir("kept")
    active.lease.revoke()      # the leader key goes: this epoch is deposed, its next Txn fails the guard
    writer, told = _run(active.mkdir, "lost")
    writer.join(15)
    assert len(told) == 1 and isinstance(told[0], StoreFailed), told
    assert "no longer the leader's" in str(told[0]) and active.fatal
    assert active.in_view_file("lost")          # the view had COMMITted it ...
    with pytest.raises(StoreFailed):             # ... and serves nothing more
        active.stat("lost")
    with pytest.raises(StoreFailed, match="steps down"):
        active.mkdir("later")
    assert active.in_etcd("lost") == 0 and active.in_etcd("kept") > 0
    standby = Follower(active.meta, str(tmp_path / "standby.db"), _SCHEMA, SCHEMA_VERSION)
    try:
        names = {r[0] for r in standby.conn.execute("SELECT name FROM inodes")}
        assert "kept" in names and "lost" not in names
    finally:
        standby.stop()
