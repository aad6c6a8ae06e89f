"""The object handlers: GET/HEAD (ranges, conditions), PUT, copy, deletes and multipart uploads."""

from __future__ import annotations

import dataclasses
import email.utils
import logging
import re
import urllib.parse

from aiohttp import web

from hedgefs.client.errors import AlreadyExists, HedgefsError
from hedgefs.s3 import meta as meta_values
from hedgefs.s3 import sigv4, xmlout
from hedgefs.s3.body import Body, ChunkSource, declared_length, stream, stream_whole, window_chunks
from hedgefs.s3.errors import S3Error, from_hedgefs
from hedgefs.s3.store import ObjectInfo, check_key

KEPT_HEADERS = ("cache-control", "content-disposition", "content-encoding", "content-language", "expires")
RESPONSE_OVERRIDES = {"response-content-type": "Content-Type", "response-content-language": "Content-Language",
                      "response-expires": "Expires", "response-cache-control": "Cache-Control",
                      "response-content-disposition": "Content-Disposition",
                      "response-content-encoding": "Content-Encoding"}
_RANGE = re.compile(r"^bytes=(\d*)-(\d*)$")
_COPY_RANGE = re.compile(r"^bytes=(\d+)-(\d+)$")
MAX_META = 2048

log = logging.getLogger("hedgefs.s3")


@dataclasses.dataclass
class Context:
    gateway: object
    session: object
    request: web.Request
    signed: sigv4.Signed | None
    bucket: str
    key: str

    async def run(self, fn, *args):
        return await self.gateway.run(fn, *args)

    @property
    def store(self):
        return self.session.store


def user_metadata(request: web.Request) -> tuple[str | None, dict]:
    """Content-Type and what S3 keeps of the other headers: x-amz-meta-* and the standard few."""
    meta = {}
    for name, value in request.headers.items():
        lower = name.lower()
        if lower.startswith("x-amz-meta-") or lower in KEPT_HEADERS:
            if lower == "content-encoding":
                value = ",".join(v for v in value.split(",") if v.strip() != "aws-chunked")
                if not value:
                    continue
            meta[lower] = meta_values.from_header(value) if lower.startswith("x-amz-meta-") else value
    if sum(len(k) + len(v) for k, v in meta.items() if k.startswith("x-amz-meta-")) > MAX_META:
        raise S3Error("MetadataTooLarge", "Your metadata headers exceed the maximum allowed metadata size.")
    return request.headers.get("Content-Type"), meta


def object_headers(info: ObjectInfo) -> dict:
    headers = {"ETag": info.etag, "Last-Modified": xmlout.http_date(info.mtime_ms), "Accept-Ranges": "bytes",
               "Content-Type": info.content_type}
    for name, value in info.meta.items():
        headers[name] = meta_values.to_header(value) if name.startswith("x-amz-meta-") else value
    return headers


def check_conditions(request: web.Request, info: ObjectInfo) -> None:
    """If-Match / If-None-Match / If-(Un)Modified-Since, with S3's precedence."""
    h = request.headers
    mtime_s = info.mtime_ms // 1000

    def since(name):
        try:
            return email.utils.parsedate_to_datetime(h[name]).timestamp()
        except (TypeError, ValueError, IndexError):
            return None

    def matches(value):
        return any(tag.strip() in ("*", info.etag, info.etag.strip('"')) for tag in value.split(","))

    if "If-Match" in h:
        if not matches(h["If-Match"]):
            raise S3Error("PreconditionFailed", "At least one of the pre-conditions you specified did not hold")
    elif "If-Unmodified-Since" in h and since("If-Unmodified-Since") is not None \
            and mtime_s > since("If-Unmodified-Since"):
        raise S3Error("PreconditionFailed", "At least one of the pre-conditions you specified did not hold")
    if "If-None-Match" in h:
        if matches(h["If-None-Match"]):
            raise S3Error("NotModified", "Not Modified", status=304, headers=_validators(info))
    elif "If-Modified-Since" in h and since("If-Modified-Since") is not None \
            and mtime_s <= since("If-Modified-Since"):
        raise S3Error("NotModified", "Not Modified", status=304, headers=_validators(info))


