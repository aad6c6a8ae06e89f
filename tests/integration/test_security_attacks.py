"""Every attack of issue 14, on real processes of a secure cluster; each is refused, exit code 4
where a CLI is involved, one line naming what was refused, and nothing changes.

    no credential                           test_no_credential_is_refused_and_nothing_changes
    a plaintext client against TLS          test_plaintext_against_every_tls_port_gets_nothing
    a user credential on an admin RPC       test_a_users_credential_on_admin_rpcs_is_refused
    another cluster's key                   test_a_credential_of_another_clusters_key_is_refused
    an expired or tampered block token      test_tampered_and_expired_block_tokens_are_refused
    unit 3's token on unit 4                test_a_token_for_unit_3_does_not_open_unit_4
    a write token replayed                  test_a_write_token_replayed_on_a_committed_unit_is_refused
    a DataNode speaking as another          test_a_datanode_cannot_speak_for_another
    a DataNode of another cluster           test_a_datanode_of_another_cluster_is_refused
    rm of another user's file               test_another_users_file_cannot_be_removed_moved_or_overwritten

The wiped NameNode is test_wiped_namenode.py's. Block tokens here live 3 s, so everything in this
module also runs on renewed tokens; test_a_long_read_outlives_its_tokens says so explicitly.
"""

import socket
import subprocess
import sys
import time

import grpc
import pytest
from conftest import assert_one_line_error, client, pattern, run_cli, start_cluster
from security_support import (
    DATA,
    admin_report,
    as_,
    data_conn,
    dn_calls,
    locations,
    namespace,
    refused,
    stub,
    unchanged,
)

from hedgefs.proto import GRPC_OPTIONS, hedgefs_pb2_grpc
from hedgefs.proto import datatransfer as dt
from hedgefs.proto import hedgefs_pb2 as pb
from hedgefs.security import material, tls
from hedgefs.security.identity import DATANODE, NAMENODE_NAME, Identity, server_name

TOKEN_LIFETIME_S = 3.0


@pytest.fixture(scope="module")
def sc(tmp_path_factory):
    """A secure cluster; /user/alice belongs to alice (group staff); /shared is 1777."""
    c = start_cluster(tmp_path_factory.mktemp("secure"), "secure", block_token_lifetime_s=TOKEN_LIFETIME_S)
    admin = {"HEDGEFS_CREDENTIALS": c.credentials}
    for who, extra in (("alice", ["--groups", "staff"]), ("bob", [])):
        made = run_cli("admin", "credential", "--user", who, *extra, "--out", str(c.security_dir / f"{who}.pem"),
                       namenode=c.namenode, env=admin)
        assert made.code == 0, made.stderr
    for args in (["mkdir", "-p", "/user/alice"], ["chown", "alice:staff", "/user/alice"], ["mkdir", "/shared"],
                 ["chmod", "1777", "/shared"]):
        assert run_cli(*args, namenode=c.namenode).code == 0
    assert run_cli("put", "-", "/user/alice/f", namenode=c.namenode, input=DATA, env=as_("alice", c)).code == 0
    yield c
    c.down()


def test_no_credential_is_refused_and_nothing_changes(sc):
    before = namespace(sc)
    no_credential = {"HEDGEFS_CREDENTIALS": ""}
    for args, stdin in ((["ls", "/"], None), (["put", "-", "/shared/anon"], b"anonymous"),
                        (["rm", "/user/alice/f"], None), (["cat", "/user/alice/f"], None)):
        result = run_cli(*args, namenode=sc.namenode, input=stdin, env=no_credential)
        assert result.code == 4, result.stderr
        assert_one_line_error(result, f"the NameNode at {sc.namenode} requires TLS",
                              "--credentials or HEDGEFS_CREDENTIALS")
        assert result.stdout == b""
    # A client that speaks TLS (it trusts the cluster's CA) but shows no certificate of its own.
    ca = material.load_credential(sc.credentials).ca_pem
    with grpc.secure_channel(sc.namenode, grpc.ssl_channel_credentials(ca),
                             options=tls.channel_options(GRPC_OPTIONS, NAMENODE_NAME)) as channel:
        code, _ = refused(hedgefs_pb2_grpc.NameNodeStub(channel).Mkdir, pb.MkdirRequest(path="/anonymous"))
    assert code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.UNAUTHENTICATED)
    assert namespace(sc) == before
    unchanged(sc)


