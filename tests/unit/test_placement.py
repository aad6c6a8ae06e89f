"""Placement by host and rack (namenode/blocks/placement.py), and the NameNode using it: new
groups, repairs and decommission keep a group's units on distinct hosts and at most its tolerance
(m; LRC: g + 1) in a rack; a cluster that cannot gets the best spread it allows and one warning
per cause; fsck reports the groups that break the rule (MISPLACED). In process, on the fake clock.
"""

import logging
import random
from collections import Counter

import pytest

from hedgefs.ec.policy import parse_policy
from hedgefs.namenode.blocks.placement import Bounds, Candidate, Placement, Shape, misplaced
from hedgefs.topology import DEFAULT_RACK, Location
from nn_support import heartbeat_all, make_namenode, write_file

RS63 = Shape.of(parse_policy("RS-6-3-1024k"))
LRC622 = Shape.of(parse_policy("LRC-6-2-2-64k"))


def cluster(hosts: int, racks: int, per_host: int = 1) -> list[Candidate]:
    """``hosts`` hosts in ``racks`` racks (contiguous runs, as cluster up --hosts makes them)."""
    out = []
    for h in range(hosts):
        rack = f"/r{h * racks // hosts + 1}"
        for j in range(per_host):
            out.append(Candidate(f"dn{h + 1}" + (f"-{j}" if per_host > 1 else ""), Location(f"host{h + 1}", rack)))
    return out


def spread(chosen: dict[int, str], candidates: list[Candidate]) -> tuple[Counter, Counter]:
    where = {c.id: c.location for c in candidates}
    return Counter(where[d].host for d in chosen.values()), Counter(where[d].rack for d in chosen.values())


def test_shapes_say_how_many_units_a_rack_may_hold():
    assert (RS63.units, RS63.cap, set(RS63.local)) == (9, 3, {-1})
    assert (LRC622.units, LRC622.cap) == (10, 3)          # g + 1: any 3 losses decode
    assert LRC622.local == (0, 0, 0, 1, 1, 1, 0, 1, -1, -1)
    assert Shape.of(parse_policy("REPLICATE-3")).cap == 2  # HDFS's: at most 2 replicas in a rack


@pytest.mark.parametrize("hosts, racks", [(12, 3), (12, 4), (9, 3), (20, 5), (30, 10)])
def test_rs_6_3_on_distinct_hosts_at_most_3_a_rack(hosts, racks, caplog):
    candidates = cluster(hosts, racks)
    placement = Placement(random.Random(7))
    for _ in range(50):
        chosen = placement.choose(RS63, range(9), candidates, shuffle=True)
        on_host, in_rack = spread(chosen, candidates)
        assert sorted(chosen) == list(range(9)) and len(set(chosen.values())) == 9
        assert max(on_host.values()) == 1 and max(in_rack.values()) <= 3
    assert "placement:" not in caplog.text                 # the rule was kept: no warning


def test_least_loaded_first_within_the_rule():
    candidates = [c._replace(load=(0 if c.id in ("dn1", "dn5", "dn9") else 1)) for c in cluster(12, 3)]
    chosen = Placement(random.Random(1)).choose(RS63, range(3), candidates)
    assert sorted(chosen.values()) == ["dn1", "dn5", "dn9"]   # one per rack, the idle ones


def test_lrc_local_groups_spread_over_racks():
    candidates = cluster(12, 4)
    placement = Placement(random.Random(3))
    for _ in range(30):
        chosen = placement.choose(LRC622, range(10), candidates, shuffle=True)
        where = {c.id: c.location for c in candidates}
        _, in_rack = spread(chosen, candidates)
        assert max(in_rack.values()) <= 3
        for group in (0, 1):   # 4 members (3 data + its local parity) on 4 racks
            members = [i for i, g in enumerate(LRC622.local) if g == group]
            assert len({where[chosen[i]].rack for i in members}) == 4


