"""Block map upkeep without gRPC: block reports, liveness (hand-driven clock), deletes, fsck, report."""

import pytest

from hedgefs.namenode.namesystem import DELETE_RESEND_S, REPORT_GRACE_S
from hedgefs.namenode.model import DeleteUnit
from hedgefs.namenode.errors import FailedPrecondition, NotFound
from nn_support import WHOLE, add_datanodes, generation, heartbeat_all, listed_while_deleting, make_namenode, write_file

BLOCK = 4096


def one_group(nn, path="/f", length=WHOLE):
    """Write a one-group file on dn1..dn5; returns (group id, {unit index: DataNode})."""
    write_file(nn, path, length)
    group = nn.file_info(path).groups[0]
    return group.id, {u.index: u.datanode_id for u in group.units}


def units_on(nn, placed, dn, group_id):
    return [(group_id, i, generation(nn, group_id)) for i, d in placed.items() if d == dn]


def test_heartbeat_from_unknown_datanode_asks_to_register(nn):
    reply = nn.heartbeat("dn9", "127.0.0.1:1")
    assert reply.reregister and reply.commands == []
    with pytest.raises(FailedPrecondition, match="unknown DataNode 'dn9': register first"):
        nn.block_report("dn9", [])
    nn.register("dn9", "127.0.0.1:1")
    assert not nn.heartbeat("dn9", "127.0.0.1:1").reregister


def test_block_report_reconciliation(nn, clock):
    add_datanodes(nn, 6)
    nn.heartbeat("dn6", "", used_bytes=10**9)  # keep dn6 out of the placement
    gid, placed = one_group(nn)
    g = generation(nn, gid)
    gone, _ = one_group(nn, "/gone")
    gone_g = generation(nn, gone)
    nn.delete("/gone")
    clock.advance(REPORT_GRACE_S + 1)
    heartbeat_all(nn)
    holder, other = placed[0], placed[1]
    # holds its unit, a unit of a deleted group (delete it), one of a group id this NameNode never
    # allocated and one of its own group id but a generation it never issued (another namespace's,
    # e.g. a wiped NameNode's predecessor: leave both alone)
    counts = nn.block_report(holder, units_on(nn, placed, holder, gid) + [(gone, 0, gone_g), (9999, 0, 7),
                                                                          (gid, 0, g ^ (1 << 62))])
    assert (counts["unknown"], counts["foreign"]) == (1, 2)  # (+ "deleted": its other /gone unit, if any)
    assert (gone, 0, gone_g) in nn.blocks.pending_deletes(holder)
    assert all(g2 in (gone, gid) for g2, _i, _gen in nn.blocks.pending_deletes(holder))
    assert (gid, 0, g ^ (1 << 62)) not in nn.blocks.pending_deletes(holder)
    # reports nothing: its unit is missing and leaves the map
    assert nn.block_report(other, []).get("missing") == 1
    assert 1 not in {u.index for u in nn.file_info("/f").groups[0].units}
    # an extra copy of a unit that a live DataNode holds -> delete the extra
    assert nn.block_report("dn6", [(gid, 0, g)]).get("stale") == 1
    assert (gid, 0, g) in nn.blocks.pending_deletes("dn6")
    assert {u.index: u.datanode_id for u in nn.file_info("/f").groups[0].units}[0] == holder
    # the missing unit turns up again -> adopted; of another generation it would not be
    assert nn.block_report(other, [(gid, 1, g ^ (1 << 62))]).get("foreign") == 1
    assert 1 not in {u.index for u in nn.file_info("/f").groups[0].units}
    assert nn.block_report(other, [(gid, 1, g)]).get("adopted") == 1
    assert nn.fsck().status == "HEALTHY"


def test_report_that_may_predate_a_placement_drops_nothing(nn):
    add_datanodes(nn, 5)
    gid, placed = one_group(nn)
    assert nn.block_report(placed[0], []) == {}
    assert nn.fsck().status == "HEALTHY"


def test_units_of_a_file_being_written_are_left_alone_but_a_report_is_a_receipt(nn, clock):
    add_datanodes(nn, 5)
    created = nn.create("/f")
    group = nn.add_block_group(created.file_id)
    clock.advance(REPORT_GRACE_S + 1)
    heartbeat_all(nn)
    dn = group.units[0].datanode_id
    assert nn.block_report(dn, []) == {}
    # its own unit: the receipt a lost UnitStored did not bring; another DataNode's: not judged yet
    assert nn.block_report(dn, [(group.id, 0, group.generation), (group.id, 1, group.generation)]) == \
        {"received": 1, "writing": 1}
    assert nn.blocks.pending_deletes(dn) == []
    assert nn.blocks.unreported[group.id] == {1, 2, 3, 4}


