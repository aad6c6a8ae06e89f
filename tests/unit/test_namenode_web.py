"""The NameNode's web side from a real NameNode core over real HTTP: metrics, pages, JSON, 404s.

Also what the pages promise about the NameNode: the counts they show are kept up to date by
changes (they agree with a full fsck after any mix of writes, deaths, deletes and repairs) and a
page or a scrape is one short read under the lock, with no scan of the block map.
"""

from __future__ import annotations

import json
import random
import threading
import urllib.error
import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families

from hedgefs import httpserver
from hedgefs.namenode.web import pages, handler as web
from hedgefs.namenode.model import DataNodeStats, ReadLatency
from nn_support import WHOLE, FakeClock, add_datanodes, heartbeat_all, make_namenode, write_file

EVIL_ID = '<img src=x onerror="alert(1)">dn\\"\n'
EVIL_DIR = "/<b>bold&'q'"
EVIL_FILE = EVIL_DIR + "/<svg onload=alert(1)>"


@pytest.fixture
def served(tmp_path):
    clock = FakeClock()
    nn = make_namenode(tmp_path / "nn", clock)
    add_datanodes(nn, 6)
    write_file(nn, "/f", WHOLE)
    nn.tick()
    server = httpserver.HttpServer("127.0.0.1", 0, web.handler(nn))
    server.start()
    yield nn, clock, f"http://127.0.0.1:{server.port}"
    server.stop()
    nn.close()


def get(url: str, status: int = 200) -> str:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            code, body = response.status, response.read().decode()
    except urllib.error.HTTPError as err:
        code, body = err.code, err.read().decode()
    assert code == status, (url, code, body[:300])
    return body


def samples(text: str) -> dict[tuple[str, tuple], float]:
    """Parsed with prometheus_client's own parser: {(name, sorted labels): value}."""
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def test_metrics_show_datanodes_and_group_health(served):
    nn, clock, base = served
    m = samples(get(base + "/metrics"))
    assert m[("hedgefs_datanodes", (("state", "live"),))] == 6
    assert m[("hedgefs_block_groups", (("state", "healthy"),))] == 1
    assert m[("hedgefs_files", ())] == 1
    assert m[("hedgefs_files_by_policy", (("policy", "RS-3-2-1k"),))] == 1
    assert "# TYPE hedgefs_repairs_done_total counter" in get(base + "/metrics")
    text = get(base + "/metrics")
    assert 'hedgefs_build_info{' in text and 'version="' in text
    clock.advance(1000)  # every DataNode silent: dead, the group unreadable
    nn.tick()
    m = samples(get(base + "/metrics"))
    assert m[("hedgefs_datanodes", (("state", "dead"),))] == 6
    assert m[("hedgefs_block_groups", (("state", "missing"),))] == 1
    assert m[("hedgefs_datanode_up", (("datanode", "dn1"),))] == 0


def test_label_values_are_escaped(served):
    nn, _, base = served
    nn.register(EVIL_ID, "127.0.0.1:1")
    text = get(base + "/metrics")
    assert EVIL_ID not in text    # a raw newline or quote would break the format
    m = samples(text)
    assert m[("hedgefs_datanode_up", (("datanode", EVIL_ID),))] == 1


def test_health_and_unknown_paths_404(served):
    _, _, base = served
    assert get(base + "/health") == "ok\n"
    for path in ("/nope", "/datanodes/dn99", "/files/no/such/file", "/files/f/under-a-file", "/api/nope"):
        body = get(base + path, status=404)
        assert "not found" in body.lower() or "no " in body.lower()
    assert "error" in json.loads(get(base + "/api/datanodes/dn99", status=404))


