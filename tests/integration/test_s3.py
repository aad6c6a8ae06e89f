"""The S3 gateway against a real cluster, driven by the clients people use: boto3, the AWS CLI and s3fs.

One cluster (RS-6-3-64k, 256 KiB blocks: cell 64 KiB, stripe 384 KiB, group 1.5 MiB) and one
`hedgefs s3` process for the module. Size boundaries: 0 B, 1 B, cell - 1, cell, cell + 1,
stripe + 1, group + 1; multipart with 5 MiB parts and a short last one (copied: 5 MiB is no
whole number of groups) and with 6 MiB parts (joined by concat: 4 groups each).
"""

import base64
import gzip
import hashlib
import http.client
import io
import json
import os
import random
import subprocess
import sys
import urllib.error
import urllib.parse
import urllib.request
import zlib
from concurrent.futures import ThreadPoolExecutor

import pytest
from botocore.exceptions import ClientError
from conftest import CELL, GROUP, STRIPE, assert_one_line_error, client, pattern, run_cli
from s3_support import GatewayProcess, boto3_client, raw_put, self_signed, signed_chunked_put, stack_fixtures

MiB = 1 << 20


cluster, keys, gateway = stack_fixtures("s3")


@pytest.fixture(scope="module")
def s3(gateway, keys):
    return boto3_client(gateway.endpoint, *keys[1])


@pytest.fixture(scope="module")
def bucket(s3):
    s3.create_bucket(Bucket="data")
    return "data"


@pytest.fixture(scope="module")
def fs(cluster):
    with client(cluster.namenode) as f:
        yield f


def code(err: pytest.ExceptionInfo) -> str:
    return err.value.response["Error"]["Code"]


@pytest.mark.parametrize("size", [0, 1, CELL - 1, CELL, CELL + 1, STRIPE + 1, GROUP + 1])
def test_round_trip_at_every_size_boundary(s3, bucket, fs, size):
    data = pattern(size, seed=size)
    key = f"sizes/{size}.bin"
    put = s3.put_object(Bucket=bucket, Key=key, Body=data)
    assert put["ETag"] == f'"{hashlib.md5(data).hexdigest()}"'   # boto3 sent a CRC32 too: the ETag is still the MD5
    got = s3.get_object(Bucket=bucket, Key=key)
    assert got["Body"].read() == data and got["ContentLength"] == size and got["ETag"] == put["ETag"]
    assert s3.head_object(Bucket=bucket, Key=key)["ContentLength"] == size
    assert fs.read_bytes(f"/{bucket}/{key}") == data      # the object is the hedgefs file


def test_ranges_as_s3_serves_them(s3, bucket):
    data = pattern(STRIPE + 5, seed=7)
    s3.put_object(Bucket=bucket, Key="ranges.bin", Body=data)
    for header, want in [("bytes=0-0", data[:1]), (f"bytes={CELL - 1}-{CELL}", data[CELL - 1:CELL + 1]),
                         ("bytes=100-", data[100:]), ("bytes=-10", data[-10:]),
                         (f"bytes=5-{10 * STRIPE}", data[5:])]:
        got = s3.get_object(Bucket=bucket, Key="ranges.bin", Range=header)
        assert got["Body"].read() == want, header
        assert got["ContentRange"].endswith(f"/{len(data)}")
    with pytest.raises(ClientError) as err:
        s3.get_object(Bucket=bucket, Key="ranges.bin", Range=f"bytes={len(data)}-")
    assert code(err) == "InvalidRange" and err.value.response["ResponseMetadata"]["HTTPStatusCode"] == 416


def _multipart(s3, bucket, key, parts):
    upload = s3.create_multipart_upload(Bucket=bucket, Key=key, ContentType="video/mp4", Metadata={"take": "2"})
    done = []
    for number, part in enumerate(parts, 1):
        etag = s3.upload_part(Bucket=bucket, Key=key, UploadId=upload["UploadId"], PartNumber=number, Body=part)["ETag"]
        assert etag == f'"{hashlib.md5(part).hexdigest()}"'
        done.append({"PartNumber": number, "ETag": etag})
    listed = s3.list_parts(Bucket=bucket, Key=key, UploadId=upload["UploadId"])["Parts"]
    assert [(p["PartNumber"], p["Size"]) for p in listed] == [(n, len(p)) for n, p in enumerate(parts, 1)]
    return upload["UploadId"], done


def _multipart_etag(parts) -> str:
    return '"' + hashlib.md5(b"".join(hashlib.md5(p).digest() for p in parts)).hexdigest() + f'-{len(parts)}"'


def test_multipart_5_mib_parts_with_a_short_last_part(s3, bucket):
    data = pattern(2 * 5 * MiB + 12345, seed=3)
    parts = [data[:5 * MiB], data[5 * MiB:10 * MiB], data[10 * MiB:]]
    upload_id, done = _multipart(s3, bucket, "mp/five.bin", parts)
    result = s3.complete_multipart_upload(Bucket=bucket, Key="mp/five.bin", UploadId=upload_id,
                                          MultipartUpload={"Parts": done})
    assert result["ETag"] == _multipart_etag(parts)
    again = s3.complete_multipart_upload(Bucket=bucket, Key="mp/five.bin", UploadId=upload_id,
                                         MultipartUpload={"Parts": done})   # its answer lost, sent again
    assert again["ETag"] == result["ETag"]
    got = s3.get_object(Bucket=bucket, Key="mp/five.bin")
    assert got["Body"].read() == data and got["ETag"] == result["ETag"]
    assert got["ContentType"] == "video/mp4" and got["Metadata"] == {"take": "2"}


