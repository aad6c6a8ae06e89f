"""The tail-latency suite's pure parts (bench/rounds.py, canary.py, trace.py, targets.py,
report.py) on synthetic data: medians and ranges of paired runs, the floors, stall detection,
the read breakdown, targets met or missed. No cluster, no clock: the suite's numbers themselves
are results (bench/results/), never asserted.
"""

import pytest

from conftest import assert_one_line_error, run_cli
from hedgefs.bench import canary, rounds, trace
from hedgefs.bench.report import summary_markdown
from hedgefs.bench.targets import aggregate, evaluate_targets, find_row
from hedgefs.ec.policy import parse_policy


# ---------------------------------------------------------------------------- rounds

def test_median_range_of_odd_even_and_missing_values():
    assert rounds.median_range([3.0, 1.0, 2.0]) == {"median": 2.0, "min": 1.0, "max": 3.0, "n": 3}
    assert rounds.median_range([1.0, 4.0, None]) == {"median": 2.5, "min": 1.0, "max": 4.0, "n": 2}
    assert rounds.median_range([]) == {"median": None, "min": None, "max": None, "n": 0}
    assert rounds.fmt_range(rounds.median_range([1.2, 1.1, 1.4])) == "1.20 (1.10-1.40)"
    assert rounds.fmt_range(rounds.median_range([1.25])) == "1.25"
    assert rounds.fmt_range(rounds.median_range([])) == "-"
    assert rounds.ratio(3.0, 2.0) == 1.5 and rounds.ratio(None, 2.0) is None and rounds.ratio(1.0, 0) is None


def test_floors_are_the_research_notes_arithmetic():
    """tail-floor.md: 0.8 x 0.135 x 5 = 54 % for RS-6-3, x 2 = 21.6 % for LRC-6-2-2, 0 for replicas."""
    sources = {name: rounds.rescue_sources(parse_policy(name)) for name in ("RS-6-3-1024k", "LRC-6-2-2-1024k",
                                                                            "REPLICATE-3")}
    assert sources == {"RS-6-3-1024k": 6, "LRC-6-2-2-1024k": 3, "REPLICATE-3": 1}
    assert rounds.floor_pct(0.8, 0.135, 6) == pytest.approx(54.0)
    assert rounds.floor_pct(0.8, 0.135, 3) == pytest.approx(21.6)
    assert rounds.floor_pct(0.8, 0.135, 1) == 0.0
    # 1 % of reads slow: hedged after the fact, the original and all the sources
    assert rounds.floor_pct(0.8, 0.135, 6, probability=0.01) == pytest.approx(0.648)


def test_duty_counts_the_reads_scheduled_in_the_window():
    series = [{"t": round(i * 0.1, 1), "n": 10} for i in range(100)]   # 10 s, 100 reads/s
    assert rounds.duty(series, 1.0, 9.0) == pytest.approx(0.8)
    assert rounds.duty(series, 0.0, 100.0) == 1.0
    assert rounds.duty([], 0.0, 1.0) == 0.0


# ---------------------------------------------------------------------------- canary

def test_canary_finds_stalls_and_merges_close_ones():
    quiet = [(100.0 + i * 0.01, 2.5) for i in range(50)]            # ordinary jitter, under 10 ms
    assert canary.stalls(quiet) == []
    one = quiet + [(101.0, 30.0)]                                     # 30 ms not scheduled, ending at 101 s
    [s] = canary.stalls(one)
    assert s["start"] == pytest.approx(100.97) and s["end"] == 101.0 and s["worst_ms"] == 30.0
    two = one + [(101.04, 12.0), (103.0, 60.0)]                       # one 10 ms after the first: merged
    found = canary.stalls(two)
    assert [(round(x["start"], 3), x["end"], x["samples"]) for x in found] == [(100.97, 101.04, 2), (102.94, 103.0, 1)]


def test_canary_verdict_per_run_window():
    samples = [(10.5, 3.0), (12.0, 20.0), (15.0, 80.0)]
    assert canary.verdict(samples, 0.0, 10.0)["verdict"] == "quiet"
    mid = canary.verdict(samples, 11.0, 13.0)
    assert mid["verdict"] == "stalls" and mid["stalls"] == 1 and mid["worst_ms"] == 20.0
    assert mid["windows"] == [[pytest.approx(0.98), 1.0, 20.0]]
    assert canary.verdict(samples, 11.0, 16.0)["verdict"] == "stalled"
    # a stall that began before the run's end but was noticed just after it counts
    assert canary.verdict([(20.03, 50.0)], 10.0, 20.0)["verdict"] == "stalled"
    assert canary.verdict([(21.5, 50.0)], 10.0, 20.0)["verdict"] == "quiet"


def test_canary_touched_buckets_and_parse():
    assert canary.touched_buckets([[1.05, 1.25, 30.0]], 0.1) == {9, 10, 11, 12}
    assert canary.touched_buckets([], 0.1) == set()
    assert canary.parse(["12.5 3.10\n", "alive 13.0 900 4.2\n", "bad line here\n", "x y\n"]) == [(12.5, 3.1)]