def test_overview_and_its_json_twin(served):
    nn, _, base = served
    nn.heartbeat("dn2", "", used_bytes=5 << 20, units=3, stats=DataNodeStats(
        capacity_bytes=1 << 30, http_port=9999, recent_reads=ReadLatency(0, 40, 2.0, 9.5),
        read_minutes=(ReadLatency(int(nn.wall_ms() // 60000), 40, 2.0, 9.5),), faults=(("read_delay_ms", "2000"),)))
    nn.tick()
    page = get(base + "/")
    assert page.count('<tr class="dn') == 6
    assert 'data-datanode="dn2"' in page and "read_delay_ms=2000" in page and "9.5 ms" in page
    assert 'id="heatmap"' in page
    data = json.loads(get(base + "/?format=json"))
    assert data == json.loads(get(base + "/api/"))
    assert [d["id"] for d in data["datanodes"]] == [f"dn{i}" for i in range(1, 7)]
    dn2 = data["datanodes"][1]
    assert (dn2["read_p99_ms"], dn2["faults"], dn2["http_address"]) == (9.5, {"read_delay_ms": "2000"},
                                                                         "127.0.0.1:9999")
    assert dn2["p99_by_minute"][-1] == 9.5 and dn2["p99_by_minute"][0] is None
    assert (data["files"], data["groups_healthy"], data["capacity_bytes"]) == (1, 1, 1 << 30)


def test_file_page_lists_units_and_links_datanodes(served):
    nn, _, base = served
    page = get(base + "/files/f")
    assert page.count('<tr class="unit"') == 5
    data = json.loads(get(base + "/api/files/f"))
    holder = data["info"]["groups"][0]["units"][0]["datanode_id"]
    assert f'href="/datanodes/{holder}"' in page
    assert [u["index"] for u in data["info"]["groups"][0]["units"]] == [0, 1, 2, 3, 4]
    assert set(data["states"].values()) == {"live"}
    listing = get(base + "/files/")
    assert 'data-path="/f"' in listing


def test_a_small_files_page_says_which_units_hold_only_zeros(served):
    nn, _, base = served
    write_file(nn, "/small", 10)   # RS-3-2-1k: units 1 and 2 hold no byte
    page = get(base + "/files/small")
    assert page.count('<tr class="unit"') == 3
    assert "3 of 3 units; 2 hold only zeros, not stored" in page
    assert "5 of 5 units)" in get(base + "/files/f")


def test_html_in_ids_and_paths_is_escaped_everywhere(served):
    nn, _, base = served
    nn.register(EVIL_ID, "127.0.0.1:1")
    nn.mkdir(EVIL_DIR)
    write_file(nn, EVIL_FILE, WHOLE)
    nn.tick()
    quoted = urllib.parse.quote(EVIL_DIR, safe="/")
    file_url = base + "/files" + urllib.parse.quote(EVIL_FILE, safe="/")
    bodies = [get(base + "/"), get(base + "/files/"), get(base + "/files" + quoted), get(file_url),
              get(base + "/datanodes/" + urllib.parse.quote(EVIL_ID, safe="")),
              get(base + "/files/<i>nope", status=404)]
    for body in bodies:
        for raw in ("<img", "<svg onload", "<b>", "<i>"):
            assert raw not in body
    assert "&lt;img src=x onerror=&quot;alert(1)&quot;&gt;" in bodies[0]
    assert "&lt;svg onload=alert(1)&gt;" in bodies[2] and "&lt;b&gt;bold&amp;&#x27;q&#x27;" in bodies[3]
    assert json.loads(get(file_url + "?format=json"))["info"]["entry"]["path"] == EVIL_FILE


class CountingLock:
    """An RLock that counts how often it is taken from outside (re-entry is not a new read)."""

    def __init__(self):
        self._lock = threading.RLock()
        self.taken = 0
        self._depth = 0

    def __enter__(self):
        self._lock.acquire()
        self._depth += 1
        if self._depth == 1:
            self.taken += 1
        return self

    def __exit__(self, *exc):
        self._depth -= 1
        self._lock.release()


class WatchedGroups(dict):
    """The block map's groups, counting every walk over all of them."""

    walks = 0

    def __iter__(self):
        WatchedGroups.walks += 1
        return super().__iter__()

    def values(self):
        WatchedGroups.walks += 1
        return super().values()

    def items(self):
        WatchedGroups.walks += 1
        return super().items()


def test_a_page_or_scrape_is_one_read_and_scans_no_groups(served):
    nn, _, base = served
    nn.lock = CountingLock()
    nn.blocks.groups = WatchedGroups(nn.blocks.groups)
    for path in ("/", "/api/", "/metrics", "/files/", "/files/f", "/datanodes/dn1"):
        nn.lock.taken = 0
        WatchedGroups.walks = 0
        get(base + path)
        assert nn.lock.taken <= 1, path     # file and directory pages read the tree: no lock
        if path in ("/", "/api/", "/metrics"):
            assert WatchedGroups.walks == 0, path


def test_kept_counts_agree_with_a_full_fsck(tmp_path):
    """Random writes, deaths, returns, bad units, deletes and repairs: after each monitor pass the
    incrementally kept counts equal what a full fsck computes."""
    clock = FakeClock()
    rng = random.Random(7)
    nn = make_namenode(tmp_path / "nn", clock, dead_interval_s=10)
    ids = add_datanodes(nn, 7)
    files = []
    for step in range(60):
        action = rng.choice(["write", "write", "kill", "revive", "bad", "delete", "heal"])
        alive = [d for d in ids if nn.liveness.is_live(d)]
        if action == "write" and len(alive) >= 5:
            path = f"/f{step}"
            write_file(nn, path, rng.randint(1, 40000), lost={0: set(rng.sample(range(5), rng.randint(0, 2)))})
            files.append(path)
        elif action == "kill":
            victim = rng.choice(ids)
            heartbeat_all(nn, [d for d in alive if d != victim])
            clock.advance(11)
            heartbeat_all(nn, [d for d in alive if d != victim])
        elif action == "revive":
            heartbeat_all(nn, ids)
        elif action == "bad" and files:
            info = nn.file_info(rng.choice(files))
            if info.groups and info.groups[0].units:
                u = rng.choice(info.groups[0].units)
                nn.report_bad_units([(info.groups[0].id, u.index, info.groups[0].generation, u.datanode_id, "test")])
        elif action == "delete" and files:
            nn.delete(files.pop(rng.randrange(len(files))))
        elif action == "heal":
            for dn, commands in heartbeat_all(nn).items():
                for c in commands:
                    if hasattr(c, "sources"):
                        nn.unit_stored(dn, c.group_id, c.index, c.generation)
        nn.tick()
        status, fsck = nn.status(), nn.fsck("/")
        assert (status.files, status.groups_healthy, status.groups_degraded, status.groups_missing) == \
               (fsck.files, fsck.healthy, fsck.degraded, fsck.missing), f"step {step} ({action})"
        deletes = {d.id: d.pending_deletes for d in status.datanodes}
        assert deletes == {d.id: d.pending_deletes for d in nn.report().datanodes}, f"step {step}"
    nn.close()


def test_slow_datanode_is_marked_in_the_heat_map(served):
    nn, _, base = served
    minute = int(nn.wall_ms() // 60000)
    for i, dn in enumerate(["dn1", "dn2", "dn3", "dn4", "dn5", "dn6"]):
        p99 = 2100.0 if dn == "dn4" else 3.0 + i
        nn.heartbeat(dn, "", stats=DataNodeStats(read_minutes=tuple(
            ReadLatency(m, 100, p99 / 3, p99) for m in (minute - 1, minute))))
    status = nn.status()
    assert pages.slow_datanodes(status) == {"dn4"}
    page = get(base + "/")
    assert '<g class="heat-row slow" data-datanode="dn4">' in page
    assert page.count('class="heat-row slow"') == 1
    assert '<tr class="dn slow" data-datanode="dn4"' in page
    assert json.loads(get(base + "/api/"))["slow_datanodes"] == ["dn4"]


def test_no_datanode_is_marked_when_all_are_alike():
    from hedgefs.namenode.model import ClusterStatus, DataNodeStatus

    def dn(name, p99s):
        return DataNodeStatus(name, "", "", "live", 0, 0, 0, 0, 0, 0, 0, {}, 0, 0, 0, p99s)

    def status(rows):
        return ClusterStatus("", 0, 0, 0, 0, 0, 0, {}, 0, 0, 0, 0, 0, 0, 0, rows)

    alike = status([dn(f"dn{i}", [None, 300.0 + i, 310.0]) for i in range(5)])
    assert pages.slow_datanodes(alike) == set()                       # all slow alike: nothing stands out
    fast = status([dn(f"dn{i}", [1.0, 2.0]) for i in range(5)] + [dn("dn9", [30.0, 40.0])])
    assert pages.slow_datanodes(fast) == set()                        # 40 ms is under the floor
    one = status([dn(f"dn{i}", [1.0, 2.0]) for i in range(5)] + [dn("dn9", [None, 900.0])])
    assert pages.slow_datanodes(one) == {"dn9"}


def test_the_slow_mark_is_for_the_datanode_slow_now_not_minutes_ago():
    """The trial: dn6 slowed at 07:35 and cleared, dn7 slowed by 300 ms at 07:40; at 07:41 the page
    marked dn6 (its five minutes with reads were its slow ones) and not dn7."""
    from hedgefs.namenode.model import ClusterStatus, DataNodeStatus

    def dn(name, p99s, reads=0, p99=0.0):
        return DataNodeStatus(name, "", "", "live", 0, 0, 0, 0, 0, 0, 0, {}, reads, p99 / 2, p99, p99s)

    hour = [None] * 54
    rows = [dn(f"dn{i}", hour + [2.0, 3.0, 2.0, 3.0, 2.0, 3.0], reads=50, p99=3.0) for i in range(1, 6)]
    rows.append(dn("dn6", hour + [1900.0, 2000.0, 2100.0, 1800.0, None, None], reads=20, p99=8.6))
    rows.append(dn("dn7", hour + [3.0, 2.0, 3.0, None, None, 302.0], reads=40, p99=303.0))
    rows.append(dn("dn8", hour + [2500.0, 2400.0, None, None, None, None]))   # slow long ago, not read since
    status = ClusterStatus("", 0, 0, 0, 0, 0, 0, {}, 0, 0, 0, 0, 0, 0, 0, rows)
    assert pages.slow_datanodes(status) == {"dn7"}


def test_directory_and_file_pages_show_owner_and_mode():
    from hedgefs.namenode.model import Listing
    from hedgefs.namenode.namespace.inodes import Entry

    page = pages.listing(Listing("/u", [Entry("/u/f", False, 3, "RS-3-2-1k", 4096, 1, "alice", "staff", 0o640),
                                        Entry("/u/d", True, 0, "RS-3-2-1k", 0, 1, "bob", "staff", 0o755)], False))
    assert "-rw-r-----" in page and "alice:staff" in page and "drwxr-xr-x" in page and "bob:staff" in page


def test_the_overview_and_its_json_say_where_each_datanode_runs(served):
    nn, _, base = served
    nn.register("dn7", "127.0.0.1:40007", host_id="host7", rack="/dc1/r2")
    page = get(base + "/")
    assert 'data-rack="/dc1/r2" data-host="host7">/dc1/r2 / host7<' in page
    assert 'data-rack="/default-rack" data-host="127.0.0.1"' in page   # said neither: its address's host
    rows = {d["id"]: (d["host_id"], d["rack"]) for d in json.loads(get(base + "/api/"))["datanodes"]}
    assert rows["dn7"] == ("host7", "/dc1/r2") and rows["dn1"] == ("127.0.0.1", "/default-rack")


def test_an_open_tails_group_shows_its_own_code_and_replicas(served):
    """An EC file's open tail (hsync) is REPLICATE-(m+1): its units are replicas, not data and
    parity cells, counted of its own code's units."""
    from nn_support import stored

    nn, _, base = served
    created = nn.create("/tailed")
    group = nn.add_block_group(created.file_id)
    synced = nn.sync(created.file_id, "/tailed", 5000, [stored(nn, group, 5000)])
    stored(nn, synced.tail, 0)
    nn.sync_length(created.file_id, 5000, synced.tail.id)
    page = get(base + "/files/tailed")
    assert "open tail, REPLICATE-3: 3 of 3 replicas" in page
    tail_table = page[page.index(f'data-group="{synced.tail.id}"'):]
    assert tail_table.count("<td>replica</td>") == 3 and "<td>parity</td>" not in tail_table.split("</table>")[0]