def test_multipart_parts_of_whole_groups_are_joined_without_copying(s3, bucket, fs):
    data = pattern(2 * 6 * MiB + 1000, seed=4)
    parts = [data[:6 * MiB], data[6 * MiB:12 * MiB], data[12 * MiB:]]
    upload_id, done = _multipart(s3, bucket, "mp/six.bin", parts)
    part_files = sorted(s.path for s in fs.list(f"/{bucket}/.hedgefs-s3/uploads/{upload_id}") if "." in s.path[-38:])
    groups_before = [g.id for path in part_files[:2] for g in fs.stat(path).groups]
    s3.complete_multipart_upload(Bucket=bucket, Key="mp/six.bin", UploadId=upload_id, MultipartUpload={"Parts": done})
    assert s3.get_object(Bucket=bucket, Key="mp/six.bin")["Body"].read() == data
    groups_after = [g.id for g in fs.stat(f"/{bucket}/mp/six.bin").groups]
    assert groups_after[:len(groups_before)] == groups_before   # the big parts' groups, not copies of them


def test_a_multipart_upload_aborted_half_way_leaves_nothing(s3, bucket, fs):
    upload = s3.create_multipart_upload(Bucket=bucket, Key="mp/aborted.bin")
    s3.upload_part(Bucket=bucket, Key="mp/aborted.bin", UploadId=upload["UploadId"], PartNumber=1,
                   Body=pattern(5 * MiB))
    assert [u["UploadId"] for u in s3.list_multipart_uploads(Bucket=bucket).get("Uploads", [])] == [upload["UploadId"]]
    s3.abort_multipart_upload(Bucket=bucket, Key="mp/aborted.bin", UploadId=upload["UploadId"])
    assert s3.list_multipart_uploads(Bucket=bucket).get("Uploads", []) == []
    assert fs.list(f"/{bucket}/.hedgefs-s3/uploads") == []
    with pytest.raises(ClientError) as err:
        s3.head_object(Bucket=bucket, Key="mp/aborted.bin")
    assert err.value.response["ResponseMetadata"]["HTTPStatusCode"] == 404
    with pytest.raises(ClientError) as err:
        s3.complete_multipart_upload(Bucket=bucket, Key="mp/aborted.bin", UploadId=upload["UploadId"],
                                     MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": '"x"'}]})
    assert code(err) == "NoSuchUpload"


def test_a_small_part_before_the_last_is_refused(s3, bucket):
    upload = s3.create_multipart_upload(Bucket=bucket, Key="mp/small.bin")
    done = [{"PartNumber": n, "ETag": s3.upload_part(Bucket=bucket, Key="mp/small.bin", UploadId=upload["UploadId"],
                                                     PartNumber=n, Body=b"x" * 10)["ETag"]} for n in (1, 2)]
    with pytest.raises(ClientError) as err:
        s3.complete_multipart_upload(Bucket=bucket, Key="mp/small.bin", UploadId=upload["UploadId"],
                                     MultipartUpload={"Parts": done})
    assert code(err) == "EntityTooSmall"
    s3.abort_multipart_upload(Bucket=bucket, Key="mp/small.bin", UploadId=upload["UploadId"])


def test_a_wrong_content_md5_stores_nothing(s3, bucket):
    data = pattern(STRIPE * 2)
    with pytest.raises(ClientError) as err:
        s3.put_object(Bucket=bucket, Key="bad-md5.bin", Body=data,
                      ContentMD5=base64.b64encode(hashlib.md5(b"other").digest()).decode())
    assert code(err) == "BadDigest"
    with pytest.raises(ClientError):
        s3.head_object(Bucket=bucket, Key="bad-md5.bin")


def test_an_upload_cut_half_way_leaves_nothing_visible(cluster, tmp_path, s3, fs):
    s3.create_bucket(Bucket="open", ACL="public-read-write")   # anonymous writes need o+w (s3/acl.py)
    bucket = "open"
    anonymous = GatewayProcess(cluster.namenode, str(tmp_path), "--allow-anonymous")
    try:
        data = pattern(3 * STRIPE)
        raw_put(anonymous, f"/{bucket}/cut.bin", {"Content-Length": str(len(data))}, data, close_after=STRIPE + 7)
        status, body = raw_put(anonymous, f"/{bucket}/whole.bin", {"Content-Length": str(len(data))}, data)
        assert status == 200, body       # the anonymous gateway works: the cut upload was the client's doing
    finally:
        anonymous.stop()
    assert fs.read_bytes(f"/{bucket}/whole.bin") == data
    names = [s.path for s in fs.list(f"/{bucket}")]
    assert f"/{bucket}/cut.bin" not in names


def test_a_large_body_goes_from_the_socket_to_the_stripes_and_nothing_bad_is_stored(cluster, tmp_path, s3, fs):
    """A plain body of 8 MiB or more is received past aiohttp's parser, straight into the
    stripes (s3/body.py _Receiver): stored exactly, its connection closed after the answer; cut,
    longer than it said, or with a wrong Content-MD5, nothing is stored, the client gets its
    answer, and the gateway goes on serving."""
    s3.create_bucket(Bucket="open-large", ACL="public-read-write")
    anonymous = GatewayProcess(cluster.namenode, str(tmp_path), "--allow-anonymous")
    data = pattern(9 * MiB + 5, seed=48)
    try:
        url = urllib.parse.urlsplit(anonymous.endpoint)
        conn = http.client.HTTPConnection(url.hostname, url.port, timeout=60)
        conn.request("PUT", "/open-large/whole.bin", body=data, headers={"Content-Length": str(len(data))})
        answer = conn.getresponse()
        assert answer.status == 200, answer.read()
        assert answer.getheader("ETag") == f'"{hashlib.md5(data).hexdigest()}"'
        assert answer.getheader("Connection", "").lower() == "close"
        answer.read()
        conn.close()

        raw_put(anonymous, "/open-large/cut.bin", {"Content-Length": str(len(data))}, data, close_after=5 * MiB + 7)
        status, body = raw_put(anonymous, "/open-large/bad-md5.bin", {
            "Content-Length": str(len(data)), "Content-MD5": base64.b64encode(hashlib.md5(b"x").digest()).decode()}, data)
        assert (status, b"<Code>BadDigest</Code>" in body) == (400, True), body
        longer = pattern(12 * MiB, seed=49)   # says 8 MiB in x-amz-decoded-content-length: refused mid-body
        status, body = raw_put(anonymous, "/open-large/longer.bin", {
            "Content-Length": str(len(longer)), "x-amz-decoded-content-length": str(8 * MiB)}, longer)
        assert (status, b"<Code>IncompleteBody</Code>" in body) == (400, True), body
        # a handler that refuses a taken body before reading it all (a key ending in '/' holds no
        # bytes): the rest is read and dropped, and the client gets its 400 (not a reset, 10 s on)
        status, body = raw_put(anonymous, "/open-large/folder/", {"Content-Length": str(len(data))}, data)
        assert (status, b"<Code>InvalidArgument</Code>" in body) == (400, True), body
        status, body = raw_put(anonymous, "/open-large/after.bin", {"Content-Length": "5"}, b"after")
        assert status == 200, body
    finally:
        anonymous.stop()
    assert fs.read_bytes("/open-large/whole.bin") == data
    assert fs.read_bytes("/open-large/after.bin") == b"after"
    names = {s.path for s in fs.list("/open-large")}
    assert not names & {"/open-large/cut.bin", "/open-large/bad-md5.bin", "/open-large/longer.bin"}


def test_a_body_sent_with_a_content_encoding_is_stored_as_sent(cluster, tmp_path, s3, fs):
    """S3 stores a body sent with Content-Encoding: gzip (deflate, ...) as it came, the encoding
    being the object's metadata, returned on GET and HEAD: the gateway never unpacks it, large
    (>= 8 MiB: received past aiohttp's parser, s3/body.py _Receiver), small, or
    Transfer-Encoding: chunked. (It once stored a large one half unpacked with a 200, refused a
    small one as longer than its Content-Length, and stored a chunked one unpacked.)"""
    s3.create_bucket(Bucket="open-gzip", ACL="public-read-write")
    anonymous = GatewayProcess(cluster.namenode, str(tmp_path), "--allow-anonymous")
    noise = random.Random(53).randbytes
    sent = {"large.gz": ("gzip", gzip.compress(bytes(200 << 10) + noise(10 * MiB))),
            "large.z": ("deflate", zlib.compress(noise(9 * MiB))),
            "small.gz": ("gzip", gzip.compress(bytes(MiB) + noise(3 * MiB)))}
    url = urllib.parse.urlsplit(anonymous.endpoint)
    try:
        for key, (encoding, data) in sent.items():
            status, body = raw_put(anonymous, f"/open-gzip/{key}",
                                   {"Content-Length": str(len(data)), "Content-Encoding": encoding}, data)
            assert status == 200, body
        data = sent["small.gz"][1]
        sent["chunked.gz"] = ("gzip", data)
        conn = http.client.HTTPConnection(url.hostname, url.port, timeout=60)
        conn.request("PUT", "/open-gzip/chunked.gz", body=(data[at:at + MiB] for at in range(0, len(data), MiB)),
                     headers={"Content-Encoding": "gzip", "Transfer-Encoding": "chunked"}, encode_chunked=True)
        answer = conn.getresponse()
        assert answer.status == 200, answer.read()
        answer.read()
        conn.close()
        conn = http.client.HTTPConnection(url.hostname, url.port, timeout=60)   # (http.client unpacks nothing)
        conn.request("GET", "/open-gzip/large.gz")
        answer = conn.getresponse()
        assert (answer.status, answer.getheader("Content-Encoding")) == (200, "gzip")
        assert answer.read() == sent["large.gz"][1]
        conn.close()
    finally:
        anonymous.stop()
    for key, (encoding, data) in sent.items():
        assert fs.read_bytes(f"/open-gzip/{key}") == data, key
        head = s3.head_object(Bucket="open-gzip", Key=key)
        assert (head["ContentEncoding"], head["ETag"]) == (encoding, f'"{hashlib.md5(data).hexdigest()}"'), key
    # A GET's response-content-encoding replaces the stored one (one header, not "gzip, identity").
    got = s3.get_object(Bucket="open-gzip", Key="small.gz", ResponseContentEncoding="identity")
    assert got["ContentEncoding"] == "identity" and got["Body"].read() == sent["small.gz"][1]


def test_listing_with_a_delimiter_over_thousands_of_keys(s3, bucket, fs):
    keys = [f"many/d{d:02d}/k{k:03d}" for d in range(20) for k in range(100)] + [f"many/top{k:02d}" for k in range(50)]
    for d in range(20):
        fs.mkdir(f"/{bucket}/many/d{d:02d}", parents=True)
    with ThreadPoolExecutor(8) as pool:   # empty files straight into the namespace: the listing is under test
        list(pool.map(lambda k: fs.write_bytes(f"/{bucket}/{k}", b""), keys))
    paginator = s3.get_paginator("list_objects_v2")
    listed = [o["Key"] for page in paginator.paginate(Bucket=bucket, Prefix="many/") for o in page.get("Contents", [])]
    assert listed == sorted(keys)
    pages = list(paginator.paginate(Bucket=bucket, Prefix="many/", Delimiter="/", PaginationConfig={"PageSize": 7}))
    prefixes = [p["Prefix"] for page in pages for p in page.get("CommonPrefixes", [])]
    top = [o["Key"] for page in pages for o in page.get("Contents", [])]
    assert prefixes == [f"many/d{d:02d}/" for d in range(20)] and top == [f"many/top{k:02d}" for k in range(50)]
    assert len(pages) == 10
    after = s3.list_objects_v2(Bucket=bucket, Prefix="many/d05/", StartAfter="many/d05/k097")
    assert [o["Key"] for o in after["Contents"]] == ["many/d05/k098", "many/d05/k099"]
    v1 = s3.list_objects(Bucket=bucket, Prefix="many/d1", Delimiter="/", MaxKeys=3)
    assert [p["Prefix"] for p in v1["CommonPrefixes"]] == ["many/d10/", "many/d11/", "many/d12/"] and v1["IsTruncated"]
    v1 = s3.list_objects(Bucket=bucket, Prefix="many/d1", Delimiter="/", Marker=v1["NextMarker"])
    assert [p["Prefix"] for p in v1["CommonPrefixes"]] == [f"many/d{d}/" for d in range(13, 20)]


def test_listing_is_in_s3_key_order_not_directory_order(s3, bucket):
    for key in ["order/a/b", "order/a.txt", "order/a0", "order/a-"]:
        s3.put_object(Bucket=bucket, Key=key, Body=b"1")
    listed = [o["Key"] for o in s3.list_objects_v2(Bucket=bucket, Prefix="order/")["Contents"]]
    assert listed == ["order/a-", "order/a.txt", "order/a/b", "order/a0"]


def test_a_folder_key_is_an_empty_directory(s3, bucket, fs):
    s3.put_object(Bucket=bucket, Key="folders/empty/", Body=b"")
    assert fs.stat(f"/{bucket}/folders/empty").is_dir
    listed = s3.list_objects_v2(Bucket=bucket, Prefix="folders/")["Contents"]
    assert [(o["Key"], o["Size"]) for o in listed] == [("folders/empty/", 0)]
    assert s3.get_object(Bucket=bucket, Key="folders/empty/")["Body"].read() == b""
    s3.put_object(Bucket=bucket, Key="folders/full/x", Body=b"x")
    s3.delete_object(Bucket=bucket, Key="folders/full/x")     # its directory goes with it, as a prefix does
    assert [o["Key"] for o in s3.list_objects_v2(Bucket=bucket, Prefix="folders/")["Contents"]] == ["folders/empty/"]


def test_metadata_content_type_and_copies(s3, bucket):
    s3.put_object(Bucket=bucket, Key="meta/src.txt", Body=b"body", ContentType="text/plain",
                  Metadata={"colour": "blue"}, CacheControl="max-age=60")
    head = s3.head_object(Bucket=bucket, Key="meta/src.txt")
    assert (head["ContentType"], head["Metadata"], head["CacheControl"]) == \
        ("text/plain", {"colour": "blue"}, "max-age=60")
    s3.copy_object(Bucket=bucket, Key="meta/copy.txt", CopySource={"Bucket": bucket, "Key": "meta/src.txt"})
    copy = s3.get_object(Bucket=bucket, Key="meta/copy.txt")
    assert copy["Body"].read() == b"body" and copy["Metadata"] == {"colour": "blue"} and copy["ETag"] == head["ETag"]
    s3.copy_object(Bucket=bucket, Key="meta/src.txt", CopySource={"Bucket": bucket, "Key": "meta/src.txt"},
                   MetadataDirective="REPLACE", Metadata={"colour": "red"}, ContentType="text/x-red")
    head = s3.head_object(Bucket=bucket, Key="meta/src.txt")
    assert (head["ContentType"], head["Metadata"]) == ("text/x-red", {"colour": "red"})


def test_metadata_is_the_files_xattrs_everywhere_it_shows(s3, bucket, fs):
    """PUT, HEAD, GET, copy, multipart and listing all show one object's own ETag and metadata,
    kept as its file's xattrs (no sidecar file anywhere)."""
    data = pattern(CELL + 3, seed=48)
    etag = s3.put_object(Bucket=bucket, Key="xa/one.bin", Body=data, ContentType="text/x-one",
                         Metadata={"n": "1"}, Tagging="t=1")["ETag"]
    assert etag == f'"{hashlib.md5(data).hexdigest()}"'
    kept = json.loads(fs.get_xattrs(f"/{bucket}/xa/one.bin")["user.s3"])
    assert (kept["etag"], kept["content_type"], kept["meta"]) == (etag, "text/x-one", {"x-amz-meta-n": "1"})
    head = s3.head_object(Bucket=bucket, Key="xa/one.bin")
    got = s3.get_object(Bucket=bucket, Key="xa/one.bin")
    assert got["Body"].read() == data
    for answer in (head, got):
        assert (answer["ETag"], answer["ContentType"], answer["Metadata"]) == (etag, "text/x-one", {"n": "1"})
    assert s3.get_object_tagging(Bucket=bucket, Key="xa/one.bin")["TagSet"] == [{"Key": "t", "Value": "1"}]
    s3.copy_object(Bucket=bucket, Key="xa/copy.bin", CopySource={"Bucket": bucket, "Key": "xa/one.bin"})
    copy = s3.head_object(Bucket=bucket, Key="xa/copy.bin")
    assert (copy["ETag"], copy["ContentType"], copy["Metadata"]) == (etag, "text/x-one", {"n": "1"})
    parts = [pattern(5 * MiB, seed=1), b"tail"]
    upload_id, done = _multipart(s3, bucket, "xa/multi.bin", parts)
    multi = s3.complete_multipart_upload(Bucket=bucket, Key="xa/multi.bin", UploadId=upload_id,
                                         MultipartUpload={"Parts": done})["ETag"]
    head = s3.head_object(Bucket=bucket, Key="xa/multi.bin")
    assert (head["ETag"], head["ContentType"], head["Metadata"]) == (multi, "video/mp4", {"take": "2"})
    listed = {o["Key"]: o["ETag"] for o in s3.list_objects_v2(Bucket=bucket, Prefix="xa/")["Contents"]}
    assert listed == {"xa/one.bin": etag, "xa/copy.bin": etag, "xa/multi.bin": multi}
    assert not any(s.path.endswith("/meta") for s in fs.list(f"/{bucket}/.hedgefs-s3"))


def test_a_put_whose_commit_fails_leaves_the_old_object_and_its_metadata(cluster, s3, bucket, fs):
    """The new bytes are written and described aside; the rename over the key is refused (here: an
    object is there and the write may not replace it): the old object, bytes and metadata, stays."""
    from hedgefs.client.errors import AlreadyExists
    from hedgefs.s3.store import Store, labels

    old = s3.put_object(Bucket=bucket, Key="xa/kept.bin", Body=b"old bytes", Metadata={"v": "old"})["ETag"]
    store = Store(fs)
    with pytest.raises(AlreadyExists):
        store.write_object(bucket, f"/{bucket}/xa/kept.bin", lambda aside: fs.write_bytes(aside, b"new bytes"),
                           overwrite=False, describe=lambda: labels('"new"', "text/x-new", {"v": "new"}))
    got = s3.get_object(Bucket=bucket, Key="xa/kept.bin")
    assert (got["Body"].read(), got["ETag"], got["Metadata"]) == (b"old bytes", old, {"v": "old"})
    assert not [s for s in fs.list(f"/{bucket}/.hedgefs-s3/uploads") if "/put-" in s.path]   # the aside went
    with pytest.raises(ClientError) as err:   # the same through S3: If-None-Match: * onto the object
        s3.put_object(Bucket=bucket, Key="xa/kept.bin", Body=b"newer", Metadata={"v": "newer"}, IfNoneMatch="*")
    assert code(err) == "PreconditionFailed"
    got = s3.get_object(Bucket=bucket, Key="xa/kept.bin")
    assert (got["Body"].read(), got["ETag"], got["Metadata"]) == (b"old bytes", old, {"v": "old"})


def test_concurrent_puts_of_one_key_all_succeed_and_the_object_is_one_of_them_whole(s3, bucket):
    """S3's dual writes: every PUT is 200; the object is then one PUT's bytes with that PUT's own
    ETag and metadata (never one PUT's bytes with another's metadata)."""
    bodies = {str(i): pattern(STRIPE + 1000 * i, seed=100 + i) for i in range(6)}
    for round_ in range(3):
        def put(i):
            return i, s3.put_object(Bucket=bucket, Key="xa/dual.bin", Body=bodies[i], Metadata={"who": i},
                                    ContentType=f"text/x-{i}")
        with ThreadPoolExecutor(len(bodies)) as pool:
            answers = dict(pool.map(put, bodies))
        assert all(a["ResponseMetadata"]["HTTPStatusCode"] == 200 for a in answers.values())
        got = s3.get_object(Bucket=bucket, Key="xa/dual.bin")
        who = got["Metadata"]["who"]
        assert got["Body"].read() == bodies[who], round_
        assert (got["ETag"], got["ContentType"]) == (answers[who]["ETag"], f"text/x-{who}")
        assert got["ETag"] == f'"{hashlib.md5(bodies[who]).hexdigest()}"'


def test_a_file_put_outside_s3_is_an_object_with_a_version_etag(s3, bucket, fs):
    fs.write_bytes(f"/{bucket}/outside.bin", b"from hedgefs put")
    got = s3.get_object(Bucket=bucket, Key="outside.bin")
    assert got["Body"].read() == b"from hedgefs put" and got["ETag"].endswith('-1"')


def test_conditional_gets(s3, bucket):
    etag = s3.put_object(Bucket=bucket, Key="cond.txt", Body=b"c")["ETag"]
    assert s3.get_object(Bucket=bucket, Key="cond.txt", IfMatch=etag)["Body"].read() == b"c"
    for kwargs, status in [({"IfNoneMatch": etag}, 304), ({"IfMatch": '"0000"'}, 412),
                           ({"IfModifiedSince": "Fri, 01 Jan 2100 00:00:00 GMT"}, 304),
                           ({"IfUnmodifiedSince": "Fri, 01 Jan 2000 00:00:00 GMT"}, 412)]:
        with pytest.raises(ClientError) as err:
            s3.get_object(Bucket=bucket, Key="cond.txt", **kwargs)
        assert err.value.response["ResponseMetadata"]["HTTPStatusCode"] == status, kwargs
        if status == 304:   # a 304 names the version the client has
            assert err.value.response["ResponseMetadata"]["HTTPHeaders"]["etag"] == etag


def test_errors_carry_s3_codes(s3, bucket, gateway, keys):
    for call, expected in [(lambda: s3.get_object(Bucket="no-such-bucket", Key="k"), "NoSuchBucket"),
                           (lambda: s3.get_object(Bucket=bucket, Key="no/such/key"), "NoSuchKey"),
                           (lambda: s3.delete_bucket(Bucket=bucket), "BucketNotEmpty"),
                           (lambda: s3.create_bucket(Bucket=bucket, CreateBucketConfiguration={
                               "LocationConstraint": "eu-west-1"}), "BucketAlreadyOwnedByYou"),
                           (lambda: s3.create_bucket(Bucket="Bad_Name"), "InvalidBucketName"),
                           (lambda: s3.get_bucket_policy(Bucket=bucket), "NoSuchBucketPolicy"),
                           (lambda: s3.put_bucket_policy(Bucket=bucket, Policy="{}"), "NotImplemented"),
                           (lambda: s3.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={
                               "Status": "Enabled"}), "NotImplemented")]:
        with pytest.raises(ClientError) as err:
            call()
        assert code(err) == expected
    s3.create_bucket(Bucket=bucket)   # again by its owner, in us-east-1: S3 says yes and nothing changes
    assert s3.head_object(Bucket=bucket, Key="cond.txt")
    access, _secret = keys[1]
    for wrong, expected in [(boto3_client(gateway.endpoint, access, "wrong-secret"), "SignatureDoesNotMatch"),
                            (boto3_client(gateway.endpoint, "HFNOSUCHKEY0000000000", "x"), "InvalidAccessKeyId")]:
        with pytest.raises(ClientError) as err:
            wrong.list_objects_v2(Bucket=bucket)
        assert code(err) == expected
    with pytest.raises(urllib.error.HTTPError) as err:
        urllib.request.urlopen(f"{gateway.endpoint}/{bucket}/cond.txt", timeout=10)
    assert err.value.code == 403 and b"<Code>AccessDenied</Code>" in err.value.read()


