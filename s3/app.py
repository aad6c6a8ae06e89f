"""The gateway's HTTP side: an aiohttp application that authenticates each request (SigV4),
finds who it acts for, and dispatches to the bucket, listing and object handlers.

Path-style addressing (``http://HOST:PORT/BUCKET/KEY``), which every SDK uses for an endpoint
that is not AWS's. The handlers do the namespace work on worker threads (the client library's
calls block) and stream bodies on the event loop, so a slow client holds no thread.

Stateless: everything lives in the cluster (objects and their xattrs, multipart parts) or in the keys
directory, which gateways share read-only; any gateway can serve any request.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import threading
import urllib.parse
import uuid

import aiohttp
from aiohttp import web

from hedgefs.client.config import HedgeConfig
from hedgefs.client.errors import HedgefsError
from hedgefs.client.fs import FileSystem
from hedgefs.s3 import acl, attributes, buckets, listing, memory, objects, parts, post, sigv4, tagging
from hedgefs.s3.body import CLOSE
from hedgefs.s3.errors import S3Error
from hedgefs.s3.keys import AccessKey, KeyStore
from hedgefs.s3.multipart import Uploads
from hedgefs.s3.store import Store

log = logging.getLogger("hedgefs.s3")

# Sub-resources of S3's API this gateway does not serve: a clear NotImplemented, never a
# misread request (GET ?torrent must not answer with the object). The bucket settings it does
# not keep are answered as S3 answers for a bucket without them (NO_SETTING, below).
UNSUPPORTED = {"notification", "logging", "torrent", "restore", "select", "analytics", "inventory", "metrics",
               "accelerate", "requestPayment", "intelligent-tiering", "policyStatus"}


READ_BUFSIZE = 256 << 10
WRITERS = 2            # large objects or parts written at once (memory: see Gateway.writing)
WRITER_WAIT_S = 30.0
SMALL_WRITE = 8 << 20  # bytes: a write this small holds little and never waits its turn


class Session:
    """What a request acts as: a Store and the Uploads on the FileSystem of one hedgefs user."""

    def __init__(self, fs: FileSystem, meta_policy: str | None):
        self.fs = fs
        self.store = Store(fs, meta_policy)
        self.uploads = Uploads(self.store)


class Gateway:
    def __init__(self, namenode: str, keys: KeyStore, *, anonymous: bool = False, secure: bool = False,
                 hedge: HedgeConfig | None = None, meta_policy: str | None = None, workers: int = 64,
                 writers: int = WRITERS):
        self.namenode = namenode
        self.keys = keys
        self.anonymous = anonymous
        self.secure = secure
        self.hedge = hedge
        self.meta_policy = meta_policy
        self.pool = concurrent.futures.ThreadPoolExecutor(workers, thread_name_prefix="s3")
        self._writers = asyncio.Semaphore(writers)
        self._sessions: dict[str | None, Session] = {}
        self._lock = threading.Lock()
        self.inflight = 0   # requests being answered (on the event loop only)
        self.moved = 0      # bytes of bodies since the heap was last trimmed (memory.py)

    def session(self, key: AccessKey | None) -> Session:
        """The user's session; in an insecure cluster all share one (everyone is the superuser)."""
        credential = key.credential if key is not None and self.secure else None
        if self.secure and credential is None:
            raise S3Error("AccessDenied", "this key has no hedgefs credential (secure cluster): issue it with "
                          "`hedgefs admin s3-key` and an admin's credential")
        with self._lock:
            session = self._sessions.get(credential)
            if session is None:
                fs = FileSystem(self.namenode, hedge=self.hedge, credentials=credential)
                session = self._sessions[credential] = Session(fs, self.meta_policy)
            return session

    def cached(self, key: AccessKey | None) -> Session | None:
        return self._sessions.get(key.credential if key is not None and self.secure else None)

    @contextlib.asynccontextmanager
    async def writing(self, length: int | None = None):
        """A writer's turn: at most ``writers`` large objects or parts are written at once (each
        writer of the client library holds some 45 MB of stripes, cells and unit sends in flight:
        8 parallel parts made a 1 GiB PUT peak at 400 MB; on 2 cores two writers keep both busy),
        the others' bodies wait in their sockets. Writes under SMALL_WRITE never wait. Soft:
        after WRITER_WAIT_S a write goes ahead anyway, so a slow uploader holds up the others at
        most that long and no client's send times out behind a long one (boto3's and the AWS
        CLI's socket timeout is 60 s)."""
        if length is not None and length < SMALL_WRITE:
            yield
            return
        try:
            await asyncio.wait_for(self._writers.acquire(), WRITER_WAIT_S)
        except TimeoutError:
            yield
            return
        try:
            yield
        finally:
            self._writers.release()

    async def run(self, fn, *args):
        """A blocking call on a worker thread."""
        return await asyncio.get_running_loop().run_in_executor(self.pool, fn, *args)

    def close(self) -> None:
        for session in self._sessions.values():
            session.fs.close()
        self.pool.shutdown(wait=False)

    def stats(self):
        return [s.fs.stats() for s in self._sessions.values()]


