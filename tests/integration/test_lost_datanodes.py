"""Reads with DataNodes gone: any 3 of 9 lost still read exactly; 4 lost fail cleanly.

A table as MinIO's erasure-decode tests have it: lost units -> readable or not.
"""

import dataclasses
import itertools
import json
import random

import pytest

from conftest import GROUP, STRIPE, assert_one_line_error, pattern, run_cli, wait_until


def unit_holders(cluster, path: str) -> list[str]:
    doc = json.loads(run_cli("stat", "--json", path, namenode=cluster.namenode).stdout)
    return [u["datanode"] for u in doc["groups"][0]["units"]]


@pytest.mark.parametrize("lost", [0, 1, 2, 3])
def test_up_to_3_lost_units_read_back_exactly(fs, lost):
    """Library-level: decode from whichever units remain, for a seeded sample of at most 12 patterns
    of `lost` data/parity units (every pattern for 0 and 1 lost; 12 of 36 for 2, 12 of 84 for 3).
    Every loss pattern is decoded in test_ec_codec.py, against the codec alone."""
    from hedgefs.client.locations import GroupLocation

    data = pattern(2 * STRIPE + 1234, seed=lost)
    fs.mkdir("/lost", parents=True)
    fs.write_bytes(f"/lost/{lost}", data, overwrite=True)
    status = fs.stat(f"/lost/{lost}")
    patterns = list(itertools.combinations(range(9), lost))
    random.Random(lost).shuffle(patterns)
    for gone in patterns[:12]:
        group = status.groups[0]
        crippled = GroupLocation(group.id, group.length, {i: u for i, u in group.units.items() if i not in gone},
                                 group.generation)
        crippled_status = dataclasses.replace(status, groups=(crippled,))
        got = fs.open(crippled_status).pread(0, status.length)   # reads the units it is given
        assert bytes(got) == data, f"lost units {gone}"


def test_a_group_is_read_in_its_own_code(fs):
    """An EC file's last group may be replicated (an open tail, REPLICATE-3 of an RS-6-3 file): the
    reader reads each group by its own code, across the boundary, and from any one replica."""
    from hedgefs.client.locations import GroupLocation

    data = pattern(GROUP + 3000, seed=45)
    fs.mkdir("/codes", parents=True)
    fs.write_bytes("/codes/ec", data, overwrite=True)
    fs.write_bytes("/codes/tail", data[GROUP:], overwrite=True, policy="REPLICATE-3")
    ec, tail = fs.stat("/codes/ec"), fs.stat("/codes/tail")
    (replicas,) = tail.groups
    for kept in ([0, 1, 2], [2]):
        group = GroupLocation(replicas.id, replicas.length, {i: replicas.units[i] for i in kept},
                              replicas.generation, policy="REPLICATE-3")
        mixed = dataclasses.replace(ec, groups=(ec.groups[0], group))
        with fs.open(mixed) as f:
            f.check_available()
            assert bytes(f.pread(0, len(data))) == data, f"replicas {kept}"
            assert bytes(f.pread(GROUP - 100, 200)) == data[GROUP - 100:GROUP + 100]


def test_kill_3_datanodes_then_4(private_cluster, tmp_path):
    nn = private_cluster.namenode
    data = pattern(GROUP // 2 + 77, seed=3)
    assert run_cli("put", "-", "/f", namenode=nn, input=data).code == 0
    holders = unit_holders(private_cluster, "/f")
    # The spare is frozen: no lost unit can be rebuilt onto it meanwhile, however slow this test runs
    # (a repair would make the fourth loss survivable).
    (spare,) = set(private_cluster.datanode_ids) - set(holders)
    private_cluster.freeze(spare)
    for dn in (holders[0], holders[4], holders[7]):  # two data units and a parity unit
        private_cluster.kill(dn)
    got = run_cli("get", "/f", str(tmp_path / "three-lost"), namenode=nn)
    assert got.code == 0, got.stderr
    assert (tmp_path / "three-lost").read_bytes() == data
    assert run_cli("cat", "/f", namenode=nn).stdout == data

    private_cluster.kill(holders[1])
    out = tmp_path / "four-lost"
    result = run_cli("get", "/f", str(out), namenode=nn)
    # "cannot read group ...", or, once the NameNode has declared the DataNode dead, "... has 5 live units"
    assert_one_line_error(result, "data unavailable")
    assert not out.exists()
    assert not list(tmp_path.glob(".four-lost*")), "a partial file was left behind"
    assert_one_line_error(run_cli("cat", "/f", namenode=nn), "data unavailable")


def test_open_file_follows_units_moved_by_repair(private_cluster):
    """A reader that cached the unit map before a repair finds the rebuilt unit on its own."""
    from hedgefs.client.fs import FileSystem

    data = pattern(STRIPE + 999, seed=8)
    with FileSystem(private_cluster.namenode) as fs:
        fs.write_bytes("/moved", data)
        with fs.open("/moved") as f:  # unit locations cached here
            cached = [f.status.groups[0].units[i].datanode_id for i in range(9)]
            private_cluster.kill(cached[0])

            def holder_of_unit_0():
                unit = fs.stat("/moved").groups[0].units.get(0)  # absent while its holder is dead
                return unit.datanode_id if unit else cached[0]

            wait_until(lambda: holder_of_unit_0() != cached[0], 60, "unit 0 repaired onto another DataNode",
                       interval=0.1)
            for dn in cached[1:4]:  # 4 of the cached holders are now gone; only 3 really are
                private_cluster.kill(dn)
            assert f.pread(0, len(data)) == data
