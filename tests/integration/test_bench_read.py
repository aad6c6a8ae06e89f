"""`hedgefs bench read`: the one-line JSON, open and closed loop, pages, and no hedging in a healthy cluster.

Speed targets live in the benchmark suite (bench/scenarios.py), not here: these only check the
shape and sanity of what the load generator reports.
"""

import json
import time

import pytest

from conftest import GROUP, pattern, run_cli
from hedgefs.bench.read import SUMMARY_KEYS, TimelineEvent, run_read_bench
from hedgefs.client.config import HedgeConfig
from hedgefs.client.fs import FileSystem

PATH = "/bench-test/data.bin"
LENGTH = 4 * GROUP  # 6 MiB on the shared cluster: 4 block groups, 96 cells of 64 KiB


@pytest.fixture(scope="module")
def bench_file(cluster):
    with FileSystem(cluster.namenode) as fs:
        fs.mkdir("/bench-test", parents=True)
        fs.write_bytes(PATH, pattern(LENGTH, seed=5), overwrite=True)
    yield PATH
    with FileSystem(cluster.namenode) as fs:
        fs.delete("/bench-test", recursive=True)


def test_bench_read_json_line(cluster, bench_file):
    result = run_cli("bench", "read", bench_file, "--reads", "50", "--threads", "4", "--json",
                     namenode=cluster.namenode)
    assert result.code == 0, result.stderr
    lines = result.stdout.decode().splitlines()
    assert len(lines) == 1, lines
    doc = json.loads(lines[0])
    assert set(doc) == set(SUMMARY_KEYS)
    assert doc["reads"] == 50
    assert doc["reads_per_s"] > 0
    assert 0 < doc["p50_ms"] <= doc["p90_ms"] <= doc["p99_ms"] <= doc["p999_ms"] <= doc["max_ms"] < 60_000
    for key in ("hedges", "hedge_wins", "hedges_refused", "breaker_trips", "decodes"):
        assert isinstance(doc[key], int) and doc[key] >= 0, key
    assert doc["hedge_wins"] <= doc["hedges"]
    assert doc["extra_unit_reads_pct"] >= 0
    per_dn = doc["per_datanode"]
    assert per_dn and all(name.startswith("dn") for name in per_dn)
    for row in per_dn.values():
        assert set(row) == {"p50_ms", "p99_ms", "unit_reads", "avoided", "probes"}
        assert row["unit_reads"] > 0 and 0 < row["p50_ms"] <= row["p99_ms"]
    # 64 KiB reads at 64 KiB-aligned offsets with 64 KiB cells (conftest's policy): one unit read
    # each, at least
    assert sum(row["unit_reads"] for row in per_dn.values()) >= 50
    assert doc["load"] == {"mode": "closed", "rate": None, "threads": 4, "fanout": 1, "saturated": False}


def test_bench_read_open_loop_pages(cluster, bench_file):
    """--rate: reads start on a schedule, not when earlier ones end; --fanout: pages of N reads,
    each counted in the unit reads needed."""
    result = run_cli("bench", "read", bench_file, "--rate", "40", "--fanout", "5", "--reads", "30", "--json",
                     "--hedge-threshold-ms", "60000", namenode=cluster.namenode)
    assert result.code == 0, result.stderr
    doc = json.loads(result.stdout)
    assert doc["reads"] == 30 and doc["load"]["mode"] == "open" and doc["load"]["fanout"] == 5
    assert sum(row["unit_reads"] for row in doc["per_datanode"].values()) == 150   # 30 pages x 5 one-cell reads
    assert doc["extra_unit_reads_pct"] == 0 and doc["hedges"] == 0
    bad = run_cli("bench", "read", bench_file, "--rate", "fast", namenode=cluster.namenode)
    assert bad.code == 2 and "--rate" in bad.stderr and "Traceback" not in bad.stderr


def test_open_loop_counts_latency_from_the_scheduled_start(cluster, bench_file):
    """The client's event loop is blocked for 0.5 s early in a 1 s open-loop run of 400 reads a
    second. In a closed loop that stall is one slow read per thread; here every read scheduled
    during it carries its wait, so at least a quarter of them take 100 ms or more."""
    with FileSystem(cluster.namenode, hedge=HedgeConfig(threshold_ms=60_000)) as fs:
        stall = TimelineEvent(0.05, "stall", lambda: fs.call_soon(lambda: time.sleep(0.5)))
        run = run_read_bench(fs, bench_file, rate=400, reads=400, seed=2, timeline=[stall])
    s = run.summary()
    assert run.errors == 0 and s["reads"] == 400
    assert run.hist.percentile(75) >= 0.1 and s["max_ms"] >= 400, s
def test_bench_read_duration_or_reads(cluster, bench_file):
    result = run_cli("bench", "read", bench_file, "--reads", "5", "--duration", "1", namenode=cluster.namenode)
    assert result.code == 2
    assert "--duration or --reads" in result.stderr


def test_healthy_cluster_costs_no_extra_unit_reads(cluster, bench_file):
    """1,000 reads from 4 threads with a threshold no read reaches (so a busy machine cannot start
    a hedge): the bench counts every read and reports 0 % extra cell reads and no errors."""
    with FileSystem(cluster.namenode, hedge=HedgeConfig(threshold_ms=60_000)) as fs:
        run = run_read_bench(fs, bench_file, threads=4, reads=1000, seed=1)
    s = run.summary()
    print(f"healthy: {s['reads']} reads, hedges={s['hedges']}, extra cell reads {s['extra_unit_reads_pct']} %, "
          f"p99 {s['p99_ms']} ms, max {s['max_ms']} ms")
    assert run.errors == 0, run.error_samples
    assert s["reads"] == 1000
    assert s["hedges"] == 0, s
    assert s["extra_unit_reads_pct"] == 0, s


@pytest.mark.parametrize("rate", ["0", "fast"])
def test_bench_replication_bad_rate_is_one_line_exit_2(tmp_path, rate):
    """Refused before a cluster is started or a file written."""
    bad = run_cli("bench", "replication", "--rate", rate, "--out", str(tmp_path / "out"), timeout=60)
    assert bad.code == 2 and "--rate" in bad.stderr and "Traceback" not in bad.stderr, bad
    assert len(bad.stderr.strip().splitlines()) == 1 and not (tmp_path / "out").exists()
