"""Replicated files (REPLICATE-n) on real processes: round trips, classic hedged reads, losses,
re-replication, conversion to and from EC, and bad input.

Block boundaries: the shared clusters use 256 KiB blocks for EC; a replicated block is whole
1 MiB cells, so it is 1 MiB (``B``) there unless a test asks for bigger ones. Boundary cases:
0 bytes, 1, B - 1, B, B + 1, several blocks and a short last one.

As in test_hedged_reads.py, tests that count hedges use a 1 s threshold against faults of 5 s (or
a frozen process); the counters prove the hedge, and the only time bound is the fault itself (the
read did not wait it out); nothing waits on time in place of synchronisation (``wait_until`` polls
what a user could check).
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
import urllib.request

import pytest
from conftest import PausingSource, assert_one_line_error, pattern, run_cli, start_cluster, wait_until
from durability_support import fsck, report, restore, temp_units, unit_file

from hedgefs.client.config import HedgeConfig
from hedgefs.client.errors import DataUnavailable
from hedgefs.client.fs import FileSystem
from hedgefs.proto import hedgefs_pb2 as pb

B = 1 << 20                       # a replicated block on these clusters
THRESHOLD_MS = 1000
COUNTED = HedgeConfig(threshold_ms=THRESHOLD_MS)
NO_HEDGE = HedgeConfig(enabled=False)


def replicas(fs: FileSystem, path: str) -> list[list[str]]:
    """Per block, the DataNodes of its live replicas in index order."""
    return [[g.units[i].datanode_id for i in sorted(g.units)] for g in fs.stat(path).groups]


# ---------------------------------------------------------------------------- healthy cluster


@pytest.mark.parametrize("n, sizes", [(3, [0, 1, B - 1, B, B + 1, 3 * B + 7]), (1, [B + 1])])
def test_round_trips_at_block_boundaries(fs, n, sizes):
    fs.mkdir("/rep/rt", parents=True)
    for size in sizes:
        path, data = f"/rep/rt/n{n}-{size}", pattern(size, seed=size % 97)
        assert fs.write_bytes(path, data, policy=f"REPLICATE-{n}") == size
        st = fs.stat(path)
        assert st.policy == f"REPLICATE-{n}" and st.length == size and st.block_size == B
        assert [g.length for g in st.groups] == [min(B, size - i) for i in range(0, size, B)]
        for holders in replicas(fs, path):
            assert len(holders) == len(set(holders)) == n, holders   # n distinct DataNodes
        assert fs.read_bytes(path) == data
        with fs.open(path) as f:   # ranges across every block boundary, and the last byte
            for offset in [b + d for b in range(0, size + 1, B) for d in (-1, 0, 1)] + [size - 1]:
                if 0 <= offset < size:
                    assert f.pread(offset, 3) == data[offset:offset + 3]
            assert f.pread(1, size) == data[1:]


def test_cli_put_stat_fsck_and_status_page_show_replicas(cluster, tmp_path):
    nn = cluster.namenode
    data = bytes(range(256)) * 5000 + b"\xff\xfe"   # not UTF-8, 1.2 blocks
    assert run_cli("mkdir", "-p", "/rep/cli", namenode=nn).code == 0
    put = run_cli("put", "--policy", "REPLICATE-2", "-", "/rep/cli/f", namenode=nn, input=data)
    assert put.code == 0, put.stderr
    assert run_cli("cat", "/rep/cli/f", namenode=nn).stdout == data

    doc = json.loads(run_cli("stat", "--json", "/rep/cli/f", namenode=nn).stdout)
    assert doc["policy"] == "REPLICATE-2" and doc["replication"] == 2 and "groups" not in doc
    assert [b["length"] for b in doc["blocks"]] == [B, len(data) - B]
    for block in doc["blocks"]:
        holders = [r["datanode"] for r in block["replicas"]]
        assert len(set(holders)) == 2 and sorted(r["index"] for r in block["replicas"]) == [0, 1]
    text = run_cli("stat", "/rep/cli/f", namenode=nn).stdout.decode()
    assert f"block {doc['blocks'][0]['id']}: {B} bytes, 2 of 2 replicas live" in text
    assert run_cli("put", "-", "/rep/cli/ec", namenode=nn, input=b"x" * 1000).code == 0
    ec = json.loads(run_cli("stat", "--json", "/rep/cli/ec", namenode=nn).stdout)
    assert "blocks" not in ec and len(ec["groups"][0]["units"]) == 9   # EC files keep their fields

    listing = run_cli("ls", "/rep/cli", namenode=nn).stdout.decode()
    assert "REPLICATE-2" in listing and "RS-6-3-64k" in listing
    policies = run_cli("ec", "list-policies").stdout.decode()
    assert "REPLICATE-3    3 replicas of every block, tolerates 2 lost DataNodes, 3.00 bytes on disk per byte" in policies
    assert "RS-6-3-1024k   6 data + 3 parity units, 1024 KiB cells, tolerates 3 lost DataNodes, 1.50" in policies
    assert json.loads(run_cli("fsck", "--json", "/rep/cli", namenode=nn).stdout)["status"] == "HEALTHY"

    with urllib.request.urlopen(f"{cluster.http_url}api/files/rep/cli/f", timeout=10) as r:
        page = json.load(r)
    assert page["info"]["entry"]["policy"] == "REPLICATE-2" and len(page["info"]["groups"]) == 2
    with urllib.request.urlopen(f"{cluster.http_url}files/rep/cli/f", timeout=10) as r:
        html = r.read().decode()
    assert f"Block {doc['blocks'][0]['id']} " in html and "2 of 2 replicas" in html and "<td>replica</td>" in html


def test_checksum_concat_and_distcp_across_layouts(cluster, fs, tmp_path):
    nn = cluster.namenode
    data = pattern(2 * B + 12345, seed=5)
    local = tmp_path / "local.bin"
    local.write_bytes(data)
    fs.mkdir("/rep/sum", parents=True)
    fs.write_bytes("/rep/sum/r3", data, policy="REPLICATE-3")
    fs.write_bytes("/rep/sum/ec", data)
    out = run_cli("checksum", "/rep/sum/r3", "/rep/sum/ec", f"file://{local}", namenode=nn)
    assert out.code == 0, out.stderr
    crcs = {line.split()[1] for line in out.stdout.decode().splitlines()}
    assert len(crcs) == 1, out.stdout   # the same bytes: the same checksum, whatever the layout

    # Concat of replicated parts: every part but the last ends on a block boundary.
    fs.write_bytes("/rep/sum/p1", data[:B], policy="REPLICATE-3")
    fs.write_bytes("/rep/sum/p2", data[B:], policy="REPLICATE-3")
    fs.concat("/rep/sum/joined", ["/rep/sum/p1", "/rep/sum/p2"])
    assert fs.read_bytes("/rep/sum/joined") == data and fs.stat("/rep/sum/joined").policy == "REPLICATE-3"

    # distcp turns RS-6-3 into REPLICATE-3 (--policy), checked by the checksum it compares.
    copy = run_cli("distcp", "--policy", "REPLICATE-3", "/rep/sum/ec", "/rep/sum/copied", namenode=nn)
    assert copy.code == 0, copy.stderr
    assert fs.stat("/rep/sum/copied").policy == "REPLICATE-3" and fs.read_bytes("/rep/sum/copied") == data


class Reader(threading.Thread):
    """Reads a file over and over while conversions run: fresh opens (whole file), and one long-
    lived open file (random ranges) whose layout changes under it. Every byte is checked."""

    def __init__(self, nn: str, path: str, data: bytes):
        super().__init__(daemon=True)
        self.nn, self.path, self.data = nn, path, data
        self.stop, self.reads, self.errors = threading.Event(), 0, []
        self.policies_seen: set[str] = set()
        self.long_lived = None

    def run(self) -> None:
        rng = random.Random(7)
        try:
            with FileSystem(self.nn) as fs, fs.open(self.path) as f:
                self.long_lived = f
                while not self.stop.is_set():
                    offset = rng.randrange(len(self.data))
                    n = rng.randrange(1, 2 * B)
                    if f.pread(offset, n) != self.data[offset:offset + n]:
                        self.errors.append(f"long-lived pread [{offset}, +{n}) under {f.status.policy}: wrong bytes")
                    with fs.open(self.path) as fresh:
                        self.policies_seen.add(fresh.status.policy)
                        if b"".join(bytes(c) for c in fresh.chunks()) != self.data:
                            self.errors.append(f"whole read under {fresh.status.policy}: wrong bytes")
                    self.reads += 2
        except Exception as err:  # noqa: BLE001 - reported by the test
            self.errors.append(f"{type(err).__name__}: {err}")


def old_units_gone(cluster, group_ids: set[int]) -> bool:
    """No DataNode's disk holds a unit of these (replaced) groups any more."""
    return not any(p.name.split("_")[0] in {str(g) for g in group_ids}
                   for dn in cluster.datanode_ids for p in (cluster.root / dn / "blocks").glob("*/*.blk"))


