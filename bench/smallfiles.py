"""`hedgefs bench smallfiles`: many small files, the way users meet them (issue 44), in one run.

A tree of ``files`` files (3,200 by default) with a source tree's size mix (seeded: most under
16 KiB, a few of 1-4 MiB; text, so ``grep`` finds things) is made on the local disk and tarred.
Then, side by side:

    mount rows     ``tar x`` of the tarball into a mount (entries/s), ``grep -r -l`` over the tree
                   through it, ``rm -rf`` of it: this build's ``hedgefs mount``, the baseline
                   build's (a commit checked out beside this one, its own cluster), a GlusterFS
                   disperse 6+3 FUSE mount (9 local bricks, bench/gluster.py), and the local disk
    CLI rows       ``hedgefs put -r`` of the tree (files/s; a build without it: not run), and
                   ``aws s3 sync`` of the tree to each build's S3 gateway
    library rows   creates of empty files and stats of them, 16 threads, through each build's
                   client library (a child process of that build); NameNode RPCs per one-group
                   file put (the NameNode's own per-method counters, before and after)

Every row's sides take turns A B B A (A B C D D C B A): a change of the machine's load weighs on
each alike; each side's figure is the better of its two runs, with both kept in the JSON. The
clusters are ``hedgefs cluster up`` of each build (10 DataNodes, RS-6-3-1024k, fsync on, as a
user gets them), started one after the other and both up for the whole run.
"""

from __future__ import annotations

import datetime
import json
import os
import pathlib
import random
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import urllib.request

from hedgefs.bench.gluster import GlusterUnavailable, GlusterVolume

_HERE = pathlib.Path(__file__).resolve().parent
_OPS = _HERE / "smallfiles_ops.py"

WORDS = ("def main class import return self value path data file read write open close node group unit "
         "stripe cell block policy client server error status length offset list dict none true false for "
         "while with yield async await lambda try except raise pass").split()


# ---------------------------------------------------------------------------- the tree


def _size(rng: random.Random) -> int:
    """A source tree's mix: ~70 % under 8 KiB, ~95 % under 32 KiB, ~1 % of 1-4 MiB."""
    roll = rng.random()
    if roll < 0.70:
        return int(rng.lognormvariate(7.6, 1.0)) % 8192 + 1       # median ~2 KiB
    if roll < 0.95:
        return rng.randint(8 << 10, 32 << 10)
    if roll < 0.99:
        return rng.randint(32 << 10, 512 << 10)
    return rng.randint(1 << 20, 4 << 20)


