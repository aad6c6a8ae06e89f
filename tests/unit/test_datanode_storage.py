"""DataNode block store on a temp dir, no gRPC.

Cases: round trip of a multi-chunk unit written in odd pieces; every (offset, length) of a unit
with tiny checksum chunks (chunk, batch and piece boundaries all crossed); a flipped byte on disk
caught by the chunk's CRC and only by reads touching that chunk; an unfinished or mis-sized write
leaves nothing; tmp/ is emptied on open; names are built from integers only; replacement is
atomic; damaged leftovers are dropped on open; after a crash at any commit step, opening keeps the
newest version whose block and sidecar agree (the crash itself, on a real process, is in
test_datanode_server.py); the read-side interface (open_unit); the data dir lock.
"""

import os

import pytest

from hedgefs.datanode import storage
from hedgefs.datanode.storage import (CHECKSUM_CHUNK, BlockStore, ChecksumError, LengthMismatch,
                                      RangeError, UnitNotFound)

G = 1 << 41   # the generation of these units (a NameNode's are of this order)


def pattern(n: int, seed: int = 0) -> bytes:
    return bytes((i * 31 + seed * 7 + (i >> 8)) % 251 for i in range(n))


def put(store: BlockStore, g: int, i: int, data: bytes, piece: int = 100_003) -> int:
    w = store.open_writer(g, i, len(data), generation=G)
    for s in range(0, len(data), piece):
        w.write(data[s:s + piece])
    return w.commit()


def read(store, g, i, off, n, **kw) -> bytes:
    return b"".join(store.read(g, i, off, n, **{"generation": G, **kw}))


def test_round_trip_multi_chunk(tmp_path):
    store = BlockStore(tmp_path, fsync=True)
    data = os.urandom(3 * CHECKSUM_CHUNK * 7 + 123)
    assert put(store, 42, 3, data, piece=77_777) == len(data)
    assert read(store, 42, 3, 0, len(data)) == data
    assert store.units() == [(42, 3, G, len(data))]
    assert store.used_bytes() == len(data) and store.unit_count() == 1
    assert store.length(42, 3, generation=G) == len(data)
    # pieces never exceed the requested size, so a large read is never one buffer
    sizes = [len(p) for p in store.read(42, 3, 5, len(data) - 5, piece=1 << 20, generation=G)]
    assert max(sizes) <= 1 << 20 and sum(sizes) == len(data) - 5 and len(sizes) > 1


def test_every_range_with_tiny_chunks(tmp_path, monkeypatch):
    monkeypatch.setattr(storage, "CHECKSUM_CHUNK", 16)
    monkeypatch.setattr(storage, "READ_BATCH", 48)
    store = BlockStore(tmp_path, fsync=False)
    data = pattern(100)
    put(store, 1, 0, data, piece=13)
    for off in range(len(data) + 1):
        for n in range(len(data) - off + 1):
            pieces = list(store.read(1, 0, off, n, piece=7, generation=G))
            assert all(0 < len(p) <= 7 for p in pieces)
            assert b"".join(pieces) == data[off:off + n], (off, n)
    with pytest.raises(RangeError):
        store.read(1, 0, 50, 51, generation=G)
    with pytest.raises(RangeError):
        store.read(1, 0, 101, 0, generation=G)


def test_zero_length_unit(tmp_path):
    store = BlockStore(tmp_path)
    put(store, 9, 5, b"")
    assert read(store, 9, 5, 0, 0) == b""
    assert store.units() == [(9, 5, G, 0)]