def test_copy_on_a_dead_datanode_moves_to_the_reporter(nn, clock):
    add_datanodes(nn, 6)
    nn.heartbeat("dn6", "", used_bytes=10**9)
    gid, placed = one_group(nn)
    dead = placed[2]
    clock.advance(31)
    heartbeat_all(nn, [f"dn{i}" for i in range(1, 7) if f"dn{i}" != dead])
    assert nn.block_report("dn6", [(gid, 2, generation(nn, gid))]) == {"moved": 1}
    assert {u.index: u.datanode_id for u in nn.file_info("/f").groups[0].units}[2] == "dn6"
    assert (gid, 2, generation(nn, gid)) in nn.blocks.pending_deletes(dead)


def test_dead_interval_and_return(nn, clock):
    add_datanodes(nn, 5)
    gid, placed = one_group(nn)
    silent = placed[4]
    others = [d for d in placed.values() if d != silent]
    clock.advance(29)
    heartbeat_all(nn, others)
    assert nn.liveness.is_live(silent)
    clock.advance(2)  # 31 s without a heartbeat
    assert not nn.liveness.is_live(silent)
    assert 4 not in {u.index for u in nn.file_info("/f").groups[0].units}  # omitted, not forgotten
    assert nn.fsck().degraded == 1
    states = {d.id: d.state for d in nn.report().datanodes}
    assert states[silent] == "dead" and states[others[0]] == "live"
    nn.heartbeat(silent, "")
    assert 4 in {u.index for u in nn.file_info("/f").groups[0].units}
    assert nn.fsck().status == "HEALTHY"


def test_after_a_restart_units_are_located_as_their_datanodes_report(tmp_path, clock):
    """Locations are memory only: a restarted NameNode knows a file's groups at once and where its
    units are once each DataNode has registered and reported; a DataNode it has not heard since it
    started is asked to register first."""
    nn = make_namenode(tmp_path / "nn", clock)
    add_datanodes(nn, 5)
    write_file(nn, "/f", WHOLE)
    held = {dn: [(g.id, u.index, g.generation) for g in nn.file_info("/f").groups for u in g.units
                 if u.datanode_id == dn] for dn in ("dn1", "dn2", "dn3", "dn4", "dn5")}
    clock.advance(1000)  # long after every heartbeat
    nn.close()
    nn = make_namenode(tmp_path / "nn", clock)
    assert nn.file_info("/f").groups[0].units == []
    assert nn.heartbeat("dn1", "").reregister
    nn.register("dn1", "127.0.0.1:40001")
    assert not nn.heartbeat("dn1", "").reregister
    nn.block_report("dn1", held["dn1"])
    assert [u.datanode_id for u in nn.file_info("/f").groups[0].units] == ["dn1"]
    for dn in ("dn2", "dn3", "dn4", "dn5"):
        nn.register(dn, f"127.0.0.1:{40000 + int(dn[2:])}")
        nn.block_report(dn, held[dn])
    assert len(nn.file_info("/f").groups[0].units) == 5
    clock.advance(31)
    nn.heartbeat("dn1", "")
    assert [u.datanode_id for u in nn.file_info("/f").groups[0].units] == ["dn1"]
    nn.close()


def test_an_address_change_in_a_heartbeat_is_what_locations_carry(nn):
    add_datanodes(nn, 5)
    write_file(nn, "/f", WHOLE)
    holder = nn.file_info("/f").groups[0].units[0].datanode_id
    nn.heartbeat(holder, "127.0.0.1:5555", data_address="127.0.0.1:5556")
    unit = next(u for u in nn.file_info("/f").groups[0].units if u.datanode_id == holder)
    assert (unit.address, unit.data_address) == ("127.0.0.1:5555", "127.0.0.1:5556")


