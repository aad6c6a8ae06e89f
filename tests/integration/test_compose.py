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
  * `${VAR}`, `${VAR:-default}` & co.      -> interpolated as compose does, from VARIABLES (compose_support.py)
                                              (not from the shell running the tests)

Everything else (verbs, flags, ids, fault switches, environment values) runs as written. The
host's environment is inherited minus HEDGEFS_* (a container has none of the host's settings).
"""

import json
import os
import random
import re
import shlex
import signal
import subprocess
import time

import pytest
import yaml
from compose_run import (
    Processes,
    Remap,
    channel_to,
    free_port,
    run_health,
    up,
    wait_registered,
)
from compose_support import (
    BUILD_KEYS,
    COMPOSE_FILE,
    DATANODES,
    DEPENDS_ON_CONDITIONS,
    DEPENDS_ON_KEYS,
    HEALTHCHECK_KEYS,
    NETWORK_KEYS,
    RESTART_RE,
    ROOT,
    SECURE,
    SERVICE_KEYS,
    SLOW_DN,
    SLOW_DN_DELAY_MS,
    TOP_LEVEL_KEYS,
    VARIABLES,
    VOLUME_KEYS,
    container_ports,
    dockerfile,
    environment,
    exported_metric_names,
    flag_value,
    health_command,
    hedgefs_services,
    load_compose,
    servers,
    volume_mounts,
)

from hedgefs.proto import hedgefs_pb2 as pb
from hedgefs.proto import hedgefs_pb2_grpc

ETCD_MEMBERS = ["etcd-1", "etcd-2", "etcd-3"]   # the `ha` profile's (tests/integration/test_compose_ha.py)


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
        peers = ["namenode-2"] if name == "namenode" else []   # the `ha` profile's standby: the same credential
        assert sorted(holders) == sorted([name, "security", *peers]), f"{own} is mounted by {holders}"
    client = secure["services"]["client"]
    assert environment(client)["HEDGEFS_CREDENTIALS"] == "/security/admin.pem"
    assert dict(volume_mounts(client)) == {"security-admin": "/security"} and written["security-admin"] == "/security/admin"
    assert secure["services"]["namenode"]["depends_on"]["security"] == {"condition": "service_completed_successfully"}
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
    deps = compose["services"]["namenode"]["depends_on"]
    assert set(deps) == {"security", *ETCD_MEMBERS}   # the one-shot (see above), the `ha` profile's etcd
    for member in ETCD_MEMBERS:   # only when the profile is on: `up` alone has no etcd
        assert deps[member] == {"condition": "service_healthy", "required": False}


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


@pytest.mark.parametrize("variables", [VARIABLES, SECURE], ids=["insecure", "secure"])
def test_compose_cluster_runs_as_local_processes(tmp_path, variables):
    compose, image = load_compose(variables), dockerfile()
    secure = bool(variables.get("HEDGEFS_SECURE"))
    remap = Remap(compose, tmp_path)
    procs = Processes(tmp_path)
    try:
        # --- `docker compose up`: each server in depends_on order, gated on its conditions.
        env, health = up(compose, image, remap, procs)

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

