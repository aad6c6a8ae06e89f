from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Empty(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class UnitLocation(_message.Message):
    __slots__ = ("index", "datanode_id", "address", "data_address", "token")
    INDEX_FIELD_NUMBER: _ClassVar[int]
    DATANODE_ID_FIELD_NUMBER: _ClassVar[int]
    ADDRESS_FIELD_NUMBER: _ClassVar[int]
    DATA_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    index: int
    datanode_id: str
    address: str
    data_address: str
    token: bytes
    def __init__(self, index: _Optional[int] = ..., datanode_id: _Optional[str] = ..., address: _Optional[str] = ..., data_address: _Optional[str] = ..., token: _Optional[bytes] = ...) -> None: ...

class BlockGroup(_message.Message):
    __slots__ = ("id", "length", "units", "generation", "policy")
    ID_FIELD_NUMBER: _ClassVar[int]
    LENGTH_FIELD_NUMBER: _ClassVar[int]
    UNITS_FIELD_NUMBER: _ClassVar[int]
    GENERATION_FIELD_NUMBER: _ClassVar[int]
    POLICY_FIELD_NUMBER: _ClassVar[int]
    id: int
    length: int
    units: _containers.RepeatedCompositeFieldContainer[UnitLocation]
    generation: int
    policy: str
    def __init__(self, id: _Optional[int] = ..., length: _Optional[int] = ..., units: _Optional[_Iterable[_Union[UnitLocation, _Mapping]]] = ..., generation: _Optional[int] = ..., policy: _Optional[str] = ...) -> None: ...

class FileInfo(_message.Message):
    __slots__ = ("path", "is_dir", "length", "policy", "block_size", "mtime_ms", "groups", "owner", "group", "permission", "token_lifetime_ms", "datanode_reads", "datanode_heartbeat_age_ms", "first_group", "group_count", "atime_ms", "symlink", "file_id", "xattrs", "locations_pending", "last_group_code")
    class DatanodeReadsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: ReadLatency
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[ReadLatency, _Mapping]] = ...) -> None: ...
    class DatanodeHeartbeatAgeMsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    class XattrsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: bytes
        def __init__(self, key: _Optional[str] = ..., value: _Optional[bytes] = ...) -> None: ...
    PATH_FIELD_NUMBER: _ClassVar[int]
    IS_DIR_FIELD_NUMBER: _ClassVar[int]
    LENGTH_FIELD_NUMBER: _ClassVar[int]
    POLICY_FIELD_NUMBER: _ClassVar[int]
    BLOCK_SIZE_FIELD_NUMBER: _ClassVar[int]
    MTIME_MS_FIELD_NUMBER: _ClassVar[int]
    GROUPS_FIELD_NUMBER: _ClassVar[int]
    OWNER_FIELD_NUMBER: _ClassVar[int]
    GROUP_FIELD_NUMBER: _ClassVar[int]
    PERMISSION_FIELD_NUMBER: _ClassVar[int]
    TOKEN_LIFETIME_MS_FIELD_NUMBER: _ClassVar[int]
    DATANODE_READS_FIELD_NUMBER: _ClassVar[int]
    DATANODE_HEARTBEAT_AGE_MS_FIELD_NUMBER: _ClassVar[int]
    FIRST_GROUP_FIELD_NUMBER: _ClassVar[int]
    GROUP_COUNT_FIELD_NUMBER: _ClassVar[int]
    ATIME_MS_FIELD_NUMBER: _ClassVar[int]
    SYMLINK_FIELD_NUMBER: _ClassVar[int]
    FILE_ID_FIELD_NUMBER: _ClassVar[int]
    XATTRS_FIELD_NUMBER: _ClassVar[int]
    LOCATIONS_PENDING_FIELD_NUMBER: _ClassVar[int]
    LAST_GROUP_CODE_FIELD_NUMBER: _ClassVar[int]
    path: str
    is_dir: bool
    length: int
    policy: str
    block_size: int
    mtime_ms: int
    groups: _containers.RepeatedCompositeFieldContainer[BlockGroup]
    owner: str
    group: str
    permission: int
    token_lifetime_ms: int
    datanode_reads: _containers.MessageMap[str, ReadLatency]
    datanode_heartbeat_age_ms: _containers.ScalarMap[str, int]
    first_group: int
    group_count: int
    atime_ms: int
    symlink: str
    file_id: int
    xattrs: _containers.ScalarMap[str, bytes]
    locations_pending: str
    last_group_code: str
    def __init__(self, path: _Optional[str] = ..., is_dir: _Optional[bool] = ..., length: _Optional[int] = ..., policy: _Optional[str] = ..., block_size: _Optional[int] = ..., mtime_ms: _Optional[int] = ..., groups: _Optional[_Iterable[_Union[BlockGroup, _Mapping]]] = ..., owner: _Optional[str] = ..., group: _Optional[str] = ..., permission: _Optional[int] = ..., token_lifetime_ms: _Optional[int] = ..., datanode_reads: _Optional[_Mapping[str, ReadLatency]] = ..., datanode_heartbeat_age_ms: _Optional[_Mapping[str, int]] = ..., first_group: _Optional[int] = ..., group_count: _Optional[int] = ..., atime_ms: _Optional[int] = ..., symlink: _Optional[str] = ..., file_id: _Optional[int] = ..., xattrs: _Optional[_Mapping[str, bytes]] = ..., locations_pending: _Optional[str] = ..., last_group_code: _Optional[str] = ...) -> None: ...

class PathRequest(_message.Message):
    __slots__ = ("path", "range_offset", "range_length", "xattrs", "group_codes")
    PATH_FIELD_NUMBER: _ClassVar[int]
    RANGE_OFFSET_FIELD_NUMBER: _ClassVar[int]
    RANGE_LENGTH_FIELD_NUMBER: _ClassVar[int]
    XATTRS_FIELD_NUMBER: _ClassVar[int]
    GROUP_CODES_FIELD_NUMBER: _ClassVar[int]
    path: str
    range_offset: int
    range_length: int
    xattrs: bool
    group_codes: bool
    def __init__(self, path: _Optional[str] = ..., range_offset: _Optional[int] = ..., range_length: _Optional[int] = ..., xattrs: _Optional[bool] = ..., group_codes: _Optional[bool] = ...) -> None: ...

class MkdirRequest(_message.Message):
    __slots__ = ("path", "parents", "permission")
    PATH_FIELD_NUMBER: _ClassVar[int]
    PARENTS_FIELD_NUMBER: _ClassVar[int]
    PERMISSION_FIELD_NUMBER: _ClassVar[int]
    path: str
    parents: bool
    permission: int
    def __init__(self, path: _Optional[str] = ..., parents: _Optional[bool] = ..., permission: _Optional[int] = ...) -> None: ...

class MkdirResponse(_message.Message):
    __slots__ = ("info",)
    INFO_FIELD_NUMBER: _ClassVar[int]
    info: FileInfo
    def __init__(self, info: _Optional[_Union[FileInfo, _Mapping]] = ...) -> None: ...

class ListRequest(_message.Message):
    __slots__ = ("path", "recursive", "start_after", "limit", "xattrs")
    PATH_FIELD_NUMBER: _ClassVar[int]
    RECURSIVE_FIELD_NUMBER: _ClassVar[int]
    START_AFTER_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    XATTRS_FIELD_NUMBER: _ClassVar[int]
    path: str
    recursive: bool
    start_after: str
    limit: int
    xattrs: bool
    def __init__(self, path: _Optional[str] = ..., recursive: _Optional[bool] = ..., start_after: _Optional[str] = ..., limit: _Optional[int] = ..., xattrs: _Optional[bool] = ...) -> None: ...