def test_flipped_byte_on_disk_is_caught_by_its_chunk(tmp_path):
    store = BlockStore(tmp_path)
    data = pattern(4 * CHECKSUM_CHUNK + 1000)
    put(store, 7, 1, data)
    bad = 2 * CHECKSUM_CHUNK + 500
    path = store.block_path(7, 1, generation=G)
    raw = bytearray(path.read_bytes())
    raw[bad] ^= 0x40
    path.write_bytes(raw)
    with pytest.raises(ChecksumError) as e:
        read(store, 7, 1, 0, len(data))
    assert (e.value.group_id, e.value.index, e.value.offset) == (7, 1, 2 * CHECKSUM_CHUNK)
    assert str(e.value) == f"checksum mismatch in unit 7/1 at offset {2 * CHECKSUM_CHUNK}"
    with pytest.raises(ChecksumError):
        read(store, 7, 1, bad, 1)              # a 1-byte read verifies its whole chunk
    with pytest.raises(ChecksumError):
        read(store, 7, 1, 2 * CHECKSUM_CHUNK - 1, 2)
    # ranges outside the bad chunk are still served
    assert read(store, 7, 1, 0, 2 * CHECKSUM_CHUNK) == data[:2 * CHECKSUM_CHUNK]
    assert read(store, 7, 1, 3 * CHECKSUM_CHUNK, 1000) == data[3 * CHECKSUM_CHUNK:][:1000]


def test_tamper_hook_runs_before_verification(tmp_path):
    store = BlockStore(tmp_path)
    put(store, 3, 0, pattern(1000))

    def flip(buf, _off):
        buf[10] ^= 1
    with pytest.raises(ChecksumError):
        read(store, 3, 0, 0, 1000, tamper=flip)
    assert read(store, 3, 0, 0, 1000) == pattern(1000)   # nothing changed on disk


def test_missing_unit_and_bad_ranges(tmp_path):
    store = BlockStore(tmp_path)
    with pytest.raises(UnitNotFound):
        store.read(1, 1, 0, 1, generation=G)
    put(store, 1, 1, b"abc")
    with pytest.raises(RangeError):
        store.read(1, 1, 2, 2, generation=G)
    with pytest.raises(RangeError):
        store.read(1, 1, -1, 1, generation=G)
    assert read(store, 1, 1, 3, 0) == b""


def leftovers(root) -> list[str]:
    """Every file under the data dir but its lock file and VERSION (its storage id)."""
    return sorted(str(p.relative_to(root)) for p in root.rglob("*")
                  if p.is_file() and p.name not in ("datanode.lock", "VERSION"))


def test_unfinished_write_leaves_nothing(tmp_path):
    store = BlockStore(tmp_path)
    w = store.open_writer(5, 2, 100, generation=G)
    w.write(b"x" * 60)
    w.abort()
    assert leftovers(tmp_path) == [] and store.units() == []
    with store.open_writer(5, 2, 100, generation=G) as w:   # the context manager aborts unless committed
        w.write(b"x" * 60)
    assert leftovers(tmp_path) == []


def test_length_mismatch_leaves_nothing(tmp_path):
    store = BlockStore(tmp_path)
    w = store.open_writer(5, 2, 100, generation=G)
    w.write(b"x" * 60)
    with pytest.raises(LengthMismatch, match="got 60 bytes, expected 100"):
        w.commit()
    w = store.open_writer(5, 2, 10, generation=G)
    with pytest.raises(LengthMismatch):
        w.write(b"x" * 11)
    w.abort()
    assert leftovers(tmp_path) == [] and store.units() == []


def test_length_given_at_commit(tmp_path):
    store = BlockStore(tmp_path)
    w = store.open_writer(6, 0, None, generation=G)
    w.write(b"abcd")
    assert w.commit(4) == 4
    w = store.open_writer(6, 1, 4, generation=G)
    w.write(b"abcd")
    with pytest.raises(LengthMismatch, match="at finalize"):
        w.commit(5)
    assert store.units() == [(6, 0, G, 4)] and leftovers(tmp_path / "tmp") == []


def test_replacing_a_unit(tmp_path):
    store = BlockStore(tmp_path)
    put(store, 8, 0, b"old" * 1000)
    w = store.open_writer(8, 0, 5, generation=G)
    w.write(b"new!!")
    assert read(store, 8, 0, 0, 6) == b"oldold"     # the old unit until the commit
    w.commit()
    assert read(store, 8, 0, 0, 5) == b"new!!"
    assert store.units() == [(8, 0, G, 5)]
    assert store.delete(8, 0, generation=G) is True
    assert store.delete(8, 0, generation=G) is False
    assert leftovers(tmp_path) == []


