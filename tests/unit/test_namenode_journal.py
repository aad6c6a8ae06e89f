"""The journal (namenode/journal/): one record per change, group-committed, replayed at start-up,
checkpointed; real SQLite, no gRPC.

- Replay equals the live tree: seeded random sequences of every operation, then the namespace
  rebuilt from the journal alone, and from a checkpoint image plus the records after it, compared
  with the live one field by field (``nn_support.state``).
- Group commit: many records in one batch written by one thread off the writers' lock; nobody
  answered, and no reader shown a change, before its batch is durable; a batch the engine cannot
  write fails its callers and every later change.
- A checkpoint written while writers go on is the tree at its txid (copy on write).
- A corrupt image or record is a one-line error naming the file and the txid; nothing is changed.

(kill -9 at every fault point, on a real NameNode process: tests/integration/test_namenode_crash.py.)
"""

import random
import shutil
import sqlite3
import threading

import pytest

from hedgefs.namenode.blocks.blockmap import GroupCommit
from hedgefs.namenode.errors import NameNodeError
from hedgefs.namenode.journal.journal import CorruptStore, RecordTooLarge, StoreFailed
from hedgefs.namenode.journal.sqlite import SqliteEngine
from hedgefs.namenode.namesystem import Namesystem
from conftest import wait_until
from nn_support import FakeClock, add_datanodes, make_namenode, state, stored

POLICIES = ("RS-3-2-1k", "REPLICATE-3", "REPLICATE-2", "RS-3-2-2k")


