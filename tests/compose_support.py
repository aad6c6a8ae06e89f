"""What tests/test_compose.py reads docker-compose.yml and the Dockerfile with, and runs them as
local processes with (its docstring says how)."""
import concurrent.futures
import json
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
import yaml

from hedgefs.proto import hedgefs_pb2 as pb
from hedgefs.proto import hedgefs_pb2_grpc

ROOT = pathlib.Path(__file__).resolve().parents[1]
COMPOSE_FILE = ROOT / "docker-compose.yml"
DOCKERFILE = ROOT / "Dockerfile"

# What `DN3_READ_DELAY_MS=400 docker compose up` would see: a slow dn3, nothing else set.
VARIABLES = {"DN3_READ_DELAY_MS": "400"}
SECURE = {**VARIABLES, "HEDGEFS_SECURE": "1"}
SLOW_DN, SLOW_DN_DELAY_MS = "dn3", 400

DATANODES = [f"dn{i}" for i in range(1, 11)]
START_DEADLINE_S = 30.0

# --------------------------------------------------------------------------- compose spec keys
# From the compose specification's JSON schema (compose-spec/compose-spec, schema/compose-spec.json).
TOP_LEVEL_KEYS = {"version", "name", "include", "services", "networks", "volumes", "secrets", "configs", "models"}
SERVICE_KEYS = {
    "annotations", "attach", "blkio_config", "build", "cap_add", "cap_drop", "cgroup", "cgroup_parent",
    "command", "configs", "container_name", "cpu_count", "cpu_percent", "cpu_period", "cpu_quota",
    "cpu_rt_period", "cpu_rt_runtime", "cpu_shares", "cpus", "cpuset", "credential_spec", "depends_on",
    "deploy", "develop", "device_cgroup_rules", "devices", "dns", "dns_opt", "dns_search", "domainname",
    "entrypoint", "env_file", "environment", "expose", "extends", "external_links", "extra_hosts", "gpus",
    "group_add", "healthcheck", "hostname", "image", "init", "ipc", "isolation", "label_file", "labels",
    "links", "logging", "mac_address", "mem_limit", "mem_reservation", "mem_swappiness", "memswap_limit",
    "models", "network_mode", "networks", "oom_kill_disable", "oom_score_adj", "pid", "pids_limit",
    "platform", "ports", "post_start", "pre_stop", "privileged", "profiles", "provider", "pull_policy",
    "pull_refresh_after", "read_only", "restart", "runtime", "scale", "secrets", "security_opt",
    "shm_size", "stdin_open", "stop_grace_period", "stop_signal", "storage_opt", "sysctls", "tmpfs",
    "tty", "ulimits", "use_api_socket", "user", "userns_mode", "uts", "volumes", "volumes_from",
    "working_dir",
}
BUILD_KEYS = {"context", "dockerfile", "dockerfile_inline", "args", "ssh", "labels", "cache_from", "cache_to",
              "no_cache", "additional_contexts", "network", "pull", "target", "shm_size", "extra_hosts",
              "isolation", "privileged", "secrets", "tags", "ulimits", "platforms", "entitlements"}
HEALTHCHECK_KEYS = {"disable", "interval", "retries", "test", "timeout", "start_period", "start_interval"}
DEPENDS_ON_KEYS = {"condition", "restart", "required"}
DEPENDS_ON_CONDITIONS = {"service_started", "service_healthy", "service_completed_successfully"}
VOLUME_KEYS = {"name", "driver", "driver_opts", "external", "labels"}
NETWORK_KEYS = {"name", "driver", "driver_opts", "ipam", "external", "internal", "attachable", "enable_ipv4",
                "enable_ipv6", "labels"}
RESTART_RE = re.compile(r"no|always|unless-stopped|on-failure(:\d+)?")


# --------------------------------------------------------------------------- loading

def load_compose(variables: dict[str, str] | None = None) -> dict:
    """docker-compose.yml as compose sees it: YAML (anchors and merge keys resolved), then
    interpolated with `variables`; extension fields (x-*) dropped."""
    raw = yaml.safe_load(COMPOSE_FILE.read_text())
    assert isinstance(raw, dict), "docker-compose.yml is not a mapping"
    doc = _interpolate_tree(raw, variables or {})
    return {k: v for k, v in doc.items() if not k.startswith("x-")}


