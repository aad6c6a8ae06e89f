"""Hiccup meters: how late a thread that sleeps 1 ms wakes, in the client's process and beside the servers.

    meter = HiccupMeter().start()          # a thread of this process (the client's, the load generator's)
    ...
    meter.window(t0, t1)                   # {"samples", "p999_ms", "max_ms"} of the wake-ups in [t0, t1)
    meter.stop()

    servers = ServerMeter(path, cpu=0)     # bench/canary.py as a process, pinned beside the servers
    servers.window(t0, t1)

jHiccup's method: a thread asks to sleep 1 ms again and again and records how much later it
woke. In the client's process the overshoot is what any of its threads (the event loop, the load
generator) waits for the interpreter's lock, the collector or the host; beside the servers, a
process pinned to their core sees what the host's scheduler does to them. A round of the tail
suite whose hiccup p99.9 passes a bound is flagged and reported, never silently dropped.

Only wake-ups late by ``RECORD_MS`` or more are kept (with a count of all of them per second), so
a p99.9 above that is exact and one below it reads as "< RECORD_MS".
"""

from __future__ import annotations

import bisect
import collections
import os
import pathlib
import subprocess
import sys
import threading
import time

from hedgefs.bench import canary

TICK_S = 0.001
RECORD_MS = 0.5


class HiccupMeter:
    """A thread of this process sleeping ``TICK_S`` again and again."""

    def __init__(self) -> None:
        self._late: list[tuple[float, float]] = []          # (t, overshoot ms) of the late wake-ups
        self._counts: collections.Counter[int] = collections.Counter()   # wake-ups per whole second
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="hiccup-meter", daemon=True)

    def start(self) -> "HiccupMeter":
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(2)

    def _run(self) -> None:
        while not self._stop.is_set():
            before = time.monotonic()
            time.sleep(TICK_S)
            now = time.monotonic()
            over = (now - before - TICK_S) * 1000.0
            with self._lock:
                self._counts[int(now)] += 1
                if over >= RECORD_MS:
                    self._late.append((now, over))

    def window(self, t0: float, t1: float) -> dict:
        with self._lock:
            late = [ms for t, ms in self._late[bisect.bisect_left(self._late, (t0,)):] if t < t1]
            samples = sum(n for s, n in self._counts.items() if t0 <= s + 0.5 < t1)
        return summarize(late, samples)


class ServerMeter:
    """bench/canary.py as a process of its own, pinned to the servers' CPUs (``cpus``), writing
    every overshoot of ``canary.RECORD_MS`` or more and a count a second to ``path``."""

    def __init__(self, path: pathlib.Path, cpus: set[int] | None = None):
        self.path = path
        self._proc = subprocess.Popen([sys.executable, "-m", "hedgefs.bench.canary", str(path)],
                                      stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        if cpus:
            os.sched_setaffinity(self._proc.pid, cpus)

    def stop(self) -> None:
        self._proc.kill()
        self._proc.wait()

    def window(self, t0: float, t1: float) -> dict:
        late, samples = [], 0
        try:
            lines = self.path.read_text().splitlines()
        except OSError:
            lines = []
        for line in lines:
            parts = line.split()
            try:
                if parts[0] == "alive" and t0 <= float(parts[1]) < t1 + 1:
                    samples += int(parts[2])
                elif len(parts) == 2 and t0 <= float(parts[0]) < t1:
                    late.append(float(parts[1]))
            except (IndexError, ValueError):
                continue
        return summarize(late, samples, floor_ms=canary.RECORD_MS)


def summarize(late: list[float], samples: int, floor_ms: float = RECORD_MS) -> dict:
    """{"samples", "p999_ms", "max_ms"}: the p99.9 of the wake-ups' lateness (``floor_ms`` when it
    is below what was recorded; None without samples)."""
    if samples <= 0:
        return {"samples": 0, "p999_ms": None, "max_ms": max(late, default=None)}
    late = sorted(late, reverse=True)
    rank = int(samples * 0.001)   # the p99.9 is the (rank + 1)-th latest wake-up
    p999 = late[rank] if rank < len(late) else floor_ms
    return {"samples": samples, "p999_ms": round(p999, 2), "max_ms": round(late[0], 2) if late else None}
