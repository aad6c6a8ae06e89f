"""A bucket's settings (its tags, CORS rules and location) and the calls that read and set them.

    /BUCKET/.hedgefs-s3/bucket.json     {"tags": [[k, v], ...], "cors": [rule, ...], "location": "..."}

Read afresh whenever a request needs them (a settings call, or a request carrying an Origin
header), so every gateway sees a change at once. CORS as S3 serves it: a preflight (OPTIONS with
Origin and Access-Control-Request-Method) is answered from the first rule allowing that origin
(``*`` wildcards, one each), method and every requested header, without a signature; any other
request carrying an Origin gets Access-Control-* headers when a rule allows it, errors included.
"""

from __future__ import annotations

import fnmatch
import json
from xml.sax.saxutils import escape

from aiohttp import web

from hedgefs.client.errors import HedgefsError, NotFound
from hedgefs.s3 import tagging, xmlout
from hedgefs.s3.errors import S3Error, from_hedgefs
from hedgefs.s3.store import RESERVED, Store

METHODS = ("GET", "PUT", "HEAD", "POST", "DELETE")
MAX_RULES = 100


def settings_path(bucket: str) -> str:
    return f"/{bucket}/{RESERVED}/bucket.json"


def read(store: Store, bucket: str) -> dict:
    """The bucket's settings ({} if it has none); NoSuchBucket if there is no bucket."""
    try:
        return json.loads(store.fs.read_bytes(settings_path(bucket)))
    except NotFound:
        store.bucket(bucket)
        return {}
    except ValueError:
        return {}
    except HedgefsError as err:
        raise from_hedgefs(err, f"/{bucket}", "NoSuchBucket") from None


def change(store: Store, bucket: str, **fields) -> None:
    """Set (or, given None, drop) some of the bucket's settings."""
    settings = read(store, bucket)
    for name, value in fields.items():
        if value is None:
            settings.pop(name, None)
        else:
            settings[name] = value
    try:
        store.reserve(bucket)
        store.fs.write_bytes(settings_path(bucket), json.dumps(settings).encode(), overwrite=True,
                             policy=store.meta_policy)
    except HedgefsError as err:
        raise from_hedgefs(err, f"/{bucket}", "NoSuchBucket") from None


def _xml(root: str, body: str) -> web.Response:
    return web.Response(body=xmlout.document(root, body), content_type="application/xml")


# ---------------------------------------------------------------------- tags

async def get_tags(ctx) -> web.Response:
    tags = (await ctx.run(read, ctx.store, ctx.bucket)).get("tags")
    if not tags:
        raise S3Error("NoSuchTagSet", "The TagSet does not exist", status=404)
    return web.Response(body=tagging.document([tuple(t) for t in tags]), content_type="application/xml")


async def put_tags(ctx) -> web.Response:
    tags = tagging.from_xml(await ctx.request.read(), tagging.BUCKET_TAGS)
    await ctx.run(lambda: change(ctx.store, ctx.bucket, tags=[list(t) for t in tags] or None))
    return web.Response(status=204)


async def delete_tags(ctx) -> web.Response:
    await ctx.run(lambda: change(ctx.store, ctx.bucket, tags=None))
    return web.Response(status=204)


# ---------------------------------------------------------------------- location

async def location(ctx) -> web.Response:
    where = (await ctx.run(read, ctx.store, ctx.bucket)).get("location", "")
    body = f'<LocationConstraint xmlns="{xmlout.NS}">{escape(where)}</LocationConstraint>' if where \
        else f'<LocationConstraint xmlns="{xmlout.NS}"/>'
    return web.Response(body=(xmlout.HEAD + body).encode(), content_type="application/xml")


def location_of(body: bytes) -> str:
    """The LocationConstraint of a CreateBucketConfiguration (empty: none)."""
    if not body.strip():
        return ""
    tree = xmlout.parse(body, "CreateBucketConfiguration")
    return xmlout.text(tree, "LocationConstraint").strip()


# ---------------------------------------------------------------------- CORS

def parse_cors(body: bytes) -> list[dict]:
    tree = xmlout.parse(body, "CORSConfiguration")
    rules = []
    for node in xmlout.children(tree, "CORSRule"):
        rule = {"methods": [m.text or "" for m in xmlout.children(node, "AllowedMethod")],
                "origins": [o.text or "" for o in xmlout.children(node, "AllowedOrigin")],
                "headers": [h.text or "" for h in xmlout.children(node, "AllowedHeader")],
                "expose": [h.text or "" for h in xmlout.children(node, "ExposeHeader")],
                "id": xmlout.text(node, "ID"), "max_age": xmlout.text(node, "MaxAgeSeconds")}
        if not rule["methods"] or not rule["origins"]:
            raise S3Error("MalformedXML", "a CORSRule needs an AllowedMethod and an AllowedOrigin")
        for method in rule["methods"]:
            if method not in METHODS:
                raise S3Error("InvalidRequest", f"Found unsupported HTTP method in CORS config. Unsupported method "
                              f"is {method}")
        for pattern in rule["origins"] + rule["headers"]:
            if pattern.count("*") > 1:
                raise S3Error("InvalidRequest", f"{pattern!r} can not have more than one wildcard.")
        rules.append(rule)
    if not rules or len(rules) > MAX_RULES:
        raise S3Error("MalformedXML", f"a CORSConfiguration holds 1 to {MAX_RULES} rules")
    return rules


