"""Small files through the client library on a real cluster (issue 44): what each costs in
NameNode calls, counted by the NameNode itself (its /metrics), the batched calls' answers (one
bad path fails alone, named; the others done), and the units a small file stores: none of its
zero units (ec/layout.py), with the fault tolerance of a whole group."""

import concurrent.futures
import re
import urllib.request

import pytest

from conftest import CELL, GROUP, STRIPE, client, pattern, run_cli, start_cluster, wait_until
from hedgefs.client.errors import AlreadyExists, DirectoryNotEmpty, NotFound, UsageError

# The DataNode protocol: what DataNodes call on their own meanwhile (not the client's calls).
DATANODE_CALLS = {"RegisterDataNode", "Heartbeat", "BlockReport", "UnitStored", "ReportBadUnits"}


def client_calls(cluster) -> dict[str, float]:
    """The NameNode's RPCs served so far by method, the DataNodes' own left out."""
    text = urllib.request.urlopen(cluster.http_url + "metrics", timeout=10).read().decode()
    out: dict[str, float] = {}
    for labels, value in re.findall(r'^hedgefs_namenode_rpc_calls_total\{([^}]*)\} (\S+)$', text, re.M):
        method = re.search(r'method="([^"]+)"', labels).group(1)
        if method not in DATANODE_CALLS:
            out[method] = out.get(method, 0) + float(value)
    return out


def datanode_calls(cluster, method: str) -> float:
    """The NameNode's count of ``method`` calls from DataNodes (UnitStored: receipts)."""
    text = urllib.request.urlopen(cluster.http_url + "metrics", timeout=10).read().decode()
    return sum(float(v) for labels, v in re.findall(r'^hedgefs_namenode_rpc_calls_total\{([^}]*)\} (\S+)$', text, re.M)
               if f'method="{method}"' in labels)


def calls_of(cluster, action) -> dict[str, float]:
    before = client_calls(cluster)
    action()
    after = client_calls(cluster)
    return {m: n - before.get(m, 0) for m, n in after.items() if n != before.get(m, 0)}


@pytest.fixture(scope="module", autouse=True)
def base(cluster):
    with client(cluster.namenode) as f:
        f.mkdir("/small", parents=True)


def test_a_one_group_file_is_two_namenode_calls_and_reads_back(cluster, fs):
    data = pattern(3 * CELL + 5, seed=7)
    assert calls_of(cluster, lambda: fs.write_bytes("/small/one", data, overwrite=True)) == \
        {"Create": 1, "Complete": 1}
    assert fs.read_bytes("/small/one") == data   # close-to-open: whole once write returned


def test_an_empty_file_is_one_namenode_call(cluster, fs):
    assert sum(calls_of(cluster, lambda: fs.write_bytes("/small/empty", b"", overwrite=True)).values()) == 1
    st = fs.stat("/small/empty")
    assert (st.length, st.is_dir) == (0, False)
    with pytest.raises(AlreadyExists, match="/small/empty"):
        fs.write_bytes("/small/empty", b"")


def test_a_mkdir_with_its_mode_is_one_call_that_answers_the_status(cluster, fs):
    """mkdir(2) with its mode (a mount's tar x: mkdirat(0700)) is one Mkdir, no SetPermission,
    no stat: its answer is what a stat says; from many threads at once (one Mkdirs) too."""
    out = {}
    assert calls_of(cluster, lambda: out.update(made=fs.mkdir("/small/private", permission=0o700))) == {"Mkdir": 1}
    assert (out["made"].is_dir, out["made"].permission) == (True, 0o700)
    assert out["made"] == fs.stat("/small/private")
    with pytest.raises(UsageError, match="bad mode 2000"):
        fs.mkdir("/small/setgid", permission=0o2000)
    with pytest.raises(NotFound):
        fs.stat("/small/setgid")
    paths = [f"/small/par{i}" for i in range(16)]
    with concurrent.futures.ThreadPoolExecutor(16) as pool:
        made = list(pool.map(lambda p: fs.mkdir(p, permission=0o750), paths))
    assert [(m.path, m.permission) for m in made] == [(p, 0o750) for p in paths]
    assert [fs.stat(p) for p in paths] == made


