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
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import logging
import os
import random
import re
import shutil
import tempfile
import threading
import time
import traceback
from collections import Counter, deque
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Callable

import grpc

from hedgefs.chaos.schedule import (
    BLOCK_SIZE,
    POLICY,
    REPLICATED,
    ChaosConfig,
    Step,
    differing_bytes,
    file_content,
    file_size,
    generate_schedule,
)
from hedgefs.client.config import HedgeConfig
from hedgefs.client.errors import HedgefsError, NotFound, Unavailable
from hedgefs.client.fs import FileSystem
from hedgefs.client.metrics import LatencyHistogram
from hedgefs.cluster.launcher import ClusterError, LocalCluster, Options
from hedgefs.ec.policy import parse_policy
from hedgefs.proto import hedgefs_pb2 as pb

RETRY_S = 10.0                            # a read that must succeed may fail cleanly this long
HANG_S = 30.0                             # a read that must succeed and has not returned: a hang
EXCUSED_WAIT_S = 8.0                      # how long a read that may fail is waited for
JOIN_S = 90.0                             # writers and readers must stop within this after healing
FSCK_S = 120.0                            # fsck must say HEALTHY within this after healing
SCRUB_INTERVAL_S = 2.0                    # the DataNodes' scrubbers: rotten units are found within a few s
SUMMARY_KEYS = ("seed", "steps", "files", "bytes_verified", "reads", "hedges", "hedge_wins", "breaker_trips",
                "repairs", "units_rotted", "wrong_bytes", "clean_failures", "p99_ms", "max_ms")