def test_plaintext_against_every_tls_port_gets_nothing(sc):
    """A client that speaks plaintext gets no answer from any port: the NameNode's and a
    DataNode's gRPC, the data port (a well-formed read request gets no byte of the unit back)."""
    group = locations(sc)
    loc = group.units[0]
    channel, nn = stub(sc, None)
    with channel:
        assert refused(nn.Delete, pb.DeleteRequest(path="/user/alice/f"))[0] == grpc.StatusCode.UNAVAILABLE
    channel, dn = stub(sc, None, "DataNode", loc.address)
    with channel:
        assert refused(dn.SetFaults, pb.FaultConfig(stall=True))[0] == grpc.StatusCode.UNAVAILABLE
    refusals = dn_calls(sc, loc.datanode_id).get("tls_refused", 0)
    host, port = loc.data_address.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as s:
        s.sendall(dt.pack_request(dt.OP_READ, group.id, 0, 0, 100, loc.token, generation=group.generation))
        received = b""
        try:
            while chunk := s.recv(65536):
                received += chunk
        except (ConnectionResetError, TimeoutError):
            pass
    assert received[:dt.RESPONSE.size] != dt.pack_response(dt.OK) and DATA[:100] not in received
    assert dn_calls(sc, loc.datanode_id)["tls_refused"] == refusals + 1
    assert dn_calls(sc, loc.datanode_id).get("stalled_reads", 0) == 0
    unchanged(sc)


def test_a_users_credential_on_admin_rpcs_is_refused(sc):
    alice = as_("alice", sc)
    out = sc.security_dir / "eve.pem"
    for args, fragment in ((["admin", "report"], "Report needs an admin credential; user alice is not an admin"),
                           (["fsck", "/"], "Fsck needs an admin credential; user alice is not an admin"),
                           (["admin", "credential", "--user", "eve", "--admin", "--out", str(out)],
                            "IssueCredential needs an admin credential; user alice is not an admin"),
                           (["chown", "bob", "/user/alice/f"], "only an admin may give /user/alice/f to another user"),
                           (["fault", "set", "dn2", "--read-delay-ms", "500"],
                            "fault commands need an admin credential; user alice is not an admin")):
        result = run_cli(*args, namenode=sc.namenode, env=alice)
        assert result.code == 4, (args, result.stderr)
        assert_one_line_error(result, fragment)
    assert not out.exists()
    # the DataNode's fault RPCs, called directly with her credential (`hedgefs fault` is refused at Report)
    dn = locations(sc).units[0]
    channel, stub_ = stub(sc, sc.security_dir / "alice.pem", "DataNode", dn.address, server_name(DATANODE, dn.datanode_id))
    with channel:
        assert refused(stub_.SetFaults, pb.FaultConfig(stall=True)) == (
            grpc.StatusCode.PERMISSION_DENIED, "SetFaults needs an admin credential; user alice is not an admin")
    assert not sc.datanode_rpc(dn.datanode_id, "GetFaults", pb.FaultClearRequest()).stall
    assert ("/user/alice/f", len(DATA), "alice", "staff", 0o644) in namespace(sc)
    unchanged(sc)


def test_a_credential_of_another_clusters_key_is_refused(sc, tmp_path):
    """Two ways: a whole credential of another cluster (the client refuses the server too), and
    a forged admin certificate signed by another key but shown with this cluster's CA (only the
    server can refuse it: by TLS, before any RPC runs)."""
    other = material.init_material(tmp_path / "other", [])
    before = namespace(sc)
    result = run_cli("mkdir", "/pwned", namenode=sc.namenode, env={"HEDGEFS_CREDENTIALS": str(other.admin)})
    assert result.code == 4
    assert_one_line_error(result, f"the NameNode at {sc.namenode} is not the one this credential trusts",
                          "another cluster")
    ours = material.load_credential(sc.credentials)
    theirs = material.load_credential(other.namenode)
    from cryptography import x509
    from cryptography.hazmat.primitives import serialization
    key = material.new_private_key()
    forged_cert = material.issue_certificate(serialization.load_pem_private_key(theirs.ca_key_pem, None),
                                             x509.load_pem_x509_certificate(ours.ca_pem),
                                             Identity("mallory", "admin"), key.public_key())
    creds = grpc.ssl_channel_credentials(ours.ca_pem, material.key_pem(key), material.cert_pem(forged_cert))
    with grpc.secure_channel(sc.namenode, creds, options=tls.channel_options(GRPC_OPTIONS, NAMENODE_NAME)) as ch:
        code, _ = refused(hedgefs_pb2_grpc.NameNodeStub(ch).Mkdir, pb.MkdirRequest(path="/pwned"))
    assert code == grpc.StatusCode.UNAVAILABLE    # the handshake failed: no RPC ran
    assert namespace(sc) == before


