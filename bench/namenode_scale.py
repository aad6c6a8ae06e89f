"""`hedgefs bench namenode-scale`: one NameNode with a large namespace, in-process.

The namespace is made in process, not through a million Create/Complete calls (which would take
many minutes here): ``files`` complete files of one REPLICATE-3 group each, in directories of
1,000, their units dealt round DataNodes dn1, dn2, ... so that each holds at most a million (3
DataNodes up to 1 M files, 30 at 10 M), applied as the journal's own records and written as a
checkpoint image, then ``TAIL`` more records in the journal after it. Then, in a fresh child
process (so memory is the NameNode's own):

  start-up       Namesystem() on that data dir until the first stat answers: the image loaded,
                 the journal's tail replayed
  memory         the process's resident memory after start-up, and after every DataNode's full
                 block report (the block map of every unit's location, in memory): bytes per file
  block report   dn1's full report again (up to 1 M units), timed, while 4 threads stat random
                 files: their p50/p99 before and during it
  heartbeats     1,000 simulated DataNodes registered and heartbeating in-process: heartbeats/s
  monitor pass   one tick() (health, repair planning) with the 1,000 DataNodes and the whole namespace
  operator       fsck of /, a full ``ls -R`` through the paged listing, and status()
  a big delete   100 directories of 1,000 files moved under one, removed by one recursive
                 delete (one call, one journal record), then the groups freed a bounded step at a
                 time (the longest step is the longest a writer waits), then a heartbeat of a
                 DataNode owed their deletes and a monitor pass

``python bench/namenode_scale.py generate|measure DATA_DIR FILES`` are the two children; each
prints one JSON line. A ``--baseline`` build runs its own copy of this script (its format, its
measures): the keys the two share are the comparable ones.
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
TAIL = 10_000                # journal records after the image (a start-up replays them)


def holders(files: int) -> list[str]:
    """The DataNodes the units are dealt round: file i's unit j is on holders[(3 * i + j) % len]."""
    return [f"dn{k + 1}" for k in range(max(WIDTH, -(-files * WIDTH // REPORT_UNITS)))]


def _rss_bytes() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def namespace(files: int, cluster_id: str = "CID-scale"):
    """(an Applier holding the namespace, the txid of its last record): the journal's own
    records, applied in process (no journal: nothing is written)."""
    from hedgefs.namenode.blocks.blockmap import BlockMap
    from hedgefs.namenode.blocks.collector import Collector
    from hedgefs.namenode.journal import records as r
    from hedgefs.namenode.journal.apply import Applier
    from hedgefs.namenode.namespace.retry_cache import RetryCache
    from hedgefs.namenode.namespace.tree import Tree

    tree = Tree(POLICY)
    blocks = BlockMap(lambda: 0)
    applier = Applier(tree, blocks, RetryCache(), Collector(tree, blocks), wall_ms=lambda: 0)
    applier.apply(r.Format(cluster_id, 1 << 40))
    dns = holders(files)
    applier.apply(r.Mkdir("/scale", 0, "hedgefs", tree.next_id))
    n = 0
    for d in range((files + DIR_FILES - 1) // DIR_FILES):
        applier.apply(r.Mkdir(f"/scale/d{d}", 0, "hedgefs", tree.next_id))
        for i in range(min(DIR_FILES, files - n)):
            file_id, group_id = tree.next_id, blocks.next_group_id
            applier.apply(r.Create(f"/scale/d{d}/f{i}", file_id, POLICY, 134217728, False, 0, "hedgefs",
                                   "supergroup", 0o644))
            applier.apply(r.AddGroup(file_id, group_id, tuple(dns[(WIDTH * (n + i) + j) % len(dns)]
                                                              for j in range(WIDTH))))
            applier.apply(r.Complete(file_id, 1, (group_id,), 0))
        n += min(DIR_FILES, files - n)
    return applier, 3 * files + -(-files // DIR_FILES) + 2


def generate(data_dir: str, files: int) -> float:
    """The namespace, as the journal's records applied in process and an image; returns seconds."""
    from hedgefs.namenode.journal import records as r
    from hedgefs.namenode.journal.image import Snapshot
    from hedgefs.namenode.journal.sqlite import SqliteEngine
    from hedgefs.namenode.namesystem import DB_FILE

    began = time.perf_counter()
    os.makedirs(data_dir, exist_ok=True)
    applier, txid = namespace(files)
    tree = applier.tree
    engine = SqliteEngine(os.path.join(data_dir, DB_FILE))
    engine.write_image(txid, Snapshot(applier, txid).chunks())
    engine.publish_image(txid)
    frames = [r.frame(txid + 1 + k, r.encode(r.Mkdir(f"/tail/d{k}", 0, "hedgefs", tree.next_id + k)))
              for k in range(TAIL)]
    for k in range(0, TAIL, 500):
        engine.append(txid + 1 + k, txid + min(TAIL, k + 500), b"".join(frames[k:k + 500]))
    engine.close()
    return time.perf_counter() - began


def _pct(values: list[float], p: float) -> float:
    values = sorted(values)
    return round(values[min(len(values) - 1, int(p * len(values)))] * 1000, 2) if values else 0.0


def _units_of(dn: str, files: int, generation) -> list[tuple[int, int, int]]:
    dns = holders(files)
    k = dns.index(dn)
    out = []
    for pos in range(k, files * WIDTH, len(dns)):   # unit pos = WIDTH * i + j
        i, j = divmod(pos, WIDTH)
        out.append((i + 1, j, generation(i + 1)))
    return out


def measure(data_dir: str, files: int) -> dict:
    from hedgefs.namenode.namesystem import Namesystem

    out: dict = {"files": files, "groups": files, "units": files * WIDTH, "datanodes": len(holders(files))}
    rss0 = _rss_bytes()
    began = time.perf_counter()
    nn = Namesystem(data_dir, dead_interval_s=3600.0, default_policy=POLICY)
    nn.file_info("/scale/d0/f0")
    out["startup_s"] = round(time.perf_counter() - began, 2)
    out["startup_replayed"] = nn.replayed
    rss = _rss_bytes()
    out["rss_bytes"] = rss
    out["rss_bytes_per_file"] = round((rss - rss0) / files, 1)
    out["db_bytes"] = sum(os.path.getsize(os.path.join(data_dir, f)) for f in os.listdir(data_dir)
                          if f.startswith("namenode.db"))
    # Every DataNode's full report: where every unit is (memory only, as after any start-up)
    began = time.perf_counter()
    for dn in holders(files):
        nn.register(dn, f"127.0.0.1:{1000 + int(dn[2:])}")
        nn.block_report(dn, _units_of(dn, files, nn.blocks.generation))
    out["all_reports_s"] = round(time.perf_counter() - began, 1)
    rss = _rss_bytes()
    out["rss_bytes_located"] = rss
    out["rss_bytes_per_file_located"] = round((rss - rss0) / files, 1)
    nn.tick()   # out of safe mode (if it was in it), health judged
    nn.file_info("/scale/d0/f0")

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
    units = _units_of("dn1", files, nn.blocks.generation)
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
    nn.manager.scan_needed = True     # the pass after a DataNode came or went: the full planning it does then
    nn.tick()
    out["monitor_tick_s"] = round(time.perf_counter() - began, 3)
    for name, run in (("fsck_s", lambda: nn.fsck("/")), ("ls_R_s", lambda: nn.list("/", recursive=True)),
                      ("status_s", nn.status)):
        began = time.perf_counter()
        result = run()
        out[name] = round(time.perf_counter() - began, 2)
        if name == "ls_R_s":
            out["ls_R_entries"] = len(result)
    # A big delete: 100 directories (100,000 files) moved under one, then that one deleted: one
    # call, one journal record; their groups are freed after, a bounded step at a time (the
    # monitor's), the longest step what a writer waits.
    doomed = min(100, files // DIR_FILES)
    nn.mkdir("/doomed")
    for d in range(doomed):
        nn.rename(f"/scale/d{d}", f"/doomed/d{d}")
    before = nn.journal.last
    began = time.perf_counter()
    nn.delete("/doomed", recursive=True)
    out["delete_files"], out["delete_s"] = doomed * DIR_FILES, round(time.perf_counter() - began, 3)
    out["delete_records"] = nn.journal.last - before
    began, steps = time.perf_counter(), []
    from hedgefs.namenode.namesystem import COLLECT_STEP
    while nn.collector.pending:
        at = time.perf_counter()
        with nn.lock:
            nn.collector.step(COLLECT_STEP)
        steps.append(time.perf_counter() - at)
    out["purge_s"], out["purge_changes"] = round(time.perf_counter() - began, 2), len(steps)
    out["purge_change_ms"] = {"p50": _pct(steps, 0.5), "p99": _pct(steps, 0.99), "max": _pct(steps, 1.0)}
    out["deletes_owed_dn1"] = nn.blocks.pending_delete_counts().get("dn1", 0)
    began = time.perf_counter()
    nn.heartbeat("dn1", used_bytes=1 << 30, units=1000)
    out["heartbeat_owing_ms"] = round((time.perf_counter() - began) * 1000, 1)
    nn.tick()   # the deleted groups' health, judged once
    nn.manager.scan_needed = True
    began = time.perf_counter()
    nn.tick()
    out["monitor_tick_owing_s"] = round(time.perf_counter() - began, 3)
    out["rss_bytes_end"] = _rss_bytes()
    began = time.perf_counter()
    nn.close()   # a clean shutdown's image
    out["close_with_image_s"] = round(time.perf_counter() - began, 1)
    return out


if __name__ == "__main__":
    sys.path.pop(0)
    if len(sys.argv) != 4 or sys.argv[1] not in ("generate", "measure"):
        sys.exit("usage: namenode_scale.py generate|measure DATA_DIR FILES")
    d, n = sys.argv[2], int(sys.argv[3])
    print(json.dumps({"generate_s": round(generate(d, n), 1)} if sys.argv[1] == "generate" else measure(d, n)))


def run(*, files: int, baseline: str | None, command: str, say=print) -> dict:
    """Each build generates its own namespace (its own format) with its own copy of this script,
    then measures it, in child processes."""
    import pathlib
    import subprocess
    import tempfile

    from hedgefs.bench.namenode_run import _baseline_tree, _remove_tree, _shim

    script = pathlib.Path(__file__).resolve()
    doc: dict = {"command": command, "date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
                 "files": files, "baseline": baseline, "cpus": os.cpu_count(), "load_before": os.getloadavg()}

    def child(which: pathlib.Path, args: list[str], env: dict) -> dict:
        done = subprocess.run([sys.executable, str(which), *args], env=env, capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError(f"scale child failed: {(done.stderr.strip().splitlines() or ['?'])[-1]}")
        return json.loads(done.stdout.strip().splitlines()[-1])

    with tempfile.TemporaryDirectory(prefix="hedgefs-nnscale-", dir=os.environ.get("HEDGEFS_BENCH_TMP")) as tmp:
        root = pathlib.Path(tmp)
        builds = {"current": (dict(os.environ), script)}
        tree = None
        try:
            if baseline:
                tree = _baseline_tree(baseline, root)
                builds = {"baseline": ({**os.environ, "PYTHONPATH": str(_shim(tree, root / "shim"))},
                                       tree / "bench" / "namenode_scale.py"), **builds}
            for build, (env, which) in builds.items():
                say(f"  generating {files:,} files with the {build} build")
                generated = child(which, ["generate", str(root / build), str(files)], env)
                say(f"  measuring the {build} build")
                doc.setdefault("builds", {})[build] = got = {**generated,
                                                             **child(which, ["measure", str(root / build),
                                                                             str(files)], env)}
                import shutil
                shutil.rmtree(root / build)
                say("    " + json.dumps(got))
        finally:
            if tree is not None:
                _remove_tree(tree)
    doc["load_after"] = os.getloadavg()
    return doc