def test_delete_objects_and_buckets(s3):
    s3.create_bucket(Bucket="scratch")
    for k in ["a", "b/c", "b/d"]:
        s3.put_object(Bucket="scratch", Key=k, Body=b"1")
    result = s3.delete_objects(Bucket="scratch", Delete={"Objects": [{"Key": k} for k in ["a", "b/c", "b/d", "gone"]]})
    assert sorted(d["Key"] for d in result["Deleted"]) == ["a", "b/c", "b/d", "gone"]
    assert s3.list_objects_v2(Bucket="scratch")["KeyCount"] == 0
    s3.delete_bucket(Bucket="scratch")
    assert "scratch" not in [b["Name"] for b in s3.list_buckets()["Buckets"]]
    with pytest.raises(ClientError) as err:
        s3.head_bucket(Bucket="scratch")
    assert err.value.response["ResponseMetadata"]["HTTPStatusCode"] == 404


def test_a_presigned_get(s3, bucket):
    data = pattern(CELL + 3, seed=9)
    s3.put_object(Bucket=bucket, Key="presigned.bin", Body=data)
    url = s3.generate_presigned_url("get_object", Params={"Bucket": bucket, "Key": "presigned.bin"}, ExpiresIn=300)
    with urllib.request.urlopen(url, timeout=10) as r:
        assert r.read() == data
    with pytest.raises(urllib.error.HTTPError) as err:
        urllib.request.urlopen(url.replace("presigned.bin", "other.bin"), timeout=10)
    assert err.value.code == 403 and b"SignatureDoesNotMatch" in err.value.read()


