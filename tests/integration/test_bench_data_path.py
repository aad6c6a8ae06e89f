"""`hedgefs bench codec|transport|throughput`: the JSON lines issue 6 specifies, with sane values.

No speed is asserted here (bench/results/ holds the figures); these check that each benchmark
runs against a real cluster, moves real bytes and reports what it promises.
"""

import json

from conftest import assert_one_line_error, run_cli


def test_bench_codec_json_has_one_line_per_backend():
    result = run_cli("bench", "codec", "--json", "--seconds", "0.05", "--cell-size", "65536")
    assert result.code == 0, result.stderr
    rows = [json.loads(line) for line in result.stdout.decode().splitlines()]
    assert "numpy" in {r["backend"] for r in rows}
    for row in rows:
        assert set(row) == {"backend", "encode_mb_s", "decode1_mb_s", "decode3_mb_s"}
        assert all(row[k] > 0 for k in ("encode_mb_s", "decode1_mb_s", "decode3_mb_s"))


def test_bench_transport_probe_moves_bytes_both_ways():
    result = run_cli("bench", "transport", "--json", "--size", str(8 << 20), "--streams", "2")
    assert result.code == 0, result.stderr
    doc = json.loads(result.stdout)
    assert set(doc["streams"]) == {"1", "2"} and doc["bytes"] == 8 << 20
    for row in doc["streams"].values():
        assert row["download_mb_s"] > 0 and row["upload_mb_s"] > 0


def test_bench_throughput_reports_every_figure(cluster):
    result = run_cli("bench", "throughput", "--json", "--size", str(3 << 20), "--rss-size", str(2 << 20),
                     "--reads", "20", namenode=cluster.namenode)
    assert result.code == 0, result.stderr
    doc = json.loads(result.stdout)
    assert set(doc) == {"size", "probe", "put", "get_to_file", "cat_to_null", "local_file_copy",
                        "random_64k_one_thread", "startup", "rss", "load_average", "ratios"}
    for key in ("put", "get_to_file", "cat_to_null"):
        assert doc[key]["mb_s"] > 0 and doc[key]["cpu_s_per_gib"] > 0 and 0 < doc[key]["peak_rss_mb"] < 1000
    assert doc["random_64k_one_thread"]["reads"] == 20 and doc["random_64k_one_thread"]["p50_ms"] > 0
    assert 0 < doc["startup"]["cat_1_byte_s"] < 60
    assert doc["rss"]["size"] == 2 << 20 and doc["rss"]["get_peak_rss_mb"] > 0
    assert all(v > 0 for v in doc["ratios"].values())


def test_bench_throughput_without_a_namenode_fails_in_one_line():
    result = run_cli("bench", "throughput", "--size", str(1 << 20), "--namenode", "127.0.0.1:1")
    assert_one_line_error(result)
