"""The listing handlers: ListBuckets, ListObjects (v1 and v2), ListMultipartUploads, ListParts.

ListObjects walks the bucket's directories in S3's key order (store.Store.walk), one directory
listing at a time, and stops after max-keys: a page costs the directories it touches, not the
bucket. A continuation token is the last key (or common prefix) of the page before, base64.
"""

from __future__ import annotations

import base64
import binascii
import itertools
import urllib.parse

from aiohttp import web

from hedgefs.s3 import checksums, xmlout
from hedgefs.s3.acl import owner_xml
from hedgefs.s3.errors import S3Error
from hedgefs.s3.multipart import upload_dir
from hedgefs.s3.store import check_bucket



def _owner(ctx) -> str:
    """The bucket's owner (of every object in it: S3's "bucket owner enforced"), blocking."""
    return ctx.store.bucket(ctx.bucket).owner or "hedgefs"


def _xml(root: str, body: str) -> web.Response:
    return web.Response(body=xmlout.document(root, body), content_type="application/xml")


def _int(query, name: str, default: int, high: int) -> int:
    try:
        value = int(query.get(name, default))
    except ValueError:
        raise S3Error("InvalidArgument", f"{name} must be an integer") from None
    if value < 0:
        raise S3Error("InvalidArgument", f"{name} must be >= 0")
    return min(value, high)


async def list_buckets(ctx) -> web.Response:
    """ListBuckets, in pages when asked (max-buckets, continuation-token, prefix)."""
    q = ctx.request.query
    prefix = q.get("prefix", "")
    paged = "max-buckets" in q
    max_buckets = _int(q, "max-buckets", 10000, 10000)
    after = ""
    if q.get("continuation-token"):
        try:
            after = base64.urlsafe_b64decode(q["continuation-token"].encode()).decode()
        except (binascii.Error, ValueError, UnicodeDecodeError):
            raise S3Error("InvalidArgument", "The continuation token provided is incorrect") from None
    buckets = sorted((b for b in await ctx.run(ctx.store.list_buckets)
                      if b.path[1:].startswith(prefix) and b.path[1:] > after), key=lambda b: b.path)
    page, truncated = buckets[:max_buckets], len(buckets) > max_buckets
    body = "".join("<Bucket>" + xmlout.element("Name", b.path[1:])
                   + xmlout.element("CreationDate", xmlout.iso(b.mtime_ms))
                   + "</Bucket>" for b in page)
    owner = owner_xml(ctx.user or "hedgefs")
    tail = ""
    if paged and truncated:
        tail = xmlout.element("ContinuationToken", base64.urlsafe_b64encode(page[-1].path[1:].encode()).decode())
    if prefix:
        tail += xmlout.element("Prefix", prefix)
    return _xml("ListAllMyBucketsResult", owner + f"<Buckets>{body}</Buckets>" + tail)


async def list_objects(ctx) -> web.Response:
    q = ctx.request.query
    check_bucket(ctx.bucket)
    v2 = q.get("list-type") == "2"
    prefix, delimiter = q.get("prefix", ""), q.get("delimiter", "")
    max_keys = _int(q, "max-keys", 1000, 1000)
    url = q.get("encoding-type") == "url"
    if "encoding-type" in q and not url:
        raise S3Error("InvalidArgument", "Invalid Encoding Method specified in Request")
    token = q.get("continuation-token")
    if v2 and token is not None:
        try:
            marker = base64.urlsafe_b64decode(token.encode()).decode()
        except (binascii.Error, ValueError, UnicodeDecodeError):
            raise S3Error("InvalidArgument", "The continuation token provided is incorrect") from None
    else:
        marker = q.get("start-after", "") if v2 else q.get("marker", "")

    def page():
        walk = ctx.store.walk(ctx.bucket, prefix, marker, delimiter)
        items = list(itertools.islice(walk, max_keys + 1))
        truncated = len(items) > max_keys
        items = items[:max_keys]
        files = [(k, s) for k, s in items if s is not None]
        infos = {i.key: i for i in ctx.store.infos(ctx.bucket, files)}
        return items, infos, truncated, _owner(ctx)

    items, infos, truncated, bucket_owner = await ctx.run(page) if max_keys else ([], {}, False, "")

    def enc(text: str) -> str:
        return urllib.parse.quote(text, safe="/") if url else text

    # v1 answers its Prefix as given (SDKs decode only v2's), the rest of both encoded if asked
    parts = [xmlout.element("Name", ctx.bucket), xmlout.element("Prefix", enc(prefix) if v2 else prefix)]
    if v2:
        if token is not None:
            parts.append(xmlout.element("ContinuationToken", token))
        if "start-after" in q:
            parts.append(xmlout.element("StartAfter", enc(q["start-after"])))
        parts.append(xmlout.element("KeyCount", len(items)))
    else:
        parts.append(xmlout.element("Marker", enc(marker)))
    parts.append(xmlout.element("MaxKeys", max_keys))
    if delimiter:
        parts.append(xmlout.element("Delimiter", enc(delimiter)))
    if url:
        parts.append(xmlout.element("EncodingType", "url"))
    parts.append(xmlout.element("IsTruncated", truncated))
    if truncated and items:
        last = items[-1][0]
        if v2:
            parts.append(xmlout.element("NextContinuationToken", base64.urlsafe_b64encode(last.encode()).decode()))
        elif delimiter:
            parts.append(xmlout.element("NextMarker", enc(last)))
    owner = not v2 or q.get("fetch-owner") == "true"
    for key, status in items:
        if status is None:
            parts.append("<CommonPrefixes>" + xmlout.element("Prefix", enc(key)) + "</CommonPrefixes>")
            continue
        info = infos[key]
        parts.append("<Contents>" + xmlout.element("Key", enc(key))
                     + xmlout.element("LastModified", xmlout.iso(info.mtime_ms))
                     + xmlout.element("ETag", info.etag) + xmlout.element("Size", info.size)
                     + (owner_xml(bucket_owner) if owner else "") + xmlout.element("StorageClass", "STANDARD")
                     + "</Contents>")
    return _xml("ListBucketResult", "".join(parts))


