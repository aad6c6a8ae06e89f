"""`hedgefs mount` on a real FUSE mount: the programs people use, the errno table, unmounting.

One cluster (RS-6-3-64k, 1.5 MiB block groups) and one mount (`hedgefs mount -f` in a process of
its own, serving its hedge counters) for the module; the tests that kill or signal a mount start
their own. Skipped, with one line, where this machine cannot mount (no /dev/fuse, no fusermount3,
no pyfuse3: `make` installs them as root).
"""

import concurrent.futures
import errno
import hashlib
import mmap
import os
import pwd
import random
import re
import shutil
import signal
import stat
import subprocess
import threading
import time
import urllib.request

import pytest
from conftest import CELL, GROUP, cli_env, client, pattern, run_cli, start_cluster, wait_until
from mount_support import WHY_NOT, sh, start_mount, stop_mount

if WHY_NOT:
    pytest.skip(f"hedgefs mount not testable here: {WHY_NOT}", allow_module_level=True)


@pytest.fixture(scope="module")
def mcluster(tmp_path_factory):
    c = start_cluster(tmp_path_factory.mktemp("mount-cluster"))
    yield c
    c.down()


@pytest.fixture(scope="module")
def mnt(mcluster, tmp_path_factory):
    """The mount point of the module's mount, and how to read its hedge counters."""
    root = tmp_path_factory.mktemp("mount")
    mountpoint, log = root / "mnt", root / "mount.log"
    proc = start_mount(mcluster.namenode, mountpoint, log, "--metrics-port", "127.0.0.1:0")
    found = wait_until(lambda: re.search(r"metrics: (\S+)", open(log).read()), 10, "the metrics line")
    METRICS[mountpoint] = found.group(1)
    yield mountpoint
    stop_mount(proc, mountpoint)
    assert not os.path.ismount(mountpoint)


METRICS = {}   # mount point -> its process's /metrics


def counter(mnt, name: str) -> float:
    text = urllib.request.urlopen(METRICS[mnt], timeout=10).read().decode()
    found = re.search(rf"^hedgefs_client_{name}_total (\S+)$", text, re.M)
    return float(found.group(1)) if found else 0.0


# ---------------------------------------------------------------------------- programs

def test_cp_cat_sha256sum_across_block_groups(mnt, mcluster, tmp_path):
    data = pattern(2 * GROUP + CELL + 7, seed=1)
    local = tmp_path / "local.bin"
    local.write_bytes(data)
    sh("cp", str(local), str(mnt / "copy.bin"))
    assert sh("cat", str(mnt / "copy.bin")).stdout == data
    want = hashlib.sha256(data).hexdigest()
    assert sh("sha256sum", str(mnt / "copy.bin")).stdout.split()[0].decode() == want
    assert run_cli("cat", "/copy.bin", namenode=mcluster.namenode).stdout == data   # the cluster has it
    assert os.stat(mnt / "copy.bin").st_size == len(data)


def test_rsync_tar_find_du_on_a_tree(mnt, tmp_path):
    if not shutil.which("rsync"):
        pytest.skip("no rsync (Debian's rsync; make installs it as root)")
    src = tmp_path / "tree"
    (src / "a" / "b").mkdir(parents=True)
    files = {"top.bin": pattern(3 * CELL, 2), "a/mid.txt": b"middle\n", "a/b/deep.bin": pattern(CELL + 1, 3),
             "a/empty": b"", "a/Grüße ☃.txt": "unicode names\n".encode()}
    for name, body in files.items():
        (src / name).write_bytes(body)
    os.chmod(src / "a" / "mid.txt", 0o600)
    sh("rsync", "-a", f"{src}/", f"{mnt}/rsynced/")
    for name, body in files.items():
        assert (mnt / "rsynced" / name).read_bytes() == body, name
    assert stat.S_IMODE(os.stat(mnt / "rsynced" / "a" / "mid.txt").st_mode) == 0o600

    sh("tar", "cf", str(tmp_path / "t.tar"), "-C", str(src), ".")
    (mnt / "untarred").mkdir()
    sh("tar", "xf", str(tmp_path / "t.tar"), "-C", str(mnt / "untarred"))
    back = tmp_path / "back"
    back.mkdir()
    sh("tar", "cf", str(tmp_path / "back.tar"), "-C", str(mnt / "untarred"), ".")
    sh("tar", "xf", str(tmp_path / "back.tar"), "-C", str(back))
    for name, body in files.items():
        assert (mnt / "untarred" / name).read_bytes() == body and (back / name).read_bytes() == body, name

    found = sh("find", str(mnt / "rsynced")).stdout.decode().splitlines()
    assert sorted(os.path.relpath(p, mnt / "rsynced") for p in found) == sorted(
        [".", "a", "a/b", *files])
    du = int(sh("du", "-sb", str(mnt / "rsynced")).stdout.split()[0])
    assert du >= sum(len(b) for b in files.values())


