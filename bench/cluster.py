"""The benchmarks' cluster: a fresh local cluster with seeded files on it, and the fault verbs.

One wrapper for the tail-latency suite (bench/scenarios.py) and EC vs replication
(bench/replication.py): NameNode + 10 DataNodes (the suite: 12), real processes in a temp dir, fsync off, 2 MiB
internal blocks, no DataNode declared dead during a run (120 s). Files are seeded random bytes,
never all in memory. ``CpuHog`` makes the whole host slow for a run.
"""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys
import time
from typing import Iterable

import numpy as np

from hedgefs.bench.read import TimelineEvent
from hedgefs.client.admin import FsckReport
from hedgefs.client.fs import FileSystem
from hedgefs.client.metrics import natural_key
from hedgefs.cluster.launcher import LocalCluster, Options
from hedgefs.ec import layout
from hedgefs.ec.policy import parse_policy
from hedgefs.proto import hedgefs_pb2 as pb

BLOCK_SIZE = 2 << 20
DATANODES = 10


def path_of(policy: str) -> str:
    """The suite's file in ``policy`` (bench/scenarios.py)."""
    return f"/bench/{policy.lower()}.bin"


class RandomSource:
    """A file-like source of seeded random bytes (the file is never all in memory)."""

    def __init__(self, size: int, seed: int):
        self._left = size
        self._rng = np.random.default_rng(seed)

    def read(self, n: int = -1) -> bytes:
        n = self._left if n < 0 else min(n, self._left)
        self._left -= n
        return self._rng.bytes(n) if n else b""


