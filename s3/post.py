"""Browser form uploads (POST /BUCKET, multipart/form-data), as S3 serves them.

The form's fields name the key (``${filename}`` is the file's name), the ACL, Content-Type,
x-amz-meta-*, tags, success_action_status/_redirect and the checksum; its ``file`` field, the
last one that counts, is the object's bytes, streamed into the writer as it arrives. A signed
form carries a policy (base64 JSON: an expiration and conditions) and its signature, SigV4
(x-amz-algorithm, -credential, -date, -signature: HMAC-SHA256 of the policy with the day's
signing key) or SigV2 (AWSAccessKeyId, signature: HMAC-SHA1 of the policy with the secret); the
upload then acts as that key's user, and every field must be allowed by a condition
(``{"field": value}``, ``["eq", "$field", value]``, ``["starts-with", "$field", prefix]``,
``["content-length-range", min, max]``; field names in any case). An unsigned form is
anonymous: served only where anonymous writes are (acl.py).
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import datetime
import hashlib
import hmac
import json
import urllib.parse

from aiohttp import web

from hedgefs.client.errors import HedgefsError
from hedgefs.s3 import acl, checksums, sigv4, tagging, xmlout
from hedgefs.s3.errors import S3Error, from_hedgefs
from hedgefs.s3.objects import Context
from hedgefs.s3.store import check_key, labels

NOT_IN_POLICY = {"policy", "signature", "awsaccesskeyid", "file", "x-amz-signature"}
PIECE = 1 << 20
MAX_FIELD = 20 << 10


def _denied(why: str) -> S3Error:
    return S3Error("AccessDenied", f"Invalid according to Policy: {why}")


class FormFile:
    """The ``file`` field as a blocking ``read(n)`` for the writer (on its source thread): pieces
    pulled from the socket on the event loop, counted against the policy's length range, hashed
    (MD5 for the ETag, the form's checksum if it names one)."""

    def __init__(self, loop, part, length_range: tuple[int, int] | None, algorithm: str | None):
        self._loop, self._part, self._range = loop, part, length_range
        self._pending = b""
        self.length = 0
        self.md5 = hashlib.md5()
        self.checksum = checksums.Hasher(algorithm) if algorithm else None

    def read(self, n: int = -1) -> bytes:
        if not self._pending:
            self._pending = asyncio.run_coroutine_threadsafe(self._part.read_chunk(PIECE), self._loop).result()
            if not self._pending:
                if self._range and self.length < self._range[0]:
                    raise S3Error("EntityTooSmall", "Your proposed upload is smaller than the minimum allowed size")
                return b""
            self.length += len(self._pending)
            if self._range and self.length > self._range[1]:
                raise S3Error("EntityTooLarge", "Your proposed upload exceeds the maximum allowed size")
            self.md5.update(self._pending)
            if self.checksum is not None:
                self.checksum.update(self._pending)
        n = len(self._pending) if n < 0 else n
        out, self._pending = self._pending[:n], self._pending[n:]
        return out


def _policy(text: str) -> dict:
    try:
        policy = json.loads(base64.b64decode(text, validate=True))
    except (binascii.Error, ValueError):
        raise S3Error("InvalidPolicyDocument", "Invalid Policy: the policy is not base64-encoded JSON") from None
    if not isinstance(policy, dict) or "expiration" not in policy:
        raise S3Error("InvalidPolicyDocument", "Invalid Policy: Policy missing expiration.")
    if not isinstance(policy.get("conditions"), list) or not policy["conditions"]:
        raise S3Error("InvalidPolicyDocument", "Invalid Policy: Policy missing conditions.")
    try:
        expires = datetime.datetime.strptime(policy["expiration"], "%Y-%m-%dT%H:%M:%S%z") \
            if "." not in policy["expiration"] else \
            datetime.datetime.strptime(policy["expiration"], "%Y-%m-%dT%H:%M:%S.%f%z")
    except (TypeError, ValueError):
        raise S3Error("InvalidPolicyDocument", "Invalid Policy: Invalid 'expiration' value: "
                      f"{policy['expiration']!r}") from None
    if expires < datetime.datetime.now(datetime.timezone.utc):
        raise S3Error("AccessDenied", "Invalid according to Policy: Policy expired.")
    return policy


def _conditions(policy: dict) -> tuple[list[tuple[str, str, str]], tuple[int, int] | None]:
    """([(op, field lower-case, value)], the content-length-range)."""
    out, length_range = [], None
    for condition in policy["conditions"]:
        if isinstance(condition, dict):
            if len(condition) != 1:
                raise S3Error("InvalidPolicyDocument", f"Invalid Policy: a condition {condition!r}")
            (name, value), = condition.items()
            out.append(("eq", name.lower().lstrip("$"), str(value)))
        elif isinstance(condition, list) and condition and str(condition[0]).lower() == "content-length-range":
            try:
                low, high = int(condition[1]), int(condition[2])
            except (IndexError, TypeError, ValueError):
                raise S3Error("InvalidPolicyDocument", "Invalid Policy: content-length-range needs two "
                              "integers") from None
            if low < 0 or high < low:
                raise S3Error("InvalidPolicyDocument", "Invalid Policy: a content-length-range of "
                              f"{low} to {high}")
            length_range = (low, high)
        elif isinstance(condition, list) and len(condition) == 3 and str(condition[0]).lower() in ("eq", "starts-with"):
            out.append((str(condition[0]).lower(), str(condition[1]).lower().lstrip("$"), str(condition[2])))
        else:
            raise S3Error("InvalidPolicyDocument", f"Invalid Policy: a condition {condition!r}")
    return out, length_range


def _check_signature(ctx: Context, fields: dict[str, str]) -> str:
    """The access key that signed the form's policy (its signature checked)."""
    keys = ctx.gateway.keys
    policy = fields["policy"]
    if "x-amz-signature" in fields or "x-amz-algorithm" in fields:
        if fields.get("x-amz-algorithm") != sigv4.ALGORITHM:
            raise S3Error("InvalidArgument", f"x-amz-algorithm must be {sigv4.ALGORITHM}")
        try:
            access, date, region, service, _end = fields["x-amz-credential"].split("/")
            signature = fields["x-amz-signature"]
        except (KeyError, ValueError):
            raise S3Error("InvalidArgument", "a SigV4 form needs x-amz-credential KEY/DATE/REGION/SERVICE/"
                          "aws4_request and x-amz-signature") from None
        secret = keys.secret_of(access)
        if secret is None:
            raise S3Error("InvalidAccessKeyId", "The AWS Access Key Id you provided does not exist in our records.")
        want = hmac.new(sigv4.signing_key(secret, date, region, service), policy.encode(), hashlib.sha256).hexdigest()
    else:
        access = fields.get("awsaccesskeyid")
        signature = fields.get("signature")
        if not access or not signature:
            raise S3Error("InvalidArgument", "a form with a policy needs its signature (AWSAccessKeyId and "
                          "signature, or x-amz-credential and x-amz-signature)")
        secret = keys.secret_of(access)
        if secret is None:
            raise S3Error("InvalidAccessKeyId", "The AWS Access Key Id you provided does not exist in our records.")
        want = base64.b64encode(hmac.new(secret.encode(), policy.encode(), hashlib.sha1).digest()).decode()
    if not hmac.compare_digest(want, signature.strip()):
        raise S3Error("SignatureDoesNotMatch", "The request signature we calculated does not match the signature "
                      "you provided. Check your key and signing method.")
    return access


def _check_fields(conditions, fields: dict[str, str]) -> None:
    covered = set()
    for op, name, value in conditions:
        have = fields.get(name, "")
        if op == "eq" and have != value or op == "starts-with" and not have.startswith(value):
            raise _denied(f"Policy Condition failed: [\"{op}\", \"${name}\", \"{value}\"]")
        covered.add(name)
    for name in fields:
        if name in NOT_IN_POLICY or name.startswith("x-ignore-") or name in checksums.HEADERS or name in covered:
            continue
        if name in ("x-amz-algorithm", "x-amz-credential", "x-amz-date", "x-amz-security-token"):
            continue
        raise _denied(f"Extra input fields: {name}")


async def form_upload(ctx: Context) -> web.Response:
    reader = await ctx.request.multipart()
    fields: dict[str, str] = {}
    part, filename = None, None
    while True:
        part = await reader.next()
        if part is None:
            raise S3Error("InvalidArgument", "POST requires exactly one file upload per request.")
        name = (part.name or "").lower()
        if name == "file":
            filename = part.filename
            break
        fields[name] = (await part.read(decode=False))[:MAX_FIELD].decode("utf-8", "replace")
    key = fields.get("key")
    if not key:
        raise S3Error("InvalidArgument", "Bucket POST must contain a field named 'key'.  If it is specified, please "
                      "check the order of the fields.")
    key = key.replace("${filename}", filename or "")
    fields["key"], fields["bucket"] = key, ctx.bucket
    check_key(ctx.bucket, key)
    ctx.key = key
    length_range = None
    if "policy" in fields:
        access = _check_signature(ctx, fields)
        policy = _policy(fields["policy"])
        conditions, length_range = _conditions(policy)
        _check_fields(conditions, fields)
        record = ctx.gateway.keys.get(access)
        ctx.session = ctx.gateway.cached(record) or await ctx.run(ctx.gateway.session, record)
        ctx.user = record.user if record else None
    else:
        if not ctx.gateway.anonymous:
            raise S3Error("AccessDenied", "Access Denied: an unsigned form (anonymous access is off)")
        ctx.session = ctx.gateway.cached(None) or await ctx.run(ctx.gateway.session, None)
        ctx.user = None
        await ctx.run(acl.check_anonymous, _AsPut(ctx))
    canned = acl.check_canned(fields["acl"]) if fields.get("acl") else None
    sent = [(a, fields[h]) for h, a in checksums.HEADERS.items() if h in fields]
    meta = {name: value for name, value in fields.items() if name.startswith("x-amz-meta-")}
    tags = tagging.from_xml(fields["tagging"].encode()) if fields.get("tagging") else []
    source = FormFile(asyncio.get_running_loop(), part, length_range, sent[0][0] if sent else None)
    path = await ctx.run(ctx.store.prepare, ctx.bucket, key)

    done = {}

    def describe():
        done["etag"] = f'"{source.md5.hexdigest()}"'
        extra = {"tags": [list(t) for t in tags]} if tags else {}
        if source.checksum is not None:
            extra["checksum"] = {"algorithm": sent[0][0], "value": checksums.encode(source.checksum.digest()),
                                 "type": checksums.FULL_OBJECT}
        return labels(done["etag"], fields.get("content-type"), meta, extra)

    def write():
        try:
            ctx.store.write_object(ctx.bucket, path, lambda aside: ctx.session.fs.write(
                aside, _Checked(source, sent[0] if sent else None)), describe=describe)
        except HedgefsError as err:
            raise from_hedgefs(err, f"/{ctx.bucket}/{key}") from None

    async with ctx.gateway.writing():
        await ctx.run(write)
    etag = done["etag"]
    if canned:
        await ctx.run(acl.apply, ctx.session.fs, path, canned, False, 0o644)
    headers = {"ETag": etag, "Location": f"/{ctx.bucket}/{urllib.parse.quote(key)}"}
    redirect = fields.get("success_action_redirect") or fields.get("redirect")
    if redirect:
        query = urllib.parse.urlencode({"bucket": ctx.bucket, "key": key, "etag": etag})
        target = redirect + ("&" if "?" in redirect else "?") + query
        return web.Response(status=303, headers={**headers, "Location": target})
    status = fields.get("success_action_status", "204")
    if status == "201":
        body = (xmlout.element("Location", headers["Location"]) + xmlout.element("Bucket", ctx.bucket)
                + xmlout.element("Key", key) + xmlout.element("ETag", etag))
        return web.Response(status=201, body=(xmlout.HEAD + f"<PostResponse>{body}</PostResponse>").encode(),
                            content_type="application/xml", headers={"ETag": etag})   # no namespace, as S3
    return web.Response(status=200 if status == "200" else 204, headers=headers)


class _Checked:
    """The form's file, its checksum field checked at its end (BadDigest: nothing is stored)."""

    def __init__(self, source: FormFile, sent: tuple[str, str] | None):
        self._source, self._sent = source, sent

    def read(self, n: int = -1) -> bytes:
        data = self._source.read(n)
        if not data and self._sent is not None:
            algorithm, value = self._sent
            if checksums.decode(algorithm, value) != self._source.checksum.digest():
                raise S3Error("BadDigest", f"The {checksums.header(algorithm)} you specified did not match the "
                              "calculated checksum.")
        return data


class _AsPut:
    """The anonymous check of a PUT of the form's key (acl.check_anonymous reads these)."""

    def __init__(self, ctx: Context):
        self.bucket, self.key, self.session = ctx.bucket, ctx.key, ctx.session
        self.request = type("R", (), {"method": "PUT", "query": {}, "headers": {}})()