@dataclasses.dataclass(frozen=True)
class StoredFile:
    path: str
    data: bytes
    sha256: str
    step: int                             # the step during which its put returned


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
    def __init__(self, config: ChaosConfig, root: str | Path, out: Callable[[str], None] = print):
        self.config = config
        self.cluster = LocalCluster(root)
        self.out = out
        self.schedule = generate_schedule(config.seed, config.steps, config.datanodes)
        self.report = Report(seed=config.seed)
        self.latency = LatencyHistogram()
        self._lock = threading.Lock()
        self._files: dict[str, StoredFile] = {}
        self._stop = threading.Event()
        self._step = 0                    # the step being applied or checked
        self._pending: list[str] = []     # problems found between checks (readers, late reads)
        self._repairs_before = 0          # repairs_done of NameNodes since killed
        self._write_failures = 0
        self._check_line = ""
        self._excused: list[str] = []     # files whose failed read the last check allowed, and why
        self._slowest = (0.0, "")
        self._retries = 0                 # reads that must succeed, retried after a clean failure
        # (group, index, DataNode) -> (block file, inode) of every unit the schedule rotted
        self._rotted: dict[tuple[int, int, str], tuple[Path, int]] = {}
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
            workers = [threading.Thread(target=self._writer, args=(wfs, w), name=f"writer-{w}", daemon=True)
                       for w in range(c.writers)]
            workers += [threading.Thread(target=self._reader, args=(rfs, r), name=f"reader-{r}", daemon=True)
                        for r in range(c.readers)]
            for t in workers:
                t.start()
            try:
                for step in self.schedule:
                    self._step = step.number
                    if not self._run_step(step):
                        break
                self._finish(workers)
            finally:
                self._stop.set()
                for fs in (rfs, vfs):
                    s = fs.stats()
                    self.report.reads += s.counters["reads"]
                    self.report.hedges += s.counters["hedges"]
                    self.report.hedge_wins += s.counters["hedge_wins"]
                    self.report.breaker_trips += s.breaker_trips
        if self._slowest[1]:
            self.report.notes.append(f"slowest read: {self._slowest[0]:.1f} s, {self._slowest[1]}")
        self.report.p99_ms = round(self.latency.percentile(99) * 1000, 1)
        self.report.max_ms = round(self.latency.max_s * 1000, 1)
        return self.report

    def _run_step(self, step: Step) -> bool:
        started = time.monotonic()
        writes_before = (self.report.files, self._write_failures)
        problems = self._apply(step)
        self._check_line, self._excused = "(not checked)", []
        self._stop.wait(step.dwell_s)
        if not problems:
            problems = self._check(step.lost, step)
        self.report.steps = step.number
        status = "ok  " if not problems else "FAIL"
        self.out(f"check {step.number:3d} {status} {self._check_line}  puts +{self.report.files - writes_before[0]} "
                 f"(failed {self._write_failures - writes_before[1]})  {time.monotonic() - started:.1f} s")
        for line in self._excused[:3]:
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

    # ------------------------------------------------------------------ applying a step

    def _apply(self, step: Step) -> list[str]:
        c, dn = self.cluster, step.target
        try:
            if step.action == "kill":
                c.kill(dn)
            elif step.action == "freeze":
                c.freeze(dn)
            elif step.action == "thaw":
                c.thaw(dn)
            elif step.action == "restart":
                c.restart(dn)
            elif step.action == "fault" and step.fault == "rot":
                self._rot(step)
            elif step.action == "fault":
                self._datanode_rpc(dn, "ClearFaults", pb.FaultClearRequest())
                self._datanode_rpc(dn, "SetFaults", step.fault_config())
            elif step.action == "clear":
                self._datanode_rpc(dn, "ClearFaults", pb.FaultClearRequest())
            elif step.action == "nn-restart":
                self._repairs_before += self._repairs_done()
                c.kill("namenode")
                c.start("namenode")
                self._wait_namenode()
        except (ClusterError, grpc.RpcError, HedgefsError) as err:
            return [f"step {step.number} ({step.action} {dn}) could not be applied: {_short(err)}"]
        return []

    def _rot(self, step: Step) -> None:
        """Flip one bit in each of ``units`` block files on the DataNode's disk (units nobody may be
        reading: bit rot is found by the scrubber, or by a reader, or not at all)."""
        knobs = dict(step.knobs)
        rng = random.Random(f"hedgefs-chaos/{self.config.seed}/rot/{step.number}/{knobs['salt']}")
        blocks = sorted((self.cluster.root / step.target / "blocks").glob("*/*.blk"))
        flipped = []
        for path in rng.sample(blocks, min(knobs["units"], len(blocks))):
            # <group>_<index>_<generation>_<version>.blk (datanode/storage.py)
            name = re.fullmatch(r"(\d+)_(\d+)(?:_\d+){0,2}\.blk", path.name)
            if name is None:
                continue
            group_id, index = int(name[1]), int(name[2])
            try:
                with open(path, "r+b") as f:
                    size = f.seek(0, 2)
                    if size == 0:
                        continue
                    offset = rng.randrange(size)
                    f.seek(offset)
                    byte = f.read(1)[0]
                    f.seek(offset)
                    f.write(bytes([byte ^ (1 << rng.randrange(8))]))
                    inode = os.fstat(f.fileno()).st_ino
            except FileNotFoundError:
                continue    # deleted meanwhile
            self._rotted[(group_id, index, step.target)] = (path, inode)
            flipped.append(f"{group_id}/{index}@{offset}")
        self.report.units_rotted += len(flipped)
        self.out(f"          rot {step.target}: flipped a bit in {', '.join(flipped) or 'nothing (no units yet)'}")

    def _datanode_rpc(self, dn: str, method: str, request):
        return self.cluster.datanode_rpc(dn, method, request, timeout=5)

    def _repairs_done(self) -> int:
        try:
            return self.vfs.rpc("Report", pb.Empty()).repairs_done
        except HedgefsError:
            return 0

    def _wait_namenode(self, timeout_s: float = 20.0) -> None:
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                self.vfs.rpc("Report", pb.Empty())
                return
            except Unavailable:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)

    # ------------------------------------------------------------------ the invariant

    def _check(self, lost: tuple, step: Step | None) -> list[str]:
        """Every stored file reads back with its SHA-256 (groups short of k units may fail cleanly)."""
        problems = self._crashed(step)
        retries = self._retries
        with self._lock:
            files = sorted(self._files.values(), key=lambda f: f.path)
        outcomes = list(self.pool.map(lambda f: self._verify(f, frozenset(lost)), files))
        excused = [f"{f.path}: {o}" for f, o in zip(files, outcomes) if o.startswith("excused")]
        problems += [o for o in outcomes if o not in ("ok", "gone") and not o.startswith("excused")]
        with self._lock:
            problems += self._pending
            self._pending = []
        verified = sum(len(f.data) for f, o in zip(files, outcomes) if o == "ok")
        self._check_line = (f"files {len(files):3d} read {verified / 2**20:6.1f} MiB "
                            f"excused {len(excused)} retried {self._retries - retries}")
        self._excused = excused
        return problems

    def _crashed(self, step: Step | None) -> list[str]:
        expected = ["namenode"] + [d for d in self.cluster.datanode_ids if step is None or d not in step.stopped]
        return [f"{name} exited unexpectedly: {_log_tail(self.cluster.root / 'logs' / f'{name}.log')}"
                for name in expected if not self.cluster.is_running(name)]

    def _verify(self, f: StoredFile, lost: frozenset) -> str:
        """'ok', 'excused ...' (failed cleanly, allowed), 'gone' (deleted meanwhile), else a problem."""
        deadline = time.monotonic() + RETRY_S
        while True:
            try:
                short = self._short_group(f.path, lost)
                must = not short
            except HedgefsError as err:
                if not self._stored(f):
                    return "gone"
                if isinstance(err, NotFound) or time.monotonic() > deadline:
                    return f"{f.path} (put returned at step {f.step}): stat failed: {_short(err)}"
                time.sleep(0.3)
                continue
            attempt = _ReadAttempt(self, f)
            if not self._wait(attempt, f, HANG_S if must else EXCUSED_WAIT_S):
                if not self._stored(f):
                    return "gone"         # deleted by its writer meanwhile: its units may be gone too
                if must:
                    return f"{f.path}: read hung (no answer after {HANG_S:.0f} s) with {len(lost)} DataNodes lost"
                self._count_clean_failure(f"no answer after {EXCUSED_WAIT_S:.0f} s")
                return f"excused ({short}): no answer after {EXCUSED_WAIT_S:.0f} s"  # still running: _ReadAttempt checks its bytes if it ever returns
            if attempt.error is None:
                return "ok"
            if not isinstance(attempt.error, HedgefsError):
                return f"{f.path}: read failed uncleanly: {attempt.trace}"
            if not self._stored(f):
                return "gone"
            self._count_clean_failure(attempt.error)
            if not must and not isinstance(attempt.error, Unavailable):
                return f"excused ({short}): {_short(attempt.error)}"
            if time.monotonic() > deadline:
                return (f"{f.path} (put returned at step {f.step}): every group has >= {POLICY.k} units on "
                        f"DataNodes that are not lost, yet reads failed for {RETRY_S:.0f} s: {_short(attempt.error)}")
            with self._lock:
                self._retries += 1
            time.sleep(0.5)

    def _wait(self, attempt: "_ReadAttempt", f: StoredFile, timeout_s: float) -> bool:
        """Wait for a read to end; give up early if its file is deleted (a stalled unit could hold it 60 s)."""
        deadline = time.monotonic() + timeout_s
        while not attempt.done.wait(min(0.2, max(0.0, deadline - time.monotonic()))):
            if time.monotonic() >= deadline or not self._stored(f):
                return False
        return True

    def _short_group(self, path: str, lost: frozenset) -> str:
        """'' when every group has at least k units on DataNodes that are not lost, else the first that has not."""
        status = self.vfs.stat(path)
        k = parse_policy(status.policy).k
        for g in status.groups:
            reachable = sum(u.datanode_id not in lost and (g.id, i, u.datanode_id) not in self._rotted
                            for i, u in g.units.items())
            if reachable < k:
                on_lost = sorted({u.datanode_id for u in g.units.values()} & lost)
                return (f"group {g.id} has {reachable} units on DataNodes not lost: {len(g.units)} listed "
                        f"live by the NameNode, on lost ones: {' '.join(on_lost) or 'none'}")
        return ""

    def _stored(self, f: StoredFile) -> bool:
        with self._lock:
            return self._files.get(f.path) is f

    def _count_clean_failure(self, err: BaseException | str) -> None:
        kind = err if isinstance(err, str) else f"{type(err).__name__}: {_short(err)}"
        kind = re.sub(r"\d+", "N", kind)[:90]
        with self._lock:
            self.report.clean_failures += 1
            self.failure_kinds[kind] += 1

    def compare(self, f: StoredFile, got: bytes, offset: int, length: int, who: str, seconds: float) -> None:
        want = f.data[offset:offset + length]
        if got == want:
            self.latency.record(seconds)
            with self._lock:
                self.report.bytes_verified += len(got)
                if seconds > self._slowest[0]:
                    self._slowest = (seconds, f"{who} read {f.path} [{offset}, +{length}) during step {self._step}")
            return
        wrong = differing_bytes(got, want)
        with self._lock:
            self.report.wrong_bytes += wrong
            self._pending.append(f"WRONG BYTES: {who} read {f.path} [{offset}, +{length}) during step {self._step}: "
                                 f"{wrong} bytes differ (got {len(got)} bytes, sha256 "
                                 f"{hashlib.sha256(got).hexdigest()[:16]}, want {f.sha256[:16]})")

    # ------------------------------------------------------------------ load

    def _writer(self, fs: FileSystem, w: int) -> None:
        rng = random.Random(f"hedgefs-chaos/{self.config.seed}/writer/{w}")
        mine: deque[str] = deque()
        index = 0
        while not self._stop.is_set():
            if len(mine) >= self.config.files_per_writer:
                old = mine.popleft()
                with self._lock:
                    self._files.pop(old, None)
                self._quietly(lambda: fs.delete(old), f"writer {w}: delete {old}")
            data = file_content(self.config.seed, w, index, file_size(rng, self.config.max_file_bytes))
            path = f"/chaos/w{w}/f{index:05d}"
            policy = REPLICATED.name if index % 2 else None   # None: the cluster's RS-6-3
            index += 1
            if self._quietly(lambda: fs.write_bytes(path, data, policy=policy), f"writer {w}: put {path}"):
                with self._lock:
                    self._files[path] = StoredFile(path, data, hashlib.sha256(data).hexdigest(), self._step)
                    self.report.files += 1
                mine.append(path)
            else:
                with self._lock:
                    self._write_failures += 1
                self._stop.wait(0.2)
            self._stop.wait(rng.uniform(0.5, 2.0))

    def _quietly(self, action: Callable[[], object], what: str) -> bool:
        """Run a put or delete: a clean failure is fine (False), anything else is noted."""
        try:
            action()
            return True
        except HedgefsError:
            return False
        except Exception:  # noqa: BLE001 - not a crash of ours: a finding to report
            note = f"{what} raised {traceback.format_exc().strip().splitlines()[-1]} (during step {self._step})"
            with self._lock:
                if len(self.report.notes) < 20:
                    self.report.notes.append(note)
            return False

    def _reader(self, fs: FileSystem, r: int) -> None:
        rng = random.Random(f"hedgefs-chaos/{self.config.seed}/reader/{r}")
        while not self._stop.is_set():
            with self._lock:
                paths = sorted(self._files)
            if not paths:
                self._stop.wait(0.1)
                continue
            path = rng.choice(paths)
            with self._lock:
                f = self._files.get(path)
            if f is None:
                continue
            offset = rng.randrange(len(f.data) + 1)
            length = rng.randrange(min(len(f.data) - offset, 2 * POLICY.stripe_data_size) + 1)
            began = time.monotonic()
            try:
                with fs.open(path) as handle:
                    got = handle.pread(offset, length)
            except HedgefsError as err:
                if self._stored(f):
                    self._count_clean_failure(err)
                self._stop.wait(0.05)
                continue
            except Exception:  # noqa: BLE001 - a read must fail cleanly or not at all
                with self._lock:
                    self._pending.append(f"reader {r}: pread {path} [{offset}, +{length}) failed uncleanly: "
                                         f"{traceback.format_exc().strip().splitlines()[-1]}")
                continue
            self.compare(f, got, offset, length, f"reader {r}", time.monotonic() - began)
            self._stop.wait(0.02)

    # ------------------------------------------------------------------ the end

    def _finish(self, workers: list[threading.Thread]) -> None:
        self._stop.set()
        self.out("final: clearing every fault, thawing and starting every process")
        problems = self._heal()
        deadline = time.monotonic() + JOIN_S
        for t in workers:
            t.join(max(0.0, deadline - time.monotonic()))
        problems += [f"{t.name} still busy {JOIN_S:.0f} s after the cluster was healed (a hang)"
                     for t in workers if t.is_alive()]
        if not problems:
            self._step = 0
            problems = self._check((), None)
            self.out(f"final: {self._check_line}")
        if not problems:
            problems = self._wait_healthy()
        if not problems:
            problems = self._wait_rot_gone()
        self.report.repairs = self._repairs_before + self._repairs_done()
        if problems and self.report.failed_step is None:
            self._fail(0, problems)

    def _heal(self) -> list[str]:
        c = self.cluster
        try:
            if not c.is_running("namenode"):
                c.start("namenode")
            for dn in c.datanode_ids:
                state = c.process_state(dn)
                if state == "frozen":
                    c.thaw(dn)
                elif state == "stopped":
                    c.start(dn)
            c.wait_live(c.datanode_ids, 60)
            for dn in c.datanode_ids:
                self._datanode_rpc(dn, "ClearFaults", pb.FaultClearRequest())
        except (ClusterError, grpc.RpcError) as err:
            return [f"healing the cluster failed: {_short(err)}"]
        return []

    def _wait_rot_gone(self) -> list[str]:
        """Every rotten copy found and deleted (after a repair, or with its file)."""
        deadline = time.monotonic() + FSCK_S
        while True:
            left = sorted(f"{g}/{i} on {dn}" for (g, i, dn), (path, inode) in self._rotted.items()
                          if _inode(path) == inode)
            if not left:
                if self._rotted:
                    self.out(f"final: all {len(self._rotted)} rotten units found, replaced and deleted")
                return []
            if time.monotonic() > deadline:
                return [f"rotten units still on disk {FSCK_S:.0f} s after fsck said HEALTHY: {', '.join(left)}"]
            time.sleep(0.5)

    def _wait_healthy(self) -> list[str]:
        deadline = time.monotonic() + FSCK_S
        while True:
            try:
                r = self.vfs.rpc("Fsck", pb.PathRequest(path="/"))
                if r.status == "HEALTHY":
                    self.out(f"final: fsck HEALTHY ({r.files} files, {r.groups} groups) after "
                             f"{FSCK_S - (deadline - time.monotonic()):.1f} s")
                    return []
                last = f"{r.status}: healthy {r.healthy}, degraded {r.degraded}, missing {r.missing}"
            except HedgefsError as err:
                last = _short(err)
            if time.monotonic() > deadline:
                return [f"fsck not HEALTHY {FSCK_S:.0f} s after the faults were cleared: {last}"]
            time.sleep(0.5)


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
            self.first[key] = f"{type(err).__name__}: {_short(err)}"

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


