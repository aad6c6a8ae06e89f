"""S3's checksums, pure: the five algorithms, a multipart object's COMPOSITE and FULL_OBJECT
checksums (against the values Ceph's s3-tests hold for three 5 MiB parts of 'A', 'B' and 'C',
computed by RGW's own code), and aws-chunked trailers, unsigned and signed."""

import hashlib
import hmac

import pytest

from hedgefs.s3 import checksums, sigv4
from hedgefs.s3.errors import S3Error

MiB = 1 << 20
PARTS = [b"A" * 5 * MiB, b"B" * 5 * MiB, b"C" * 5 * MiB]
# s3-tests test_multipart_use_cksum_helper_*: each part's checksum, then the object's
RGW = {
    "CRC32": (["JRTCyQ==", "QoZTGg==", "YAgjqw=="], "FULL_OBJECT", "WgDhBQ=="),
    "CRC32C": (["MDaLrw==", "TH4EZg==", "Z7mBIQ=="], "FULL_OBJECT", "xU+Krw=="),
    "CRC64NVME": (["L/E4WYn8v98=", "xW1l19VobYM=", "cK5MnNaWrW4="], "FULL_OBJECT", "i+6LR0y3eFo="),
    "SHA1": (["iIaTCGbm+vdVjNqIMF2S0T7ibMk=", "LS/TJ32bAVKEwRu+sE3X7awh/lk=", "6DDwovUaHwrKNXDMzOGbuvj9kxI="],
             "COMPOSITE", "sizjvY4eud3MrcHdZM3cQ/ol39o=-3"),
    "SHA256": (["275VF5loJr1YYawit0XSHREhkFXYkkPKGuoK0x9VKxI=", "mrHwOfjTL5Zwfj74F05HOQGLdUb7E5szdCbxgUSq6NM=",
                "Vw7oB/nKQ5xWb3hNgbyfkvDiivl+U+/Dft48nfJfDow="], "COMPOSITE",
               "uWBwpe1dxI4Vw8Gf0X9ynOdw/SS6VBzfWm9giiv1sf4=-3"),
}


@pytest.mark.parametrize("algorithm", checksums.ALGORITHMS)
def test_parts_and_objects_as_rgw_computes_them(algorithm):
    parts, kind, whole = RGW[algorithm]
    assert [checksums.of(algorithm, p) for p in PARTS] == parts
    raw = [checksums.decode(algorithm, p) for p in parts]
    assert checksums.of_object(algorithm, kind, list(zip(raw, map(len, PARTS)))) == whole
    if kind == "FULL_OBJECT":   # the combined CRC is the CRC of the whole object
        assert whole == checksums.of(algorithm, b"".join(PARTS))


def test_fed_in_pieces_is_the_same_as_whole():
    data = bytes(range(256)) * 4099
    for algorithm in checksums.ALGORITHMS:
        h = checksums.Hasher(algorithm)
        for i in range(0, len(data), 1000):
            h.update(memoryview(data)[i:i + 1000])
        assert checksums.encode(h.digest()) == checksums.of(algorithm, data)


def test_a_bad_value_decodes_to_nothing_and_types_are_checked():
    assert checksums.decode("CRC32", "bad") is None
    assert checksums.decode("CRC32", checksums.of("SHA256", b"x")) is None   # a digest of another size
    assert checksums.valid_type("CRC32", None) == "COMPOSITE" and checksums.valid_type("CRC64NVME", "") == "FULL_OBJECT"
    for algorithm, kind in [("SHA256", "FULL_OBJECT"), ("CRC64NVME", "COMPOSITE"), ("CRC32", "PARTIAL")]:
        with pytest.raises(S3Error):
            checksums.valid_type(algorithm, kind)
    with pytest.raises(S3Error):
        checksums.algorithm_of("md5")


def _signed():
    key = sigv4.signing_key("secret", "20261206", "us-east-1", "s3")
    return sigv4.Signed("AK", sigv4.STREAMING_TRAILER, "seed" * 16, "20261206T000000Z",
                        "20261206/us-east-1/s3/aws4_request", key)


def _chunk(signed, previous: str, piece: bytes) -> tuple[str, bytes]:
    text = "\n".join(["AWS4-HMAC-SHA256-PAYLOAD", signed.amz_date, signed.scope, previous, sigv4.EMPTY_SHA256,
                      hashlib.sha256(piece).hexdigest()])
    signature = hmac.new(signed.key, text.encode(), hashlib.sha256).hexdigest()
    return signature, f"{len(piece):x};chunk-signature={signature}\r\n".encode() + piece + (b"\r\n" if piece else b"")


def test_an_unsigned_trailer_is_read_in_any_pieces():
    body = b"5\r\nhello\r\n6\r\n world\r\n0\r\nx-amz-checksum-crc32:" + checksums.of("CRC32", b"hello world").encode() \
        + b"\r\n\r\n"
    for cut in range(1, len(body)):
        decoder = sigv4.ChunkedBody(None, sigv4.STREAMING_UNSIGNED_TRAILER)
        out = decoder.feed(body[:cut]) + decoder.feed(body[cut:])
        decoder.finish()
        assert b"".join(out) == b"hello world"
        assert decoder.trailers == {"x-amz-checksum-crc32": checksums.of("CRC32", b"hello world")}


def test_a_signed_trailer_is_checked():
    signed = _signed()
    previous, body = signed.signature, b""
    for piece in (b"hello", b""):
        previous, encoded = _chunk(signed, previous, piece)
        body += encoded
    value = checksums.of("CRC32", b"hello")
    line = f"x-amz-checksum-crc32:{value}\n"
    text = "\n".join(["AWS4-HMAC-SHA256-TRAILER", signed.amz_date, signed.scope, previous,
                      hashlib.sha256(line.encode()).hexdigest()])
    good = hmac.new(signed.key, text.encode(), hashlib.sha256).hexdigest()
    for signature, ok in ((good, True), ("0" * 64, False)):
        decoder = sigv4.ChunkedBody(signed)
        assert decoder.feed(body + line.replace("\n", "\r\n").encode()
                            + f"x-amz-trailer-signature:{signature}\r\n\r\n".encode()) == [b"hello"]
        if ok:
            decoder.finish()
            assert decoder.trailers["x-amz-checksum-crc32"] == value
        else:
            with pytest.raises(S3Error) as err:
                decoder.finish()
            assert err.value.code == "SignatureDoesNotMatch"


def test_a_body_cut_before_its_final_chunk_or_with_a_bad_trailer_line_is_refused():
    decoder = sigv4.ChunkedBody(None, sigv4.STREAMING_UNSIGNED_TRAILER)
    decoder.feed(b"5\r\nhello\r\n")
    with pytest.raises(S3Error) as err:
        decoder.finish()
    assert err.value.code == "IncompleteBody"
    decoder = sigv4.ChunkedBody(None, sigv4.STREAMING_UNSIGNED_TRAILER)
    decoder.feed(b"0\r\nno colon here\r\n\r\n")
    with pytest.raises(S3Error) as err:
        decoder.finish()
    assert err.value.code == "MalformedTrailerError"

