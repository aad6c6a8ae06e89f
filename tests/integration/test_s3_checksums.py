"""x-amz-checksum-* through the gateway, as today's SDKs send them: in a header (boto3's default
over HTTP, with a signed payload), in an aws-chunked trailer (boto3's default over HTTPS:
STREAMING-UNSIGNED-PAYLOAD-TRAILER; the Java and Go SDKs' signed trailers), on PUT, UploadPart
and CompleteMultipartUpload, returned with ChecksumMode (botocore then checks the GET's bytes
against it), and a corrupted checksum is BadDigest with nothing stored. Also the AWS CLI's cp
and sync with their default checksums; and tags, CORS preflights and answers, and browser form
uploads.

One cluster (RS-6-3-64k: stripe 384 KiB) and one `hedgefs s3` for the module.
"""

import base64
import hashlib
import zlib

import pytest
from botocore.exceptions import ClientError
from conftest import STRIPE, pattern
from s3_support import aws_cli, boto3_client, raw_put, signed_chunked_put, stack_fixtures

from hedgefs.s3 import checksums

MiB = 1 << 20
cluster, keys, gateway = stack_fixtures("s3-sums")


@pytest.fixture(scope="module")
def s3(gateway, keys):
    client = boto3_client(gateway.endpoint, *keys[1])
    client.create_bucket(Bucket="sums")
    return client


def code(err: pytest.ExceptionInfo) -> tuple[str, int]:
    return err.value.response["Error"]["Code"], err.value.response["ResponseMetadata"]["HTTPStatusCode"]


def crc32(data: bytes) -> str:
    return base64.b64encode(zlib.crc32(data).to_bytes(4, "big")).decode()


def absent(s3, key: str) -> bool:
    try:
        s3.head_object(Bucket="sums", Key=key)
    except ClientError as err:
        return err.response["ResponseMetadata"]["HTTPStatusCode"] == 404
    return False


def test_boto3_defaults_send_a_crc32_the_gateway_checks_and_keeps(s3):
    data = pattern(STRIPE + 3, seed=1)
    put = s3.put_object(Bucket="sums", Key="default.bin", Body=data)   # over HTTP: signed payload + CRC32 header
    assert put["ChecksumCRC32"] == crc32(data) and put["ETag"] == f'"{hashlib.md5(data).hexdigest()}"'
    assert "ChecksumCRC32" not in s3.head_object(Bucket="sums", Key="default.bin")
    head = s3.head_object(Bucket="sums", Key="default.bin", ChecksumMode="ENABLED")
    assert head["ChecksumCRC32"] == crc32(data) and head["ChecksumType"] == "FULL_OBJECT"
    got = s3.get_object(Bucket="sums", Key="default.bin", ChecksumMode="ENABLED")   # botocore checks the bytes
    assert got["Body"].read() == data and got["ChecksumCRC32"] == crc32(data)


