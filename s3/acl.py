"""ACL calls, answered as S3-compatible stores without ACLs answer them (MinIO, SeaweedFS).

hedgefs permissions (owner, group, mode bits) decide who may do what; S3 ACLs are not kept. So:

    GetBucketAcl, GetObjectAcl   the canned "private" ACL: the owner (the hedgefs owner of the
                                 directory or file) has FULL_CONTROL, nobody else anything
    PutBucketAcl, PutObjectAcl   accepted when they ask for exactly that ("private", or a body
                                 granting only the owner FULL_CONTROL): nothing changes;
                                 anything else is 501 NotImplemented, never silently ignored
    x-amz-acl on PutObject, CreateBucket, CreateMultipartUpload, CopyObject: the same rule

Tools send ``x-amz-acl: private`` or ``bucket-owner-full-control`` (the AWS CLI's ``--acl``,
backup tools) and read the ACL back; that works. A public-read grant does not, by name.
"""

from __future__ import annotations

from aiohttp import web

from hedgefs.s3 import xmlout
from hedgefs.s3.errors import S3Error

# One owner here: the bucket's owner is every object's (hedgefs has no cross-account ownership).
ALLOWED_CANNED = {"private", "bucket-owner-full-control"}
_XSI = "http://www.w3.org/2001/XMLSchema-instance"
GRANT_HEADERS = ("x-amz-grant-read", "x-amz-grant-write", "x-amz-grant-read-acp", "x-amz-grant-write-acp",
                 "x-amz-grant-full-control")


def check_request(request: web.Request) -> None:
    """The ACL a write asks for (x-amz-acl, x-amz-grant-*): only the private one is served."""
    canned = request.headers.get("x-amz-acl")
    if canned is not None and canned.strip().lower() not in ALLOWED_CANNED:
        raise S3Error("NotImplemented", f"ACL {canned!r} is not served here: only 'private' (hedgefs permissions "
                      "decide access; see docs/s3.md)")
    grants = [h for h in GRANT_HEADERS if h in request.headers]
    if grants:
        raise S3Error("NotImplemented", f"{grants[0]} is not served here: ACL grants are not kept (only 'private')")


def owner_xml(owner: str) -> str:
    return f"<Owner>{xmlout.element('ID', owner)}{xmlout.element('DisplayName', owner)}</Owner>"


def policy_xml(owner: str) -> bytes:
    grant = (f'<Grant><Grantee xmlns:xsi="{_XSI}" xsi:type="CanonicalUser">{xmlout.element("ID", owner)}'
             f'{xmlout.element("DisplayName", owner)}</Grantee><Permission>FULL_CONTROL</Permission></Grant>')
    return xmlout.document("AccessControlPolicy", owner_xml(owner) + f"<AccessControlList>{grant}</AccessControlList>")


def check_policy_body(body: bytes, owner: str) -> None:
    """A PutBucketAcl/PutObjectAcl body: accepted if it grants FULL_CONTROL to the owner only."""
    tree = xmlout.parse(body, "AccessControlPolicy")
    acl = xmlout.children(tree, "AccessControlList")
    grants = xmlout.children(acl[0], "Grant") if acl else []
    for grant in grants:
        grantee = xmlout.children(grant, "Grantee")
        who = xmlout.text(grantee[0], "ID") if grantee else ""
        if xmlout.text(grant, "Permission") != "FULL_CONTROL" or who not in (owner, ""):
            raise S3Error("NotImplemented", "ACL grants are not kept here: only the owner's FULL_CONTROL "
                          "(the 'private' ACL) is accepted")
        if grantee and not xmlout.children(grantee[0], "ID"):
            raise S3Error("NotImplemented", "ACL grants to groups or e-mail addresses are not kept here")


async def get_acl(ctx) -> web.Response:
    owner = await ctx.run(_owner, ctx)
    return web.Response(body=policy_xml(owner), content_type="application/xml")


async def put_acl(ctx) -> web.Response:
    body = await ctx.request.read()
    owner = await ctx.run(_owner, ctx)
    check_request(ctx.request)
    if body.strip():
        check_policy_body(body, owner)
    return web.Response()


def _owner(ctx) -> str:
    """The hedgefs owner of the bucket's directory or the object's file (checks both exist)."""
    if ctx.key:
        return ctx.store.stat_object(ctx.bucket, ctx.key).owner or "hedgefs"
    return ctx.store.bucket(ctx.bucket).owner or "hedgefs"
