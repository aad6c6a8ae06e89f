"""The NameNode's /metrics: Prometheus families built from ``Namesystem.status()`` at scrape time.

``status()`` reads counts that the namesystem keeps up to date as things change (``health.py``),
so a scrape costs one short read under the lock, however many groups there are; the text is
formatted and its label values escaped by ``prometheus_client``.

Per-DataNode series here are the NameNode's view (liveness, heartbeats, what it planned); the
DataNodes' own /metrics carry what only they see (read and write histograms, streams, knobs).
"""

from __future__ import annotations

from importlib import metadata

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, InfoMetricFamily

from hedgefs.namenode.model import ClusterStatus

# Per-method RPC activity (HDFS's RpcActivity): counted by the servicer as each call ends.
RPC_REGISTRY = CollectorRegistry()
RPC_CALLS = Counter("hedgefs_namenode_rpc_calls", "NameNode RPCs served, by method and outcome (a gRPC status "
                    "code name).", ["method", "code"], registry=RPC_REGISTRY)
RPC_SECONDS = Histogram("hedgefs_namenode_rpc_seconds", "NameNode RPC time in the servicer, by method.", ["method"],
                        buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
                        registry=RPC_REGISTRY)


# HA (metadata on etcd): commits, their size, and promotions of this process to the active.
ETCD_COMMIT_SECONDS = Histogram("hedgefs_namenode_etcd_commit_seconds", "Time of one guarded etcd Txn (a group "
                                "commit).", buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5),
                                registry=RPC_REGISTRY)
ETCD_COMMIT_KEYS = Histogram("hedgefs_namenode_etcd_commit_keys", "Keys put or deleted by one etcd Txn.",
                             buckets=(1, 2, 5, 10, 20, 50, 100, 200, 500, 1000), registry=RPC_REGISTRY)
HA_PROMOTIONS = Counter("hedgefs_namenode_ha_promotions", "Times this process became the active.",
                        registry=RPC_REGISTRY)
HA_ACTIVE = Gauge("hedgefs_namenode_ha_active", "1 while this NameNode is the active (always, on SQLite).",
                  registry=RPC_REGISTRY)
HA_EPOCH = Gauge("hedgefs_namenode_ha_epoch", "The epoch this NameNode is the active of (0: a standby, or SQLite).",
                 registry=RPC_REGISTRY)
HA_OBSERVER_BEHIND = Counter("hedgefs_namenode_ha_observer_behind", "Reads this standby sent to the active: its "
                             "view did not reach the client's revision in time.", registry=RPC_REGISTRY)


def observer_behind() -> None:
    HA_OBSERVER_BEHIND.inc()


def etcd_commit(seconds: float, keys: int) -> None:
    ETCD_COMMIT_SECONDS.observe(seconds)
    ETCD_COMMIT_KEYS.observe(keys)


def ha_promoted(epoch: int) -> None:
    HA_PROMOTIONS.inc()
    HA_ACTIVE.set(1)
    HA_EPOCH.set(epoch)


def ha_standby() -> None:
    HA_ACTIVE.set(0)
    HA_EPOCH.set(0)


def rpc_done(method: str, code: str, seconds: float) -> None:
    RPC_CALLS.labels(method, code).inc()
    RPC_SECONDS.labels(method).observe(seconds)


def _version() -> str:
    try:
        return metadata.version("hedgefs")
    except metadata.PackageNotFoundError:
        return "unknown"


