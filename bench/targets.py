"""The tail-latency suite's targets (the issue's), evaluated on a suite document, never asserted.

A missed target is a result: each comes back as scenario, target, measured, met and margin, for
the summary's table (bench/report.py) and the JSON. Adaptive runs are measured; static runs are
the baseline.
"""

from __future__ import annotations


def _target(scenario: str, name: str, measured: str, met: bool | None, margin: str) -> dict:
    return {"scenario": scenario, "target": name, "measured": measured, "met": met, "margin": margin}


def find_run(doc: dict, scenario: str, mode: str = "adaptive", read_extra: int = 0) -> dict | None:
    """The run of ``scenario`` in ``mode`` (None: not run)."""
    return next((r for r in doc["runs"] if r["scenario"] == scenario and r["mode"] == mode
                 and r["read_extra"] == read_extra), None)


def ratio(run: dict, base: dict, key: str = "p999_ms") -> float:
    """``run``'s ``key`` over ``base``'s."""
    return run["summary"][key] / max(base["summary"][key], 1e-9)


def evaluate_targets(doc: dict) -> list[dict]:
    """The issue's targets, met or not, and by how much (adaptive runs; static ones are the baseline)."""
    out = []
    healthy = find_run(doc, "healthy")
    if healthy is None:
        return out

    def p999_target(name: str, bound: float) -> None:
        run = find_run(doc, name)
        if run:
            r = ratio(run, healthy)
            out.append(_target(name, f"p99.9 <= {bound} x healthy p99.9",
                               f"{run['summary']['p999_ms']:.1f} / {healthy['summary']['p999_ms']:.1f} ms = {r:.2f} x",
                               r <= bound, f"{bound - r:+.2f} x"))

    def extra_target(name: str, bound: float) -> None:
        run = find_run(doc, name)
        if run:
            pct = run["summary"]["extra_unit_reads_pct"]
            out.append(_target(name, f"extra cell reads <= {bound:g} %", f"{pct:.2f} %", pct <= bound,
                               f"{bound - pct:+.2f} points"))

    def no_trip(name: str) -> None:
        run = find_run(doc, name)
        if run:
            trips = run["summary"]["breaker_trips"]
            out.append(_target(name, "no breaker trip", f"{trips} trips", trips == 0, ""))

    for name in ("healthy", "cpu-hog"):
        extra_target(name, 2.0)
        no_trip(name)
    p999_target("slow-500ms", 1.2)
    extra_target("slow-500ms", 5.0)
    p999_target("tail-1pct-2s", 1.2)
    p999_target("frozen-10s", 1.5)
    frozen = find_run(doc, "frozen-10s")
    if frozen:
        mx = frozen["summary"]["max_ms"]
        out.append(_target("frozen-10s", "max <= 300 ms", f"{mx:.1f} ms", mx <= 300, f"{300 - mx:+.1f} ms"))
    broad = find_run(doc, "broad-4x300ms")
    if broad:
        worst = broad["summary"]["max_extra_pct_1s"] or 0.0
        out.append(_target("broad-4x300ms", "extra reads <= 5 % of reads in every second",
                           f"worst second {worst:.1f} %", worst <= 5.0, f"{5.0 - worst:+.1f} points"))
        trips = broad["summary"]["breaker_trips"]
        out.append(_target("broad-4x300ms", "breaker trips", f"{trips} trips", trips >= 1, ""))
    pages, slow_pages = find_run(doc, "fanout-healthy"), find_run(doc, "fanout-slow-500ms")
    if pages and slow_pages:
        r = ratio(slow_pages, pages, "p99_ms")
        out.append(_target("fanout-slow-500ms", "page p99 <= 1.2 x healthy page p99",
                           f"{slow_pages['summary']['p99_ms']:.1f} / {pages['summary']['p99_ms']:.1f} ms = {r:.2f} x",
                           r <= 1.2, f"{1.2 - r:+.2f} x"))
    puts = doc.get("puts")
    if puts:
        r = puts["median_s"]["frozen"] / max(puts["median_s"]["healthy"], 1e-9)
        out.append(_target("put", "put with one DataNode frozen <= 1.5 x healthy put",
                           f"{puts['median_s']['frozen']:.2f} / {puts['median_s']['healthy']:.2f} s = {r:.2f} x",
                           r <= 1.5, f"{1.5 - r:+.2f} x"))
        out.append(_target("put", "fsck HEALTHY after repair", f"{puts['fsck']} after {puts['fsck_healthy_after_s']} s",
                           puts["fsck"] == "HEALTHY", ""))
    return out
