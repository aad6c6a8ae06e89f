"""Which NameNode is the active: the roles, the election loop, and the switch between them.

``Single`` is a NameNode on SQLite: always the active, epoch 0. ``HA`` is one of several on etcd
(``--meta etcd://``), each running this loop:

  standby   a Namesystem built from the journal on etcd (the latest image and the batches after
            it), kept current by a Tailer applying the active's records as they come (hot).
            Observer reads (stat, list, policy) are served from it; every other client call is
            refused with FAILED_PRECONDITION naming the active (``NotActive``). DataNodes report
            here too: locations and liveness are kept, the replies say active=false and carry no
            command.
  campaign  when there is no leader key (at start, or the watch shows it deleted), Txn
            If(create_revision(leader)==0) Then(Put(leader, addr, lease)); epoch = the key's
            create revision.
  promote   wait until the standby has applied the epoch's revision (every record of the old
            active is below it), stop tailing, and let the same Namesystem write the journal from
            its last txid on (every batch one Txn guarded by the epoch: EtcdJournal): no rebuild.
            It stays in safe mode (no deletes, no repairs) until ``safe_mode_share`` of the groups
            are readable from what was reported to it, and sends no delete to a DataNode before
            that DataNode's own report to the new active.
  active    serves while the lease's monotonic deadline holds (election.Lease); nothing past it.
  demote    the lease expired in etcd, a Txn was refused or its outcome is unknown, or the
            operator handed over (``handover``): the NameNode stops serving at once, closes the
            Namesystem (nothing more reaches etcd: the guard fails), then re-enters standby in the
            same process, its namespace read again from etcd (the deposed one may hold records
            that never became durable).
"""

from __future__ import annotations

import enum
import logging
import threading
import time
from typing import Callable

from hedgefs.namenode import metrics
from hedgefs.namenode.errors import FailedPrecondition
from hedgefs.namenode.ha.election import DEFAULT_TTL_S, Lease, leader_value
from hedgefs.namenode.journal.etcd_meta import EtcdMeta, MetaError, MetaURL
from hedgefs.namenode.ha.tailer import Tailer
from hedgefs.namenode.journal.etcd import EtcdJournal, NotANamespace, upgrade_schema5

log = logging.getLogger("hedgefs.namenode")

PROMOTE_WAIT_S = 30.0
CONFIRM_S = 3.0      # a standby reads the leader key itself this often (its watch could have missed its end)
CATCH_UP_S = 0.5     # how long a standby waits to reach a client's revision


class Role(enum.Enum):
    STARTING = "starting"
    STANDBY = "standby"
    PROMOTING = "promoting"
    ACTIVE = "active"
    DEMOTING = "demoting"


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
    role = Role.ACTIVE

    def __init__(self, namesystem):
        self.namesystem = namesystem
        metrics.HA_ACTIVE.set(1)

    def writer(self):
        return self.namesystem

    reader = writer
    namesystem_for_datanodes = writer

    def is_active(self) -> bool:
        return True

    def switching(self) -> bool:
        return False

    def active_address(self) -> str:
        return ""

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