def test_convert_both_ways_with_a_concurrent_reader(cluster, fs):
    nn, path = cluster.namenode, "/rep/conv/f"
    data = pattern(3 * B + 4321, seed=9)
    fs.mkdir("/rep/conv", parents=True)
    fs.write_bytes(path, data)                     # the cluster default: RS-6-3-64k
    before = fs.stat(path)
    reader = Reader(nn, path, data)
    reader.start()
    try:
        for policy in ("REPLICATE-3", "RS-3-2-64k"):
            old_groups = {g.id for g in fs.stat(path).groups}
            reads = reader.reads
            wait_until(lambda: reader.reads >= reads + 2 or reader.errors, 60, "reads before the conversion")
            result = run_cli("ec", "convert", path, "--policy", policy, namenode=nn)
            assert result.code == 0, result.stderr
            st = fs.stat(path)
            assert (st.policy, st.length, st.mtime_ms) == (policy, before.length, before.mtime_ms)
            # The old layout's units go from the disks while the long-lived reader still holds
            # it: its next read must find the new layout, not fail and not mix the two.
            wait_until(lambda: old_units_gone(cluster, old_groups), 30, f"{sorted(old_groups)} deleted")
            reads = reader.reads
            wait_until(lambda: reader.reads >= reads + 4 or reader.errors, 60, "reads after the conversion")
            assert not reader.errors, reader.errors
            assert reader.long_lived.status.policy == policy   # it followed the conversion
    finally:
        reader.stop.set()
        reader.join(60)
    assert not reader.errors, reader.errors
    assert reader.policies_seen >= {"RS-6-3-64k", "REPLICATE-3", "RS-3-2-64k"}
    assert fs.read_bytes(path) == data
    assert fsck(fs, "/rep/conv").status == "HEALTHY"


