"""Group commit (namenode/db.py): many changes, one COMMIT and one fsync of the WAL, off the writers'
lock; nobody answered or shown a change before that fsync returned.

The batches are made deterministic by holding the writers' lock in the test: changes applied
meanwhile wait in one open transaction, and the committer can commit only once the test lets go.
(kill -9 in the middle of a batch, on a real NameNode process: test_namenode_server.py.)
"""

import sqlite3
import threading

import pytest

from hedgefs.namenode.db import Database, StoreFailed


def _insert(db: Database, name: str) -> None:
    with db.tx() as c:
        c.execute("INSERT INTO inodes(parent, name, is_dir, mtime_ms) VALUES (1, ?, 1, 0)", (name,))


def _names(db: Database) -> set[str]:
    with db.reading():
        return {r[0] for r in db.query("SELECT name FROM inodes WHERE id != 1")}


@pytest.fixture
def batched(tmp_path):
    db = Database(str(tmp_path / "nn.db"))
    lock = threading.RLock()
    db.start_group_commit(lock)
    yield db, lock
    db.close()


def _waiter(db: Database, seq: int) -> tuple[threading.Thread, list]:
    out: list = []

    def wait():
        try:
            db.wait_durable(seq)
            out.append("durable")
        except StoreFailed as err:
            out.append(err)

    t = threading.Thread(target=wait, daemon=True)
    t.start()
    return t, out


def test_changes_applied_together_are_one_commit_and_invisible_until_it(batched):
    db, lock = batched
    first, commits = db.applied, db.commits
    with lock:
        for i in range(5):
            _insert(db, f"d{i}")
        assert db.applied == first + 5 and db.durable == first
        waiter, out = _waiter(db, first + 5)
        assert _names(db) == set()          # a reader sees none of the batch: not durable yet
        assert out == []                    # and nobody has been answered
    waiter.join(timeout=10)
    assert out == ["durable"]
    assert db.commits == commits + 1 and db.durable == first + 5
    assert _names(db) == {f"d{i}" for i in range(5)}


def test_a_failed_change_rolls_back_alone_and_its_batch_commits(batched):
    db, lock = batched
    with lock:
        _insert(db, "before")
        with pytest.raises(sqlite3.IntegrityError):
            with db.tx() as c:
                c.execute("INSERT INTO inodes(parent, name, is_dir, mtime_ms) VALUES (1, 'half', 1, 0)")
                c.execute("INSERT INTO inodes(id, parent, name, is_dir, mtime_ms) VALUES (1, NULL, 'x', 1, 0)")
        _insert(db, "after")
        waiter, out = _waiter(db, db.applied)
    waiter.join(timeout=10)
    assert out == ["durable"] and _names(db) == {"before", "after"}


def test_a_failed_commit_fails_every_waiter_of_its_batch_and_refuses_later_changes(batched):
    db, lock = batched
    _insert(db, "kept")
    db.wait_durable(db.applied)
    with lock:
        _insert(db, "lost")
        with db.tx() as c:   # a deferred foreign key: only the COMMIT finds it, and fails the batch
            c.execute("PRAGMA defer_foreign_keys = ON")
            c.execute("INSERT INTO groups(file_id, seq) VALUES (12345, 0)")
        waiter, out = _waiter(db, db.applied)
    waiter.join(timeout=10)
    assert len(out) == 1 and isinstance(out[0], StoreFailed)
    assert "metadata store failed (commit failed: FOREIGN KEY constraint failed)" in str(out[0])
    with pytest.raises(StoreFailed, match="changes are refused until the NameNode restarts"):
        _insert(db, "later")
    assert _names(db) == {"kept"}


def _gate_the_sync(db: Database, monkeypatch, fail: str = "") -> tuple[threading.Event, threading.Event]:
    """The committer's fsync of the WAL waits until the test sets ``gate`` (then fails with
    ``fail``, if given); ``in_sync`` is set while it waits."""
    gate, in_sync = threading.Event(), threading.Event()
    real = db._sync_wal

    def gated():
        in_sync.set()
        assert gate.wait(30), "the test never opened the gate"
        in_sync.clear()
        if fail:
            raise OSError(5, fail)
        real()

    monkeypatch.setattr(db, "_sync_wal", gated)
    return gate, in_sync


def _committed(path: str, name: str) -> bool:
    """Whether the file holds ``name``, read by a connection outside the Database: COMMITted."""
    conn = sqlite3.connect(path)
    try:
        return conn.execute("SELECT 1 FROM inodes WHERE name = ?", (name,)).fetchone() is not None
    finally:
        conn.close()