class ListResponse(_message.Message):
    __slots__ = ("entries", "more")
    ENTRIES_FIELD_NUMBER: _ClassVar[int]
    MORE_FIELD_NUMBER: _ClassVar[int]
    entries: _containers.RepeatedCompositeFieldContainer[FileInfo]
    more: bool
    def __init__(self, entries: _Optional[_Iterable[_Union[FileInfo, _Mapping]]] = ..., more: _Optional[bool] = ...) -> None: ...

class DeleteRequest(_message.Message):
    __slots__ = ("path", "recursive")
    PATH_FIELD_NUMBER: _ClassVar[int]
    RECURSIVE_FIELD_NUMBER: _ClassVar[int]
    path: str
    recursive: bool
    def __init__(self, path: _Optional[str] = ..., recursive: _Optional[bool] = ...) -> None: ...

class RenameRequest(_message.Message):
    __slots__ = ("src", "dst")
    SRC_FIELD_NUMBER: _ClassVar[int]
    DST_FIELD_NUMBER: _ClassVar[int]
    src: str
    dst: str
    def __init__(self, src: _Optional[str] = ..., dst: _Optional[str] = ...) -> None: ...

class SetPolicyRequest(_message.Message):
    __slots__ = ("path", "policy")
    PATH_FIELD_NUMBER: _ClassVar[int]
    POLICY_FIELD_NUMBER: _ClassVar[int]
    path: str
    policy: str
    def __init__(self, path: _Optional[str] = ..., policy: _Optional[str] = ...) -> None: ...

class SetPermissionRequest(_message.Message):
    __slots__ = ("path", "permission")
    PATH_FIELD_NUMBER: _ClassVar[int]
    PERMISSION_FIELD_NUMBER: _ClassVar[int]
    path: str
    permission: int
    def __init__(self, path: _Optional[str] = ..., permission: _Optional[int] = ...) -> None: ...

class SetOwnerRequest(_message.Message):
    __slots__ = ("path", "owner", "group")
    PATH_FIELD_NUMBER: _ClassVar[int]
    OWNER_FIELD_NUMBER: _ClassVar[int]
    GROUP_FIELD_NUMBER: _ClassVar[int]
    path: str
    owner: str
    group: str
    def __init__(self, path: _Optional[str] = ..., owner: _Optional[str] = ..., group: _Optional[str] = ...) -> None: ...

class IssueCredentialRequest(_message.Message):
    __slots__ = ("name", "role", "groups", "public_key_pem", "days")
    NAME_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    GROUPS_FIELD_NUMBER: _ClassVar[int]
    PUBLIC_KEY_PEM_FIELD_NUMBER: _ClassVar[int]
    DAYS_FIELD_NUMBER: _ClassVar[int]
    name: str
    role: str
    groups: _containers.RepeatedScalarFieldContainer[str]
    public_key_pem: bytes
    days: int
    def __init__(self, name: _Optional[str] = ..., role: _Optional[str] = ..., groups: _Optional[_Iterable[str]] = ..., public_key_pem: _Optional[bytes] = ..., days: _Optional[int] = ...) -> None: ...

class IssueCredentialResponse(_message.Message):
    __slots__ = ("certificate_pem", "ca_pem", "cluster_key", "cluster_id")
    CERTIFICATE_PEM_FIELD_NUMBER: _ClassVar[int]
    CA_PEM_FIELD_NUMBER: _ClassVar[int]
    CLUSTER_KEY_FIELD_NUMBER: _ClassVar[int]
    CLUSTER_ID_FIELD_NUMBER: _ClassVar[int]
    certificate_pem: bytes
    ca_pem: bytes
    cluster_key: bytes
    cluster_id: str
    def __init__(self, certificate_pem: _Optional[bytes] = ..., ca_pem: _Optional[bytes] = ..., cluster_key: _Optional[bytes] = ..., cluster_id: _Optional[str] = ...) -> None: ...

class PolicyResponse(_message.Message):
    __slots__ = ("policy", "source_path", "default_block_size")
    POLICY_FIELD_NUMBER: _ClassVar[int]
    SOURCE_PATH_FIELD_NUMBER: _ClassVar[int]
    DEFAULT_BLOCK_SIZE_FIELD_NUMBER: _ClassVar[int]
    policy: str
    source_path: str
    default_block_size: int
    def __init__(self, policy: _Optional[str] = ..., source_path: _Optional[str] = ..., default_block_size: _Optional[int] = ...) -> None: ...

class FileVersion(_message.Message):
    __slots__ = ("length", "mtime_ms")
    LENGTH_FIELD_NUMBER: _ClassVar[int]
    MTIME_MS_FIELD_NUMBER: _ClassVar[int]
    length: int
    mtime_ms: int
    def __init__(self, length: _Optional[int] = ..., mtime_ms: _Optional[int] = ...) -> None: ...

class CreateRequest(_message.Message):
    __slots__ = ("path", "overwrite", "policy", "block_size", "client_name", "convert_from", "empty", "with_group")
    PATH_FIELD_NUMBER: _ClassVar[int]
    OVERWRITE_FIELD_NUMBER: _ClassVar[int]
    POLICY_FIELD_NUMBER: _ClassVar[int]
    BLOCK_SIZE_FIELD_NUMBER: _ClassVar[int]
    CLIENT_NAME_FIELD_NUMBER: _ClassVar[int]
    CONVERT_FROM_FIELD_NUMBER: _ClassVar[int]
    EMPTY_FIELD_NUMBER: _ClassVar[int]
    WITH_GROUP_FIELD_NUMBER: _ClassVar[int]
    path: str
    overwrite: bool
    policy: str
    block_size: int
    client_name: str
    convert_from: FileVersion
    empty: bool
    with_group: bool
    def __init__(self, path: _Optional[str] = ..., overwrite: _Optional[bool] = ..., policy: _Optional[str] = ..., block_size: _Optional[int] = ..., client_name: _Optional[str] = ..., convert_from: _Optional[_Union[FileVersion, _Mapping]] = ..., empty: _Optional[bool] = ..., with_group: _Optional[bool] = ...) -> None: ...

class CreateResponse(_message.Message):
    __slots__ = ("file_id", "policy", "block_size", "lease_timeout_ms", "min_units", "first_group", "commit_attributes")
    FILE_ID_FIELD_NUMBER: _ClassVar[int]
    POLICY_FIELD_NUMBER: _ClassVar[int]
    BLOCK_SIZE_FIELD_NUMBER: _ClassVar[int]
    LEASE_TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    MIN_UNITS_FIELD_NUMBER: _ClassVar[int]
    FIRST_GROUP_FIELD_NUMBER: _ClassVar[int]
    COMMIT_ATTRIBUTES_FIELD_NUMBER: _ClassVar[int]
    file_id: int
    policy: str
    block_size: int
    lease_timeout_ms: int
    min_units: int
    first_group: BlockGroup
    commit_attributes: bool
    def __init__(self, file_id: _Optional[int] = ..., policy: _Optional[str] = ..., block_size: _Optional[int] = ..., lease_timeout_ms: _Optional[int] = ..., min_units: _Optional[int] = ..., first_group: _Optional[_Union[BlockGroup, _Mapping]] = ..., commit_attributes: _Optional[bool] = ...) -> None: ...

