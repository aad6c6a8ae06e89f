"""Repair scheduling without gRPC: who is repaired first, where, what the command says, timeouts."""

import threading

from hedgefs.namenode.namesystem import REPAIR_TIMEOUT_S, REPORT_GRACE_S
from hedgefs.namenode.model import DataNodeStats, DeleteUnit, RepairUnit
from nn_support import WHOLE, add_datanodes, heartbeat_all, make_namenode, write_file

BLOCK = 4096


def group_of(nn, path):
    return nn.file_info(path).groups[0]


def repairs_in(commands):
    return [c for c in commands if isinstance(c, RepairUnit)]


def held_by(nn, datanode_id, paths):
    """(group id, unit index, generation) of every unit of ``paths`` the map puts on ``datanode_id``."""
    return [(g.id, u.index, g.generation) for p in paths for g in nn.file_info(p).groups for u in g.units
            if u.datanode_id == datanode_id]


def test_most_endangered_group_first_and_at_most_two_per_datanode(nn, clock):
    add_datanodes(nn, 5)
    write_file(nn, "/a", WHOLE, lost={0: {4}})       # 4 of 5 live, oldest group
    write_file(nn, "/b", WHOLE, lost={0: {3, 4}})    # 3 of 5 live: most endangered
    write_file(nn, "/e", WHOLE, lost={0: {0}})       # 4 of 5 live
    write_file(nn, "/c", WHOLE, lost={0: {3, 4}})
    a, b, e, c = (group_of(nn, p).id for p in "/a /b /e /c".split())
    lost = group_of(nn, "/c").units[2].datanode_id
    clock.advance(REPORT_GRACE_S + 1)
    heartbeat_all(nn)
    held = held_by(nn, lost, "/a /b /e /c".split())
    # it lost unit 2 of /c: 2 of 5 left, unrecoverable, never planned (and if it was /e's unit 0's
    # target, the report confirms that unit's delete)
    assert nn.block_report(lost, [u for u in held if u[:2] != (c, 2)]).get("missing") == 1
    for dn in [f"dn{i}" for i in range(1, 6)]:    # full: no repair goes there
        nn.heartbeat(dn, "", stats=DataNodeStats(capacity_bytes=1 << 30, remaining_bytes=0))
    add_datanodes(nn, 1, start=6)                 # the only DataNode free to take repairs
    planned = nn.tick()
    assert [(r.group_id, r.index, r.target) for r in planned] == [(b, 3, "dn6"), (a, 4, "dn6")]
    assert nn.tick() == []                        # dn6 is full; nothing planned twice
    assert c not in {g for g, _ in nn.repairs.in_flight} and e not in {g for g, _ in nn.repairs.in_flight}
    add_datanodes(nn, 1, start=7)
    assert [(r.group_id, r.index) for r in nn.tick()] == [(b, 4), (e, 0)]


def test_repair_command_carries_the_files_own_policy_and_live_sources(nn):
    add_datanodes(nn, 5)
    nn.mkdir("/d")
    nn.set_policy("/d", "RS-3-2-2k")
    write_file(nn, "/d/f", 5000, lost={0: {1}})
    group = group_of(nn, "/d/f")
    add_datanodes(nn, 1, start=6)
    nn.tick()
    [command] = repairs_in(nn.heartbeat("dn6", "").commands)
    assert command == RepairUnit(group.id, 1, "RS-3-2-2k", 5000, group.units, group.generation)
    assert [s.index for s in command.sources] == [0, 2, 3, 4]
    assert repairs_in(nn.heartbeat("dn6", "").commands) == []  # sent once
    assert nn.report().datanodes[5].pending_repairs == 1
    assert nn.unit_stored("dn6", group.id, 1, group.generation) == "adopted"
    assert nn.fsck().status == "HEALTHY"
    report = nn.report()
    assert report.repairs_done == 1 and report.groups_waiting_repair == 0
    assert nn.repairs.in_flight == {}


