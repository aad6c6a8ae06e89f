"""The mount with many small files: the tree workloads people run (tar x, cp -r, rsync -a,
git clone, grep -r, rm -rf), byte-exact, and what its caches may and may not show.

Caches: a mount's names and attributes (and "no such file") are the kernel's for the attribute
timeout; a file another client deletes (or creates) is seen so within that timeout. The tests
measure it against the NameNode's own RPC counters (what the mount asked) and by polling with a
deadline far from the timeout, never by sleeping the timeout out.
"""

import concurrent.futures
import ctypes
import os
import pathlib
import re
import shutil
import subprocess
import time
import urllib.request

import pytest
from conftest import CELL, client, pattern, start_cluster, wait_until
from mount_support import WHY_NOT, sh, start_mount, stop_mount

if WHY_NOT:
    pytest.skip(f"hedgefs mount not testable here: {WHY_NOT}", allow_module_level=True)

TIMEOUT_S = 1.0   # the mount's --attr-timeout here (the default)


@pytest.fixture(scope="module")
def tcluster(tmp_path_factory):
    c = start_cluster(tmp_path_factory.mktemp("trees-cluster"))
    yield c
    c.down()


@pytest.fixture(scope="module")
def mnt(tcluster, tmp_path_factory):
    root = tmp_path_factory.mktemp("trees-mount")
    proc = start_mount(tcluster.namenode, root / "mnt", root / "mount.log")
    yield root / "mnt"
    stop_mount(proc, root / "mnt")


@pytest.fixture(scope="module")
def long_mnt(tcluster, tmp_path_factory):
    """A second mount of the same cluster whose kernel caches hold for a minute: what it asks the
    NameNode does not depend on how fast this host runs the test."""
    root = tmp_path_factory.mktemp("trees-long")
    proc = start_mount(tcluster.namenode, root / "mnt", root / "mount.log", "--attr-timeout", "60")
    yield root / "mnt"
    stop_mount(proc, root / "mnt")


def namenode_calls(cluster, method: str) -> float:
    """How many ``method`` RPCs the NameNode has served (its /metrics)."""
    text = urllib.request.urlopen(cluster.http_url + "metrics", timeout=10).read().decode()
    return sum(float(v) for v in re.findall(
        rf'^hedgefs_namenode_rpc_calls_total\{{[^}}]*method="{method}"[^}}]*\}} (\S+)$', text, re.M))


def make_tree(root: pathlib.Path) -> dict[str, bytes]:
    files = {
        "README.md": b"# a project\n\ndef main(): pass\n",
        "setup.py": b"from setuptools import setup\nsetup()\n",
        "src/pkg/__init__.py": b"",
        "src/pkg/core.py": pattern(5000, seed=1),
        "src/pkg/sub/deep.py": b"def main():\n    return 42\n" * 50,
        "data/blob.bin": pattern(2 * CELL + 3, seed=2),
        "Grüße/☃.txt": "unicode names\n".encode(),
    }
    files.update({f"many/m{i:02d}.py": f"x = {i}\n".encode() * (i + 1) for i in range(30)})
    for rel, data in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(data)
    (root / "emptydir").mkdir()
    return files


def tree_of(root: pathlib.Path) -> dict[str, bytes]:
    out = {}
    for here, _dirs, names in os.walk(root):
        for n in names:
            out[os.path.relpath(os.path.join(here, n), root)] = pathlib.Path(here, n).read_bytes()
    return out


@pytest.fixture(scope="module")
def tree(tmp_path_factory):
    root = tmp_path_factory.mktemp("tree") / "proj"
    root.mkdir()
    return root, make_tree(root)


# ---------------------------------------------------------------------------- the workloads