def test_tmp_is_emptied_and_units_found_on_open(tmp_path):
    store = BlockStore(tmp_path)
    put(store, 300, 4, b"hello")
    (tmp_path / "tmp" / "300_5_1_1.blk").write_bytes(b"half a write")
    store.close()
    again = BlockStore(tmp_path)
    assert list((tmp_path / "tmp").iterdir()) == []
    assert again.units() == [(300, 4, G, 5)]
    assert read(again, 300, 4, 0, 5) == b"hello"


def test_damaged_leftovers_are_dropped_on_open(tmp_path):
    store = BlockStore(tmp_path)
    put(store, 1, 0, b"a" * 10)
    put(store, 1, 1, b"b" * 10)
    put(store, 1, 2, b"c" * 10)
    store.block_path(1, 0, generation=G).write_bytes(b"a" * 9)                  # size disagrees with sidecar
    store.block_path(1, 1, generation=G).with_suffix(".crc").unlink()           # block without sidecar
    store.close()
    again = BlockStore(tmp_path)
    assert again.units() == [(1, 2, G, 10)]
    assert leftovers(tmp_path) == [f"blocks/01/1_2_{G}_1.blk", f"blocks/01/1_2_{G}_1.crc"]


def test_names_come_from_integers(tmp_path):
    store = BlockStore(tmp_path)
    put(store, 300, 4, b"a")
    assert store.block_path(300, 4, generation=G) == tmp_path / "blocks" / "2c" / f"300_4_{G}_1.blk"
    put(store, 2**63, 8, b"z")
    assert leftovers(tmp_path)[:2] == [f"blocks/00/{2**63}_8_{G}_1.blk", f"blocks/00/{2**63}_8_{G}_1.crc"]
    for bad in ("../../etc/passwd", "1/2", -1):
        with pytest.raises(ValueError):
            store.block_path(bad, 0, generation=G)
        with pytest.raises(ValueError):
            store.open_writer(0, bad, 1, generation=G)


def test_replacing_leaves_only_the_new_versions_files(tmp_path):
    store = BlockStore(tmp_path)
    put(store, 8, 1, b"old")
    put(store, 8, 1, b"newer")
    assert leftovers(tmp_path) == [f"blocks/08/8_1_{G}_2.blk", f"blocks/08/8_1_{G}_2.crc"]
    assert read(store, 8, 1, 0, 5) == b"newer"


def test_a_reader_keeps_the_version_it_opened(tmp_path):
    store = BlockStore(tmp_path)
    put(store, 8, 2, b"A" * 300_000)
    pieces = store.read(8, 2, 0, 300_000, piece=1000, generation=G)
    first = next(pieces)
    put(store, 8, 2, b"B" * 300_000)                    # replaced (and the old files unlinked)
    assert first + b"".join(pieces) == b"A" * 300_000
    assert read(store, 8, 2, 0, 3) == b"BBB"


@pytest.mark.parametrize("state, survivor", [
    ("both versions complete", b"new"),               # crash after the sidecar rename
    ("new block only", b"old"),                       # crash between the two renames
    ("new sidecar only", b"old"),                     # the block's rename never reached the disk
    ("new block of the wrong size", b"old"),
])
def test_recovery_keeps_the_newest_consistent_version(tmp_path, state, survivor):
    store = BlockStore(tmp_path)
    put(store, 9, 0, b"old")
    old_blk = store.block_path(9, 0, generation=G)
    old_files = {p: p.read_bytes() for p in (old_blk, old_blk.with_suffix(".crc"))}
    put(store, 9, 0, b"new")
    new_blk = store.block_path(9, 0, generation=G)
    store.close()
    for p, data in old_files.items():                 # as if the old version was never removed
        p.write_bytes(data)
    if state == "new block only":
        new_blk.with_suffix(".crc").unlink()
    elif state == "new sidecar only":
        new_blk.unlink()
    elif state == "new block of the wrong size":
        new_blk.write_bytes(b"ne")
    again = BlockStore(tmp_path)
    assert read(again, 9, 0, 0, 3) == survivor
    kept = again.block_path(9, 0, generation=G)
    assert leftovers(tmp_path) == sorted(str(p.relative_to(tmp_path)) for p in (kept, kept.with_suffix(".crc")))


