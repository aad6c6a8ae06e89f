"""The multipart upload handlers: Create, UploadPart (and UploadPartCopy), Complete. The parts
themselves, and how Complete joins them, are multipart.Uploads'."""

from __future__ import annotations

import re

from aiohttp import web

from hedgefs.client.errors import HedgefsError
from hedgefs.s3 import acl, checksums, tagging, xmlout
from hedgefs.s3.body import Body, ChunkSource, declared_length, file_source
from hedgefs.s3.errors import S3Error, from_hedgefs
from hedgefs.s3.objects import (
    Context,
    check_write_conditions,
    checksum_headers,
    copy_conditions,
    copy_source,
    user_metadata,
)
from hedgefs.s3.store import DEFAULT_TYPE, ObjectInfo, check_key, object_path, record_of

_COPY_RANGE = re.compile(r"^bytes=(\d+)-(\d+)$")


async def create_upload(ctx: Context) -> web.Response:
    check_key(ctx.bucket, ctx.key)
    content_type, meta = user_metadata(ctx.request)
    h = ctx.request.headers
    checksum, headers = None, {}
    if h.get("x-amz-checksum-algorithm"):
        algorithm = checksums.algorithm_of(h["x-amz-checksum-algorithm"])
        checksum = (algorithm, checksums.valid_type(algorithm, h.get("x-amz-checksum-type")))
        headers = {"x-amz-checksum-algorithm": checksum[0], "x-amz-checksum-type": checksum[1]}
    elif h.get("x-amz-checksum-type"):
        raise S3Error("InvalidRequest", "x-amz-checksum-type needs an x-amz-checksum-algorithm")
    tags = tagging.from_header(h.get("x-amz-tagging"))
    canned = acl.requested(ctx.request)
    upload_id = await ctx.run(ctx.session.uploads.create, ctx.bucket, ctx.key, content_type, meta, checksum, tags,
                              canned, ctx.user)
    body = (xmlout.element("Bucket", ctx.bucket) + xmlout.element("Key", ctx.key)
            + xmlout.element("UploadId", upload_id))
    return web.Response(body=xmlout.document("InitiateMultipartUploadResult", body), content_type="application/xml",
                        headers=headers)


def _part_number(query) -> int:
    try:
        return int(query.get("partNumber", ""))
    except ValueError:
        raise S3Error("InvalidArgument", "Part number must be an integer between 1 and 10000, inclusive") from None


def copy_range(header: str | None, size: int) -> tuple[int, int]:
    """[start, end) of x-amz-copy-source-range (``bytes=FIRST-LAST``, both given, as S3 wants)."""
    if header is None:
        return 0, size
    match = _COPY_RANGE.match(header.strip())
    if not match:
        raise S3Error("InvalidArgument", f"The x-amz-copy-source-range value must be of the form bytes=first-last "
                      f"where first and last are the zero-based offsets of the first and last bytes to copy, "
                      f"not {header!r}")
    first, last = int(match.group(1)), int(match.group(2))
    if first > last or last >= size:
        raise S3Error("InvalidRange", f"The x-amz-copy-source-range {header!r} is not within the source object "
                      f"of size {size}")
    return first, last + 1


async def upload_part_copy(ctx: Context) -> web.Response:
    """UploadPartCopy: a part made of (a range of) another object, streamed gateway-side."""
    number = _part_number(ctx.request.query)
    src_bucket, src_key = copy_source(ctx.request)
    info, reader = await ctx.run(ctx.store.open_object, src_bucket, src_key)
    source = ChunkSource(())
    try:
        copy_conditions(ctx.request, info)
        start, end = copy_range(ctx.request.headers.get("x-amz-copy-source-range"), info.size)
        if reader is not None and end > start:
            source = file_source(reader, start, end)

        def write(path: str, block_size: int, algorithm: str | None) -> tuple[str, bytes | None]:
            source.checksum = checksums.Hasher(algorithm) if algorithm else None
            try:
                ctx.session.fs.write(path, source, overwrite=True, block_size=block_size)
            except HedgefsError as err:
                raise from_hedgefs(err, f"/{ctx.bucket}/{ctx.key}") from None
            return source.md5.hexdigest(), source.checksum.digest() if source.checksum else None

        async with ctx.gateway.writing(end - start):
            etag, _digest = await ctx.run(ctx.session.uploads.put_part, ctx.bucket, ctx.request.query["uploadId"],
                                          number, end - start, write)
    finally:
        source.close()
        if reader is not None:
            reader.close()
    part = await ctx.run(ctx.session.uploads.part, ctx.bucket, ctx.request.query["uploadId"], number)
    body = xmlout.element("LastModified", xmlout.iso(part.mtime_ms)) + xmlout.element("ETag", etag)
    return web.Response(body=xmlout.document("CopyPartResult", body), content_type="application/xml")


