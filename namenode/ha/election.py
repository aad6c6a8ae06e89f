"""Leader election on an etcd lease, and the serve deadline on the monotonic clock.

A NameNode holds one lease (TTL ``ttl_s``, default 3 s) and renews it from its own thread every
``ttl_s / 6``, each renewal given up to ``ttl_s / 3`` (a failed renewal is tried again at once,
on another member). Its serve deadline
is the monotonic time at which the last acknowledged renewal was *sent*, plus the TTL etcd gave
back, minus ``MARGIN_S``: etcd counts the TTL from when it
received the renewal, which is later, so past the deadline the lease may still exist but no
standby can yet have taken over. An active serves nothing past its deadline (``serving``); the
deadline moves on when a renewal gets through again.

Campaign: ``Txn If(create_revision(leader) == 0) Then(Put(leader, {addr, http}, lease))``; the
epoch is the leader key's create revision, so epochs only grow. The lease ends (``lost``) when
a renewal answers TTL 0 (etcd expired it: a standby may be active by now) or ``revoke`` gives it
up (graceful handover); the owner then stops being active.

Why 3 s: etcd's own election (100 ms heartbeat, 1 s election timeout) extends every lease by one
election timeout when its leader changes, so the lease outlives an etcd failover (the Txn it
interrupts is settled: etcd_commit.py); renewals every 0.5 s leave 1.5-2 s of the deadline (TTL -
margin = 2 s) when etcd's leader dies, about one etcd election: every 1 s left 1-2 s, and in 3 of
10 kills the settling ran past it and the active failed over, none in 10 at 0.5 s
(bench/results/2026-12-01-failover-etcd-leader-renewals.md); and a
kill -9 of the active is noticed by etcd within the TTL, so a standby takes over in about
3-4 s. ``--lease-ttl-s`` sets it (longer on a loaded host: a false failover costs a few seconds,
nothing is lost).
"""

from __future__ import annotations

import json
import logging
import threading
import time

from hedgefs.namenode.journal.etcd_meta import EtcdMeta, MetaError, MetaUnavailable

log = logging.getLogger("hedgefs.namenode")

DEFAULT_TTL_S = 3
MARGIN_S = 1.0
RETRY_S = 0.1     # after a failed renewal
RENEWALS_PER_TTL = 6   # the deadline is at most ttl/6 stale when etcd's leader dies: ~1.5 s of the 2 s left


def leader_value(rpc_address: str, http_address: str) -> bytes:
    return json.dumps({"address": rpc_address, "http": http_address, "since_ms": int(time.time() * 1000)}).encode()


def leader_address(value: bytes | None) -> str:
    """The RPC address in a leader key's value ("" when none or unreadable)."""
    if not value:
        return ""
    try:
        return str(json.loads(value).get("address", ""))
    except (ValueError, AttributeError):
        return ""


class Lease:
    """One lease and its renewals (a daemon thread). ``lost`` is set when it ended."""

    def __init__(self, meta: EtcdMeta, ttl_s: int = DEFAULT_TTL_S, clock=time.monotonic):
        self.meta, self.ttl_s, self.clock = meta, int(ttl_s), clock
        self.margin_s = min(MARGIN_S, self.ttl_s / 3)
        sent = clock()
        self.id = meta.grant(self.ttl_s)
        self.deadline = sent + self.ttl_s - self.margin_s
        self.lost = threading.Event()
        self._stop = threading.Event()
        self.renewals = 0
        self._revoked = False
        self._thread = threading.Thread(target=self._run, name="namenode-lease", daemon=True)
        self._thread.start()

    def serving(self) -> bool:
        """The lease is surely still ours (the monotonic clock is before the deadline)."""
        return not self.lost.is_set() and self.clock() < self.deadline

    def _run(self) -> None:
        interval = self.ttl_s / RENEWALS_PER_TTL
        wait = interval
        while not self._stop.wait(wait):
            sent = self.clock()
            try:
                ttl = self.meta.keepalive(self.id, timeout_s=self.ttl_s / 3)
            except MetaError as err:
                # at once again, on another member: one lost renewal must not cost the lease
                wait = RETRY_S
                if self.clock() >= self.deadline:
                    log.warning("lease %x: cannot renew it (%s); past the serve deadline", self.id, err)
                continue
            if ttl <= 0:
                log.warning("lease %x expired in etcd: this NameNode is no longer the active", self.id)
                self.lost.set()
                return
            self.renewals += 1
            self.deadline = max(self.deadline, sent + min(ttl, self.ttl_s) - self.margin_s)
            wait = max(0.0, interval - (self.clock() - sent))

    def revoke(self) -> None:
        """Give the lease up (the leader key goes with it, at once). Once: again is a no-op. While
        etcd has no leader (a deposed active's revoke, during etcd's election) it is tried again,
        on the other members, until the lease would have run out anyway: the lease's own TTL
        from the last renewal, plus one TTL more (a new etcd leader counts each lease afresh)."""
        self.stop()
        if self._revoked:
            return
        self._revoked = True
        until = max(self.deadline + self.margin_s, self.clock()) + self.ttl_s
        wait, tries = RETRY_S, 0
        while True:
            tries += 1
            try:
                self.meta.revoke(self.id, timeout_s=max(0.2, min(1.0, until - self.clock())))
            except MetaUnavailable as err:
                if self.clock() + wait < until:
                    time.sleep(wait)
                    wait = min(0.5, wait * 2)
                    continue
                log.warning("lease %x: revoke failed %d times (%s); it expires by itself", self.id, tries, err)
            except MetaError as err:   # etcd answered: no such lease (it expired), or refused
                log.warning("lease %x: revoke failed (%s); it expires in %d s", self.id, err, self.ttl_s)
            else:
                if tries > 1:
                    log.warning("lease %x: revoked at try %d", self.id, tries)
            return

    def stop(self) -> None:
        self._stop.set()
        self.lost.set()
        if self._thread is not threading.current_thread():
            self._thread.join(timeout=self.ttl_s)