def test_open_unit_gives_the_block_file_its_length_and_the_crcs_of_a_range(tmp_path):
    import crc32c

    store = BlockStore(tmp_path)
    data = pattern(3 * CHECKSUM_CHUNK + 10)
    put(store, 4, 4, data)
    with store.open_unit(4, 4, generation=G) as unit:
        assert (unit.length, unit.chunk, len(unit.crcs)) == (len(data), CHECKSUM_CHUNK, 4)
        assert os.pread(unit.fileno(), 20, CHECKSUM_CHUNK - 10) == data[CHECKSUM_CHUNK - 10:CHECKSUM_CHUNK + 10]
        start, crcs = unit.chunks_for(CHECKSUM_CHUNK - 10, 20)
        assert start == 0 and crcs == unit.crcs[0:2]
        assert unit.chunks_for(3 * CHECKSUM_CHUNK, 10) == (3 * CHECKSUM_CHUNK, (crc32c.crc32c(data[-10:]),))
        assert unit.chunks_for(5, 0) == (5, ())
    with pytest.raises(UnitNotFound):
        store.open_unit(4, 5, generation=G)


def test_a_second_store_on_the_same_dir_is_refused_until_the_first_closes(tmp_path):
    store = BlockStore(tmp_path)
    with pytest.raises(storage.DataDirInUse, match=f"data dir {tmp_path} is in use by another DataNode "
                                                    fr"\(pid {os.getpid()}\)"):
        BlockStore(tmp_path)
    store.close()
    BlockStore(tmp_path).close()


def test_unknown_crash_step_is_refused(tmp_path):
    with pytest.raises(ValueError, match="unknown commit step 'later'"):
        BlockStore(tmp_path, crash_at="later")


def test_units_of_one_group_id_and_index_but_two_generations_are_two_units(tmp_path):
    """A wiped NameNode's successor reuses group ids; the generation keeps its units apart."""
    store = BlockStore(tmp_path)
    for generation, data in ((5, b"old namespace"), (2**62 + 3, b"new one")):
        with store.open_writer(7, 1, len(data), generation=generation) as w:
            w.write(data)
            w.commit()
    assert sorted(store.units()) == [(7, 1, 5, 13), (7, 1, 2**62 + 3, 7)]
    assert b"".join(store.read(7, 1, 0, 7, generation=2**62 + 3)) == b"new one"
    assert store.block_path(7, 1, generation=5).name == "7_1_5_1.blk"
    with pytest.raises(UnitNotFound, match="unit 7/1 generation 6 not found"):
        store.open_unit(7, 1, generation=6)
    assert not store.delete(7, 1, generation=G)                       # another generation: not here
    assert store.delete(7, 1, generation=5)             # only that one goes
    assert store.units() == [(7, 1, 2**62 + 3, 7)]
    store.close()
    again = BlockStore(tmp_path)
    assert again.units() == [(7, 1, 2**62 + 3, 7)]
    again.close()


def test_a_write_once_writer_never_replaces_a_stored_unit(tmp_path):
    from hedgefs.datanode.storage import UnitExists

    store = BlockStore(tmp_path)
    first = store.open_writer(3, 0, 5, generation=9, once=True)
    second = store.open_writer(3, 0, 6, generation=9, once=True)   # both open before either commits
    first.write(b"first")
    assert first.commit() == 5
    second.write(b"second")
    with pytest.raises(UnitExists, match="stored by another write meanwhile"):
        second.commit()
    with pytest.raises(UnitExists, match="is stored already"):
        store.open_writer(3, 0, 5, generation=9, once=True)
    assert b"".join(store.read(3, 0, 0, 5, generation=9)) == b"first"
    assert leftovers(tmp_path / "tmp") == []
    store.close()