def make_tree(root: pathlib.Path, files: int, seed: int = 44) -> dict:
    """``files`` files in directories of ~20 (depth up to 4), seeded; a few empty files and
    directories as a source tree has. Returns counts."""
    rng = random.Random(seed)
    text = " ".join(rng.choice(WORDS) + ("\n" if rng.random() < 0.1 else "") for _ in range(900_000)).encode()
    dirs = [root]
    root.mkdir(parents=True)
    total = 0
    for i in range(files):
        if i % 20 == 0 and i:
            parent = rng.choice(dirs[-8:] if len(dirs) > 8 else dirs)
            if len(parent.relative_to(root).parts) >= 4:
                parent = root
            new = parent / f"pkg{len(dirs):03d}"
            new.mkdir()
            dirs.append(new)
        where = dirs[-1] if rng.random() < 0.8 else rng.choice(dirs)
        size = 0 if rng.random() < 0.02 else _size(rng)
        start = rng.randrange(0, len(text) - size) if size < len(text) else 0
        data = (text * (size // len(text) + 1))[start:start + size]
        (where / f"mod{i:05d}.py").write_bytes(data)
        total += size
    for n in range(3):
        (rng.choice(dirs) / f"empty{n}").mkdir()
    return {"files": files, "dirs": len(dirs) + 3, "bytes": total}


# ---------------------------------------------------------------------------- builds and their servers


class Build:
    """One build of hedgefs: this one (``env`` None) or a baseline commit's (PYTHONPATH shim)."""

    def __init__(self, name: str, env: dict | None, root: pathlib.Path):
        self.name = name
        self.env = dict(os.environ if env is None else env)
        for key in ("HEDGEFS_NAMENODE", "HEDGEFS_CREDENTIALS", "HEDGEFS_CLUSTER_DIR"):
            self.env.pop(key, None)
        self.root = root
        self.namenode = ""
        self.http = ""
        self.mount_proc: subprocess.Popen | None = None
        self.mountpoint = root / "mnt"
        self.s3_proc: subprocess.Popen | None = None
        self.s3_endpoint = ""

    def hedgefs(self, *args: str, check: bool = True, **kw) -> subprocess.CompletedProcess:
        env = dict(self.env, HEDGEFS_NAMENODE=self.namenode) if self.namenode else self.env
        return subprocess.run([sys.executable, "-m", "hedgefs", *args], env=env, capture_output=True, text=True,
                              check=check, cwd=self.root, **kw)

    def code(self) -> str:
        """Where this build's processes take hedgefs from. Every process of a build runs in its
        root: ``python -m`` puts the working directory first on sys.path, and run from a
        checkout (whose ``hedgefs/`` is the package's top) it would shadow a baseline's shim."""
        done = subprocess.run([sys.executable, "-c", "import hedgefs.client.fs as m; print(m.__file__)"],
                              env=self.env, cwd=self.root, capture_output=True, text=True, check=True)
        return done.stdout.strip()

    def up(self) -> None:
        out = self.hedgefs("cluster", "up", "--dir", str(self.root / "cluster"), "--namenode-port", "0",
                           "--http-port", "0", timeout=300).stdout
        self.namenode = re.search(r"HEDGEFS_NAMENODE=(\S+)", out).group(1)
        self.http = re.search(r"status page: (\S+)", out).group(1).rstrip("/")

    def mount(self) -> None:
        self.mountpoint.mkdir(parents=True, exist_ok=True)
        log = self.root / "mount.log"
        self.mount_proc = subprocess.Popen([sys.executable, "-m", "hedgefs", "mount", "-f", str(self.mountpoint)],
                                           env=dict(self.env, HEDGEFS_NAMENODE=self.namenode), cwd=self.root,
                                           stdout=subprocess.DEVNULL, stderr=open(log, "ab"))
        deadline = time.monotonic() + 60
        while not os.path.ismount(self.mountpoint):
            if self.mount_proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"{self.name}: hedgefs mount did not start: {log.read_text()[-500:]}")
            time.sleep(0.1)

    def start_s3(self) -> None:
        """The build's S3 gateway on a free port, with an access key of its own (``s3_keys``)."""
        keys = self.root / "s3keys"
        out = self.hedgefs("admin", "s3-key", "--user", "bench", "--keys", str(keys)).stdout
        fields = dict(line.split(": ", 1) for line in out.splitlines() if ": " in line)
        self.s3_keys = (fields["access key"], fields["secret key"])
        log = self.root / "s3.log"
        self.s3_proc = subprocess.Popen([sys.executable, "-m", "hedgefs", "s3", "--port", "0", "--keys", str(keys)],
                                        env=dict(self.env, HEDGEFS_NAMENODE=self.namenode), cwd=self.root,
                                        stdout=open(log, "ab"), stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 60
        while True:
            match = re.search(r"s3: serving (\S+?)/? for", log.read_text())
            if match:
                self.s3_endpoint = match.group(1)
                return
            if self.s3_proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"{self.name}: the S3 gateway did not start: {log.read_text()[-500:]}")
            time.sleep(0.1)

    def rpc_counts(self) -> dict[str, float]:
        """The NameNode's RPCs served so far, by method (its /metrics)."""
        text = urllib.request.urlopen(self.http + "/metrics", timeout=10).read().decode()
        counts: dict[str, float] = {}
        for m in re.finditer(r'^hedgefs_namenode_rpc_calls_total\{([^}]*)\} (\S+)$', text, re.M):
            method = re.search(r'method="([^"]+)"', m.group(1)).group(1)
            counts[method] = counts.get(method, 0) + float(m.group(2))
        return counts

    def pids(self) -> dict[str, list[int]]:
        """The build's processes a ``tar x`` into its mount keeps busy: the mount, the NameNode(s),
        the DataNodes (its cluster.json)."""
        state = json.loads((self.root / "cluster" / "cluster.json").read_text())
        return {"mount": [self.mount_proc.pid] if self.mount_proc is not None else [],
                "namenode": [state[n]["pid"] for n in ("namenode", "namenode-2") if (state.get(n) or {}).get("pid")],
                "datanodes": [d["pid"] for d in state.get("datanodes", {}).values() if d.get("pid")]}

    def ops(self, *args: str) -> dict:
        """A library workload in a child process of this build (bench/smallfiles_ops.py)."""
        done = subprocess.run([sys.executable, str(_OPS), "--namenode", self.namenode, *args], env=self.env,
                              cwd=self.root, capture_output=True, text=True, timeout=1800)
        if done.returncode != 0:
            raise RuntimeError(f"{self.name}: {' '.join(args)}: {done.stderr.strip()[-800:]}")
        return json.loads(done.stdout)

    def down(self) -> None:
        for proc in (self.s3_proc,):
            if proc is not None and proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(30)
                except subprocess.TimeoutExpired:
                    proc.kill()
        if self.mount_proc is not None:
            subprocess.run(["fusermount3", "-u", str(self.mountpoint)], capture_output=True)
            try:
                self.mount_proc.wait(30)
            except subprocess.TimeoutExpired:
                self.mount_proc.kill()
        if self.namenode:
            self.hedgefs("cluster", "down", "--dir", str(self.root / "cluster"), check=False, timeout=120)


# ---------------------------------------------------------------------------- measures


def _timed(cmd: list[str], cwd: str | None = None, env: dict | None = None) -> float:
    started = time.perf_counter()
    done = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True)
    elapsed = time.perf_counter() - started
    if done.returncode not in (0, 1) or (done.returncode == 1 and cmd[0] != "grep"):
        raise RuntimeError(f"{' '.join(cmd[:4])}: exit {done.returncode}: {done.stderr.strip()[-500:]}")
    return elapsed