def check_write_conditions(ctx: "Context") -> bool:
    """A conditional write's If-Match / If-None-Match against the object as it is now (on a worker
    thread). True when the write must not replace an object (If-None-Match: *): the write then
    refuses an object that appeared meanwhile; the other conditions are checked before the write,
    not atomically with it (a concurrent writer of the same key may come between)."""
    h = ctx.request.headers
    if "If-Match" not in h and "If-None-Match" not in h:
        return False
    try:
        info = ctx.store.head(ctx.bucket, ctx.key)
    except S3Error as err:
        if err.code != "NoSuchKey":
            raise
        info = None

    def matches(value):
        return any(tag.strip() in ("*", info.etag, info.etag.strip('"')) for tag in value.split(","))

    failed = S3Error("PreconditionFailed", "At least one of the pre-conditions you specified did not hold")
    if "If-Match" in h:
        if info is None:
            raise S3Error("NoSuchKey", "The specified key does not exist.", f"/{ctx.bucket}/{ctx.key}")
        if not matches(h["If-Match"]):
            raise failed
    if "If-None-Match" in h and info is not None and matches(h["If-None-Match"]):
        raise failed
    return h.get("If-None-Match", "").strip() == "*"


def _validators(info: ObjectInfo) -> dict:
    """What a 304 carries, as HTTP says: the validators of the version the client has."""
    return {"ETag": info.etag, "Last-Modified": xmlout.http_date(info.mtime_ms)}


def parse_range(header: str | None, size: int) -> tuple[int, int] | None:
    """[start, end) of a single byte range; None: the whole object (no range, or one S3 ignores)."""
    if not header:
        return None
    match = _RANGE.match(header.strip())
    if not match or match.groups() == ("", ""):
        return None
    first, last = match.groups()
    if first == "":
        n = int(last)
        if n == 0:
            raise S3Error("InvalidRange", "The requested range is not satisfiable")
        return max(0, size - n), size
    start = int(first)
    end = size if last == "" else min(size, int(last) + 1)
    if last != "" and int(last) < start:
        return None
    if start >= size:
        raise S3Error("InvalidRange", "The requested range is not satisfiable")
    return start, end


async def get_object(ctx: Context, head: bool) -> web.StreamResponse:
    info, reader = await ctx.run(ctx.store.open_object, ctx.bucket, ctx.key)
    check_conditions(ctx.request, info)
    headers = object_headers(info)
    for param, header in RESPONSE_OVERRIDES.items():
        if param in ctx.request.query:
            headers[header] = ctx.request.query[param]
    span = parse_range(ctx.request.headers.get("Range"), info.size)
    start, end = span or (0, info.size)
    if span is not None:
        headers["Content-Range"] = f"bytes {start}-{end - 1}/{info.size}"
    response = web.StreamResponse(status=206 if span else 200, headers=headers)
    response.content_length = end - start
    await response.prepare(ctx.request)
    if not head and end > start:
        try:
            if span is None:
                await stream_whole(response, ctx.request.transport, reader, ctx.gateway.pool)
            else:
                await stream(response, reader, start, end)
        except ConnectionError as err:
            # a client that stops reading (a cancelled download, a timeout) is no gateway failure:
            # one line, not aiohttp's traceback; aiohttp then closes the connection
            log.warning("s3: GET /%s/%s (%d bytes): the client went away before the end (%s)", ctx.bucket, ctx.key,
                        end - start, err or type(err).__name__)
            return response
    await response.write_eof()
    return response


async def _write(ctx: Context, path: str, body, length: int | None, overwrite: bool = True) -> None:
    def write():
        try:
            ctx.session.fs.write(path, body, overwrite=overwrite)
        except HedgefsError as err:
            if not overwrite and isinstance(err, AlreadyExists):
                raise S3Error("PreconditionFailed", "At least one of the pre-conditions you specified did not "
                              "hold") from None
            raise from_hedgefs(err, f"/{ctx.bucket}/{ctx.key}") from None
    async with ctx.gateway.writing(length):
        await ctx.run(write)


async def put_object(ctx: Context) -> web.Response:
    check_key(ctx.bucket, ctx.key)
    if declared_length(ctx.request) is None and "chunked" not in ctx.request.headers.get("Transfer-Encoding", ""):
        raise S3Error("MissingContentLength", "You must provide the Content-Length HTTP header.")
    content_type, meta = user_metadata(ctx.request)
    body = Body(ctx.request, ctx.signed)
    if ctx.key.endswith("/"):
        if await ctx.run(body.read, 1):
            raise S3Error("InvalidArgument", "a key ending in '/' is a directory here: it holds no bytes")
        await ctx.run(body.read)
        info = await ctx.run(ctx.store.make_marker, ctx.bucket, ctx.key)
        return web.Response(headers={"ETag": info.etag})
    path = await ctx.run(ctx.store.prepare, ctx.bucket, ctx.key)
    only_new = await ctx.run(check_write_conditions, ctx)
    await _write(ctx, path, body, declared_length(ctx.request), overwrite=not only_new)
    info = await ctx.run(ctx.store.record, ctx.bucket, ctx.key, body.etag(), content_type, meta)
    return web.Response(headers={"ETag": info.etag})


