"""Issue 47's "done means", on a multi-host cluster in network namespaces (root):

    python -m hedgefs.bench.placement_hosts [--files N] [--out FILE]

`cluster up --hosts 12 --racks 3` with 16 DataNodes (hosts 1-4 run two), RS-6-3-64k files:

1. fsck: no group with more than 3 units in a rack (nor two on a host);
2. rack3 (4 hosts) killed: every file byte-exact, and a new file written;
3. once repaired (onto 2 racks: 5 + 4 units a group, the best 8 hosts allow), host5 of rack2
   killed too: every file still byte-exact;
4. rack3 and host5 back: groups are misplaced again (3 racks allow 3 a rack); `hedgefs admin
   balance` is killed -9 after its first moves, every file byte-exact, and run again to the end:
   fsck clean, bytes moved against the minimum the rule needs.

Prints each step with its figures and writes them as JSON (--out). Not in `make test` (a
16-DataNode cluster in namespaces takes minutes on this shared machine); its result is committed
under bench/results/.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter

from hedgefs.client.fs import FileSystem
from hedgefs.cluster.launcher import LocalCluster, Options

POLICY = "RS-6-3-64k"
BLOCK = 256 * 1024


def content(n: int, salt: int) -> bytes:
    import numpy as np

    offsets = np.arange(n, dtype=np.uint64)
    return ((offsets * 2654435761 + salt * 40503 + (offsets >> 8)) % 251).astype(np.uint8).tobytes()


def wait(predicate, timeout_s: float, what: str):
    deadline = time.monotonic() + timeout_s
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise SystemExit(f"FAIL: {what} not within {timeout_s:.0f} s")
        time.sleep(0.5)


def spread(fs, paths) -> tuple[int, int, int]:
    """(groups, most units of a group in one rack, most on one host)."""
    where = {d.id: (d.host_id, d.rack) for d in fs.admin.report().datanodes}
    groups = rack_max = host_max = 0
    for path in paths:
        for g in fs.stat(path).groups:
            dns = [u.datanode_id for u in g.units.values()]
            groups += 1
            rack_max = max(rack_max, max(Counter(where[d][1] for d in dns).values()))
            host_max = max(host_max, max(Counter(where[d][0] for d in dns).values()))
    return groups, rack_max, host_max


def excess(fs, paths, cap: int = 3) -> int:
    """Units over ``cap`` a rack, summed over groups: the fewest moves the rule needs."""
    where = {d.id: d.rack for d in fs.admin.report().datanodes}
    return sum(max(0, n - cap) for p in paths for g in fs.stat(p).groups
               for n in Counter(where[u.datanode_id] for u in g.units.values()).values())


def check_all(fs, files) -> None:
    for path, data in files.items():
        got = fs.read_bytes(path)
        if got != data:
            raise SystemExit(f"FAIL: {path}: {len(got)} bytes read, not the {len(data)} written")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=12)
    parser.add_argument("--out", default="")
    args = parser.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("needs root (network namespaces)")
    out: dict = {"policy": POLICY, "hosts": 12, "racks": 3, "datanodes": 16}
    root = tempfile.mkdtemp(prefix="hedgefs-placement-hosts-")
    c = LocalCluster(root)
    began = time.monotonic()

    def say(line: str) -> None:
        print(f"[{time.monotonic() - began:6.1f} s] {line}", flush=True)

    try:
        c.up(Options(datanodes=16, hosts=12, racks=3, namenode_port=0, policy=POLICY, block_size=BLOCK,
                     heartbeat_interval_s=0.5, dead_interval_s=4.0, repair_interval_s=0.5, fsync=False))
        net = c.network
        rack_of = {dn: net.host(c.datanode_host(dn))["rack"] for dn in c.datanode_ids}
        host_of = {dn: c.datanode_host(dn) for dn in c.datanode_ids}
        say(f"cluster up: {len(c.datanode_ids)} DataNodes on {len(net.hosts)} hosts in {len(net.racks)} racks")
        files = {f"/p/f{i}": content(700_000 * (i % 4) + 1 + 37 * i, i) for i in range(args.files)}
        with FileSystem(c.namenode) as fs:
            fs.mkdir("/p")
            for path, data in files.items():
                fs.write_bytes(path, data)
            groups, rack_max, host_max = spread(fs, files)
            fsck = fs.admin.fsck("/")
            out["written"] = {"files": len(files), "bytes": sum(map(len, files.values())), "groups": groups,
                              "max_units_a_rack": rack_max, "max_units_a_host": host_max,
                              "fsck_misplaced": fsck.misplaced}
            say(f"1. written: {out['written']}")
            assert rack_max <= 3 and host_max == 1 and fsck.misplaced == 0, out["written"]

            rack3 = [dn for dn in c.datanode_ids if rack_of[dn] == "rack3"]
            for dn in rack3:
                c.kill(dn)
            t = time.monotonic()
            check_all(fs, files)
            out["rack3_killed"] = {"datanodes": rack3, "read_all_s": round(time.monotonic() - t, 2)}
            wait(lambda: sum(d.state == "dead" for d in fs.admin.report().datanodes) == len(rack3), 60,
                 "rack3 declared dead")
            files["/p/after-rack3"] = content(1_500_000, 777)
            fs.write_bytes("/p/after-rack3", files["/p/after-rack3"])
            check_all(fs, files)
            say(f"2. rack3 killed ({', '.join(rack3)}): every file byte-exact; a new file written")
            t = time.monotonic()
            wait(lambda: fs.admin.fsck("/").status == "HEALTHY", 600, "repairs after rack3")
            groups, rack_max, host_max = spread(fs, files)
            out["repaired"] = {"seconds": round(time.monotonic() - t, 1), "max_units_a_rack": rack_max,
                               "max_units_a_host": host_max}
            say(f"   repaired onto 2 racks in {out['repaired']['seconds']} s: at most {rack_max} units a rack, "
                f"{host_max} a host")
            host5 = [dn for dn in c.datanode_ids if host_of[dn] == "host5"]
            for dn in host5:
                c.kill(dn)
            check_all(fs, files)
            out["host5_killed_too"] = {"datanodes": host5, "every_file_byte_exact": True}
            say(f"3. host5 ({', '.join(host5)}, rack2) killed too: every file byte-exact")

            for dn in rack3 + host5:
                c.start(dn)
            c.wait_live(rack3 + host5, 60)
            wait(lambda: fs.admin.fsck("/").status == "HEALTHY" and fs.admin.fsck("/").misplaced > 0, 120,
                 "rack3 back, groups misplaced")
            need = excess(fs, files)
            misplaced = fs.admin.fsck("/").misplaced
            say(f"4. rack3 and host5 back: {misplaced} groups misplaced, {need} units over 3 a rack")
            env = dict(os.environ, HEDGEFS_NAMENODE=c.namenode)
            env.pop("HEDGEFS_CREDENTIALS", None)
            first = subprocess.Popen([sys.executable, "-m", "hedgefs", "admin", "balance", "--bandwidth", "256k",
                                      "--threshold", "100"], env=env, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL, start_new_session=True)
            wait(lambda: fs.admin.balance_step(0).moves_done >= 3, 120, "the first balance's first moves")
            os.killpg(first.pid, signal.SIGKILL)
            first.wait(10)
            killed_at = fs.admin.balance_step(0).moves_done
            check_all(fs, files)
            assert fs.admin.fsck("/").degraded == 0
            say(f"   balance killed -9 after {killed_at} moves: every file byte-exact, no group degraded")
            t = time.monotonic()
            done = subprocess.run([sys.executable, "-m", "hedgefs", "admin", "balance", "--bandwidth", "64M",
                                   "--threshold", "100", "--json", "--timeout", "600"], env=env, capture_output=True,
                                  timeout=700)
            if done.returncode != 0:
                raise SystemExit(f"FAIL: balance exit {done.returncode}: {done.stderr.decode()[-500:]}")
            result = json.loads(done.stdout)
            check_all(fs, files)
            fsck = fs.admin.fsck("/")
            groups, rack_max, host_max = spread(fs, files)
            moved = fs.admin.balance_step(0).moves_done
            out["balanced"] = {"seconds": round(time.monotonic() - t, 1), "second_run": result,
                               "moves_total": moved, "minimum_moves": need,
                               "ratio": round(moved / need, 3) if need else None,
                               "fsck_misplaced": fsck.misplaced, "fsck_status": fsck.status,
                               "max_units_a_rack": rack_max, "max_units_a_host": host_max}
            say(f"   balanced: {moved} moves in all for {need} needed (x{out['balanced']['ratio']}); fsck "
                f"{fsck.status}, misplaced {fsck.misplaced}; at most {rack_max} units a rack, {host_max} a host")
            assert fsck.misplaced == 0 and rack_max <= 3 and host_max == 1
        out["result"] = "PASS"
        say("PASS")
    finally:
        c.down()
        subprocess.run(["rm", "-rf", root])
        if args.out:
            with open(args.out, "w") as f:
                json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