class BenchCluster:
    """A fresh LocalCluster with the bench files on it, and the fault verbs the runs use."""

    def __init__(self, root: pathlib.Path, files: dict[str, str | None], file_bytes: int, seed: int = 0,
                 datanodes: int = DATANODES):
        """``files``: path -> policy (None: the NameNode's default), each ``file_bytes`` long."""
        self.cluster = LocalCluster(root)
        # No DataNode is declared dead during a run (120 s); a repair comes only from a put.
        self.cluster.up(Options(datanodes=datanodes, namenode_port=0, block_size=BLOCK_SIZE, fsync=False,
                                dead_interval_s=120.0))
        self.write_s: dict[str, float] = {}
        with self.fs() as fs:
            for directory in sorted({os.path.dirname(path) for path in files}):
                fs.mkdir(directory, parents=True)
            for path, policy in files.items():
                started = time.monotonic()
                fs.write(path, RandomSource(file_bytes, seed), overwrite=True, policy=policy, block_size=BLOCK_SIZE)
                self.write_s[path] = time.monotonic() - started
            self.status = {path: fs.stat(path) for path in files}
        self.policies = {path: parse_policy(status.policy) for path, status in self.status.items()}

    @property
    def namenode(self) -> str:
        return self.cluster.namenode

    def fs(self, hedge=None) -> FileSystem:
        """A new client of this cluster (``hedge`` None: the defaults)."""
        return FileSystem(self.namenode, hedge=hedge, credentials=self.cluster.credentials)

    # ------------------------------------------------------------------ where the data is

    def data_cells_per_datanode(self, path: str) -> dict[str, int]:
        """Data cells of the file per DataNode (reads are spread by data cell)."""
        status, policy = self.status[path], self.policies[path]
        counts = dict.fromkeys(self.cluster.datanode_ids, 0)
        for g in status.groups:
            stripes = layout.num_stripes(policy, g.length)
            for index in range(policy.k):
                loc = g.units.get(index)
                if loc is not None:
                    counts[loc.datanode_id] += sum(1 for s in range(stripes)
                                                   if layout.cell_length(policy, g.length, s, index) > 0)
        return counts

    def victims(self, n: int, path: str) -> list[str]:
        """The ``n`` DataNodes holding the most data cells of the file."""
        counts = self.data_cells_per_datanode(path)
        return [dn for dn, _ in sorted(counts.items(), key=lambda kv: (-kv[1], natural_key(kv[0])))[:n]]

    def least_loaded(self, path: str) -> str:
        """The DataNode holding the fewest units of the file: the first a new file's groups are placed on."""
        counts = dict.fromkeys(self.cluster.datanode_ids, 0)
        for g in self.status[path].groups:
            for loc in g.units.values():
                counts[loc.datanode_id] += 1
        return min(counts, key=lambda dn: (counts[dn], natural_key(dn)))

    def data_share(self) -> dict[str, dict[str, float]]:
        """Per DataNode, per file: the share of the file's read data it can serve (EC: its data
        units' bytes; replication: its replicas' bytes, over all replicas)."""
        shares = {dn: dict.fromkeys(self.status, 0.0) for dn in self.cluster.datanode_ids}
        for path, status in self.status.items():
            p = self.policies[path]
            served = range(p.units) if p.replicated else range(p.k)
            total = sum(layout.unit_length(p, g.length, i) for g in status.groups for i in served)
            for g in status.groups:
                for i in served:
                    loc = g.units.get(i)
                    if loc is not None:
                        shares[loc.datanode_id][path] += layout.unit_length(p, g.length, i) / total
        return shares

    def victim(self) -> str:
        """The DataNode with the largest share of all the files' data."""
        shares = self.data_share()
        return max(sorted(shares), key=lambda dn: sum(shares[dn].values()))

    def disk_bytes(self) -> dict[str, int]:
        """Per file: bytes of its units' block files and CRC sidecars on every DataNode's disk."""
        out = {}
        for path, status in self.status.items():
            groups = {str(g.id) for g in status.groups}
            total = 0
            for dn in self.cluster.datanode_ids:
                for p in (self.cluster.root / dn / "blocks").glob("*/*"):
                    if p.name.split("_")[0] in groups:
                        total += p.stat().st_size
            out[path] = total
        return out

    # ------------------------------------------------------------------ faults

    def set_faults(self, datanode: str, config: pb.FaultConfig | None) -> None:
        if config is None:
            self.cluster.datanode_rpc(datanode, "ClearFaults", pb.FaultClearRequest())
        else:
            self.cluster.datanode_rpc(datanode, "SetFaults", config)

    def fault_timeline(self, kind: str, victims: list[str], start_s: float, end_s: float | None = None,
                       delay_ms: int = 0, probability: float = 1.0) -> list[TimelineEvent]:
        """The events of one fault on ``victims`` (kind delay | freeze | kill; anything else: none),
        from ``start_s`` to ``end_s`` into the run (None: to its end)."""
        names = ", ".join(victims)
        if kind == "delay":
            what = f"+{delay_ms} ms" + (f" on {probability:.0%} of reads" if probability < 1 else "")
            config = pb.FaultConfig(read_delay_ms=delay_ms, probability=probability)
            events = [TimelineEvent(start_s, f"{names}: {what}", lambda: [self.set_faults(v, config) for v in victims],
                                    "fault-start")]
            end = TimelineEvent(end_s, f"{names}: faults cleared", lambda: [self.set_faults(v, None) for v in victims],
                                "fault-end")
        elif kind == "freeze":
            events = [TimelineEvent(start_s, f"{names}: SIGSTOP", lambda: [self.cluster.freeze(v) for v in victims],
                                    "fault-start")]
            end = TimelineEvent(end_s, f"{names}: SIGCONT", lambda: [self.cluster.thaw(v) for v in victims], "fault-end")
        elif kind == "kill":
            return [TimelineEvent(start_s, f"{names}: SIGKILL", lambda: [self.cluster.kill(v) for v in victims],
                                  "fault-start")]
        else:
            return []
        return events + ([end] if end_s is not None else [])

    def restore(self, datanodes: Iterable[str] | None = None) -> None:
        """Back to healthy between runs (``datanodes`` None: all): thaw, restart the killed, clear
        faults; then wait until the NameNode calls every DataNode live."""
        for name in self.cluster.datanode_ids if datanodes is None else datanodes:
            state = self.cluster.process_state(name)
            if state == "frozen":
                self.cluster.thaw(name)
            elif state == "stopped":
                self.cluster.restart(name)
            self.set_faults(name, None)
        self.cluster.wait_live(self.cluster.datanode_ids, 60)

    def fsck(self) -> FsckReport:
        with self.fs() as fs:
            return fs.admin.fsck("/")

    def down(self) -> None:
        self.cluster.down()


class CpuHog:
    """One busy process per core for the length of a run: the host uniformly slow."""

    def __init__(self, count: int | None = None):
        self.count = count or os.cpu_count() or 1
        self.procs: list[subprocess.Popen] = []

    def __enter__(self) -> "CpuHog":
        self.procs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(self.count)]
        return self

    def __exit__(self, *exc) -> None:
        for p in self.procs:
            p.kill()
            p.wait()
