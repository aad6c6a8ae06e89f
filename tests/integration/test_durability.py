"""Durability and self-repair on real processes (issue 4), one test per scenario.

Every scenario runs against real NameNode and DataNode processes (the launcher behind
`hedgefs cluster`), RS-6-3-64k with 256 KiB internal blocks on 10 DataNodes, heartbeats every
0.3 s and a 3 s dead interval. Scenarios that leave the cluster healthy share one cluster; the
`dfs` fixture puts back whatever a scenario left killed or frozen and waits for fsck HEALTHY.

Nothing here sleeps in place of synchronisation: waits are `wait_until(predicate, timeout,
what)` with wide deadlines, and a put is paused mid-group by a source that blocks (library) or
by a pipe the test feeds (CLI) while the test watches the DataNodes' temp files to know which
units are being written at that moment.
"""

from __future__ import annotations

import dataclasses
import io
import itertools
import threading
import time

import pytest
from conftest import (
    CELL,
    GROUP,
    POLICY,
    STRIPE,
    PausingSource,
    Result,
    assert_one_line_error,
    client,
    data_socket,
    pattern,
    run_cli,
    start_cluster,
    wait_until,
)
from durability_support import (
    NO_HEDGE,
    BackgroundPut,
    PipedPut,
    assert_invisible,
    fsck,
    fsck_cli,
    holders,
    report,
    report_cli,
    restore,
    settled,
    stat_cli,
    stored_units,
    temp_units,
    unit_file,
    unit_names,
    wait_mid_group,
)

from hedgefs.client.errors import HedgefsError, NotFound, Unavailable
from hedgefs.client.fs import FileSystem
from hedgefs.ec.layout import zero_units
from hedgefs.ec.policy import parse_policy


@pytest.fixture(scope="module")
def shared_cluster(tmp_path_factory, security):
    c = start_cluster(tmp_path_factory.mktemp("durability"), security)
    yield c
    c.down()


@pytest.fixture
def dfs(shared_cluster):
    """The shared cluster, every process up and fsck HEALTHY."""
    with FileSystem(shared_cluster.namenode, credentials=shared_cluster.credentials) as fs:
        restore(shared_cluster, fs)
    return shared_cluster


@pytest.fixture
def fs(dfs):
    with FileSystem(dfs.namenode, credentials=dfs.credentials) as f:
        for directory in ("/repair", "/space", "/writes", "/stream"):
            f.mkdir(directory, parents=True)
        yield f


# ---------------------------------------------------------------------------- scenarios


def test_lost_datanode_is_repaired_onto_the_spare_and_then_any_3_more_losses_read_exactly(dfs, fs, tmp_path):
    nn, path = dfs.namenode, "/repair/one-lost"
    data = pattern(GROUP - 2 * CELL - 4321, seed=11)  # one group, ending in a short stripe
    put = run_cli("put", "-", path, namenode=nn, input=data)
    assert put.code == 0, put.stderr
    doc = stat_cli(nn, path)
    (group,) = doc["groups"]
    gid, before = group["id"], {u["index"]: u["datanode"] for u in group["units"]}
    assert len(set(before.values())) == 9
    (spare,) = set(dfs.datanode_ids) - set(before.values())
    victim = before[0]  # a data unit: every plain read of the file needs it
    original = unit_file(dfs, victim, gid, 0).read_bytes()

    # Freeze the spare first: the repair cannot start until we thaw it, so DEGRADED is observable.
    dfs.freeze(spare)
    dfs.kill(victim)
    wait_until(lambda: fsck(fs).status == "DEGRADED", 20, "fsck DEGRADED after the kill")
    degraded = fsck_cli(nn)
    assert degraded["status"] == "DEGRADED" and degraded["missing"] == 0, degraded
    assert {"path": path, "group": gid, "policy": "RS-6-3-64k", "live_units": 8, "corrupt_units": 0, "needed_units": 6,
            "total_units": 9, "status": "DEGRADED", "detail": ""} in degraded["problems"], degraded
    assert run_cli("cat", path, namenode=nn).stdout == data  # degraded still reads

    dfs.thaw(spare)
    wait_until(lambda: fsck(fs).status == "HEALTHY", 30, "repair onto the spare (fsck HEALTHY)",
               detail=lambda: str(fsck(fs)))
    healthy = fsck_cli(nn)
    assert healthy["status"] == "HEALTHY" and healthy["degraded"] == healthy["missing"] == 0, healthy
    after = {u["index"]: u["datanode"] for u in stat_cli(nn, path)["groups"][0]["units"]}
    assert after == {**before, 0: spare}, "unit 0 should now live on the spare, the rest unmoved"
    # The rebuilt unit is byte for byte what the dead DataNode held.
    assert unit_file(dfs, spare, gid, 0).read_bytes() == original

    # Any 3 further losses still read exactly: every pattern, by hiding units from the reader...
    status = fs.stat(path)
    g = status.groups[0]
    for gone in itertools.combinations(range(9), 3):
        crippled = dataclasses.replace(g, units={i: u for i, u in g.units.items() if i not in gone})
        got = fs.open(dataclasses.replace(status, groups=(crippled,))).pread(0, status.length)
        assert bytes(got) == data, f"lost units {gone}"
    # ...and for real: kill 3 more current holders, keeping the rebuilt unit among the 6 left.
    for index in (1, 2, 7):
        dfs.kill(after[index])
    out = tmp_path / "three-more-lost"
    got = run_cli("get", path, str(out), namenode=nn)
    assert got.code == 0, got.stderr
    assert out.read_bytes() == data

    # The DataNodes come back; the first victim's copy of unit 0 is now a stale extra: deleted.
    for index in (1, 2, 7):
        dfs.start(after[index])
    dfs.start(victim)
    dfs.wait_live(dfs.datanode_ids)
    wait_until(lambda: not unit_file(dfs, victim, gid, 0).exists(), 30, f"stale unit {gid}/0 deleted on {victim}")
    wait_until(lambda: fsck(fs).status == "HEALTHY", 30, "fsck HEALTHY with every DataNode back")
    assert holders(fs, path) == after