def test_tar_x_grep_r_rm_rf(mnt, tree, tmp_path):
    src, files = tree
    sh("tar", "cf", str(tmp_path / "t.tar"), "-C", str(src.parent), src.name)
    (mnt / "tarx").mkdir()
    sh("tar", "xf", str(tmp_path / "t.tar"), "-C", str(mnt / "tarx"))
    assert tree_of(mnt / "tarx" / "proj") == files
    assert (mnt / "tarx" / "proj" / "emptydir").is_dir()
    found = subprocess.run(["grep", "-r", "-l", "def main", str(mnt / "tarx")], capture_output=True, text=True)
    assert found.returncode == 0
    assert sorted(os.path.relpath(p, mnt / "tarx" / "proj") for p in found.stdout.split()) == \
        sorted(rel for rel, data in files.items() if b"def main" in data)
    sh("rm", "-rf", str(mnt / "tarx"))
    assert not (mnt / "tarx").exists()


def test_cp_r_and_rsync_a_twice(mnt, tree):
    if not shutil.which("rsync"):
        pytest.skip("no rsync (Debian's rsync; make installs it as root)")
    src, files = tree
    sh("cp", "-r", str(src), str(mnt / "cpr"))
    assert tree_of(mnt / "cpr") == files
    sh("rsync", "-a", f"{src}/", f"{mnt}/rs/")
    assert tree_of(mnt / "rs") == files
    again = sh("rsync", "-a", "--stats", f"{src}/", f"{mnt}/rs/")   # nothing changed: nothing may break
    assert b"Number of" in again.stdout
    assert tree_of(mnt / "rs") == files


def test_git_clone_into_the_mount(mnt, tmp_path):
    if not shutil.which("git"):
        pytest.skip("no git")
    repo = tmp_path / "repo"
    repo.mkdir()
    env = dict(os.environ, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@x", GIT_COMMITTER_NAME="t",
               GIT_COMMITTER_EMAIL="t@x", GIT_CONFIG_NOSYSTEM="1", HOME=str(tmp_path))
    files = {f"f{i}.txt": f"line {i}\n".encode() * (i + 1) for i in range(12)}
    files["sub/deep.bin"] = pattern(CELL + 5, seed=9)
    for rel, data in files.items():
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_bytes(data)
    for args in (["init", "-q"], ["add", "."], ["commit", "-q", "-m", "one"]):
        sh("git", "-C", str(repo), *args, env=env)
    sh("git", "clone", "-q", "--no-hardlinks", str(repo), str(mnt / "clone"), env=env)
    got = {rel: data for rel, data in tree_of(mnt / "clone").items() if not rel.startswith(".git")}
    assert got == files
    fsck = subprocess.run(["git", "-C", str(mnt / "clone"), "fsck", "--no-progress"], capture_output=True, env=env)
    assert fsck.returncode == 0, fsck.stderr


# ---------------------------------------------------------------------------- caches


def test_a_file_another_client_deletes_is_gone_within_the_attribute_timeout(mnt, tcluster):
    with client(tcluster.namenode) as fs:
        fs.mkdir("/cache", parents=True)
        fs.write_bytes("/cache/doomed", b"x" * 10, overwrite=True)
        assert os.stat(mnt / "cache" / "doomed").st_size == 10   # the kernel holds its entry now
        fs.delete("/cache/doomed")
        deleted = time.monotonic()
        wait_until(lambda: not os.path.exists(mnt / "cache" / "doomed"), 10 * TIMEOUT_S + 5,
                   "the mount to stop showing a deleted file")
        # Within the timeout (and the kernel's rounding of it to jiffies), with room for a busy host.
        assert time.monotonic() - deleted < TIMEOUT_S + 2.0


