"""`hedgefs bench promotion`: how long a hot standby takes to serve writes once it has won the
lease, with a large namespace (issue 42: <= 200 ms at 1 M files), on real processes (3 etcd
members, 2 NameNodes on one prefix).

The namespace (``files`` one-group files) is made in process (the journal's own records) and put
on etcd as a checkpoint image; both NameNodes load it at their start. Then, while 8 threads write
(Mkdir after Mkdir, following ``hedgefs-active``), the active is asked to hand over (``Failover``,
``reps`` times, the two NameNodes taking turns) or killed (``kill -9``, ``kills`` times, started
again as a standby after). Two figures a handover:

  promotion   the new active's own: from winning the lease (its campaign's answer) to its first
              change durable (the NameNode's log line; the catch-up to the old active's last
              record, the switch to writing and the first Txn included)
  unwritable  the writers': from the Failover call (or the kill) to the first write the new
              active acknowledged (the standby seeing the leader key go, its campaign, the
              client's redirect included; for a kill, the lease's TTL too)
"""

from __future__ import annotations

import json
import os
import re
import shutil
import statistics
import sys
import tempfile
import time

_PROMOTED = re.compile(r"first change durable as the active \(txid \d+\) (\d+) ms after winning the lease")


def _seed(meta, files: int) -> int:
    """The namespace as a checkpoint image on etcd (as an active's checkpoint leaves it)."""
    from hedgefs.bench.namenode_scale import namespace
    from hedgefs.namenode.journal.etcd import EtcdJournal
    from hedgefs.namenode.journal.image import Snapshot

    applier, txid = namespace(files, "CID-promotion")
    engine = EtcdJournal(meta)
    engine.write_image(txid, Snapshot(applier, txid).chunks())   # epoch 0: no guard (no active yet)
    engine.publish_image(txid)
    return txid


def _promotions(log_path: str) -> list[int]:
    with open(log_path, errors="replace") as f:
        return [int(m.group(1)) for m in _PROMOTED.finditer(f.read())]


def run(files: int = 1_000_000, reps: int = 10, kills: int = 3, ttl_s: int = 3, command: str = "",
        say=print) -> dict:
    import grpc

    from hedgefs.bench.failover import _NameNode, _role, _Writers, hand_over
    from hedgefs.cluster.etcd import EtcdMembers
    from hedgefs.namenode.journal.etcd_meta import EtcdMeta, parse_meta_url
    from hedgefs.proto import hedgefs_pb2 as pb, hedgefs_pb2_grpc

    root = tempfile.mkdtemp(prefix="hedgefs-bench-promotion-", dir=os.environ.get("HEDGEFS_BENCH_TMP"))
    etcd = EtcdMembers(root).start()
    url = etcd.url("bench")
    nodes = [_NameNode(root, f"nn{i}", url, ttl_s) for i in (1, 2)]
    writers = None
    try:
        meta = EtcdMeta(parse_meta_url(url), timeout_s=30)
        began = time.monotonic()
        txid = _seed(meta, files)
        meta.close()
        say(f"  {files:,} files as an image on etcd (txid {txid}) in {time.monotonic() - began:.0f} s")
        began = time.monotonic()
        for n in nodes:
            n.start()
        stub = {n.name: hedgefs_pb2_grpc.NameNodeStub(grpc.insecure_channel(n.address)) for n in nodes}

        def wait_roles(timeout: float = 600.0):
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline:
                roles = {n.name: _role(stub[n.name], pb) for n in nodes}
                if sorted(roles.values()) == ["active", "standby"]:
                    return next(n for n in nodes if roles[n.name] == "active")
                time.sleep(0.1)
            raise RuntimeError(f"no active and standby within {timeout:.0f} s: {roles}")

        wait_roles()
        say(f"  both NameNodes serving (the image loaded) in {time.monotonic() - began:.0f} s")
        writers = _Writers(nodes)
        for t in writers.threads:
            t.start()
        out = {"handover": [], "kill": []}
        for kind, count in (("handover", reps), ("kill", kills)):
            for i in range(count):
                old = wait_roles()
                new = next(n for n in nodes if n is not old)
                time.sleep(1.0)   # writes flowing on the old active
                seen = len(_promotions(os.path.join(root, f"{new.name}.log")))
                unwritable = hand_over(old, new, writers, stub, kill=kind == "kill", timeout_s=120)
                while len(promoted := _promotions(os.path.join(root, f"{new.name}.log"))) <= seen:
                    time.sleep(0.05)
                out[kind].append({"promotion_ms": promoted[-1], "unwritable_s": round(unwritable, 3)})
                say(f"  {kind} {i + 1}/{count}: promotion {promoted[-1]} ms, writes back after {unwritable:.2f} s")
        writers.stop.set()
        doc = {"command": command, "files": files, "ttl_s": ttl_s, "writer_threads": len(writers.threads),
               "date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()), "load": os.getloadavg()}
        for kind, got in out.items():
            if got:
                promotion = [g["promotion_ms"] for g in got]
                doc[kind] = {"runs": got, "promotion_ms_median": statistics.median(promotion),
                             "promotion_ms_max": max(promotion),
                             "unwritable_s_median": round(statistics.median(g["unwritable_s"] for g in got), 3)}
        return doc
    finally:
        if writers is not None:
            writers.stop.set()
        for n in nodes:
            try:
                n.stop()
            except Exception:
                pass
        etcd.stop()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    args = dict(a.split("=", 1) for a in sys.argv[1:])
    print(json.dumps(run(files=int(args.get("files", 1_000_000)), reps=int(args.get("reps", 10)),
                         kills=int(args.get("kills", 3)), command="python bench/promotion.py " + " ".join(sys.argv[1:]),
                         say=lambda s: print(s, file=sys.stderr)), indent=1))