def test_convert_trees_and_refusals(cluster, fs):
    nn = cluster.namenode
    fs.mkdir("/rep/tree/sub", parents=True)
    files = {"/rep/tree/a": pattern(10, seed=1), "/rep/tree/sub/b": pattern(B + 1, seed=2),
             "/rep/tree/sub/c": pattern(5, seed=3)}
    for p, d in files.items():
        fs.write_bytes(p, d, policy="REPLICATE-2" if p.endswith("c") else None)

    def snapshot():
        return [(e.path, e.policy, e.length, e.mtime_ms) for e in fs.list("/rep/tree", recursive=True)]

    before = snapshot()
    assert_one_line_error(run_cli("ec", "convert", "/rep/tree", "--policy", "REPLICATE-2", namenode=nn),
                          "/rep/tree is a directory: use -r")
    assert_one_line_error(run_cli("ec", "convert", "/rep/tree/sub/c", "--policy", "replicate-2", namenode=nn),
                          "/rep/tree/sub/c is already REPLICATE-2: nothing to convert")
    assert_one_line_error(run_cli("ec", "convert", "/rep/tree/a", "--policy", "REPLICATE-9", namenode=nn),
                          "REPLICATE-<n> keeps 1 to 5 replicas")
    assert snapshot() == before   # the refusals changed nothing

    result = run_cli("ec", "convert", "-r", "/rep/tree", "--policy", "REPLICATE-2", namenode=nn)
    assert result.code == 0, result.stderr
    assert "converted 2 of 3 files under /rep/tree to REPLICATE-2 (1 were already)" in result.stderr
    assert {e.path: e.policy for e in fs.list("/rep/tree", recursive=True) if not e.is_dir} == \
        dict.fromkeys(files, "REPLICATE-2")
    assert fs.get_policy("/rep/tree").policy == "REPLICATE-2"
    for p, d in files.items():
        assert fs.read_bytes(p) == d
    assert_one_line_error(run_cli("ec", "convert", "-r", "/rep/tree", "--policy", "REPLICATE-2", namenode=nn),
                          "every file under it are already REPLICATE-2")


