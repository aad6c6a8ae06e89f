"""Chaos: the invariant, checked after every step and once more at the end.

Every file whose put returned reads back with its SHA-256. A block group with at least k units on
DataNodes that are not lost (and not rotted) must read; one with fewer may fail, but only cleanly.
Wrong bytes are never excused. At the end fsck must say HEALTHY and every rotten unit must be gone
from its disk. Every function takes the run's ``Chaos`` object (runner.py).
"""

from __future__ import annotations

import hashlib
import re
import threading
import time
import traceback
from pathlib import Path

import grpc

from hedgefs.chaos.common import StoredFile, short
from hedgefs.chaos.schedule import POLICY, Step, differing_bytes
from hedgefs.client.errors import HedgefsError, NotFound, Unavailable
from hedgefs.ec.layout import zero_units
from hedgefs.ec.policy import parse_policy
from hedgefs.proto import hedgefs_pb2 as pb

RETRY_S = 10.0                            # a read that must succeed may fail cleanly this long
HANG_S = 30.0                             # a read that must succeed and has not returned: a hang
EXCUSED_WAIT_S = 8.0                      # how long a read that may fail is waited for
FSCK_S = 120.0                            # fsck must say HEALTHY within this after healing


def check(chaos, lost: tuple, step: Step | None) -> list[str]:
    """Every stored file reads back with its SHA-256 (groups short of k units may fail cleanly)."""
    problems = _crashed(chaos, step)
    retries = chaos.retries
    with chaos.lock:
        files = sorted(chaos.files.values(), key=lambda f: f.path)
    outcomes = list(chaos.pool.map(lambda f: _verify(chaos, f, frozenset(lost)), files))
    excused = [f"{f.path}: {o}" for f, o in zip(files, outcomes) if o.startswith("excused")]
    problems += [o for o in outcomes if o not in ("ok", "gone") and not o.startswith("excused")]
    with chaos.lock:
        problems += chaos.pending
        chaos.pending = []
    verified = sum(len(f.data) for f, o in zip(files, outcomes) if o == "ok")
    chaos.check_line = (f"files {len(files):3d} read {verified / 2**20:6.1f} MiB "
                        f"excused {len(excused)} retried {chaos.retries - retries}")
    chaos.excused = excused
    return problems


def _crashed(chaos, step: Step | None) -> list[str]:
    c = chaos.cluster
    expected = [n for n in [*c.namenode_names, *c.etcd_names] if step is None or n not in chaos.down]
    expected += [d for d in c.datanode_ids if step is None or d not in step.stopped]
    return [f"{name} exited unexpectedly: {_log_tail(c.root / 'logs' / f'{name}.log')}"
            for name in expected if not c.is_running(name)]


def _verify(chaos, f: StoredFile, lost: frozenset) -> str:
    """'ok', 'excused ...' (failed cleanly, allowed), 'gone' (deleted meanwhile), else a problem."""
    deadline = time.monotonic() + RETRY_S
    while True:
        try:
            short_group = _short_group(chaos, f.path, lost)
            must = not short_group
        except HedgefsError as err:
            if not stored(chaos, f):
                return "gone"
            if isinstance(err, NotFound) or time.monotonic() > deadline:
                return f"{f.path} (put returned at step {f.step}): stat failed: {short(err)}"
            time.sleep(0.3)
            continue
        attempt = _ReadAttempt(chaos, f)
        if not _wait(chaos, attempt, f, HANG_S if must else EXCUSED_WAIT_S):
            if not stored(chaos, f):
                return "gone"         # deleted by its writer meanwhile: its units may be gone too
            if must:
                return f"{f.path}: read hung (no answer after {HANG_S:.0f} s) with {len(lost)} DataNodes lost"
            count_clean_failure(chaos, f"no answer after {EXCUSED_WAIT_S:.0f} s")
            # still running: _ReadAttempt checks its bytes if it ever returns
            return f"excused ({short_group}): no answer after {EXCUSED_WAIT_S:.0f} s"
        if attempt.error is None:
            return "ok"
        if not isinstance(attempt.error, HedgefsError):
            return f"{f.path}: read failed uncleanly: {attempt.trace}"
        if not stored(chaos, f):
            return "gone"
        count_clean_failure(chaos, attempt.error)
        if not must and not isinstance(attempt.error, Unavailable):
            return f"excused ({short_group}): {short(attempt.error)}"
        if time.monotonic() > deadline:
            return (f"{f.path} (put returned at step {f.step}): every group has >= {POLICY.k} units on "
                    f"DataNodes that are not lost, yet reads failed for {RETRY_S:.0f} s: {short(attempt.error)}")
        with chaos.lock:
            chaos.retries += 1
        time.sleep(0.5)


def _wait(chaos, attempt: _ReadAttempt, f: StoredFile, timeout_s: float) -> bool:
    """Wait for a read to end; give up early if its file is deleted (a stalled unit could hold it 60 s)."""
    deadline = time.monotonic() + timeout_s
    while not attempt.done.wait(min(0.2, max(0.0, deadline - time.monotonic()))):
        if time.monotonic() >= deadline or not stored(chaos, f):
            return False
    return True


def _short_group(chaos, path: str, lost: frozenset) -> str:
    """'' when every group has at least k units on DataNodes that are not lost (its zero units,
    never stored, counting: a small file's group of 4 is as readable as a whole one), else the
    first that has not."""
    status = chaos.vfs.stat(path)
    file_policy = parse_policy(status.policy)
    for g in status.groups:
        policy = g.code(file_policy)   # (an open tail's: replicated)
        reachable = sum(u.datanode_id not in lost and (g.id, i, u.datanode_id) not in chaos.rotted
                        for i, u in g.units.items())
        if reachable + len(zero_units(policy, g.length)) < policy.k:
            on_lost = sorted({u.datanode_id for u in g.units.values()} & lost)
            return (f"group {g.id} has {reachable} units on DataNodes not lost: {len(g.units)} listed "
                    f"live by the NameNode, on lost ones: {' '.join(on_lost) or 'none'}")
    return ""


