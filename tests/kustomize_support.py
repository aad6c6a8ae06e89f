"""Render deploy/k8s's Kustomize overlays without the `kustomize` binary: the subset they use.

No Python package renders Kustomize (PyPI has none that implements it; `kubectl kustomize` needs
kubectl, which a clean machine lacks), so the manifests' tests render with this: a
kustomization's ``resources`` (files, and directories holding a kustomization, built first),
then its ``patches`` (JSON 6902 operations, inline or from a file, on a ``target`` of kind and
name; applied with the ``jsonpatch`` library), ``namespace`` (set on namespaced objects, and on
binding subjects that are ServiceAccounts), ``images`` (newName/newTag by image name) and
``replicas``. Any other field is refused (``Unsupported``), so a manifest using more of Kustomize
fails its test instead of rendering wrong. Where kubectl is installed, a test checks that this
renders every overlay to the same objects as `kubectl kustomize`.
"""

from __future__ import annotations

import pathlib

import jsonpatch
import yaml

FIELDS = {"apiVersion", "kind", "namespace", "resources", "patches", "images", "replicas"}
CLUSTER_SCOPED = {"Namespace", "ClusterRole", "ClusterRoleBinding", "PersistentVolume", "StorageClass",
                  "CustomResourceDefinition", "PriorityClass"}


class Unsupported(Exception):
    pass


def render(directory: str | pathlib.Path) -> list[dict]:
    """The objects ``kubectl kustomize DIRECTORY`` would print, in resource order."""
    directory = pathlib.Path(directory)
    k = yaml.safe_load((directory / "kustomization.yaml").read_text())
    extra = set(k) - FIELDS
    if extra:
        raise Unsupported(f"{directory}/kustomization.yaml: {', '.join(sorted(extra))} (not in the renderer's subset)")
    objects: list[dict] = []
    for resource in k.get("resources", []):
        path = directory / resource
        if path.is_dir():
            objects += render(path)
        else:
            objects += [d for d in yaml.safe_load_all(path.read_text()) if d]
    for patch in k.get("patches", []):
        _patch(directory, objects, patch)
    if "namespace" in k:
        _namespace(objects, k["namespace"])
    for image in k.get("images", []):
        for container in _containers(objects):
            name, _, _ = container["image"].partition(":")
            if name == image["name"]:
                container["image"] = image.get("newName", name) + (f":{image['newTag']}" if "newTag" in image else "")
    for replicas in k.get("replicas", []):
        found = [o for o in objects if o["metadata"]["name"] == replicas["name"] and "replicas" in o.get("spec", {})]
        if not found:
            raise Unsupported(f"replicas: no object {replicas['name']!r} with spec.replicas")
        for o in found:
            o["spec"]["replicas"] = replicas["count"]
    return objects


def _patch(directory: pathlib.Path, objects: list[dict], patch: dict) -> None:
    text = patch["patch"] if "patch" in patch else (directory / patch["path"]).read_text()
    ops = yaml.safe_load(text)
    if not isinstance(ops, list):
        raise Unsupported(f"{directory}: only JSON 6902 patches (a list of operations)")
    target = patch.get("target", {})
    if set(target) - {"kind", "name"}:
        raise Unsupported(f"{directory}: a patch target by {sorted(target)}; kind and name only")
    hits = [i for i, o in enumerate(objects)
            if target.get("kind", o["kind"]) == o["kind"] and target.get("name", o["metadata"]["name"]) ==
            o["metadata"]["name"]]
    if not hits:
        raise Unsupported(f"{directory}: a patch's target {target} matches nothing")
    for i in hits:
        objects[i] = jsonpatch.apply_patch(objects[i], ops)


def _namespace(objects: list[dict], namespace: str) -> None:
    for o in objects:
        if o["kind"] not in CLUSTER_SCOPED:
            o["metadata"]["namespace"] = namespace
        if o["kind"] in ("RoleBinding", "ClusterRoleBinding"):
            for subject in o.get("subjects", []):
                if subject.get("kind") == "ServiceAccount":
                    subject["namespace"] = namespace


def _containers(objects: list[dict]):
    for o in objects:
        spec = pod_spec(o)
        if spec is not None:
            yield from spec.get("initContainers", [])
            yield from spec.get("containers", [])


def pod_spec(o: dict) -> dict | None:
    """The pod template's spec of a workload (None for other kinds)."""
    return o.get("spec", {}).get("template", {}).get("spec") if o["kind"] in (
        "StatefulSet", "Deployment", "DaemonSet", "Job") else None
