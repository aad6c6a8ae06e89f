"""security/ without a cluster: credential files, block tokens, the authorization tables, permissions.

The attacks on real processes are in test_security_attacks.py; this is what they rest on.
"""

import os
import stat
import threading
from concurrent.futures import ThreadPoolExecutor

import grpc
import pytest

from hedgefs.datanode import servicer as dn_servicer
from hedgefs.namenode.rpc import servicer as nn_servicer
from hedgefs.namenode.namespace.permissions import EXECUTE, READ, WRITE, allowed, mode_string
from hedgefs.proto import hedgefs_pb2 as pb
from hedgefs.proto import hedgefs_pb2_grpc
from hedgefs.security import material, rpc, tls, tokens
from hedgefs.security.identity import Identity
from hedgefs.security.material import CredentialError, load_credential


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    return material.init_material(tmp_path_factory.mktemp("sec"), ["dn1", "dn2"])


def test_init_material_writes_private_credentials_that_load_and_say_who_they_are(made):
    names = sorted(p.name for p in made.directory.iterdir())
    assert names == ["admin.pem", "ca.pem", "dn1.pem", "dn2.pem", "etcd", "namenode.pem"]
    for path in (made.namenode, made.admin, *made.datanodes.values()):
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    nn, dn1, admin = (load_credential(p) for p in (made.namenode, made.datanodes["dn1"], made.admin))
    assert (nn.identity, dn1.identity, admin.identity) == (
        Identity("namenode", "namenode"), Identity("dn1", "datanode"), Identity("hedgefs", "admin"))
    assert nn.cluster_id == dn1.cluster_id == admin.cluster_id == made.cluster_id
    assert nn.ca_key_pem and nn.cluster_key and dn1.cluster_key == nn.cluster_key
    assert admin.cluster_key is None and admin.ca_key_pem is None and dn1.ca_key_pem is None
    assert (dn1.server_name, nn.server_name) == ("dn1.datanode.hedgefs", "namenode.hedgefs")
    with pytest.raises(FileExistsError):   # never over an existing cluster's material
        material.init_material(made.directory, ["dn1"])


def test_a_credential_file_others_can_read_or_that_is_inconsistent_is_refused(made, tmp_path):
    loose = tmp_path / "loose.pem"
    loose.write_bytes(made.admin.read_bytes())
    os.chmod(loose, 0o644)
    with pytest.raises(CredentialError, match="others may read it .mode 0644.: chmod 600"):
        load_credential(loose)
    other = material.init_material(tmp_path / "other", [])
    mixed = tmp_path / "mixed.pem"   # this cluster's key and certificate, another cluster's CA
    own = load_credential(made.admin)
    material.write_private(mixed, material.bundle(own.key_pem, own.cert_pem, load_credential(other.admin).ca_pem))
    with pytest.raises(CredentialError, match="not signed by the CA in the file"):
        load_credential(mixed)
    with pytest.raises(CredentialError, match="no such credential file"):
        load_credential(tmp_path / "missing.pem")


def test_issue_signs_a_key_made_elsewhere_with_groups(made):
    nn = load_credential(made.namenode)
    key = material.new_private_key()
    cert = material.issue(nn.ca_key_pem, nn.ca_pem, Identity("alice", "user", ("staff", "ops")),
                          material.public_key_pem(key))
    from cryptography import x509
    assert material.identity_of(x509.load_pem_x509_certificate(cert)) == Identity("alice", "user", ("staff", "ops"))
    for bad in (Identity("a/b", "user"), Identity("dn_1", "datanode"), Identity("x", "root")):
        with pytest.raises(ValueError):
            material.issue(nn.ca_key_pem, nn.ca_pem, bad, material.public_key_pem(key))


def test_block_tokens_allow_exactly_one_operation_on_one_unit_until_they_expire():
    now = [1000.0]
    signer = tokens.BlockTokens(b"k" * 32, lifetime_s=60, clock=lambda: now[0])
    token = signer.sign(tokens.READ, 7, 3, 99)
    assert len(token) == tokens.SIZE
    assert signer.check(token, tokens.READ, 7, 3, 99).expiry_ms == 1_060_000
    cases = {
        "does not allow read of unit 7/4": (token, tokens.READ, 7, 4, 99),
        "does not allow write of unit 7/3": (token, tokens.WRITE, 7, 3, 99),
        "does not allow read of unit 7/3 generation 98": (token, tokens.READ, 7, 3, 98),
        "bad signature": (token[:-1] + bytes([token[-1] ^ 1]), tokens.READ, 7, 3, 99),
        "no block token": (b"", tokens.READ, 7, 3, 99),
        "malformed": (token[:-3], tokens.READ, 7, 3, 99),
    }
    for why, args in cases.items():
        with pytest.raises(tokens.TokenError, match=why):
            signer.check(*args)
    forged = bytearray(token)
    forged[22:30] = (2_000_000).to_bytes(8, "little")   # a later expiry: the MAC no longer matches
    with pytest.raises(tokens.TokenError, match="bad signature"):
        signer.check(bytes(forged), tokens.READ, 7, 3, 99)
    with pytest.raises(tokens.TokenError, match="bad signature"):    # another cluster's key
        tokens.BlockTokens(b"j" * 32, clock=lambda: now[0]).check(token, tokens.READ, 7, 3, 99)
    now[0] = 1060.5
    with pytest.raises(tokens.TokenError, match=r"read token for unit 7/3 generation 99 expired 0.5 s ago"):
        signer.check(token, tokens.READ, 7, 3, 99)