class AddBlockGroupRequest(_message.Message):
    __slots__ = ("file_id", "exclude_datanodes")
    FILE_ID_FIELD_NUMBER: _ClassVar[int]
    EXCLUDE_DATANODES_FIELD_NUMBER: _ClassVar[int]
    file_id: int
    exclude_datanodes: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, file_id: _Optional[int] = ..., exclude_datanodes: _Optional[_Iterable[str]] = ...) -> None: ...

class GroupCommit(_message.Message):
    __slots__ = ("group_id", "length", "stored_units")
    GROUP_ID_FIELD_NUMBER: _ClassVar[int]
    LENGTH_FIELD_NUMBER: _ClassVar[int]
    STORED_UNITS_FIELD_NUMBER: _ClassVar[int]
    group_id: int
    length: int
    stored_units: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, group_id: _Optional[int] = ..., length: _Optional[int] = ..., stored_units: _Optional[_Iterable[int]] = ...) -> None: ...

class CompleteRequest(_message.Message):
    __slots__ = ("file_id", "length", "groups", "convert_from", "attributes")
    FILE_ID_FIELD_NUMBER: _ClassVar[int]
    LENGTH_FIELD_NUMBER: _ClassVar[int]
    GROUPS_FIELD_NUMBER: _ClassVar[int]
    CONVERT_FROM_FIELD_NUMBER: _ClassVar[int]
    ATTRIBUTES_FIELD_NUMBER: _ClassVar[int]
    file_id: int
    length: int
    groups: _containers.RepeatedCompositeFieldContainer[GroupCommit]
    convert_from: FileVersion
    attributes: CommitAttributes
    def __init__(self, file_id: _Optional[int] = ..., length: _Optional[int] = ..., groups: _Optional[_Iterable[_Union[GroupCommit, _Mapping]]] = ..., convert_from: _Optional[_Union[FileVersion, _Mapping]] = ..., attributes: _Optional[_Union[CommitAttributes, _Mapping]] = ...) -> None: ...

class CommitAttributes(_message.Message):
    __slots__ = ("permission", "owner", "group", "mtime_ms", "atime_ms")
    PERMISSION_FIELD_NUMBER: _ClassVar[int]
    OWNER_FIELD_NUMBER: _ClassVar[int]
    GROUP_FIELD_NUMBER: _ClassVar[int]
    MTIME_MS_FIELD_NUMBER: _ClassVar[int]
    ATIME_MS_FIELD_NUMBER: _ClassVar[int]
    permission: int
    owner: str
    group: str
    mtime_ms: int
    atime_ms: int
    def __init__(self, permission: _Optional[int] = ..., owner: _Optional[str] = ..., group: _Optional[str] = ..., mtime_ms: _Optional[int] = ..., atime_ms: _Optional[int] = ...) -> None: ...

class AbandonRequest(_message.Message):
    __slots__ = ("file_id",)
    FILE_ID_FIELD_NUMBER: _ClassVar[int]
    file_id: int
    def __init__(self, file_id: _Optional[int] = ...) -> None: ...

class RenewLeaseRequest(_message.Message):
    __slots__ = ("file_id",)
    FILE_ID_FIELD_NUMBER: _ClassVar[int]
    file_id: int
    def __init__(self, file_id: _Optional[int] = ...) -> None: ...

class ConcatRequest(_message.Message):
    __slots__ = ("target", "sources", "overwrite")
    TARGET_FIELD_NUMBER: _ClassVar[int]
    SOURCES_FIELD_NUMBER: _ClassVar[int]
    OVERWRITE_FIELD_NUMBER: _ClassVar[int]
    target: str
    sources: _containers.RepeatedScalarFieldContainer[str]
    overwrite: bool
    def __init__(self, target: _Optional[str] = ..., sources: _Optional[_Iterable[str]] = ..., overwrite: _Optional[bool] = ...) -> None: ...

class BadUnit(_message.Message):
    __slots__ = ("group_id", "index", "datanode_id", "reason", "generation")
    GROUP_ID_FIELD_NUMBER: _ClassVar[int]
    INDEX_FIELD_NUMBER: _ClassVar[int]
    DATANODE_ID_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    GENERATION_FIELD_NUMBER: _ClassVar[int]
    group_id: int
    index: int
    datanode_id: str
    reason: str
    generation: int
    def __init__(self, group_id: _Optional[int] = ..., index: _Optional[int] = ..., datanode_id: _Optional[str] = ..., reason: _Optional[str] = ..., generation: _Optional[int] = ...) -> None: ...

class BadUnitsRequest(_message.Message):
    __slots__ = ("units",)
    UNITS_FIELD_NUMBER: _ClassVar[int]
    units: _containers.RepeatedCompositeFieldContainer[BadUnit]
    def __init__(self, units: _Optional[_Iterable[_Union[BadUnit, _Mapping]]] = ...) -> None: ...

class FsckProblem(_message.Message):
    __slots__ = ("path", "group_id", "live_units", "needed_units", "status", "corrupt_units", "total_units", "policy", "detail")
    PATH_FIELD_NUMBER: _ClassVar[int]
    GROUP_ID_FIELD_NUMBER: _ClassVar[int]
    LIVE_UNITS_FIELD_NUMBER: _ClassVar[int]
    NEEDED_UNITS_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    CORRUPT_UNITS_FIELD_NUMBER: _ClassVar[int]
    TOTAL_UNITS_FIELD_NUMBER: _ClassVar[int]
    POLICY_FIELD_NUMBER: _ClassVar[int]
    DETAIL_FIELD_NUMBER: _ClassVar[int]
    path: str
    group_id: int
    live_units: int
    needed_units: int
    status: str
    corrupt_units: int
    total_units: int
    policy: str
    detail: str
    def __init__(self, path: _Optional[str] = ..., group_id: _Optional[int] = ..., live_units: _Optional[int] = ..., needed_units: _Optional[int] = ..., status: _Optional[str] = ..., corrupt_units: _Optional[int] = ..., total_units: _Optional[int] = ..., policy: _Optional[str] = ..., detail: _Optional[str] = ...) -> None: ...

class FsckResponse(_message.Message):
    __slots__ = ("files", "groups", "healthy", "degraded", "missing", "status", "problems", "corrupt_files", "misplaced")
    FILES_FIELD_NUMBER: _ClassVar[int]
    GROUPS_FIELD_NUMBER: _ClassVar[int]
    HEALTHY_FIELD_NUMBER: _ClassVar[int]
    DEGRADED_FIELD_NUMBER: _ClassVar[int]
    MISSING_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    PROBLEMS_FIELD_NUMBER: _ClassVar[int]
    CORRUPT_FILES_FIELD_NUMBER: _ClassVar[int]
    MISPLACED_FIELD_NUMBER: _ClassVar[int]
    files: int
    groups: int
    healthy: int
    degraded: int
    missing: int
    status: str
    problems: _containers.RepeatedCompositeFieldContainer[FsckProblem]
    corrupt_files: int
    misplaced: int
    def __init__(self, files: _Optional[int] = ..., groups: _Optional[int] = ..., healthy: _Optional[int] = ..., degraded: _Optional[int] = ..., missing: _Optional[int] = ..., status: _Optional[str] = ..., problems: _Optional[_Iterable[_Union[FsckProblem, _Mapping]]] = ..., corrupt_files: _Optional[int] = ..., misplaced: _Optional[int] = ...) -> None: ...

