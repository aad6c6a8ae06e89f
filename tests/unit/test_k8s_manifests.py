"""deploy/k8s: every Kustomize overlay renders, validates against the Kubernetes API schemas of two
releases, and keeps the rules a hedgefs cluster needs. Validated here, never run (no cluster).

Rendering is tests/kustomize_support.py (the subset of Kustomize the overlays use; checked against
`kubectl kustomize` where kubectl is installed). Validation is `kubernetes-validate` (its schemas
are bundled: offline), strict (an unknown field is an error). The rules (``problems``):

- every StatefulSet's serviceName is a headless Service (clusterIP: None) selecting its pods;
- every Service port's targetPort is a port its pods' containers declare;
- every hedgefs container's arguments parse with the real CLI, and the ports its flags bind
  (--port, --data-port, --http-port, --metrics-port) are the ports it declares;
- HEDGEFS_NAMENODE names the NameNode StatefulSet's pods on its Service at the NameNode's --port;
- DataNodes >= k + m of the cluster's default policy; their PDB lets at most m go at once;
- DataNodes one a node, spread over zones, their rack read from their node's zone;
- every hedgefs container has a readiness and a liveness probe on an endpoint its program serves
  at that port (the table SERVED);
- in the secure overlay every hedgefs process has a credential.

Each rule is shown to fail on a broken copy (a wrong port, a Service that is not headless, ...).
"""

from __future__ import annotations

import copy
import pathlib
import re
import shutil
import subprocess

import kubernetes_validate
import pytest
import yaml

from kustomize_support import Unsupported, pod_spec, render

ROOT = pathlib.Path(__file__).resolve().parents[2] / "deploy" / "k8s"
OVERLAYS = ["single", "rs63", "ha", "secure"]
VERSIONS = ["1.30.0", "1.37.0"]
# What each program serves over HTTP, and on which of its flags' ports: namenode/web.py and
# datanode/server.py (/health, /metrics), the client's metrics server in hedgefs/cli/common.py
# (`--metrics-port`: /health, /metrics) that the S3 gateway and the mount run.
SERVED = {("namenode", "--http-port"): {"/health", "/metrics"}, ("datanode", "--http-port"): {"/health", "/metrics"},
          ("s3", "--metrics-port"): {"/health", "/metrics"}, ("mount", "--metrics-port"): {"/health", "/metrics"}}
PORT_FLAGS = ("--port", "--data-port", "--http-port", "--metrics-port")
SAMPLE_ENV = {"POD_NAME": "hedgefs-datanode-0", "POD_NAMESPACE": "hedgefs", "NODE_NAME": "node-1"}


@pytest.fixture(scope="module", params=OVERLAYS)
def overlay(request) -> tuple[str, list[dict]]:
    return request.param, render(ROOT / "overlays" / request.param)


# ---------------------------------------------------------------------------- reading the objects

def _named(objects, kind):
    return {o["metadata"]["name"]: o for o in objects if o["kind"] == kind}


def _workloads(objects):
    return [o for o in objects if pod_spec(o) is not None]


def _selects(selector: dict, labels: dict) -> bool:
    return bool(selector) and all(labels.get(k) == v for k, v in selector.items())


def _ports(container) -> dict:
    """name -> number, and number -> number, of a container's declared ports."""
    out = {}
    for p in container.get("ports", []):
        out[p["containerPort"]] = p["containerPort"]
        if "name" in p:
            out[p["name"]] = p["containerPort"]
    return out


def _ours(container) -> bool:
    return container["image"].split(":")[0].rsplit("/", 1)[-1] == "hedgefs"


def command_line(container) -> list[str]:
    """The hedgefs argv a container runs (the DataNode's shell wrapper adds its --rack)."""
    args = [re.sub(r"\$\((\w+)\)", lambda m: SAMPLE_ENV.get(m.group(1), m.group(0)), a)
            for a in container.get("args", [])]
    command = container.get("command", [])
    if command[:2] == ["sh", "-c"]:
        script = command[2]
        verb = re.match(r'exec hedgefs (\w+) "\$@"', script)
        assert verb, f"a shell wrapper that does not exec hedgefs with its args: {script!r}"
        rack = re.search(r'--rack "\$\(cat (\S+)\)"', script)
        return [verb.group(1), *args] + (["--rack", "/zone-a"] if rack else [])
    return args