def test_a_single_part_etag_is_the_md5_of_the_bytes_however_they_were_sent(s3, gateway, keys):
    """The ETag of a PutObject is the MD5 of its bytes (as S3's for an unencrypted object),
    whatever the SDK sent beside them: nothing, a Content-MD5, a CRC32 header (boto3's default
    over HTTP), another algorithm, payload signing off, or an aws-chunked body with its checksum
    in the trailer. So equal content has equal ETags, stable across reads and versions, and
    If-Match / If-None-Match with an ETag taken from other bytes of the same content decide as
    S3's do."""
    data = pattern(3 * STRIPE + 9, seed=6)
    md5 = f'"{hashlib.md5(data).hexdigest()}"'
    plain = boto3_client(gateway.endpoint, *keys[1], request_checksum_calculation="when_required")
    unsigned = boto3_client(gateway.endpoint, *keys[1], s3={"addressing_style": "path",
                                                            "payload_signing_enabled": False})
    digest = base64.b64encode(hashlib.md5(data).digest()).decode()
    etags = [plain.put_object(Bucket="sums", Key="etag/plain", Body=data)["ETag"],
             s3.put_object(Bucket="sums", Key="etag/md5", Body=data, ContentMD5=digest)["ETag"],
             s3.put_object(Bucket="sums", Key="etag/crc", Body=data)["ETag"],
             s3.put_object(Bucket="sums", Key="etag/crc", Body=data)["ETag"],   # a new version, the same bytes
             s3.put_object(Bucket="sums", Key="etag/sha", Body=data, ChecksumAlgorithm="SHA256")["ETag"],
             unsigned.put_object(Bucket="sums", Key="etag/unsigned", Body=data)["ETag"]]
    trailer = ("x-amz-checksum-crc32c", checksums.of("CRC32C", data))
    for key, pieces, unsigned_chunks in [("trailer", [data[:STRIPE], data[STRIPE:]], True),   # boto3 over HTTPS
                                         ("signed", [data[i:i + 100_003] for i in range(0, len(data), 100_003)],
                                          False)]:   # signed chunks across stripes, the Java/Go SDKs' way
        headers, body = signed_chunked_put(gateway, *keys[1], f"/sums/etag/{key}", pieces, unsigned=unsigned_chunks,
                                           trailer=trailer)
        status, answer = raw_put(gateway, f"/sums/etag/{key}", headers, body)
        assert status == 200, answer
        assert s3.get_object(Bucket="sums", Key=f"etag/{key}")["Body"].read() == data
    assert etags == [md5] * 6
    for key in ("plain", "md5", "crc", "sha", "unsigned", "trailer", "signed"):
        assert s3.head_object(Bucket="sums", Key=f"etag/{key}")["ETag"] == md5
    assert s3.get_object(Bucket="sums", Key="etag/crc", IfMatch=md5)["Body"].read() == data
    with pytest.raises(ClientError) as err:   # another object's ETag of the same bytes matches this one
        s3.put_object(Bucket="sums", Key="etag/crc", Body=b"x", IfNoneMatch=etags[0])
    assert code(err) == ("PreconditionFailed", 412)
    assert s3.put_object(Bucket="sums", Key="etag/crc", Body=b"bar", IfMatch=md5)["ETag"] \
        == '"37b51d194a7513e45b56f6524f2d51f2"'


@pytest.mark.parametrize("algorithm", checksums.ALGORITHMS)
def test_every_algorithm_unsigned_and_signed(s3, gateway, keys, algorithm):
    data = pattern(2 * STRIPE + 11, seed=2)
    want = checksums.of(algorithm, data)
    unsigned = boto3_client(gateway.endpoint, *keys[1], s3={"addressing_style": "path",
                                                            "payload_signing_enabled": False})
    for client in (s3, unsigned):
        put = client.put_object(Bucket="sums", Key=f"alg/{algorithm}", Body=data, ChecksumAlgorithm=algorithm)
        assert put[f"Checksum{algorithm}"] == want
        got = client.get_object(Bucket="sums", Key=f"alg/{algorithm}", ChecksumMode="ENABLED")
        assert got["Body"].read() == data and got[f"Checksum{algorithm}"] == want


def test_a_wrong_checksum_is_bad_digest_and_nothing_is_stored(s3):
    data = pattern(MiB, seed=3)
    for algorithm, value in [("SHA256", checksums.of("SHA256", b"other")), ("CRC32", "AAAAAA=="),
                             ("CRC64NVME", "bad")]:
        with pytest.raises(ClientError) as err:
            s3.put_object(Bucket="sums", Key="bad.bin", Body=data, **{f"Checksum{algorithm}": value})
        assert code(err) == ("BadDigest", 400)
        assert absent(s3, "bad.bin")
    s3.put_object(Bucket="sums", Key="kept.bin", Body=b"old")
    with pytest.raises(ClientError) as err:
        s3.put_object(Bucket="sums", Key="kept.bin", Body=data, ChecksumCRC32C="AAAAAA==")
    assert code(err) == ("BadDigest", 400)
    assert s3.get_object(Bucket="sums", Key="kept.bin")["Body"].read() == b"old"   # the old object stays whole