def test_a_signed_chunked_upload(gateway, keys, bucket):
    """STREAMING-AWS4-HMAC-SHA256-PAYLOAD as the Java and Go SDKs send it (boto3 does not)."""
    data = pattern(100_000, seed=5)
    headers, body = signed_chunked_put(gateway, *keys[1], f"/{bucket}/chunked.bin", [data[:65536], data[65536:]])
    status, answer = raw_put(gateway, f"/{bucket}/chunked.bin", headers, body)
    assert status == 200, answer
    s3 = boto3_client(gateway.endpoint, *keys[1])
    assert s3.get_object(Bucket=bucket, Key="chunked.bin")["Body"].read() == data
    headers, body = signed_chunked_put(gateway, *keys[1], f"/{bucket}/chunked2.bin", [data[:65536], data[65536:]])
    status, answer = raw_put(gateway, f"/{bucket}/chunked2.bin", headers, body.replace(data[70000:70050], bytes(50)))
    assert status == 403 and b"SignatureDoesNotMatch" in answer
    with pytest.raises(ClientError):
        s3.head_object(Bucket=bucket, Key="chunked2.bin")


def _aws(gateway, keys, *args, input=None):
    env = dict(os.environ, AWS_ACCESS_KEY_ID=keys[1][0], AWS_SECRET_ACCESS_KEY=keys[1][1],
               AWS_DEFAULT_REGION="us-east-1", AWS_CONFIG_FILE=os.devnull, AWS_SHARED_CREDENTIALS_FILE=os.devnull)
    aws = os.path.join(os.path.dirname(sys.executable), "aws")
    return subprocess.run([aws, "--endpoint-url", gateway.endpoint, *args], capture_output=True, env=env,
                          input=input, timeout=120)


