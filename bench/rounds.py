"""The suite's arithmetic, pure: repeated runs to a median and its range, and each fault row's
floor of extra unit reads (tests/integration/test_bench_suite.py).

**Floor** (../shared/research/tail-floor.md, section 2.1): a one-cell read whose cell is on a
DataNode being read around is rebuilt from ``sources`` other units instead of one, so a scheme
that never waits for that DataNode reads at least

    duty x share x (sources - 1)

more unit reads than the reads need, where ``duty`` is the share of the run's reads scheduled
while the fault lasts and ``share`` the share of the reads whose cell is on that DataNode.
``sources`` is the code's cheapest rescue: RS-k-m k, LRC-k-l-g k / l (the unit's local group),
replication 1 (another replica: no extra read). A fault that slows only a fraction ``p`` of the
DataNode's reads is cheapest hedged after the fact, not read around: the slow read was sent and
``sources`` more are, so its floor is duty x share x p x sources.
"""

from __future__ import annotations

import statistics
from typing import Iterable


def median_range(values: Iterable[float | None]) -> dict:
    """{"median", "min", "max", "n"} of the values given (None ignored; empty: all None)."""
    vals = [float(v) for v in values if v is not None]
    if not vals:
        return {"median": None, "min": None, "max": None, "n": 0}
    return {"median": round(statistics.median(vals), 4), "min": round(min(vals), 4), "max": round(max(vals), 4),
            "n": len(vals)}


def fmt_range(mr: dict, digits: int = 2, unit: str = "") -> str:
    """'1.23 (1.10-1.40)' for a median_range; '-' for none; a single run without its range."""
    if not mr or mr.get("median") is None:
        return "-"
    f = f"{{:.{digits}f}}"
    if mr["n"] == 1:
        return f.format(mr["median"]) + unit
    return f"{f.format(mr['median'])}{unit} ({f.format(mr['min'])}-{f.format(mr['max'])})"


def ratio(a: float | None, b: float | None) -> float | None:
    """a / b, None when either is missing or b is 0."""
    if a is None or not b:
        return None
    return a / b


def rescue_sources(policy) -> int:
    """Unit reads that replace one unit read of a lost or avoided data unit: the code's cheapest
    rescue (``policy``: an ec.policy.Policy)."""
    if policy.replicated:
        return 1
    if policy.local_groups:
        return policy.k // policy.local_groups
    return policy.k


def floor_pct(duty: float, share: float, sources: int, probability: float = 1.0) -> float:
    """Extra unit reads (% of the reads' own) no reader can do without (the module docstring)."""
    if probability >= 1.0:
        return 100.0 * duty * share * max(0, sources - 1)
    return 100.0 * duty * share * probability * sources


def duty(series: list[dict], start_s: float, end_s: float) -> float:
    """The share of a run's reads scheduled in [start_s, end_s) (its 100 ms rows: t, n)."""
    total = sum(r["n"] for r in series)
    inside = sum(r["n"] for r in series if start_s <= r["t"] < end_s - 1e-9)
    return inside / total if total else 0.0

