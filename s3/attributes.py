"""GetObjectAttributes (GET ?attributes): an object's ETag, checksum, parts, storage class and
size in one answer, without its bytes; the parts paged by MaxParts and PartNumberMarker."""

from __future__ import annotations

from aiohttp import web

from hedgefs.s3 import checksums, xmlout
from hedgefs.s3.errors import S3Error

NAMES = {"ETag", "Checksum", "ObjectParts", "StorageClass", "ObjectSize"}


def _int(headers, name: str, default: int) -> int:
    try:
        value = int(headers.get(name, default))
    except ValueError:
        raise S3Error("InvalidArgument", f"{name} must be an integer") from None
    if value < 0:
        raise S3Error("InvalidArgument", f"{name} must be >= 0")
    return value


async def get_attributes(ctx) -> web.Response:
    h = ctx.request.headers
    wanted = {a.strip() for a in h.get("x-amz-object-attributes", "").split(",") if a.strip()}
    if not wanted or wanted - NAMES:
        raise S3Error("InvalidArgument", f"x-amz-object-attributes: one or more of {', '.join(sorted(NAMES))}")
    max_parts = min(_int(h, "x-amz-max-parts", 1000), 1000)
    marker = _int(h, "x-amz-part-number-marker", 0)
    info = await ctx.run(ctx.store.head, ctx.bucket, ctx.key)
    body = []
    if "ETag" in wanted:
        body.append(xmlout.element("ETag", info.etag.strip('"')))
    if "Checksum" in wanted and info.checksum:
        body.append("<Checksum>" + xmlout.element(checksums.element(info.checksum["algorithm"]), info.checksum["value"])
                    + xmlout.element("ChecksumType", info.checksum["type"]) + "</Checksum>")
    if "ObjectParts" in wanted and info.parts:
        numbered = [(n, part) for n, part in enumerate(info.parts, 1) if n > marker]
        page, truncated = numbered[:max_parts], len(numbered) > max_parts
        algorithm = info.checksum["algorithm"] if info.checksum else None
        parts = "".join("<Part>" + xmlout.element("PartNumber", n) + xmlout.element("Size", length)
                        + (xmlout.element(checksums.element(algorithm), value) if algorithm and value else "")
                        + "</Part>" for n, (length, value) in page)
        body.append("<ObjectParts>" + xmlout.element("PartsCount", len(info.parts))
                    + xmlout.element("PartNumberMarker", marker)
                    + (xmlout.element("NextPartNumberMarker", page[-1][0]) if page else "")
                    + xmlout.element("MaxParts", max_parts) + xmlout.element("IsTruncated", truncated)
                    + parts + "</ObjectParts>")
    if "StorageClass" in wanted:
        body.append(xmlout.element("StorageClass", "STANDARD"))
    if "ObjectSize" in wanted:
        body.append(xmlout.element("ObjectSize", info.size))
    return web.Response(body=xmlout.document("GetObjectAttributesResponse", "".join(body)),
                        content_type="application/xml",
                        headers={"Last-Modified": xmlout.http_date(info.mtime_ms), **ctx.headers})
