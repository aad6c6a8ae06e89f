"""S3 ACLs mapped onto hedgefs modes, where they fit; the "other" class of the mode is everyone else.

hedgefs permissions (owner, group, mode bits) decide who may do what; an ACL is kept as the mode
bits it means. The owner of a bucket is the owner of its directory, and of every object in it
(S3's default object ownership, "bucket owner enforced"):

    canned ACL            a bucket (directory)    an object (file)
    private               0700                    0600
    public-read           0755                    0644
    public-read-write     0777                    0666
    bucket-owner-read,
    bucket-owner-full-control                     unchanged (one owner here)
    authenticated-read, aws-exec-read, log-delivery-write, grants to other users: 501 NotImplemented
                          (no class of users between the owner and everyone)

GetBucketAcl/GetObjectAcl answer from the mode: the owner FULL_CONTROL (unless the mode gives
the owner nothing), AllUsers READ for o+r, AllUsers WRITE for o+w. A PutBucketAcl/PutObjectAcl
body is read the same way back; one that grants nothing at all is mode 000 (the owner may still
set an ACL again, as S3's owner may). A
bucket made through the gateway is private (0700), as S3's are; an object gets hedgefs's 0644
unless the PUT names an ACL (the mode is set right after the write commits).

Anonymous requests (``--allow-anonymous``, an insecure cluster) are served as POSIX serves the
"other" class: reading an object needs x on its directories and r on it, listing a bucket r on
it, writing or deleting an object w and x on its directory; nothing else (ACLs, buckets,
multipart uploads) is served to them. A signed request acts as its key's hedgefs user, whose
permissions the NameNode checks (in an insecure cluster everyone is the superuser).
"""

from __future__ import annotations

from aiohttp import web

from hedgefs.client.errors import HedgefsError, NotFound
from hedgefs.s3 import xmlout
from hedgefs.s3.errors import S3Error, from_hedgefs

DIR_MODES = {"private": 0o700, "public-read": 0o755, "public-read-write": 0o777}
FILE_MODES = {"private": 0o600, "public-read": 0o644, "public-read-write": 0o666}
NO_GRANTS = "no grants"   # a PutAcl body granting nothing, not even to the owner: mode 000
UNCHANGED = {"bucket-owner-read", "bucket-owner-full-control"}
ALL_USERS = "http://acs.amazonaws.com/groups/global/AllUsers"
_XSI = "http://www.w3.org/2001/XMLSchema-instance"
# the query parameters that name another resource than a bucket's listing or an object's bytes
SUBRESOURCES = {"acl", "attributes", "cors", "delete", "encryption", "legal-hold", "lifecycle", "location", "logging",
                "notification", "object-lock", "ownershipControls", "policy", "policyStatus", "publicAccessBlock",
                "replication", "restore", "retention", "select", "tagging", "torrent", "uploadId", "uploads",
                "versioning", "versions", "website"}
GRANT_HEADERS = ("x-amz-grant-read", "x-amz-grant-write", "x-amz-grant-read-acp", "x-amz-grant-write-acp",
                 "x-amz-grant-full-control")


def requested(request: web.Request) -> str | None:
    """The canned ACL a write asks for (x-amz-acl), checked; None if none. Grant headers are
    served only as far as they say what a canned ACL does."""
    canned = request.headers.get("x-amz-acl")
    grants = [h for h in GRANT_HEADERS if h in request.headers]
    if grants:
        raise S3Error("NotImplemented", f"{grants[0]} is not served here: ACLs are hedgefs modes, grants to "
                      "users or groups have no place in them (use a canned ACL: private, public-read, "
                      "public-read-write)")
    if canned is None:
        return None
    return check_canned(canned)


def check_canned(canned: str) -> str:
    canned = canned.strip().lower()
    if canned not in DIR_MODES and canned not in UNCHANGED:
        raise S3Error("NotImplemented", f"ACL {canned!r} is not served here: only private, public-read, "
                      "public-read-write and bucket-owner-* (ACLs are hedgefs modes: docs/s3.md)")
    return canned


def mode_of(canned: str | None, is_dir: bool, current: int) -> int | None:
    """The mode a canned ACL gives (None: no change); a directory keeps its sticky bit."""
    if canned is None or canned in UNCHANGED:
        return None
    if canned == NO_GRANTS:
        return current & 0o1000
    if is_dir:
        return DIR_MODES[canned] | (current & 0o1000)
    return FILE_MODES[canned]


def apply(fs, path: str, canned: str | None, is_dir: bool, current: int = 0) -> None:
    """Set the mode ``canned`` means on ``path`` (blocking)."""
    mode = mode_of(canned, is_dir, current)
    if mode is None or mode == current & 0o1777:
        return
    try:
        fs.set_permission(path, mode)
    except HedgefsError as err:
        raise from_hedgefs(err, path) from None


# ---------------------------------------------------------------------- documents

def owner_xml(owner: str) -> str:
    return f"<Owner>{xmlout.element('ID', owner)}{xmlout.element('DisplayName', owner)}</Owner>"


