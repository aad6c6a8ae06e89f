"""docker-compose.yml and the Dockerfile, checked for real on a machine without a Docker engine.

The static tests parse both files and check what an engine would only tell us at `docker compose
up` time: compose-spec keys only, one image built from this tree, servers listening on all
interfaces inside their containers, only the NameNode published and on 127.0.0.1 only, a named
volume per DataNode, health checks, restart policies, depends_on conditions.

The parity test then runs the compose file: each service's `command` and `environment`, under the
image's ENV and ENTRYPOINT from the Dockerfile, started as a local process in depends_on order
(waiting on `service_healthy` with the image's own HEALTHCHECK command, and for a one-shot
service on `service_completed_successfully`), until the NameNode reports all DataNodes live; then
a file goes in and comes back out through the `client` service's entrypoint and environment, as
`docker compose run --rm client put|cat ...` would. It runs twice: as `docker compose up` and as
`HEDGEFS_SECURE=1 docker compose up` (the secure mode: the `security` service's material, TLS,
credentials). No command line is written down here: they all come from docker-compose.yml.

What a container has and a local process does not is remapped, and only this (see `Remap`):

  * ENTRYPOINT ["hedgefs"]                 -> [sys.executable, "-m", "hedgefs"]
  * the HEALTHCHECK's `python`             -> sys.executable
  * `0.0.0.0`                              -> `127.0.0.1` (every server here binds loopback only)
  * `<service>:<container port>`           -> `127.0.0.1:<that service's free loopback port>`
  * a service's own container port         -> its free loopback port (`--port 9866`, HEDGEFS_HEALTH_PORT)
  * `--advertise-host <own service name>`  -> `--advertise-host 127.0.0.1`
  * a volume's mount path (and paths under it) -> a temp dir per named volume
  * a directory holding a service's mounts -> a temp dir where each mount is a link to its volume
  * `${VAR}`, `${VAR:-default}` & co.      -> interpolated as compose does, from VARIABLES below
                                              (not from the shell running the tests)

Everything else (verbs, flags, ids, fault switches, environment values) runs as written. The
host's environment is inherited minus HEDGEFS_* (a container has none of the host's settings).
"""

import concurrent.futures
import json
import os
import pathlib
import random
import re
import shlex
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

# Reserves a free loopback port per service before its process binds it: run alone (Makefile).
pytestmark = pytest.mark.alone

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


def started(compose: dict) -> dict[str, dict]:
    """The services `docker compose up` starts (those without a profile): servers and one-shots."""
    return {name: svc for name, svc in compose["services"].items() if not svc.get("profiles")}


def servers(compose: dict) -> dict[str, dict]:
    """The long-running servers `up` starts: a NameNode and DataNodes."""
    return {name: svc for name, svc in started(compose).items() if svc["command"][0] in ("namenode", "datanode")}


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

def test_compose_uses_compose_spec_keys_only():
    doc = yaml.safe_load(COMPOSE_FILE.read_text())
    assert "version" not in doc, "`version` is obsolete in the compose spec (compose v2 warns about it)"
    unknown = {k for k in doc if not k.startswith("x-")} - TOP_LEVEL_KEYS
    assert not unknown, f"not compose-spec top-level keys: {sorted(unknown)}"
    compose = load_compose()
    for name, svc in compose["services"].items():
        assert re.fullmatch(r"[a-z0-9][a-z0-9_.-]*", name), f"bad service name {name!r}"
        assert not set(svc) - SERVICE_KEYS, f"{name}: not compose-spec service keys: {sorted(set(svc) - SERVICE_KEYS)}"
        if isinstance(svc.get("build"), dict):
            assert not set(svc["build"]) - BUILD_KEYS, f"{name}: unknown build keys {set(svc['build']) - BUILD_KEYS}"
        if "healthcheck" in svc:
            assert not set(svc["healthcheck"]) - HEALTHCHECK_KEYS, f"{name}: unknown healthcheck keys"
        for dep, spec in (svc.get("depends_on") or {}).items() if isinstance(svc.get("depends_on"), dict) else ():
            assert not set(spec) - DEPENDS_ON_KEYS, f"{name}: unknown depends_on keys for {dep}"
            assert spec.get("condition", "service_started") in DEPENDS_ON_CONDITIONS, f"{name}: bad condition for {dep}"
        if "restart" in svc:
            assert RESTART_RE.fullmatch(str(svc["restart"])), f"{name}: bad restart policy {svc['restart']!r}"
        for key in ("command", "entrypoint"):
            if key in svc:
                assert isinstance(svc[key], list) and all(isinstance(w, str) for w in svc[key]), \
                    f"{name}: `{key}` must be a YAML list of strings (quote numbers), got {svc[key]!r}"
    for vol, spec in (compose.get("volumes") or {}).items():
        assert not set(spec or {}) - VOLUME_KEYS, f"volume {vol}: unknown keys {set(spec) - VOLUME_KEYS}"
    for net, spec in (compose.get("networks") or {}).items():
        assert not set(spec or {}) - NETWORK_KEYS, f"network {net}: unknown keys {set(spec) - NETWORK_KEYS}"


