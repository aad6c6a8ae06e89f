"""PNG plots of tail-latency results, drawn from the result dicts (the JSON files) alone.

    python -m hedgefs.bench.plots bench/results/<date>-suite.json   # redraw from saved results

For the suite (``suite_plots``): the p99.9 ratio to healthy per scenario and policy (median of
the rounds, min-max, beside the oracle's); per scenario, the first round's latency percentile
curves (HDR style) and its fault runs over time (slowest read and median per 100 ms, fault and
breaker marked, the DataNodes the model called slow). ``extra_reads_plot`` draws extra unit
reads per second as a share of the reads' own. ``run_plot`` draws
one `hedgefs bench read --plot` run.
"""

from __future__ import annotations

import json
import math
import pathlib
import sys

COLORS = {"adaptive": "#1f5fa8", "static": "#e67e22", "off": "#c0392b"}


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


def _label(run: dict) -> str:
    if "label" in run:
        return run["label"]
    mode = run.get("mode") or ("adaptive" if run["config"]["hedge"].get("threshold_ms") is None else "static")
    if not run["config"]["hedge"]["enabled"]:
        mode = "off"
    extra = run.get("read_extra") or run["config"]["hedge"].get("read_extra", 0)
    return mode + (f", read-extra {extra}" if extra else "")


def _color(run: dict, i: int = 0) -> str:
    if "label" in run:
        return f"C{i % 10}"
    return COLORS.get(run.get("mode", ""), ["#2e8b57", "#8e44ad", "#555555"][i % 3])