@pytest.mark.parametrize("service,table", [("NameNode", nn_servicer.AUTHORIZATION),
                                           ("DataNode", dn_servicer.AUTHORIZATION)])
def test_every_rpc_of_every_service_is_classified(service, table):
    descriptor = pb.DESCRIPTOR.services_by_name[service]
    assert rpc.unclassified(descriptor, table) == []
    assert set(table) == {m.name for m in descriptor.methods}    # and nothing stale is


def test_an_unclassified_rpc_is_refused_in_either_mode(made):
    """A new RPC nobody classified (here: Mkdir, taken out of a copy of the table) fails closed,
    through a real gRPC server, secure or not."""
    class Servicer(hedgefs_pb2_grpc.NameNodeServicer):
        def Mkdir(self, request, context):
            return pb.MkdirResponse()

    table = {k: v for k, v in nn_servicer.AUTHORIZATION.items() if k != "Mkdir"}
    for secure in (False, True):
        server = grpc.server(ThreadPoolExecutor(2), interceptors=[rpc.Authorizer("NameNode", table, secure=secure)])
        hedgefs_pb2_grpc.add_NameNodeServicer_to_server(Servicer(), server)
        nn = load_credential(made.namenode)
        port = (server.add_secure_port("127.0.0.1:0", tls.grpc_server_credentials(nn)) if secure
                else server.add_insecure_port("127.0.0.1:0"))
        server.start()
        try:
            admin = load_credential(made.admin) if secure else None
            with tls.channel(f"127.0.0.1:{port}", admin, material.NAMENODE_NAME, []) as channel:
                with pytest.raises(grpc.RpcError) as err:
                    hedgefs_pb2_grpc.NameNodeStub(channel).Mkdir(pb.MkdirRequest(path="/x"), timeout=5)
            assert err.value.code() == grpc.StatusCode.PERMISSION_DENIED
            assert "Mkdir is not an RPC anyone may call" in err.value.details()
        finally:
            server.stop(None)


def test_who_may_call_is_checked_before_the_method_and_the_caller_is_known_inside_it(made):
    seen = []

    class Servicer(hedgefs_pb2_grpc.NameNodeServicer):
        def Mkdir(self, request, context):
            seen.append(rpc.caller())
            return pb.MkdirResponse()

        def Report(self, request, context):
            seen.append("report ran")
            return pb.ReportResponse()

        def Heartbeat(self, request, context):
            seen.append("heartbeat ran")
            return pb.HeartbeatResponse()

    server = grpc.server(ThreadPoolExecutor(2), interceptors=[nn_servicer.authorizer(secure=True)])
    hedgefs_pb2_grpc.add_NameNodeServicer_to_server(Servicer(), server)
    port = server.add_secure_port("127.0.0.1:0", tls.grpc_server_credentials(load_credential(made.namenode)))
    server.start()
    nn = load_credential(made.namenode)
    key = material.new_private_key()
    user = made.directory / "carol.pem"
    material.write_private(user, material.bundle(
        material.key_pem(key), material.issue(nn.ca_key_pem, nn.ca_pem, Identity("carol", "user", ("staff",)),
                                              material.public_key_pem(key)), nn.ca_pem))

    def call(cred_path, method, request):
        with tls.channel(f"127.0.0.1:{port}", load_credential(cred_path), material.NAMENODE_NAME, []) as ch:
            try:
                getattr(hedgefs_pb2_grpc.NameNodeStub(ch), method)(request, timeout=5)
                return "ok"
            except grpc.RpcError as err:
                return f"{err.code().name}: {err.details()}"

    try:
        assert call(user, "Mkdir", pb.MkdirRequest(path="/c")) == "ok"
        assert seen == [Identity("carol", "user", ("staff",))]
        assert call(user, "Report", pb.Empty()) == \
            "PERMISSION_DENIED: Report needs an admin credential; user carol is not an admin"
        assert call(made.datanodes["dn1"], "Mkdir", pb.MkdirRequest(path="/d")) == \
            "PERMISSION_DENIED: Mkdir needs a user credential, not a datanode's"
        assert call(made.datanodes["dn1"], "Heartbeat", pb.HeartbeatRequest(datanode_id="dn2")) == \
            "PERMISSION_DENIED: DataNode dn1 may not speak for 'dn2' (Heartbeat)"
        assert call(made.admin, "Heartbeat", pb.HeartbeatRequest(datanode_id="dn1")) == \
            "PERMISSION_DENIED: Heartbeat is for DataNodes; admin hedgefs is not one"
        assert call(made.datanodes["dn1"], "Heartbeat", pb.HeartbeatRequest(datanode_id="dn1")) == "ok"
        assert seen[1:] == ["heartbeat ran"]     # the refused calls never reached their method
    finally:
        server.stop(None)


