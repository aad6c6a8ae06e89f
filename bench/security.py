"""What a secure cluster costs: `bench throughput` and `bench read`, secure beside insecure, in one run.

Two local clusters of ten DataNodes run side by side, one insecure and one secure (TLS on every
channel, credentials checked on every call, block tokens checked on every unit request; no
``sendfile``: TLS bytes pass through ``ssl``). The measurements alternate A B B A (insecure,
secure, secure, insecure), ``rounds`` times, so a change of the machine's load during the run
weighs on both sides alike; each mode's figure is the median of its runs, and every figure is
given beside its ratio (secure / insecure). The machine's load average is recorded before and after. Beside them, what
TLS itself costs on this machine: the socket probe of bench/transport.py, plain and in TLS (both
ends ``ssl``, as the data port), measured in every run.

    throughput   put / get / cat of one file through the CLI's code path (bench/throughput.py):
                 MB/s and client CPU s per GiB; 64 KiB random reads (one thread) p50/p99; the
                 start-up of `hedgefs cat` on a 1-byte file (credential loaded, TLS handshakes)
    read         `hedgefs bench read`: random 64 KiB reads from 8 threads (bench/read.py):
                 reads/s, p50/p99/p999
"""

from __future__ import annotations

import datetime
import json
import os
import pathlib
import statistics
import tempfile
from typing import Callable

from hedgefs.bench.read import run_read_bench
from hedgefs.bench.throughput import run_throughput_bench, write_random_file
from hedgefs.bench.transport import run_socket_probe
from hedgefs.client.config import HedgeConfig
from hedgefs.client.fs import FileSystem
from hedgefs.cluster.launcher import LocalCluster, Options

READ_FILE = "/bench/read.bin"
ROUND = ("insecure", "secure", "secure", "insecure")


def _figures(throughput: dict, read: dict, tls_probe: dict) -> dict:
    """The numbers compared, flat: name -> value."""
    plain, secured = throughput["probe"]["6"], tls_probe["streams"]["6"]
    return {
        "probe_download_mb_s": plain["download_mb_s"],
        "tls_probe_download_mb_s": secured["download_mb_s"],
        "tls_probe_upload_mb_s": secured["upload_mb_s"],
        "put_mb_s": throughput["put"]["mb_s"],
        "get_mb_s": throughput["get_to_file"]["mb_s"],
        "cat_mb_s": throughput["cat_to_null"]["mb_s"],
        "put_cpu_s_per_gib": throughput["put"]["cpu_s_per_gib"],
        "cat_cpu_s_per_gib": throughput["cat_to_null"]["cpu_s_per_gib"],
        "random_64k_p50_ms": throughput["random_64k_one_thread"]["p50_ms"],
        "random_64k_p99_ms": throughput["random_64k_one_thread"]["p99_ms"],
        "cat_1_byte_startup_s": throughput["startup"]["cat_1_byte_s"],
        "read_reads_per_s": read["reads_per_s"],
        "read_p50_ms": read["p50_ms"],
        "read_p99_ms": read["p99_ms"],
        "read_p999_ms": read["p999_ms"],
    }