class DataNodeInfo(_message.Message):
    __slots__ = ("id", "address", "state", "last_heartbeat_age_ms", "used_bytes", "units", "pending_repairs", "pending_deletes", "scrub", "data_address", "foreign_units", "capacity_bytes", "remaining_bytes", "shares_filesystem_with", "low_space", "admin_state", "units_mapped", "host_id", "rack")
    ID_FIELD_NUMBER: _ClassVar[int]
    ADDRESS_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    LAST_HEARTBEAT_AGE_MS_FIELD_NUMBER: _ClassVar[int]
    USED_BYTES_FIELD_NUMBER: _ClassVar[int]
    UNITS_FIELD_NUMBER: _ClassVar[int]
    PENDING_REPAIRS_FIELD_NUMBER: _ClassVar[int]
    PENDING_DELETES_FIELD_NUMBER: _ClassVar[int]
    SCRUB_FIELD_NUMBER: _ClassVar[int]
    DATA_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    FOREIGN_UNITS_FIELD_NUMBER: _ClassVar[int]
    CAPACITY_BYTES_FIELD_NUMBER: _ClassVar[int]
    REMAINING_BYTES_FIELD_NUMBER: _ClassVar[int]
    SHARES_FILESYSTEM_WITH_FIELD_NUMBER: _ClassVar[int]
    LOW_SPACE_FIELD_NUMBER: _ClassVar[int]
    ADMIN_STATE_FIELD_NUMBER: _ClassVar[int]
    UNITS_MAPPED_FIELD_NUMBER: _ClassVar[int]
    HOST_ID_FIELD_NUMBER: _ClassVar[int]
    RACK_FIELD_NUMBER: _ClassVar[int]
    id: str
    address: str
    state: str
    last_heartbeat_age_ms: int
    used_bytes: int
    units: int
    pending_repairs: int
    pending_deletes: int
    scrub: ScrubStatus
    data_address: str
    foreign_units: int
    capacity_bytes: int
    remaining_bytes: int
    shares_filesystem_with: _containers.RepeatedScalarFieldContainer[str]
    low_space: bool
    admin_state: str
    units_mapped: int
    host_id: str
    rack: str
    def __init__(self, id: _Optional[str] = ..., address: _Optional[str] = ..., state: _Optional[str] = ..., last_heartbeat_age_ms: _Optional[int] = ..., used_bytes: _Optional[int] = ..., units: _Optional[int] = ..., pending_repairs: _Optional[int] = ..., pending_deletes: _Optional[int] = ..., scrub: _Optional[_Union[ScrubStatus, _Mapping]] = ..., data_address: _Optional[str] = ..., foreign_units: _Optional[int] = ..., capacity_bytes: _Optional[int] = ..., remaining_bytes: _Optional[int] = ..., shares_filesystem_with: _Optional[_Iterable[str]] = ..., low_space: _Optional[bool] = ..., admin_state: _Optional[str] = ..., units_mapped: _Optional[int] = ..., host_id: _Optional[str] = ..., rack: _Optional[str] = ...) -> None: ...

class ReportResponse(_message.Message):
    __slots__ = ("datanodes", "groups_waiting_repair", "repairs_done", "corrupt_units", "blocks_under_replicated", "low_space_pct", "namenode")
    DATANODES_FIELD_NUMBER: _ClassVar[int]
    GROUPS_WAITING_REPAIR_FIELD_NUMBER: _ClassVar[int]
    REPAIRS_DONE_FIELD_NUMBER: _ClassVar[int]
    CORRUPT_UNITS_FIELD_NUMBER: _ClassVar[int]
    BLOCKS_UNDER_REPLICATED_FIELD_NUMBER: _ClassVar[int]
    LOW_SPACE_PCT_FIELD_NUMBER: _ClassVar[int]
    NAMENODE_FIELD_NUMBER: _ClassVar[int]
    datanodes: _containers.RepeatedCompositeFieldContainer[DataNodeInfo]
    groups_waiting_repair: int
    repairs_done: int
    corrupt_units: int
    blocks_under_replicated: int
    low_space_pct: float
    namenode: NameNodeRole
    def __init__(self, datanodes: _Optional[_Iterable[_Union[DataNodeInfo, _Mapping]]] = ..., groups_waiting_repair: _Optional[int] = ..., repairs_done: _Optional[int] = ..., corrupt_units: _Optional[int] = ..., blocks_under_replicated: _Optional[int] = ..., low_space_pct: _Optional[float] = ..., namenode: _Optional[_Union[NameNodeRole, _Mapping]] = ...) -> None: ...

class NameNodeRole(_message.Message):
    __slots__ = ("role", "epoch", "applied_revision", "meta", "active", "safe_mode", "safe_mode_detail")
    ROLE_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    APPLIED_REVISION_FIELD_NUMBER: _ClassVar[int]
    META_FIELD_NUMBER: _ClassVar[int]
    ACTIVE_FIELD_NUMBER: _ClassVar[int]
    SAFE_MODE_FIELD_NUMBER: _ClassVar[int]
    SAFE_MODE_DETAIL_FIELD_NUMBER: _ClassVar[int]
    role: str
    epoch: int
    applied_revision: int
    meta: str
    active: str
    safe_mode: bool
    safe_mode_detail: SafeModeResponse
    def __init__(self, role: _Optional[str] = ..., epoch: _Optional[int] = ..., applied_revision: _Optional[int] = ..., meta: _Optional[str] = ..., active: _Optional[str] = ..., safe_mode: _Optional[bool] = ..., safe_mode_detail: _Optional[_Union[SafeModeResponse, _Mapping]] = ...) -> None: ...

class RegisterRequest(_message.Message):
    __slots__ = ("datanode_id", "address", "data_address", "cluster_id", "storage_id", "host_id", "rack")
    DATANODE_ID_FIELD_NUMBER: _ClassVar[int]
    ADDRESS_FIELD_NUMBER: _ClassVar[int]
    DATA_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    CLUSTER_ID_FIELD_NUMBER: _ClassVar[int]
    STORAGE_ID_FIELD_NUMBER: _ClassVar[int]
    HOST_ID_FIELD_NUMBER: _ClassVar[int]
    RACK_FIELD_NUMBER: _ClassVar[int]
    datanode_id: str
    address: str
    data_address: str
    cluster_id: str
    storage_id: str
    host_id: str
    rack: str
    def __init__(self, datanode_id: _Optional[str] = ..., address: _Optional[str] = ..., data_address: _Optional[str] = ..., cluster_id: _Optional[str] = ..., storage_id: _Optional[str] = ..., host_id: _Optional[str] = ..., rack: _Optional[str] = ...) -> None: ...

class RegisterResponse(_message.Message):
    __slots__ = ("cluster_id", "epoch", "active")
    CLUSTER_ID_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    ACTIVE_FIELD_NUMBER: _ClassVar[int]
    cluster_id: str
    epoch: int
    active: bool
    def __init__(self, cluster_id: _Optional[str] = ..., epoch: _Optional[int] = ..., active: _Optional[bool] = ...) -> None: ...