def test_deletes_are_sent_resent_and_confirmed_by_block_report(nn, clock):
    add_datanodes(nn, 5)
    gid, placed = one_group(nn)
    g = generation(nn, gid)
    nn.delete("/f")
    first = heartbeat_all(nn)
    assert {dn: cmds for dn, cmds in first.items()} == \
        {dn: [DeleteUnit(gid, i, g)] for i, dn in placed.items()}
    assert heartbeat_all(nn) == {dn: [] for dn in placed.values()}  # not resent at once
    clock.advance(DELETE_RESEND_S)
    assert heartbeat_all(nn)[placed[0]] == [DeleteUnit(gid, 0, g)]
    nn.block_report(placed[0], [])  # gone: confirmed
    assert nn.blocks.pending_deletes(placed[0]) == []
    nn.block_report(placed[1], [(gid, 1, g)])  # still there: sent again with the next heartbeat
    assert nn.heartbeat(placed[1], "").commands == [DeleteUnit(gid, 1, g)]
    pending = {d.id: d.pending_deletes for d in nn.report().datanodes}
    assert pending[placed[0]] == 0 and pending[placed[1]] == 1


def test_a_heartbeat_confirms_the_deletes_its_datanode_did_and_only_those(nn):
    """As HDFS's incremental reports: the next heartbeat says which deletes were done, so nothing
    waits a full report's interval for them (a repair may not go to a DataNode still deleting a
    unit of the group). Another generation of the same unit confirms nothing."""
    add_datanodes(nn, 5)
    gid, placed = one_group(nn)
    g = generation(nn, gid)
    nn.delete("/f")
    heartbeat_all(nn)
    nn.heartbeat(placed[0], "", deleted=[(gid, 0, g + 1)])   # not the copy it was told to delete
    assert nn.blocks.pending_deletes(placed[0]) == [(gid, 0, g)]
    nn.heartbeat(placed[0], "", deleted=[(gid, 0, g)])
    assert nn.blocks.pending_deletes(placed[0]) == []
    assert nn.blocks.pending_deletes(placed[1]) == [(gid, 1, g)]   # its DataNode has not said so
    deleting = nn.blocks.datanodes_deleting([gid])[gid]
    assert placed[0] not in deleting and placed[1] in deleting
    assert {d.id: d.pending_deletes for d in nn.report().datanodes}[placed[0]] == 0


def test_a_heartbeat_drops_a_location_its_datanode_says_it_deleted_at_another_namenodes_command(nn):
    """HA: the active ordered the delete, this NameNode (a standby) heard the copy's receipt and
    maps it. The DataNode tells every NameNode of every delete (datanode/reports.py), after the
    receipts of the copy it sent them: here, the location goes at once, not at the next full
    report. Another generation's delete, or one of a copy mapped elsewhere, drops nothing."""
    add_datanodes(nn, 5)
    gid, placed = one_group(nn)
    g = generation(nn, gid)
    other, other_placed = one_group(nn, "/g")
    nn.heartbeat(placed[0], "", deleted=[(gid, 0, g + 1), (gid, 1, g)])   # another generation; unit 1 is on another
    assert {u.index: u.datanode_id for u in nn.file_info("/f").groups[0].units} == placed
    assert nn.blocks.pending_deletes(placed[0]) == []                      # this NameNode never ordered it
    nn.heartbeat(placed[0], "", deleted=[(gid, 0, g)])
    assert {u.index: u.datanode_id for u in nn.file_info("/f").groups[0].units} == \
        {i: d for i, d in placed.items() if i != 0}
    assert nn.blocks.mapped[placed[0]] == 1                                 # /g's unit stays
    assert {u.index: u.datanode_id for u in nn.file_info("/g").groups[0].units} == other_placed
    [repair] = nn.tick()                                                    # the active rebuilds it
    assert repair.index == 0 and repair.group_id == gid


def test_a_recursive_delete_is_one_record_gone_at_once_its_groups_freed_in_bounded_steps(nn, monkeypatch):
    """HDFS's delete: the tree is unlinked in one change (one journal record), its blocks removed
    in increments after. Here the groups of the first COLLECT_INLINE files go with the delete, the
    rest a bounded step per monitor pass, until every unit is owed a delete."""
    from hedgefs.namenode import namespace_changes, namesystem
    monkeypatch.setattr(namespace_changes, "COLLECT_INLINE", 40)
    monkeypatch.setattr(namesystem, "COLLECT_STEP", 60)
    add_datanodes(nn, 5)
    nn.mkdir("/d/sub", parents=True)
    for i in range(150):
        write_file(nn, f"/d/{'sub/' if i % 3 else ''}f{i}", WHOLE)
    before = nn.journal.last
    nn.delete("/d", recursive=True)
    assert nn.journal.last == before + 1
    with pytest.raises(NotFound):
        nn.file_info("/d/sub/f1")
    assert nn.collector.pending
    assert 0 < sum(nn.blocks.pending_delete_counts().values()) < 150 * 5
    nn.tick()
    assert not nn.collector.pending
    assert sum(nn.blocks.pending_delete_counts().values()) == 150 * 5
    assert (nn.status().files, nn.status().directories) == (0, 1)