def test_a_repair_keeps_the_rule_with_the_survivors_where_they_are():
    candidates = cluster(12, 3)
    where = {c.id: c.location for c in candidates}
    # units 0-7 stay (3 in r1 on host1-3, 3 in r2, 2 in r3); unit 8 lost: only rack r3 may take it
    staying = dict(zip(range(8), ["dn1", "dn2", "dn3", "dn5", "dn6", "dn7", "dn9", "dn10"]))
    free = [c for c in candidates if c.id not in staying.values()]
    for seed in range(20):
        chosen = Placement(random.Random(seed)).choose(RS63, [8], free, {i: where[d] for i, d in staying.items()})
        assert where[chosen[8]].rack == "/r3" and chosen[8] in ("dn11", "dn12")


def test_one_host_stays_usable_with_one_warning_per_cause(caplog):
    candidates = [Candidate(f"dn{i}", Location("127.0.0.1")) for i in range(1, 10)]
    placement = Placement(random.Random(1))
    with caplog.at_level(logging.WARNING, logger="hedgefs.namenode"):
        for _ in range(5):
            chosen = placement.choose(RS63, range(9), candidates, shuffle=True)
            assert len(set(chosen.values())) == 9
    warnings = [r.getMessage() for r in caplog.records]
    assert len(warnings) == 2   # hosts too few, racks too few: once each, not once a group
    assert "only 1 are live" in warnings[0] and "racks (1)" in warnings[1]


def test_too_few_racks_spreads_as_evenly_as_the_hosts_allow(caplog):
    candidates = cluster(12, 2)     # 2 racks of 6 hosts: RS-6-3 cannot keep 3 a rack
    with caplog.at_level(logging.WARNING, logger="hedgefs.namenode"):
        chosen = Placement(random.Random(1)).choose(RS63, range(9), candidates, shuffle=True)
    on_host, in_rack = spread(chosen, candidates)
    assert max(on_host.values()) == 1 and sorted(in_rack.values()) == [4, 5]   # not 6 + 3
    assert "up to 5 share a rack" in caplog.text
    assert "distinct hosts" not in caplog.text


def test_fewer_hosts_than_units_spread_them_evenly():
    candidates = cluster(3, 3, per_host=4)    # 3 hosts of 4 DataNodes
    chosen = Placement(random.Random(1)).choose(RS63, range(9), candidates, shuffle=True)
    on_host, _ = spread(chosen, candidates)
    assert sorted(on_host.values()) == [3, 3, 3]


def test_bounds_and_the_judge():
    locations = [c.location for c in cluster(12, 3)]
    bounds = Bounds.of(RS63, locations)
    assert (bounds.per_host, bounds.per_rack, bounds.hosts, bounds.racks) == (1, 3, 12, 3)
    ok = {i: Location(f"host{i + 1}", f"/r{i // 3 + 1}") for i in range(9)}
    assert misplaced(RS63, ok, bounds) == ""
    four = {**ok, 3: Location("host4", "/r1")}
    assert misplaced(RS63, four, bounds) == "4 units in rack /r1 (at most 3)"
    shared = {**ok, 1: Location("host1", "/r1")}
    assert misplaced(RS63, shared, bounds) == "2 units on host host1"
    one = Bounds.of(RS63, [Location("127.0.0.1")] * 9)   # one host: everything on it is the best
    assert (one.per_host, one.per_rack) == (9, 9)
    assert misplaced(RS63, {i: Location("127.0.0.1") for i in range(9)}, one) == ""


# ---------------------------------------------------------------- the NameNode

def register(nn, hosts: int, racks: int, start: int = 1) -> list[str]:
    ids = []
    for h in range(start - 1, start - 1 + hosts):
        dn = f"dn{h + 1}"
        nn.register(dn, f"127.0.0.1:{40000 + h + 1}", host_id=f"host{h + 1}", rack=f"/r{h * racks // hosts + 1}")
        ids.append(dn)
    return ids


