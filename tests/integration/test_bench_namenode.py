"""`hedgefs bench namenode` and `namenode-scale`: they run, report what they promise, and refuse
bad arguments in one line. No speed is asserted (bench/results/ holds the figures)."""

import json

import pytest

from conftest import assert_one_line_error, run_cli


def test_bench_namenode_runs_both_modes_and_reports_each_operation():
    result = run_cli("bench", "namenode", "--threads", "2", "--ops", "6", "--reps", "1",
                     "--only", "create0,create1,stat,rename,heartbeat,noop", "--json", timeout=300)
    assert result.code == 0, result.stderr
    doc = json.loads(result.stdout)
    rows = {(r["mode"], r["op"]): r for r in doc["rows"]}
    assert set(rows) == {(m, op) for m in ("inprocess", "rpc")
                         for op in ("create0", "create1", "stat", "rename", "heartbeat", "noop")}
    for row in rows.values():
        assert row["errors"] == [] and row["ops"] >= 6 and row["ops_per_s"] > 0 and row["p99_ms"] >= row["p50_ms"]
        assert row["build"] == "current" and row["threads"] == 2
    assert rows[("rpc", "noop")]["server_cpu_us_per_op"] > 0
    assert rows[("rpc", "create1")]["calls_per_op"] == 4


@pytest.mark.parametrize("args, fragment", [
    (["--threads", "0"], "--threads '0': each count must be 1..256"),
    (["--threads", "a,b"], "expected numbers separated by commas"),
    (["--only", "stat,open"], "unknown operation(s) open"),
    (["--modes", "grpc"], "--modes 'grpc': expected inprocess and/or rpc"),
    (["--baseline", "no-such-commit", "--only", "noop", "--modes", "inprocess"], "--baseline no-such-commit"),
])
def test_bench_namenode_bad_arguments_are_one_line_errors(args, fragment):
    assert_one_line_error(run_cli("bench", "namenode", *args), fragment)


def test_bench_namenode_scale_measures_a_generated_namespace():
    result = run_cli("bench", "namenode-scale", "--files", "2000", timeout=300)
    assert result.code == 0, result.stderr
    from hedgefs.bench.namenode_scale import TAIL

    got = json.loads(result.stdout.decode().splitlines()[-1])["builds"]["current"]
    # the files, d0 and d1, /scale; the journal's tail after the image: TAIL directories in /tail
    assert got["files"] == 2000 and got["ls_R_entries"] == 2000 + 2 + 1 + TAIL + 1
    assert got["startup_replayed"] == TAIL
    assert got["block_report_counts"].get("missing", 0) == 0 and got["stat_during_report"]["n"] >= 0
    assert got["heartbeats_per_s"] > 0 and got["startup_s"] > 0 and got["rss_bytes_per_file"] > 0
    assert got["datanodes"] == 3 and got["report_units"] == 2000   # 3 holders: dn1 holds a unit of every file
    assert got["delete_files"] == 2000 and got["deletes_owed_dn1"] == 2000 and got["heartbeat_owing_ms"] > 0
    assert got["delete_records"] == 1   # the two directories, moved under one, gone in one delete


def test_bench_namenode_scale_deals_units_so_no_datanode_holds_more_than_a_million():
    from hedgefs.bench.namenode_scale import REPORT_UNITS, WIDTH, holders
    for files in (2000, 1_000_000, 1_000_001, 10_000_000):
        dns = holders(files)
        assert len(dns) >= 3 and len(set(dns)) == len(dns)
        assert -(-files * WIDTH // len(dns)) <= REPORT_UNITS
    assert len(holders(10_000_000)) == 30


def test_bench_namenode_fleet_heartbeats_through_real_rpcs():
    result = run_cli("bench", "namenode-fleet", "--datanodes", "20", "--interval", "0.5", "--seconds", "2",
                     timeout=300)
    assert result.code == 0, result.stderr
    doc = json.loads(result.stdout.decode().splitlines()[-1])
    assert doc["fleet"]["datanodes"] == 20 and doc["fleet"]["heartbeats"] >= 20 * 3
    assert doc["stat_p99_without_ms"] > 0 and doc["stat_p99_with_ms"] > 0