def test_a_rotted_copy_is_known_until_it_is_replaced_or_deleted(tmp_path):
    from hedgefs.datanode import rot

    store = BlockStore(tmp_path)
    for g in (1, 2):
        put(store, g, 0, pattern(5000, g))
    rotted = rot.rot(store, 5, seed=3)                  # only two are stored
    assert sorted(r.group_id for r in rotted) == [1, 2]
    with pytest.raises(ChecksumError):
        read(store, 1, 0, 0, 5000)
    assert rot.still_stored(store, rotted) == rotted
    put(store, 1, 0, pattern(5000, 1))                  # a repaired copy
    assert store.delete(2, 0, generation=G)
    assert rot.still_stored(store, rotted) == []
    assert read(store, 1, 0, 0, 5000) == pattern(5000, 1)


# ---------------------------------------------------------------- append in place (a replicated open tail)

def replica(store, group_id: int, index: int, data: bytes) -> None:
    """An open tail's replica, made as one is: by an APPEND at 0."""
    assert store.append(group_id, index, 0, data, generation=G) == len(data)


def test_only_a_unit_made_by_append_grows(tmp_path):
    """A written unit (an EC unit, a repair's or a move's copy) is written once: an APPEND at its
    length is refused and changes nothing, before and after a restart; a replica made by APPEND
    grows, and still does after a restart (the sidecar remembers how the unit was made)."""
    store = BlockStore(tmp_path)
    put(store, 5, 0, b"cell")
    replica(store, 5, 1, b"tail")
    with pytest.raises(storage.NotAppendable, match="not made by APPEND"):
        store.append(5, 0, 4, b"more", generation=G)
    assert store.append(5, 1, 4, b"more", generation=G) == 8
    store.close()
    again = BlockStore(tmp_path)
    with pytest.raises(storage.NotAppendable):
        again.append(5, 0, 4, b"more", generation=G)
    assert again.append(5, 1, 8, b"!", generation=G) == 9
    assert read(again, 5, 0, 0, 4) == b"cell" and read(again, 5, 1, 0, 9) == b"tailmore!"
    assert sorted(again.units()) == [(5, 0, G, 4), (5, 1, G, 9)]


@pytest.mark.parametrize("sizes", [
    (0, 5, 7),                                          # a unit begun empty
    (CHECKSUM_CHUNK - 3, 3, 1),                         # a chunk filled exactly, then the next begun
    (100, CHECKSUM_CHUNK, 2 * CHECKSUM_CHUNK + 17),     # appends spanning several chunks
])
def test_appends_read_back_as_if_written_at_once(tmp_path, sizes):
    store = BlockStore(tmp_path)
    data = pattern(sum(sizes), seed=3)
    replica(store, 5, 0, data[:sizes[0]])
    at = sizes[0]
    for n in sizes[1:]:
        assert store.append(5, 0, at, data[at:at + n], generation=G) == at + n
        at += n
        assert read(store, 5, 0, 0, at) == data[:at]
    store.close()                                 # the CRCs equal those of one write of the same bytes
    again = BlockStore(tmp_path)
    with again.open_unit(5, 0, generation=G) as unit:
        crcs = unit.crcs
    put(again, 6, 0, data)
    with again.open_unit(6, 0, generation=G) as unit:
        assert unit.crcs == crcs and unit.length == len(data)
    assert read(again, 5, 0, 0, len(data)) == data


def test_a_stale_append_is_refused_and_changes_nothing(tmp_path):
    store = BlockStore(tmp_path)
    replica(store, 5, 1, b"abc")
    assert store.append(5, 1, 3, b"def", generation=G) == 6
    for offset in (3, 0, 7):                     # behind (a writer that missed an append) or past the end
        with pytest.raises(storage.StaleAppend):
            store.append(5, 1, offset, b"XYZ", generation=G)
    assert read(store, 5, 1, 0, 6) == b"abcdef"
    assert store.length(5, 1, generation=G) == 6
    with pytest.raises(UnitNotFound):            # a unit not stored grows only from 0
        store.append(5, 2, 4, b"x", generation=G)
    with pytest.raises(UnitNotFound):            # another generation is another unit
        store.append(5, 1, 6, b"x", generation=G + 1)
    assert store.units() == [(5, 1, G, 6)]


