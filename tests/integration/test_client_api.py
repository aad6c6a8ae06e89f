"""The client's public API on a real cluster: the push writer (``create``), ranged streams and
their leases, ``stat(span=)``, the typed admin calls and errors.

Data is offset-dependent (conftest.pattern), so a misplaced, dropped or shifted byte shows.
"""

import hashlib

import pytest

from conftest import CELL, GROUP, STRIPE, client, pattern
from hedgefs.client import admin as typed
from hedgefs.client.errors import (
    AlreadyExists,
    DirectoryNotEmpty,
    HedgefsError,
    IsADirectory,
    NotADirectory,
    NotFound,
    UsageError,
    WriteAborted,
)
from hedgefs.client.streams import POISON


@pytest.fixture(scope="module")
def data():
    return pattern(2 * GROUP + 3 * STRIPE + CELL + 7, seed=43)


@pytest.fixture(scope="module", autouse=True)
def stored(cluster, data):
    with client(cluster.namenode) as fs:
        fs.mkdir("/api", parents=True)
        fs.write_bytes("/api/big", data, overwrite=True)
    return "/api/big"


# ---------------------------------------------------------------------- the push writer

def test_a_file_written_in_pieces_of_every_size_reads_back_and_its_digest_is_the_bytes(fs, data):
    sizes = [1, CELL - 1, 3, STRIPE + 5, 0, 7 * CELL, GROUP]
    with fs.create("/api/pushed", overwrite=True, digests=("md5",)) as f:
        at = 0
        for i in range(200):
            n = sizes[i % len(sizes)]
            if at >= len(data):
                break
            piece = bytearray(data[at:at + n])   # a buffer the caller reuses at once
            assert f.write(piece) == len(piece)
            piece[:] = b"\0" * len(piece)
            at += len(piece)
    assert f.committed and f.length == at == f.written
    assert fs.read_bytes("/api/pushed") == data[:at]
    assert f.hexdigest("md5") == hashlib.md5(data[:at]).hexdigest()


def test_nothing_is_visible_until_close_commits(fs):
    f = fs.create("/api/pending", overwrite=True)
    f.write(b"x" * (STRIPE + 1))
    with pytest.raises(NotFound):
        fs.stat("/api/pending")
    assert f.close() == STRIPE + 1
    assert fs.stat("/api/pending").length == STRIPE + 1


def test_an_abort_leaves_no_file_and_an_overwritten_file_as_it_was(fs):
    fs.write_bytes("/api/kept", b"old bytes", overwrite=True)
    f = fs.create("/api/kept", overwrite=True)
    f.write(pattern(3 * STRIPE))
    f.abort()
    assert fs.read_bytes("/api/kept") == b"old bytes"
    with pytest.raises(WriteAborted):
        f.close()
    with pytest.raises(ValueError):
        f.write(b"more")
    with pytest.raises(ZeroDivisionError):
        with fs.create("/api/never", overwrite=True) as g:
            g.write(b"abc")
            raise ZeroDivisionError
    with pytest.raises(NotFound):
        fs.stat("/api/never")


def test_a_writer_dropped_unclosed_is_abandoned(fs):
    import gc

    from conftest import wait_until

    f = fs.create("/api/dropped", overwrite=True)
    f.write(b"x" * STRIPE)
    future = f._future
    del f
    gc.collect()
    wait_until(future.done, 30, "the dropped write to end")
    assert isinstance(future.exception(), WriteAborted)
    with pytest.raises(NotFound):
        fs.stat("/api/dropped")
    fs.write_bytes("/api/dropped", b"free again")   # the NameNode let the file go (Abandon)


def test_create_raises_the_namenodes_refusal_at_once(fs):
    fs.write_bytes("/api/exists", b"1", overwrite=True)
    with pytest.raises(AlreadyExists):
        fs.create("/api/exists")
    with pytest.raises(IsADirectory):
        fs.create("/api", overwrite=True)
    with pytest.raises(NotADirectory):
        fs.create("/api/exists/under")


def test_a_write_whose_datanodes_are_gone_fails_at_write_or_close_and_leaves_nothing(private_cluster):
    with client(private_cluster.namenode) as fs:
        fs.mkdir("/w", parents=True)
        f = fs.create("/w/f")
        f.write(pattern(STRIPE))
        for dn in private_cluster.datanode_ids[:5]:   # RS-6-3 needs 6 of its 9 units written
            private_cluster.kill(dn)
        with pytest.raises(HedgefsError):
            for _ in range(64):   # the pipe holds some: a later write or the close meets the failure
                f.write(pattern(STRIPE))
            f.close()
        with pytest.raises(NotFound):
            fs.stat("/w/f")


# ---------------------------------------------------------------------- streams

@pytest.mark.parametrize("start, end", [(0, None), (1, CELL + 1), (STRIPE - 1, GROUP + STRIPE + 2),
                                         (GROUP, 2 * GROUP), (5, 5)])
def test_a_ranged_stream_gives_exactly_the_range(fs, stored, data, start, end):
    with fs.open(stored) as f, f.stream(start, end, read_ahead=1, window=STRIPE) as s:
        got = b"".join(bytes(c) for c in s)
    assert got == data[start:len(data) if end is None else end]


