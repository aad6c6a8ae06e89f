"""SigV4 on the gateway's side, against the worked examples of AWS's own pages ("Authenticating
Requests: Using the Authorization Header" GET /test.txt, "... Query Parameters" presigned GET,
"... Transferring Payload in Multiple Chunks" 66560 bytes of 'a' in chunks of 64 KiB + 1 KiB)."""

import datetime

import pytest

from hedgefs.s3 import sigv4
from hedgefs.s3.errors import S3Error

SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
NOW = datetime.datetime(2013, 5, 24, 0, 5, tzinfo=datetime.timezone.utc)
CRED = "AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request"


def secret_of(key):
    return SECRET if key == "AKIAIOSFODNN7EXAMPLE" else None


def get_headers(signature="f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41"):
    return {"host": "examplebucket.s3.amazonaws.com", "range": "bytes=0-9", "x-amz-date": "20130524T000000Z",
            "x-amz-content-sha256": sigv4.EMPTY_SHA256,
            "authorization": f"AWS4-HMAC-SHA256 Credential={CRED},SignedHeaders=host;range;x-amz-content-sha256;"
                             f"x-amz-date,Signature={signature}"}


PRESIGNED = ("X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIAIOSFODNN7EXAMPLE%2F20130524%2Fus-east-1%2Fs3%2F"
             "aws4_request&X-Amz-Date=20130524T000000Z&X-Amz-Expires=86400&X-Amz-SignedHeaders=host&X-Amz-Signature="
             "aeeed9bbccd4d02ee5c0109b86d86835f995330da4c265957d157751f604d404")

CHUNKED_HEADERS = {
    "host": "s3.amazonaws.com", "x-amz-date": "20130524T000000Z", "x-amz-storage-class": "REDUCED_REDUNDANCY",
    "x-amz-content-sha256": sigv4.STREAMING, "content-encoding": "aws-chunked",
    "x-amz-decoded-content-length": "66560", "content-length": "66824",
    "authorization": f"AWS4-HMAC-SHA256 Credential={CRED},SignedHeaders=content-encoding;content-length;host;"
                     "x-amz-content-sha256;x-amz-date;x-amz-decoded-content-length;x-amz-storage-class,"
                     "Signature=4f232c4386841ef735655705268965c44a0e4690baa4adea153f7db9fa80a0a9"}
CHUNKED_BODY = (
    b"10000;chunk-signature=ad80c730a21e5b8d04586a2213dd63b9a0e99e0e2307b0ade35a65485a288648\r\n" + b"a" * 65536
    + b"\r\n400;chunk-signature=0055627c9e194cb4542bae2aa5492e3c1575bbb81b612b7d234b86a503ef5497\r\n" + b"a" * 1024
    + b"\r\n0;chunk-signature=b6c6ea8a5354eaf15b3cb7646744f4275b71ea724fed81ceb9323e279d449df9\r\n\r\n")


def test_the_header_example_verifies():
    signed = sigv4.verify("GET", "/test.txt", "", get_headers(), secret_of, NOW)
    assert signed.access_key == "AKIAIOSFODNN7EXAMPLE"


def test_a_wrong_signature_or_key_is_refused_with_its_code():
    with pytest.raises(S3Error) as err:
        sigv4.verify("GET", "/test.txt", "", get_headers("0" * 64), secret_of, NOW)
    assert err.value.code == "SignatureDoesNotMatch"
    with pytest.raises(S3Error) as err:
        sigv4.verify("GET", "/other.txt", "", get_headers(), secret_of, NOW)
    assert err.value.code == "SignatureDoesNotMatch"
    with pytest.raises(S3Error) as err:
        sigv4.verify("GET", "/test.txt", "", get_headers(), lambda key: None, NOW)
    assert err.value.code == "InvalidAccessKeyId"


def test_a_request_from_too_long_ago_is_refused():
    later = NOW + datetime.timedelta(hours=1)
    with pytest.raises(S3Error) as err:
        sigv4.verify("GET", "/test.txt", "", get_headers(), secret_of, later)
    assert err.value.code == "RequestTimeTooSkewed"


def test_the_presigned_example_verifies_until_it_expires():
    host = {"host": "examplebucket.s3.amazonaws.com"}
    assert sigv4.verify("GET", "/test.txt", PRESIGNED, host, secret_of, NOW).payload == sigv4.UNSIGNED
    with pytest.raises(S3Error) as err:
        sigv4.verify("GET", "/test.txt", PRESIGNED, host, secret_of, NOW + datetime.timedelta(days=2))
    assert err.value.code == "AccessDenied" and "expired" in err.value.message


