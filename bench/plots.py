"""PNG plots of tail-latency results, drawn from the result dicts (the JSON files) alone.

    python -m hedgefs.bench.plots bench/results/2025-01-01-*.json   # redraw from saved results

Per scenario: the latency percentile curve (HDR style, log scales, hedging off vs on), the latency
over time (slowest read and median per 100 ms, fault start / end marked, breaker-open spans
shaded), and for the broad-slowdown scenario the hedges started per second against the cap.
"""

from __future__ import annotations

import json
import math
import pathlib
import sys

COLORS = {"off": "#c0392b", "on": "#1f5fa8", "on_cap": "#2e8b57"}
LABELS = {"off": "hedging off", "on": "hedging on", "on_cap": "hedging on, low cap, no node limit"}


def _plt():
    try:
        import matplotlib
    except ImportError:
        raise RuntimeError("plots need matplotlib: pip install 'hedgefs[bench]'") from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _nines(p: float) -> float:
    """x position of percentile p on an HDR plot: 90 -> 1, 99 -> 2, 99.9 -> 3 ..."""
    return -math.log10(max(1e-6, 1.0 - p / 100.0))


def _label(mode: str, run: dict) -> str:
    if mode == "on_cap":
        return f"hedging on, cap {run['config']['hedge']['max_per_second']}/s, no node limit"
    return LABELS.get(mode, mode)


