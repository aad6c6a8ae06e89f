"""Per-read breakdown for the bench: where a slow read's time went.

    tracer = ReadTracer()                     # one per run
    future = tracer.submit(f, offset, size, scheduled, exclude)
    ...
    tracer.slowest(30)                        # the slowest reads, broken down
    breakdown(tracer.records, threshold_s)    # medians of the parts of the reads above a latency

A read's latency (from its scheduled start, as bench/read.py counts it) splits into:

- ``dispatch``: scheduled -> handed to the client (the load generator's own lag);
- ``loop``: handed over -> its first range fetch starts (the loop's queue, and the open file's
  own work before it: locations, tokens);
- ``units``: the range fetchers' time waiting on unit reads (first fetcher start -> last end,
  decode taken out), and ``sent``: how many unit reads they sent;
- ``decode``: rebuilding cells from other units;
- ``other``: the rest inside the read (locating, assembling, the future's delivery).

The client keeps no per-read record, so this one is the bench's: a context variable holds the
read's record while ``FileReader.submit`` hands the read to the client's event loop (the loop
runs it in a copy of that context: ``call_soon_threadsafe`` and the task it starts take the
caller's), and while a tracer is ``installed(fs)`` the client's fetch observer
(``FileSystem.observe_reads``: one ``FetchReport`` as each range fetch ends, in the context of the
read it served) adds each fetch's times to the current record. Nothing the client decides
changes, and no class or private of it is touched.
"""

from __future__ import annotations

import contextlib
import contextvars
import statistics
import time

_CURRENT: contextvars.ContextVar["list | None"] = contextvars.ContextVar("hedgefs_bench_read", default=None)
# A record: [scheduled, submitted, started, fetch_first_start, fetch_last_end, decode_s, sent, finished]
SCHEDULED, SUBMITTED, STARTED, FETCH_START, FETCH_END, DECODE, SENT, FINISHED = range(8)
PARTS = ("dispatch_ms", "loop_ms", "units_ms", "decode_ms", "other_ms")


@contextlib.contextmanager
def installed(fs):
    """Observe ``fs``'s range fetches for the block (a traced read's fetches go to its record)."""
    stop = fs.observe_reads(fetched)
    try:
        yield
    finally:
        stop()


def fetched(report) -> None:
    """One range fetch ended (``client.range_fetch.FetchReport``): add it to the current read's record."""
    rec = _CURRENT.get()
    if rec is None:
        return
    rec[FETCH_START] = report.began if rec[FETCH_START] is None else min(rec[FETCH_START], report.began)
    rec[STARTED] = rec[FETCH_START]
    rec[FETCH_END] = max(rec[FETCH_END] or 0.0, report.ended)
    rec[SENT] += report.unit_reads
    rec[DECODE] += report.decode_s


class ReadTracer:
    """The records of one run's reads."""

    def __init__(self) -> None:
        self.records: list[list] = []

    def submit(self, f, offset: int, length: int, scheduled: float, exclude: frozenset[str] = frozenset()):
        rec = [scheduled, time.monotonic(), None, None, None, 0.0, 0, None]
        self.records.append(rec)
        token = _CURRENT.set(rec)
        try:
            future = f.submit(offset, length, exclude)
        finally:
            _CURRENT.reset(token)
        future.add_done_callback(lambda _f: rec.__setitem__(FINISHED, time.monotonic()))
        return future

    def slowest(self, n: int, t0: float) -> list[dict]:
        done = [r for r in self.records if r[FINISHED] is not None]
        done.sort(key=lambda r: r[FINISHED] - r[SCHEDULED], reverse=True)
        return [dict(parts(r), t_s=round(r[SCHEDULED] - t0, 3)) for r in done[:n]]


def parts(rec: list) -> dict:
    """One finished record's latency and its parts (ms)."""
    total = rec[FINISHED] - rec[SCHEDULED]
    dispatch = rec[SUBMITTED] - rec[SCHEDULED]
    loop = (rec[STARTED] or rec[SUBMITTED]) - rec[SUBMITTED]
    fetch = (rec[FETCH_END] - rec[FETCH_START]) if rec[FETCH_START] is not None and rec[FETCH_END] else 0.0
    units = max(0.0, fetch - rec[DECODE])
    other = max(0.0, total - dispatch - loop - fetch)
    return {"ms": round(total * 1000, 2), "dispatch_ms": round(dispatch * 1000, 2), "loop_ms": round(loop * 1000, 2),
            "units_ms": round(units * 1000, 2), "decode_ms": round(rec[DECODE] * 1000, 2),
            "other_ms": round(other * 1000, 2), "sent": rec[SENT]}


def breakdown(records: list[list], threshold_s: float) -> dict:
    """The reads at or above ``threshold_s`` (latency from the schedule): how many, the median
    of each part and of the unit reads they sent, and the part that dominates most of them."""
    slow = [parts(r) for r in records if r[FINISHED] is not None and r[FINISHED] - r[SCHEDULED] >= threshold_s]
    if not slow:
        return {"reads": 0}
    out = {"reads": len(slow), "threshold_ms": round(threshold_s * 1000, 2),
           "median_ms": round(statistics.median(p["ms"] for p in slow), 2)}
    for key in PARTS:
        out[key] = round(statistics.median(p[key] for p in slow), 2)
    out["sent"] = statistics.median(p["sent"] for p in slow)
    tops = [max(PARTS, key=lambda k: p[k]) for p in slow]
    out["dominant"] = max(PARTS, key=tops.count)
    out["dominant_share"] = round(tops.count(out["dominant"]) / len(tops), 2)
    return out
