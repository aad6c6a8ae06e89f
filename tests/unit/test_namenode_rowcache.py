"""The row cache (namenode/rowcache.py): reads answered from memory say what SQL would, and never
what is not durable yet.

The oracle is the same NameNode read without the cache (``reading()`` without ``cached``: every
row from SQLite). Batches are made deterministic as in test_namenode_commit.py: a change applied
while the test holds the writers' lock waits in the open transaction; on etcd (a gated backend, as
in test_namenode_pipelined.py) a sealed batch waits until the test opens the gate.
"""

import threading

import pytest
from nn_support import add_datanodes, make_namenode, nn, write_file  # noqa: F401 (nn: a fixture)
from test_namenode_pipelined import GatedEtcd, _run

from hedgefs.namenode import rowcache
from hedgefs.namenode.db import Stale
from hedgefs.namenode.errors import InvalidArgument, NotFound, PermissionDenied
from hedgefs.security.identity import USER, Identity



def _uncached(nn, path):
    """What SQLite says: the entry and the groups (id, length, units), or the refusal's class."""
    try:
        with nn.db.reading():
            info = nn.file_info.__wrapped__(nn, path)
    except NotFound:
        return NotFound
    return info.entry, [(g.id, g.length, [(u.index, u.datanode_id) for u in g.units]) for g in info.groups]


def _cached(nn, path):
    try:
        info = nn.file_info(path)
    except NotFound:
        return NotFound
    return info.entry, [(g.id, g.length, [(u.index, u.datanode_id) for u in g.units]) for g in info.groups]


def _agree(nn, *paths):
    for path in paths:
        for _ in range(2):   # the first may fill the cache, the second is answered from it
            assert _cached(nn, path) == _uncached(nn, path), path


def test_every_change_is_seen_by_the_next_stat_answered_from_the_cache(nn):
    nn.mkdir("/d/sub", parents=True)
    write_file(nn, "/d/f", 5000)
    write_file(nn, "/d/sub/x", 10)
    _agree(nn, "/d", "/d/f", "/d/sub", "/d/sub/x")
    hits = nn.db.cache.hits
    _agree(nn, "/d/f")
    assert nn.db.cache.hits > hits   # answered from memory, not only filled
    steps = [
        lambda: nn.rename("/d/f", "/d/g"),
        lambda: nn.set_permission("/d/g", 0o600),
        lambda: nn.set_owner("/d/g", "alice", "staff"),
        lambda: write_file(nn, "/d/g", 3000, overwrite=True),   # a new inode at the same name
        lambda: nn.set_policy("/d/sub", "REPLICATE-2"),
        lambda: nn.rename("/d/sub", "/e"),
        lambda: (write_file(nn, "/d/p1", 3 * 4096), write_file(nn, "/d/p2", 10), nn.concat("/d/c", ["/d/p1", "/d/p2"])),
        lambda: nn.delete("/e", recursive=True),
        lambda: nn.delete("/d/g"),
    ]
    for step in steps:
        step()
        _agree(nn, "/d", "/d/f", "/d/g", "/d/sub", "/d/sub/x", "/e", "/e/x", "/d/c", "/d/p1", "/d/p2")


def test_a_change_rolled_back_leaves_nothing_in_the_cache(nn):
    nn.mkdir("/d")
    _agree(nn, "/d")
    with pytest.raises(InvalidArgument, match="needs 9 live DataNodes"):
        nn.create("/d/f", policy="RS-6-3-1k")   # refused after its row was inserted: rolled back
    _agree(nn, "/d", "/d/f")
    with nn._lock:
        assert nn.ns._named(nn.ns.lookup("/d").id, "f") == (None, None)
    write_file(nn, "/d/f", 10)
    _agree(nn, "/d", "/d/f")


def test_a_stat_does_not_see_a_change_before_its_commit_nor_the_old_state_after(nn):
    nn.mkdir("/d")
    write_file(nn, "/d/f", 10)
    _agree(nn, "/d/f")
    with nn._lock:   # the rename applies; its batch cannot commit while the test holds the lock
        with nn.db.tx():
            nn.ns.rename("/d/f", "/d/g")
        reader, seen = _run(lambda: (_cached(nn, "/d/f"), _cached(nn, "/d/g")))
        reader.join(10)
        assert seen[0][0] != NotFound and seen[0][1] == NotFound   # the durable state: not renamed yet
        seq = nn.db.applied
    nn.db.wait_durable(seq)
    _agree(nn, "/d/f", "/d/g")
    assert _cached(nn, "/d/f") == NotFound


def test_a_row_read_before_a_change_is_not_cached_after_it(nn):
    nn.mkdir("/d")
    with nn._lock:
        floor = nn.db.floor()
        node = nn.ns.lookup("/d")
        nn.db.cache.inodes.pop(node.id, None)
        with nn.db.tx():
            nn.ns.set_permission("/d", 0o700)
        nn.db.cache.put_inode(node, floor)   # read before the change: refused
        assert node.id not in nn.db.cache.inodes
        seq = nn.db.applied
    nn.db.wait_durable(seq)
    assert nn.file_info("/d").entry.mode == 0o700


