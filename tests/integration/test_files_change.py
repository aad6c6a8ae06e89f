"""Files that change (issue 45) on a real cluster: times (setTimes), symbolic links, extended
attributes, append, truncate, writes in place, hflush and lease recovery; through the library and
the CLI (the mount's: test_mount_changes.py).

The NameNode's side (one record each, replay and images equal to the live tree) is
tests/unit/test_namenode_journal.py's seeded workload (and test_ha_journal.py's on etcd); here,
what a user sees.
"""

import json
import re
import subprocess
import sys

import pytest
from conftest import GROUP, POLICY, assert_one_line_error, cli_env, client, pattern, run_cli, start_cluster
from test_small_files import calls_of

from hedgefs.client.errors import AlreadyExists, NotFound, UsageError


@pytest.fixture(scope="module")
def c(tmp_path_factory):
    cluster = start_cluster(tmp_path_factory.mktemp("changes"))
    yield cluster
    cluster.down()


@pytest.fixture
def fs(c):
    with client(c.namenode) as f:
        yield f


# ---------------------------------------------------------------------------- times, links, xattrs

def test_set_times_sets_mtime_and_atime_each_or_both(fs):
    fs.mkdir("/t")
    fs.write_bytes("/t/a", b"x" * 10)
    fs.set_times("/t/a", mtime_ms=1_000_000, atime_ms=2_000_000)
    st = fs.stat("/t/a")
    assert (st.mtime_ms, st.atime_ms, st.length) == (1_000_000, 2_000_000, 10)
    fs.set_times("/t/a", atime_ms=3_000_000)               # None: left as it is
    assert (fs.stat("/t/a").mtime_ms, fs.stat("/t/a").atime_ms) == (1_000_000, 3_000_000)
    fs.set_times("/t", mtime_ms=5_000)                      # directories too
    assert fs.stat("/t").mtime_ms == 5_000
    assert fs.read_bytes("/t/a") == b"x" * 10
    with pytest.raises(NotFound):
        fs.set_times("/t/missing", mtime_ms=1)
    with pytest.raises(UsageError, match="bad times"):
        fs.set_times("/t/a", mtime_ms=-7)
    assert fs.stat("/t/a").mtime_ms == 1_000_000            # a refusal changed nothing


def test_symlinks_are_kept_listed_and_followed_by_open(fs):
    fs.mkdir("/l/d", parents=True)
    fs.write_bytes("/l/d/file", b"target bytes")
    fs.symlink("d/file", "/l/rel")                          # relative: from the link's directory
    fs.symlink("/l/d", "/l/dir")
    fs.symlink("/l/nowhere", "/l/dangling")
    st = fs.stat("/l/rel")
    assert (st.is_link, st.symlink, st.length, st.is_dir) == (True, "d/file", len("d/file"), False)
    assert fs.readlink("/l/dir") == "/l/d"
    assert fs.read_bytes("/l/rel") == b"target bytes"
    assert {e.path: e.symlink for e in fs.list("/l")} == {"/l/d": "", "/l/rel": "d/file", "/l/dir": "/l/d",
                                                         "/l/dangling": "/l/nowhere"}
    with pytest.raises(NotFound):
        fs.open("/l/dangling")
    with pytest.raises(AlreadyExists):
        fs.symlink("x", "/l/rel")
    with pytest.raises(UsageError, match="not a symbolic link"):
        fs.readlink("/l/d/file")
    fs.symlink("/l/loop2", "/l/loop1")
    fs.symlink("/l/loop1", "/l/loop2")
    with pytest.raises(UsageError, match="too many levels"):
        fs.open("/l/loop1")
    fs.rename("/l/rel", "/l/d/moved")                       # kept as given: now relative to /l/d
    assert fs.readlink("/l/d/moved") == "d/file"
    fs.delete("/l/dir")                                     # the link goes, not what it points to
    assert fs.stat("/l/d").is_dir