# ---------------------------------------------------------------------------- trace

def _rec(scheduled, dispatch, loop, fetch, decode, other, sent=1):
    s = scheduled
    fetch_start = s + dispatch + loop
    return [s, s + dispatch, s + dispatch + loop, fetch_start, fetch_start + fetch, decode, sent,
            fetch_start + fetch + other]


def test_a_read_splits_into_its_parts():
    p = trace.parts(_rec(1.0, 0.001, 0.002, 0.010, 0.004, 0.003, sent=4))
    assert p == {"ms": 16.0, "dispatch_ms": 1.0, "loop_ms": 2.0, "units_ms": 6.0, "decode_ms": 4.0, "other_ms": 3.0,
                 "sent": 4}
    unfetched = [1.0, 1.001, 1.002, None, None, 0.0, 0, 1.005]     # nothing to fetch (a zero-length read)
    assert trace.parts(unfetched)["units_ms"] == 0.0 and trace.parts(unfetched)["other_ms"] == 3.0


def test_breakdown_of_the_slow_reads_names_what_dominates():
    fast = [_rec(i, 0.0001, 0.0001, 0.001, 0.0, 0.0001) for i in range(100)]
    slow = [_rec(200 + i, 0.0001, 0.030, 0.002, 0.0, 0.0001) for i in range(5)]   # waiting on the loop
    b = trace.breakdown(fast + slow + [[0, 0, None, None, None, 0.0, 0, None]], 0.010)
    assert b["reads"] == 5 and b["dominant"] == "loop_ms" and b["dominant_share"] == 1.0
    assert b["loop_ms"] == 30.0 and b["units_ms"] == 2.0
    assert trace.breakdown(fast, 1.0) == {"reads": 0}


# ---------------------------------------------------------------------------- rows and targets

def _run(policy, scenario, kind, rep, p999, extra=0.0, floor=0.0, window=None, verdict="quiet", fanout=1):
    return {"policy": policy, "scenario": scenario, "kind": kind, "rep": rep, "fanout": fanout, "errors": 0,
            "summary": {"p999_ms": p999, "p99_ms": p999 / 2, "max_ms": p999 * 2, "extra_unit_reads_pct": extra,
                        "hedges": 3, "breaker_trips": 0, "load": {"saturated": False}},
            "host": {"loadavg_start": [4.0 + rep]},
            "measures": {"window_p999_ms": window or p999, "clean_p999_ms": p999, "floor_pct": floor,
                         "canary": {"verdict": verdict, "stalls": int(verdict != "quiet"),
                                    "worst_ms": 12.0 if verdict != "quiet" else 3.0},
                         "breakdown": {"reads": 5, "median_ms": p999, "dispatch_ms": 0.1, "loop_ms": 1.0,
                                       "units_ms": p999 - 2, "decode_ms": 0.05, "other_ms": 0.5, "sent": 3},
                         "marked_slow": [], "stall_buckets": 0}}


def _doc():
    runs = []
    lrc = "LRC-6-2-2-1024k"
    for rep, (h, f, o) in enumerate([(10.0, 12.0, 11.0), (8.0, 12.0, 9.0), (10.0, 11.0, 10.5)]):
        runs += [_run(lrc, "slow-500ms", "healthy", rep, h, extra=0.5),
                 _run(lrc, "slow-500ms", "fault", rep, f, extra=23.0, floor=21.6, verdict="stalls" if rep else "quiet"),
                 _run(lrc, "slow-500ms", "oracle", rep, o, extra=21.7, floor=21.6)]
    return {"runs": runs, "policies": [lrc], "reps": 3, "checks": {},
            "scenarios": [{"name": "slow-500ms", "title": "one DataNode +500 ms on every read"}]}


def test_rows_pair_each_fault_with_its_own_healthy_run():
    doc = _doc()
    [row] = aggregate(doc)
    # per round: 12/10 = 1.2, 12/8 = 1.5, 11/10 = 1.1 -> median 1.2, range 1.1-1.5
    assert row["ratio"] == {"median": 1.2, "min": 1.1, "max": 1.5, "n": 3}
    assert row["oracle_ratio"] == {"median": 1.1, "min": 1.05, "max": 1.125, "n": 3}
    assert row["extra_over_floor"]["median"] == pytest.approx(23.0 / 21.6, abs=1e-4)
    assert row["canary"] == "quiet 7, stalls 2 of 9 (worst 12 ms)"
    assert row["load"] == {"median": 5.0, "min": 4.0, "max": 6.0, "n": 9}