class _ReadAttempt:
    """One whole-file read on its own thread: waited for with a bound, its bytes checked whenever it returns."""

    def __init__(self, chaos: Chaos, f: StoredFile):
        self.error: BaseException | None = None
        self.trace = ""
        self.done = threading.Event()
        self._chaos, self._file = chaos, f
        threading.Thread(target=self._run, name=f"verify {f.path}", daemon=True).start()

    def _run(self) -> None:
        began = time.monotonic()
        try:
            got = self._chaos.vfs.read_bytes(self._file.path)
            self._chaos.compare(self._file, bytes(got), 0, len(self._file.data), "checker", time.monotonic() - began)
        except BaseException as err:  # noqa: BLE001 - judged by the caller
            self.error = err
            self.trace = traceback.format_exc().strip().splitlines()[-1]
        finally:
            self.done.set()


def _inode(path: Path) -> int | None:
    try:
        return path.stat().st_ino
    except FileNotFoundError:
        return None


def _short(err: BaseException) -> str:
    if isinstance(err, grpc.RpcError):
        return f"{err.code().name}: {err.details()}"
    return str(err) or type(err).__name__


def _log_tail(path: Path, lines: int = 3) -> str:
    try:
        text = [ln for ln in path.read_text(errors="replace").splitlines() if ln.strip()]
    except OSError:
        return "(no log)"
    return " | ".join(text[-lines:]) or "(empty log)"


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