def test_user_xattrs_set_get_list_remove_and_refusals(fs):
    fs.write_bytes("/x", b"data")
    fs.set_xattr("/x", "user.origin", b"sensor 7")
    fs.set_xattr("/x", "user.bin", bytes(range(256)))
    assert fs.get_xattrs("/x") == {"user.origin": b"sensor 7", "user.bin": bytes(range(256))}
    assert fs.get_xattr("/x", "user.origin") == b"sensor 7"
    with pytest.raises(AlreadyExists):
        fs.set_xattr("/x", "user.origin", b"again", flags=1)     # XATTR_CREATE
    with pytest.raises(NotFound):
        fs.set_xattr("/x", "user.none", b"v", flags=2)          # XATTR_REPLACE
    with pytest.raises(UsageError, match="user namespace"):
        fs.set_xattr("/x", "trusted.secret", b"v")
    with pytest.raises(UsageError, match="at most 16384"):
        fs.set_xattr("/x", "user.big", b"v" * 16384)
    fs.remove_xattr("/x", "user.bin")
    with pytest.raises(NotFound):
        fs.remove_xattr("/x", "user.bin")
    with pytest.raises(NotFound):
        fs.get_xattr("/x", "user.bin")
    assert fs.get_xattrs("/x") == {"user.origin": b"sensor 7"}
    fs.write_bytes("/x", b"new", overwrite=True)             # a new file: no attributes of the old one
    assert fs.get_xattrs("/x") == {}


def test_stat_and_list_with_xattrs_and_a_concat_keeps_the_first_parts(fs):
    """(issue 48) The attributes read with the stat or listing (one call), and a file renamed over
    another by concat keeps its own: the S3 gateway's object and metadata in one change."""
    fs.mkdir("/xs")
    fs.write_bytes("/xs/aside", b"new bytes")
    fs.set_xattr("/xs/aside", "user.s3", b"new")
    fs.write_bytes("/xs/obj", b"old bytes")
    fs.set_xattr("/xs/obj", "user.s3", b"old")
    assert fs.stat("/xs/obj").xattrs is None                    # not asked
    assert fs.stat("/xs/obj", xattrs=True).xattrs == {"user.s3": b"old"}
    assert fs.stat("/xs/obj", span=(0, 1), xattrs=True).xattrs == {"user.s3": b"old"}
    fs.write_bytes("/xs/bare", b"")
    assert [s.xattrs for s in fs.stat_many(["/xs/obj", "/xs/bare"], xattrs=True)] == [{"user.s3": b"old"}, {}]
    assert [s.xattrs for s in fs.stat_many(["/xs/obj", "/xs/bare"])] == [None, None]
    fs.delete("/xs/bare")
    fs.concat("/xs/obj", ["/xs/aside"], overwrite=True)
    status = fs.stat("/xs/obj", xattrs=True)
    assert (fs.read_bytes("/xs/obj"), status.xattrs) == (b"new bytes", {"user.s3": b"new"})
    assert {s.path: s.xattrs for s in fs.iter_list("/xs", xattrs=True)} == {"/xs/obj": {"user.s3": b"new"}}
    assert [s.xattrs for s in fs.iter_list("/xs")] == [None]


def test_cli_touch_ln_getfattr_setfattr_and_their_bad_inputs(c, fs):
    nn = c.namenode
    assert_one_line_error(run_cli("touch", "/cli/new", namenode=nn), "no such file or directory: /cli")  # as touch(1)
    fs.mkdir("/cli")
    assert run_cli("touch", "/cli/new", namenode=nn).code == 0      # created empty
    assert fs.stat("/cli/new").length == 0
    assert run_cli("touch", "-m", "-t", "@1000", "/cli/new", namenode=nn).code == 0
    assert fs.stat("/cli/new").mtime_ms == 1_000_000
    assert run_cli("touch", "-c", "/cli/absent", namenode=nn).code == 0
    with pytest.raises(NotFound):
        fs.stat("/cli/absent")
    assert run_cli("ln", "-s", "/cli/new", "/cli/link", namenode=nn).code == 0
    out = run_cli("ls", "/cli", namenode=nn).stdout.decode()
    assert re.search(r"^lrwxrwxrwx .* /cli/link -> /cli/new$", out, re.M), out
    assert run_cli("setfattr", "-n", "user.k", "-v", "v 1", "/cli/new", namenode=nn).code == 0
    assert run_cli("getfattr", "/cli/new", namenode=nn).stdout.decode() == '# file: /cli/new\nuser.k="v 1"\n'
    assert_one_line_error(run_cli("setfattr", "-n", "security.k", "-v", "1", "/cli/new", namenode=nn), "user namespace")
    assert run_cli("setfattr", "-n", "security.k", "/cli/new", namenode=nn).code == 2
    assert_one_line_error(run_cli("getfattr", "-n", "user.none", "/cli/new", namenode=nn), "no extended attribute")
    assert_one_line_error(run_cli("touch", "-t", "yesterday", "/cli/new", namenode=nn), "bad time")
    assert_one_line_error(run_cli("ln", "-s", "/x", "/cli/new", namenode=nn), "exists")
    assert fs.stat("/cli/new").mtime_ms == 1_000_000 and fs.get_xattrs("/cli/new") == {"user.k": b"v 1"}


