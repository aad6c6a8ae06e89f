"""distcp and file checksums on real processes: two local clusters, a local disk.

The source is the shared cluster (RS-6-3-64k, 256 KiB blocks: 1.5 MiB groups); the destination
cluster stores RS-3-2-64k with 256 KiB blocks (768 KiB groups), so every copy also converts the
layout and a few MiB make many segments. Sizes: 0 B, 1 B, cell - 1, cell, cell + 1, and files of
several groups on both sides.
"""

import json
import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from conftest import CELL, assert_one_line_error, pattern, run_cli, start_cluster, wait_until
from hedgefs.client.errors import NotFound
from hedgefs.client.fs import FileSystem
from hedgefs.proto import hedgefs_pb2 as pb

DST_POLICY = "RS-3-2-64k"
SIZES = {"empty": 0, "one": 1, "cell-1": CELL - 1, "cell": CELL, "cell+1": CELL + 1, "d/big": 5 * 1024 * 1024 + 3,
         "d/e/mid": 2 * 1024 * 1024 + 17}


@pytest.fixture(scope="module")
def dst(tmp_path_factory):
    c = start_cluster(tmp_path_factory.mktemp("dst"), datanodes=6, policy=DST_POLICY)
    yield c
    c.down()


@pytest.fixture(scope="module")
def dst_fs(dst):
    with FileSystem(dst.namenode) as f:
        yield f


def url(cluster, path):
    return f"hedgefs://{cluster.namenode}{path}"


def distcp(*args, timeout=120):
    result = run_cli("distcp", "--json", *args, timeout=timeout)
    report = json.loads(result.stdout) if result.code == 0 and result.stdout else None
    return result, report


def make_tree(root, seed=0):
    for i, (name, size) in enumerate(sorted(SIZES.items())):
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(pattern(size, seed + i))
    (root / "emptydir").mkdir()


def assert_same_tree(local_root, fs, remote_root):
    for name in SIZES:
        assert fs.read_bytes(f"{remote_root}/{name}") == (local_root / name).read_bytes(), name
    assert fs.stat(f"{remote_root}/emptydir").is_dir


def put(fs, path, data, **kwargs):
    fs.mkdir(path.rsplit("/", 1)[0] or "/", parents=True)
    fs.write_bytes(path, data, overwrite=True, **kwargs)


def set_delay(cluster, ms):
    for dn in cluster.datanode_ids:
        if ms:
            cluster.datanode_rpc(dn, "SetFaults", pb.FaultConfig(read_delay_ms=ms))
        else:
            cluster.datanode_rpc(dn, "ClearFaults", pb.FaultClearRequest())


def staged_parts(fs):
    return [e for e in fs.list("/", recursive=True) if "/.distcp-" in e.path and "-part-" in e.path]


def test_local_to_cluster_to_cluster_to_local_byte_exact(tmp_path, cluster, fs, dst, dst_fs):
    src = tmp_path / "src"
    make_tree(src)
    result, report = distcp(f"file://{src}", url(cluster, "/dc/tree"))
    assert result.code == 0, result.stderr
    assert report["files"] == len(SIZES) and report["files_failed"] == 0
    assert_same_tree(src, fs, "/dc/tree")

    result, report = distcp(url(cluster, "/dc/tree"), url(dst, "/tree"))
    assert result.code == 0, result.stderr
    assert report["files"] == len(SIZES)
    assert report["segments"] > 10   # 5 MiB in 768 KiB groups: 7 segments for d/big alone
    assert_same_tree(src, dst_fs, "/tree")
    assert {dst_fs.stat(f"/tree/{n}").policy for n in SIZES} == {DST_POLICY}
    assert [e.path for e in dst_fs.list("/", recursive=True) if ".distcp-" in e.path] == []   # staging gone

    result, report = distcp(url(dst, "/tree"), f"file://{tmp_path}/back")
    assert result.code == 0, result.stderr
    for name in SIZES:
        assert (tmp_path / "back" / name).read_bytes() == (src / name).read_bytes(), name
    assert (tmp_path / "back" / "emptydir").is_dir()
    assert [p for p in os.listdir(tmp_path) if p.startswith(".distcp-")] == []