def test_the_aws_cli(gateway, keys, bucket, tmp_path):
    src = tmp_path / "src"
    (src / "sub").mkdir(parents=True)
    (src / "one.bin").write_bytes(pattern(9 * MiB, seed=11))   # over the CLI's 8 MiB threshold: multipart
    (src / "sub" / "two.txt").write_bytes(b"two")
    for args in [("s3", "cp", str(src / "one.bin"), f"s3://{bucket}/cli/one.bin"),
                 ("s3", "sync", str(src), f"s3://{bucket}/cli/tree/"),
                 ("s3", "cp", f"s3://{bucket}/cli/one.bin", str(tmp_path / "back.bin"))]:
        result = _aws(gateway, keys, *args)
        assert result.returncode == 0, result.stderr
    assert (tmp_path / "back.bin").read_bytes() == (src / "one.bin").read_bytes()
    listing = _aws(gateway, keys, "s3", "ls", "--recursive", f"s3://{bucket}/cli/").stdout.decode()
    assert [line.split()[-1] for line in listing.splitlines()] == \
        ["cli/one.bin", "cli/tree/one.bin", "cli/tree/sub/two.txt"]
    assert _aws(gateway, keys, "s3", "sync", str(src), f"s3://{bucket}/cli/tree/").stdout == b""   # nothing changed
    head = _aws(gateway, keys, "s3api", "head-object", "--bucket", bucket, "--key", "cli/tree/sub/two.txt")
    assert b'"ContentLength": 3' in head.stdout
    assert _aws(gateway, keys, "s3", "rm", "--recursive", f"s3://{bucket}/cli/").returncode == 0
    assert _aws(gateway, keys, "s3", "ls", f"s3://{bucket}/cli/").stdout == b""


