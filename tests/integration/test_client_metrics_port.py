"""`--metrics-port`: a long-running client serves its hedge counters to Prometheus while it runs."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import urllib.request

from prometheus_client.parser import text_string_to_metric_families

from conftest import pattern, wait_until


def scrape(url: str) -> dict[str, float]:
    with urllib.request.urlopen(url, timeout=10) as r:
        text = r.read().decode()
    return {s.name: s.value for f in text_string_to_metric_families(text) for s in f.samples if not s.labels}


def test_bench_read_serves_hedge_counters_while_it_runs(cluster, fs):
    fs.write_bytes("/metrics-port.bin", pattern(2 * 1024 * 1024, seed=3), overwrite=True)
    env = dict(os.environ, HEDGEFS_NAMENODE=cluster.namenode)
    # A 1 ms threshold hedges nearly every read, so the hedge counters move on a healthy cluster.
    proc = subprocess.Popen([sys.executable, "-m", "hedgefs", "bench", "read", "/metrics-port.bin", "--duration",
                             "120", "--threads", "2", "--hedge-threshold-ms", "1", "--hedge-max-impaired-nodes", "20",
                             "--metrics-port", "0"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True)
    try:
        line = proc.stderr.readline()
        match = re.fullmatch(r"metrics: (http://127\.0\.0\.1:\d+/metrics)\n", line)
        assert match, line

        def counted():
            m = scrape(match[1])
            return m if m.get("hedgefs_client_hedges_total", 0) and m.get("hedgefs_client_reads_total", 0) else None

        m = wait_until(counted, 60, "the scraped metrics to count reads and hedges", interval=0.1,
                       detail=lambda: f"scraped {scrape(match[1])}")
        assert m["hedgefs_client_reads_total"] > 0 and m["hedgefs_client_unit_reads_total"] > 0
        assert m["hedgefs_client_hedges_total"] > 0
        # --hedge-max-impaired-nodes 20 is more than the cluster's 10 DataNodes: the breaker cannot
        # trip, so its gauge is served and says closed
        assert m["hedgefs_client_breaker_open"] == 0 and m["hedgefs_client_breaker_trips_total"] == 0
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)


def test_a_bad_metrics_port_is_a_usage_error(cluster):
    from conftest import assert_one_line_error, run_cli

    result = run_cli("bench", "read", "/x", "--reads", "1", "--metrics-port", "localhost:http", namenode=cluster.namenode)
    assert_one_line_error(result, "--metrics-port")
    assert result.code == 2