def _count_entries(tree: pathlib.Path) -> int:
    return sum(len(d) + len(f) for _, d, f in os.walk(tree))


def _verify(copy: pathlib.Path, tree: pathlib.Path) -> None:
    """The copy has the tree's bytes (diff -r): a fast wrong answer is no answer."""
    done = subprocess.run(["diff", "-r", "-q", str(tree), str(copy)], capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"{copy} differs from the tree: {done.stdout[:500]}{done.stderr[:300]}")


def cpu_seconds(pids: list[int]) -> float:
    """User + system CPU of the processes so far (/proc/PID/stat)."""
    return sum(process_cpu_seconds(pid) for pid in pids)


def process_cpu_seconds(pid: int) -> float:
    """User + system CPU of one process so far (/proc/PID/stat); OSError if it is gone."""
    fields = pathlib.Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")   # utime, stime


def mount_round(where: pathlib.Path, tarball: pathlib.Path, tree: pathlib.Path, entries: int, n: int,
                counts=None, pids=None) -> dict:
    """tar x into ``where``, verify, grep -r, rm -rf: seconds of each. ``counts``: the build's
    NameNode RPC counts (``Build.rpc_counts``), to tell the calls the tar x made; ``pids``: its
    processes (``Build.pids``), to tell the CPU an entry of the tar x cost each."""
    target = where / f"round{n}"
    target.mkdir()
    before = counts() if counts else None
    processes = pids() if pids else {}
    cpu0 = {k: cpu_seconds(v) for k, v in processes.items()}
    tar_s = _timed(["tar", "xf", str(tarball), "-C", str(target)])
    cpu = {k: (cpu_seconds(v) - cpu0[k]) / entries * 1000 for k, v in processes.items()}
    calls = _calls(before, counts()) if counts else None
    _verify(target / tree.name, tree)
    ls_s = _timed(["ls", "-lR", str(target)])
    grep_s = _timed(["grep", "-r", "-l", "def main", str(target)])
    rm_s = _timed(["rm", "-rf", str(target)])
    out = {"tar_x_s": round(tar_s, 3), "tar_x_entries_per_s": round(entries / tar_s, 1),
           "tar_x_ms_per_entry": round(tar_s / entries * 1000, 2),
           "ls_lr_s": round(ls_s, 3), "grep_r_s": round(grep_s, 3), "rm_rf_s": round(rm_s, 3)}
    if cpu:
        out["tar_x_cpu_ms_per_entry"] = {**{k: round(v, 2) for k, v in cpu.items()}, "all": round(sum(cpu.values()), 2)}
    if calls is not None:
        out["tar_x_calls_per_entry"] = {m: round(v / entries, 3) for m, v in sorted(calls.items())}
    return out


