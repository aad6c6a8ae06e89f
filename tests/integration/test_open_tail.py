"""The open tail of an erasure-coded file on a real cluster (issue 45; client/open_tail.py, the
NameNode's seal in namenode/writes.py): hsync appends to its m + 1 replicas, close seals it erasure
coded or keeps it when the sealing group lost streams, and neither hsync nor close waits on a
stalled DataNode; a stale or killed writer of it. (Append, truncate and hflush on a file:
test_files_change.py; the NameNode's side: tests/unit/test_namenode_open_tail.py.)
"""

import json
import subprocess
import sys

import pytest
from conftest import GROUP, POLICY, cli_env, client, pattern, run_cli, start_cluster
from test_small_files import calls_of

from hedgefs.client.errors import AlreadyExists


@pytest.fixture(scope="module")
def c(tmp_path_factory):
    cluster = start_cluster(tmp_path_factory.mktemp("open-tail"))
    yield cluster
    cluster.down()


@pytest.fixture
def fs(c):
    with client(c.namenode) as f:
        yield f


def _tailed(fs, path: str, data: bytes):
    """A writer of ``path`` on its open tail: ``data``'s first GROUP + 2000 bytes hsynced by two
    Syncs (the first reads its last group back, the second places the tail), then 4 KiB records
    hsynced on the tail. Returns (writer, bytes hsynced)."""
    w = fs.create(path, overwrite=True)
    w.write(data[:GROUP + 1000])
    w.hsync()
    w.write(data[GROUP + 1000:GROUP + 2000])
    w.hsync()
    at = GROUP + 2000
    for n in (4096, 1, 20_000, 4096):
        w.write(data[at:at + n])
        at += n
        assert w.hsync() == at
    return w, at


def test_hsync_on_the_open_tail_appends_to_its_replicas_and_close_seals_it_erasure_coded(c, fs, caplog):
    """An EC file's hsyncs after the first Syncs go to its open tail: the file's last group is
    then REPLICATE-(m+1) (RS-6-3: 4 replicas) and grows in place, one group id; close seals it:
    the file is all RS-6-3 again, healthy, every byte in order. The file checksum while it is
    tailed is the bytes' CRC32C, planned from each group's code (the tail's replica's stored
    CRCs: no group read back)."""
    from crc32c import crc32c

    data = pattern(GROUP + 140_000, seed=451)
    w, at = _tailed(fs, "/tailed", data)
    tail = fs.stat("/tailed").groups[-1]
    assert (tail.policy, len(tail.units), tail.length) == ("REPLICATE-4", 4, at - GROUP)
    assert fs.read_bytes("/tailed") == data[:at]
    w.write(data[at:at + 100_000])       # the tail past one cell: as RS cells, its units would not match
    at += 100_000
    assert w.hsync() == at
    with caplog.at_level("INFO", logger="hedgefs.client.checksum"):
        assert (fs.checksum("/tailed").crc, fs.checksum("/tailed").length) == (crc32c(data[:at]), at)
    assert not [r for r in caplog.records if "reading its group instead" in r.getMessage()]
    shown = json.loads(run_cli("stat", "--json", "/tailed", namenode=c.namenode).stdout)["groups"][-1]
    assert shown["policy"] == "REPLICATE-4" and [u["length"] for u in shown["units"]] == [at - GROUP] * 4
    w.write(data[at:at + 5000])
    assert w.hsync() == at + 5000
    assert fs.stat("/tailed").groups[-1].id == tail.id                 # grown in place
    w.write(data[at + 5000:])
    assert w.close() == len(data)
    status = fs.stat("/tailed")
    assert [g.policy for g in status.groups] == ["", ""] and status.policy == POLICY
    assert fs.read_bytes("/tailed") == data
    report = fs.admin.fsck("/tailed")
    assert (report.status, report.groups, report.healthy) == ("HEALTHY", 2, 2)


