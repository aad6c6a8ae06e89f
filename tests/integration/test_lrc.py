"""LRC-6-2-2-64k on a real local cluster of 12 DataNodes (10 units + 2 spares).

Boundary sizes, each written and read back byte for byte (a cell is 64 KiB, a stripe 384 KiB, a
group 6 x 256 KiB = 1.5 MiB): 0, 1, cell - 1, cell, cell + 1, stripe - 1, stripe, stripe + 1,
group - 1, group, group + 1, two groups and a partial stripe.

Then one DataNode is lost and repaired, the surviving DataNodes sending exactly the bytes local
repair needs: 3 units per lost data or local parity unit (RS-6-3 would send 6), 6 per lost global
parity; and last (their repairs would muddy that count) 3 DataNodes of a group are killed and the
file still reads exactly.
"""

import re

import pytest

from conftest import assert_one_line_error, fetch, pattern, run_cli, start_cluster, wait_until
from hedgefs.ec import sources
from hedgefs.ec.layout import unit_length, zero_units
from hedgefs.ec.policy import Policy, parse_policy

POLICY = "LRC-6-2-2-64k"
P = parse_policy(POLICY)
BLOCK_SIZE = 256 * 1024
CELL, STRIPE, GROUP = P.cell_size, P.stripe_data_size, 6 * BLOCK_SIZE
SIZES = [0, 1, CELL - 1, CELL, CELL + 1, STRIPE - 1, STRIPE, STRIPE + 1, GROUP - 1, GROUP, GROUP + 1,
         2 * GROUP + STRIPE + 123]


@pytest.fixture(scope="module")
def lrc_cluster(tmp_path_factory):
    c = start_cluster(tmp_path_factory.mktemp("lrc"), datanodes=12, policy=POLICY, block_size=BLOCK_SIZE)
    yield c
    c.down()


@pytest.fixture(scope="module")
def lrc_fs(lrc_cluster):
    from conftest import client

    with client(lrc_cluster.namenode) as f:
        yield f


def holders(fs, path: str, group: int = 0) -> dict[int, str]:
    return {i: u.datanode_id for i, u in fs.stat(path).groups[group].units.items()}


def test_ec_list_shows_each_policys_tolerance_and_overhead():
    listing = run_cli("ec", "list").stdout.decode()
    assert ("LRC-6-2-2-64k  6 data units in 2 local groups + 2 local and 2 global parity units, 64 KiB cells, "
            "tolerates 3 lost DataNodes, 1.67 bytes on disk per byte; repair reads 3, needs 10 DataNodes") in listing
    assert "RS-6-3-1024k   6 data + 3 parity units, 1024 KiB cells, tolerates 3 lost DataNodes, 1.50 bytes on disk " \
           "per byte; repair reads 6, needs 9 DataNodes  (default)" in listing
    assert "LRC-6-2-2" in run_cli("ec", "--help").stdout.decode()


def test_a_bad_lrc_name_is_a_one_line_usage_error(lrc_cluster):
    result = run_cli("ec", "set-policy", "/", "LRC-6-4-2-64k", namenode=lrc_cluster.namenode)
    assert result.code == 2
    assert_one_line_error(result, "LRC-6-4-2-64k", "l dividing k")


def test_boundary_sizes_round_trip_byte_exact(lrc_cluster, lrc_fs):
    lrc_fs.mkdir("/sizes", parents=True)
    for n, size in enumerate(SIZES):
        data = pattern(size, seed=n)
        lrc_fs.write_bytes(f"/sizes/{size}", data)
        assert lrc_fs.stat(f"/sizes/{size}").policy == POLICY
        assert lrc_fs.read_bytes(f"/sizes/{size}") == data, size
    data = pattern(GROUP + 1, seed=99)   # and through the CLI, stdin to stdout
    run_cli("put", "-", "/sizes/cli", namenode=lrc_cluster.namenode, input=data)
    assert run_cli("cat", "/sizes/cli", namenode=lrc_cluster.namenode).stdout == data
    fsck = run_cli("fsck", "/sizes", namenode=lrc_cluster.namenode).stdout.decode()
    assert "HEALTHY" in fsck
    lrc_fs.mkdir("/big-cells")   # a policy set per directory, as any other
    assert run_cli("ec", "set-policy", "/big-cells", "lrc-6-2-2-1m", namenode=lrc_cluster.namenode).code == 0
    data = pattern(3 * 1024 * 1024 + 5, seed=7)
    lrc_fs.write_bytes("/big-cells/f", data)
    assert lrc_fs.stat("/big-cells/f").policy == "LRC-6-2-2-1024k" and lrc_fs.read_bytes("/big-cells/f") == data


_SENT = re.compile(r'^hedgefs_datanode_read_bytes_total\{[^}]*\} ([0-9.e+]+)$', re.M)
_REPAIRED = re.compile(r"repaired unit (\d+)/(\d+) \(\d+ bytes\) from (\S+) in")


_ACTIVE = re.compile(r'^hedgefs_datanode_repairs_active\{[^}]*\} ([0-9.e+]+)$', re.M)


def _metrics(cluster, name: str) -> str:
    return fetch(cluster, cluster.state["datanodes"][name]["http_port"], "/metrics")


