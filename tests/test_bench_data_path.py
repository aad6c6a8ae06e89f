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


def test_bench_transport_and_throughput_against_the_cluster(cluster):
    transport = run_cli("bench", "transport", "--json", "--size", str(8 << 20), namenode=cluster.namenode)
    assert transport.code == 0, transport.stderr
    doc = json.loads(transport.stdout)
    assert doc["download_mb_s"] > 0 and doc["upload_mb_s"] > 0 and doc["datanode"].startswith("dn")

    result = run_cli("bench", "throughput", "--json", "--size", str(3 << 20), namenode=cluster.namenode)
    assert result.code == 0, result.stderr
    doc = json.loads(result.stdout)
    assert set(doc) == {"size", "put_mb_s", "get_mb_s", "transport_mb_s", "put_ratio", "get_ratio", "peak_rss_mb"}
    assert doc["size"] == 3 << 20 and doc["put_mb_s"] > 0 and doc["get_mb_s"] > 0 and 0 < doc["peak_rss_mb"] < 1000


def test_bench_transport_names_an_unknown_datanode(cluster):
    result = run_cli("bench", "transport", "--datanode", "dn99", namenode=cluster.namenode)
    assert_one_line_error(result, "dn99")
