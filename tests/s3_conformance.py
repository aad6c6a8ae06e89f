"""Ceph's s3-tests (github ceph/s3-tests) against `hedgefs s3`: a script, not part of `make test`.

    python tests/s3_conformance.py S3_TESTS_CHECKOUT bench/results/DATE-s3-tests.md

Starts a local cluster and a gateway, issues the keys s3-tests wants (main, alt, tenant, iam:
insecure cluster, so all act as the superuser), writes its config and runs
``s3tests/functional/test_s3.py``. Tests marked with a feature the gateway does not have
(versioning-only markers, ACLs and policies, lifecycle, encryption, tagging, logging, ...) are
not run and are listed as skipped with that feature as the reason; every failure is listed with
the S3 error or assertion that failed it. Needs s3-tests' requirements (isodate, pytz, munch,
requests, lxml, httplib2) in the venv.
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

UNSUPPORTED = {
    "bucket_logging": "bucket logging", "bucket_logging_cleanup": "bucket logging",
    "fails_without_logging_rollover": "bucket logging", "target_by_bucket": "bucket logging",
    "encryption": "server-side encryption", "sse_s3": "server-side encryption", "bucket_encryption": "encryption",
    "lifecycle": "lifecycle", "lifecycle_expiration": "lifecycle", "lifecycle_transition": "lifecycle",
    "cloud_transition": "lifecycle", "cloud_restore": "lifecycle", "bucket_policy": "bucket policies",
    "tagging": "tagging", "object_ownership": "ACLs / object ownership", "iam_user": "IAM", "iam_account": "IAM",
    "delete_marker": "versioning", "fails_on_aws": "fails on AWS itself (RGW-only behaviour)",
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
            gateway = GatewayProcess(cluster.namenode, tmp, keys=keys)
            host, port = gateway.endpoint.split("//")[1].split(":")
            conf = root / "s3tests.conf"
            conf.write_text(CONF.format(host=host, port=port, sections="".join(
                section(name, key, name.split()[-1]) for name, key in users.items())))
            markers = " or ".join(sorted(UNSUPPORTED))
            junit = root / "junit.xml"
            subprocess.run([sys.executable, "-m", "pytest", "-v", "-p", "no:cacheprovider", "--timeout", "120",
                            "s3tests/functional/test_s3.py", "-m", f"not ({markers})", f"--junitxml={junit}", *extra],
                           cwd=checkout, env={"S3TEST_CONF": str(conf), "PATH": "/usr/bin:/bin"})
            collected = subprocess.run([sys.executable, "-m", "pytest", "-q", "--collect-only",
                                        "-p", "no:cacheprovider",
                                        "s3tests/functional/test_s3.py", "-m", markers, *extra], cwd=checkout,
                                       capture_output=True, text=True, env={"S3TEST_CONF": str(conf)}).stdout
        finally:
            if gateway is not None:
                gateway.stop()
            cluster.down()
        report(junit, collected, checkout, pathlib.Path(out))
    return 0


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


def _markers(checkout: str) -> dict[str, list[str]]:
    """test name -> its unsupported-feature markers (read from the source)."""
    out, pending = {}, []
    for line in (pathlib.Path(checkout) / "s3tests/functional/test_s3.py").read_text().splitlines():
        if line.startswith("@pytest.mark."):
            name = line[len("@pytest.mark."):].split("(")[0].split()[0]
            if name in UNSUPPORTED:
                pending.append(name)
        elif line.startswith("def "):
            if line.startswith("def test_"):
                out[line[4:].split("(")[0]] = pending
            pending = []
    return out


def report(junit: pathlib.Path, collected: str, checkout: str, out: pathlib.Path) -> None:
    if not junit.exists():
        raise SystemExit("s3-tests wrote no results (see its output above)")
    rows, counts = [], collections.Counter()
    for case in ET.parse(junit).getroot().iter("testcase"):
        outcome, reason = _reason(case)
        counts[outcome] += 1
        rows.append((case.get("name"), outcome, reason))
    markers = _markers(checkout)
    for line in collected.splitlines():
        if "::" in line:
            name = line.split("::")[-1]
            reason = ", ".join(sorted({UNSUPPORTED[m] for m in markers.get(name.split("[")[0], [])})) or "unsupported"
            rows.append((name, "not run", f"unsupported feature: {reason}"))
            counts["not run"] += 1
    lines = ["# Ceph s3-tests against `hedgefs s3`", "",
             "`python tests/s3_conformance.py S3_TESTS_CHECKOUT OUT.md`: s3tests/functional/test_s3.py, one local "
             "insecure cluster (RS-6-3-64k), one gateway.", "",
             "| outcome | tests |", "|---|---|", *[f"| {k} | {v} |" for k, v in sorted(counts.items())], "",
             "| test | outcome | reason |", "|---|---|---|",
             *[f"| {name} | {outcome} | {reason} |" for name, outcome, reason in sorted(rows)]]
    out.write_text("\n".join(lines) + "\n")
    print(f"{out}: {dict(counts)}")


if __name__ == "__main__":
    if len(sys.argv) < 3:
        sys.exit("usage: python tests/s3_conformance.py S3_TESTS_CHECKOUT OUT.md [pytest args]")
    sys.exit(main(sys.argv[1], sys.argv[2], sys.argv[3:]))
