"""The house rules, read from the source: which package may import which, and no cycles.

    ec, proto, plumbing          import nothing of ours above them (ec is pure: no gRPC)
    security                     credentials, tokens, TLS, RPC authorization: plumbing only
    client, namenode, datanode   ec, proto, plumbing, security only
    cluster (the launcher)       proto, plumbing, security: no client, no servers
    chaos, bench                 sit on top: client, cluster, ec, proto, plumbing (bench: distcp, fsspec too)
    distcp                       a product feature on the client: client, ec, proto, plumbing
    fsspec (hedgefs/fsspec)      hedgefs:// for fsspec, on the client's public API: client, ec, plumbing
    s3                           the S3 gateway, on the client's public API: client, ec, plumbing, security
    mount                        the FUSE mount, on the client's public API: client, ec, plumbing, security

The gateways (mount, fsspec, s3) speak the client's typed API, never protobuf: the library keeps
the wire behind it (``FileSystem.admin``, ``stat(span=)``, ``create``, ``stream``).
    cli (hedgefs/cli)            the composition root: anything

Inside the NameNode, one job per sub-package (namesystem.py composes them; server.py wires the
process): namespace (the tree) < blocks (where units are) < journal (records, apply, engines,
images) < ha (roles, election, tailing) < rpc (the gRPC face); web (pages) sees only the plain
answers; all of them may use the leaf modules errors, model, metrics, faults.

Every import counts, including the ones inside functions (they run too). Besides the arrows,
no two packages may import each other in a circle, and no module may reach itself through its
imports. A failure prints the offending file and line.

The checker is run twice: on this tree (must be clean) and on a scratch copy with a forbidden
import added (must complain), so it is shown to catch what it is meant to catch.
"""

from __future__ import annotations

import ast
import functools
import pathlib
import shutil
import tomllib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]

# Modules of the package root that are shared plumbing, not the CLI.
PLUMBING = {"hedgefs", "hedgefs.plumbing", "hedgefs.malloc", "hedgefs.httpserver", "hedgefs.histogram",
            "hedgefs.topology"}

ALLOWED = {
    "ec": {"ec"},
    "proto": {"proto"},
    "plumbing": {"plumbing"},
    "security": {"security", "plumbing"},
    "client": {"client", "ec", "proto", "plumbing", "security"},
    "namenode": {"namenode", "ec", "proto", "plumbing", "security"},
    "datanode": {"datanode", "ec", "proto", "plumbing", "security"},
    "cluster": {"cluster", "proto", "plumbing", "security"},
    "chaos": {"chaos", "client", "cluster", "ec", "proto", "plumbing", "security"},
    "bench": {"bench", "client", "cluster", "ec", "proto", "plumbing", "distcp", "fsspec", "namenode", "security"},
    "distcp": {"distcp", "client", "ec", "proto", "plumbing", "security"},
    "fsspec": {"fsspec", "client", "ec", "plumbing", "security"},
    "s3": {"s3", "client", "ec", "plumbing", "security"},
    "mount": {"mount", "client", "ec", "plumbing", "security"},
    "cli": {"cli", "client", "namenode", "datanode", "cluster", "chaos", "bench", "distcp", "s3", "mount", "ec",
            "proto", "plumbing", "security"},
}

# Third-party modules a package must not touch: the library and the servers know nothing of the
# command line, and the striping math and the storage code know nothing of the network.
FORBIDDEN_EXTERNAL = {
    "ec": {"grpc", "click"},
    "proto": {"click"},
    "plumbing": {"click"},
    "security": {"click"},
    "client": {"click"},
    "namenode": {"click"},
    "datanode": {"click"},
    "cluster": {"click"},
    "distcp": {"click"},
    "fsspec": {"click"},
    "s3": {"click"},
    "mount": {"click"},
}
NO_GRPC_MODULES = {"hedgefs.datanode.storage", "hedgefs.datanode.faults"}

NAMENODE_LEAVES = {"errors", "model", "metrics", "faults"}
NAMENODE_ALLOWED = {
    "namespace": {"namespace"},
    "blocks": {"blocks", "namespace"},
    "journal": {"journal", "blocks", "namespace"},
    "ha": {"ha", "journal"},
    "rpc": {"rpc", "ha", "journal", "blocks", "namespace", "namesystem"},
    "web": {"web", "namespace"},
}