def split_path(raw_path: str) -> tuple[str, str]:
    path = raw_path.split("?", 1)[0]
    bucket, _, key = path.lstrip("/").partition("/")
    return urllib.parse.unquote(bucket), urllib.parse.unquote(key)


def raw_query(request: web.Request) -> str:
    return request.raw_path.split("?", 1)[1] if "?" in request.raw_path else ""


async def authenticate(gateway: Gateway, request: web.Request) -> sigv4.Signed | None:
    headers = {k.lower(): v for k, v in request.headers.items()}
    # inline: microseconds of hashing (a key file is read once, on first use)
    signed = sigv4.verify(request.method, request.raw_path, raw_query(request), headers, gateway.keys.secret_of)
    if signed is None and not gateway.anonymous:
        raise S3Error("AccessDenied", "Access Denied: sign the request (anonymous access is off; "
                      "`hedgefs s3 --allow-anonymous` on an insecure cluster)")
    return signed


@web.middleware
async def errors(request: web.Request, handler):
    request_id = uuid.uuid4().hex[:16].upper()
    gateway: Gateway = request.app["gateway"]
    gateway.inflight += 1
    try:
        response = await _answer(request, handler, request_id)
    finally:
        gateway.inflight -= 1
        taken = request.get(CLOSE)
        if taken is not None:   # its body was received past aiohttp's parser (body.py _Receiver)
            taken.drop_rest()   # what no handler read, read and dropped: the client then gets its answer
    if taken is not None:
        response.force_close()   # the next request on this connection cannot be read
    response.headers.setdefault("x-amz-request-id", request_id)
    response.headers.setdefault("Server", "hedgefs")
    gateway.moved += (request.content_length or 0) + (response.content_length or 0)
    if (gateway.moved >= memory.TRIM_AFTER or (request.method == "POST" and "uploadId" in request.query)) \
            and gateway.inflight == 0:
        # once TRIM_AFTER bytes went through (one large transfer or many small ones), and only
        # when the gateway is idle: a trim while others' transfers run hands back the buffers
        # they are about to take again (each then page-faulted and zero-filled afresh)
        gateway.moved = 0
        asyncio.get_running_loop().run_in_executor(gateway.pool, memory.trim)   # not awaited
    return response


async def _answer(request: web.Request, handler, request_id: str) -> web.StreamResponse:
    try:
        return await handler(request)
    except S3Error as err:
        return _error_response(request, err, request_id)
    except HedgefsError as err:
        return _error_response(request, S3Error("InternalError", str(err)), request_id)
    except (web.HTTPException, asyncio.CancelledError, ConnectionError):
        raise
    except Exception as err:   # a bug: the client still gets S3's answer, the log the traceback
        log.exception("s3: %s %s failed", request.method, request.path)
        return _error_response(request, S3Error("InternalError", f"internal error: {type(err).__name__}"),
                               request_id)