def test_writing_on_after_a_child_closed_the_descriptor(mnt):
    """A shell's `{ a; b; } > f`: every command that exits closes the descriptor (a commit); the
    ones after it write on, and the file ends up with everything, in order."""
    script = f"{{ echo one; /bin/echo two; echo three; head -c 100000 /dev/zero; echo four; }} > '{mnt}/shell.txt'"
    sh("bash", "-c", script)
    assert (mnt / "shell.txt").read_bytes() == b"one\ntwo\nthree\n" + bytes(100000) + b"four\n"


def test_python_open_seek_read_and_mmap(mnt):
    data = pattern(GROUP + 3 * CELL + 11, seed=4)
    with open(mnt / "seek.bin", "wb") as f:
        for i in range(0, len(data), 100_000):   # many writes, in order
            f.write(data[i:i + 100_000])
    rng = random.Random(5)
    with open(mnt / "seek.bin", "rb") as f:
        for _ in range(50):
            offset, length = rng.randrange(len(data)), rng.randrange(1, 3 * CELL)
            f.seek(offset)
            assert f.read(length) == data[offset:offset + length]
        with mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ) as m:
            assert m[CELL - 3:CELL + 3] == data[CELL - 3:CELL + 3]
            assert m[len(data) - 10:] == data[-10:]
            assert hashlib.sha256(m).digest() == hashlib.sha256(data).digest()


def test_zero_byte_file_and_unicode_names(mnt, mcluster):
    (mnt / "zero").write_bytes(b"")
    assert os.stat(mnt / "zero").st_size == 0 and (mnt / "zero").read_bytes() == b""
    sh("touch", str(mnt / "touched"))
    assert os.path.isfile(mnt / "touched")
    name = "naïve-日本語-😀.txt"
    (mnt / "uni").mkdir()
    (mnt / "uni" / name).write_text("x")
    assert os.listdir(mnt / "uni") == [name]
    listed = run_cli("ls", "/uni", namenode=mcluster.namenode).stdout.decode()
    assert name in listed


def test_stat_owner_mode_mtime_and_statfs(mnt):
    (mnt / "st.txt").write_bytes(b"12345")
    os.chmod(mnt / "st.txt", 0o640)
    st = os.stat(mnt / "st.txt")
    assert (st.st_size, stat.S_IMODE(st.st_mode), stat.S_ISREG(st.st_mode)) == (5, 0o640, True)
    assert st.st_uid == os.getuid()   # the cluster user the mount acts as is the user who mounted
    assert abs(st.st_mtime - time.time()) < 600
    assert stat.S_ISDIR(os.stat(mnt).st_mode)
    os.chown(mnt / "st.txt", 0, 0)
    assert os.stat(mnt / "st.txt").st_uid == 0
    vfs = os.statvfs(mnt)
    assert vfs.f_blocks > vfs.f_bfree > 0 and vfs.f_namemax == 255   # the DataNodes' capacity, some used
    sh("df", str(mnt))