def test_trailers_unsigned_and_signed(gateway, keys, s3):
    data = pattern(3 * 65536 + 5, seed=4)
    pieces = [data[:65536], data[65536:2 * 65536], data[2 * 65536:]]
    crc = ("x-amz-checksum-crc32", crc32(data))
    for name, kwargs in [("unsigned", {"unsigned": True}), ("signed", {})]:
        headers, body = signed_chunked_put(gateway, *keys[1], f"/sums/trailer-{name}", pieces, trailer=crc, **kwargs)
        status, answer = raw_put(gateway, f"/sums/trailer-{name}", headers, body)
        assert status == 200, answer
        head = s3.head_object(Bucket="sums", Key=f"trailer-{name}", ChecksumMode="ENABLED")
        assert head["ChecksumCRC32"] == crc[1] and head["ContentLength"] == len(data)
        assert s3.get_object(Bucket="sums", Key=f"trailer-{name}")["Body"].read() == data
    wrong = ("x-amz-checksum-crc32", crc32(b"not it"))
    for name, kwargs, expected in [("bad-unsigned", {"unsigned": True, "trailer": wrong}, b"BadDigest"),
                                   ("bad-signed", {"trailer": wrong}, b"BadDigest"),
                                   ("bad-signature", {"trailer": crc, "trailer_signature": "0" * 64},
                                    b"SignatureDoesNotMatch")]:
        headers, body = signed_chunked_put(gateway, *keys[1], f"/sums/{name}", pieces, **kwargs)
        status, answer = raw_put(gateway, f"/sums/{name}", headers, body)
        assert status in (400, 403) and expected in answer, answer
        assert absent(s3, name)


def test_boto3_over_https_sends_its_checksum_in_a_trailer(cluster, keys, tmp_path):
    import boto3
    from botocore.config import Config
    from s3_support import GatewayProcess, self_signed

    cert, key = self_signed(str(tmp_path))
    tls = GatewayProcess(cluster.namenode, str(tmp_path), "--tls-cert", cert, "--tls-key", key, keys=keys[0])
    try:
        s3s = boto3.client("s3", endpoint_url=tls.endpoint.replace("127.0.0.1", "localhost"), verify=cert,
                           aws_access_key_id=keys[1][0], aws_secret_access_key=keys[1][1], region_name="us-east-1",
                           config=Config(signature_version="s3v4", s3={"addressing_style": "path"}))
        data = pattern(5 * STRIPE + 1, seed=5)
        sent = []
        s3s.meta.events.register("before-send.s3.PutObject", lambda request, **_: sent.append(
            {k.lower(): v.decode() if isinstance(v, bytes) else v for k, v in request.headers.items()}))
        s3s.put_object(Bucket="sums", Key="over-tls.bin", Body=data)
        assert sent[0]["x-amz-content-sha256"] == "STREAMING-UNSIGNED-PAYLOAD-TRAILER"
        assert sent[0]["x-amz-trailer"] == "x-amz-checksum-crc32"
        got = s3s.get_object(Bucket="sums", Key="over-tls.bin", ChecksumMode="ENABLED")
        assert got["Body"].read() == data and got["ChecksumCRC32"] == crc32(data)
    finally:
        tls.stop()


@pytest.mark.parametrize("algorithm, kind", [("CRC32", "FULL_OBJECT"), ("CRC32C", "COMPOSITE"),
                                             ("CRC64NVME", "FULL_OBJECT"), ("SHA256", "COMPOSITE")])