def test_a_reader_during_hsyncs_on_the_open_tail_sees_a_prefix_of_what_was_hsynced(c, fs):
    import threading

    data = pattern(GROUP + 300 * 1000, seed=452)
    w, at = _tailed(fs, "/tail-read", data)
    done, seen, failures = threading.Event(), [], []

    def read() -> None:
        with client(c.namenode) as other:
            while not done.is_set():
                try:
                    got = other.read_bytes("/tail-read")
                except Exception as err:   # noqa: BLE001 - a failed read is a failure here
                    failures.append(repr(err))
                    return
                seen.append(len(got))
                if got != data[:len(got)]:
                    failures.append(f"a read of {len(got)} bytes is not the file's prefix")
                    return

    reader = threading.Thread(target=read)
    reader.start()
    try:
        while at < len(data):
            w.write(data[at:at + 1000])
            at = min(at + 1000, len(data))
            assert w.hsync() == at
    finally:
        done.set()
        reader.join(60)
    w.close()
    assert not failures, failures
    assert len(seen) >= 2 and seen == sorted(seen) and seen[-1] > GROUP + 20_000


def test_bytes_hsynced_on_the_open_tail_survive_the_loss_of_m_datanodes(private_cluster):
    """Every hsynced byte is on the tail's m + 1 = 4 replicas: 3 of them killed while the file is
    being written, a new reader still reads all of it (and the writer seals it on the others)."""
    data = pattern(GROUP + 60_000, seed=453)
    with client(private_cluster.namenode) as fs:
        w, at = _tailed(fs, "/survives", data)
        tail = fs.stat("/survives").groups[-1]
        holders = sorted(u.datanode_id for u in tail.units.values())
        for datanode_id in holders[:3]:
            private_cluster.kill(datanode_id)
        with client(private_cluster.namenode) as reader:
            assert reader.read_bytes("/survives") == data[:at]
        w.write(data[at:])
        assert w.close() == len(data)
        assert fs.read_bytes("/survives") == data


def test_a_close_whose_last_group_lost_streams_keeps_the_hsynced_bytes_on_the_open_tail(private_cluster):
    """Issue 45's F4: the writer, on its open tail, loses two streams of the group it writes over
    the same bytes (two DataNodes frozen across close: dropped as stalled), so that group is
    short. close appends the bytes the tail lacks and the Complete keeps the tail (REPLICATE-4)
    as the file's last group instead; then m = 3 other DataNodes are lost: the file reads back.
    (Sealed into the short group, those 5 DataNodes would hold at least 4 of its 9 units: gone.)
    The next append seals the tail: its last group erasure coded again."""
    c = private_cluster
    data = pattern(GROUP + 350_000, seed=454)   # the last group: every data unit has bytes (> 5 cells)
    rows = []
    with client(c.namenode) as fs:
        w, at = _tailed(fs, "/short", data)
        tail = fs.stat("/short").groups[-1]
        others = sorted(set(c.datanode_ids) - {u.datanode_id for u in tail.units.values()})
        frozen, lost = others[:2], others[2:5]
        for datanode_id in frozen:
            c.freeze(datanode_id)
        try:
            w.write(data[at:])
            assert w.close() == len(data)
        finally:
            for datanode_id in frozen:
                c.thaw(datanode_id)
        status = fs.stat("/short")
        assert [g.policy for g in status.groups] == ["", "REPLICATE-4"] and status.groups[-1].id == tail.id
        assert status.groups[-1].length == len(data) - GROUP
        on_disk = 9 * GROUP // 6 + 4 * (len(data) - GROUP)   # the tail's bytes as its 4 copies, not RS-6-3
        for path in ("/short", "/"):   # (a stat's groups; a listing's entry, which names the tail's code)
            calls = calls_of(c, lambda: rows.append(run_cli("du", "-s", "--json", path, namenode=c.namenode)))
            [row] = json.loads(rows.pop().stdout)
            assert (row["length"], row["disk_bytes"]) == (len(data), on_disk)
            assert "StatMany" not in calls   # review-seal S3: du is the listing, no stat per file
        for datanode_id in lost:
            c.kill(datanode_id)
        with client(c.namenode) as reader:
            assert reader.read_bytes("/short") == data
        for datanode_id in lost:   # back: the next append (of nothing, here) seals the tail into EC
            c.restart(datanode_id)
        assert fs.append("/short").close() == len(data)
        assert [g.policy for g in fs.stat("/short").groups] == ["", ""] and fs.read_bytes("/short") == data