def test_mkdir_rename_unlink_rmdir(mnt):
    (mnt / "d1" / "sub").mkdir(parents=True)
    (mnt / "d1" / "sub" / "f").write_bytes(b"f")
    os.rename(mnt / "d1", mnt / "d2")
    assert (mnt / "d2" / "sub" / "f").read_bytes() == b"f" and not os.path.exists(mnt / "d1")
    (mnt / "d2" / "g").write_bytes(b"new")
    os.rename(mnt / "d2" / "g", mnt / "d2" / "sub" / "f")   # onto an existing file: replaced, atomically
    assert (mnt / "d2" / "sub" / "f").read_bytes() == b"new" and os.listdir(mnt / "d2") == ["sub"]
    os.unlink(mnt / "d2" / "sub" / "f")
    os.rmdir(mnt / "d2" / "sub")
    os.rmdir(mnt / "d2")
    assert not os.path.exists(mnt / "d2")


def test_overwrite_with_o_trunc_is_seen_by_cached_readers(mnt, mcluster):
    """The page cache of a file is kept across opens only while the NameNode says it is unchanged."""
    path = mnt / "cached.bin"
    first, second = pattern(2 * CELL, 6), pattern(2 * CELL, 7)   # same size: only the version tells
    path.write_bytes(first)
    assert path.read_bytes() == first and path.read_bytes() == first   # the second from the page cache
    with client(mcluster.namenode) as fs:
        fs.write_bytes("/cached.bin", second, overwrite=True)
    assert path.read_bytes() == second   # another client overwrote it: the next open drops the cache
    with open(path, "wb") as f:          # O_TRUNC through the mount: an overwrite
        f.write(first)
    assert path.read_bytes() == first


def test_listing_of_more_entries_than_a_namenode_page(mnt, mcluster):
    with client(mcluster.namenode) as fs, concurrent.futures.ThreadPoolExecutor(8) as pool:
        fs.mkdir("/many")
        list(pool.map(fs.mkdir, [f"/many/d{i:04d}" for i in range(1050)]))   # the NameNode pages by 1000
    names = os.listdir(mnt / "many")
    assert len(names) == 1050 and sorted(names) == [f"d{i:04d}" for i in range(1050)]


# ---------------------------------------------------------------------------- what is refused

ERRNO_TABLE = [
    ("hard link", lambda p: os.link(p, str(p) + ".link"), errno.EPERM),
    ("fifo", lambda p: os.mkfifo(str(p) + ".fifo"), errno.EPERM),
    ("set an xattr outside the user namespace", lambda p: os.setxattr(p, "security.k", b"v"), errno.ENOTSUP),
    ("get a missing xattr", lambda p: os.getxattr(p, "user.missing"), errno.ENODATA),
    ("open a missing file", lambda p: open(str(p) + ".missing"), errno.ENOENT),
    ("create with O_EXCL over a file", lambda p: os.open(p, os.O_CREAT | os.O_EXCL | os.O_WRONLY), errno.EEXIST),
    ("mkdir over a file", lambda p: os.mkdir(p), errno.EEXIST),
    ("rmdir of a non-empty directory", lambda p: os.rmdir(os.path.dirname(p)), errno.ENOTEMPTY),
    ("a name that is not UTF-8", lambda p: open(os.fsencode(os.path.dirname(p)) + b"/\xff", "wb"), errno.EILSEQ),
]


@pytest.mark.parametrize("what,operation,code", ERRNO_TABLE, ids=[row[0] for row in ERRNO_TABLE])
def test_refused_operations_fail_with_their_errno(mnt, what, operation, code):
    os.makedirs(mnt / "errno", exist_ok=True)
    path = mnt / "errno" / "existing.txt"
    if not path.exists():
        path.write_bytes(b"existing bytes")
    with pytest.raises(OSError) as raised:
        operation(path)
    assert raised.value.errno == code, f"{what}: {errno.errorcode.get(raised.value.errno)}"
    assert path.read_bytes() == b"existing bytes"   # nothing changed