def test_a_missing_name_is_asked_once_per_timeout_and_a_file_made_elsewhere_appears(mnt, long_mnt, tcluster):
    with client(tcluster.namenode) as fs:
        fs.mkdir("/neg", parents=True)
        assert not os.path.exists(long_mnt / "neg" / "probe")
        asked = namenode_calls(tcluster, "GetFileInfo")
        for _ in range(20):   # an import path, make, git: the same missing name, again and again
            assert not os.path.exists(long_mnt / "neg" / "probe")
        assert namenode_calls(tcluster, "GetFileInfo") == asked   # the kernel's negative entry answered

        (long_mnt / "neg" / "probe").write_bytes(b"made here")   # made through this mount: seen at once
        assert (long_mnt / "neg" / "probe").read_bytes() == b"made here"

    # The default mount (1 s): a name another client creates appears within its timeout.
    assert not os.path.exists(mnt / "neg" / "elsewhere")
    with client(tcluster.namenode) as fs:
        fs.write_bytes("/neg/elsewhere", b"from another client")
        made = time.monotonic()
    wait_until(lambda: os.path.exists(mnt / "neg" / "elsewhere"), 10 * TIMEOUT_S + 5,
               "a file created by another client to appear")
    assert time.monotonic() - made < TIMEOUT_S + 2.0
    assert (mnt / "neg" / "elsewhere").read_bytes() == b"from another client"


def test_a_file_written_through_the_mount_costs_no_stat_at_close(long_mnt, tcluster):
    mnt = long_mnt
    (mnt / "calls").mkdir()
    os.stat(mnt)   # the mkdir changed the root: the kernel asks for its attributes once, now
    before = {m: namenode_calls(tcluster, m) for m in ("GetFileInfo", "SetPermission", "Create", "Complete",
                                                       "AddBlockGroup")}
    fd = os.open(mnt / "calls" / "f", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)   # as tar opens it
    os.write(fd, b"hello")
    os.fchmod(fd, 0o644)
    os.close(fd)
    after = {m: namenode_calls(tcluster, m) - before[m] for m in before}
    assert after["Create"] == 1 and after["Complete"] == 1
    assert after["AddBlockGroup"] == 0   # the first group came with Create: 2 calls for the file
    assert after["SetPermission"] == 0   # 0644 is what a new file gets: nothing to send
    assert after["GetFileInfo"] == 0     # none at close; the new name's lookup answered here (made in a
                                         # directory this mount made: see test_a_name_in_a_directory_made_here...)
    st = os.stat(mnt / "calls" / "f")
    assert st.st_size == 5 and st.st_mode & 0o777 == 0o644
    os.chmod(mnt / "calls" / "f", 0o600)
    assert os.stat(mnt / "calls" / "f").st_mode & 0o777 == 0o600


def test_times_and_mode_set_on_the_open_file_cost_no_stat_at_close(long_mnt, tcluster):
    """GNU tar x sets a file's mtime and mode on its open descriptor (futimens, fchmod), then
    closes it: those go with the Complete (one call, one journal record), and no stat follows."""
    mnt = long_mnt
    (mnt / "timed").mkdir()
    os.stat(mnt)
    methods = ("GetFileInfo", "SetPermission", "SetTimes", "Create", "Complete")
    before = {m: namenode_calls(tcluster, m) for m in methods}
    fd = os.open(mnt / "timed" / "run.sh", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o700)
    os.write(fd, b"#!/bin/sh\necho hi\n")
    os.utime(fd, ns=(1_500_000_000_000_000_000, 1_600_000_000_123_000_000))
    os.fchmod(fd, 0o755)
    os.close(fd)
    after = {m: namenode_calls(tcluster, m) - before[m] for m in methods}
    assert after == {"GetFileInfo": 0, "SetPermission": 0, "SetTimes": 0, "Create": 1, "Complete": 1}
    st = os.stat(mnt / "timed" / "run.sh")   # (the kernel asks the NameNode: what it stored)
    assert st.st_mode & 0o777 == 0o755 and st.st_size == 18
    assert st.st_mtime_ns == 1_600_000_000_123_000_000
    with client(tcluster.namenode) as fs:   # another client sees what the Complete carried
        status = fs.stat("/timed/run.sh")
    assert (status.permission, status.mtime_ms, status.atime_ms) == (0o755, 1_600_000_000_123, 1_500_000_000_000)


