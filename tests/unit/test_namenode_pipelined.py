"""The pipelined group commit on etcd (namenode/db.py ``_seal``/``_push``), against a gated backend.

``Backend`` is a Protocol (db.py), so the etcd side here is an object whose Txn blocks until the
test opens its gate, or fails: what the view does while a Txn is in flight is then deterministic.
The invariants: the writers' lock is free while the Txn is in flight (the next batch applies),
batches reach etcd strictly in order, nobody is answered or shown a change before its Txn
returned, and a failed Txn after the local COMMIT fails everyone and steps down. (Against real
etcd members frozen with SIGSTOP: test_ha_pipelined.py.)
"""

import sqlite3
import threading

import pytest
from conftest import wait_until

from hedgefs.namenode.db import Database, StoreFailed
from hedgefs.namenode.etcd_meta import Fenced


class GatedEtcd:
    """An etcd stand-in: ``commit`` holds each Txn until ``gate`` is set; ``refuse`` fails it."""

    def __init__(self, max_keys: int = 1024):
        self.max_keys = max_keys
        self.revision = 0
        self.gate = threading.Event()
        self.gate.set()
        self.in_flight = threading.Event()
        self.refuse: str | None = None
        self.txns: list[tuple[dict, list]] = []
        self.keys: dict[str, bytes] = {}
        self.fatal_calls: list[str] = []

    def commit(self, puts, deletes):
        self.in_flight.set()
        assert self.gate.wait(30), "the test never opened the gate"
        self.in_flight.clear()
        if self.refuse:
            raise Fenced(self.refuse)
        self.txns.append((dict(puts), list(deletes)))
        self.keys.update(puts)
        for key in deletes:
            self.keys.pop(key, None)
        self.revision += 1
        return self.revision

    def fatal(self, why: str) -> None:
        self.fatal_calls.append(why)


def _insert(db: Database, name: str) -> None:
    with db.tx() as c:
        c.execute("INSERT INTO inodes(parent, name, is_dir, mtime_ms) VALUES (1, ?, 1, 0)", (name,))


def _names(db: Database) -> set[str]:
    with db.reading():
        return {r[0] for r in db.query("SELECT name FROM inodes WHERE id != 1")}


def _in_view_file(path: str, name: str) -> bool:
    """What the view's file holds, read by a connection outside the Database: COMMITted locally."""
    conn = sqlite3.connect(path)
    try:
        return conn.execute("SELECT 1 FROM inodes WHERE name = ?", (name,)).fetchone() is not None
    finally:
        conn.close()


def _in_etcd(etcd: GatedEtcd, name: str) -> bool:
    return any(key.startswith("t/inodes/") and f'"name":"{name}"' in value.decode()
               for key, value in etcd.keys.items())


def _run(fn, *args) -> tuple[threading.Thread, list]:
    out: list = []

    def go():
        try:
            out.append(fn(*args))
        except Exception as err:   # StoreFailed, mostly: the test asserts on it
            out.append(err)

    t = threading.Thread(target=go, daemon=True)
    t.start()
    return t, out


@pytest.fixture
def pipelined(tmp_path):
    etcd = GatedEtcd()
    path = str(tmp_path / "view.db")
    db = Database(path, backend=etcd)
    lock = threading.RLock()
    db.start_group_commit(lock)
    yield db, lock, etcd, path
    etcd.gate.set()
    db.close()


def _write(db: Database, lock, name: str):
    """A writer as the NameNode's are: apply under the lock, answer once durable."""
    with lock:
        _insert(db, name)
        seen = db.applied
    db.wait_durable(seen)
    return "answered"


def test_the_lock_is_free_while_a_txn_is_in_flight_and_no_reader_sees_the_change_before_etcd(pipelined):
    db, lock, etcd, path = pipelined
    etcd.gate.clear()
    first, first_out = _run(_write, db, lock, "a")
    wait_until(etcd.in_flight.is_set, 10, "a's Txn to be in flight")
    assert _in_view_file(path, "a")            # the view COMMITted it before etcd has it ...
    assert not _in_etcd(etcd, "a")
    reader, seen = _run(_names, db)
    # ... but a reader's snapshot holding it waits for the Txn, and so does a's writer
    reader.join(0.5)
    assert reader.is_alive() and seen == [] and first_out == []
    with lock:                                  # the lock is free: the next batch applies meanwhile
        _insert(db, "b")
    etcd.gate.set()
    for t in (first, reader):
        t.join(10)
    assert first_out == ["answered"] and seen[0] >= {"a"}
    assert _in_etcd(etcd, "a")
    db.wait_durable(db.applied)
    assert _names(db) == {"a", "b"} and _in_etcd(etcd, "b")
    # in order: a's Txn first, b's after it
    names = [[v.decode() for k, v in puts.items() if k.startswith("t/inodes/") and '"name":"' in v.decode()]
             for puts, _ in etcd.txns]
    first_a = next(i for i, txn in enumerate(names) if any('"name":"a"' in v for v in txn))
    first_b = next(i for i, txn in enumerate(names) if any('"name":"b"' in v for v in txn))
    assert first_a < first_b


