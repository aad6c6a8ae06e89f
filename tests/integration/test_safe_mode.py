"""Safe mode at a single (SQLite) NameNode's start-up, as HDFS's: after a restart on existing groups
it sends no deletes, plans no repairs and refuses namespace changes (one line, exit 1) until a
share of the block groups is readable from DataNodes that have reported (k units of a group; or a
deadline); reads are served; a fresh namespace never
enters it; `hedgefs admin safemode get|enter|leave|wait` (HDFS's `dfsadmin -safemode`)."""

import json
import os
import subprocess
import sys
import urllib.request

import pytest
from conftest import assert_one_line_error, cli_env, client, pattern, run_cli, start_cluster, wait_until
from nn_support import add_datanodes, heartbeat_all, held, make_namenode, write_file

from hedgefs.namenode.blocks.safe_mode import SafeModeRefusal
from hedgefs.proto import hedgefs_pb2 as pb

# ------------------------------------------------------------------ the namesystem, on a fake clock


def reopen(nn, path, clock, **kwargs):
    nn.close()
    return make_namenode(path, clock, safe_mode_share=0.9, **kwargs)


def test_a_fresh_namespace_never_enters_safe_mode(tmp_path, clock):
    nn = make_namenode(tmp_path / "nn", clock, safe_mode_share=0.9, safe_mode_deadline_s=30)
    try:
        assert not nn.in_safe_mode
        nn.mkdir("/a")
    finally:
        nn.close()


def report(nn, dn, units) -> dict[str, int]:
    """Register and block-report ``units``; the outcomes but for the units the map already puts
    there (after a restart the map knows no location: every unit reported is adopted)."""
    nn.register(dn, f"127.0.0.1:{40000 + int(dn[2:])}")
    return nn.block_report(dn, units)


def test_a_restart_waits_for_the_share_of_readable_groups_not_for_dead_datanodes(tmp_path, clock):
    nn = make_namenode(tmp_path / "nn", clock)
    ids = add_datanodes(nn, 5)
    write_file(nn, "/f", 3 * 4096 * 2)   # 2 groups of RS-3-2, a unit of each on every DataNode
    units = {dn: held(nn, dn) for dn in ids}
    nn = reopen(nn, tmp_path / "nn", clock, safe_mode_deadline_s=100)
    assert nn.in_safe_mode and nn.safe_mode_state().reason == "start-up"
    with pytest.raises(SafeModeRefusal, match=r"cannot mkdir /x: the NameNode is in safe mode \(start-up: 0 of 2 "
                                              r"block groups readable from reported DataNodes, it waits for 90%\)"):
        nn.mkdir("/x")
    with pytest.raises(SafeModeRefusal, match="safe mode"):
        nn.delete("/f")
    assert [e.length for e in nn.list("/")] == [3 * 4096 * 2]     # reads of the namespace are served
    # Where its units are: once the DataNodes have reported. Answered at once, marked (a reader
    # asks again while the mark is set; a stat needs no locations).
    info = nn.file_info("/f")
    assert info.entry.length == 3 * 4096 * 2 and not any(g.units for g in info.groups)
    assert info.locations_pending == ("cannot read /f yet: the NameNode is starting and the block reports of "
                                      "DataNodes it expects are still to come (dn1, dn2, dn3, dn4, dn5); it waits "
                                      "30 s more at most")
    # Two of five DataNodes report: 2 units of each group, fewer than k = 3, so no group is
    # readable yet: still in safe mode, and no repair planned though the others are silent
    # until they are dead.
    for dn in ids[:2]:
        assert report(nn, dn, units[dn]) == {"adopted": 2}
    clock.advance(31)   # dn3..dn5 are dead now: their units would be rebuilt, but not yet
    heartbeat_all(nn, ids[:2])
    assert nn.tick() == [] and nn.in_safe_mode
    assert not nn.liveness.is_live("dn4") and not nn.repairs.in_flight
    assert (nn.safe_mode_state().groups_readable, nn.safe_mode_state().groups_total) == (0, 2)
    # A third: k units of every group are on reported DataNodes. Safe mode ends at the next pass,
    # without dn4 and dn5 (dead) or the deadline (70 s away).
    assert report(nn, ids[2], units[ids[2]]) == {"adopted": 2}
    nn.tick()
    assert not nn.in_safe_mode and nn.safemode._until - clock() > 60
    assert len(nn.file_info("/f").groups[0].units) == 3
    assert (nn.safe_mode_state().groups_readable, nn.safe_mode_state().groups_total) == (2, 2)
    nn.mkdir("/x")
    nn.close()