_INTERPOLATION = re.compile(r"\$(?:(?P<escaped>\$)|\{(?P<braced>[^}]*)\}|(?P<named>[A-Za-z_][A-Za-z0-9_]*))")
_BRACED = re.compile(r"(?P<name>[A-Za-z_][A-Za-z0-9_]*)(?:(?P<op>:?[-?+])(?P<arg>.*))?", re.S)


def interpolate(value: str, variables: dict[str, str]) -> str:
    """Compose's interpolation: $$, $VAR, ${VAR}, ${VAR:-d}, ${VAR-d}, ${VAR:?e}, ${VAR?e}, ${VAR:+a}, ${VAR+a}."""
    def substitute(m: re.Match) -> str:
        if m.group("escaped"):
            return "$"
        if m.group("named"):
            return variables.get(m.group("named"), "")
        braced = _BRACED.fullmatch(m.group("braced"))
        if not braced or "$" in (braced.group("arg") or ""):
            raise ValueError(f"interpolation this test does not support: {m.group(0)!r}")
        name, op, arg = braced.group("name", "op", "arg")
        if op is None:
            return variables.get(name, "")
        given = bool(variables.get(name)) if op.startswith(":") else name in variables
        if op.endswith("-"):
            return variables[name] if given else arg
        if op.endswith("+"):
            return arg if given else ""
        if not given:  # ? and :?
            raise ValueError(f"required variable {name} is missing a value: {arg}")
        return variables[name]

    return _INTERPOLATION.sub(substitute, value)


def _interpolate_tree(node, variables):
    if isinstance(node, str):
        return interpolate(node, variables)
    if isinstance(node, list):
        return [_interpolate_tree(v, variables) for v in node]
    if isinstance(node, dict):
        return {k: _interpolate_tree(v, variables) for k, v in node.items()}
    return node


def dockerfile() -> dict:
    """The Dockerfile's instructions that matter here: FROM, USER, ENV, ENTRYPOINT, CMD, HEALTHCHECK, RUN."""
    instructions: list[tuple[str, str]] = []
    pending = ""
    for line in DOCKERFILE.read_text().splitlines():
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue  # comments (and parser directives) and blank lines, also inside continuations
        if stripped.endswith("\\"):
            pending += stripped[:-1] + " "
            continue
        keyword, _, rest = (pending + stripped).partition(" ")
        instructions.append((keyword.upper(), rest.strip()))
        pending = ""
    assert not pending, "Dockerfile ends inside a line continuation"

    out: dict = {"FROM": [], "RUN": [], "ENV": {}, "USER": None, "ENTRYPOINT": None, "CMD": None, "HEALTHCHECK": None}
    for keyword, rest in instructions:
        if keyword in ("FROM", "RUN"):
            out[keyword].append(rest)
        elif keyword == "ENV":
            words = shlex.split(rest)
            if words and "=" not in words[0]:  # legacy `ENV KEY value`
                out["ENV"][words[0]] = rest.split(None, 1)[1]
            else:
                out["ENV"].update(w.split("=", 1) for w in words)
        elif keyword == "USER":
            out["USER"] = rest
        elif keyword in ("ENTRYPOINT", "CMD"):
            out[keyword] = _exec_form(keyword, rest)
        elif keyword == "HEALTHCHECK":
            options, sep, command = rest.partition("CMD ")
            assert sep, f"HEALTHCHECK without CMD: {rest!r}"
            out["HEALTHCHECK"] = {"options": dict(o.lstrip("-").split("=", 1) for o in options.split()),
                                  "cmd": _exec_form("HEALTHCHECK CMD", command)}
    return out


def _exec_form(what: str, text: str) -> list[str]:
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        value = None
    assert isinstance(value, list) and value and all(isinstance(v, str) for v in value), \
        f"Dockerfile {what} must be in exec (JSON list) form, got {text!r}"
    return value


def started(compose: dict, profiles: tuple[str, ...] = ()) -> dict[str, dict]:
    """The services `docker compose [--profile P...] up` starts (those without a profile, and those
    of the profiles given): servers and one-shots."""
    return {name: svc for name, svc in compose["services"].items()
            if not svc.get("profiles") or set(svc["profiles"]) & set(profiles)}


def is_etcd(svc: dict) -> bool:
    """An etcd member of the `ha` profile (the official etcd image: no hedgefs entrypoint)."""
    return os.path.basename(svc["command"][0]) == "etcd"


def servers(compose: dict, profiles: tuple[str, ...] = ()) -> dict[str, dict]:
    """The long-running servers `up` starts: a NameNode and DataNodes (and with the `ha` profile a
    second NameNode and the etcd members)."""
    return {name: svc for name, svc in started(compose, profiles).items()
            if svc["command"][0] in ("namenode", "datanode") or is_etcd(svc)}


