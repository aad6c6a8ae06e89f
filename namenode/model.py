"""What the NameNode answers, as plain data: ``server.py`` turns these into protobuf messages."""

from __future__ import annotations

from dataclasses import dataclass

from hedgefs.namenode.namespace import Entry


@dataclass(frozen=True)
class UnitLocation:
    index: int
    datanode_id: str
    address: str


@dataclass(frozen=True)
class GroupInfo:
    id: int
    length: int
    units: list[UnitLocation]


@dataclass(frozen=True)
class FileInfo:
    entry: Entry
    groups: list[GroupInfo]


@dataclass(frozen=True)
class Created:
    file_id: int
    policy: str
    block_size: int


@dataclass(frozen=True)
class DeleteUnit:
    group_id: int
    index: int


@dataclass(frozen=True)
class RepairUnit:
    group_id: int
    index: int
    policy: str
    group_length: int
    sources: list[UnitLocation]


@dataclass(frozen=True)
class HeartbeatReply:
    commands: list[DeleteUnit | RepairUnit]
    reregister: bool = False


@dataclass(frozen=True)
class FsckProblem:
    path: str
    group_id: int
    live_units: int
    needed_units: int
    status: str  # DEGRADED | MISSING


@dataclass(frozen=True)
class FsckReport:
    files: int
    groups: int
    healthy: int
    degraded: int
    missing: int
    status: str  # HEALTHY | DEGRADED | CORRUPT
    problems: list[FsckProblem]
    corrupt_files: int


@dataclass(frozen=True)
class DataNodeReport:
    id: str
    address: str
    state: str  # live | dead
    last_heartbeat_age_ms: int
    used_bytes: int
    units: int
    pending_repairs: int
    pending_deletes: int


@dataclass(frozen=True)
class ClusterReport:
    datanodes: list[DataNodeReport]
    groups_waiting_repair: int
    repairs_done: int
