"""`hedgefs bench fsspec`: pandas and pyarrow on hedgefs:// (hedgefs/fsspec) against the same
file on local disk, in one run (issue 26's targets).

One local cluster (NameNode + 10 DataNodes, RS-6-3-1024k, fsync off) and a parquet file of 20
float64 columns in 16 row groups (``--size``, 256 MiB by default), written to local disk and to
hedgefs. Then, each measure ``--runs`` times after one untimed warm-up (page caches warm for
both), the median kept:

    local        pd.read_parquet(the local file)
    healthy      pd.read_parquet("hedgefs://...") with a fresh client each run
    slow         the same with one DataNode answering every read 500 ms late (the one holding
                 the most of the file), a fresh client each run (it learns of the slow DataNode
                 during the read, as a real one would)
    selective    pyarrow reads 2 of the 20 columns of one row group of 16 (``read_row_group``):
                 bytes pyarrow asked for (the file object's reads), bytes the fsspec layer fetched,
                 and bytes the DataNodes sent (their hedgefs_datanode_read_bytes_total, before and after)

Also the start-up of `hedgefs cat` on a 1-byte file beside `python -c "import fsspec"` (why fsspec
can be a core dependency: `hedgefs cat` never imports it). Writes <date>-fsspec.json and .md.
"""

from __future__ import annotations

import datetime
import json
import os
import pathlib
import re
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Callable

from hedgefs.bench.scenarios import environment
from hedgefs.bench.throughput import time_to_first_byte
from hedgefs.cluster.launcher import LocalCluster, Options
from hedgefs.ec.policy import parse_policy
from hedgefs.fsspec import HedgeFileSystem
from hedgefs.proto import hedgefs_pb2 as pb

COLUMNS = 20
ROW_GROUPS = 16
PATH = "/bench/table.parquet"
SLOW_MS = 500
TARGETS = {"healthy_speed_vs_local": ">= 0.5", "selective_datanode_bytes_vs_asked": "<= 1.2",
           "slow_time_vs_healthy": "<= 1.3"}


def make_table(size: int):
    import numpy as np
    import pyarrow as pa

    rows = size // (COLUMNS * 8)
    rng = np.random.default_rng(26)
    return pa.table({f"c{i}": rng.standard_normal(rows) for i in range(COLUMNS)}), rows


def _timed(fn: Callable[[], object], runs: int) -> list[float]:
    fn()   # warm-up: page caches, imports, the DataNodes' connections
    out = []
    for _ in range(runs):
        started = time.perf_counter()
        fn()
        out.append(time.perf_counter() - started)
    return out


def datanode_read_bytes(cluster: LocalCluster) -> int:
    import urllib.request

    total = 0
    for name in cluster.datanode_ids:
        port = cluster.state["datanodes"][name]["http_port"]
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
            text = r.read().decode()
        match = re.search(r"^hedgefs_datanode_read_bytes_total\{[^}]*\} (\S+)$", text, re.M)
        total += int(float(match.group(1))) if match else 0
    return total


def import_time(module: str, runs: int = 5) -> float:
    """Median seconds of ``python -c "import MODULE"`` (the interpreter's start-up included)."""
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        subprocess.run([sys.executable, "-c", f"import {module}"], check=True)
        times.append(time.perf_counter() - started)
    return round(statistics.median(times), 3)