def test_lost_command_is_reissued_after_the_timeout(nn, clock):
    add_datanodes(nn, 6)
    nn.heartbeat("dn6", "", used_bytes=10**9)
    write_file(nn, "/f", WHOLE, lost={0: {2}})
    gid = group_of(nn, "/f").id
    assert [(r.group_id, r.index) for r in nn.tick()] == [(gid, 2)]
    target = nn.repairs.in_flight[(gid, 2)].target
    assert len(repairs_in(nn.heartbeat(target, "").commands)) == 1
    clock.advance(REPAIR_TIMEOUT_S / 2)
    heartbeat_all(nn)
    assert nn.tick() == []
    clock.advance(REPAIR_TIMEOUT_S / 2 + 1)
    heartbeat_all(nn)
    assert [(r.group_id, r.index) for r in nn.tick()] == [(gid, 2)]
    assert len(repairs_in(nn.heartbeat(nn.repairs.in_flight[(gid, 2)].target, "").commands)) == 1


def test_unit_on_a_dead_datanode_is_rebuilt_elsewhere_and_the_old_copy_deleted(nn, clock):
    add_datanodes(nn, 5)
    write_file(nn, "/f", WHOLE)
    group = group_of(nn, "/f")
    dead = group.units[3].datanode_id
    add_datanodes(nn, 1, start=6)
    clock.advance(31)
    heartbeat_all(nn, [f"dn{i}" for i in range(1, 7) if f"dn{i}" != dead])
    [planned] = nn.tick()
    assert (planned.group_id, planned.index, planned.target) == (group.id, 3, "dn6")
    [command] = repairs_in(nn.heartbeat("dn6", "").commands)
    assert dead not in {s.datanode_id for s in command.sources}
    assert nn.unit_stored("dn6", group.id, 3, group.generation) == "moved"
    assert nn.fsck().status == "HEALTHY"
    # the dead DataNode comes back: it is told to delete its now redundant copy
    assert nn.heartbeat(dead, "").commands == [DeleteUnit(group.id, 3, group.generation)]


def test_repair_moves_away_from_a_target_that_dies(nn, clock):
    add_datanodes(nn, 7)
    write_file(nn, "/f", WHOLE, lost={0: {0}})
    gid = group_of(nn, "/f").id
    [first] = nn.tick()
    clock.advance(31)
    heartbeat_all(nn, [f"dn{i}" for i in range(1, 8) if f"dn{i}" != first.target])
    [second] = nn.tick()
    assert (second.group_id, second.index) == (gid, 0) and second.target != first.target


def test_no_repair_onto_a_datanode_still_deleting_a_unit_of_that_group(nn):
    add_datanodes(nn, 5)
    write_file(nn, "/f", WHOLE, lost={0: {4}})  # the DataNode of unit 4 owes a delete for this group
    assert nn.tick() == []


def test_planned_repair_of_a_deleted_file_is_dropped_at_delivery(nn):
    add_datanodes(nn, 6)
    nn.heartbeat("dn6", "", used_bytes=10**9)
    write_file(nn, "/f", WHOLE, lost={0: {1}})
    [planned] = nn.tick()
    nn.delete("/f")
    assert repairs_in(nn.heartbeat(planned.target, "").commands) == []
    assert nn.repairs.in_flight == {}


def stale_copy_of_unit_0_on_dn6(nn):
    """/f on dn1..dn5 (dn6 kept out by its load), then dn6 reports an extra copy of unit 0."""
    add_datanodes(nn, 6)
    nn.heartbeat("dn6", "", used_bytes=10**9)
    write_file(nn, "/f", WHOLE)
    group = group_of(nn, "/f")
    assert nn.unit_stored("dn6", group.id, 0, group.generation) == "stale"
    return group, group.units[0].datanode_id


