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
import random
import threading
import urllib.request

import pytest
from conftest import assert_one_line_error, pattern, run_cli, wait_until
from durability_support import fsck
from replication_support import B, old_units_gone, replicas

from hedgefs.client.fs import FileSystem


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
    assert "blocks" not in ec and len(ec["groups"][0]["units"]) == 4   # EC files keep their fields (1000
    # bytes of RS-6-3-64k: units 0, 6, 7, 8; units 1-5 hold no byte and are not stored)

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
