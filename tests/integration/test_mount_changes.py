"""The mount with files that change (issue 45): utimes, symbolic links, user xattrs, hard links
refused; `rsync -a` of a tree twice transfers nothing the second time.

Its own cluster and mount (test_mount.py's helpers); skipped where this machine cannot mount.
"""

import errno
import os
import shutil
import stat
import subprocess

import pytest
from conftest import CELL, client, pattern, start_cluster
from test_mount import start_mount, stop_mount


@pytest.fixture(scope="module")
def mc(tmp_path_factory):
    c = start_cluster(tmp_path_factory.mktemp("mount-changes"))
    yield c
    c.down()


@pytest.fixture(scope="module")
def mnt(mc, tmp_path_factory):
    root = tmp_path_factory.mktemp("mount")
    proc = start_mount(mc.namenode, root / "mnt", root / "mount.log")
    yield root / "mnt"
    stop_mount(proc, root / "mnt")


def _rsync(*args: str) -> str:
    out = subprocess.run(["rsync", *args], capture_output=True, timeout=300)
    assert out.returncode == 0, out.stderr.decode()
    return out.stdout.decode()


def test_rsync_a_twice_transfers_no_file_the_second_time(mnt, tmp_path):
    if not shutil.which("rsync"):
        pytest.skip("no rsync (Debian's rsync; make installs it as root)")
    src = tmp_path / "tree"
    (src / "a" / "b").mkdir(parents=True)
    files = {"top.bin": pattern(3 * CELL + 5, 1), "a/mid.txt": b"middle\n", "a/b/deep.bin": pattern(CELL, 2),
             "a/empty": b""}
    for i, (name, body) in enumerate(files.items()):
        (src / name).write_bytes(body)
        os.utime(src / name, ns=(1_600_000_000_000_000_000 + i, 1_500_000_000_000_000_000 + i * 1_000_000))
    os.symlink("b/deep.bin", src / "a" / "link")
    os.setxattr(src / "a" / "mid.txt", "user.origin", b"sensor 7")
    first = _rsync("-aX", "--stats", f"{src}/", f"{mnt}/tree/")
    assert "Number of regular files transferred: 4" in first, first
    second = _rsync("-aX", "--stats", f"{src}/", f"{mnt}/tree/")
    assert "Number of regular files transferred: 0" in second, second
    for name, body in files.items():
        st = os.stat(mnt / "tree" / name)
        assert (mnt / "tree" / name).read_bytes() == body
        assert st.st_mtime_ns // 1_000_000 == os.stat(src / name).st_mtime_ns // 1_000_000, name
    assert os.readlink(mnt / "tree" / "a" / "link") == "b/deep.bin"
    assert (mnt / "tree" / "a" / "link").read_bytes() == files["a/b/deep.bin"]   # the kernel follows it
    assert os.getxattr(mnt / "tree" / "a" / "mid.txt", "user.origin") == b"sensor 7"


def test_utime_symlink_xattrs_and_hard_links(mnt, mc):
    d = mnt / "posix"
    d.mkdir()
    (d / "f").write_bytes(b"bytes")
    os.utime(d / "f", ns=(1_000_000_000_000_000_000, 1_100_000_000_000_000_000))
    st = os.stat(d / "f")
    assert (st.st_atime_ns, st.st_mtime_ns) == (1_000_000_000_000_000_000, 1_100_000_000_000_000_000)
    os.utime(d / "f")                                         # now
    assert abs(os.stat(d / "f").st_mtime - __import__("time").time()) < 60

    os.symlink("f", d / "s")
    assert stat.S_ISLNK(os.lstat(d / "s").st_mode) and os.lstat(d / "s").st_size == 1
    assert os.readlink(d / "s") == "f" and (d / "s").read_bytes() == b"bytes"
    assert sorted(os.listdir(d)) == ["f", "s"]
    with client(mc.namenode) as fs:
        assert fs.readlink("/posix/s") == "f"                 # the cluster's, not the mount's

    os.setxattr(d / "f", "user.a", b"1")
    os.setxattr(d / "f", "user.b", b"2")
    assert sorted(os.listxattr(d / "f")) == ["user.a", "user.b"]
    assert os.getxattr(d / "f", "user.a") == b"1"
    with pytest.raises(OSError) as raised:
        os.setxattr(d / "f", "user.a", b"x", os.XATTR_CREATE)
    assert raised.value.errno == errno.EEXIST
    os.removexattr(d / "f", "user.a")
    with pytest.raises(OSError) as raised:
        os.removexattr(d / "f", "user.a")
    assert raised.value.errno == errno.ENODATA
    with pytest.raises(OSError) as raised:
        os.setxattr(d / "f", "security.k", b"v")
    assert raised.value.errno == errno.ENOTSUP
    with pytest.raises(OSError) as raised:
        os.link(d / "f", d / "hard")
    assert raised.value.errno == errno.EPERM
    assert sorted(os.listdir(d)) == ["f", "s"] and (d / "f").read_bytes() == b"bytes"
