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
        if name != "hedgefs" and not (pkg / name.split(".", 1)[1]).exists():   # (hedgefs.fsspec is in hedgefs/)
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


def _cpu_s(proc: subprocess.Popen | None) -> float:
    """User + system CPU seconds of a child so far (Linux /proc)."""
    if proc is None:
        return 0.0
    fields = pathlib.Path(f"/proc/{proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class _Worker:
    """A child process of one build holding one workload (bench/namenode.py main): ``measure``
    sends it ``OP THREADS`` and reads its JSON answer."""

    def __init__(self, args: list[str], env: dict, log_path: pathlib.Path):
        self._log = open(log_path, "w")
        self.proc = subprocess.Popen([sys.executable, str(_SCRIPT), *args], env=env, stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=self._log, text=True, bufsize=1)
        self._expect("ready")

    def _expect(self, what: str) -> str:
        line = self.proc.stdout.readline()
        if not line or (what and line.strip() != what):
            self.proc.kill()
            tail = pathlib.Path(self._log.name).read_text().strip().splitlines()[-1:]
            raise RuntimeError(f"bench worker failed: {tail or line.strip() or 'it exited'}")
        return line

    def measure(self, op: str, threads: int, server: subprocess.Popen | None) -> dict:
        before = _cpu_s(server)
        self.proc.stdin.write(f"{op} {threads}\n")
        row = json.loads(self._expect(""))
        if server is not None and row["ops"]:
            row["server_cpu_us_per_op"] = round((_cpu_s(server) - before) / row["ops"] * 1e6, 1)
        return row

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.stdin.close()
            self.proc.wait(timeout=60)
        self._log.close()


def _server(env: dict, tmp: pathlib.Path, name: str) -> tuple[subprocess.Popen, str]:
    data, port_file = tmp / f"nn-{name}", tmp / f"nn-{name}.port"
    log = open(tmp / f"nn-{name}.log", "w")
    # In tmp, not the caller's directory: python -m puts it first on sys.path, and a checkout's
    # root (whose hedgefs/ is the package's top) would shadow a baseline's shim on PYTHONPATH.
    proc = subprocess.Popen([sys.executable, "-m", "hedgefs", "namenode", "--port", "0", "--data-dir", str(data),
                             "--port-file", str(port_file), "--dead-interval-s", "3600"],
                            env=env, stdout=log, stderr=subprocess.STDOUT, cwd=tmp)
    deadline = time.monotonic() + 60
    while not port_file.exists():   # written atomically once the server is serving
        if proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"the {name} NameNode did not start: see {log.name}")
        time.sleep(0.05)
    return proc, f"127.0.0.1:{read_port_file(port_file)['rpc']}"


def _median(values: list[float]) -> float:
    values = sorted(values)
    mid = len(values) // 2
    return values[mid] if len(values) % 2 else (values[mid - 1] + values[mid]) / 2