def test_multipart_checksums_composite_and_full_object(s3, algorithm, kind):
    parts = [pattern(5 * MiB, seed=10), pattern(5 * MiB, seed=11), pattern(MiB + 7, seed=12)]
    key = f"mpu/{algorithm}"
    upload = s3.create_multipart_upload(Bucket="sums", Key=key, ChecksumAlgorithm=algorithm, ChecksumType=kind)
    assert upload["ChecksumAlgorithm"] == algorithm
    done = []
    for n, data in enumerate(parts, 1):
        answer = s3.upload_part(Bucket="sums", Key=key, UploadId=upload["UploadId"], PartNumber=n, Body=data,
                                ChecksumAlgorithm=algorithm)
        assert answer[f"Checksum{algorithm}"] == checksums.of(algorithm, data)
        done.append({"PartNumber": n, "ETag": answer["ETag"], f"Checksum{algorithm}": answer[f"Checksum{algorithm}"]})
    raw = [base64.b64decode(checksums.of(algorithm, p)) for p in parts]
    if kind == "FULL_OBJECT":
        want = checksums.of(algorithm, b"".join(parts))   # the CRC of the whole object, combined from the parts'
    else:
        want = checksums.of(algorithm, b"".join(raw)) + f"-{len(parts)}"
    with pytest.raises(ClientError) as err:
        s3.complete_multipart_upload(Bucket="sums", Key=key, UploadId=upload["UploadId"],
                                     MultipartUpload={"Parts": done}, **{f"Checksum{algorithm}": "AAAAAAAAAAA="})
    assert code(err) == ("BadDigest", 400)
    completed = s3.complete_multipart_upload(Bucket="sums", Key=key, UploadId=upload["UploadId"],
                                             MultipartUpload={"Parts": done})
    assert completed[f"Checksum{algorithm}"] == want and completed["ChecksumType"] == kind
    head = s3.head_object(Bucket="sums", Key=key, ChecksumMode="ENABLED")
    assert head[f"Checksum{algorithm}"] == want and head["ChecksumType"] == kind and head["PartsCount"] == 3
    second = s3.get_object(Bucket="sums", Key=key, PartNumber=2, ChecksumMode="ENABLED")
    assert second["Body"].read() == parts[1] and second[f"Checksum{algorithm}"] == checksums.of(algorithm, parts[1])
    attributes = s3.get_object_attributes(Bucket="sums", Key=key, MaxParts=1, PartNumberMarker=1,
                                          ObjectAttributes=["ETag", "Checksum", "ObjectParts", "ObjectSize"])
    assert attributes["Checksum"][f"Checksum{algorithm}"] == want
    assert attributes["ObjectSize"] == sum(map(len, parts)) and attributes["ObjectParts"]["TotalPartsCount"] == 3
    assert [p["PartNumber"] for p in attributes["ObjectParts"]["Parts"]] == [2]
    assert attributes["ObjectParts"]["IsTruncated"] and attributes["ObjectParts"]["NextPartNumberMarker"] == 2
    with pytest.raises(ClientError) as err:
        s3.get_object(Bucket="sums", Key=key, PartNumber=4)
    assert code(err) == ("InvalidPart", 400)


def test_the_aws_cli_cp_and_sync_with_their_default_checksums(s3, gateway, keys, tmp_path):
    tree = tmp_path / "tree"
    (tree / "sub").mkdir(parents=True)
    big = pattern(9 * MiB, seed=20)            # over the CLI's 8 MiB threshold: multipart
    (tree / "big.bin").write_bytes(big)
    (tree / "sub" / "small.txt").write_bytes(b"small")
    for args in [("s3", "cp", str(tree / "big.bin"), "s3://sums/cli/big.bin"),
                 ("s3", "sync", str(tree), "s3://sums/cli/tree/")]:
        result = aws_cli(gateway, keys, *args)
        assert result.returncode == 0, result.stderr.decode()
    small = s3.head_object(Bucket="sums", Key="cli/tree/sub/small.txt", ChecksumMode="ENABLED")
    assert small["ChecksumCRC32"] == crc32(b"small")
    assert s3.get_object(Bucket="sums", Key="cli/big.bin", ChecksumMode="ENABLED")["Body"].read() == big
    back = tmp_path / "back"
    result = aws_cli(gateway, keys, "s3", "sync", "s3://sums/cli/tree/", str(back))
    assert result.returncode == 0, result.stderr.decode()
    assert (back / "big.bin").read_bytes() == big and (back / "sub" / "small.txt").read_bytes() == b"small"


# ---------------------------------------------------------------------------- tags, CORS, forms

def test_object_and_bucket_tags(s3):
    s3.put_object(Bucket="sums", Key="tagged", Body=b"t", Tagging="b=2&a=1")
    assert s3.get_object_tagging(Bucket="sums", Key="tagged")["TagSet"] == [{"Key": "a", "Value": "1"},
                                                                            {"Key": "b", "Value": "2"}]
    assert s3.head_object(Bucket="sums", Key="tagged")["ResponseMetadata"]["HTTPHeaders"]["x-amz-tagging-count"] == "2"
    etag = s3.head_object(Bucket="sums", Key="tagged")["ETag"]
    s3.put_object_tagging(Bucket="sums", Key="tagged", Tagging={"TagSet": [{"Key": "k", "Value": "v"}]})
    assert s3.get_object_tagging(Bucket="sums", Key="tagged")["TagSet"] == [{"Key": "k", "Value": "v"}]
    assert s3.head_object(Bucket="sums", Key="tagged")["ETag"] == etag   # the object itself is unchanged
    s3.copy_object(Bucket="sums", Key="tagged-copy", CopySource={"Bucket": "sums", "Key": "tagged"})
    assert s3.get_object_tagging(Bucket="sums", Key="tagged-copy")["TagSet"] == [{"Key": "k", "Value": "v"}]
    with pytest.raises(ClientError) as err:
        s3.put_object_tagging(Bucket="sums", Key="tagged", Tagging={"TagSet": [
            {"Key": str(i), "Value": ""} for i in range(11)]})
    assert code(err) == ("InvalidTag", 400)
    s3.delete_object_tagging(Bucket="sums", Key="tagged")
    assert s3.get_object_tagging(Bucket="sums", Key="tagged")["TagSet"] == []
    with pytest.raises(ClientError) as err:
        s3.get_bucket_tagging(Bucket="sums")
    assert code(err) == ("NoSuchTagSet", 404)
    s3.put_bucket_tagging(Bucket="sums", Tagging={"TagSet": [{"Key": "team", "Value": "storage"}]})
    assert s3.get_bucket_tagging(Bucket="sums")["TagSet"] == [{"Key": "team", "Value": "storage"}]
    s3.delete_bucket_tagging(Bucket="sums")