def _error_response(request: web.Request, err: S3Error, request_id: str) -> web.Response:
    if not err.resource:
        err.resource = request.path
    if request.method == "HEAD" or err.status == 304:
        return web.Response(status=err.status, headers={"x-amz-error-code": err.code, **err.headers})
    return web.Response(status=err.status, body=err.xml(request_id), content_type="application/xml",
                        headers=err.headers)


# A bucket setting this gateway does not keep: what S3 answers for a bucket that has none (so a
# tool that reads them all, as Terraform does, gets "none"), and 501 NotImplemented to a PUT
# (docs/s3.md: out of scope, and why).
NO_SETTING = {
    "policy": ("NoSuchBucketPolicy", "The bucket policy does not exist"),
    "lifecycle": ("NoSuchLifecycleConfiguration", "The lifecycle configuration does not exist"),
    "encryption": ("ServerSideEncryptionConfigurationNotFoundError", "The server side encryption configuration "
                   "was not found"),
    "website": ("NoSuchWebsiteConfiguration", "The specified bucket does not have a website configuration"),
    "replication": ("ReplicationConfigurationNotFoundError", "The replication configuration was not found"),
    "publicAccessBlock": ("NoSuchPublicAccessBlockConfiguration", "The public access block configuration was "
                          "not found"),
    "object-lock": ("ObjectLockConfigurationNotFoundError", "Object Lock configuration does not exist for this "
                    "bucket"),
    "ownershipControls": ("OwnershipControlsNotFoundError", "The bucket ownership controls were not found"),
}
NO_LOCK = ("retention", "legal-hold")


async def dispatch(request: web.Request) -> web.StreamResponse:
    gateway: Gateway = request.app["gateway"]
    bucket, key = split_path(request.raw_path)
    if request.method == "OPTIONS":   # a CORS preflight: no signature (a browser sends none)
        ctx = objects.Context(gateway, await gateway.run(gateway.session, None), request, None, bucket, key)
        return await buckets.preflight(ctx)
    if request.method == "POST" and bucket and not key and not request.query \
            and request.content_type == "multipart/form-data":
        # a browser's form upload: signed (or not) inside the form, which post.py checks
        ctx = objects.Context(gateway, None, request, None, bucket, key)
        response = await post.form_upload(ctx)
        if "Origin" in request.headers:   # a script's upload from another origin reads the answer
            response.headers.update(await ctx.run(buckets.response_headers, ctx.session.store, bucket, request))
        return response
    signed = await authenticate(gateway, request)
    key_record = gateway.keys.get(signed.access_key) if signed else None
    session = gateway.cached(key_record) or await gateway.run(gateway.session, key_record)
    ctx = objects.Context(gateway, session, request, signed, bucket, key, key_record.user if key_record else None)
    cors = await ctx.run(buckets.response_headers, session.store, bucket, request) if "Origin" in request.headers \
        else {}
    ctx.headers.update(cors)
    try:
        if signed is None:
            await ctx.run(acl.check_anonymous, ctx)
        expected = request.headers.get("x-amz-expected-bucket-owner")
        if expected and bucket and (await ctx.run(session.store.bucket, bucket)).owner != expected:
            raise S3Error("AccessDenied", "Access Denied: the bucket's owner is not x-amz-expected-bucket-owner")
        response = await _handle(ctx)
    except S3Error as err:
        err.headers.update(cors)
        raise
    if cors and not response.prepared:
        response.headers.update(cors)
    return response