def test_extra_copy_from_a_late_repair_is_deleted(nn):
    add_datanodes(nn, 6)
    nn.heartbeat("dn6", "", used_bytes=10**9)
    write_file(nn, "/f", WHOLE)
    group = group_of(nn, "/f")
    assert nn.unit_stored("dn6", group.id, 0, group.generation) == "stale"
    assert (group.id, 0, group.generation) in nn.blocks.pending_deletes("dn6")


def test_stale_copy_is_kept_and_adopted_when_its_holder_dies(nn, clock):
    group, holder = stale_copy_of_unit_0_on_dn6(nn)
    clock.advance(31)
    commands = heartbeat_all(nn, [f"dn{i}" for i in range(1, 7) if f"dn{i}" != holder])
    assert commands["dn6"] == []  # the holder is dead: dn6 has the only live copy, no delete
    assert nn.block_report("dn6", [(group.id, 0, group.generation)]) == {"moved": 1}
    assert {u.index: u.datanode_id for u in group_of(nn, "/f").units}[0] == "dn6"
    assert nn.blocks.pending_deletes("dn6") == []
    assert nn.tick() == [] and nn.fsck().status == "HEALTHY"
    # the old holder comes back: now its copy is the extra one
    assert nn.heartbeat(holder, "").commands == [DeleteUnit(group.id, 0, group.generation)]


def test_stale_copy_is_adopted_when_its_holder_loses_the_unit(nn, clock):
    group, holder = stale_copy_of_unit_0_on_dn6(nn)
    clock.advance(REPORT_GRACE_S + 1)
    heartbeat_all(nn, [f"dn{i}" for i in range(1, 6)])
    assert nn.block_report(holder, held_by(nn, holder, ["/f"])[1:]) == {"missing": 1}
    assert nn.heartbeat("dn6", "").commands == []
    assert nn.block_report("dn6", [(group.id, 0, group.generation)]) == {"adopted": 1}
    assert nn.fsck().status == "HEALTHY"


def test_stale_copy_of_a_deleted_file_is_deleted_even_without_a_live_holder(nn, clock):
    group, holder = stale_copy_of_unit_0_on_dn6(nn)
    clock.advance(31)
    heartbeat_all(nn, [f"dn{i}" for i in range(1, 7) if f"dn{i}" != holder])
    nn.delete("/f")
    assert nn.heartbeat("dn6", "").commands == [DeleteUnit(group.id, 0, group.generation)]


def test_after_a_restart_only_datanodes_that_spoke_are_repair_targets_or_sources(tmp_path, clock):
    """A restarted NameNode knows the DataNodes that registered with it since: dn6 looked least
    loaded before the restart, but may be long gone; the holder of unit 3, silent since, is no
    source (its unit is missing until it reports)."""
    nn = make_namenode(tmp_path / "nn", clock, block_size=BLOCK)
    add_datanodes(nn, 7)
    for dn in ("dn6", "dn7"):
        nn.heartbeat(dn, "", used_bytes=10**9)
    write_file(nn, "/f", WHOLE, lost={0: {4}})
    group = group_of(nn, "/f")
    quiet = group.units[3].datanode_id  # holds unit 3, silent since the restart
    nn.close()
    nn = make_namenode(tmp_path / "nn", clock, block_size=BLOCK)
    for dn in [u.datanode_id for u in group.units if u.datanode_id != quiet] + ["dn7"]:
        nn.register(dn, f"127.0.0.1:{40000 + int(dn[2:])}")
        nn.heartbeat(dn, "", used_bytes=10**9 if dn == "dn7" else 0)
        nn.block_report(dn, [(group.id, u.index, group.generation) for u in group.units if u.datanode_id == dn])
    [planned] = nn.tick()
    assert (planned.group_id, planned.index, planned.target) == (group.id, 3, "dn7")
    [command] = repairs_in(nn.heartbeat("dn7", "").commands)
    assert [s.index for s in command.sources] == [0, 1, 2]  # not unit 3, on the silent one
    nn.close()


