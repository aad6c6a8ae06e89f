"""The journal's records: one per change of the namespace (HDFS's edit log ops), and how they are
written down.

A record says what changed, with everything apply.py needs to make the same change again, on the
active, at a restart's replay and on a standby, with the same result: the ids it issued, the
wall-clock time it happened at, the owner it gave. Paths name what is changed (as HDFS's edits
do); a file being written is named by its id. ``retry`` is the (client id, call id) of the call
it answered, if any: replay rebuilds the retry cache from it.

Adding an operation: a record type here (a NamedTuple with its code in ``CODES``), its apply
in apply.py, its handler (the checks that build the record) in the namesystem.

Framing: a batch (what one group commit writes) is frames back to back, each
``[length u32][crc32c u32][txid u64][msgpack payload]``, the CRC32C covering txid and payload:
a frame that does not check is corrupt, and says which txid it held.
"""

from __future__ import annotations

import struct
from typing import Iterator, NamedTuple

import crc32c
import msgpack

Retry = tuple[str, str] | None   # (client id, call id)


class Format(NamedTuple):
    """The first record of a namespace: who it belongs to and where its generations start."""
    cluster_id: str
    generation_base: int


class Mkdir(NamedTuple):
    """Every missing directory of ``path`` (``mkdir -p``; a plain mkdir was checked to create one),
    with ids from ``first_id`` on, outermost first. ``mode``: the last one's (mkdir(2)'s), or None:
    DIR_MODE, as the others get. (``mode`` is last: a record written before it decodes with None.)"""
    path: str
    mtime: int
    owner: str
    first_id: int
    retry: Retry = None
    mode: int | None = None


class Create(NamedTuple):
    """A file being written at ``path`` (invisible until Complete)."""
    path: str
    file_id: int
    policy: str
    block_size: int
    overwrite: bool
    mtime: int
    owner: str
    group: str
    mode: int
    retry: Retry = None


class AddGroup(NamedTuple):
    """A new block group at the end of a file being written, its units to ``targets`` (index order).
    ``policy``: the group's own code, if not the file's (an EC file's open tail: REPLICATE-(m+1))."""
    file_id: int
    group_id: int
    targets: tuple
    retry: Retry = None
    policy: str = ""


class Complete(NamedTuple):
    """The file becomes visible at its path with ``length`` bytes in ``groups`` (ids, file order;
    its other groups go), replacing a complete file there. ``attrs``: (owner, group, mode) it
    takes (a conversion keeps the replaced file's; the writer's chmod/chown while writing), or
    None. ``mtime`` is the commit's (the directory's new mtime); ``times``: (mtime, atime) the
    file takes instead (utimes while writing; -1: the commit's), or None. (``times`` is last:
    a record written before it decodes with None.)"""
    file_id: int
    length: int
    groups: tuple
    mtime: int
    attrs: tuple | None = None
    retry: Retry = None
    times: tuple | None = None


class Abandon(NamedTuple):
    """A file being written goes, with its groups (an abandon, or its lease expired)."""
    file_id: int
    retry: Retry = None


class Delete(NamedTuple):
    path: str
    mtime: int
    retry: Retry = None


class Rename(NamedTuple):
    src: str
    dst: str
    mtime: int
    retry: Retry = None


class SetPolicy(NamedTuple):
    path: str
    policy: str          # "" = inherit
    retry: Retry = None


class SetPermission(NamedTuple):
    path: str
    mode: int
    retry: Retry = None


class SetOwner(NamedTuple):
    path: str
    owner: str
    group: str
    retry: Retry = None


class Concat(NamedTuple):
    """The complete files ``sources`` become one file at ``target`` (the first part's node, the
    others' groups appended in order), replacing a file there."""
    target: str
    sources: tuple
    mtime: int
    retry: Retry = None


class Decommission(NamedTuple):
    datanode_id: str
    leaving: bool


class SetTimes(NamedTuple):
    """HDFS's setTimes: ``mtime``/``atime`` in ms, -1 = left as it is."""
    path: str
    mtime: int
    atime: int
    retry: Retry = None


class Symlink(NamedTuple):
    """A symbolic link at ``path`` (its parent exists, the name is free) to ``target``."""
    path: str
    target: str
    link_id: int
    mtime: int
    owner: str
    group: str
    retry: Retry = None


class SetXAttr(NamedTuple):
    path: str
    name: str
    value: bytes
    retry: Retry = None


class RemoveXAttr(NamedTuple):
    path: str
    name: str
    retry: Retry = None