def test_a_cached_read_older_than_the_snapshot_it_then_opens_is_run_again(nn):
    nn.mkdir("/d")
    write_file(nn, "/d/f", 10)
    _agree(nn, "/d/f")
    root = nn.ns._get(1)
    with pytest.raises(Stale):
        with nn.db.reading(cached=True):
            assert nn.db.cache.inode(root.id) is not None   # an entry used ...
            t = threading.Thread(target=nn.mkdir, args=("/other",))   # ... something commits ...
            t.start()
            t.join(10)
            nn.db.one("SELECT 1")                              # ... and the snapshot opens after it
    assert nn.file_info("/d/f").entry.path == "/d/f"          # the namesystem's reads rerun instead


def test_a_full_cache_starts_again_and_stays_right(nn, monkeypatch):
    monkeypatch.setattr(rowcache, "MAX_ENTRIES", 3)
    nn.mkdir("/d")
    for i in range(6):
        write_file(nn, f"/d/f{i}", 10)
    for i in range(6):
        _agree(nn, f"/d/f{i}")
    assert len(nn.db.cache.inodes) <= 3 and len(nn.db.cache.children) <= 3


def test_on_etcd_a_stat_waits_for_the_txn_and_the_cache_never_shows_the_old_state_after(tmp_path, clock):
    etcd = GatedEtcd()
    nn = make_namenode(tmp_path / "nn", clock, backend=etcd)
    try:
        add_datanodes(nn, 5)
        nn.mkdir("/d")
        write_file(nn, "/d/f", 10)
        _agree(nn, "/d/f")
        etcd.gate.clear()
        writer, answered = _run(nn.rename, "/d/f", "/d/g")
        assert etcd.in_flight.wait(10)
        reader, seen = _run(_cached, nn, "/d/f")
        reader.join(0.5)
        # the view has the rename, etcd not yet: the cache no longer answers, the snapshot waits
        assert reader.is_alive() and seen == [] and answered == []
        etcd.gate.set()
        for t in (writer, reader):
            t.join(10)
        assert seen == [NotFound] and answered == [None]
        _agree(nn, "/d/f", "/d/g")
    finally:
        etcd.gate.set()
        nn.close()


def test_a_standby_view_has_no_cache(tmp_path, clock):
    nn = make_namenode(tmp_path / "nn", clock, backend=GatedEtcd())   # a view file, as an active leaves it
    nn.close()
    standby = make_namenode(tmp_path / "nn", clock, read_only=True)
    try:
        assert standby.db.cache is None
    finally:
        standby.close()


def test_readers_and_writers_at_once_agree_with_sqlite_after(nn):
    nn.mkdir("/d")
    for i in range(20):
        write_file(nn, f"/d/f{i}", 10)
    stop = threading.Event()
    turns = threading.Semaphore(0)   # a pass of stats per reader per write step, beside the next step
    errors: list = []

    def read():
        # Waiting for its turn, not spinning: a stat answered from memory releases the GIL nowhere,
        # and three spinning readers starved the writer (54 s against 1.2 s).
        while turns.acquire(timeout=30) and not stop.is_set():
            for i in range(20):
                try:
                    nn.file_info(f"/d/f{i}")
                except NotFound:
                    pass
                except Exception as err:   # noqa: BLE001 - the test reports it
                    errors.append(err)

    readers = [threading.Thread(target=read, daemon=True) for _ in range(3)]
    for t in readers:
        t.start()
    for round in range(5):
        for i in range(0, 20, 2):
            nn.rename(f"/d/f{i}", f"/d/r{round}-{i}")
            write_file(nn, f"/d/f{i}", round + 1, overwrite=True)
            nn.set_permission(f"/d/f{i + 1}", 0o600 + round)
            turns.release(len(readers))
    stop.set()
    turns.release(len(readers))
    for t in readers:
        t.join(10)
    assert errors == []
    for i in range(20):
        _agree(nn, f"/d/f{i}")


def test_a_walk_answered_from_the_cache_still_checks_every_directory_on_the_way(nn):
    alice = Identity("alice", USER)
    nn.mkdir("/d/e", parents=True)
    write_file(nn, "/d/e/f", 10)
    assert nn.file_info("/d/e/f", who=alice).entry.path == "/d/e/f"
    assert nn.file_info("/d/e/f", who=alice).entry.path == "/d/e/f"   # from the cache
    nn.set_permission("/d", 0o700)
    with pytest.raises(PermissionDenied, match=r"x needed on /d,"):
        nn.file_info("/d/e/f", who=alice)
    nn.set_permission("/d", 0o755)
    nn.set_permission("/d/e/f", 0o600)
    with pytest.raises(PermissionDenied, match=r"r needed on /d/e/f,"):
        nn.file_info("/d/e/f", who=alice)