def test_cors_preflight_and_answers(s3, gateway):
    import urllib.error
    import urllib.request

    def send(path, method="GET", **headers):
        request = urllib.request.Request(f"{gateway.endpoint}{path}", method=method, headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=10) as r:
                return r.status, dict(r.headers)
        except urllib.error.HTTPError as err:
            return err.code, dict(err.headers)

    s3.put_object(Bucket="sums", Key="cors.txt", Body=b"c")
    s3.put_bucket_cors(Bucket="sums", CORSConfiguration={"CORSRules": [
        {"AllowedMethods": ["GET", "PUT"], "AllowedOrigins": ["https://*.example.com"], "AllowedHeaders": ["x-amz-*"],
         "ExposeHeaders": ["ETag"], "MaxAgeSeconds": 600}]})
    assert s3.get_bucket_cors(Bucket="sums")["CORSRules"][0]["AllowedOrigins"] == ["https://*.example.com"]
    status, headers = send("/sums/cors.txt", "OPTIONS", Origin="https://app.example.com",
                           **{"Access-Control-Request-Method": "PUT", "Access-Control-Request-Headers": "x-amz-date"})
    assert status == 200 and headers["Access-Control-Allow-Origin"] == "https://app.example.com"
    assert "PUT" in headers["Access-Control-Allow-Methods"] and headers["Access-Control-Max-Age"] == "600"
    for origin, method, wanted in [("https://evil.test", "GET", ""), ("https://app.example.com", "DELETE", ""),
                                   ("https://app.example.com", "GET", "authorization")]:
        extra = {"Access-Control-Request-Headers": wanted} if wanted else {}
        assert send("/sums/cors.txt", "OPTIONS", Origin=origin, **{"Access-Control-Request-Method": method},
                    **extra)[0] == 403
    assert send("/sums/cors.txt", "OPTIONS")[0] == 400
    url = s3.generate_presigned_url("get_object", Params={"Bucket": "sums", "Key": "cors.txt"})
    request = urllib.request.Request(url, headers={"Origin": "https://app.example.com"})
    with urllib.request.urlopen(request, timeout=10) as r:
        assert r.headers["Access-Control-Allow-Origin"] == "https://app.example.com"
        assert r.headers["Access-Control-Expose-Headers"] == "ETag"
    s3.delete_bucket_cors(Bucket="sums")
    with pytest.raises(ClientError) as err:
        s3.get_bucket_cors(Bucket="sums")
    assert code(err) == ("NoSuchCORSConfiguration", 404)