# ---------------------------------------------------------------------------- block tokens


def test_tampered_and_expired_block_tokens_are_refused(sc):
    group = locations(sc)
    loc = group.units[1]
    good = loc.token
    with data_conn(sc, sc.credentials, loc.datanode_id, loc.data_address) as s:
        assert bytes(dt.read_range(s, group.id, 1, 0, 10, token=good, generation=group.generation)) == DATA[65536:65546]
        tampered = bytearray(good)
        tampered[22] ^= 0xFF                  # a later expiry, say: the signature no longer matches
        with pytest.raises(dt.TransferError) as err:
            dt.read_range(s, group.id, 1, 0, 10, token=bytes(tampered), generation=group.generation)
        assert err.value.status == "PERMISSION_DENIED"
        assert f"{loc.datanode_id}: block token for unit {group.id}/1 has a bad signature" in err.value.message
        from hedgefs.security.tokens import decode
        expiry_s = decode(good).expiry_ms / 1000
        while time.time() <= expiry_s + 0.2:   # the token's own clock: wait until it has expired
            time.sleep(0.1)
        with pytest.raises(dt.TransferError) as err:
            dt.read_range(s, group.id, 1, 0, 10, token=good, generation=group.generation)
        assert err.value.status == "PERMISSION_DENIED" and "expired" in err.value.message
        with pytest.raises(dt.TransferError) as err:     # and no token at all
            dt.read_range(s, group.id, 1, 0, 10, generation=group.generation)
        assert err.value.status == "PERMISSION_DENIED" and "no block token" in err.value.message
    unchanged(sc)


def test_a_token_for_unit_3_does_not_open_unit_4(sc):
    group = locations(sc)
    three, four = group.units[3], group.units[4]
    with data_conn(sc, sc.credentials, four.datanode_id, four.data_address) as s:
        with pytest.raises(dt.TransferError) as err:
            dt.read_range(s, group.id, 4, 0, 10, token=three.token, generation=group.generation)
        assert err.value.status == "PERMISSION_DENIED"
        assert f"read token for unit {group.id}/3 generation {group.generation} does not allow read of unit " \
               f"{group.id}/4" in err.value.message
        s.sendall(dt.pack_request(dt.OP_CHECKSUMS, group.id, 4, 0, 0, three.token, generation=group.generation))
        with pytest.raises(dt.TransferError):
            dt.recv_response(s, "dn")
        assert bytes(dt.read_range(s, group.id, 4, 0, 10, token=four.token, generation=group.generation)) == \
            DATA[4 * 65536:4 * 65536 + 10]