# ---------------------------------------------------------------------------- append and truncate

def _groups(fs, path: str) -> list[int]:
    return [g.id for g in fs.stat(path).groups]


def test_append_rewrites_only_the_last_group_and_readers_see_the_old_file_until_close(fs):
    fs.mkdir("/ap", parents=True)
    old = pattern(GROUP + 100_000, 1)                      # one full group and a partial one
    fs.write_bytes("/ap/f", old)
    before = _groups(fs, "/ap/f")
    inode_mtime = fs.stat("/ap/f").mtime_ms
    more = pattern(2 * GROUP + 7, 2)
    with fs.append("/ap/f") as w:
        assert w.start == len(old)
        w.write(more[:1000])
        assert fs.read_bytes("/ap/f") == old               # not visible before close
        w.write(more[1000:])
    assert w.length == len(old) + len(more)
    assert fs.read_bytes("/ap/f") == old + more
    after = _groups(fs, "/ap/f")
    assert after[0] == before[0] and before[1] not in after   # the full group kept, the partial one rewritten
    assert len(after) == 4 and fs.stat("/ap/f").mtime_ms > inode_mtime
    with fs.append("/ap/f") as w:                          # now ending inside a group again: and again
        w.write(b"tail")
    assert fs.read_bytes("/ap/f") == old + more + b"tail"


def test_append_to_an_empty_file_and_to_one_ending_on_a_group_boundary(fs):
    fs.write_bytes("/ap-empty", b"")
    with fs.append("/ap-empty") as w:
        w.write(b"first")
    assert fs.read_bytes("/ap-empty") == b"first"
    whole = pattern(GROUP, 3)
    fs.write_bytes("/ap-full", whole)
    gid = _groups(fs, "/ap-full")
    with fs.append("/ap-full") as w:
        w.write(b"next")
    assert fs.read_bytes("/ap-full") == whole + b"next" and _groups(fs, "/ap-full")[:1] == gid


def test_an_aborted_append_leaves_the_file_and_a_second_writer_is_refused(fs):
    data = pattern(5000, 4)
    fs.write_bytes("/ap-one", data)
    xattrs_before = fs.set_xattr("/ap-one", "user.k", b"v")
    w = fs.append("/ap-one")
    w.write(b"never seen")
    with pytest.raises(AlreadyExists, match="being written"):
        fs.append("/ap-one")
    with pytest.raises(AlreadyExists, match="being written"):
        fs.truncate("/ap-one", 10)
    with pytest.raises(AlreadyExists, match="being written"):
        fs.create("/ap-one", overwrite=True)
    with pytest.raises(AlreadyExists, match="appended"):
        fs.rename("/ap-one", "/ap-moved")
    w.abort()
    assert fs.read_bytes("/ap-one") == data and xattrs_before is None
    with fs.append("/ap-one") as w:                        # the lease is gone: the next one may
        w.write(b"+")
    assert fs.read_bytes("/ap-one") == data + b"+" and fs.get_xattrs("/ap-one") == {"user.k": b"v"}