def test_dockerfile_is_one_slim_nonroot_image_with_an_honest_healthcheck():
    image = dockerfile()
    assert len(image["FROM"]) == 1 and re.fullmatch(r"python:3\.11-slim(-\w+)?(@sha256:[0-9a-f]{64})?",
                                                    image["FROM"][0]), f"base image: {image['FROM']}"
    assert image["USER"] and image["USER"].split(":")[0] not in ("root", "0"), f"runs as {image['USER']!r}"
    assert image["ENTRYPOINT"] == ["hedgefs"], f"ENTRYPOINT {image['ENTRYPOINT']}"
    runs = " && ".join(image["RUN"])
    assert "pyproject.toml" in runs and re.search(r"pip install [^&]*\.(\s|$)", runs), \
        "dependencies must come from pyproject.toml's pins and hedgefs from the source tree (pip install .)"
    hc = image["HEALTHCHECK"]
    assert hc and hc["cmd"] == ["python", "-m", "hedgefs.cli.healthcheck"], hc
    assert {"interval", "timeout", "retries"} <= set(hc["options"]), hc["options"]
    assert {"HEDGEFS_HEALTH_PORT", "HEDGEFS_HEALTH_RPC"} <= set(image["ENV"]), image["ENV"]
    ignored = (ROOT / ".dockerignore").read_text().split()
    assert {".git", ".venv"} <= {p.strip("/") for p in ignored}, f".dockerignore: {ignored}"


def hedgefs_services(compose: dict) -> dict[str, dict]:
    """Every service but the optional monitoring ones (Prometheus, Grafana: their own images)."""
    return {name: svc for name, svc in compose["services"].items() if "monitoring" not in (svc.get("profiles") or [])}


def test_every_service_runs_the_one_image_built_here():
    compose = load_compose()
    images = {svc.get("image") for svc in hedgefs_services(compose).values()}
    assert len(images) == 1 and None not in images, f"one image for all roles, got {images}"
    for name, svc in hedgefs_services(compose).items():
        build = svc.get("build")
        context = build if isinstance(build, str) else (build or {}).get("context")
        assert context == ".", f"{name}: build context must be this tree, got {build!r}"
        dockerfile_name = build.get("dockerfile", "Dockerfile") if isinstance(build, dict) else "Dockerfile"
        assert (ROOT / dockerfile_name).is_file(), f"{name}: no {dockerfile_name} in the build context"