def namenode_part(module: str) -> str | None:
    """The sub-package of a NameNode module (namespace, blocks, ...), its leaf-module name, or
    None for the top (namesystem, server, monitor: they compose the rest)."""
    parts = module.split(".")
    if parts[:2] != ["hedgefs", "namenode"] or len(parts) < 3:
        return None
    if parts[2] in NAMENODE_ALLOWED or parts[2] in NAMENODE_LEAVES:
        return parts[2]
    return None


def package_dirs(root: pathlib.Path) -> dict[str, pathlib.Path]:
    """hedgefs.<package> -> its directory, as pyproject.toml maps them."""
    config = tomllib.loads((root / "pyproject.toml").read_text())
    return {name: root / path for name, path in config["tool"]["setuptools"]["package-dir"].items()}


def modules(root: pathlib.Path) -> dict[str, pathlib.Path]:
    """Every module of ours: dotted name -> file."""
    out = {}
    for package, directory in package_dirs(root).items():
        for path in directory.rglob("*.py"):
            rel = path.relative_to(directory).with_suffix("")
            parts = [p for p in rel.parts if p != "__init__"]
            name = ".".join([package, *parts])
            # hedgefs/ holds the cli package too; pyproject maps only the root, so its files
            # are found once, under "hedgefs".
            out.setdefault(name, path)
    return out


def layer(module: str) -> str:
    if module in PLUMBING:
        return "plumbing"
    parts = module.split(".")
    if parts[1] == "__main__":
        return "cli"
    return parts[1]


def imports(path: pathlib.Path, module: str, is_package: bool) -> list[tuple[int, str]]:
    """(line, imported module) for every import in the file, relative ones resolved."""
    return _imports(path.read_text(), str(path.name), module, is_package)


@functools.lru_cache(maxsize=None)
def _imports(text: str, filename: str, module: str, is_package: bool) -> list[tuple[int, str]]:
    # Keyed by the text: the scratch copies below differ from the tree in one file, parsed anew.
    tree = ast.parse(text, filename)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = module.split(".")
                anchor = anchor if is_package else anchor[:-1]
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join(anchor + ([base] if base else []))
            found.append((node.lineno, base))
            # `from hedgefs.ec import layout` imports the module hedgefs.ec.layout
            found += [(node.lineno, f"{base}.{alias.name}") for alias in node.names]
    return found


def graph(root: pathlib.Path) -> tuple[dict[str, set[str]], list[str]]:
    """The module import graph (ours only) and every rule broken, one line each."""
    mods = modules(root)
    edges: dict[str, set[str]] = {m: set() for m in mods}
    problems = []
    for name, path in sorted(mods.items()):
        where = path.relative_to(root)
        for line, target in imports(path, name, path.name == "__init__.py"):
            top = target.split(".")[0]
            if top != "hedgefs":
                banned = FORBIDDEN_EXTERNAL.get(layer(name), set())
                if name in NO_GRPC_MODULES:
                    banned = banned | {"grpc"}
                if top in banned:
                    problems.append(f"{where}:{line}: {name} imports {target} "
                                    f"({layer(name)} must not depend on {top})")
                continue
            if target not in mods:
                continue  # `from pkg import name` where name is not a module: its package counts
            if target != name:
                edges[name].add(target)
            if layer(target) not in ALLOWED[layer(name)]:
                problems.append(f"{where}:{line}: {name} imports {target} "
                                f"({layer(name)} may import only {', '.join(sorted(ALLOWED[layer(name)]))})")
            source_part, target_part = namenode_part(name), namenode_part(target)
            if source_part in NAMENODE_ALLOWED and layer(target) == "namenode" and target.count(".") >= 2:
                allowed = NAMENODE_ALLOWED[source_part] | NAMENODE_LEAVES
                if (target_part or target.split(".")[2]) not in allowed:
                    problems.append(f"{where}:{line}: {name} imports {target} (namenode/{source_part} may "
                                    f"import only {', '.join(sorted(allowed))} of the NameNode)")
    return edges, problems