def test_a_not_found_is_not_told_before_etcd_has_the_delete(pipelined):
    db, lock, etcd, path = pipelined
    _write(db, lock, "gone")
    etcd.gate.clear()

    def delete():
        with lock:
            with db.tx() as c:
                c.execute("DELETE FROM inodes WHERE name = 'gone'")
            seen = db.applied
        db.wait_durable(seen)

    writer, _ = _run(delete)
    wait_until(etcd.in_flight.is_set, 10, "the delete's Txn to be in flight")
    assert not _in_view_file(path, "gone")
    reader, seen = _run(_names, db)
    reader.join(0.5)
    assert reader.is_alive() and seen == []   # an empty answer would tell of the delete
    etcd.gate.set()
    reader.join(10)
    writer.join(10)
    assert seen == [set()] and not _in_etcd(etcd, "gone")


def test_a_failed_txn_after_the_local_commit_is_never_answered_nor_served_and_steps_down(pipelined):
    db, lock, etcd, path = pipelined
    _write(db, lock, "kept")
    etcd.gate.clear()
    etcd.refuse = "epoch 7 is no longer the leader's"
    writer, told = _run(_write, db, lock, "lost")
    wait_until(etcd.in_flight.is_set, 10, "the Txn to be in flight")
    assert _in_view_file(path, "lost")      # the view ran ahead of etcd
    reader, seen = _run(_names, db)
    etcd.gate.set()
    writer.join(10)
    reader.join(10)
    assert len(told) == 1 and isinstance(told[0], StoreFailed) and "no longer the leader's" in str(told[0])
    assert len(seen) == 1 and isinstance(seen[0], StoreFailed)
    assert etcd.fatal_calls and "no longer the leader's" in etcd.fatal_calls[0]
    assert not _in_etcd(etcd, "lost") and _in_etcd(etcd, "kept")
    with pytest.raises(StoreFailed, match="steps down to standby"):
        _insert(db, "later")
    with pytest.raises(StoreFailed):        # nothing more is served off this view
        _names(db)


def test_batches_sealed_under_the_lock_past_one_txn_go_to_etcd_in_order(tmp_path):
    """A batch that outgrows one Txn is sealed inline by the writer holding the lock; with Txns in
    flight, the sealed ones queue and reach etcd one at a time, in order, each within the limit."""
    etcd = GatedEtcd(max_keys=40)          # half: 16 captured rows a batch
    db = Database(str(tmp_path / "view.db"), backend=etcd)
    lock = threading.RLock()
    db.start_group_commit(lock)
    try:
        etcd.gate.clear()
        start = len(etcd.txns)
        with lock:
            for i in range(60):
                _insert(db, f"d{i:02d}")
            assert len(db._sealed) >= 2 or etcd.in_flight.is_set()
            assert _names(db) >= {"d00"}     # the lock's holder reads without waiting (no deadlock)
            seen = db.applied
        etcd.gate.set()
        db.wait_durable(seen)
        order = [int(v.decode().split('"name":"d')[1][:2]) for puts, _ in etcd.txns[start:]
                 for k, v in sorted(puts.items()) if k.startswith("t/inodes/") and '"name":"d' in v.decode()]
        assert sorted(order) == list(range(60)) and len(etcd.txns) - start >= 4
        assert all(len(p) + len(d) <= etcd.max_keys for p, d in etcd.txns)
        batches = [[int(v.decode().split('"name":"d')[1][:2]) for k, v in puts.items()
                    if k.startswith("t/inodes/") and '"name":"d' in v.decode()] for puts, _ in etcd.txns[start:]]
        flat = [min(b) for b in batches if b]
        assert flat == sorted(flat)          # every Txn after the one before it
        assert _names(db) == {f"d{i:02d}" for i in range(60)}
    finally:
        etcd.gate.set()
        db.close()
