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
    DirectoryNotEmpty,
    FileChanged,
    HedgefsError,
    IsADirectory,
    NotADirectory,
    NotAllowed,
    NotFound,
    Unavailable,
    UsageError,
    translate,
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


# A key where the namespace has a directory, or below a key that is a file: S3 allows both, a
# filesystem neither (docs/s3.md: Names).
_PREFIX = ("InvalidRequest", " (a key cannot also be a prefix of other keys here)", 409)

# The S3 code (with a note to the message, and a status other than the code's) of each library
# error class; the most specific class wins (client/errors.py ``translate``). NotFound's code is
# the caller's (``missing``).
_CODES = {
    NotFound: None,
    NotAllowed: ("AccessDenied", "", None),
    AlreadyExists: _PREFIX,
    IsADirectory: _PREFIX,
    NotADirectory: _PREFIX,
    DirectoryNotEmpty: _PREFIX,
    Unavailable: ("ServiceUnavailable", "", None),
    DataUnavailable: ("ServiceUnavailable", "", None),
    FileChanged: ("ServiceUnavailable", " (the object was replaced while it was read: try again)", None),
    UsageError: ("InvalidArgument", "", None),
}


def from_hedgefs(err: HedgefsError, resource: str, missing: str = "NoSuchKey") -> S3Error:
    """The S3 error for a library error met while serving ``resource``; ``missing`` is the code
    a NotFound means here (NoSuchKey for an object, NoSuchBucket for a bucket)."""
    code, note, status = translate(err, _CODES, ("InternalError", "", None)) or (missing, "", None)
    return S3Error(code, f"{err}{note}", resource, status=status)
