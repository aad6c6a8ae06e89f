"""Remove each security check in a scratch copy of the tree and show that its attack test fails.

Issue 14's "done means": every attack test is shown to fail when the check it guards is taken out.
Run from the repo root (takes a few minutes; not part of `make test`):

    python tests/security_mutations.py            # all of them
    python tests/security_mutations.py 3 5        # only mutations 3 and 5

It copies the committed tree (`git archive HEAD`) to a temporary directory with its own virtualenv,
applies one mutation at a time, runs the test that should catch it and restores the file. Exit 1 if
any mutation survives (its test still passes).
"""
import pathlib
import shutil
import subprocess
import sys
import tempfile
import time

REPO = pathlib.Path(__file__).resolve().parent.parent
ROOT = pathlib.Path(tempfile.mkdtemp(prefix="hedgefs-mutations-"))

MUTATIONS = [
    ("no credential (TLS, no certificate): not required, and a caller without one is the superuser",
     "security/tls.py", "root_certificates=cred.ca_pem,\n                                       require_client_auth=True)",
     "root_certificates=cred.ca_pem,\n                                       require_client_auth=False)",
     "tests/integration/test_security_attacks.py::test_no_credential_is_refused_and_nothing_changes",
     ("security/rpc.py", "            if identity is None:\n                context.abort(grpc.StatusCode.UNAUTHENTICATED",
      "            if identity is None:\n                identity = INSECURE_CALLER\n            if False:\n                context.abort(grpc.StatusCode.UNAUTHENTICATED")),
    ("plaintext against TLS: the data port serves a client that skips the handshake",
     "datanode/data_server.py", "            if self.tls is not None:\n                secured = self._handshake(conn)",
     "            if self.tls is not None and conn.recv(4, socket.MSG_PEEK) != dt.MAGIC:\n                secured = self._handshake(conn)",
     "tests/integration/test_security_attacks.py::test_plaintext_against_every_tls_port_gets_nothing"),
    ("a user on an admin RPC: no admin check",
     "security/rpc.py", "        if rule.role == ADMIN and identity.role != ADMIN:", "        if False:",
     "tests/integration/test_security_attacks.py::test_a_users_credential_on_admin_rpcs_is_refused"),
    ("another cluster's key: servers do not verify client certificates (a caller without one is the superuser)",
     "security/tls.py", "root_certificates=cred.ca_pem,\n                                       require_client_auth=True)",
     "root_certificates=cred.ca_pem,\n                                       require_client_auth=False)",
     "tests/integration/test_security_attacks.py::test_a_credential_of_another_clusters_key_is_refused",
     ("security/rpc.py", "            if identity is None:\n                context.abort(grpc.StatusCode.UNAUTHENTICATED",
      "            if identity is None:\n                identity = INSECURE_CALLER\n            if False:\n                context.abort(grpc.StatusCode.UNAUTHENTICATED")),
    ("tampered token: the MAC is not compared",
     "security/tokens.py", "        if not hmac.compare_digest(self._mac(fields), raw[_FIELDS.size:]):",
     "        if False:",
     "tests/integration/test_security_attacks.py::test_tampered_and_expired_block_tokens_are_refused"),
    ("expired token: the expiry is not checked",
     "security/tokens.py", "        if late_ms > 0:", "        if False:",
     "tests/integration/test_security_attacks.py::test_tampered_and_expired_block_tokens_are_refused"),
    ("unit 3's token on unit 4: the token's unit is not compared",
     "security/tokens.py", "        if (token.op, token.group_id, token.index, token.generation) != (op, group_id, index, generation):",
     "        if False:",
     "tests/integration/test_security_attacks.py::test_a_token_for_unit_3_does_not_open_unit_4"),
    ("write token replayed: the data port writes may replace a unit",
     "datanode/data_server.py", "generation=generation, once=True)", "generation=generation, once=False)",
     "tests/integration/test_security_attacks.py::test_a_write_token_replayed_on_a_committed_unit_is_refused"),
    ("a DataNode speaking for another: no speaks-for check",
     "security/rpc.py", "            others = sorted({d for d in rule.speaks_for(request) if d != identity.name})",
     "            others = []",
     "tests/integration/test_security_attacks.py::test_a_datanode_cannot_speak_for_another"),
    ("a DataNode of another cluster: the NameNode does not compare cluster ids",
     "namenode/blocks/manager.py", "        if cluster_id and cluster_id != own_cluster:", "        if False:",
     "tests/integration/test_security_attacks.py::test_a_datanode_of_another_cluster_is_refused"),
    ("rm of another user's file: no w check on the parent",
     "namenode/namespace_changes.py", '        check(who, parent, WRITE, paths.parent_of(path), f"delete {path}")', "        pass",
     "tests/integration/test_security_attacks.py::test_another_users_file_cannot_be_removed_moved_or_overwritten"),
    ("a write in progress: anyone's",
     "namenode/writes.py", "        if who.name != lease.holder and not who.is_admin:\n            raise PermissionDenied(f\"permission denied: file {file_id}",
     "        if False:\n            raise PermissionDenied(f\"permission denied: file {file_id}",
     "tests/integration/test_security_attacks.py::test_a_write_in_progress_is_its_writers_alone"),
    ("the status pages: no admin check",
     "namenode/web/handler.py", 'if secure and path not in ("/metrics", "/health")', 'if False',
     "tests/integration/test_security_attacks.py::test_status_pages_need_an_admin_and_metrics_show_no_secret"),
    ("a wiped NameNode: every generation taken for its own",
     "namenode/blocks/blockmap.py", '        return self.generation_first <= generation',
     "        return True or generation",
     "tests/integration/test_wiped_namenode.py::test_a_wiped_namenode_never_serves_adopts_or_deletes_its_predecessors_units"),
    ("an unclassified RPC: allowed",
     "security/rpc.py", "            if rule is None:\n                context.abort(", "            if False:\n                context.abort(",
     "tests/integration/test_security.py::test_an_unclassified_rpc_is_refused_in_either_mode"),
]


