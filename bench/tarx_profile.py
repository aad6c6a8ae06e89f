"""Where one ``tar x`` entry's time goes through ``hedgefs mount``: a probe, not a suite.

    python bench/tarx_profile.py CLUSTER_DIR STATUS_PAGE MOUNTPOINT MOUNT_PID TARBALL [--strace]

Runs ``tar xf TARBALL`` into a new directory of MOUNTPOINT (a mount of the cluster ``hedgefs
cluster up --dir CLUSTER_DIR`` made, its NameNode's status page at STATUS_PAGE
(http://127.0.0.1:PORT/, as cluster up prints it), served by the process MOUNT_PID) and prints, per entry of
the tarball: the wall time; the NameNode's calls by method and their time in the NameNode (its
/metrics: rpc_calls_total, rpc_seconds_sum); the CPU time the mount, the DataNodes and the
NameNode spent (/proc/PID/stat); with ``--strace``, tar's system calls and their wall time
(``strace -f -c -w``: what each FUSE request cost tar, strace's own overhead included). See
bench/results/2026-12-06-tarx-entry-profile.md. Run under the heavy lock for figures to keep.
"""

import json
import os
import pathlib
import re
import subprocess
import sys
import tarfile
import tempfile
import time
import urllib.request


def namenode_calls(http: str) -> tuple[dict[str, float], dict[str, float]]:
    """Calls and seconds in the NameNode by method; "(Creates answered early)" among the calls: a
    Create answered before its journal record was durable (a NameNode without that: absent)."""
    text = urllib.request.urlopen(http + "metrics", timeout=10).read().decode()
    calls: dict[str, float] = {}
    early = re.search(r'^hedgefs_namenode_creates_early_total (\S+)$', text, re.M)
    if early:
        calls["(Creates answered early)"] = float(early.group(1))
    for labels, v in re.findall(r'^hedgefs_namenode_rpc_calls_total\{([^}]*)\} (\S+)$', text, re.M):
        method = re.search(r'method="([^"]+)"', labels).group(1)
        calls[method] = calls.get(method, 0) + float(v)
    seconds = {m: float(v) for m, v in re.findall(r'^hedgefs_namenode_rpc_seconds_sum\{method="([^"]+)"\} (\S+)$',
                                                   text, re.M)}
    return calls, seconds


def cpu_seconds(pids: list[int]) -> float:
    tick = os.sysconf("SC_CLK_TCK")
    total = 0.0
    for pid in pids:
        fields = pathlib.Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        total += (int(fields[11]) + int(fields[12])) / tick   # utime, stime
    return total


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


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if a != "--strace"]
    if len(args) != 5:
        raise SystemExit(__doc__)
    main(args[0], args[1], args[2], int(args[3]), args[4], "--strace" in sys.argv)