async def upload_part(ctx: Context) -> web.Response:
    if "x-amz-copy-source" in ctx.request.headers:
        return await upload_part_copy(ctx)
    query = ctx.request.query
    number = _part_number(query)
    length = declared_length(ctx.request)
    if length is None:
        raise S3Error("MissingContentLength", "You must provide the Content-Length HTTP header.")
    body = Body(ctx.request, ctx.signed)

    def write(path: str, block_size: int, algorithm: str | None) -> tuple[str, bytes | None]:
        # on put_part's worker thread, between its checks and its rename
        if algorithm and body.algorithm not in (None, algorithm):
            raise S3Error("InvalidRequest", f"this upload's parts carry {checksums.header(algorithm)}, "
                          f"not {checksums.header(body.algorithm)}")
        if algorithm:
            body.compute(algorithm)
        try:
            ctx.session.fs.write(path, body, overwrite=True, block_size=block_size)
        except HedgefsError as err:
            raise from_hedgefs(err, f"/{ctx.bucket}/{ctx.key}") from None
        return body.etag().strip('"'), body.checksum[1] if algorithm and body.checksum else None

    try:
        async with ctx.gateway.writing(length):
            etag, digest = await ctx.run(ctx.session.uploads.put_part, ctx.bucket, query["uploadId"], number, length,
                                         write)
    finally:
        body.close()
    headers = {"ETag": etag}
    if body.checksum is not None:
        headers[checksums.header(body.checksum[0])] = checksums.encode(body.checksum[1])
    return web.Response(headers=headers)


async def complete_upload(ctx: Context) -> web.Response:
    tree = xmlout.parse(await ctx.request.read(), "CompleteMultipartUpload")
    wanted = []
    for part in xmlout.children(tree, "Part"):
        try:
            number = int(xmlout.text(part, "PartNumber"))
        except ValueError:
            raise S3Error("MalformedXML", "a Part without a numeric PartNumber") from None
        sent = [xmlout.text(part, checksums.element(a)) for a in checksums.ALGORITHMS
                if xmlout.children(part, checksums.element(a))]
        wanted.append((number, xmlout.text(part, "ETag"), sent[0] if sent else None))
    stated = [(a, v) for name, a in checksums.HEADERS.items() if (v := ctx.request.headers.get(name)) is not None]
    fs = ctx.session.fs

    def copy(files, path, block_size, xattrs=None):
        def chunks():
            for f in files:
                with fs.open(f.path) as reader:
                    yield from reader.chunks()

        def write(target):
            fs.write(target, ChunkSource(chunks(), md5=False), overwrite=True, block_size=block_size)
        try:
            if block_size:   # a part laid out again beside the others
                write(path)
            else:            # the object itself
                ctx.store.write_object(ctx.bucket, path, write, describe=lambda: xattrs or {})
        except HedgefsError as err:
            raise from_hedgefs(err, path) from None

    upload_id = ctx.request.query["uploadId"]

    def complete():
        check_write_conditions(ctx)
        try:
            etag, content_type, meta, extra, _joined = ctx.session.uploads.complete(
                ctx.bucket, upload_id, ctx.key, wanted, copy, stated[0] if stated else None)
        except S3Error as err:
            done = _completed(ctx, upload_id, wanted)   # a Complete sent again (its answer lost): S3 says yes
            if err.code != "NoSuchUpload" or done is None:
                raise
            return done
        canned = extra.pop("acl", None)
        info = ObjectInfo(ctx.key, sum(p for p, _ in extra.get("parts") or ()), 0, etag,
                          content_type or DEFAULT_TYPE, meta, object_path(ctx.bucket, ctx.key), extra.get("checksum"))
        if canned:
            acl.apply(ctx.session.fs, info.path, canned, False, 0o644)
        return info

    async with ctx.gateway.writing():   # a copy of the parts, or of the short last one
        info = await ctx.run(complete)
    body = (xmlout.element("Location", f"/{ctx.bucket}/{ctx.key}") + xmlout.element("Bucket", ctx.bucket)
            + xmlout.element("Key", ctx.key) + xmlout.element("ETag", info.etag))
    if info.checksum:
        body += (xmlout.element(checksums.element(info.checksum["algorithm"]), info.checksum["value"])
                 + xmlout.element("ChecksumType", info.checksum["type"]))
    return web.Response(body=xmlout.document("CompleteMultipartUploadResult", body), content_type="application/xml",
                        headers=checksum_headers(info.checksum))


def _completed(ctx: Context, upload_id: str, wanted: list[tuple[int, str]]) -> ObjectInfo | None:
    """The object an earlier Complete of ``upload_id`` with these parts made, if it is still there."""
    import hashlib

    try:
        status = ctx.store.stat_object(ctx.bucket, ctx.key)   # one NameNode call: the file and its metadata
    except S3Error:
        return None
    record = record_of(status) or {}
    info = ctx.store.info(ctx.bucket, ctx.key, status)
    digest = hashlib.md5(b"".join(bytes.fromhex(etag.strip('"')) for _, etag, _ in wanted)).hexdigest()
    if record.get("upload_id") == upload_id and info.etag == f'"{digest}-{len(wanted)}"':
        return info
    return None