def policy_xml(owner: str, mode: int) -> bytes:
    grants = []   # everyone's first, then the owner's (the order S3 lists a canned ACL's grants in)
    group = f'<Grantee xmlns:xsi="{_XSI}" xsi:type="Group">{xmlout.element("URI", ALL_USERS)}</Grantee>'
    if mode & 0o004:
        grants.append((group, "READ"))
    if mode & 0o002:
        grants.append((group, "WRITE"))
    if mode & 0o700:   # (000: an ACL that granted nothing, not even to the owner)
        grants.append((f'<Grantee xmlns:xsi="{_XSI}" xsi:type="CanonicalUser">{xmlout.element("ID", owner)}'
                       f'{xmlout.element("DisplayName", owner)}</Grantee>', "FULL_CONTROL"))
    body = "".join(f"<Grant>{grantee}{xmlout.element('Permission', p)}</Grant>" for grantee, p in grants)
    return xmlout.document("AccessControlPolicy", owner_xml(owner) + f"<AccessControlList>{body}</AccessControlList>")


def canned_of_body(body: bytes, owner: str) -> str:
    """The canned ACL a PutBucketAcl/PutObjectAcl body amounts to (NotImplemented if none)."""
    tree = xmlout.parse(body, "AccessControlPolicy")
    acl = xmlout.children(tree, "AccessControlList")
    everyone, owner_granted = set(), False
    for grant in xmlout.children(acl[0], "Grant") if acl else []:
        grantee = xmlout.children(grant, "Grantee")
        permission = xmlout.text(grant, "Permission")
        uri = xmlout.text(grantee[0], "URI") if grantee else ""
        who = xmlout.text(grantee[0], "ID") if grantee else ""
        if uri == ALL_USERS and permission in ("READ", "WRITE"):
            everyone.add(permission)
        elif not uri and who in (owner, "") and permission == "FULL_CONTROL":
            owner_granted = True
        else:
            raise S3Error("NotImplemented", f"an ACL grant of {permission} to {uri or who or 'someone'} has no "
                          "hedgefs mode: only the owner's FULL_CONTROL and AllUsers READ/WRITE are served")
    if everyone == {"READ", "WRITE"}:
        return "public-read-write"
    if everyone == {"READ"}:
        return "public-read"
    if everyone:
        raise S3Error("NotImplemented", "AllUsers WRITE without READ has no hedgefs mode here")
    return "private" if owner_granted else NO_GRANTS


# ---------------------------------------------------------------------- handlers

def _target(ctx):
    """(the path whose mode is the ACL, its status, the owner): an object's file or a bucket's directory."""
    bucket = ctx.store.bucket(ctx.bucket)
    if ctx.key:
        status = ctx.store.stat_object(ctx.bucket, ctx.key)
        return status.path, status, bucket.owner or "hedgefs"
    return bucket.path, bucket, bucket.owner or "hedgefs"


async def get_acl(ctx) -> web.Response:
    _path, status, owner = await ctx.run(_target, ctx)
    return web.Response(body=policy_xml(owner, status.permission), content_type="application/xml")


async def put_acl(ctx) -> web.Response:
    body = await ctx.request.read()

    def put():
        path, status, owner = _target(ctx)
        canned = requested(ctx.request)
        if canned is None and body.strip():
            canned = canned_of_body(body, owner)
        if canned is None:
            raise S3Error("MissingSecurityHeader", "Your request was missing a required header: x-amz-acl or an "
                          "AccessControlPolicy body")
        apply(ctx.session.fs, path, canned, status.is_dir, status.permission)

    await ctx.run(put)
    return web.Response()


# ---------------------------------------------------------------------- anonymous requests

def _other(status, bits: int) -> bool:
    return status.permission & bits == bits


def check_anonymous(ctx) -> None:
    """May an anonymous request do this? (blocking: stats the bucket and the object) AccessDenied if not."""
    denied = S3Error("AccessDenied", "Access Denied (an anonymous request: the bucket's or object's ACL, its "
                     "hedgefs mode, does not let everyone do this)")
    request, query = ctx.request, ctx.request.query
    if not ctx.bucket or "x-amz-copy-source" in request.headers:
        raise denied
    fs = ctx.session.fs
    try:
        bucket = fs.stat(f"/{ctx.bucket}")
    except NotFound:
        raise S3Error("NoSuchBucket", "The specified bucket does not exist", ctx.bucket) from None
    except HedgefsError as err:
        raise from_hedgefs(err, ctx.bucket, "NoSuchBucket") from None
    method = request.method
    if set(query) & SUBRESOURCES:
        raise denied
    if not ctx.key:
        if method in ("GET", "HEAD") and _other(bucket, 0o004):
            return
        raise denied
    parts = ctx.key.rstrip("/").split("/")
    directory = bucket
    for i in range(len(parts) - 1):   # x on each directory down to the object's
        if not _other(directory, 0o001):
            raise denied
        try:
            directory = fs.stat(f"/{ctx.bucket}/" + "/".join(parts[:i + 1]))
        except NotFound:
            if method in ("GET", "HEAD"):
                raise S3Error("NoSuchKey", "The specified key does not exist.", ctx.key) from None
            break   # a new object's directories: made by the write, under one that was checked
        except HedgefsError as err:
            raise from_hedgefs(err, ctx.key) from None
    if not _other(directory, 0o001):
        raise denied
    if method in ("GET", "HEAD"):
        try:
            status = fs.stat(f"/{ctx.bucket}/{ctx.key.rstrip('/')}")
        except NotFound:
            raise S3Error("NoSuchKey", "The specified key does not exist.", ctx.key) from None
        except HedgefsError as err:
            raise from_hedgefs(err, ctx.key) from None
        if _other(status, 0o004):
            return
        raise denied
    if method in ("PUT", "DELETE") and _other(directory, 0o002):
        return
    raise denied
