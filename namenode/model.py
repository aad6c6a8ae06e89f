"""What the NameNode answers, as plain data: ``server.py`` turns these into protobuf messages."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from hedgefs.namenode.namespace.inodes import Entry


# The two answers every stat builds many of: plain slotted classes (a frozen dataclass's every field
# is an object.__setattr__ call: 3x the cost of a stat's own work). Treat them as read-only.
@dataclass(slots=True)
class UnitLocation:
    index: int
    datanode_id: str
    address: str            # gRPC
    data_address: str = ""  # data transfer
    token: bytes = b""      # a block access token for it (a secure cluster)


@dataclass(slots=True)
class GroupInfo:
    id: int
    length: int
    units: list[UnitLocation]
    generation: int = 0
    policy: str = ""   # its own code, if not its file's (an open tail)


@dataclass(slots=True)
class FileInfo:
    entry: Entry
    groups: list[GroupInfo]
    first_group: int | None = None   # a ranged answer: the file's index of groups[0] (None: all groups)
    group_count: int = 0             # ... and how many groups the file has
    # A group is short of k located units while block reports are due (blocks/expected.py): why,
    # in one line naming the DataNodes awaited; a reader retries, a stat answers as is. "": none.
    locations_pending: str = ""


def groups_in(groups: Sequence, offset: int, length: int) -> tuple[list, int]:
    """(the groups holding bytes [offset, offset + length) of a file made of ``groups`` in order,
    each with its ``length``; the index of the first). An empty span past the end: ([], count)."""
    start, end = offset, offset + max(length, 1)
    out, first, at = [], len(groups), 0
    for index, group in enumerate(groups):
        if at < end and at + group.length > start:
            if not out:
                first = index
            out.append(group)
        elif out:
            break
        at += group.length
    return out, first


@dataclass(frozen=True)
class Created:
    file_id: int
    policy: str
    block_size: int
    lease_timeout_ms: int
    min_units: int   # units each group needs stored (k, or the minimum replicas)
    first_group: "GroupInfo | None" = None   # create(with_group=True): the group AddBlockGroup would give


@dataclass(frozen=True)
class CommitAttrs:
    """What a chmod, chown or utimes of a file being written set, carried by its Complete
    (CommitAttributes): None or "" = as the write began (owner, group, mode) or the commit's time."""
    mode: int | None = None
    owner: str = ""
    group: str = ""
    mtime_ms: int | None = None
    atime_ms: int | None = None


@dataclass(frozen=True)
class Reopened:
    """An append or a truncate's write (namesystem.append): write from ``kept_length`` on (the
    bytes [kept_length, length) of the file as it is are rewritten first, then the new ones)."""
    created: Created
    kept_length: int   # bytes in the groups the new version shares with the file (whole groups)
    length: int        # the file's length now
    mtime_ms: int      # the file's mtime now: with length, the version being rewritten
    tail: "GroupInfo | None" = None   # a Sync's of an EC file: the open tail placed (append tokens)


@dataclass(frozen=True)
class DeleteUnit:
    group_id: int
    index: int
    generation: int


@dataclass(frozen=True)
class RepairUnit:
    group_id: int
    index: int
    policy: str
    group_length: int
    sources: list[UnitLocation]
    generation: int


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
    status: str  # DEGRADED | MISSING | MISPLACED
    corrupt_units: int = 0
    total_units: int = 0   # k + m (n replicas)
    policy: str = ""
    detail: str = ""       # MISPLACED: how it breaks the placement rule ("4 units in rack /r1 (at most 3)")


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
    misplaced: int = 0   # groups with every unit live that break the placement rule (not in healthy)


@dataclass(frozen=True)
class DataNodeReport:
    id: str
    address: str
    state: str  # live | stale (heartbeat late) | dead
    last_heartbeat_age_ms: int
    used_bytes: int
    units: int
    pending_repairs: int
    pending_deletes: int
    scrub: "ScrubStatus | None" = None
    data_address: str = ""
    foreign_units: int = 0     # units it holds of generations this namespace never issued (left alone)
    capacity_bytes: int = 0    # its data dir's file system (0: not reported yet)
    remaining_bytes: int = 0   # free there
    shares_filesystem_with: tuple[str, ...] = ()   # other DataNodes of its host on that file system
    low_space: bool = False    # remaining below the warning threshold
    admin_state: str = ""      # "" (in service), decommissioning, decommissioned
    units_mapped: int = 0      # units the block map puts on it
    host_id: str = ""          # its host, as it registered (placement: a group's units on distinct hosts)
    rack: str = ""             # its rack (at most the tolerance of a group's units a rack)


