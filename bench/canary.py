"""A host-stall canary: a process outside the client that measures its own scheduling delay.

    python -m hedgefs.bench.canary OUT     # what the suite starts (``Canary``), until killed

It sleeps 1 ms again and again and writes every overshoot of at least ``RECORD_MS`` ("t_s
overshoot_ms", CLOCK_MONOTONIC, which every process on the host shares) to OUT, and one line a
second ("alive t_s samples max_ms") so that a silent canary is itself evidence. When the host
stalls (every core busy, a hypervisor steal, a swap storm), the canary's sleep overshoots by the
stall's length, whatever the client was doing: a read that is slow *with* a canary stall may owe
it to the host, one without cannot.

The pure parts (``stalls``, ``verdict``, ``touched_buckets``) turn the overshoots into stall
windows, a verdict per run and the 100 ms buckets of a run a stall touched; they are unit tested
on synthetic data (tests/integration/test_bench_suite.py).
"""

from __future__ import annotations

import pathlib
import subprocess
import sys
import time

TICK_S = 0.001
RECORD_MS = 2.0      # overshoots below this are not written (the scheduler's ordinary jitter)
STALL_MS = 10.0      # an overshoot of this much is a host stall: above a healthy read's p99.9
SEVERE_MS = 50.0     # a stall this long decides a run's p99.9 by itself


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    out = open(argv[0], "a", buffering=1)   # line-buffered: the suite reads while it runs
    second, count, worst = int(time.monotonic()), 0, 0.0
    while True:
        before = time.monotonic()
        time.sleep(TICK_S)
        now = time.monotonic()
        over = (now - before - TICK_S) * 1000.0
        count += 1
        worst = max(worst, over)
        if over >= RECORD_MS:
            out.write(f"{now:.4f} {over:.2f}\n")
        if int(now) != second:
            out.write(f"alive {now:.4f} {count} {worst:.2f}\n")
            second, count, worst = int(now), 0, 0.0


def parse(lines) -> list[tuple[float, float]]:
    """The overshoots of a canary file: [(t_s, overshoot_ms)]; alive lines are skipped."""
    out = []
    for line in lines:
        parts = line.split()
        if len(parts) == 2:
            try:
                out.append((float(parts[0]), float(parts[1])))
            except ValueError:
                continue
    return out


def stalls(samples: list[tuple[float, float]], threshold_ms: float = STALL_MS,
           merge_s: float = 0.05) -> list[dict]:
    """Stall windows from overshoot samples: a sample (t, o) means the canary was not scheduled
    during [t - o, t]. Overshoots of ``threshold_ms`` or more count; windows closer than
    ``merge_s`` merge. Each: {"start", "end", "worst_ms", "samples"}."""
    out: list[dict] = []
    for t, over in sorted(samples):
        if over < threshold_ms:
            continue
        start = t - over / 1000.0
        if out and start - out[-1]["end"] <= merge_s:
            last = out[-1]
            last["end"] = max(last["end"], t)
            last["worst_ms"] = max(last["worst_ms"], over)
            last["samples"] += 1
        else:
            out.append({"start": start, "end": t, "worst_ms": over, "samples": 1})
    return out


def verdict(samples: list[tuple[float, float]], start: float, end: float) -> dict:
    """The canary's word on [start, end] (monotonic seconds): quiet (no stall of STALL_MS), stalls
    (some, all shorter than SEVERE_MS) or stalled (one of SEVERE_MS or more)."""
    inside = [(t, o) for t, o in samples if start <= t <= end + 1.0 and t - o / 1000.0 <= end]
    found = stalls(inside)
    worst = max((s["worst_ms"] for s in found), default=max((o for _, o in inside), default=0.0))
    word = "quiet" if not found else "stalled" if worst >= SEVERE_MS else "stalls"
    return {"verdict": word, "stalls": len(found), "worst_ms": round(worst, 1),
            "stall_s": round(sum(s["end"] - s["start"] for s in found), 3),
            "windows": [[round(s["start"] - start, 3), round(s["end"] - start, 3), round(s["worst_ms"], 1)]
                        for s in found]}


def touched_buckets(windows: list[list[float]], bucket_s: float) -> set[int]:
    """Indices of the run's buckets (by scheduled start, ``bucket_s`` wide) a stall window
    [start, end, worst] (run-relative seconds) overlaps: reads scheduled there may have waited on
    the host. A read scheduled up to one healthy read earlier (the bucket before) is counted too."""
    out: set[int] = set()
    for start, end, _worst in windows:
        first, last = int(max(0.0, start) / bucket_s) - 1, int(max(0.0, end) / bucket_s)
        out.update(range(max(0, first), last + 1))
    return out


class Canary:
    """The canary process for a ``with`` block; ``samples()`` is what it has written so far."""

    def __init__(self, path: pathlib.Path):
        self.path = path
        self.proc: subprocess.Popen | None = None
        self._samples: list[tuple[float, float]] = []
        self._alive = 0
        self._pos = 0

    def __enter__(self) -> "Canary":
        self.path.write_text("")
        self.proc = subprocess.Popen([sys.executable, "-m", "hedgefs.bench.canary", str(self.path)])
        return self

    def _read(self) -> None:
        """What the canary wrote since the last call (whole lines only)."""
        with open(self.path) as f:
            f.seek(self._pos)
            text = f.read()
        complete = text[:text.rfind("\n") + 1]
        self._pos += len(complete)
        lines = complete.splitlines()
        self._alive += sum(1 for line in lines if line.startswith("alive"))
        self._samples.extend(parse(lines))

    def samples(self) -> list[tuple[float, float]]:
        self._read()
        return self._samples

    def alive_seconds(self) -> int:
        self._read()
        return self._alive

    def __exit__(self, *exc) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()


if __name__ == "__main__":
    main()