def test_after_safe_mode_a_group_not_located_yet_is_a_retry_while_the_reports_it_expects_are_due(tmp_path, clock,
                                                                                                   caplog):
    """Safe mode ends at the share; a read of a group of the rest is "starting, retry" (not "no
    live replica") while a DataNode this NameNode knew has not reported, and served once it has.
    A DataNode gone for good is waited for at most the dead interval, and named in the log."""
    nn = make_namenode(tmp_path / "nn", clock)
    ids = add_datanodes(nn, 5)
    write_file(nn, "/a", 3 * 4096)
    write_file(nn, "/b", 3 * 4096)
    units = {dn: held(nn, dn) for dn in ids}
    b = nn.file_info("/b").groups[0].id
    nn.close()
    nn = make_namenode(tmp_path / "nn", clock, safe_mode_share=0.5, safe_mode_deadline_s=100)
    try:
        assert nn.manager.expected.known == set(ids)     # the DataNodes of its earlier life (DATA_DIR/datanodes)
        report(nn, ids[0], units[ids[0]])
        report(nn, ids[1], units[ids[1]])
        report(nn, ids[2], [u for u in units[ids[2]] if u[0] != b])   # dn3's copy of /b's unit is gone
        nn.tick()
        assert not nn.in_safe_mode      # /a readable: 1 of 2 groups, the share
        # One StatMany of a located and a short file: both answered at once, only /b marked.
        a, b_info = nn.file_infos(["/a", "/b"])
        assert len(a.groups[0].units) == 3 and a.locations_pending == ""
        assert len(b_info.groups[0].units) == 2 and b_info.entry.path == "/b"
        assert b_info.locations_pending.startswith("cannot read /b yet: the NameNode is starting and the block "
                                                   "reports of DataNodes it expects are still to come (dn4, dn5)")
        report(nn, ids[3], units[ids[3]])
        info = nn.file_info("/b")     # k units located: served unmarked, dn5 or not
        assert len(info.groups[0].units) == 3 and info.locations_pending == ""
        # dn5 never comes back: 30 s (the dead interval) after the start, reads are no longer held
        # for it and the log says so; the file of known DataNodes forgets it.
        clock.advance(31)
        nn.tick()
        assert "stopped waiting for the block reports of dn5, 30 s after this NameNode started serving" in caplog.text
        assert "dn5" not in (tmp_path / "nn" / "datanodes").read_text().split()
    finally:
        nn.close()


def test_a_datanode_gone_for_good_leaves_a_group_it_alone_held_unavailable_after_the_dead_interval(tmp_path, clock):
    nn = make_namenode(tmp_path / "nn", clock)
    ids = add_datanodes(nn, 5)
    write_file(nn, "/f", 3 * 4096)
    units = {dn: held(nn, dn) for dn in ids}
    nn = reopen(nn, tmp_path / "nn", clock, safe_mode_deadline_s=100)
    try:
        for dn in ids[:2]:      # 2 units of k = 3: dn3..dn5 are gone for good
            report(nn, dn, units[dn])
        assert nn.file_info("/f").locations_pending.endswith("still to come (dn3, dn4, dn5); it waits 30 s more at most")
        clock.advance(20)
        assert nn.file_info("/f").locations_pending.endswith("it waits 10 s more at most")
        clock.advance(11)
        heartbeat_all(nn, ids[:2])
        info = nn.file_info("/f")     # the truth, unmarked: the client says "2 live units, 3 needed"
        assert len(info.groups[0].units) == 2 and info.locations_pending == ""
        # The wait is over for good: a short group's lookup no longer lists the live DataNodes.
        listed, live_ids = [], nn.liveness.live_ids
        nn.liveness.live_ids = lambda: listed.append(1) or live_ids()
        assert [nn.file_info("/f").locations_pending for _ in range(3)] == ["", "", ""] and listed == []
    finally:
        nn.close()


def test_a_live_datanode_whose_report_is_late_at_the_bound_stays_expected_at_the_next_start(tmp_path, clock, caplog):
    nn = make_namenode(tmp_path / "nn", clock)
    ids = add_datanodes(nn, 5)
    write_file(nn, "/f", 3 * 4096)
    units = {dn: held(nn, dn) for dn in ids}
    nn = reopen(nn, tmp_path / "nn", clock, safe_mode_deadline_s=100)
    try:
        for dn in ids[:4]:
            report(nn, dn, units[dn])
        nn.register("dn5", "127.0.0.1:40005")   # registered and heartbeating, its report late
        for _ in range(2):
            clock.advance(16)
            heartbeat_all(nn, ids)
        nn.tick()   # 32 s: past the bound
        assert "stopped waiting for the block reports of dn5" in caplog.text and nn.liveness.is_live("dn5")
        assert "dn5" in (tmp_path / "nn" / "datanodes").read_text().split()
        report(nn, "dn5", units["dn5"])
        nn = reopen(nn, tmp_path / "nn", clock, safe_mode_deadline_s=100)
        assert nn.manager.expected.expected == set(ids)
    finally:
        nn.close()