def dependencies(svc: dict, running: "set[str] | dict") -> dict[str, dict]:
    """The service's depends_on that apply: a `required: false` one on a service that is not
    started (another profile's) is left out, as compose does."""
    deps = svc.get("depends_on") or {}
    return {dep: spec for dep, spec in deps.items() if dep in running or spec.get("required", True)}


def environment(svc: dict) -> dict[str, str]:
    env = svc.get("environment") or {}
    if isinstance(env, list):
        env = dict(item.split("=", 1) if "=" in item else (item, None) for item in env)
    out = {}
    for key, value in env.items():
        if value is None:
            continue  # `KEY` alone: taken from the shell by compose; the shell here sets none
        out[key] = str(value).lower() if isinstance(value, bool) else str(value)
    return out


def volume_mounts(svc: dict) -> list[tuple[str, str]]:
    """(source, target) for each volume mount, short or long syntax."""
    mounts = []
    for v in svc.get("volumes") or []:
        if isinstance(v, str):
            parts = v.split(":")
            assert len(parts) >= 2, f"anonymous volume {v!r}: give it a name"
            mounts.append((parts[0], parts[1]))
        else:
            mounts.append((v.get("source"), v["target"]))
    return mounts


def container_ports(svc: dict) -> set[str]:
    """Ports the service's server listens on inside its container (published `ports` and `expose`)."""
    ports = {str(p).split("/")[0] for p in svc.get("expose") or []}
    for p in svc.get("ports") or []:
        ports.add(str(p["target"]) if isinstance(p, dict) else str(p).split(":")[-1].split("/")[0])
    return ports


def flag_value(command: list[str], flag: str) -> str | None:
    for i, word in enumerate(command[:-1]):
        if word == flag:
            return command[i + 1]
    return None


def health_command(svc: dict, image: dict) -> list[str] | None:
    """What the engine runs as the service's health check; None when it has none."""
    hc = svc.get("healthcheck") or {}
    if hc.get("disable"):
        return None
    test = hc.get("test")
    if test is None:
        return image["HEALTHCHECK"]["cmd"] if image["HEALTHCHECK"] else None
    if isinstance(test, str):
        return ["/bin/sh", "-c", test]
    if test[0] == "NONE":
        return None
    if test[0] == "CMD-SHELL":
        return ["/bin/sh", "-c", test[1]]
    assert test[0] == "CMD", f"healthcheck test must start with CMD, CMD-SHELL or NONE: {test!r}"
    return test[1:]


# --------------------------------------------------------------------------- static checks

def hedgefs_services(compose: dict) -> dict[str, dict]:
    """Every service but the optional monitoring ones (Prometheus, Grafana) and the `ha` profile's
    etcd members: their own images."""
    return {name: svc for name, svc in compose["services"].items()
            if "monitoring" not in (svc.get("profiles") or []) and not is_etcd(svc)}


def exported_metric_names() -> set[str]:
    """Sample names the NameNode, a DataNode and a client actually expose."""
    from hedgefs.client.metrics import REGISTRY
    from hedgefs.datanode.metrics import DataNodeMetrics
    from hedgefs.namenode.metrics import families
    from hedgefs.namenode.model import ClusterStatus, DataNodeStatus

    status = ClusterStatus("", 0, 0, 0, 0, 0, 0, {"RS-6-3-1024k": 1}, 0, 0, 0, 0, 0, 0, 0,
                           [DataNodeStatus("dn1", "", "", "live", 0, 0, 0, 0, 0, 0, 0, {}, 0, 0, 0, [])])
    dn = DataNodeMetrics("dn1")
    dn.add_state(lambda: {"repairs_active": 0, "fault": {"read_delay_ms": 0.0}})
    dn.read_done(0.001, 1, "ok")
    from hedgefs.client.metrics import ClientMetrics

    ClientMetrics().record_unit_read("dn1", 0.001)
    ClientMetrics().record_overdue("dn1")
    names = {s.name for f in families(status) for s in f.samples}
    for registry in (dn.registry, REGISTRY):
        names |= {s.name for f in registry.collect() for s in f.samples}
    return names


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
    candidates = [p for p in (*range(20000, ephemeral.start), *range(ephemeral.stop, 65536))
                  if p not in _PICKED] or list(range(20000, 65536))
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
