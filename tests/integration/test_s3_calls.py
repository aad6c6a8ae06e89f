"""The S3 calls beyond the basic ones, against a real cluster and gateway, with boto3 and the AWS CLI:
UploadPartCopy, ListMultipartUploads in pages, the ACL calls (canned ACLs as modes), non-ASCII user metadata, keys with odd characters, conditional writes and a client that
leaves mid-GET.

One cluster (RS-6-3-64k: stripe 384 KiB) and one `hedgefs s3` for the module.
"""

import email.header
import hashlib
import json
import re
import urllib.request

import pytest
from botocore.exceptions import ClientError
from conftest import CELL, STRIPE, pattern
from s3_support import aws_cli, boto3_client, stack_fixtures

MiB = 1 << 20
ODD_KEYS = ["odd/with space", "odd/two  spaces", "odd/plus+sign", "odd/percent%20literal", "odd/%2F",
            "odd/hash#q?x=1&y=2", "odd/semi;colon:at@dollar$", "odd/comma,bang!quote'paren()", "odd/star*tilde~",
            "odd/back\\slash", "odd/caret^brace{}[]", "odd/pipe|lt<gt>", 'odd/dquote"', "odd/trailing ",
            "odd/ leading", "odd/tab\there", "odd/café", "odd/日本語/ファイル", "odd/emoji-😀", "odd/ü-NFD-u\u0308"]


cluster, keys, gateway = stack_fixtures("s3-calls")


@pytest.fixture(scope="module")
def s3(gateway, keys):
    client = boto3_client(gateway.endpoint, *keys[1])
    client.create_bucket(Bucket="calls")
    return client


def code(err: pytest.ExceptionInfo) -> tuple[str, int]:
    return err.value.response["Error"]["Code"], err.value.response["ResponseMetadata"]["HTTPStatusCode"]


# ---------------------------------------------------------------------------- UploadPartCopy

def test_upload_part_copy_ranges_whole_objects_and_plain_parts(s3):
    src = pattern(11 * MiB + 5, seed=21)
    s3.put_object(Bucket="calls", Key="upc/src.bin", Body=src)
    s3.put_object(Bucket="calls", Key="upc/small.bin", Body=b"small object")
    upload = s3.create_multipart_upload(Bucket="calls", Key="upc/dst.bin", ContentType="text/x-copied")["UploadId"]
    source = {"Bucket": "calls", "Key": "upc/src.bin"}
    first = s3.upload_part_copy(Bucket="calls", Key="upc/dst.bin", UploadId=upload, PartNumber=1, CopySource=source,
                                CopySourceRange=f"bytes=0-{5 * MiB - 1}")["CopyPartResult"]
    assert first["ETag"] == f'"{hashlib.md5(src[:5 * MiB]).hexdigest()}"' and first["LastModified"]
    second = s3.upload_part_copy(Bucket="calls", Key="upc/dst.bin", UploadId=upload, PartNumber=2, CopySource=source,
                                 CopySourceRange=f"bytes={5 * MiB}-{len(src) - 1}")["CopyPartResult"]
    middle = pattern(5 * MiB, seed=22)
    plain = s3.upload_part(Bucket="calls", Key="upc/dst.bin", UploadId=upload, PartNumber=3, Body=middle)["ETag"]
    whole = s3.upload_part_copy(Bucket="calls", Key="upc/dst.bin", UploadId=upload, PartNumber=4,
                                CopySource={"Bucket": "calls", "Key": "upc/small.bin"})["CopyPartResult"]
    listed = s3.list_parts(Bucket="calls", Key="upc/dst.bin", UploadId=upload)["Parts"]
    assert [p["Size"] for p in listed] == [5 * MiB, len(src) - 5 * MiB, 5 * MiB, 12]
    parts = [first["ETag"], second["ETag"], plain, whole["ETag"]]
    s3.complete_multipart_upload(Bucket="calls", Key="upc/dst.bin", UploadId=upload, MultipartUpload={
        "Parts": [{"PartNumber": n, "ETag": etag} for n, etag in enumerate(parts, 1)]})
    got = s3.get_object(Bucket="calls", Key="upc/dst.bin")
    assert got["Body"].read() == src + middle + b"small object" and got["ContentType"] == "text/x-copied"
    assert got["ETag"].endswith('-4"')