def uploads_page(uploads: list[tuple[str, dict]], prefix: str, delimiter: str, key_marker: str,
                 upload_id_marker: str, max_uploads: int) -> tuple[list[tuple[str, str, dict | None]], bool]:
    """One page of ListMultipartUploads from all uploads in S3's order (key, then initiation):
    ((key or common prefix, upload id, record; None for a prefix), truncated). After
    ``key_marker``: its later keys; with ``upload_id_marker`` also the uploads of key_marker
    itself listed after that one (S3 ignores upload-id-marker without key-marker)."""
    items: list[tuple[str, str, dict | None]] = []
    passed_marker = not upload_id_marker
    for upload_id, record in uploads:
        key = record["key"]
        if not key.startswith(prefix):
            continue
        if key_marker:
            if key < key_marker:
                continue
            if key == key_marker:
                if not passed_marker:
                    passed_marker = upload_id == upload_id_marker
                    continue
                if not upload_id_marker:
                    continue
        if delimiter and delimiter in key[len(prefix):]:
            rest = key[len(prefix):]
            common = prefix + rest[:rest.index(delimiter) + len(delimiter)]
            if (items and items[-1][0] == common) or (key_marker and common <= key_marker):
                continue
            items.append((common, "", None))
        else:
            items.append((key, upload_id, record))
        if len(items) > max_uploads:
            return items[:max_uploads], True
    return items, False


async def list_uploads(ctx) -> web.Response:
    q = ctx.request.query
    prefix, delimiter = q.get("prefix", ""), q.get("delimiter", "")
    key_marker = q.get("key-marker", "")
    upload_id_marker = q.get("upload-id-marker", "") if key_marker else ""
    max_uploads = _int(q, "max-uploads", 1000, 1000)
    url = q.get("encoding-type") == "url"
    if "encoding-type" in q and not url:
        raise S3Error("InvalidArgument", "Invalid Encoding Method specified in Request")

    def enc(text: str) -> str:
        return urllib.parse.quote(text, safe="/") if url else text

    uploads = await ctx.run(ctx.session.uploads.list, ctx.bucket)
    owner = owner_xml(await ctx.run(_owner, ctx))
    items, truncated = uploads_page(uploads, prefix, delimiter, key_marker, upload_id_marker, max_uploads)
    body = [xmlout.element("Bucket", ctx.bucket), xmlout.element("KeyMarker", enc(key_marker)),
            xmlout.element("UploadIdMarker", upload_id_marker), xmlout.element("Prefix", enc(prefix))]
    if delimiter:
        body.append(xmlout.element("Delimiter", enc(delimiter)))
    if truncated and items:
        body += [xmlout.element("NextKeyMarker", enc(items[-1][0])), xmlout.element("NextUploadIdMarker", items[-1][1])]
    body += [xmlout.element("MaxUploads", max_uploads), xmlout.element("IsTruncated", truncated)]
    if url:
        body.append(xmlout.element("EncodingType", "url"))
    for key, upload_id, record in items:
        if record is None:
            body.append("<CommonPrefixes>" + xmlout.element("Prefix", enc(key)) + "</CommonPrefixes>")
            continue
        who = owner_xml(record["initiator"]) if record.get("initiator") else owner
        body.append("<Upload>" + xmlout.element("Key", enc(key)) + xmlout.element("UploadId", upload_id)
                    + who.replace("Owner>", "Initiator>") + who + xmlout.element("StorageClass", "STANDARD")
                    + xmlout.element("Initiated", xmlout.iso(record["initiated_ms"])) + "</Upload>")
    return _xml("ListMultipartUploadsResult", "".join(body))


