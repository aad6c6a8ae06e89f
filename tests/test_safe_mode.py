"""Safe mode at a single (SQLite) NameNode's start-up, as HDFS's: after a restart on existing groups
it sends no deletes, plans no repairs and refuses namespace changes (one line, exit 1) until a
share of the units has been reported (or a deadline); reads are served; a fresh namespace never
enters it; `hedgefs admin safemode get|enter|leave|wait` (HDFS's `dfsadmin -safemode`)."""

import json
import os
import subprocess
import sys
import urllib.request

import pytest
from conftest import assert_one_line_error, cli_env, client, pattern, run_cli, start_cluster, wait_until
from nn_support import add_datanodes, heartbeat_all, make_namenode, write_file

from hedgefs.namenode.safe_mode import SafeModeRefusal
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


def test_a_restart_waits_for_the_share_of_units_before_changes_deletes_or_repairs(tmp_path, clock):
    nn = make_namenode(tmp_path / "nn", clock)
    ids = add_datanodes(nn, 5)
    write_file(nn, "/f", 3 * 4096 * 2)
    nn = reopen(nn, tmp_path / "nn", clock, safe_mode_deadline_s=100)
    assert nn.in_safe_mode and nn.safe_mode_state().reason == "start-up"
    with pytest.raises(SafeModeRefusal, match=r"cannot mkdir /x: the NameNode is in safe mode \(start-up: 0 of 10"):
        nn.mkdir("/x")
    with pytest.raises(SafeModeRefusal, match="safe mode"):
        nn.delete("/f")
    assert nn.file_info("/f").entry.length == 3 * 4096 * 2     # reads are served
    # Three of five DataNodes report (60 % < 90 %): still in safe mode, no repair planned though
    # the other two are silent until they are dead.
    for dn in ids[:3]:
        nn.register(dn, f"127.0.0.1:{40000 + int(dn[2:])}")
        nn.block_report(dn, nn.blocks.units_on(dn, 1000))
    clock.advance(31)   # dn4 and dn5 are dead now: their units would be rebuilt, but not yet
    heartbeat_all(nn, ids[:3])
    assert nn.tick() == [] and nn.in_safe_mode
    assert not nn.liveness.is_live("dn4") and not nn.repairs.in_flight
    for dn in ids[3:]:
        nn.register(dn, f"127.0.0.1:{40000 + int(dn[2:])}")
        nn.block_report(dn, nn.blocks.units_on(dn, 1000))
    nn.tick()
    assert not nn.in_safe_mode
    nn.mkdir("/x")
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
    sm.kill("dn1")
    sm.kill("dn2")
    sm.restart("namenode")
    state = safemode(sm)
    assert state["on"] and state["reason"] == "start-up", state
    r = run_cli("mkdir", "/x", namenode=sm.namenode, env={"HEDGEFS_FAILOVER_DEADLINE_S": "1"})
    assert r.code == 1
    assert_one_line_error(r, "cannot mkdir /x: the NameNode is in safe mode (start-up:")
    r = run_cli("cat", "/kept", namenode=sm.namenode)
    assert r.code == 0 and r.stdout == data, r.stderr
    r = run_cli("admin", "report", namenode=sm.namenode)
    assert r.code == 0 and b"safe mode: ON (start-up:" in r.stdout, r.stdout
    with urllib.request.urlopen(sm.http_url, timeout=10) as page:
        assert 'id="safe-mode">ON (start-up)' in page.read().decode()
    # A write that arrives now waits (the client retries a start-up refusal) and succeeds once
    # the DataNodes are back and have reported.
    env = {**os.environ, **cli_env(sm.namenode)}
    put = subprocess.Popen([sys.executable, "-m", "hedgefs", "mkdir", "/after-restart"], env=env,
                           stderr=subprocess.PIPE)
    sm.start("dn1")
    sm.start("dn2")
    assert put.wait(timeout=60) == 0, put.stderr.read()
    assert safemode(sm)["on"] is False


def test_admin_enter_and_leave(sm):
    safemode(sm, "wait")
    assert safemode(sm, "enter")["reason"] == "admin"
    r = run_cli("mkdir", "/y", namenode=sm.namenode)
    assert r.code == 1
    assert_one_line_error(r, "cannot mkdir /y", "safe mode", "hedgefs admin safemode leave")
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
    nn.delete("/gone")   # its units are to be deleted: not sent before the restart
    nn = reopen(nn, tmp_path / "nn", clock, safe_mode_deadline_s=100)
    assert nn.in_safe_mode
    units = {dn: nn.blocks.units_on(dn, 1000) for dn in ids}
    for dn in ids[:2]:   # 2 of 5 report (the unit of /keep on each): 40 %, still in safe mode
        nn.register(dn, f"127.0.0.1:{40000 + int(dn[2:])}")
        nn.block_report(dn, units[dn] + nn.blocks.pending_deletes(dn))
    nn.tick()
    assert nn.in_safe_mode
    assert not any(isinstance(c, DeleteUnit) for cs in heartbeat_all(nn, ids[:2]).values() for c in cs)
    for dn in ids[2:]:
        nn.register(dn, f"127.0.0.1:{40000 + int(dn[2:])}")
        nn.block_report(dn, units[dn])
    nn.tick()
    assert not nn.in_safe_mode
    sent = [c for cs in heartbeat_all(nn, ids[:2]).values() for c in cs if isinstance(c, DeleteUnit)]
    assert sent    # the deletes go out once it has left
    nn.close()
