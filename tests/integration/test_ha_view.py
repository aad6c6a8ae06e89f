"""The etcd side of HA, below the NameNode: guarded commits, the lease, and a follower's view.

Real etcd (a 3-member cluster on loopback for the module, tests/etcd_support.py), real SQLite
files: rows changed in one transaction go to etcd as one guarded Txn (etcd_view.Capture), a
follower's view built from a snapshot and fed by the watch holds the same rows, a deposed
epoch commits nothing, and a lease that is not renewed ends.
"""

import signal
import sqlite3
import threading
import time

import pytest
from conftest import wait_until
from etcd_support import etcd_cluster, prefix  # noqa: F401  (the fixture)

from hedgefs.namenode import etcd_view
from hedgefs.namenode.db import _SCHEMA, SCHEMA_VERSION
from hedgefs.namenode.election import Lease, leader_address, leader_value
from hedgefs.namenode.etcd_meta import EtcdMeta, Fenced, MetaUnavailable, parse_meta_url
from hedgefs.namenode.follower import Follower


def _dump(conn: sqlite3.Connection) -> dict:
    out = {}
    for table in etcd_view.REPLICATED + ("sqlite_sequence",):
        out[table] = sorted(tuple(r) for r in conn.execute(f"SELECT * FROM {table}"))
    return out


def _writer(path) -> tuple[sqlite3.Connection, etcd_view.Capture]:
    conn = sqlite3.connect(str(path), isolation_level=None)
    conn.executescript(f"BEGIN; {_SCHEMA} COMMIT;")
    return conn, etcd_view.Capture(conn)


def _commit(conn, capture, meta, epoch) -> int:
    puts, deletes = capture.collect(conn)
    revision = meta.commit(epoch, puts, deletes)
    capture.sent(puts)
    conn.execute("COMMIT")
    return revision


def test_parse_meta_url():
    u = parse_meta_url("etcd://10.0.0.1:2379,nn2:2380/hfs/prod")
    assert u.endpoints == (("10.0.0.1", 2379), ("nn2", 2380)) and u.prefix == "hfs/prod"
    assert parse_meta_url("sqlite:///srv/nn/namespace.sqlite").path == "/srv/nn/namespace.sqlite"
    for bad in ("etcd://h:1", "etcd://h/p", "mysql://x", "sqlite://rel/path", "etcd://h:99999/p"):
        with pytest.raises(ValueError):
            parse_meta_url(bad)


def test_rows_reach_a_follower_and_a_deposed_epoch_commits_nothing(etcd_cluster, tmp_path):
    meta = EtcdMeta(parse_meta_url(etcd_cluster.url(prefix("view"))))
    lease = Lease(meta, ttl_s=3)
    epoch, _ = meta.campaign(leader_value("127.0.0.1:1", ""), lease.id)
    assert epoch > 0
    conn, capture = _writer(tmp_path / "active.sqlite")
    conn.execute("BEGIN IMMEDIATE")
    conn.execute("INSERT INTO meta(key, value) VALUES ('schema_version', ?), ('cluster_id', 'CID-x')",
                 (str(SCHEMA_VERSION),))
    conn.execute("INSERT INTO inodes(id, parent, name, is_dir, mtime_ms) VALUES (1, NULL, '', 1, 0)")
    for i in range(2, 7):
        conn.execute("INSERT INTO inodes(parent, name, is_dir, mtime_ms) VALUES (1, ?, 0, 5)", (f"f{i}",))
    conn.execute("INSERT INTO datanodes(id, address) VALUES ('dn/1 x', '127.0.0.1:9')")   # a key needing quoting
    _commit(conn, capture, meta, epoch)

    follower = Follower(meta, str(tmp_path / "standby.sqlite"), _SCHEMA, SCHEMA_VERSION)
    try:
        assert follower.leader == ("127.0.0.1:1", epoch, lease.id)
        assert _dump(follower.conn) == _dump(conn)
        # a savepoint rolled back leaves no capture behind; the highest id deleted stays issued
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("SAVEPOINT change")
        conn.execute("INSERT INTO inodes(parent, name, is_dir, mtime_ms) VALUES (1, 'gone', 0, 5)")
        conn.execute("ROLLBACK TO change")
        conn.execute("RELEASE change")
        conn.execute("DELETE FROM inodes WHERE id = 6")
        conn.execute("UPDATE inodes SET name = 'renamed' WHERE id = 2")
        revision = _commit(conn, capture, meta, epoch)
        assert follower.wait_applied(revision, 10)
        assert _dump(follower.conn) == _dump(conn)
        assert dict(follower.conn.execute("SELECT name, seq FROM sqlite_sequence"))["inodes"] == 6   # 6 is gone, still issued

        # the lease ends (not renewed): the leader key goes, the epoch's Txn is refused
        lease.stop()
        wait_until(lambda: follower.leader == ("", 0, 0), 15, "the leader key to expire")
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("INSERT INTO inodes(parent, name, is_dir, mtime_ms) VALUES (1, 'late', 0, 5)")
        puts, deletes = capture.collect(conn)
        with pytest.raises(Fenced):
            meta.commit(epoch, puts, deletes)
        conn.execute("ROLLBACK")
        assert not [k for k in etcd_cluster.keys(f"/{meta.url.prefix}/t/inodes") if "0000000000000008" in k]
    finally:
        follower.stop()
        meta.close()


