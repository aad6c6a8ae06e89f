"""The cluster's administration as typed calls: ``FileSystem.admin`` (HDFS's DFSAdmin / HdfsAdmin).

    with FileSystem("nn:8020") as fs:
        report = fs.admin.report()                  # ClusterReport: DataNodes, repairs, the NameNode's role
        if fs.admin.fsck("/data").status != "HEALTHY": ...
        fs.admin.safe_mode(SafeModeAction.ENTER)    # or "enter"
        fs.admin.decommission("dn3")
        fs.admin.failover()

Every answer is a frozen dataclass named after what it is (no protobuf leaves the library); the
fields are the NameNode's, with the meanings proto/hedgefs.proto gives them. Errors are the
client's (client/errors.py): an admin's call without an admin's credential is NotAllowed (exit 4),
an unknown DataNode a UsageError. Every call is one blocking NameNode call (failover as any other).
"""

from __future__ import annotations

import dataclasses
import enum
import typing

from hedgefs.client.errors import UsageError
from hedgefs.proto import hedgefs_pb2 as pb

if typing.TYPE_CHECKING:
    from hedgefs.client.namenodes import NameNodes


def from_message(cls, message):
    """A dataclass of ``cls``'s fields, each read from the message field of the same name
    (nested dataclasses and tuples of them converted alike)."""
    hints = typing.get_type_hints(cls)
    values = {}
    for field in dataclasses.fields(cls):
        value = getattr(message, field.name)
        hint = hints[field.name]
        args = typing.get_args(hint)
        if dataclasses.is_dataclass(hint):
            value = from_message(hint, value)
        elif typing.get_origin(hint) is tuple:
            value = tuple(from_message(args[0], v) if dataclasses.is_dataclass(args[0]) else v for v in value)
        values[field.name] = value
    return cls(**values)


@dataclasses.dataclass(frozen=True)
class SafeModeStatus:
    on: bool
    reason: str               # "start-up" (waiting for block reports), "admin" (entered by hand), "failover" (HA)
    units_reported: int       # block groups readable (k units) from DataNodes that block-reported
    units_total: int          # block groups of complete files
    share: float              # the share it waits for
    deadline_left_s: float    # start-up safe mode ends at the latest this many seconds from now (0: none)


@dataclasses.dataclass(frozen=True)
class NameNodeRole:
    role: str                 # active, standby, starting, promoting, demoting ("" from an old NameNode: active)
    epoch: int
    applied_revision: int     # a standby: the etcd revision its view reflects
    meta: str                 # sqlite, or etcd://HOST:PORT,.../PREFIX
    active: str               # the active's address as this NameNode knows it
    safe_mode: bool
    safe_mode_detail: SafeModeStatus


@dataclasses.dataclass(frozen=True)
class ScrubStatus:
    enabled: bool
    passes: int
    pass_units_done: int
    pass_units: int
    bytes_verified: int
    bad_units: int
    last_pass_s: float


@dataclasses.dataclass(frozen=True)
class DataNodeReport:
    id: str
    address: str              # gRPC (control)
    data_address: str         # data transfer
    state: str                # "live" | "dead"
    last_heartbeat_age_ms: int
    used_bytes: int
    capacity_bytes: int       # of the file system holding its data dir (0: not reported yet)
    remaining_bytes: int
    low_space: bool
    shares_filesystem_with: tuple[str, ...]
    units: int
    units_mapped: int         # units the block map puts on it (a decommissioning one's: still to move)
    foreign_units: int
    pending_repairs: int
    pending_deletes: int
    admin_state: str          # "" (in service), "decommissioning", "decommissioned"
    scrub: ScrubStatus
    host_id: str              # its host, as it registered ("" from an older NameNode)
    rack: str                 # its rack, a path such as /dc1/r2


@dataclasses.dataclass(frozen=True)
class ClusterReport:
    datanodes: tuple[DataNodeReport, ...]
    groups_waiting_repair: int
    blocks_under_replicated: int
    repairs_done: int
    corrupt_units: int
    low_space_pct: float
    namenode: NameNodeRole    # the NameNode that answered

    def live(self) -> list[DataNodeReport]:
        return [d for d in self.datanodes if d.state == "live"]

    def datanode(self, datanode_id: str) -> DataNodeReport | None:
        return next((d for d in self.datanodes if d.id == datanode_id), None)


@dataclasses.dataclass(frozen=True)
class FsckProblem:
    path: str
    group_id: int
    policy: str
    status: str               # "DEGRADED" | "MISSING" | "MISPLACED"
    live_units: int
    corrupt_units: int
    needed_units: int         # k (a replicated block: 1)
    total_units: int          # k + m (REPLICATE-n: n)
    detail: str               # MISPLACED: how it breaks the placement rule


