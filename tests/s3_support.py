"""A running `hedgefs s3` gateway for the S3 tests and the benchmark: the real process, on a
port it picks, with the client metrics port beside it."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import urllib.request

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
                        config=Config(retries={"max_attempts": 1}, s3={"addressing_style": "path"},
                                      signature_version="s3v4", **config))
