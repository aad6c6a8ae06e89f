"""Files that change (issue 45) on a real cluster: times (setTimes), symbolic links, extended
attributes, append and truncate; through the library, the CLI and the mount.

The NameNode's side (one record each, replay and images equal to the live tree) is
tests/unit/test_namenode_journal.py's seeded workload; here, what a user sees.
"""

import errno
import os
import re
import shutil
import subprocess
import sys

import pytest
from conftest import GROUP, assert_one_line_error, cli_env, client, pattern, run_cli, start_cluster, wait_until

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
