"""DataNode decommission on a real cluster (HDFS's): a decommissioning DataNode gets no new units,
serves reads, and its units are copied elsewhere; once decommissioned it can be killed with no
group degraded. Refusals are one line: an unknown id (exit 2), too few DataNodes left (exit 1)."""

import json
import urllib.request

import pytest
from conftest import BLOCK_SIZE, POLICY, assert_one_line_error, client, pattern, run_cli, start_cluster, wait_until
from hedgefs.ec.layout import group_lengths, zero_units
from hedgefs.ec.policy import parse_policy

FILES = {f"/dc/f{i}": pattern(300_000 + 170_000 * i, seed=i) for i in range(6)}


@pytest.fixture(scope="module")
def dc(tmp_path_factory):
    c = start_cluster(tmp_path_factory.mktemp("decommission"))
    with client(c.namenode) as f:
        f.mkdir("/dc")
        for path, data in FILES.items():
            f.write_bytes(path, data)
    yield c
    c.down()


def report(c) -> dict:
    """What `admin report --json` says of each DataNode (the RPC under it; the CLI run once below)."""
    with client(c.namenode) as f:
        r = f.admin.report()
    return {d.id: {"admin_state": d.admin_state or "in service", "units_mapped": d.units_mapped, "state": d.state}
            for d in r.datanodes}


def test_report_shows_the_admin_state(dc):
    r = run_cli("admin", "report", "--json", namenode=dc.namenode)
    assert r.code == 0, r.stderr
    rows = json.loads(r.stdout)["datanodes"]
    assert {row["admin_state"] for row in rows} <= {"in service", "decommissioning", "decommissioned"}
    # every stored unit: 9 a group but a short group's zero units (the 300,000-byte file's unit 5)
    stored = sum(9 - len(zero_units(parse_policy(POLICY), n)) for data in FILES.values()
                 for n in group_lengths(len(data), parse_policy(POLICY), BLOCK_SIZE))
    assert sum(row["units_mapped"] for row in rows) == stored == 9 * len(FILES) - 1


def test_unknown_datanode_is_refused_in_one_line(dc):
    for verb in ("decommission", "recommission"):
        r = run_cli("admin", verb, "dn99", namenode=dc.namenode)
        assert r.code == 2
        assert_one_line_error(r, "no DataNode 'dn99'")


def test_recommission_undoes_a_decommission(dc):
    r = run_cli("admin", "decommission", "dn2", namenode=dc.namenode)
    assert r.code == 0, r.stderr
    assert report(dc)["dn2"]["admin_state"] in ("decommissioning", "decommissioned")
    r = run_cli("admin", "recommission", "dn2", namenode=dc.namenode)
    assert r.code == 0, r.stderr
    assert b"in service" in r.stdout
    assert report(dc)["dn2"]["admin_state"] == "in service"


def test_wait_asks_the_report_not_decommission_again(dc):
    """--wait polls the state (Report): the NameNode hears one Decommission, whose log line says who
    asked; asking again each second would decommission anew a DataNode recommissioned meanwhile."""
    before = report(dc)
    leaving = min((d for d in before if before[d]["units_mapped"]), key=lambda d: before[d]["units_mapped"])
    log_path = dc.root / "logs" / "namenode.log"
    seen = len(log_path.read_text(errors="replace"))    # the module's cluster: earlier tests' lines
    try:
        r = run_cli("admin", "decommission", leaving, "--wait", "--timeout", "120", namenode=dc.namenode)
        assert r.code == 0, r.stderr
        assert r.stdout.decode().startswith(f"{leaving}: decommissioned")
        log = log_path.read_text(errors="replace")[seen:]
        assert log.count(f"decommission of {leaving} at the request of") == 1
    finally:   # the next test needs every DataNode in service
        r = run_cli("admin", "recommission", leaving, namenode=dc.namenode)
    assert r.code == 0 and report(dc)[leaving]["admin_state"] == "in service"