async def _handle(ctx: objects.Context) -> web.StreamResponse:
    request, gateway, session, bucket, key = ctx.request, ctx.gateway, ctx.session, ctx.bucket, ctx.key
    query = request.query
    method = request.method
    unsupported = UNSUPPORTED & set(query)
    if unsupported:
        raise S3Error("NotImplemented", f"not implemented here: ?{sorted(unsupported)[0]}")
    if query.get("versionId", "null") != "null":
        raise S3Error("NoSuchVersion", "The specified version does not exist (buckets here are unversioned: "
                      "every object's one version is \"null\").", status=404)
    if bucket and "acl" in query and method in ("GET", "PUT"):
        return await (acl.get_acl(ctx) if method == "GET" else acl.put_acl(ctx))
    if not bucket:
        if method == "GET":
            return await listing.list_buckets(ctx)
        raise S3Error("MethodNotAllowed", "The specified method is not allowed against this resource.")
    if not key:
        return await _bucket(ctx)
    setting = next((name for name in NO_LOCK if name in query), None)
    if setting:
        if method == "GET" or method == "PUT":
            await ctx.run(session.store.stat_object, bucket, key)
        raise S3Error("InvalidRequest", "Bucket is missing Object Lock Configuration")
    if "tagging" in query:
        if method == "GET":
            return await tagging.get_object_tags(ctx)
        if method == "PUT":
            return await tagging.put_object_tags(ctx)
        if method == "DELETE":
            return await tagging.delete_object_tags(ctx)
    if method in ("GET", "HEAD"):
        if "uploadId" in query:
            return await listing.list_parts(ctx)
        if "attributes" in query and method == "GET":
            return await attributes.get_attributes(ctx)
        return await objects.get_object(ctx, head=method == "HEAD")
    if method == "PUT":
        if "uploadId" in query:
            return await parts.upload_part(ctx)
        if "x-amz-copy-source" in request.headers:
            return await objects.copy_object(ctx)
        return await objects.put_object(ctx)
    if method == "DELETE":
        if "uploadId" in query:
            await gateway.run(session.uploads.abort, bucket, query["uploadId"])
        else:
            await gateway.run(session.store.delete_object, bucket, key)
        return web.Response(status=204)
    if method == "POST":
        if "uploads" in query:
            return await parts.create_upload(ctx)
        if "uploadId" in query:
            return await parts.complete_upload(ctx)
    raise S3Error("MethodNotAllowed", "The specified method is not allowed against this resource.")


async def _bucket(ctx: objects.Context) -> web.StreamResponse:
    """The calls on a bucket itself (no key)."""
    request, gateway, session, bucket = ctx.request, ctx.gateway, ctx.session, ctx.bucket
    query, method = request.query, request.method
    setting = next((name for name in NO_SETTING if name in query), None)
    if setting:
        await gateway.run(session.store.bucket, bucket)
        if method == "GET":
            code, message = NO_SETTING[setting]
            raise S3Error(code, message, bucket, status=404)
        if method == "DELETE":
            return web.Response(status=204)
        if setting == "object-lock":
            raise S3Error("InvalidBucketState", "Versioning must be 'Enabled' on the bucket to apply a Object Lock "
                          "configuration (buckets here are unversioned: docs/s3.md)", status=409)
        raise S3Error("NotImplemented", f"?{setting} is not served here (docs/s3.md: out of scope)")
    for name, get, put, delete in (("tagging", buckets.get_tags, buckets.put_tags, buckets.delete_tags),
                                   ("cors", buckets.get_cors, buckets.put_cors, buckets.delete_cors)):
        if name in query:
            handler = {"GET": get, "PUT": put, "DELETE": delete}.get(method)
            if handler is None:
                break
            return await handler(ctx)
    if method == "GET":
        if "uploads" in query:
            return await listing.list_uploads(ctx)
        if "location" in query:
            return await buckets.location(ctx)
        if "versions" in query:
            return await listing.list_versions(ctx)
        if "versioning" in query:
            return await listing.versioning(ctx)
        return await listing.list_objects(ctx)
    if method == "HEAD":
        await gateway.run(session.store.bucket, bucket)
        return web.Response(headers={"x-amz-bucket-region": "us-east-1"})
    if method == "PUT":
        if "versioning" in query:
            raise S3Error("NotImplemented", "versioning is not served here: a bucket's objects have one version "
                          "each (docs/s3.md: out of scope)")
        return await _create_bucket(ctx)
    if method == "DELETE":
        await gateway.run(session.store.delete_bucket, bucket)
        return web.Response(status=204)
    if method == "POST":
        if "delete" in query:
            return await objects.delete_objects(ctx)
    raise S3Error("MethodNotAllowed", "The specified method is not allowed against this resource.")