def test_update_copies_nothing_the_second_time_then_only_what_changed(tmp_path, cluster, fs, dst, dst_fs):
    for i in range(3):
        put(fs, f"/dcu/f{i}", pattern(300_000 + i, i))
    first, report = distcp("-update", url(cluster, "/dcu"), url(dst, "/u"))
    assert first.code == 0, first.stderr
    assert report["files"] == 3
    _, again = distcp("-update", url(cluster, "/dcu"), url(dst, "/u"))
    assert (again["files"], again["files_skipped"], again["bytes"], again["segments"]) == (0, 3, 0, 0)
    put(fs, "/dcu/f1", pattern(300_001, 99))   # same length, other bytes
    _, changed = distcp("-update", url(cluster, "/dcu"), url(dst, "/u"))
    assert (changed["files"], changed["files_skipped"]) == (1, 2)
    assert dst_fs.read_bytes("/u/f1") == pattern(300_001, 99)


def test_kill_9_in_the_middle_then_rerun_completes(cluster, fs, dst, dst_fs):
    data = pattern(6 * 1024 * 1024 + 5, 7)
    put(fs, "/dck/big", data)
    args = [sys.executable, "-m", "hedgefs", "distcp", "--workers", "1", "--no-hedge", "--hedge-after-ms", "off",
            url(cluster, "/dck/big"), url(dst, "/k/big")]
    set_delay(cluster, 300)   # every read >= 300 ms: 7 segments (>= 2 s) left when the kill comes
    try:
        proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            wait_until(lambda: len(staged_parts(dst_fs)) >= 2, 60, "two parts staged")
        finally:
            proc.send_signal(signal.SIGKILL)
            proc.wait()
        staged = len(staged_parts(dst_fs))
        with pytest.raises(NotFound):
            dst_fs.stat("/k/big")    # nothing partial is visible at the destination
    finally:
        set_delay(cluster, 0)
    result, report = distcp(url(cluster, "/dck/big"), url(dst, "/k/big"))
    assert result.code == 0, result.stderr
    assert report["segments_resumed"] >= 2 and report["segments_resumed"] >= staged - 1
    assert report["segments"] + report["segments_resumed"] == 9   # 6 MiB + 5 B in 768 KiB groups
    assert dst_fs.read_bytes("/k/big") == data
    assert staged_parts(dst_fs) == []


def test_a_concat_is_atomic_for_a_concurrent_reader(dst_fs):
    group = 3 * 256 * 1024
    parts = [pattern(group, 1), pattern(2 * group, 2), pattern(1000, 3)]
    dst_fs.mkdir("/atomic/stage", parents=True)
    for i, p in enumerate(parts):
        dst_fs.write_bytes(f"/atomic/stage/p{i}", p)
    whole = b"".join(parts)
    seen, stop, problems = [], threading.Event(), []

    def reader():
        with FileSystem(dst_fs.namenode) as mine:
            while not stop.is_set():
                try:
                    got = mine.read_bytes("/atomic/f")
                except NotFound:
                    seen.append("absent")
                    continue
                seen.append("whole" if got == whole else "torn")
                if got != whole:
                    problems.append(len(got))

    t = threading.Thread(target=reader)
    t.start()
    try:
        wait_until(lambda: "absent" in seen, 60, "the reader's first look")
        dst_fs.concat("/atomic/f", [f"/atomic/stage/p{i}" for i in range(3)])
        wait_until(lambda: "whole" in seen, 60, "the reader to see the file")
    finally:
        stop.set()
        t.join()
    assert problems == []
    assert seen.index("whole") > seen.index("absent") and "absent" not in seen[seen.index("whole"):]
    assert dst_fs.list("/atomic/stage") == []


def test_checksums_equal_across_layouts_and_differ_on_one_flipped_byte(tmp_path, fs, cluster, dst, dst_fs):
    data = bytearray(pattern(3 * 1024 * 1024 + 12345, 11))
    local = tmp_path / "f"
    local.write_bytes(data)
    put(fs, "/cks/rs63", bytes(data))                          # RS-6-3-64k
    put(fs, "/cks/rs32", bytes(data), policy="RS-3-2-64k")
    put(fs, "/cks/tiny", bytes(data), policy="RS-3-2-1k")      # cells split chunks: read
    put(dst_fs, "/cks/other", bytes(data))
    result = run_cli("checksum", "/cks/rs63", "/cks/rs32", "/cks/tiny", url(dst, "/cks/other"), f"file://{local}",
                     namenode=cluster.namenode)
    assert result.code == 0, result.stderr
    values = {line.split()[1] for line in result.stdout.decode().splitlines()}
    assert len(values) == 1
    import crc32c
    assert values == {f"{crc32c.crc32c(bytes(data)):08x}"}
    data[2 * 1024 * 1024 + 7] ^= 0x01
    put(fs, "/cks/flipped", bytes(data))
    assert fs.checksum("/cks/flipped") != fs.checksum("/cks/rs63")
    assert fs.checksum("/cks/flipped").crc == crc32c.crc32c(bytes(data))