def test_servers_listen_everywhere_in_container_and_only_the_namenode_is_published_on_loopback():
    compose = load_compose()
    assert set(servers(compose)) == {"namenode", *DATANODES}, f"services started by `up`: {sorted(servers(compose))}"
    for name, svc in servers(compose).items():
        command = svc["command"]
        assert command[0] == ("namenode" if name == "namenode" else "datanode"), f"{name}: {command}"
        assert flag_value(command, "--host") == "0.0.0.0", \
            f"{name}: a server in a container must bind 0.0.0.0 (--host), or nothing else can reach it"
        port = flag_value(command, "--port")
        assert port in container_ports(svc), \
            f"{name}: --port {port} is not in its ports/expose {container_ports(svc)}"
        assert environment(svc).get("HEDGEFS_HEALTH_PORT") == port, \
            f"{name}: HEDGEFS_HEALTH_PORT must be --port ({port})"
        http_port = flag_value(command, "--http-port")
        assert http_port in container_ports(svc), f"{name}: --http-port {http_port} is not in its ports/expose"
        if name != "namenode":
            assert not svc.get("ports"), f"{name}: only the NameNode is published"
            data_port = flag_value(command, "--data-port")
            assert data_port in container_ports(svc) and data_port != port, \
                f"{name}: --data-port {data_port} must be its own port, in its expose {container_ports(svc)}"
    assert compose["services"]["namenode"]["ports"] == ["127.0.0.1:8020:8020", "127.0.0.1:9870:9870"]
    assert compose["services"]["client"].get("ports") is None


def test_each_datanode_has_its_own_named_volume_at_its_data_dir():
    compose = load_compose()
    declared = set(compose.get("volumes") or {})
    owners: dict[str, str] = {}
    for name, svc in servers(compose).items():
        mounts = volume_mounts(svc)
        data_dir = flag_value(svc["command"], "--data-dir")
        assert [t for _s, t in mounts] == [data_dir, "/security"], \
            f"{name}: --data-dir {data_dir} must be its volume, then its credential's: {mounts}"
        for source, _target in mounts:
            assert source in declared, f"{name}: volume {source!r} is not declared under top-level `volumes:`"
            assert source not in owners, f"{name} and {owners.get(source)} share volume {source!r}"
            owners[source] = name


def test_secure_mode_gives_each_server_its_own_credential_and_no_one_elses():
    """With HEDGEFS_SECURE set, each server reads its own credential from a volume only it (and the
    one-shot that writes them) mounts, read-only; without it, none; the client gets the admin's."""
    raw, insecure, secure = yaml.safe_load(COMPOSE_FILE.read_text()), load_compose(), load_compose(SECURE)
    writer = secure["services"]["security"]
    assert writer["command"][:3] == ["admin", "init-security", "/security"] and "--split" in writer["command"]
    assert flag_value(writer["command"], "--datanodes").split(",") == DATANODES
    written = dict(volume_mounts(writer))       # volume -> where the writer mounts it
    for name, svc in servers(secure).items():
        own = f"security-{name}"
        assert environment(svc)["HEDGEFS_SERVER_CREDENTIALS"] == f"/security/{name}.pem"
        assert environment(servers(insecure)[name])["HEDGEFS_SERVER_CREDENTIALS"] == ""
        assert f"{own}:/security:ro" in raw["services"][name]["volumes"], f"{name}: mount {own} read-only"
        assert written[own] == f"/security/{name}"           # init-security --split writes <name>/<name>.pem
        holders = [n for n, s in secure["services"].items() if any(src == own for src, _ in volume_mounts(s))]
        assert sorted(holders) == sorted([name, "security"]), f"{own} is mounted by {holders}"
    client = secure["services"]["client"]
    assert environment(client)["HEDGEFS_CREDENTIALS"] == "/security/admin.pem"
    assert dict(volume_mounts(client)) == {"security-admin": "/security"} and written["security-admin"] == "/security/admin"
    assert secure["services"]["namenode"]["depends_on"] == {"security": {"condition": "service_completed_successfully"}}
    assert writer.get("restart") == "no" and writer.get("healthcheck") == {"disable": True}


def test_healthchecks_restart_policies_and_startup_order():
    compose, image = load_compose(), dockerfile()
    for name, svc in servers(compose).items():
        assert health_command(svc, image), f"{name}: no health check"
        assert svc.get("restart") in ("unless-stopped", "always", "on-failure"), \
            f"{name}: restart {svc.get('restart')!r}"
        if name != "namenode":
            assert svc.get("depends_on") == {"namenode": {"condition": "service_healthy"}}, \
                f"{name}: depends_on {svc.get('depends_on')}"
    assert environment(compose["services"]["namenode"])["HEDGEFS_HEALTH_RPC"].startswith("/hedgefs.NameNode/")
    assert set(compose["services"]["namenode"]["depends_on"]) == {"security"}   # the one-shot: see above