def test_tar_x_keeps_mtimes_and_modes(mnt, tmp_path):
    src = tmp_path / "kept"
    (src / "bin").mkdir(parents=True)
    (src / "bin" / "tool").write_bytes(b"#!/bin/sh\nexit 0\n")
    (src / "notes.txt").write_bytes(pattern(3000, seed=7))
    os.chmod(src / "bin" / "tool", 0o750)
    os.chmod(src / "notes.txt", 0o600)
    os.utime(src / "bin" / "tool", (1_400_000_000, 1_400_000_000))
    os.utime(src / "notes.txt", (1_500_000_000, 1_500_000_000))
    sh("tar", "cf", str(tmp_path / "k.tar"), "-C", str(tmp_path), "kept")
    (mnt / "keep").mkdir()
    sh("tar", "xpf", str(tmp_path / "k.tar"), "-C", str(mnt / "keep"))
    for rel in ("bin/tool", "notes.txt"):
        want, got = os.stat(src / rel), os.stat(mnt / "keep" / "kept" / rel)
        assert (got.st_mode & 0o7777, int(got.st_mtime), got.st_size) == \
            (want.st_mode & 0o7777, int(want.st_mtime), want.st_size), rel
        assert (mnt / "keep" / "kept" / rel).read_bytes() == (src / rel).read_bytes()