def test_a_file_deleted_while_appended_to_fails_the_append_and_stays_deleted(fs):
    fs.write_bytes("/ap-del", b"abc")
    w = fs.append("/ap-del")
    w.write(b"def")
    fs.delete("/ap-del")
    with pytest.raises(NotFound):
        w.close()
    with pytest.raises(NotFound):
        fs.stat("/ap-del")


@pytest.mark.parametrize("cut", [0, 1, GROUP - 1, GROUP, GROUP + 12345, 2 * GROUP + 50_000])
def test_truncate_keeps_the_first_bytes_on_and_off_group_boundaries(fs, cut):
    data = pattern(2 * GROUP + 50_000, 5)
    path = f"/tr-{cut}"
    fs.write_bytes(path, data)
    first = _groups(fs, path)[0]
    fs.truncate(path, cut)
    assert fs.read_bytes(path) == data[:cut] and fs.stat(path).length == cut
    if cut >= GROUP:
        assert _groups(fs, path)[0] == first               # full groups before the cut are kept


def test_truncate_and_append_refusals_change_nothing(fs):
    fs.mkdir("/tr-bad", parents=True)
    fs.write_bytes("/tr-bad/f", b"12345")
    with pytest.raises(UsageError, match="only shortens"):
        fs.truncate("/tr-bad/f", 6)
    with pytest.raises(UsageError, match="is a directory"):
        fs.truncate("/tr-bad", 0)
    with pytest.raises(UsageError, match="is a directory"):
        fs.append("/tr-bad")
    with pytest.raises(NotFound):
        fs.append("/tr-bad/missing")
    fs.symlink("f", "/tr-bad/link")
    with pytest.raises(UsageError, match="symbolic link"):
        fs.append("/tr-bad/link")
    assert fs.read_bytes("/tr-bad/f") == b"12345"


def test_cli_append_and_truncate_and_their_bad_inputs(c, fs, tmp_path):
    nn = c.namenode
    local = tmp_path / "part"
    local.write_bytes(b"from a file\n")
    assert_one_line_error(run_cli("append", str(local), "/cli-ap/log", namenode=nn), "no such file or directory")
    fs.mkdir("/cli-ap")
    assert run_cli("append", str(local), "/cli-ap/log", namenode=nn).code == 0     # created
    assert run_cli("append", "-", "/cli-ap/log", namenode=nn, input=b"from stdin\n").code == 0
    assert fs.read_bytes("/cli-ap/log") == b"from a file\nfrom stdin\n"
    assert run_cli("truncate", "5", "/cli-ap/log", namenode=nn).code == 0
    assert fs.read_bytes("/cli-ap/log") == b"from "
    assert_one_line_error(run_cli("append", str(local), "/cli-ap", namenode=nn), "is a directory: /cli-ap")
    assert_one_line_error(run_cli("truncate", "99", "/cli-ap/log", namenode=nn), "only shortens")
    assert run_cli("truncate", "99", "/cli-ap/log", namenode=nn).code == 2
    assert_one_line_error(run_cli("truncate", "-1", "/cli-ap/log", namenode=nn))
    w = fs.append("/cli-ap/log")
    try:
        result = run_cli("append", "-", "/cli-ap/log", namenode=nn, input=b"x")
        assert_one_line_error(result, "being written")
        assert result.code == 2
    finally:
        w.abort()
    assert fs.read_bytes("/cli-ap/log") == b"from "                               # nothing changed


def test_a_write_in_place_keeps_the_groups_before_it(fs):
    data = pattern(3 * GROUP + 999, 6)
    fs.write_bytes("/inplace", data)
    before = _groups(fs, "/inplace")
    at = GROUP + 5000
    with fs.append("/inplace", rewrite_from=at) as w:      # bytes from `at` on are replaced
        assert w.start == at
        w.write(b"NEW" * 10)
        w.write(data[at + 30:])
    assert fs.read_bytes("/inplace") == data[:at] + b"NEW" * 10 + data[at + 30:]
    after = _groups(fs, "/inplace")
    assert after[0] == before[0] and not set(after[1:]) & set(before)
    with fs.append("/inplace", rewrite_from=10) as w:      # and shorter: the file ends where the bytes end
        w.write(b"!")
    assert fs.read_bytes("/inplace") == data[:10] + b"!"
    with pytest.raises(UsageError, match="cannot rewrite"):
        fs.append("/inplace", rewrite_from=12)