def parsed(argv: list[str]) -> dict:
    """The CLI's own parse of a hedgefs command line: {param name: value}; ValueError if it fails."""
    import click

    from hedgefs.cli import cli

    command = cli.get_command(None, argv[0])
    if command is None:
        raise ValueError(f"no hedgefs verb {argv[0]!r}")
    try:
        with command.make_context(argv[0], list(argv[1:])) as ctx:
            return dict(ctx.params)
    except click.UsageError as err:
        raise ValueError(f"hedgefs {' '.join(argv)}: {err.format_message()}") from None


def flag(argv: list[str], name: str) -> str | None:
    return argv[argv.index(name) + 1] if name in argv else None


def _port_of(value: str | None) -> int | None:
    return None if value is None else int(value.rpartition(":")[2])


# ---------------------------------------------------------------------------- the rules

def problems(objects: list[dict]) -> list[str]:
    found: list[str] = []
    services, configmaps = _named(objects, "Service"), _named(objects, "ConfigMap")
    workloads = _workloads(objects)
    for sts in _named(objects, "StatefulSet").values():
        name, svc = sts["metadata"]["name"], services.get(sts["spec"].get("serviceName", ""))
        labels = sts["spec"]["template"]["metadata"]["labels"]
        if svc is None:
            found.append(f"StatefulSet {name}: its serviceName {sts['spec'].get('serviceName')!r} is no Service")
        elif svc["spec"].get("clusterIP") != "None":
            found.append(f"StatefulSet {name}: its Service {svc['metadata']['name']} is not headless (clusterIP: None)")
        elif not _selects(svc["spec"].get("selector", {}), labels):
            found.append(f"StatefulSet {name}: its Service {svc['metadata']['name']} does not select its pods")
    for svc in services.values():
        pods = [w for w in workloads if _selects(svc["spec"].get("selector", {}),
                                                 w["spec"]["template"]["metadata"]["labels"])]
        if not pods:
            found.append(f"Service {svc['metadata']['name']}: selects no pods")
        for port in svc["spec"]["ports"]:
            target = port.get("targetPort", port["port"])
            if not all(any(target in _ports(c) for c in pod_spec(w)["containers"]) for w in pods):
                found.append(f"Service {svc['metadata']['name']}: port {port['port']} targets {target!r}, "
                             f"which its pods do not declare")
    roles: dict[str, tuple[dict, list[str]]] = {}
    for w in workloads:
        spec = pod_spec(w)
        for c in spec["containers"]:
            if not _ours(c):
                continue
            where = f"{w['kind']} {w['metadata']['name']} container {c['name']}"
            argv = command_line(c)
            try:
                parsed(argv)
            except ValueError as err:
                found.append(f"{where}: {err}")
                continue
            roles[argv[0]] = (w, argv)
            declared = set(_ports(c).values())
            for f in PORT_FLAGS:
                port = _port_of(flag(argv, f))
                if port is not None and port not in declared:
                    found.append(f"{where}: {f} {port} is not a declared containerPort ({sorted(declared)})")
            for kind in ("readinessProbe", "livenessProbe"):
                probe = c.get(kind)
                if probe is None:
                    found.append(f"{where}: no {kind}")
                    continue
                if "httpGet" in probe:
                    port = _ports(c).get(probe["httpGet"]["port"])
                    serving = [f for f in PORT_FLAGS if _port_of(flag(argv, f)) == port]
                    paths = set().union(*[SERVED.get((argv[0], f), set()) for f in serving])
                    if probe["httpGet"]["path"] not in paths:
                        found.append(f"{where}: {kind} GET {probe['httpGet']['path']} on port {port}: hedgefs "
                                     f"{argv[0]} serves {sorted(paths) or 'nothing over HTTP'} there")
                elif "tcpSocket" in probe:
                    port = _ports(c).get(probe["tcpSocket"]["port"])
                    if port is None or not any(_port_of(flag(argv, f)) == port for f in PORT_FLAGS):
                        found.append(f"{where}: {kind} on a port it does not listen on")
    found += _cluster_rules(objects, roles, configmaps)
    return found