def _closing_groups(monkeypatch) -> list:
    """The writes a FileWriter begins (each ``CreateResponse``), recorded: the last one's
    ``first_group`` is the group close writes the open tail's bytes into."""
    from hedgefs.client.file_writer import FileWriter

    seen, begin = [], FileWriter._begin

    def recording(self, created, *args, **kwargs):
        seen.append(created)
        return begin(self, created, *args, **kwargs)
    monkeypatch.setattr(FileWriter, "_begin", recording)
    return seen


def _close_within(w, bound_s: float) -> int:
    """``w.close()``'s length, or a failure if close takes more than ``bound_s``."""
    import concurrent.futures

    pool = concurrent.futures.ThreadPoolExecutor(1)
    try:
        return pool.submit(w.close).result(timeout=bound_s)
    except concurrent.futures.TimeoutError:
        pytest.fail(f"close still waiting after {bound_s} s")
    finally:
        pool.shutdown(wait=False)   # (a close still waiting ends once the caller thaws its DataNode)


def test_close_goes_on_with_the_open_tails_replicas_whose_datanodes_did_not_fail(private_cluster, monkeypatch,
                                                                                   caplog):
    """review-final F1 (and review-seal S1): two DataNodes of the group close writes over the
    tail's bytes freeze across close, one of them holding a replica of the open tail: the writer
    drops both streams as stalled (the group is short: 7 of 9 units, tolerance 1). close does not
    wait on the frozen replica (S1: it returns within 30 s though the DataNode stays frozen) nor
    seal into the short group because of it (F1): it appends to the tail's 3 other replicas
    (tolerance 2), its SyncLength names them, the NameNode drops the frozen one from the tail, and
    the Complete keeps the tail (REPLICATE-4 with those 3). Then 2 more DataNodes of that group
    are lost: every byte reads back (sealed with 7 of 9 units, only 5 would be left)."""
    c = private_cluster
    seen = _closing_groups(monkeypatch)
    data = pattern(GROUP + 350_000, seed=455)   # the last group: every data unit has bytes (> 5 cells)
    with client(c.namenode) as fs:
        w, at = _tailed(fs, "/stalled", data)
        tail = fs.stat("/stalled").groups[-1]
        tail_datanodes = {u.datanode_id for u in tail.units.values()}
        assert seen[-1].HasField("first_group"), "the Sync's write comes with its group"
        group = {u.datanode_id for u in seen[-1].first_group.units}
        left_out, short = sorted(tail_datanodes & group)[0], sorted(group - tail_datanodes)[0]
        for datanode_id in (left_out, short):
            c.freeze(datanode_id)
        try:
            w.write(data[at:])
            with caplog.at_level("INFO", logger="hedgefs.client"):
                assert _close_within(w, 30) == len(data)
        finally:
            for datanode_id in (left_out, short):
                c.thaw(datanode_id)
        assert [r for r in caplog.records if f"without its replicas on ['{left_out}']" in r.getMessage()]
        status = fs.stat("/stalled")
        last = status.groups[-1]
        assert [g.policy for g in status.groups] == ["", "REPLICATE-4"] and last.id == tail.id
        assert {u.datanode_id for u in last.units.values()} == tail_datanodes - {left_out}
        assert last.length == len(data) - GROUP and fs.read_bytes("/stalled") == data
        lost = sorted(group - tail_datanodes - {short})[:2]
        for datanode_id in lost:
            c.kill(datanode_id)
        with client(c.namenode) as reader:
            assert reader.read_bytes("/stalled") == data