def test_a_datanode_owed_more_than_a_page_of_deletes_gets_them_all_oldest_first(nn, monkeypatch):
    from hedgefs.namenode.blocks import manager
    monkeypatch.setattr(manager, "MAX_DELETES_PER_HEARTBEAT", 3)
    add_datanodes(nn, 5)
    gone = []
    for i in range(5):
        gid, _placed = one_group(nn, f"/f{i}")
        gone.append((gid, generation(nn, gid)))
        nn.delete(f"/f{i}")
    index = {gid: i for gid, i, _g in nn.blocks.pending_deletes("dn1")}
    sent = [[c.group_id for c in nn.heartbeat("dn1", "").commands] for _ in range(3)]
    assert sent == [[g for g, _ in gone[:3]], [g for g, _ in gone[3:]], []]
    nn.heartbeat("dn1", "", deleted=[(g, index[g], gen) for g, gen in gone])
    assert nn.blocks.pending_deletes("dn1") == []


def test_reregistering_datanode_gets_its_deletes_again(nn):
    add_datanodes(nn, 5)
    gid, placed = one_group(nn)
    g = generation(nn, gid)
    nn.delete("/f")
    heartbeat_all(nn)
    nn.register(placed[3], "127.0.0.1:40003")
    assert nn.heartbeat(placed[3], "").commands == [DeleteUnit(gid, 3, g)]


def test_bad_unit_is_marked_and_deleted_only_once_its_repair_makes_the_group_whole(nn):
    add_datanodes(nn, 6)
    nn.heartbeat("dn6", "", used_bytes=10**9)  # keep dn6 out of the placement: the repair target
    gid, placed = one_group(nn)
    g = generation(nn, gid)
    nn.report_bad_units([(gid, 2, g, placed[2], "checksum mismatch")])
    assert 2 not in {u.index for u in nn.file_info("/f").groups[0].units}   # 4 good units: enough
    assert nn.blocks.pending_deletes(placed[2]) == []                          # but not deleted
    [problem] = nn.fsck().problems
    assert (problem.status, problem.live_units, problem.corrupt_units) == ("DEGRADED", 4, 1)
    assert nn.report().corrupt_units == 1
    # a report naming the wrong DataNode does not unmap the good copy
    nn.report_bad_units([(gid, 0, g, placed[1], "")])
    assert 0 in {u.index for u in nn.file_info("/f").groups[0].units}
    [repair] = nn.tick()
    assert (repair.index, repair.target) == (2, "dn6")
    [command] = nn.heartbeat("dn6", "").commands
    assert [u.index for u in command.sources] == [0, 1, 3, 4]                # never the corrupt copy
    assert nn.unit_stored("dn6", gid, 2, g) == "moved"
    assert nn.fsck().status == "HEALTHY" and nn.report().corrupt_units == 0
    assert nn.heartbeat(placed[2], "").commands == [DeleteUnit(gid, 2, g)]   # whole again: now it goes


def test_a_repair_goes_to_a_datanode_owing_a_delete_of_another_unit_of_the_group(nn, clock):
    """A surplus copy's delete waits for its group to be whole; a repair that excluded every
    DataNode owing a delete of the group waited for it in turn: the group stayed degraded for good
    (chaos 4242022 --secure, after a NameNode restart: the three non-holders each owed one). Only a
    delete of the unit being repaired keeps a repair away (it would delete the new copy)."""
    add_datanodes(nn, 6)
    nn.heartbeat("dn6", "", used_bytes=10**9)  # keep dn6 out of the placement: the only non-holder
    gid, placed = one_group(nn)
    g = generation(nn, gid)
    clock.advance(REPORT_GRACE_S + 1)
    heartbeat_all(nn)
    assert nn.block_report("dn6", [(gid, 0, g)]).get("stale") == 1   # a surplus copy of unit 0
    nn.report_bad_units([(gid, 2, g, placed[2], "checksum mismatch")])
    assert nn.heartbeat("dn6", "").commands == []                     # held: the group is not whole
    [repair] = nn.tick()
    assert (repair.index, repair.target) == (2, "dn6")
    [command] = nn.heartbeat("dn6", "").commands
    assert command.index == 2
    assert nn.unit_stored("dn6", gid, 2, g) == "moved"
    assert nn.fsck().status == "HEALTHY"
    assert DeleteUnit(gid, 0, g) in nn.heartbeat("dn6", "").commands  # whole again: the surplus goes