def percentile_plot(runs: list[dict], path: pathlib.Path, title: str) -> pathlib.Path:
    plt = _plt()
    fig, ax = plt.subplots(figsize=(8, 4.8))
    for i, run in enumerate(runs):
        points = [pt for pt in run["percentile_curve"] if pt["p"] < 100 and pt["ms"] > 0]
        xs = [_nines(pt["p"]) for pt in points]
        ax.plot(xs, [pt["ms"] for pt in points], marker=".", color=_color(run, i), label=_label(run))
        ax.plot([xs[-1] + 0.35], [run["summary"]["max_ms"]], marker="v", color=_color(run, i), linestyle="none")
    ticks = [0, 50, 90, 99, 99.9, 99.99, 99.999]
    ax.set_xticks([_nines(p) for p in ticks] + [5.35])
    ax.set_xticklabels([f"{p:g}" for p in ticks] + ["max"])
    ax.set_yscale("log")
    ax.set_xlabel("percentile")
    ax.set_ylabel("latency from scheduled start (ms, log)")
    ax.set_title(title, fontsize=11)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(loc="upper left", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _end(run: dict) -> float:
    return run["series"][-1]["t"] + run["series_bucket_s"] if run["series"] else 0.0


def _fault_spans(run: dict) -> list[tuple[float, float]]:
    spans, open_at = [], None
    for ev in run["events"]:
        if ev["kind"] == "fault-start":
            open_at = ev["t"]
        elif ev["kind"] == "fault-end" and open_at is not None:
            spans.append((open_at, ev["t"]))
            open_at = None
    if open_at is not None:
        spans.append((open_at, _end(run)))
    return spans


def _breaker_spans(run: dict) -> list[tuple[float, float]]:
    spans, opened = [], None
    for ch in run.get("breaker", {}).get("breaker_open", []):
        if ch["open"] and opened is None:
            opened = ch["t"]
        elif not ch["open"] and opened is not None:
            spans.append((opened, ch["t"]))
            opened = None
    if opened is not None:
        spans.append((opened, _end(run)))
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


def _timeline_axes(ax, run: dict, i: int = 0) -> None:
    ts, maxes, medians = _gapped(run)
    ax.set_xlim(0, max(_end(run), 1.0))
    ax.plot(ts, maxes, color=_color(run, i), linewidth=1, marker=".", markersize=2.5, label="slowest read / 100 ms")
    ax.plot(ts, medians, color="black", linewidth=0.6, alpha=0.6, label="median / 100 ms")
    lag = [(t, ms) for t, ms in run.get("host", {}).get("loop_lag", []) if ms > 0]
    if lag:
        ax.plot([t for t, _ in lag], [ms for _, ms in lag], color="purple", linewidth=0.6, alpha=0.6,
                label="client event-loop lag")
    for k, (a, b) in enumerate(_fault_spans(run)):
        ax.axvspan(a, b, color="orange", alpha=0.15, label="fault" if k == 0 else None)
    for k, (a, b) in enumerate(_breaker_spans(run)):
        ax.axvspan(a, b, ymin=0.0, ymax=0.06, color="purple", alpha=0.5, label="breaker open" if k == 0 else None)
    end = _end(run)
    slow = sorted(run.get("breaker", {}).get("slow_spans", {}).items(), key=lambda kv: kv[1][0][0])
    for k, (dn, spans) in enumerate(slow[:6]):   # the model's verdicts: thin red bars near the top
        y = 0.93 - 0.05 * k
        for a, b in spans:
            if a < end:
                ax.plot([a, min(end, max(b, a + 0.1))], [y, y], color="red", linewidth=2.5, solid_capstyle="butt",
                        transform=ax.get_xaxis_transform())
        ax.text(min(spans[0][0], end), y, f" {dn} slow", color="red", fontsize=6.5, va="center",
                transform=ax.get_xaxis_transform())
    for ev in run["events"]:
        color = {"fault-start": "darkorange", "fault-end": "green"}.get(ev["kind"], "gray")
        ax.axvline(ev["t"], color=color, linewidth=1.0)
    for trip in run.get("breaker", {}).get("trips", []):
        ax.axvline(trip["t"], color="purple", linestyle="--", linewidth=1)
    s = run["summary"]
    ax.set_title(f"{_label(run)}: p99.9 {s['p999_ms']:.0f} ms, max {s['max_ms']:.0f} ms, {s['hedges']} hedges, "
                 f"{s['avoided']} reads avoided, {s['breaker_trips']} trips", fontsize=9, loc="right", pad=4)
    ax.set_yscale("log")
    ax.set_ylim(bottom=0.5)
    ax.set_ylabel("ms (log)")
    ax.grid(True, which="major", alpha=0.3)


def timeline_plot(runs: list[dict], path: pathlib.Path, title: str) -> pathlib.Path:
    plt = _plt()
    fig, axes = plt.subplots(len(runs), 1, figsize=(10, 2.6 * len(runs) + 0.6), sharex=True, sharey=True,
                             squeeze=False)
    for i, (ax, run) in enumerate(zip(axes[:, 0], runs)):
        _timeline_axes(ax, run, i)
    axes[0, 0].legend(loc="lower left", fontsize=7, ncol=5)
    axes[-1, 0].set_xlabel("time into run (s), by scheduled start")
    fig.suptitle(title, fontsize=11)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def extra_reads_plot(runs: list[dict], path: pathlib.Path, title: str) -> pathlib.Path:
    """Extra unit reads in each 1 s (sliding by 100 ms) as % of the unit reads the reads needed."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(10, 4.2))
    for i, run in enumerate(runs):
        samples = run["breaker"].get("unit_reads", [])
        xs, ys, j = [], [], 0
        for k, row in enumerate(samples):
            while j + 1 < k and row["t"] - samples[j + 1]["t"] >= 1.0:
                j += 1
            if row["t"] - samples[j]["t"] >= 1.0 and row["needed"] > samples[j]["needed"]:
                needed = row["needed"] - samples[j]["needed"]
                xs.append(row["t"])
                ys.append(100.0 * ((row["sent"] - samples[j]["sent"]) - needed) / needed)
        ax.plot(xs, ys, color=_color(run, i), label=f"{_label(run)} (worst {run['summary']['max_extra_pct_1s']} %)")
        for trip in run["breaker"].get("trips", []):
            ax.axvline(trip["t"], color=_color(run, i), linestyle="--", linewidth=1)
    for k, (a, b) in enumerate(_fault_spans(runs[0])):
        ax.axvspan(a, b, color="orange", alpha=0.12, label="fault" if k == 0 else None)
    ax.axhline(5.0, color="gray", linestyle=":", linewidth=1)
    ax.text(0.995, 5.0, "5 %", color="gray", fontsize=7, ha="right", va="bottom", transform=ax.get_yaxis_transform())
    ax.set_yscale("symlog", linthresh=10)
    ax.set_xlabel("time into run (s); dashed: breaker trips")
    ax.set_ylabel("extra unit reads, % of needed (last 1 s)")
    ax.set_title(title, fontsize=11)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def ratio_plot(doc: dict, path: pathlib.Path) -> pathlib.Path:
    """Per scenario and policy: the fault runs' ratio to their healthy runs (median, min-max bars)
    beside the oracle's (hatched)."""
    plt = _plt()
    rows = doc.get("rows", [])
    names = list(dict.fromkeys(r["scenario"] for r in rows))
    policies = list(dict.fromkeys(r["policy"] for r in rows))
    fig, ax = plt.subplots(figsize=(11, 4.8))
    width = 0.8 / max(1, 2 * len(policies))
    for j, policy in enumerate(policies):
        for o, key in enumerate(("ratio", "oracle_ratio")):
            xs, mids, lo, hi = [], [], [], []
            for i, name in enumerate(names):
                row = next((r for r in rows if r["policy"] == policy and r["scenario"] == name), None)
                if row is None or row[key]["median"] is None:
                    continue
                xs.append(i - 0.4 + width * (2 * j + o + 0.5))
                mids.append(row[key]["median"])
                lo.append(row[key]["median"] - row[key]["min"])
                hi.append(row[key]["max"] - row[key]["median"])
            color = POLICY_COLORS[j % len(POLICY_COLORS)]
            ax.bar(xs, mids, width, color=color, alpha=0.55 if o else 1.0, hatch="//" if o else None,
                   label=f"{policy}" + (" oracle" if o else ""), yerr=[lo, hi], capsize=2, ecolor="black")
    ax.axhline(1.2, color="gray", linestyle="--", linewidth=0.8)
    ax.axhline(1.3, color="gray", linestyle=":", linewidth=0.8)
    ax.set_yscale("log")
    ax.set_xticks(range(len(names)))
    ax.set_xticklabels(names, rotation=15, ha="right", fontsize=8)
    ax.set_ylabel("p99.9 / healthy p99.9 (pages: p99), log")
    ax.set_title(f"fault vs healthy (median of {doc.get('reps', 1)} rounds, min-max), open loop at "
                 f"{doc['load']['rate']:.0f} reads/s ({doc['date']})", fontsize=10)
    ax.grid(True, axis="y", which="both", alpha=0.3)
    ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


POLICY_COLORS = ["#1f5fa8", "#2e8b57", "#e67e22", "#8e44ad"]


def suite_plots(doc: dict, out: pathlib.Path, base: str) -> list[pathlib.Path]:
    """The ratio plot, and per fault scenario the first round's percentile curves (healthy, fault and
    oracle per policy) and its fault runs over time."""
    paths = [ratio_plot(doc, out / f"{base}-ratios.png")]
    for name in dict.fromkeys(r["scenario"] for r in doc["runs"]):
        runs = [dict(r, label=f"{r['policy']} {r['kind']}") for r in doc["runs"]
                if r["scenario"] == name and r["rep"] == 0]
        if not runs:
            continue
        paths.append(percentile_plot(runs, out / f"{base}-{name}-percentiles.png", f"{name}, round 1"))
        faults = [r for r in runs if r["kind"] == "fault" and r["events"]]
        if faults:
            paths.append(timeline_plot(faults, out / f"{base}-{name}-timeline.png", f"{name}, round 1"))
    return paths


def run_plot(run: dict, path: pathlib.Path, title: str) -> pathlib.Path:
    """`hedgefs bench read --plot`: one run, percentile curve and latency over time side by side."""
    plt = _plt()
    fig, (left, right) = plt.subplots(1, 2, figsize=(13, 4.6))
    points = [pt for pt in run["percentile_curve"] if pt["p"] < 100 and pt["ms"] > 0]
    left.plot([_nines(pt["p"]) for pt in points], [pt["ms"] for pt in points], marker=".", color=_color(run),
              label=_label(run))
    ticks = [0, 50, 90, 99, 99.9, 99.99, 99.999]
    left.set_xticks([_nines(p) for p in ticks])
    left.set_xticklabels([f"{p:g}" for p in ticks])
    left.set_yscale("log")
    left.set_xlabel("percentile")
    left.set_ylabel("read latency (ms, log)")
    left.grid(True, which="both", alpha=0.3)
    left.legend(fontsize=8)
    _timeline_axes(right, run)
    right.set_xlabel("time into run (s)")
    right.legend(loc="lower left", fontsize=7, ncol=3)
    s = run["summary"]
    fig.suptitle(f"{title}: {s['reads']} reads, p99 {s['p99_ms']:.1f} ms, p99.9 {s['p999_ms']:.1f} ms, "
                 f"max {s['max_ms']:.1f} ms, {s['hedges']} hedges", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def main(argv: list[str] | None = None) -> None:
    for f in [pathlib.Path(a) for a in (sys.argv[1:] if argv is None else argv)]:
        doc = json.loads(f.read_text())
        if "runs" not in doc or not isinstance(doc["runs"], list):
            print(f"{f}: not a suite result (no runs with summaries)", file=sys.stderr)
            continue
        for png in suite_plots(doc, f.parent, f.stem):
            print(png)


if __name__ == "__main__":
    main()
