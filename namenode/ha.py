"""Which NameNode is the active: the roles, the election loop, and the switch between them.

``Single`` is a NameNode on SQLite: always the active, epoch 0. ``HA`` is one of several on etcd
(``--meta etcd://``), each running this loop:

  standby   the view is etcd's, kept by a Follower (a watch); observer reads (stat, list,
            policy) are served from it by a read-only Namesystem; every other client call is
            refused with FAILED_PRECONDITION naming the active (``NotActive``). DataNodes report
            here too: their liveness and receipts are kept in memory (``StandbyDataNodes``), the
            view is never written, the replies say active=false and carry no command.
  campaign  when there is no leader key (at start, or the watch shows it deleted), Txn
            If(create_revision(leader)==0) Then(Put(leader, addr, lease)); epoch = the key's
            create revision.
  promote   wait until the view has applied the epoch's revision (every change of the old
            active is below it), stop following, open the Namesystem on the caught-up view with
            an EtcdBackend (every commit one Txn guarded by the epoch): the same as a restart.
            It stays in safe mode (no deletes, no repairs) until ``safe_mode_share`` of the
            units have been block-reported to it, and sends no delete to a DataNode before that
            DataNode's own block report.
  active    serves while the lease's monotonic deadline holds (election.Lease); nothing past it.
  demote    the lease expired in etcd, a Txn was refused or its outcome is unknown, or the
            operator handed over (``handover``): the NameNode stops serving at once, closes the
            Namesystem (nothing more reaches etcd: the guard fails), then re-enters standby in
            the same process: a new lease, a view rebuilt from etcd, the same ports.
"""

from __future__ import annotations

import collections
import logging
import os
import threading
import time
from typing import Callable

from hedgefs.namenode import metrics
from hedgefs.namenode.db import _SCHEMA, SCHEMA_VERSION, NotFormatted
from hedgefs.namenode.election import DEFAULT_TTL_S, Lease, leader_value
from hedgefs.namenode.etcd_commit import Chain
from hedgefs.namenode.errors import FailedPrecondition
from hedgefs.namenode.etcd_meta import EtcdMeta, MetaError, MetaURL
from hedgefs.namenode.etcd_view import NotANamespace
from hedgefs.namenode.follower import Follower

log = logging.getLogger("hedgefs.namenode")

VIEW_FILE = "etcd-view.db"
PROMOTE_WAIT_S = 30.0
CONFIRM_S = 3.0      # a standby reads the leader key itself this often (its watch could have missed its end)
CATCH_UP_S = 0.5     # how long a standby waits for its view to reach a client's revision
RECEIPTS_KEPT_S = 600.0


class NotActive(FailedPrecondition):
    """This NameNode does not serve the call: ``active`` is the one that does ("" while an
    election is on)."""

    def __init__(self, active: str):
        self.active = active
        super().__init__(f"this NameNode is not the active; the active is {active}" if active else
                         "this NameNode is not the active, and no active is known (an election is on)")


class Single:
    """A NameNode on SQLite: the active, always."""

    epoch = 0
    role = "active"

    def __init__(self, namesystem):
        self.namesystem = namesystem
        metrics.HA_ACTIVE.set(1)

    def writer(self):
        return self.namesystem

    reader = writer

    def is_active(self) -> bool:
        return True

    def revision(self) -> int:
        return 0   # SQLite: no revisions, nothing for a client to carry

    def caught_up(self, revision: int) -> None:
        pass

    def handover(self) -> bool:
        raise FailedPrecondition("this NameNode has no standby to hand over to (its namespace is in SQLite: "
                                 "--meta etcd://... for HA)")

    def describe(self) -> dict:
        return {"role": "active", "epoch": 0, "applied_revision": 0, "meta": "sqlite", "active": "",
                "safe_mode": self.namesystem.in_safe_mode}


class StandbyDataNodes:
    """What a standby keeps of the DataNodes' reports: when each was last heard, at which
    addresses, and recent receipts, in memory. It outlives the standby's view (rebuilt after an
    etcd outage), so a standby promoted at once still knows every DataNode reporting to it."""

    def __init__(self, clock: Callable[[], float] = time.monotonic):
        self.clock = clock
        self.seen: dict[str, float] = {}
        self.addresses: dict[str, tuple[str, str]] = {}   # id -> (address, data address)
        self.receipts: collections.deque = collections.deque()

    def heard(self, datanode_id: str, address: str = "", data_address: str = "") -> None:
        self.seen[datanode_id] = self.clock()
        if address:
            self.addresses[datanode_id] = (address, data_address or self.addresses.get(datanode_id, ("", ""))[1])

    def recent(self, within_s: float) -> dict[str, tuple[str, str]]:
        """The DataNodes heard within ``within_s`` whose addresses are known."""
        now = self.clock()
        return {d: self.addresses[d] for d, t in self.seen.items() if now - t < within_s and d in self.addresses}

    def stored(self, datanode_id: str, units: list[tuple[int, int, int]]) -> None:
        self.heard(datanode_id)
        now = self.clock()
        self.receipts.append((now, datanode_id, units))
        while self.receipts and now - self.receipts[0][0] > RECEIPTS_KEPT_S:
            self.receipts.popleft()