def percentile_plot(runs: dict, path: pathlib.Path, title: str, threshold_ms: float | None = None) -> pathlib.Path:
    plt = _plt()
    fig, ax = plt.subplots(figsize=(8, 4.8))
    top = 0.0
    for mode, run in runs.items():
        points = [pt for pt in run["percentile_curve"] if pt["p"] < 100 and pt["ms"] > 0]
        xs = [_nines(pt["p"]) for pt in points]
        ys = [pt["ms"] for pt in points]
        ax.plot(xs, ys, marker=".", color=COLORS.get(mode), label=_label(mode, run))
        smax = run["summary"]["max_ms"]
        ax.plot([xs[-1] + 0.35], [smax], marker="v", color=COLORS.get(mode), linestyle="none")
        top = max(top, smax)
    if threshold_ms:
        ax.axhline(threshold_ms, color="gray", linestyle="--", linewidth=1)
        ax.text(0.02, threshold_ms * 1.06, f"hedge threshold {threshold_ms:g} ms", color="gray", fontsize=8,
                transform=ax.get_yaxis_transform())
    ticks = [0, 50, 90, 99, 99.9, 99.99, 99.999]
    ax.set_xticks([_nines(p) for p in ticks] + [5.35])
    ax.set_xticklabels([f"{p:g}" for p in ticks] + ["max"])
    ax.set_yscale("log")
    ax.set_xlabel("percentile")
    ax.set_ylabel("read latency (ms, log)")
    ax.set_title(title, fontsize=11)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(loc="upper left", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _fault_spans(run: dict) -> list[tuple[float, float]]:
    end_t = run["series"][-1]["t"] + run["series_bucket_s"] if run["series"] else 0.0
    spans, open_at = [], None
    for ev in run["events"]:
        if ev["kind"] == "fault-start":
            open_at = ev["t"]
        elif ev["kind"] == "fault-end" and open_at is not None:
            spans.append((open_at, ev["t"]))
            open_at = None
    if open_at is not None:
        spans.append((open_at, end_t))
    return spans


def _breaker_spans(run: dict) -> list[tuple[float, float]]:
    changes = run.get("breaker", {}).get("breaker_open", [])
    end_t = run["series"][-1]["t"] + run["series_bucket_s"] if run["series"] else 0.0
    spans, opened = [], None
    for ch in changes:
        if ch["open"] and opened is None:
            opened = ch["t"]
        elif not ch["open"] and opened is not None:
            spans.append((opened, ch["t"]))
            opened = None
    if opened is not None:
        spans.append((opened, end_t))
    return spans


def _gapped(run: dict) -> tuple[list, list, list]:
    """The series with NaN where no read started in a bucket, so lines break there."""
    step = run["series_bucket_s"]
    ts, maxes, medians = [], [], []
    last = None
    for r in run["series"]:
        if last is not None and r["t"] - last > step * 1.5:
            ts.append(last + step)
            maxes.append(float("nan"))
            medians.append(float("nan"))
        ts.append(r["t"])
        maxes.append(r["max_ms"])
        medians.append(r["p50_ms"])
        last = r["t"]
    return ts, maxes, medians


def timeline_plot(runs: dict, path: pathlib.Path, title: str, threshold_ms: float | None = None) -> pathlib.Path:
    plt = _plt()
    fig, axes = plt.subplots(len(runs), 1, figsize=(10, 2.6 * len(runs) + 0.6), sharex=True, sharey=True,
                             squeeze=False)
    for ax, (mode, run) in zip(axes[:, 0], runs.items()):
        ts, maxes, medians = _gapped(run)
        ax.plot(ts, maxes, color=COLORS.get(mode), linewidth=1, marker=".", markersize=2.5,
                label="slowest read / 100 ms")
        ax.plot(ts, medians, color="black", linewidth=0.6, alpha=0.6, label="median / 100 ms")
        lag = [(t, ms) for t, ms in run.get("host", {}).get("loop_lag", []) if ms > 0]
        if lag:
            ax.plot([t for t, _ in lag], [ms for _, ms in lag], color="purple", linewidth=0.6, alpha=0.7,
                    label="client event-loop lag")
        for i, (a, b) in enumerate(_fault_spans(run)):
            ax.axvspan(a, b, color="orange", alpha=0.15, label="fault" if i == 0 else None)
        for i, (a, b) in enumerate(_breaker_spans(run)):
            ax.axvspan(a, b, ymin=0.0, ymax=0.06, color="purple", alpha=0.5, label="breaker open" if i == 0 else None)
        for i, ev in enumerate(run["events"]):
            style = {"fault-start": ("darkorange", "-"), "fault-end": ("green", "-")}.get(ev["kind"], ("gray", ":"))
            ax.axvline(ev["t"], color=style[0], linestyle=style[1], linewidth=1.2)
            ax.text(ev["t"], 0.97 - 0.1 * (i % 3), f" {ev['label']} ({ev['t']:.1f} s)", transform=ax.get_xaxis_transform(),
                    fontsize=7, color=style[0], va="top")
        for trip in run.get("breaker", {}).get("trips", []):
            ax.axvline(trip["t"], color="purple", linestyle="--", linewidth=1)
        if threshold_ms:
            ax.axhline(threshold_ms, color="gray", linestyle="--", linewidth=0.8)
        s = run["summary"]
        ax.set_title(f"{_label(mode, run)}: p99.9 {s['p999_ms']:.0f} ms, max {s['max_ms']:.0f} ms, "
                     f"{s['hedges']} hedges, {s['breaker_trips']} breaker trips", fontsize=9, loc="right", pad=4)
        ax.set_yscale("log")
        ax.set_ylim(bottom=0.5)  # event-loop lag under 0.5 ms is not worth the room
        ax.set_ylabel("ms (log)")
        ax.grid(True, which="major", alpha=0.3)
        ax.legend(loc="lower left", fontsize=7, ncol=4)
    axes[-1, 0].set_xlabel("time into run (s), by read start")
    fig.suptitle(title, fontsize=11)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def hedges_plot(runs: dict, path: pathlib.Path, title: str) -> pathlib.Path:
    """Hedges started (and refused) per second, against each run's cap; breaker trips marked."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(10, 4.8))
    peak, caps = 0, []
    for mode, run in runs.items():
        if not run["config"]["hedge"]["enabled"]:
            continue
        color = COLORS.get(mode)
        per_s: dict[int, list[int]] = {}
        for row in run["breaker"]["hedge_series"]:
            slot = per_s.setdefault(int(row["t"]), [0, 0, 0])
            slot[0] += row["hedges"]
            slot[1] += row["refused_breaker"]
            slot[2] += row["refused_rate"]
        end = int(run["series"][-1]["t"]) + 1 if run["series"] else 0
        xs = list(range(end + 1))
        rows = [per_s.get(x, [0, 0, 0]) for x in xs]
        name = _label(mode, run)
        ax.step(xs, [r[0] for r in rows], where="post", color=color, linewidth=2,
                label=f"hedges started ({name}); peak in any 1 s window: {run['breaker']['max_hedges_in_any_1s']}")
        if any(r[1] for r in rows):
            ax.step(xs, [r[1] for r in rows], where="post", color=color, linestyle=":", linewidth=1.2,
                    label=f"refused by the breaker ({name})")
        if any(r[2] for r in rows):
            ax.step(xs, [r[2] for r in rows], where="post", color=color, linestyle="-.", linewidth=1.2,
                    label=f"refused by the rate cap ({name})")
        peak = max(peak, *(max(r) for r in rows)) if rows else peak
        caps.append((run["config"]["hedge"]["max_per_second"], color, mode))
        for trip in run["breaker"]["trips"]:
            ax.axvline(trip["t"], color=color, linestyle="--", linewidth=1)
            ax.text(trip["t"], 0.98, f" breaker trips ({mode}) {trip['t']:.2f} s", color=color, fontsize=7,
                    transform=ax.get_xaxis_transform(), va="top")
    top = max(peak, min((c for c, _, _ in caps), default=1)) * 1.35 + 1
    for cap, color, mode in caps:
        if cap <= top:
            ax.axhline(cap, color=color, linestyle="--", linewidth=0.8)
            ax.text(0.995, cap, f"cap {cap}/s ({mode})", color=color, fontsize=7, ha="right", va="bottom",
                    transform=ax.get_yaxis_transform())
        else:
            ax.text(0.995, 0.9, f"cap {cap}/s ({mode}) is above the chart", color=color, fontsize=7, ha="right",
                    transform=ax.transAxes)
    first = next(iter(runs.values()))
    for i, (a, b) in enumerate(_fault_spans(first)):
        ax.axvspan(a, b, color="orange", alpha=0.12, label="fault" if i == 0 else None)
    ax.set_ylim(0, top)
    ax.set_xlabel("time into run (s)")
    ax.set_ylabel("per second")
    ax.set_title(title, fontsize=11)
    ax.grid(True, alpha=0.3)
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.14), fontsize=7, ncol=2)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def scenario_plots(doc: dict, out: pathlib.Path) -> list[pathlib.Path]:
    base = out / f"{doc['date']}-{doc['slug']}"
    runs = doc["runs"]
    threshold = runs["on"]["config"]["hedge"]["threshold_ms"]
    title = f"scenario {doc['scenario']}: {doc['title']}"
    victims = ", ".join(doc.get("victims", []))
    if victims:
        title += f" ({victims})"
    paths = [
        percentile_plot(runs, base.with_name(base.name + "-percentiles.png"), title, threshold),
        timeline_plot(runs, base.with_name(base.name + "-timeline.png"), title, threshold),
    ]
    if doc["scenario"] == 5:
        paths.append(hedges_plot(runs, base.with_name(base.name + "-hedges.png"), title + ": hedges per second"))
    return paths


def overview_plot(docs: list[dict], path: pathlib.Path) -> pathlib.Path:
    """p99.9 and max per scenario, hedging off vs on (log scale)."""
    plt = _plt()
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.6), sharey=True)
    names = [f"{d['scenario']}. {d['title']}" for d in docs]
    width = 0.38
    for ax, key, label in ((axes[0], "p999_ms", "p99.9"), (axes[1], "max_ms", "max")):
        for j, mode in enumerate(("off", "on")):
            values = [d["runs"][mode]["summary"][key] for d in docs]
            xs = [i + (j - 0.5) * width for i in range(len(docs))]
            bars = ax.bar(xs, values, width, color=COLORS[mode], label=LABELS[mode])
            for bar, v in zip(bars, values):
                ax.text(bar.get_x() + bar.get_width() / 2, v * 1.05, f"{v:.0f}", ha="center", fontsize=7)
        threshold = docs[0]["runs"]["on"]["config"]["hedge"]["threshold_ms"]
        ax.axhline(threshold, color="gray", linestyle="--", linewidth=0.8)
        ax.set_yscale("log")
        ax.set_xticks(range(len(docs)))
        ax.set_xticklabels(names, rotation=25, ha="right", fontsize=8)
        ax.set_title(f"{label} read latency (ms, log)", fontsize=10)
        ax.grid(True, axis="y", which="both", alpha=0.3)
    axes[0].legend(fontsize=8, loc="upper left")
    fig.suptitle("hedged striped reads: tail latency per scenario (dashed: 250 ms threshold)", fontsize=11)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def run_plot(run: dict, path: pathlib.Path, title: str) -> pathlib.Path:
    """`hedgefs bench read --plot`: one run, percentile curve and latency over time side by side."""
    plt = _plt()
    fig, (left, right) = plt.subplots(1, 2, figsize=(13, 4.6))
    mode = "on" if run["config"]["hedge"]["enabled"] else "off"
    threshold = run["config"]["hedge"]["threshold_ms"]
    points = [pt for pt in run["percentile_curve"] if pt["p"] < 100 and pt["ms"] > 0]
    left.plot([_nines(pt["p"]) for pt in points], [pt["ms"] for pt in points], marker=".", color=COLORS[mode],
              label=LABELS[mode])
    ticks = [0, 50, 90, 99, 99.9, 99.99, 99.999]
    left.set_xticks([_nines(p) for p in ticks])
    left.set_xticklabels([f"{p:g}" for p in ticks])
    left.set_yscale("log")
    left.set_xlabel("percentile")
    left.set_ylabel("read latency (ms, log)")
    left.axhline(threshold, color="gray", linestyle="--", linewidth=0.8)
    left.grid(True, which="both", alpha=0.3)
    left.legend(fontsize=8)
    ts, maxes, medians = _gapped(run)
    right.plot(ts, maxes, color=COLORS[mode], linewidth=1, marker=".", markersize=2.5, label="slowest read / 100 ms")
    right.plot(ts, medians, color="black", linewidth=0.6, alpha=0.6, label="median / 100 ms")
    for a, b in _breaker_spans(run):
        right.axvspan(a, b, color="purple", alpha=0.1)
    right.axhline(threshold, color="gray", linestyle="--", linewidth=0.8)
    right.set_yscale("log")
    right.set_xlabel("time into run (s)")
    right.grid(True, alpha=0.3)
    right.legend(fontsize=8)
    s = run["summary"]
    fig.suptitle(f"{title}: {s['reads']} reads, p99 {s['p99_ms']:.1f} ms, p99.9 {s['p999_ms']:.1f} ms, "
                 f"max {s['max_ms']:.1f} ms, {s['hedges']} hedges", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def main(argv: list[str] | None = None) -> None:
    files = [pathlib.Path(a) for a in (sys.argv[1:] if argv is None else argv)]
    docs = []
    for f in files:
        doc = json.loads(f.read_text())
        if "runs" not in doc:
            continue
        for png in scenario_plots(doc, f.parent):
            print(png)
        docs.append(doc)
    if len(docs) > 1:
        docs.sort(key=lambda d: d["scenario"])
        print(overview_plot(docs, files[0].parent / f"{docs[0]['date']}-overview.png"))


if __name__ == "__main__":
    main()