def copy_source(request: web.Request) -> tuple[str, str]:
    source = urllib.parse.unquote(request.headers["x-amz-copy-source"].split("?versionId=")[0]).lstrip("/")
    bucket, _, key = source.partition("/")
    if not bucket or not key:
        raise S3Error("InvalidArgument", "x-amz-copy-source must be BUCKET/KEY")
    return bucket, key


async def copy_object(ctx: Context) -> web.Response:
    check_key(ctx.bucket, ctx.key)
    src_bucket, src_key = copy_source(ctx.request)
    replace = ctx.request.headers.get("x-amz-metadata-directive", "COPY").upper() == "REPLACE"
    info, reader = await ctx.run(ctx.store.open_object, src_bucket, src_key)
    _copy_conditions(ctx.request, info)
    content_type, meta = user_metadata(ctx.request) if replace else (info.content_type, info.meta)
    if (src_bucket, src_key) == (ctx.bucket, ctx.key) and not replace:
        raise S3Error("InvalidRequest", "This copy request is illegal because it is trying to copy an object to "
                      "itself without changing the object's metadata, storage class, website redirect "
                      "location or encryption attributes.")
    if reader is None:
        new = await ctx.run(ctx.store.make_marker, ctx.bucket, ctx.key)
    else:   # onto itself too: new metadata is a new version (store.Store.info caches by version)
        path = await ctx.run(ctx.store.prepare, ctx.bucket, ctx.key)
        source = ChunkSource(reader.chunks())
        await _write(ctx, path, source, info.size)
        etag = f'"{source.md5.hexdigest()}"' if "-" not in info.etag else info.etag
        new = await ctx.run(ctx.store.record, ctx.bucket, ctx.key, etag, content_type, meta)
    body = xmlout.element("LastModified", xmlout.iso(new.mtime_ms)) + xmlout.element("ETag", new.etag)
    return web.Response(body=xmlout.document("CopyObjectResult", body), content_type="application/xml")


def _copy_conditions(request: web.Request, info: ObjectInfo) -> None:
    h = request.headers
    mapped = {"x-amz-copy-source-if-match": "If-Match", "x-amz-copy-source-if-none-match": "If-None-Match",
              "x-amz-copy-source-if-modified-since": "If-Modified-Since",
              "x-amz-copy-source-if-unmodified-since": "If-Unmodified-Since"}
    conditions = {mapped[k.lower()]: v for k, v in h.items() if k.lower() in mapped}
    if conditions:
        fake = type("H", (), {"headers": conditions})
        try:
            check_conditions(fake, info)
        except S3Error as err:
            if err.status == 304:
                raise S3Error("PreconditionFailed", "At least one of the pre-conditions you specified did not hold")
            raise


async def delete_objects(ctx: Context) -> web.Response:
    tree = xmlout.parse(await ctx.request.read(), "Delete")
    quiet = xmlout.text(tree, "Quiet").lower() == "true"
    keys = [xmlout.text(o, "Key") for o in xmlout.children(tree, "Object")]
    if len(keys) > 1000:
        raise S3Error("MalformedXML", "at most 1000 keys per DeleteObjects")

    def delete_all():
        out = []
        for key in keys:
            try:
                ctx.store.delete_object(ctx.bucket, key)
                out.append((key, None))
            except S3Error as err:
                out.append((key, err))
        return out

    parts = []
    for key, err in await ctx.run(delete_all):
        if err is None:
            if not quiet:
                parts.append("<Deleted>" + xmlout.element("Key", key) + "</Deleted>")
        else:
            parts.append("<Error>" + xmlout.element("Key", key) + xmlout.element("Code", err.code)
                         + xmlout.element("Message", err.message) + "</Error>")
    return web.Response(body=xmlout.document("DeleteResult", "".join(parts)), content_type="application/xml")