class EtcdBackend:
    """Database's backend on etcd: every commit one Txn guarded by ``epoch``, exactly once, settled
    while ``serving`` holds when its answer is lost (etcd_commit.py)."""

    def __init__(self, meta: EtcdMeta, epoch: int, fatal: Callable[[str], None], max_keys: int = 1024,
                 revision: int = 0, serving: Callable[[], bool] | None = None):
        self.meta, self.epoch, self._fatal = meta, epoch, fatal
        self.max_keys = max_keys - 1   # etcd's --max-txn-ops, less the chain's marker key
        self.revision = max(revision, epoch)   # the last committed: set before any writer is told
        self.chain = Chain(meta, epoch, serving)

    def commit(self, puts: dict[str, bytes], deletes: list[str]) -> int:
        start = time.perf_counter()
        revision = self.chain.commit(puts, deletes)
        self.revision = max(self.revision, revision)
        metrics.etcd_commit(time.perf_counter() - start, len(puts) + len(deletes))
        return revision

    def fatal(self, why: str) -> None:
        self._fatal(why)


class HA:
    """One NameNode of several on one etcd prefix. ``open_namesystem(backend, read_only)`` builds
    a Namesystem on the view file; ``on_active(nn)`` / ``on_standby()`` start and stop what only
    an active runs (the monitor)."""

    def __init__(self, url: MetaURL, data_dir: str, *, rpc_address: str, http_address: str = "",
                 open_namesystem: Callable, on_active: Callable = lambda nn: None,
                 on_standby: Callable = lambda: None, ttl_s: int = DEFAULT_TTL_S, cluster_id: str | None = None,
                 max_txn_ops: int = 1024):
        self.url, self.data_dir = url, data_dir
        self.path = os.path.join(data_dir, VIEW_FILE)
        self.rpc_address, self.http_address = rpc_address, http_address
        self.open_namesystem, self.on_active, self.on_standby = open_namesystem, on_active, on_standby
        self.ttl_s, self.cluster_id, self.max_txn_ops = ttl_s, cluster_id, max_txn_ops
        self.role, self.epoch = "starting", 0
        self.namesystem = None          # the active's Namesystem, or the standby's read-only one
        self.follower: Follower | None = None
        self.lease: Lease | None = None
        self.datanodes = StandbyDataNodes()
        self._registry_read = 0.0
        self._hold_off_until = 0.0
        self.failovers = 0
        self._lost = threading.Event()
        self._stop = threading.Event()
        self._switch = threading.Lock()
        self.meta = EtcdMeta(url)
        self._backend: EtcdBackend | None = None
        self._thread: threading.Thread | None = None

    # ------------------------------------------------------------------ what the servicer asks

    def active_address(self) -> str:
        """The active's address as this NameNode knows it ("" while it switches roles itself)."""
        if self.role == "active":
            return self.rpc_address
        return self.follower.leader[0] if self.follower and self.role == "standby" else ""

    def is_active(self) -> bool:
        """Active and surely still so (the lease's deadline holds)."""
        return self.role == "active" and not self._lost.is_set() and self.lease is not None and self.lease.serving()

    def writer(self):
        nn = self.namesystem
        if nn is None or not self.is_active():
            raise NotActive("" if self.role == "active" else self.active_address())
        return nn

    def reader(self):
        """The active's Namesystem, or a standby's read-only one (observer reads)."""
        nn = self.namesystem
        if nn is None and self.role == "standby":
            with self._switch:
                if self.role == "standby" and self.namesystem is None:
                    self._open_reader()
                nn = self.namesystem
        if nn is None or (self.role == "active" and not self.is_active()) or self.role not in ("active", "standby"):
            raise NotActive(self.active_address())
        if self.role == "standby" and time.monotonic() - self._registry_read > 1.0:
            self._registry_read = time.monotonic()
            with self._switch:   # DataNodes the view knows and this standby has not heard yet
                if nn is self.namesystem:
                    with nn.db.reading():
                        known = nn.blocks.datanodes()
                    with nn._lock:
                        nn.liveness.load({d: a for d, a in known.items() if not nn.liveness.knows(d)})
        return nn

    def heard(self, datanode_id: str, address: str = "", data_address: str = "") -> None:
        """A DataNode reported to this standby: its liveness, for the locations of observer reads."""
        self.datanodes.heard(datanode_id, address, data_address)
        nn = self.namesystem
        if nn is not None and self.role == "standby" and datanode_id:
            with nn._lock:
                nn.liveness.seen(datanode_id, address or None, data_address or None)

    def revision(self) -> int:
        """The etcd revision this NameNode's answers reflect at least: the active's last commit
        (a writer is told only after it), a standby's applied view. Replies carry it
        (``hedgefs-rev``); a client sends back the highest it saw."""
        if self.role == "active" and self._backend is not None:
            return self._backend.revision
        follower = self.follower
        return follower.applied if follower is not None and self.role == "standby" else 0

    def caught_up(self, revision: int) -> None:
        """Read your writes on a standby (HDFS's msync): a client that saw ``revision`` (on the
        active, or another standby) is answered only once this view has applied it, waiting up
        to CATCH_UP_S; else NotActive, naming the active, which the client follows."""
        follower = self.follower
        if revision <= 0 or self.role != "standby" or follower is None or follower.applied >= revision:
            return
        if not follower.wait_applied(revision, CATCH_UP_S):
            metrics.observer_behind()
            raise NotActive(self.active_address())

    @property
    def applied_revision(self) -> int:
        return self.follower.applied if self.follower else 0

    def describe(self) -> dict:
        """What ReportResponse.namenode says (NameNodeRole)."""
        nn = self.namesystem
        return {"role": self.role, "epoch": self.epoch, "meta": str(self.url), "active": self.active_address(),
                "applied_revision": self.applied_revision if self.role == "standby" else 0,
                "safe_mode": bool(nn is not None and self.role == "active" and nn.in_safe_mode)}

    # ------------------------------------------------------------------ the loop

    def start(self) -> None:
        """Check etcd and the prefix, build the view, start the loop. MetaUnavailable when no
        etcd member answers; Refused (identity.Refused) for a prefix that holds another
        cluster's data or no hedgefs namespace."""
        from hedgefs.security.identity import Refused

        self.meta.status()
        try:
            self._standby_view()
        except NotANamespace as err:
            raise Refused(f"{self.url}: {err}") from None
        self._thread = threading.Thread(target=self._run, name="namenode-ha", daemon=True)
        self._thread.start()

    def _standby_view(self) -> None:
        """A fresh lease, a view rebuilt from etcd and a follower, a read-only Namesystem on it."""
        self.follower = Follower(self.meta, self.path, _SCHEMA, SCHEMA_VERSION)
        try:
            self._open_reader()
            self.lease = Lease(self.meta, self.ttl_s)
        except BaseException:
            self._drop_standby()
            raise
        self._lost.clear()
        self.role = "standby"
        metrics.ha_standby()
        log.info("namenode is a standby on %s (view at revision %d, active %s)", self.url, self.follower.applied,
                 self.follower.leader[0] or "none")

    def _open_reader(self) -> None:
        try:
            self.namesystem = self.open_namesystem(None, True)
        except NotFormatted:   # no active has formatted the namespace yet: opened once one has
            self.namesystem = None

    def _drop_standby(self) -> None:
        """Undo a standby (its view could not follow etcd, or could not be built)."""
        self.role = "starting"
        for thing in (self.follower, self.namesystem):
            if thing is not None:
                try:
                    thing.stop() if thing is self.follower else thing.close()
                except Exception as err:
                    log.debug("dropping the standby view: %s", err)
        self.follower = self.namesystem = None
        if self.lease is not None:
            self.lease.revoke()
            self.lease = None

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                if self.role != "standby":
                    self._standby_view()
                epoch = self._campaign()
                if not epoch:
                    continue
                try:
                    self._promote(epoch)
                except Exception as err:   # e.g. its first commit failed: give the epoch up
                    log.exception("promotion to active (epoch %d) failed", epoch)
                    self._on_fatal(f"promotion failed: {err}")
                self._lost.wait()
                if self._stop.is_set():   # close() hands the lease back
                    return
                self._demote()
            except Exception as err:
                if isinstance(err, MetaError):
                    log.warning("namenode HA loop: %s; trying again", err)
                else:
                    log.exception("namenode HA loop failed; trying again")
                with self._switch:
                    if self.role == "standby":
                        self._drop_standby()
                self._stop.wait(1.0)

    def _campaign(self) -> int:
        """Wait until there is no leader, then try to become it; 0 if stopped."""
        value, confirm_at = leader_value(self.rpc_address, self.http_address), time.monotonic() + CONFIRM_S
        while not self._stop.is_set():
            if self.follower.failed:
                raise RuntimeError(self.follower.failed)
            if self.lease.lost.is_set():   # our own lease ended while waiting: get another
                self.lease = Lease(self.meta, self.ttl_s)
            _, epoch, lease = self.follower.leader
            if epoch and time.monotonic() >= confirm_at:   # the watch's word, checked against etcd's now and then
                confirm_at = time.monotonic() + CONFIRM_S
                _, epoch, lease = self.follower.confirm_leader()
            if epoch and lease == self.lease.id:   # a campaign whose answer was lost did win
                return epoch
            if epoch == 0 and time.monotonic() >= self._hold_off_until:
                epoch, _ = self.meta.campaign(value, self.lease.id)
                if epoch:
                    return epoch
            self.follower.changed.wait(min(1.0, max(0.05, self._hold_off_until - time.monotonic())))
            self.follower.changed.clear()
        return 0

    def _promote(self, epoch: int) -> None:
        if not self.follower.wait_applied(epoch, PROMOTE_WAIT_S):
            raise MetaError(f"elected (epoch {epoch}) but the view did not catch up within {PROMOTE_WAIT_S:.0f} s")
        with self._switch:
            self.role = "promoting"
            self.follower.stop()
            if self.namesystem is not None:
                self.namesystem.close()
                self.namesystem = None
            self.epoch = epoch
            backend = EtcdBackend(self.meta, epoch, self._on_fatal, self.max_txn_ops, self.follower.applied,
                                  self.lease.serving)
            self._backend = backend
            threading.Thread(target=self._watch_lease, args=(self.lease,), daemon=True,
                             name="namenode-lease-watch").start()
            nn = self.open_namesystem(backend, False)
            self.namesystem = nn
            self.failovers += 1
            metrics.ha_promoted(epoch)
            nn.adopt_datanodes(self.datanodes.recent(nn.liveness.dead_interval_s))   # reporting to it lately
            self._replay_receipts(nn)
            self.role = "active"
            self.on_active(nn)
        log.info("namenode is the ACTIVE on %s (epoch %d)", self.url, epoch)

    def _replay_receipts(self, nn) -> None:
        """Receipts DataNodes sent while this was a standby: the writes they belong to may finish here."""
        for _, datanode_id, units in list(self.datanodes.receipts):
            try:
                nn.units_stored(datanode_id, units)
            except Exception as err:   # a DataNode the view does not know, a group gone: nothing to keep
                log.debug("receipt replay from %s: %s", datanode_id, err)
        self.datanodes.receipts.clear()

    def _watch_lease(self, lease: Lease) -> None:
        lease.lost.wait()
        if lease is self.lease:
            self._on_fatal("the lease ended")

    def _on_fatal(self, why: str) -> None:
        if not self._lost.is_set():
            log.critical("namenode (epoch %d) stops being the active: %s", self.epoch, why)
        self._lost.set()

    def _demote(self) -> None:
        with self._switch:
            self.role = "demoting"
            metrics.ha_standby()
            self.on_standby()
            nn, self.namesystem = self.namesystem, None
            if nn is not None:
                try:
                    nn.close()
                except Exception as err:   # its store failed: nothing of it is trusted
                    log.info("closing the deposed namesystem: %s", err)
            if self.lease is not None:   # given back, not left to expire: a standby need not wait
                self.lease.revoke()
            self.epoch = 0
        log.warning("namenode deposed: re-entering standby (view rebuilt from etcd)")

    def handover(self) -> bool:
        """Graceful: drain (commit what is applied), give the lease up; a standby takes over at
        once. False when this NameNode is not the active."""
        with self._switch:
            if self.role != "active" or self.namesystem is None:
                return False
            self.role = "demoting"
            nn = self.namesystem
            nn.db.wait_durable(nn.db.applied)
            self._hold_off_until = time.monotonic() + self.ttl_s   # a standby's turn, not ours again
            self.lease.revoke()
        self._on_fatal("handed over (admin failover)")
        return True

    def close(self) -> None:
        self._stop.set()
        self._lost.set()
        if self.follower is not None and self.follower.changed:
            self.follower.changed.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
        with self._switch:
            if self.role == "active" and self.lease is not None:
                self.on_standby()
                if self.namesystem is not None:
                    self.namesystem.close()
                    self.namesystem = None
                self.lease.revoke()
            else:
                if self.follower is not None:
                    self.follower.stop()
                if self.namesystem is not None:
                    self.namesystem.close()
                if self.lease is not None:
                    self.lease.revoke()
        self.meta.close()