def test_s3fs(gateway, keys, bucket):
    import s3fs

    fs3 = s3fs.S3FileSystem(key=keys[1][0], secret=keys[1][1], client_kwargs={"endpoint_url": gateway.endpoint,
                                                                              "region_name": "us-east-1"},
                            use_listings_cache=False)
    data = pattern(STRIPE * 3 + 11, seed=12)
    with fs3.open(f"{bucket}/s3fs/file.bin", "wb") as f:
        f.write(data)
    assert fs3.cat(f"{bucket}/s3fs/file.bin") == data
    with fs3.open(f"{bucket}/s3fs/file.bin", "rb", block_size=CELL) as f:
        f.seek(STRIPE - 3)
        assert f.read(10) == data[STRIPE - 3:STRIPE + 7]
    assert fs3.ls(f"{bucket}/s3fs/") == [f"{bucket}/s3fs/file.bin"]
    fs3.rm(f"{bucket}/s3fs/file.bin")
    assert not fs3.exists(f"{bucket}/s3fs/file.bin")


def test_gets_ride_out_a_frozen_datanode(cluster, s3, bucket, gateway, fs):
    """SIGSTOP one DataNode holding a unit of the object: every GET still returns the exact bytes,
    and the gateway's hedge counter shows it read around it."""
    data = pattern(4 * STRIPE, seed=13)
    s3.put_object(Bucket=bucket, Key="frozen.bin", Body=data)
    victim = fs.stat(f"/{bucket}/frozen.bin").groups[0].units[0].datanode_id
    around = ("hedgefs_client_hedges_total", "hedgefs_client_rebuilt_on_failure_total", "hedgefs_client_avoided_total")
    hedges = sum(gateway.metric(name) for name in around)   # hedged, rebuilt, or read around as silent
    cluster.freeze(victim)
    try:
        for i in range(6):
            start = (i * 7919) % len(data)
            got = s3.get_object(Bucket=bucket, Key="frozen.bin", Range=f"bytes={start}-{start + CELL * 2}")
            assert got["Body"].read() == data[start:start + CELL * 2 + 1]
        assert s3.get_object(Bucket=bucket, Key="frozen.bin")["Body"].read() == data
    finally:
        cluster.thaw(victim)
    after = sum(gateway.metric(name) for name in around)
    assert after > hedges