def run(*, threads: list[int], ops: int, only: list[str], baseline: str | None, modes: list[str],
        reps: int, command: str, say=print) -> dict:
    """Every (mode, op, threads) is measured ``reps`` times per build, the builds alternating run
    by run (ABBA...), so a load that comes and goes on a shared host hits both alike. A row is the
    median run; ``ratio`` is the median of the paired current/baseline ratios."""
    rows: list[dict] = []
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="hedgefs-nnbench-") as tmp_name:
        tmp = pathlib.Path(tmp_name)
        envs = {"current": dict(os.environ)}
        tree = None
        if baseline:
            tree = _baseline_tree(baseline, tmp)
            envs = {"baseline": {**os.environ, "PYTHONPATH": str(_shim(tree, tmp / "shim"))}, **envs}
        servers: list[subprocess.Popen] = []
        workers: dict[tuple[str, str], _Worker] = {}
        serving: dict[tuple[str, str], subprocess.Popen] = {}
        try:
            for build, env in envs.items():
                for mode in modes:
                    say(f"  starting the {build} build, {mode}")
                    if mode == "inprocess":
                        args = ["inprocess", str(tmp / f"inproc-{build}"), str(ops)]
                    else:
                        server, address = _server(env, tmp, build)
                        servers.append(server)
                        serving[(build, mode)] = server
                        args = ["client", address, str(ops)]
                    workers[(build, mode)] = _Worker(args, env, tmp / f"worker-{build}-{mode}.log")
            for mode in modes:
                for op in only:
                    for n in threads:
                        runs: dict[str, list[dict]] = {b: [] for b in envs}
                        for rep in range(reps):
                            order = list(envs) if rep % 2 == 0 else list(reversed(envs))
                            for build in order:
                                runs[build].append(workers[(build, mode)].measure(op, n, serving.get((build, mode))))
                        line = []
                        for build, got in runs.items():
                            best = sorted(got, key=lambda r: r["ops_per_s"])[len(got) // 2]
                            row = {"build": build, "mode": mode, **best,
                                   "runs_ops_per_s": [r["ops_per_s"] for r in got]}
                            if build == "current" and "baseline" in runs:
                                row["ratio"] = round(_median([c["ops_per_s"] / b["ops_per_s"] for c, b in
                                                              zip(got, runs["baseline"]) if b["ops_per_s"]]), 3)
                            rows.append(row)
                            errs = {e for r in got for e in r["errors"]}
                            cpu = row["cpu_us_per_op"] + row.get("server_cpu_us_per_op", 0.0)
                            line.append(f"{build} {row['ops_per_s']:.0f}/s p99 {row['p99_ms']:.1f} ms "
                                        f"cpu {cpu:.0f} us/op"
                                        + (f" ERRORS {'; '.join(sorted(errs))}" if errs else ""))
                        ratio = rows[-1].get("ratio")
                        say(f"    {mode:<9} {op:<12} {n:>3} thr: " + ", ".join(line)
                            + (f"  x{ratio:.2f}" if ratio else ""))
        finally:
            for w in workers.values():
                try:
                    w.close()
                except (OSError, subprocess.TimeoutExpired):
                    w.proc.kill()
            for server in servers:
                server.terminate()
                server.wait(timeout=30)
            if tree is not None:
                _remove_tree(tree)
    return {"command": command, "date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
            "baseline": baseline, "cpus": os.cpu_count(), "load_before": load_before,
            "load_after": os.getloadavg(), "ops_per_run": ops, "reps": reps, "rows": rows}


def format_table(doc: dict) -> str:
    """One line per (mode, op, threads): each build's ops/s, p50, p99 and the ratio to the baseline."""
    by = {(r["build"], r["mode"], r["op"], r["threads"]): r for r in doc["rows"]}
    keys = sorted({(r["mode"], r["op"], r["threads"]) for r in doc["rows"]},
                  key=lambda k: (k[0], workloads.OPS.index(k[1]), k[2]))
    noop = {(b, m, n): r["ops_per_s"] for (b, m, op, n), r in by.items() if op == "noop"}
    lines = [f"{doc['command']}   ({doc['date']}, {doc['cpus']} CPUs, load {doc['load_before'][0]:.1f} -> "
             f"{doc['load_after'][0]:.1f})",
             f"{'mode':<10} {'op':<12} {'thr':>3} | {'baseline ops/s':>14} {'p50':>7} {'p99':>7} {'cpu':>6} | "
             f"{'current ops/s':>13} {'p50':>7} {'p99':>7} {'cpu':>6} | {'x base':>6} {'/noop':>6}"]
    for mode, op, n in keys:
        base, cur = by.get(("baseline", mode, op, n)), by.get(("current", mode, op, n))

        def cols(r):
            if not r:
                return f"{'-':>14} {'-':>7} {'-':>7} {'-':>6}"
            cpu = r.get("cpu_us_per_op", 0) + r.get("server_cpu_us_per_op", 0)
            return f"{r['ops_per_s']:>14.1f} {r['p50_ms']:>7.2f} {r['p99_ms']:>7.2f} {cpu:>6.0f}"
        ratio = f"{cur['ratio']:>6.2f}" if cur and "ratio" in cur else f"{'-':>6}"
        ref = noop.get(("current", mode, n))
        per_noop = f"{cur['ops_per_s'] / ref:>6.2f}" if cur and ref else f"{'-':>6}"
        lines.append(f"{mode:<10} {op:<12} {n:>3} | {cols(base)} | {cols(cur).strip():>36} | {ratio} {per_noop}")
    lines.append("ops/s of whole operations (create0 = 2 calls, create1 = 3 calls + 1 DataNode receipt); "
                 "p50/p99 in ms; cpu = us of CPU per operation, client + NameNode processes; each build's median of its runs (builds alternating run by run); x base = median of the "
                 "paired current/baseline ratios; /noop = current / current no-op at that thread count")
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
