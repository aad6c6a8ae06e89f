"""The object handlers: GET/HEAD (ranges, conditions), PUT, copy and deletes (multipart uploads: parts.py)."""

from __future__ import annotations

import asyncio
import dataclasses
import email.utils
import functools
import logging
import re
import urllib.parse

from aiohttp import web

from hedgefs.client.errors import AlreadyExists, HedgefsError
from hedgefs.s3 import acl, checksums, sigv4, tagging, xmlout
from hedgefs.s3 import meta as meta_values
from hedgefs.s3.body import Body, declared_length, file_source, requested_checksum, stream
from hedgefs.s3.errors import S3Error, from_hedgefs
from hedgefs.s3.store import ObjectInfo, check_key, labels, object_path

KEPT_HEADERS = ("cache-control", "content-disposition", "content-encoding", "content-language", "expires")
RESPONSE_OVERRIDES = {"response-content-type": "Content-Type", "response-content-language": "Content-Language",
                      "response-expires": "Expires", "response-cache-control": "Cache-Control",
                      "response-content-disposition": "Content-Disposition",
                      "response-content-encoding": "Content-Encoding"}
_RANGE = re.compile(r"^bytes=(\d*)-(\d*)$")
MAX_META = 2048
EARLY_READ_MAX = 1 << 20   # bytes: a ranged GET up to this size may read before its file is confirmed

log = logging.getLogger("hedgefs.s3")


@dataclasses.dataclass
class Context:
    gateway: object
    session: object
    request: web.Request
    signed: sigv4.Signed | None
    bucket: str
    key: str
    user: str | None = None      # the hedgefs user of the request's key (None: anonymous)
    headers: dict = dataclasses.field(default_factory=dict)   # every answer carries these (CORS)

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
    if info.tags:
        headers["x-amz-tagging-count"] = str(len(info.tags))
    for name, value in info.meta.items():
        headers[name] = meta_values.to_header(value) if name.startswith("x-amz-meta-") else value
    return headers


def checksum_headers(checksum: dict | None) -> dict:
    """x-amz-checksum-ALGO and -type of a stored checksum ({} if none)."""
    if not checksum:
        return {}
    return {checksums.header(checksum["algorithm"]): checksum["value"],
            "x-amz-checksum-type": checksum.get("type", checksums.FULL_OBJECT)}


def stored_checksum(body: Body) -> dict | None:
    """What a whole body's checksum is kept as (None: it had none)."""
    if body.checksum is None:
        return None
    algorithm, digest = body.checksum
    return {"algorithm": algorithm, "value": checksums.encode(digest), "type": checksums.FULL_OBJECT}


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


def check_write_conditions(ctx: Context) -> bool:
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


def part_number(query) -> int | None:
    if "partNumber" not in query:
        return None
    try:
        number = int(query["partNumber"])
    except ValueError:
        number = 0
    if not 1 <= number <= 10000:
        raise S3Error("InvalidArgument", "Part number must be an integer between 1 and 10000, inclusive")
    return number


def part_span(info: ObjectInfo, number: int) -> tuple[tuple[int, int] | None, dict | None]:
    """GET ?partNumber=N: the bytes of the object's part N, and that part's checksum (of the
    object's algorithm and type); an object uploaded in one piece is its own part 1."""
    if not info.parts:
        if number != 1:
            raise S3Error("InvalidPart", f"part {number} of an object uploaded in one piece: it has only part 1")
        return None, info.checksum
    if number > len(info.parts):
        raise S3Error("InvalidPart", f"part {number} of an object of {len(info.parts)} parts")
    start = sum(length for length, _ in info.parts[:number - 1])
    length, value = info.parts[number - 1]
    checksum = dict(info.checksum, value=value) if info.checksum and value else None
    return (start, start + length), checksum


def _early_read(ctx: Context, header: str):
    """A small ranged GET of a file this gateway has open: (reader, span, the read, started
    now). get_object sends its bytes only if the NameNode's answer shows the file is still that
    version; so the read and that question overlap instead of following each other."""
    try:
        check_key(ctx.bucket, ctx.key)
    except S3Error:
        return None
    reader = ctx.store.cached_reader(object_path(ctx.bucket, ctx.key))
    if reader is None:
        return None
    try:
        span = parse_range(header, reader.length)
    except S3Error:
        return None
    if span is None or not 0 < span[1] - span[0] <= EARLY_READ_MAX:
        return None
    return reader, span, reader.submit(span[0], span[1] - span[0])