def run(out_dir: pathlib.Path, *, size: int = 256 << 20, runs: int = 3, command: str = "",
        say: Callable[[str], None] = print) -> dict:
    import pandas as pd
    import pyarrow.parquet as pq

    load_before = [round(x, 2) for x in os.getloadavg()]
    with tempfile.TemporaryDirectory(prefix="hedgefs-bench-fsspec-") as tmp:
        cluster = LocalCluster(pathlib.Path(tmp) / "cluster")
        try:
            cluster.up(Options(datanodes=10, namenode_port=0, fsync=False))
            say(f"cluster up: NameNode {cluster.namenode}")
            url = f"hedgefs://{cluster.namenode}{PATH}"
            table, rows = make_table(size)
            local = pathlib.Path(tmp) / "table.parquet"
            # Plain encoding: random doubles do not fit a dictionary, and the failed try would leave one
            # dictionary page per column chunk (a 256 MiB table came out 321 MiB).
            pq.write_table(table, local, row_group_size=-(-rows // ROW_GROUPS), compression="snappy",
                           use_dictionary=False)
            del table
            file_bytes = local.stat().st_size
            fs = HedgeFileSystem(namenode=cluster.namenode, skip_instance_cache=True)
            fs.put_file(str(local), PATH)
            status = fs.client.stat(PATH)
            say(f"{file_bytes / 2**20:.0f} MiB parquet ({rows} rows, {ROW_GROUPS} row groups, {COLUMNS} columns), "
                f"{status.policy}, {len(status.groups)} block groups")

            def through_hedgefs() -> None:
                fresh = HedgeFileSystem(namenode=cluster.namenode, skip_instance_cache=True)
                try:
                    pd.read_parquet(url, filesystem=fresh)
                finally:
                    hedges.append(fresh.stats().counters["hedges"])
                    fresh.close()

            say(f"read_parquet, local disk ({runs} runs)...")
            local_s = _timed(lambda: pd.read_parquet(local), runs)
            hedges: list[int] = []
            say(f"read_parquet, hedgefs:// healthy ({runs} runs)...")
            healthy_s = _timed(through_hedgefs, runs)
            healthy_hedges = hedges[1:]

            say("selective read: 2 of 20 columns, 1 row group of 16...")
            selective = _selective(cluster, pq)

            victim = _busiest(status)
            cluster.datanode_rpc(victim, "SetFaults", pb.FaultConfig(read_delay_ms=SLOW_MS))
            hedges = []
            try:
                say(f"read_parquet, hedgefs:// with {victim} +{SLOW_MS} ms ({runs} runs)...")
                slow_s = _timed(through_hedgefs, runs)
            finally:
                cluster.datanode_rpc(victim, "ClearFaults", pb.FaultClearRequest())
            slow_hedges = hedges[1:]

            fs.pipe("/bench/one-byte", b"1")
            startup = time_to_first_byte(cluster.namenode, "/bench/one-byte")
            startup["python_import_fsspec_s"] = import_time("fsspec")
            fs.close()
        finally:
            cluster.down()
    med = {name: statistics.median(v) for name, v in (("local", local_s), ("healthy", healthy_s), ("slow", slow_s))}
    mb = file_bytes / 1e6
    result = {
        "date": datetime.date.today().isoformat(), "command": command, "environment": environment(),
        "load_average": {"before": load_before, "after": [round(x, 2) for x in os.getloadavg()]},
        "file": {"bytes": file_bytes, "rows": rows, "columns": COLUMNS, "row_groups": ROW_GROUPS,
                 "policy": status.policy, "block_groups": len(status.groups)},
        "runs": runs,
        "read_parquet_s": {"local": [round(x, 3) for x in local_s], "healthy": [round(x, 3) for x in healthy_s],
                           "slow": [round(x, 3) for x in slow_s]},
        "read_parquet_mb_s": {k: round(mb / v, 1) for k, v in med.items()},
        "hedges_per_run": {"healthy": healthy_hedges, "slow": slow_hedges},
        "slow_datanode": {"name": victim, "delay_ms": SLOW_MS},
        "selective": selective,
        "startup": startup,
        "ratios": {
            "healthy_speed_vs_local": round(med["local"] / med["healthy"], 2),
            "selective_datanode_bytes_vs_asked": round(selective["datanode_bytes"] / selective["asked_bytes"], 3),
            "slow_time_vs_healthy": round(med["slow"] / med["healthy"], 2),
        },
        "targets": TARGETS,
    }
    out_dir.mkdir(parents=True, exist_ok=True)
    stem = out_dir / f"{result['date']}-fsspec"
    stem.with_suffix(".json").write_text(json.dumps(result, indent=1) + "\n")
    stem.with_suffix(".md").write_text(markdown(result))
    say(f"wrote {stem}.json and .md")
    return result


def _selective(cluster: LocalCluster, pq) -> dict:
    fs = HedgeFileSystem(namenode=cluster.namenode, skip_instance_cache=True)
    try:
        before = datanode_read_bytes(cluster)
        with fs.open(PATH) as f:
            part = pq.ParquetFile(f).read_row_group(ROW_GROUPS // 2, columns=["c3", "c17"])
        sent = datanode_read_bytes(cluster) - before
        return {"rows": part.num_rows, "column_chunk_bytes": part.nbytes, "asked_bytes": fs.asked.bytes,
                "fetched_bytes": fs.fetched.bytes, "fetched_ranges": fs.fetched.ranges, "datanode_bytes": sent,
                "hedges": fs.stats().counters["hedges"]}
    finally:
        fs.close()


def _busiest(status) -> str:
    k = parse_policy(status.policy).k
    counts: dict[str, int] = {}
    for group in status.groups:
        for unit in group.units.values():
            if unit.index < k:   # data units: the ones a healthy read asks
                counts[unit.datanode_id] = counts.get(unit.datanode_id, 0) + 1
    return max(sorted(counts), key=counts.get)


def markdown(r: dict) -> str:
    f, s, ratio, mb_s = r["file"], r["selective"], r["ratios"], r["read_parquet_mb_s"]
    lines = [
        f"# pandas and pyarrow on hedgefs:// vs local disk ({r['date']})", "",
        f"Command: `{r['command']}`. One local cluster of 10 DataNodes, fsync off; a {f['bytes'] / 2**20:.0f} MiB "
        f"parquet file ({f['rows']} rows, {f['columns']} float64 columns, {f['row_groups']} row groups, snappy, plain "
        f"encoding) in "
        f"{f['policy']} ({f['block_groups']} block groups). Each time is the median of {r['runs']} runs after a "
        f"warm-up (page caches warm for both); a fresh client each hedgefs run. Load average "
        f"{r['load_average']['before']} before, {r['load_average']['after']} after "
        f"({r['environment']['cpus']} cores, shared). Commit {r['environment']['commit']}.", "",
        "| measure | result | target |", "|---|---|---|",
        f"| `read_parquet` through `hedgefs://` vs local disk | {ratio['healthy_speed_vs_local']} x the local speed "
        f"({mb_s['healthy']} vs {mb_s['local']} MB/s) | {TARGETS['healthy_speed_vs_local']} |",
        f"| selective read (2 of 20 columns, one row group of 16): bytes sent by DataNodes / bytes pyarrow asked for "
        f"| {ratio['selective_datanode_bytes_vs_asked']} ({s['datanode_bytes']} / {s['asked_bytes']} B; the fsspec "
        f"layer fetched {s['fetched_bytes']} B in {s['fetched_ranges']} ranges) | "
        f"{TARGETS['selective_datanode_bytes_vs_asked']} |",
        f"| `read_parquet` with {r['slow_datanode']['name']} +{r['slow_datanode']['delay_ms']} ms vs healthy | "
        f"{ratio['slow_time_vs_healthy']} x the healthy time ({mb_s['slow']} vs {mb_s['healthy']} MB/s) | "
        f"{TARGETS['slow_time_vs_healthy']} |", "",
        f"Seconds per run: local {r['read_parquet_s']['local']}, healthy {r['read_parquet_s']['healthy']}, "
        f"slow {r['read_parquet_s']['slow']}. Hedges per run: healthy {r['hedges_per_run']['healthy']}, "
        f"slow {r['hedges_per_run']['slow']}.", "",
        f"Start-up: `hedgefs cat` of a 1-byte file {r['startup']['cat_1_byte_s']} s to its first byte; "
        f"`python -c pass` {r['startup']['python_alone_s']} s; `python -c \"import fsspec\"` "
        f"{r['startup']['python_import_fsspec_s']} s. `hedgefs cat` never imports fsspec "
        f"(tests/integration/test_fsspec.py checks it), so fsspec is a core dependency, not an extra.",
    ]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    from hedgefs.bench.scenarios import RESULTS_DIR

    run(RESULTS_DIR, command="python -m hedgefs.bench.pydata")