class Workload:
    """Random operations of every kind, from a seed, on a namesystem (each may be refused: a
    refusal changes nothing, and is part of what replay must agree with)."""

    def __init__(self, nn: Namesystem, clock: FakeClock, seed: int):
        self.nn, self.clock, self.rng = nn, clock, random.Random(seed)
        self.open: list = []       # (file id, groups) of writes in progress
        self.tails: dict = {}      # file id -> [its write's open tail, the length hsynced on it]
        self.calls = 0

    def paths(self) -> list[str]:
        return [e.path for e in self.nn.list("/", recursive=True)]

    def some(self, want_dir: bool | None = None) -> str:
        entries = [e for e in self.nn.list("/", recursive=True) if want_dir is None or e.is_dir == want_dir]
        return self.rng.choice(entries).path if entries else "/"

    def fresh(self) -> str:
        parent = self.some(True)
        return (parent.rstrip("/") + "/") + f"n{self.rng.randrange(40)}"

    def retry(self):
        self.calls += 1
        return ("client-a", f"call-{self.calls}") if self.rng.random() < 0.5 else None

    def step(self) -> None:
        nn, rng = self.nn, self.rng
        self.clock.advance(rng.choice((0, 0.001, 1)))
        op = rng.choice(["mkdir", "mkdir", "write", "write", "write", "open", "finish", "abandon", "delete",
                         "rename", "policy", "chmod", "chown", "concat", "overwrite", "decommission",
                         "times", "symlink", "xattr", "unxattr", "append", "reopen", "truncate", "sync",
                         "tail", "tail"])
        try:
            if op == "mkdir":
                nn.mkdir(self.fresh() + "/" + f"m{rng.randrange(5)}", parents=True, retry=self.retry())
            elif op in ("write", "overwrite", "open"):
                path = self.some(False) if op == "overwrite" else self.fresh()
                created = nn.create(path, overwrite=op == "overwrite",
                                    policy=rng.choice(("",) + POLICIES), retry=self.retry())
                groups = [nn.add_block_group(created.file_id, retry=self.retry()) for _ in range(rng.randrange(3))]
                if op == "open":
                    self.open.append((created, groups, 0))
                else:
                    self._complete(created, groups)
            elif op == "finish" and self.open:
                created, groups, kept = self.open.pop(rng.randrange(len(self.open)))
                self._complete(created, groups, kept)
            elif op == "sync" and self.open:   # hflush: the write so far committed, and it goes on
                created, groups, kept = self.open.pop(rng.randrange(len(self.open)))
                lease = nn.tree.writing.get(created.file_id)   # (a delete of its file ends it)
                path = nn.tree.lease_path(lease) if lease is not None else "/gone"
                commits, length = self._commits(created, groups, kept)
                synced = nn.sync(created.file_id, path, length, commits, retry=self.retry())
                first = synced.created.first_group
                self.open.append((synced.created, [first] if first is not None else [], synced.kept_length))
                if synced.tail is not None:   # an EC file's: hsyncs on it follow ("tail")
                    self.tails[created.file_id] = [synced.tail, length]
            elif op == "tail" and self.tails:   # hsync on the open tail: every replica stored, the length
                file_id = rng.choice(sorted(self.tails))
                tail, length = self.tails[file_id]
                lease = nn.tree.writing.get(file_id)
                if lease is None:
                    del self.tails[file_id]
                    return
                stored(nn, tail, 0)
                length += rng.randrange(0, 1500)
                nn.sync_length(file_id, length, tail.id)
                self.tails[file_id][1] = length
            elif op == "abandon" and self.open:
                created, _, _ = self.open.pop(rng.randrange(len(self.open)))
                nn.abandon(created.file_id, retry=self.retry())
            elif op == "delete":
                nn.delete(self.some(), recursive=rng.random() < 0.7, retry=self.retry())
            elif op == "rename":
                nn.rename(self.some(), self.fresh(), retry=self.retry())
            elif op == "policy":
                nn.set_policy(self.some(True), rng.choice(("",) + POLICIES), retry=self.retry())
            elif op == "chmod":
                nn.set_permission(self.some(), rng.choice((0o700, 0o755, 0o1777, 0o644)), retry=self.retry())
            elif op == "chown":
                nn.set_owner(self.some(), rng.choice(("", "alice", "bob")), rng.choice(("", "staff")),
                             retry=self.retry())
            elif op == "concat":
                files = [p for p in self.paths() if not nn.file_info(p).entry.is_dir]
                if len(files) >= 2:
                    parts = rng.sample(files, 2)
                    nn.concat(self.fresh(), parts, retry=self.retry())
            elif op == "times":
                nn.set_times(self.some(), rng.choice((-1, 1_000, 2_000_000)), rng.choice((-1, 5_000)),
                             retry=self.retry())
            elif op == "symlink":
                nn.symlink(rng.choice(("../a", "/x/y", "t" * 100)), self.fresh(), retry=self.retry())
            elif op == "xattr":
                nn.set_xattr(self.some(), f"user.k{rng.randrange(3)}", bytes(rng.randrange(256) for _ in range(5)),
                             rng.choice((0, 1, 2)), retry=self.retry())
            elif op == "unxattr":
                nn.remove_xattr(self.some(), f"user.k{rng.randrange(3)}", retry=self.retry())
            elif op in ("append", "reopen", "truncate"):   # reopen: an append left open (a write in progress)
                path = self.some(False)
                info = nn.file_info(path).entry
                if op == "truncate":
                    reopened = nn.truncate(path, rng.randrange(info.length + 1), retry=self.retry())
                else:
                    reopened = nn.append(path, retry=self.retry())
                if reopened is not None:
                    created = reopened.created
                    groups = [nn.add_block_group(created.file_id, retry=self.retry()) for _ in range(rng.randrange(1, 3))]
                    if op == "reopen":
                        self.open.append((created, groups, reopened.kept_length))
                    else:
                        self._complete(created, groups, reopened.kept_length)
            elif op == "decommission":
                if rng.random() < 0.5:
                    nn.decommission(rng.choice(["dn1", "dn2", "dn3", "dn4", "dn5", "dn6", "dn7", "dn8"]))
                else:
                    nn.recommission(rng.choice(["dn1", "dn2"]))
        except NameNodeError:
            pass

    def _complete(self, created, groups, kept: int = 0) -> None:
        commits, length = self._commits(created, groups, kept)
        self.nn.complete(created.file_id, length, commits, retry=self.retry())

    def _commits(self, created, groups, kept: int) -> tuple[list, int]:
        nn, rng = self.nn, self.rng
        full = 3 * created.block_size if created.policy.startswith("RS-3-2") else created.block_size
        commits, length = [], kept
        for i, g in enumerate(groups):
            n = full if i < len(groups) - 1 else rng.randrange(0, full + 1)
            commits.append(stored(nn, g, n))
            length += n
        return commits, length


