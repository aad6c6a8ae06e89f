"""The NameNode's CPU per create + complete of an empty file, in process, split by where it goes
(issue 42's "CPU per create + complete in the handlers and engine").

One thread creates and completes N files through ``Namesystem`` (bench/namenode.py's InProcess,
which knows both the journal build and the SQLite-row build before it), twice:

  durable   the real engine (SQLite journal, fsync on): process CPU per pair, every thread counted
            (a group commit's writer included); the fsync's wait is not CPU
  null      (a journal build only) the same with a journal that writes nothing: SQLite apart
  profile   the same under cProfile on this thread's CPU clock (waits are not counted; a commit
            thread of another build is not seen), each function's own time put in one place:
            handlers (namesystem, namespace, block map, retry cache: the decisions), engine (the
            journal, its encoding and SQLite: what makes a change durable), sqlite3 and
            locks/threads (C calls), other

Run with a build first on PYTHONPATH (bench/namenode_run.py's shim) to measure that build:

  python bench/namenode_profile.py [files=20000] [profile=5000]

prints one JSON line.
"""

from __future__ import annotations

import cProfile
import json
import os
import pstats
import shutil
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from namenode import InProcess, journal_build  # noqa: E402  (bench/namenode.py, itself imports hedgefs lazily)

_ENGINE = ("/journal/", "/db.py", "/rowcache.py", "/schema.py", "/etcd_view.py", "/waiting.py", "/locking.py")


def _where(filename: str, name: str) -> str:
    if "/namenode/" in filename:
        return "engine" if any(part in filename for part in _ENGINE) else "handlers"
    if filename == "~":   # a C function
        if "sqlite3" in name or "execute" in name or "commit" in name:
            return "sqlite3"
        if "acquire" in name or "release" in name or "wait" in name or "notify" in name:
            return "locks"
        if "msgpack" in name or "crc32c" in name or "pack" in name:
            return "engine"
        return "builtins"
    if "msgpack" in filename or "sqlite3" in filename:
        return "engine"
    if "threading" in filename:
        return "locks"
    return "other"


def _null_engine(root: str, files: int) -> float | None:
    """CPU per pair with a journal that writes nothing (a journal build only): the handlers', the
    records' and the group commit's own cost, SQLite's apart."""
    if not journal_build():
        return None
    from hedgefs.namenode.journal.sqlite import SqliteEngine

    real = SqliteEngine.append
    SqliteEngine.append = lambda self, first, last, data: None
    try:
        target = InProcess(os.path.join(root, "null"))
        for i in range(1, 10):
            target.register(f"dn{i}")
        target.mkdir("/b")
        cpu0 = time.process_time()
        for i in range(files):
            target.complete(target.create(f"/b/f{i}"), 0, [])
        cpu = time.process_time() - cpu0
        target.close()
        return round(cpu / files * 1e6, 1)
    finally:
        SqliteEngine.append = real


def main(files: int, profiled: int) -> dict:
    import hedgefs

    root = tempfile.mkdtemp(prefix="hedgefs-bench-nnprofile-")
    try:
        target = InProcess(os.path.join(root, "nn"))
        for i in range(1, 10):
            target.register(f"dn{i}")
        target.mkdir("/b")
        for i in range(500):   # warm up
            target.complete(target.create(f"/b/w{i}"), 0, [])
        began, cpu0 = time.perf_counter(), time.process_time()
        for i in range(files):
            target.complete(target.create(f"/b/f{i}"), 0, [])
        cpu = time.process_time() - cpu0
        wall = time.perf_counter() - began
        prof = cProfile.Profile(time.thread_time)   # CPU of this thread, not its waits
        prof.enable()
        for i in range(profiled):
            target.complete(target.create(f"/b/p{i}"), 0, [])
        prof.disable()
        target.close()
        null = _null_engine(root, files)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    split: dict[str, float] = {}
    stats = pstats.Stats(prof).stats
    for (filename, _line, name), (_cc, _nc, tottime, _ct, _callers) in stats.items():
        key = _where(filename, name)
        split[key] = split.get(key, 0.0) + tottime
    total = sum(split.values())
    top = sorted(((tt, f"{os.path.basename(fn)}:{name}") for (fn, _l, name), (_cc, _nc, tt, _ct, _c) in stats.items()),
                 reverse=True)[:12]
    return {"build": os.path.dirname(os.path.dirname(os.path.realpath(hedgefs.__file__))), "files": files,
            "cpu_us_per_pair": round(cpu / files * 1e6, 1), "wall_us_per_pair": round(wall / files * 1e6, 1),
            "null_engine_cpu_us_per_pair": null,
            "profiled": profiled,
            "profile_us_per_pair": {k: round(v / profiled * 1e6, 1) for k, v in sorted(split.items())},
            "profile_share": {k: round(v / total, 3) for k, v in sorted(split.items())},
            "profile_top": [[round(tt / profiled * 1e6, 2), where] for tt, where in top]}


if __name__ == "__main__":
    args = dict(a.split("=", 1) for a in sys.argv[1:])
    print(json.dumps(main(int(args.get("files", 20000)), int(args.get("profile", 5000)))))
