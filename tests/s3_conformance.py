"""Ceph's s3-tests (github ceph/s3-tests) against `hedgefs s3`: a script, not part of `make test`.

    python tests/s3_conformance.py S3_TESTS_CHECKOUT bench/results/DATE-s3-tests.md

Starts a local cluster and a gateway (``--allow-anonymous``: s3-tests reads public-read objects
unsigned), issues the keys s3-tests wants (main, alt, tenant, iam: insecure cluster, so all act as
the superuser), writes its config and runs ``s3tests/functional/test_s3.py``. Tests of a feature
the gateway does not serve (docs/s3.md, "Out of scope") are not run and are listed as such with
the feature as the reason: those marked with its s3-tests marker, and those whose code (or a helper
it calls) uses its API (s3-tests marks versioning, object lock and bucket policies on few of
their tests). Every failure is listed with the S3 error or assertion that failed it. Needs
s3-tests' requirements in the venv: the ``s3tests`` extra (``pip install -e '.[dev,s3tests]'``).
"""

from __future__ import annotations

import collections
import pathlib
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET

sys.path.insert(0, str(pathlib.Path(__file__).parent))

from s3_support import GatewayProcess, issue_key  # noqa: E402

from hedgefs.cluster.launcher import LocalCluster, Options  # noqa: E402

# feature -> (its s3-tests markers, the calls that use it); docs/s3.md says why each is out of scope
OUT_OF_SCOPE = {
    "bucket logging": (("bucket_logging", "bucket_logging_cleanup", "fails_without_logging_rollover",
                        "target_by_bucket"), ("put_bucket_logging", "post_bucket_logging")),
    "server-side encryption": (("encryption", "sse_s3", "bucket_encryption"),
                               ("SSECustomerKey", "ServerSideEncryption", "put_bucket_encryption", "sse-c")),
    "lifecycle": (("lifecycle", "lifecycle_expiration", "lifecycle_transition", "cloud_transition",
                   "cloud_restore"), ("put_bucket_lifecycle", "restore_object")),
    "bucket policies and public access blocks (IAM)": (
        ("bucket_policy", "iam_user", "iam_account", "iam_role", "iam_tenant", "iam_cross_account", "user_policy",
         "role_policy", "group_policy", "session_policy", "abac_test"),
        ("put_bucket_policy", "put_public_access_block", "get_bucket_policy_status", "delete_public_access_block",
         "get_public_access_block")),
    "ACLs / object ownership controls": (("object_ownership",), ("put_bucket_ownership_controls",)),
    "versioning": (("versioning", "delete_marker"), ("check_configure_versioning_retry", "put_bucket_versioning")),
    "object lock": (("object_lock",), ("put_object_lock_configuration", "ObjectLockEnabledForBucket",
                                       "put_object_retention", "put_object_legal_hold")),
    "signature version 2": ((), ("get_v2_client", "get_v2_tenant_client")),
    "fails on AWS itself (RGW-only behaviour)": (("fails_on_aws",), ()),
}

CONF = """[DEFAULT]
host = {host}
port = {port}
is_secure = False
ssl_verify = False
[fixtures]
bucket prefix = s3t-{{random}}-
iam name prefix = s3-tests-
iam path prefix = /s3-tests/
{sections}
"""


def section(name: str, key: tuple[str, str], user: str) -> str:
    return (f"[{name}]\ndisplay_name = {user}\nuser_id = {user}\nemail = {user}@example.com\n"
            f"access_key = {key[0]}\nsecret_key = {key[1]}\ntenant = t\napi_name = default\n")


def main(checkout: str, out: str, extra: list[str]) -> int:
    with tempfile.TemporaryDirectory(prefix="hedgefs-s3-tests-") as tmp:
        root = pathlib.Path(tmp)
        cluster = LocalCluster(root / "cluster")
        cluster.up(Options(datanodes=10, namenode_port=0, policy="RS-6-3-64k", block_size=256 << 10, fsync=False))
        gateway = None
        try:
            keys = str(root / "keys")
            users = {name: issue_key(cluster.namenode, keys, user) for name, user in
                     [("s3 main", "main"), ("s3 alt", "alt"), ("s3 tenant", "tenant"), ("iam", "iam"),
                      ("iam root", "root"), ("iam alt root", "altroot")]}
            gateway = GatewayProcess(cluster.namenode, tmp, "--allow-anonymous", keys=keys)
            host, port = gateway.endpoint.split("//")[1].split(":")
            conf = root / "s3tests.conf"
            conf.write_text(CONF.format(host=host, port=port, sections="".join(
                section(name, key, name.split()[-1]) for name, key in users.items())))
            skipped = out_of_scope(checkout)
            junit = root / "junit.xml"
            selected = [t for t in collect(checkout, conf, extra) if t.split("[")[0] not in skipped]
            (root / "selected.txt").write_text("".join(f"s3tests/functional/test_s3.py::{t}\n" for t in selected))
            subprocess.run([sys.executable, "-m", "pytest", "-v", "-p", "no:cacheprovider", "--timeout", "120",
                            f"--junitxml={junit}", *extra, *(f"s3tests/functional/test_s3.py::{t}" for t in selected)],
                           cwd=checkout, env={"S3TEST_CONF": str(conf), "PATH": "/usr/bin:/bin"})
        finally:
            if gateway is not None:
                gateway.stop()
            cluster.down()
        report(junit, skipped, pathlib.Path(out))
    return 0


