"""Chaos, part 2: run a schedule (schedule.py) under concurrent writers and readers, one invariant
after every step.

    seed ──> schedule (every step drawn up front: printable, diffable, a prefix of any longer run)
              │
    cluster <─┤ apply step n: kill / freeze / thaw / restart a DataNode, set or clear a fault
              │ (delay, bandwidth, stall, error, corrupt, wire), flip bits of units on a DataNode's
              │ disk (rot), kill -9 + restart the NameNode
              │ ... writers and readers run all along ...
              └ check: every file whose put returned success reads back with its SHA-256
    end: clear every fault, thaw and start everything, every file must read, fsck -> HEALTHY,
         every acknowledged put and delete is reflected in the namespace (namespace.py)

With --hosts the DataNodes run on hosts in network namespaces, in racks, and the schedule kills
whole hosts, partitions racks and slows racks as a whole too (hosts.py).

With --ha the cluster has 3 etcd members and 2 NameNodes, and the schedule kills and freezes the
active NameNode and kills etcd members too (ha.py); a poller records every NameNode's role and
epoch all along, and at the end no two may have been active at once.

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

from hedgefs.chaos import actions, ha, hosts, invariant, namespace, workload
from hedgefs.chaos.common import StoredFile, short
from hedgefs.chaos.schedule import (BLOCK_SIZE, HA_ACTIONS, HOST_ACTIONS, POLICY, REPLICATED, ChaosConfig, Step,
                                    generate_schedule)
from hedgefs.client.config import HedgeConfig
from hedgefs.client.errors import HedgefsError
from hedgefs.client.fs import FileSystem
from hedgefs.client.metrics import LatencyHistogram
from hedgefs.cluster.launcher import ClusterError, LocalCluster, Options
from hedgefs.proto import hedgefs_pb2 as pb

JOIN_S = 90.0                             # writers and readers must stop within this after healing
SCRUB_INTERVAL_S = 2.0                    # the DataNodes' scrubbers: rotten units are found within a few s
# A writer the NameNode lost (a put that failed at a NameNode kill) leaves its file open until its
# lease runs out, and a rotted unit of that file goes only then: well inside the final check's wait.
LEASE_S = 30.0
SUMMARY_KEYS = ("seed", "steps", "files", "appends", "hsyncs", "truncates", "bytes_verified", "reads", "hedges", "hedge_wins", "breaker_trips",
                "repairs", "units_rotted", "wrong_bytes", "clean_failures", "p99_ms", "max_ms",
                "ns_acknowledged", "ns_unknown", "ns_failed", "ns_lost")
HA_KEYS = ("failovers", "epochs", "dual_active", "commands_refused")


# ---------------------------------------------------------------------------- report

@dataclasses.dataclass
class Report:
    seed: int
    steps: int = 0
    files: int = 0
    appends: int = 0                      # appends and truncates acknowledged (workload.py: change)
    truncates: int = 0
    hsyncs: int = 0                       # hsyncs acknowledged (appends written in pieces)
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
    ns_acknowledged: int = 0              # puts and deletes that returned (namespace.py)
    ns_unknown: int = 0                   # failed UNAVAILABLE: may or may not have happened
    ns_failed: int = 0
    ns_lost: int = 0                      # acknowledged and not reflected at the end
    ha: bool = False
    failovers: int = 0                    # --ha: the active killed or frozen
    epochs: int = 0                       # distinct epochs seen active
    dual_active: int = 0                  # claims that break "one active at a time" (ha.py)
    commands_refused: int = 0             # DataNodes' refused NameNode commands (since their last start)
    failed_step: int | None = None        # the first step whose check failed (0 = the final check)
    problems: list[str] = dataclasses.field(default_factory=list)
    notes: list[str] = dataclasses.field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.wrong_bytes == 0 and self.failed_step is None and self.ns_lost == 0 and self.dual_active == 0

    def summary(self) -> dict:
        return {key: getattr(self, key) for key in SUMMARY_KEYS + (HA_KEYS if self.ha else ())}


# ---------------------------------------------------------------------------- the run

class Chaos:
    """One run: the cluster, the schedule, the report, and the state its parts share. actions.py applies
    the steps, workload.py writes and reads, invariant.py checks; each takes this object."""

    def __init__(self, config: ChaosConfig, root: str | Path, out: Callable[[str], None] = print, spawn=None):
        self.config = config
        self.cluster = LocalCluster(root, spawn=spawn)
        self.out = out
        self.schedule = generate_schedule(config.seed, config.steps, config.datanodes, ha=config.ha,
                                          hosts=config.hosts, racks=config.racks)
        self.report = Report(seed=config.seed, ha=config.ha)
        self.latency = LatencyHistogram()
        self.lock = threading.Lock()
        self.files: dict[str, StoredFile] = {}
        self.changing: set[str] = set()   # paths being appended to or truncated (workload.change)
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
        self.journal: list[namespace.Operation] = []   # every put and delete, with its outcome
        self.down: set[str] = set()       # --ha: NameNodes and etcd members the schedule stopped
        self.poller = ha.RolePoller(self) if config.ha else None

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
                                lease_timeout_s=LEASE_S,
                                scrub_interval_s=SCRUB_INTERVAL_S, secure=c.secure, ha=c.ha, hosts=c.hosts,
                                racks=c.racks if c.hosts else 1))
        if self.poller:
            self.poller.start()
        self.out(f"cluster: {self.cluster.root} ({'3 etcd members, NameNodes' if c.ha else 'NameNode'} "
                 f"{self.cluster.namenode}, {c.datanodes} DataNodes, "
                 f"{f'on {c.hosts} hosts in {c.racks} racks, ' if c.hosts else ''}"
                 f"{POLICY.name} and {REPLICATED.name}, {BLOCK_SIZE // 1024} KiB blocks{', secure' if c.secure else ''})")
        # The checker never waits out a breaker or an extra-read budget.
        verify_hedge = HedgeConfig(max_impaired_nodes=1000, max_per_second=100_000, budget_pct=1000)
        nn, cred = self.cluster.namenode, self.cluster.credentials
        with FileSystem(nn, credentials=cred) as wfs, FileSystem(nn, credentials=cred) as rfs, \
                FileSystem(nn, hedge=verify_hedge, credentials=cred) as vfs, ThreadPoolExecutor(4) as pool:
            self.vfs, self.pool = vfs, pool
            rfs.observe_reads(_SlowFetchLog("reader"))
            vfs.observe_reads(_SlowFetchLog("checker"))
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
                if self.poller:
                    self.poller.halt.set()
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
        problems = ha.apply(self, step) if step.action in HA_ACTIONS else \
            hosts.apply(self, step) if step.action in HOST_ACTIONS else actions.apply(self, step)
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
        try:
            if self.config.ha:
                ha.heal(self)
        except (ClusterError, TimeoutError, OSError) as err:
            problems = [f"healing the NameNodes and etcd failed: {short(err)}"]
        else:
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
        if not problems:
            problems = namespace.check(self)
            r = self.report
            self.out(f"final: namespace: {r.ns_acknowledged} operations acknowledged, {r.ns_unknown} unknown, "
                     f"{r.ns_failed} failed; {r.ns_lost} not reflected")
        if self.poller:
            self.poller.halt.set()
            self.poller.join(10)
            claims = self.poller.claims()
            roles = ha.check_roles(claims)
            ha.summarize(self, claims)
            self.report.dual_active = len(roles)
            self.out(f"final: roles: {len(claims)} answers, {self.report.epochs} epochs active, "
                     f"{self.report.dual_active} dual-active claims")
            problems += roles
        self.report.repairs = self.repairs_before + actions.repairs_done(self)
        if problems and self.report.failed_step is None:
            self._fail(0, problems)


SLOW_FETCH_S = 5.0   # a range fetch that took this long is written to client.log, unit read by unit read


class _SlowFetchLog:
    """Evidence for a slow or hung read: every range fetch that took SLOW_FETCH_S or more, with
    each of its unit reads (DataNode, role, when sent and ended, and how), in client.log."""

    def __init__(self, who: str):
        self.who = who

    def __call__(self, report) -> None:
        took = report.ended - report.began
        if took < SLOW_FETCH_S:
            return
        reads = "; ".join(f"{u.index}@{u.datanode or '-'} {u.role} +{u.sent_at - report.began:.2f}.."
                          f"{f'+{u.ended_at - report.began:.2f}' if u.ended_at is not None else 'running'} {u.state}"
                          for u in report.units)
        logging.getLogger("hedgefs.chaos").info(
            "%s: slow fetch of group %d [%d, %d): %.1f s, %s: %s", self.who, report.group_id, report.start,
            report.end, took, "ok" if report.ok else "failed", reads)


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
              out: Callable[[str], None] = print, spawn=None) -> Report:
    """Print the seed and schedule, run it on a fresh local cluster, print and return the report.
    ``spawn``: how the cluster starts its servers (cluster/launcher.py's LocalCluster; the tests fork them).

    The cluster directory (a temporary one unless `root`) is removed afterwards unless the run
    failed or `keep`.
    """
    out(f"chaos: seed {config.seed}")
    directory = Path(root) if root else Path(tempfile.mkdtemp(prefix="hedgefs-chaos-"))
    if root and directory.exists() and any(directory.iterdir()):
        raise HedgefsError(f"--dir {root} is not empty: chaos needs a fresh directory for its cluster")
    chaos = Chaos(config, directory / "cluster" if not root else directory, out, spawn)
    out(f"schedule: {config.steps} steps, {config.datanodes} DataNodes{' (HA)' if config.ha else ''}, "
        f"{config.writers} writers, "
        f"{config.readers} readers; tolerance m = {POLICY.m}")
    for step in chaos.schedule:
        out(step.line())
    started = time.monotonic()
    try:
        report = chaos.run()
    finally:
        chaos.cluster.down()
    r = report
    out(f"report: steps {r.steps}, files {r.files}, appends {r.appends} ({r.hsyncs} hsyncs), truncates {r.truncates}, bytes verified {r.bytes_verified} "
        f"({r.bytes_verified / 2**20:.1f} MiB), reads {r.reads}, hedges {r.hedges} (wins {r.hedge_wins}), "
        f"breaker trips {r.breaker_trips}, repairs {r.repairs}, units rotted {r.units_rotted}, wrong bytes {r.wrong_bytes}, "
        f"clean failures {r.clean_failures}, read p99 {r.p99_ms:.0f} ms, max {r.max_ms:.0f} ms, "
        f"namespace ops acknowledged {r.ns_acknowledged} (unknown {r.ns_unknown}, failed {r.ns_failed}, "
        f"lost {r.ns_lost})" + (f", failovers {r.failovers}, epochs {r.epochs}, dual active {r.dual_active}, "
                                f"commands refused {r.commands_refused}" if r.ha else "")
        + f" ({time.monotonic() - started:.0f} s)")
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