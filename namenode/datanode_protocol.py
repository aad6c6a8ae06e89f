"""The DataNode side of the namesystem: registration, heartbeats and the commands their replies
carry (deletes, repairs), block reports, receipts, bad-unit reports, and the monitor's pass
(``tick``: liveness changes, expired leases and deletes, repair planning). A mixin of
``Namesystem``, whose state it shares (namesystem.py says who keeps what)."""

from __future__ import annotations

import logging
from typing import Iterable

from hedgefs.namenode import purge, retry_cache
from hedgefs.namenode.errors import AlreadyExists, FailedPrecondition, InvalidArgument, PermissionDenied
from hedgefs.namenode.locking import _locked
from hedgefs.namenode.model import DataNodeStats, DeleteUnit, HeartbeatReply, RepairUnit
from hedgefs.namenode.namespace import load_policy
from hedgefs.namenode.repair_scheduler import InFlight

log = logging.getLogger("hedgefs.namenode")

REPORT_GRACE_S = 10.0        # a block report may predate a unit placed this recently: keep it
DELETE_RESEND_S = 30.0
DELETE_TTL_S = 600.0
EXPIRE_PART_ROWS = 500       # rows of one expiry change on SQLite (on etcd ``Database.part_rows``): ~5 ms
MAX_DELETES_PER_HEARTBEAT = 1000
MAX_BAD_UNITS_PER_CALL = 1000
MAX_UNITS_STORED_PER_CALL = 10000
MAX_REPORT_UNITS = 50_000_000  # units in one DataNode's report, all parts together
FULL_SCAN_S = 10.0           # the repair scan runs at least this often even when nothing changed


