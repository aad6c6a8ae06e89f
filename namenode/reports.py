"""Operators' reads: what ``hedgefs fsck``, ``hedgefs admin report``, the web pages and a new
client's latency model are told about the namespace's groups and the DataNodes. Read-only views
over the namesystem's components (the tree, the block map, liveness, the block manager, repairs,
health): those that must see one consistent state run under the writers' lock
(``Namesystem.locked``), the others read as namespace reads do, then wait until what they could
have seen is durable (``Namesystem.seen``).
"""

from __future__ import annotations

from typing import Iterable

from hedgefs.namenode.blocks.manager import HEALTH_STEP
from hedgefs.namenode.blocks.placement import shape_of
from hedgefs.namenode.model import (
    ClusterReport,
    ClusterStatus,
    DataNodeReport,
    DataNodeStatus,
    FileInfo,
    FilePage,
    FsckProblem,
    FsckReport,
    Listing,
    ReadLatency,
    UnitsPage,
)
from hedgefs.namenode.namespace import paths
from hedgefs.namenode.namespace.inodes import load_policy
from hedgefs.namenode.namespace.tree import LIST_PAGE_BYTES

MAX_FSCK_PROBLEMS = 1000


class Reports:
    def __init__(self, ns):
        self.ns = ns   # the namesystem (its lock, journal and components)

    def fsck(self, path: str = "/") -> FsckReport:
        """Every group under ``path``: healthy, degraded (readable, units lacking), missing, or
        misplaced (every unit live, but against the placement rule as far as the DataNodes in
        service allow: two units on a host, more than the tolerance in a rack)."""
        healthy = degraded = missing = corrupt_files = groups = files = misplaced = 0
        problems: list[FsckProblem] = []
        blocks, is_live = self.ns.blocks, self.ns.liveness.is_live
        bounds: dict = {}
        for file_path, file in self.ns.tree.files_under(path):
            if file.is_link:
                continue
            files += 1
            file_missing = False
            for group in file.groups:
                groups += 1
                policy = load_policy(blocks.policy_of(group))   # (an open tail's own: replicated)
                if policy.name not in bounds:
                    bounds[policy.name] = self.ns.manager.bounds(shape_of(policy.name))
                zeros = blocks.zeros(group)   # a small file's zero units: never stored, never lacking
                good = len(blocks.good(group, is_live).keys() | zeros)
                if good >= policy.units:
                    why = self.ns.manager.misplaced(group, policy, bounds[policy.name])
                    if not why:
                        healthy += 1
                        continue
                    misplaced += 1
                    if len(problems) < MAX_FSCK_PROBLEMS:
                        problems.append(FsckProblem(file_path, group.id, good, policy.k, "MISPLACED", 0,
                                                    policy.units, policy.name, why))
                    continue
                readable = blocks.readable_units(group, is_live).keys() | zeros
                corrupt = len(readable) - good
                status = "DEGRADED" if policy.decodable(readable) else "MISSING"
                if status == "DEGRADED":
                    degraded += 1
                else:
                    missing += 1
                    file_missing = True
                if len(problems) < MAX_FSCK_PROBLEMS:
                    problems.append(FsckProblem(file_path, group.id, good, policy.k, status, corrupt,
                                                policy.units, policy.name))
            corrupt_files += file_missing
        self.ns.seen()
        status = "CORRUPT" if missing else "DEGRADED" if degraded else "HEALTHY"
        return FsckReport(files, groups, healthy, degraded, missing, status, problems, corrupt_files, misplaced)

    def report(self) -> ClusterReport:
        """dfsadmin -report: each DataNode as this NameNode sees it, and the groups waiting for repair."""
        def report() -> ClusterReport:
            from hedgefs.namenode.blocks.liveness import LOW_SPACE_PCT
            deletes = self.ns.blocks.pending_delete_counts()
            mapped = self.ns.blocks.mapped
            nodes = [DataNodeReport(n.id, n.address, self._state(n.id),
                                    int(self.ns.liveness.age_s(n.id) * 1000), n.used_bytes, n.units,
                                    self.ns.repairs.count_for(n.id), deletes.get(n.id, 0), n.stats.scrub,
                                    data_address=n.data_address, foreign_units=n.foreign_units,
                                    capacity_bytes=n.stats.capacity_bytes, remaining_bytes=n.stats.remaining_bytes,
                                    shares_filesystem_with=tuple(self.ns.liveness.sharing(n.id)),
                                    low_space=self.ns.liveness.low_space(n.id), admin_state=self.ns.admin_state(n.id),
                                    units_mapped=mapped.get(n.id, 0), host_id=self.ns.liveness.location(n.id).host,
                                    rack=self.ns.liveness.location(n.id).rack)
                     for n in self.ns.liveness.all()]
            # From the health counts, kept as groups change (not a look at every unhealthy group
            # under the lock: seconds when a million lack units). A group whose only lack is a unit
            # on a live leaving DataNode is draining, not waiting (health counts it good; fsck
            # calls it HEALTHY; units_mapped shows the drain).
            self._judge_health()
            health = self.ns.health
            return ClusterReport(nodes, health.waiting_repair, self.ns.repairs.done, self.ns.blocks.corrupt_count(),
                                 health.replicated, LOW_SPACE_PCT)
        return self.ns.locked(report)

    def _judge_health(self) -> None:
        """Health as of now (under the lock): the changed groups judged, and out of safe mode a
        step of a first full pass if none was done yet (the monitor goes on with it). Not on a
        standby: as HDFS's, it judges no group before it is the active (a first pass at a million
        groups would hold its tail up for seconds); its counts are 0."""
        if self.ns.standby:
            return
        if not self.ns.health.judged and not self.ns.health.scanning and not self.ns.safemode.on:
            self.ns.health.rescan()
        self.ns.health.refresh(self.ns.liveness.is_live, HEALTH_STEP)

    def datanode_reads(self, datanode_ids: Iterable[str]) -> dict[str, ReadLatency]:
        """The reads of the last 60 s of each of these DataNodes, as it measured them (its last
        heartbeat; those that served none are left out): handed out with a file's locations, so a
        new client starts from the cluster's view of each DataNode (client/latency.py)."""
        out = {}
        for datanode_id in set(datanode_ids):
            node = self.ns.liveness.get(datanode_id)
            recent = node.stats.recent_reads if node is not None else None
            if recent is not None and recent.reads:
                out[datanode_id] = recent
        return out

    def datanode_heartbeat_ages(self, datanode_ids: Iterable[str]) -> dict[str, float]:
        """Seconds since each of these DataNodes (those known) last heartbeated."""
        return {d: self.ns.liveness.age_s(d) for d in set(datanode_ids) if self.ns.liveness.knows(d)}

    def _state(self, datanode_id: str) -> str:
        """live, stale (heartbeat later than a third of the dead interval: the page's word) or dead."""
        if not self.ns.liveness.is_live(datanode_id):
            return "dead"
        return "stale" if self.ns.liveness.age_s(datanode_id) > self.ns.liveness.dead_interval_s / 3 else "live"

    def status(self) -> ClusterStatus:
        """The overview and the DataNode table: counts kept as things change, liveness, repairs."""
        return self.ns.locked(self._status)

    def _status(self) -> ClusterStatus:
        from hedgefs.namenode.blocks.liveness import HEAT_MINUTES, LOW_SPACE_PCT

        now_ms = self.ns.wall_ms()
        minute = now_ms // 60_000
        first = minute - HEAT_MINUTES + 1
        deletes = self.ns.blocks.pending_delete_counts()
        running: dict[str, int] = {}
        for repair in self.ns.repairs.in_flight.values():
            running[repair.target] = running.get(repair.target, 0) + 1
        nodes = []
        for n in sorted(self.ns.liveness.all(), key=lambda n: _natural(n.id)):
            age = self.ns.liveness.age_s(n.id)
            recent = n.stats.recent_reads
            host = n.address.rsplit(":", 1)[0]
            nodes.append(DataNodeStatus(
                n.id, n.address, f"{host}:{n.stats.http_port}" if n.stats.http_port else "", self._state(n.id),
                round(age, 1), n.stats.capacity_bytes, n.used_bytes, n.units, running.get(n.id, 0),
                n.active_repairs, deletes.get(n.id, 0), dict(n.stats.faults), recent.reads if recent else 0,
                recent.p50_ms if recent else 0.0, recent.p99_ms if recent else 0.0,
                [n.p99_by_minute.get(m) for m in range(first, minute + 1)],
                n.stats.remaining_bytes, self.ns.liveness.low_space(n.id), tuple(self.ns.liveness.sharing(n.id)),
                self.ns.admin_state(n.id), self.ns.liveness.location(n.id).host, self.ns.liveness.location(n.id).rack))
        live = [d for d in nodes if d.state != "dead"]
        filesystems = {self.ns.liveness.filesystem_key(self.ns.liveness.get(d.id)) or d.id: d for d in live}
        health = self.ns.health
        return ClusterStatus(
            cluster_id=self.ns.cluster_id, started_ms=self.ns.started_ms, now_ms=now_ms,
            capacity_bytes=sum(d.capacity_bytes for d in filesystems.values()),
            remaining_bytes=sum(d.remaining_bytes for d in filesystems.values()), low_space_pct=LOW_SPACE_PCT,
            used_bytes=sum(d.used_bytes for d in live),
            files=self.ns.tree.files, directories=self.ns.tree.dirs,
            policies={p: n for p, n in sorted(self.ns.tree.by_policy.items()) if n and p},
            groups_healthy=health.healthy, groups_degraded=health.counts["degraded"],
            groups_missing=health.counts["missing"],
            repairs_queued=max(0, health.units_lacking - len(self.ns.repairs.in_flight)),
            repairs_running=len(self.ns.repairs.in_flight), repairs_done=self.ns.repairs.done,
            first_minute=first, datanodes=nodes, safe_mode=self.ns.safe_mode_reason)

    def browse(self, path: str, after: str = "", limit: int = 500) -> FilePage | Listing:
        """A file's groups and units, or one page of a directory (names after ``after``)."""
        node, entry = self.ns.tree.stat(path)
        if not node.is_dir:
            lengths = node.group_lengths()
            info = FileInfo(entry, [self.ns.group_info(g, n, 0, keep_dead=True) for g, n in zip(node.groups, lengths)])
            holders = {u.datanode_id for g in info.groups for u in g.units}
            self.ns.seen()
            return FilePage(info, {d: "live" if self.ns.liveness.is_live(d) else "dead" for d in holders})
        entries, more = self.ns.tree.list_page(path, False, paths.join(path, after) if after else "", limit + 1,
                                            LIST_PAGE_BYTES)
        self.ns.seen()
        return Listing(path, entries[:limit], len(entries) > limit or (more and len(entries) < limit + 1))

    def datanode_units(self, datanode_id: str, limit: int = 200) -> UnitsPage | None:
        """A DataNode's row of the table and the first ``limit`` units the block map puts on it."""
        if not self.ns.liveness.knows(datanode_id):
            return None

        def page() -> UnitsPage:
            row = next(d for d in self._status().datanodes if d.id == datanode_id)
            found = [(g, i, self.ns.tree.path_of(group.file) if group.file.writer is None
                      else self.ns.tree.lease_path(group.file.writer))
                     for g, i, group in self.ns.blocks.units_on(datanode_id, limit + 1)]
            return UnitsPage(row, found[:limit], len(found) > limit)
        return self.ns.locked(page)


def _natural(name: str) -> tuple:
    """dn2 before dn10."""
    stem = name.rstrip("0123456789")
    digits = name[len(stem):]
    return stem, int(digits) if digits else -1, name