def test_cli_errors_are_one_line(cluster, tmp_path):
    assert_one_line_error(run_cli("s3", namenode=cluster.namenode), "--keys")
    assert_one_line_error(run_cli("s3", "--keys", str(tmp_path / "none"), namenode=cluster.namenode),
                          "no such directory")
    result = run_cli("s3", "--allow-anonymous", namenode="127.0.0.1:1")
    assert_one_line_error(result, "cannot reach the NameNode")
    assert result.code == 3
    assert_one_line_error(run_cli("admin", "s3-key", "--user", "alice", namenode=cluster.namenode), "--keys")
    assert_one_line_error(run_cli("admin", "s3-key", "--user", "bad name!", "--keys", str(tmp_path),
                                  namenode=cluster.namenode), "bad user name")


def test_a_stored_object_is_read_back_by_wait_free_clients(s3, bucket):
    """Several clients reading at once get the bytes, each its own ranges (the gateway holds no
    per-request thread while streaming)."""
    data = pattern(GROUP + STRIPE, seed=14)
    s3.put_object(Bucket=bucket, Key="parallel.bin", Body=io.BytesIO(data))

    def read(i):
        start = (i * 104729) % (len(data) - CELL)
        got = s3.get_object(Bucket=bucket, Key="parallel.bin", Range=f"bytes={start}-{start + CELL - 1}")
        return got["Body"].read() == data[start:start + CELL]

    with ThreadPoolExecutor(8) as pool:
        assert all(pool.map(read, range(32)))


