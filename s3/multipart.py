"""Multipart uploads as hedgefs files, joined by the NameNode's concat when their layout allows.

    /BUCKET/.hedgefs-s3/uploads/UPLOAD_ID/upload.json     key, Content-Type, x-amz-meta-*, when,
                                                          the checksum algorithm and type
    /BUCKET/.hedgefs-s3/uploads/UPLOAD_ID/00001.<md5>      part 1 (its name carries its ETag)
    /BUCKET/.hedgefs-s3/uploads/UPLOAD_ID/00001.<md5>.<c>  ... and its checksum (hex), when the
                                                          upload has an algorithm

Nothing of an upload is visible as an object until Complete; Abort (or a Complete) removes the
directory, so an upload abandoned half-way leaves nothing but that directory (ListMultipartUploads
shows it; AbortMultipartUpload removes it).

Concat needs every source but the last to end on a block group boundary (k x block size bytes)
and all sources to share one block size. A part is written with the largest block size (whole
cells, at most the NameNode's default) whose group its length fills exactly, so equal parts get
equal block sizes; at Complete, when every part but the last ends on a group of the first part's
block size, a part written with another block size (the short last one) is rewritten with it and
the parts are concatenated: no byte of the big parts moves. Otherwise the parts are copied into
the object (a stream, never whole in memory); so too on etcd when the parts hold more groups than
one transaction may move (the NameNode refuses that concat before anything changed).
"""

from __future__ import annotations

import hashlib
import json
import re
import secrets
import time
import uuid
from typing import Callable, NamedTuple

from hedgefs.client.errors import AlreadyExists, HedgefsError, NotFound
from hedgefs.client.fs import FileStatus
from hedgefs.ec.policy import parse_policy
from hedgefs.s3 import checksums
from hedgefs.s3.errors import S3Error, from_hedgefs
from hedgefs.s3.store import RESERVED, Store, labels

MIN_PART = 5 << 20          # S3's: every part but the last at least 5 MiB
MAX_PARTS = 10000
ASIDE_KEPT_S = 24 * 3600    # a PutObject's aside file older than this is a dead gateway's leftover
# The NameNode's refusal of a change larger than one etcd transaction (namenode/db.py, TooLarge)
TOO_LARGE = "more than one etcd transaction may hold"
_UPLOAD_ID = re.compile(r"^[0-9a-f]{32}$")
_PART = re.compile(r"^(\d{5})\.([0-9a-f]{32})(?:\.([0-9a-f]{8,64}))?$")


class Part(NamedTuple):
    md5: str                    # hex: the part's ETag
    checksum: bytes | None      # raw, of the upload's checksum algorithm (None: the upload has none)
    status: FileStatus


def uploads_dir(bucket: str) -> str:
    return f"/{bucket}/{RESERVED}/uploads"


def upload_dir(bucket: str, upload_id: str) -> str:
    if not _UPLOAD_ID.match(upload_id or ""):
        raise S3Error("NoSuchUpload", "The specified upload does not exist.", upload_id)
    return f"{uploads_dir(bucket)}/{upload_id}"


