"""Where a file's bytes are: its status, its block groups, and each unit's DataNode.

What the NameNode answers for a file (``FileInfo`` on the wire) and what the reader reads by.
``FileStatus.group`` is the file's owner group (POSIX); ``FileStatus.groups`` its block groups.
"""

import dataclasses
import time

from hedgefs.client.cluster_view import View, views_from_proto
from hedgefs.ec.policy import Policy, parse_policy
from hedgefs.proto import hedgefs_pb2 as pb


def stat_request(path: str, xattrs: bool = False) -> pb.PathRequest:
    """A GetFileInfo of ``path`` (``xattrs``: with the file's), the one way this client asks: it
    reads each block group in its own code (``group_codes``; an open tail's replicas too: the
    NameNode refuses a file with one to a client that does not say so)."""
    return pb.PathRequest(path=path, xattrs=xattrs, group_codes=True)


@dataclasses.dataclass(frozen=True)
class UnitLocation:
    index: int
    datanode_id: str
    address: str            # gRPC (control)
    data_address: str = ""  # where its unit reads and writes go
    # Its block token (a secure cluster): renewed with every lookup, so not part of where it is.
    token: bytes = dataclasses.field(default=b"", compare=False, repr=False)


@dataclasses.dataclass(frozen=True)
class GroupLocation:
    id: int
    length: int
    units: dict[int, UnitLocation]
    generation: int   # every unit read names it: the NameNode's, never a default
    policy: str = ""  # the group's own code if not the file's: an EC file's open tail, replicated

    def code(self, file_policy: Policy) -> Policy:
        """The code this group is stored in: its own, else its file's."""
        return parse_policy(self.policy) if self.policy else file_policy


@dataclasses.dataclass(frozen=True)
class FileStatus:
    path: str
    is_dir: bool
    length: int
    policy: str
    block_size: int
    mtime_ms: int
    groups: tuple[GroupLocation, ...] = ()
    owner: str = ""
    group: str = ""
    permission: int = 0
    # When its block tokens should be renewed (time.monotonic(); 0 = it has none), and when they
    # expire (a little before the NameNode's lifetime ends: the clocks started apart).
    renew_tokens_at: float = 0.0
    tokens_expire_at: float = 0.0
    # The cluster's view of its DataNodes (cluster_view.py): what the NameNode said at this lookup.
    datanode_reads: dict[str, View] = dataclasses.field(default_factory=dict, compare=False, repr=False)
    # A status of some of its block groups only (``FileSystem.stat(path, span=)``): ``groups`` are
    # those holding the span, the first of them the file's group ``first_group``. Not for reading.
    ranged: bool = dataclasses.field(default=False, compare=False)
    first_group: int = dataclasses.field(default=0, compare=False)
    atime_ms: int = 0   # the access time: the mtime unless set (``FileSystem.set_times``)
    symlink: str = ""   # a symbolic link's target ("" for files and directories)
    file_id: int = dataclasses.field(default=0, compare=False)   # the inode id (appends keep it)
    # Its extended attributes, when the lookup asked for them (``stat(xattrs=True)``,
    # ``iter_list(xattrs=True)``): those of this version; None when not asked.
    xattrs: dict[str, bytes] | None = dataclasses.field(default=None, compare=False, repr=False)
    # A group is short of located units while the NameNode awaits block reports (it just started
    # or was promoted): its one-line reason ("": none). ``FileSystem.open`` asks again while set.
    locations_pending: str = dataclasses.field(default="", compare=False)
    # A listing's file whose last group is in a code of its own (an open or kept tail): that code
    # ("": the file's). A listing's entry has no groups: du counts its disk from this.
    last_group_code: str = ""

    @property
    def is_link(self) -> bool:
        return bool(self.symlink)

    @classmethod
    def from_proto(cls, info: pb.FileInfo, xattrs: bool = False) -> "FileStatus":
        groups = tuple(
            GroupLocation(
                id=g.id,
                length=g.length,
                units={u.index: UnitLocation(u.index, u.datanode_id, u.address, u.data_address, u.token)
                       for u in g.units},
                generation=g.generation,
                policy=g.policy,
            )
            for g in info.groups
        )
        now, lifetime_s = time.monotonic(), info.token_lifetime_ms / 1000
        renew = now + 0.75 * lifetime_s if lifetime_s else 0.0
        expire = now + 0.95 * lifetime_s if lifetime_s else 0.0
        return cls(info.path, info.is_dir, info.length, info.policy, info.block_size, info.mtime_ms, groups,
                   info.owner, info.group, info.permission, renew, expire, views_from_proto(info),
                   ranged=info.group_count > 0, first_group=info.first_group,
                   atime_ms=info.atime_ms or info.mtime_ms, symlink=info.symlink, file_id=info.file_id,
                   xattrs=dict(info.xattrs) if xattrs else None, locations_pending=info.locations_pending,
                   last_group_code=info.last_group_code)