def test_an_undecodable_datanodes_file_is_one_warning_and_an_uninformed_start(tmp_path, clock, caplog):
    nn = make_namenode(tmp_path / "nn", clock)
    ids = add_datanodes(nn, 5)
    write_file(nn, "/f", 3 * 4096)
    nn.close()
    (tmp_path / "nn" / "datanodes").write_bytes(b"dn1\n\xff\xfe garbage\n")
    nn = make_namenode(tmp_path / "nn", clock, safe_mode_share=0.9, safe_mode_deadline_s=100)
    try:
        warnings = [r for r in caplog.records if "cannot read the DataNodes known before" in r.getMessage()]
        assert len(warnings) == 1 and "datanodes" in warnings[0].getMessage()
        assert nn.manager.expected.known == set()
        assert nn.file_info("/f").locations_pending.startswith("cannot read /f yet: the NameNode is starting and "
                                                               "no DataNode has sent its block report yet")
        nn.register(ids[0], "127.0.0.1:40001")   # written anew as DataNodes register
        assert (tmp_path / "nn" / "datanodes").read_text().split() == [ids[0]]
    finally:
        nn.close()


def test_the_share_reported_is_counted_as_reports_arrive_not_by_a_pass(tmp_path, clock):
    """Clients retry refusals every 50 ms to 1 s: the counts a refusal and the state show are the
    block map's, kept as units are reported (no pass over every group); the monitor's pass ends
    safe mode once they reach the share."""
    nn = make_namenode(tmp_path / "nn", clock)
    ids = add_datanodes(nn, 5)
    write_file(nn, "/f", 3 * 4096)
    units = {dn: held(nn, dn) for dn in ids}
    nn = reopen(nn, tmp_path / "nn", clock, safe_mode_deadline_s=100)
    try:
        for dn in ids[:2]:
            report(nn, dn, units[dn])
        with pytest.raises(SafeModeRefusal, match=r"\(start-up: 0 of 1 block groups"):
            nn.mkdir("/x")
        report(nn, ids[2], units[ids[2]])
        assert nn.safe_mode_state().groups_readable == 1 and nn.in_safe_mode
        with pytest.raises(SafeModeRefusal, match=r"\(start-up: 1 of 1 block groups"):
            nn.mkdir("/x")
        nn.tick()
        assert not nn.in_safe_mode and nn.safe_mode_state().groups_readable == 1
    finally:
        nn.close()


def test_the_deadline_ends_a_start_up_safe_mode(tmp_path, clock):
    nn = make_namenode(tmp_path / "nn", clock)
    add_datanodes(nn, 5)
    write_file(nn, "/f", 4096)
    nn = reopen(nn, tmp_path / "nn", clock, safe_mode_deadline_s=30)
    assert nn.in_safe_mode
    clock.advance(10)
    nn.tick()
    assert nn.in_safe_mode and 19 <= nn.safe_mode_state().deadline_left_s <= 20
    clock.advance(21)
    nn.tick()
    assert not nn.in_safe_mode
    nn.mkdir("/x")
    nn.close()


def test_an_admins_safe_mode_lasts_until_leave(tmp_path, clock):
    nn = make_namenode(tmp_path / "nn", clock, safe_mode_share=0.9)
    try:
        add_datanodes(nn, 5)
        assert nn.safe_mode("enter").on
        clock.advance(3600)
        nn.tick()
        with pytest.raises(SafeModeRefusal, match="entered by an admin") as refused:
            nn.create("/f")
        assert not refused.value.retriable
        assert not nn.safe_mode("leave").on
        nn.mkdir("/x")
        with pytest.raises(Exception, match="get, enter or leave"):
            nn.safe_mode("sideways")
    finally:
        nn.close()


# ------------------------------------------------------------------ a real cluster


@pytest.fixture(scope="module")
def sm(tmp_path_factory):
    c = start_cluster(tmp_path_factory.mktemp("safe-mode"), policy="RS-3-2-64k", datanodes=5)
    yield c
    c.down()


def safemode(c, *args, env=None):
    r = run_cli("admin", "safemode", *args, "--json", namenode=c.namenode, env=env)
    assert r.code == 0, r.stderr
    return json.loads(r.stdout)