def part_block_size(length: int, k: int, cell: int, default: int) -> int:
    """The block size that makes a part of ``length`` bytes end on a block group boundary, if any
    (whole cells, at most ``default``); else ``default``."""
    if length and length % (k * cell) == 0:
        cells = length // (k * cell)
        for n in range(min(cells, max(1, default // cell)), 0, -1):
            if cells % n == 0:
                return n * cell
    return max(cell, default // cell * cell)


class Uploads:
    def __init__(self, store: Store):
        self.store = store
        self.fs = store.fs

    def create(self, bucket: str, key: str, content_type: str | None, meta: dict,
               checksum: tuple[str, str] | None = None, tags: list | None = None, canned: str | None = None,
               initiator: str | None = None) -> str:
        """A new upload; ``checksum``: (algorithm, COMPOSITE or FULL_OBJECT) its parts and object
        carry; ``initiator``: the user of the key that began it (ListMultipartUploads names it)."""
        self.store.prepare(bucket, key)
        upload_id = uuid.uuid4().hex
        directory = upload_dir(bucket, upload_id)
        record = {"key": key, "content_type": content_type, "meta": meta, "initiated_ms": int(time.time() * 1000)}
        if checksum:
            record["checksum_algorithm"], record["checksum_type"] = checksum
        if tags:
            record["tags"] = [list(t) for t in tags]
        if canned:
            record["acl"] = canned
        if initiator:
            record["initiator"] = initiator
        self.store.reserve(bucket)
        try:
            try:
                self.fs.mkdir(directory)
            except NotFound:   # the bucket was made again through another gateway (store.write_object)
                self.store.reserve(bucket, again=True)
                self.fs.mkdir(directory)
            self.fs.write_bytes(f"{directory}/upload.json", json.dumps(record).encode(), policy=self.store.meta_policy)
        except HedgefsError as err:
            raise from_hedgefs(err, f"/{bucket}/{key}") from None
        return upload_id

    def upload(self, bucket: str, upload_id: str, key: str | None = None) -> dict:
        self.store.bucket(bucket)
        try:
            record = json.loads(self.fs.read_bytes(f"{upload_dir(bucket, upload_id)}/upload.json"))
        except (NotFound, ValueError):
            raise S3Error("NoSuchUpload", "The specified upload does not exist.", upload_id) from None
        except HedgefsError as err:
            raise from_hedgefs(err, upload_id, "NoSuchUpload") from None
        if key is not None and record["key"] != key:
            raise S3Error("NoSuchUpload", "The upload is not one of this key.", upload_id)
        return record

    def parts(self, bucket: str, upload_id: str) -> dict[int, Part]:
        """part number -> its Part."""
        out = {}
        try:
            for entry in self.fs.iter_list(upload_dir(bucket, upload_id)):
                match = _PART.match(entry.path.rsplit("/", 1)[1])
                if match:
                    digest = bytes.fromhex(match.group(3)) if match.group(3) else None
                    out[int(match.group(1))] = Part(match.group(2), digest, entry)
        except NotFound:
            raise S3Error("NoSuchUpload", "The specified upload does not exist.", upload_id) from None
        return dict(sorted(out.items()))

    def part(self, bucket: str, upload_id: str, number: int) -> FileStatus:
        have = self.parts(bucket, upload_id)
        if number not in have:
            raise S3Error("NoSuchUpload", "The specified upload does not exist (aborted meanwhile?).", upload_id)
        return have[number].status

    def put_part(self, bucket: str, upload_id: str, number: int, length: int,
                 write: Callable[[str, int, str | None], tuple[str, bytes | None]]) -> tuple[str, bytes | None]:
        """Store part ``number``; ``write(path, block_size, algorithm)`` writes the body there and
        returns its md5 and its checksum of the upload's algorithm (raw; None: the upload has none).
        A part uploaded again replaces the one before. Returns the part's ETag and that checksum."""
        if not 1 <= number <= MAX_PARTS:
            raise S3Error("InvalidArgument", "Part number must be an integer between 1 and 10000, inclusive")
        directory = upload_dir(bucket, upload_id)
        record = self.upload(bucket, upload_id)
        policy = self.fs.get_policy(directory)
        spec = parse_policy(policy.policy)
        block_size = part_block_size(length, spec.k, spec.cell_size, policy.default_block_size)
        temp = f"{directory}/{number:05d}.tmp-{secrets.token_hex(4)}"
        md5, digest = write(temp, block_size, record.get("checksum_algorithm"))
        name = f"{directory}/{number:05d}.{md5}" + (f".{digest.hex()}" if digest else "")
        try:
            old = [part for n, part in self.parts(bucket, upload_id).items() if n == number]
            self.fs.rename(temp, name)
            for part in old:
                if part.status.path != name:
                    self.fs.delete(part.status.path)
        except HedgefsError as err:
            if not isinstance(err, AlreadyExists):   # the same bytes again: the part is there already
                raise from_hedgefs(err, upload_id, "NoSuchUpload") from None
            self.fs.delete(temp)
        return f'"{md5}"', digest

    def abort(self, bucket: str, upload_id: str) -> None:
        self.upload(bucket, upload_id)
        try:
            self.fs.delete(upload_dir(bucket, upload_id), recursive=True)
        except NotFound:
            pass

    def list(self, bucket: str) -> list[tuple[str, dict]]:
        self.store.bucket(bucket)
        out = []
        try:
            entries = list(self.fs.iter_list(uploads_dir(bucket)))
        except NotFound:
            return []
        for entry in entries:
            upload_id = entry.path.rsplit("/", 1)[1]
            if upload_id.startswith("put-"):
                self._sweep(entry)
                continue
            try:
                out.append((upload_id, self.upload(bucket, upload_id)))
            except S3Error:
                continue   # being created or aborted right now
        return sorted(out, key=lambda item: (item[1]["key"], item[1]["initiated_ms"], item[0]))

    def _sweep(self, entry: FileStatus) -> None:
        """A PutObject's file written aside (store.Store.write_object) is swapped in within
        seconds; one a day old was left by a gateway that died before the swap: it goes."""
        if entry.mtime_ms < (time.time() - ASIDE_KEPT_S) * 1000:
            try:
                self.fs.delete(entry.path)
            except HedgefsError:
                pass   # another's (sticky directory), or gone meanwhile

    def complete(self, bucket: str, upload_id: str, key: str, wanted: list[tuple[int, str, str | None]],
                 copy: Callable[[list[FileStatus], str, int], None],
                 expected: tuple[str, str] | None = None) -> tuple[str, str, dict, dict, bool]:
        """Join the parts ``wanted`` ((number, ETag, its checksum as the request names it or None)
        in order) into the object. ``copy(parts, path, block_size)`` streams parts into one new
        file at path (0: the default block size), the object when given its xattrs. ``expected``: (algorithm, base64) of the object's
        checksum as the request states it; a mismatch is BadDigest before anything moves.
        Returns (ETag, Content-Type, meta, what the object's metadata keeps besides, whether
        concat joined them)."""
        record = self.upload(bucket, upload_id, key)
        have = self.parts(bucket, upload_id)
        if not wanted:
            raise S3Error("MalformedXML", "a multipart upload needs at least one part")
        numbers = [n for n, _, _ in wanted]
        if numbers != sorted(set(numbers)):
            raise S3Error("InvalidPartOrder", "The list of parts was not in ascending order.")
        algorithm, kind = record.get("checksum_algorithm"), record.get("checksum_type")
        chosen = []
        for number, etag, sent in wanted:
            if number not in have or have[number].md5 != etag.strip('"').lower():
                raise S3Error("InvalidPart", f"part {number} was not uploaded, or its ETag is not {etag}")
            part = have[number]
            if sent is not None and algorithm and checksums.decode(algorithm, sent) != part.checksum:
                raise S3Error("InvalidPart", f"part {number}'s {checksums.header(algorithm)} is not {sent}")
            chosen.append(part)
        for part in chosen[:-1]:
            if part.status.length < MIN_PART:
                raise S3Error("EntityTooSmall", "Your proposed upload is smaller than the minimum allowed object size.")
        etag = '"' + hashlib.md5(b"".join(bytes.fromhex(p.md5) for p in chosen)).hexdigest() + f'-{len(chosen)}"'
        extra: dict = {"parts": [(p.status.length, checksums.encode(p.checksum) if p.checksum else "") for p in chosen]}
        if algorithm and all(p.checksum for p in chosen):
            value = checksums.of_object(algorithm, kind, [(p.checksum, p.status.length) for p in chosen])
            extra["checksum"] = {"algorithm": algorithm, "value": value, "type": kind}
        if expected is not None:
            if expected[0] != algorithm or "checksum" not in extra or expected[1].strip() != extra["checksum"]["value"]:
                raise S3Error("BadDigest", f"The {checksums.header(expected[0])} you specified did not match the "
                              "calculated checksum.")
        if record.get("tags"):
            extra["tags"] = record["tags"]
        if record.get("acl"):
            extra["acl"] = record["acl"]
        path = self.store.prepare(bucket, key)
        files = [p.status for p in chosen]
        xattrs = labels(etag, record.get("content_type"), record.get("meta") or {},
                        {**{k: v for k, v in extra.items() if k != "acl"}, "upload_id": upload_id})
        concat = self._concat(files, path, copy, xattrs)
        if not concat:
            copy(files, path, 0, xattrs)
        try:
            self.fs.delete(upload_dir(bucket, upload_id), recursive=True)
        except HedgefsError:
            pass
        return etag, record.get("content_type"), record.get("meta") or {}, extra, concat

    def _concat(self, files: list[FileStatus], path: str, copy, xattrs: dict[str, bytes]) -> bool:
        """Join the parts by concat, the object's ``xattrs`` set on the first (which becomes the
        object: they appear with it); False if they cannot be (the caller copies)."""
        first = files[0]
        k = parse_policy(first.policy).k
        group = k * first.block_size
        if any(f.length % group or f.policy != first.policy for f in files[:-1]) or files[-1].policy != first.policy:
            return False
        sources = []
        for f in files:
            if f.block_size != first.block_size or f.length == 0:
                if f.length == 0:
                    continue
                redo = f.path + ".relaid"
                copy([f], redo, first.block_size)
                sources.append(redo)
            else:
                sources.append(f.path)
        try:
            self.store.label(sources[0], xattrs)
            self.fs.concat(path, sources, overwrite=True)
        except HedgefsError as err:
            if TOO_LARGE in str(err):   # on etcd: more groups than one transaction moves; the caller copies
                return False
            raise from_hedgefs(err, path) from None
        return True