async def list_parts(ctx) -> web.Response:
    q = ctx.request.query
    upload_id = q["uploadId"]
    upload_dir(ctx.bucket, upload_id)
    marker = _int(q, "part-number-marker", 0, 10000)
    max_parts = _int(q, "max-parts", 1000, 1000)

    def parts():
        return ctx.session.uploads.upload(ctx.bucket, upload_id, ctx.key), ctx.session.uploads.parts(ctx.bucket,
                                                                                                      upload_id)

    record, have = await ctx.run(parts)
    owner = owner_xml(await ctx.run(_owner, ctx))
    have = [(n, p) for n, p in have.items() if n > marker]
    page, truncated = have[:max_parts], len(have) > max_parts
    body = [xmlout.element("Bucket", ctx.bucket), xmlout.element("Key", ctx.key), xmlout.element("UploadId", upload_id),
            owner.replace("Owner>", "Initiator>"), owner, xmlout.element("StorageClass", "STANDARD"),
            xmlout.element("PartNumberMarker", marker), xmlout.element("MaxParts", max_parts),
            xmlout.element("IsTruncated", truncated)]
    if page:
        body.append(xmlout.element("NextPartNumberMarker", page[-1][0]))
    for number, part in page:
        body.append("<Part>" + xmlout.element("PartNumber", number)
                    + xmlout.element("LastModified", xmlout.iso(part.status.mtime_ms))
                    + xmlout.element("ETag", f'"{part.md5}"') + xmlout.element("Size", part.status.length)
                    + (xmlout.element(checksums.element(record["checksum_algorithm"]), checksums.encode(part.checksum))
                       if part.checksum and record.get("checksum_algorithm") else "")
                    + "</Part>")
    return _xml("ListPartsResult", "".join(body))


async def list_versions(ctx) -> web.Response:
    """ListObjectVersions of an unversioned bucket, as S3 answers it: one version per key, "null"."""
    q = ctx.request.query
    check_bucket(ctx.bucket)
    prefix, delimiter, marker = q.get("prefix", ""), q.get("delimiter", ""), q.get("key-marker", "")
    max_keys = _int(q, "max-keys", 1000, 1000)

    def page():
        items = list(itertools.islice(ctx.store.walk(ctx.bucket, prefix, marker, delimiter), max_keys + 1))
        files = [(k, s) for k, s in items[:max_keys] if s is not None]
        return (items[:max_keys], {i.key: i for i in ctx.store.infos(ctx.bucket, files)}, len(items) > max_keys,
                _owner(ctx))

    items, infos, truncated, bucket_owner = await ctx.run(page)
    parts = [xmlout.element("Name", ctx.bucket), xmlout.element("Prefix", prefix), xmlout.element("KeyMarker", marker),
             xmlout.element("VersionIdMarker", ""), xmlout.element("MaxKeys", max_keys),
             xmlout.element("IsTruncated", truncated)]
    if delimiter:
        parts.append(xmlout.element("Delimiter", delimiter))
    if truncated and items:
        parts += [xmlout.element("NextKeyMarker", items[-1][0]), xmlout.element("NextVersionIdMarker", "null")]
    for key, status in items:
        if status is None:
            parts.append("<CommonPrefixes>" + xmlout.element("Prefix", key) + "</CommonPrefixes>")
            continue
        info = infos[key]
        parts.append("<Version>" + xmlout.element("Key", key) + xmlout.element("VersionId", "null")
                     + xmlout.element("IsLatest", True) + xmlout.element("LastModified", xmlout.iso(info.mtime_ms))
                     + xmlout.element("ETag", info.etag) + xmlout.element("Size", info.size) + owner_xml(bucket_owner)
                     + xmlout.element("StorageClass", "STANDARD") + "</Version>")
    return _xml("ListVersionsResult", "".join(parts))


async def versioning(ctx) -> web.Response:
    """GetBucketVersioning: never versioned (what S3 says of a bucket that never was)."""
    await ctx.run(ctx.store.bucket, ctx.bucket)
    return _xml("VersioningConfiguration", "")