def test_upload_part_copy_refuses_bad_ranges_and_sources(s3):
    s3.put_object(Bucket="calls", Key="upc/five.bin", Body=b"12345")
    upload = s3.create_multipart_upload(Bucket="calls", Key="upc/bad.bin")["UploadId"]
    source = {"Bucket": "calls", "Key": "upc/five.bin"}
    with pytest.raises(ClientError) as err:
        s3.upload_part_copy(Bucket="calls", Key="upc/bad.bin", UploadId=upload, PartNumber=1, CopySource=source,
                            CopySourceRange="bytes=0-21")
    assert code(err) == ("InvalidRange", 416)
    for bad in ["0-2", "bytes=0", "bytes=hello-world", "bytes=0-bar", "bytes=hello-", "bytes=0-2,3-5", "bytes=3-1"]:
        with pytest.raises(ClientError) as err:
            s3.upload_part_copy(Bucket="calls", Key="upc/bad.bin", UploadId=upload, PartNumber=1, CopySource=source,
                                CopySourceRange=bad)
        assert code(err)[1] in (400, 416), bad
    for source, expected in [({"Bucket": "calls", "Key": "upc/none"}, "NoSuchKey"),
                             ({"Bucket": "no-such-bucket", "Key": "k"}, "NoSuchBucket")]:
        with pytest.raises(ClientError) as err:
            s3.upload_part_copy(Bucket="calls", Key="upc/bad.bin", UploadId=upload, PartNumber=1, CopySource=source)
        assert code(err)[0] == expected
    with pytest.raises(ClientError) as err:
        s3.upload_part_copy(Bucket="calls", Key="upc/bad.bin", UploadId="0" * 32, PartNumber=1,
                            CopySource={"Bucket": "calls", "Key": "upc/five.bin"})
    assert code(err)[0] == "NoSuchUpload"
    with pytest.raises(ClientError) as err:
        s3.upload_part_copy(Bucket="calls", Key="upc/bad.bin", UploadId=upload, PartNumber=1,
                            CopySource={"Bucket": "calls", "Key": "upc/five.bin"}, CopySourceIfMatch='"0000"')
    assert code(err) == ("PreconditionFailed", 412)
    assert s3.list_parts(Bucket="calls", Key="upc/bad.bin", UploadId=upload).get("Parts", []) == []
    s3.abort_multipart_upload(Bucket="calls", Key="upc/bad.bin", UploadId=upload)


# ---------------------------------------------------------------------------- ListMultipartUploads

