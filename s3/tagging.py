"""Object and bucket tags (``?tagging``, ``x-amz-tagging``): read, checked and written as S3 does.

An object's tags live in its file's xattr user.s3.tags (store.py), a bucket's in the bucket's
settings (buckets.py). A tag set is a list of (key, value) pairs in the order given. S3's limits:
10 tags an object, 50 a bucket, keys of 1-128 characters, values of at most 256, no key twice.
"""

from __future__ import annotations

import urllib.parse

from aiohttp import web

from hedgefs.s3 import xmlout
from hedgefs.s3.errors import S3Error

OBJECT_TAGS = 10
BUCKET_TAGS = 50
MAX_KEY = 128
MAX_VALUE = 256


def check(tags: list[tuple[str, str]], limit: int = OBJECT_TAGS) -> list[tuple[str, str]]:
    """The tags, checked against S3's limits, in S3's order (by key)."""
    if len(tags) > limit:
        raise S3Error("InvalidTag", f"at most {limit} tags")
    seen = set()
    for key, value in tags:
        if not 1 <= len(key) <= MAX_KEY:
            raise S3Error("InvalidTag", f"a tag key is 1-{MAX_KEY} characters long")
        if len(value) > MAX_VALUE:
            raise S3Error("InvalidTag", f"a tag value is at most {MAX_VALUE} characters long")
        if key in seen:
            raise S3Error("InvalidTag", f"Cannot provide multiple Tags with the same key: {key!r}")
        seen.add(key)
    return sorted(tags)


def from_header(text: str | None) -> list[tuple[str, str]]:
    """``x-amz-tagging: k1=v1&k2`` (URL-encoded; a key without '=' has an empty value)."""
    if not text:
        return []
    return check([(urllib.parse.unquote_plus(k), urllib.parse.unquote_plus(v))
                  for k, _, v in (item.partition("=") for item in text.split("&") if item)])


def from_xml(body: bytes, limit: int = OBJECT_TAGS) -> list[tuple[str, str]]:
    """A ``<Tagging><TagSet><Tag><Key/><Value/></Tag>...`` document."""
    tree = xmlout.parse(body, "Tagging")
    sets = xmlout.children(tree, "TagSet")
    if not sets:
        raise S3Error("MalformedXML", "a Tagging document needs a TagSet")
    return check([(xmlout.text(tag, "Key"), xmlout.text(tag, "Value")) for tag in xmlout.children(sets[0], "Tag")],
                 limit)


def document(tags: list[tuple[str, str]]) -> bytes:
    body = "".join("<Tag>" + xmlout.element("Key", k) + xmlout.element("Value", v) + "</Tag>" for k, v in tags)
    return xmlout.document("Tagging", f"<TagSet>{body}</TagSet>")


async def get_object_tags(ctx) -> web.Response:
    tags = await ctx.run(ctx.store.object_tags, ctx.bucket, ctx.key)
    return web.Response(body=document(tags), content_type="application/xml")


async def put_object_tags(ctx) -> web.Response:
    tags = from_xml(await ctx.request.read())
    await ctx.run(ctx.store.set_object_tags, ctx.bucket, ctx.key, tags)
    return web.Response()


async def delete_object_tags(ctx) -> web.Response:
    await ctx.run(ctx.store.set_object_tags, ctx.bucket, ctx.key, [])
    return web.Response(status=204)