def test_a_key_that_is_also_a_prefix_is_refused_clearly(s3, bucket):
    s3.put_object(Bucket=bucket, Key="clash/file", Body=b"1")
    for key in ("clash/file/below", "clash"):
        with pytest.raises(ClientError) as err:
            s3.put_object(Bucket=bucket, Key=key, Body=b"2")
        assert code(err) == "InvalidRequest" and err.value.response["ResponseMetadata"]["HTTPStatusCode"] == 409
    for key in ("clash//x", "clash/./x", "clash/../x"):
        with pytest.raises(ClientError) as err:
            s3.put_object(Bucket=bucket, Key=key, Body=b"2")
        assert code(err) == "InvalidArgument"
    assert s3.get_object(Bucket=bucket, Key="clash/file")["Body"].read() == b"1"


def _a_slow_reader_over_tls_gets_every_byte(s3s, bucket: str, cert: str) -> None:
    """A whole GET read slowly through a small socket buffer: the TLS transport holds what it
    could not send yet while the gateway's buffers are read into again (issue 43); every byte
    must be the object's."""
    import http.client
    import socket
    import ssl
    import time

    data = pattern(40 * STRIPE + 13, seed=43)
    s3s.put_object(Bucket=bucket, Key="tls-slow.bin", Body=data)
    url = urllib.parse.urlsplit(s3s.generate_presigned_url("get_object", Params={"Bucket": bucket,
                                                                                  "Key": "tls-slow.bin"}))
    conn = http.client.HTTPSConnection(url.hostname, url.port, context=ssl.create_default_context(cafile=cert),
                                       timeout=60)
    conn.connect()
    conn.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16 << 10)
    conn.request("GET", f"{url.path}?{url.query}")
    response = conn.getresponse()
    assert response.status == 200
    got = bytearray()
    while chunk := response.read(16 << 10):
        got += chunk
        time.sleep(0.001)   # the reader is slow: the gateway's sends outrun it all along
    conn.close()
    assert len(got) == len(data) and hashlib.sha256(got).digest() == hashlib.sha256(data).digest()


def test_https_with_a_certificate(cluster, keys, bucket, tmp_path):
    cert, key = self_signed(str(tmp_path))
    tls = GatewayProcess(cluster.namenode, str(tmp_path), "--tls-cert", cert, "--tls-key", key, keys=keys[0])
    try:
        assert tls.endpoint.startswith("https://")
        import boto3
        from botocore.config import Config

        s3s = boto3.client("s3", endpoint_url=tls.endpoint.replace("127.0.0.1", "localhost"), verify=cert,
                           aws_access_key_id=keys[1][0], aws_secret_access_key=keys[1][1], region_name="us-east-1",
                           config=Config(signature_version="s3v4", s3={"addressing_style": "path"}))
        s3s.put_object(Bucket=bucket, Key="tls.bin", Body=pattern(CELL + 1))
        assert s3s.get_object(Bucket=bucket, Key="tls.bin")["Body"].read() == pattern(CELL + 1)
        _a_slow_reader_over_tls_gets_every_byte(s3s, bucket, cert)
    finally:
        tls.stop()
    assert_one_line_error(run_cli("s3", "--keys", keys[0], "--tls-cert", cert, namenode=cluster.namenode),
                          "no private key", "give --tls-key")
    assert_one_line_error(run_cli("s3", "--keys", keys[0], "--tls-key", key, namenode=cluster.namenode),
                          "goes with --tls-cert")