class Reopen(NamedTuple):
    """An append or a truncate of the complete file at ``path`` begins: a new version of it is
    written (a lease, its file id the file's own), sharing its first ``kept`` groups; the rest
    of its bytes are rewritten into new groups, copy-on-write. The file stays as it was until
    the Complete of this write replaces it."""
    path: str
    kept: int
    holder: str
    retry: Retry = None


class Truncate(NamedTuple):
    """The complete file at ``path`` keeps its first ``kept`` groups and ``length`` bytes (a cut
    on a group boundary: no bytes to rewrite); the other groups go."""
    path: str
    length: int
    kept: int
    mtime: int
    retry: Retry = None


class SyncLength(NamedTuple):
    """hsync on an open tail: every replica of ``group_id`` (a group of the write ``file_id`` with
    its own code) holds the file's bytes up to ``length``. The file the write rewrites (its base)
    grows to ``length`` and takes the tail as its last group, in place of the partial group it
    had after the groups the write keeps (which goes); the write and its lease go on.
    ``left_out``: (unit index, DataNode id) of replicas that do not hold them (close went on
    without them): they are left out of the tail and their copies are deleted."""
    file_id: int
    group_id: int
    length: int
    mtime: int
    left_out: tuple = ()


Record = (Format | Mkdir | Create | AddGroup | Complete | Abandon | Delete | Rename | SetPolicy | SetPermission
          | SetOwner | Concat | Decommission | SetTimes | Symlink | SetXAttr | RemoveXAttr | Reopen | Truncate
          | SyncLength)

# Codes are the on-disk format: never renumber, only add.
CODES: dict[type, int] = {Format: 1, Mkdir: 2, Create: 3, AddGroup: 4, Complete: 5, Abandon: 6, Delete: 7,
                          Rename: 8, SetPolicy: 9, SetPermission: 10, SetOwner: 11, Concat: 12, Decommission: 13,
                          SetTimes: 14, Symlink: 15, SetXAttr: 16, RemoveXAttr: 17, Reopen: 18, Truncate: 19,
                          SyncLength: 20}
TYPES: dict[int, type] = {code: cls for cls, code in CODES.items()}

_HEAD = struct.Struct("<IIQ")   # length of the payload, crc32c of txid + payload, txid
_TXID = struct.Struct("<Q")


class CorruptRecord(ValueError):
    """A frame that does not check: ``txid`` is the one it claims (or the one expected there)."""

    def __init__(self, txid: int, why: str):
        super().__init__(f"journal record txid {txid} is corrupt ({why})")
        self.txid = txid


# Records that grew a last field with a default: written without it while it holds the default, in the
# shape an older NameNode (a standby upgraded after the active) reads; a record that needs it needs the
# newer standby (docs/operations.md#upgrades: standbys, then the active, then clients).
GROWN: frozenset[type] = frozenset({Mkdir, AddGroup, Complete, SyncLength})


def encode(record: Record) -> bytes:
    fields = tuple(record)
    kind = type(record)
    if kind in GROWN and fields[-1] == kind._field_defaults[kind._fields[-1]]:
        fields = fields[:-1]
    return msgpack.packb((CODES[kind], *fields), use_bin_type=True)


def decode(payload: bytes) -> Record:
    code, *fields = msgpack.unpackb(payload, use_list=False, raw=False)
    return TYPES[code](*fields)


def frame(txid: int, payload: bytes) -> bytes:
    txid_bytes = _TXID.pack(txid)
    return _HEAD.pack(len(payload), crc32c.crc32c(payload, crc32c.crc32c(txid_bytes)), txid) + payload


def frames(data: bytes, first_txid: int) -> Iterator[tuple[int, Record]]:
    """(txid, record) of every frame of a batch; CorruptRecord if one does not check, or the txids
    are not consecutive from ``first_txid``."""
    at, expected, end = 0, first_txid, len(data)
    view = memoryview(data)
    while at < end:
        if end - at < _HEAD.size:
            raise CorruptRecord(expected, "a torn frame header")
        length, crc, txid = _HEAD.unpack_from(data, at)
        payload = view[at + _HEAD.size:at + _HEAD.size + length]
        if len(payload) != length:
            raise CorruptRecord(expected, "a torn frame")
        if crc32c.crc32c(payload, crc32c.crc32c(_TXID.pack(txid))) != crc:
            raise CorruptRecord(expected, "CRC32C mismatch")
        if txid != expected:
            raise CorruptRecord(expected, f"found txid {txid} where {expected} was due")
        try:
            record = decode(bytes(payload))
        except Exception as err:   # a frame that checks but does not decode: a format we do not know
            raise CorruptRecord(txid, f"undecodable: {err}") from None
        yield txid, record
        at += _HEAD.size + length
        expected += 1
