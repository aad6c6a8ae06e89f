"""`hedgefs bench namenode-scale`: one NameNode with a large namespace, in-process.

The namespace is generated straight into SQLite (the NameNode's own schema, through its
``Database``; a million Create/Complete calls would take many minutes here): ``files`` complete
files of one REPLICATE-3 group each, in directories of 1,000, the units dealt round DataNodes dn1,
dn2, ... so that each holds at most a million (3 DataNodes up to 1 M files, 30 at 10 M). Then, in a
fresh child process (so memory is the NameNode's own):

  start-up       Namesystem() on that database until the first stat answers (health judges every
                 group once), and the process's resident memory after it: bytes per file/group
  block report   dn1's full report (up to 1 M units), timed, while 4 threads stat random files:
                 their p50/p99 before and during it
  heartbeats     1,000 simulated DataNodes registered and heartbeating in-process: heartbeats/s
  monitor pass   one tick() (repair planning) with the 1,000 DataNodes and the whole namespace
  operator       fsck of /, a full ``ls -R`` through the paged listing, and status()
  a big delete   100 directories of 1,000 files removed (each is detached: purge.py), then purged
                 change by change (the longest change is the longest a writer waits), then a
                 heartbeat of a DataNode owed their deletes and a monitor pass that plans repairs

``python bench/namenode_scale.py generate|measure DATA_DIR FILES`` are the two children; each
prints one JSON line.
"""

from __future__ import annotations

import json
import os
import random
import sys
import threading
import time

DIR_FILES = 1000
POLICY = "REPLICATE-3"
WIDTH = 3                    # units per group
REPORT_UNITS = 1_000_000     # what one DataNode holds at most