@pytest.mark.parametrize("stalling", ["one replica", "every replica"])
def test_a_tail_sync_that_stalls_at_close_ends_and_the_group_is_sealed(private_cluster, monkeypatch, caplog,
                                                                       stalling):
    """The bounds of close's tail-sync (review-seal S1, N1; review-final F2): the group is short (a
    DataNode outside the tail frozen across close), and DataNodes holding tail replicas (whose
    streams of the group succeeded) freeze just before close's APPEND, and thaw once the tail-sync
    has given up (the Complete needs their units' receipts). One replica stalled: the stall rule
    ends it (open_tail.py), the others having answered. Every replica stalled: no first answer,
    so only HOLD_TAIL_TIMEOUT_S (5 s) can end it before WRITE_TIMEOUT_S (20 s). Either way close
    returns, the Complete seals with the group, and the file is all RS-6-3 and reads back."""
    from hedgefs.client.file_writer import HOLD_TAIL_TIMEOUT_S, FileWriter

    c = private_cluster
    seen = _closing_groups(monkeypatch)
    data = pattern(GROUP + 350_000, seed=456)
    with client(c.namenode) as fs:
        w, at = _tailed(fs, "/late-stall", data)
        tail_datanodes = sorted(u.datanode_id for u in fs.stat("/late-stall").groups[-1].units.values())
        group = {u.datanode_id for u in seen[-1].first_group.units}
        short = sorted(group - set(tail_datanodes))[0]   # its stream stalls: the group is short
        stalls = tail_datanodes[:1] if stalling == "one replica" else tail_datanodes
        hold, stalled = FileWriter._hold_tail, []

        async def stalled_hold(self, request, policy, failed=frozenset()):
            assert not failed & set(stalls)
            for datanode_id in stalls:
                c.freeze(datanode_id)
                stalled.append(datanode_id)
            try:
                return await hold(self, request, policy, failed)
            finally:
                for datanode_id in stalls:
                    c.thaw(datanode_id)
        monkeypatch.setattr(FileWriter, "_hold_tail", stalled_hold)
        c.freeze(short)
        try:
            w.write(data[at:])
            with caplog.at_level("INFO", logger="hedgefs.client"):
                assert _close_within(w, 60) == len(data)
        finally:
            for datanode_id in [short, *stalled]:
                c.thaw(datanode_id)
        assert stalled == stalls, "close tail-synced"
        why = "while others took theirs" if stalling == "one replica" else f"(no answer in {HOLD_TAIL_TIMEOUT_S:g} s)"
        assert [r for r in caplog.records if "keeping the open tail at close failed" in r.getMessage()
                and why in r.getMessage()]
        assert [g.policy for g in fs.stat("/late-stall").groups] == ["", ""]
        assert fs.read_bytes("/late-stall") == data


def test_a_stale_writer_of_the_open_tail_cannot_grow_the_file(c, fs):
    """A writer whose lease was recovered cannot grow the file: its hsync fails (the NameNode
    refuses the length, then the Sync; its APPENDs land on the replicas past the file's length,
    never read) and the file keeps what was hsynced; an APPEND at an offset a replica has passed
    (a writer that missed an append) is refused by the DataNode. Under a next writer's lease:
    tests/unit/test_namenode_open_tail.py."""
    import asyncio

    from hedgefs.client.errors import HedgefsError
    from hedgefs.client.transport import DataNodeClient
    from hedgefs.client.unit_writes import append_unit
    from hedgefs.proto import datatransfer as dt

    data = pattern(GROUP + 40_000, seed=454)
    w, at = _tailed(fs, "/stale", data)
    tail = w._open.group
    unit = tail.units[0]

    async def late_append():
        return await append_unit(DataNodeClient(), unit.data_address, tail.id, unit.index, 100, b"late",
                                 generation=tail.generation, token=unit.token, peer=unit.datanode_id)

    with pytest.raises(dt.TransferError, match="an append at 100 is refused"):
        asyncio.run(late_append())
    assert fs.recover_lease("/stale") is True
    w.write(b"after the recovery")
    with pytest.raises(HedgefsError):
        w.hsync()
    assert fs.read_bytes("/stale") == data[:at]