def _calls(before: dict, after: dict) -> dict:
    return {m: after.get(m, 0) - before.get(m, 0) for m in after if after.get(m, 0) != before.get(m, 0)}


def abba(sides: dict, measure) -> dict:
    """``measure(name, side, n)`` for each side in the order A B .. B A; {name: [run, run]}."""
    names = list(sides)
    runs: dict[str, list] = {name: [] for name in names}
    for n, name in enumerate(names + names[::-1]):
        runs[name].append(measure(name, sides[name], n))
    return runs


def _load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


ROWS = ("library", "put", "s3", "mount")


def run(*, files: int = 3200, baseline: str | None = "main", gluster: bool = True, s3: bool = True,
        threads: int = 16, rows: tuple[str, ...] = ROWS, log=print) -> dict:
    """``rows``: which groups of rows to measure (all by default): library (creates, stats, RPCs
    per put), put (put -r, and put -r of this build in REPLICATE-3), s3 (aws s3 sync), mount
    (tar x, ls -lR, grep -r, rm -rf through the mounts)."""
    from hedgefs.bench.namenode_run import _baseline_tree, _remove_tree, _shim

    tmp = pathlib.Path(tempfile.mkdtemp(prefix="hedgefs-bench-smallfiles-"))
    result: dict = {"date": datetime.date.today().isoformat(), "load_before": _load(), "files": files,
                    "threads": threads, "rows": list(rows)}
    builds: dict[str, Build] = {}
    baseline_tree = volume = None
    try:
        tree = tmp / "src" / "tree"
        result["tree"] = make_tree(tree, files)
        tarball = tmp / "tree.tar"
        with tarfile.open(tarball, "w") as tar:
            tar.add(tree, arcname=tree.name)
        entries = _count_entries(tree) + 1
        result["tree"]["entries"] = entries
        log(f"tree: {result['tree']}")

        builds["ours"] = Build("ours", None, tmp / "ours")
        if baseline:
            commit = subprocess.run(["git", "-C", str(_HERE.parent), "rev-parse", "--short", baseline],
                                    capture_output=True, text=True, check=True).stdout.strip()
            result["baseline"] = commit
            baseline_tree = _baseline_tree(commit, tmp)
            shim = _shim(baseline_tree, tmp / "shim")
            builds["main"] = Build("main", {**os.environ, "PYTHONPATH": str(shim)}, tmp / "main")
        result["commit"] = subprocess.run(["git", "-C", str(_HERE.parent), "rev-parse", "--short", "HEAD"],
                                          capture_output=True, text=True).stdout.strip()
        result["code"] = {}
        for b in builds.values():
            b.root.mkdir(parents=True)
            result["code"][b.name] = b.code()
        if len(set(result["code"].values())) < len(builds):
            raise RuntimeError(f"the builds run the same code: {result['code']}")
        for b in builds.values():
            log(f"{b.name}: cluster up, mount ...")
            b.up()
            b.mount()

        # ---- library rows: creates of empty files, stats, RPCs per put

        def library(name, b, n):
            before = b.rpc_counts()
            doc = b.ops("--op", "put-rpcs", "--files", "20", "--dir", f"/lib{n}/puts")
            after = b.rpc_counts()
            calls = {m: after.get(m, 0) - before.get(m, 0) for m in after if after.get(m, 0) != before.get(m, 0)}
            doc.update(b.ops("--op", "creates-stats", "--files", str(files), "--threads", str(threads),
                             "--dir", f"/lib{n}/empty"))
            doc["rpcs_per_put"] = {m: round(v / 20, 2) for m, v in sorted(calls.items())}
            return doc

        if "library" in rows:
            log("library: creates of empty files, stats (16 threads), RPCs per one-group put ...")
            result["library"] = abba(builds, library)

        # ---- CLI rows
        def put_r(name, side, n):
            b, policy = side
            before = b.rpc_counts()
            started = time.perf_counter()
            done = b.hedgefs("put", "-r", "-t", str(threads), *(("--policy", policy) if policy else ()), str(tree),
                             f"/putr{n}", check=False)
            elapsed = time.perf_counter() - started
            if done.returncode != 0:
                return {"error": (done.stderr.strip().splitlines() or ["?"])[-1][:300]}
            calls = _calls(before, b.rpc_counts())   # (receipts: all in before each Complete returned)
            return {"seconds": round(elapsed, 3), "files_per_s": round(files / elapsed, 1),
                    "calls_per_file": {m: round(v / files, 3) for m, v in sorted(calls.items())}}

        if "put" in rows:
            log("put -r (this build also in REPLICATE-3: should small files be replicated?) ...")
            sides = {name: (b, None) for name, b in builds.items()}
            sides["ours-rep3"] = (builds["ours"], "REPLICATE-3")
            result["put_r"] = abba(sides, put_r)

        if "s3" not in rows:
            pass
        elif s3 and shutil.which("aws"):
            for b in builds.values():
                b.start_s3()

            def sync(name, b, n):
                env = dict(os.environ, AWS_ACCESS_KEY_ID=b.s3_keys[0], AWS_SECRET_ACCESS_KEY=b.s3_keys[1],
                           AWS_DEFAULT_REGION="us-east-1")
                bucket = f"sync{n}"
                subprocess.run(["aws", "--endpoint-url", b.s3_endpoint, "s3", "mb", f"s3://{bucket}"], env=env,
                               capture_output=True)
                started = time.perf_counter()
                done = subprocess.run(["aws", "--endpoint-url", b.s3_endpoint, "s3", "sync", "--only-show-errors",
                                       str(tree), f"s3://{bucket}/tree"], env=env, capture_output=True, text=True)
                elapsed = time.perf_counter() - started
                if done.returncode != 0:
                    return {"error": done.stderr.strip()[-300:]}
                return {"seconds": round(elapsed, 3), "files_per_s": round(files / elapsed, 1)}

            log("aws s3 sync ...")
            result["s3_sync"] = abba(builds, sync)
        else:
            result["s3_sync_not_run"] = "not asked for" if not s3 else "no aws command"

        # ---- mount rows
        sides: dict[str, pathlib.Path] = {name: b.mountpoint for name, b in builds.items()}
        if "mount" in rows:
            if gluster:
                try:
                    log("GlusterFS: disperse 6+3 on 9 local bricks ...")
                    volume = GlusterVolume(tmp / "gluster").start()
                    sides["glusterfs"] = volume.mountpoint
                except (GlusterUnavailable, subprocess.SubprocessError, OSError) as err:
                    result["glusterfs_unavailable"] = str(err)
                    log(f"GlusterFS not measured: {err}")
                    volume = None
            local = tmp / "local"
            local.mkdir()
            sides["local"] = local
            log(f"mounts, A B B A over {', '.join(sides)}: tar x, grep -r, rm -rf ...")
            result["mount"] = abba(sides, lambda name, where, n: mount_round(
                where, tarball, tree, entries, n, builds[name].rpc_counts if name in builds else None,
                builds[name].pids if name in builds else None))
    finally:
        if volume is not None:
            volume.stop()
        for b in builds.values():
            b.down()
        if baseline_tree is not None:
            _remove_tree(baseline_tree)
        shutil.rmtree(tmp, ignore_errors=True)
    result["load_after"] = _load()
    return result


