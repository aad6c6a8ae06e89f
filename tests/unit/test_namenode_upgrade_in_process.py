"""A data dir of the schema-5 format (the NameNode before the journal: its namespace as SQLite
tables) is converted when a NameNode starts on it, losing nothing a user or a writer can see.

The fixture was made by that release itself (tests/fixtures/schema5/make.py says how): directories
with a policy set, EC, LRC and replicated files of one and of several groups, owners, groups and
modes (a sticky directory, a file of mode 0600), a zero-byte file, a file being written with its
writer's targets, a DataNode being decommissioned, a retry-cache entry.
"""

import json
import pathlib
import shutil
import sqlite3

import pytest

from nn_support import FakeClock, make_namenode, state

FIXTURE = pathlib.Path(__file__).resolve().parents[1] / "fixtures" / "schema5"


def _rows(table: str) -> list[dict]:
    conn = sqlite3.connect(FIXTURE / "namenode.db")
    conn.row_factory = sqlite3.Row
    try:
        return [dict(r) for r in conn.execute(f"SELECT * FROM {table}")]
    finally:
        conn.close()


@pytest.fixture
def converted(tmp_path):
    (tmp_path / "nn").mkdir()
    shutil.copyfile(FIXTURE / "namenode.db", tmp_path / "nn" / "namenode.db")
    clock = FakeClock(1_800_000_100.0)
    nn = make_namenode(tmp_path / "nn", clock, cluster_id="CID-schema5-fixture")
    yield nn, clock, tmp_path
    nn.close()


def test_every_directory_file_group_and_attribute_carries_over(converted):
    nn, _clock, tmp_path = converted
    inodes = {i["id"]: i for i in _rows("inodes")}

    def path_of(i):
        names = []
        while i["parent"] is not None:
            names.append(i["name"])
            i = inodes[i["parent"]]
        return "/" + "/".join(reversed(names))

    groups = {}
    for g in sorted(_rows("groups"), key=lambda g: g["seq"]):
        groups.setdefault(g["file_id"], []).append((g["id"], g["length"], g["generation"]))
    listed = {e.path: e for e in nn.list("/", recursive=True)}
    complete = [i for i in inodes.values() if i["state"] == "complete" and i["parent"] is not None]
    assert set(listed) == {path_of(i) for i in complete}
    for i in complete:
        e = listed[path_of(i)]
        assert (e.is_dir, e.owner, e.group, e.mode, e.mtime_ms) == \
            (bool(i["is_dir"]), i["owner"], i["grp"], i["mode"], i["mtime_ms"]), e.path
        if i["is_dir"]:
            continue
        assert (e.length, e.policy, e.block_size) == (i["length"], i["policy"], i["block_size"]), e.path
        info = nn.file_info(e.path)
        assert [(g.id, g.length, g.generation) for g in info.groups] == \
            [g for g in groups.get(i["id"], []) if g[1] > 0], e.path
    assert nn.get_policy("/data/rep/copies") == ("REPLICATE-3", "/data/rep/copies")
    assert nn.get_policy("/data/rep") == ("REPLICATE-3", "/data/rep")
    assert nn.list("/tmp") == [] and listed["/tmp"].mode == 0o1777
    assert nn.cluster_id == "CID-schema5-fixture"
    assert nn.leaving == {"dn9"}


def test_a_write_in_progress_finishes_and_a_retried_call_gets_its_first_answer(converted):
    nn, _clock, _tmp = converted
    [writing] = [i for i in _rows("inodes") if i["state"] == "writing"]
    [group] = [g for g in _rows("groups") if g["file_id"] == writing["id"]]
    targets = {u["idx"]: u["datanode_id"] for u in _rows("units") if u["group_id"] == group["id"]}
    for i in range(1, 10):
        nn.register(f"dn{i}", f"127.0.0.1:{41000 + i}")
    for index, dn in targets.items():   # the DataNodes the writer was given report what they stored
        nn.unit_stored(dn, group["id"], index, group["generation"])
    from hedgefs.namenode.blocks.blockmap import GroupCommit
    nn.complete(writing["id"], 100, [GroupCommit(group["id"], 100, tuple(targets))])
    info = nn.file_info("/data/ec/writing")
    assert info.entry.length == 100 and {u.index: u.datanode_id for u in info.groups[0].units} == targets
    [entry] = [r for r in _rows("retry_cache") if r["call_id"] == "call-7"]
    created = json.loads(entry["result"])
    from hedgefs.security.identity import Identity
    again = nn.create("/data/alice.txt", retry=("fixture-client", "call-7"),
                      who=Identity("alice", "user", ("staff",)))
    assert (again.file_id, again.policy, again.block_size) == \
        (created["file_id"], created["policy"], created["block_size"])


def test_locations_come_back_from_block_reports_and_new_groups_take_new_ids(converted):
    nn, _clock, _tmp = converted
    units: dict[str, list] = {}
    generation = {g["id"]: g["generation"] for g in _rows("groups")}
    for u in _rows("units"):
        if u["reported"]:
            units.setdefault(u["datanode_id"], []).append((u["group_id"], u["idx"], generation[u["group_id"]]))
    for dn, held in units.items():
        nn.register(dn, f"127.0.0.1:{41000 + int(dn[2:])}")
        nn.block_report(dn, held)
    info = nn.file_info("/data/ec/three")
    assert len(info.groups) == 7 and all(len(g.units) == 5 for g in info.groups)
    assert nn.fsck("/data").status == "HEALTHY"
    for i in range(1, 10):
        nn.register(f"dn{i}", f"127.0.0.1:{41000 + i}")
    created = nn.create("/new")
    group = nn.add_block_group(created.file_id)
    assert group.id > max(generation) and group.generation > max(generation.values())
    assert created.file_id > max(i["id"] for i in _rows("inodes"))


def test_the_conversion_keeps_a_copy_is_done_once_and_survives_a_restart(converted):
    nn, clock, tmp_path = converted
    before = state(nn)
    nn.close()
    db = tmp_path / "nn" / "namenode.db"
    copy = sqlite3.connect(tmp_path / "nn" / "namenode.db.schema5")
    for table in ("inodes", "groups", "units", "meta", "retry_cache"):
        assert copy.execute(f"SELECT * FROM {table}").fetchall() == \
            sqlite3.connect(FIXTURE / "namenode.db").execute(f"SELECT * FROM {table}").fetchall()
    copy.close()
    tables = {r[0] for r in sqlite3.connect(db).execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert tables - {"sqlite_sequence"} == {"journal_meta", "edits", "images"}   # (SQLite keeps its own)
    again = make_namenode(tmp_path / "nn", clock)
    try:
        assert not again.journal.engine.upgraded
        assert {k: v for k, v in state(again).items() if k != "retry"} == \
            {k: v for k, v in before.items() if k != "retry"}
    finally:
        again.close()
