"""A running `hedgefs s3` gateway for the S3 tests and the benchmark: the real process, on a
port it picks, with the client metrics port beside it."""

from __future__ import annotations

import http.client
import os
import re
import subprocess
import sys
import urllib.parse
import urllib.request

import pytest
from conftest import cli_env, run_cli, wait_until


class GatewayProcess:
    def __init__(self, namenode: str, root, *args: str, keys: str | None = None, env: dict | None = None):
        self.log_path = os.path.join(root, "s3-gateway.log")
        command = [sys.executable, "-m", "hedgefs", "s3", "--port", "0", "--metrics-port", "0", *args]
        if keys:
            command += ["--keys", keys]
        full_env = cli_env(namenode)
        full_env.update(env or {})
        self._log = open(self.log_path, "w")
        self.proc = subprocess.Popen(command, stdout=self._log, stderr=subprocess.STDOUT, env=full_env)
        text = wait_until(self._serving, 30, "the S3 gateway to listen", detail=self.log)
        self.endpoint = re.search(r"s3: serving (\S+?)/? for", text).group(1)
        self.metrics_url = re.search(r"metrics: (\S+)", text).group(1)

    def _serving(self):
        text = self.log()
        if self.proc.poll() is not None:
            raise AssertionError(f"the S3 gateway exited {self.proc.returncode}: {text}")
        return text if "s3: serving" in text and "metrics:" in text else None

    def log(self) -> str:
        with open(self.log_path) as f:
            return f.read()

    def metric(self, name: str) -> float:
        with urllib.request.urlopen(self.metrics_url, timeout=10) as r:
            for line in r.read().decode().splitlines():
                if line.startswith(name + " "):
                    return float(line.split()[1])
        raise AssertionError(f"no metric {name}")

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self._log.close()


def issue_key(namenode: str, keys_dir: str, user: str = "alice", env: dict | None = None) -> tuple[str, str]:
    result = run_cli("admin", "s3-key", "--user", user, "--keys", keys_dir, namenode=namenode, env=env)
    assert result.code == 0, result.stderr
    lines = dict(line.split(": ", 1) for line in result.stdout.decode().splitlines())
    return lines["access key"], lines["secret key"]


def boto3_client(endpoint: str, access: str, secret: str, **config):
    import boto3
    from botocore.config import Config

    return boto3.client("s3", endpoint_url=endpoint, aws_access_key_id=access, aws_secret_access_key=secret,
                        region_name="us-east-1",
                        config=Config(retries={"max_attempts": 1}, signature_version="s3v4",
                                      **{"s3": {"addressing_style": "path"}, **config}))


def raw_put(gateway, path: str, headers: dict, body: bytes, close_after: int | None = None):
    """A PUT as a client that lies or dies would send it (anonymous: only the gateway with
    --allow-anonymous serves it, so the answer is checked by the caller)."""
    url = urllib.parse.urlsplit(gateway.endpoint)
    conn = http.client.HTTPConnection(url.hostname, url.port, timeout=30)
    conn.putrequest("PUT", path)
    for name, value in headers.items():
        conn.putheader(name, value)
    conn.endheaders()
    if close_after is not None:
        conn.send(body[:close_after])
        conn.sock.close()
        return None
    conn.send(body)
    response = conn.getresponse()
    return response.status, response.read()


def self_signed(directory) -> tuple[str, str]:
    import datetime

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost")]), critical=False)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(key, hashes.SHA256()))
    cert_path, key_path = os.path.join(directory, "cert.pem"), os.path.join(directory, "key.pem")
    with open(cert_path, "wb") as f:
        f.write(cert.public_bytes(serialization.Encoding.PEM))
    with open(key_path, "wb") as f:
        f.write(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                  serialization.NoEncryption()))
    return cert_path, key_path