def test_datanode_commands_agree_with_their_service():
    compose, raw = load_compose(), yaml.safe_load(COMPOSE_FILE.read_text())
    nn_ref = f"namenode:{flag_value(compose['services']['namenode']['command'], '--port')}"
    for name in DATANODES:
        svc = compose["services"][name]
        command, env = svc["command"], environment(svc)
        assert flag_value(command, "--id") == name, f"{name}: --id {flag_value(command, '--id')}"
        assert flag_value(command, "--advertise-host") == name, \
            f"{name}: must advertise its own service name, got {flag_value(command, '--advertise-host')}"
        assert flag_value(command, "--namenode") == nn_ref, f"{name}: --namenode must be {nn_ref}"
        assert "--enable-faults" in command or env.get("HEDGEFS_ENABLE_FAULTS") == "1", f"{name}: faults disabled"
        assert env["HEDGEFS_HEALTH_RPC"].startswith("/hedgefs.DataNode/"), f"{name}: {env['HEDGEFS_HEALTH_RPC']}"
        read_delay = raw["services"][name]["environment"]["HEDGEFS_FAULT_READ_DELAY_MS"]
        assert read_delay.startswith(f"${{{name.upper()}_READ_DELAY_MS"), f"{name}: read delay from {read_delay!r}"


def test_client_service_is_a_one_shot_cli_under_a_profile():
    client = load_compose()["services"]["client"]
    assert client.get("profiles") == ["client"]
    assert client.get("entrypoint") == ["hedgefs"]
    assert environment(client).get("HEDGEFS_NAMENODE") == "namenode:8020"
    assert client.get("depends_on") == {"namenode": {"condition": "service_healthy"}}
    assert client.get("restart") == "no" and client.get("healthcheck") == {"disable": True}
    assert client.get("command"), "`docker compose run --rm client` needs a default command"


def test_monitoring_profile_scrapes_every_server_and_the_dashboard_uses_real_metrics():
    """Checked without an engine (the images come from a registry): Prometheus scrapes exactly
    each server's --http-port; Grafana is provisioned with the dashboard, whose every query names
    only metrics that hedgefs exports."""
    compose = load_compose()
    monitoring = {n: s for n, s in compose["services"].items() if "monitoring" in (s.get("profiles") or [])}
    assert set(monitoring) == {"prometheus", "grafana"}
    for name, svc in monitoring.items():
        assert re.fullmatch(r"[\w./-]+:v?\d+\.\d+\.\d+", svc["image"]), f"{name}: pin the image, got {svc['image']}"
        for port in svc.get("ports") or []:
            assert str(port).startswith("127.0.0.1:"), f"{name}: publish on loopback only, got {port}"
        for source, _target in volume_mounts(svc):
            assert (ROOT / source).exists(), f"{name}: mounts {source}, which is not in the tree"
    config = yaml.safe_load((ROOT / "deploy/prometheus/prometheus.yml").read_text())
    scraped = {t for job in config["scrape_configs"] for sc in job["static_configs"] for t in sc["targets"]}
    expected = {f"{name}:{flag_value(svc['command'], '--http-port')}" for name, svc in servers(compose).items()}
    assert scraped == expected
    mounts = dict(volume_mounts(monitoring["grafana"]))
    provider = yaml.safe_load((ROOT / "deploy/grafana/provisioning/dashboards/hedgefs.yml").read_text())
    assert mounts["./deploy/grafana/hedgefs.json"].startswith(provider["providers"][0]["options"]["path"] + "/")
    source = yaml.safe_load((ROOT / "deploy/grafana/provisioning/datasources/prometheus.yml").read_text())
    uid = source["datasources"][0]["uid"]
    dashboard = json.loads((ROOT / "deploy/grafana/hedgefs.json").read_text())
    exported = exported_metric_names()
    titles = " ".join(p["title"].lower() for p in dashboard["panels"])
    for topic in ("hedges and wins", "breaker", "p99 per datanode", "repairs"):
        assert topic in titles, f"the dashboard has no {topic!r} panel"
    for panel in dashboard["panels"]:
        for target in panel["targets"]:
            assert target["datasource"]["uid"] == uid and panel["datasource"]["uid"] == uid
            names = set(re.findall(r"\bhedgefs_\w+", target["expr"]))
            assert names and names <= exported, f"{panel['title']}: {sorted(names - exported)} are not exported"


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

