"""The mount with files that change (issue 45): utimes, symbolic links, user xattrs, hard links
refused; `rsync -a` of a tree twice transfers nothing the second time.

Its own cluster and mount (test_mount.py's helpers); skipped where this machine cannot mount.
"""

import errno
import os
import shutil
import stat
import subprocess
import sys
import time

import pytest
from conftest import CELL, GROUP, client, pattern, start_cluster, wait_until
from mount_support import start_mount, stop_mount


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


def test_writes_in_place_reads_of_what_was_written_and_fsync(mnt, mc):
    f = mnt / "inplace.bin"
    data = bytearray(pattern(2 * GROUP + 300, 11))
    original = bytes(data)
    f.write_bytes(original)
    fd = os.open(f, os.O_RDWR)
    try:
        assert os.pread(fd, 10, 5) == bytes(data[5:15])          # O_RDWR: reads before any write
        os.pwrite(fd, b"MIDDLE", GROUP + 7)                    # inside the second group
        data[GROUP + 7:GROUP + 13] = b"MIDDLE"
        assert os.pread(fd, 20, GROUP) == bytes(data[GROUP:GROUP + 20])   # what it wrote
        os.pwrite(fd, b"END", len(data) + 2)                      # past the end: a gap of zeros
        data += b"\0\0END"
        assert os.fstat(fd).st_size == len(data)
        with client(mc.namenode) as fs:
            assert fs.read_bytes("/inplace.bin") == original      # not before fsync or close
            first = fs.stat("/inplace.bin").groups[0].id
            os.fsync(fd)                                          # durable, visible to every client now
            assert fs.read_bytes("/inplace.bin") == bytes(data)
            assert fs.stat("/inplace.bin").groups[0].id == first  # the group before the change: kept
        os.pwrite(fd, b"x", 0)
        data[0:1] = b"x"
    finally:
        os.close(fd)
    assert f.read_bytes() == bytes(data)
    g = mnt / "ooo.bin"                                           # a new file written out of order
    with open(g, "wb") as fh:
        fh.write(b"abc")
        fh.seek(0)
        fh.write(b"z")
    assert g.read_bytes() == b"zbc"


def test_sqlite_database_on_the_mount_survives_kill_9_of_its_writer(mnt, tmp_path):
    import sqlite3

    db = mnt / "db" / "test.sqlite"
    db.parent.mkdir()
    conn = sqlite3.connect(db)
    conn.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)")
    for batch in range(10):                                       # 10,000 inserts in 10 transactions
        with conn:
            conn.executemany("INSERT INTO t (v) VALUES (?)", [(f"row {batch}-{i}",) for i in range(1000)])
    assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    conn.close()
    # A writer killed with -9 after a committed transaction, in the middle of the next one.
    script = (f"import sqlite3, os, signal\n"
              f"c = sqlite3.connect({str(db)!r})\n"
              f"with c:\n    c.execute(\"INSERT INTO t (v) VALUES ('committed')\")\n"
              f"c.execute('BEGIN')\n"
              f"c.executemany('INSERT INTO t (v) VALUES (?)', [('lost',)] * 500)\n"
              f"os.kill(os.getpid(), signal.SIGKILL)\n")
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, timeout=300)
    assert proc.returncode == -9, proc.stderr.decode()
    conn = sqlite3.connect(db)
    assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    assert conn.execute("SELECT count(*) FROM t").fetchone() == (10_001,)
    assert conn.execute("SELECT count(*) FROM t WHERE v = 'committed'").fetchone() == (1,)
    conn.close()


def test_git_clone_status_commit_and_fsck_on_the_mount(mnt, tmp_path):
    if not shutil.which("git"):
        pytest.skip("no git")
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t", "GIT_CONFIG_NOSYSTEM": "1", "HOME": str(tmp_path)}

    def git(*args, cwd):
        out = subprocess.run(["git", *args], cwd=cwd, capture_output=True, env=env, timeout=300)
        assert out.returncode == 0, f"git {' '.join(args)}: {out.stderr.decode()}"
        return out.stdout.decode()

    src = tmp_path / "src"
    src.mkdir()
    git("init", "-q", cwd=src)
    for i in range(20):
        (src / f"f{i}.txt").write_text(f"file {i}\n" * (i + 1))
    git("add", ".", cwd=src)
    git("commit", "-q", "-m", "first", cwd=src)
    git("clone", "-q", str(src), str(mnt / "clone"), cwd=tmp_path)
    repo = mnt / "clone"
    assert git("status", "--porcelain", cwd=repo) == ""
    (repo / "f3.txt").write_text("changed\n")
    (repo / "new.txt").write_text("new\n")
    git("add", ".", cwd=repo)
    git("commit", "-q", "-m", "second", cwd=repo)
    assert git("status", "--porcelain", cwd=repo) == ""
    git("fsck", "--full", "--strict", cwd=repo)
    assert git("log", "--format=%s", cwd=repo).split() == ["second", "first"]


def test_tail_f_through_the_mount_sees_a_line_hflushed_by_another_client(mnt, mc):
    (mnt / "tailed").write_bytes(b"first\n")
    tail = subprocess.Popen(["tail", "-f", "-s", "0.2", str(mnt / "tailed")], stdout=subprocess.PIPE)
    try:
        os.set_blocking(tail.stdout.fileno(), False)
        seen = bytearray()

        def has(text: bytes) -> bool:
            chunk = tail.stdout.read()
            if chunk:
                seen.extend(chunk)
            return text in seen

        wait_until(lambda: has(b"first\n"), 10, "tail's first line")
        with client(mc.namenode) as fs, fs.append("/tailed") as w:
            for i in range(3):
                w.write(f"appended {i}\n".encode())
                w.hflush()
                began = time.monotonic()
                wait_until(lambda: has(f"appended {i}\n".encode()), 10, f"line {i} in tail -f")
                print(f"tail -f saw hflushed line {i} after {time.monotonic() - began:.2f} s")   # (the attribute timeout: 1 s)
    finally:
        tail.kill()
        tail.wait()
    assert bytes(seen) == b"first\nappended 0\nappended 1\nappended 2\n"