def cors_document(rules: list[dict]) -> bytes:
    out = []
    for rule in rules:
        out.append("<CORSRule>" + (xmlout.element("ID", rule["id"]) if rule.get("id") else "")
                   + "".join(xmlout.element("AllowedHeader", h) for h in rule["headers"])
                   + "".join(xmlout.element("AllowedMethod", m) for m in rule["methods"])
                   + "".join(xmlout.element("AllowedOrigin", o) for o in rule["origins"])
                   + "".join(xmlout.element("ExposeHeader", h) for h in rule["expose"])
                   + (xmlout.element("MaxAgeSeconds", rule["max_age"]) if rule.get("max_age") else "")
                   + "</CORSRule>")
    return xmlout.document("CORSConfiguration", "".join(out))


async def get_cors(ctx) -> web.Response:
    rules = (await ctx.run(read, ctx.store, ctx.bucket)).get("cors")
    if not rules:
        raise S3Error("NoSuchCORSConfiguration", "The CORS configuration does not exist", status=404)
    return web.Response(body=cors_document(rules), content_type="application/xml")


async def put_cors(ctx) -> web.Response:
    rules = parse_cors(await ctx.request.read())
    await ctx.run(lambda: change(ctx.store, ctx.bucket, cors=rules))
    return web.Response()


async def delete_cors(ctx) -> web.Response:
    await ctx.run(lambda: change(ctx.store, ctx.bucket, cors=None))
    return web.Response(status=204)


def _matches(pattern: str, value: str) -> bool:
    return fnmatch.fnmatchcase(value.lower(), pattern.lower().replace("[", "[[]").replace("?", "[?]"))


def matching_rule(rules: list[dict], origin: str, method: str, headers: list[str]) -> dict | None:
    for rule in rules:
        if not any(_matches(o, origin) for o in rule["origins"]) or method not in rule["methods"]:
            continue
        if all(any(_matches(h, wanted) for h in rule["headers"]) for wanted in headers):
            return rule
    return None


def cors_headers(rule: dict, origin: str, method: str, headers: list[str]) -> dict:
    out = {"Access-Control-Allow-Origin": "*" if rule["origins"] == ["*"] else origin,
           "Access-Control-Allow-Methods": ", ".join(rule["methods"]), "Vary": "Origin"}
    if headers:
        out["Access-Control-Allow-Headers"] = ", ".join(headers)
    if rule["expose"]:
        out["Access-Control-Expose-Headers"] = ", ".join(rule["expose"])
    if rule.get("max_age"):
        out["Access-Control-Max-Age"] = rule["max_age"]
    if out["Access-Control-Allow-Origin"] != "*":
        out["Access-Control-Allow-Credentials"] = "true"
    return out


def _requested_headers(request: web.Request) -> list[str]:
    text = request.headers.get("Access-Control-Request-Headers", "")
    return [h.strip().lower() for h in text.split(",") if h.strip()]


async def preflight(ctx) -> web.Response:
    """OPTIONS: no signature (a browser sends none), answered from the bucket's rules."""
    origin = ctx.request.headers.get("Origin")
    method = ctx.request.headers.get("Access-Control-Request-Method")
    if not origin or not method:
        raise S3Error("BadRequest", "Insufficient information. Origin request header needed.", status=400)
    rules = (await ctx.run(read, ctx.store, ctx.bucket)).get("cors") or []
    if not rules:
        raise S3Error("AccessForbidden", "CORSResponse: This CORS request is not allowed. This is usually because "
                      "the evalution of Origin, request method / Access-Control-Request-Method or "
                      "Access-Control-Request-Headers are not whitelisted by the resource's CORS spec.", status=403)
    wanted = _requested_headers(ctx.request)
    rule = matching_rule(rules, origin, method, wanted)
    if rule is None:
        raise S3Error("AccessForbidden", "CORSResponse: This CORS request is not allowed.", status=403)
    return web.Response(headers=cors_headers(rule, origin, method, wanted))


def response_headers(store: Store, bucket: str, request: web.Request) -> dict:
    """The Access-Control-* headers an actual (not preflight) request with an Origin gets (on a
    worker thread: reads the bucket's settings)."""
    origin = request.headers.get("Origin")
    if not origin or not bucket:
        return {}
    try:
        rules = read(store, bucket).get("cors") or []
    except S3Error:
        return {}
    method = request.headers.get("Access-Control-Request-Method") or request.method
    rule = matching_rule(rules, origin, method, [])
    return cors_headers(rule, origin, method, []) if rule else {}