def test_an_append_at_zero_creates_the_replica_once(tmp_path):
    store = BlockStore(tmp_path)
    assert store.append(7, 0, 0, b"first", generation=G) == 5          # the open tail's first bytes
    assert store.append(7, 0, 5, b" then", generation=G) == 10
    with pytest.raises(storage.StaleAppend):     # a second writer's "first bytes": refused, unchanged
        store.append(7, 0, 0, b"other", generation=G)
    assert read(store, 7, 0, 0, 10) == b"first then"
    store.close()
    assert BlockStore(tmp_path).units() == [(7, 0, G, 10)]


def test_a_reader_never_sees_bytes_past_the_length_it_opened(tmp_path):
    store = BlockStore(tmp_path)
    replica(store, 5, 3, b"A" * 1000)
    pieces = store.read(5, 3, 0, 1000, piece=100, generation=G)
    first = next(pieces)
    with store.open_unit(5, 3, generation=G) as before:
        store.append(5, 3, 1000, b"B" * 500, generation=G)
        assert before.length == 1000 and len(before.crcs) == 1
    assert first + b"".join(pieces) == b"A" * 1000
    with pytest.raises(RangeError):              # past the committed length: refused, not served
        store.read(5, 3, 0, 1501, generation=G)
    assert read(store, 5, 3, 990, 20) == b"A" * 10 + b"B" * 10


@pytest.mark.parametrize("crash_after", ["block written", "sidecar written to tmp"])
def test_an_append_cut_short_by_a_crash_leaves_the_committed_unit(tmp_path, crash_after):
    store = BlockStore(tmp_path)
    replica(store, 5, 4, b"kept" * 100)
    blk = store.block_path(5, 4, generation=G)
    with open(blk, "ab") as f:                  # the bytes of an append that never reached its commit point
        f.write(b"lost" * 50)
    if crash_after == "sidecar written to tmp":
        (tmp_path / "tmp" / "5_4_1_append_x.crc").write_bytes(b"partial sidecar")
    store.close()
    again = BlockStore(tmp_path)
    assert again.units() == [(5, 4, G, 400)]
    assert blk.stat().st_size == 400
    assert read(again, 5, 4, 0, 400) == b"kept" * 100
    assert again.append(5, 4, 400, b"next", generation=G) == 404     # and appends go on from there
    assert read(again, 5, 4, 396, 8) == b"keptnext"
    assert not list((tmp_path / "tmp").iterdir())


def test_an_append_racing_a_replacement_is_refused(tmp_path, monkeypatch):
    store = BlockStore(tmp_path, crash_at=None)
    replica(store, 5, 5, b"old")
    real_step = store._step

    def replace_meanwhile(name):
        real_step(name)
        if name == "sidecar-synced":
            monkeypatch.setattr(store, "_step", real_step)
            put(store, 5, 5, b"a new version")
    monkeypatch.setattr(store, "_step", replace_meanwhile)
    with pytest.raises(storage.StaleAppend):
        store.append(5, 5, 3, b"+tail", generation=G)
    assert read(store, 5, 5, 0, 13) == b"a new version"
    assert not list((tmp_path / "tmp").iterdir())


def test_an_append_to_a_unit_with_a_damaged_sidecar_is_refused_as_a_bad_unit(tmp_path):
    store = BlockStore(tmp_path)
    replica(store, 5, 6, b"abc")
    sidecar = store.block_path(5, 6, generation=G).with_suffix(".crc")
    sidecar.write_bytes(sidecar.read_bytes()[:-1])
    with pytest.raises(ChecksumError):
        store.append(5, 6, 3, b"def", generation=G)
    assert store.block_path(5, 6, generation=G).read_bytes() == b"abc"