def cycle(edges: dict[str, set[str]]) -> list[str] | None:
    """One cycle of the graph (as a path that ends where it starts), or None."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(edges.get(node, ())):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state:
                found = visit(nxt)
                if found:
                    return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(edges):
        if node not in state:
            found = visit(node)
            if found:
                return found
    return None


def violations(root: pathlib.Path) -> list[str]:
    edges, problems = graph(root)
    packages: dict[str, set[str]] = {}
    for source, targets in edges.items():
        for target in targets:
            if layer(source) != layer(target):
                packages.setdefault(layer(source), set()).add(layer(target))
    found = cycle(packages)
    if found:
        problems.append("package cycle: " + " -> ".join(found))
    found = cycle(edges)
    if found:
        problems.append("module cycle: " + " -> ".join(found))
    return problems


def test_the_tree_keeps_the_rules():
    problems = violations(ROOT)
    assert not problems, "\n".join(problems)


# Packages on the client's public API: no protobuf. s3 joins once it is moved (see ALLOWED).
GATEWAYS = {"mount", "fsspec", "s3"}


def test_the_gateways_speak_no_protobuf():
    for gateway in GATEWAYS:
        assert "proto" not in ALLOWED[gateway], gateway


def test_every_package_has_a_layer():
    for name in modules(ROOT):
        assert layer(name) in ALLOWED, f"{name}: no rule for package {layer(name)!r}"


def _not_source(directory: str, names: list[str]) -> list[str]:
    """What the scratch copy leaves out: everything but Python sources and their directories (bench/
    holds megabytes of results; copying them made each case take seconds)."""
    base = pathlib.Path(directory)
    return [n for n in names if n == "__pycache__" or not (n.endswith(".py") or (base / n).is_dir())]


@pytest.fixture
def scratch(tmp_path):
    """A copy of the source tree (no tests, no virtualenv) to break on purpose."""
    for entry in package_dirs(ROOT).values():
        if entry == ROOT / "hedgefs" or entry.parent == ROOT:
            top = entry.relative_to(ROOT).parts[0]
            if not (tmp_path / top).exists():
                shutil.copytree(ROOT / top, tmp_path / top, ignore=_not_source)
    shutil.copy(ROOT / "pyproject.toml", tmp_path)
    return tmp_path


@pytest.mark.parametrize("file,line,expected", [
    ("client/fs.py", "from hedgefs.cluster.launcher import LocalCluster", "client may import only"),
    ("client/reader.py", "    import click", "client must not depend on click"),
    ("cluster/launcher.py", "from hedgefs.client.fs import FileSystem", "cluster may import only"),
    ("ec/codec.py", "import grpc", "ec must not depend on grpc"),
    ("datanode/storage.py", "import grpc", "must not depend on grpc"),
    ("namenode/namesystem.py", "from hedgefs.datanode import storage", "namenode may import only"),
    ("security/tls.py", "from hedgefs.client.fs import FileSystem", "security may import only"),
    ("distcp/job.py", "from hedgefs.cluster.launcher import LocalCluster", "distcp may import only"),
    ("mount/ops.py", "from hedgefs.proto import hedgefs_pb2 as pb", "mount may import only"),
    ("hedgefs/fsspec/files.py", "from hedgefs.proto import hedgefs_pb2", "fsspec may import only"),
    ("datanode/storage.py", "from hedgefs.datanode import faults", "module cycle"),
    ("namenode/blocks/manager.py", "from hedgefs.namenode.ha import roles", "namenode/blocks may import only"),
    ("namenode/namespace/tree.py", "from hedgefs.namenode.journal import records", "namenode/namespace may"),
])
def test_a_forbidden_import_is_caught(scratch, file, line, expected):
    assert violations(scratch) == []
    path = scratch / file
    path.write_text(path.read_text() + f"\n\ndef _added():\n    {line.strip()}\n")
    problems = violations(scratch)
    assert any(expected in p for p in problems), problems
    assert any(p.startswith(file) or "cycle" in p for p in problems), problems
