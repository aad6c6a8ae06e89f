"""Secure HA: etcd over TLS with certificates from the cluster's CA, block tokens across a failover.

One `hedgefs cluster up --ha --secure` cluster for the module (the launcher's: 3 etcd members
speaking only TLS with client-certificate auth, two NameNodes on ``etcds://``, 3 DataNodes). A
user writes and reads; the active is killed with SIGKILL; the new active serves; a read opened
before the kill reads on with the tokens the old active signed (both NameNodes hold the same
cluster key: the DataNodes accept them). A NameNode showing etcd a certificate that is not the
NameNodes' etcd client certificate, and one speaking plaintext to the TLS members, are refused
with one line and exit 4. Without etcd the cluster tests skip, saying why.
"""

import os
import shutil

import pytest
from cryptography import x509

from etcd_support import ETCD, SKIP_REASON
from hedgefs.client.fs import FileSystem
from hedgefs.cluster.launcher import NAMENODES, LocalCluster, Options
from hedgefs.security import material

from conftest import assert_one_line_error, fork_server, pattern, run_cli, wait_until

BEFORE, AFTER = pattern(600_000, seed=11), pattern(300_000, seed=12)


@pytest.fixture(scope="module")
def secure_ha(tmp_path_factory):
    if ETCD is None:
        pytest.skip(SKIP_REASON)
    c = LocalCluster(tmp_path_factory.mktemp("secure-ha") / "c", spawn=fork_server().spawn)
    c.up(Options(datanodes=3, namenode_port=0, policy="REPLICATE-3", block_size=262144, fsync=False, ha=True,
                 secure=True, heartbeat_interval_s=0.5, dead_interval_s=10.0))
    try:
        yield c
    finally:
        c.down()


def _namenode_at(c: LocalCluster, address: str) -> str:
    return NAMENODES[c.namenode.split(",").index(address)]


def test_a_read_with_the_old_actives_tokens_reads_on_after_a_kill_9(secure_ha):
    c = secure_ha
    assert c.meta.startswith("etcds://")
    with FileSystem(c.namenode, credentials=c.credentials) as fs:
        fs.write_bytes("/before.bin", BEFORE)
        old = fs.namenodes.active
        with fs.open("/before.bin") as f:
            assert f.pread(0, 1000) == BEFORE[:1000]     # its locations and tokens: the old active's
            c.kill(_namenode_at(c, old))                  # kill -9
            new = [a for a in c.namenode.split(",") if a != old][0]
            fs.write_bytes("/after.bin", AFTER)           # the new active serves (the client fails over)
            assert fs.namenodes.active == new
            assert f.pread(0, len(BEFORE)) == BEFORE     # old tokens, checked by the DataNodes
            assert fs.metrics.counter("token_refreshes") == 0, "a token was refused and renewed"
        assert fs.read_bytes("/after.bin") == AFTER
    cat = run_cli("cat", "/before.bin", namenode=c.namenode, env={"HEDGEFS_CREDENTIALS": c.credentials})
    assert cat.code == 0 and cat.stdout == BEFORE, cat.stderr


def _namenode_cli(c: LocalCluster, tmp_path, meta: str, etcd_tls: str):
    return run_cli("namenode", "--port", "0", "--data-dir", str(tmp_path / "nn"), "--meta", meta,
                   "--credentials", str(c.security_dir / "namenode.pem"), "--etcd-tls", etcd_tls, timeout=60)


def test_a_namenode_without_the_etcd_client_certificate_is_refused_exit_4(secure_ha, tmp_path):
    c = secure_ha
    # A certificate of the same CA, but the admin's, not the NameNodes' etcd client certificate.
    admin = material.load_credential(c.credentials)
    wrong = tmp_path / "wrong-etcd"
    wrong.mkdir()
    shutil.copy(c.etcd_tls.ca, wrong / "ca.pem")
    (wrong / "client.pem").write_bytes(admin.cert_pem)
    material.write_private(wrong / "client-key.pem", admin.key_pem)
    result = _namenode_cli(c, tmp_path, c.meta, str(wrong))
    assert result.code == 4, result.stderr
    assert_one_line_error(result, "refused this NameNode's client certificate")


def test_plaintext_to_the_tls_members_is_refused_exit_4(secure_ha, tmp_path):
    c = secure_ha
    plain = c.meta.replace("etcds://", "etcd://")
    result = run_cli("namenode", "--port", "0", "--data-dir", str(tmp_path / "nn"), "--meta", plain, timeout=60)
    assert result.code == 4, result.stderr
    assert_one_line_error(result, "speaks TLS", "etcds://")


def test_etcds_without_the_tls_files_is_a_usage_error(tmp_path):
    result = run_cli("namenode", "--port", "0", "--data-dir", str(tmp_path / "nn"),
                     "--meta", "etcds://127.0.0.1:1/hedgefs", "--etcd-tls", str(tmp_path / "none"))
    assert result.code == 2
    assert_one_line_error(result, "no ca.pem")


def test_init_security_issues_etcds_certificates_from_the_cluster_ca(tmp_path):
    d = tmp_path / "sec"
    made = run_cli("admin", "init-security", str(d), "--datanodes", "dn1", "--etcd-hosts", "e1.example,10.0.0.5")
    assert made.code == 0, made.stderr
    ca = x509.load_pem_x509_certificate((d / "ca.pem").read_bytes())
    etcd = material.etcd_material(d)
    for cert_file, key_file in ((etcd.server_cert, etcd.server_key), (etcd.peer_cert, etcd.peer_key),
                                (etcd.client_cert, etcd.client_key)):
        cert = x509.load_pem_x509_certificate(cert_file.read_bytes())
        cert.verify_directly_issued_by(ca)
        assert os.stat(key_file).st_mode & 0o077 == 0
    san = x509.load_pem_x509_certificate(etcd.server_cert.read_bytes()).extensions.get_extension_for_class(
        x509.SubjectAlternativeName).value
    assert {"localhost", "e1.example"} <= set(san.get_values_for_type(x509.DNSName))
    assert {"127.0.0.1", "10.0.0.5"} <= {str(ip) for ip in san.get_values_for_type(x509.IPAddress)}
    client = x509.load_pem_x509_certificate(etcd.client_cert.read_bytes())
    assert material.ETCD_CLIENT_HOSTNAME in client.extensions.get_extension_for_class(
        x509.SubjectAlternativeName).value.get_values_for_type(x509.DNSName)
    # Material made before etcd's: --if-missing adds etcd/ and keeps the rest.
    shutil.rmtree(etcd.directory)
    namenode = (d / "namenode.pem").read_bytes()
    again = run_cli("admin", "init-security", str(d), "--if-missing")
    assert again.code == 0 and b"added etcd" in again.stdout, again.stderr
    assert etcd.exists() and (d / "namenode.pem").read_bytes() == namenode
    x509.load_pem_x509_certificate(etcd.client_cert.read_bytes()).verify_directly_issued_by(ca)
