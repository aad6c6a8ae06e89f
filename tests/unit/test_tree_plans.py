"""The tree verbs' pure parts: which directories are made, what the walk keeps, the progress line."""

import io
import os

from hedgefs.cli.trees import Entry, TreeProgress, leaf_dirs, walk_local


def test_leaf_dirs_make_every_directory_with_parents():
    dirs = [Entry(rel, 0, True) for rel in ["", "a", "a/b", "a/b/c", "a/d", "e", "f/g"]]
    assert [d.rel for d in leaf_dirs(dirs)] == ["a/b/c", "a/d", "e", "f/g"]
    assert [d.rel for d in leaf_dirs([Entry("", 0, True)])] == [""]   # the root alone: made by the caller


def test_walk_local_sorted_with_sizes_and_skips(tmp_path):
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "x").write_bytes(b"12345")
    (tmp_path / "a").write_bytes(b"1")
    (tmp_path / "dirlink").symlink_to("b")
    (tmp_path / "filelink").symlink_to("a")
    os.mkfifo(tmp_path / "p")
    plan = walk_local(str(tmp_path))
    assert [d.rel for d in plan.dirs] == ["", "b"]
    assert [(f.rel, f.size) for f in plan.files] == [("a", 1), ("filelink", 1), ("b/x", 5)]
    assert plan.bytes == 7
    assert len(plan.skipped) == 2
    assert any("dirlink" in s and "directory" in s for s in plan.skipped)
    assert any(s.endswith("p: not a regular file") for s in plan.skipped)


class _Tty(io.StringIO):
    def isatty(self):
        return True


def test_progress_counts_files_and_bytes_on_a_terminal_only():
    out = _Tty()
    p = TreeProgress("put d -> /d", files=2, total_bytes=3 << 20, stream=out)
    p.add(nbytes=1 << 20)
    p.add(files=1)
    p.add(nbytes=2 << 20, files=1)
    p.finish()
    last = out.getvalue().rstrip("\n").split("\r")[-1]
    assert "2/2 files" in last and "3.0 MiB/3.0 MiB" in last and "files/s" in last
    assert out.getvalue().endswith("\n")
    quiet = io.StringIO()   # not a terminal: nothing drawn
    q = TreeProgress("put", files=1, total_bytes=1, stream=quiet)
    q.add(nbytes=1, files=1)
    q.finish()
    assert quiet.getvalue() == ""
