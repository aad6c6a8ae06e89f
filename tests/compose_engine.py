"""`make compose-test`: docker-compose.yml on a real Docker engine, as the README uses it.

    up -d --build --wait           build the image, start the NameNode and dn1..dn10, wait for healthy
    run --rm client admin report   dn1..dn10 live
    put 64 MiB, cat it back        through the client service (-T): identical bytes
    pause the data-unit-0 holder   cat --stats again: identical, and hedges > 0
    the status page                through the published port: ten DataNode rows; a DataNode's
                                   /metrics from inside the network
    down -v                        always, even after a failure

and again with HEDGEFS_SECURE=1 (the secure mode: the `security` service's material, TLS, every
call checked): up, admin report, 64 MiB identical, a client without a credential refused (exit 4),
the status page over HTTPS (403 without an admin's certificate, /metrics open), down -v.

Not part of `make test` (it needs an engine and a minute or two); it skips, saying why, where no
engine answers. The host ports are picked by the engine (a small override file maps 8020 and 9870
to free loopback ports) so the test never collides with a cluster already on 8020/9870. The
`monitoring` profile's images come from a public registry, which may not answer: that profile is
validated statically by tests/test_compose.py instead.
"""

from __future__ import annotations

import hashlib
import json
import os
import pathlib
import re
import shutil
import subprocess
import time
import urllib.request

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
DATANODES = [f"dn{i}" for i in range(1, 11)]
OVERRIDE = """services:
  namenode:
    ports: !override
      - "127.0.0.1::8020"
      - "127.0.0.1::9870"
"""


def engine_or_skip() -> None:
    if shutil.which("docker") is None:
        pytest.skip("no compose test: the docker CLI is not installed")
    info = subprocess.run(["docker", "info", "--format", "{{.ServerVersion}}"], capture_output=True, text=True,
                          timeout=30)
    if info.returncode != 0:
        reason = (info.stderr.strip().splitlines() or ["no answer"])[-1]
        pytest.skip(f"no compose test: no Docker engine answers ({reason})")
    plugin = subprocess.run(["docker", "compose", "version"], capture_output=True, text=True, timeout=30)
    if plugin.returncode != 0:
        pytest.skip("no compose test: the Docker Compose v2 plugin is missing")


class Compose:
    def __init__(self, tmp: pathlib.Path, **variables: str):
        self.project = f"hedgefs-ct-{os.getpid()}" + ("-secure" if variables else "")
        override = tmp / "ports.override.yml"
        override.write_text(OVERRIDE)
        self.base = ["docker", "compose", "-p", self.project, "-f", str(ROOT / "docker-compose.yml"),
                     "-f", str(override)]
        # The classic builder: BuildKit would fetch its Dockerfile frontend from a registry.
        self.env = dict(os.environ, DOCKER_BUILDKIT="0", **variables)
        self.timings: list[tuple[str, float]] = []

    def __call__(self, *args: str, input: bytes | None = None, timeout: float = 300, step: str | None = None,
                 check: bool = True) -> subprocess.CompletedProcess:
        t0 = time.monotonic()
        proc = subprocess.run([*self.base, *args], input=input, capture_output=True, timeout=timeout,
                              env=self.env, cwd=ROOT)
        self.timings.append((step or " ".join(args[:3]), time.monotonic() - t0))
        if check and proc.returncode != 0:
            err = proc.stderr.decode(errors="replace").strip().splitlines()[-15:]
            raise AssertionError(f"docker compose {' '.join(args)} -> exit {proc.returncode}:\n" + "\n".join(err))
        return proc

    def port(self, service: str, container_port: int) -> int:
        out = self("port", service, str(container_port), step=f"port {service} {container_port}").stdout.decode()
        return int(out.strip().rsplit(":", 1)[1])