class HeartbeatRequest(_message.Message):
    __slots__ = ("datanode_id", "address", "used_bytes", "units", "active_repairs", "stats", "data_address", "deleted")
    DATANODE_ID_FIELD_NUMBER: _ClassVar[int]
    ADDRESS_FIELD_NUMBER: _ClassVar[int]
    USED_BYTES_FIELD_NUMBER: _ClassVar[int]
    UNITS_FIELD_NUMBER: _ClassVar[int]
    ACTIVE_REPAIRS_FIELD_NUMBER: _ClassVar[int]
    STATS_FIELD_NUMBER: _ClassVar[int]
    DATA_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    DELETED_FIELD_NUMBER: _ClassVar[int]
    datanode_id: str
    address: str
    used_bytes: int
    units: int
    active_repairs: int
    stats: DataNodeStats
    data_address: str
    deleted: _containers.RepeatedCompositeFieldContainer[StoredUnit]
    def __init__(self, datanode_id: _Optional[str] = ..., address: _Optional[str] = ..., used_bytes: _Optional[int] = ..., units: _Optional[int] = ..., active_repairs: _Optional[int] = ..., stats: _Optional[_Union[DataNodeStats, _Mapping]] = ..., data_address: _Optional[str] = ..., deleted: _Optional[_Iterable[_Union[StoredUnit, _Mapping]]] = ...) -> None: ...

class DataNodeStats(_message.Message):
    __slots__ = ("capacity_bytes", "http_port", "recent_reads", "read_minutes", "faults", "scrub", "remaining_bytes", "filesystem")
    class FaultsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    CAPACITY_BYTES_FIELD_NUMBER: _ClassVar[int]
    HTTP_PORT_FIELD_NUMBER: _ClassVar[int]
    RECENT_READS_FIELD_NUMBER: _ClassVar[int]
    READ_MINUTES_FIELD_NUMBER: _ClassVar[int]
    FAULTS_FIELD_NUMBER: _ClassVar[int]
    SCRUB_FIELD_NUMBER: _ClassVar[int]
    REMAINING_BYTES_FIELD_NUMBER: _ClassVar[int]
    FILESYSTEM_FIELD_NUMBER: _ClassVar[int]
    capacity_bytes: int
    http_port: int
    recent_reads: ReadLatency
    read_minutes: _containers.RepeatedCompositeFieldContainer[ReadLatency]
    faults: _containers.ScalarMap[str, str]
    scrub: ScrubStatus
    remaining_bytes: int
    filesystem: str
    def __init__(self, capacity_bytes: _Optional[int] = ..., http_port: _Optional[int] = ..., recent_reads: _Optional[_Union[ReadLatency, _Mapping]] = ..., read_minutes: _Optional[_Iterable[_Union[ReadLatency, _Mapping]]] = ..., faults: _Optional[_Mapping[str, str]] = ..., scrub: _Optional[_Union[ScrubStatus, _Mapping]] = ..., remaining_bytes: _Optional[int] = ..., filesystem: _Optional[str] = ...) -> None: ...

class ReadLatency(_message.Message):
    __slots__ = ("minute", "reads", "p50_ms", "p99_ms")
    MINUTE_FIELD_NUMBER: _ClassVar[int]
    READS_FIELD_NUMBER: _ClassVar[int]
    P50_MS_FIELD_NUMBER: _ClassVar[int]
    P99_MS_FIELD_NUMBER: _ClassVar[int]
    minute: int
    reads: int
    p50_ms: float
    p99_ms: float
    def __init__(self, minute: _Optional[int] = ..., reads: _Optional[int] = ..., p50_ms: _Optional[float] = ..., p99_ms: _Optional[float] = ...) -> None: ...

class ScrubStatus(_message.Message):
    __slots__ = ("enabled", "passes", "pass_units_done", "pass_units", "bytes_verified", "bad_units", "last_pass_s")
    ENABLED_FIELD_NUMBER: _ClassVar[int]
    PASSES_FIELD_NUMBER: _ClassVar[int]
    PASS_UNITS_DONE_FIELD_NUMBER: _ClassVar[int]
    PASS_UNITS_FIELD_NUMBER: _ClassVar[int]
    BYTES_VERIFIED_FIELD_NUMBER: _ClassVar[int]
    BAD_UNITS_FIELD_NUMBER: _ClassVar[int]
    LAST_PASS_S_FIELD_NUMBER: _ClassVar[int]
    enabled: bool
    passes: int
    pass_units_done: int
    pass_units: int
    bytes_verified: int
    bad_units: int
    last_pass_s: float
    def __init__(self, enabled: _Optional[bool] = ..., passes: _Optional[int] = ..., pass_units_done: _Optional[int] = ..., pass_units: _Optional[int] = ..., bytes_verified: _Optional[int] = ..., bad_units: _Optional[int] = ..., last_pass_s: _Optional[float] = ...) -> None: ...

class DeleteUnitCommand(_message.Message):
    __slots__ = ("group_id", "index", "generation")
    GROUP_ID_FIELD_NUMBER: _ClassVar[int]
    INDEX_FIELD_NUMBER: _ClassVar[int]
    GENERATION_FIELD_NUMBER: _ClassVar[int]
    group_id: int
    index: int
    generation: int
    def __init__(self, group_id: _Optional[int] = ..., index: _Optional[int] = ..., generation: _Optional[int] = ...) -> None: ...

class RepairUnitCommand(_message.Message):
    __slots__ = ("group_id", "index", "policy", "group_length", "sources", "generation")
    GROUP_ID_FIELD_NUMBER: _ClassVar[int]
    INDEX_FIELD_NUMBER: _ClassVar[int]
    POLICY_FIELD_NUMBER: _ClassVar[int]
    GROUP_LENGTH_FIELD_NUMBER: _ClassVar[int]
    SOURCES_FIELD_NUMBER: _ClassVar[int]
    GENERATION_FIELD_NUMBER: _ClassVar[int]
    group_id: int
    index: int
    policy: str
    group_length: int
    sources: _containers.RepeatedCompositeFieldContainer[UnitLocation]
    generation: int
    def __init__(self, group_id: _Optional[int] = ..., index: _Optional[int] = ..., policy: _Optional[str] = ..., group_length: _Optional[int] = ..., sources: _Optional[_Iterable[_Union[UnitLocation, _Mapping]]] = ..., generation: _Optional[int] = ...) -> None: ...

class Command(_message.Message):
    __slots__ = ("delete_unit", "repair_unit")
    DELETE_UNIT_FIELD_NUMBER: _ClassVar[int]
    REPAIR_UNIT_FIELD_NUMBER: _ClassVar[int]
    delete_unit: DeleteUnitCommand
    repair_unit: RepairUnitCommand
    def __init__(self, delete_unit: _Optional[_Union[DeleteUnitCommand, _Mapping]] = ..., repair_unit: _Optional[_Union[RepairUnitCommand, _Mapping]] = ...) -> None: ...

class HeartbeatResponse(_message.Message):
    __slots__ = ("commands", "reregister", "epoch", "active")
    COMMANDS_FIELD_NUMBER: _ClassVar[int]
    REREGISTER_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    ACTIVE_FIELD_NUMBER: _ClassVar[int]
    commands: _containers.RepeatedCompositeFieldContainer[Command]
    reregister: bool
    epoch: int
    active: bool
    def __init__(self, commands: _Optional[_Iterable[_Union[Command, _Mapping]]] = ..., reregister: _Optional[bool] = ..., epoch: _Optional[int] = ..., active: _Optional[bool] = ...) -> None: ...

