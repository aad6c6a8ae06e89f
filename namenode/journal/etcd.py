"""The journal on etcd (``--meta etcd://HOST:PORT[,...]/PREFIX``): the records of every NameNode
of an HA pair in one etcd cluster, many per key, every write guarded by the active's epoch.

Keys (under ``/<prefix>/``):

    format                 FORMAT (written with the first image)
    j/<first txid:016x>    one batch: 8 bytes of its last txid, then its frames (records.py); a
                           batch larger than ``KEY_BYTES`` is several keys, each its own run of txids
    image                  {"txid", "prefix", "chunks"}: the latest checkpoint image
    img/<txid>-<tag>/<n>   its chunks (image.py), ``CHUNK`` keys of about 1 MiB
    leader, commit         the election's (election.py) and the chain's (etcd_commit.py)

A batch goes in one Txn (``Chain``: guarded by the epoch and compare-and-swapped on the chain's
marker, so it lands exactly once even when its answer is lost), within etcd's limits: at most
``max_ops`` keys and ``TXN_BYTES`` a Txn (etcd's --max-request-bytes is 1.5 MiB): a larger batch
goes in several Txns, in order, before its callers are told. A checkpoint's image is written by
the active in Txns of its own (guarded by the epoch, a chunk each), published by one more (the
``image`` key), and the batches it covers are then deleted (compaction of the journal). A standby
reads the latest image and the batches after it at one revision (``read_revision``), then tails
the prefix from the next revision (ha/tailer.py).
"""

from __future__ import annotations

import json
import logging
import struct
import uuid
from typing import Callable, Iterator

from hedgefs.namenode.journal.etcd_commit import Chain
from hedgefs.namenode.journal.etcd_meta import EtcdMeta, Fenced, MetaError

log = logging.getLogger("hedgefs.namenode")

FORMAT = b"hedgefs-journal-1"
KEY_BYTES = 1 << 20          # a batch key's frames at most (a larger batch: several keys)
TXN_BYTES = 1_400_000        # what one Txn may carry (etcd's --max-request-bytes: 1.5 MiB)
_LAST = struct.Struct("<Q")
# Keys that are this journal's (or its election's): anything else under a prefix is not ours.
OURS = ("format", "image", "leader", "commit")
OURS_PREFIXES = ("j/", "img/", "nn/")


class NotANamespace(RuntimeError):
    """The prefix holds keys, but not a hedgefs namespace (or one of another format)."""


def batch_key(first: int) -> str:
    return f"j/{first:016x}"


def split_frames(first: int, data: bytes, limit: int = KEY_BYTES) -> list[tuple[int, int, bytes]]:
    """A batch's frames as runs of at most ``limit`` bytes (whole frames): (first, last, frames)."""
    from hedgefs.namenode.journal.records import _HEAD

    out, at, txid = [], 0, first
    start, start_txid, end = 0, first, len(data)
    while at < end:
        length = _HEAD.unpack_from(data, at)[0]
        size = _HEAD.size + length
        if at > start and at + size - start > limit:
            out.append((start_txid, txid - 1, data[start:at]))
            start, start_txid = at, txid
        at += size
        txid += 1
    if at > start:
        out.append((start_txid, txid - 1, data[start:at]))
    return out


