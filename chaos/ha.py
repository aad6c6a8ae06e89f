"""Chaos --ha: NameNode and etcd faults, and the check that no two NameNodes were active at once.

    step nn-kill      kill -9 the active NameNode (found by asking each: its Report's role);
                      wait until the other answers active; a later nn-start (or the heal) starts
                      it again, and it must come back as a standby
    step nn-freeze    SIGSTOP the active, wait until the other is active (and at least FREEZE_S,
                      longer than the 3 s lease), SIGCONT: the old one must step down
    step etcd-kill    kill -9 one etcd member (two of three keep the quorum); etcd-start restarts it
    step etcd-freeze  SIGSTOP one etcd member: its connections stay open and answer nothing, so
                      every client on it must notice by itself; etcd-thaw sends SIGCONT

All along a poller asks every NameNode for its Report (a standby answers it too: role, epoch,
applied revision) and keeps each answer with the interval it was asked in. The check: no epoch is
claimed active by two NameNodes; no NameNode answers active with an epoch below one another had
already answered active with before it was asked (the epochs only grow); each NameNode's own
active epochs only grow. Each function takes the run's ``Chaos`` object (runner.py).
"""

from __future__ import annotations

import bisect
import dataclasses
import json
import re
import threading
import time
import urllib.request

import grpc

from hedgefs.chaos.common import short
from hedgefs.chaos.schedule import Step
from hedgefs.proto import hedgefs_pb2 as pb

POLL_S = 0.25                             # how often each NameNode is asked its role
FREEZE_S = 4.5                            # an nn-freeze lasts at least this: past the 3 s lease
TAKEOVER_S = 45.0                         # a kill or freeze of the active: the other is active within this
STANDBY_S = 45.0                          # a started or thawed NameNode answers as a standby within this


@dataclasses.dataclass(frozen=True)
class Claim:
    name: str
    pid: int
    role: str
    epoch: int
    applied: int
    sent: float                           # monotonic: the Report was asked at `sent`, answered by `received`
    received: float
    step: int


class RolePoller(threading.Thread):
    """Asks each NameNode its role every POLL_S; ``history`` holds every answer."""

    def __init__(self, chaos):
        super().__init__(name="role-poller", daemon=True)
        self.chaos, self.history, self.lock, self.halt = chaos, [], threading.Lock(), threading.Event()

    def run(self) -> None:
        c = self.chaos.cluster
        while not self.halt.wait(POLL_S):
            for name in c.namenode_names:
                claim = ask(self.chaos, name, timeout=1.5)
                if claim is not None:
                    with self.lock:
                        self.history.append(claim)

    def claims(self) -> list[Claim]:
        with self.lock:
            return list(self.history)


def ask(chaos, name: str, timeout: float = 2.0) -> Claim | None:
    c = chaos.cluster
    if c.process_state(name) != "running":
        return None
    sent = time.monotonic()
    try:
        role = c.namenode_rpc(name, "Report", pb.Empty(), timeout=timeout).namenode
    except grpc.RpcError:
        return None
    return Claim(name, c.pid(name) or 0, role.role, role.epoch, role.applied_revision, sent, time.monotonic(),
                 chaos.step)


def active(chaos) -> Claim | None:
    for name in chaos.cluster.namenode_names:
        claim = ask(chaos, name)
        if claim is not None and claim.role == "active":
            return claim
    return None


def _wait(what: str, probe, timeout_s: float):
    deadline = time.monotonic() + timeout_s
    while True:
        got = probe()
        if got:
            return got
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what} within {timeout_s:.0f} s")
        time.sleep(0.1)


def _wait_active(chaos, other_than: str = "", timeout_s: float = TAKEOVER_S) -> Claim:
    def probe():
        claim = active(chaos)
        return claim if claim is not None and claim.name != other_than else None
    return _wait(f"no NameNode {'but ' + other_than + ' ' if other_than else ''}answered active", probe, timeout_s)


def _wait_standby(chaos, name: str) -> None:
    """A started or thawed NameNode serves again: as a standby, or as the active if the other one
    stepped down meanwhile (an etcd member killed under it can time its Txn out: fail-stop). Two
    actives at once are the role history's to catch, not this wait's."""
    _wait(f"{name} did not answer as a standby (or the active)",
          lambda: getattr(ask(chaos, name), "role", "") in ("standby", "active"), STANDBY_S)