def test_targets_are_evaluated_row_by_row():
    doc = _doc()
    doc["rows"] = aggregate(doc)
    targets = evaluate_targets(doc)
    by = {(t["scenario"], t["target"]): t for t in targets}
    p999 = by[("LRC-6-2-2-1024k slow-500ms", "p99.9 <= 1.3 x healthy (median of 3)")]
    assert p999["status"] == "unresolved" and "1.10-1.50" in p999["margin"]   # round 2 is 1.5 x (healthy 8-10: 1.25 x) and p999["canary"].startswith("quiet 7")
    assert by[("LRC-6-2-2-1024k slow-500ms", "extra unit reads <= 25 %")]["met"] is True
    floor = by[("LRC-6-2-2-1024k slow-500ms", "extra unit reads within 1.15 x the floor")]
    assert floor["met"] is True and "= 1.06 x" in floor["measured"]
    healthy = by[("LRC-6-2-2-1024k healthy (3 runs)", "extra unit reads <= 2 %; no breaker trip")]
    assert healthy["met"] is True
    assert find_row(doc, "LRC-6-2-2-1024k", "frozen-10s") is None     # not run: no target row, no failure
    doc["runs"][1]["summary"]["extra_unit_reads_pct"] = 40.0
    doc["runs"][4]["summary"]["extra_unit_reads_pct"] = 40.0
    doc["rows"] = aggregate(doc)
    floor = {(t["scenario"], t["target"]): t for t in evaluate_targets(doc)}[
        ("LRC-6-2-2-1024k slow-500ms", "extra unit reads within 1.15 x the floor")]
    assert floor["met"] is False


def test_summary_renders_the_rows_and_targets():
    doc = _doc()
    doc.update({"date": "2026-12-01", "quick": True, "command": "hedgefs bench suite --quick", "wall_s": 60.0,
                "environment": {"cpus": 2, "commit": "abc", "loadavg": [4.0], "loadavg_end": [5.0]},
                "cluster": {"datanodes": 12, "file_bytes": 96 << 20, "block_size": 2 << 20,
                            "files": {"LRC-6-2-2-1024k": {"groups": 8}}},
                "load": {"capacity_reads_per_s": 900.0, "capacity_threads": 8, "capacity_policy": "RS-6-3-1024k",
                         "rate": 300.0, "duration_s": 8.0}})
    doc["rows"] = aggregate(doc)
    doc["targets"] = evaluate_targets(doc)
    text = summary_markdown(doc)
    assert "| LRC-6-2-2-1024k | one DataNode +500 ms on every read | 10.0 (8.0-10.0) | 12.0 (11.0-12.0) | " \
           "**1.20 (1.10-1.50)** |" in text
    assert "## Targets (issue 25)" in text and "| met |" in text


# ---------------------------------------------------------------------------- the command line

@pytest.mark.parametrize("args, fragment", [(["--policies", "RS-9-9"], "RS-9-9"), (["--only", "nope"], "nope"),
                                            (["--reps", "0"], "--reps")])
def test_bench_suite_bad_arguments_are_one_line_exit_2(tmp_path, args, fragment):
    """Refused before a cluster is started."""
    bad = run_cli("bench", "suite", *args, "--out", str(tmp_path / "out"), timeout=60)
    assert_one_line_error(bad, fragment)
    assert bad.code == 2 and not (tmp_path / "out").exists()


def test_the_canary_process_reports_that_it_is_alive(tmp_path):
    """The real process: it writes its alive lines (and whatever overshoots it saw) to its file."""
    from conftest import wait_until

    with canary.Canary(tmp_path / "canary.txt") as c:
        wait_until(lambda: c.alive_seconds() >= 2, 30, "two alive lines from the canary")
        assert all(over >= canary.RECORD_MS for _, over in c.samples())
    assert c.proc.poll() is not None


def test_a_latency_target_is_unresolved_when_the_rounds_straddle_it_or_the_host_stalled():
    from hedgefs.bench.targets import resolved

    mr = rounds.median_range
    assert resolved(mr([1.1, 1.2, 1.25]), 1.3, 0, 9) == ("met", "")
    assert resolved(mr([1.4, 1.5, 2.0]), 1.3, 0, 9) == ("missed", "")
    assert resolved(mr([1.1, 1.2, 1.5]), 1.3, 0, 9) == ("unresolved", "the rounds span 1.10-1.50 x")
    assert resolved(mr([1.1, 1.2, 1.25]), 1.3, 5, 9) == ("unresolved", "the host stalled in 5 of 9 runs")
    doc = _doc()
    for r in doc["runs"][:5]:
        r["measures"]["canary"]["verdict"] = "stalled"
    doc["rows"] = aggregate(doc)
    [t] = [t for t in evaluate_targets(doc) if t["target"].startswith("p99.9")]
    assert t["status"] == "unresolved" and t["met"] is None and "stalled in 5 of 9" in t["margin"]


def test_a_moving_baseline_leaves_a_latency_target_unresolved():
    from hedgefs.bench.targets import resolved

    mr = rounds.median_range
    assert resolved(mr([1.1, 1.2]), 1.3, 0, 6, mr([10.0, 11.0])) == ("met", "")
    assert resolved(mr([1.1, 1.2]), 1.3, 0, 6, mr([10.0, 20.0])) == ("unresolved", "the healthy runs span 2.00 x")