def test_list_multipart_uploads_in_pages(s3):
    made = []
    for key in ["mpu/a", "mpu/a", "mpu/a", "mpu/b/1", "mpu/b/2", "mpu/c", "mpu-other"]:
        made.append((key, s3.create_multipart_upload(Bucket="calls", Key=key)["UploadId"]))
    try:
        in_order = sorted(made, key=lambda m: m[0])    # S3's order: by key, then by when initiated
        paginator = s3.get_paginator("list_multipart_uploads")
        for size in (1, 2, 3, 1000):
            pages = list(paginator.paginate(Bucket="calls", Prefix="mpu", PaginationConfig={"PageSize": size}))
            got = [(u["Key"], u["UploadId"]) for page in pages for u in page.get("Uploads", [])]
            assert got == in_order, size
            assert len(pages) == -(-len(made) // size)
        below = [m for m in in_order if m[0].startswith("mpu/")]
        first = s3.list_multipart_uploads(Bucket="calls", Prefix="mpu/", MaxUploads=2)
        assert first["IsTruncated"] and (first["NextKeyMarker"], first["NextUploadIdMarker"]) == below[1]
        rest = s3.list_multipart_uploads(Bucket="calls", Prefix="mpu/", KeyMarker=first["NextKeyMarker"],
                                         UploadIdMarker=first["NextUploadIdMarker"])
        assert [(u["Key"], u["UploadId"]) for u in rest["Uploads"]] == below[2:] and not rest["IsTruncated"]
        after_key = s3.list_multipart_uploads(Bucket="calls", Prefix="mpu/", KeyMarker="mpu/a")   # no upload-id-marker
        assert [u["Key"] for u in after_key["Uploads"]] == ["mpu/b/1", "mpu/b/2", "mpu/c"]
        rolled = list(paginator.paginate(Bucket="calls", Prefix="mpu/", Delimiter="/", PaginationConfig={"PageSize": 2}))
        assert [u["Key"] for page in rolled for u in page.get("Uploads", [])] == ["mpu/a"] * 3 + ["mpu/c"]
        assert [p["Prefix"] for page in rolled for p in page.get("CommonPrefixes", [])] == ["mpu/b/"]
        none = s3.list_multipart_uploads(Bucket="calls", Prefix="mpu/", MaxUploads=0)
        assert none.get("Uploads", []) == []
    finally:
        for key, upload in made:
            s3.abort_multipart_upload(Bucket="calls", Key=key, UploadId=upload)
    assert s3.list_multipart_uploads(Bucket="calls", Prefix="mpu").get("Uploads", []) == []


# ---------------------------------------------------------------------------- ACLs

ALL_USERS = "http://acs.amazonaws.com/groups/global/AllUsers"


def _grants(acl: dict) -> set:
    return {(g["Grantee"].get("ID") or g["Grantee"].get("URI"), g["Permission"]) for g in acl["Grants"]}


def test_canned_acls_are_modes(s3, cluster, gateway, keys, tmp_path):
    """private / public-read / public-read-write are the modes 700/755/777 of a bucket and
    600/644/666 of an object; GetAcl reads the mode back; a bucket made through S3 is private and
    owned by the key's user; an anonymous request (--allow-anonymous) may do what "other" may."""
    import urllib.error
    import urllib.request

    from conftest import client
    from s3_support import GatewayProcess

    s3.create_bucket(Bucket="acl-public", ACL="public-read")
    s3.put_object(Bucket="acl-public", Key="open", Body=b"1", ACL="public-read")
    s3.put_object(Bucket="acl-public", Key="closed", Body=b"2", ACL="private")
    s3.put_object(Bucket="acl-public", Key="default", Body=b"3")
    with client(cluster.namenode) as fs:
        assert fs.stat("/calls").permission & 0o777 == 0o700 and fs.stat("/calls").owner == "alice"
        assert fs.stat("/acl-public").permission & 0o777 == 0o755
        assert [fs.stat(f"/acl-public/{k}").permission & 0o777 for k in ("open", "closed", "default")] == \
            [0o644, 0o600, 0o644]
    assert _grants(s3.get_bucket_acl(Bucket="calls")) == {("alice", "FULL_CONTROL")}
    assert _grants(s3.get_bucket_acl(Bucket="acl-public")) == {("alice", "FULL_CONTROL"), (ALL_USERS, "READ")}
    assert _grants(s3.get_object_acl(Bucket="acl-public", Key="closed")) == {("alice", "FULL_CONTROL")}
    opened = s3.get_object_acl(Bucket="acl-public", Key="open")
    assert opened["Owner"]["ID"] == "alice" and _grants(opened) == {("alice", "FULL_CONTROL"), (ALL_USERS, "READ")}
    s3.put_object_acl(Bucket="acl-public", Key="closed", AccessControlPolicy={"Owner": opened["Owner"],
                                                                              "Grants": opened["Grants"]})
    assert _grants(s3.get_object_acl(Bucket="acl-public", Key="closed")) == _grants(opened)   # written back
    s3.put_object_acl(Bucket="acl-public", Key="closed", ACL="private")
    s3.put_bucket_acl(Bucket="calls", ACL="public-read-write")
    assert _grants(s3.get_bucket_acl(Bucket="calls")) == {("alice", "FULL_CONTROL"), (ALL_USERS, "READ"),
                                                           (ALL_USERS, "WRITE")}
    s3.put_bucket_acl(Bucket="calls", AccessControlPolicy={"Owner": opened["Owner"], "Grants": []})
    assert s3.get_bucket_acl(Bucket="calls")["Grants"] == []    # nothing granted: mode 000
    s3.put_bucket_acl(Bucket="calls", ACL="private")
    assert _grants(s3.get_bucket_acl(Bucket="calls")) == {("alice", "FULL_CONTROL")}
    s3.put_object(Bucket="acl-public", Key="owner-full", Body=b"4", ACL="bucket-owner-full-control")
    for call in [lambda: s3.put_object(Bucket="acl-public", Key="auth", Body=b"5", ACL="authenticated-read"),
                 lambda: s3.put_bucket_acl(Bucket="calls", GrantRead='id="bob"'),
                 lambda: s3.put_object_acl(Bucket="acl-public", Key="open", AccessControlPolicy={
                     "Owner": opened["Owner"], "Grants": [{"Grantee": {"Type": "CanonicalUser", "ID": "bob"},
                                                           "Permission": "READ"}]})]:
        with pytest.raises(ClientError) as err:
            call()
        assert code(err) == ("NotImplemented", 501)
    with pytest.raises(ClientError):
        s3.head_object(Bucket="acl-public", Key="auth")     # refused, so not stored
    for call, expected in [(lambda: s3.get_object_acl(Bucket="calls", Key="acl/none"), "NoSuchKey"),
                           (lambda: s3.get_bucket_acl(Bucket="no-such-bucket"), "NoSuchBucket")]:
        with pytest.raises(ClientError) as err:
            call()
        assert code(err)[0] == expected

    anonymous = GatewayProcess(cluster.namenode, str(tmp_path), "--allow-anonymous", keys=keys[0])
    try:
        def status(path: str, method: str = "GET") -> int:
            request = urllib.request.Request(f"{anonymous.endpoint}{path}", method=method,
                                             data=b"x" if method == "PUT" else None)
            try:
                with urllib.request.urlopen(request, timeout=10) as r:
                    return r.status
            except urllib.error.HTTPError as err:
                return err.code
        assert [status("/acl-public/open"), status("/acl-public/closed"), status("/acl-public"),
                status("/calls"), status("/acl-public/new", "PUT"), status("/acl-public?acl")] == \
            [200, 403, 200, 403, 403, 403]
        s3.put_bucket_acl(Bucket="acl-public", ACL="public-read-write")
        assert status("/acl-public/new", "PUT") == 200 and status("/acl-public/new", "DELETE") == 204
    finally:
        anonymous.stop()


# ---------------------------------------------------------------------------- metadata and keys

def test_non_ascii_metadata_round_trips(s3):
    """boto3 sends ASCII only (non-ASCII must be RFC 2047 encoded by the caller): that comes back
    exactly as put. UTF-8 sent raw (as curl or the Go SDK can) is kept as text and comes back as
    an RFC 2047 word, as S3 returns it; either way the text decodes to what was meant."""
    text = "café 日本 😀"
    encoded = email.header.Header(text, "utf-8").encode()
    s3.put_object(Bucket="calls", Key="meta/encoded", Body=b"1", Metadata={"name": encoded, "plain": "a b=c"})
    assert s3.head_object(Bucket="calls", Key="meta/encoded")["Metadata"] == {"name": encoded, "plain": "a b=c"}

    def raw_utf8(params, **_):
        params["headers"]["x-amz-meta-name"] = text
    s3.meta.events.register("before-call.s3.PutObject", raw_utf8)
    try:
        s3.put_object(Bucket="calls", Key="meta/raw", Body=b"2")
    finally:
        s3.meta.events.unregister("before-call.s3.PutObject", raw_utf8)
    for call in (s3.head_object, s3.get_object):
        returned = call(Bucket="calls", Key="meta/raw")["Metadata"]["name"]
        assert returned.isascii()
        [(decoded, charset)] = email.header.decode_header(returned)
        assert decoded.decode(charset) == text
    s3.copy_object(Bucket="calls", Key="meta/raw-copy", CopySource={"Bucket": "calls", "Key": "meta/raw"})
    assert s3.head_object(Bucket="calls", Key="meta/raw-copy")["Metadata"]["name"] == returned


def test_non_ascii_metadata_through_the_aws_cli(gateway, keys):
    encoded = email.header.Header("Grüße", "utf-8").encode()
    put = aws_cli(gateway, keys, "s3api", "put-object", "--bucket", "calls", "--key", "meta/cli",
                  "--metadata", json.dumps({"greeting": encoded}))
    assert put.returncode == 0, put.stderr
    head = aws_cli(gateway, keys, "s3api", "head-object", "--bucket", "calls", "--key", "meta/cli")
    assert json.loads(head.stdout)["Metadata"] == {"greeting": encoded}


def test_keys_with_odd_characters_round_trip_through_boto3(s3):
    for key in ODD_KEYS:
        s3.put_object(Bucket="calls", Key=key, Body=key.encode())
        assert s3.get_object(Bucket="calls", Key=key)["Body"].read() == key.encode(), key
        assert s3.head_object(Bucket="calls", Key=key)["ContentLength"] == len(key.encode()), key
    in_s3_order = sorted(ODD_KEYS, key=lambda k: k.encode())
    assert [o["Key"] for o in s3.list_objects_v2(Bucket="calls", Prefix="odd/")["Contents"]] == in_s3_order
    assert [o["Key"] for o in s3.list_objects(Bucket="calls", Prefix="odd/")["Contents"]] == in_s3_order
    paged = s3.get_paginator("list_objects_v2").paginate(Bucket="calls", Prefix="odd/", PaginationConfig={"PageSize": 3})
    assert [o["Key"] for page in paged for o in page["Contents"]] == in_s3_order
    url = s3.generate_presigned_url("get_object", Params={"Bucket": "calls", "Key": "odd/日本語/ファイル"})
    import urllib.request
    with urllib.request.urlopen(url, timeout=10) as r:
        assert r.read() == "odd/日本語/ファイル".encode()
    s3.copy_object(Bucket="calls", Key="odd/copy of café", CopySource={"Bucket": "calls", "Key": "odd/café"})
    assert s3.get_object(Bucket="calls", Key="odd/copy of café")["Body"].read() == "odd/café".encode()
    result = s3.delete_objects(Bucket="calls", Delete={"Objects": [{"Key": k} for k in [*ODD_KEYS, "odd/copy of café"]]})
    assert not result.get("Errors") and s3.list_objects_v2(Bucket="calls", Prefix="odd/")["KeyCount"] == 0


def test_keys_with_odd_characters_through_the_aws_cli(gateway, keys, tmp_path):
    src, back = tmp_path / "src", tmp_path / "back"
    names = ["with space", "plus+sign", "pct%20", "hash#q", "a=b&c", "brace{}[]", "café", "日本/ファイル", "emoji-😀"]
    for i, name in enumerate(names):
        (src / name).parent.mkdir(parents=True, exist_ok=True)
        (src / name).write_bytes(pattern(CELL + i, seed=i))
    (src / "big+multipart file").write_bytes(pattern(9 * MiB, seed=99))   # over the CLI's 8 MiB: multipart
    names.append("big+multipart file")
    for args in [("s3", "sync", str(src), "s3://calls/cli/"), ("s3", "sync", "s3://calls/cli/", str(back))]:
        result = aws_cli(gateway, keys, *args)
        assert result.returncode == 0, result.stderr
    for name in names:
        assert (back / name).read_bytes() == (src / name).read_bytes(), name
    listing = aws_cli(gateway, keys, "s3", "ls", "--recursive", "s3://calls/cli/").stdout.decode()
    assert sorted(line.split(None, 3)[3] for line in listing.splitlines()) == sorted(f"cli/{n}" for n in names)
    assert aws_cli(gateway, keys, "s3", "sync", str(src), "s3://calls/cli/").stdout == b""   # nothing changed
    single = aws_cli(gateway, keys, "s3", "cp", "s3://calls/cli/emoji-😀", str(tmp_path / "one"))
    assert single.returncode == 0 and (tmp_path / "one").read_bytes() == (src / "emoji-😀").read_bytes()
    assert aws_cli(gateway, keys, "s3", "rm", "--recursive", "s3://calls/cli/").returncode == 0
    assert aws_cli(gateway, keys, "s3", "ls", "s3://calls/cli/").stdout == b""


def test_a_part_copied_from_a_key_with_odd_characters(s3):
    key = "odd-src/ü + space & 日本.bin"
    data = pattern(STRIPE + 3, seed=31)
    s3.put_object(Bucket="calls", Key=key, Body=data)
    upload = s3.create_multipart_upload(Bucket="calls", Key="odd-dst/é?.bin")["UploadId"]
    part = s3.upload_part_copy(Bucket="calls", Key="odd-dst/é?.bin", UploadId=upload, PartNumber=1,
                               CopySource={"Bucket": "calls", "Key": key})["CopyPartResult"]
    s3.complete_multipart_upload(Bucket="calls", Key="odd-dst/é?.bin", UploadId=upload,
                                 MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": part["ETag"]}]})
    assert s3.get_object(Bucket="calls", Key="odd-dst/é?.bin")["Body"].read() == data


def test_parallel_parts_beyond_the_writer_limit_all_land(s3):
    """More large parts at once than the gateway writes at once (--writers, 2): the others wait
    their turn in their sockets, and every part lands whole."""
    from concurrent.futures import ThreadPoolExecutor

    parts = [pattern(8 * MiB, seed=40 + n) for n in range(5)]
    upload = s3.create_multipart_upload(Bucket="calls", Key="writers/big.bin")["UploadId"]

    def send(n):
        return s3.upload_part(Bucket="calls", Key="writers/big.bin", UploadId=upload, PartNumber=n + 1,
                              Body=parts[n])["ETag"]

    with ThreadPoolExecutor(5) as pool:
        etags = list(pool.map(send, range(5)))
    assert etags == [f'"{hashlib.md5(p).hexdigest()}"' for p in parts]
    s3.complete_multipart_upload(Bucket="calls", Key="writers/big.bin", UploadId=upload, MultipartUpload={
        "Parts": [{"PartNumber": n + 1, "ETag": e} for n, e in enumerate(etags)]})
    assert s3.get_object(Bucket="calls", Key="writers/big.bin")["Body"].read() == b"".join(parts)


# ---------------------------------------------------------------------------- a client that goes away

def test_a_client_leaving_mid_get_is_one_log_line(s3, gateway):
    """A download cut off half-way (the client closes its socket) is logged in one line, no
    traceback, and the gateway serves the next GET whole."""
    import socket
    import struct
    import urllib.parse

    from conftest import wait_until

    data = pattern(16 * MiB, seed=77)
    s3.put_object(Bucket="calls", Key="leave/big.bin", Body=data)
    before = len(gateway.log())
    url = urllib.parse.urlsplit(s3.generate_presigned_url("get_object", Params={"Bucket": "calls",
                                                                                "Key": "leave/big.bin"}))
    with socket.create_connection((url.hostname, url.port)) as sock:
        sock.sendall(f"GET {url.path}?{url.query} HTTP/1.1\r\nHost: {url.netloc}\r\n\r\n".encode())
        assert sock.recv(4096).startswith(b"HTTP/1.1 200")
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))   # close with a reset
    def cut_off() -> list[str]:   # (another test's GET may log its own line meanwhile)
        return [line for line in gateway.log()[before:].splitlines() if "leave/big.bin" in line]

    wait_until(lambda: any("the client went away" in line for line in cut_off()), 30,
               "the gateway to log the cut-off GET", detail=gateway.log)
    logged = gateway.log()[before:]
    assert len(cut_off()) == 1 and "Traceback" not in logged, logged[-2000:]
    assert s3.get_object(Bucket="calls", Key="leave/big.bin")["Body"].read() == data


