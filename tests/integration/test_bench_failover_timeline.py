"""The bucketing and plot of `hedgefs bench failover --mode timeline` (bench/failover_timeline.py):
pure functions of event times, no cluster."""

import pytest

from conftest import assert_one_line_error, run_cli
from hedgefs.bench.failover_timeline import buckets, plot, rep_figures


def test_writes_reads_and_failures_land_in_the_100_ms_bucket_they_started_in():
    reads = [(-0.05, 0.002, True), (-0.01, 0.004, True), (0.0, 0.010, True), (0.15, 0.5, False)]
    rows = buckets(reads, writes=[-0.2, -0.1, -0.05, 0.25], write_errors=[0.12], start=-0.2, end=0.3)
    assert [r["t"] for r in rows] == [-0.2, -0.1, 0.0, 0.1, 0.2]
    assert [r["writes"] for r in rows] == [1, 2, 0, 0, 1]
    assert [r["write_errors"] for r in rows] == [0, 0, 0, 1, 0]
    assert [r["reads"] for r in rows] == [0, 2, 1, 0, 0]
    assert [r["read_failures"] for r in rows] == [0, 0, 0, 1, 0]
    assert rows[1]["p50_ms"] == 3.0 and rows[1]["max_ms"] == 4.0 and rows[1]["p99_ms"] == 4.0
    assert rows[0]["p50_ms"] is None and rows[3]["max_ms"] is None   # no successful read: no latency


def test_events_outside_the_window_are_left_out():
    rows = buckets([(-5.0, 0.001, True), (1.0, 0.001, False)], writes=[-0.3, 0.3], write_errors=[], start=-0.2, end=0.3)
    assert sum(r["writes"] for r in rows) == 0 and sum(r["reads"] + r["read_failures"] for r in rows) == 0


def test_a_window_of_25_s_is_250_buckets():
    assert len(buckets([], [], [], -10.0, 15.0)) == 250


def test_rep_figures_split_reads_at_the_kill_and_the_new_actives_first_write():
    reads = [(-2.0, 0.002, True), (-1.0, 0.004, True), (0.5, 0.020, True), (2.9, 0.030, True), (3.5, 0.001, True),
             (1.0, 9.0, False)]
    writes = [-1.5, -0.2, 3.0, 3.1, *[3.1 + 0.5 * k for k in range(1, 25)]]
    got = rep_figures(reads, writes, first_new_ack=3.0, lead_in_s=10.0, after_s=15.0)
    assert got["first_new_active_ack_s"] == 3.0
    assert got["write_gap_s"] == 3.2   # the last ack before the kill, at -0.2, to the new active's first
    assert got["longest_write_gap_s"] == 3.2
    assert got["lead_in"]["reads"] == 2 and got["during_gap"]["reads"] == 2
    assert got["during_gap"]["max_ms"] == 30.0
    assert got["read_failures"] == 1


def test_the_plot_draws_from_the_saved_document(tmp_path):
    pytest.importorskip("matplotlib")
    rows = buckets([(-0.5, 0.003, True), (0.2, 0.004, True), (0.3, 0.2, False)], [-0.5, -0.4, 2.0], [], -1.0, 3.0)
    rep = {"killed": "namenode-1", "first_new_active_ack_s": 2.0, "buckets": rows}
    doc = {"bucket_s": 0.1, "reps": 2, "writer_threads": 4, "reader_threads": 4, "read_kib": 64, "read_failures": 1,
           "per_rep": [rep, {**rep, "first_new_active_ack_s": None}]}
    out = plot(doc, tmp_path / "timeline.png")
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_plot_with_another_mode_is_a_one_line_usage_error(tmp_path):
    result = run_cli("bench", "failover", "--mode", "reads", "--plot", str(tmp_path / "x.png"))
    assert result.code == 2
    assert_one_line_error(result, "--plot is for --mode timeline")