def test_checksum_of_a_group_with_a_dead_unit_is_read_instead(dst, dst_fs):
    data = pattern(2 * 1024 * 1024 + 1, 12)
    put(dst_fs, "/cks/degraded", data)
    expected = dst_fs.checksum("/cks/degraded")
    victim = dst_fs.stat("/cks/degraded").groups[0].units[0].datanode_id
    dst.kill(victim)
    try:
        with FileSystem(dst.namenode) as fresh:   # a DataNode that refuses connections: its group is read
            assert fresh.checksum("/cks/degraded") == expected
    finally:
        dst.restart(victim)


def test_hedged_segment_reads_around_a_stalled_datanode(cluster, fs, dst, dst_fs):
    data = pattern(3 * 1024 * 1024, 13)
    put(fs, "/dch/f", data)
    stalled = fs.stat("/dch/f").groups[0].units[0].datanode_id
    cluster.datanode_rpc(stalled, "SetFaults", pb.FaultConfig(stall=True))
    try:
        # Reader hedging off: only the segment hedge can get past the stalled DataNode.
        result, report = distcp("--no-hedge", "--hedge-after-ms", "500", "--max-hedged", "100",
                                url(cluster, "/dch/f"), url(dst, "/h/f"))
    finally:
        cluster.datanode_rpc(stalled, "ClearFaults", pb.FaultClearRequest())
    assert result.code == 0, result.stderr
    assert report["segments_hedged"] >= 1 and report["hedge_wins"] >= 1
    winners = [a for s in report["per_segment"] for a in s["attempts"] if a["outcome"] == "won" and a["n"] > 0]
    assert winners and all(stalled in a["exclude"] for a in winners)
    assert dst_fs.read_bytes("/h/f") == data


def test_bad_input(tmp_path, cluster, fs, dst, dst_fs):
    put(fs, "/dcb/f", b"x")
    put(dst_fs, "/b/f", b"y")
    missing = run_cli("distcp", url(cluster, "/dcb/nope"), url(dst, "/b/x"))
    assert_one_line_error(missing, "no such file")
    assert missing.code == 2

    exists = run_cli("distcp", url(cluster, "/dcb/f"), url(dst, "/b/f"))
    assert_one_line_error(exists, "destination file exists", "-update")
    assert exists.code == 2 and dst_fs.read_bytes("/b/f") == b"y"

    into = run_cli("distcp", url(cluster, "/dcb"), url(cluster, "/dcb/sub"))
    assert_one_line_error(into, "into itself")
    assert into.code == 2

    began = time.monotonic()
    down = run_cli("distcp", url(cluster, "/dcb/f"), "hedgefs://127.0.0.1:1/x")
    assert_one_line_error(down, "cannot reach the NameNode at 127.0.0.1:1")
    assert down.code == 3 and time.monotonic() - began < 15

    assert run_cli("distcp", url(cluster, "/dcb/f")).code == 2
    assert run_cli("distcp", "--hedge-after-ms", "soon", url(cluster, "/dcb/f"), url(dst, "/b/z")).code == 2
    assert run_cli("checksum", f"file://{tmp_path}/nope").code == 2


def test_a_source_that_changes_during_the_copy_fails_alone(cluster, fs, dst, dst_fs):
    put(fs, "/dcc/a", pattern(100, 1))
    put(fs, "/dcc/b", pattern(4 * 1024 * 1024, 2))
    args = [sys.executable, "-m", "hedgefs", "distcp", "--workers", "1", "--no-hedge", "--hedge-after-ms", "off",
            url(cluster, "/dcc"), url(dst, "/c")]
    set_delay(cluster, 400)   # every read >= 400 ms: b's other 5 segments take >= 2 s after its first
    try:
        proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        wait_until(lambda: any("-part-" in p.path for p in staged_parts(dst_fs) if p.length == 3 * 256 * 1024),
                   60, "a part of b staged")
        put(fs, "/dcc/b", pattern(4 * 1024 * 1024, 3))   # replaced mid-copy
        _, err = proc.communicate(timeout=120)
    finally:
        set_delay(cluster, 0)
    lines = [ln for ln in err.decode().splitlines() if ln.startswith("hedgefs:")]
    assert proc.returncode == 1, err
    assert len(lines) == 1 and "/dcc/b" in lines[0] and "changed" in lines[0]
    assert dst_fs.read_bytes("/c/a") == pattern(100, 1)
    with pytest.raises(NotFound):
        dst_fs.stat("/c/b")