# ---------------------------------------------------------------------------- conditional writes

def test_conditional_puts_and_completes(s3):
    """If-None-Match / If-Match on PutObject and CompleteMultipartUpload, as S3 answers them."""
    key = "cond/obj"

    def refused(call, **kw):
        with pytest.raises(ClientError) as err:
            call(Bucket="calls", Key=key, **kw)
        return code(err)

    put = s3.put_object
    etag = put(Bucket="calls", Key=key, Body=b"one", IfNoneMatch="*")["ETag"]
    assert refused(put, Body=b"two", IfNoneMatch="*") == ("PreconditionFailed", 412)
    assert refused(put, Body=b"two", IfNoneMatch=etag) == ("PreconditionFailed", 412)
    assert refused(put, Body=b"two", IfMatch='"0123"') == ("PreconditionFailed", 412)
    assert s3.get_object(Bucket="calls", Key=key)["Body"].read() == b"one"
    etag = put(Bucket="calls", Key=key, Body=b"three", IfMatch=etag)["ETag"]
    put(Bucket="calls", Key=key, Body=b"four", IfNoneMatch='"0123"')
    s3.delete_object(Bucket="calls", Key=key)
    assert refused(put, Body=b"five", IfMatch="*") == ("NoSuchKey", 404)

    def complete(**kw):
        upload = s3.create_multipart_upload(Bucket="calls", Key=key)["UploadId"]
        part = s3.upload_part(Bucket="calls", Key=key, UploadId=upload, PartNumber=1, Body=b"part")["ETag"]
        return s3.complete_multipart_upload(Bucket="calls", Key=key, UploadId=upload, MultipartUpload={
            "Parts": [{"PartNumber": 1, "ETag": part}]}, **kw)

    etag = complete(IfNoneMatch="*")["ETag"]
    with pytest.raises(ClientError) as err:
        complete(IfNoneMatch="*")
    assert code(err) == ("PreconditionFailed", 412)
    complete(IfMatch=etag)
    assert s3.get_object(Bucket="calls", Key=key)["Body"].read() == b"part"


