"""A DataNode's own /metrics and /health (a real process), and the read-latency windows its
heartbeats carry (fake clock)."""

from __future__ import annotations

import socket
import subprocess
import sys
import urllib.error
import urllib.request

import grpc
from prometheus_client.parser import text_string_to_metric_families

from conftest import wait_until
from dn_support import Data, closed_port, stop
from hedgefs.datanode.metrics import ReadWindows
from hedgefs.plumbing import read_port_file
from hedgefs.proto import GRPC_OPTIONS
from hedgefs.proto import datatransfer as dt
from hedgefs.proto import hedgefs_pb2 as pb
from hedgefs.proto import hedgefs_pb2_grpc
from nn_support import FakeClock

ODD_ID = 'dn"7\\<x>'


def samples(text: str) -> dict:
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def http_get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=10) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode()


def test_read_windows_keep_the_last_minute_and_whole_minutes():
    clock = FakeClock(start=600_000.0)          # a minute boundary
    w = ReadWindows(clock)
    for ms in (1, 2, 3, 4, 500):                 # minute 10000
        w.record(ms / 1000)
    clock.advance(61)                            # minute 10001, second slot
    w.record(0.010)
    reads, p50, p99 = w.recent()
    assert reads == 1 and 0.009 < p99 <= 0.0105  # the 500 ms read is over a minute old
    assert [(m, n) for m, n, _, _ in w.minutes()] == [(10000, 5), (10001, 1)]
    (_, _, p50_old, p99_old), _ = w.minutes()
    assert 0.0029 < p50_old <= 0.00306 and 0.49 < p99_old <= 0.5
    clock.advance(3600)
    assert w.recent()[0] == 0 and w.minutes() == []


def test_datanode_serves_metrics_and_health(tmp_path):
    port_file = tmp_path / "dn.port"
    proc = subprocess.Popen([sys.executable, "-m", "hedgefs", "datanode", "--id", ODD_ID, "--port", "0",
                             "--http-port", "0", "--data-dir", str(tmp_path / "dn"), "--namenode",
                             f"127.0.0.1:{closed_port()}", "--port-file", str(port_file), "--no-fsync",
                             "--enable-faults", "--fault", "read-delay-ms=300"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_until(lambda: port_file.exists() or proc.poll() is not None, 20, "the datanode to write its port file")
        assert port_file.exists(), "datanode did not start"
        ports = read_port_file(port_file)
        base = f"http://127.0.0.1:{ports['http']}"
        with grpc.insecure_channel(f"127.0.0.1:{ports['rpc']}", options=GRPC_OPTIONS) as channel:
            stub = hedgefs_pb2_grpc.DataNodeStub(channel)
            data = Data(ports["data"])
            data.write(1, 0, b"x" * 1000)
            assert data.read(1, 0, 0, 1000) == b"x" * 1000
            stub.SetFaults(pb.FaultConfig(stall=True))
            sock = data.connect()
            sock.sendall(dt.pack_request(dt.OP_READ, 1, 0, 0, 1000, generation=0))
            wait_until(lambda: stub.GetFaults(pb.FaultClearRequest()).stalled_reads, 10, "the read to stall",
                       interval=0.01)
            sock.close()   # the cancel
            wait_until(lambda: stub.GetFaults(pb.FaultClearRequest()).cancelled_reads, 10,
                       "the stalled read to count as cancelled", interval=0.01)
        me = (("datanode", ODD_ID),)
        cancelled = ("hedgefs_datanode_reads_total", (*me, ("outcome", "cancelled")))

        def scraped():   # the read is counted once its handler has ended, a moment after the fault's counter
            status, text = http_get(base + "/metrics")
            assert status == 200
            m = samples(text)
            return m if m.get(cancelled) else None
        m = wait_until(scraped, 10, "the cancelled read in /metrics")
        assert m[("hedgefs_datanode_reads_total", (*me, ("outcome", "ok")))] == 1
        assert m[("hedgefs_datanode_reads_total", (*me, ("outcome", "cancelled")))] == 1
        assert m[("hedgefs_datanode_read_seconds_count", me)] == 2
        assert m[("hedgefs_datanode_read_seconds_sum", me)] >= 0.3      # the delay knob is part of a read
        assert m[("hedgefs_datanode_read_bytes_total", me)] == 1000
        assert m[("hedgefs_datanode_writes_total", (*me, ("outcome", "ok")))] == 1
        assert m[("hedgefs_datanode_write_bytes_total", me)] == 1000
        assert m[("hedgefs_datanode_active_streams", (*me, ("kind", "read")))] == 0
        assert m[("hedgefs_datanode_fault", (*me, ("knob", "read_delay_ms")))] == 300
        assert m[("hedgefs_datanode_fault", (*me, ("knob", "probability")))] == 1.0   # shapes the delay in effect
        assert m[("hedgefs_datanode_fault", (*me, ("knob", "error_probability")))] == 0
        with grpc.insecure_channel(f"127.0.0.1:{ports['rpc']}", options=GRPC_OPTIONS) as channel:
            hedgefs_pb2_grpc.DataNodeStub(channel).ClearFaults(pb.FaultClearRequest())
        healthy = samples(http_get(base + "/metrics")[1])
        assert all(v == 0 for (name, labels), v in healthy.items() if name == "hedgefs_datanode_fault"), \
            "a healthy DataNode reports no fault in effect"
        assert m[("hedgefs_datanode_repairs_done_total", me)] == 0       # a counter: rate() sees restarts
        assert m[("hedgefs_datanode_scrub_passes_total", me)] >= 0
        assert m[("hedgefs_datanode_namenode_reachable", me)] == 0
        status, text = http_get(base + "/health")
        assert status == 200 and text.startswith("ok\n") and "unreachable" in text
        assert http_get(base + "/nope")[0] == 404
    finally:
        stop(proc)


def test_a_taken_http_port_is_one_line_error(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        result = subprocess.run([sys.executable, "-m", "hedgefs", "datanode", "--id", "dn1", "--http-port",
                                 str(taken.getsockname()[1]), "--data-dir", str(tmp_path / "dn"), "--namenode",
                                 "127.0.0.1:1"], capture_output=True, text=True, timeout=60)
    assert result.returncode == 1
    lines = [ln for ln in result.stderr.splitlines() if "hedgefs:" in ln]
    assert lines and "cannot serve HTTP on 127.0.0.1:" in lines[-1] and "Traceback" not in result.stderr
