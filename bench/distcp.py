"""`hedgefs bench distcp`: DoltHub's straggler, in hedgefs: one big file copied as ~200 segments
between two clusters while one source DataNode answers 1 % of its reads 30 s late.

Three copies of the same file in one run, each to a fresh destination path:

    healthy       no fault, no hedging              the baseline every ratio is to
    slow, off     the fault, no hedging             the copy waits for its slowest segment
    slow, on      the fault, segment hedging auto   late segments get a second copy that reads
                                                    around the overdue DataNode

Reads inside a segment are not hedged in any of them (--no-hedge): the segment-level hedge is
what is measured (hedged reads alone would also hide this fault; see docs/benchmarks.md, distcp). Output: a JSON
file with every segment's attempts, and a Gantt chart of the segments (hedged ones in another
colour) like the DoltHub post's.
"""

from __future__ import annotations

import json
import os
import pathlib
import tempfile
import time

from hedgefs.client.config import HedgeConfig
from hedgefs.client.fs import FileSystem
from hedgefs.cluster.launcher import LocalCluster, Options as ClusterOptions
from hedgefs.distcp.job import DistCp, Options
from hedgefs.distcp.sides import ClusterSide, Location
from hedgefs.proto import hedgefs_pb2 as pb

POLICY = "RS-6-3-64k"
BLOCK = 896 * 1024                 # a 6 x 896 KiB = 5.25 MiB group: one segment
SEGMENT = 6 * BLOCK


class _PatternSource:
    """Deterministic pseudo-random bytes, generated as they are read (no 1 GiB buffer)."""

    def __init__(self, size: int, seed: int = 1):
        import numpy as np

        self._rng = np.random.default_rng(seed)
        self._left = size

    def read(self, n: int) -> bytes:
        n = min(n, self._left)
        self._left -= n
        return self._rng.integers(0, 256, n, dtype="uint8").tobytes()


def run(out_dir: pathlib.Path, *, segments: int = 200, delay_ms: int = 30_000, probability: float = 0.01,
        workers: int = 8, read_step: int = 1 << 20, slow_datanode: str = "dn3", say=print, command: str = "") -> dict:
    size = segments * SEGMENT
    with tempfile.TemporaryDirectory(prefix="hedgefs-bench-distcp-") as tmp:
        src, dst = LocalCluster(pathlib.Path(tmp) / "src"), LocalCluster(pathlib.Path(tmp) / "dst")
        options = ClusterOptions(datanodes=10, namenode_port=0, policy=POLICY, block_size=BLOCK, fsync=False)
        try:
            src.up(options)
            dst.up(options)
            say(f"clusters up: source {src.namenode}, destination {dst.namenode}; writing {size / 2**30:.2f} GiB")
            with FileSystem(src.namenode, credentials=src.credentials) as fs:
                fs.write("/big.bin", _PatternSource(size))
                expected = fs.checksum("/big.bin")
            runs = {}
            for name, fault, hedging in (("healthy", False, False), ("slow, hedging off", True, False),
                                         ("slow, hedging on", True, True)):
                if fault:
                    src.datanode_rpc(slow_datanode, "SetFaults",
                                     pb.FaultConfig(read_delay_ms=delay_ms, probability=probability))
                try:
                    runs[name] = _copy(src, dst, f"/copy-{len(runs)}.bin", hedging, workers, read_step, expected)
                finally:
                    if fault:
                        state = src.datanode_rpc(slow_datanode, "ClearFaults", pb.FaultClearRequest())
                        runs[name]["delayed_reads"] = int(state.calls.get("fault:delay", 0))
                r = runs[name]
                say(f"{name:<18} {r['seconds']:7.1f} s  {r['mb_per_s']:6.1f} MB/s  segments {r['segments']}  "
                    f"hedged {r['segments_hedged']} (wins {r['hedge_wins']})  slowest segment "
                    f"{max(s['seconds'] for s in r['per_segment']):.1f} s")
        finally:
            src.down()
            dst.down()
    healthy = runs["healthy"]["seconds"]
    result = {
        "command": command, "date": time.strftime("%Y-%m-%d %H:%M:%S"), "load_average": os.getloadavg(),
        "file_bytes": size, "segments": segments, "segment_bytes": SEGMENT, "policy": POLICY, "block_size": BLOCK,
        "workers": workers, "read_step": read_step,
        "fault": {"datanode": slow_datanode, "read_delay_ms": delay_ms, "probability": probability},
        "runs": runs,
        "ratio_to_healthy": {name: round(r["seconds"] / healthy, 3) for name, r in runs.items()},
    }
    out_dir.mkdir(parents=True, exist_ok=True)
    stem = out_dir / f"{time.strftime('%Y-%m-%d')}-distcp"
    stem.with_suffix(".json").write_text(json.dumps(result, indent=1))
    gantt(result, stem.with_name(stem.name + "-gantt.png"))
    return result