async def _create_bucket(ctx: objects.Context) -> web.Response:
    """CreateBucket: a private directory (or as its canned ACL says), owned by the key's user.
    Again by its owner with the ACL it has: as us-east-1 answers, 200 and nothing changes; with
    another ACL, or by another user, BucketAlreadyExists."""
    request = ctx.request
    canned = acl.requested(request)
    if request.headers.get("x-amz-bucket-object-lock-enabled", "").lower() == "true":
        raise S3Error("NotImplemented", "object lock is not served here (docs/s3.md: out of scope)")
    where = buckets.location_of(await request.read())

    def create():
        store = ctx.session.store
        try:
            store.create_bucket(ctx.bucket)
        except S3Error as err:
            if err.code != "BucketAlreadyOwnedByYou":
                raise
            status = store.bucket(ctx.bucket)
            wanted = acl.mode_of(canned or "private", True, status.permission)
            if (ctx.user is not None and status.owner not in (ctx.user, "")) \
                    or (wanted is not None and wanted != status.permission & 0o1777):
                raise S3Error("BucketAlreadyExists", "The requested bucket name is not available. The bucket "
                              "namespace is shared by all users of the system.", ctx.bucket) from None
            if where not in ("", "us-east-1"):
                raise   # BucketAlreadyOwnedByYou: S3 answers 200 in us-east-1 only
            return
        path = f"/{ctx.bucket}"
        fs = ctx.session.fs
        if ctx.user is not None and not ctx.gateway.secure:
            try:   # an insecure cluster: the superuser made it; its owner is the key's user
                fs.set_owner(path, ctx.user)
            except HedgefsError as err:
                log.warning("s3: could not make %s the owner of %s: %s", ctx.user, path, err)
        acl.apply(fs, path, canned or "private", True, 0o755)
        if where:
            buckets.change(store, ctx.bucket, location=where)

    await ctx.run(create)
    return web.Response(headers={"Location": f"/{ctx.bucket}"})


async def expect_continue(request: web.Request) -> web.StreamResponse | None:
    """``Expect: 100-continue``: the request is authenticated (an anonymous one checked against
    the mode) before the client is asked for its body; a refusal is the answer instead."""
    if request.headers.get("Expect", "").lower() != "100-continue":
        return web.Response(status=417, text="Expectation Failed")
    gateway: Gateway = request.app["gateway"]
    bucket, key = split_path(request.raw_path)
    try:
        if request.method not in ("OPTIONS", "POST"):
            signed = await authenticate(gateway, request)
            if signed is None:
                session = await gateway.run(gateway.session, None)
                await gateway.run(acl.check_anonymous, objects.Context(gateway, session, request, None, bucket, key))
    except S3Error as err:
        return _error_response(request, err, uuid.uuid4().hex[:16].upper())
    if request.version == aiohttp.HttpVersion11:   # as aiohttp's own handler does
        await request.writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
        request.writer.output_size = 0
    return None


def make_app(gateway: Gateway) -> web.Application:
    # read_bufsize: a request body is buffered up to 2x this before aiohttp pauses the socket
    # (64 KiB by default: a PUT then pauses and resumes its socket every 128 KiB).
    # auto_decompress off: a body sent with Content-Encoding gzip (deflate, br) is stored as sent,
    # as S3 stores it (the encoding is the object's metadata, returned on GET and HEAD)
    app = web.Application(middlewares=[errors], client_max_size=1 << 20,
                          handler_args={"read_bufsize": READ_BUFSIZE, "auto_decompress": False})
    app["gateway"] = gateway
    app.router.add_route("*", "/{tail:.*}", dispatch, expect_handler=expect_continue)
    return app
