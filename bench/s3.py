"""`hedgefs bench s3`: the S3 gateway against the library it sits on, in one run on one cluster.

A local cluster (RS-6-3-1024k, 10 DataNodes) and one `hedgefs s3` process; boto3 is the client.
Each figure has its baseline measured in the same run, on the same machine, at the same time:

- PUT of SIZE  vs  `hedgefs put` of it, four ways: one PutObject with boto3's defaults (over
  HTTP botocore signs the payload: a SHA-256 of the body, and sends a CRC32 header), one with
  payload signing off (UNSIGNED-PAYLOAD, the CRC32 still), upload_fileobj in 8 parallel parts of
  whole block groups (joined by concat), and upload_fileobj with boto3's own TransferConfig
  (8 MiB parts: no whole number of RS-6-3-1024k groups, so copied into the object at Complete)
- GET of a SIZE object, one stream (boto3, 1 MiB reads of the body)  vs  `hedgefs cat` of the file
  (ROUNDS rounds of each, each beside its baseline; medians)
- whole GETs of an 8 MiB object and of the SIZE one, healthy and with one DataNode holding a data
  unit of theirs frozen (SIGSTOP): max latency frozen vs healthy
- 64 KiB ranged GETs, CLIENTS boto3 clients, each a process of its own: p50 / p99 / p99.9  vs  the
  library's pread, CLIENTS threads on one FileSystem (as the gateway's are) in this process, which
  does nothing else meanwhile; beside them the gateway's and the clients' CPU per GET
- the same ranged GETs with one DataNode +DELAY ms: p99.9  vs  the healthy gateway's p99.9
- the gateway's peak resident memory during a PUT and a GET of RSS_SIZE (sampled from /proc)

The CLI baselines run in child processes that time only the command (bench/throughput.py).
"""

from __future__ import annotations

import datetime
import json
import os
import pathlib
import random
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Callable

from hedgefs.bench.throughput import timed_cli, write_random_file
from hedgefs.client.fs import FileSystem
from hedgefs.cluster.launcher import LocalCluster, Options
from hedgefs.proto import hedgefs_pb2 as pb

MiB = 1 << 20
READ = 64 << 10


def _percentiles(samples: list[float]) -> dict:
    s = sorted(samples)

    def p(q):
        return round(s[min(len(s) - 1, int(q * len(s)))] * 1000, 2)

    return {"n": len(s), "p50_ms": p(0.5), "p99_ms": p(0.99), "p999_ms": p(0.999)}


def _boto3(endpoint: str, access: str, secret: str):
    import boto3
    from botocore.config import Config

    return boto3.client("s3", endpoint_url=endpoint, aws_access_key_id=access, aws_secret_access_key=secret,
                        region_name="us-east-1",
                        config=Config(signature_version="s3v4", max_pool_connections=16,
                                      s3={"addressing_style": "path"}, retries={"max_attempts": 1}))