def _replica(tmp_path, clock, name: str) -> Namesystem:
    """A namesystem on a copy of the journal file as it is now (what a restart would find)."""
    src = tmp_path / "nn"
    dst = tmp_path / name
    shutil.rmtree(dst, ignore_errors=True)
    dst.mkdir()
    source = sqlite3.connect(src / "namenode.db")
    target = sqlite3.connect(dst / "namenode.db")
    source.backup(target)
    source.close()
    target.close()
    return make_namenode(dst, clock)


@pytest.mark.parametrize("seed", [11, 12, 13, 14, 15])
def test_replay_and_image_plus_replay_equal_the_live_tree(tmp_path, clock, seed):
    nn = make_namenode(tmp_path / "nn", clock, checkpoint_every=10**9)
    add_datanodes(nn, 8)
    work = Workload(nn, clock, seed)
    for _ in range(150):
        work.step()
    replayed = _replica(tmp_path, clock, "replay")     # the journal alone
    assert replayed.replayed > 150
    assert state(replayed) == state(nn)
    # A replay owes deletes only of groups gone (their writers' targets): never one of a live group.
    owed = {g for dn in replayed.blocks.pending_delete_counts() for g, _i, _gen in replayed.blocks.pending_deletes(dn)}
    assert not owed & set(replayed.blocks.groups)
    replayed.close(checkpoint=False)
    nn.checkpoint()
    for _ in range(150):
        work.step()
    again = _replica(tmp_path, clock, "image")           # the image, then the records after it
    assert again.replayed == nn.journal.last - nn.journal.image_txid > 0
    assert state(again) == state(nn)
    again.close(checkpoint=False)
    nn.close()
    last = make_namenode(tmp_path / "nn", clock)          # a clean shutdown's image: nothing to replay
    assert last.replayed == 0 and state(last) == state(nn)
    last.close()


def test_a_retried_call_after_a_restart_gets_its_first_answer(tmp_path, clock):
    nn = make_namenode(tmp_path / "nn", clock)
    add_datanodes(nn, 5)
    created = nn.create("/f", retry=("c", "1"))
    group = nn.add_block_group(created.file_id, retry=("c", "2"))
    nn.journal.close()   # no checkpoint: a replay rebuilds the retry cache from the records
    again = make_namenode(tmp_path / "nn", clock)
    add_datanodes(again, 5)
    assert again.create("/f", retry=("c", "1")) == created
    retried = again.add_block_group(created.file_id, retry=("c", "2"))
    assert (retried.id, retried.generation, [u.datanode_id for u in retried.units]) == \
        (group.id, group.generation, [u.datanode_id for u in group.units])
    assert again.create("/g", retry=("c", "3")).file_id != created.file_id   # a new call runs
    again.close()


class GatedEngine(SqliteEngine):
    """The real SQLite engine, whose appends wait at a gate the test opens."""

    def __init__(self, path):
        super().__init__(path)
        self.gate = threading.Event()
        self.gate.set()
        self.waiting = threading.Event()
        self.fail_next = False
        self.appends: list[tuple[int, int]] = []

    def append(self, first, last, data):
        self.waiting.set()
        self.gate.wait(30)
        if self.fail_next:
            raise OSError("disk full (injected)")
        super().append(first, last, data)
        self.appends.append((first, last))


@pytest.fixture
def gated(tmp_path, clock):
    engine = GatedEngine(str(tmp_path / "nn.db"))
    nn = make_namenode(tmp_path / "nn", clock, engine=engine)
    add_datanodes(nn, 5)
    yield nn, engine
    engine.gate.set()
    nn.close(checkpoint=False)


