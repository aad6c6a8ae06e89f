"""Capacity: DataNodes report their disk's size and free space; placement never picks one without
room for a unit and prefers emptier ones; a full disk is logged and counted as an error, and
shown by `admin report`, `df`, the status page and /metrics.

The full disk is real: a small tmpfs mounted on one DataNode's data dir (root only; otherwise
the cluster tests skip with a reason).
"""

import json
import os
import random
import shutil
import subprocess

import pytest

from conftest import cluster_options, fetch, pattern, run_cli, start_cluster, wait_until
from hedgefs.namenode.blocks.placement import Candidate, Placement, Shape
from hedgefs.topology import Location
from hedgefs.namenode.blocks.liveness import Liveness
from hedgefs.namenode.model import DataNodeStats

MiB = 1 << 20


# ---------------------------------------------------------------------------- placement logic

def _liveness(nodes: dict[str, tuple[int, int, str]]) -> Liveness:
    """nodes: id -> (capacity, remaining, file system)."""
    live = Liveness(30.0, clock=lambda: 0.0)
    for dn, (capacity, remaining, filesystem) in nodes.items():
        live.heartbeat(dn, "127.0.0.1:1", 0, 0, 0, DataNodeStats(capacity, remaining_bytes=remaining, filesystem=filesystem))
    return live


def test_a_full_disk_has_no_room_and_an_empty_one_comes_first():
    live = _liveness({"full": (50 * MiB, 100 << 10, "a"), "half": (1 << 40, 1 << 39, "b"), "empty": (1 << 40, 1 << 40, "c")})
    assert not live.has_room("full", 256 << 10)
    assert live.has_room("half", 256 << 10)
    # Fewest used bytes used to win: the full one (it stores nothing of ours) was chosen first.
    candidates = [Candidate(d, Location(f"host-{d}"), live.load_key(d)) for d in ("full", "half", "empty")]
    chosen = Placement(random.Random(1)).choose(Shape(3, 3, (-1, -1, -1)), range(3), candidates)
    assert [chosen[i] for i in range(3)] == ["empty", "half", "full"]


def test_datanodes_sharing_a_file_system_share_its_free_space():
    live = _liveness({"dn1": (10 * MiB, 3 * MiB, "same"), "dn2": (10 * MiB, 3 * MiB, "same"), "dn3": (10 * MiB, 3 * MiB, "other")})
    assert live.sharing("dn1") == ["dn2"] and live.sharing("dn3") == []
    live.note_allocated("dn1", 2 * MiB)
    assert live.has_room("dn3", 2 * MiB)
    assert not live.has_room("dn2", 2 * MiB), "dn1's placement took the shared disk's room"


def test_low_space_threshold():
    live = _liveness({"low": (100 * MiB, 5 * MiB, "a"), "ok": (100 * MiB, 50 * MiB, "b"), "unknown": (0, 0, "")})
    assert live.low_space("low") and not live.low_space("ok") and not live.low_space("unknown")
    assert live.has_room("unknown", 1 << 30), "a DataNode that never said has room, as before"


# ---------------------------------------------------------------------------- a real full disk

@pytest.fixture(scope="module")
def small(tmp_path_factory):
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs on a DataNode's data dir needs root")
    root = tmp_path_factory.mktemp("capacity")
    cluster = start_cluster(root, policy="RS-3-2-64k", datanodes=6)
    mounted = None
    try:
        cluster.kill("dn3")
        data_dir = root / "dn3"
        keep = root / "dn3-keep"
        shutil.copytree(data_dir, keep)
        result = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(data_dir)], capture_output=True)
        if result.returncode != 0:
            pytest.skip(f"cannot mount a tmpfs here: {result.stderr.decode().strip()}")
        mounted = data_dir
        shutil.copytree(keep, data_dir, dirs_exist_ok=True)
        free = shutil.disk_usage(data_dir).free
        with open(data_dir / "filler", "wb") as f:   # leave less than one 256 KiB unit free
            f.write(b"\0" * (free - (100 << 10)))
        cluster.start("dn3")
        cluster.wait_live(["dn3"])
        wait_until(lambda: _report(cluster)["dn3"]["capacity_bytes"] > 0 and _report(cluster)["dn3"]["remaining_bytes"] < 256 << 10,
                   30, "dn3 to report its full disk")
        yield cluster
    finally:
        cluster.down()
        if mounted:
            subprocess.run(["umount", "-l", str(mounted)], check=False)


def _report(cluster) -> dict:
    result = run_cli("admin", "report", "--json", namenode=cluster.namenode)
    assert result.code == 0, result.stderr
    return {d["id"]: d for d in json.loads(result.stdout)["datanodes"]}