class _Gateway:
    """A `hedgefs s3` process (``python``: of another tree's virtualenv, for an A/B in one run)."""

    def __init__(self, namenode: str, root: pathlib.Path, *options: str, python: str = sys.executable,
                 env: dict | None = None):
        """``env``: the gateway's environment (a baseline build's PYTHONPATH shim); the key is
        made by this build's CLI either way. The gateway runs in ``root``: ``python -m`` puts its
        working directory first on sys.path, and a checkout's own hedgefs/ there would be imported
        instead of the shim's (a baseline that ran this build's code)."""
        keys = root / "keys"
        root.mkdir(parents=True, exist_ok=True)
        key_env = dict(os.environ, HEDGEFS_NAMENODE=namenode)
        env = dict(env or os.environ, HEDGEFS_NAMENODE=namenode)
        env.pop("HEDGEFS_CREDENTIALS", None)
        key_env.pop("HEDGEFS_CREDENTIALS", None)
        out = subprocess.run([sys.executable, "-m", "hedgefs", "admin", "s3-key", "--user", "bench",
                              "--keys", str(keys)],
                             capture_output=True, text=True, env=key_env, check=True).stdout
        fields = dict(line.split(": ", 1) for line in out.splitlines())
        self.access, self.secret = fields["access key"], fields["secret key"]
        self.log = root / "gateway.log"
        with open(self.log, "w") as log:
            self.proc = subprocess.Popen([python, "-m", "hedgefs", "s3", "--port", "0", "--keys", str(keys),
                                          *options],
                                         stdout=log, stderr=subprocess.STDOUT, env=env, cwd=root)
        deadline = time.monotonic() + 60
        while True:
            match = re.search(r"s3: serving (\S+?)/? for", self.log.read_text())
            if match:
                self.endpoint = match.group(1)
                break
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the gateway did not start: {self.log.read_text()[-500:]}")
            time.sleep(0.1)

    def client(self):
        return _boto3(self.endpoint, self.access, self.secret)

    def cpu_s(self) -> float:
        """CPU seconds the gateway has used (all threads)."""
        with open(f"/proc/{self.proc.pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def rss_mb(self) -> float:
        with open(f"/proc/{self.proc.pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
        return 0.0

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(20)


class _PeakRss:
    """The gateway's resident memory, sampled every 20 ms while the block runs."""

    def __init__(self, gateway: _Gateway):
        self.gateway, self.peak, self._stop = gateway, 0.0, threading.Event()

    def __enter__(self):
        def sample():
            while not self._stop.wait(0.02):
                self.peak = max(self.peak, self.gateway.rss_mb())
        self._thread = threading.Thread(target=sample, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()


def _boto3_with(endpoint: str, access: str, secret: str, **s3_config):
    """boto3 as it comes (its checksum defaults), path-style, no retries; ``s3_config`` beside."""
    import boto3
    from botocore.config import Config

    return boto3.client("s3", endpoint_url=endpoint, aws_access_key_id=access, aws_secret_access_key=secret,
                        region_name="us-east-1",
                        config=Config(signature_version="s3v4", max_pool_connections=16, retries={"max_attempts": 1},
                                      s3={"addressing_style": "path", **s3_config}))


def _transfer_config(size: int):
    """8 parts in parallel, each a whole number of RS-6-3-1024k groups of 6 MiB cells' worth (a
    multiple of 6 MiB): the gateway joins them with concat instead of copying (s3/multipart.py)."""
    from boto3.s3.transfer import TransferConfig

    part = max(6 * MiB, -(-size // 8 // (6 * MiB)) * 6 * MiB)
    return TransferConfig(multipart_threshold=part, multipart_chunksize=part, max_concurrency=8)


def _get(s3, key: str) -> tuple[float, int]:
    started, n = time.perf_counter(), 0
    body = s3.get_object(Bucket="bench", Key=key)["Body"]
    for chunk in body.iter_chunks(MiB):
        n += len(chunk)
    return time.perf_counter() - started, n


def _ranged(read: Callable[[int], None], clients: int, reads: int, size: int, seed: int) -> list[float]:
    def one(i):
        rng = random.Random(seed * 1000 + i)
        out = []
        for _ in range(reads):
            offset = rng.randrange(0, size - READ)
            started = time.perf_counter()
            read(offset)
            out.append(time.perf_counter() - started)
        return out

    with ThreadPoolExecutor(clients) as pool:
        return [t for part in pool.map(one, range(clients)) for t in part]


def _client_main(argv: list[str]) -> None:
    """One ranged-GET client in a process of its own (``python -c``, _S3Client): WARM-UP reads,
    "ready", and on a line from stdin READS timed reads; prints their seconds and its CPU as JSON."""
    import resource

    endpoint, access, secret, size, reads, warmup, seed = argv
    s3 = _boto3(endpoint, access, secret)
    def read(rng):
        offset = rng.randrange(0, int(size) - READ)
        s3.get_object(Bucket="bench", Key="big.bin", Range=f"bytes={offset}-{offset + READ - 1}")["Body"].read()

    warm, rng = random.Random(f"warm-up {seed}"), random.Random(int(seed))   # rng: the offsets pread read
    for _ in range(int(warmup)):
        read(warm)
    print("ready", flush=True)
    sys.stdin.readline()
    cpu0, out = resource.getrusage(resource.RUSAGE_SELF), []
    for _ in range(int(reads)):
        started = time.perf_counter()
        read(rng)
        out.append(time.perf_counter() - started)
    cpu1 = resource.getrusage(resource.RUSAGE_SELF)
    cpu = cpu1.ru_utime + cpu1.ru_stime - cpu0.ru_utime - cpu0.ru_stime
    print(json.dumps({"seconds": out, "cpu_s": cpu}), flush=True)


def _s3_ranged(gateway: _Gateway, clients: int, reads: int, size: int, seed: int, warmup: int = 50) -> tuple[list, float]:
    """Ranged GETs through the gateway from ``clients`` boto3 clients, each in a process of its
    own: boto3 spends about as much CPU on a request as the gateway, and threads of one process
    would queue on its one GIL, which the latency would then count as the gateway's. The
    processes start together once all are warm. (samples, the clients' CPU seconds)"""
    procs = [subprocess.Popen([sys.executable, "-c", "import sys; from hedgefs.bench.s3 import _client_main; "
                               "_client_main(sys.argv[1:])", gateway.endpoint, gateway.access, gateway.secret,
                               str(size), str(reads), str(warmup), str(seed * 1000 + i)],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True) for i in range(clients)]
    done = False
    try:
        for proc in procs:
            if proc.stdout.readline().strip() != "ready":
                raise RuntimeError("a ranged-GET client did not start")
        for proc in procs:
            proc.stdin.write("go\n")
            proc.stdin.flush()
        results = [json.loads(proc.stdout.readline()) for proc in procs]
        done = True
    finally:
        for proc in procs:
            if not done:
                proc.kill()
            proc.wait(30)
    return [t for r in results for t in r["seconds"]], sum(r["cpu_s"] for r in results)


def run(out_dir: pathlib.Path, *, size: int = 256 * MiB, rss_size: int = 1 << 30, clients: int = 4, reads: int = 500,
        delay_ms: int = 500, rounds: int = 3, frozen_gets: int = 100, baseline: str | None = None,
        transfers_only: bool = False, command: str = "", say: Callable[[str], None] = print) -> dict:
    """``baseline``: a commit whose gateway runs beside this build's on the same cluster; each
    round then PUTs and GETs through both, the order swapped round by round (A B, B A, ...).
    ``transfers_only``: the whole PUTs and GETs only (no frozen DataNode, ranged GETs, memory)."""
    load_before = [round(x, 2) for x in os.getloadavg()]

    def mb_of(seconds: float) -> float:
        return round(size / 1e6 / seconds, 1)

    with tempfile.TemporaryDirectory(prefix="hedgefs-bench-s3-") as tmp:
        root = pathlib.Path(tmp)
        cluster = LocalCluster(root / "cluster")
        cluster.up(Options(datanodes=10, namenode_port=0, fsync=False))
        gateway = base = base_tree = None
        try:
            gateway = _Gateway(cluster.namenode, root)
            if baseline:
                from hedgefs.bench.namenode_run import _baseline_tree, _shim

                base_commit = subprocess.run(["git", "-C", str(pathlib.Path(__file__).resolve().parent.parent),
                                              "rev-parse", "--short", baseline],
                                             capture_output=True, text=True, check=True).stdout.strip()
                base_tree = _baseline_tree(base_commit, root)
                base = _Gateway(cluster.namenode, root / "base",
                                env={**os.environ, "PYTHONPATH": str(_shim(base_tree, root / "shim"))})
            s3 = gateway.client()
            s3.create_bucket(Bucket="bench")
            local = root / "big.bin"
            write_random_file(str(local), size)
            say(f"cluster {cluster.namenode}, gateway {gateway.endpoint}"
                + (f", baseline {baseline} ({base_commit}) {base.endpoint}" if base else "")
                + f"; PUT and GET {size >> 20} MiB, {rounds} rounds ...")
            # Each round measures the gateway and its baseline back to back, so the two share the
            # machine's load of the moment; the ratio is of the rounds' medians.
            from boto3.s3.transfer import TransferConfig

            data = local.read_bytes()

            def single(client):
                client.put_object(Bucket="bench", Key="big.bin", Body=data)

            def parts(config):
                def put(client):
                    with open(local, "rb") as f:
                        client.upload_fileobj(f, "bench", "big.bin", Config=config)
                return put

            def ways_of(g: _Gateway) -> dict:
                signed = g.client()
                unsigned = _boto3_with(g.endpoint, g.access, g.secret, payload_signing_enabled=False)
                return {"put_object": (signed, single), "put_object_unsigned": (unsigned, single),
                        "parts_aligned": (signed, parts(_transfer_config(size))),
                        "parts_boto3_default": (signed, parts(TransferConfig())), "get": (signed, None)}

            builds = {"ours": (gateway, ways_of(gateway))}
            if base is not None:
                builds["base"] = (base, ways_of(base))
            ways = [w for w in builds["ours"][1] if w != "get"]
            # seconds and CPU-s of each transfer, by build: the gateway's (/proc), boto3's (this
            # process), a CLI's (its own rusage around the command): on 2 cores loaded past them,
            # time follows CPU, so a ratio tends to the CPU ratio (GET 0.57 x cat on a loaded
            # run, 0.93 x on a quieter one)
            seconds = {b: {w: [] for w in builds["ours"][1]} for b in builds}
            cpu = {b: {w: [] for w in builds["ours"][1]} for b in builds}
            cli_puts, cli_cats, cli_cpu = [], [], {"put_cli": [], "cat_cli": []}

            def measure(b: str, way: str) -> None:
                g, clients_of = builds[b]
                client, put = clients_of[way]
                g0, c0, started = g.cpu_s(), time.process_time(), time.perf_counter()
                if put is None:
                    _, got = _get(client, "big.bin")
                    assert got == size, f"GET returned {got} of {size} bytes"
                else:
                    put(client)
                seconds[b][way].append(time.perf_counter() - started)
                cpu[b][way].append({"gateway": g.cpu_s() - g0, "client": time.process_time() - c0})

            for g, clients_of in builds.values():   # each gateway's first requests (connections, imports)
                clients_of["put_object"][0].put_object(Bucket="bench", Key="warm-up", Body=data[:8 * MiB])
                clients_of["put_object"][0].get_object(Bucket="bench", Key="warm-up")["Body"].read()
            for n in range(rounds):
                order = list(builds) if n % 2 == 0 else list(builds)[::-1]   # A B, then B A
                for way in ways:
                    for b in order:
                        measure(b, way)
                out = timed_cli("put", "-f", str(local), "/bench/put-baseline.bin", namenode=cluster.namenode)
                cli_puts.append(out["seconds"])
                cli_cpu["put_cli"].append({"cli": out["cpu_s"]})
                for b in order:
                    measure(b, "get")
                out = timed_cli("cat", "/bench/big.bin", namenode=cluster.namenode)
                cli_cats.append(out["seconds"])
                cli_cpu["cat_cli"].append({"cli": out["cpu_s"]})
                say(f"round {n + 1}: " + "; ".join(
                    f"{b}: PUT " + ", ".join(f"{w} {mb_of(seconds[b][w][-1])}" for w in ways)
                    + f", GET {mb_of(seconds[b]['get'][-1])}" for b in order)
                    + f"; put {mb_of(cli_puts[-1])}, cat {mb_of(cli_cats[-1])} MB/s")
            puts = {w: seconds["ours"][w] for w in ways}
            gets = seconds["ours"]["get"]
            cli_put = statistics.median(cli_puts)
            s3_get, cli_cat = statistics.median(gets), statistics.median(cli_cats)
            frozen, pread, healthy, slow, rss, victim = {}, {}, {}, {}, {}, None
            if not transfers_only:
                say(f"whole GETs, healthy and with a DataNode frozen ({frozen_gets} of 8 MiB, 3 of {size >> 20} MiB) ...")
                frozen = _frozen_gets(cluster, s3, root, frozen_gets, size)
                say(f"ranged GETs: {clients} clients x {reads} ...")
                with FileSystem(cluster.namenode, credentials=None) as fs:
                    reader = fs.open("/bench/big.bin")
                    _ranged(lambda o: reader.pread(o, READ), clients, 50, size, seed=0)   # warm-up
                    pread = _percentiles(_ranged(lambda o: reader.pread(o, READ), clients, reads, size, seed=1))
                    victim = reader.status.groups[0].units[0].datanode_id
                cpu0 = gateway.cpu_s()
                samples, clients_cpu = _s3_ranged(gateway, clients, reads, size, seed=1)
                healthy = _percentiles(samples)
                healthy["gateway_cpu_ms"] = round((gateway.cpu_s() - cpu0) / len(samples) * 1000, 3)
                healthy["clients_cpu_ms"] = round(clients_cpu / len(samples) * 1000, 3)
                say(f"ranged GETs with {victim} +{delay_ms} ms ...")
                cluster.datanode_rpc(victim, "SetFaults", pb.FaultConfig(read_delay_ms=delay_ms))
                try:
                    slow = _percentiles(_s3_ranged(gateway, clients, reads, size, seed=2)[0])
                finally:
                    cluster.datanode_rpc(victim, "ClearFaults", pb.FaultClearRequest())
                if rss_size:
                    say(f"gateway memory during a {rss_size >> 20} MiB PUT and GET ...")
                    write_random_file(str(local), rss_size)
                    idle = gateway.rss_mb()
                    with _PeakRss(gateway) as put_peak, open(local, "rb") as f:
                        s3.upload_fileobj(f, "bench", "rss.bin", Config=_transfer_config(rss_size))
                    with _PeakRss(gateway) as get_peak:
                        _get(s3, "rss.bin")
                    rss = {"size": rss_size, "idle_mb": round(idle, 1), "put_peak_mb": round(put_peak.peak, 1),
                           "get_peak_mb": round(get_peak.peak, 1)}
        finally:
            for g in (gateway, base):
                if g is not None:
                    g.stop()
            cluster.down()
            if base_tree is not None:
                from hedgefs.bench.namenode_run import _remove_tree

                _remove_tree(base_tree)
    mb = size / 1e6
    result = {
        "date": datetime.date.today().isoformat(), "command": command, "size": size, "clients": clients,
        "reads_per_client": reads, "delay_ms": delay_ms, "slow_datanode": victim,
        "load_before": load_before, "load_after": [round(x, 2) for x in os.getloadavg()],
        "rounds": rounds,
        "get": {"s3_mb_s": round(mb / s3_get, 1), "cat_mb_s": round(mb / cli_cat, 1),
                "ratio": round(cli_cat / s3_get, 2), "s3_s": [round(x, 3) for x in gets],
                "cat_s": [round(x, 3) for x in cli_cats]},
        "put": {name: {"s3_mb_s": round(mb / statistics.median(t), 1), "put_mb_s": round(mb / cli_put, 1),
                       "ratio": round(cli_put / statistics.median(t), 2), "s3_s": [round(x, 3) for x in t]}
                for name, t in puts.items()},
        "put_cli_s": [round(x, 3) for x in cli_puts],
        "cpu_s": {name: {k: round(statistics.median(x[k] for x in v), 3) for k in v[0]}
                  for name, v in {**cpu["ours"], **cli_cpu}.items()},
        "frozen": frozen,
        "ranged": {"pread": pread, "s3": healthy, "s3_slow_datanode": slow,
                   "p50_ratio": round(healthy["p50_ms"] / pread["p50_ms"], 2),
                   "p99_ratio": round(healthy["p99_ms"] / pread["p99_ms"], 2),
                   "slow_p999_ratio": round(slow["p999_ms"] / healthy["p999_ms"], 2)} if healthy else {},
        "rss": rss,
    }
    if base is not None:
        # each way: this build's and the baseline's MB/s (medians), and ours over theirs per round
        # (the pair ran back to back), its median; CPU-s per transfer by build
        result["baseline"] = {"commit": base_commit, "ways": {
            w: {"ours_mb_s": mb_of(statistics.median(seconds["ours"][w])),
                "base_mb_s": mb_of(statistics.median(seconds["base"][w])),
                "speed_ratio": round(statistics.median(b / a for a, b in zip(seconds["ours"][w], seconds["base"][w])), 2),
                "ours_gateway_cpu_s": round(statistics.median(x["gateway"] for x in cpu["ours"][w]), 3),
                "base_gateway_cpu_s": round(statistics.median(x["gateway"] for x in cpu["base"][w]), 3),
                "base_s": [round(x, 3) for x in seconds["base"][w]]}
            for w in seconds["ours"]}}
    out_dir.mkdir(parents=True, exist_ok=True)
    stem = out_dir / f"{result['date']}-s3"
    stem.with_suffix(".json").write_text(json.dumps(result, indent=1) + "\n")
    stem.with_suffix(".md").write_text(markdown(result) + "\n")
    return result


def _frozen_gets(cluster, s3, root: pathlib.Path, count: int, size: int) -> dict:
    """Whole GETs of an 8 MiB object (``count`` of them) and of the SIZE one (3), healthy, then
    with a DataNode holding a data unit of both frozen: each GET's seconds, and the victim."""
    small = os.urandom(8 * MiB)
    s3.put_object(Bucket="bench", Key="small.bin", Body=small)
    with FileSystem(cluster.namenode, credentials=None) as fs:
        a, b = fs.stat("/bench/small.bin"), fs.stat("/bench/big.bin")
        in_both = ({u.datanode_id for u in a.groups[0].units.values() if u.index < 6}
                   & {u.datanode_id for u in b.groups[0].units.values() if u.index < 6})
        victim = sorted(in_both)[0] if in_both else a.groups[0].units[0].datanode_id

    def gets(frozen: bool) -> dict:
        out = {"small_s": [], "big_s": []}
        for _ in range(count):
            started = time.perf_counter()
            assert s3.get_object(Bucket="bench", Key="small.bin")["Body"].read() == small
            out["small_s"].append(round(time.perf_counter() - started, 4))
        for _ in range(3):
            seconds, got = _get(s3, "big.bin")
            assert got == size
            out["big_s"].append(round(seconds, 3))
        return out

    healthy = gets(False)
    cluster.freeze(victim)
    try:
        frozen = gets(True)
    finally:
        cluster.thaw(victim)
    return {"victim": victim, "healthy": healthy, "frozen": frozen,
            "small_max_ratio": round(max(frozen["small_s"]) / max(healthy["small_s"]), 2),
            "big_max_ratio": round(max(frozen["big_s"]) / max(healthy["big_s"]), 2)}


def markdown(r: dict) -> str:
    g, p, rg, m, fz = r["get"], r["put"], r["ranged"], r["rss"], r["frozen"]
    ways = {"put_object": "one PutObject, boto3's defaults (over HTTP: SHA-256 payload + CRC32)",
            "put_object_unsigned": "one PutObject, payload signing off (CRC32)",
            "parts_aligned": "upload_fileobj, 8 parallel parts of whole groups (concat)",
            "parts_boto3_default": "upload_fileobj, boto3's TransferConfig (8 MiB parts: copied at Complete)"}
    targets = {"put_object": ">= 0.5 x", "put_object_unsigned": ">= 0.7 x"}
    lines = [
        f"# S3 gateway vs the library, {r['date']}",
        "",
        f"`{r['command']}`: one local cluster (RS-6-3-1024k, 10 DataNodes), one gateway, boto3 "
        f"(its checksum defaults); load average {r['load_before']} before, {r['load_after']} after (2 cores).",
        "",
        "| measure | gateway | baseline (same run) | ratio | target |",
        "|---|---|---|---|---|",
        *[f"| PUT {r['size'] >> 20} MiB, {ways[k]} | {v['s3_mb_s']} MB/s | `hedgefs put` {v['put_mb_s']} MB/s | "
          f"{v['ratio']} x | {targets.get(k, '')} |" for k, v in p.items()],
        f"| GET {r['size'] >> 20} MiB, one stream | {g['s3_mb_s']} MB/s | `hedgefs cat` {g['cat_mb_s']} MB/s | "
        f"{g['ratio']} x | >= 0.9 x |",
    ]
    if fz:
        lines += [
            f"| {len(fz['frozen']['small_s'])} whole GETs of 8 MiB, {fz['victim']} frozen: max | "
            f"{max(fz['frozen']['small_s']) * 1000:.1f} ms | healthy max {max(fz['healthy']['small_s']) * 1000:.1f} ms | "
            f"{fz['small_max_ratio']} x | <= 2 x |",
            f"| 3 whole GETs of {r['size'] >> 20} MiB, {fz['victim']} frozen: max | {max(fz['frozen']['big_s'])} s | "
            f"healthy max {max(fz['healthy']['big_s'])} s | {fz['big_max_ratio']} x | <= 2 x |"]
    if rg:
        lines += [
            f"| 64 KiB ranged GETs, {r['clients']} clients, p50 | {rg['s3']['p50_ms']} ms | "
            f"pread {rg['pread']['p50_ms']} ms | {rg['p50_ratio']} x | <= 3 x |",
            f"| the same, p99 | {rg['s3']['p99_ms']} ms | pread {rg['pread']['p99_ms']} ms | "
            f"{rg['p99_ratio']} x | <= 3 x |",
            f"| the same with {r['slow_datanode']} +{r['delay_ms']} ms, p99.9 | {rg['s3_slow_datanode']['p999_ms']} ms | "
            f"healthy gateway {rg['s3']['p999_ms']} ms | {rg['slow_p999_ratio']} x | <= 1.5 x |"]
    if m:
        lines.append(f"| gateway RSS during a {m['size'] >> 20} MiB PUT / GET | "
                     f"{m['put_peak_mb']} / {m['get_peak_mb']} MB "
                     f"| idle {m['idle_mb']} MB | | <= 200 MB |")
    if "cpu_s" in r:
        c = r["cpu_s"]
        lines += ["", f"CPU-s per {r['size'] >> 20} MiB (medians), gateway + boto3: PUT with the defaults "
                  f"{c['put_object']['gateway']} + {c['put_object']['client']}, unsigned "
                  f"{c['put_object_unsigned']['gateway']} + {c['put_object_unsigned']['client']}, boto3's 8 MiB parts "
                  f"{c['parts_boto3_default']['gateway']} + {c['parts_boto3_default']['client']}, against `hedgefs put` "
                  f"{c['put_cli']['cli']}; GET {c['get']['gateway']} + {c['get']['client']}, against `hedgefs cat` "
                  f"{c['cat_cli']['cli']} (the CLI's own, around the command; the DataNodes' CPU is the same "
                  "either way). Where the host has no core to spare, time follows CPU."]
    if rg and "gateway_cpu_ms" in rg["s3"]:
        lines += ["", f"CPU per ranged GET: the gateway {rg['s3']['gateway_cpu_ms']} ms, the boto3 clients "
                  f"{rg['s3']['clients_cpu_ms']} ms (each client a process of its own)."]
    if r.get("baseline"):
        b = r["baseline"]
        names = {**ways, "get": f"GET {r['size'] >> 20} MiB, one stream"}
        lines += ["", f"## This build's gateway vs the baseline's ({b['commit']}), same cluster, same run", "",
                  "Each round ran the two back to back, the order swapped round by round (A B, B A, ...); "
                  "speed = the median over rounds of baseline seconds / ours.", "",
                  "| transfer | ours | baseline | speed, ours / baseline | gateway CPU-s, ours | baseline |",
                  "|---|---|---|---|---|---|",
                  *[f"| {'' if w == 'get' else 'PUT, '}{names[w]} | "
                    f"{v['ours_mb_s']} MB/s | {v['base_mb_s']} MB/s | {v['speed_ratio']} x | "
                    f"{v['ours_gateway_cpu_s']} | {v['base_gateway_cpu_s']} |" for w, v in b["ways"].items()]]
    lines += ["", (f"{rg['s3']['n']} ranged GETs per run; " if rg else "")
              + f"GET and PUT: the median of {r.get('rounds', 1)} rounds, "
              "each the gateway and its baseline back to back; ratios are gateway MB/s over the baseline's."]
    return "\n".join(lines)