# ---------------------------------------------------------------------------- two PUTs of one key at once

def test_two_puts_of_one_key_at_once_both_land_and_the_last_to_finish_wins(s3):
    """S3 lets concurrent PutObjects of a key run; the last to finish is the object, whole (ceph's
    s3-tests test_atomic_dual_write). hedgefs allows one writer a path, so the gateway refused
    the second with "is being written" until the first ended; it now writes it aside and swaps it
    in. A slow PUT is started by hand (a presigned URL, half its body sent), a boto3 PUT of the
    same key completes meanwhile, then the slow one ends: its bytes are the object."""
    import socket
    import urllib.parse

    slow, fast = pattern(3 * MiB, seed=81), pattern(2 * MiB + 5, seed=82)
    url = urllib.parse.urlsplit(s3.generate_presigned_url("put_object", Params={"Bucket": "calls", "Key": "dual/k"}))
    with socket.create_connection((url.hostname, url.port)) as sock:
        sock.sendall(f"PUT {url.path}?{url.query} HTTP/1.1\r\nHost: {url.netloc}\r\n"
                     f"Content-Length: {len(slow)}\r\n\r\n".encode() + slow[:MiB])
        s3.put_object(Bucket="calls", Key="dual/k", Body=fast)   # was: InvalidRequest, "is being written"
        assert s3.get_object(Bucket="calls", Key="dual/k")["Body"].read() == fast
        sock.sendall(slow[MiB:])
        reply = sock.recv(4096)
        assert reply.startswith(b"HTTP/1.1 200"), reply[:300]
    got = s3.get_object(Bucket="calls", Key="dual/k")
    assert got["Body"].read() == slow and got["ETag"] == f'"{hashlib.md5(slow).hexdigest()}"'
    assert "dual/k" not in [u["Key"] for u in s3.list_multipart_uploads(Bucket="calls").get("Uploads", [])]
    assert [o["Key"] for o in s3.list_objects_v2(Bucket="calls", Prefix="dual/")["Contents"]] == ["dual/k"]