def test_no_repair_goes_to_a_datanode_owing_a_delete_of_that_very_unit(nn, clock):
    add_datanodes(nn, 6)
    nn.heartbeat("dn6", "", used_bytes=10**9)
    gid, placed = one_group(nn)
    g = generation(nn, gid)
    clock.advance(REPORT_GRACE_S + 1)
    heartbeat_all(nn)
    assert nn.block_report("dn6", [(gid, 2, g)]).get("stale") == 1   # a surplus copy of unit 2 ...
    nn.report_bad_units([(gid, 2, g, placed[2], "checksum mismatch")])   # ... whose mapped copy rots
    assert all(r.target != "dn6" or r.index != 2 for r in nn.tick())


def test_fsck_counts_and_status(nn, clock):
    add_datanodes(nn, 5)
    nn.mkdir("/a")
    write_file(nn, "/a/healthy", 3 * BLOCK * 2)  # two full groups
    write_file(nn, "/a/degraded", WHOLE, lost={0: {4}})
    write_file(nn, "/b", WHOLE, lost={0: {3, 4}})
    assert nn.fsck("/a/healthy").status == "HEALTHY"
    report = nn.fsck("/a")
    assert (report.files, report.groups, report.healthy, report.degraded, report.missing) == (2, 3, 2, 1, 0)
    assert report.status == "DEGRADED" and report.corrupt_files == 0
    assert [(p.path, p.live_units, p.needed_units, p.status) for p in report.problems] == \
        [("/a/degraded", 4, 3, "DEGRADED")]
    # /b loses one more unit to a dead DataNode: 2 of 3 needed -> unreadable
    b = nn.file_info("/b").groups[0]
    victim = b.units[0].datanode_id
    clock.advance(31)
    heartbeat_all(nn, [f"dn{i}" for i in range(1, 6) if f"dn{i}" != victim])
    report = nn.fsck("/")
    assert report.status == "CORRUPT" and report.corrupt_files == 1
    assert ("/b", 2, 3, "MISSING") in [(p.path, p.live_units, p.needed_units, p.status) for p in report.problems]


def test_fsck_counts_and_a_delete_owes_every_stored_unit(nn):
    add_datanodes(nn, 5)
    nn.mkdir("/t")
    write_file(nn, "/t/a", 3 * BLOCK * 2)                 # two groups
    write_file(nn, "/t/b", WHOLE, lost={0: {4}})             # degraded
    write_file(nn, "/t/c", WHOLE, lost={0: {3, 4}})          # degraded by two
    write_file(nn, "/t/d", WHOLE)
    whole = nn.fsck("/t")
    assert (whole.files, whole.groups, whole.healthy, whole.degraded) == (4, 5, 3, 2)
    assert [(p.path, p.live_units) for p in whole.problems] == [("/t/b", 4), ("/t/c", 3)]
    stored = sum(nn.blocks.mapped.values())
    owed = sum(nn.blocks.pending_delete_counts().values())   # the writer's targets that never stored
    assert (stored, owed) == (10 + 4 + 3 + 5, 1 + 2)
    nn.delete("/t", recursive=True)
    assert sum(nn.blocks.mapped.values()) == 0 and not nn.blocks.groups
    assert sum(nn.blocks.pending_delete_counts().values()) == owed + stored


def test_report_describes_datanodes(nn, clock):
    add_datanodes(nn, 5)
    write_file(nn, "/f", WHOLE, lost={0: {0}})
    nn.heartbeat("dn1", "", used_bytes=1234, units=7)
    clock.advance(2.5)
    report = nn.report()
    dn1 = report.datanodes[0]
    assert (dn1.id, dn1.address, dn1.state, dn1.used_bytes, dn1.units) == ("dn1", "127.0.0.1:40001", "live", 1234, 7)
    assert dn1.last_heartbeat_age_ms == 2500
    assert sum(d.pending_deletes for d in report.datanodes) == 1
    assert report.groups_waiting_repair == 1 and report.repairs_done == 0