def test_batched_calls_answer_each_path_and_name_the_bad_one(cluster, fs):
    fs.write_bytes("/small/f", b"x", overwrite=True)
    dirs = ["/small/d1", "/small/f/under-a-file", "/small/d2/deep"]
    out = {}
    assert calls_of(cluster, lambda: out.update(made=fs.mkdirs(dirs))) == {"Mkdirs": 1}
    made = out["made"]
    assert made[0] is None and made[2] is None
    assert "/small/f" in str(made[1])
    assert fs.stat("/small/d2/deep").is_dir

    empties = ["/small/e1", "/small/f", "/small/e2"]
    created = fs.create_empty(empties)
    assert created[0] is None and created[2] is None
    assert isinstance(created[1], AlreadyExists) and "/small/f" in str(created[1])

    stats = fs.stat_many(["/small/e1", "/small/nope", "/small/f"])
    assert stats[0].length == 0 and stats[2].length == 1
    assert isinstance(stats[1], NotFound) and "/small/nope" in str(stats[1])

    gone = fs.delete_many(["/small/e1", "/small/d2", "/small/e2", "/small/missing"])
    assert gone[0] is None and gone[2] is None
    assert isinstance(gone[1], DirectoryNotEmpty) and "/small/d2" in str(gone[1])
    assert isinstance(gone[3], NotFound) and "/small/missing" in str(gone[3])
    names = {s.path for s in fs.list("/small")}
    assert "/small/e1" not in names and "/small/e2" not in names and "/small/d2" in names


def test_put_r_makes_a_trees_directories_and_empty_files_in_one_call_each(cluster, fs, tmp_path):
    tree = tmp_path / "tree"
    files = {}
    for i in range(30):
        d = tree / f"d{i:02d}" / "sub"
        d.mkdir(parents=True)
        files[f"d{i:02d}/sub/empty"] = b""
        files[f"d{i:02d}/data"] = pattern(100 + i, seed=i)
    for rel, data in files.items():
        (tree / rel).write_bytes(data)

    result = {}
    calls = calls_of(cluster, lambda: result.update(
        done=run_cli("put", "-r", str(tree), "/small/tree", namenode=cluster.namenode)))
    assert result["done"].code == 0, result["done"].stderr
    assert calls.get("Mkdirs") == 1 and calls.get("Mkdir", 0) <= 1   # 30 branches; the root, if made alone
    assert calls.get("CreateMany") == 1                                 # 30 empty files
    assert calls.get("Create") == 30 and calls.get("Complete") == 30 and "AddBlockGroup" not in calls
    for rel, data in files.items():
        assert fs.read_bytes(f"/small/tree/{rel}") == data


def test_receipts_of_files_put_in_parallel_go_to_the_namenode_batched(cluster, fs):
    """Each DataNode sends its receipts (UnitStored) one call at a time, and what was stored
    while one was out goes in the next: 64 one-cell files (4 units each) put from 16 threads cost
    fewer receipt calls than 64 x 4. Every file reads back and the tree is HEALTHY."""
    files = {f"/small/par/{i:02d}": pattern(1000 + i, seed=i) for i in range(64)}
    fs.mkdir("/small/par", parents=True)
    before = datanode_calls(cluster, "UnitStored")
    with concurrent.futures.ThreadPoolExecutor(16) as pool:
        list(pool.map(lambda item: fs.write_bytes(*item, overwrite=True), files.items()))
    units = sum(len(fs.stat(p).groups[0].units) for p in files)
    assert units == 64 * 4
    # every receipt is in before its Complete returned (the NameNode waits for them)
    calls = datanode_calls(cluster, "UnitStored") - before
    assert 0 < calls < units, f"{calls:.0f} UnitStored calls for {units} units"
    for path, data in files.items():
        assert fs.read_bytes(path) == data
    assert fs.admin.fsck("/small/par").status == "HEALTHY"


def test_a_file_commits_with_the_mode_owner_and_times_set_while_it_was_written(cluster, fs):
    """What tar x sets on the open descriptor (chmod, chown, utimes) goes with the Complete: the
    file costs Create and Complete, and another client sees the version with them. The
    directory's mtime is the commit's, not the file's old one."""
    fs.mkdir("/small/attrs", parents=True)
    data = pattern(5000, seed=44)

    def write():
        with fs.create("/small/attrs/tool") as f:
            f.write(data)
            f.set_permission(0o750)
            f.set_owner("alice", "staff")
            f.set_times(1_400_000_000_000, 1_400_000_001_000)

    assert calls_of(cluster, write) == {"Create": 1, "Complete": 1}
    with client(cluster.namenode) as other:
        st = other.stat("/small/attrs/tool")
        assert (st.permission, st.owner, st.group, st.mtime_ms, st.atime_ms, st.length) == \
            (0o750, "alice", "staff", 1_400_000_000_000, 1_400_000_001_000, 5000)
        assert other.read_bytes("/small/attrs/tool") == data
        assert other.stat("/small/attrs").mtime_ms > 1_400_000_000_000   # (now, not the file's)

    with fs.create("/small/attrs/owner-only") as f:   # only what was set: the rest as a new file's
        f.write(b"x")
        f.set_owner(group="staff")
    st = fs.stat("/small/attrs/owner-only")
    assert (st.permission, st.group) == (0o644, "staff") and st.owner != "" and st.mtime_ms > 1_400_000_000_000


