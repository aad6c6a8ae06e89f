"""A NameNode that has just started serving (a restart, an HA promotion) knows where no unit is
until the DataNodes report; a read of a stored file at that moment must still return its bytes:
while the reports it expects are due (namenode/blocks/expected.py) the NameNode answers a file
short of located units at once, marked (FileInfo.locations_pending), and the client's reader asks
again until the mark is gone; a stat (or rm, ls, HEAD) of it answers at once. A DataNode gone for
good holds that wait for at most the dead interval, and the NameNode says so in its log. Real
processes: a cluster's NameNode restarted (or an HA standby restarted and promoted) and every
file read at once, with no wait for reports."""

import concurrent.futures
import json
import threading
import urllib.request

import pytest

from conftest import assert_one_line_error, client, pattern, run_cli, start_cluster, wait_until
from etcd_support import ETCD, SKIP_REASON
from hedgefs.client.config import FailoverConfig
from hedgefs.client.errors import DataUnavailable
from hedgefs.cluster.launcher import LocalCluster, Options
from hedgefs.s3.store import Store

FILES = 24
SIZE = 200_000    # RS-3-2-64k: one group of 5 units a file, on 5 of the 6 DataNodes


def _write_all(namenode: str) -> dict[str, bytes]:
    files = {f"/warm/f{i:02d}": pattern(SIZE + i, seed=i) for i in range(FILES)}
    with client(namenode) as fs:
        fs.mkdir("/warm")
        for path, data in files.items():
            fs.write_bytes(path, data)
    return files


def _read_all_at_once(namenode: str, files: dict[str, bytes]) -> dict[str, str]:
    """Every file read in parallel by one client; {path: what went wrong} (empty: every byte back)."""
    wrong: dict[str, str] = {}
    with client(namenode) as fs, concurrent.futures.ThreadPoolExecutor(8) as pool:
        def read(path: str) -> None:
            try:
                if fs.read_bytes(path) != files[path]:
                    wrong[path] = "wrong bytes"
            except Exception as err:   # any error is a failed read of a stored file
                wrong[path] = f"{type(err).__name__}: {err}"
        list(pool.map(read, files))
    return wrong


def _log(c: LocalCluster, name: str) -> str:
    return (c.root / "logs" / f"{name}.log").read_text(errors="replace")


def _lookups(c: LocalCluster) -> float:
    """GetFileInfo and StatMany calls the NameNode has answered (a stat, a reader's open and its
    asking again while the answer is marked)."""
    total = 0.0
    with urllib.request.urlopen(c.http_url + "metrics", timeout=10) as page:
        for line in page.read().decode().splitlines():
            if line.startswith("hedgefs_namenode_rpc_calls_total{") and (
                    'method="GetFileInfo"' in line or 'method="StatMany"' in line):
                total += float(line.split()[-1])
    return total