def test_decommissioned_datanode_is_killed_with_nothing_degraded(dc):
    before = report(dc)
    leaving = max(before, key=lambda d: before[d]["units_mapped"])
    assert before[leaving]["units_mapped"] > 0
    r = run_cli("admin", "decommission", leaving, namenode=dc.namenode)
    assert r.code == 0, r.stderr
    assert leaving.encode() in r.stdout
    # Reads go on meanwhile, and a new file gets no unit on it.
    with client(dc.namenode) as f:
        for path, data in FILES.items():
            assert f.read_bytes(path) == data
        f.write_bytes("/dc/new", pattern(900_000, seed=99))
        status = f.stat("/dc/new")
        assert leaving not in {u.datanode_id for g in status.groups for u in g.units.values()}
    # Earlier tests drained and recommissioned a DataNode: the old copies it deleted are confirmed by
    # its heartbeats, so this drain never waits for a full block report (every 60 s) to place there.
    wait_until(lambda: report(dc)[leaving]["admin_state"] == "decommissioned", 30, f"{leaving} decommissioned",
               interval=0.5, detail=lambda: report(dc)[leaving])
    assert report(dc)[leaving]["units_mapped"] == 0
    with urllib.request.urlopen(dc.http_url + "api/", timeout=10) as page:   # the status page says so too
        assert {d["id"]: d["admin_state"] for d in json.load(page)["datanodes"]}[leaving] == "decommissioned"
    with urllib.request.urlopen(dc.http_url, timeout=10) as page:
        assert 'data-admin-state="decommissioned">decommissioned</span>' in page.read().decode()
    r = run_cli("admin", "decommission", leaving, namenode=dc.namenode)   # asking again: its state
    assert r.code == 0 and b"decommissioned" in r.stdout

    dc.kill(leaving)
    wait_until(lambda: report(dc)[leaving]["state"] == "dead", 30, f"{leaving} dead", interval=0.3)
    r = run_cli("fsck", "/", namenode=dc.namenode)
    assert r.code == 0, r.stderr
    assert b"status: HEALTHY" in r.stdout, r.stdout
    with client(dc.namenode) as f:
        for path, data in {**FILES, "/dc/new": pattern(900_000, seed=99)}.items():
            assert f.read_bytes(path) == data, path

    # 9 DataNodes are left for RS-6-3: one more would leave too few for the policy.
    other = next(d for d in report(dc) if d != leaving)
    r = run_cli("admin", "decommission", other, namenode=dc.namenode)
    assert r.code == 1
    assert_one_line_error(r, f"cannot decommission {other}", "RS-6-3-64k needs 9 DataNodes")


# ------------------------------------------------------------------ the namesystem, on a fake clock


def test_the_namesystem_moves_a_leaving_datanodes_units_by_copy_and_remembers_it(tmp_path, clock):
    from nn_support import add_datanodes, heartbeat_all, make_namenode, write_file

    from hedgefs.namenode.errors import FailedPrecondition
    from hedgefs.namenode.model import RepairUnit

    nn = make_namenode(tmp_path / "nn", clock)   # RS-3-2: 5 DataNodes a group
    add_datanodes(nn, 6)
    write_file(nn, "/f", 3 * 4096 * 4)           # 4 groups: dn1 holds units of most of them
    held = nn.blocks.units_on("dn1", 1000)
    assert held
    assert nn.decommission("dn1") == ("decommissioning", len(held))
    # Draining, not broken: fsck calls the groups healthy, and admin report waits for no repair.
    assert nn.fsck("/").status == "HEALTHY" and nn.report().groups_waiting_repair == 0
    with pytest.raises(FailedPrecondition, match="cannot decommission dn2: policy RS-3-2-1k needs 5 DataNodes, "
                                                 "only 4 would be left in service"):
        nn.decommission("dn2")
    created = nn.create("/g")
    assert "dn1" not in {u.datanode_id for u in nn.add_block_group(created.file_id).units}
    nn.abandon(created.file_id)
    for _ in range(10):   # plan, deliver, store: each copy reads dn1's own unit
        nn.tick()
        for dn, commands in heartbeat_all(nn).items():
            for c in commands:
                if isinstance(c, RepairUnit):
                    assert dn != "dn1"
                    assert "dn1" in {s.datanode_id for s in c.sources if s.index == c.index}
                    assert nn.unit_stored(dn, c.group_id, c.index, c.generation) == "moved"
        if nn.admin_state("dn1") == "decommissioned":
            break
    assert nn.admin_state("dn1") == "decommissioned" and not nn.blocks.units_on("dn1", 1000)
    nn.close()
    nn = make_namenode(tmp_path / "nn", clock)   # a restart goes on knowing it (the journal's)
    try:
        assert nn.leaving == {"dn1"}
        nn.register("dn1", "127.0.0.1:40001")
        assert nn.recommission("dn1") == ("", 0)
        assert nn.leaving == set()
    finally:
        nn.close()