def signed_chunked_put(gateway, access: str, secret: str, path: str, pieces: list[bytes],
                       trailer: tuple[str, str] | None = None, unsigned: bool = False,
                       trailer_signature: str | None = None, query: str = "",
                       chunk_signature: str | None = None) -> tuple[dict, bytes]:
    """Headers and body of an aws-chunked PUT, each piece a chunk: signed as
    STREAMING-AWS4-HMAC-SHA256-PAYLOAD (the chaining of AWS's "Transferring Payload in Multiple
    Chunks"; tests/unit/test_s3_sigv4.py checks the gateway's side of it against that page's
    example), with ``trailer`` (name, value) as STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER (its
    x-amz-trailer-signature chained from the final chunk's; ``trailer_signature`` replaces it),
    or ``unsigned``: STREAMING-UNSIGNED-PAYLOAD-TRAILER, as boto3 sends over HTTPS. ``query``: the
    request's canonical query string (an UploadPart's); ``chunk_signature`` replaces the second
    chunk's signature (a corrupted one)."""
    import datetime
    import hashlib
    import hmac

    from hedgefs.s3 import sigv4

    now = datetime.datetime.now(datetime.timezone.utc)
    amz_date, day = now.strftime("%Y%m%dT%H%M%SZ"), now.strftime("%Y%m%d")
    scope = f"{day}/us-east-1/s3/aws4_request"
    key = sigv4.signing_key(secret, day, "us-east-1", "s3")
    payload = sigv4.STREAMING_UNSIGNED_TRAILER if unsigned else sigv4.STREAMING_TRAILER if trailer else sigv4.STREAMING
    names = ["content-encoding", "host", "x-amz-content-sha256", "x-amz-date", "x-amz-decoded-content-length"]
    headers = {"content-encoding": "aws-chunked", "host": urllib.parse.urlsplit(gateway.endpoint).netloc,
               "x-amz-content-sha256": payload, "x-amz-date": amz_date,
               "x-amz-decoded-content-length": str(sum(map(len, pieces)))}
    if trailer:
        names.append("x-amz-trailer")
        headers["x-amz-trailer"] = trailer[0]
    canonical = sigv4.canonical_request("PUT", path, query, headers, names, payload)
    signature = hmac.new(key, sigv4.string_to_sign(amz_date, scope, canonical).encode(), hashlib.sha256).hexdigest()
    body, previous = b"", signature
    for n, piece in enumerate([*pieces, b""]):
        if unsigned:
            body += f"{len(piece):x}\r\n".encode() + piece + (b"\r\n" if piece else b"")
            continue
        text = "\n".join(["AWS4-HMAC-SHA256-PAYLOAD", amz_date, scope, previous, sigv4.EMPTY_SHA256,
                          hashlib.sha256(piece).hexdigest()])
        previous = hmac.new(key, text.encode(), hashlib.sha256).hexdigest()
        if n == 1 and chunk_signature is not None:
            previous = chunk_signature
        body += f"{len(piece):x};chunk-signature={previous}\r\n".encode() + piece + (b"\r\n" if piece else b"")
    if trailer:
        line = f"{trailer[0]}:{trailer[1]}\n"
        body += line.replace("\n", "\r\n").encode()
        if not unsigned:
            text = "\n".join(["AWS4-HMAC-SHA256-TRAILER", amz_date, scope, previous,
                              hashlib.sha256(line.encode()).hexdigest()])
            signed = trailer_signature or hmac.new(key, text.encode(), hashlib.sha256).hexdigest()
            body += f"x-amz-trailer-signature:{signed}\r\n".encode()
    body += b"\r\n"
    headers["authorization"] = (f"AWS4-HMAC-SHA256 Credential={access}/{scope},SignedHeaders={';'.join(names)},"
                                f"Signature={signature}")
    headers["content-length"] = str(len(body))
    del headers["host"]
    return headers, body


def aws_cli(gateway, keys, *args, input=None):
    """The AWS CLI (from PyPI, beside this Python) against the gateway, with the key of ``keys``
    ((directory, (access, secret)), as the test modules' fixtures hold them)."""
    env = dict(os.environ, AWS_ACCESS_KEY_ID=keys[1][0], AWS_SECRET_ACCESS_KEY=keys[1][1],
               AWS_DEFAULT_REGION="us-east-1", AWS_CONFIG_FILE=os.devnull, AWS_SHARED_CREDENTIALS_FILE=os.devnull)
    aws = os.path.join(os.path.dirname(sys.executable), "aws")
    return subprocess.run([aws, "--endpoint-url", gateway.endpoint, *args], capture_output=True, env=env,
                          input=input, timeout=120)


def stack_fixtures(name: str):
    """The module-scoped cluster, keys and gateway fixtures of an S3 test module (each module
    its own, under ``name``): ``cluster, keys, gateway = stack_fixtures("s3")``."""
    from conftest import start_cluster

    @pytest.fixture(scope="module")
    def cluster(tmp_path_factory):
        c = start_cluster(tmp_path_factory.mktemp(f"{name}-cluster"))
        yield c
        c.down()

    @pytest.fixture(scope="module")
    def keys(cluster, tmp_path_factory):
        directory = str(tmp_path_factory.mktemp(f"{name}-keys") / "keys")
        return directory, issue_key(cluster.namenode, directory)

    @pytest.fixture(scope="module")
    def gateway(cluster, keys, tmp_path_factory):
        g = GatewayProcess(cluster.namenode, str(tmp_path_factory.mktemp(f"{name}-gateway")), keys=keys[0])
        yield g
        g.stop()

    return cluster, keys, gateway