def test_a_write_token_replayed_on_a_committed_unit_is_refused(sc):
    """Alice writes a file by hand (Create, AddBlockGroup, a unit write with its write token);
    then the same write token, and a read token, try to write the committed unit again."""
    alice = sc.security_dir / "alice.pem"
    channel, nn = stub(sc, alice)
    with channel:
        created = nn.Create(pb.CreateRequest(path="/user/alice/by-hand", policy="RS-6-3-64k"), timeout=10)
        group = nn.AddBlockGroup(pb.AddBlockGroupRequest(file_id=created.file_id), timeout=10)
        unit = next(u for u in group.units if u.index == 0)
        original = b"written once" * 100

        def write(token, body) -> str:
            with data_conn(sc, alice, unit.datanode_id, unit.data_address) as s:
                s.sendall(dt.pack_request(dt.OP_WRITE, group.id, 0, 0, 0, token, generation=group.generation))
                try:
                    dt.recv_response(s, unit.datanode_id)
                    s.sendall(dt.PACKET.pack(dt.PACKET_DATA, len(body)) + body + dt.PACKET.pack(dt.PACKET_END, len(body)))
                    dt.recv_response(s, unit.datanode_id)
                    return "stored"
                except dt.TransferError as err:
                    return str(err)

        assert write(unit.token, original) == "stored"
        replay = write(unit.token, b"forged bytes" * 100)
        assert replay.startswith("ALREADY_EXISTS") and "a unit is written once" in replay, replay
        read_token = locations(sc).units[0].token
        assert "PERMISSION_DENIED" in write(read_token, b"forged") and "does not allow write" in write(read_token, b"x")
        with data_conn(sc, alice, unit.datanode_id, unit.data_address) as s:   # nor grown in place
            with pytest.raises(dt.TransferError) as grown:
                dt.append(s, group.id, 0, len(original), b"forged tail", token=unit.token, generation=group.generation)
        assert grown.value.status == "PERMISSION_DENIED" and "does not allow append" in grown.value.message
        nn.Abandon(pb.AbandonRequest(file_id=created.file_id), timeout=10)
    unchanged(sc)


def test_a_long_read_outlives_its_tokens(sc):
    """Tokens expire (3 s here): an open file renews them before it reads past their lifetime."""
    with client(sc.namenode) as fs, fs.open("/user/alice/f") as f:
        opened = time.monotonic()
        first = f.pread(0, 1000)
        while time.monotonic() < opened + TOKEN_LIFETIME_S + 0.5:   # every token it holds has expired
            time.sleep(0.1)
        assert first + f.pread(1000, len(DATA)) == DATA
        assert fs.stats().counters["token_refreshes"] >= 1
    # The CLI: `cat A B` opens both files first (tokens for both), then reads A, slowed past the
    # lifetime of B's tokens, then B.
    other = pattern(200_000, seed=15)
    assert run_cli("put", "-", "/user/alice/g", namenode=sc.namenode, input=other, env=as_("alice", sc)).code == 0
    for dn in sc.datanode_ids:
        sc.datanode_rpc(dn, "SetFaults", pb.FaultConfig(read_delay_ms=int(TOKEN_LIFETIME_S * 1000) + 500))
    try:
        t0 = time.monotonic()
        result = run_cli("cat", "--no-hedge", "/user/alice/f", "/user/alice/g", namenode=sc.namenode, timeout=120)
        took = time.monotonic() - t0
    finally:
        for dn in sc.datanode_ids:
            sc.datanode_rpc(dn, "ClearFaults", pb.FaultClearRequest())
    assert result.code == 0, result.stderr
    assert result.stdout == DATA + other
    assert took > 2 * TOKEN_LIFETIME_S   # B was read with tokens renewed after A's read


# ---------------------------------------------------------------------------- DataNodes


def test_a_datanode_cannot_speak_for_another(sc, tmp_path):
    """dn3's credential: a DataNode process started as dn4 refuses to start; called by hand, every
    DataNode RPC that names dn4 is refused (a forged empty block report would unmap its units, a
    forged bad-unit report delete them, a re-registration move its address)."""
    result = subprocess.run([sys.executable, "-m", "hedgefs", "datanode", "--id", "dn4", "--data-dir",
                             str(tmp_path / "dn4"), "--namenode", sc.namenode, "--credentials",
                             str(sc.security_dir / "dn3.pem")], capture_output=True, text=True, timeout=60)
    assert result.returncode == 4
    assert result.stderr == (f"hedgefs: datanode dn4: the credential {sc.security_dir / 'dn3.pem'} is DataNode "
                             f"dn3's, not dn4's\n")
    group = locations(sc)
    before = {d.id: d.address for d in admin_report(sc).datanodes}
    channel, nn = stub(sc, sc.security_dir / "dn3.pem")
    with channel:
        for method, request in (
                ("RegisterDataNode", pb.RegisterRequest(datanode_id="dn4", address="127.0.0.1:1")),
                ("Heartbeat", pb.HeartbeatRequest(datanode_id="dn4", address="127.0.0.1:1")),
                ("BlockReport", pb.BlockReportRequest(datanode_id="dn4")),
                ("UnitStored", pb.UnitStoredRequest(datanode_id="dn4")),
                ("ReportBadUnits", pb.BadUnitsRequest(units=[
                    pb.BadUnit(group_id=group.id, index=u.index, generation=group.generation, datanode_id=u.datanode_id)
                    for u in group.units.values() if u.datanode_id != "dn3"]))):
            code, details = refused(getattr(nn, method), request)
            assert code == grpc.StatusCode.PERMISSION_DENIED
            assert details.startswith("DataNode dn3 may not speak for") and f"({method})" in details
    assert {d.id: d.address for d in admin_report(sc).datanodes} == before
    unchanged(sc)