def scratch_copy() -> None:
    archive = subprocess.run(["git", "-C", str(REPO), "archive", "HEAD"], check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(ROOT)], input=archive, check=True)
    subprocess.run([sys.executable, "-m", "venv", str(ROOT / ".venv")], check=True)
    subprocess.run([str(ROOT / ".venv/bin/pip"), "install", "-q", "-e", f"{ROOT}[dev]"], check=True)


only = sys.argv[1:]
results = []
scratch_copy()
for n, (what, rel, old, new, test, *more) in enumerate(MUTATIONS, 1):
    if only and str(n) not in only:
        continue
    edits = [(rel, old, new), *more]
    originals = {}
    for rel_, old_, new_ in edits:
        path = ROOT / rel_
        originals.setdefault(path, path.read_text())
        text = path.read_text()
        assert text.count(old_) == 1, (what, old_)
        path.write_text(text.replace(old_, new_))
    t0 = time.monotonic()
    try:
        proc = subprocess.run([str(ROOT / ".venv/bin/python"), "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", test],
                              cwd=ROOT, capture_output=True, text=True, timeout=900)
    finally:
        for path, text in originals.items():
            path.write_text(text)
    failed = proc.returncode != 0
    summary = [l for l in proc.stdout.splitlines() if " passed" in l or " failed" in l or "error" in l][-1:]
    line = f"{n:2d} {'FAILS as it should' if failed else 'STILL PASSES (!)'}  {what}  [{test.split('::')[1]}] {summary} {time.monotonic() - t0:.0f}s"
    print(line, flush=True)
    results.append(line)
shutil.rmtree(ROOT, ignore_errors=True)
survivors = [line for line in results if "STILL PASSES" in line]
print(f"{len(results) - len(survivors)} of {len(results)} mutations caught")
sys.exit(1 if survivors else 0)