def apply(chaos, step: Step) -> list[str]:
    """A NameNode or etcd step; the lines returned are problems."""
    c = chaos.cluster
    try:
        if step.action in ("nn-kill", "nn-freeze"):
            old = _wait_active(chaos)
            chaos.report.failovers += 1
            if step.action == "nn-kill":
                c.kill(old.name)
                chaos.down.add(old.name)
                new = _wait_active(chaos, other_than=old.name)
            else:
                c.freeze(old.name)
                frozen_at = time.monotonic()
                try:
                    new = _wait_active(chaos, other_than=old.name)
                    time.sleep(max(0.0, FREEZE_S - (time.monotonic() - frozen_at)))
                finally:
                    c.thaw(old.name)
                _wait_standby(chaos, old.name)
            chaos.out(f"          {step.action}: {old.name} (epoch {old.epoch}) -> {new.name} active (epoch {new.epoch})")
        elif step.action == "nn-start":
            for name in sorted(chaos.down & set(c.namenode_names)):
                c.start(name)
                chaos.down.discard(name)
                _wait_standby(chaos, name)
        elif step.action in ("etcd-kill", "etcd-freeze"):
            (c.kill if step.action == "etcd-kill" else c.freeze)(step.target)
            chaos.down.add(step.target)
            _wait_active(chaos)
        elif step.action in ("etcd-start", "etcd-thaw"):
            (c.start if step.action == "etcd-start" else c.thaw)(step.target)
            chaos.down.discard(step.target)
            _wait_active(chaos)
    except (TimeoutError, grpc.RpcError, OSError) as err:
        return [f"step {step.number} ({step.action} {step.target}): {short(err)}"]
    return []


def heal(chaos) -> None:
    """Thaw and start every NameNode and etcd member (etcd first), then wait for an active."""
    c = chaos.cluster
    for name in [*c.etcd_names, *c.namenode_names]:
        state = c.process_state(name)
        if state == "frozen":
            c.thaw(name)
        elif state == "stopped":
            c.start(name)
        chaos.down.discard(name)
    _wait_active(chaos)


# ---------------------------------------------------------------------------- the check

def check_roles(claims: list[Claim]) -> list[str]:
    """Dual actives in the history of answers: problems, one line each."""
    actives = sorted((c for c in claims if c.role == "active"), key=lambda c: c.received)
    problems, owner = [], {}
    for c in actives:
        if owner.setdefault(c.epoch, c.name) != c.name:
            problems.append(f"dual active: epoch {c.epoch} claimed by {owner[c.epoch]} and by {c.name} (step {c.step})")
    # The highest epoch answered active by each moment: a claim asked after a higher epoch was
    # answered is a deposed NameNode still saying it is the active.
    times = [c.received for c in actives]
    highest, best = [], 0
    for c in actives:
        best = max(best, c.epoch)
        highest.append(best)
    for c in actives:
        i = bisect.bisect_left(times, c.sent)
        if i and highest[i - 1] > c.epoch:
            problems.append(f"dual active: {c.name} answered active at epoch {c.epoch} after epoch "
                            f"{highest[i - 1]} was active (step {c.step})")
    last: dict[str, int] = {}
    for c in actives:
        if c.epoch < last.get(c.name, 0):
            problems.append(f"{c.name}'s epoch went down: {last[c.name]} -> {c.epoch} (step {c.step})")
        last[c.name] = max(last.get(c.name, 0), c.epoch)
    return problems


def summarize(chaos, claims: list[Claim]) -> None:
    """The report's HA lines: the epochs in the order they were active, the refused commands."""
    r, seen = chaos.report, {}
    for c in sorted(claims, key=lambda c: c.received):
        if c.role == "active" and c.epoch not in seen:
            seen[c.epoch] = f"{c.epoch} {c.name} (step {c.step})"
    r.epochs = len(seen)
    r.notes.append(f"role history: {len(claims)} answers, {sum(c.role == 'active' for c in claims)} active; "
                   f"epochs in order: {', '.join(seen.values()) or 'none'}")
    regress = [(a, b) for a, b in zip(claims, claims[1:]) if a.name == b.name and a.pid == b.pid
               and a.role == b.role == "standby" and b.applied < a.applied]
    if regress:
        r.notes.append(f"a standby's applied revision went down {len(regress)} times")
    refused = refused_commands(chaos)
    r.commands_refused = sum(refused.values())
    r.notes.append("DataNode commands refused: " + (", ".join(f"{k} {v}" for k, v in sorted(refused.items())) or "none"))
    with open(chaos.cluster.root / "logs" / "roles.jsonl", "w") as f:
        for c in claims:
            f.write(json.dumps(dataclasses.asdict(c)) + "\n")


def refused_commands(chaos) -> dict[str, int]:
    """hedgefs_datanode_commands_refused_total by reason, summed over the DataNodes (their /metrics)."""
    c, total = chaos.cluster, {}
    if c.secure:
        return total
    pattern = re.compile(r'^hedgefs_datanode_commands_refused_total\{[^}]*reason="(\w+)"[^}]*\}\s+([0-9.e+]+)', re.M)
    for dn in c.datanode_ids:
        port = c.state["datanodes"][dn].get("http_port")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as reply:
                text = reply.read().decode()
        except OSError:
            continue
        for reason, value in pattern.findall(text):
            total[reason] = total.get(reason, 0) + int(float(value))
    return total