def test_a_datanode_of_another_cluster_is_refused(sc, tmp_path):
    """Its credential is another cluster's: TLS fails, and it exits 4 saying so. A data dir that
    joined another cluster is refused at start. A registration naming another cluster id is refused."""
    other = material.init_material(tmp_path / "other", ["dn11"])
    result = subprocess.run([sys.executable, "-m", "hedgefs", "datanode", "--id", "dn11", "--data-dir",
                             str(tmp_path / "dn11"), "--namenode", sc.namenode, "--credentials",
                             str(other.datanodes["dn11"]), "--heartbeat-interval-s", "0.2"],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 4
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("hedgefs: datanode dn11: namenode at") and "is not the one this credential trusts" in last
    joined = tmp_path / "joined"
    joined.mkdir()
    (joined / "VERSION").write_text("cluster_id=CID-elsewhere\n")
    result = subprocess.run([sys.executable, "-m", "hedgefs", "datanode", "--id", "dn9", "--data-dir", str(joined),
                             "--namenode", sc.namenode, "--credentials", str(sc.security_dir / "dn9.pem")],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 4
    assert result.stderr.startswith(f"hedgefs: datanode dn9: data dir {joined} belongs to cluster CID-elsewhere")
    channel, nn = stub(sc, sc.security_dir / "dn9.pem")
    with channel:
        code, details = refused(nn.RegisterDataNode, pb.RegisterRequest(
            datanode_id="dn9", address="127.0.0.1:1", cluster_id="CID-elsewhere"))
    assert code == grpc.StatusCode.PERMISSION_DENIED
    assert details.startswith("DataNode dn9 belongs to cluster CID-elsewhere; this NameNode's cluster is CID-")
    assert {d.id: d.address for d in admin_report(sc).datanodes}["dn9"] != "127.0.0.1:1"
    unchanged(sc)


# ---------------------------------------------------------------------------- permissions


def test_another_users_file_cannot_be_removed_moved_or_overwritten(sc):
    bob = as_("bob", sc)
    before = namespace(sc)
    for args, stdin, fragment in (
            (["rm", "/user/alice/f"], None, "user bob may not delete /user/alice/f (w needed on /user/alice"),
            (["rm", "-r", "/user"], None, "user bob may not delete /user (w needed on /"),
            (["mv", "/user/alice/f", "/shared/f"], None, "user bob may not move /user/alice/f"),
            (["put", "-f", "-", "/user/alice/f"], b"forged", "user bob may not create /user/alice/f"),
            (["chmod", "777", "/user/alice/f"], None, "user bob may not change the mode of /user/alice/f")):
        result = run_cli(*args, namenode=sc.namenode, input=stdin, env=bob)
        assert result.code == 4, (args, result.stderr)
        assert_one_line_error(result, "permission denied: " + fragment)
    assert namespace(sc) == before
    # a private file is not even readable; in the sticky /shared, bob's file is his alone
    assert run_cli("put", "-", "/user/alice/secret", namenode=sc.namenode, input=b"s", env=as_("alice", sc)).code == 0
    assert run_cli("chmod", "600", "/user/alice/secret", namenode=sc.namenode, env=as_("alice", sc)).code == 0
    result = run_cli("cat", "/user/alice/secret", namenode=sc.namenode, env=bob)
    assert result.code == 4 and result.stdout == b""
    assert_one_line_error(result, "user bob may not read /user/alice/secret")
    assert run_cli("put", "-", "/shared/bobs", namenode=sc.namenode, input=b"b", env=bob).code == 0
    result = run_cli("rm", "/shared/bobs", namenode=sc.namenode, env=as_("alice", sc))
    assert result.code == 4
    assert_one_line_error(result, "/shared is sticky and /shared/bobs belongs to bob")
    assert run_cli("rm", "/shared/bobs", namenode=sc.namenode, env=bob).code == 0
    unchanged(sc)


def test_a_write_in_progress_is_its_writers_alone(sc):
    """File ids are sequential: bob must not complete, abandon or extend alice's write."""
    channel, alice = stub(sc, sc.security_dir / "alice.pem")
    bob_channel, bob = stub(sc, sc.security_dir / "bob.pem")
    with channel, bob_channel:
        created = alice.Create(pb.CreateRequest(path="/user/alice/in-progress"), timeout=10)
        for method, request in (("AddBlockGroup", pb.AddBlockGroupRequest(file_id=created.file_id)),
                                ("Complete", pb.CompleteRequest(file_id=created.file_id)),
                                ("Abandon", pb.AbandonRequest(file_id=created.file_id)),
                                ("RenewLease", pb.RenewLeaseRequest(file_id=created.file_id))):
            code, details = refused(getattr(bob, method), request)
            assert code == grpc.StatusCode.PERMISSION_DENIED
            assert details == (f"permission denied: file {created.file_id} is being written by alice, not by "
                               f"user bob"), method
        alice.RenewLease(pb.RenewLeaseRequest(file_id=created.file_id), timeout=10)   # still hers
        alice.Abandon(pb.AbandonRequest(file_id=created.file_id), timeout=10)


def test_status_pages_need_an_admin_and_metrics_show_no_secret(sc):
    import ssl
    import urllib.error
    import urllib.request

    url = sc.http_url
    assert url.startswith("https://")
    ca = ssl.create_default_context(cadata=material.load_credential(sc.credentials).ca_pem.decode())
    ca.check_hostname = False   # the certificate names the NameNode, not 127.0.0.1

    def get(path, user=None):
        ctx = ca
        if user:
            ctx = ssl.create_default_context(cadata=material.load_credential(sc.credentials).ca_pem.decode())
            ctx.check_hostname = False
            ctx.load_cert_chain(str(sc.security_dir / f"{user}.pem"))
        try:
            with urllib.request.urlopen(url + path, context=ctx, timeout=10) as r:
                return r.status, r.read().decode()
        except urllib.error.HTTPError as err:
            return err.code, err.read().decode()

    status, metrics = get("metrics")
    assert status == 200 and "hedgefs_datanodes" in metrics
    assert get("health")[0] == 200
    assert get("")[0] == 403 and get("api/files/user/alice/f", "alice")[0] == 403
    status, page = get("api/files/user/alice/f", "admin")
    assert status == 200 and "token" not in page
    group = locations(sc)
    for text in (metrics, page):
        assert all(u.token.hex() not in text for u in group.units.values())
    key = material.load_credential(sc.security_dir / "namenode.pem").cluster_key
    assert key.hex() not in metrics and key.hex() not in page


def test_a_conversion_is_checked_like_an_overwrite_and_keeps_the_owner(sc):
    """`ec convert` rewrites a file: bob may not; the admin may, and alice's file stays hers."""
    data = pattern(300_000, seed=16)
    assert run_cli("put", "-", "/user/alice/convert-me", namenode=sc.namenode, input=data,
                   env=as_("alice", sc)).code == 0
    result = run_cli("ec", "convert", "/user/alice/convert-me", "--policy", "REPLICATE-3", namenode=sc.namenode,
                     env=as_("bob", sc))
    assert result.code == 4, result.stderr
    assert "user bob may not create /user/alice/convert-me" in result.stderr
    assert run_cli("ec", "convert", "/user/alice/convert-me", "--policy", "REPLICATE-3",
                   namenode=sc.namenode).code == 0
    [entry] = [e for e in namespace(sc) if e[0] == "/user/alice/convert-me"]
    assert entry == ("/user/alice/convert-me", len(data), "alice", "staff", 0o644)
    assert run_cli("cat", "/user/alice/convert-me", namenode=sc.namenode, env=as_("alice", sc)).stdout == data
