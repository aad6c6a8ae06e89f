"""Where one ``tar x`` entry's time goes through ``hedgefs mount``: a probe, not a suite.

    python bench/tarx_profile.py CLUSTER_DIR STATUS_PAGE MOUNTPOINT MOUNT_PID TARBALL [--strace]
    python bench/tarx_profile.py --ab [--baseline COMMIT] [--files N] [--strace]

Runs ``tar xf TARBALL`` into a new directory of MOUNTPOINT (a mount of the cluster ``hedgefs
cluster up --dir CLUSTER_DIR`` made, its NameNode's status page at STATUS_PAGE
(http://127.0.0.1:PORT/, as cluster up prints it), served by the process MOUNT_PID) and prints, per entry of
the tarball: the wall time; the NameNode's calls by method and their time in the NameNode (its
/metrics: rpc_calls_total, rpc_seconds_sum); the CPU time the mount, the DataNodes and the
NameNode spent (/proc/PID/stat); with ``--strace``, tar's system calls and their wall time
(``strace -f -c -w``: what each FUSE request cost tar, strace's own overhead included). See
bench/results/2026-12-06-tarx-entry-profile.md. Run under the heavy lock for figures to keep.

``--ab``: the same beside a baseline, in one run: this build's cluster and mount and the baseline
commit's (main by default; each build in its own directory, as ``hedgefs bench smallfiles``
makes them), a tarball of ``make_tree`` of N files (500 by default), and the probe on each, A B B A.
"""

import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import urllib.request

from hedgefs.bench.smallfiles import cpu_seconds


def namenode_calls(http: str) -> tuple[dict[str, float], dict[str, float]]:
    """Calls and seconds in the NameNode by method."""
    text = urllib.request.urlopen(http + "metrics", timeout=10).read().decode()
    calls: dict[str, float] = {}
    for labels, v in re.findall(r'^hedgefs_namenode_rpc_calls_total\{([^}]*)\} (\S+)$', text, re.M):
        method = re.search(r'method="([^"]+)"', labels).group(1)
        calls[method] = calls.get(method, 0) + float(v)
    seconds = {m: float(v) for m, v in re.findall(r'^hedgefs_namenode_rpc_seconds_sum\{method="([^"]+)"\} (\S+)$',
                                                   text, re.M)}
    return calls, seconds


def main(cluster_dir: str, http: str, mountpoint: str, mount_pid: int, tarball: str, use_strace: bool) -> None:
    cluster = json.loads(pathlib.Path(cluster_dir, "cluster.json").read_text())
    found = subprocess.run(["pgrep", "-f", f"data-dir {cluster_dir.rstrip('/')}/namenode"],
                           capture_output=True, text=True).stdout.split()
    processes = {"mount": [mount_pid], "datanodes": [d["pid"] for d in cluster["datanodes"].values()],
                 "namenode": [int(p) for p in found]}
    http = http.rstrip("/") + "/"
    with tarfile.open(tarball) as t:
        entries = sum(1 for m in t.getmembers() if m.name not in (".", "./"))
    dest = pathlib.Path(mountpoint) / f"tarx-profile-{int(time.time())}"
    dest.mkdir()
    calls0, seconds0 = namenode_calls(http)
    cpu0 = {k: cpu_seconds(v) for k, v in processes.items()}
    trace = tempfile.NamedTemporaryFile(suffix=".strace", delete=False).name
    cmd = ["tar", "xf", tarball, "-C", str(dest)]
    began = time.perf_counter()
    subprocess.run((["strace", "-f", "-c", "-w", "-o", trace] if use_strace else []) + cmd, check=True)
    wall = time.perf_counter() - began
    calls1, seconds1 = namenode_calls(http)
    cpu1 = {k: cpu_seconds(v) for k, v in processes.items()}
    print(f"tar x of {entries} entries: {wall:.2f} s, {entries / wall:.1f} entries/s, "
          f"{wall / entries * 1000:.1f} ms an entry; load {os.getloadavg()[0]:.1f}")
    print("NameNode calls (DataNodes' own too: UnitStored, Heartbeat, BlockReport):")
    for method in sorted(calls1):
        n = calls1[method] - calls0.get(method, 0)
        if n:
            s = seconds1.get(method, 0) - seconds0.get(method, 0)
            if method.startswith("("):
                print(f"  {method:16s} {n:6.0f}, {n / entries:5.2f} an entry")
                continue
            print(f"  {method:16s} {n:6.0f} calls, {n / entries:5.2f} an entry, in the NameNode "
                  f"{s / n * 1000:6.2f} ms a call, {s / entries * 1000:6.2f} ms an entry")
    print("CPU an entry:")
    for name in processes:
        print(f"  {name:10s} {(cpu1[name] - cpu0[name]) / entries * 1000:6.2f} ms")
    if use_strace:
        print("tar's system calls (strace -f -c -w):")
        print("\n".join(pathlib.Path(trace).read_text().splitlines()[:16]))
    os.unlink(trace)


def ab(baseline: str, files: int, use_strace: bool) -> None:
    """This build beside ``baseline``'s, A B B A (``--ab``)."""
    from hedgefs.bench.namenode_run import _baseline_tree, _remove_tree, _shim
    from hedgefs.bench.smallfiles import Build, make_tree

    here = pathlib.Path(__file__).resolve().parent.parent
    tmp = pathlib.Path(tempfile.mkdtemp(prefix="hedgefs-tarx-ab-"))
    builds, base_tree = {}, None
    try:
        tree = tmp / "src" / "tree"
        print(f"tree: {make_tree(tree, files)}")
        tarball = tmp / "tree.tar"
        with tarfile.open(tarball, "w") as t:
            t.add(tree, arcname=tree.name)
        commit = subprocess.run(["git", "-C", str(here), "rev-parse", "--short", baseline], capture_output=True,
                                text=True, check=True).stdout.strip()
        head = subprocess.run(["git", "-C", str(here), "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True).stdout.strip()
        base_tree = _baseline_tree(commit, tmp)
        builds["ours"] = Build("ours", None, tmp / "ours")
        builds["main"] = Build("main", {**os.environ, "PYTHONPATH": str(_shim(base_tree, tmp / "shim"))}, tmp / "main")
        for b in builds.values():
            b.root.mkdir(parents=True)
            print(f"{b.name}: {head if b.name == 'ours' else commit}, code from {b.code()}")
        for b in builds.values():
            b.up()
            b.mount()
        for n, name in enumerate(["ours", "main", "main", "ours"]):
            b = builds[name]
            print(f"\n--- {name} ({head if name == 'ours' else commit}), run {n + 1} of 4")
            sys.stdout.flush()
            main(str(b.root / "cluster"), b.http, str(b.mountpoint), b.mount_proc.pid, str(tarball), use_strace)
            sys.stdout.flush()
    finally:
        for b in builds.values():
            b.down()
        if base_tree is not None:
            _remove_tree(base_tree)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    if "--ab" in sys.argv:
        argv = sys.argv[1:]
        opt = {k: argv[argv.index(k) + 1] for k in ("--baseline", "--files") if k in argv}
        ab(opt.get("--baseline", "main"), int(opt.get("--files", 500)), "--strace" in argv)
        raise SystemExit(0)
    args = [a for a in sys.argv[1:] if a != "--strace"]
    if len(args) != 5:
        raise SystemExit(__doc__)
    main(args[0], args[1], args[2], int(args[3]), args[4], "--strace" in sys.argv)
