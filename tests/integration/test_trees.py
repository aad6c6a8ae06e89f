"""Directory trees through the CLI: put -r, get -r, cp -r, byte-exact, on a real cluster.

The tree has what a source tree has (nested directories, an empty one, empty files, files across
a cell and a stripe boundary, a symlink to a file) and what a copy must leave out (a FIFO, a
dangling symlink). Its bytes are offset-dependent and not UTF-8, so a shifted byte shows.
"""

import os
import pathlib

import pytest

from conftest import CELL, STRIPE, pattern, run_cli


def make_tree(root: pathlib.Path) -> dict[str, bytes]:
    """A small tree; returns {relative path: bytes} of its regular files (symlinks followed)."""
    files = {
        "README": b"hello\n",
        "empty.txt": b"",
        "src/a.py": pattern(3000, seed=1),
        "src/pkg/b.py": pattern(CELL + 1, seed=2),
        "src/pkg/deep/c.bin": pattern(STRIPE + 7, seed=3),
        "docs/guide.md": pattern(100, seed=4),
    }
    files.update({f"many/f{i:03d}": pattern(i * 37, seed=i) for i in range(40)})
    for rel, data in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    (root / "emptydir").mkdir()
    os.symlink("../README", root / "src" / "readme-link")   # a link to a file: its bytes are copied
    files["src/readme-link"] = files["README"]
    os.symlink("nowhere", root / "dangling")                # skipped, with a warning
    os.mkfifo(root / "fifo")                                 # skipped, with a warning
    return files


def read_tree(root: pathlib.Path) -> tuple[dict[str, bytes], set[str]]:
    files, dirs = {}, set()
    for here, subdirs, names in os.walk(root):
        for d in subdirs:
            dirs.add(os.path.relpath(os.path.join(here, d), root))
        for n in names:
            path = os.path.join(here, n)
            files[os.path.relpath(path, root)] = pathlib.Path(path).read_bytes()
    return files, dirs


def remote_tree(fs, root: str) -> dict[str, bytes]:
    cut = len(root) + 1
    return {st.path[cut:]: fs.read_bytes(st.path) for st in fs.iter_list(root, recursive=True) if not st.is_dir}


@pytest.fixture
def tree(tmp_path):
    root = tmp_path / "proj"
    root.mkdir()
    return root, make_tree(root)


def test_put_r_get_r_cp_r_round_trip_byte_exact(cluster, fs, tmp_path, tree):
    src, files = tree
    nn = cluster.namenode
    put = run_cli("put", "-r", str(src), "/trees/rt", namenode=nn)   # /trees/rt is new: the copy is /trees/rt
    assert put.code == 0, put.stderr
    warnings = put.stderr.splitlines()
    assert len(warnings) == 2 and any("dangling" in w for w in warnings) and any("not a regular file" in w for w in warnings)
    assert remote_tree(fs, "/trees/rt") == files
    assert fs.stat("/trees/rt/emptydir").is_dir

    out = tmp_path / "back"
    out.mkdir()
    got = run_cli("get", "-r", "/trees/rt", str(out), namenode=nn)   # an existing directory: into it
    assert got.code == 0, got.stderr
    back, dirs = read_tree(out / "rt")
    assert back == files
    assert {"emptydir", "src/pkg/deep", "docs", "many"} <= dirs

    cp = run_cli("cp", "-r", "-t", "3", "/trees/rt", "/trees/copy", namenode=nn)
    assert cp.code == 0, cp.stderr
    assert remote_tree(fs, "/trees/copy") == files
    assert fs.stat("/trees/copy/emptydir").is_dir