def test_compose_on_a_real_engine(tmp_path):
    engine_or_skip()
    compose = Compose(tmp_path)
    start = time.monotonic()
    try:
        compose("up", "-d", "--build", "--wait", timeout=900, step="up -d --build --wait")

        report = json.loads(compose("run", "--rm", "client", "admin", "report", "--json",
                                    step="run client admin report").stdout)
        states = {d["id"]: d["state"] for d in report["datanodes"]}
        assert states == dict.fromkeys(DATANODES, "live"), states

        data = os.urandom(64 * 1024 * 1024)
        digest = hashlib.sha256(data).hexdigest()
        compose("run", "--rm", "-T", "client", "put", "-", "/big.bin", input=data, step="put 64 MiB")
        copy = compose("run", "--rm", "-T", "client", "cat", "/big.bin", step="cat 64 MiB").stdout
        assert hashlib.sha256(copy).hexdigest() == digest, "cat returned other bytes than put stored"

        stat = json.loads(compose("run", "--rm", "client", "stat", "--json", "/big.bin", step="stat").stdout)
        holder = next(u["datanode"] for u in stat["groups"][0]["units"] if u["index"] == 0)
        compose("pause", holder, step=f"pause {holder}")
        try:
            hedged = compose("run", "--rm", "-T", "client", "cat", "--stats", "/big.bin", timeout=300,
                             step=f"cat --stats, {holder} paused")
        finally:
            compose("unpause", holder, step=f"unpause {holder}")
        assert hashlib.sha256(hedged.stdout).hexdigest() == digest
        stats = hedged.stderr.decode(errors="replace")
        hedges = int(re.search(r"\bhedges=(\d+)", stats)[1])
        wins = int(re.search(r"\bhedge_wins=(\d+)", stats)[1])
        assert hedges > 0, stats

        http = compose.port("namenode", 9870)
        with urllib.request.urlopen(f"http://127.0.0.1:{http}/", timeout=10) as r:
            page = r.read().decode()
        assert page.count('<tr class="dn') == 10 and 'id="heatmap"' in page
        with urllib.request.urlopen(f"http://127.0.0.1:{http}/api/", timeout=10) as r:
            api = json.loads(r.read())
        assert sorted(d["id"] for d in api["datanodes"]) == sorted(DATANODES) and api["files"] == 1
        dn_metrics = compose("exec", "-T", "namenode", "python", "-c",
                             "import urllib.request; print(urllib.request.urlopen('http://dn1:9864/metrics').read()"
                             ".decode())", step="dn1 /metrics from the network").stdout.decode()
        assert 'hedgefs_datanode_reads_total{datanode="dn1",outcome="ok"}' in dn_metrics
    finally:
        compose("down", "-v", "--remove-orphans", timeout=300, step="down -v", check=False)
        left = subprocess.run(["docker", "ps", "-aq", "--filter", f"label=com.docker.compose.project={compose.project}"],
                              capture_output=True, text=True).stdout.strip()
        total = time.monotonic() - start
        print(f"\ncompose test on a real engine: {total:.1f} s")
        for step, seconds in compose.timings:
            print(f"  {seconds:6.1f} s  {step}")
    assert not left, f"containers left behind: {left}"
    print(f"  dn1..dn10 live; 64 MiB identical; {holder} (unit 0) paused: hedges={hedges} hedge_wins={wins}; "
          f"status page on 127.0.0.1:{http} lists 10 DataNodes")


def test_secure_compose_on_a_real_engine(tmp_path):
    import ssl
    import urllib.error

    engine_or_skip()
    compose = Compose(tmp_path, HEDGEFS_SECURE="1")
    start = time.monotonic()
    try:
        compose("up", "-d", "--build", "--wait", timeout=900, step="up -d --build --wait (secure)")
        report = json.loads(compose("run", "--rm", "client", "admin", "report", "--json",
                                    step="run client admin report").stdout)
        assert {d["id"]: d["state"] for d in report["datanodes"]} == dict.fromkeys(DATANODES, "live")
        data = os.urandom(64 * 1024 * 1024)
        compose("run", "--rm", "-T", "client", "put", "-", "/big.bin", input=data, step="put 64 MiB (TLS, tokens)")
        copy = compose("run", "--rm", "-T", "client", "cat", "/big.bin", step="cat 64 MiB (TLS, tokens)").stdout
        assert hashlib.sha256(copy).digest() == hashlib.sha256(data).digest()
        refused = compose("run", "--rm", "-e", "HEDGEFS_CREDENTIALS=", "client", "ls", "/", check=False,
                          step="run client without a credential")
        assert refused.returncode == 4, refused.stderr
        assert b"requires TLS (a secure cluster)" in refused.stderr
        http = compose.port("namenode", 9870)
        anyone = ssl.create_default_context()
        anyone.check_hostname, anyone.verify_mode = False, ssl.CERT_NONE   # (the CA is inside the volume)
        with urllib.request.urlopen(f"https://127.0.0.1:{http}/metrics", timeout=10, context=anyone) as r:
            assert b"hedgefs_datanodes" in r.read()
        with pytest.raises(urllib.error.HTTPError) as err:
            urllib.request.urlopen(f"https://127.0.0.1:{http}/", timeout=10, context=anyone)
        assert err.value.code == 403
    finally:
        compose("down", "-v", "--remove-orphans", timeout=300, step="down -v", check=False)
        left = subprocess.run(["docker", "ps", "-aq", "--filter", f"label=com.docker.compose.project={compose.project}"],
                              capture_output=True, text=True).stdout.strip()
        print(f"\nsecure compose test on a real engine: {time.monotonic() - start:.1f} s")
        for step, seconds in compose.timings:
            print(f"  {seconds:6.1f} s  {step}")
    assert not left, f"containers left behind: {left}"