@pytest.mark.parametrize("date", ["20130524T000000", "2013-05-24T00:00:00Z", "20130524T0000000Z", "2013052AT000000Z",
                                  "20131324T000000Z", "20130524T250000Z", "20130524T00000\u00b2Z", ""])
def test_a_malformed_date_is_refused_with_one_line(date):
    headers = dict(get_headers(), **{"x-amz-date": date})
    with pytest.raises(S3Error) as err:
        sigv4.verify("GET", "/test.txt", "", headers, secret_of, NOW)
    assert err.value.code == "AccessDenied" and "\n" not in err.value.message


def test_a_secret_changed_on_disk_signs_with_the_new_key():
    """The day's signing key is derived once per (secret, date, region, service): a key whose
    secret was replaced verifies with the new secret, never the cached key of the old one."""
    assert sigv4.verify("GET", "/test.txt", "", get_headers(), secret_of, NOW)
    with pytest.raises(S3Error) as err:
        sigv4.verify("GET", "/test.txt", "", get_headers(), lambda key: SECRET + "x", NOW)
    assert err.value.code == "SignatureDoesNotMatch"
    assert sigv4.signing_key(SECRET, "20130524", "us-east-1", "s3") == sigv4.signing_key.__wrapped__(
        SECRET, "20130524", "us-east-1", "s3")


def test_no_signature_is_anonymous():
    assert sigv4.verify("GET", "/test.txt", "", {"host": "h"}, secret_of, NOW) is None


@pytest.mark.parametrize("piece", [1, 7, 777, 65536, 1 << 20])
def test_the_chunked_example_decodes_in_pieces_of_any_size(piece):
    signed = sigv4.verify("PUT", "/examplebucket/chunkObject.txt", "", CHUNKED_HEADERS, secret_of, NOW)
    body = sigv4.ChunkedBody(signed)
    out = []
    for i in range(0, len(CHUNKED_BODY), piece):
        out += body.feed(CHUNKED_BODY[i:i + piece])
    body.finish()
    assert b"".join(out) == b"a" * 66560


def test_a_tampered_chunk_or_a_cut_body_is_refused():
    signed = sigv4.verify("PUT", "/examplebucket/chunkObject.txt", "", CHUNKED_HEADERS, secret_of, NOW)
    tampered = CHUNKED_BODY.replace(b"a" * 1024, b"b" + b"a" * 1023)
    with pytest.raises(S3Error) as err:
        sigv4.ChunkedBody(signed).feed(tampered)
    assert err.value.code == "SignatureDoesNotMatch"
    cut = sigv4.ChunkedBody(signed)
    cut.feed(CHUNKED_BODY[:66000])
    with pytest.raises(S3Error) as err:
        cut.finish()
    assert err.value.code == "IncompleteBody"


@pytest.mark.parametrize("piece", [1, 777, 65536])
def test_a_tampered_chunk_fed_in_pieces_is_refused_before_the_body_ends(piece):
    """Payload is handed on as it comes (views, no copy); its chunk's signature is checked at
    the chunk's end, so a tampered chunk fails in feed, never at finish, whatever the pieces."""
    signed = sigv4.verify("PUT", "/examplebucket/chunkObject.txt", "", CHUNKED_HEADERS, secret_of, NOW)
    tampered = CHUNKED_BODY.replace(b"a" * 1024, b"a" * 1023 + b"b")
    body = sigv4.ChunkedBody(signed)
    with pytest.raises(S3Error) as err:
        for i in range(0, len(tampered), piece):
            body.feed(tampered[i:i + piece])
    assert err.value.code == "SignatureDoesNotMatch"


def test_a_chunk_header_without_its_crlf_or_too_long_is_refused():
    for wire in (b"5\nhello\r\n0\r\n\r\n", b"5\r\nhelloXY0\r\n\r\n", b"f" * 5000):
        body = sigv4.ChunkedBody(None, sigv4.STREAMING_UNSIGNED_TRAILER)
        with pytest.raises(S3Error) as err:
            for i in range(0, len(wire), 3):
                body.feed(wire[i:i + 3])
            body.finish()
        assert err.value.code == "IncompleteBody", wire[:20]


def test_unsigned_chunks_with_a_trailer_decode():
    """STREAMING-UNSIGNED-PAYLOAD-TRAILER: plain chunks, then the checksum trailer (not checked)."""
    signed = sigv4.Signed("K", sigv4.STREAMING_UNSIGNED_TRAILER, "", "", "", b"")
    body = sigv4.ChunkedBody(signed)
    wire = b"5\r\nhello\r\n6\r\n world\r\n0\r\nx-amz-checksum-crc32:DUoRhQ==\r\n\r\n"
    out = [piece for i in range(0, len(wire), 3) for piece in body.feed(wire[i:i + 3])]
    body.finish()
    assert b"".join(out) == b"hello world"
