"""The S3 gateway on an HA cluster, where one NameNode change must fit one etcd transaction
(here 27 rows: --etcd-max-txn-ops 64). A multipart Complete joins parts whose sizes allow it by
one concat; a concat of more groups than a transaction holds is refused ("do it in parts"), and
the Complete failed for ever. It now copies the parts into the object instead (as for parts of
sizes concat cannot join): the parts stay whole until the object is, so a failed Complete can
be sent again. Real processes: a 3-member etcd, a NameNode, 3 DataNodes, the gateway, boto3.
"""

import hashlib

from etcd_support import etcd_cluster, prefix  # noqa: F401  (the fixture)
from ha_support import DataNodeProcess, NameNodeProcess, active_of, stub
from s3_support import GatewayProcess, boto3_client, issue_key

from conftest import pattern, wait_until
from hedgefs.proto import hedgefs_pb2 as pb

MiB = 1 << 20
# REPLICATE-3 with 1 MiB groups: a part of 5 MiB is 5 whole groups, so parts are joined by concat
NN_ARGS = ("--default-policy", "REPLICATE-3", "--block-size", "65536", "--etcd-max-txn-ops", "64")


def test_a_multipart_complete_of_more_groups_than_one_etcd_change_holds(etcd_cluster, tmp_path):
    nn = NameNodeProcess(tmp_path, "nn1", etcd_cluster.url(prefix("s3ha")), *NN_ARGS).start()
    dns, gateway = [], None
    try:
        active_of([nn])
        dns = [DataNodeProcess(tmp_path, f"dn{i}", nn.address).start() for i in range(1, 4)]
        wait_until(lambda: sum(d.state == "live" for d in stub(nn.address).Report(pb.Empty(), timeout=2).datanodes)
                   == 3, 30, "3 live DataNodes")
        keys = str(tmp_path / "keys")
        access, secret = issue_key(nn.address, keys)
        gateway = GatewayProcess(nn.address, str(tmp_path), keys=keys)
        s3 = boto3_client(gateway.endpoint, access, secret)
        s3.create_bucket(Bucket="bkt")
        parts = [pattern(5 * MiB, seed=n) for n in range(6)] + [pattern(MiB + 7, seed=6)]
        upload = s3.create_multipart_upload(Bucket="bkt", Key="big")["UploadId"]
        done = [{"PartNumber": n + 1, "ETag": s3.upload_part(Bucket="bkt", Key="big", UploadId=upload, PartNumber=n + 1,
                                                               Body=body)["ETag"]} for n, body in enumerate(parts)]
        answer = s3.complete_multipart_upload(Bucket="bkt", Key="big", UploadId=upload,
                                              MultipartUpload={"Parts": done})
        digests = b"".join(hashlib.md5(body).digest() for body in parts)
        assert answer["ETag"] == f'"{hashlib.md5(digests).hexdigest()}-7"'
        assert s3.get_object(Bucket="bkt", Key="big")["Body"].read() == b"".join(parts)
        assert s3.list_multipart_uploads(Bucket="bkt").get("Uploads", []) == []
    finally:
        if gateway is not None:
            gateway.stop()
        for d in dns:
            d.stop()
        nn.stop()
