"""Buckets and objects on a hedgefs FileSystem: names, object metadata and S3-ordered listings.

    bucket          /BUCKET                      a top-level directory
    object KEY      /BUCKET/KEY                  a file; the '/' of a key are directories
    KEY ending '/'  /BUCKET/KEY                  a directory (a "folder" marker: 0 bytes)
    its metadata    xattr user.s3 of the file    JSON: ETag, Content-Type, x-amz-meta-*, checksum,
                                                  parts, upload id, length
    its tags        xattr user.s3.tags           JSON: [[key, value], ...]

The gateway's directories (.hedgefs-s3 and its uploads/) are made mode 1777, as /tmp: every
user who may write the bucket may keep uploads there, and none may remove another's.

An object is written aside (uploads/put-UUID), its user.s3 set on that file, and then renamed
over the key in one concat (``write_object``): the metadata is the inode's, so it appears with
the bytes it describes, in the same NameNode change, and goes with them. A file with no user.s3
(written by `hedgefs put`, the mount, ...) has Content-Type binary/octet-stream and an ETag made
from its version, ``"<md5 of length:mtime>-1"`` (the ``-N`` form says it is no MD5 of the
bytes, as a multipart ETag does).

Every method is a blocking call (the gateway runs them on worker threads) and raises S3Error.
"""

from __future__ import annotations

import collections
import dataclasses
import hashlib
import json
import logging
import re
import threading
import uuid
from typing import TYPE_CHECKING, Callable, Iterator

from hedgefs.client.errors import AlreadyExists, HedgefsError, NotFound
from hedgefs.client.fs import MAX_XATTR_SIZE, FileStatus, FileSystem
from hedgefs.s3.errors import S3Error, from_hedgefs

if TYPE_CHECKING:
    from hedgefs.client.file_reader import FileReader

RESERVED = ".hedgefs-s3"
EMPTY_MD5 = hashlib.md5(b"").hexdigest()
DEFAULT_TYPE = "binary/octet-stream"
_BUCKET = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")
MAX_KEY = 1024
MAX_COMPONENT = 255
READERS_CACHED = 256    # open readers kept per user, by path (each its file's unit locations)

XATTR = "user.s3"             # an object's metadata (JSON), set before it becomes the key's
XATTR_TAGS = "user.s3.tags"   # its tags (JSON), changed in place by PutObjectTagging

log = logging.getLogger("hedgefs.s3")


@dataclasses.dataclass(frozen=True)
class ObjectInfo:
    key: str
    size: int
    mtime_ms: int
    etag: str                       # with its quotes, as S3 sends it
    content_type: str = DEFAULT_TYPE
    meta: dict = dataclasses.field(default_factory=dict)   # x-amz-meta-NAME -> value (NAME lower-case)
    path: str = ""
    # x-amz-checksum-*: {"algorithm": "CRC32", "value": base64, "type": "FULL_OBJECT" or "COMPOSITE"}
    checksum: dict | None = None
    parts: tuple = ()               # a multipart object's parts: (length, checksum base64 or "")
    tags: tuple = ()                # (key, value) pairs


def check_bucket(bucket: str) -> str:
    if not _BUCKET.match(bucket) or ".." in bucket:
        raise S3Error("InvalidBucketName", f"bad bucket name {bucket!r}: 3-63 of a-z, 0-9, '.', '-'", bucket)
    return bucket


def check_key(bucket: str, key: str) -> str:
    """A key the namespace can hold: no empty, '.' or '..' component (but a trailing '/'), none
    over 255 bytes, not the gateway's own directory."""
    resource = f"/{bucket}/{key}"
    if not key:
        raise S3Error("InvalidArgument", "an empty key", resource)
    if len(key.encode("utf-8", "surrogatepass")) > MAX_KEY:
        raise S3Error("KeyTooLongError", "a key is at most 1024 bytes", resource)
    parts = key[:-1].split("/") if key.endswith("/") else key.split("/")
    for part in parts:
        if part in ("", ".", ".."):
            raise S3Error("InvalidArgument", f"key {key!r}: empty, '.' and '..' components have no file here", resource)
        if len(part.encode("utf-8", "surrogatepass")) > MAX_COMPONENT:
            raise S3Error("KeyTooLongError", "a key's components ('/'-separated) are at most 255 bytes", resource)
        if "\0" in part:
            raise S3Error("InvalidArgument", "a key with a NUL byte", resource)
    if parts[0] == RESERVED:
        raise S3Error("InvalidArgument", f"keys under {RESERVED}/ are the gateway's own", resource)
    return key