def test_files_made_in_a_directory_cost_no_stat_of_the_directory(long_mnt, tcluster):
    """The kernel asks for a directory's attributes after each create in it: within the
    attribute timeout the mount answers (the mtime it knows moved on); and the lookup of each new
    name too (a directory this mount made: it knows every name in it)."""
    mnt = long_mnt
    (mnt / "many").mkdir()
    before_mtime = os.stat(mnt / "many").st_mtime_ns
    before = namenode_calls(tcluster, "GetFileInfo")
    for i in range(5):
        fd = os.open(mnt / "many" / f"f{i}", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        os.write(fd, b"x" * 100)
        os.close(fd)
    assert namenode_calls(tcluster, "GetFileInfo") - before == 0   # (the new names' lookups: answered here)
    assert sorted(os.listdir(mnt / "many")) == [f"f{i}" for i in range(5)]
    assert os.stat(mnt / "many").st_mtime_ns >= before_mtime
    os.chmod(mnt / "many", 0o700)   # a change made here is the NameNode's answer at once
    assert os.stat(mnt / "many").st_mode & 0o777 == 0o700


def test_a_busy_directorys_status_is_asked_again_after_the_attribute_timeout(mnt, tcluster):
    """The status the mount answers for a directory (creates in it make the kernel ask after
    each one) holds for the attribute timeout from when the NameNode said it, however often it is
    asked meanwhile: another client's chmod shows while files keep being made there."""
    (mnt / "busy").mkdir()
    assert os.stat(mnt / "busy").st_mode & 0o777 == 0o755
    with client(tcluster.namenode) as fs:
        fs.set_permission("/busy", 0o700)
    deadline, i = time.monotonic() + 20 * TIMEOUT_S, 0
    while os.stat(mnt / "busy").st_mode & 0o777 != 0o700 and time.monotonic() < deadline:
        fd = os.open(mnt / "busy" / f"f{i}", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)   # as tar x
        os.close(fd)   # (the kernel asks for the directory's attributes after each create)
        i += 1
    assert os.stat(mnt / "busy").st_mode & 0o777 == 0o700, f"still the old mode after {i} creates"


def test_a_name_in_a_directory_made_here_is_absent_without_asking_and_another_clients_appears(mnt, long_mnt,
                                                                                             tcluster):
    """A directory this mount made holds only what this mount put in it, but for what another
    client made since: a lookup of a new name there is answered "no such file" by the mount
    within the attribute timeout (no NameNode call: tar x's lookup before each create), and a
    file another client makes there appears within the timeout all the same."""
    (long_mnt / "own").mkdir()
    os.stat(long_mnt)   # the mkdir changed the root: the kernel asks for its attributes once, now
    before = namenode_calls(tcluster, "GetFileInfo") + namenode_calls(tcluster, "StatMany")
    for i in range(10):
        assert not os.path.exists(long_mnt / "own" / f"new{i}")
    (long_mnt / "own" / "made").write_bytes(b"here")
    assert namenode_calls(tcluster, "GetFileInfo") + namenode_calls(tcluster, "StatMany") == before
    assert (long_mnt / "own" / "made").read_bytes() == b"here"

    (mnt / "own1").mkdir()   # the default mount (1 s)
    assert not os.path.exists(mnt / "own1" / "elsewhere")
    with client(tcluster.namenode) as fs:
        fs.write_bytes("/own1/elsewhere", b"from another client")
        made = time.monotonic()
    wait_until(lambda: os.path.exists(mnt / "own1" / "elsewhere"), 10 * TIMEOUT_S + 5,
               "a file another client made in a directory made here to appear")
    assert time.monotonic() - made < TIMEOUT_S + 2.0
    assert (mnt / "own1" / "elsewhere").read_bytes() == b"from another client"
    os.unlink(mnt / "own1" / "elsewhere")
    assert not os.path.exists(mnt / "own1" / "elsewhere")


CLIENT_METHODS = ("GetFileInfo", "StatMany", "List", "Create", "Complete", "AddBlockGroup", "SetOwner", "SetTimes",
                  "SetPermission", "Mkdir", "Mkdirs")


def test_a_file_of_a_tar_x_costs_create_and_complete(long_mnt, tcluster, tmp_path):
    """What a user counts (the NameNode's /metrics): GNU tar x of 24 files in 3 directories (as
    root: it fchowns, fchmods and futimens each open file) asks the NameNode Create and Complete
    per file and nothing else per file; the rest is per directory: its Mkdir (with tar's mode,
    answered with its status), tar's chmod, chown and utimes of it at the end, and no stat (the
    mount knows what the NameNode applied). Byte-exact, with the modes and mtimes kept, and the
    directories' attributes the mount answers those the NameNode has."""
    src = tmp_path / "src"
    files = {}
    for d in ("a", "b", "b/c"):
        (src / d).mkdir(parents=True)
        os.chmod(src / d, 0o750)
        for i in range(8):
            files[f"{d}/f{i}"] = pattern(100 + 700 * i, seed=i)
    for rel, data in files.items():
        (src / rel).write_bytes(data)
        os.chmod(src / rel, 0o640 if len(data) % 2 else 0o755)
        os.utime(src / rel, (1_500_000_000, 1_500_000_000 + len(data)))
    sh("tar", "cf", str(tmp_path / "t.tar"), "-C", str(src), ".")
    (long_mnt / "untar").mkdir()
    os.stat(long_mnt)
    before = {m: namenode_calls(tcluster, m) for m in CLIENT_METHODS}
    sh("tar", "xpf", str(tmp_path / "t.tar"), "-C", str(long_mnt / "untar"))
    calls = {m: namenode_calls(tcluster, m) - before[m] for m in CLIENT_METHODS}
    n, dirs = len(files), 4   # ("." is the untar directory itself)
    assert calls["Create"] == n and calls["Complete"] == n and calls["AddBlockGroup"] == 0, calls
    per_directory = {"GetFileInfo": 0, "StatMany": 0, "List": 0, "SetOwner": 1, "SetTimes": 1, "SetPermission": 1,
                     "Mkdirs": 0}
    for method, most in per_directory.items():
        assert calls[method] <= most * dirs, f"{method}: {sorted(calls.items())}"
    assert calls["Mkdir"] == dirs - 1, calls   # one each ("." was there)
    with client(tcluster.namenode) as fs:
        for d in ("a", "b", "b/c"):
            got, want, nn = os.stat(long_mnt / "untar" / d), os.stat(src / d), fs.stat(f"/untar/{d}")
            assert (got.st_mode & 0o7777, int(got.st_mtime)) == (want.st_mode & 0o7777, int(want.st_mtime))
            assert (got.st_mode & 0o7777, got.st_mtime_ns // 10**6, got.st_atime_ns // 10**6) == \
                (nn.permission, nn.mtime_ms, nn.atime_ms), d   # what the mount answers is the NameNode's
    for rel, data in files.items():
        got, want = os.stat(long_mnt / "untar" / rel), os.stat(src / rel)
        assert (got.st_size, got.st_mode & 0o7777, got.st_mtime) == (len(data), want.st_mode & 0o7777, want.st_mtime)
        assert (long_mnt / "untar" / rel).read_bytes() == data


def test_a_file_being_written_stays_visible_when_a_directory_made_here_is_listed_again(mnt, tcluster):
    """Past the attribute timeout a lookup of a new name lists the directory again; a file this
    mount is writing there (not in the NameNode's listing before its commit) is still found."""
    (mnt / "relist").mkdir()
    f = open(mnt / "relist" / "open-file", "wb")
    try:
        f.write(b"being written")
        f.flush()
        lists = namenode_calls(tcluster, "List")
        probes = iter(range(10**6))
        wait_until(lambda: not os.path.exists(mnt / "relist" / f"probe{next(probes)}")
                   and namenode_calls(tcluster, "List") > lists, 10 * TIMEOUT_S + 10,
                   "a lookup past the attribute timeout to list the directory again")
        assert os.stat(mnt / "relist" / "open-file").st_size == len(b"being written")
    finally:
        f.close()
    assert (mnt / "relist" / "open-file").read_bytes() == b"being written"


def _renameat2_noreplace(src, dst) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    at_fdcwd, rename_noreplace = -100, 1
    if libc.renameat2(at_fdcwd, os.fsencode(src), at_fdcwd, os.fsencode(dst), rename_noreplace) != 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code), str(dst))