def test_browser_form_uploads_with_a_policy(s3):
    import requests

    post = s3.generate_presigned_post("sums", "forms/${filename}", Fields={"Content-Type": "text/plain"},
                                      Conditions=[["starts-with", "$key", "forms/"], {"Content-Type": "text/plain"},
                                                  ["content-length-range", 1, 1000]])
    s3.put_bucket_cors(Bucket="sums", CORSConfiguration={"CORSRules": [{"AllowedMethods": ["POST"],
                                                                         "AllowedOrigins": ["https://app.test"]}]})
    answer = requests.post(post["url"], data=post["fields"], files={"file": ("note.txt", b"from a form")}, timeout=30,
                           headers={"Origin": "https://app.test"})
    assert answer.status_code == 204, answer.text
    assert answer.headers["Access-Control-Allow-Origin"] == "https://app.test"   # a script may read the answer
    s3.delete_bucket_cors(Bucket="sums")
    got = s3.get_object(Bucket="sums", Key="forms/note.txt")
    assert got["Body"].read() == b"from a form" and got["ContentType"] == "text/plain"
    assert got["ETag"] == f'"{hashlib.md5(b"from a form").hexdigest()}"'
    for fields, file, expected in [({**post["fields"], "key": "elsewhere/x"}, b"x", 403),      # a condition fails
                                   ({**post["fields"], "x-amz-meta-extra": "1"}, b"x", 403),   # a field not allowed
                                   (post["fields"], b"y" * 1001, 400),                         # too large
                                   ({**post["fields"], "x-amz-signature": "0" * 64}, b"x", 403)]:
        answer = requests.post(post["url"], data=fields, files={"file": ("bad.txt", file)}, timeout=30)
        assert answer.status_code == expected, answer.text
    assert [o["Key"] for o in s3.list_objects_v2(Bucket="sums", Prefix="forms/")["Contents"]] == ["forms/note.txt"]


def test_boto3_default_parts_copied_at_complete_and_a_bad_part_leaves_nothing(s3, gateway, keys):
    """boto3's own multipart (upload_fileobj with its default TransferConfig: 8 MiB parts, whole
    stripes of no group here, so the parts are copied into the object at Complete, without an
    MD5 of the copy): the object is exact, with its parts' ETag and its checksum. A part whose
    CRC32 is wrong is BadDigest, one with a corrupted chunk signature SignatureDoesNotMatch; neither
    is stored (ListParts), and the part sent again completes the upload."""
    import io

    from boto3.s3.transfer import TransferConfig

    data = pattern(2 * 8 * MiB + 3 * MiB + 11, seed=21)
    s3.upload_fileobj(io.BytesIO(data), "sums", "boto3-parts.bin", Config=TransferConfig())
    head = s3.head_object(Bucket="sums", Key="boto3-parts.bin", ChecksumMode="ENABLED")
    assert head["ETag"].endswith('-3"') and head["ContentLength"] == len(data)
    assert s3.get_object(Bucket="sums", Key="boto3-parts.bin", ChecksumMode="ENABLED")["Body"].read() == data

    parts = [data[:8 * MiB], data[8 * MiB:]]
    key = "bad-part.bin"
    upload = s3.create_multipart_upload(Bucket="sums", Key=key, ChecksumAlgorithm="CRC32")["UploadId"]
    first = s3.upload_part(Bucket="sums", Key=key, UploadId=upload, PartNumber=1, Body=parts[0],
                           ChecksumAlgorithm="CRC32")
    with pytest.raises(ClientError) as err:
        s3.upload_part(Bucket="sums", Key=key, UploadId=upload, PartNumber=2, Body=parts[1], ChecksumCRC32=crc32(b"x"))
    assert code(err) == ("BadDigest", 400)
    pieces = [parts[1][at:at + MiB] for at in range(0, len(parts[1]), MiB)]
    query = f"partNumber=2&uploadId={upload}"
    headers, body = signed_chunked_put(gateway, *keys[1], f"/sums/{key}", pieces, query=query,
                                       chunk_signature="0" * 64)
    status, answer = raw_put(gateway, f"/sums/{key}?{query}", headers, body)
    assert status == 403 and b"SignatureDoesNotMatch" in answer, answer
    assert [p["PartNumber"] for p in s3.list_parts(Bucket="sums", Key=key, UploadId=upload).get("Parts", [])] == [1]
    headers, body = signed_chunked_put(gateway, *keys[1], f"/sums/{key}", pieces, query=query)
    status, answer = raw_put(gateway, f"/sums/{key}?{query}", headers, body)
    assert status == 200, answer
    listed = s3.list_parts(Bucket="sums", Key=key, UploadId=upload)["Parts"]
    assert [(p["PartNumber"], p["Size"]) for p in listed] == [(1, 8 * MiB), (2, len(parts[1]))]
    s3.complete_multipart_upload(Bucket="sums", Key=key, UploadId=upload, MultipartUpload={"Parts": [
        {"PartNumber": 1, "ETag": first["ETag"], "ChecksumCRC32": first["ChecksumCRC32"]},
        {"PartNumber": 2, "ETag": listed[1]["ETag"], "ChecksumCRC32": crc32(parts[1])}]})
    assert s3.get_object(Bucket="sums", Key=key)["Body"].read() == data
