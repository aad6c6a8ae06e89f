"""The parity run of tests/integration/test_compose.py and tests/integration/test_compose_ha.py: docker-compose.yml's
services as local processes (test_compose.py's docstring says what is remapped, and only that)."""
import concurrent.futures
import os
import pathlib
import random
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time

import grpc
import pytest
from compose_support import (
    START_DEADLINE_S,
    container_ports,
    dependencies,
    environment,
    health_command,
    is_etcd,
    servers,
    started,
    volume_mounts,
)

from hedgefs.proto import hedgefs_pb2 as pb
from hedgefs.proto import hedgefs_pb2_grpc


# --------------------------------------------------------------------------- parity run

def _ephemeral_range() -> range:
    try:
        low, high = pathlib.Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()
        return range(int(low), int(high) + 1)
    except (OSError, ValueError):
        return range(32768, 61000)


_PICKED: set[int] = set()


def free_port() -> int:
    """A loopback port that is free now and that no outgoing connection will take before it is bound.

    A port from bind(0) lies in the kernel's ephemeral range, from which every connect() of the
    processes started in the meantime also draws its source port: a fresh-clone CI run lost dn1's
    HTTP port that way ("Address already in use"). So pick below (or above) that range, and never
    the same port twice in one test process.
    """
    ephemeral = _ephemeral_range()
    rng = random.Random()
    # Every other test binds port 0 (inside that range), so only a compose module on another
    # pytest-xdist worker could pick the same port: each worker picks from its own residue class.
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    mine = int(os.environ.get("PYTEST_XDIST_WORKER", "gw0")[2:] or 0) % workers
    candidates = [p for p in (*range(20000, ephemeral.start), *range(ephemeral.stop, 65536))
                  if p not in _PICKED and p % workers == mine] or list(range(20000, 65536))
    for port in rng.sample(candidates, min(len(candidates), 200)):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
        _PICKED.add(port)
        return port
    raise RuntimeError("no free loopback port outside the ephemeral range")


class Remap:
    """The container -> local process mapping in the module docstring, and nothing more."""

    def __init__(self, compose: dict, tmp: pathlib.Path, profiles: tuple[str, ...] = ()):
        self.services = compose["services"]
        self.tmp = tmp
        # (service, container port) -> loopback port
        self.ports = {(name, port): free_port() for name, svc in servers(compose, profiles).items()
                      for port in sorted(container_ports(svc))}
        names = sorted(self.services, key=len, reverse=True)
        self._hostport = re.compile(r"\b(0\.0\.0\.0|127\.0\.0\.1|" + "|".join(map(re.escape, names)) + r"):(\d+)\b")

    def entrypoint(self, argv: list[str]) -> list[str]:
        assert argv == ["hedgefs"], f"this test runs the `hedgefs` entrypoint only, got {argv}"
        return [sys.executable, "-m", "hedgefs"]

    def program(self, name: str, svc: dict, image: dict) -> list[str]:
        """The service's whole command line: the image's entrypoint and its command, remapped (an
        etcd member's `/usr/local/bin/etcd` is the etcd on PATH: Debian's etcd-server here)."""
        if is_etcd(svc):
            etcd = shutil.which("etcd")
            assert etcd, "etcd is not installed"
            return [etcd, *self.argv(name, svc["command"][1:])]
        return self.entrypoint(svc.get("entrypoint") or image["ENTRYPOINT"]) + self.argv(name, svc["command"])

    def word(self, service: str, word: str, previous: str | None = None) -> str:
        if word == "0.0.0.0":
            return "127.0.0.1"
        if previous == "--advertise-host" and word == service:
            return "127.0.0.1"
        if (service, word) in self.ports:
            return str(self.ports[(service, word)])

        def hostport(m: re.Match) -> str:   # in lists and URLs too: a,b / http://etcd-1:2380 / etcd://...
            host = service if m.group(1) in ("0.0.0.0", "127.0.0.1") else m.group(1)
            assert (host, m.group(2)) in self.ports, f"{service}: {word!r} names no port that {host} serves"
            return f"127.0.0.1:{self.ports[(host, m.group(2))]}"
        mapped = self._hostport.sub(hostport, word)
        if mapped != word:
            return mapped
        mounts = volume_mounts(self.services[service])
        for source, target in mounts:
            if word == target or word.startswith(target.rstrip("/") + "/"):
                return str(self.volume(source)) + word[len(target):]
        if word.startswith("/") and any(t.startswith(word.rstrip("/") + "/") for _s, t in mounts):
            root = self.tmp / "roots" / service    # the service's view: its mounts below `word`
            for source, target in mounts:
                link = root / target.lstrip("/")
                link.parent.mkdir(parents=True, exist_ok=True)
                if not link.is_symlink():
                    link.symlink_to(self.volume(source))
            return str(root / word.lstrip("/"))
        return word

    def volume(self, source: str) -> pathlib.Path:
        local = self.tmp / "volumes" / source
        local.mkdir(parents=True, exist_ok=True)
        return local

    def argv(self, service: str, words: list[str]) -> list[str]:
        return [self.word(service, w, words[i - 1] if i else None) for i, w in enumerate(words)]

    def env(self, service: str, image_env: dict[str, str], service_env: dict[str, str]) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("HEDGEFS_")}
        env.update({k: self.word(service, v) for k, v in image_env.items()})
        env.update({k: self.word(service, v) for k, v in service_env.items()})
        return env

    def health(self, service: str, argv: list[str] | None) -> list[str] | None:
        if argv is None:
            return None
        if os.path.basename(argv[0]) == "etcdctl":   # an etcd member's: the etcdctl on PATH
            return [shutil.which("etcdctl"), *self.argv(service, argv[1:])]
        assert argv[0] == "python", f"{service}: health check must run the image's python, got {argv}"
        return [sys.executable, *self.argv(service, argv[1:])]


