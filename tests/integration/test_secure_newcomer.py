"""A secure cluster as a newcomer meets it: distcp of a tree with entries the credential may not
read skips and names them and copies the rest (exit 1, not a job aborted with exit 4); the
docs/security.md's curl line reaches the status page; `admin export-p12` gives a bundle a browser (and the
cryptography library) loads."""

import json
import shutil
import socket
import ssl
import subprocess

import pytest
from conftest import assert_one_line_error, client, pattern, run_cli, start_cluster
from cryptography.hazmat.primitives.serialization import pkcs12

from hedgefs.client.fs import FileSystem

TOP, PUB, SECRET, HIDDEN = pattern(200_000, 1), pattern(500_000, 2), pattern(1000, 3), pattern(300, 4)


@pytest.fixture(scope="module")
def sc(tmp_path_factory):
    c = start_cluster(tmp_path_factory.mktemp("secure-newcomer"), "secure", policy="RS-3-2-64k", datanodes=5)
    for who in ("alice", "bob"):
        made = run_cli("admin", "credential", "--user", who, "--out", str(c.security_dir / f"{who}.pem"),
                       namenode=c.namenode)
        assert made.code == 0, made.stderr
    with client(c.namenode) as admin:
        admin.mkdir("/user/alice/pub", parents=True)
        admin.mkdir("/user/alice/priv")
        for path in ("/user/alice", "/user/alice/pub", "/user/alice/priv"):
            admin.set_owner(path, "alice")
    with FileSystem(c.namenode, credentials=str(c.security_dir / "alice.pem")) as alice:
        for path, data in (("/user/alice/top.txt", TOP), ("/user/alice/pub/a", PUB),
                           ("/user/alice/secret.txt", SECRET), ("/user/alice/priv/b", HIDDEN)):
            alice.write_bytes(path, data)
        alice.set_permission("/user/alice/secret.txt", 0o600)
        alice.set_permission("/user/alice/priv", 0o700)
    yield c
    c.down()


def test_distcp_skips_and_names_what_it_may_not_read_and_copies_the_rest(sc, tmp_path):
    bob = {"HEDGEFS_CREDENTIALS": str(sc.security_dir / "bob.pem")}
    out = tmp_path / "out"
    r = run_cli("distcp", f"hedgefs://{sc.namenode}/user/alice", f"file://{out}", namenode=sc.namenode, env=bob)
    assert r.code == 1, r.stderr
    assert "Traceback" not in r.stderr
    last = r.stderr.strip().splitlines()[-1]
    assert last.startswith("hedgefs: 2 files failed: "), last
    assert "/user/alice/secret.txt: " in last and "/user/alice/priv: " in last and "(skipped)" in last, last
    assert (out / "top.txt").read_bytes() == TOP
    assert (out / "pub" / "a").read_bytes() == PUB
    assert not (out / "secret.txt").exists()
    assert not (out / "priv").exists()   # a directory it may not list leaves no empty copy

    r = run_cli("distcp", "--json", f"hedgefs://{sc.namenode}/user/alice/pub", f"file://{tmp_path}/pub",
                namenode=sc.namenode, env=bob)
    assert r.code == 0, r.stderr   # nothing refused: 0 as before
    assert json.loads(r.stdout)["files_failed"] == 0


def test_only_a_paths_own_refusal_is_skipped_a_refused_credential_stops_the_job(sc):
    """distcp skips what the NameNode refuses for a path's owner and mode; a NotAllowed of the
    credential itself (UNAUTHENTICATED, refused TLS, an RPC it may not call) would refuse every
    file left, so it stops the job with exit 4 instead of skipping them all with exit 1."""
    from hedgefs.client.errors import NotAllowed
    from hedgefs.distcp.listing import refused_here

    with FileSystem(sc.namenode, credentials=str(sc.security_dir / "bob.pem")) as bob:
        with pytest.raises(NotAllowed) as denied:
            bob.read_bytes("/user/alice/secret.txt")
        with pytest.raises(NotAllowed) as admin_only:
            bob.admin.decommission("dn1")
    assert refused_here(denied.value) and refused_here(PermissionError(13, "Permission denied"))
    assert not refused_here(admin_only.value), admin_only.value
    assert not refused_here(NotAllowed("GetFileInfo needs a credential of this cluster"))   # UNAUTHENTICATED's


def _port(sc) -> int:
    return int(sc.http_url.rstrip("/").rsplit(":", 1)[1])


def test_the_readme_curl_line_reaches_the_status_page(sc):
    if shutil.which("curl") is None:
        pytest.skip("curl is not installed (apt-get install curl)")
    port, sec = _port(sc), sc.security_dir
    # docs/security.md's line, as written (DIR = the cluster dir, PORT = the status page's).
    r = subprocess.run(["curl", "-sS", "--fail", "--cacert", str(sec / "ca.pem"), "--cert", str(sec / "admin.pem"),
                        "--resolve", f"namenode.hedgefs:{port}:127.0.0.1", f"https://namenode.hedgefs:{port}/"],
                       capture_output=True, timeout=30)
    assert r.returncode == 0, r.stderr
    assert b"DataNodes" in r.stdout


def test_python_ssl_with_the_same_recipe_reaches_the_status_page(sc):
    port, sec = _port(sc), sc.security_dir
    context = ssl.create_default_context(cafile=str(sec / "ca.pem"))
    context.load_cert_chain(str(sec / "admin.pem"))
    with socket.create_connection(("127.0.0.1", port), timeout=10) as raw, \
            context.wrap_socket(raw, server_hostname="namenode.hedgefs") as tls:
        tls.sendall(b"GET / HTTP/1.0\r\nHost: namenode.hedgefs\r\n\r\n")
        reply = b""
        while chunk := tls.recv(65536):
            reply += chunk
    assert reply.startswith(b"HTTP/1.") and b" 200 " in reply.split(b"\r\n", 1)[0], reply[:200]


def test_export_p12_loads_with_cryptography(sc, tmp_path):
    out = tmp_path / "admin.p12"
    r = run_cli("admin", "export-p12", str(sc.security_dir / "admin.pem"), "--out", str(out),
                input=b"s3cret\ns3cret\n")
    assert r.code == 0, r.stderr
    assert (out.stat().st_mode & 0o777) == 0o600
    key, cert, extra = pkcs12.load_key_and_certificates(out.read_bytes(), b"s3cret")
    assert key is not None and "hedgefs" in cert.subject.rfc4514_string()
    assert len(extra) == 1   # the cluster CA
    with pytest.raises(ValueError):
        pkcs12.load_key_and_certificates(out.read_bytes(), b"wrong")

    r = run_cli("admin", "export-p12", str(sc.security_dir / "namenode.pem"), "--out", str(tmp_path / "nn.p12"),
                env={"HEDGEFS_P12_PASSWORD": "x"})
    assert r.code == 2
    assert_one_line_error(r, "is a server's credential")
    assert not (tmp_path / "nn.p12").exists()