class StoredUnit(_message.Message):
    __slots__ = ("group_id", "index", "length", "generation")
    GROUP_ID_FIELD_NUMBER: _ClassVar[int]
    INDEX_FIELD_NUMBER: _ClassVar[int]
    LENGTH_FIELD_NUMBER: _ClassVar[int]
    GENERATION_FIELD_NUMBER: _ClassVar[int]
    group_id: int
    index: int
    length: int
    generation: int
    def __init__(self, group_id: _Optional[int] = ..., index: _Optional[int] = ..., length: _Optional[int] = ..., generation: _Optional[int] = ...) -> None: ...

class BlockReportRequest(_message.Message):
    __slots__ = ("datanode_id", "units", "part", "more")
    DATANODE_ID_FIELD_NUMBER: _ClassVar[int]
    UNITS_FIELD_NUMBER: _ClassVar[int]
    PART_FIELD_NUMBER: _ClassVar[int]
    MORE_FIELD_NUMBER: _ClassVar[int]
    datanode_id: str
    units: _containers.RepeatedCompositeFieldContainer[StoredUnit]
    part: int
    more: bool
    def __init__(self, datanode_id: _Optional[str] = ..., units: _Optional[_Iterable[_Union[StoredUnit, _Mapping]]] = ..., part: _Optional[int] = ..., more: _Optional[bool] = ...) -> None: ...

class UnitStoredRequest(_message.Message):
    __slots__ = ("datanode_id", "units")
    DATANODE_ID_FIELD_NUMBER: _ClassVar[int]
    UNITS_FIELD_NUMBER: _ClassVar[int]
    datanode_id: str
    units: _containers.RepeatedCompositeFieldContainer[StoredUnit]
    def __init__(self, datanode_id: _Optional[str] = ..., units: _Optional[_Iterable[_Union[StoredUnit, _Mapping]]] = ...) -> None: ...

class FaultConfig(_message.Message):
    __slots__ = ("read_delay_ms", "probability", "jitter_ms", "stall", "error_probability", "corrupt_probability", "bandwidth_bps", "wire_corrupt_probability")
    READ_DELAY_MS_FIELD_NUMBER: _ClassVar[int]
    PROBABILITY_FIELD_NUMBER: _ClassVar[int]
    JITTER_MS_FIELD_NUMBER: _ClassVar[int]
    STALL_FIELD_NUMBER: _ClassVar[int]
    ERROR_PROBABILITY_FIELD_NUMBER: _ClassVar[int]
    CORRUPT_PROBABILITY_FIELD_NUMBER: _ClassVar[int]
    BANDWIDTH_BPS_FIELD_NUMBER: _ClassVar[int]
    WIRE_CORRUPT_PROBABILITY_FIELD_NUMBER: _ClassVar[int]
    read_delay_ms: int
    probability: float
    jitter_ms: int
    stall: bool
    error_probability: float
    corrupt_probability: float
    bandwidth_bps: int
    wire_corrupt_probability: float
    def __init__(self, read_delay_ms: _Optional[int] = ..., probability: _Optional[float] = ..., jitter_ms: _Optional[int] = ..., stall: _Optional[bool] = ..., error_probability: _Optional[float] = ..., corrupt_probability: _Optional[float] = ..., bandwidth_bps: _Optional[int] = ..., wire_corrupt_probability: _Optional[float] = ...) -> None: ...

class FaultClearRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class RotRequest(_message.Message):
    __slots__ = ("units", "seed", "check")
    UNITS_FIELD_NUMBER: _ClassVar[int]
    SEED_FIELD_NUMBER: _ClassVar[int]
    CHECK_FIELD_NUMBER: _ClassVar[int]
    units: int
    seed: int
    check: _containers.RepeatedCompositeFieldContainer[RottedUnit]
    def __init__(self, units: _Optional[int] = ..., seed: _Optional[int] = ..., check: _Optional[_Iterable[_Union[RottedUnit, _Mapping]]] = ...) -> None: ...

class RottedUnit(_message.Message):
    __slots__ = ("group_id", "index", "generation", "offset", "copy")
    GROUP_ID_FIELD_NUMBER: _ClassVar[int]
    INDEX_FIELD_NUMBER: _ClassVar[int]
    GENERATION_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    COPY_FIELD_NUMBER: _ClassVar[int]
    group_id: int
    index: int
    generation: int
    offset: int
    copy: str
    def __init__(self, group_id: _Optional[int] = ..., index: _Optional[int] = ..., generation: _Optional[int] = ..., offset: _Optional[int] = ..., copy: _Optional[str] = ...) -> None: ...

class RotResponse(_message.Message):
    __slots__ = ("rotted", "still_rotten")
    ROTTED_FIELD_NUMBER: _ClassVar[int]
    STILL_ROTTEN_FIELD_NUMBER: _ClassVar[int]
    rotted: _containers.RepeatedCompositeFieldContainer[RottedUnit]
    still_rotten: _containers.RepeatedCompositeFieldContainer[RottedUnit]
    def __init__(self, rotted: _Optional[_Iterable[_Union[RottedUnit, _Mapping]]] = ..., still_rotten: _Optional[_Iterable[_Union[RottedUnit, _Mapping]]] = ...) -> None: ...

class FaultState(_message.Message):
    __slots__ = ("enabled", "read_delay_ms", "probability", "jitter_ms", "stall", "error_probability", "corrupt_probability", "bandwidth_bps", "calls", "cancelled_reads", "stalled_reads", "wire_corrupt_probability")
    class CallsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    ENABLED_FIELD_NUMBER: _ClassVar[int]
    READ_DELAY_MS_FIELD_NUMBER: _ClassVar[int]
    PROBABILITY_FIELD_NUMBER: _ClassVar[int]
    JITTER_MS_FIELD_NUMBER: _ClassVar[int]
    STALL_FIELD_NUMBER: _ClassVar[int]
    ERROR_PROBABILITY_FIELD_NUMBER: _ClassVar[int]
    CORRUPT_PROBABILITY_FIELD_NUMBER: _ClassVar[int]
    BANDWIDTH_BPS_FIELD_NUMBER: _ClassVar[int]
    CALLS_FIELD_NUMBER: _ClassVar[int]
    CANCELLED_READS_FIELD_NUMBER: _ClassVar[int]
    STALLED_READS_FIELD_NUMBER: _ClassVar[int]
    WIRE_CORRUPT_PROBABILITY_FIELD_NUMBER: _ClassVar[int]
    enabled: bool
    read_delay_ms: int
    probability: float
    jitter_ms: int
    stall: bool
    error_probability: float
    corrupt_probability: float
    bandwidth_bps: int
    calls: _containers.ScalarMap[str, int]
    cancelled_reads: int
    stalled_reads: int
    wire_corrupt_probability: float
    def __init__(self, enabled: _Optional[bool] = ..., read_delay_ms: _Optional[int] = ..., probability: _Optional[float] = ..., jitter_ms: _Optional[int] = ..., stall: _Optional[bool] = ..., error_probability: _Optional[float] = ..., corrupt_probability: _Optional[float] = ..., bandwidth_bps: _Optional[int] = ..., calls: _Optional[_Mapping[str, int]] = ..., cancelled_reads: _Optional[int] = ..., stalled_reads: _Optional[int] = ..., wire_corrupt_probability: _Optional[float] = ...) -> None: ...