def test_no_unit_is_placed_on_the_full_datanode_and_files_are_born_healthy(small):
    nn = small.namenode
    assert run_cli("mkdir", "-p", "/full", namenode=nn).code == 0
    for i in range(4):
        data = pattern(700 << 10, seed=i)
        put = run_cli("put", "-", f"/full/f{i}", namenode=nn, input=data)
        assert put.code == 0, put.stderr
        stat = json.loads(run_cli("stat", "--json", f"/full/f{i}", namenode=nn).stdout)
        holders = {u["datanode"] for g in stat["groups"] for u in g["units"]}
        assert "dn3" not in holders, stat
        assert all(len(g["units"]) == 5 for g in stat["groups"]), "born degraded"
        fsck = json.loads(run_cli("fsck", "--json", "/full", namenode=nn).stdout)
        assert fsck["status"] == "HEALTHY", fsck
        assert run_cli("cat", f"/full/f{i}", namenode=nn).stdout == data


def test_report_df_page_and_metrics_show_capacity_and_the_warning(small):
    nn = small.namenode
    report = _report(small)
    dn3 = report["dn3"]
    assert 1 * MiB < dn3["capacity_bytes"] <= 2 * MiB and dn3["low_space"] and dn3["used_pct"] > 90
    assert not report["dn1"]["low_space"] and report["dn1"]["capacity_bytes"] > dn3["capacity_bytes"]
    assert "dn2" in report["dn1"]["shares_filesystem_with"], "dn1..dn6 but dn3 share the test machine's disk"
    assert "dn3" not in report["dn1"]["shares_filesystem_with"]
    text = run_cli("admin", "report", namenode=nn)
    assert "capacity" in text.stdout.decode() and "low on space (under 10 % free): dn3" in text.stdout.decode()
    assert "one file system shared by" in text.stdout.decode()
    df = run_cli("df", "-h", namenode=nn)
    assert df.code == 0, df.stderr
    assert "Available" in df.stdout.decode() and "dn3" in df.stderr
    doc = json.loads(run_cli("df", "--json", namenode=nn).stdout)
    disk = shutil.disk_usage(small.root)
    # the shared disk once, plus dn3's tmpfs: not six disks
    assert doc["size_bytes"] < 2 * disk.total and doc["low_space"] == ["dn3"]
    port = small.state["namenode"]["http_port"]
    page = fetch(small, port, "/")
    assert "⚠ low" in page and 'id="low-space-threshold"' in page
    metrics = fetch(small, port, "/metrics")
    assert 'hedgefs_datanode_low_space{datanode="dn3"} 1.0' in metrics
    assert 'hedgefs_datanode_remaining_bytes{datanode="dn3"}' in metrics
    assert "hedgefs_low_space_threshold_ratio 0.1" in metrics
    # RPC activity per method (HDFS's RpcActivity) and build info
    assert 'hedgefs_namenode_rpc_calls_total{code="OK",method="Create"}' in metrics
    # (a one-group file's first group comes with its Create: no AddBlockGroup call to time)
    assert 'hedgefs_namenode_rpc_seconds_bucket{le="0.005",method="Complete"}' in metrics
    assert "hedgefs_build_info{" in metrics


def test_a_write_refused_for_space_is_logged_and_counted_as_an_error(small):
    from hedgefs.proto import datatransfer as dt

    entry = small.state["datanodes"]["dn3"]
    with dt.connect(f"127.0.0.1:{entry['data_port']}", 10) as s:
        s.sendall(dt.pack_request(dt.OP_WRITE, 999_999, 0, 0, 0, generation=0))
        dt.recv_response(s, "dn3")
        piece = b"x" * (64 << 10)
        try:
            for _ in range(16):     # 1 MiB: more than the 100 KiB left
                s.sendall(dt.PACKET.pack(dt.PACKET_DATA, len(piece)) + piece)
            s.sendall(dt.PACKET.pack(dt.PACKET_END, 16 * len(piece)))
            with pytest.raises(Exception, match="No space left"):
                dt.recv_response(s, "dn3")
        except ConnectionError:
            pass
    log = small.root / "logs" / "dn3.log"
    wait_until(lambda: "No space left on device" in log.read_text() and "WARNING" in log.read_text(), 10,
               "dn3 to log the full disk")
    metrics = fetch(small, entry["http_port"], "/metrics")
    errors = [ln for ln in metrics.splitlines() if ln.startswith("hedgefs_datanode_writes_total") and 'outcome="error"' in ln]
    assert errors and float(errors[0].split()[-1]) >= 1, metrics