def test_a_caller_is_owner_then_group_then_other_and_an_admin_passes():
    class Node:
        owner, group, mode, is_dir = "alice", "staff", 0o750, True

    alice, bob, carol, root = (Identity("alice", "user"), Identity("bob", "user", ("staff",)),
                               Identity("carol", "user"), Identity("x", "admin"))
    assert allowed(alice, Node, READ | WRITE | EXECUTE)
    assert allowed(bob, Node, READ | EXECUTE) and not allowed(bob, Node, WRITE)
    assert not allowed(carol, Node, READ) and not allowed(carol, Node, EXECUTE)
    assert allowed(root, Node, READ | WRITE | EXECUTE)
    Node.mode = 0o007   # the owner's own bits apply to the owner, even when "other" has more
    assert not allowed(alice, Node, READ) and allowed(carol, Node, READ)
    assert (mode_string(True, 0o1777), mode_string(False, 0o640)) == ("drwxrwxrwt", "-rw-r-----")


def test_diagnose_tells_tls_refusals_from_a_server_that_is_down(made, tmp_path):
    """What a client says when a connection fails: a plain server, a TLS one, another cluster's."""
    import socket
    import ssl

    nn = load_credential(made.namenode)
    ctx = tls.server_context(nn)
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]

    def serve():
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            try:
                with ctx.wrap_socket(conn, server_side=True) as s:
                    s.recv(1)
            except (ssl.SSLError, OSError):
                pass

    threading.Thread(target=serve, daemon=True).start()
    try:
        address = f"127.0.0.1:{port}"
        assert "requires TLS" in tls.diagnose(address, None, "namenode.hedgefs", "the NameNode")
        other = material.init_material(tmp_path / "other", [])
        assert "not the one this credential trusts" in tls.diagnose(
            address, load_credential(other.admin), "namenode.hedgefs", "the NameNode")
        assert tls.diagnose(address, load_credential(made.admin), "namenode.hedgefs", "the NameNode") is None
    finally:
        listener.close()
    with socket.socket() as s:   # nothing listens here: not a TLS matter
        s.bind(("127.0.0.1", 0))
        closed = f"127.0.0.1:{s.getsockname()[1]}"
    assert tls.diagnose(closed, load_credential(made.admin), "namenode.hedgefs", "the NameNode") is None


@pytest.mark.parametrize("host,warnings", [("0.0.0.0", 1), ("127.0.0.1", 0)])
def test_an_insecure_server_on_a_reachable_address_says_so_once(tmp_path, host, warnings):
    import subprocess
    import sys

    from conftest import wait_until

    procs = []
    try:
        for role, args in (("namenode", ["--data-dir", str(tmp_path / "nn")]),
                           ("datanode", ["--id", "dn1", "--data-dir", str(tmp_path / "dn1"), "--namenode",
                                         "127.0.0.1:1", "--advertise-host", "127.0.0.1"])):
            port_file = tmp_path / f"{role}.port"
            log = open(tmp_path / f"{role}.log", "w")
            procs.append((role, subprocess.Popen([sys.executable, "-m", "hedgefs", role, "--host", host, "--port", "0",
                                                  "--port-file", str(port_file), *args], stderr=log, stdout=log),
                          port_file))
        for role, proc, port_file in procs:
            wait_until(lambda: port_file.exists() or proc.poll() is not None, 30, f"the {role} to write its port file",
                       detail=lambda: (tmp_path / f"{role}.log").read_text())
            assert port_file.exists(), (tmp_path / f"{role}.log").read_text()
            lines = [ln for ln in (tmp_path / f"{role}.log").read_text().splitlines() if "without --credentials" in ln]
            assert len(lines) == warnings, lines
            if warnings:
                assert f"listens on {host} without --credentials: anyone who can reach it owns the cluster" in lines[0]
    finally:
        for _, proc, _ in procs:
            proc.terminate()
            proc.wait(10)