def test_after_a_restart_a_dead_unregistered_holder_does_not_make_a_repaired_copy_stale(tmp_path, clock):
    nn = make_namenode(tmp_path / "nn", clock)
    add_datanodes(nn, 6)
    nn.heartbeat("dn6", "", used_bytes=10**9)
    gid, placed = one_group(nn)
    dead = placed[2]
    clock.advance(31)
    heartbeat_all(nn, [f"dn{i}" for i in range(1, 7) if f"dn{i}" != dead])
    [repair] = nn.tick()
    nn.heartbeat(repair.target, "")  # rebuilt there; the NameNode restarts before UnitStored
    nn.close()
    nn = make_namenode(tmp_path / "nn", clock)
    nn.register(repair.target, "127.0.0.1:1")
    # the dead holder has not spoken to this process: the map has no copy of the unit
    assert nn.block_report(repair.target, [(gid, 2, generation(nn, gid))]) == {"adopted": 1}
    assert nn.blocks.pending_deletes(repair.target) == []
    assert {u.index: u.datanode_id for u in nn.file_info("/f").groups[0].units}[2] == repair.target
    nn.close()


def test_bad_unit_is_kept_when_the_group_has_no_other_k_live_units(nn):
    add_datanodes(nn, 5)
    write_file(nn, "/f", WHOLE, lost={0: {3, 4}})  # exactly k = 3 live units
    group = nn.file_info("/f").groups[0]
    holder = group.units[0].datanode_id
    nn.report_bad_units([(group.id, 0, group.generation, holder, "checksum mismatch at offset 0")])
    assert [u.index for u in nn.file_info("/f").groups[0].units] == [0, 1, 2]  # one bad chunk, rest readable
    assert nn.blocks.pending_deletes(holder) == []
    assert nn.fsck().status == "DEGRADED"


def test_lrc_groups_are_judged_by_which_units_live_not_how_many(nn, clock):
    """LRC-6-2-2: 7 units without group 0's data still decode (DEGRADED, repaired); 6 live units
    that are group 0's local parity short (0, 1, 2 and 6 lost) do not (MISSING, no repair)."""
    add_datanodes(nn, 17)
    nn.mkdir("/lrc")
    write_file(nn, "/lrc/lost", 6 * 1024, policy="LRC-6-2-2-1k")
    lost = nn.file_info("/lrc/lost").groups[0]
    dead = {u.datanode_id for u in lost.units if u.index in (0, 1, 2, 6)}
    clock.advance(31)
    heartbeat_all(nn, [f"dn{i}" for i in range(1, 18) if f"dn{i}" not in dead])
    # 13 live DataNodes: 7 stored, 3 that were not (deletes pending there), 3 to repair to
    write_file(nn, "/lrc/degraded", 6 * 1024, policy="LRC-6-2-2-1k", lost={0: {0, 1, 2}})
    with pytest.raises(FailedPrecondition, match=r"its stored units \[3, 4, 5, 7, 8, 9\] cannot decode it "
                                                 r"\(LRC-6-2-2-1k\)"):
        write_file(nn, "/lrc/refused", 6 * 1024, policy="LRC-6-2-2-1k", lost={0: {0, 1, 2, 6}})
    report = nn.fsck("/lrc")
    by_path = {p.path: (p.live_units, p.status) for p in report.problems}
    assert by_path == {"/lrc/degraded": (7, "DEGRADED"), "/lrc/lost": (6, "MISSING")}
    assert report.status == "CORRUPT" and report.corrupt_files == 1
    planned = nn.tick()   # also re-judges the groups whose DataNodes died, for the status page
    degraded_id = nn.file_info("/lrc/degraded").groups[0].id
    assert sorted((r.group_id, r.index) for r in planned) == [(degraded_id, i) for i in (0, 1, 2)]
    status = nn.status()
    assert (status.groups_missing, status.groups_degraded) == (1, 1)