# ---------------------------------------------------------------------------- faults


@pytest.fixture(scope="module")
def rcluster(tmp_path_factory):
    c = start_cluster(tmp_path_factory.mktemp("replication"))
    yield c
    c.down()


@pytest.fixture
def rfs(rcluster):
    """The faults cluster, every process up, no fault set, fsck HEALTHY."""
    for dn in rcluster.datanode_ids:
        if rcluster.process_state(dn) == "running":
            rcluster.datanode_rpc(dn, "ClearFaults", pb.FaultClearRequest())
    with FileSystem(rcluster.namenode) as fs:
        restore(rcluster, fs)
        fs.mkdir("/r", parents=True)
        yield fs
    for dn in rcluster.datanode_ids:
        if rcluster.process_state(dn) == "frozen":
            rcluster.thaw(dn)


def writing(cluster, at_least: int) -> list[str]:
    """DataNodes with an unfinished unit of at least ``at_least`` bytes so far."""
    out = []
    for dn in cluster.datanode_ids:
        sizes = []
        for p in temp_units(cluster, dn):
            try:
                sizes.append(p.stat().st_size)
            except FileNotFoundError:
                pass
        if any(size >= at_least for size in sizes):
            out.append(dn)
    return out


def test_replica_datanode_killed_during_put_then_re_replicated(rcluster, rfs):
    path, block = "/r/killed-mid-put", 4 * B
    data = pattern(2 * block + B // 2, seed=31)
    source = PausingSource(data, block + 3 * B)          # the second block is being written, 2 or 3 cells in
    outcome = {}
    put = threading.Thread(target=lambda: outcome.setdefault(
        "result", _try(lambda: rfs.write(path, source, policy="REPLICATE-3", block_size=block))), daemon=True)
    put.start()
    assert source.reached.wait(60), "the put never got to the pause point"
    trio = wait_until(lambda: (lambda w: w if len(w) == 3 else None)(writing(rcluster, 2 * B)), 20,
                      "3 DataNodes holding cells of the second block",
                      detail=lambda: str({dn: temp_units(rcluster, dn) for dn in rcluster.datanode_ids}))
    victim = trio[0]
    rcluster.kill(victim)
    source.go.set()
    put.join(120)
    assert outcome["result"] == ("ok", len(data)), outcome   # 2 of 3 replicas stored: enough (--min-replicas 2)
    assert rfs.read_bytes(path) == data
    # Re-replication restores 3 replicas of every block, none on the victim.
    wait_until(lambda: fsck(rfs, path).status == "HEALTHY", 60, "re-replication (fsck HEALTHY)",
               detail=lambda: str(fsck(rfs, path)))
    for holders in replicas(rfs, path):
        assert len(set(holders)) == 3 and victim not in holders, holders
    with FileSystem(rcluster.namenode, hedge=NO_HEDGE) as fresh:
        assert fresh.read_bytes(path) == data
        assert fresh.stats().counters["unit_read_errors"] == 0


def _try(action):
    try:
        return "ok", action()
    except Exception as err:  # noqa: BLE001 - handed to the test
        return "error", repr(err)


def test_n_minus_1_replicas_killed_reads_exact_bytes_and_re_replicates(rcluster, rfs):
    nn, path = rcluster.namenode, "/r/two-of-three"
    data = pattern(2 * B + 99, seed=32)
    rfs.write_bytes(path, data, policy="REPLICATE-3")
    first = replicas(rfs, path)[0]
    for dn in first[:2]:                            # block 0 keeps one replica; others at least one
        rcluster.kill(dn)
    with FileSystem(nn, hedge=NO_HEDGE) as reader:
        assert reader.read_bytes(path) == data
        assert reader.stats().counters["replica_failovers"] >= 1   # moved on to the next replica
    got = run_cli("cat", path, namenode=nn)
    assert got.code == 0 and got.stdout == data, got.stderr
    for dn in first[:2]:
        wait_until(lambda: report(rfs)[dn].state == "dead", 20, f"{dn} declared dead")
    wait_until(lambda: fsck(rfs, path).status == "HEALTHY", 60, "re-replication after 2 losses",
               detail=lambda: str(fsck(rfs, path)))
    for holders in replicas(rfs, path):
        assert len(set(holders)) == 3 and not set(holders) & set(first[:2]), holders
    assert rfs.read_bytes(path) == data
    gids = {g.id for g in rfs.stat(path).groups}
    rfs.delete(path)                                # deletes reach every replica...
    for dn in first[:2]:                            # ...the killed DataNodes' too, once they are back
        rcluster.start(dn)
    wait_until(lambda: old_units_gone(rcluster, gids), 30, "the deleted file's replicas gone from the disks")


def test_one_replica_5s_slow_hedged_read_wins(rcluster, rfs):
    nn, path = rcluster.namenode, "/r/slow"
    data = pattern(B // 2, seed=33)                 # one block: one read, one hedge
    rfs.write_bytes(path, data, policy="REPLICATE-3")
    first = replicas(rfs, path)[0][0]              # what a new client asks first (nothing known yet)
    rcluster.datanode_rpc(first, "SetFaults", pb.FaultConfig(read_delay_ms=5000))
    before = rcluster.datanode_rpc(first, "GetFaults", pb.FaultClearRequest()).cancelled_reads
    start = time.monotonic()
    result = run_cli("cat", "--stats", "--hedge-threshold-ms", str(THRESHOLD_MS), path, namenode=nn)
    elapsed = time.monotonic() - start
    assert result.code == 0 and result.stdout == data, result.stderr
    assert elapsed < 5.0, f"hedged cat took {elapsed:.2f} s: it waited out {first}'s +5 s"
    assert "hedges=1 hedge_wins=1" in result.stderr, result.stderr
    assert f"{first}: unit_reads=0" in result.stderr and "overdue=1" in result.stderr, result.stderr
    wait_until(lambda: rcluster.datanode_rpc(first, "GetFaults", pb.FaultClearRequest()).cancelled_reads > before,
               10, f"{first} to see the losing read cancelled")


def test_frozen_replica_is_hedged_including_connect(rcluster, rfs):
    nn, path = rcluster.namenode, "/r/frozen"
    data = pattern(B // 2, seed=34)
    rfs.write_bytes(path, data, policy="REPLICATE-3")
    first = replicas(rfs, path)[0][0]
    rcluster.freeze(first)                          # SIGSTOP: TCP connects, nothing answers
    start = time.monotonic()
    result = run_cli("cat", "--stats", "--hedge-threshold-ms", str(THRESHOLD_MS), path, namenode=nn)
    elapsed = time.monotonic() - start
    assert result.code == 0 and result.stdout == data, result.stderr
    # unhedged, a frozen replica is waited on for the unit-read timeout (60 s)
    assert elapsed < 30.0, f"cat with {first} frozen took {elapsed:.2f} s"
    assert "hedges=1 hedge_wins=1" in result.stderr, result.stderr


def test_fastest_first_after_a_few_reads_of_a_2s_slow_replica(rcluster, rfs):
    """The adaptive default (latency model): the first read asks replica 0 (nothing is known
    yet), is hedged and the hedge wins; from then on reads ask the fast replicas first, so the
    slow DataNode's reads stop going overdue although every read of the block could go to it."""
    path, reads = "/r/fastest-first", 20
    data = pattern(B, seed=36)
    rfs.write_bytes(path, data, policy="REPLICATE-3")
    slow = replicas(rfs, path)[0][0]                # what a new client asks first
    rcluster.datanode_rpc(slow, "SetFaults", pb.FaultConfig(read_delay_ms=2000))
    rng = random.Random(36)
    with FileSystem(rcluster.namenode) as reader, reader.open(path) as f:   # auto threshold
        for _ in range(reads):
            offset = rng.randrange(0, B - 65536)
            assert f.pread(offset, 65536) == data[offset:offset + 65536]
        stats = reader.stats()
    assert stats.counters["hedge_wins"] >= 1, stats.counters
    # Asked first (and so overdue) by the first read or two, not by the other 18 or more.
    assert 1 <= stats.per_datanode[slow]["overdue"] <= 2, (slow, stats.per_datanode)


def test_breaker_open_refuses_replica_hedges_and_counts_it(rcluster, rfs):
    """A fixed threshold with no impaired DataNode allowed: the first overdue read trips the
    breaker, the hedge is refused (counted) and the read waits for its slow replica."""
    path = "/r/breaker"
    data = pattern(B // 4, seed=37)
    rfs.write_bytes(path, data, policy="REPLICATE-3")
    slow = replicas(rfs, path)[0][0]
    rcluster.datanode_rpc(slow, "SetFaults", pb.FaultConfig(read_delay_ms=1500))
    strict = HedgeConfig(threshold_ms=200, max_impaired_nodes=0)
    with FileSystem(rcluster.namenode, hedge=strict) as reader:
        assert reader.read_bytes(path) == data
        stats = reader.stats()
    c = stats.counters
    assert (c["hedges"], c["hedges_refused_breaker"], stats.breaker_trips) == (0, 1, 1), (c, stats.breaker_trips)
    assert stats.per_datanode[slow]["unit_reads"] == 1      # its answer, late, was the one used


def test_corrupt_replica_is_read_around_reported_and_replaced(rcluster, rfs):
    path = "/r/corrupt"
    data = pattern(B - 10, seed=35)
    rfs.write_bytes(path, data, policy="REPLICATE-3")
    gid = rfs.stat(path).groups[0].id
    bad_dn = replicas(rfs, path)[0][0]
    blk = unit_file(rcluster, bad_dn, gid, 0)
    original = blk.read_bytes()
    with open(blk, "r+b") as f:                     # flip bytes in the middle of replica 0, on disk
        f.seek(len(original) // 2)
        f.write(bytes(b ^ 0xFF for b in original[len(original) // 2:len(original) // 2 + 16]))
    with FileSystem(rcluster.namenode, hedge=NO_HEDGE) as reader:
        assert reader.read_bytes(path) == data      # the checksum fails; the next replica answers
        counters = reader.stats().counters
    assert counters["checksum_failures"] == 1 and counters["replica_failovers"] == 1
    wait_until(lambda: bad_dn not in replicas(rfs, path)[0] and fsck(rfs, path).status == "HEALTHY", 30,
               "the corrupt replica replaced", detail=lambda: f"{replicas(rfs, path)}, {fsck(rfs, path)}")
    wait_until(lambda: not blk.exists(), 30, f"the corrupt copy deleted from {bad_dn}")
    for index, u in rfs.stat(path).groups[0].units.items():   # every replica, the new one included
        assert unit_file(rcluster, u.datanode_id, gid, index).read_bytes() == original


def test_convert_killed_midway_leaves_the_old_file(rcluster, rfs):
    nn, path = rcluster.namenode, "/r/conv/big"
    data = pattern(12 * B, seed=36)
    rfs.mkdir("/r/conv")
    rfs.write_bytes(path, data, policy="REPLICATE-2")
    before = rfs.stat(path)
    for dn in rcluster.datanode_ids:                # slow reads: the conversion takes a while
        rcluster.datanode_rpc(dn, "SetFaults", pb.FaultConfig(bandwidth_bps=2 * B))
    env = dict(os.environ, HEDGEFS_NAMENODE=nn)
    proc = subprocess.Popen([sys.executable, "-m", "hedgefs", "ec", "convert", path, "--policy", "RS-6-3-64k"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    try:
        # Mid-way: the new layout's units are being written on the DataNodes.
        wait_until(lambda: proc.poll() is not None or any(temp_units(rcluster, dn) for dn in rcluster.datanode_ids),
                   60, "the conversion to start writing")
        assert proc.poll() is None, proc.communicate()
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
    finally:
        if proc.poll() is None:
            proc.kill()
        for dn in rcluster.datanode_ids:
            rcluster.datanode_rpc(dn, "ClearFaults", pb.FaultClearRequest())
    after = rfs.stat(path)
    assert (after.policy, after.length, after.mtime_ms, [g.id for g in after.groups]) == \
        (before.policy, before.length, before.mtime_ms, [g.id for g in before.groups])
    assert [e.path for e in rfs.list("/r/conv")] == [path]  # nothing else became visible
    assert rfs.read_bytes(path) == data


# ---------------------------------------------------------------------------- a small cluster


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    """Four DataNodes: REPLICATE-5 cannot be placed, and three losses take every replica."""
    c = start_cluster(tmp_path_factory.mktemp("small"), datanodes=4)
    yield c
    c.down()


def test_bad_replication_input_is_one_line_exit_2_and_changes_nothing(small, tmp_path):
    nn = small.namenode
    local = tmp_path / "f"
    local.write_bytes(b"hello")
    assert run_cli("mkdir", "/d", namenode=nn).code == 0
    assert run_cli("put", "--policy", "REPLICATE-2", str(local), "/d/f", namenode=nn).code == 0

    def state():
        return (run_cli("ls", "-R", "/", namenode=nn).stdout, run_cli("ec", "get-policy", "/d", namenode=nn).stdout,
                run_cli("stat", "--json", "/d/f", namenode=nn).stdout)

    before = state()
    cases = [
        (["ec", "set-policy", "/d", "REPLICATE-0"], "bad policy 'REPLICATE-0': REPLICATE-<n> keeps 1 to 5 replicas (got 0)"),
        (["ec", "set-policy", "/d", "REPLICATE-9"], "bad policy 'REPLICATE-9': REPLICATE-<n> keeps 1 to 5 replicas (got 9)"),
        (["put", "--policy", "REPLICATE-0", str(local), "/d/g"], "REPLICATE-<n> keeps 1 to 5 replicas"),
        (["ec", "set-policy", "/d", "REPLICATE-5"], "policy REPLICATE-5 needs 5 live DataNodes, only 4 are live"),
        (["put", "--policy", "REPLICATE-5", str(local), "/d/g"], "policy REPLICATE-5 needs 5 live DataNodes, only 4 are live"),
        (["ec", "convert", "/d/f", "--policy", "REPLICATE-5"], "policy REPLICATE-5 needs 5 live DataNodes, only 4 are live"),
        (["ec", "convert", "/d", "--policy", "REPLICATE-3"], "/d is a directory: use -r to convert every file under it"),
        (["ec", "convert", "/d/f", "--policy", "REPLICATE-2"], "/d/f is already REPLICATE-2: nothing to convert"),
    ]
    for args, message in cases:
        result = run_cli(*args, namenode=nn)
        assert result.code == 2, (args, result.code, result.stderr)
        assert_one_line_error(result, message)
    assert state() == before


def test_all_replicas_lost_is_a_clean_data_unavailable(small, tmp_path):
    """Every replica of a file's last block killed. Reads of that block fail cleanly at once; once
    the NameNode knows, cat and get refuse before writing a byte (the earlier blocks, which may
    still live, are never sent out as if they were the file)."""
    nn = small.namenode
    data = pattern(8 * B + 500, seed=41)            # 9 blocks: more than one chunk of a cat
    with FileSystem(nn) as fs:
        fs.mkdir("/lost", parents=True)
        fs.write_bytes("/lost/big", data, policy="REPLICATE-3")
        victims = replicas(fs, "/lost/big")[-1]
    try:
        for dn in victims:
            small.kill(dn)
        with FileSystem(nn, hedge=NO_HEDGE) as fs, fs.open("/lost/big") as f:
            with pytest.raises(DataUnavailable, match=r"^data unavailable: "):
                f.pread(8 * B, 10)
        result = run_cli("get", "/lost/big", str(tmp_path / "copy"), namenode=nn)
        assert result.code == 1 and not (tmp_path / "copy").exists(), result
        assert_one_line_error(result, "data unavailable")
        with FileSystem(nn) as fs:
            wait_until(lambda: fsck(fs, "/lost").status == "CORRUPT", 30, "fsck CORRUPT")
        for verb in (["cat", "/lost/big"], ["get", "/lost/big", "-"]):
            result = run_cli(*verb, namenode=nn)
            assert result.code == 1 and result.stdout == b"", (verb, result.code, len(result.stdout))
            assert_one_line_error(result, "data unavailable: /lost/big: block", "has no live replica (of 3)")
    finally:
        for dn in victims:
            small.start(dn)