def _in_thread(fn) -> tuple[threading.Thread, list]:
    out: list = []

    def run():
        try:
            out.append(fn())
        except Exception as err:
            out.append(err)
    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t, out


def test_the_lock_is_free_while_a_batch_is_written_and_nobody_sees_it_before(gated):
    nn, engine = gated
    engine.gate.clear()
    engine.waiting.clear()
    first, out = _in_thread(lambda: nn.mkdir("/a"))
    assert engine.waiting.wait(10)                    # its batch is being written
    second, out2 = _in_thread(lambda: nn.mkdir("/b"))  # the lock is free: it applies meanwhile
    reader, seen = _in_thread(lambda: [e.path for e in nn.list("/")])
    first.join(0.3)
    assert first.is_alive() and second.is_alive() and reader.is_alive()
    assert out == out2 == seen == []                   # nobody answered, nobody shown /a or /b
    engine.gate.set()
    for t in (first, second, reader):
        t.join(10)
    assert [e.path for e in out + out2] == ["/a", "/b"] and seen[0] in (["/a", "/b"], ["/a"])


def test_many_records_one_batch(gated):
    nn, engine = gated
    engine.gate.clear()
    engine.waiting.clear()
    threads = [_in_thread(lambda i=i: nn.mkdir(f"/d{i}")) for i in range(20)]
    assert engine.waiting.wait(10)
    engine.appends.clear()
    engine.gate.set()
    for t, _out in threads:
        t.join(10)
    assert [out[0].path for _t, out in threads] == [f"/d{i}" for i in range(20)]
    assert sum(last - first + 1 for first, last in engine.appends) >= 19
    assert len(engine.appends) <= 3   # the first batch, then what queued behind it, in one or two


def test_a_batch_the_engine_cannot_write_fails_its_callers_and_every_later_change(gated):
    nn, engine = gated
    engine.gate.clear()
    engine.waiting.clear()
    engine.fail_next = True
    t, out = _in_thread(lambda: nn.mkdir("/a"))
    assert engine.waiting.wait(10)
    engine.gate.set()
    t.join(10)
    assert isinstance(out[0], StoreFailed) and "disk full (injected)" in str(out[0])
    with pytest.raises(StoreFailed, match="the NameNode's journal failed"):
        nn.mkdir("/b")


def test_a_record_larger_than_the_engine_holds_is_refused_before_anything_changes(gated):
    """etcd holds a record in one key (1 MiB): a change whose record is larger is refused, the tree
    and the journal as they were, and the journal goes on (not a failed batch: a fail-stop)."""
    nn, engine = gated
    engine.max_record_bytes = 200
    before, last = state(nn), nn.journal.last
    with pytest.raises(RecordTooLarge, match="Mkdir of .* bytes: more than one etcd transaction may hold"):
        nn.mkdir("/" + "x" * 250)
    assert state(nn) == before and nn.journal.last == last and not nn.journal.failed
    nn.mkdir("/short")
    assert nn.file_info("/short").entry.is_dir