def test_corrupt_unit_on_disk_is_detected_reported_and_repaired(dfs, fs):
    nn, path = dfs.namenode, "/repair/corrupt"
    data = pattern(GROUP - 1000, seed=22)
    fs.write_bytes(path, data)
    gid = fs.stat(path).groups[0].id
    before = holders(fs, path)
    (spare,) = set(dfs.datanode_ids) - set(before.values())
    index, bad_dn = 1, before[1]
    blk = unit_file(dfs, bad_dn, gid, index)
    original = blk.read_bytes()
    with open(blk, "r+b") as f:  # flip 16 bytes in the middle of the unit, on disk
        f.seek(len(original) // 2)
        chunk = f.read(16)
        f.seek(len(original) // 2)
        f.write(bytes(b ^ 0xFF for b in chunk))

    # Detected on read: the checksum fails, the client rebuilds the cell and returns exact bytes.
    # (No hedging: on a loaded machine a hedge could win before the failure is even seen.)
    with client(nn, hedge=NO_HEDGE) as reader:
        assert reader.read_bytes(path) == data
        assert reader.stats().counters["rebuilt_on_failure"] >= 1
    # Reported and repaired: the unit leaves the corrupt DataNode, is rebuilt elsewhere, and the
    # corrupt copy is deleted from the disk.
    wait_until(lambda: holders(fs, path).get(index) not in (None, bad_dn) and fsck(fs).status == "HEALTHY",
               30, f"unit {gid}/{index} repaired away from {bad_dn}",
               detail=lambda: f"holders {holders(fs, path)}, fsck {fsck(fs).status}")
    new_dn = holders(fs, path)[index]
    assert new_dn == spare
    assert unit_file(dfs, new_dn, gid, index).read_bytes() == original
    wait_until(lambda: not blk.exists(), 30, f"corrupt copy of {gid}/{index} deleted on {bad_dn}")
    assert fsck_cli(nn)["status"] == "HEALTHY"
    # The new copy reads correctly through its DataNode (every chunk checked against its CRC32C)...
    from hedgefs.proto.datatransfer import read_range

    group = fs.stat(path).groups[0]
    with data_socket(nn, group.units[index]) as sock:
        assert bytes(read_range(sock, gid, index, 0, len(original), generation=group.generation,
                                token=group.units[index].token)) == original
    # ...and a fresh client reads the file without rebuilding anything.
    with client(nn, hedge=NO_HEDGE) as fresh:
        assert fresh.read_bytes(path) == data
        assert fresh.stats().counters["rebuilt_on_failure"] == 0


def test_rm_frees_space_on_the_datanodes(dfs, fs):
    nn, path = dfs.namenode, "/space/big"
    before = report_cli(nn)
    data = pattern(2 * GROUP + 3 * STRIPE + 77, seed=33)  # three groups, the last partial
    assert run_cli("put", "-", path, namenode=nn, input=data).code == 0
    doc = stat_cli(nn, path)
    stored = sum(u["length"] for g in doc["groups"] for u in g["units"])
    files = [unit_file(dfs, u["datanode"], g["id"], u["index"]) for g in doc["groups"] for u in g["units"]]
    assert all(f.exists() for f in files)
    total_before = sum(r["used_bytes"] for r in before.values())
    wait_until(lambda: sum(d.used_bytes for d in report(fs).values()) == total_before + stored, 20,
               "heartbeats to show the new file's bytes")

    assert run_cli("rm", path, namenode=nn).code == 0
    wait_until(lambda: all(report(fs)[dn].used_bytes == before[dn]["used_bytes"] for dn in before), 30,
               "used bytes back to the before-put level",
               detail=lambda: str({d: (r.used_bytes, before[d]["used_bytes"]) for d, r in report(fs).items()}))
    after = report_cli(nn)
    assert {dn: (r["used_bytes"], r["units"]) for dn, r in after.items()} == \
        {dn: (r["used_bytes"], r["units"]) for dn, r in before.items()}
    assert not [f for f in files if f.exists()], "unit files left on disk after rm"


def test_datanode_killed_in_the_middle_of_a_20mib_put(dfs, fs):
    nn, path = dfs.namenode, "/writes/dn-killed"
    data = pattern(21 * 1024 * 1024 + 12345, seed=44)
    pause_at = 5 * GROUP + 2 * STRIPE  # two stripes into the sixth group
    source = PausingSource(data, pause_at)
    put = BackgroundPut(fs, path, source)
    put.start()
    assert source.reached.wait(60), "the put never got to the pause point"
    writers = wait_mid_group(dfs)
    victim = writers[0]
    dfs.kill(victim)
    assert temp_units(dfs, victim), "the killed DataNode should have been mid-write"
    source.go.set()
    put.join(120)
    assert not put.is_alive()
    assert put.error is None, f"put failed: {put.error!r}"
    assert put.length == len(data)
    assert fs.read_bytes(path) == data
    got = run_cli("cat", path, namenode=nn)
    assert got.code == 0 and got.stdout == data, got.stderr

    # The missing units are rebuilt on the 9 live DataNodes (one of them is every group's spare),
    # those of the groups written before the kill once the NameNode has declared the victim dead.
    wait_until(lambda: report(fs)[victim].state == "dead", 20, f"{victim} declared dead")
    wait_until(lambda: fsck(fs, path).status == "HEALTHY", 60, "repair after the put (fsck HEALTHY)",
               detail=lambda: str(fsck(fs, path)))
    assert fsck_cli(nn, path)["status"] == "HEALTHY"
    for g in fs.stat(path).groups:   # (the last, of 12,345 bytes: units 0 and 6-8; 1-5 hold no byte)
        whole = 9 - len(zero_units(parse_policy(POLICY), g.length))
        assert len({u.datanode_id for u in g.units.values()}) == whole, f"group {g.id} is not whole again"
    assert fs.read_bytes(path) == data

    # A DataNode restart cleans the temp files of its unfinished writes.
    dfs.start(victim)
    assert not temp_units(dfs, victim)
    dfs.wait_live([victim])
    wait_until(lambda: fsck(fs).status == "HEALTHY", 30, "fsck HEALTHY with the DataNode back")
    assert fs.read_bytes(path) == data


def test_four_of_nine_killed_during_a_put_fails_cleanly_and_leaves_nothing(dfs, fs):
    nn, path = dfs.namenode, "/writes/four-killed"
    before = report_cli(nn)
    newest = max((gid for gid, _ in unit_names(dfs)), default=0)  # group ids only grow: the put's are above

    def the_puts_units() -> list[tuple[int, int]]:
        return sorted(name for name in unit_names(dfs).elements() if name[0] > newest)
    data = pattern(3 * GROUP + 2 * STRIPE, seed=55)
    put = PipedPut(nn, path)
    try:
        fed = 2 * GROUP + 2 * STRIPE  # stop feeding two stripes into the third group
        assert put.feed(data[:fed]), put.why()
        writers = wait_mid_group(dfs)
        assert len(the_puts_units()) == 18, "the first two groups should be finalized on 9 DataNodes each"
        victims = writers[:4]
        for dn in victims:
            dfs.kill(dn)
        put.feed(data[fed:])
        code, stderr = put.finish()
    finally:
        if put.proc.poll() is None:
            put.kill()
    # Bring the killed DataNodes back at once: the sooner they return, the less the NameNode
    # rebuilds of other files' units they hold (harmless, but it moves units around).
    for dn in victims:
        dfs.start(dn)
    assert_one_line_error(Result(code, b"", stderr), "write failed")
    assert "6 needed" in stderr, stderr
    assert_invisible(fs, nn, path)

    # Orphaned units (the first two groups were complete on every DataNode) are deleted: on the
    # live DataNodes at once, on the killed ones when they are back.
    dfs.wait_live(victims)
    wait_until(lambda: not the_puts_units() and not any(temp_units(dfs, dn) for dn in dfs.datanode_ids), 30,
               "the failed put's units deleted from every DataNode's disk", detail=lambda: str(the_puts_units()))
    # The admin report falls back with them. (Per DataNode it may differ from before: had the
    # killed DataNodes stayed away past the dead interval, units of other files were rebuilt
    # elsewhere and their returning copies deleted. In total it is the before-put level.)
    wait_until(lambda: settled(dfs, fs), 30, "admin report to agree with the disks")
    after = report_cli(nn)
    assert sum(r["units"] for r in after.values()) == sum(r["units"] for r in before.values())
    assert sum(r["used_bytes"] for r in after.values()) == sum(r["used_bytes"] for r in before.values())
    assert fsck(fs).status == "HEALTHY"
    assert_invisible(fs, nn, path)


def test_client_killed_mid_put_leaves_no_visible_file(dfs, fs):
    nn, path = dfs.namenode, "/writes/client-killed"
    data = pattern(2 * GROUP, seed=66)
    put = PipedPut(nn, path)
    try:
        assert put.feed(data[:GROUP + 2 * STRIPE]), put.why()
        wait_mid_group(dfs)
    finally:
        put.kill()
    assert_invisible(fs, nn, path)
    # The DataNodes drop the half-written units of the dead client's streams.
    wait_until(lambda: not any(temp_units(dfs, dn) for dn in dfs.datanode_ids), 20,
               "temp files of the dead client's writes removed")
    assert_invisible(fs, nn, path)


@pytest.mark.insecure_only("lease timing: no channel involved")
def test_a_slow_put_outlives_its_lease_but_a_killed_one_is_abandoned_and_cleaned(tmp_path, security):
    """The lease is 4 s here (renewed every 1.3 s: a loaded host missed a 2 s one). A `put -` fed
    at 60 KB/s for 10 s (two and a half leases) renews its lease while it writes and completes; a
    put killed mid-write stops renewing and is abandoned."""
    cluster = start_cluster(tmp_path / "lease", security, lease_timeout_s=4.0)
    try:
        with FileSystem(cluster.namenode, credentials=cluster.credentials) as fs:
            fs.mkdir("/lease")
            data = pattern(600_000, seed=76)
            put = PipedPut(cluster.namenode, "/lease/slow")
            started = time.monotonic()
            for offset in range(0, len(data), 10_000):   # pacing the input, not synchronising
                assert put.feed(data[offset:offset + 10_000]), put.why()
                time.sleep(max(0.0, started + (offset + 10_000) / 60_000 - time.monotonic()))
            code, err = put.finish()
            assert code == 0, err
            assert time.monotonic() - started > 2 * 4.0
            assert fs.read_bytes("/lease/slow") == data
            fs.delete("/lease/slow")

        nn, path = cluster.namenode, "/lease/client-killed"
        with client(nn) as fs:
            data = pattern(2 * GROUP, seed=77)
            put = PipedPut(nn, path)
            try:
                assert put.feed(data[:GROUP + 2 * STRIPE]), put.why()
                wait_mid_group(cluster)
                # The first group was finalized before the second started: 9 units on disk.
                assert len(stored_units(cluster)) == 9
            finally:
                put.kill()
            assert_invisible(fs, nn, path)
            wait_until(lambda: not stored_units(cluster) and not any(temp_units(cluster, dn)
                                                                     for dn in cluster.datanode_ids), 30,
                       "the dead writer's units deleted after its lease expired",
                       detail=lambda: str(stored_units(cluster)))
            wait_until(lambda: all(r.units == r.used_bytes == 0 for r in report(fs).values()), 10,
                       "admin report to show no units left")
            assert_invisible(fs, nn, path)
    finally:
        cluster.down()


def test_namenode_kill_9_during_a_stream_of_puts(dfs, fs):
    """A thread puts files in a loop (the kill lands wherever it lands) while a second put is held
    mid-stream (two groups in, its first group's units already on the DataNodes) at the kill."""
    nn = dfs.namenode
    outcomes: list[dict] = []
    stop = threading.Event()

    def put_one(client: FileSystem, path: str, size: int, seed: int, source=None) -> dict:
        sent = [0]
        entry = {"path": path, "size": size, "seed": seed, "ok": False, "in_doubt": False}
        try:
            client.write(path, source or io.BytesIO(pattern(size, seed=seed)),
                         progress=lambda n: sent.__setitem__(0, sent[0] + n))
            entry["ok"] = True
        except HedgefsError as err:
            entry["error"] = err
            # Only a Complete whose answer was lost can have taken effect: every byte was sent,
            # then the NameNode went away. Such a put is in doubt, as any RPC is.
            entry["in_doubt"] = sent[0] == size and isinstance(err, Unavailable)
        entry["done_at"] = time.monotonic()
        outcomes.append(entry)
        return entry

    def loop():
        with client(nn) as looping:
            for i in itertools.count():
                if stop.is_set():
                    return
                entry = put_one(looping, f"/stream/f{i}", (i * 97_531) % (GROUP + 3 * STRIPE) + 1, seed=i)
                if not entry["ok"]:
                    stop.wait(0.05)  # do not spin while the NameNode is down

    def successes(after: float = 0.0) -> int:
        return sum(1 for o in outcomes if o["ok"] and o["done_at"] > after)

    held_size = 2 * GROUP + STRIPE
    held = PausingSource(pattern(held_size, seed=1000), pause_at=GROUP + 2 * STRIPE)
    thread = threading.Thread(target=loop, daemon=True)
    thread.start()
    try:
        wait_until(lambda: successes() >= 5, 30, "5 puts to succeed before the kill")
        with client(nn) as holding:
            held_put = threading.Thread(target=put_one, args=(holding, "/stream/held", held_size, 1000, held),
                                        daemon=True)
            held_put.start()
            assert held.reached.wait(30), "the held put never got to its pause"
            dfs.kill("namenode")
            killed_at = time.monotonic()
            held.go.set()
            held_put.join(60)
            assert not held_put.is_alive()
        wait_until(lambda: any(not o["ok"] and o["done_at"] > killed_at and o["path"] != "/stream/held"
                               for o in outcomes), 30, "a put of the loop to fail while the NameNode is down")
        dfs.start("namenode")
        dfs.wait_live(dfs.datanode_ids)
        wait_until(lambda: successes(after=killed_at) >= 5, 60, "5 puts to succeed after the restart")
    finally:
        stop.set()
        held.go.set()
        thread.join(60)
    assert not thread.is_alive()

    ok = [o for o in outcomes if o["ok"]]
    failed = [o for o in outcomes if not o["ok"]]
    held_outcome = next(o for o in outcomes if o["path"] == "/stream/held")
    assert not held_outcome["ok"] and not held_outcome["in_doubt"], held_outcome
    with client(nn) as reader:
        for o in ok:
            assert reader.read_bytes(o["path"]) == pattern(o["size"], seed=o["seed"]), o["path"]
        visible = {e.path for e in reader.list("/stream")}
        for o in failed:
            if o["path"] in visible:
                assert o["in_doubt"], f"{o['path']} failed ({o['error']}) but is visible"
                assert reader.read_bytes(o["path"]) == pattern(o["size"], seed=o["seed"])
            else:
                with pytest.raises(NotFound):
                    reader.stat(o["path"])
        assert visible <= {o["path"] for o in outcomes}
        assert {o["path"] for o in ok} <= visible
        assert fsck(reader).status == "HEALTHY"
    assert_invisible(fs, nn, "/stream/held")
    assert fsck_cli(nn)["status"] == "HEALTHY"