def test_cluster_restart_safe_mode_then_leaves_by_itself(sm):
    assert safemode(sm)["on"] is False     # a fresh namespace: off from the start
    data = pattern(700_000, seed=3)
    with client(sm.namenode) as f:
        f.write_bytes("/kept", data)
    down = ("dn1", "dn2", "dn3")   # the 2 left hold fewer than k = 3 units of the group
    for dn in down:
        sm.kill(dn)
    sm.restart("namenode")
    state = safemode(sm)
    assert state["on"] and state["reason"] == "start-up", state
    r = run_cli("mkdir", "/x", namenode=sm.namenode, env={"HEDGEFS_FAILOVER_DEADLINE_S": "1"})
    assert r.code == 1
    assert_one_line_error(r, "cannot mkdir /x: the NameNode is in safe mode (start-up:")
    r = run_cli("stat", "/kept", namenode=sm.namenode)   # served (reading the bytes: the admin test below)
    assert r.code == 0 and b"700000" in r.stdout, r.stderr
    r = run_cli("admin", "report", namenode=sm.namenode)
    assert r.code == 0 and b"safe mode: ON (start-up:" in r.stdout, r.stdout
    with urllib.request.urlopen(sm.http_url, timeout=10) as page:
        assert 'id="safe-mode">ON (start-up)' in page.read().decode()
    # A write that arrives now waits (the client retries a start-up refusal, here for as long as
    # the DataNodes' restarts may take) and succeeds once they are back and have reported.
    env = {**os.environ, **cli_env(sm.namenode), "HEDGEFS_FAILOVER_DEADLINE_S": "120"}
    put = subprocess.Popen([sys.executable, "-m", "hedgefs", "mkdir", "/after-restart"], env=env,
                           stderr=subprocess.PIPE)
    for dn in down:
        sm.start(dn)
    assert put.wait(timeout=150) == 0, put.stderr.read()
    state = safemode(sm)
    assert state["on"] is False and state["units_reported"] == state["units_total"] == 1, state


def test_admin_enter_and_leave(sm):
    safemode(sm, "wait")
    assert safemode(sm, "enter")["reason"] == "admin"
    r = run_cli("mkdir", "/y", namenode=sm.namenode)
    assert r.code == 1
    assert_one_line_error(r, "cannot mkdir /y", "safe mode", "hedgefs admin safemode leave")
    r = run_cli("cat", "/kept", namenode=sm.namenode)   # reads are served in safe mode
    assert r.code == 0 and r.stdout == pattern(700_000, seed=3), r.stderr
    r = run_cli("admin", "safemode", "get", namenode=sm.namenode)
    assert r.stdout.startswith(b"safe mode is ON (entered by an admin")
    assert safemode(sm, "leave")["on"] is False
    r = run_cli("mkdir", "/y", namenode=sm.namenode)
    assert r.code == 0, r.stderr



def test_no_delete_is_sent_in_start_up_safe_mode(tmp_path, clock):
    from hedgefs.namenode.model import DeleteUnit

    nn = make_namenode(tmp_path / "nn", clock)
    ids = add_datanodes(nn, 5)
    write_file(nn, "/keep", 4096)
    write_file(nn, "/gone", 4096)
    units = {dn: held(nn, dn) for dn in ids}   # what each DataNode holds: /keep's unit, and /gone's
    gone = {dn: [u for u in held(nn, dn) if u[0] == nn.file_info("/gone").groups[0].id] for dn in ids}
    units = {dn: [u for u in units[dn] if u not in gone[dn]] for dn in ids}
    nn.delete("/gone")   # its units are to be deleted: not sent before the restart
    nn = reopen(nn, tmp_path / "nn", clock, safe_mode_deadline_s=100)
    assert nn.in_safe_mode
    for dn in ids[:2]:   # 2 of 5 report (/keep's unit on each, fewer than k = 3): still in safe mode
        assert report(nn, dn, units[dn] + gone[dn]) == {"adopted": 1, "unknown": 1}   # /gone's: its delete waits
    nn.tick()
    assert nn.in_safe_mode
    assert not any(isinstance(c, DeleteUnit) for cs in heartbeat_all(nn, ids[:2]).values() for c in cs)
    for dn in ids[2:]:
        assert report(nn, dn, units[dn]) == {"adopted": 1}   # these had deleted /gone's units
    nn.tick()
    assert not nn.in_safe_mode
    sent = [c for cs in heartbeat_all(nn, ids[:2]).values() for c in cs if isinstance(c, DeleteUnit)]
    assert sent    # the deletes go out once it has left
    nn.close()