def test_a_repair_that_timed_out_never_puts_two_units_of_a_group_on_one_datanode(nn, clock):
    add_datanodes(nn, 8)
    spares = ["dn6", "dn7", "dn8"]
    for dn in spares:
        nn.heartbeat(dn, "", used_bytes=10**9)
    write_file(nn, "/f", WHOLE)
    group = group_of(nn, "/f")
    lost = {group.units[0].datanode_id, group.units[1].datanode_id}
    alive = [f"dn{i}" for i in range(1, 9) if f"dn{i}" not in lost]
    clock.advance(31)
    heartbeat_all(nn, alive)
    first = {r.index: r.target for r in nn.tick()}
    heartbeat_all(nn, alive)  # both commands delivered
    slow, other = first[0], first[1]
    idle = next(d for d in spares if d not in first.values())
    clock.advance(REPAIR_TIMEOUT_S + 1)  # both time out, still rebuilding
    for dn in alive:
        nn.heartbeat(dn, "", used_bytes={idle: 1, slow: 2, other: 3}.get(dn, 10**9))
    again = {r.index: r.target for r in nn.tick()}
    assert again == {0: idle, 1: slow}
    assert nn.unit_stored(slow, group.id, 0, group.generation) == "moved"  # the first, slow repair ends
    assert repairs_in(nn.heartbeat(slow, "").commands) == []  # unit 1 must not go there now
    # had it been sent: the copy is left alone, not mapped beside unit 0
    assert nn.unit_stored(slow, group.id, 1, group.generation) == "extra"
    placed = {u.index: u.datanode_id for u in group_of(nn, "/f").units}
    assert placed[0] == slow and 1 not in placed
    assert len(set(placed.values())) == len(placed)
    assert (group.id, 1) not in nn.repairs.in_flight
    [replanned] = nn.tick()
    assert replanned.index == 1 and replanned.target not in placed.values()


def test_corrupt_unit_at_k_plus_1_good_units_is_kept_until_the_group_is_whole_again(nn, clock):
    """RS-3-2 with 4 good units (k+1): one more reported corrupt used to be deleted at once,
    leaving exactly k. Now it stays, and goes only once both lost units are rebuilt."""
    add_datanodes(nn, 5)
    write_file(nn, "/f", WHOLE)
    group = group_of(nn, "/f")
    dead = group.units[4].datanode_id
    clock.advance(31)
    heartbeat_all(nn, [f"dn{i}" for i in range(1, 6) if f"dn{i}" != dead])
    bad = group.units[0].datanode_id
    nn.report_bad_units([(group.id, 0, group.generation, bad, "checksum mismatch")])
    assert [u.index for u in group_of(nn, "/f").units] == [1, 2, 3]      # 3 good: the corrupt one not offered
    assert nn.blocks.pending_deletes(bad) == []
    add_datanodes(nn, 2, start=6)
    planned = sorted((r.index, r.target) for r in nn.tick())
    assert [i for i, _ in planned] == [0, 4]
    for index, target in planned:
        [command] = repairs_in(nn.heartbeat(target, "").commands)
        assert [u.index for u in command.sources] == [1, 2, 3]
    assert nn.unit_stored(planned[0][1], group.id, 0, group.generation) == "moved"
    assert (group.id, 0, group.generation) in nn.blocks.pending_deletes(bad)              # queued...
    assert nn.heartbeat(bad, "").commands == []                          # ...but unit 4 is still lost
    assert nn.unit_stored(planned[1][1], group.id, 4, group.generation) == "moved"
    assert nn.fsck().status == "HEALTHY"
    assert nn.heartbeat(bad, "").commands == [DeleteUnit(group.id, 0, group.generation)]