def test_a_killed_appender_leaves_every_hflushed_byte_and_its_lease_is_recovered(c, fs):
    fs.write_bytes("/killed", b"before\n")
    script = ("import os, signal, sys\n"
              "from hedgefs.client.fs import FileSystem\n"
              f"fs = FileSystem({c.namenode!r})\n"
              "w = fs.append('/killed')\n"
              "w.write(b'flushed\\n'); w.hflush()\n"
              "for i in range(20): w.write(b'%02d\\n' % i); w.hsync()\n"
              "w.write(b'never flushed\\n')\n"
              "print('ready', flush=True)\n"
              "os.kill(os.getpid(), signal.SIGKILL)\n")
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, timeout=120, env=cli_env(c.namenode))
    assert proc.returncode == -9 and b"ready" in proc.stdout, proc.stderr.decode()
    synced = b"".join(b"%02d\n" % i for i in range(20))
    assert fs.read_bytes("/killed") == b"before\nflushed\n" + synced
    assert fs.stat("/killed").groups[-1].policy == "REPLICATE-4"   # hsynced on the open tail
    with pytest.raises(AlreadyExists, match="being written"):    # its lease holds until it expires...
        fs.append("/killed")
    assert fs.recover_lease("/killed") is True                  # ... or is recovered
    assert fs.recover_lease("/killed") is False
    with fs.append("/killed") as w:
        w.write(b"after\n")
    assert fs.read_bytes("/killed") == b"before\nflushed\n" + synced + b"after\n"
    assert [g.policy for g in fs.stat("/killed").groups] == [""]   # sealed by the append
    out = run_cli("recover-lease", "/killed", namenode=c.namenode)
    assert out.code == 0 and out.stdout == b"/killed: no write in progress\n"


def test_an_hsync_does_not_wait_on_a_frozen_datanode_of_the_open_tail(private_cluster, caplog):
    """A DataNode holding a replica of the open tail freezes: the hsync's APPEND to it stalls
    while the other replicas took theirs, so the tail is given up and that hsync is a Sync (off
    the frozen DataNode). The hsync returns within 30 s though the DataNode stays frozen (before,
    it waited for the thaw); every hsynced byte reads back, and so does the file after close."""
    import concurrent.futures

    c = private_cluster
    data = pattern(GROUP + 200_000, seed=457)
    with client(c.namenode) as fs:
        w, at = _tailed(fs, "/tail-stall", data)
        frozen = sorted(u.datanode_id for u in fs.stat("/tail-stall").groups[-1].units.values())[0]
        c.freeze(frozen)
        pool = concurrent.futures.ThreadPoolExecutor(1)
        try:
            w.write(data[at:at + 4096])
            with caplog.at_level("INFO", logger="hedgefs.client"):
                try:
                    assert pool.submit(w.hsync).result(timeout=30) == at + 4096
                except concurrent.futures.TimeoutError:
                    pytest.fail("hsync still waiting after 30 s")
        finally:
            c.thaw(frozen)
            pool.shutdown(wait=True)
        assert [r for r in caplog.records if "no answer in" in r.getMessage() and frozen in r.getMessage()]
        assert fs.read_bytes("/tail-stall") == data[:at + 4096]
        w.write(data[at + 4096:])
        w.close()
        assert fs.read_bytes("/tail-stall") == data