@pytest.mark.parametrize("call", ["mkdir", "symlink", "rename-noreplace", "create-excl"])
def test_a_name_another_client_made_is_eexist_and_then_there(long_mnt, tcluster, call):
    """In a directory made here (whose names the mount knows for a minute), a name another client
    made since is refused EEXIST by mkdir, symlink, rename(RENAME_NOREPLACE) and open(O_EXCL),
    as the NameNode says; and it is there right after (``mkdir -p``'s check, ``ln -sf``'s retry),
    not "no such file" from the mount's knowledge or the kernel's cache of the lookup before."""
    d = long_mnt / f"eexist-{call}"
    d.mkdir()
    (d / "src").write_bytes(b"source")
    assert not os.path.exists(d / "taken")   # known absent: the mount's answer, kept by the kernel
    with client(tcluster.namenode) as fs:
        fs.mkdir(f"/eexist-{call}/taken")
    do = {"mkdir": lambda: os.mkdir(d / "taken"),
          "symlink": lambda: os.symlink("src", d / "taken"),
          "rename-noreplace": lambda: _renameat2_noreplace(d / "src", d / "taken"),
          "create-excl": lambda: os.open(d / "taken", os.O_CREAT | os.O_EXCL | os.O_WRONLY)}[call]
    with pytest.raises(FileExistsError):
        do()
    assert os.path.isdir(d / "taken")
    os.makedirs(d / "taken" / "below", exist_ok=True)   # mkdir -p
    assert (d / "src").read_bytes() == b"source"


def test_a_directory_made_here_and_filled_by_another_client_is_not_listed_whole_again(mnt, tcluster):
    """Past the attribute timeout a lookup in a directory made here lists it again, but never
    more than the bound of it (1,024 names and one): another client that put 1,500 names there
    costs one List page, not the whole listing, and from then on names are asked one by one."""
    (mnt / "filled").mkdir()
    with client(tcluster.namenode) as fs, concurrent.futures.ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda i: fs.mkdir(f"/filled/d{i:04d}"), range(1500)))
    lists = namenode_calls(tcluster, "List")
    probes = iter(range(10**6))
    wait_until(lambda: not os.path.exists(mnt / "filled" / f"probe{next(probes)}")
               and namenode_calls(tcluster, "List") > lists, 10 * TIMEOUT_S + 10,
               "a lookup past the attribute timeout to list the directory again")
    assert os.path.isdir(mnt / "filled" / "d1499") and not os.path.exists(mnt / "filled" / "probe-last")
    assert namenode_calls(tcluster, "List") - lists == 1   # (all 1,500: 2 pages)
