"""Whose commands a DataNode obeys: the active NameNode of the highest epoch it has seen.

An HA cluster has several NameNodes, and a DataNode reports to all of them (heartbeat.py); only
one is the active, and a deposed one (frozen past its lease, cut off from etcd) may still send
commands for a while. Every Register and Heartbeat reply says the sender's ``epoch`` (the create
revision of its leader key in etcd: it only grows) and whether it is ``active``. As HDFS's
BPOfferService does with its txid, the DataNode keeps the highest epoch an active has shown it,
in ``<data_dir>/EPOCH`` (written atomically and fsynced before any command of a new epoch is
obeyed, so it survives a restart), and obeys commands only from an active of that epoch:

- from an HA NameNode (epoch > 0) that says it is not the active: refused (``not_active``);
- of an epoch below the highest seen (a deposed active): refused (``stale_epoch``);
- of epoch 0 (a NameNode without HA, SQLite) once an HA epoch was seen: refused (``no_ha``): a
  NameNode on an SQLite URL pointed at an HA cluster's DataNodes must not delete anything.

Every command a DataNode gets today (delete, repair) is destructive. Each refusal is counted
(``hedgefs_datanode_commands_refused_total{reason}``) and logged with the NameNode's address and
both epochs (once per NameNode, reason and epoch: a NameNode refused on every heartbeat would
drown the log). A cluster without HA (epoch 0 only, no EPOCH file) obeys its one NameNode as
before, whatever its replies say of ``active`` (NameNodes older than the field leave it false).
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable, Sequence
from pathlib import Path

log = logging.getLogger("hedgefs.datanode")

EPOCH_FILE = "EPOCH"
REASONS = ("not_active", "stale_epoch", "no_ha")


class BadEpochFile(ValueError):
    pass


class EpochGuard:
    def __init__(self, data_dir: str | os.PathLike, on_refused: Callable[[str, int], None] | None = None):
        self.path = Path(data_dir) / EPOCH_FILE
        self.on_refused = on_refused or (lambda reason, n: None)   # (reason, commands): the metric
        self._lock = threading.Lock()
        self._logged: set[tuple[str, str, int]] = set()
        self.highest = self._load()

    def _load(self) -> int:
        try:
            text = self.path.read_text().strip()
        except FileNotFoundError:
            return 0
        if not text.isdigit():
            raise BadEpochFile(f"{self.path} does not hold an epoch ({text[:40]!r}): fix or remove it")
        return int(text)

    def _persist(self, epoch: int) -> None:
        tmp = self.path.with_name(EPOCH_FILE + ".tmp")
        with open(tmp, "w") as f:
            f.write(f"{epoch}\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)
        fd = os.open(self.path.parent, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def saw(self, namenode: str, epoch: int, active: bool) -> int:
        """A reply of ``namenode`` said (epoch, active): an active of a new, higher epoch is
        recorded on disk first. Returns the highest epoch seen."""
        with self._lock:
            if active and epoch > self.highest:
                self._persist(epoch)
                log.info("namenode %s is the active of epoch %d (the highest seen was %d)", namenode, epoch,
                         self.highest)
                self.highest = epoch
            return self.highest

    def admit(self, namenode: str, epoch: int, active: bool, commands: Sequence) -> list:
        """The commands of one heartbeat reply that may be obeyed: all of them, or none."""
        highest = self.saw(namenode, epoch, active)
        if not commands:
            return []
        if epoch == 0:   # a NameNode without HA (its replies may not even set ``active``)
            if not highest:
                return list(commands)
            reason, why = "no_ha", "it has no HA epoch (a NameNode on SQLite?) and this DataNode serves an HA cluster"
        elif not active:
            reason, why = "not_active", "it says it is not the active"
        elif epoch < highest:
            reason, why = "stale_epoch", "its epoch is below the highest seen (a deposed active)"
        else:
            return list(commands)
        self.on_refused(reason, len(commands))
        key = (namenode, reason, epoch)
        level = logging.DEBUG if key in self._logged else logging.WARNING
        self._logged.add(key)
        log.log(level, "refused %d command(s) (%s) from namenode %s: epoch %d, highest seen %d: %s",
                len(commands), ", ".join(sorted({c.WhichOneof("command") or "?" for c in commands})),
                namenode, epoch, highest, why)
        return []