def _copy(src: LocalCluster, dst: LocalCluster, target: str, hedging: bool, workers: int, read_step: int,
          expected) -> dict:
    options = Options(workers=workers, hedging=hedging, max_hedged_percent=10.0, read_step=read_step)
    with FileSystem(src.namenode, hedge=HedgeConfig(enabled=False), credentials=src.credentials) as sfs, FileSystem(dst.namenode, credentials=dst.credentials) as dfs:
        job = DistCp([Location(src.namenode, "/big.bin")], Location(dst.namenode, target), options,
                     {src.namenode: ClusterSide(sfs)}, ClusterSide(dfs), dfs)
        report = job.run()
        if dfs.checksum(target) != expected:
            raise RuntimeError(f"{target}: the copy's checksum differs from the source's")
        dfs.delete(target)
    return report


def gantt(result: dict, path: pathlib.Path) -> pathlib.Path:
    """One panel per run: a bar per segment from its first copy's start to its winner's end;
    hedged segments in another colour, their second copy drawn beside them."""
    from hedgefs.bench.plots import _plt

    plt = _plt()
    runs = result["runs"]
    fig, axes = plt.subplots(len(runs), 1, figsize=(9, 3.2 * len(runs)), sharex=True)
    for ax, (name, run) in zip(axes, runs.items()):
        for y, seg in enumerate(run["per_segment"]):
            first = seg["attempts"][0]
            end = max(a["end_s"] for a in seg["attempts"] if a["outcome"] == "won")
            colour = "#e67e22" if seg["hedged"] else "#1f5fa8"
            ax.plot([first["start_s"], end], [y, y], color=colour, linewidth=1.6, solid_capstyle="butt")
            for a in seg["attempts"][1:]:
                ax.plot([a["start_s"], a["end_s"] or end], [y + 0.45, y + 0.45], color="#2e8b57", linewidth=1.0)
        ratio = result["ratio_to_healthy"][name]
        ax.set_title(f"{name}: {run['seconds']:.1f} s ({ratio:.2f} x healthy), {run['segments_hedged']} hedged, "
                     f"{run['hedge_wins']} hedge wins", fontsize=10)
        ax.set_ylabel("segment")
    axes[-1].set_xlabel("seconds since the copy started")
    from matplotlib.lines import Line2D

    axes[0].legend(handles=[Line2D([], [], color="#1f5fa8", label="segment"),
                            Line2D([], [], color="#e67e22", label="hedged segment (first copy start -> winner end)"),
                            Line2D([], [], color="#2e8b57", label="second copy")], fontsize=8, loc="upper right")
    fig.suptitle(f"distcp of {result['file_bytes'] / 2**30:.2f} GiB as {result['segments']} segments; "
                 f"{result['fault']['datanode']}: {result['fault']['probability']:.0%} of reads "
                 f"+{result['fault']['read_delay_ms'] / 1000:.0f} s", fontsize=11)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