def _cluster_rules(objects, roles, configmaps) -> list[str]:
    from hedgefs.ec.policy import DEFAULT_POLICY, parse_policy

    found = []
    if "namenode" not in roles or "datanode" not in roles:
        return [f"no {r}" for r in ("namenode", "datanode") if r not in roles]
    nn, nn_argv = roles["namenode"]
    dn, dn_argv = roles["datanode"]
    policy = parse_policy(flag(nn_argv, "--default-policy") or DEFAULT_POLICY)
    if dn["spec"]["replicas"] < policy.k + policy.m:
        found.append(f"{dn['spec']['replicas']} DataNodes: {policy.name} needs k + m = {policy.k + policy.m}")
    nn_port = int(flag(nn_argv, "--port"))
    want = [f"{nn['metadata']['name']}-{i}.{nn['spec']['serviceName']}:{nn_port}" for i in range(nn["spec"]["replicas"])]
    told = configmaps.get("hedgefs", {}).get("data", {}).get("HEDGEFS_NAMENODE", "")
    if told.split(",") != want:
        found.append(f"HEDGEFS_NAMENODE is {told!r}; the NameNodes are {','.join(want)}")
    labels = dn["spec"]["template"]["metadata"]["labels"]
    budgets = [p for p in objects if p["kind"] == "PodDisruptionBudget"
               and _selects(p["spec"]["selector"].get("matchLabels", {}), labels)]
    if len(budgets) != 1:
        found.append(f"{len(budgets)} PodDisruptionBudgets select the DataNodes (want 1)")
    elif budgets[0]["spec"].get("maxUnavailable", policy.m + 1) > policy.m:
        found.append(f"the DataNodes' PDB lets {budgets[0]['spec'].get('maxUnavailable')} go at once: "
                     f"more than m = {policy.m} of {policy.name}")
    spec = pod_spec(dn)
    anti = spec.get("affinity", {}).get("podAntiAffinity", {}).get("requiredDuringSchedulingIgnoredDuringExecution", [])
    if not any(t["topologyKey"] == "kubernetes.io/hostname" for t in anti):
        found.append("DataNodes may share a node (no required anti-affinity on kubernetes.io/hostname)")
    if not any(t["topologyKey"] == "topology.kubernetes.io/zone" for t in spec.get("topologySpreadConstraints", [])):
        found.append("DataNodes are not spread over zones (topologySpreadConstraints)")
    if "--rack" not in dn_argv or not any(i["name"] == "rack" for i in spec.get("initContainers", [])):
        found.append("a DataNode's rack is not read from its node's zone (init container 'rack', --rack)")
    return found


def _secure_problems(objects) -> list[str]:
    found = []
    for w in _workloads(objects):
        for c in pod_spec(w)["containers"]:
            if _ours(c) and "--credentials" not in command_line(c) and \
                    not any(e["name"] == "HEDGEFS_CREDENTIALS" for e in c.get("env", [])):
                found.append(f"{w['kind']} {w['metadata']['name']}: no credential")
    return found


# ---------------------------------------------------------------------------- the tests

@pytest.mark.parametrize("version", VERSIONS)
def test_every_object_of_every_overlay_is_valid_kubernetes(overlay, version):
    name, objects = overlay
    assert len(objects) >= 13
    for o in objects:
        kubernetes_validate.validate(o, version, strict=True)


def test_every_overlay_keeps_the_rules(overlay):
    name, objects = overlay
    assert problems(objects) == []
    if name == "secure":
        assert _secure_problems(objects) == []