def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Remap:
    """The container -> local process mapping in the module docstring, and nothing more."""

    def __init__(self, compose: dict, tmp: pathlib.Path):
        self.services = compose["services"]
        self.tmp = tmp
        # (service, container port) -> loopback port
        self.ports = {(name, port): free_port() for name, svc in servers(compose).items()
                      for port in sorted(container_ports(svc))}

    def entrypoint(self, argv: list[str]) -> list[str]:
        assert argv == ["hedgefs"], f"this test runs the `hedgefs` entrypoint only, got {argv}"
        return [sys.executable, "-m", "hedgefs"]

    def word(self, service: str, word: str, previous: str | None = None) -> str:
        if word == "0.0.0.0":
            return "127.0.0.1"
        if previous == "--advertise-host" and word == service:
            return "127.0.0.1"
        host, sep, port = word.partition(":")
        if sep and host in self.services:
            assert (host, port) in self.ports, f"{service}: {word!r} names no port that {host} serves"
            return f"127.0.0.1:{self.ports[(host, port)]}"
        if (service, word) in self.ports:
            return str(self.ports[(service, word)])
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


def startup_order(compose: dict) -> list[str]:
    """The services `up` starts, dependencies first."""
    order: list[str] = []
    pending = dict(started(compose))
    while pending:
        ready = [n for n, svc in pending.items() if set(svc.get("depends_on") or {}) <= set(order)]
        assert ready, f"depends_on cycle or dependency on a service `up` does not start: {sorted(pending)}"
        for name in sorted(ready):
            order.append(name)
            del pending[name]
    return order


def run_health(cmds: dict[str, list[str]], env: dict[str, dict[str, str]]) -> dict[str, subprocess.CompletedProcess]:
    """Run health checks concurrently (each one is a fresh interpreter, as in the container)."""
    with concurrent.futures.ThreadPoolExecutor(max_workers=len(cmds)) as pool:
        futures = {name: pool.submit(subprocess.run, cmd, env=env[name], capture_output=True, text=True, timeout=15)
                   for name, cmd in cmds.items()}
        return {name: f.result() for name, f in futures.items()}