def test_the_lock_is_free_during_the_fsync_and_nobody_sees_the_batch_before_it(batched, tmp_path, monkeypatch):
    db, lock = batched
    gate, in_sync = _gate_the_sync(db, monkeypatch)
    with lock:
        _insert(db, "a")
        waiter, out = _waiter(db, db.applied)
    assert in_sync.wait(10)
    assert _committed(str(tmp_path / "nn.db"), "a")   # COMMITted without its fsync ...
    reader = threading.Thread(target=lambda: out.append(_names(db)), daemon=True)
    reader.start()
    reader.join(0.5)
    assert reader.is_alive() and out == []           # ... but neither answered nor shown
    with lock:                                        # and the lock is free: the next change applies
        _insert(db, "b")
    gate.set()
    waiter.join(10)
    reader.join(10)
    shown = [o for o in out if isinstance(o, set)]
    assert out.count("durable") == 1 and len(shown) == 1 and "a" in shown[0]
    db.wait_durable(db.applied)
    assert _names(db) == {"a", "b"}


def test_a_failed_fsync_fails_its_batch_and_refuses_later_changes(batched, monkeypatch):
    db, lock = batched
    _insert(db, "kept")
    db.wait_durable(db.applied)
    gate, in_sync = _gate_the_sync(db, monkeypatch, fail="Input/output error")
    with lock:
        _insert(db, "unsure")
        waiter, out = _waiter(db, db.applied)
    assert in_sync.wait(10)
    reader = threading.Thread(target=lambda: out.append(_names_or_refusal(db)), daemon=True)
    reader.start()
    gate.set()
    waiter.join(10)
    reader.join(10)
    assert len(out) == 2 and all(isinstance(o, StoreFailed) for o in out)   # neither told of "unsure"
    assert "metadata store failed (fsync failed:" in str(out[0])
    with pytest.raises(StoreFailed, match="changes are refused until the NameNode restarts"):
        _insert(db, "later")


def _names_or_refusal(db: Database):
    try:
        return _names(db)
    except StoreFailed as err:
        return err


def test_every_answer_of_concurrent_namenode_writers_is_already_durable(tmp_path):
    """16 threads of mkdir through the namesystem: each mkdir, when it returns, is committed (a
    connection of the thread's own, outside the NameNode, sees it)."""
    from hedgefs.namenode.namesystem import Namesystem

    nn = Namesystem(str(tmp_path / "nn"))
    missing: list[str] = []
    local = threading.local()

    def seen(name: str) -> bool:
        if not hasattr(local, "c"):
            local.c = sqlite3.connect(str(tmp_path / "nn" / "namenode.db"))
        return local.c.execute("SELECT 1 FROM inodes WHERE name = ?", (name,)).fetchone() is not None

    def work(t: int) -> None:
        for i in range(40):
            nn.mkdir(f"/t{t}/d{t}-{i}", parents=True)
            if not seen(f"d{t}-{i}"):
                missing.append(f"/t{t}/d{t}-{i}")
        local.c.close()

    threads = [threading.Thread(target=work, args=(t,)) for t in range(16)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert missing == []
    assert len(nn.list("/", recursive=True)) == 16 * 41
    assert nn.db.durable == nn.db.applied
    nn.close()


def test_close_waits_for_a_running_read_and_refuses_the_next(tmp_path):
    """An HA switch closes a namesystem whose reads go on off the lock (observer reads on a
    standby being promoted): a read connection closed under a running query crashed SQLite (a
    chaos run's standby died of SIGSEGV as it took over). close() waits for the read transaction;
    a read that would begin after it is refused as on a closed database."""
    db = Database(str(tmp_path / "nn.db"))
    db.start_group_commit(threading.RLock())
    _insert(db, "d0")
    db.wait_durable(db.applied)
    first_read, go_on, seen = threading.Event(), threading.Event(), []

    def read():
        with db.reading():
            seen.append(db.one("SELECT COUNT(*) FROM inodes")[0])
            first_read.set()
            assert go_on.wait(30)
            seen.append(db.one("SELECT name FROM inodes WHERE id != 1")[0])   # same snapshot, same connection

    reader = threading.Thread(target=read)
    reader.start()
    assert first_read.wait(30)
    closer = threading.Thread(target=db.close)
    closer.start()
    closer.join(0.2)
    assert closer.is_alive()   # waiting for the read transaction, not closing its connection under it
    go_on.set()
    reader.join(30)
    closer.join(30)
    assert not closer.is_alive() and seen == [2, "d0"]
    with pytest.raises(sqlite3.ProgrammingError, match="closed database"):
        with db.reading():
            db.one("SELECT 1")


def test_a_standby_view_closes_only_once_a_locked_read_on_it_ends(tmp_path):
    """A standby's Report reads its view under the namesystem's lock, on the view's own
    connection; a promotion closes the view. The close must take that lock, not close the
    connection under the Report's query."""
    from nn_support import FakeClock, make_namenode
    from test_namenode_pipelined import GatedEtcd

    clock = FakeClock()
    make_namenode(tmp_path / "nn", clock, backend=GatedEtcd()).close()   # a view file, as an active leaves it
    view = make_namenode(tmp_path / "nn", clock, read_only=True)
    with view._lock:   # a Report on the standby, between two of its queries
        closer = threading.Thread(target=view.close)
        closer.start()
        closer.join(0.2)
        assert closer.is_alive()   # the promotion waits for the Report
        assert view.report().datanodes == []   # whose next query runs on an open connection
    closer.join(30)
    assert not closer.is_alive()
