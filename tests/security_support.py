"""What the attack tests (test_security_attacks.py) use to attack with and to check that
nothing changed: credentials by user, raw stubs and data connections, refusals, the namespace."""


import grpc
import pytest
from conftest import client, pattern

from hedgefs.client.admin import ClusterReport
from hedgefs.proto import GRPC_OPTIONS, hedgefs_pb2_grpc
from hedgefs.proto import datatransfer as dt
from hedgefs.proto import hedgefs_pb2 as pb
from hedgefs.security import material, tls
from hedgefs.security.identity import DATANODE, NAMENODE_NAME, server_name


def as_(user: str, cluster) -> dict:
    return {"HEDGEFS_CREDENTIALS": str(cluster.security_dir / f"{user}.pem")}


DATA = pattern(3 * 1024 * 1024 + 4321, seed=14)   # /user/alice/f, which every attack leaves as it is


def namespace(cluster) -> list[tuple]:
    with client(cluster.namenode) as fs:
        return [(e.path, e.length, e.owner, e.group, e.permission) for e in fs.list("/", recursive=True)]


def unchanged(cluster) -> None:
    """/user/alice/f still holds its bytes, and fsck is HEALTHY."""
    with client(cluster.namenode) as fs:
        assert fs.read_bytes("/user/alice/f") == DATA
        assert fs.admin.fsck("/").status == "HEALTHY"


def stub(cluster, credential_path, service="NameNode", address=None, name=NAMENODE_NAME):
    cred = material.load_credential(credential_path) if credential_path else None
    channel = tls.channel(address or cluster.namenode, cred, name, GRPC_OPTIONS)
    return channel, getattr(hedgefs_pb2_grpc, f"{service}Stub")(channel)


def refused(call, request) -> tuple[grpc.StatusCode, str]:
    with pytest.raises(grpc.RpcError) as err:
        call(request, timeout=10)
    return err.value.code(), err.value.details()


def data_conn(cluster, credential_path, datanode_id, address):
    ctx = tls.client_context(material.load_credential(credential_path))
    return dt.connect(address, 10, lambda s: ctx.wrap_socket(s, server_hostname=server_name(DATANODE, datanode_id)))


def locations(cluster, path="/user/alice/f"):
    with client(cluster.namenode) as fs:
        return fs.stat(path).groups[0]


def dn_calls(cluster, dn: str) -> dict:
    return dict(cluster.datanode_rpc(dn, "GetFaults", pb.FaultClearRequest()).calls)


# ---------------------------------------------------------------------------- credentials


def admin_report(cluster) -> ClusterReport:
    with client(cluster.namenode) as fs:
        return fs.admin.report()