@pytest.mark.parametrize("variables", [VARIABLES, SECURE], ids=["insecure", "secure"])
def test_compose_cluster_runs_as_local_processes(tmp_path, variables):
    compose, image = load_compose(variables), dockerfile()
    secure = bool(variables.get("HEDGEFS_SECURE"))
    remap = Remap(compose, tmp_path)
    procs = Processes(tmp_path)
    env: dict[str, dict[str, str]] = {}
    health: dict[str, list[str]] = {}
    healthy: set[str] = set()
    try:
        # --- `docker compose up`: each server in depends_on order, gated on its conditions.
        for name in startup_order(compose):
            svc = compose["services"][name]
            for dep, spec in (svc.get("depends_on") or {}).items():
                if spec.get("condition") == "service_healthy" and dep not in healthy:
                    wait_healthy(procs, dep, health[dep], env[dep], waiting=name)
                    healthy.add(dep)
                if spec.get("condition") == "service_completed_successfully":
                    procs.wait_completed(dep, waiting=name)
            argv = remap.entrypoint(svc.get("entrypoint") or image["ENTRYPOINT"]) + remap.argv(name, svc["command"])
            assert "0.0.0.0" not in argv
            env[name] = remap.env(name, image["ENV"], environment(svc))
            health[name] = remap.health(name, health_command(svc, image))
            procs.start(name, argv, env[name])

        nn_port = flag_value(compose["services"]["namenode"]["command"], "--port")
        namenode = f"127.0.0.1:{remap.ports[('namenode', nn_port)]}"
        admin = None
        if secure:     # the admin's credential, as the `security` service wrote it for the client
            from hedgefs.security.material import load_credential

            admin = load_credential(remap.word("client", environment(compose["services"]["client"])["HEDGEFS_CREDENTIALS"]))
        report = wait_registered(procs, namenode, DATANODES, admin)

        # Each DataNode advertises the loopback address and port it was given, and answers there.
        for dn in report.datanodes:
            port = remap.ports[(dn.id, flag_value(compose["services"][dn.id]["command"], "--port"))]
            assert dn.address == f"127.0.0.1:{port}", f"{dn.id} advertises {dn.address}, runs on port {port}"
            data_port = remap.ports[(dn.id, flag_value(compose["services"][dn.id]["command"], "--data-port"))]
            assert dn.data_address == f"127.0.0.1:{data_port}", \
                f"{dn.id} advertises data address {dn.data_address}, its data port is {data_port}"

        # Every server's health check passes; the same check fails where nothing answers, where
        # the wrong server answers, and on a frozen process whose port still accepts connections
        # (what a TCP-connect check would call healthy), so it is not a check that always passes.
        results = run_health({n: cmd for n, cmd in health.items() if cmd}, env)
        bad = {n: (r.returncode, r.stdout + r.stderr) for n, r in results.items() if r.returncode != 0}
        assert not bad, f"health checks failing on a running cluster: {bad}"
        frozen = DATANODES[-1]
        os.killpg(procs.procs[frozen][0].pid, signal.SIGSTOP)
        try:
            negative = run_health({"closed": health["dn1"], "wrong": health["dn1"], "frozen": health[frozen]},
                                  {"closed": dict(env["dn1"], HEDGEFS_HEALTH_PORT=str(free_port())),
                                   "wrong": dict(env["dn1"], HEDGEFS_HEALTH_PORT=namenode.rsplit(":", 1)[1]),
                                   "frozen": env[frozen]})
        finally:
            os.killpg(procs.procs[frozen][0].pid, signal.SIGCONT)
        assert negative["closed"].returncode != 0, "health check passes with nothing listening"
        assert negative["wrong"].returncode != 0, "a DataNode health check passes against the NameNode"
        assert negative["frozen"].returncode != 0, f"health check passes on a frozen (SIGSTOP) {frozen}"

        # Fault injection is on everywhere, and DN3_READ_DELAY_MS reached dn3 (and only dn3).
        for dn in report.datanodes:
            with channel_to(dn.address, admin, f"{dn.id}.datanode.hedgefs") as channel:
                state = hedgefs_pb2_grpc.DataNodeStub(channel).GetFaults(pb.FaultClearRequest(), timeout=5)
            assert state.enabled, f"{dn.id}: fault injection is off"
            expected = SLOW_DN_DELAY_MS if dn.id == SLOW_DN else 0
            assert state.read_delay_ms == expected, f"{dn.id}: read delay {state.read_delay_ms} ms, expected {expected}"

        # --- `docker compose run --rm client` (its default command), then put and cat through it.
        client = compose["services"]["client"]
        client_env = remap.env("client", image["ENV"], environment(client))
        client_argv = remap.entrypoint(client.get("entrypoint") or image["ENTRYPOINT"])

        def run_client(*args: str, input: bytes | None = None) -> subprocess.CompletedProcess:
            words = remap.argv("client", list(args or client["command"]))
            done = subprocess.run(client_argv + words, env=client_env, input=input, capture_output=True,
                                  timeout=60, cwd=tmp_path)
            assert done.returncode == 0, (f"client {shlex.join(words)} exited {done.returncode}: "
                                          f"{done.stderr.decode(errors='replace')}")
            return done

        listing = run_client().stdout.decode()
        for dn in DATANODES:
            assert re.search(rf"^{dn}\s.*\blive\b", listing, re.M), f"{dn} not live in `client` output:\n{listing}"

        data = random.Random(7).randbytes(7 * 1024 * 1024 + 4321)  # two stripes of RS-6-3-1024k, the last short
        run_client("put", "-", "/compose-check.bin", input=data)
        started = time.monotonic()
        out = run_client("cat", "/compose-check.bin").stdout
        assert len(out) == len(data) and out == data, f"cat returned {len(out)} bytes, differing from what was put"
        assert time.monotonic() - started < 20
    finally:
        procs.stop_all()


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
