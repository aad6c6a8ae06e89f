"""What tests/integration/test_compose.py reads docker-compose.yml and the Dockerfile with (the parity run,
the services as local processes: compose_run.py)."""
import json
import os
import pathlib
import re
import shlex

import yaml

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