def test_an_append_commits_with_the_mode_and_times_set_while_it_was_written(cluster, fs):
    """chmod + append + close (an in-place edit through the mount, ``cp -p`` onto a log): the
    attributes go with the append's Complete, on the version it makes, with the bytes."""
    fs.mkdir("/small/attrs", parents=True)
    fs.write_bytes("/small/attrs/log", b"first line\n", overwrite=True)

    def append():
        with fs.append("/small/attrs/log") as f:
            f.write(b"second line\n")
            f.set_permission(0o600)
            f.set_times(1_400_000_000_000, 1_400_000_002_000)

    calls = calls_of(cluster, append)
    assert "SetPermission" not in calls and "SetTimes" not in calls and calls.get("Complete") == 1, calls
    st = fs.stat("/small/attrs/log")
    assert (st.permission, st.mtime_ms, st.atime_ms, st.length) == (0o600, 1_400_000_000_000, 1_400_000_002_000, 23)
    assert fs.read_bytes("/small/attrs/log") == b"first line\nsecond line\n"


def test_against_a_namenode_from_before_commit_attributes_they_are_set_after_the_complete(tmp_path, monkeypatch):
    """A newer client and an older NameNode (one that answers CreateResponse.commit_attributes
    false and drops a Complete's attributes unread: HEDGEFS_NAMENODE_AS_BEFORE stands in for it,
    as an older release cannot run here). The chmod, chown and utimes made while writing are sent
    as SetPermission, SetOwner and SetTimes after the Complete, as before, and the file has them;
    a new file and an append alike."""
    monkeypatch.setenv("HEDGEFS_NAMENODE_AS_BEFORE", "commit_attributes")
    older = start_cluster(tmp_path / "older", fork=False, datanodes=9)   # (Popen: the environment above)
    try:
        with client(older.namenode) as fs:
            def write():
                with fs.create("/tool") as f:
                    f.write(b"tool bytes")
                    f.set_permission(0o750)
                    f.set_owner(group="staff")
                    f.set_times(1_400_000_000_000)
            calls = calls_of(older, write)
            assert {m: calls.get(m) for m in ("Complete", "SetPermission", "SetOwner", "SetTimes")} == \
                {"Complete": 1, "SetPermission": 1, "SetOwner": 1, "SetTimes": 1}, calls
            st = fs.stat("/tool")
            assert (st.permission, st.group, st.mtime_ms, st.length) == (0o750, "staff", 1_400_000_000_000, 10)

            with fs.append("/tool") as f:
                f.write(b", more")
                f.set_permission(0o700)
            st = fs.stat("/tool")
            assert (st.permission, st.group, st.length) == (0o700, "staff", 16)
            assert fs.read_bytes("/tool") == b"tool bytes, more"
    finally:
        older.down()


@pytest.mark.parametrize("case, attribute, why", [
    ("mode", lambda f: f.set_permission(0o7777), "bad mode 7777"),
    ("owner", lambda f: f.set_owner("no body"), "bad user name 'no body'"),
    ("times", lambda f: f.set_times(-5), "bad times"),
])
def test_a_refused_attribute_is_closes_error_and_the_bytes_are_committed_without_it(cluster, fs, case, attribute,
                                                                                    why):
    """A chmod, chown or utimes the NameNode refuses is ``close``'s error, one line naming the
    path and what is wrong; the bytes are the write's and are committed without it, as the calls
    after a commit would have left them (a non-admin's ``cp -p`` keeps its copy)."""
    fs.mkdir(f"/small/badattrs/{case}", parents=True)
    fs.write_bytes(f"/small/badattrs/{case}/kept", b"old bytes", overwrite=True)
    before = fs.stat(f"/small/badattrs/{case}/kept")
    for path, overwrite in ((f"/small/badattrs/{case}/new", False), (f"/small/badattrs/{case}/kept", True)):
        f = fs.create(path, overwrite=overwrite)
        f.write(b"new bytes")
        attribute(f)
        with pytest.raises(UsageError) as err:   # (INVALID_ARGUMENT: exit code 2 at the CLI)
            f.close()
        assert type(err.value) is UsageError and why in str(err.value) and path in str(err.value) and "\n" not in str(err.value)
        assert fs.read_bytes(path) == b"new bytes"
    after = fs.stat(f"/small/badattrs/{case}/kept")
    assert (after.permission, after.owner) == (before.permission, before.owner) and after.mtime_ms > before.mtime_ms
    assert fs.stat(f"/small/badattrs/{case}/new").permission == 0o644