class DecommissionRequest(_message.Message):
    __slots__ = ("datanode_id", "recommission")
    DATANODE_ID_FIELD_NUMBER: _ClassVar[int]
    RECOMMISSION_FIELD_NUMBER: _ClassVar[int]
    datanode_id: str
    recommission: bool
    def __init__(self, datanode_id: _Optional[str] = ..., recommission: _Optional[bool] = ...) -> None: ...

class DecommissionResponse(_message.Message):
    __slots__ = ("admin_state", "units_mapped")
    ADMIN_STATE_FIELD_NUMBER: _ClassVar[int]
    UNITS_MAPPED_FIELD_NUMBER: _ClassVar[int]
    admin_state: str
    units_mapped: int
    def __init__(self, admin_state: _Optional[str] = ..., units_mapped: _Optional[int] = ...) -> None: ...

class SafeModeRequest(_message.Message):
    __slots__ = ("action",)
    ACTION_FIELD_NUMBER: _ClassVar[int]
    action: str
    def __init__(self, action: _Optional[str] = ...) -> None: ...

class SafeModeResponse(_message.Message):
    __slots__ = ("on", "reason", "units_reported", "units_total", "share", "deadline_left_s")
    ON_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    UNITS_REPORTED_FIELD_NUMBER: _ClassVar[int]
    UNITS_TOTAL_FIELD_NUMBER: _ClassVar[int]
    SHARE_FIELD_NUMBER: _ClassVar[int]
    DEADLINE_LEFT_S_FIELD_NUMBER: _ClassVar[int]
    on: bool
    reason: str
    units_reported: int
    units_total: int
    share: float
    deadline_left_s: float
    def __init__(self, on: _Optional[bool] = ..., reason: _Optional[str] = ..., units_reported: _Optional[int] = ..., units_total: _Optional[int] = ..., share: _Optional[float] = ..., deadline_left_s: _Optional[float] = ...) -> None: ...

class SetTimesRequest(_message.Message):
    __slots__ = ("path", "mtime_ms", "atime_ms")
    PATH_FIELD_NUMBER: _ClassVar[int]
    MTIME_MS_FIELD_NUMBER: _ClassVar[int]
    ATIME_MS_FIELD_NUMBER: _ClassVar[int]
    path: str
    mtime_ms: int
    atime_ms: int
    def __init__(self, path: _Optional[str] = ..., mtime_ms: _Optional[int] = ..., atime_ms: _Optional[int] = ...) -> None: ...

class SymlinkRequest(_message.Message):
    __slots__ = ("target", "path")
    TARGET_FIELD_NUMBER: _ClassVar[int]
    PATH_FIELD_NUMBER: _ClassVar[int]
    target: str
    path: str
    def __init__(self, target: _Optional[str] = ..., path: _Optional[str] = ...) -> None: ...

class SetXAttrRequest(_message.Message):
    __slots__ = ("path", "name", "value", "flags")
    PATH_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    FLAGS_FIELD_NUMBER: _ClassVar[int]
    path: str
    name: str
    value: bytes
    flags: int
    def __init__(self, path: _Optional[str] = ..., name: _Optional[str] = ..., value: _Optional[bytes] = ..., flags: _Optional[int] = ...) -> None: ...

class RemoveXAttrRequest(_message.Message):
    __slots__ = ("path", "name")
    PATH_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    path: str
    name: str
    def __init__(self, path: _Optional[str] = ..., name: _Optional[str] = ...) -> None: ...

class XAttrsResponse(_message.Message):
    __slots__ = ("xattrs",)
    class XattrsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: bytes
        def __init__(self, key: _Optional[str] = ..., value: _Optional[bytes] = ...) -> None: ...
    XATTRS_FIELD_NUMBER: _ClassVar[int]
    xattrs: _containers.ScalarMap[str, bytes]
    def __init__(self, xattrs: _Optional[_Mapping[str, bytes]] = ...) -> None: ...

class AppendRequest(_message.Message):
    __slots__ = ("path", "client_name", "rewrite_from")
    PATH_FIELD_NUMBER: _ClassVar[int]
    CLIENT_NAME_FIELD_NUMBER: _ClassVar[int]
    REWRITE_FROM_FIELD_NUMBER: _ClassVar[int]
    path: str
    client_name: str
    rewrite_from: int
    def __init__(self, path: _Optional[str] = ..., client_name: _Optional[str] = ..., rewrite_from: _Optional[int] = ...) -> None: ...

class AppendResponse(_message.Message):
    __slots__ = ("write", "kept_length", "length", "mtime_ms", "tail")
    WRITE_FIELD_NUMBER: _ClassVar[int]
    KEPT_LENGTH_FIELD_NUMBER: _ClassVar[int]
    LENGTH_FIELD_NUMBER: _ClassVar[int]
    MTIME_MS_FIELD_NUMBER: _ClassVar[int]
    TAIL_FIELD_NUMBER: _ClassVar[int]
    write: CreateResponse
    kept_length: int
    length: int
    mtime_ms: int
    tail: BlockGroup
    def __init__(self, write: _Optional[_Union[CreateResponse, _Mapping]] = ..., kept_length: _Optional[int] = ..., length: _Optional[int] = ..., mtime_ms: _Optional[int] = ..., tail: _Optional[_Union[BlockGroup, _Mapping]] = ...) -> None: ...

class TruncateRequest(_message.Message):
    __slots__ = ("path", "length", "client_name")
    PATH_FIELD_NUMBER: _ClassVar[int]
    LENGTH_FIELD_NUMBER: _ClassVar[int]
    CLIENT_NAME_FIELD_NUMBER: _ClassVar[int]
    path: str
    length: int
    client_name: str
    def __init__(self, path: _Optional[str] = ..., length: _Optional[int] = ..., client_name: _Optional[str] = ...) -> None: ...

class TruncateResponse(_message.Message):
    __slots__ = ("done", "rewrite")
    DONE_FIELD_NUMBER: _ClassVar[int]
    REWRITE_FIELD_NUMBER: _ClassVar[int]
    done: bool
    rewrite: AppendResponse
    def __init__(self, done: _Optional[bool] = ..., rewrite: _Optional[_Union[AppendResponse, _Mapping]] = ...) -> None: ...

class RecoverLeaseResponse(_message.Message):
    __slots__ = ("recovered",)
    RECOVERED_FIELD_NUMBER: _ClassVar[int]
    recovered: bool
    def __init__(self, recovered: _Optional[bool] = ...) -> None: ...

class ItemResult(_message.Message):
    __slots__ = ("code", "message")
    CODE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    code: int
    message: str
    def __init__(self, code: _Optional[int] = ..., message: _Optional[str] = ...) -> None: ...

class ItemsResponse(_message.Message):
    __slots__ = ("results",)
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    results: _containers.RepeatedCompositeFieldContainer[ItemResult]
    def __init__(self, results: _Optional[_Iterable[_Union[ItemResult, _Mapping]]] = ...) -> None: ...

class StatManyRequest(_message.Message):
    __slots__ = ("paths",)
    PATHS_FIELD_NUMBER: _ClassVar[int]
    paths: _containers.RepeatedCompositeFieldContainer[PathRequest]
    def __init__(self, paths: _Optional[_Iterable[_Union[PathRequest, _Mapping]]] = ...) -> None: ...

class StatManyResponse(_message.Message):
    __slots__ = ("infos", "results")
    INFOS_FIELD_NUMBER: _ClassVar[int]
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    infos: _containers.RepeatedCompositeFieldContainer[FileInfo]
    results: _containers.RepeatedCompositeFieldContainer[ItemResult]
    def __init__(self, infos: _Optional[_Iterable[_Union[FileInfo, _Mapping]]] = ..., results: _Optional[_Iterable[_Union[ItemResult, _Mapping]]] = ...) -> None: ...