class Processes:
    """The local stand-ins for containers; stop_all() is SIGTERM, then SIGKILL for what is left."""

    def __init__(self, tmp: pathlib.Path):
        self.tmp = tmp
        self.procs: dict[str, tuple[subprocess.Popen, list[str], pathlib.Path]] = {}

    def start(self, name: str, argv: list[str], env: dict[str, str]) -> None:
        workdir = self.tmp / "workdir" / name
        workdir.mkdir(parents=True, exist_ok=True)
        log_path = self.tmp / "logs" / f"{name}.log"
        log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(log_path, "wb") as log:
            proc = subprocess.Popen(argv, env=env, cwd=workdir, stdin=subprocess.DEVNULL, stdout=log,
                                    stderr=subprocess.STDOUT, start_new_session=True)
        self.procs[name] = (proc, argv, log_path)

    def wait_completed(self, name: str, waiting: str) -> None:
        """depends_on: condition: service_completed_successfully: the one-shot exits 0."""
        proc, argv, _log = self.procs[name]
        try:
            code = proc.wait(timeout=START_DEADLINE_S)
        except subprocess.TimeoutExpired:
            pytest.fail(f"{name} did not finish in {START_DEADLINE_S:.0f} s (needed by {waiting})", pytrace=False)
        if code != 0:
            pytest.fail(f"{name} exited {code} (needed by {waiting}); command: {shlex.join(argv)}\n"
                        f"  its log:\n{self.tail(name)}", pytrace=False)

    def check_running(self, name: str, waiting_for: str) -> None:
        proc, argv, log_path = self.procs[name]
        if proc.poll() is not None:
            pytest.fail(f"{name} exited with code {proc.returncode} before {waiting_for}.\n"
                        f"  command (from docker-compose.yml, remapped): {shlex.join(argv)}\n"
                        f"  its log:\n{self.tail(name)}", pytrace=False)

    def tail(self, name: str, lines: int = 12) -> str:
        text = self.procs[name][2].read_text(errors="replace").strip().splitlines()
        return "\n".join("    | " + line for line in text[-lines:]) or "    | (empty)"

    def stop_all(self) -> None:
        for proc, _argv, _log in self.procs.values():
            if proc.poll() is None:
                try:
                    os.killpg(proc.pid, signal.SIGCONT)  # a frozen process cannot act on SIGTERM
                    os.killpg(proc.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
        deadline = time.monotonic() + 10
        for proc, _argv, _log in self.procs.values():
            try:
                proc.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                proc.wait()


def startup_order(compose: dict, profiles: tuple[str, ...] = ()) -> list[str]:
    """The services `up` starts, dependencies first."""
    order: list[str] = []
    pending = dict(started(compose, profiles))
    names = set(pending)
    while pending:
        ready = [n for n, svc in pending.items() if set(dependencies(svc, names)) <= set(order)]
        assert ready, f"depends_on cycle or dependency on a service `up` does not start: {sorted(pending)}"
        for name in sorted(ready):
            order.append(name)
            del pending[name]
    return order


def up(compose: dict, image: dict, remap: Remap, procs: Processes,
       profiles: tuple[str, ...] = ()) -> tuple[dict[str, dict[str, str]], dict[str, list[str] | None]]:
    """`docker compose up`: each service in depends_on order, gated on its conditions (a
    `service_healthy` one's health check passing, a one-shot's exit 0). Returns each service's
    environment and health check command."""
    env: dict[str, dict[str, str]] = {}
    health: dict[str, list[str] | None] = {}
    healthy: set[str] = set()
    order = startup_order(compose, profiles)
    for name in order:
        svc = compose["services"][name]
        for dep, spec in dependencies(svc, set(order)).items():
            if spec.get("condition") == "service_healthy" and dep not in healthy:
                wait_healthy(procs, dep, health[dep], env[dep], waiting=name)
                healthy.add(dep)
            if spec.get("condition") == "service_completed_successfully":
                procs.wait_completed(dep, waiting=name)
        argv = remap.program(name, svc, image)
        assert not [w for w in argv if "0.0.0.0" in w], argv
        env[name] = remap.env(name, {} if is_etcd(svc) else image["ENV"], environment(svc))
        health[name] = remap.health(name, health_command(svc, image))
        procs.start(name, argv, env[name])
    return env, health


def run_health(cmds: dict[str, list[str]], env: dict[str, dict[str, str]]) -> dict[str, subprocess.CompletedProcess]:
    """Run health checks concurrently (each one is a fresh interpreter, as in the container)."""
    with concurrent.futures.ThreadPoolExecutor(max_workers=len(cmds)) as pool:
        futures = {name: pool.submit(subprocess.run, cmd, env=env[name], capture_output=True, text=True, timeout=15)
                   for name, cmd in cmds.items()}
        return {name: f.result() for name, f in futures.items()}


def wait_healthy(procs: Processes, name: str, cmd: list[str], env: dict[str, str], waiting: str) -> None:
    """depends_on: condition: service_healthy: run the service's health check until it passes."""
    deadline = time.monotonic() + START_DEADLINE_S
    last = None
    while time.monotonic() < deadline:
        procs.check_running(name, f"it was healthy ({waiting} depends on it)")
        last = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=15)
        if last.returncode == 0:
            return
        time.sleep(0.1)
    pytest.fail(f"{name} not healthy after {START_DEADLINE_S:.0f} s (needed by {waiting}); last check said: "
                f"{(last.stdout + last.stderr).strip()[-300:] if last else '-'}\n  its log:\n{procs.tail(name)}",
                pytrace=False)


def channel_to(address: str, credential, server_name: str):
    from hedgefs.security import tls

    return tls.channel(address, credential, server_name, [])


def wait_registered(procs: Processes, namenode: str, names: list[str], credential=None) -> pb.ReportResponse:
    """Until the NameNode reports every DataNode live (or one of them exits, or the deadline)."""
    deadline = time.monotonic() + START_DEADLINE_S
    live: set[str] = set()
    with channel_to(namenode, credential, "namenode.hedgefs") as channel:
        stub = hedgefs_pb2_grpc.NameNodeStub(channel)
        while True:
            for name in ["namenode", *names]:
                procs.check_running(name, "all DataNodes registered")
            try:
                report = stub.Report(pb.Empty(), timeout=2)
                live = {d.id for d in report.datanodes if d.state != "dead"}   # live or stale
                if set(names) <= live:
                    return report
            except grpc.RpcError:
                pass
            if time.monotonic() > deadline:
                missing = sorted(set(names) - live)
                pytest.fail(f"DataNodes not live after {START_DEADLINE_S:.0f} s: {missing}\n" +
                            "\n".join(f"  {m} log:\n{procs.tail(m)}" for m in missing), pytrace=False)
            time.sleep(0.1)