def object_path(bucket: str, key: str) -> str:
    return f"/{bucket}/{key.rstrip('/')}"


def same_version(status: FileStatus, fresh: FileStatus) -> bool:
    """Is ``fresh`` (the NameNode's answer now) the file ``status`` describes? A file's bytes never
    change in place: another version has other block groups (and a later mtime). A ranged
    answer (``fresh.ranged``) holds only the groups of a span: those are compared, at their
    place (``first_group``); the same length and block size make the same number of groups."""
    if fresh.is_dir or fresh.length != status.length or fresh.mtime_ms != status.mtime_ms \
            or fresh.policy != status.policy or fresh.block_size != status.block_size:
        return False
    mine = status.groups[fresh.first_group:fresh.first_group + len(fresh.groups)] if fresh.ranged else status.groups
    return len(fresh.groups) == len(mine) and all(g.id == c.id and g.generation == c.generation
                                                 for g, c in zip(fresh.groups, mine))


def labels(etag: str, content_type: str | None, meta: dict, extra: dict | None = None) -> dict[str, bytes]:
    """The extended attributes that describe an object (set on its file before it is the key's).
    A multipart object's part list is dropped if it would not fit one attribute (thousands of
    parts): its partNumber GETs then answer with the whole object, as for a single-part one."""
    extra = dict(extra or {})
    tags = extra.pop("tags", None)
    record = {"etag": etag, "content_type": content_type, "meta": meta, **extra}
    body = json.dumps(record).encode()
    if len(body) + len(XATTR) > MAX_XATTR_SIZE and "parts" in record:
        log.warning("s3: %d parts do not fit the object's metadata: not kept", len(record["parts"]))
        record.pop("parts")
        body = json.dumps(record).encode()
    if len(body) + len(XATTR) > MAX_XATTR_SIZE:
        raise S3Error("MetadataTooLarge", f"the object's metadata is {len(body)} bytes, at most {MAX_XATTR_SIZE}")
    out = {XATTR: body}
    if tags:
        out[XATTR_TAGS] = json.dumps([list(t) for t in tags]).encode()
    return out


def record_of(status: FileStatus) -> dict | None:
    """The metadata the version ``status`` names keeps (its xattrs, read with it: ``stat`` or
    ``iter_list`` with ``xattrs=True``), tags included; None if it keeps none (or it is unreadable)."""
    xattrs = status.xattrs or {}
    try:
        record = json.loads(xattrs[XATTR]) if XATTR in xattrs else None
        if record is not None and XATTR_TAGS in xattrs:
            record["tags"] = json.loads(xattrs[XATTR_TAGS])
    except ValueError:
        return None
    return record if isinstance(record, dict) else None


def version_etag(status: FileStatus) -> str:
    if status.length == 0 or status.is_dir:
        return f'"{EMPTY_MD5}"'
    return '"' + hashlib.md5(f"{status.length}:{status.mtime_ms}".encode()).hexdigest() + '-1"'