class DataNodeProtocol:
    """The DataNode RPCs and the monitor's pass; the state is the Namesystem's."""

    def _require_known(self, datanode_id: str) -> None:
        if not self.liveness.knows(datanode_id):
            raise FailedPrecondition(f"unknown DataNode {datanode_id!r}: register first")

    @_locked
    def adopt_datanodes(self, heard: dict[str, tuple[str, str]]) -> None:
        """A new active (HA): the DataNodes that reported to it as a standby are usable at once
        (placement, reads), not after their next registration; their first heartbeat still asks
        them to register and report again (nothing is deleted or repaired before that report)."""
        for datanode_id, (address, data_address) in heard.items():
            if self.liveness.knows(datanode_id) or address:
                self.liveness.seen(datanode_id, address, data_address)
                self._registered.add(datanode_id)
                self._reregister.add(datanode_id)
        if heard:
            self._scan_needed = True
            log.info("adopted %d DataNodes that reported to this NameNode as a standby", len(heard))

    @_locked
    def register(self, datanode_id: str, address: str, data_address: str = "", cluster_id: str = "",
                 storage_id: str = "") -> str:
        """Returns this namespace's cluster id (the DataNode records it); a DataNode that joined
        another cluster is refused, and so is a second DataNode under the id of a live one with
        another data dir (``storage_id``): its empty block report would hide the real one's units."""
        if not datanode_id or not address:
            raise InvalidArgument("RegisterDataNode needs a DataNode id and an address")
        if cluster_id and cluster_id != self.cluster_id:
            log.warning("refused DataNode %s of cluster %s (this is cluster %s)", datanode_id, cluster_id, self.cluster_id)
            raise PermissionDenied(f"DataNode {datanode_id} belongs to cluster {cluster_id}; this NameNode's "
                                   f"cluster is {self.cluster_id}")
        self._check_one_storage(datanode_id, address, storage_id)
        with self.db.tx():
            self.blocks.save_datanode(datanode_id, address, data_address)
        self.liveness.seen(datanode_id, address, data_address).storage_id = storage_id
        self._registered.add(datanode_id)
        self._reregister.discard(datanode_id)
        # A (re)starting DataNode forgot whatever it was told: plan its repairs again, resend deletes.
        self.repairs.forget_target(datanode_id)
        self._forget_sent(datanode_id)
        self._report_parts.pop(datanode_id, None)   # a report it was sending in parts is void
        self._scan_needed = True
        log.info("datanode %s registered at %s", datanode_id, address)
        return self.cluster_id

    def _check_one_storage(self, datanode_id: str, address: str, storage_id: str) -> None:
        """One DataNode per id: refuse a registration whose storage differs from the live one's."""
        known = self.liveness.get(datanode_id)
        if known is None or not storage_id or not known.storage_id or known.storage_id == storage_id:
            return
        if datanode_id in self._registered and self.liveness.is_live(datanode_id):
            log.warning("refused a second DataNode %s at %s (storage %s): %s is live at %s with storage %s",
                        datanode_id, address, storage_id, datanode_id, known.address, known.storage_id)
            raise AlreadyExists(f"DataNode id {datanode_id} is taken: a live DataNode at {known.address} has it, "
                                f"with another data dir (storage {known.storage_id}, this one's is {storage_id}); "
                                f"give each DataNode its own --id")
        log.warning("datanode %s registers with another data dir (storage %s, was %s): the old one's units are "
                    "gone with it", datanode_id, storage_id, known.storage_id)

    @_locked
    def heartbeat(self, datanode_id: str, address: str = "", used_bytes: int = 0, units: int = 0,
                  active_repairs: int = 0, stats: DataNodeStats | None = None,
                  data_address: str = "", deleted: Iterable[tuple[int, int, int]] = ()) -> HeartbeatReply:
        """``deleted``: units (group, index, generation) the DataNode deleted at this NameNode's
        command since its last heartbeat: their pending deletes are confirmed here."""
        if not self.liveness.knows(datanode_id):
            return HeartbeatReply([], reregister=True)
        if datanode_id not in self._registered:
            # Known from SQLite but not yet heard by this NameNode process (it restarted): it
            # stays live for reads, and is asked to register and report its units, so that the
            # block map is rebuilt from what the DataNodes really hold.
            self.liveness.heartbeat(datanode_id, address, used_bytes, units, active_repairs, stats, data_address)
            return HeartbeatReply([], reregister=True)
        if datanode_id in self._reregister:   # adopted at a failover: its registration and report, please
            self._reregister.discard(datanode_id)
            self.liveness.heartbeat(datanode_id, address, used_bytes, units, active_repairs, stats, data_address)
            return HeartbeatReply([], reregister=True)
        if (address and address != self.liveness.address(datanode_id)) or \
                (data_address and data_address != self.liveness.data_address(datanode_id)):
            with self.db.tx():
                self.blocks.save_datanode(datanode_id, address or self.liveness.address(datanode_id),
                                          data_address or self.liveness.data_address(datanode_id))
            log.info("datanode %s now at %s (data %s)", datanode_id, address, data_address)
        self.liveness.heartbeat(datanode_id, address, used_bytes, units, active_repairs, stats, data_address)
        deleted = list(deleted)[:MAX_UNITS_STORED_PER_CALL]   # more is a bad DataNode; a report covers them
        if deleted:
            confirmed = self.blocks.confirm_deletes(datanode_id, deleted)
            for group_id, index in confirmed:
                self._delete_sent.pop((datanode_id, group_id, index), None)
            if confirmed:   # a unit of those groups may go to this DataNode again
                self._scan_needed = True
        commands: list[DeleteUnit | RepairUnit] = self._deletes_to_send(datanode_id)
        for repair in self.repairs.take(datanode_id):
            command = self._repair_command(repair)
            if command is None:
                self.repairs.drop(repair.group_id, repair.index)
                self._scan_needed = True
            else:
                commands.append(command)
                log.info("repair of unit %d/%d sent to %s", repair.group_id, repair.index, datanode_id)
        return HeartbeatReply(commands)

    def _deletes_to_send(self, datanode_id: str) -> list[DeleteUnit]:
        now, out = self.clock(), []
        if self.in_safe_mode or (self.safe_mode_share is not None and datanode_id not in self._reported):
            return out
        for group_id, index, generation in self.blocks.deletes_due(datanode_id, self._usable):
            key = (datanode_id, group_id, index)
            sent = self._delete_sent.get(key)
            if sent is None or now - sent >= DELETE_RESEND_S:
                self._delete_sent[key] = now
                out.append(DeleteUnit(group_id, index, generation))
                if len(out) >= MAX_DELETES_PER_HEARTBEAT:
                    break
        return out

    def _resend_after_report(self, datanode_id: str) -> None:
        """After a full report: confirmed deletes are gone; those still listed go again with the
        next heartbeat, and stay sent (the DataNode may still carry out the first: ``claim``)."""
        pending = {(g, i) for g, i, _gen in self.blocks.pending_deletes(datanode_id)}
        for key in [k for k in self._delete_sent if k[0] == datanode_id]:
            if (key[1], key[2]) in pending:
                self._delete_sent[key] = float("-inf")
            else:
                del self._delete_sent[key]

    def _expire_lease(self, file_id: int) -> str:
        path = self.ns.path_of(file_id)
        self.ns.abandon(file_id, self.blocks.forget_files, detach_over=purge.abandon_over(self.db))
        return path

    def _expire_deletes(self, before_ms: int, limit: int) -> int:
        gone = self.blocks.expire_deletes(before_ms, limit)
        for key in gone:
            self._delete_sent.pop(key, None)   # what expired only: a big delete's queue may hold millions
        return len(gone)

    def _forget_sent(self, datanode_id: str) -> None:
        for key in [k for k in self._delete_sent if k[0] == datanode_id]:
            del self._delete_sent[key]

    def _repair_command(self, repair: InFlight) -> RepairUnit | None:
        """The command for a planned repair, or None if it is no longer needed or possible."""
        found = self.blocks.group(repair.group_id)
        if found is None or found[1] != "complete":
            return None
        group, _, policy_name = found
        policy = load_policy(policy_name)
        if repair.index in group.good(self._stays):   # (a leaving DataNode's copy is to be moved)
            return None
        if repair.target in group.units.values():  # it got another unit of the group meanwhile
            return None
        sources = [self._location(i, d, group.id, group.generation)
                   for i, d in sorted(group.good(self._usable).items())]
        if not policy.decodable(s.index for s in sources):
            return None
        return RepairUnit(group.id, repair.index, policy.name, group.length, sources, group.generation)

    @_locked
    def block_report(self, datanode_id: str, units: Iterable[tuple[int, int, int]], part: int = 0,
                     more: bool = False) -> dict[str, int]:
        """A DataNode's full list of (group id, index, generation), possibly in parts (0, 1, ...,
        ``more`` on all but the last: applied when the last arrives); counts by outcome."""
        self._require_known(datanode_id)
        self.liveness.seen(datanode_id)
        held = self._report_parts.pop(datanode_id, None)
        if part != (0 if held is None else held[0] + 1):
            raise InvalidArgument(f"block report part {part} from {datanode_id} out of order (expected "
                                  f"{0 if held is None else held[0] + 1}): send the report again from part 0")
        reported = set(units) if held is None else held[1].union(units)
        if len(reported) > MAX_REPORT_UNITS:
            raise InvalidArgument(f"block report from {datanode_id} of more than {MAX_REPORT_UNITS:,} units")
        if more:
            self._report_parts[datanode_id] = (part, reported)
            return {"parts_held": part + 1}
        # The same judge of "a good copy elsewhere" as UnitStored's (a leaving DataNode's copy is
        # none): a repair copy reported before its receipt must move the unit, not be "stale".
        counts = self.blocks.reconcile(datanode_id, reported, self._holds, int(REPORT_GRACE_S * 1000),
                                       self._delete_sent)
        self._resend_after_report(datanode_id)
        self._reported.add(datanode_id)
        self._scan_needed = True
        if counts.get("received"):
            self._receipts.notify_all()
        self.liveness.seen(datanode_id).foreign_units = counts.get("foreign", 0)
        if counts.get("foreign"):
            log.warning("%s holds %d units of generations this namespace never issued (another namespace, "
                        "or a wiped NameNode database?): left alone, never served or deleted from here",
                        datanode_id, counts["foreign"])
        notable = {k: v for k, v in counts.items() if k != "mapped"}
        if notable:
            log.info("block report from %s: %d units, %s", datanode_id, len(reported),
                     ", ".join(f"{k} {v}" for k, v in sorted(notable.items())))
        return counts

    @_locked
    def units_stored(self, datanode_id: str, units: Iterable[tuple[int, int, int]]) -> list[str]:
        """A DataNode's receipts for units it has just stored (a writer's, or a repair's); returns
        each one's outcome (``BlockMap.claim``)."""
        self._require_known(datanode_id)
        self.liveness.seen(datanode_id)
        units = list(units)
        if len(units) > MAX_UNITS_STORED_PER_CALL:
            raise InvalidArgument(f"at most {MAX_UNITS_STORED_PER_CALL} units per UnitStored, got {len(units)}")
        outcomes = self.db.each_in_changes(
            units, lambda u: self.blocks.claim(datanode_id, *u, self._holds, self._delete_sent))
        self._scan_needed = True
        for (group_id, index, _gen), outcome in zip(units, outcomes):
            repair = self.repairs.in_flight.get((group_id, index))
            if repair is not None and (repair.target == datanode_id or outcome in ("adopted", "moved")):
                self.repairs.drop(group_id, index)
            if outcome in ("adopted", "moved"):
                self.repairs.done += 1
                log.info("unit %d/%d stored on %s (repair done)", group_id, index, datanode_id)
            elif outcome not in ("mapped", "received", "writing"):
                log.info("unit %d/%d stored on %s: %s", group_id, index, datanode_id, outcome)
        if "received" in outcomes:
            self._receipts.notify_all()
        return outcomes

    def unit_stored(self, datanode_id: str, group_id: int, index: int, generation: int) -> str:
        return self.units_stored(datanode_id, [(group_id, index, generation)])[0]

    @_locked
    def report_bad_units(self, units: Iterable[tuple[int, int, int, str, str]]) -> None:
        """(group id, unit index, generation, DataNode id, reason) of corrupt copies."""
        units = list(units)
        if len(units) > MAX_BAD_UNITS_PER_CALL:
            raise InvalidArgument(f"at most {MAX_BAD_UNITS_PER_CALL} bad units per report, got {len(units)}")
        self._scan_needed = True
        with self.db.tx():
            for group_id, index, generation, datanode_id, reason in units:
                outcome = self.blocks.mark_bad(datanode_id, group_id, index, generation)
                if outcome == "marked":
                    log.warning("unit %d/%d on %s is corrupt (%s): marked, kept until a repaired copy replaces it",
                                group_id, index, datanode_id, reason or "no reason given")
                elif outcome == "deleted":
                    log.warning("unit %d/%d on %s is corrupt (%s), and not the mapped copy: to be deleted",
                                group_id, index, datanode_id, reason or "no reason given")

    # ------------------------------------------------------------------ the monitor's pass

    def _leave_safe_mode(self) -> bool:
        """True (and out of safe mode) once ``safe_mode_share`` of the block groups are readable
        from DataNodes that block-reported to this process, or the deadline passed (safe_mode.py);
        an admin's lasts."""
        if self.safe_mode_reason == "admin":
            return False
        reported, total = self.safe_mode_counts = self._safe_mode_counts()
        late = self._safe_mode_until is not None and self.clock() >= self._safe_mode_until
        if total and reported < self.safe_mode_share * total and not late:
            return False
        self.safe_mode_reason = ""
        self.in_safe_mode = False
        log.info("leaving safe mode: %d of %d block groups readable from reported DataNodes (%d of them)",
                 reported, total, len(self._reported))
        return True

    def restart_leases(self) -> None:
        """Every lease of a file being written counts from now (this process begins to serve)."""
        self.leases_from_ms = self.wall_ms()

    def tick(self) -> list[InFlight]:
        """One pass of the monitor: expired retry-cache entries and deletes, then liveness changes,
        expired leases and repair planning.

        Returns the repairs planned in this pass.
        """
        now_ms = self.wall_ms()
        self._drain(lambda limit: retry_cache.expire(self.db, now_ms, limit))
        self._drain(lambda limit: self._expire_deletes(now_ms - int(DELETE_TTL_S * 1000), limit))
        return self._tick()

    def _drain(self, step) -> None:
        """``step(limit)`` (changes at most ``limit`` rows, returns how many) a change at a time
        until it does fewer, taking the writers' lock for one change only. A backlog (a dead
        DataNode's deletes of a big delete, all expiring together; a busy hour's retry-cache
        entries) was one change under the lock (1.2 s for 200,000 deletes on SQLite), and on etcd
        one was refused once it passed a few hundred rows, and so was every pass after it: now it
        goes whole in every pass, and writers go between its changes."""
        limit = self.db.part_rows() or EXPIRE_PART_ROWS
        while self._expire_part(step, limit) >= limit:
            pass

    @_locked
    def _expire_part(self, step, limit: int) -> int:
        with self.db.tx():
            return step(limit)

    @_locked
    def _tick(self) -> list[InFlight]:
        changed = self.liveness.transitions()
        for datanode_id, live in changed:
            self._scan_needed = True
            if live:
                log.info("datanode %s is live again", datanode_id)
            else:
                log.warning("datanode %s is dead: no heartbeat for %.1f s", datanode_id,
                            self.liveness.age_s(datanode_id))
        for repair in self.repairs.expire(self.liveness.is_live):
            log.warning("repair of unit %d/%d on %s timed out or its target died: planning it again",
                        repair.group_id, repair.index, repair.target)
            self._scan_needed = True
        now_ms = self.wall_ms()
        cutoff_ms = now_ms - int(self.lease_timeout_s * 1000)
        # Leases count from this process's start as the active at the earliest (HDFS renews
        # every lease on start-up): a writer whose renewals failed while no NameNode served
        # gets one whole lease period to renew, not an abandon on the first pass.
        expired = self.ns.expired_leases(cutoff_ms) if cutoff_ms > self.leases_from_ms else []
        for file_id, path in zip(expired, self.db.each_in_changes(expired, self._expire_lease)):
            log.warning("lease on %s (file %d) expired: the writer is gone, abandoned it", path, file_id)
        self.health.refresh(self.liveness.is_live, [d for d, _ in changed])
        if self.in_safe_mode and not self._leave_safe_mode():
            return []
        if not self._scan_needed and self.clock() - self._last_scan < FULL_SCAN_S:
            return []
        self._scan_needed, self._last_scan = False, self.clock()
        unit_bytes = self.ns.default_block_size
        needs = self._needs(self.health.unhealthy | self._leaving_groups())
        planned = self.repairs.plan(needs, [d for d in self._placeable_ids() if self.liveness.has_room(d, unit_bytes)],
                                    self.liveness.load_key, self.blocks.datanodes_deleting(n.group_id for n in needs))
        for repair in planned:
            self.liveness.note_allocated(repair.target, unit_bytes)
            log.info("repair of unit %d/%d planned on %s", repair.group_id, repair.index, repair.target)
        return planned
