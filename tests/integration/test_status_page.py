"""The status page on a real cluster: where to find it, and a slow DataNode's reads reaching it."""

from __future__ import annotations

import json
import urllib.request

from conftest import pattern, run_cli, start_cluster, wait_until


def fetch(url: str) -> str:
    with urllib.request.urlopen(url, timeout=10) as r:
        return r.read().decode()


def test_cluster_status_json_lists_every_server(cluster):
    result = run_cli("cluster", "status", "--json", "--dir", str(cluster.root))
    assert result.code == 0, result.stderr
    doc = json.loads(result.stdout)
    names = [s["name"] for s in doc["servers"]]
    assert names == ["namenode", *[f"dn{i}" for i in range(1, 11)]]
    for s in doc["servers"]:
        assert s["state"] == "running" and s["pid"] > 0 and s["rpc_port"] > 0 and s["http_port"] > 0
        assert fetch(f"http://127.0.0.1:{s['http_port']}/health").startswith("ok")
    assert doc["status_page"] == cluster.http_url
    assert '<table id="datanodes">' in fetch(doc["status_page"])


def test_a_slowed_datanode_stands_out_on_the_page(tmp_path):
    from hedgefs.client.fs import FileSystem
    from hedgefs.proto import hedgefs_pb2 as pb

    c = start_cluster(tmp_path / "c", heartbeat_interval_s=0.2)
    try:
        data = pattern(3 * 1024 * 1024, seed=5)
        from hedgefs.client.config import HedgeConfig

        # Without hedging every read of the slowed DataNode waits out its whole delay (1 s): its
        # p99 is far above anything a busy machine gives the others.
        with FileSystem(c.namenode, hedge=HedgeConfig(enabled=False)) as fs:
            fs.write_bytes("/slow.bin", data)
            slow = fs.stat("/slow.bin").groups[0].units[0].datanode_id
            c.datanode_rpc(slow, "SetFaults", pb.FaultConfig(read_delay_ms=1000))
            for _ in range(3):
                assert fs.read_bytes("/slow.bin") == data

        def slow_listed():   # the next heartbeats carry the reads
            page = json.loads(fetch(c.http_url + "api/"))
            return page if slow in page["slow_datanodes"] else None

        page = wait_until(slow_listed, 30, f"the NameNode to list {slow} as slow",
                          detail=lambda: json.loads(fetch(c.http_url + "api/"))["datanodes"])
        row = max(page["datanodes"], key=lambda d: d["read_p99_ms"])
        assert row["id"] == slow and row["faults"] == {"read_delay_ms": "1000"} and row["read_p99_ms"] >= 900
    finally:
        c.down()