class MkdirsRequest(_message.Message):
    __slots__ = ("dirs", "call_ids")
    DIRS_FIELD_NUMBER: _ClassVar[int]
    CALL_IDS_FIELD_NUMBER: _ClassVar[int]
    dirs: _containers.RepeatedCompositeFieldContainer[MkdirRequest]
    call_ids: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, dirs: _Optional[_Iterable[_Union[MkdirRequest, _Mapping]]] = ..., call_ids: _Optional[_Iterable[str]] = ...) -> None: ...

class MkdirsResponse(_message.Message):
    __slots__ = ("results", "infos")
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    INFOS_FIELD_NUMBER: _ClassVar[int]
    results: _containers.RepeatedCompositeFieldContainer[ItemResult]
    infos: _containers.RepeatedCompositeFieldContainer[FileInfo]
    def __init__(self, results: _Optional[_Iterable[_Union[ItemResult, _Mapping]]] = ..., infos: _Optional[_Iterable[_Union[FileInfo, _Mapping]]] = ...) -> None: ...

class DeleteManyRequest(_message.Message):
    __slots__ = ("deletes", "call_ids")
    DELETES_FIELD_NUMBER: _ClassVar[int]
    CALL_IDS_FIELD_NUMBER: _ClassVar[int]
    deletes: _containers.RepeatedCompositeFieldContainer[DeleteRequest]
    call_ids: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, deletes: _Optional[_Iterable[_Union[DeleteRequest, _Mapping]]] = ..., call_ids: _Optional[_Iterable[str]] = ...) -> None: ...

class CreateManyRequest(_message.Message):
    __slots__ = ("creates", "call_ids")
    CREATES_FIELD_NUMBER: _ClassVar[int]
    CALL_IDS_FIELD_NUMBER: _ClassVar[int]
    creates: _containers.RepeatedCompositeFieldContainer[CreateRequest]
    call_ids: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, creates: _Optional[_Iterable[_Union[CreateRequest, _Mapping]]] = ..., call_ids: _Optional[_Iterable[str]] = ...) -> None: ...

class CreateManyResponse(_message.Message):
    __slots__ = ("created", "results")
    CREATED_FIELD_NUMBER: _ClassVar[int]
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    created: _containers.RepeatedCompositeFieldContainer[CreateResponse]
    results: _containers.RepeatedCompositeFieldContainer[ItemResult]
    def __init__(self, created: _Optional[_Iterable[_Union[CreateResponse, _Mapping]]] = ..., results: _Optional[_Iterable[_Union[ItemResult, _Mapping]]] = ...) -> None: ...

class BalanceRequest(_message.Message):
    __slots__ = ("max_bytes", "threshold_pct", "restart")
    MAX_BYTES_FIELD_NUMBER: _ClassVar[int]
    THRESHOLD_PCT_FIELD_NUMBER: _ClassVar[int]
    RESTART_FIELD_NUMBER: _ClassVar[int]
    max_bytes: int
    threshold_pct: float
    restart: bool
    def __init__(self, max_bytes: _Optional[int] = ..., threshold_pct: _Optional[float] = ..., restart: _Optional[bool] = ...) -> None: ...

class BalanceResponse(_message.Message):
    __slots__ = ("planned_moves", "planned_bytes", "moves_in_flight", "bytes_in_flight", "moves_done", "bytes_moved", "moves_failed", "round_done", "misplaced", "unmendable", "over", "under", "spread_pct", "relative", "quiet")
    PLANNED_MOVES_FIELD_NUMBER: _ClassVar[int]
    PLANNED_BYTES_FIELD_NUMBER: _ClassVar[int]
    MOVES_IN_FLIGHT_FIELD_NUMBER: _ClassVar[int]
    BYTES_IN_FLIGHT_FIELD_NUMBER: _ClassVar[int]
    MOVES_DONE_FIELD_NUMBER: _ClassVar[int]
    BYTES_MOVED_FIELD_NUMBER: _ClassVar[int]
    MOVES_FAILED_FIELD_NUMBER: _ClassVar[int]
    ROUND_DONE_FIELD_NUMBER: _ClassVar[int]
    MISPLACED_FIELD_NUMBER: _ClassVar[int]
    UNMENDABLE_FIELD_NUMBER: _ClassVar[int]
    OVER_FIELD_NUMBER: _ClassVar[int]
    UNDER_FIELD_NUMBER: _ClassVar[int]
    SPREAD_PCT_FIELD_NUMBER: _ClassVar[int]
    RELATIVE_FIELD_NUMBER: _ClassVar[int]
    QUIET_FIELD_NUMBER: _ClassVar[int]
    planned_moves: int
    planned_bytes: int
    moves_in_flight: int
    bytes_in_flight: int
    moves_done: int
    bytes_moved: int
    moves_failed: int
    round_done: bool
    misplaced: int
    unmendable: int
    over: int
    under: int
    spread_pct: float
    relative: bool
    quiet: bool
    def __init__(self, planned_moves: _Optional[int] = ..., planned_bytes: _Optional[int] = ..., moves_in_flight: _Optional[int] = ..., bytes_in_flight: _Optional[int] = ..., moves_done: _Optional[int] = ..., bytes_moved: _Optional[int] = ..., moves_failed: _Optional[int] = ..., round_done: _Optional[bool] = ..., misplaced: _Optional[int] = ..., unmendable: _Optional[int] = ..., over: _Optional[int] = ..., under: _Optional[int] = ..., spread_pct: _Optional[float] = ..., relative: _Optional[bool] = ..., quiet: _Optional[bool] = ...) -> None: ...

class SyncRequest(_message.Message):
    __slots__ = ("file_id", "length", "groups", "path", "exclude_datanodes")
    FILE_ID_FIELD_NUMBER: _ClassVar[int]
    LENGTH_FIELD_NUMBER: _ClassVar[int]
    GROUPS_FIELD_NUMBER: _ClassVar[int]
    PATH_FIELD_NUMBER: _ClassVar[int]
    EXCLUDE_DATANODES_FIELD_NUMBER: _ClassVar[int]
    file_id: int
    length: int
    groups: _containers.RepeatedCompositeFieldContainer[GroupCommit]
    path: str
    exclude_datanodes: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, file_id: _Optional[int] = ..., length: _Optional[int] = ..., groups: _Optional[_Iterable[_Union[GroupCommit, _Mapping]]] = ..., path: _Optional[str] = ..., exclude_datanodes: _Optional[_Iterable[str]] = ...) -> None: ...

class SyncLengthRequest(_message.Message):
    __slots__ = ("file_id", "length", "tail_group_id", "replicas")
    FILE_ID_FIELD_NUMBER: _ClassVar[int]
    LENGTH_FIELD_NUMBER: _ClassVar[int]
    TAIL_GROUP_ID_FIELD_NUMBER: _ClassVar[int]
    REPLICAS_FIELD_NUMBER: _ClassVar[int]
    file_id: int
    length: int
    tail_group_id: int
    replicas: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, file_id: _Optional[int] = ..., length: _Optional[int] = ..., tail_group_id: _Optional[int] = ..., replicas: _Optional[_Iterable[int]] = ...) -> None: ...