class HA:
    """One NameNode of several on one etcd prefix. ``open_namesystem(engine, standby)`` builds a
    Namesystem on a journal engine; ``on_active(nn)`` / ``on_standby()`` start and stop what only
    an active runs (the monitor, the checkpointer)."""

    def __init__(self, url: MetaURL, data_dir: str, *, rpc_address: str, http_address: str = "",
                 open_namesystem: Callable, on_active: Callable = lambda nn: None,
                 on_standby: Callable = lambda: None, ttl_s: int = DEFAULT_TTL_S, cluster_id: str | None = None,
                 max_txn_ops: int = 1024):
        self.url, self.data_dir = url, data_dir
        self.rpc_address, self.http_address = rpc_address, http_address
        self.open_namesystem, self.on_active, self.on_standby = open_namesystem, on_active, on_standby
        self.ttl_s, self.cluster_id, self.max_txn_ops = ttl_s, cluster_id, max_txn_ops
        self.role, self.epoch = Role.STARTING, 0
        self.namesystem = None          # the active's Namesystem, or the standby's
        self.tailer: Tailer | None = None
        self.lease: Lease | None = None
        self.engine: EtcdJournal | None = None
        self._hold_off_until = 0.0
        self.failovers = 0
        self._heard = None              # the last Namesystem's, whose DataNodes a new standby inherits
        self._lost = threading.Event()
        self._stop = threading.Event()
        self._switch = threading.Lock()
        self.meta = EtcdMeta(url)
        self._thread: threading.Thread | None = None

    # ------------------------------------------------------------------ what the servicer asks

    def active_address(self) -> str:
        """The active's address as this NameNode knows it ("" while it switches roles itself)."""
        if self.role == Role.ACTIVE:
            return self.rpc_address
        return self.tailer.leader[0] if self.tailer and self.role == Role.STANDBY else ""

    def is_active(self) -> bool:
        """Active and surely still so (the lease's deadline holds)."""
        return self.role == Role.ACTIVE and not self._lost.is_set() and self.lease is not None and self.lease.serving()

    def switching(self) -> bool:
        return self.role not in (Role.ACTIVE, Role.STANDBY) or self._lost.is_set()

    def writer(self):
        nn = self.namesystem
        if nn is None or not self.is_active():
            raise NotActive("" if self.role == Role.ACTIVE else self.active_address())
        return nn

    def reader(self):
        """The active's Namesystem, or a standby's (observer reads)."""
        nn = self.namesystem
        if nn is None or (self.role == Role.ACTIVE and not self.is_active()) or \
                self.role not in (Role.ACTIVE, Role.STANDBY) or not nn.cluster_id:
            raise NotActive(self.active_address())
        return nn

    def namesystem_for_datanodes(self):
        """Whichever Namesystem this NameNode runs (a standby keeps what DataNodes report)."""
        nn = self.namesystem
        if nn is None or not nn.cluster_id:
            raise NotActive(self.active_address())
        return nn

    def revision(self) -> int:
        """The etcd revision this NameNode's answers reflect at least: the active's last commit
        (a writer is told only after it), a standby's applied one. Replies carry it
        (``hedgefs-rev``); a client sends back the highest it saw."""
        if self.role == Role.ACTIVE and self.engine is not None:
            return self.engine.revision
        tailer = self.tailer
        return tailer.applied if tailer is not None and self.role == Role.STANDBY else 0

    def caught_up(self, revision: int) -> None:
        """Read your writes on a standby (HDFS's msync): a client that saw ``revision`` (on the
        active, or another standby) is answered only once this standby has applied it, waiting up
        to CATCH_UP_S; else NotActive, naming the active, which the client follows. A client that
        has seen none yet (a new process: -1) is sent to the active, whose view is the newest."""
        tailer = self.tailer
        if revision < 0 and self.role == Role.STANDBY:   # a client that has seen nothing yet: the active
            raise NotActive(self.active_address())   # (not a standby behind: no observer_behind)
        if revision <= 0 or self.role != Role.STANDBY or tailer is None or tailer.applied >= revision:
            return
        if not tailer.wait_applied(revision, CATCH_UP_S):
            metrics.observer_behind()
            raise NotActive(self.active_address())

    @property
    def applied_revision(self) -> int:
        return self.tailer.applied if self.tailer else 0

    def describe(self) -> dict:
        """What ReportResponse.namenode says (NameNodeRole)."""
        nn = self.namesystem
        return {"role": self.role.value, "epoch": self.epoch, "meta": str(self.url), "active": self.active_address(),
                "applied_revision": self.applied_revision if self.role == Role.STANDBY else 0,
                "safe_mode": bool(nn is not None and self.role == Role.ACTIVE and nn.in_safe_mode)}

    # ------------------------------------------------------------------ the loop

    def start(self) -> None:
        """Check etcd and the prefix (converting a schema-5 one), build the standby, start the
        loop. MetaUnavailable when no etcd member answers; Refused (identity.Refused) for a
        prefix that holds another cluster's data or no hedgefs namespace."""
        from hedgefs.security.identity import Refused

        self.meta.status()
        engine = EtcdJournal(self.meta, self.max_txn_ops)
        try:
            engine.check()
        except NotANamespace as err:
            if str(err) != "schema-5":
                raise Refused(f"{self.url}: {err}") from None
            upgrade_schema5(self.meta)
        self._standby()
        self._thread = threading.Thread(target=self._run, name="namenode-ha", daemon=True)
        self._thread.start()

    def _standby(self) -> None:
        """A fresh lease, the namespace read from etcd, a tailer applying what comes next."""
        from hedgefs.security.identity import Refused

        engine = EtcdJournal(self.meta, self.max_txn_ops)
        nn = self.open_namesystem(engine, True)
        nn.active_hint = self.active_address   # a read it cannot locate goes to the active
        if self._heard is not None:   # DataNodes register with a new standby at their next heartbeat:
            nn.inherit_datanodes(self._heard)   # until then, those the last one heard
            self._heard = None
        try:
            if self.cluster_id and nn.cluster_id and nn.cluster_id != self.cluster_id:
                raise Refused(f"{self.url}: the namespace on etcd belongs to cluster {nn.cluster_id}, "
                              f"not {self.cluster_id}")
            self.tailer = Tailer(self.meta, nn, engine.read_revision)
            self.lease = Lease(self.meta, self.ttl_s)
        except BaseException:
            if self.tailer is not None:
                self.tailer.stop()
                self.tailer = None
            nn.close()
            raise
        self.engine, self.namesystem = engine, nn
        self._lost.clear()
        self.role = Role.STANDBY
        metrics.ha_standby()
        log.info("namenode is a standby on %s (at txid %d, revision %d; active %s)", self.url, nn.journal.last,
                 self.tailer.applied, self.tailer.leader[0] or "none")

    def _drop_standby(self) -> None:
        """Undo a standby (it could not follow etcd, or could not be built)."""
        self.role = Role.STARTING
        tailer, nn, lease = self.tailer, self.namesystem, self.lease
        self.tailer = self.namesystem = self.lease = None
        self._heard = nn or self._heard
        for stop in (tailer.stop if tailer else None, (lambda: nn.close(False)) if nn else None,
                     lease.revoke if lease else None):
            if stop is not None:
                try:
                    stop()
                except Exception as err:
                    log.debug("dropping the standby: %s", err)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                if self.role != Role.STANDBY:
                    self._standby()
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
                    if self.role == Role.STANDBY:
                        self._drop_standby()
                self._stop.wait(1.0)

    def _campaign(self) -> int:
        """Wait until there is no leader, then try to become it; 0 if stopped."""
        value, confirm_at = leader_value(self.rpc_address, self.http_address), time.monotonic() + CONFIRM_S
        tailer = self.tailer
        while not self._stop.is_set():
            if tailer.failed:
                raise RuntimeError(tailer.failed)
            if self.lease.lost.is_set():   # our own lease ended while waiting: get another
                self.lease = Lease(self.meta, self.ttl_s)
            _, epoch, lease = tailer.leader
            if epoch and time.monotonic() >= confirm_at:   # the watch's word, checked against etcd's now and then
                confirm_at = time.monotonic() + CONFIRM_S
                _, epoch, lease = tailer.confirm_leader()
            if epoch and lease == self.lease.id:   # a campaign whose answer was lost did win
                return epoch
            if epoch == 0 and time.monotonic() >= self._hold_off_until:
                epoch, _ = self.meta.campaign(value, self.lease.id)
                if epoch:
                    return epoch
            tailer.changed.wait(min(1.0, max(0.05, self._hold_off_until - time.monotonic())))
            tailer.changed.clear()
        return 0

    def _promote(self, epoch: int) -> None:
        began = time.monotonic()   # the lease won: the campaign's answer
        if not self.tailer.wait_applied(epoch, PROMOTE_WAIT_S):
            raise MetaError(f"elected (epoch {epoch}) but the journal did not catch up within {PROMOTE_WAIT_S:.0f} s"
                            f"{': ' + self.tailer.failed if self.tailer.failed else ''}")
        with self._switch:
            self.role = Role.PROMOTING
            self.tailer.stop()
            if self.tailer.failed:
                raise MetaError(self.tailer.failed)
            self.epoch = epoch
            nn, engine = self.namesystem, self.engine
            engine.start_writing(epoch, self.lease.serving, self.tailer.applied)
            threading.Thread(target=self._watch_lease, args=(self.lease,), daemon=True,
                             name="namenode-lease-watch").start()
            nn.journal.on_failure = self._on_fatal
            nn.journal.on_first_batch = lambda txid: log.info(
                "first change durable as the active (txid %d) %.0f ms after winning the lease (epoch %d)",
                txid, (time.monotonic() - began) * 1000, epoch)
            nn.promote(engine)
            if not nn.cluster_id:   # a prefix no active has formatted yet: this one does
                nn.format(self.cluster_id)
            self.failovers += 1
            metrics.ha_promoted(epoch)
            self.role = Role.ACTIVE
            self.on_active(nn)
        log.info("namenode is the ACTIVE on %s (epoch %d, txid %d): promoted in %.0f ms", self.url, epoch,
                 nn.journal.last, (time.monotonic() - began) * 1000)

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
            self.role = Role.DEMOTING
            metrics.ha_standby()
            self.on_standby()
            nn, self.namesystem = self.namesystem, None
            self.tailer = None
            self._heard = nn
            if nn is not None:
                nn.journal.fail("this NameNode is no longer the active")
                try:
                    nn.close(checkpoint=False)
                except Exception as err:   # its journal failed: nothing of it is trusted
                    log.info("closing the deposed namesystem: %s", err)
            if self.lease is not None:   # given back, not left to expire: a standby need not wait
                self.lease.revoke()
            self.epoch = 0
        log.warning("namenode deposed: re-entering standby (its namespace read again from etcd)")

    def handover(self) -> bool:
        """Graceful: drain (every record durable), give the lease up; a standby takes over at
        once. False when this NameNode is not the active."""
        with self._switch:
            if self.role != Role.ACTIVE or self.namesystem is None:
                return False
            self.role = Role.DEMOTING
            nn = self.namesystem
            nn.journal.wait_durable(nn.journal.last)
            self._hold_off_until = time.monotonic() + self.ttl_s   # a standby's turn, not ours again
            self.lease.revoke()
        self._on_fatal("handed over (admin failover)")
        return True

    def close(self) -> None:
        self._stop.set()
        self._lost.set()
        tailer = self.tailer
        if tailer is not None:
            tailer.changed.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
        with self._switch:
            if self.role == Role.ACTIVE and self.lease is not None:
                self.on_standby()
                if self.namesystem is not None:
                    self.namesystem.close()   # a clean shutdown's checkpoint, then the lease goes
                    self.namesystem = None
                self.lease.revoke()
            else:
                if self.tailer is not None:
                    self.tailer.stop()
                if self.namesystem is not None:
                    self.namesystem.close(checkpoint=False)
                if self.lease is not None:
                    self.lease.revoke()
        self.meta.close()