def racks_of(nn, path):
    where = {d.id: (d.host_id, d.rack) for d in nn.report().datanodes}
    out = []
    for group in nn.file_info(path).groups:
        out.append((Counter(where[u.datanode_id][0] for u in group.units),
                    Counter(where[u.datanode_id][1] for u in group.units)))
    return out


def test_the_namenode_keeps_where_each_datanode_registered(nn):
    nn.register("dn1", "127.0.0.1:40001", host_id="host1", rack="/dc1/r2")
    nn.register("dn2", "10.0.0.7:40002")                       # an older DataNode: said neither
    report = {d.id: (d.host_id, d.rack) for d in nn.report().datanodes}
    assert report == {"dn1": ("host1", "/dc1/r2"), "dn2": ("10.0.0.7", DEFAULT_RACK)}
    nn.register("dn1", "127.0.0.1:40001", host_id="host9", rack="/dc1/r3")   # moved: the new place wins
    status = {d.id: (d.host_id, d.rack) for d in nn.status().datanodes}
    assert status["dn1"] == ("host9", "/dc1/r3")


def test_new_groups_follow_the_rule(tmp_path, clock):
    nn = make_namenode(tmp_path / "nn", clock, policy="RS-6-3-1k")
    register(nn, 12, 3)
    for i in range(10):
        write_file(nn, f"/f{i}", 20_000)
        for on_host, in_rack in racks_of(nn, f"/f{i}"):
            assert max(on_host.values()) == 1 and max(in_rack.values()) <= 3
    assert nn.fsck().misplaced == 0
    nn.close()


def test_repairs_and_decommission_keep_the_rule(tmp_path, clock):
    nn = make_namenode(tmp_path / "nn", clock, policy="RS-6-3-1k")
    ids = register(nn, 16, 4)                  # 4 racks of 4 hosts
    for i in range(6):
        write_file(nn, f"/f{i}", 6_000)
    dead = {"dn1", "dn2", "dn3", "dn4"}        # rack r1 dies: every group lost up to 3 units
    live = [d for d in ids if d not in dead]

    def settle():
        for _ in range(20):
            heartbeat_all(nn, live)
            for r in nn.tick():
                nn.unit_stored(r.target, r.group_id, r.index, nn.blocks.generation(r.group_id))

    clock.advance(31)
    settle()
    nn.decommission("dn5")                     # and a DataNode of r2 leaves: its units go elsewhere
    settle()
    assert nn.admin_state("dn5") == "decommissioned"
    for i in range(6):
        for group in nn.file_info(f"/f{i}").groups:
            assert len(group.units) == 9 and not {u.datanode_id for u in group.units} & (dead | {"dn5"})
        for on_host, in_rack in racks_of(nn, f"/f{i}"):
            assert max(on_host.values()) == 1 and max(in_rack.values()) <= 3
    nn.close()


def test_a_repair_waits_for_the_datanode_the_rule_wants_unless_the_group_is_at_its_last_unit():
    """Only rack r3 may take unit 8 (r1 and r2 hold 3 each); its free DataNodes are busy: a group
    that can lose another unit waits a pass, one that cannot takes any DataNode at once."""
    candidates = cluster(12, 3)
    where = {c.id: c.location for c in candidates}
    staying = dict(zip(range(8), ["dn1", "dn2", "dn3", "dn5", "dn6", "dn7", "dn9", "dn10"]))
    free = [c for c in candidates if c.id not in staying.values() and c.id not in ("dn11", "dn12")]
    placed = {i: where[d] for i, d in staying.items()}
    bounds = Bounds.of(RS63, where.values())
    assert Placement(random.Random(1)).choose(RS63, [8], free, placed, bounds, spill=False) == {}
    [(index, target)] = Placement(random.Random(1)).choose(RS63, [8], free, placed, bounds).items()
    assert index == 8 and where[target].rack != "/r3"