def test_a_bucket_made_again_through_another_gateway_takes_puts(s3, cluster, gateway, keys, tmp_path):
    """Every PUT writes aside in the bucket's .hedgefs-s3/uploads, which a gateway makes once and
    remembers: a bucket deleted and made again through another gateway has none until one asks."""
    from s3_support import GatewayProcess

    s3.create_bucket(Bucket="again")
    s3.put_object(Bucket="again", Key="first", Body=b"1")
    other = GatewayProcess(cluster.namenode, str(tmp_path), keys=keys[0])
    try:
        via_other = boto3_client(other.endpoint, *keys[1])
        via_other.delete_object(Bucket="again", Key="first")
        via_other.delete_bucket(Bucket="again")
        via_other.create_bucket(Bucket="again")
    finally:
        other.stop()
    s3.put_object(Bucket="again", Key="second", Body=b"2")
    assert s3.get_object(Bucket="again", Key="second")["Body"].read() == b"2"
    s3.delete_object(Bucket="again", Key="second")
    s3.delete_bucket(Bucket="again")
    s3.create_bucket(Bucket="again")
    s3.put_object(Bucket="again", Key="third", Body=b"3")   # this gateway remembers the upload directory again
    other = GatewayProcess(cluster.namenode, str(tmp_path), keys=keys[0])
    try:
        via_other = boto3_client(other.endpoint, *keys[1])
        via_other.delete_object(Bucket="again", Key="third")
        via_other.delete_bucket(Bucket="again")
        via_other.create_bucket(Bucket="again")
    finally:
        other.stop()
    upload = s3.create_multipart_upload(Bucket="again", Key="parts")["UploadId"]
    s3.abort_multipart_upload(Bucket="again", Key="parts", UploadId=upload)