def test_put_r_into_an_existing_directory_and_existing_files_fail_alone(cluster, fs, tree):
    src, files = tree
    nn = cluster.namenode
    fs.mkdir("/trees/into", parents=True)
    assert run_cli("put", "-r", str(src), "/trees/into", namenode=nn).code == 0   # -> /trees/into/proj
    assert remote_tree(fs, "/trees/into/proj") == files

    (src / "README").write_bytes(b"changed\n")
    (src / "new.txt").write_bytes(b"new\n")
    again = run_cli("put", "-r", str(src), "/trees/into", namenode=nn)
    assert again.code == 2   # "file exists" is bad input; every other file still went
    errors = [ln for ln in again.stderr.splitlines() if "file exists" in ln]
    assert len(errors) == len(files) + 1   # one line per existing file, and the summary
    assert "Traceback" not in again.stderr
    assert errors[-1].startswith("hedgefs: put: ") and f"{len(files)} of " in errors[-1]
    assert fs.read_bytes("/trees/into/proj/new.txt") == b"new\n"
    assert fs.read_bytes("/trees/into/proj/README") == files["README"]   # kept without -f

    forced = run_cli("put", "-r", "-f", str(src), "/trees/into", namenode=nn)
    assert forced.code == 0, forced.stderr
    assert fs.read_bytes("/trees/into/proj/README") == b"changed\n"


def test_tree_verbs_bad_input(cluster, fs, tmp_path, tree):
    src, _ = tree
    nn = cluster.namenode
    fs.mkdir("/trees/bad", parents=True)
    fs.write_bytes("/trees/bad/file", b"x", overwrite=True)

    no_r = run_cli("put", str(src), "/trees/bad/x", namenode=nn)
    assert no_r.code == 2 and "put -r" in no_r.stderr and len(no_r.stderr.splitlines()) == 1

    onto_file = run_cli("put", "-r", str(src), "/trees/bad/file", namenode=nn)
    assert onto_file.code == 2 and "not a directory: /trees/bad/file" in onto_file.stderr
    assert len(onto_file.stderr.splitlines()) == 1

    cp_no_r = run_cli("cp", "/trees/bad", "/trees/bad2", namenode=nn)
    assert cp_no_r.code == 2 and "cp -r" in cp_no_r.stderr

    into_itself = run_cli("cp", "-r", "/trees/bad", "/trees/bad/sub", namenode=nn)
    assert into_itself.code == 2 and "into itself" in into_itself.stderr

    local_file = tmp_path / "plain"
    local_file.write_bytes(b"y")
    get_onto_file = run_cli("get", "-r", "/trees/bad", str(local_file), namenode=nn)
    assert get_onto_file.code == 2 and "not a directory" in get_onto_file.stderr
    assert local_file.read_bytes() == b"y"

    missing = run_cli("get", "-r", "/trees/none", str(tmp_path / "none"), namenode=nn)
    assert missing.code == 2 and len(missing.stderr.splitlines()) == 1


def test_get_r_keeps_existing_local_files_without_f(cluster, fs, tmp_path):
    nn = cluster.namenode
    fs.mkdir("/trees/keep", parents=True)
    fs.write_bytes("/trees/keep/a", b"remote-a", overwrite=True)
    fs.write_bytes("/trees/keep/b", b"remote-b", overwrite=True)
    out = tmp_path / "out"
    (out / "keep").mkdir(parents=True)
    (out / "keep" / "a").write_bytes(b"local-a")
    got = run_cli("get", "-r", "/trees/keep", str(out), namenode=nn)   # out exists: into out/keep, merged
    assert got.code == 2 and "local file exists" in got.stderr and "Traceback" not in got.stderr
    assert (out / "keep" / "a").read_bytes() == b"local-a"   # kept
    assert (out / "keep" / "b").read_bytes() == b"remote-b"  # the other file still came
    forced = run_cli("get", "-r", "-f", "/trees/keep", str(out), namenode=nn)
    assert forced.code == 0, forced.stderr
    assert (out / "keep" / "a").read_bytes() == b"remote-a"
    assert sorted(os.listdir(out / "keep")) == ["a", "b"]   # no temporary file left beside them