def holders(files: int) -> list[str]:
    """The DataNodes the units are dealt round: file i's unit j is on holders[(3 * i + j) % len]."""
    return [f"dn{k + 1}" for k in range(max(WIDTH, -(-files * WIDTH // REPORT_UNITS)))]


def _rss_bytes() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def generate(data_dir: str, files: int) -> float:
    """The namespace, written directly; returns seconds taken."""
    from hedgefs.namenode.db import ROOT_ID, Database
    from hedgefs.namenode.namesystem import DB_FILE

    began = time.perf_counter()
    os.makedirs(data_dir, exist_ok=True)
    db = Database(os.path.join(data_dir, DB_FILE))
    first = int(db.meta("generation_first"))
    dns = holders(files)
    with db.tx() as c:
        for dn in dns:
            c.execute("INSERT OR IGNORE INTO datanodes(id, address, data_address) VALUES (?, ?, ?)",
                      (dn, f"127.0.0.1:{1000 + int(dn[2:])}", f"127.0.0.1:{2000 + int(dn[2:])}"))
        top = c.execute("INSERT INTO inodes(parent, name, is_dir, mtime_ms) VALUES (?, 'scale', 1, 0)",
                        (ROOT_ID,)).lastrowid
        n = 0
        for d in range((files + DIR_FILES - 1) // DIR_FILES):
            dir_id = c.execute("INSERT INTO inodes(parent, name, is_dir, mtime_ms) VALUES (?, ?, 1, 0)",
                               (top, f"d{d}")).lastrowid
            count = min(DIR_FILES, files - n)
            cur = c.execute("SELECT COALESCE(MAX(id), 0) FROM inodes").fetchone()[0]
            c.executemany("INSERT INTO inodes(id, parent, name, is_dir, policy, length, block_size, mtime_ms) "
                          "VALUES (?, ?, ?, 0, ?, 1, 134217728, 0)",
                          [(cur + 1 + i, dir_id, f"f{i}", POLICY) for i in range(count)])
            gcur = c.execute("SELECT COALESCE(MAX(id), 0) FROM groups").fetchone()[0]
            c.executemany("INSERT INTO groups(id, file_id, seq, length, generation) VALUES (?, ?, 0, 1, ?)",
                          [(gcur + 1 + i, cur + 1 + i, first + n + i) for i in range(count)])
            c.executemany("INSERT INTO units(group_id, idx, datanode_id, added_ms, reported) VALUES (?, ?, ?, 0, 1)",
                          [(gcur + 1 + i, j, dns[(WIDTH * (n + i) + j) % len(dns)])
                           for i in range(count) for j in range(WIDTH)])
            n += count
        c.execute("UPDATE meta SET value = ? WHERE key = 'generation_next'", (str(first + files),))
    db.close()
    return time.perf_counter() - began


def _pct(values: list[float], p: float) -> float:
    values = sorted(values)
    return round(values[min(len(values) - 1, int(p * len(values)))] * 1000, 2) if values else 0.0


def measure(data_dir: str, files: int) -> dict:
    from hedgefs.namenode.namesystem import Namesystem

    out: dict = {"files": files, "groups": files, "units": files * WIDTH, "datanodes": len(holders(files))}
    rss0 = _rss_bytes()
    began = time.perf_counter()
    nn = Namesystem(data_dir, dead_interval_s=3600.0)
    nn.file_info("/scale/d0/f0")
    out["startup_s"] = round(time.perf_counter() - began, 2)
    rss = _rss_bytes()
    out["rss_bytes"] = rss
    out["rss_bytes_per_file"] = round((rss - rss0) / files, 1)
    out["db_bytes"] = sum(os.path.getsize(os.path.join(data_dir, f)) for f in os.listdir(data_dir)
                          if f.startswith("namenode.db"))

    for dn in holders(files):
        nn.register(dn, f"127.0.0.1:{1000 + int(dn[2:])}")
    rng = random.Random(1)
    paths = [f"/scale/d{(i := rng.randrange(files)) // DIR_FILES}/f{i % DIR_FILES}" for _ in range(5000)]
    phase = ["before"]
    lat: dict[str, list[float]] = {"before": [], "during": [], "after": []}
    stop = threading.Event()

    def stat_loop(t: int) -> None:
        i = t
        while not stop.is_set():
            began, now = time.perf_counter(), phase[0]   # a stat counts in the phase it started in
            nn.file_info(paths[i % len(paths)])
            lat[now].append(time.perf_counter() - began)
            i += 4
            time.sleep(0.001)   # an open-ish load: about 4 x 1,000 stats/s at most

    stats = [threading.Thread(target=stat_loop, args=(t,), daemon=True) for t in range(4)]
    for t in stats:
        t.start()
    time.sleep(2.0)
    units = {(g, idx, gen) for g, idx, gen in nn.db.query(
        "SELECT g.id, u.idx, g.generation FROM units u JOIN groups g ON g.id = u.group_id WHERE u.datanode_id = 'dn1'")}
    out["report_units"] = len(units)
    phase[0] = "during"
    began = time.perf_counter()
    counts = nn.block_report("dn1", units)
    out["block_report_s"] = round(time.perf_counter() - began, 2)
    out["block_report_counts"] = counts
    phase[0] = "after"
    time.sleep(1.0)
    stop.set()
    for t in stats:
        t.join()
    for name, values in lat.items():
        out[f"stat_{name}_report"] = {"n": len(values), "p50_ms": _pct(values, 0.5), "p99_ms": _pct(values, 0.99),
                                      "max_ms": _pct(values, 1.0)}

    fleet = [f"sim{i}" for i in range(1000)]
    began = time.perf_counter()
    for dn in fleet:
        nn.register(dn, f"10.0.{int(dn[3:]) // 250}.{int(dn[3:]) % 250}:9866")
    out["register_1000_s"] = round(time.perf_counter() - began, 3)
    began, beats = time.perf_counter(), 0
    while time.perf_counter() - began < 2.0:
        for dn in fleet:
            nn.heartbeat(dn, used_bytes=1 << 30, units=1000)
            beats += 1
    out["heartbeats_per_s"] = round(beats / (time.perf_counter() - began))
    began = time.perf_counter()
    nn._scan_needed = True     # the pass after a DataNode came or went: the full planning it does then
    nn.tick()
    out["monitor_tick_s"] = round(time.perf_counter() - began, 3)
    for name, run in (("fsck_s", lambda: nn.fsck("/")), ("ls_R_s", lambda: nn.list("/", recursive=True)),
                      ("status_s", nn.status)):
        began = time.perf_counter()
        result = run()
        out[name] = round(time.perf_counter() - began, 2)
        if name == "ls_R_s":
            out["ls_R_entries"] = len(result)
    # A big delete: 100 directories (100,000 files), then what its pending deletes cost a
    # heartbeat of a DataNode owed them and a monitor pass that plans repairs.
    doomed = min(100, files // DIR_FILES)
    began = time.perf_counter()
    for d in range(doomed):
        nn.delete(f"/scale/d{d}", recursive=True)
    out["delete_files"], out["delete_s"] = doomed * DIR_FILES, round(time.perf_counter() - began, 2)
    began, changes = time.perf_counter(), []
    while True:
        at = time.perf_counter()
        if not nn.purge_step()[0]:
            break
        changes.append(time.perf_counter() - at)
    out["purge_s"], out["purge_changes"] = round(time.perf_counter() - began, 2), len(changes)
    out["purge_change_ms"] = {"p50": _pct(changes, 0.5), "p99": _pct(changes, 0.99), "max": _pct(changes, 1.0)}
    out["deletes_owed_dn1"] = nn.blocks.pending_delete_counts().get("dn1", 0)
    began = time.perf_counter()
    nn.heartbeat("dn1", used_bytes=1 << 30, units=1000)
    out["heartbeat_owing_ms"] = round((time.perf_counter() - began) * 1000, 1)
    nn.tick()   # the deleted groups' health, judged once
    nn._scan_needed = True
    began = time.perf_counter()
    nn.tick()
    out["monitor_tick_owing_s"] = round(time.perf_counter() - began, 3)
    out["rss_bytes_end"] = _rss_bytes()
    nn.close()
    return out


if __name__ == "__main__":
    sys.path.pop(0)
    if len(sys.argv) != 4 or sys.argv[1] not in ("generate", "measure"):
        sys.exit("usage: namenode_scale.py generate|measure DATA_DIR FILES")
    d, n = sys.argv[2], int(sys.argv[3])
    print(json.dumps({"generate_s": round(generate(d, n), 1)} if sys.argv[1] == "generate" else measure(d, n)))


def run(*, files: int, baseline: str | None, command: str, say=print) -> dict:
    """Generate once, then measure each build on its own copy, in child processes."""
    import pathlib
    import shutil
    import subprocess
    import tempfile

    from hedgefs.bench.namenode_run import _baseline_tree, _remove_tree, _shim

    script = pathlib.Path(__file__).resolve()
    doc: dict = {"command": command, "date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
                 "files": files, "baseline": baseline, "cpus": os.cpu_count(), "load_before": os.getloadavg()}

    def child(args: list[str], env: dict) -> dict:
        done = subprocess.run([sys.executable, str(script), *args], env=env, capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError(f"scale child failed: {(done.stderr.strip().splitlines() or ['?'])[-1]}")
        return json.loads(done.stdout.strip().splitlines()[-1])

    with tempfile.TemporaryDirectory(prefix="hedgefs-nnscale-", dir=os.environ.get("HEDGEFS_BENCH_TMP")) as tmp:
        root = pathlib.Path(tmp)
        say(f"  generating {files:,} files")
        doc["generate_s"] = child(["generate", str(root / "gen"), str(files)], dict(os.environ))["generate_s"]
        builds = {"current": dict(os.environ)}
        tree = None
        try:
            if baseline:
                tree = _baseline_tree(baseline, root)
                builds = {"baseline": {**os.environ, "PYTHONPATH": str(_shim(tree, root / "shim"))}, **builds}
            for build, env in builds.items():
                say(f"  measuring the {build} build")
                shutil.copytree(root / "gen", root / build)
                doc.setdefault("builds", {})[build] = got = child(["measure", str(root / build), str(files)], env)
                shutil.rmtree(root / build)
                say("    " + json.dumps(got))
        finally:
            if tree is not None:
                _remove_tree(tree)
    doc["load_after"] = os.getloadavg()
    return doc