class EtcdJournal:
    def __init__(self, meta: EtcdMeta, max_ops: int = 1024):
        self.meta = meta
        self.location = str(meta.url)
        self.max_ops = max(2, max_ops - 1)   # less the chain's marker key
        self.max_record_bytes = KEY_BYTES - 64   # a frame (its header) of one record fits a key
        self.read_revision = 0               # the revision image() and batches() read at
        self.revision = 0                    # the last Txn this engine committed (an active's)
        self.epoch = 0
        self._chain: Chain | None = None
        self.on_revision: Callable[[int], None] | None = None

    # ------------------------------------------------------------------ reading (any NameNode)

    def check(self) -> None:
        """NotANamespace when the prefix holds keys that are not a namespace of this format (an
        empty prefix is fine: the first active formats it; a schema-5 one is converted first)."""
        _, items = self.meta.range("", keys_only=True)
        rels = [rel for rel, _ in items]
        foreign = [rel for rel in rels if rel not in OURS and not rel.startswith(OURS_PREFIXES)]
        if not foreign:
            found = self.meta.get("format")
            if found is not None and found[0] != FORMAT:
                raise NotANamespace(f"a journal of format {found[0].decode(errors='replace')!r}; this NameNode "
                                    f"reads {FORMAT.decode()!r}")
            return
        if any(rel.startswith("t/") for rel in foreign):
            raise NotANamespace("schema-5")   # the caller converts it (upgrade.py)
        raise NotANamespace(f"{len(foreign)} keys under the prefix, but not a hedgefs namespace")

    def image(self) -> tuple[int, Iterator[bytes]] | None:
        revision, found = self.meta.range("image")
        self.read_revision = revision
        found = [v for rel, v in found if rel == "image"]
        if not found:
            return None
        pointer = json.loads(found[0])
        txid, prefix, chunks = pointer["txid"], pointer["prefix"], pointer["chunks"]

        def read() -> Iterator[bytes]:
            _, items = self.meta.range(prefix + "/", revision=revision)
            got = {int(rel.rsplit("/", 1)[1], 16): value for rel, value in items}
            for n in range(chunks):
                if n not in got:
                    raise ValueError(f"chunk {n} is missing")
                yield got[n]
        return txid, read()

    def batches(self, after: int) -> Iterator[tuple[int, int, bytes]]:
        """The batches holding txids past ``after``, at the revision the image was read at."""
        revision, items = self.meta.range("j/", revision=self.read_revision)
        self.read_revision = revision
        for _rel, value in items:
            last = _LAST.unpack_from(value)[0]
            if last > after:
                first = int(_rel[2:], 16)
                yield first, last, value[_LAST.size:]

    @staticmethod
    def parse(rel: str, value: bytes) -> tuple[int, int, bytes]:
        """(first, last, frames) of a batch key's value (a tailer's)."""
        return int(rel[2:], 16), _LAST.unpack_from(value)[0], value[_LAST.size:]

    # ------------------------------------------------------------------ writing (the active's)

    def start_writing(self, epoch: int, serving: Callable[[], bool] | None, revision: int) -> None:
        self.epoch = epoch
        self.revision = max(revision, epoch)
        self._chain = Chain(self.meta, epoch, serving)

    def append(self, first: int, last: int, data: bytes) -> None:
        if self._chain is None:
            raise MetaError("this NameNode is not the active: it writes no journal")
        txn: dict[str, bytes] = {}
        size = 0
        for run_first, run_last, frames in split_frames(first, data):
            value = _LAST.pack(run_last) + frames
            if txn and (size + len(value) > TXN_BYTES or len(txn) >= self.max_ops):
                self._commit(txn)
                txn, size = {}, 0
            txn[batch_key(run_first)] = value
            size += len(value)
        if txn:
            self._commit(txn)

    def _commit(self, puts: dict[str, bytes]) -> None:
        revision = self._chain.commit(puts, [])
        self.revision = max(self.revision, revision)
        if self.on_revision is not None:
            self.on_revision(revision)

    def write_image(self, txid: int, chunks: Iterator[bytes]) -> None:
        self._image_prefix = prefix = f"img/{txid:016x}-{uuid.uuid4().hex[:8]}"
        n = 0
        for chunk in chunks:
            if self.meta.txn({f"{prefix}/{n:06x}": chunk}, epoch=self.epoch) is None:
                raise Fenced(f"epoch {self.epoch} is no longer the leader's: the image at txid {txid} is abandoned")
            n += 1
        self._image_chunks = n

    def publish_image(self, txid: int) -> None:
        prefix = self._image_prefix
        pointer = json.dumps({"txid": txid, "prefix": prefix, "chunks": self._image_chunks}).encode()
        # the older images go with it: everything under img/ before this one's prefix, and after
        if self.meta.txn({"image": pointer, "format": FORMAT},
                         [("img/", prefix + "/"), (prefix + "0", "img0")], epoch=self.epoch) is None:
            raise Fenced(f"epoch {self.epoch} is no longer the leader's: the image at txid {txid} is abandoned")

    def truncate(self, txid: int) -> None:
        """The batches wholly covered by the image at ``txid`` go (each key's run ends <= txid)."""
        _, items = self.meta.range("j/", keys_only=False)
        gone = [rel for rel, value in items if _LAST.unpack_from(value)[0] <= txid]
        for start in range(0, len(gone), self.max_ops):
            part = gone[start:start + self.max_ops]
            self.meta.txn({}, [(rel, "") for rel in part], epoch=self.epoch)

    def record_cluster(self, cluster_id: str) -> None:
        pass   # the Format record on etcd is what every NameNode reads

    def close(self) -> None:
        pass   # the EtcdMeta is its owner's (ha/roles.py)


def upgrade_schema5(meta: EtcdMeta, superuser: str = "hedgefs") -> bool:
    """Convert a schema-5 prefix (its rows as ``t/<table>/...`` keys) into an image at txid 1, by
    whichever NameNode gets there first: the image's chunks under a prefix of its own, then one
    Txn that publishes it only if no ``format`` key exists yet, and deletes the rows. False if
    another NameNode converted it first (its chunks then go)."""
    from hedgefs.namenode.journal import upgrade

    _, items = meta.range("t/")
    rows: dict[str, list[dict]] = {}
    for rel, value in items:
        table = rel.split("/")[1]
        rows.setdefault(table, []).append(json.loads(value))
    _, seq = meta.range("seq/")
    rows["sqlite_sequence"] = [{"name": rel[4:], "seq": int(value)} for rel, value in seq]
    chunks = upgrade.from_rows(rows, superuser)
    prefix = f"img/{1:016x}-{uuid.uuid4().hex[:8]}"
    for n, chunk in enumerate(chunks):
        meta.txn({f"{prefix}/{n:06x}": chunk})
    pointer = json.dumps({"txid": 1, "prefix": prefix, "chunks": len(chunks)}).encode()
    won = meta.txn({"format": FORMAT, "image": pointer}, [("t/", "t0"), ("seq/", "seq0")], absent="format")
    if won is None:
        meta.txn({}, [(prefix + "/", prefix + "0")])
        return False
    log.warning("etcd %s: converted from the schema-5 format (%d keys of rows) to a checkpoint image",
                meta.url, len(items))
    return True