def run(out_dir: pathlib.Path, *, size: int = 128 << 20, read_file_size: int = 64 << 20, read_s: float = 15.0,
        threads: int = 8, rounds: int = 2, command: str = "", say: Callable[[str], None] = print) -> dict:
    order = ROUND * rounds
    load_before = [round(x, 2) for x in os.getloadavg()]
    clusters: dict[str, LocalCluster] = {}
    runs: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="hedgefs-bench-security-") as tmp:
        try:
            for mode in ("insecure", "secure"):
                cluster = clusters[mode] = LocalCluster(pathlib.Path(tmp) / mode)
                cluster.up(Options(datanodes=10, namenode_port=0, fsync=False, secure=mode == "secure"))
                say(f"{mode} cluster up: NameNode {cluster.namenode}")
                local = pathlib.Path(tmp) / "read.bin"
                write_random_file(str(local), read_file_size)
                with FileSystem(cluster.namenode, credentials=cluster.credentials) as fs, open(local, "rb") as f:
                    fs.mkdir("/bench", parents=True)
                    fs.write(READ_FILE, f, overwrite=True)
            for n, mode in enumerate(order, 1):
                cluster = clusters[mode]
                say(f"run {n}/{len(order)}: {mode}: throughput ({size >> 20} MiB)...")
                throughput = run_throughput_bench(cluster.namenode, size=size, rss_size=0, reads=1000,
                                                  credentials=cluster.credentials, workdir=tmp)
                say(f"run {n}/{len(order)}: {mode}: bench read ({threads} threads, {read_s:.0f} s)...")
                with FileSystem(cluster.namenode, credentials=cluster.credentials,
                                hedge=HedgeConfig.from_sources()) as fs:
                    read = run_read_bench(fs, READ_FILE, threads=threads, duration_s=read_s).summary()
                probe_file = pathlib.Path(tmp) / "probe.bin"
                write_random_file(str(probe_file), size)
                tls_probe = run_socket_probe(str(probe_file), size, 6, tls=str(clusters["secure"].security_dir))
                probe_file.unlink()
                runs.append({"mode": mode, "figures": _figures(throughput, read, tls_probe), "throughput": throughput,
                             "read": read, "tls_probe": tls_probe})
        finally:
            for cluster in clusters.values():
                cluster.down()
    means = {mode: {k: round(statistics.median(r["figures"][k] for r in runs if r["mode"] == mode), 3)
                    for k in runs[0]["figures"]} for mode in ("insecure", "secure")}
    ratios = {k: round(means["secure"][k] / means["insecure"][k], 3) if means["insecure"][k] else None
              for k in means["insecure"]}
    result = {"command": command, "date": datetime.date.today().isoformat(), "order": list(order),
              "size": size, "read_file_size": read_file_size, "read_s": read_s, "threads": threads,
              "load_average": {"before": load_before, "after": [round(x, 2) for x in os.getloadavg()]},
              "insecure": means["insecure"], "secure": means["secure"], "secure_over_insecure": ratios,
              # how close `cat` comes to moving bytes at all: plain probe (insecure), TLS probe (secure)
              "cat_share_of_its_probe": {
                  "insecure": round(means["insecure"]["cat_mb_s"] / means["insecure"]["probe_download_mb_s"], 3),
                  "secure": round(means["secure"]["cat_mb_s"] / means["secure"]["tls_probe_download_mb_s"], 3)},
              "runs": runs}
    out_dir.mkdir(parents=True, exist_ok=True)
    stem = out_dir / f"{result['date']}-security"
    stem.with_suffix(".json").write_text(json.dumps(result, indent=1) + "\n")
    stem.with_suffix(".md").write_text(markdown(result))
    say(f"wrote {stem}.json and {stem}.md")
    return result


_LABELS = {
    "probe_download_mb_s": "socket probe (no hedgefs), 6 streams, plain, MB/s",
    "tls_probe_download_mb_s": "... the same in TLS (both ends ssl), download MB/s",
    "tls_probe_upload_mb_s": "... upload MB/s",
    "put_mb_s": "put < file, MB/s", "get_mb_s": "get > file, MB/s", "cat_mb_s": "cat > /dev/null, MB/s",
    "put_cpu_s_per_gib": "put, client CPU s/GiB", "cat_cpu_s_per_gib": "cat, client CPU s/GiB",
    "random_64k_p50_ms": "64 KiB random read, 1 thread, p50 ms", "random_64k_p99_ms": "... p99 ms",
    "cat_1_byte_startup_s": "`hedgefs cat` of 1 byte, start to first byte, s",
    "read_reads_per_s": "bench read, 8 threads, reads/s", "read_p50_ms": "... p50 ms", "read_p99_ms": "... p99 ms",
    "read_p999_ms": "... p99.9 ms",
}


def markdown(r: dict) -> str:
    lines = [f"# Secure vs insecure: bench throughput and bench read ({r['date']})", "",
             f"Command: `{r['command']}`. Two local 10-DataNode clusters (RS-6-3-1024k), runs in the order "
             f"{', '.join(r['order'])}; each figure is its mode's median. File {r['size'] >> 20} MiB "
             f"(throughput), {r['read_file_size'] >> 20} MiB (bench read, {r['read_s']:.0f} s). Load average "
             f"{r['load_average']['before']} before, {r['load_average']['after']} after (2 cores, shared).", "",
             "| figure | insecure | secure | secure / insecure |", "|---|---:|---:|---:|"]
    for key, label in _LABELS.items():
        ratio = r["secure_over_insecure"][key]
        lines.append(f"| {label} | {r['insecure'][key]} | {r['secure'][key]} | {ratio if ratio is not None else '-'} |")
    cat_share = r["cat_share_of_its_probe"]
    lines += ["", f"TLS itself: the TLS probe moves {r['secure']['tls_probe_download_mb_s']} MB/s where the plain one "
                  f"moves {r['secure']['probe_download_mb_s']} (same runs). `cat` reaches {cat_share['insecure']} of "
                  f"the plain probe insecure and {cat_share['secure']} of the TLS probe secure."]
    lines += ["", "Per run:", "", "| run | mode | put MB/s | cat MB/s | get MB/s | read reads/s | read p99 ms |",
              "|---|---|---:|---:|---:|---:|---:|"]
    for n, run_ in enumerate(r["runs"], 1):
        f = run_["figures"]
        lines.append(f"| {n} | {run_['mode']} | {f['put_mb_s']} | {f['cat_mb_s']} | {f['get_mb_s']} | "
                     f"{f['read_reads_per_s']} | {f['read_p99_ms']} |")
    return "\n".join(lines) + "\n"