@dataclass(frozen=True)
class SafeModeState:
    on: bool
    reason: str               # start-up | admin | failover ("" when off)
    groups_readable: int      # groups of complete files with >= k units on DataNodes that block-reported
    groups_total: int         # groups of complete files
    share: float              # the share start-up safe mode waits for
    deadline_left_s: float    # start-up safe mode ends by then at the latest (0: no deadline, or off)


@dataclass(frozen=True)
class ClusterReport:
    datanodes: list[DataNodeReport]
    groups_waiting_repair: int
    repairs_done: int
    corrupt_units: int = 0
    blocks_under_replicated: int = 0   # of the groups waiting: replicated blocks lacking replicas
    low_space_pct: float = 0.0         # the warning threshold (% of capacity free)


# ---------------------------------------------------------------------- the operator's view


@dataclass(frozen=True)
class ReadLatency:
    """Reads a DataNode served, as it measured them: in one wall-clock minute, or its last 60 s."""
    minute: int        # unix time // 60 (0 for the last 60 s)
    reads: int
    p50_ms: float
    p99_ms: float


@dataclass(frozen=True)
class DataNodeStats:
    """What a DataNode says about itself in a heartbeat, beyond used bytes and units."""
    capacity_bytes: int = 0
    http_port: int = 0
    recent_reads: ReadLatency | None = None
    read_minutes: tuple[ReadLatency, ...] = ()
    faults: tuple[tuple[str, str], ...] = ()      # knobs not at their defaults, (name, value)
    scrub: "ScrubStatus | None" = None            # its scrubber's progress and findings
    remaining_bytes: int = 0                      # free space on that file system
    filesystem: str = ""                          # which one (st_dev): DataNodes sharing one say so


@dataclass(frozen=True)
class DataNodeStatus:
    id: str
    address: str
    http_address: str                 # "" when it serves no /metrics
    state: str                        # live | stale (heartbeat late) | dead
    heartbeat_age_s: float
    capacity_bytes: int
    used_bytes: int
    units: int
    repairs_running: int              # repairs planned onto it, not yet stored
    repairs_active: int               # repairs it says it is running
    pending_deletes: int
    faults: dict[str, str]
    reads: int                        # reads it served in the last 60 s
    read_p50_ms: float
    read_p99_ms: float
    p99_by_minute: list[float | None]  # the last HEAT_MINUTES minutes, oldest first; None = no reads
    remaining_bytes: int = 0
    low_space: bool = False
    shares_filesystem_with: tuple[str, ...] = ()
    admin_state: str = ""             # "" (in service), decommissioning, decommissioned
    host_id: str = ""                 # its host and rack, as it registered
    rack: str = ""


@dataclass(frozen=True)
class ClusterStatus:
    """Everything the status page's overview shows, read under the lock in one go."""
    cluster_id: str
    started_ms: int
    now_ms: int
    capacity_bytes: int               # of live DataNodes, each file system counted once
    used_bytes: int
    files: int
    directories: int
    policies: dict[str, int]          # complete files by policy
    groups_healthy: int
    groups_degraded: int
    groups_missing: int
    repairs_queued: int               # units to rebuild not yet planned onto a DataNode
    repairs_running: int
    repairs_done: int
    first_minute: int                 # unix minute of p99_by_minute[0]
    datanodes: list[DataNodeStatus]
    safe_mode: str = ""               # "" (off), start-up, admin or failover: why it is on
    remaining_bytes: int = 0          # of live DataNodes, each file system counted once
    low_space_pct: float = 0.0        # the warning threshold


@dataclass(frozen=True)
class UnitsPage:
    """Units a DataNode holds, as the block map says: (group id, index, file path)."""
    datanode: DataNodeStatus
    units: list[tuple[int, int, str]]
    more: bool


@dataclass(frozen=True)
class Listing:
    """One page of a directory, in name order."""
    path: str
    entries: list[Entry]
    more: bool


@dataclass(frozen=True)
class FilePage:
    """A file's groups and units (dead holders included) and the state of each DataNode named."""
    info: FileInfo
    states: dict[str, str]


@dataclass(frozen=True)
class ScrubStatus:
    """What a DataNode's scrubber says in its heartbeat (see ScrubStatus in hedgefs.proto)."""

    enabled: bool = False
    passes: int = 0
    pass_units_done: int = 0
    pass_units: int = 0
    bytes_verified: int = 0
    bad_units: int = 0
    last_pass_s: float = 0.0
