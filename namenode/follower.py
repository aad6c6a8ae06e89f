"""A standby's view: built from an etcd snapshot, then kept current by a watch (HDFS's standby
tailing the edit log).

``Follower(meta, path, ...)`` ranges the prefix at one revision into a fresh view file, then
watches from the next revision, applying each revision's events in one SQLite transaction and
recording it (``applied``; ``wait_applied``). It also follows the leader key: ``leader`` is
(address, epoch, lease) of the active it knows (("", 0, 0) while there is none) and ``changed`` is set
whenever that changes, so the owner campaigns when the key goes. A broken watch is re-opened
from the next revision; revisions compacted away mean a full reload (one transaction).
"""

from __future__ import annotations

import logging
import threading

from hedgefs.namenode import etcd_view as view
from hedgefs.namenode.election import leader_address
from hedgefs.namenode.etcd_meta import Compacted, EtcdMeta, MetaError

log = logging.getLogger("hedgefs.namenode")

RETRY_S = 0.5


class Follower:
    def __init__(self, meta: EtcdMeta, path: str, base_schema: str, schema_version: int):
        self.meta, self.path = meta, path
        self.schema_version = schema_version
        revision, items = meta.snapshot()
        self.conn, self.schema = view.build(path, base_schema, revision, items, schema_version)
        self.applied = revision
        self.leader = ("", 0, 0)
        self.changed = threading.Event()
        if "leader" in dict(items):
            self.confirm_leader()
        self.failed: str | None = None
        self._cond = threading.Condition()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="namenode-follow", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                for revision, events in self.meta.watch(self.applied + 1, self._stop):
                    self._apply(revision, events)
            except Compacted as err:
                log.warning("standby view: %s; reloading it from a snapshot", err)
                try:
                    revision, items = self.meta.snapshot()
                    view.check(items, self.schema_version)
                    view.reload(self.conn, self.schema, revision, items)
                    self._advance(revision)
                    self.confirm_leader()   # its events were compacted away too
                except (MetaError, view.NotANamespace) as again:
                    log.warning("standby view: reload failed: %s", again)
            except MetaError as err:
                if not self._stop.is_set():
                    log.info("standby view: watch broke (%s); re-opening it from revision %d", err, self.applied + 1)
            except Exception as err:   # the view cannot follow: the owner must not promote it
                log.exception("standby view: cannot apply etcd's changes")
                with self._cond:
                    self.failed = f"the standby's view cannot follow etcd: {err}"
                    self._cond.notify_all()
                self.changed.set()
                return
            self._stop.wait(RETRY_S)

    def _apply(self, revision: int, events: list) -> None:
        if revision <= self.applied:
            return
        view.apply(self.conn, self.schema, revision, [ev for ev in events if ev.rel != "leader"])
        for ev in events:
            if ev.rel == "leader":
                self.leader = (leader_address(ev.value), ev.create_revision, ev.lease) if ev.value is not None \
                    else ("", 0, 0)
                self.changed.set()
        self._advance(revision)

    def confirm_leader(self) -> tuple[str, int, int]:
        """The leader key as etcd has it now (one read), not as the watch last said: a watch that
        missed the key's end must not keep a standby from campaigning. The watch's word while etcd
        does not answer."""
        try:
            got = self.meta.get("leader")
        except MetaError as err:
            log.debug("standby view: cannot read the leader key: %s", err)
            return self.leader
        leader = (leader_address(got[0]), got[1], got[2]) if got is not None else ("", 0, 0)
        if leader != self.leader:
            if self.leader[1]:
                log.warning("standby view: the watch still showed active %s (epoch %d), etcd shows %s",
                            self.leader[0] or "?", self.leader[1], leader[0] or "none")
            self.leader = leader
            self.changed.set()
        return leader

    def _advance(self, revision: int) -> None:
        with self._cond:
            self.applied = max(self.applied, revision)
            self._cond.notify_all()

    def wait_applied(self, revision: int, timeout_s: float) -> bool:
        """True once every revision up to ``revision`` is in the view."""
        with self._cond:
            return self._cond.wait_for(lambda: self.applied >= revision or self.failed, timeout_s) \
                and self.applied >= revision

    def stop(self) -> None:
        """Stop following and close the view's connection (the file stays: an active opens it)."""
        self._stop.set()
        self._thread.join(timeout=10)
        if not self._thread.is_alive():   # a connection closed under a running statement crashes SQLite
            self.conn.close()