def test_a_failed_commit_is_the_error_of_close_and_leaves_no_file(mnt, mcluster):
    """Another client removes the directory of a file being written: the NameNode refuses to
    complete it, and close(2) says so."""
    (mnt / "gone").mkdir()
    f = open(mnt / "gone" / "f.bin", "wb")
    f.write(pattern(CELL, 10))
    f.flush()
    with client(mcluster.namenode) as fs:   # (not the CLI: a fork+exec would close f in the child, a commit)
        fs.delete("/gone", recursive=True)
    with pytest.raises(OSError) as raised:
        f.close()
    assert raised.value.errno in (errno.ENOENT, errno.EIO)
    assert not os.path.exists(mnt / "gone" / "f.bin")
    assert run_cli("stat", "/gone/f.bin", namenode=mcluster.namenode).code != 0


# ---------------------------------------------------------------------------- reads under load and faults

def test_concurrent_readers_get_exact_bytes(mnt):
    data = pattern(3 * GROUP, seed=8)
    (mnt / "shared.bin").write_bytes(data)
    errors = []

    def reader(seed: int) -> None:
        rng = random.Random(seed)
        try:
            with open(mnt / "shared.bin", "rb", buffering=0) as f:
                for _ in range(40):
                    offset = rng.randrange(len(data))
                    length = rng.choice([1, 4096, CELL, 2 * CELL + 5])
                    got = os.pread(f.fileno(), length, offset)
                    if got != data[offset:offset + length]:
                        errors.append((seed, offset, length))
            if seed % 2 == 0:
                assert (mnt / "shared.bin").read_bytes() == data
        except Exception as err:   # noqa: BLE001 - reported below
            errors.append((seed, repr(err)))

    threads = [threading.Thread(target=reader, args=(s,)) for s in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors


def test_datanode_frozen_mid_cat_bytes_exact_and_hedged(mnt, mcluster):
    data = pattern(16 * GROUP, seed=9)   # 24 MiB: far more than the read-ahead holds
    with client(mcluster.namenode) as fs:
        fs.write_bytes("/frozen.bin", data)
        last = fs.stat("/frozen.bin").groups[-1]
    victim = last.units[0].datanode_id
    hedges = counter(mnt, "hedges")
    cat = subprocess.Popen(["cat", str(mnt / "frozen.bin")], stdout=subprocess.PIPE)
    try:
        head = cat.stdout.read(1 << 20)
        mcluster.freeze(victim)
        rest = cat.stdout.read()
        assert cat.wait(120) == 0
    finally:
        mcluster.thaw(victim)
        cat.kill()
    assert head + rest == data
    assert counter(mnt, "hedges") > hedges


# ---------------------------------------------------------------------------- mounting and unmounting

def test_kill_9_leaves_a_mount_point_that_fusermount_cleans(mcluster, tmp_path):
    mountpoint = tmp_path / "m"
    proc = start_mount(mcluster.namenode, mountpoint, tmp_path / "log")
    proc.send_signal(signal.SIGKILL)
    proc.wait(30)
    with pytest.raises(OSError) as raised:
        os.listdir(mountpoint)
    assert raised.value.errno == errno.ENOTCONN
    sh("fusermount3", "-u", str(mountpoint))
    assert not os.path.ismount(mountpoint) and os.listdir(mountpoint) == []


def test_sigterm_unmounts_and_exits_0_and_a_file_being_written_never_appears(mcluster, tmp_path):
    mountpoint = tmp_path / "m"
    proc = start_mount(mcluster.namenode, mountpoint, tmp_path / "log")
    assert os.path.isdir(mountpoint / "uni")   # the module's files are there
    fd = os.open(mountpoint / "half.bin", os.O_WRONLY | os.O_CREAT)
    os.write(fd, pattern(3 * CELL, 11))
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(30) == 0
    assert not os.path.ismount(mountpoint)
    try:
        os.close(fd)
    except OSError:
        pass   # the mount is gone
    with client(mcluster.namenode) as fs:   # the mount process is gone: nobody can complete it now
        assert "/half.bin" not in {e.path for e in fs.list("/")}


def test_background_mount_returns_once_mounted_and_ends_on_fusermount(mcluster, tmp_path):
    mountpoint = tmp_path / "m"
    mountpoint.mkdir()
    result = run_cli("mount", str(mountpoint), namenode=mcluster.namenode, timeout=60)
    assert result.code == 0, result.stderr
    try:
        assert os.path.ismount(mountpoint) and os.path.isdir(mountpoint / "uni")
    finally:
        sh("fusermount3", "-u", str(mountpoint))
    assert not os.path.ismount(mountpoint)


def test_mount_errors_are_one_line(mcluster, tmp_path):
    from conftest import assert_one_line_error

    missing = run_cli("mount", str(tmp_path / "nope"), namenode=mcluster.namenode)
    assert_one_line_error(missing, "no such directory")
    assert missing.code == 2
    (tmp_path / "m").mkdir()
    unreachable = run_cli("mount", str(tmp_path / "m"), namenode="127.0.0.1:1")   # backgrounded: the parent says
    assert_one_line_error(unreachable, "cannot reach the NameNode")
    assert unreachable.code == 3
    assert not os.path.ismount(tmp_path / "m")


# ---------------------------------------------------------------------------- a secure cluster

def test_secure_cluster_mounts_with_a_credential_and_the_namenode_checks_permissions(tmp_path_factory):
    root = tmp_path_factory.mktemp("secure-mount")
    secure = start_cluster(root / "cluster", "secure", datanodes=9)
    proc = None
    try:
        with client(secure.namenode) as fs:   # the admin's credential
            fs.mkdir("/home/alice", parents=True)
            fs.set_owner("/home/alice", "alice")
            fs.write_bytes("/secret.txt", b"admin only")
            fs.set_permission("/secret.txt", 0o600)
        alice = root / "alice.pem"
        issued = run_cli("admin", "credential", "--user", "alice", "--out", str(alice), namenode=secure.namenode)
        assert issued.code == 0, issued.stderr
        env = dict(cli_env(secure.namenode), HEDGEFS_CREDENTIALS=str(alice))
        mountpoint = root / "mnt"
        proc = start_mount(secure.namenode, mountpoint, root / "mount.log", env=env)

        (mountpoint / "home" / "alice" / "notes.txt").write_bytes(b"alice's")
        st = os.stat(mountpoint / "home" / "alice" / "notes.txt")
        assert st.st_uid == os.getuid()                         # alice is who mounted
        assert os.stat(mountpoint / "secret.txt").st_uid != os.getuid()   # the admin is someone else
        with pytest.raises(PermissionError):                     # root here; the NameNode says no
            (mountpoint / "secret.txt").read_bytes()
        with pytest.raises(PermissionError):
            (mountpoint / "alices-file-in-root.txt").write_bytes(b"x")
        assert not os.path.exists(mountpoint / "alices-file-in-root.txt")
        # A chown of the open file to another user (fchown, as tar x or install -o do): the
        # NameNode refuses it with the Complete; close(2) says EPERM, as chown(2) would, and the
        # bytes are committed without it.
        fd = os.open(mountpoint / "home" / "alice" / "given.txt", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        os.write(fd, b"alice's copy")
        os.fchown(fd, pwd.getpwnam("daemon").pw_uid, -1)   # root here: the kernel lets it through
        with pytest.raises(PermissionError) as refused:
            os.close(fd)
        assert refused.value.errno == errno.EPERM
        assert (mountpoint / "home" / "alice" / "given.txt").read_bytes() == b"alice's copy"
        with client(secure.namenode) as fs:
            assert fs.read_bytes("/home/alice/notes.txt") == b"alice's"
            assert fs.stat("/home/alice/notes.txt").owner == "alice"
            assert fs.stat("/home/alice/given.txt").owner == "alice"
    finally:
        if proc is not None:
            stop_mount(proc, root / "mnt")
        secure.down()