# ---------------------------------------------------------------------------- multipart

async def create_upload(ctx: Context) -> web.Response:
    check_key(ctx.bucket, ctx.key)
    content_type, meta = user_metadata(ctx.request)
    upload_id = await ctx.run(ctx.session.uploads.create, ctx.bucket, ctx.key, content_type, meta)
    body = (xmlout.element("Bucket", ctx.bucket) + xmlout.element("Key", ctx.key)
            + xmlout.element("UploadId", upload_id))
    return web.Response(body=xmlout.document("InitiateMultipartUploadResult", body), content_type="application/xml")


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
    try:
        _copy_conditions(ctx.request, info)
        start, end = copy_range(ctx.request.headers.get("x-amz-copy-source-range"), info.size)
        source = ChunkSource(window_chunks(reader, start, end) if reader is not None and end > start else ())

        def write(path: str, block_size: int) -> str:
            try:
                ctx.session.fs.write(path, source, overwrite=True, block_size=block_size)
            except HedgefsError as err:
                raise from_hedgefs(err, f"/{ctx.bucket}/{ctx.key}") from None
            return source.md5.hexdigest()

        async with ctx.gateway.writing(end - start):
            etag = await ctx.run(ctx.session.uploads.put_part, ctx.bucket, ctx.request.query["uploadId"], number,
                                 end - start, write)
    finally:
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

    def write(path: str, block_size: int) -> str:
        # on put_part's worker thread, between its checks and its rename
        try:
            ctx.session.fs.write(path, body, overwrite=True, block_size=block_size)
        except HedgefsError as err:
            raise from_hedgefs(err, f"/{ctx.bucket}/{ctx.key}") from None
        return body.md5.hexdigest()

    async with ctx.gateway.writing(length):
        etag = await ctx.run(ctx.session.uploads.put_part, ctx.bucket, query["uploadId"], number, length, write)
    return web.Response(headers={"ETag": etag})


async def complete_upload(ctx: Context) -> web.Response:
    tree = xmlout.parse(await ctx.request.read(), "CompleteMultipartUpload")
    wanted = []
    for part in xmlout.children(tree, "Part"):
        try:
            wanted.append((int(xmlout.text(part, "PartNumber")), xmlout.text(part, "ETag")))
        except ValueError:
            raise S3Error("MalformedXML", "a Part without a numeric PartNumber") from None
    fs = ctx.session.fs

    def copy(files, path, block_size):
        def chunks():
            for f in files:
                with fs.open(f.path) as reader:
                    yield from reader.chunks()
        try:
            fs.write(path, ChunkSource(chunks()), overwrite=True, block_size=block_size)
        except HedgefsError as err:
            raise from_hedgefs(err, path) from None

    upload_id = ctx.request.query["uploadId"]

    def complete():
        check_write_conditions(ctx)
        try:
            etag, content_type, meta, _joined = ctx.session.uploads.complete(
                ctx.bucket, upload_id, ctx.key, wanted, copy)
        except S3Error as err:
            done = _completed(ctx, upload_id, wanted)   # a Complete sent again (its answer lost): S3 says yes
            if err.code != "NoSuchUpload" or done is None:
                raise
            return done
        return ctx.store.record(ctx.bucket, ctx.key, etag, content_type, meta, {"upload_id": upload_id})

    async with ctx.gateway.writing():   # a copy of the parts, or of the short last one
        info = await ctx.run(complete)
    body = (xmlout.element("Location", f"/{ctx.bucket}/{ctx.key}") + xmlout.element("Bucket", ctx.bucket)
            + xmlout.element("Key", ctx.key) + xmlout.element("ETag", info.etag))
    return web.Response(body=xmlout.document("CompleteMultipartUploadResult", body), content_type="application/xml")


def _completed(ctx: Context, upload_id: str, wanted: list[tuple[int, str]]) -> ObjectInfo | None:
    """The object an earlier Complete of ``upload_id`` with these parts made, if it is still there."""
    import hashlib

    try:
        info = ctx.store.head(ctx.bucket, ctx.key)
    except S3Error:
        return None
    record = ctx.store.read_record(ctx.bucket, ctx.key) or {}
    digest = hashlib.md5(b"".join(bytes.fromhex(etag.strip('"')) for _, etag in wanted)).hexdigest()
    if record.get("upload_id") == upload_id and info.etag == f'"{digest}-{len(wanted)}"':
        return info
    return None