def _bytes_sent(cluster, names) -> dict[str, int]:
    return {n: sum(int(float(v)) for v in _SENT.findall(_metrics(cluster, n))) for n in names}


def _quiet(cluster, fs) -> bool:
    """HEALTHY, and no repair running anywhere (one sent before the earlier tests' DataNodes came
    back may still be reading)."""
    if fs.admin.fsck("/").status != "HEALTHY":
        return False
    live = [d.id for d in fs.admin.report().datanodes if d.state == "live"]
    return not any(float(v) for n in live for v in _ACTIVE.findall(_metrics(cluster, n)))


def _repair_bytes(lost, rs: bool = False) -> int:
    """What repairs of the ``lost`` (policy, group id, length, index) units read
    (``sources.repair_traffic``); ``rs``: with RS-6-3 of the same cell size instead (an LRC parity
    index standing for an RS parity one)."""
    total = 0
    for policy, _gid, glen, index in lost:
        if rs:
            policy = Policy(6, 3, policy.cell_size)
            index = min(index, 8)
        total += sources.repair_traffic(policy, glen, index)
    return total


def test_a_lost_datanode_is_repaired_with_local_repair_traffic(lrc_cluster, lrc_fs):
    lrc_fs.mkdir("/repair", parents=True)
    for n in range(3):
        lrc_fs.write_bytes(f"/repair/f{n}", pattern(GROUP + STRIPE * n + 11, seed=10 + n))
    quiet = lambda: _quiet(lrc_cluster, lrc_fs)   # noqa: E731
    wait_until(quiet, 60, "fsck HEALTHY, no repair running")
    victim = holders(lrc_fs, "/repair/f0")[0]   # it holds data unit 0 of f0, and whatever else
    lost = [(parse_policy(e.policy), g.id, g.length, i) for e in lrc_fs.iter_list("/", recursive=True) if not e.is_dir
            for g in lrc_fs.stat(e.path).groups for i, u in g.units.items() if u.datanode_id == victim]
    survivors = [d for d in lrc_cluster.datanode_ids if d != victim]
    before = _bytes_sent(lrc_cluster, survivors)
    lrc_cluster.kill(victim)
    wait_until(lambda: {d.id: d.state for d in lrc_fs.admin.report().datanodes}[victim] == "dead", 60,
               f"{victim} declared dead")
    wait_until(quiet, 120, "repaired: fsck HEALTHY, no repair running")
    after = _bytes_sent(lrc_cluster, survivors)
    sent = sum(after.values()) - sum(before.values())
    rebuilt = sum(unit_length(p, glen, i) for p, _g, glen, i in lost)
    local, rs = _repair_bytes(lost), _repair_bytes(lost, rs=True)
    # At least the local minimum (a repair retried under load reads its sources again), and below
    # what RS-6-3 groups of the same lengths would read (6 units for every lost unit).
    assert local <= sent < rs, (sent, local, rs, rebuilt)
    # Each repaired data or local parity unit was read from exactly 3 DataNodes: its group peers
    # (fewer in a short group: its zero units are read as zeros, from no DataNode).
    log = "".join((lrc_cluster.root / "logs" / f"{d}.log").read_text(errors="replace") for d in survivors)
    repaired = {(int(g), int(i)): srcs.split(",") for g, i, srcs in _REPAIRED.findall(log)}
    for policy, group_id, glen, index in lost:
        zeros = zero_units(policy, glen)
        reads = policy.repair_reads(index) if not zeros else len(set(sources.plan(
            policy, [index], set(range(policy.units)) - {index}, reading=zeros).read) - zeros)
        assert len(repaired[(group_id, index)]) == reads, (group_id, index)
    assert repaired[(lrc_fs.stat("/repair/f0").groups[0].id, 0)] is not None
    for n in range(3):
        assert lrc_fs.read_bytes(f"/repair/f{n}") == pattern(GROUP + STRIPE * n + 11, seed=10 + n)


def _kill_and_read(cluster, fs, path: str, data: bytes, lost_units) -> None:
    placed = holders(fs, path)
    victims = sorted({placed[i] for i in lost_units})
    for name in victims:
        cluster.kill(name)
    try:
        from conftest import client

        with client(cluster.namenode) as fresh:   # a new client: no latency history, no cached locations
            assert fresh.read_bytes(path) == data
    finally:
        for name in victims:
            cluster.start(name)
        cluster.wait_live(victims)


def test_3_datanodes_killed_one_per_group_and_a_global_still_read_exactly(lrc_cluster, lrc_fs):
    data = pattern(GROUP - 5, seed=3)
    lrc_fs.write_bytes("/killed-spread", data)
    _kill_and_read(lrc_cluster, lrc_fs, "/killed-spread", data, [0, 4, 8])
    _kill_and_read(lrc_cluster, lrc_fs, "/killed-spread", data, [1, 2, 3])


def test_3_datanodes_killed_a_whole_groups_data_still_read_exactly(lrc_cluster, lrc_fs):
    data = pattern(STRIPE * 2 + 7, seed=4)
    lrc_fs.write_bytes("/killed-group", data)
    _kill_and_read(lrc_cluster, lrc_fs, "/killed-group", data, [0, 1, 2])