# ---------------------------------------------------------------------------- the table


def _best(runs: list[dict], key: str, lower: bool = True):
    values = [r[key] for r in runs if key in r]
    if not values:
        return None
    return min(values) if lower else max(values)


def markdown(r: dict) -> str:
    m, lib = r.get("mount", {}), r.get("library", {})
    base = r.get("baseline")
    g = "glusterfs" if "glusterfs" in m else None

    def cell(v, fmt="{:,.1f}"):
        return "-" if v is None else fmt.format(v)

    def ratio(a, b, fmt="{:.2f}x"):
        return "-" if a is None or b is None or not b else fmt.format(a / b)

    lines = [f"`{r['command']}` on {r['date']}, this build {r.get('commit')}"
             + (f", baseline {r['baseline']}" if base else "") + f"; load average before {r['load_before']}, "
             f"after {r.get('load_after')}. Tree: {r['tree']['files']:,} files, {r['tree']['dirs']} directories, "
             f"{r['tree']['bytes'] / 1e6:.1f} MB ({r['tree']['entries']:,} entries). Each side run twice, "
             "A B B A; the better run shown."
             + (" Code: " + ", ".join(f"{k} from {v}" for k, v in r["code"].items()) + "." if r.get("code") else ""), ""]
    if "glusterfs_unavailable" in r:
        lines += [f"GlusterFS not run: {r['glusterfs_unavailable']}", ""]
    lines += ["| measure | this build | baseline (main) | GlusterFS | local disk | ours / main | ours / GlusterFS |",
              "|---|---|---|---|---|---|---|"]
    for key, label, lower, unit in [("tar_x_entries_per_s", "`tar x` into the mount, entries/s", False, ""),
                                    ("tar_x_ms_per_entry", "`tar x`: ms an entry", True, ""),
                                    ("rm_rf_s", "`rm -rf` of the tree through the mount, s", True, ""),
                                    ("ls_lr_s", "`ls -lR` of it through the mount, s", True, ""),
                                    ("grep_r_s", "`grep -r -l` over it through the mount, s", True, "")]:
        vals = {side: _best(m.get(side, []), key, lower) for side in ("ours", "main", "glusterfs", "local")}
        fmt = "{:,.1f}" if key == "tar_x_entries_per_s" else "{:,.2f}"
        lines.append(f"| {label} | {cell(vals['ours'], fmt)} | {cell(vals['main'], fmt)} | {cell(vals['glusterfs'], fmt)} | "
                     f"{cell(vals['local'], '{:,.2f}')} | {ratio(vals['ours'], vals['main'])} | "
                     f"{ratio(vals['ours'], vals['glusterfs'])} |")
    cpu = {side: [run["tar_x_cpu_ms_per_entry"] for run in m.get(side, []) if "tar_x_cpu_ms_per_entry" in run]
           for side in ("ours", "main")}
    if cpu["ours"]:
        best = {side: min(runs, key=lambda c: c["all"]) if runs else None for side, runs in cpu.items()}
        for part in ("all", "mount", "namenode", "datanodes"):
            v = {side: best[side][part] if best[side] else None for side in best}
            lines.append(f"| `tar x`: CPU an entry, {'all processes' if part == 'all' else 'the ' + part}, ms | "
                         f"{cell(v['ours'], '{:.2f}')} | {cell(v['main'], '{:.2f}')} | | | "
                         f"{ratio(v['ours'], v['main'])} | |")
    put = {side: _best(runs, "files_per_s", False) for side, runs in r.get("put_r", {}).items()}
    lines.append(f"| `hedgefs put -r` of the tree, files/s | {cell(put.get('ours'))} | {cell(put.get('main'))} "
                 f"| | | {ratio(put.get('ours'), put.get('main'))} | |")
    if put.get("ours-rep3") is not None:
        lines.append(f"| ... this build with `--policy REPLICATE-3`, files/s | {cell(put.get('ours-rep3'))} | | | | "
                     f"{ratio(put.get('ours-rep3'), put.get('ours'))} of RS-6-3 | |")
    if "s3_sync" in r:
        s3 = {side: _best(runs, "files_per_s", False) for side, runs in r["s3_sync"].items()}
        lines.append(f"| `aws s3 sync` of the tree to the gateway, files/s | {cell(s3.get('ours'))} | "
                     f"{cell(s3.get('main'))} | | | {ratio(s3.get('ours'), s3.get('main'))} | |")
        lines.append(f"| ... as a share of `put -r` (target >= 0.5) | {ratio(s3.get('ours'), put.get('ours'))} | "
                     f"{ratio(s3.get('main'), put.get('main'))} | | | | |")
    for key, label in [] if not lib else [("stats_per_s", f"stat of {r['files']:,} files through the library, {r['threads']} threads, /s"),
                       ("creates_per_s", f"creates of empty files through the library, {r['threads']} threads, /s")]:
        v = {side: _best(runs, key, False) for side, runs in lib.items()}
        lines.append(f"| {label} | {cell(v.get('ours'))} | {cell(v.get('main'))} | | | "
                     f"{ratio(v.get('ours'), v.get('main'))} | |")

    def per_put(side):
        runs = lib.get(side)
        if not runs:
            return None, ""
        calls = runs[-1]["rpcs_per_put"]
        client = {k: v for k, v in calls.items() if k not in DATANODE_METHODS}
        dn = {k: v for k, v in calls.items() if k in DATANODE_METHODS}
        return sum(client.values()), ", ".join(f"{k} {v:g}" for k, v in client.items()) + (
            f"; from DataNodes: {', '.join(f'{k} {v:g}' for k, v in dn.items())}" if dn else "")

    def per_entry(runs, key):
        if not runs or key not in runs[-1]:
            return None, ""
        calls = runs[-1][key]
        client = {k: v for k, v in calls.items() if k not in DATANODE_METHODS}
        return sum(client.values()), ", ".join(f"{k} {v:g}" for k, v in client.items())

    tar = {side: per_entry(m.get(side), "tar_x_calls_per_entry") for side in ("ours", "main")}
    if tar["ours"][0] is not None:
        lines.append(f"| NameNode RPCs per `tar x` entry (the mount's) | {cell(tar['ours'][0], '{:.2f}')} | "
                     f"{cell(tar['main'][0], '{:.2f}')} | | | {ratio(tar['ours'][0], tar['main'][0])} | |")
    stored = {side: (r.get("put_r", {}).get(side) or [{}])[-1].get("calls_per_file", {}).get("UnitStored")
              for side in ("ours", "main")}
    if stored["ours"] is not None:
        lines.append(f"| receipt calls (UnitStored) per file of `put -r` ({r['threads']} threads) | "
                     f"{cell(stored['ours'], '{:.2f}')} | {cell(stored['main'], '{:.2f}')} | | | "
                     f"{ratio(stored['ours'], stored['main'])} | |")
    notes = [f"RPCs per tar x entry, this build: {tar['ours'][1]}",
             f"RPCs per tar x entry, baseline: {tar['main'][1]}"] if tar["ours"][0] is not None else []
    if not lib:
        return "\n".join(lines + ([""] + notes if notes else []))
    ours_calls, ours_detail = per_put("ours")
    main_calls, main_detail = per_put("main")
    lines.append(f"| NameNode RPCs per one-group file put (client's) | {cell(ours_calls, '{:g}')} | "
                 f"{cell(main_calls, '{:g}')} | | | | |")
    lines += ["", f"RPCs per put, this build: {ours_detail}", f"RPCs per put, baseline: {main_detail}"] + notes
    return "\n".join(lines)


DATANODE_METHODS = {"RegisterDataNode", "Heartbeat", "BlockReport", "UnitStored"}


def save(result: dict, out_dir: str) -> str:
    os.makedirs(out_dir, exist_ok=True)
    base = os.path.join(out_dir, f"{result['date']}-smallfiles")
    with open(base + ".json", "w") as f:
        json.dump(result, f, indent=1)
    with open(base + ".md", "w") as f:
        f.write("# Many small files: hedgefs (this build, main) beside GlusterFS and the local disk\n\n"
                + markdown(result) + "\n")
    return base
