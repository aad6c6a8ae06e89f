"""The CLI as a process: what a fresh `python -m hedgefs` imports before its verb runs, and that the
processes run_cli forks from its server (tests/cli_support.py) answer as fresh ones do."""

import subprocess
import sys

import pytest

from conftest import assert_one_line_error, run_cli

UNREACHABLE = "127.0.0.1:1"
HEAVY = ("grpc", "google.protobuf", "numpy", "cryptography", "hedgefs.client.fs", "hedgefs.cluster.launcher")


def imported(*args: str) -> set[str]:
    """The modules a fresh `hedgefs ARGS` imports (python -X importtime's list, on stderr)."""
    proc = subprocess.run([sys.executable, "-X", "importtime", "-m", "hedgefs", *args], capture_output=True,
                          timeout=60, env={"PATH": "/usr/bin:/bin", "HEDGEFS_NAMENODE": UNREACHABLE})
    lines = [line for line in proc.stderr.decode().splitlines() if line.startswith("import time:")]
    assert lines, proc.stderr
    return {line.rsplit("|", 1)[1].strip() for line in lines}


def heavy(modules: set[str]) -> list[str]:
    return sorted(m for m in modules if any(m == h or m.startswith(h + ".") for h in HEAVY))


@pytest.mark.parametrize("args", [("--help",), ("--version",), ("put",), ("cluster", "--help"), ("admin", "--help"),
                                  ("fault", "--help"), ("demo", "--help")])
def test_help_version_and_usage_errors_import_no_grpc_numpy_or_cryptography(args):
    """Help lists every verb (it imports each verb's module): none may pull in the client, gRPC,
    numpy or the launcher, which the verbs import when they run."""
    modules = imported(*args)
    assert "hedgefs.cli" in modules
    assert heavy(modules) == []


def test_a_verb_that_runs_imports_what_it_needs():
    """The check above can fail: a verb that talks to a NameNode does import gRPC."""
    assert "grpc" in heavy(imported("ls", "/"))


@pytest.mark.parametrize("args", [("--version",), ("put",), ("ls", "/"), ("cat", "/x", "/y"), ("rm", "-x", "/a"),
                                  ("mkdir", "relative")])
def test_a_forked_call_answers_as_a_fresh_process(args):
    fresh = run_cli(*args, namenode=UNREACHABLE, fresh=True)
    forked = run_cli(*args, namenode=UNREACHABLE)
    assert (forked.code, forked.stdout, forked.stderr) == (fresh.code, fresh.stdout, fresh.stderr)
    assert fresh.code in (0, 2, 3)


def test_each_forked_call_has_its_own_environment_and_directory(tmp_path, monkeypatch):
    assert_one_line_error(run_cli("ls", "/", namenode="127.0.0.1:1"), "127.0.0.1:1")
    assert_one_line_error(run_cli("ls", "/", namenode="127.0.0.1:2"), "127.0.0.1:2")
    monkeypatch.chdir(tmp_path)
    missing = run_cli("put", "in.bin", "/in.bin", namenode=UNREACHABLE)
    assert_one_line_error(missing, "no such local file: in.bin")
    (tmp_path / "in.bin").write_bytes(b"x")
    present = run_cli("put", "in.bin", "/in.bin", namenode=UNREACHABLE)   # found in the cwd: on to the NameNode
    assert_one_line_error(present, "cannot reach the NameNode")
    assert present.code == 3