# -------------------------------------------------------------- a small file's units (RS-6-3-64k)

PARITY = [6, 7, 8]


@pytest.mark.parametrize("size, units", [
    (1, [0] + PARITY),
    (CELL - 1, [0] + PARITY),
    (CELL, [0] + PARITY),                          # exactly one cell
    (CELL + 1, [0, 1] + PARITY),
    (5 * CELL, [0, 1, 2, 3, 4] + PARITY),          # k - 1 cells
    (5 * CELL + 1, list(range(9))),
    (STRIPE, list(range(9))),                      # k cells
    (STRIPE + 1, list(range(9))),                  # k cells + 1 byte: a second stripe
    (GROUP + 10, list(range(9))),                  # a second group of 10 bytes: units 0, 6, 7, 8
])
def test_a_file_stores_only_the_units_that_hold_bytes_and_reads_back(cluster, fs, size, units):
    data = pattern(size, seed=size)
    path = f"/small/sized-{size}"
    fs.write_bytes(path, data, overwrite=True)
    groups = fs.stat(path).groups
    assert sorted(groups[0].units) == units
    if len(groups) > 1:
        assert sorted(groups[1].units) == [0] + PARITY
    holders = [u.datanode_id for g in groups for u in g.units.values()]
    assert len(set(u.datanode_id for u in groups[0].units.values())) == len(units)   # one DataNode each
    assert fs.read_bytes(path) == data
    assert fs.open(path).pread(size // 2, 7) == data[size // 2:size // 2 + 7]
    report = fs.admin.fsck(path)
    assert (report.status, report.healthy, report.groups) == ("HEALTHY", len(groups), len(groups)), holders


def test_a_10_byte_file_is_4_units_on_4_datanodes_read_back_with_3_of_them_killed(private_cluster, tmp_path):
    """Any 3 of its 4 units lost, as any 3 of 9 of a whole group: killed for real, read at once
    (the rebuild from the parity unit left and the 5 zero units), then repaired to HEALTHY."""
    nn = private_cluster.namenode
    data = b"ten bytes!"
    with client(nn) as fs:
        fs.write_bytes("/ten", data)
        units = fs.stat("/ten").groups[0].units
        assert sorted(units) == [0] + PARITY
        holders = {i: u.datanode_id for i, u in units.items()}
        assert len(set(holders.values())) == 4
        assert fs.admin.fsck("/").status == "HEALTHY"
        for index in (0, 6, 7):                  # the data unit and two parities: parity 8 is left
            private_cluster.kill(holders[index])
        assert fs.read_bytes("/ten") == data
        assert run_cli("cat", "/ten", namenode=nn).stdout == data
        got = run_cli("get", "/ten", str(tmp_path / "ten"), namenode=nn)
        assert got.code == 0 and (tmp_path / "ten").read_bytes() == data, got.stderr
        # the NameNode rebuilds units 0, 6 and 7 on other DataNodes, from unit 8 and the zeros
        killed = {holders[i] for i in (0, 6, 7)}

        def repaired() -> bool:
            now = {i: u.datanode_id for i, u in fs.stat("/ten").groups[0].units.items()}
            return sorted(now) == [0] + PARITY and not killed & set(now.values()) \
                and fs.admin.fsck("/").status == "HEALTHY"
        wait_until(repaired, 60, "the 3 lost units rebuilt on other DataNodes")
        private_cluster.kill(holders[8])          # now the rebuilt units alone hold it
        assert fs.read_bytes("/ten") == data


def test_truncating_small_files_to_0_and_to_a_group_boundary_leaves_the_namenode_serving(cluster, fs):
    """A truncate that drops a small file's group (chaos 4444202 --secure: it stopped the
    NameNode's journal once, every call after it UNAVAILABLE)."""
    fs.write_bytes("/small/cut-ten", b"ten bytes!", overwrite=True)
    data = pattern(GROUP + 10, seed=5)
    fs.write_bytes("/small/cut-two", data, overwrite=True)
    fs.truncate("/small/cut-ten", 0)
    fs.truncate("/small/cut-two", GROUP)
    assert fs.read_bytes("/small/cut-ten") == b"" and fs.read_bytes("/small/cut-two") == data[:GROUP]
    fs.write_bytes("/small/after-cut", b"still serving", overwrite=True)
    assert fs.read_bytes("/small/after-cut") == b"still serving"
    assert fs.admin.fsck("/small").status == "HEALTHY"