def test_surplus_copy_waits_until_its_group_is_whole(nn, clock):
    group, holder = stale_copy_of_unit_0_on_dn6(nn)
    lost = group.units[3].datanode_id
    clock.advance(31)
    heartbeat_all(nn, [f"dn{i}" for i in range(1, 7) if f"dn{i}" != lost])
    assert nn.heartbeat("dn6", "").commands == []     # unit 3 is lost: dn6's extra copy may yet be needed
    heartbeat_all(nn, [lost])                         # it comes back: the group is whole
    assert nn.heartbeat("dn6", "").commands == [DeleteUnit(group.id, 0, group.generation)]


def test_a_report_counts_the_groups_short_of_units_from_the_health_counts(nn):
    """Report (dfsadmin -report, and every NameNode's role poll) read every group of the namespace
    under the lock to count those waiting for repair: 3.8 s at 200,000 files, per call; then every
    unhealthy group: 6 s on a standby of 200,000 files no DataNode had reported. Now it reads the
    counts health keeps as groups change: no group is looked at."""
    add_datanodes(nn, 5)
    for i in range(30):
        write_file(nn, f"/ok{i}", WHOLE)
    write_file(nn, "/short", WHOLE, lost={0: {0}})
    nn.tick()
    read, needs = [], nn.manager.needs

    def counted(ids):
        ids = list(ids)
        read.append(len(ids))
        return needs(ids)

    nn.manager.needs = counted
    report = nn.report()
    assert report.groups_waiting_repair == 1 and read == []


def test_a_report_counts_each_datanodes_mapped_units(nn):
    """The count of every unit by DataNode (~5 s at 30 M units with the units in SQLite) is kept as
    the map changes: a report reads it."""
    add_datanodes(nn, 5)
    for i in range(4):
        write_file(nn, f"/f{i}", WHOLE)
    report = nn.report()
    expected = {}
    for i in range(4):
        for u in nn.file_info(f"/f{i}").groups[0].units:
            expected[u.datanode_id] = expected.get(u.datanode_id, 0) + 1
    assert {d.id: d.units_mapped for d in report.datanodes if d.units_mapped} == expected


def test_a_repair_pass_plans_a_bounded_number_of_groups_the_most_short_first_and_comes_round_to_all(nn, monkeypatch):
    """A lost rack leaves a million groups short: a pass plans for at most PLAN_GROUPS of them (one
    bounded hold of the writers' lock), those lacking most units first, and the next passes go on
    round the rest until every group has its repair."""
    from hedgefs.namenode.blocks import manager

    monkeypatch.setattr(manager, "PLAN_GROUPS", 2)
    add_datanodes(nn, 5)
    short_one = [f"/one{i}" for i in range(4)]
    for path in short_one:
        write_file(nn, path, WHOLE, lost={0: {4}})
    write_file(nn, "/two", WHOLE, lost={0: {3, 4}})
    ids = {p: group_of(nn, p).id for p in [*short_one, "/two"]}
    add_datanodes(nn, 3, start=6)                 # room for every repair (2 a DataNode)
    first = nn.tick()
    assert {r.group_id for r in first} == {ids["/two"], ids["/one0"]}   # 2 groups: the most short first
    assert {(r.group_id, r.index) for r in first if r.group_id == ids["/two"]} == {(ids["/two"], 3), (ids["/two"], 4)}
    planned = {r.group_id for r in first}
    for _ in range(4):
        planned |= {r.group_id for r in nn.tick()}
    assert planned == set(ids.values())