async def get_object(ctx: Context, head: bool) -> web.StreamResponse:
    header = ctx.request.headers.get("Range")
    early = _early_read(ctx, header) if header and not head and not ctx.key.endswith("/") else None
    try:
        info, reader = await ctx.run(ctx.store.open_object, ctx.bucket, ctx.key, early[1] if early else None,
                                     functools.partial(check_conditions, ctx.request), not head)
        headers = {**object_headers(info), **ctx.headers}
        for param, name in RESPONSE_OVERRIDES.items():
            if param in ctx.request.query:   # in place of the stored header, whatever its case
                for stored in [h for h in headers if h.lower() == name.lower()]:
                    del headers[stored]
                headers[name] = ctx.request.query[param]
        number = part_number(ctx.request.query)
        if number is not None:
            if header:
                raise S3Error("InvalidRequest", "Cannot specify both Range header and partNumber query parameter")
            span, checksum = part_span(info, number)
        else:
            span, checksum = parse_range(header, info.size), info.checksum
        start, end = span or (0, info.size)
        if span is not None and info.size:
            headers["Content-Range"] = f"bytes {start}-{end - 1}/{info.size}"
        if info.parts:
            headers["x-amz-mp-parts-count"] = str(len(info.parts))
        if ctx.request.headers.get("x-amz-checksum-mode", "").upper() == "ENABLED" \
                and (span is None or number is not None):
            headers.update(checksum_headers(checksum))
        response = web.StreamResponse(status=206 if span else 200, headers=headers)
        response.content_length = end - start
        data = None
        if early is not None and early[0] is reader and early[1] == (start, end):
            data = await asyncio.wrap_future(early[2])   # the version it read is the one there now
            early = None
        await response.prepare(ctx.request)
        if not head and end > start:
            try:
                if data is not None:
                    await response.write(data)
                else:
                    await stream(response, reader, start, end)
            except ConnectionError as err:
                # a client that stops reading (a cancelled download, a timeout) is no gateway failure:
                # one line, not aiohttp's traceback; aiohttp then closes the connection
                log.warning("s3: GET /%s/%s (%d bytes): the client went away before the end (%s)", ctx.bucket,
                            ctx.key, end - start, err or type(err).__name__)
                return response
    finally:
        if early is not None:
            early[2].cancel()   # another version, or no GET after all: its bytes are not sent
    await response.write_eof()
    return response


async def _write(ctx: Context, path: str, body, length: int | None, overwrite: bool = True,
                 describe=None) -> None:
    """Write ``body`` as the object at ``path``, ``describe()`` its xattrs (store.Store.write_object:
    aside, labelled, then in place)."""
    def write():
        try:
            ctx.store.write_object(ctx.bucket, path, lambda aside: ctx.session.fs.write(aside, body), overwrite,
                                   describe)
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
    canned = acl.requested(ctx.request)
    tags = tagging.from_header(ctx.request.headers.get("x-amz-tagging"))
    body = Body(ctx.request, ctx.signed)
    if ctx.key.endswith("/"):
        try:
            if await ctx.run(body.read, 1):
                raise S3Error("InvalidArgument", "a key ending in '/' is a directory here: it holds no bytes")
            await ctx.run(body.read)
        finally:
            body.close()
        info = await ctx.run(ctx.store.make_marker, ctx.bucket, ctx.key)
        return web.Response(headers={"ETag": info.etag})
    path = await ctx.run(ctx.store.prepare, ctx.bucket, ctx.key)
    only_new = await ctx.run(check_write_conditions, ctx)
    done = {}

    def describe():
        done["checksum"], done["etag"] = stored_checksum(body), body.etag()
        extra = {"checksum": done["checksum"]} if done["checksum"] else {}
        if tags:
            extra["tags"] = [list(t) for t in tags]
        return labels(done["etag"], content_type, meta, extra)
    try:
        await _write(ctx, path, body, declared_length(ctx.request), overwrite=not only_new, describe=describe)
    finally:
        body.close()
    if canned:
        await ctx.run(acl.apply, ctx.session.fs, path, canned, False, 0o644)
    return web.Response(headers={"ETag": done["etag"], **checksum_headers(done["checksum"])})


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
    canned = acl.requested(ctx.request)
    replace_tags = ctx.request.headers.get("x-amz-tagging-directive", "COPY").upper() == "REPLACE"
    new_tags = tagging.from_header(ctx.request.headers.get("x-amz-tagging")) if replace_tags else None
    info, reader = await ctx.run(ctx.store.open_object, src_bucket, src_key)
    copy_conditions(ctx.request, info)
    content_type, meta = user_metadata(ctx.request) if replace else (info.content_type, info.meta)
    if (src_bucket, src_key) == (ctx.bucket, ctx.key) and not replace:
        raise S3Error("InvalidRequest", "This copy request is illegal because it is trying to copy an object to "
                      "itself without changing the object's metadata, storage class, website redirect "
                      "location or encryption attributes.")
    if reader is None:
        new = await ctx.run(ctx.store.make_marker, ctx.bucket, ctx.key)
    else:   # onto itself too: new metadata is a new version (store.Store.info caches by version)
        path = await ctx.run(ctx.store.prepare, ctx.bucket, ctx.key)
        source = file_source(reader, 0, info.size)
        algorithm = requested_checksum(ctx.request)[0] or (info.checksum or {}).get("algorithm")
        if algorithm:
            source.checksum = checksums.Hasher(algorithm)
        done = {}

        def describe():
            done["etag"] = f'"{source.md5.hexdigest()}"' if "-" not in info.etag else info.etag
            extra = {"tags": [list(t) for t in (info.tags if new_tags is None else new_tags)]}
            if source.checksum is not None:
                extra["checksum"] = {"algorithm": algorithm, "value": checksums.encode(source.checksum.digest()),
                                     "type": checksums.FULL_OBJECT}
            return labels(done["etag"], content_type, meta, {k: v for k, v in extra.items() if v})
        try:
            await _write(ctx, path, source, info.size, describe=describe)
        finally:
            source.close()
        new = await ctx.run(ctx.store.head, ctx.bucket, ctx.key)
        if new.etag != done["etag"]:   # replaced since by another PUT: the time is this copy's own
            new = dataclasses.replace(new, etag=done["etag"])
        if canned:
            await ctx.run(acl.apply, ctx.session.fs, path, canned, False, 0o644)
    body = xmlout.element("LastModified", xmlout.iso(new.mtime_ms)) + xmlout.element("ETag", new.etag)
    return web.Response(body=xmlout.document("CopyObjectResult", body), content_type="application/xml")


def copy_conditions(request: web.Request, info: ObjectInfo) -> None:
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