class Disks:
    """What each DataNode really holds: the deletes its heartbeats bring are carried out."""

    def __init__(self, nn, ids):
        from nn_support import held

        self.nn, self.units = nn, {dn: set(held(nn, dn)) for dn in ids}

    def heartbeats(self) -> list:
        from nn_support import heartbeat_all

        from hedgefs.namenode.model import DeleteUnit, RepairUnit

        repairs = []
        for dn, commands in heartbeat_all(self.nn, list(self.units)).items():
            for c in commands:
                if isinstance(c, DeleteUnit):
                    self.units[dn].discard((c.group_id, c.index, c.generation))
                elif isinstance(c, RepairUnit):
                    repairs.append((dn, c))
        return repairs

    def holders(self, unit) -> set[str]:
        return {dn for dn, units in self.units.items() if unit in units}


def test_a_copy_reported_before_its_receipt_never_leaves_the_unit_nowhere(tmp_path, clock):
    """The repair target's full block report lists the copy before its UnitStored receipt
    arrives: the copy is the unit's new home at once (the leaving DataNode's copy is no good
    holder); the leaving copy goes only once the new one is there."""
    from nn_support import add_datanodes, make_namenode, write_file

    nn = make_namenode(tmp_path / "nn", clock)
    ids = add_datanodes(nn, 6)
    write_file(nn, "/f", 3 * 4096)   # one group on 5 of the 6
    placed = nn.blocks.units(nn.blocks.get(1))
    leaving = placed[0]
    nn.decommission(leaving)
    disks = Disks(nn, ids)
    nn.tick()
    repairs = disks.heartbeats()
    assert [c.index for _, c in repairs] == [0]
    target, c = repairs[0]
    unit = (c.group_id, c.index, c.generation)
    disks.units[target].add(unit)                        # the copy is made
    counts = nn.block_report(target, sorted(disks.units[target]))
    disks.heartbeats()
    assert disks.holders(unit), "the unit was deleted everywhere"
    nn.unit_stored(target, *unit)                        # the late receipt
    for _ in range(3):
        nn.tick()
        disks.heartbeats()
        assert disks.holders(unit), "the unit was deleted everywhere"
    assert counts.get("moved") == 1                      # the report itself moved it
    assert disks.holders(unit) == {target} and nn.blocks.units(nn.blocks.get(1))[0] == target
    assert nn.admin_state(leaving) == "decommissioned"
    nn.close()


def test_a_delete_already_sent_is_never_cancelled(tmp_path, clock):
    """A surplus copy's delete went out; before the DataNode carries it out, the mapped copy's
    DataNode starts leaving and the surplus copy is reported again: that copy is on its way out
    (``deleting``), so the leaving DataNode's copy, the only one left, stays."""
    from nn_support import add_datanodes, make_namenode, write_file

    nn = make_namenode(tmp_path / "nn", clock)
    ids = add_datanodes(nn, 6)
    write_file(nn, "/f", 3 * 4096)
    placed = nn.blocks.units(nn.blocks.get(1))
    holder, spare = placed[0], next(d for d in ids if d not in placed.values())
    unit = (1, 0, nn.blocks.generation(1))
    disks = Disks(nn, ids)
    assert nn.unit_stored(spare, *unit) == "stale"       # e.g. a repair that timed out, done late
    disks.heartbeats()
    assert disks.holders(unit) == {holder}               # the spare copy's delete went out ...
    disks.units[spare].add(unit)                         # ... and is not done yet
    nn.decommission(holder)
    assert nn.unit_stored(spare, *unit) == "deleting"    # reported again meanwhile
    disks.units[spare].discard(unit)                     # now it is
    for _ in range(3):
        nn.tick()
        disks.heartbeats()
        assert disks.holders(unit), "the unit was deleted everywhere"
    nn.close()