def test_the_overlays_are_what_they_say():
    def sts(o, name):
        return _named(render(ROOT / "overlays" / o), "StatefulSet")[name]["spec"]

    assert sts("single", "hedgefs-datanode")["replicas"] == 5
    assert sts("rs63", "hedgefs-datanode")["replicas"] >= 9
    assert sts("ha", "hedgefs-namenode")["replicas"] == 2 and sts("ha", "hedgefs-etcd")["replicas"] == 3
    assert "--meta" in sts("ha", "hedgefs-namenode")["template"]["spec"]["containers"][0]["args"]
    assert _secure_problems(render(ROOT / "overlays" / "rs63"))   # the plain ones run without credentials


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed: nothing to compare with")
@pytest.mark.parametrize("name", OVERLAYS)
def test_the_renderer_agrees_with_kubectl_kustomize(name):
    out = subprocess.run(["kubectl", "kustomize", str(ROOT / "overlays" / name)], capture_output=True, text=True,
                         timeout=120, check=True).stdout
    theirs = {(o["kind"], o["metadata"]["name"]): o for o in yaml.safe_load_all(out) if o}
    ours = {(o["kind"], o["metadata"]["name"]): o for o in render(ROOT / "overlays" / name)}
    assert ours == theirs


def _broken(objects, kind, name, change):
    objects = copy.deepcopy(objects)
    change(next(o for o in objects if o["kind"] == kind and o["metadata"]["name"] == name))
    return objects


def _container(o):
    return pod_spec(o)["containers"][0]


BREAKAGES = {
    "a Service that is not headless": (
        "Service", "hedgefs-datanode", lambda o: o["spec"].pop("clusterIP"), "is not headless"),
    "a missing headless Service": (
        "StatefulSet", "hedgefs-namenode", lambda o: o["spec"].update(serviceName="hedgefs-nn"), "is no Service"),
    "a wrong containerPort": (
        "StatefulSet", "hedgefs-datanode", lambda o: _container(o)["ports"][1].update(containerPort=9876),
        "--data-port 9867 is not a declared containerPort"),
    "a Service port to nowhere": (
        "Service", "hedgefs-namenode", lambda o: o["spec"]["ports"][0].update(targetPort=8021),
        "targets 8021, which its pods do not declare"),
    "a flag the program does not have": (
        "Deployment", "hedgefs-s3", lambda o: _container(o)["args"].append("--bucket"), "No such option"),
    "a probe on a path nobody serves": (
        "StatefulSet", "hedgefs-namenode",
        lambda o: _container(o)["livenessProbe"]["httpGet"].update(path="/healthz"), "GET /healthz"),
    "a probe on the RPC port": (
        "StatefulSet", "hedgefs-datanode",
        lambda o: _container(o)["readinessProbe"]["httpGet"].update(port="rpc"), "serves nothing over HTTP there"),
    "no probe": ("DaemonSet", "hedgefs-mount", lambda o: _container(o).pop("readinessProbe"), "no readinessProbe"),
    "too few DataNodes": ("StatefulSet", "hedgefs-datanode", lambda o: o["spec"].update(replicas=8),
                          "needs k + m = 9"),
    "a PDB that lets m + 1 go": ("PodDisruptionBudget", "hedgefs-datanode",
                                 lambda o: o["spec"].update(maxUnavailable=4), "more than m = 3"),
    "the NameNode on another port": (
        "ConfigMap", "hedgefs", lambda o: o["data"].update(HEDGEFS_NAMENODE="hedgefs-namenode-0.hedgefs-namenode:8021"),
        "HEDGEFS_NAMENODE is"),
    "DataNodes that may share a node": (
        "StatefulSet", "hedgefs-datanode", lambda o: pod_spec(o).pop("affinity"), "may share a node"),
}


@pytest.mark.parametrize("what", list(BREAKAGES))
def test_a_broken_manifest_fails(what):
    kind, name, change, message = BREAKAGES[what]
    objects = render(ROOT / "overlays" / "rs63")
    assert problems(objects) == []
    found = problems(_broken(objects, kind, name, change))
    assert any(message in p for p in found), found


def test_an_unknown_field_fails_validation():
    objects = render(ROOT / "overlays" / "single")
    typo = _broken(objects, "StatefulSet", "hedgefs-datanode", lambda o: o["spec"].update(replica=3))
    bad = next(o for o in typo if o["kind"] == "StatefulSet" and o["metadata"]["name"] == "hedgefs-datanode")
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(bad, VERSIONS[-1], strict=True)


def test_the_renderer_refuses_what_it_does_not_implement(tmp_path):
    (tmp_path / "kustomization.yaml").write_text("resources: []\nnamePrefix: x-\n")
    with pytest.raises(Unsupported, match="namePrefix"):
        render(tmp_path)
