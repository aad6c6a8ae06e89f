"""`hedgefs bench namenode`: the NameNode's throughput, in-process and over RPC, beside a baseline.

For each build (this one, and with ``baseline`` a commit of this repository checked out beside it
as a ``git worktree``) and each mode, a child process runs the plan of bench/namenode.py:

  inprocess   a Namesystem in the child (no RPC): the metadata engine's ceiling
  rpc         a NameNode server process of that build, and a client process of the same build
              driving it through the client library

so every number has its baseline from the same run, the same machine and the same load. A build
other than the installed one is imported from a directory of links laid out as the package
(``hedgefs/`` and its subpackages, from that commit's pyproject.toml), first on PYTHONPATH.
"""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys
import tempfile
import time
import tomllib

from hedgefs.bench import namenode as workloads
from hedgefs.plumbing import read_port_file

_SCRIPT = pathlib.Path(workloads.__file__).resolve()
_REPO = _SCRIPT.parent.parent


def _shim(tree: pathlib.Path, into: pathlib.Path) -> pathlib.Path:
    """A directory whose ``hedgefs`` package is ``tree``'s, laid out as its pyproject.toml says."""
    dirs = tomllib.loads((tree / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"]
    pkg = into / "hedgefs"
    pkg.mkdir(parents=True)
    for entry in (tree / dirs["hedgefs"]).iterdir():
        (pkg / entry.name).symlink_to(entry)
    for name, where in dirs.items():
        if name != "hedgefs":
            (pkg / name.split(".", 1)[1]).symlink_to(tree / where)
    return into


def _baseline_tree(commit: str, tmp: pathlib.Path) -> pathlib.Path:
    tree = tmp / f"tree-{commit}"
    done = subprocess.run(["git", "-C", str(_REPO), "worktree", "add", "--detach", "-f", str(tree), commit],
                          capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"--baseline {commit}: {(done.stderr.strip().splitlines() or ['git worktree failed'])[-1]}")
    return tree


def _remove_tree(tree: pathlib.Path) -> None:
    subprocess.run(["git", "-C", str(_REPO), "worktree", "remove", "--force", str(tree)], capture_output=True)


def _child(args: list[str], env: dict, say) -> list[dict]:
    proc = subprocess.run([sys.executable, str(_SCRIPT), *args], env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"bench child failed ({proc.returncode}): {proc.stderr.strip().splitlines()[-1:]}")
    rows = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    for r in rows:
        say(f"    {r['op']:<12} {r['threads']:>3} threads {r['ops_per_s']:>9.1f} ops/s  p50 {r['p50_ms']:.2f} ms  "
            f"p99 {r['p99_ms']:.2f} ms{'  ERRORS ' + '; '.join(r['errors']) if r['errors'] else ''}")
    return rows


def _server(env: dict, tmp: pathlib.Path, name: str) -> tuple[subprocess.Popen, str]:
    data, port_file = tmp / f"nn-{name}", tmp / f"nn-{name}.port"
    log = open(tmp / f"nn-{name}.log", "w")
    proc = subprocess.Popen([sys.executable, "-m", "hedgefs", "namenode", "--port", "0", "--data-dir", str(data),
                             "--port-file", str(port_file), "--dead-interval-s", "3600"],
                            env=env, stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 60
    while not port_file.exists():   # written atomically once the server is serving
        if proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"the {name} NameNode did not start: see {log.name}")
        time.sleep(0.05)
    return proc, f"127.0.0.1:{read_port_file(port_file)['rpc']}"


def run(*, threads: list[int], ops: int, only: list[str], baseline: str | None, modes: list[str],
        command: str, say=print) -> dict:
    plan = [(op, n) for op in only for n in threads]
    rows: list[dict] = []
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="hedgefs-nnbench-") as tmp_name:
        tmp = pathlib.Path(tmp_name)
        builds = [("current", None)]
        tree = None
        if baseline:
            tree = _baseline_tree(baseline, tmp)
            builds.insert(0, ("baseline", _shim(tree, tmp / "shim")))
        try:
            for build, shim in builds:
                env = dict(os.environ)
                if shim is not None:
                    env["PYTHONPATH"] = str(shim)
                for mode in modes:
                    say(f"  {build} build, {mode}:")
                    if mode == "inprocess":
                        got = _child(["inprocess", str(tmp / f"inproc-{build}"), json.dumps(plan), str(ops)], env, say)
                    else:
                        server, address = _server(env, tmp, build)
                        try:
                            got = _child(["client", address, json.dumps(plan), str(ops)], env, say)
                        finally:
                            server.terminate()
                            server.wait(timeout=30)
                    rows.extend({"build": build, "mode": mode, **r} for r in got)
        finally:
            if tree is not None:
                _remove_tree(tree)
    return {"command": command, "date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
            "baseline": baseline, "cpus": os.cpu_count(), "load_before": load_before,
            "load_after": os.getloadavg(), "ops_per_run": ops, "rows": rows}


def format_table(doc: dict) -> str:
    """One line per (mode, op, threads): each build's ops/s, p50, p99 and the ratio to the baseline."""
    by = {(r["build"], r["mode"], r["op"], r["threads"]): r for r in doc["rows"]}
    keys = sorted({(r["mode"], r["op"], r["threads"]) for r in doc["rows"]},
                  key=lambda k: (k[0], workloads.OPS.index(k[1]), k[2]))
    noop = {(b, m, n): r["ops_per_s"] for (b, m, op, n), r in by.items() if op == "noop"}
    lines = [f"{doc['command']}   ({doc['date']}, {doc['cpus']} CPUs, load {doc['load_before'][0]:.1f} -> "
             f"{doc['load_after'][0]:.1f})",
             f"{'mode':<10} {'op':<12} {'thr':>3} | {'baseline ops/s':>14} {'p50':>7} {'p99':>7} | "
             f"{'current ops/s':>13} {'p50':>7} {'p99':>7} | {'x base':>6} {'/noop':>6}"]
    for mode, op, n in keys:
        base, cur = by.get(("baseline", mode, op, n)), by.get(("current", mode, op, n))

        def cols(r):
            return (f"{r['ops_per_s']:>14.1f} {r['p50_ms']:>7.2f} {r['p99_ms']:>7.2f}" if r
                    else f"{'-':>14} {'-':>7} {'-':>7}")
        ratio = f"{cur['ops_per_s'] / base['ops_per_s']:>6.2f}" if base and cur and base["ops_per_s"] else f"{'-':>6}"
        ref = noop.get(("current", mode, n))
        per_noop = f"{cur['ops_per_s'] / ref:>6.2f}" if cur and ref else f"{'-':>6}"
        lines.append(f"{mode:<10} {op:<12} {n:>3} | {cols(base)} | {cols(cur).strip():>29} | {ratio} {per_noop}")
    lines.append("ops/s of whole operations (create0 = 2 calls, create1 = 3 calls + 1 DataNode receipt); "
                 "p50/p99 in ms; x base = current / baseline; /noop = current / current no-op at that thread count")
    return "\n".join(lines)


def plot(doc: dict, path: pathlib.Path) -> pathlib.Path | None:
    """ops/s against threads, one panel per mode, one line per (op, build)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    modes = sorted({r["mode"] for r in doc["rows"]})
    fig, axes = plt.subplots(1, len(modes), figsize=(7 * len(modes), 5), squeeze=False)
    for ax, mode in zip(axes[0], modes):
        for op in workloads.OPS:
            for build, style in (("baseline", "--"), ("current", "-")):
                pts = sorted((r["threads"], r["ops_per_s"]) for r in doc["rows"]
                             if r["mode"] == mode and r["op"] == op and r["build"] == build)
                if pts:
                    ax.plot(*zip(*pts), style, marker="o", label=f"{op} ({build})",
                            color=f"C{workloads.OPS.index(op)}")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("threads")
        ax.set_ylabel("operations/s")
        ax.set_title(f"NameNode {mode}")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path
