"""Replicated files (REPLICATE-n) under faults on their own clusters: a replica DataNode killed
during a put, n - 1 replicas lost, slow, frozen and corrupt replicas hedged or read around, a
convert killed midway, and bad input (see test_replication.py for the block sizes and thresholds)."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import threading
import time

import pytest
from conftest import PausingSource, assert_one_line_error, pattern, run_cli, start_cluster, wait_until
from durability_support import fsck, report, restore, temp_units, unit_file, writing
from replication_support import NO_HEDGE, THRESHOLD_MS, B, old_units_gone, replicas

from hedgefs.client.config import HedgeConfig
from hedgefs.client.errors import DataUnavailable
from hedgefs.client.fs import FileSystem
from hedgefs.proto import hedgefs_pb2 as pb


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


def test_replica_datanode_killed_during_put_then_re_replicated(rcluster, rfs):
    path, block = "/r/killed-mid-put", 4 * B
    data = pattern(2 * block + B // 2, seed=31)
    source = PausingSource(data, block + 3 * B)          # the second block is being written, 2 or 3 cells in
    outcome = {}
    put = threading.Thread(target=lambda: outcome.setdefault(
        "result", _try(lambda: rfs.write(path, source, policy="REPLICATE-3", block_size=block))), daemon=True)
    put.start()
    assert source.reached.wait(60), "the put never got to the pause point"
    two_cells_in = lambda sizes: any(n >= 2 * B for n in sizes)     # noqa: E731
    trio = wait_until(lambda: (lambda w: w if len(w) == 3 else None)(writing(rcluster, two_cells_in)), 20,
                      "3 DataNodes holding cells of the second block",
                      detail=lambda: str({dn: temp_units(rcluster, dn) for dn in rcluster.datanode_ids}))
    victim = trio[0]
    rcluster.kill(victim)
    source.go.set()
    put.join(120)
    assert outcome["result"] == ("ok", len(data)), outcome   # 2 of 3 replicas stored: enough (--min-replicas 2)
    assert rfs.read_bytes(path) == data
    # Re-replication restores 3 replicas of every block, none on the victim. (fsck may say
    # HEALTHY before the NameNode declares the victim dead, 3 s after the kill: its replicas of
    # the first block count until then; a quiet fresh-clone run got there first.)
    restored = lambda: all(len(set(h)) == 3 and victim not in h for h in replicas(rfs, path))   # noqa: E731
    wait_until(lambda: fsck(rfs, path).status == "HEALTHY" and restored(), 60,
               "re-replication (fsck HEALTHY, no replica on the victim)",
               detail=lambda: f"{fsck(rfs, path)} {replicas(rfs, path)}")
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
    result = run_cli("cat", "--stats", "--hedge-threshold-ms", str(THRESHOLD_MS), path, namenode=nn)
    assert result.code == 0 and result.stdout == data, result.stderr
    # The hedge won and the slow read never finished: the cat did not wait out the +5 s (counted,
    # not timed: a loaded host's cat took 5.1 s, start-up included, with the hedge winning).
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
        rcluster.datanode_rpc(dn, "SetFaults", pb.FaultConfig(bandwidth_bps=B // 4))   # 2 * B: done before seen, once
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