def test_a_checkpoint_written_while_writers_go_on_is_the_tree_at_its_txid(tmp_path, clock, monkeypatch):
    """The image is written off the writers' lock while changes go on (here: between every two of
    its chunks, deterministically): it is the tree as it was at its txid, and that image plus the
    records after it is the tree now."""
    from hedgefs.namenode.journal import image

    nn = make_namenode(tmp_path / "nn", clock, checkpoint_every=10**9)
    add_datanodes(nn, 8)
    work = Workload(nn, clock, 5)
    for _ in range(120):
        work.step()
    monkeypatch.setattr(image, "CHUNK_BYTES", 64)
    at: dict = {}
    real_init, real_chunks = image.Snapshot.__init__, image.Snapshot.chunks

    def init(self, applier, txid):
        real_init(self, applier, txid)
        at["txid"], at["state"] = txid, state(nn)   # under the writers' lock: the tree at the image's txid

    def chunks(self):
        for chunk in real_chunks(self):
            for _ in range(8):
                work.step()   # changes while the image is being written
            yield chunk
    monkeypatch.setattr(image.Snapshot, "__init__", init)
    monkeypatch.setattr(image.Snapshot, "chunks", chunks)
    txid = nn.checkpoint()
    assert txid == at["txid"] and nn.journal.last > txid + 10
    engine = SqliteEngine(str(tmp_path / "nn" / "namenode.db"))
    found_txid, found_chunks = engine.image()
    loaded = make_namenode(tmp_path / "check", clock)
    fresh = state(loaded)
    loaded.tree.__init__(loaded.default_policy)
    loaded.retry.__init__()
    loaded.blocks.__init__(loaded.wall_ms, clock)
    loaded.applier.leaving.clear()
    image.load(loaded.applier, found_chunks)
    engine.close()
    assert found_txid == txid
    assert state(loaded) == {**at["state"], "cluster_id": at["state"]["cluster_id"]}
    assert fresh != state(loaded)
    loaded.close(checkpoint=False)
    monkeypatch.setattr(image.Snapshot, "__init__", real_init)
    monkeypatch.setattr(image.Snapshot, "chunks", real_chunks)
    replica = _replica(tmp_path, clock, "replica")   # the image, then the records past it
    assert state(replica) == state(nn)
    replica.close(checkpoint=False)
    nn.close()