@dataclasses.dataclass(frozen=True)
class FsckReport:
    status: str               # HEALTHY | DEGRADED | CORRUPT
    files: int
    groups: int
    healthy: int
    degraded: int
    missing: int
    corrupt_files: int
    problems: tuple[FsckProblem, ...]
    misplaced: int            # groups whose units break the placement rule (every unit live; not in healthy)


@dataclasses.dataclass(frozen=True)
class DecommissionState:
    admin_state: str          # "", "decommissioning", "decommissioned"
    units_mapped: int         # units still mapped to it


@dataclasses.dataclass(frozen=True)
class BalanceState:
    """Where a balance stands after a step (the meanings: proto/hedgefs.proto's BalanceResponse)."""
    planned_moves: int
    planned_bytes: int
    moves_in_flight: int
    bytes_in_flight: int
    moves_done: int           # since the NameNode started
    bytes_moved: int
    moves_failed: int
    round_done: bool          # the whole map was judged since the balance began
    misplaced: int            # misplaced groups of the last whole round (or this one so far)
    unmendable: int           # ... that no move can mend with the DataNodes in service
    over: int                 # DataNodes more than the threshold above the average use
    under: int
    spread_pct: float
    relative: bool            # use is bytes against the average (DataNodes sharing a disk)
    quiet: bool               # done: a whole round planned nothing, nothing is moving


@dataclasses.dataclass(frozen=True)
class IssuedCredential:
    certificate_pem: bytes
    ca_pem: bytes
    cluster_key: bytes        # a DataNode's only: it checks block tokens with it
    cluster_id: str


class SafeModeAction(str, enum.Enum):
    GET = "get"
    ENTER = "enter"
    LEAVE = "leave"


class Role(str, enum.Enum):
    USER = "user"
    ADMIN = "admin"
    DATANODE = "datanode"


class Admin:
    """The administration calls of one FileSystem (``fs.admin``)."""

    def __init__(self, namenodes: "NameNodes"):
        self._namenodes = namenodes

    def report(self) -> ClusterReport:
        """Every DataNode the NameNode knows, repairs, and the answering NameNode's role."""
        return from_message(ClusterReport, self._namenodes.call("Report", pb.Empty()))

    def fsck(self, path: str = "/") -> FsckReport:
        """The health of every block group under ``path``."""
        return from_message(FsckReport, self._namenodes.call("Fsck", pb.PathRequest(path=path)))

    def safe_mode(self, action: "SafeModeAction | str" = SafeModeAction.GET) -> SafeModeStatus:
        """Get, enter or leave the NameNode's safe mode; its state after the call."""
        try:
            action = SafeModeAction(action)
        except ValueError:
            raise UsageError(f"bad safe mode action {action!r}: get, enter or leave") from None
        return from_message(SafeModeStatus, self._namenodes.call("SafeMode", pb.SafeModeRequest(action=action.value)))

    def decommission(self, datanode_id: str) -> DecommissionState:
        """Take a DataNode out of service: no new units, its units copied elsewhere."""
        return from_message(DecommissionState, self._namenodes.call(
            "Decommission", pb.DecommissionRequest(datanode_id=datanode_id)))

    def recommission(self, datanode_id: str) -> DecommissionState:
        """Put a decommissioning or decommissioned DataNode back in service."""
        return from_message(DecommissionState, self._namenodes.call(
            "Decommission", pb.DecommissionRequest(datanode_id=datanode_id, recommission=True)))

    def balance_step(self, max_bytes: int, threshold_pct: float = 10.0, restart: bool = False) -> BalanceState:
        """A step of a balance: the NameNode plans moves of at most ``max_bytes`` (0: none) and
        says where things stand; ``restart``: a new balance. ``hedgefs admin balance`` (the CLI's
        loop, with its bandwidth) is the usual way; this is its one call."""
        return from_message(BalanceState, self._namenodes.call("Balance", pb.BalanceRequest(
            max_bytes=max_bytes, threshold_pct=threshold_pct, restart=restart)))

    def issue_credential(self, name: str, role: "Role | str", public_key_pem: bytes, groups: typing.Sequence[str] = (),
                         days: int = 0) -> IssuedCredential:
        """Have the NameNode sign a certificate for ``public_key_pem`` (the key pair is the
        caller's: its private half never leaves it). ``days`` 0: the NameNode's default."""
        try:
            role = Role(role)
        except ValueError:
            raise UsageError(f"bad role {role!r}: user, admin or datanode") from None
        return from_message(IssuedCredential, self._namenodes.call("IssueCredential", pb.IssueCredentialRequest(
            name=name, role=role.value, groups=list(groups), public_key_pem=public_key_pem, days=days)))

    def failover(self) -> None:
        """Hand the active NameNode's role to a standby (HA)."""
        self._namenodes.call("Failover", pb.Empty())