def test_a_put_into_a_bucket_gone_is_no_such_bucket(s3, cluster, keys, tmp_path):
    """Also when another gateway deleted it: this one, which wrote there, does not ask first."""
    from s3_support import GatewayProcess

    s3.create_bucket(Bucket="gone")
    s3.put_object(Bucket="gone", Key="k", Body=b"1")
    other = GatewayProcess(cluster.namenode, str(tmp_path), keys=keys[0])
    try:
        via_other = boto3_client(other.endpoint, *keys[1])
        via_other.delete_object(Bucket="gone", Key="k")
        via_other.delete_bucket(Bucket="gone")
    finally:
        other.stop()
    for key in ("top", "nested/deeper"):
        with pytest.raises(ClientError) as err:
            s3.put_object(Bucket="gone", Key=key, Body=b"2")
        assert code(err) == ("NoSuchBucket", 404)
    assert "gone" not in [b["Name"] for b in s3.list_buckets()["Buckets"]]


# ---------------------------------------------------------------------------- a Complete sent again

def test_a_complete_sent_again_is_answered_from_one_stat_of_the_object(s3, cluster):
    """A CompleteMultipartUpload sent again (its answer lost): S3 says yes with the same ETag.
    The gateway knows the object is that upload's from one NameNode stat of it (its metadata read
    with it): no second read of its xattrs, which could be another version's."""
    key = "again/obj"
    upload = s3.create_multipart_upload(Bucket="calls", Key=key)["UploadId"]
    part = s3.upload_part(Bucket="calls", Key=key, UploadId=upload, PartNumber=1, Body=b"part")["ETag"]
    parts = {"Parts": [{"PartNumber": 1, "ETag": part}]}
    first = s3.complete_multipart_upload(Bucket="calls", Key=key, UploadId=upload, MultipartUpload=parts)
    before = namenode_calls(cluster, "GetXAttrs")
    again = s3.complete_multipart_upload(Bucket="calls", Key=key, UploadId=upload, MultipartUpload=parts)
    assert again["ETag"] == first["ETag"]
    assert namenode_calls(cluster, "GetXAttrs") == before
    s3.put_object(Bucket="calls", Key=key, Body=b"another version")
    with pytest.raises(ClientError) as err:   # no longer that upload's object
        s3.complete_multipart_upload(Bucket="calls", Key=key, UploadId=upload, MultipartUpload=parts)
    assert code(err) == ("NoSuchUpload", 404)


def namenode_calls(cluster, method: str) -> float:
    """How many ``method`` RPCs the NameNode has served (its /metrics)."""
    text = urllib.request.urlopen(cluster.http_url + "metrics", timeout=10).read().decode()
    return sum(float(v) for v in re.findall(
        rf'^hedgefs_namenode_rpc_calls_total\{{[^}}]*method="{method}"[^}}]*\}} (\S+)$', text, re.M))