def stored(chaos, f: StoredFile) -> bool:
    """Is ``f`` still the file at its path (not deleted or replaced by its writer)?"""
    with chaos.lock:
        return chaos.files.get(f.path) is f


def changed(chaos, f: StoredFile) -> bool:
    """Is ``f``'s file being appended to or truncated, or has it been since ``f`` was recorded? Its
    bytes are then another version's, of another length: a prefix of the same stream as ``f``'s
    (workload.py), so only the bytes both have are known."""
    with chaos.lock:
        return f.path in chaos.changing or chaos.files.get(f.path) is not f


def common_prefix(chaos, f: StoredFile, got: bytes, offset: int, length: int) -> int:
    """The length to check ``got`` (a read of [offset, offset + length)) for: all of it, unless
    the file is another version of another length (``changed``) whose read is that much shorter
    or longer; then what both versions hold."""
    if len(got) == min(length, max(0, len(f.data) - offset)) or not changed(chaos, f):
        return length
    return min(len(got), max(0, len(f.data) - offset))


def count_clean_failure(chaos, err: BaseException | str) -> None:
    kind = err if isinstance(err, str) else f"{type(err).__name__}: {short(err)}"
    kind = re.sub(r"\d+", "N", kind)[:90]
    with chaos.lock:
        chaos.report.clean_failures += 1
        chaos.failure_kinds[kind] += 1


def compare(chaos, f: StoredFile, got: bytes, offset: int, length: int, who: str, seconds: float) -> None:
    want = f.data[offset:offset + length]
    if got == want:
        chaos.latency.record(seconds)
        with chaos.lock:
            chaos.report.bytes_verified += len(got)
            if seconds > chaos.slowest[0]:
                chaos.slowest = (seconds, f"{who} read {f.path} [{offset}, +{length}) during step {chaos.step}")
        return
    wrong = differing_bytes(got, want)
    with chaos.lock:
        chaos.report.wrong_bytes += wrong
        chaos.pending.append(f"WRONG BYTES: {who} read {f.path} [{offset}, +{length}) during step {chaos.step}: "
                             f"{wrong} bytes differ (got {len(got)} bytes, sha256 "
                             f"{hashlib.sha256(got).hexdigest()[:16]}, want {f.sha256[:16]})")


class _ReadAttempt:
    """One whole-file read on its own thread: waited for with a bound, its bytes checked whenever it returns."""

    def __init__(self, chaos, f: StoredFile):
        self.error: BaseException | None = None
        self.trace = ""
        self.done = threading.Event()
        self._chaos, self._file = chaos, f
        threading.Thread(target=self._run, name=f"verify {f.path}", daemon=True).start()

    def _run(self) -> None:
        began = time.monotonic()
        try:
            got = bytes(self._chaos.vfs.read_bytes(self._file.path))
            n = common_prefix(self._chaos, self._file, got, 0, len(self._file.data))
            compare(self._chaos, self._file, got[:n] if n < len(got) else got, 0, n, "checker", time.monotonic() - began)
        except BaseException as err:  # noqa: BLE001 - judged by the caller
            self.error = err
            self.trace = traceback.format_exc().strip().splitlines()[-1]
        finally:
            self.done.set()


# ------------------------------------------------------------------ the end

def wait_healthy(chaos) -> list[str]:
    deadline = time.monotonic() + FSCK_S
    while True:
        try:
            r = chaos.vfs.admin.fsck("/")
            if r.status == "HEALTHY":
                chaos.out(f"final: fsck HEALTHY ({r.files} files, {r.groups} groups) after "
                          f"{FSCK_S - (deadline - time.monotonic()):.1f} s")
                return []
            last = f"{r.status}: healthy {r.healthy}, degraded {r.degraded}, missing {r.missing}"
        except HedgefsError as err:
            last = short(err)
        if time.monotonic() > deadline:
            return [f"fsck not HEALTHY {FSCK_S:.0f} s after the faults were cleared: {last}"]
        time.sleep(0.5)


def wait_rot_gone(chaos) -> list[str]:
    """Every rotten copy found and deleted (after a repair, or with its file): no DataNode still
    stores a copy the schedule rotted (each one says, by the ``Rot`` RPC's check)."""
    deadline = time.monotonic() + FSCK_S
    by_datanode: dict[str, list] = {}
    for (_g, _i, dn), unit in chaos.rotted.items():
        by_datanode.setdefault(dn, []).append(unit)
    while True:
        left = []
        for dn, units in sorted(by_datanode.items()):
            try:
                still = chaos.cluster.datanode_rpc(dn, "Rot", pb.RotRequest(check=units), timeout=5).still_rotten
            except grpc.RpcError as err:
                left.append(f"{len(units)} on {dn} (cannot ask it: {err.code().name})")
                continue
            left += [f"{u.group_id}/{u.index} on {dn}" for u in still]
        if not left:
            if chaos.rotted:
                chaos.out(f"final: all {len(chaos.rotted)} rotten units found, replaced and deleted")
            return []
        if time.monotonic() > deadline:
            return [f"rotten units still on disk {FSCK_S:.0f} s after fsck said HEALTHY: {', '.join(sorted(left))}"]
        time.sleep(0.5)


def _log_tail(path: Path, lines: int = 3) -> str:
    try:
        text = [ln for ln in path.read_text(errors="replace").splitlines() if ln.strip()]
    except OSError:
        return "(no log)"
    return " | ".join(text[-lines:]) or "(empty log)"
