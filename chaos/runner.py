"""Chaos, part 2: run a schedule (schedule.py) under concurrent writers and readers, one invariant
after every step.

    seed ──> schedule (every step drawn up front: printable, diffable, a prefix of any longer run)
              │
    cluster <─┤ apply step n: kill / freeze / thaw / restart a DataNode, set or clear a fault
              │ (delay, bandwidth, stall, error, corrupt, wire), flip bits of units on a DataNode's
              │ disk (rot), kill -9 + restart the NameNode
              │ ... writers and readers run all along ...
              └ check: every file whose put returned success reads back with its SHA-256
    end: clear every fault, thaw and start everything, every file must read, fsck -> HEALTHY

A DataNode is *lost* while it is killed, frozen, stalled, erroring or corrupting (a delay or a
bandwidth cap only makes it slow). The schedule never loses more DataNodes than the policy's m,
except in steps it marks BEYOND TOLERANCE. The check is per block group, from the unit map the
NameNode returns: a group with at least k units on DataNodes that are not lost must read back
(a clean failure is retried for a few seconds: a restarted process needs a moment to be
reachable again); a group with fewer may fail, but only cleanly (a HedgefsError). Wrong bytes
are never excused. A unit whose bytes the schedule rotted on disk counts as unreadable until the
NameNode maps it elsewhere (the scrubber or a reader found it, and it was repaired). Whatever the
NameNode map excuses here is checked again at the end, when nothing is excused, and every rotten
unit must by then have been found, repaired and deleted from its disk.

Everything random comes from the seed: the schedule, file sizes and contents, what readers
read. Timing is not, so which puts succeed differs between runs of the same seed.

This module runs the steps and reports; actions.py applies a step (and heals at the end),
workload.py holds the writers and readers, invariant.py the check.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import re
import shutil
import tempfile
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Callable

from hedgefs.chaos import actions, invariant, workload
from hedgefs.chaos.common import StoredFile, short
from hedgefs.chaos.schedule import BLOCK_SIZE, POLICY, REPLICATED, ChaosConfig, Step, generate_schedule
from hedgefs.client.config import HedgeConfig
from hedgefs.client.errors import HedgefsError
from hedgefs.client.fs import FileSystem
from hedgefs.client.metrics import LatencyHistogram
from hedgefs.cluster.launcher import LocalCluster, Options
from hedgefs.proto import hedgefs_pb2 as pb

JOIN_S = 90.0                             # writers and readers must stop within this after healing
SCRUB_INTERVAL_S = 2.0                    # the DataNodes' scrubbers: rotten units are found within a few s
SUMMARY_KEYS = ("seed", "steps", "files", "bytes_verified", "reads", "hedges", "hedge_wins", "breaker_trips",
                "repairs", "units_rotted", "wrong_bytes", "clean_failures", "p99_ms", "max_ms")


# ---------------------------------------------------------------------------- report

@dataclasses.dataclass
class Report:
    seed: int
    steps: int = 0
    files: int = 0
    bytes_verified: int = 0
    reads: int = 0
    hedges: int = 0
    hedge_wins: int = 0
    breaker_trips: int = 0
    repairs: int = 0
    units_rotted: int = 0                 # units with a byte flipped on disk by the schedule
    wrong_bytes: int = 0
    clean_failures: int = 0
    p99_ms: float = 0.0
    max_ms: float = 0.0
    failed_step: int | None = None        # the first step whose check failed (0 = the final check)
    problems: list[str] = dataclasses.field(default_factory=list)
    notes: list[str] = dataclasses.field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.wrong_bytes == 0 and self.failed_step is None

    def summary(self) -> dict:
        return {key: getattr(self, key) for key in SUMMARY_KEYS}


# ---------------------------------------------------------------------------- the run

class Chaos:
    """One run: the cluster, the schedule, the report, and the state its parts share. actions.py applies
    the steps, workload.py writes and reads, invariant.py checks; each takes this object."""

    def __init__(self, config: ChaosConfig, root: str | Path, out: Callable[[str], None] = print):
        self.config = config
        self.cluster = LocalCluster(root)
        self.out = out
        self.schedule = generate_schedule(config.seed, config.steps, config.datanodes)
        self.report = Report(seed=config.seed)
        self.latency = LatencyHistogram()
        self.lock = threading.Lock()
        self.files: dict[str, StoredFile] = {}
        self.stop = threading.Event()
        self.step = 0                     # the step being applied or checked
        self.pending: list[str] = []      # problems found between checks (readers, late reads)
        self.repairs_before = 0           # repairs_done of NameNodes since killed
        self.write_failures = 0
        self.check_line = ""
        self.excused: list[str] = []      # files whose failed read the last check allowed, and why
        self.slowest = (0.0, "")
        self.retries = 0                  # reads that must succeed, retried after a clean failure
        # (group, index, DataNode) -> the rotted copy (the DataNode's Rot reply) of every unit the schedule rotted
        self.rotted: dict[tuple[int, int, str], pb.RottedUnit] = {}
        self.failure_kinds: Counter[str] = Counter()

    # ------------------------------------------------------------------ top level

    def run(self) -> Report:
        with _AsyncioErrors() as asyncio_errors, _client_log(self.cluster.root / "logs" / "client.log"):
            try:
                return self._run()
            finally:
                self.report.notes += asyncio_errors.notes()

    def _run(self) -> Report:
        c = self.config
        self.cluster.up(Options(datanodes=c.datanodes, namenode_port=0, policy=POLICY.name, block_size=BLOCK_SIZE,
                                heartbeat_interval_s=0.3, dead_interval_s=3.0, repair_interval_s=0.3, fsync=False,
                                scrub_interval_s=SCRUB_INTERVAL_S, secure=c.secure))
        self.out(f"cluster: {self.cluster.root} (NameNode {self.cluster.namenode}, {c.datanodes} DataNodes, "
                 f"{POLICY.name} and {REPLICATED.name}, {BLOCK_SIZE // 1024} KiB blocks{', secure' if c.secure else ''})")
        # The checker never waits out a breaker or an extra-read budget.
        verify_hedge = HedgeConfig(max_impaired_nodes=1000, max_per_second=100_000, budget_pct=1000)
        nn, cred = self.cluster.namenode, self.cluster.credentials
        with FileSystem(nn, credentials=cred) as wfs, FileSystem(nn, credentials=cred) as rfs, \
                FileSystem(nn, hedge=verify_hedge, credentials=cred) as vfs, ThreadPoolExecutor(4) as pool:
            self.vfs, self.pool = vfs, pool
            for w in range(c.writers):
                wfs.mkdir(f"/chaos/w{w}", parents=True)
            workers = [threading.Thread(target=workload.writer, args=(self, wfs, w), name=f"writer-{w}",
                                        daemon=True) for w in range(c.writers)]
            workers += [threading.Thread(target=workload.reader, args=(self, rfs, r), name=f"reader-{r}",
                                         daemon=True) for r in range(c.readers)]
            for t in workers:
                t.start()
            try:
                for step in self.schedule:
                    self.step = step.number
                    if not self._run_step(step):
                        break
                self._finish(workers)
            finally:
                self.stop.set()
                for fs in (rfs, vfs):
                    s = fs.stats()
                    self.report.reads += s.counters["reads"]
                    self.report.hedges += s.counters["hedges"]
                    self.report.hedge_wins += s.counters["hedge_wins"]
                    self.report.breaker_trips += s.breaker_trips
        if self.slowest[1]:
            self.report.notes.append(f"slowest read: {self.slowest[0]:.1f} s, {self.slowest[1]}")
        self.report.p99_ms = round(self.latency.percentile(99) * 1000, 1)
        self.report.max_ms = round(self.latency.max_s * 1000, 1)
        return self.report

    def _run_step(self, step: Step) -> bool:
        started = time.monotonic()
        writes_before = (self.report.files, self.write_failures)
        problems = actions.apply(self, step)
        self.check_line, self.excused = "(not checked)", []
        self.stop.wait(step.dwell_s)
        if not problems:
            problems = invariant.check(self, step.lost, step)
        self.report.steps = step.number
        status = "ok  " if not problems else "FAIL"
        self.out(f"check {step.number:3d} {status} {self.check_line}  puts +{self.report.files - writes_before[0]} "
                 f"(failed {self.write_failures - writes_before[1]})  {time.monotonic() - started:.1f} s")
        for line in self.excused[:3]:
            self.out(f"          {line}")
        if problems:
            self._fail(step.number, problems)
            return False
        return True

    def _fail(self, step: int, problems: list[str]) -> None:
        self.report.failed_step = step
        self.report.problems += problems
        where = f"step {step}" if step else "the final check"
        self.out(f"FAILED at {where}:")
        for p in problems[:10]:
            self.out(f"  {p}")
        if len(problems) > 10:
            self.out(f"  ... and {len(problems) - 10} more")
        if step:
            self.out(f"  replay: {self.config.replay_command(step)}")
        self.out(f"  logs: {self.cluster.root / 'logs'}")

    # ------------------------------------------------------------------ the end

    def _finish(self, workers: list[threading.Thread]) -> None:
        self.stop.set()
        self.out("final: clearing every fault, thawing and starting every process")
        problems = actions.heal(self)
        deadline = time.monotonic() + JOIN_S
        for t in workers:
            t.join(max(0.0, deadline - time.monotonic()))
        problems += [f"{t.name} still busy {JOIN_S:.0f} s after the cluster was healed (a hang)"
                     for t in workers if t.is_alive()]
        if not problems:
            self.step = 0
            problems = invariant.check(self, (), None)
            self.out(f"final: {self.check_line}")
        if not problems:
            problems = invariant.wait_healthy(self)
        if not problems:
            problems = invariant.wait_rot_gone(self)
        self.report.repairs = self.repairs_before + actions.repairs_done(self)
        if problems and self.report.failed_step is None:
            self._fail(0, problems)


@contextlib.contextmanager
def _client_log(path: Path):
    """The client's log (units lost while writing, hedges, rebuilds) goes to logs/client.log, beside
    the servers' logs: under chaos it is evidence, not news for the terminal (unless -v)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handler = logging.FileHandler(path)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s [%(threadName)s]: %(message)s"))
    log = logging.getLogger("hedgefs")
    saved = log.level, log.propagate
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    log.propagate = logging.getLogger().level <= logging.DEBUG
    try:
        yield
    finally:
        log.removeHandler(handler)
        handler.close()
        log.setLevel(saved[0])
        log.propagate = saved[1]


