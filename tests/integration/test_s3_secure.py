"""The S3 gateway on a secure cluster: each access key acts as its hedgefs user, so the NameNode's
permissions apply (alice's key cannot read bob's 700 directory), and nobody is anonymous."""

import pytest
from botocore.exceptions import ClientError
from s3_support import GatewayProcess, boto3_client, issue_key

from conftest import assert_one_line_error, client, run_cli, start_cluster


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    c = start_cluster(tmp_path_factory.mktemp("s3-secure"), "secure", datanodes=9)
    yield c
    c.down()


@pytest.fixture(scope="module")
def issued(cluster, tmp_path_factory):
    """The keys directory and alice's and bob's (access, secret)."""
    keys = str(tmp_path_factory.mktemp("s3-secure-keys") / "keys")
    return keys, issue_key(cluster.namenode, keys, "alice"), issue_key(cluster.namenode, keys, "bob")


@pytest.fixture(scope="module")
def setup(cluster, issued, tmp_path_factory):
    keys, alice, bob = issued
    with client(cluster.namenode) as admin:       # buckets are top-level directories: an admin makes them
        for user in ("alice", "bob"):
            admin.mkdir(f"/{user}-bucket")
            admin.set_owner(f"/{user}-bucket", user)
            admin.set_permission(f"/{user}-bucket", 0o700)
        admin.mkdir("/shared-bucket")
        admin.set_permission("/shared-bucket", 0o777)
    gateway = GatewayProcess(cluster.namenode, str(tmp_path_factory.mktemp("s3-secure-gw")), keys=keys)
    yield gateway, boto3_client(gateway.endpoint, *alice), boto3_client(gateway.endpoint, *bob)
    gateway.stop()


def test_a_key_acts_as_its_user(setup, cluster):
    _gateway, alice, bob = setup
    alice.put_object(Bucket="alice-bucket", Key="diary.txt", Body=b"dear diary")
    assert alice.get_object(Bucket="alice-bucket", Key="diary.txt")["Body"].read() == b"dear diary"
    with client(cluster.namenode) as admin:
        assert admin.stat("/alice-bucket/diary.txt").owner == "alice"
    for call in (lambda: bob.get_object(Bucket="alice-bucket", Key="diary.txt"),
                 lambda: bob.put_object(Bucket="alice-bucket", Key="graffiti.txt", Body=b"x"),
                 lambda: bob.list_objects_v2(Bucket="alice-bucket")):
        with pytest.raises(ClientError) as err:
            call()
        assert err.value.response["Error"]["Code"] == "AccessDenied"
    bob.put_object(Bucket="bob-bucket", Key="own.txt", Body=b"mine")
    assert bob.get_object(Bucket="bob-bucket", Key="own.txt")["Body"].read() == b"mine"


def test_no_anonymous_access_on_a_secure_cluster(setup, cluster):
    import urllib.error
    import urllib.request

    gateway = setup[0]
    with pytest.raises(urllib.error.HTTPError) as err:
        urllib.request.urlopen(f"{gateway.endpoint}/alice-bucket/diary.txt", timeout=10)
    assert err.value.code == 403
    assert_one_line_error(run_cli("s3", "--allow-anonymous", namenode=cluster.namenode), "insecure cluster only")


def test_a_bucket_several_users_write(setup):
    """The gateway's own directories are 1777: bob keeps metadata and uploads where alice's went first."""
    _gateway, alice, bob = setup
    for who, s3 in (("alice", alice), ("bob", bob)):
        s3.put_object(Bucket="shared-bucket", Key=f"{who}/note.txt", Body=who.encode(), ContentType="text/x-" + who)
        upload = s3.create_multipart_upload(Bucket="shared-bucket", Key=f"{who}/big.bin")
        etag = s3.upload_part(Bucket="shared-bucket", Key=f"{who}/big.bin", UploadId=upload["UploadId"], PartNumber=1,
                              Body=who.encode())["ETag"]
        s3.complete_multipart_upload(Bucket="shared-bucket", Key=f"{who}/big.bin", UploadId=upload["UploadId"],
                                     MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": etag}]})
    for who in ("alice", "bob"):
        head = alice.head_object(Bucket="shared-bucket", Key=f"{who}/note.txt")
        assert head["ContentType"] == "text/x-" + who
        assert bob.get_object(Bucket="shared-bucket", Key=f"{who}/big.bin")["Body"].read() == who.encode()


def test_https_with_a_certificate_of_the_cluster_ca(setup, issued, cluster, tmp_path):
    """`hedgefs admin s3-cert` signs the gateway's certificate with the cluster's CA: clients check
    it with the ca.pem they hold; it is a server certificate only, no hedgefs credential."""
    import boto3
    from botocore.config import Config
    from botocore.exceptions import SSLError

    plain = setup[0]
    assert "plain HTTP" in plain.log()      # the fixture's gateway serves HTTP: it says what that means
    security = str(cluster.security_dir)
    pem = str(tmp_path / "gateway.pem")
    made = run_cli("admin", "s3-cert", "--security", security, "--host", "localhost", "--host", "127.0.0.1",
                   "--out", pem)
    assert made.code == 0, made.stderr
    keys, alice, _bob = issued
    tls = GatewayProcess(cluster.namenode, str(tmp_path), "--tls-cert", pem, keys=keys)
    try:
        assert tls.endpoint.startswith("https://127.0.0.1:") and "plain HTTP" not in tls.log()
        def client(verify):
            return boto3.client("s3", endpoint_url=tls.endpoint, verify=verify, region_name="us-east-1",
                                aws_access_key_id=alice[0], aws_secret_access_key=alice[1],
                                config=Config(signature_version="s3v4", s3={"addressing_style": "path"},
                                              retries={"max_attempts": 1}))

        s3s = client(f"{security}/ca.pem")
        s3s.put_object(Bucket="alice-bucket", Key="over-tls.bin", Body=b"x" * 100_000)
        assert s3s.get_object(Bucket="alice-bucket", Key="over-tls.bin")["Body"].read() == b"x" * 100_000
        with pytest.raises(SSLError):          # the system's CAs do not know the cluster's
            client(True).list_buckets()
    finally:
        tls.stop()
    assert_one_line_error(run_cli("ls", "/", namenode=cluster.namenode, env={"HEDGEFS_CREDENTIALS": pem}),
                          "no hedgefs identity")
    assert_one_line_error(run_cli("admin", "s3-cert", "--security", str(tmp_path), "--host", "localhost"),
                          "no namenode.pem")
    assert_one_line_error(run_cli("admin", "s3-cert", "--security", security, "--host", "bad host!"),
                          "bad host name")
    assert_one_line_error(run_cli("s3", "--keys", keys, "--tls-cert", f"{security}/ca.pem",
                                  namenode=cluster.namenode), "--tls-key")