def test_hflush_commits_what_was_written_and_writing_goes_on(fs):
    w = fs.create("/hf", overwrite=True)
    w.write(b"line 1\n")
    assert w.hflush() == 7                                  # visible now, to any new reader
    assert fs.read_bytes("/hf") == b"line 1\n"
    w.write(b"line 2\n")
    assert w.hsync() == 14
    assert fs.read_bytes("/hf") == b"line 1\nline 2\n"
    w.write(b"line 3\n")
    w.abort()                                               # what an hflush committed stays
    assert fs.read_bytes("/hf") == b"line 1\nline 2\n"
    with fs.append("/hf") as w:
        w.write(b"line 3\n")
        w.hflush()
        w.write(b"line 4\n")
    assert w.length == 28 and fs.read_bytes("/hf") == b"line 1\nline 2\nline 3\nline 4\n"


@pytest.mark.parametrize("kept", ["kept", "read back"])
def test_hflushes_across_group_boundaries_keep_every_byte_in_order(fs, monkeypatch, kept):
    """Each hflush is one Sync: the write so far committed, the last partial group written again
    from the bytes the writer kept (or, past TAIL_BYTES, read back from the DataNodes)."""
    from hedgefs.client import file_writer

    if kept == "read back":
        monkeypatch.setattr(file_writer, "TAIL_BYTES", 1000)
    data = pattern(2 * GROUP + GROUP // 2, seed=45)
    sizes = [1, 4095, GROUP - 4096, 7, GROUP - 7, 3000, GROUP // 2 - 3001, 1]   # on, across and off boundaries
    assert sum(sizes) == len(data)
    w, at = fs.create(f"/hf-groups-{kept}", overwrite=True), 0
    for n in sizes:
        w.write(data[at:at + n])
        at += n
        assert w.hflush() == at
        assert fs.read_bytes(f"/hf-groups-{kept}") == data[:at]
    w.write(b"tail")
    assert w.close() == len(data) + 4
    assert fs.read_bytes(f"/hf-groups-{kept}") == data + b"tail"


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


def test_close_does_not_wait_on_a_frozen_datanode_of_both_the_group_and_the_open_tail(private_cluster,
                                                                                       monkeypatch, caplog):
    """review-seal S1: a DataNode holding a replica of the open tail and a unit of the group
    close writes over the tail's bytes freezes: the writer drops its stream as stalled (the group
    is short), and close does not tail-sync to it (that replica is as suspect as the stream):
    the Complete seals with the group. close returns within 30 s though the DataNode stays frozen
    (before the fix it waited for the thaw: the whole freeze); the file reads back."""
    c = private_cluster
    seen = _closing_groups(monkeypatch)
    data = pattern(GROUP + 350_000, seed=455)
    with client(c.namenode) as fs:
        w, at = _tailed(fs, "/stalled", data)
        tail = fs.stat("/stalled").groups[-1]
        assert seen[-1].HasField("first_group"), "the Sync's write comes with its group"
        group = {u.datanode_id for u in seen[-1].first_group.units}
        frozen = sorted({u.datanode_id for u in tail.units.values()} & group)[0]
        c.freeze(frozen)
        try:
            w.write(data[at:])
            with caplog.at_level("INFO", logger="hedgefs.client"):
                assert _close_within(w, 30) == len(data)
        finally:
            c.thaw(frozen)
        assert [r for r in caplog.records if "whose streams failed in this write" in r.getMessage()]
        assert [g.policy for g in fs.stat("/stalled").groups] == ["", ""]
        assert fs.read_bytes("/stalled") == data


def test_a_tail_replica_that_stalls_only_at_close_costs_close_its_deadline_and_the_group_is_sealed(
        private_cluster, monkeypatch, caplog):
    """The fallback of close's tail-sync (review-seal S1, N1): the group is short (a DataNode
    outside the tail frozen across close), and a DataNode whose stream of the group succeeded but
    which holds a tail replica freezes just before close's APPEND: that replica stalls while the
    others took theirs (open_tail.py; HOLD_TAIL_TIMEOUT_S bounds the whole, SyncLength included),
    and the Complete seals with the group. close returns within 30 s with that DataNode still frozen,
    the file is all RS-6-3 and reads back."""
    from hedgefs.client.file_writer import FileWriter

    c = private_cluster
    seen = _closing_groups(monkeypatch)
    data = pattern(GROUP + 350_000, seed=456)
    with client(c.namenode) as fs:
        w, at = _tailed(fs, "/late-stall", data)
        tail_datanodes = sorted(u.datanode_id for u in fs.stat("/late-stall").groups[-1].units.values())
        group = {u.datanode_id for u in seen[-1].first_group.units}
        short = sorted(group - set(tail_datanodes))[0]   # its stream stalls: the group is short
        stalls = tail_datanodes[0]                       # stalls once the group is written
        frozen = [short]
        hold = FileWriter._hold_tail

        async def stalling(self, request, policy, failed=frozenset()):
            assert stalls not in failed
            c.freeze(stalls)
            frozen.append(stalls)
            return await hold(self, request, policy, failed)
        monkeypatch.setattr(FileWriter, "_hold_tail", stalling)
        c.freeze(short)
        try:
            w.write(data[at:])
            with caplog.at_level("INFO", logger="hedgefs.client"):
                assert _close_within(w, 30) == len(data)
        finally:
            for datanode_id in frozen:
                c.thaw(datanode_id)
        assert stalls in frozen[1:], "close tail-synced"
        assert [r for r in caplog.records if "keeping the open tail at close failed" in r.getMessage()
                and "no answer in" in r.getMessage()]
        assert [g.policy for g in fs.stat("/late-stall").groups] == ["", ""]
        assert fs.read_bytes("/late-stall") == data


def test_close_gives_its_tail_sync_five_seconds_when_every_replica_stalls(private_cluster, monkeypatch, caplog):
    """HOLD_TAIL_TIMEOUT_S itself (review-final F2): the group is short (a DataNode outside the
    tail frozen across close), and every DataNode holding a tail replica freezes just before
    close's APPEND, so no replica answers and the stall rule (which counts from the first answer)
    cannot fire before WRITE_TIMEOUT_S (20 s): after 5 s the Complete seals with the group. They
    thaw once the tail-sync has given up (the Complete needs their group units' receipts)."""
    from hedgefs.client.file_writer import HOLD_TAIL_TIMEOUT_S, FileWriter

    c = private_cluster
    seen = _closing_groups(monkeypatch)
    data = pattern(GROUP + 350_000, seed=458)
    with client(c.namenode) as fs:
        w, at = _tailed(fs, "/all-stall", data)
        tail_datanodes = sorted(u.datanode_id for u in fs.stat("/all-stall").groups[-1].units.values())
        group = {u.datanode_id for u in seen[-1].first_group.units}
        short = sorted(group - set(tail_datanodes))[0]
        hold = FileWriter._hold_tail
        stalled = []

        async def stalling(self, request, policy, failed=frozenset()):
            for datanode_id in tail_datanodes:
                c.freeze(datanode_id)
                stalled.append(datanode_id)
            try:
                return await hold(self, request, policy, failed)
            finally:
                for datanode_id in tail_datanodes:
                    c.thaw(datanode_id)
        monkeypatch.setattr(FileWriter, "_hold_tail", stalling)
        c.freeze(short)
        try:
            w.write(data[at:])
            with caplog.at_level("INFO", logger="hedgefs.client"):
                assert _close_within(w, 60) == len(data)
        finally:
            c.thaw(short)
            for datanode_id in stalled:
                c.thaw(datanode_id)
        assert stalled == tail_datanodes, "close tail-synced"
        assert [r for r in caplog.records if f"keeping the open tail at close failed (no answer in "
                f"{HOLD_TAIL_TIMEOUT_S:g} s)" in r.getMessage()]
        assert [g.policy for g in fs.stat("/all-stall").groups] == ["", ""]
        assert fs.read_bytes("/all-stall") == data


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