def _corrupt(path, table: str, where: str) -> None:
    conn = sqlite3.connect(path)
    blob = bytearray(conn.execute(f"SELECT data FROM {table} WHERE {where}").fetchone()[0])
    blob[len(blob) // 2] ^= 0x40
    conn.execute(f"UPDATE {table} SET data = ? WHERE {where}", (bytes(blob),))
    conn.commit()
    conn.close()


def test_a_corrupt_record_or_image_is_one_line_naming_the_file_and_txid_and_nothing_is_changed(tmp_path, clock):
    nn = make_namenode(tmp_path / "nn", clock)
    for i in range(5):
        nn.mkdir(f"/d{i}")
    nn.journal.close()   # as after a kill -9: the records, no image
    db = tmp_path / "nn" / "namenode.db"
    _corrupt(db, "edits", "first = (SELECT MAX(first) FROM edits)")
    before = db.read_bytes()
    with pytest.raises(CorruptStore, match=r"namenode\.db: journal record txid 6 is corrupt \(CRC32C mismatch\); "
                                          r"nothing was changed$"):
        make_namenode(tmp_path / "nn", clock)
    assert db.read_bytes() == before

    nn = make_namenode(tmp_path / "other", clock)
    nn.mkdir("/x")
    nn.close()   # a clean shutdown's image
    db = tmp_path / "other" / "namenode.db"
    _corrupt(db, "images", "chunk = 0")
    before = db.read_bytes()
    with pytest.raises(CorruptStore, match=r"namenode\.db: the checkpoint image at txid 2 is corrupt \(chunk 0: "
                                          r"CRC32C mismatch\); nothing was changed$"):
        make_namenode(tmp_path / "other", clock)
    assert db.read_bytes() == before


def test_a_gap_in_the_journal_is_named_by_the_missing_txid(tmp_path, clock):
    nn = make_namenode(tmp_path / "nn", clock)
    for i in range(3):
        nn.mkdir(f"/d{i}")
    nn.journal.close()
    conn = sqlite3.connect(tmp_path / "nn" / "namenode.db")
    conn.execute("DELETE FROM edits WHERE first = 3")
    conn.commit()
    conn.close()
    with pytest.raises(CorruptStore, match=r"journal record txid 3 is corrupt \(missing: the next batch found "
                                          r"starts at 4\)"):
        make_namenode(tmp_path / "nn", clock)


def test_every_answer_of_concurrent_writers_is_already_durable(tmp_path):
    """16 threads of mkdir: each, when it returns, is in the journal's file (a connection of the
    thread's own, outside the NameNode, reads it back)."""
    nn = Namesystem(str(tmp_path / "nn"))
    missing: list[str] = []
    local = threading.local()

    def seen(txid: int) -> bool:
        if not hasattr(local, "c"):
            local.c = sqlite3.connect(str(tmp_path / "nn" / "namenode.db"))
        return local.c.execute("SELECT 1 FROM edits WHERE first <= ? AND last >= ?", (txid, txid)).fetchone() \
            is not None

    def work(t: int) -> None:
        for i in range(40):
            nn.mkdir(f"/t{t}/d{t}-{i}", parents=True)
            with nn.lock:
                node = nn.tree.find(f"/t{t}/d{t}-{i}")
            if node is None or not seen(nn.journal.durable):
                missing.append(f"/t{t}/d{t}-{i}")
        local.c.close()

    threads = [threading.Thread(target=work, args=(t,)) for t in range(16)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert missing == []
    assert len(nn.list("/", recursive=True)) == 16 * 41
    assert nn.journal.durable == nn.journal.last
    assert nn.journal.batches < 16 * 40   # group commit: fewer batches than records
    nn.close()


def test_lock_free_readers_never_see_a_half_made_change(tmp_path, clock):
    """Readers (stat, list) take no lock while writers rename and replace files: every answer is
    a state some order of the changes could give, never a missing parent or a half-made file."""
    nn = make_namenode(tmp_path / "nn", clock)
    add_datanodes(nn, 5)
    nn.mkdir("/a/b", parents=True)
    stop = threading.Event()
    errors: list = []

    def reader():
        while not stop.is_set():
            try:
                for e in nn.list("/", recursive=True):
                    if not e.is_dir:
                        info = nn.file_info(e.path)
                        assert info.entry.length == sum(g.length for g in info.groups), info
            except NameNodeError:
                pass   # renamed or replaced between the listing and the stat: a fair answer
            except Exception as err:
                errors.append(err)
                return

    readers = [threading.Thread(target=reader, daemon=True) for _ in range(4)]
    for t in readers:
        t.start()
    for i in range(150):
        created = nn.create("/a/b/f", overwrite=True)
        group = nn.add_block_group(created.file_id)
        nn.complete(created.file_id, 100 + i, [stored(nn, group, 100 + i)])
        nn.rename("/a/b", "/a/c")
        nn.rename("/a/c", "/a/b")
    stop.set()
    for t in readers:
        t.join(10)
    assert errors == []
    nn.close()


def test_images_come_every_checkpoint_every_records_or_every_eighth_of_a_larger_namespace(tmp_path, clock):
    """An image costs in proportion to the namespace: past 8 x --checkpoint-every inodes, one
    comes every eighth of the namespace's size in records instead."""
    nn = make_namenode(tmp_path / "nn", clock, checkpoint_every=10)
    nn.checkpointer.start()   # (the server starts it)
    try:
        assert nn.checkpointer._period() == 10
        for i in range(199):
            nn.mkdir(f"/d{i}")
        assert nn.tree.dirs == 200 and nn.checkpointer._period() == 25
        wait_until(lambda: nn.journal.last - nn.journal.image_txid < 25, 30, "images as the namespace grew")
    finally:
        nn.close(checkpoint=False)


def test_a_record_without_its_newest_field_is_written_as_older_namenodes_read_it():
    """Mkdir's mode and Complete's times came last: a record that does not use them is written in
    the shape an older standby decodes; one that does carries them; both read back as they were."""
    import msgpack

    from hedgefs.namenode.journal import records as r

    cases = [
        (r.Mkdir("/a", 5, "u", 3, None), r.Mkdir("/a", 5, "u", 3, None, 0o700), 6),
        (r.Complete(7, 10, (9,), 5, None, None), r.Complete(7, 10, (9,), 5, None, None, (4, -1)), 7),
    ]  # (a record without its newest field, one with it, the code + the fields an older NameNode knows)
    for plain, grown, old_fields in cases:
        assert len(msgpack.unpackb(r.encode(plain), use_list=False, raw=False)) == old_fields
        assert len(msgpack.unpackb(r.encode(grown), use_list=False, raw=False)) == old_fields + 1
        assert r.decode(r.encode(plain)) == plain and r.decode(r.encode(grown)) == grown