def test_lease_deadline_and_campaign(etcd_cluster):
    meta = EtcdMeta(parse_meta_url(etcd_cluster.url(prefix("lease"))))
    a, b = Lease(meta, ttl_s=3), Lease(meta, ttl_s=3)
    try:
        assert a.serving()
        epoch_a, _ = meta.campaign(leader_value("a:1", ""), a.id)
        epoch_b, seen = meta.campaign(leader_value("b:1", ""), b.id)
        assert epoch_a > 0 and epoch_b == 0 and leader_address(seen) == "a:1"
        wait_until(lambda: a.renewals >= 2, 10, "two renewals")
        assert a.serving() and a.deadline > time.monotonic()
        a.revoke()
        assert not a.serving()
        epoch_b, _ = meta.campaign(leader_value("b:1", ""), b.id)
        assert epoch_b > epoch_a
    finally:
        b.stop()
        meta.close()


def test_unreachable_etcd_is_unavailable(tmp_path):
    meta = EtcdMeta(parse_meta_url("etcd://127.0.0.1:1/x"), timeout_s=0.5)
    with pytest.raises(MetaUnavailable):
        meta.status()
    meta.close()


def test_watch_stops_when_asked(etcd_cluster):
    meta = EtcdMeta(parse_meta_url(etcd_cluster.url(prefix("watch"))))
    stop = threading.Event()
    seen = []
    t = threading.Thread(target=lambda: seen.extend(meta.watch(meta.status() + 1, stop)))
    t.start()
    stop.set()
    t.join(5)
    assert not t.is_alive()
    meta.close()


@pytest.mark.parametrize("fault", ["kill", "freeze"])
def test_a_follower_whose_etcd_member_dies_or_freezes_follows_on_through_another(etcd_cluster, tmp_path, fault):
    """Found by `hedgefs chaos --ha` (seed 19): a standby's watch broke with its etcd member and
    the follower stopped for good (the watch set the follower's own stop event), so when the active
    froze nobody took over. The watch now re-opens on another member. A frozen member (SIGSTOP)
    breaks nothing: its stream just goes silent, so the watch asks for progress and gives up on a
    member that does not answer; the leader key's end must reach the follower too, or a standby
    never campaigns."""
    name = prefix(f"member-{fault}")
    meta = EtcdMeta(parse_meta_url(etcd_cluster.url(name)))            # the standby's, every member
    follower_member = None
    conn, capture = _writer(tmp_path / "active.sqlite")
    conn.execute("BEGIN IMMEDIATE")
    conn.execute("INSERT INTO meta(key, value) VALUES ('schema_version', ?), ('cluster_id', 'CID-y')",
                 (str(SCHEMA_VERSION),))
    conn.execute("INSERT INTO inodes(id, parent, name, is_dir, mtime_ms) VALUES (1, NULL, '', 1, 0)")
    follower = None
    try:
        follower_member = next(m for m, port in etcd_cluster.client_ports.items()
                               if meta._client.endpoint_in_use.netloc.endswith(f":{port}"))
        others = ",".join(f"127.0.0.1:{p}" for m, p in etcd_cluster.client_ports.items() if m != follower_member)
        writer = EtcdMeta(parse_meta_url(f"etcd://{others}/{name}"))   # the active's, on the other two
        lease = Lease(writer, ttl_s=30)
        epoch, _ = writer.campaign(leader_value("127.0.0.1:1", ""), lease.id)
        _commit(conn, capture, writer, epoch)
        follower = Follower(meta, str(tmp_path / "standby.sqlite"), _SCHEMA, SCHEMA_VERSION)
        assert follower.leader[1] == epoch
        etcd_cluster.kill(follower_member, signal.SIGKILL if fault == "kill" else signal.SIGSTOP)

        def elected() -> bool:   # the member may have been the raft leader: a read needs a new one
            try:
                return writer.get("leader") is not None
            except MetaUnavailable:
                return False
        wait_until(elected, 30, "a raft leader among the two members left")
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("INSERT INTO inodes(parent, name, is_dir, mtime_ms) VALUES (1, 'after', 0, 5)")
        revision = _commit(conn, capture, writer, epoch)
        assert follower.wait_applied(revision, 30), f"the follower stopped at revision {follower.applied}"
        assert not follower.failed
        assert follower.conn.execute("SELECT COUNT(*) FROM inodes WHERE name = 'after'").fetchone()[0] == 1
        lease.revoke()
        wait_until(lambda: follower.leader == ("", 0, 0), 30, "the follower seeing the leader key go")
        writer.close()
    finally:
        if follower is not None:
            follower.stop()
        meta.close()
        conn.close()
        if follower_member is not None:
            if fault == "kill":
                etcd_cluster.start_member(follower_member, "existing")
            else:
                etcd_cluster.kill(follower_member, signal.SIGCONT)
            etcd_cluster.wait_healthy()
