"""A standby's tail of the journal on etcd (HDFS's standby tailing the edit log): a watch of the
prefix from the revision its namespace was read at, applying each batch's records as they come
(``Namesystem.follow``: the same apply as the active's), so that the standby is hot: promoted, it
serves at once, its tree and its block map already current.

It also follows the leader key: ``leader`` is (address, epoch, lease) of the active it knows
(("", 0, 0) while there is none) and ``changed`` is set whenever that changes, so the owner
campaigns when the key goes. ``applied`` is the etcd revision the standby's namespace reflects (a
watch's progress notifications move it on while nothing changes): read your writes on a standby,
and a promotion's catching up, wait on it. A broken watch is re-opened from the next revision;
revisions compacted away, or a batch that does not follow the last one applied, end the tail
(``failed``): the owner builds the standby again from the latest image.
"""

from __future__ import annotations

import logging
import threading

from hedgefs.namenode.ha.election import leader_address
from hedgefs.namenode.journal.etcd_meta import Compacted, EtcdMeta, MetaError
from hedgefs.namenode.journal import records
from hedgefs.namenode.journal.etcd import EtcdJournal

log = logging.getLogger("hedgefs.namenode")

RETRY_S = 0.5


class Tailer:
    def __init__(self, meta: EtcdMeta, namesystem, revision: int):
        self.meta, self.nn = meta, namesystem
        self.applied = revision
        self.leader = ("", 0, 0)
        self.changed = threading.Event()
        self.failed: str | None = None
        self._cond = threading.Condition()
        self._stop = threading.Event()
        self.confirm_leader()
        self._thread = threading.Thread(target=self._run, name="namenode-tail", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                for revision, events in self.meta.watch(self.applied + 1, self._stop):
                    self._apply(revision, events)
            except Compacted as err:
                self._fail(f"the journal's revisions it needs were compacted ({err})")
                return
            except MetaError as err:
                if not self._stop.is_set():
                    log.info("standby: watch broke (%s); re-opening it from revision %d", err, self.applied + 1)
            except Exception as err:   # a record it cannot apply: this standby must not be promoted
                log.exception("standby: cannot apply the active's records")
                self._fail(f"the standby cannot follow the journal: {err}")
                return
            self._stop.wait(RETRY_S)

    def _fail(self, why: str) -> None:
        with self._cond:
            self.failed = why
            self._cond.notify_all()
        self.changed.set()

    def _apply(self, revision: int, events: list) -> None:
        if revision <= self.applied:
            return
        nn = self.nn
        for ev in events:
            if ev.rel.startswith("j/") and ev.value is not None:
                first, last, data = EtcdJournal.parse(ev.rel, ev.value)
                if last <= nn.journal.last:
                    continue
                if first > nn.journal.last + 1:
                    raise records.CorruptRecord(nn.journal.last + 1, f"missing: the next batch seen starts at {first}")
                for txid, record in records.frames(data, first):
                    if txid > nn.journal.last:
                        nn.follow(txid, record)
            elif ev.rel == "leader":
                self.leader = (leader_address(ev.value), ev.create_revision, ev.lease) if ev.value is not None \
                    else ("", 0, 0)
                self.changed.set()
        with self._cond:
            self.applied = max(self.applied, revision)
            self._cond.notify_all()

    def confirm_leader(self) -> tuple[str, int, int]:
        """The leader key as etcd has it now (one read), not as the watch last said: a watch that
        missed the key's end must not keep a standby from campaigning. The watch's word while etcd
        does not answer."""
        try:
            got = self.meta.get("leader")
        except MetaError as err:
            log.debug("standby: cannot read the leader key: %s", err)
            return self.leader
        leader = (leader_address(got[0]), got[1], got[2]) if got is not None else ("", 0, 0)
        if leader != self.leader:
            if self.leader[1]:
                log.warning("standby: the watch still showed active %s (epoch %d), etcd shows %s",
                            self.leader[0] or "?", self.leader[1], leader[0] or "none")
            self.leader = leader
            self.changed.set()
        return leader

    def wait_applied(self, revision: int, timeout_s: float) -> bool:
        """True once every revision up to ``revision`` is applied."""
        with self._cond:
            return self._cond.wait_for(lambda: self.applied >= revision or self.failed, timeout_s) \
                and self.applied >= revision

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)
