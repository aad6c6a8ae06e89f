"""Files that change (issue 45) on a real cluster: times (setTimes), symbolic links, extended
attributes, append, truncate, writes in place, hflush and lease recovery; through the library and
the CLI (the mount's: test_mount_changes.py).

The NameNode's side (one record each, replay and images equal to the live tree) is
tests/unit/test_namenode_journal.py's seeded workload (and test_ha_journal.py's on etcd); here,
what a user sees.
"""

import re

import pytest
from conftest import GROUP, assert_one_line_error, client, pattern, run_cli, start_cluster

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