def test_a_block_report_in_parts_is_judged_missing_only_once_the_last_arrives(tmp_path, clock):
    """A DataNode's report in parts (so each message stays under the 4 MiB limit): each part's
    units are claimed as it comes (one hold of the lock a part), nothing is judged missing before
    the last part; out of order is a one-line refusal."""
    from hedgefs.namenode.errors import InvalidArgument

    nn = make_namenode(tmp_path / "nn", clock)
    ids = add_datanodes(nn, 5)
    write_file(nn, "/f", 3 * 4096 * 3)    # three groups, one unit of each on every DataNode
    mine = sorted((g.id, u.index, g.generation) for g in nn.file_info("/f").groups for u in g.units
                  if u.datanode_id == ids[0])
    assert len(mine) == 3
    clock.advance(60)    # past the grace of freshly placed units
    assert nn.block_report(ids[0], mine[:1], part=0, more=True) == {"parts_held": 1}
    assert nn.block_report(ids[0], mine[1:2], part=1, more=True) == {"parts_held": 2}
    assert nn.block_report(ids[0], mine[2:], part=2).get("missing", 0) == 0
    with pytest.raises(InvalidArgument, match=r"block report part 2 from dn1 out of order \(expected 0\)"):
        nn.block_report(ids[0], mine, part=2)
    nn.block_report(ids[0], mine[:1], part=0, more=True)
    assert nn.block_report(ids[0], [], part=1).get("missing") == 2   # the whole report lacked two units


def test_a_report_part_is_claimed_at_once_and_the_missing_are_looked_for_off_the_lock(tmp_path, clock):
    """After a restart a part's units are located as soon as it arrives; the scan for units the
    report lacks (every group read) runs without the writers' lock, and only their drop under it."""
    import threading

    nn = make_namenode(tmp_path / "nn", clock)
    ids = add_datanodes(nn, 5)
    write_file(nn, "/f", 3 * 4096 * 3)
    held = sorted((g.id, u.index, g.generation) for g in nn.file_info("/f").groups for u in g.units
                  if u.datanode_id == ids[0])
    clock.advance(60)
    nn.close()
    nn = make_namenode(tmp_path / "nn", clock)
    nn.register(ids[0], "127.0.0.1:40001")
    assert nn.block_report(ids[0], held[:1], part=0, more=True) == {"parts_held": 1}
    assert nn.blocks.mapped[ids[0]] == 1    # located before the last part
    assert nn.block_report(ids[0], held[1:], part=1) == {"adopted": 3}   # the whole report's counts
    lock_free = []
    scan = nn.manager.claims.missing_candidates

    def watched(datanode_id, reported):
        taker = threading.Thread(target=lambda: lock_free.append(nn.lock.acquire(timeout=5) and not nn.lock.release()))
        taker.start()
        taker.join()
        return scan(datanode_id, reported)

    nn.manager.claims.missing_candidates = watched
    clock.advance(60)
    assert nn.block_report(ids[0], held[1:]).get("missing") == 1   # the first unit is gone from the disk
    assert lock_free == [True]
    nn.close()


def test_a_receipt_that_arrives_after_its_copy_was_deleted_maps_nothing(nn, clock):
    """A DataNode's receipts travel on their own thread, its heartbeats (which confirm deletes) on
    another: a receipt checked before a delete and delivered after it (a retried send, a slow
    handler) announces a copy that is gone. Were it mapped once the good copy is lost, a read would
    be sent there (NOT_FOUND), and the group would look whole to the surplus rule."""
    add_datanodes(nn, 6)
    nn.heartbeat("dn6", "", used_bytes=10**9)   # keep dn6 out of the placement
    gid, placed = one_group(nn)
    g = generation(nn, gid)
    assert nn.unit_stored("dn6", gid, 0, g) == "stale"           # a surplus copy of unit 0
    assert nn.heartbeat("dn6", "").commands == [DeleteUnit(gid, 0, g)]
    nn.heartbeat("dn6", "", deleted=[(gid, 0, g)])              # done
    nn.report_bad_units([(gid, 0, g, placed[0], "checksum mismatch")])   # and unit 0's good copy is bad
    clock.advance(5)
    assert nn.unit_stored("dn6", gid, 0, g) == "deleting"        # the old receipt, late
    assert 0 not in {u.index for u in nn.file_info("/f").groups[0].units}
    assert listed_while_deleting(nn) == []
    # a repair of unit 0 onto dn6 is a new copy: its receipt counts
    [repair] = nn.tick()
    assert (repair.index, repair.target) == (0, "dn6")
    assert nn.heartbeat("dn6", "").commands[0].index == 0
    assert nn.unit_stored("dn6", gid, 0, g) == "moved"
    assert {u.index: u.datanode_id for u in nn.file_info("/f").groups[0].units}[0] == "dn6"