def test_a_restarted_namenode_serves_every_read_at_once_before_the_reports_are_in(tmp_path):
    c = start_cluster(tmp_path / "c", datanodes=6, policy="RS-3-2-64k", heartbeat_interval_s=0.5,
                      dead_interval_s=20.0)
    try:
        files = _write_all(c.namenode)
        # dn1..dn3 hold 2 or 3 units of every group: frozen across the restart, they report after
        # the others, and about half the groups have fewer than k units located until they do.
        late = ("dn1", "dn2", "dn3")
        with client(c.namenode) as fs:
            short = next(p for p in files
                         if sum(u.datanode_id in late for u in fs.stat(p).groups[0].units.values()) == 3)
            located = next(p for p in files
                           if sum(u.datanode_id in late for u in fs.stat(p).groups[0].units.values()) == 2)
        for dn in late:
            c.freeze(dn)
        c.restart("namenode")
        wait_until(lambda: all(f"block report from {dn}" in _log(c, "namenode").split("namenode listening")[-1]
                               for dn in ("dn4", "dn5", "dn6")), 30, "the reports of dn4..dn6")
        # A reader that will not wait (deadline 1 s) gets one line saying why, exit 1, no bytes.
        cat = run_cli("cat", short, namenode=c.namenode, env={"HEDGEFS_FAILOVER_DEADLINE_S": "1"})
        assert cat.stdout == b""
        assert_one_line_error(cat, f"cannot read {short} yet: the NameNode is starting and the block reports of "
                                   "DataNodes it expects are still to come (dn1, dn2, dn3)")
        assert cat.code == 1
        # Two threads stat a located and a short file: both answered at once (a client that gives
        # up after 1 s would fail a stat held for dn1..dn3, frozen), the short one marked.
        with client(c.namenode, failover=FailoverConfig(deadline_s=1.0)) as fs, \
                concurrent.futures.ThreadPoolExecutor(2) as pool:
            both = threading.Barrier(2)

            def stat(path: str):
                both.wait(10)
                return fs.stat(path)

            a, b = pool.map(stat, (located, short))
        assert (a.path, a.length, a.locations_pending) == (located, len(files[located]), "")
        assert (b.path, b.length) == (short, len(files[short]))
        assert b.locations_pending.startswith(f"cannot read {short} yet: the NameNode is starting")
        # The S3 gateway's store: a HEAD (as a refused precondition) opens no reader, so it answers
        # at once; a GET's reader that will not wait fails DataUnavailable (503 ServiceUnavailable).
        with client(c.namenode, failover=FailoverConfig(deadline_s=1.0)) as fs:
            store = Store(fs)
            bucket, key = short.split("/")[1:]
            info, reader = store.open_object(bucket, key, read=False)
            assert (info.size, reader) == (len(files[short]), None)
            with pytest.raises(DataUnavailable, match=f"cannot read {short} yet"):
                store.open_object(bucket, key)
        # Every file read at once: the readers of short files ask again until dn1..dn3 report.
        before = _lookups(c)
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            reading = pool.submit(_read_all_at_once, c.namenode, files)
            # Each file's first lookup is at most one call (FILES): one more is a reader asking again.
            wait_until(lambda: reading.done() or _lookups(c) > before + FILES, 30, "a reader asking again")
            assert not reading.done()
            for dn in late:
                c.thaw(dn)
            assert reading.result(timeout=60) == {}
    finally:
        for dn in ("dn1", "dn2", "dn3"):
            c.thaw(dn)
        c.down()


def test_a_datanode_gone_for_good_is_named_in_the_log_after_the_dead_interval(tmp_path):
    c = start_cluster(tmp_path / "c", datanodes=6, policy="RS-3-2-64k", heartbeat_interval_s=0.5,
                      dead_interval_s=6.0)
    try:
        files = _write_all(c.namenode)
        c.kill("dn6")        # gone for good: every group keeps at least 4 of its 5 units elsewhere
        c.restart("namenode")
        assert _read_all_at_once(c.namenode, files) == {}     # k units of each: no wait for dn6
        wait_until(lambda: "stopped waiting for the block reports of dn6, 6 s after" in _log(c, "namenode"), 30,
                   "the NameNode to give up on dn6's report and say so")
        state = run_cli("admin", "safemode", "get", "--json", namenode=c.namenode)
        assert state.code == 0 and json.loads(state.stdout)["on"] is False, state.stdout
        assert _read_all_at_once(c.namenode, files) == {}
    finally:
        c.down()


@pytest.mark.skipif(ETCD is None, reason=SKIP_REASON)
def test_reads_at_once_across_the_promotion_of_a_restarted_standby_get_every_byte(tmp_path):
    from conftest import fork_server

    c = LocalCluster(tmp_path / "c", spawn=fork_server().spawn)
    c.up(Options(datanodes=6, namenode_port=0, policy="RS-3-2-64k", block_size=262144, fsync=False, ha=True,
                 heartbeat_interval_s=2.0, dead_interval_s=20.0))
    try:
        files = _write_all(c.namenode)
        second = c.namenode.split(",")[1]
        c.restart("namenode-2")   # the standby, its map empty until the DataNodes report to it
        c.kill("namenode")        # the active: namenode-2 takes over once the lease has expired
        # The reads meet namenode-2 as a standby with few or no reports (it sends a read it cannot
        # locate to the active: none yet, the client retries), then as the new active.
        assert _read_all_at_once(c.namenode, files) == {}
        wait_until(lambda: run_cli("admin", "report", namenode=second).stdout.startswith(b"namenode: active"), 30,
                   "the restarted standby to be the active")
        assert _read_all_at_once(c.namenode, files) == {}
    finally:
        c.down()