def collect(checkout: str, conf: pathlib.Path, extra: list[str]) -> list[str]:
    """The names of the tests s3-tests' test_s3.py holds (parametrized ones with their ids)."""
    out = subprocess.run([sys.executable, "-m", "pytest", "-q", "--collect-only", "-p", "no:cacheprovider",
                          "s3tests/functional/test_s3.py", *extra], cwd=checkout, capture_output=True, text=True,
                         env={"S3TEST_CONF": str(conf), "PATH": "/usr/bin:/bin"}).stdout
    return [line.split("::", 1)[1] for line in out.splitlines() if "::" in line]


def out_of_scope(checkout: str) -> dict[str, str]:
    """test name -> the out-of-scope feature it tests: by its markers, or by the calls its code
    makes, its own or through the module's helpers it calls (transitively)."""
    import ast

    source = (pathlib.Path(checkout) / "s3tests/functional/test_s3.py").read_text()
    lines = source.splitlines()
    tree = ast.parse(source)
    functions = {node.name: node for node in tree.body if isinstance(node, ast.FunctionDef)}
    texts = {name: "\n".join(lines[node.lineno - 1:node.end_lineno]) for name, node in functions.items()}
    callees = {name: {inner.func.id for inner in ast.walk(node) if isinstance(inner, ast.Call)
                      and isinstance(inner.func, ast.Name) and inner.func.id in functions}
               for name, node in functions.items()}

    def uses(name, calls, seen) -> bool:
        if any(call in texts[name] for call in calls):
            return True
        for callee in callees[name] - seen:
            seen.add(callee)
            if uses(callee, calls, seen):
                return True
        return False

    out = {}
    for name, node in functions.items():
        if not name.startswith("test_"):
            continue
        marks = {d.attr if isinstance(d, ast.Attribute) else getattr(getattr(d, "func", None), "attr", "")
                 for d in node.decorator_list}
        for feature, (markers, calls) in OUT_OF_SCOPE.items():
            if marks & set(markers) or (calls and uses(name, calls, {name})):
                out[name] = feature
                break
    return out


def _reason(case: ET.Element) -> tuple[str, str]:
    for tag in ("failure", "error"):
        node = case.find(tag)
        if node is not None:
            text = (node.get("message") or node.text or "").strip().splitlines()
            line = next((t for t in text if "ClientError" in t or "assert" in t or "Error" in t),
                        text[0] if text else "")
            return tag, line[:200].replace("|", "/")
    node = case.find("skipped")
    if node is not None:
        return "skipped", (node.get("message") or "")[:200].replace("|", "/")
    return "passed", ""


def report(junit: pathlib.Path, skipped: dict[str, str], out: pathlib.Path) -> None:
    if not junit.exists():
        raise SystemExit("s3-tests wrote no results (see its output above)")
    rows, counts = [], collections.Counter()
    for case in ET.parse(junit).getroot().iter("testcase"):
        outcome, reason = _reason(case)
        counts[outcome] += 1
        rows.append((case.get("name"), outcome, reason))
    for name, feature in skipped.items():
        rows.append((name, "not run", f"out of scope: {feature}"))
        counts["not run"] += 1
    run = counts["passed"] + counts["failure"] + counts["error"]
    lines = ["# Ceph s3-tests against `hedgefs s3`", "",
             "`python tests/s3_conformance.py S3_TESTS_CHECKOUT OUT.md`: s3tests/functional/test_s3.py, one local "
             "insecure cluster (RS-6-3-64k), one gateway (--allow-anonymous).", "",
             f"Passed {counts['passed']} of {run} run ({100 * counts['passed'] / max(run, 1):.1f} %); "
             f"{counts['not run']} not run (out of scope), {counts['skipped']} skipped by s3-tests itself.", "",
             "| outcome | tests |", "|---|---|", *[f"| {k} | {v} |" for k, v in sorted(counts.items())], "",
             "| test | outcome | reason |", "|---|---|---|",
             *[f"| {name} | {outcome} | {reason} |" for name, outcome, reason in sorted(rows)]]
    out.write_text("\n".join(lines) + "\n")
    print(f"{out}: {dict(counts)}")


if __name__ == "__main__":
    if len(sys.argv) < 3:
        sys.exit("usage: python tests/s3_conformance.py S3_TESTS_CHECKOUT OUT.md [pytest args]")
    sys.exit(main(sys.argv[1], sys.argv[2], sys.argv[3:]))