def test_a_decommission_looks_through_the_map_a_stretch_a_pass(nn, monkeypatch):
    """The units on a leaving DataNode are found LEAVING_SCAN groups a pass (not every group of the
    map in one hold of the lock), and every one of them is moved in the end."""
    from hedgefs.namenode.blocks import manager

    monkeypatch.setattr(manager, "LEAVING_SCAN", 2)
    add_datanodes(nn, 6)
    paths = [f"/f{i}" for i in range(5)]
    for path in paths:
        write_file(nn, path, WHOLE)
    leaving = group_of(nn, "/f0").units[0].datanode_id
    on_it = {group_of(nn, p).id for p in paths if leaving in {u.datanode_id for u in group_of(nn, p).units}}
    add_datanodes(nn, 5, start=7)
    nn.decommission(leaving)
    moved, passes = set(), 0
    while moved != on_it and passes < 20:
        moved |= {r.group_id for r in nn.tick()}
        passes += 1
    assert moved == on_it and passes > 1


def test_a_small_files_group_is_whole_without_its_zero_units_and_only_its_stored_units_are_repaired(nn, clock):
    """A 10-byte RS-3-2-1k file: units 1 and 2 hold nothing (ec/layout.py's zero units), so the
    writer stores units 0, 3 and 4 only. The group is HEALTHY so; no delete goes to the targets it
    was given for 1 and 2; losing up to 2 of the 3 leaves it readable (DEGRADED), and only the
    lost stored units are repaired, each command's group length saying what the worker leaves out."""
    add_datanodes(nn, 5)
    write_file(nn, "/small", 10)
    group = group_of(nn, "/small")
    assert sorted(u.index for u in group.units) == [0, 3, 4]
    assert nn.fsck().status == "HEALTHY"
    assert sum(nn.blocks.pending_delete_counts().values()) == 0
    assert nn.tick() == []                     # nothing to repair: nothing lacks
    add_datanodes(nn, 2, start=6)
    dead = {u.datanode_id for u in group.units if u.index in (0, 3)}
    clock.advance(31)
    heartbeat_all(nn, [f"dn{i}" for i in range(1, 8) if f"dn{i}" not in dead])
    report = nn.fsck()
    assert report.status == "DEGRADED" and report.missing == 0
    planned = nn.tick()
    assert sorted(r.index for r in planned) == [0, 3]
    for repair in planned:
        [command] = repairs_in(nn.heartbeat(repair.target, "").commands)
        sources = {s.index for s in command.sources}
        assert (command.index, command.group_length) == (repair.index, 10)
        assert 4 in sources and sources <= {0, 3, 4} - {repair.index}   # never a zero unit
        nn.unit_stored(repair.target, group.id, repair.index, group.generation)
    assert nn.fsck().status == "HEALTHY"


def test_a_small_files_group_with_all_its_stored_units_lost_is_missing_and_never_repaired(nn, clock):
    add_datanodes(nn, 5)
    write_file(nn, "/small", 10)
    dead = {u.datanode_id for u in group_of(nn, "/small").units}
    clock.advance(31)
    heartbeat_all(nn, [f"dn{i}" for i in range(1, 6) if f"dn{i}" not in dead])
    report = nn.fsck()
    assert (report.status, report.missing) == ("CORRUPT", 1)
    assert nn.tick() == []


def test_truncates_that_drop_a_small_files_group_keep_the_block_maps_counts(nn):
    """A truncate to a group boundary drops the groups after it; the block map forgets them as it
    counted them (a short last group readable with its zero units), so its readable count stays
    the number of readable groups (chaos 4444202 --secure: a truncate to 0 of a small file
    stopped the journal)."""
    add_datanodes(nn, 9)
    write_file(nn, "/ten", 10, policy="RS-6-3-1k")   # 4 units: readable only with its 5 zero units
    write_file(nn, "/two", 3 * BLOCK + 10)           # a full group, then a 10-byte one
    assert nn.blocks.readable == nn.blocks.complete_groups == 3
    assert nn.truncate("/ten", 0) is None and nn.truncate("/two", 3 * BLOCK) is None
    assert (nn.file_info("/ten").entry.length, nn.file_info("/two").entry.length) == (0, 3 * BLOCK)
    assert nn.blocks.readable == nn.blocks.complete_groups == 1
    assert nn.fsck().status == "HEALTHY"
