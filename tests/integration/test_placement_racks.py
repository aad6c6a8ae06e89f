"""Placement by host and rack on real processes, one machine, no root: DataNodes started with
--host-id and --rack (issue 47).

RS-6-3 (m = 3) on 12 hosts in 3 racks of 4 (a 13th DataNode shares host12): every group keeps at
most 3 units in a rack and one a host; a whole rack killed leaves every file byte-exact and the
next writes go on (on 8 hosts: two units share one, the best the cluster allows). Racks said
only after the data was written leave groups misplaced (fsck says so, exit 0); `hedgefs admin
balance` mends them, a kill -9 of it midway losing nothing, and fsck is clean after.
"""

import json
import os
import signal
import subprocess
import sys
from collections import Counter

from conftest import cli_env, client, run_cli, start_cluster, wait_until

POLICY = "RS-6-3-64k"
BLOCK = 128 * 1024                      # a group: 768 KiB of data, 9 units of 128 KiB
RACK = {f"dn{h}": f"/r{(h - 1) // 4 + 1}" for h in range(1, 13)}
HOST = {f"dn{h}": f"host{h}" for h in range(1, 13)}
RACK["dn13"], HOST["dn13"] = "/r3", "host12"


def placed_args(with_racks: bool = True) -> dict[str, list[str]]:
    return {dn: ["--host-id", HOST[dn]] + (["--rack", RACK[dn]] if with_racks else []) for dn in HOST}


def content(n: int, salt: int) -> bytes:
    return bytes((i * 131 + salt * 7) % 251 for i in range(n))


def spread(fs, path: str) -> list[tuple[Counter, Counter]]:
    """Per group of ``path``: units per host and per rack (as the NameNode's report names them)."""
    where = {d.id: (d.host_id, d.rack) for d in fs.admin.report().datanodes}
    out = []
    for group in fs.stat(path).groups:
        dns = [u.datanode_id for u in group.units.values()]
        out.append((Counter(where[d][0] for d in dns), Counter(where[d][1] for d in dns)))
    return out


def fsck(cluster) -> dict:
    r = run_cli("fsck", "--json", "/", namenode=cluster.namenode)
    assert r.code == 0, r.stderr
    return json.loads(r.stdout)


def test_a_whole_rack_goes_and_every_byte_stays(tmp_path):
    c = start_cluster(tmp_path / "c", datanodes=13, policy=POLICY, block_size=BLOCK,
                      datanode_args=placed_args())
    try:
        files = {f"/d/f{i}": content(n, i) for i, n in enumerate([1, 100_000, 768 * 1024, 2_500_000, 5_000_000])}
        with client(c.namenode) as fs:
            report = {d.id: (d.host_id, d.rack) for d in fs.admin.report().datanodes}
            assert report == {dn: (HOST[dn], RACK[dn]) for dn in HOST}
            fs.mkdir("/d")
            for path, data in files.items():
                fs.write_bytes(path, data)
            for path in files:
                for on_host, in_rack in spread(fs, path):
                    assert max(in_rack.values()) <= 3, (path, in_rack)
                    assert max(on_host.values()) == 1, (path, on_host)
        summary = fsck(c)
        assert (summary["status"], summary["misplaced"]) == ("HEALTHY", 0)
        shown = run_cli("admin", "report", namenode=c.namenode)
        assert shown.code == 0 and "rack/host" in shown.stdout.decode()
        rows = {line.split()[0]: line.split()[2] for line in shown.stdout.decode().splitlines() if line.startswith("dn")}
        assert rows["dn1"] == "/r1/host1" and rows["dn13"] == "/r3/host12", shown.stdout

        rack1 = [dn for dn in HOST if RACK[dn] == "/r1"]
        for dn in rack1:
            c.kill(dn)
        with client(c.namenode) as fs:
            for path, data in files.items():
                assert fs.read_bytes(path) == data, path
            wait_until(lambda: sum(d.state == "dead" for d in fs.admin.report().datanodes) == 4, 30,
                       "rack r1's DataNodes declared dead")
            fs.write_bytes("/d/after", content(2_000_000, 99))          # 9 DataNodes on 8 hosts: it goes on
            assert fs.read_bytes("/d/after") == content(2_000_000, 99)
            for on_host, in_rack in spread(fs, "/d/after"):
                assert "/r1" not in in_rack and max(on_host.values()) <= 2
    finally:
        c.down()