class _AsyncioErrors(logging.Handler):
    """Counts what asyncio logs (e.g. 'Task exception was never retrieved') instead of printing each."""

    def __init__(self):
        super().__init__(logging.ERROR)
        self.counts: Counter[str] = Counter()
        self.first: dict[str, str] = {}

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage().splitlines()[0]
        key = re.sub(r"Task-\d+|0x[0-9a-f]+|\d+", "N", message)[:120]
        self.counts[key] += 1
        if key not in self.first and record.exc_info:
            err = record.exc_info[1]
            self.first[key] = f"{type(err).__name__}: {short(err)}"

    def __enter__(self) -> "_AsyncioErrors":
        self._log = logging.getLogger("asyncio")
        self._propagate = self._log.propagate
        self._log.addHandler(self)
        self._log.propagate = False
        return self

    def __exit__(self, *exc) -> None:
        self._log.removeHandler(self)
        self._log.propagate = self._propagate

    def notes(self) -> list[str]:
        return [f"asyncio logged {n} x {key!r} (first: {self.first.get(key, '-')})" for key, n in self.counts.items()]



# ---------------------------------------------------------------------------- entry point

def run_chaos(config: ChaosConfig, root: str | None = None, keep: bool = False,
              out: Callable[[str], None] = print) -> Report:
    """Print the seed and schedule, run it on a fresh local cluster, print and return the report.

    The cluster directory (a temporary one unless `root`) is removed afterwards unless the run
    failed or `keep`.
    """
    out(f"chaos: seed {config.seed}")
    directory = Path(root) if root else Path(tempfile.mkdtemp(prefix="hedgefs-chaos-"))
    if root and directory.exists() and any(directory.iterdir()):
        raise HedgefsError(f"--dir {root} is not empty: chaos needs a fresh directory for its cluster")
    chaos = Chaos(config, directory / "cluster" if not root else directory, out)
    out(f"schedule: {config.steps} steps, {config.datanodes} DataNodes, {config.writers} writers, "
        f"{config.readers} readers; tolerance m = {POLICY.m}")
    for step in chaos.schedule:
        out(step.line())
    started = time.monotonic()
    try:
        report = chaos.run()
    finally:
        chaos.cluster.down()
    r = report
    out(f"report: steps {r.steps}, files {r.files}, bytes verified {r.bytes_verified} "
        f"({r.bytes_verified / 2**20:.1f} MiB), reads {r.reads}, hedges {r.hedges} (wins {r.hedge_wins}), "
        f"breaker trips {r.breaker_trips}, repairs {r.repairs}, units rotted {r.units_rotted}, wrong bytes {r.wrong_bytes}, "
        f"clean failures {r.clean_failures}, read p99 {r.p99_ms:.0f} ms, max {r.max_ms:.0f} ms "
        f"({time.monotonic() - started:.0f} s)")
    for kind, n in chaos.failure_kinds.most_common(8):
        out(f"clean failures: {n:6d} x {kind}")
    for note in r.notes:
        out(f"note: {note}")
    if r.ok and not keep:
        shutil.rmtree(directory, ignore_errors=True)
    else:
        out(f"cluster directory kept: {directory}")
    out("result: PASS" if r.ok else f"result: FAIL (replay: {config.replay_command(r.failed_step or config.steps)})")
    return report