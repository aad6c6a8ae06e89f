"""The monitor thread: calls ``Namesystem.tick`` every ``interval_s`` (liveness, leases, repairs,
what deletes let go of)."""

from __future__ import annotations

import logging
import threading

from hedgefs.namenode.journal.journal import StoreFailed

log = logging.getLogger("hedgefs.namenode")


class Monitor:
    def __init__(self, namenode, interval_s: float):
        self.namenode = namenode
        self.interval_s = interval_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="namenode-monitor", daemon=True)

    def start(self) -> None:
        self.namenode.restart_leases()   # this process begins to serve as the active
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            try:
                self.namenode.tick()
            except StoreFailed as err:   # the store failed (on etcd: this NameNode steps down): said once there
                log.debug("monitor pass skipped: %s", err)
            except Exception:  # one bad pass must not end repairs for good
                log.exception("monitor pass failed")
