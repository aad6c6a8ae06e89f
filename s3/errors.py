"""S3's errors: a code, an HTTP status and a one-line message, rendered as S3's XML error body.

Every failure a handler meets becomes one of these (``from_hedgefs`` maps the client library's
errors), so a client always gets the code its SDK knows (NoSuchKey, BucketNotEmpty, ...) and
never a traceback.
"""

from __future__ import annotations

from xml.sax.saxutils import escape

from hedgefs.client.errors import (
    AlreadyExists,
    DataUnavailable,
    HedgefsError,
    IsADirectory,
    NotAllowed,
    NotFound,
    Unavailable,
    UsageError,
)

STATUS = {
    "AccessDenied": 403,
    "AccessForbidden": 403,
    "BadRequest": 400,
    "BucketAlreadyExists": 409,
    "AuthorizationQueryParametersError": 400,
    "AuthorizationHeaderMalformed": 400,
    "BadDigest": 400,
    "BucketAlreadyOwnedByYou": 409,
    "BucketNotEmpty": 409,
    "EntityTooSmall": 400,
    "ExpiredToken": 400,
    "IncompleteBody": 400,
    "InternalError": 500,
    "InvalidAccessKeyId": 403,
    "InvalidArgument": 400,
    "InvalidBucketName": 400,
    "InvalidDigest": 400,
    "InvalidPart": 400,
    "InvalidPartNumber": 416,
    "InvalidPartOrder": 400,
    "InvalidRange": 416,
    "InvalidTag": 400,
    "InvalidRequest": 400,
    "KeyTooLongError": 400,
    "MalformedTrailerError": 400,
    "MalformedXML": 400,
    "MetadataTooLarge": 400,
    "MethodNotAllowed": 405,
    "MissingContentLength": 411,
    "NoSuchBucket": 404,
    "NoSuchCORSConfiguration": 404,
    "NoSuchKey": 404,
    "NoSuchTagSet": 404,
    "NoSuchUpload": 404,
    "NotImplemented": 501,
    "NotModified": 304,
    "PreconditionFailed": 412,
    "RequestTimeTooSkewed": 403,
    "ServiceUnavailable": 503,
    "SignatureDoesNotMatch": 403,
    "XAmzContentSHA256Mismatch": 400,
}


class S3Error(Exception):
    def __init__(self, code: str, message: str, resource: str = "", status: int | None = None,
                 headers: dict | None = None):
        super().__init__(message)
        self.headers = headers or {}
        self.code = code
        self.message = message
        self.resource = resource
        self.status = status or STATUS.get(code, 400)

    def xml(self, request_id: str = "") -> bytes:
        return (f'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>{self.code}</Code>'
                f"<Message>{escape(self.message)}</Message><Resource>{escape(self.resource)}</Resource>"
                f"<RequestId>{request_id}</RequestId></Error>").encode()


def from_hedgefs(err: HedgefsError, resource: str, missing: str = "NoSuchKey") -> S3Error:
    """The S3 error for a library error met while serving ``resource``; ``missing`` is the code
    a NotFound means here (NoSuchKey for an object, NoSuchBucket for a bucket)."""
    message = str(err)
    if isinstance(err, NotFound):
        return S3Error(missing, message, resource)
    if isinstance(err, NotAllowed):
        return S3Error("AccessDenied", message, resource)
    if isinstance(err, (AlreadyExists, IsADirectory)) or "is a directory" in message or "not a directory" in message:
        # a key where the namespace has a directory, or below a key that is a file: S3 allows
        # both, a filesystem neither (docs/s3.md: Names)
        return S3Error("InvalidRequest", f"{message} (a key cannot also be a prefix of other keys here)", resource,
                       status=409)
    if isinstance(err, (Unavailable, DataUnavailable)):
        return S3Error("ServiceUnavailable", message, resource)
    if isinstance(err, UsageError):
        return S3Error("InvalidArgument", message, resource)
    return S3Error("InternalError", message, resource)