def test_read_n_over_a_stream_is_every_byte_in_order(fs, stored, data):
    with fs.open(stored) as f, f.stream(3, len(data) - 1, window=2 * STRIPE) as s:
        out, n = [], 1
        while True:
            piece = s.read(n)
            if not piece:
                break
            assert len(piece) <= n
            out.append(piece)
            n = n * 3 % 1000003 + 1
    assert b"".join(out) == data[3:len(data) - 1]


def test_a_leased_chunk_kept_past_next_is_poison_or_an_error_never_later_bytes(fs, stored, data):
    with fs.open(stored) as f, f.stream(read_ahead=1, reuse=True, window=STRIPE) as chunks:
        first = next(chunks)
        kept = memoryview(first)[:]          # a copy of the view: outlives the release
        size = len(first)
        assert bytes(kept) == data[:size]
        second = next(chunks)
        size2 = len(second)
        assert bytes(second) == data[size:size + size2]
        with pytest.raises(ValueError):
            bytes(first)                     # the view handed out: released
        assert bytes(kept) == bytes([POISON]) * size   # its buffer: poisoned, never read into again
        rest = b"".join(bytes(c) for c in chunks)
        assert bytes(kept) == bytes([POISON]) * size   # and stays so while the stream reads on
    assert data[:size + size2] + rest == data


def test_owned_chunks_stay_valid_after_the_stream_moves_on(fs, stored, data):
    with fs.open(stored) as f:
        chunks = list(f.chunks(read_ahead=2))
    assert b"".join(bytes(c) for c in chunks) == data


async def _collect(stream):
    return [bytes(c) async for c in stream]


def test_a_stream_iterates_on_another_event_loop(fs, stored, data):
    import asyncio

    with fs.open(stored) as f, f.stream(CELL, 3 * STRIPE) as s:
        got = asyncio.run(_collect(s))
    assert b"".join(got) == data[CELL:3 * STRIPE]


def test_the_read_ahead_answers_sequential_and_random_reads_byte_exact(fs, stored, data):
    from hedgefs.client.streams import ReadAhead

    with fs.open(stored) as f:
        ahead = ReadAhead(f, window=CELL, max_window=4 * STRIPE, ahead=1)
        at = 0
        while at < len(data):                                   # 128 KiB kernel reads
            assert bytes(ahead.fetch(at, 128 * 1024).result()) == data[at:at + 128 * 1024]
            at += 128 * 1024
        assert ahead.window == 4 * STRIPE
        for offset in (7, GROUP - 3, 5 * CELL):                 # random: exactly the range
            assert bytes(ahead.fetch(offset, CELL).result()) == data[offset:offset + CELL]
            assert ahead.window == 0
        ahead.close()


# ---------------------------------------------------------------------- stat, open, policies

def test_a_ranged_stat_lists_the_groups_of_its_span_only(fs, stored, data):
    whole = fs.stat(stored)
    assert len(whole.groups) == 3 and not whole.ranged
    part = fs.stat(stored, span=(GROUP + 1, GROUP + 2))
    assert part.ranged and part.first_group == 1
    assert [g.id for g in part.groups] == [whole.groups[1].id]
    assert (part.length, part.mtime_ms) == (whole.length, whole.mtime_ms)
    with pytest.raises(UsageError):
        fs.open(part)
    with pytest.raises(UsageError):
        fs.stat(stored, span=(5, 1))
    with fs.open(whole) as f:   # a status stat gave: opened without asking again
        assert f.pread(GROUP, 10) == data[GROUP:GROUP + 10]


def test_get_policy_is_typed(fs):
    got = fs.get_policy("/api")
    assert got.policy and got.default_block_size > 0 and isinstance(got.source_path, str)


# ---------------------------------------------------------------------- errors

def test_namespace_errors_are_typed(fs):
    fs.mkdir("/api/full/sub", parents=True)
    with pytest.raises(DirectoryNotEmpty, match="directory not empty: /api/full"):
        fs.delete("/api/full")
    fs.write_bytes("/api/file", b"1", overwrite=True)
    with pytest.raises(NotADirectory, match="not a directory: /api/file"):
        fs.mkdir("/api/file/x")
    assert DirectoryNotEmpty.exit_code == NotADirectory.exit_code == 2


# ---------------------------------------------------------------------- admin

def test_admin_report_and_fsck_are_dataclasses(fs, cluster, stored):
    report = fs.admin.report()
    assert isinstance(report, typed.ClusterReport)
    assert len(report.datanodes) == len(cluster.datanode_ids) == len(report.live())
    dn = report.datanodes[0]
    assert isinstance(dn.scrub, typed.ScrubStatus) and isinstance(dn.shares_filesystem_with, tuple)
    assert report.datanode(dn.id) is dn and report.datanode("nobody") is None
    assert report.namenode.role in ("", "active")
    fsck = fs.admin.fsck("/api")
    assert isinstance(fsck, typed.FsckReport)
    assert fsck.status == "HEALTHY" and fsck.groups >= 3 and fsck.problems == ()


def test_admin_safe_mode_round_trip_and_a_bad_action(fs):
    assert fs.admin.safe_mode().on is False
    try:
        assert fs.admin.safe_mode("enter").on is True
        assert fs.admin.safe_mode(typed.SafeModeAction.GET).reason == "admin"
    finally:
        assert fs.admin.safe_mode("leave").on is False
    with pytest.raises(UsageError, match="bad safe mode action"):
        fs.admin.safe_mode("sideways")


def test_admin_decommission_of_an_unknown_datanode_is_bad_input(fs):
    with pytest.raises(UsageError):
        fs.admin.decommission("dn-nobody")