def balance(cluster, *args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "hedgefs", "admin", "balance", *args],
                            env=cli_env(cluster.namenode), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True)


def test_racks_said_after_the_writes_are_mended_by_the_balancer(tmp_path):
    c = start_cluster(tmp_path / "c", datanodes=12, policy=POLICY, block_size=BLOCK,
                      datanode_args={dn: a for dn, a in placed_args(with_racks=False).items() if dn != "dn13"})
    try:
        files = {f"/m/f{i}": content(1_500_000 + 10_000 * i, i) for i in range(8)}   # 2 groups each
        with client(c.namenode) as fs:
            fs.mkdir("/m")
            for path, data in files.items():
                fs.write_bytes(path, data)
        assert fsck(c)["misplaced"] == 0                 # one rack: nothing better was possible then
        # the DataNodes restart with their racks
        c.state["options"]["datanode_args"] = {dn: a for dn, a in placed_args().items() if dn != "dn13"}
        c._save()
        for dn in c.datanode_ids:
            c.kill(dn)
        for dn in c.datanode_ids:
            c.start(dn)
        c.wait_live(c.datanode_ids, 60)
        with client(c.namenode) as fs:
            wait_until(lambda: {d.rack for d in fs.admin.report().datanodes} == {"/r1", "/r2", "/r3"}, 30,
                       "the DataNodes registered with their racks")
        wait_until(lambda: fsck(c)["status"] == "HEALTHY", 60, "every unit reported again")
        before = fsck(c)
        assert before["misplaced"] > 0 and before["status"] == "HEALTHY"
        assert {p["status"] for p in before["problems"]} == {"MISPLACED"}
        need = 0
        with client(c.namenode) as fs:
            for path in files:
                need += sum(max(0, n - 3) for _, in_rack in spread(fs, path) for n in in_rack.values())

        # a slow balance, killed -9 once it has moved something: nothing is lost
        slow = balance(c, "--bandwidth", "128k")
        try:
            with client(c.namenode) as fs:
                wait_until(lambda: fs.admin.balance_step(0).moves_done > 0, 60, "a first move done")
            os.killpg(slow.pid, signal.SIGKILL)
        finally:
            slow.wait(10)
        with client(c.namenode) as fs:
            for path, data in files.items():
                assert fs.read_bytes(path) == data, path
        assert fsck(c)["degraded"] == 0

        done = balance(c, "--bandwidth", "64M", "--threshold", "100", "--json", "--timeout", "240")
        out, err = done.communicate(timeout=300)
        assert done.returncode == 0, err.decode()
        result = json.loads(out)
        assert result["balanced"] and result["misplaced"] == 0
        after = fsck(c)                                  # done means fsck agrees, at once
        assert (after["misplaced"], after["degraded"], after["status"]) == (0, 0, "HEALTHY"), after
        with client(c.namenode) as fs:
            for path, data in files.items():
                assert fs.read_bytes(path) == data, path
                for on_host, in_rack in spread(fs, path):
                    assert max(in_rack.values()) <= 3 and max(on_host.values()) == 1
            moved = fs.admin.balance_step(0).moves_done
        assert moved <= 1.2 * need, (moved, need)       # the moves the rule needs, within 1.2x
    finally:
        c.down()


def test_balance_refuses_bad_input_in_one_line():
    r = run_cli("admin", "balance", "--bandwidth", "fast", namenode="127.0.0.1:1")
    assert r.code == 2 and r.stderr.count("\n") == 1 and "bad --bandwidth 'fast'" in r.stderr
    r = run_cli("admin", "balance", "--threshold", "-5", namenode="127.0.0.1:1")
    assert r.code == 2 and "bad --threshold" in r.stderr
    r = run_cli("admin", "balance", namenode="127.0.0.1:1")
    assert r.code == 3 and "cannot reach the NameNode" in r.stderr