def families(s: ClusterStatus):
    def gauge(name: str, help_text: str, value: float):
        return GaugeMetricFamily(name, help_text, value=value)

    def labelled(name: str, help_text: str, label: str, values: dict):
        family = GaugeMetricFamily(name, help_text, labels=[label])
        for key, value in values.items():
            family.add_metric([key], value)
        return family

    states = {state: sum(d.state == state for d in s.datanodes) for state in ("live", "stale", "dead")}
    yield labelled("hedgefs_datanodes", "DataNodes known to the NameNode, by state (stale: heartbeat late).",
                   "state", states)
    per_dn = [
        ("up", "1 if the DataNode is live or stale (not dead).", lambda d: d.state != "dead"),
        ("heartbeat_age_seconds", "Seconds since its last heartbeat.", lambda d: d.heartbeat_age_s),
        ("used_bytes", "Bytes of units stored, from heartbeats.", lambda d: d.used_bytes),
        ("capacity_bytes", "Size of its data dir's file system, from heartbeats.", lambda d: d.capacity_bytes),
        ("remaining_bytes", "Free space on its data dir's file system, from heartbeats.", lambda d: d.remaining_bytes),
        ("low_space", "1 if its free space is below hedgefs_low_space_threshold_ratio of its capacity.",
         lambda d: d.low_space),
        ("units", "Units stored, from heartbeats.", lambda d: d.units),
        ("pending_repairs", "Repairs planned onto it, not yet stored.", lambda d: d.repairs_running),
        ("pending_deletes", "Deletes owed to it, not yet confirmed.", lambda d: d.pending_deletes),
        ("reads_recent", "Reads it served in the last 60 s, as it reported.", lambda d: d.reads),
        ("read_p50_seconds", "Median read latency over the last 60 s, as the DataNode measured it.",
         lambda d: d.read_p50_ms / 1000),
        ("read_p99_seconds", "p99 read latency over the last 60 s, as the DataNode measured it.",
         lambda d: d.read_p99_ms / 1000),
    ]
    for suffix, help_text, value in per_dn:
        yield labelled(f"hedgefs_datanode_{suffix}", help_text, "datanode", {d.id: value(d) for d in s.datanodes})
    yield gauge("hedgefs_capacity_bytes", "Capacity of the live DataNodes' file systems (each counted once).",
                s.capacity_bytes)
    yield gauge("hedgefs_remaining_bytes", "Free space of the live DataNodes' file systems (each counted once).",
                s.remaining_bytes)
    yield gauge("hedgefs_low_space_threshold_ratio", "A DataNode with less free space than this share of its "
                "capacity is low on space (no unit is placed where one would not fit).", s.low_space_pct / 100)
    yield gauge("hedgefs_used_bytes", "Bytes of units on live DataNodes.", s.used_bytes)
    yield gauge("hedgefs_files", "Complete files.", s.files)
    yield gauge("hedgefs_directories", "Directories, the root included.", s.directories)
    yield labelled("hedgefs_files_by_policy", "Complete files by erasure-coding policy.", "policy", s.policies)
    yield labelled("hedgefs_block_groups", "Block groups of complete files by health: healthy (all units live), "
                   "degraded (readable, some units missing), missing (fewer than k live units: unreadable).",
                   "state", {"healthy": s.groups_healthy, "degraded": s.groups_degraded,
                             "missing": s.groups_missing})
    yield gauge("hedgefs_groups_waiting_repair", "Block groups with units to rebuild.",
                s.groups_degraded + s.groups_missing)
    yield labelled("hedgefs_repairs", "Unit repairs: queued (not yet planned) and running (planned, not stored).",
                   "state", {"queued": s.repairs_queued, "running": s.repairs_running})
    done = CounterMetricFamily("hedgefs_repairs_done", "Units rebuilt since this NameNode started.")
    done.add_metric([], s.repairs_done)
    yield done
    yield gauge("hedgefs_namenode_uptime_seconds", "Seconds since this NameNode started.",
                (s.now_ms - s.started_ms) / 1000)
    build = InfoMetricFamily("hedgefs_build", "The hedgefs release this NameNode runs.")
    build.add_metric([], {"version": _version(), "cluster_id": s.cluster_id or ""})
    yield build


def registry(status) -> CollectorRegistry:
    """A registry whose every scrape calls ``status()`` once."""

    class Collector:
        def collect(self):
            yield from families(status())
            yield from RPC_REGISTRY.collect()

    reg = CollectorRegistry()
    reg.register(Collector())
    return reg
