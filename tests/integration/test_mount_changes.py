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


def test_append_with_o_append_and_shell_redirection(mnt, mc):
    d = mnt / "app"
    d.mkdir()
    log = d / "log"
    log.write_bytes(b"line 1\n")
    subprocess.run(["sh", "-c", f"echo 'line 2' >> {log}; echo 'line 3' >> {log}"], check=True)
    assert log.read_bytes() == b"line 1\nline 2\nline 3\n"
    big = pattern(3 * CELL * 6 + 11, 9)                       # across block groups
    with open(log, "ab") as f:
        f.write(big)
    assert log.read_bytes() == b"line 1\nline 2\nline 3\n" + big
    fd = os.open(log, os.O_WRONLY)                            # no O_APPEND: a write at the end appends too
    os.lseek(fd, 0, os.SEEK_END)
    os.write(fd, b"end")
    os.close(fd)
    assert log.read_bytes().endswith(big + b"end")
    with client(mc.namenode) as fs:                           # another client appending: EBUSY here
        w = fs.append("/app/log")
        try:
            with pytest.raises(OSError) as raised:
                with open(log, "ab") as f:
                    f.write(b"refused")
            assert raised.value.errno == errno.EBUSY
        finally:
            w.abort()
    assert log.read_bytes().endswith(b"end")


def test_truncate_and_ftruncate_shorter_and_longer(mnt):
    f = mnt / "trunc"
    data = pattern(2 * 6 * CELL + 1000, 10)
    f.write_bytes(data)
    os.truncate(f, 6 * CELL + 5)                              # inside a group: copy-on-write of it
    assert f.read_bytes() == data[:6 * CELL + 5]
    os.truncate(f, 6 * CELL + 5 + 100)                        # longer: zeros, as POSIX
    assert f.read_bytes() == data[:6 * CELL + 5] + bytes(100)
    with open(f, "r+b") as fh:
        fh.truncate(10)
    assert f.read_bytes() == data[:10]
    with open(f, "r+b") as fh:                                # ftruncate then a write at the new end
        fh.truncate(4)
        fh.seek(4)
        fh.write(b"XY")
    assert f.read_bytes() == data[:4] + b"XY"