class Store:
    def __init__(self, fs: FileSystem, meta_policy: str | None = None):
        self.fs = fs
        self.meta_policy = meta_policy   # of the small files kept: bucket settings, upload records
        self._reserved: set[str] = set()   # buckets whose .hedgefs-s3 is known to be there
        self._readers: collections.OrderedDict[str, FileReader] = collections.OrderedDict()
        self._lock = threading.Lock()

    # ------------------------------------------------------------------ buckets

    def list_buckets(self) -> list[FileStatus]:
        try:
            return [s for s in self.fs.iter_list("/") if s.is_dir and _BUCKET.match(s.path[1:])]
        except HedgefsError as err:
            raise from_hedgefs(err, "/") from None

    def bucket(self, bucket: str) -> FileStatus:
        check_bucket(bucket)
        try:
            status = self.fs.stat(f"/{bucket}")
        except HedgefsError as err:
            raise from_hedgefs(err, f"/{bucket}", "NoSuchBucket") from None
        if not status.is_dir:
            raise S3Error("NoSuchBucket", f"/{bucket} is a file, not a bucket", bucket)
        return status

    def create_bucket(self, bucket: str) -> None:
        check_bucket(bucket)
        try:
            self.fs.mkdir(f"/{bucket}")
        except HedgefsError as err:
            if isinstance(err, AlreadyExists):
                raise S3Error("BucketAlreadyOwnedByYou", f"bucket {bucket} exists", bucket) from None
            raise from_hedgefs(err, bucket) from None

    def delete_bucket(self, bucket: str) -> None:
        self.bucket(bucket)
        try:
            for entry in self.fs.iter_list(f"/{bucket}"):
                if entry.path.rsplit("/", 1)[1] != RESERVED:
                    raise S3Error("BucketNotEmpty", "The bucket you tried to delete is not empty", bucket)
            self.fs.delete(f"/{bucket}", recursive=True)
            self._reserved.discard(bucket)
        except HedgefsError as err:
            raise from_hedgefs(err, bucket, "NoSuchBucket") from None

    # ------------------------------------------------------------------ objects

    def stat_object(self, bucket: str, key: str) -> FileStatus:
        check_key(bucket, key)
        path = object_path(bucket, key)
        try:
            status = self.fs.stat(path, xattrs=True)
        except NotFound:
            self.bucket(bucket)
            raise S3Error("NoSuchKey", "The specified key does not exist.", f"/{bucket}/{key}") from None
        except HedgefsError as err:
            raise from_hedgefs(err, f"/{bucket}/{key}") from None
        if status.is_dir != key.endswith("/"):
            raise S3Error("NoSuchKey", "The specified key does not exist.", f"/{bucket}/{key}")
        return status

    def head(self, bucket: str, key: str) -> ObjectInfo:
        return self.info(bucket, key, self.stat_object(bucket, key))

    def info(self, bucket: str, key: str, status: FileStatus) -> ObjectInfo:
        """The object's metadata: what the version ``status`` names keeps (``record_of``: every
        status here is read with its xattrs). A gateway never serves another version's metadata."""
        return self._described(key, status, None if status.is_dir else record_of(status))

    def infos(self, bucket: str, entries: list[tuple[str, FileStatus]]) -> list[ObjectInfo]:
        """``info`` of many objects at once (a listing page, its statuses read with their xattrs)."""
        return [self.info(bucket, key, status) for key, status in entries]

    @staticmethod
    def _described(key: str, status: FileStatus, record: dict | None) -> ObjectInfo:
        base = ObjectInfo(key, 0 if status.is_dir else status.length, status.mtime_ms, version_etag(status),
                          path=status.path)
        if record is None:
            return base
        return dataclasses.replace(base, etag=record["etag"], content_type=record.get("content_type") or DEFAULT_TYPE,
                                   meta=record.get("meta") or {}, checksum=record.get("checksum"),
                                   parts=tuple(tuple(p) for p in record.get("parts") or ()),
                                   tags=tuple(tuple(t) for t in record.get("tags") or ()))

    def open_object(self, bucket: str, key: str, span: tuple[int, int] | None = None,
                    check: "Callable[[ObjectInfo], None] | None" = None, read: bool = True):
        """(ObjectInfo, an open FileReader, or None for a folder marker or when not ``read``: a
        HEAD). ``check`` (the request's preconditions) is run on the info before a reader is
        opened, so a HEAD or a refused precondition never waits on a reader's locations.

        Every call asks the NameNode for the file as it is now; an open reader of that same
        version (the same block groups, length and mtime: a replaced file has new groups and a
        later mtime) is kept and used again, so a small ranged GET does not rebuild the file's
        unit locations nor a reader (and ``cached_reader`` may start reading with it before the
        answer is in: see objects.get_object). ``span`` [start, end): the bytes such a GET
        reads with the kept reader: the NameNode is asked for only the groups holding them
        (HDFS's getBlockLocations(offset, length)), and for all of the file only when those
        show another version."""
        check_key(bucket, key)
        if key.endswith("/"):
            info = self.head(bucket, key)
            if check is not None:
                check(info)
            return info, None
        path = object_path(bucket, key)
        reader = self.cached_reader(path)
        ranged = span is not None and reader is not None
        fresh = self._stat_file(bucket, key, span if ranged else None)
        if ranged and not same_version(reader.status, fresh):
            fresh = self._stat_file(bucket, key)   # another version: all of its groups
        info = self.info(bucket, key, fresh)   # fresh: this version's xattrs as they are now
        if check is not None:
            check(info)
        if not read:
            return info, None
        if reader is None or not same_version(reader.status, fresh):
            reader = self.fs.open(fresh)   # the version just asked for: no second NameNode call
            with self._lock:
                self._readers[path] = reader
                while len(self._readers) > READERS_CACHED:
                    self._readers.popitem(last=False)
        return info, reader

    def _stat_file(self, bucket: str, key: str, span: tuple[int, int] | None = None) -> FileStatus:
        try:
            fresh = self.fs.stat(object_path(bucket, key), span=span, xattrs=True)
        except NotFound:
            self.bucket(bucket)
            raise S3Error("NoSuchKey", "The specified key does not exist.", f"/{bucket}/{key}") from None
        except HedgefsError as err:
            raise from_hedgefs(err, f"/{bucket}/{key}") from None
        if fresh.is_dir:
            self.bucket(bucket)
            raise S3Error("NoSuchKey", "The specified key does not exist.", f"/{bucket}/{key}")
        return fresh

    def cached_reader(self, path: str) -> FileReader | None:
        """The reader ``open_object`` last opened at ``path``, if any: of a version that may
        have been replaced since (its bytes are served only once open_object confirms it)."""
        with self._lock:
            reader = self._readers.get(path)
            if reader is not None:
                self._readers.move_to_end(path)
            return reader

    def _current_record(self, bucket: str, key: str) -> tuple[FileStatus, dict]:
        """The object's file and its metadata as it is now (read afresh: not the cache)."""
        status = self.stat_object(bucket, key)   # with its xattrs
        if status.is_dir:
            raise S3Error("InvalidRequest", "a folder marker (a key ending in '/') keeps no tags here")
        return status, record_of(status) or {"etag": version_etag(status), "content_type": None, "meta": {}}

    def object_tags(self, bucket: str, key: str) -> list[tuple[str, str]]:
        _status, record = self._current_record(bucket, key)
        return [tuple(t) for t in record.get("tags") or ()]

    def set_object_tags(self, bucket: str, key: str, tags: list[tuple[str, str]]) -> None:
        """Replace the object's tags (its bytes, ETag and version stay: S3 keeps them apart): one
        xattr of the file."""
        status = self.stat_object(bucket, key)
        if status.is_dir:
            raise S3Error("InvalidRequest", "a folder marker (a key ending in '/') keeps no tags here")
        try:
            if tags:
                self.fs.set_xattr(status.path, XATTR_TAGS, json.dumps([list(t) for t in tags]).encode())
            else:
                try:
                    self.fs.remove_xattr(status.path, XATTR_TAGS)
                except NotFound:
                    pass
        except HedgefsError as err:
            raise from_hedgefs(err, f"/{bucket}/{key}") from None

    def reserve(self, bucket: str, again: bool = False) -> None:
        """Make the bucket's .hedgefs-s3 and uploads/ (mode 1777) unless known to be there
        (``again``: known, but found missing)."""
        if bucket in self._reserved and not again:
            return
        for directory in (f"/{bucket}/{RESERVED}", f"/{bucket}/{RESERVED}/uploads"):
            try:
                self.fs.mkdir(directory)
            except HedgefsError as err:
                if isinstance(err, AlreadyExists):
                    continue
                raise from_hedgefs(err, f"/{bucket}", "NoSuchBucket") from None
            try:
                self.fs.set_permission(directory, 0o1777)
            except HedgefsError as err:
                log.warning("s3: could not open %s to the bucket's other writers: %s", directory, err)
        self._reserved.add(bucket)

    def prepare(self, bucket: str, key: str) -> str:
        """The path a new object is written to, its directories made. A key at the top of a
        bucket this gateway has written to costs no call: the write aside finds a bucket gone
        (write_object: NoSuchBucket)."""
        check_key(bucket, key)
        path = object_path(bucket, key)
        parent = path.rsplit("/", 1)[0]
        if parent == f"/{bucket}" and bucket in self._reserved:
            return path
        self.bucket(bucket)
        if parent != f"/{bucket}":
            try:
                self.fs.mkdir(parent, parents=True)
            except HedgefsError as err:
                raise from_hedgefs(err, f"/{bucket}/{key}") from None
        return path

    def write_object(self, bucket: str, path: str, write: Callable[[str], object], overwrite: bool = True,
                     describe: Callable[[], dict[str, bytes]] | None = None) -> None:
        """Write an object's bytes: ``write(aside)`` writes a file of its own among the bucket's
        uploads; ``describe()`` (once the bytes are written: an ETag is their MD5) gives the
        xattrs set on it (``labels``); then it replaces the object in one concat of that one file
        (a rename over it; ``overwrite`` False: only if there is none, AlreadyExists else). So two
        PUTs of one key both succeed and the last to complete wins, as S3 has it (the NameNode
        lets one writer write a path at a time, HDFS's lease), readers see the old object or the
        new one, whole, and each with its own metadata. Raises what ``write`` or the NameNode
        raise; the aside file then goes, and the old object stays as it was."""
        aside = f"/{bucket}/{RESERVED}/uploads/put-{uuid.uuid4().hex}"
        self.reserve(bucket)
        try:
            try:
                write(aside)
            except NotFound:
                # no uploads directory, refused at Create (before a byte was read): the bucket was
                # deleted and made again through another gateway since this one made it
                self.reserve(bucket, again=True)
                write(aside)
            self.label(aside, describe() if describe is not None else {})
            self.fs.concat(path, [aside], overwrite=overwrite)
        except BaseException:
            try:
                self.fs.delete(aside)
            except HedgefsError:
                pass   # never created (an abandoned write leaves nothing), or already the object
            raise

    def label(self, path: str, xattrs: dict[str, bytes]) -> None:
        """Set an object's xattrs on its file before it becomes the key's (concat keeps them)."""
        for name, value in xattrs.items():
            self.fs.set_xattr(path, name, value)

    def make_marker(self, bucket: str, key: str) -> ObjectInfo:
        """PUT of a key ending in '/' with no bytes: a directory."""
        path = self.prepare(bucket, key)
        try:
            self.fs.mkdir(path, parents=True)
        except HedgefsError as err:
            if not isinstance(err, AlreadyExists):
                raise from_hedgefs(err, f"/{bucket}/{key}") from None
        return self.head(bucket, key)

    def delete_object(self, bucket: str, key: str) -> None:
        """As S3: deleting a key that is not there succeeds. Directories left empty go too."""
        check_key(bucket, key)
        self.bucket(bucket)
        path = object_path(bucket, key)
        try:
            status = self.fs.stat(path)
            if status.is_dir == key.endswith("/"):
                self.fs.delete(path)
        except NotFound:
            pass
        except HedgefsError as err:
            raise from_hedgefs(err, f"/{bucket}/{key}") from None
        self._prune(path.rsplit("/", 1)[0], f"/{bucket}")

    def _prune(self, directory: str, stop: str) -> None:
        while directory != stop and directory.startswith(stop + "/"):
            try:
                if next(self.fs.iter_list(directory), None) is not None:
                    return
                self.fs.delete(directory)
            except HedgefsError:
                return
            directory = directory.rsplit("/", 1)[0]

    # ------------------------------------------------------------------ listing

    def walk(self, bucket: str, prefix: str, marker: str, delimiter: str) -> Iterator[tuple[str, FileStatus | None]]:
        """(key, status) of the objects and (common prefix, None) after ``marker`` under ``prefix``,
        in S3's order (UTF-8 bytes of the whole key), reading one directory listing at a time and
        never entering a directory the delimiter rolls up or the marker has passed. A common
        prefix equal to the marker is the one a page ended with: done."""
        self.bucket(bucket)
        start = prefix.rsplit("/", 1)[0] + "/" if "/" in prefix else ""
        if any(part in ("", ".", "..") for part in start.split("/")[:-1]):
            return   # no key has an empty, '.' or '..' component (check_key): nothing has this prefix
        seen_prefix = None
        for key, status in self._walk_dir(f"/{bucket}/{start}".rstrip("/"), start, prefix, marker, delimiter):
            if status is None:
                if key == seen_prefix or key == marker:
                    continue
                seen_prefix = key
            yield key, status

    def _walk_dir(self, directory: str, key_prefix: str, prefix: str, marker: str,
                  delimiter: str) -> Iterator[tuple[str, FileStatus | None]]:
        try:
            entries = list(self.fs.iter_list(directory, xattrs=True))   # each object's metadata with it
        except NotFound:
            return
        except HedgefsError as err:
            raise from_hedgefs(err, directory) from None
        named = sorted((key_prefix + e.path.rsplit("/", 1)[1] + ("/" if e.is_dir else ""), e) for e in entries)
        for key, status in named:
            if not key_prefix and key == RESERVED + "/":
                continue
            if status.is_dir:
                if not (key.startswith(prefix) or prefix.startswith(key)):
                    continue
                if key <= marker and not marker.startswith(key):
                    continue   # the whole directory sorts before the marker
                if delimiter and key.startswith(prefix) and delimiter in key[len(prefix):]:
                    rest = key[len(prefix):]
                    yield prefix + rest[:rest.index(delimiter) + len(delimiter)], None
                    continue
                inner = self._walk_dir(status.path, key, prefix, marker, delimiter)
                first = next(inner, None)
                if first is None:
                    if key > marker and key.startswith(prefix) and next(self.fs.iter_list(status.path), None) is None:
                        yield key, status      # an empty directory: a "folder" object
                    continue
                yield first
                yield from inner
            elif key > marker and key.startswith(prefix):
                if delimiter and delimiter in key[len(prefix):]:
                    rest = key[len(prefix):]
                    yield prefix + rest[:rest.index(delimiter) + len(delimiter)], None
                else:
                    yield key, status
