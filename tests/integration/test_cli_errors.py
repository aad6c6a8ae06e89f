"""Every user mistake: one line on stderr, a non-zero exit, no traceback, nothing changed."""

import socket
import time

import pytest

from conftest import assert_one_line_error, run_cli


@pytest.fixture(scope="module")
def nn(cluster):
    assert run_cli("mkdir", "-p", "/err/dir", namenode=cluster.namenode).code == 0
    assert run_cli("put", "-f", "-", "/err/file", namenode=cluster.namenode, input=b"original").code == 0
    return cluster.namenode


def test_missing_local_file(nn, tmp_path):
    assert_one_line_error(run_cli("put", str(tmp_path / "nope"), "/err/x", namenode=nn), "no such local file")
    assert_one_line_error(run_cli("append", str(tmp_path / "nope"), "/err/x", namenode=nn), "no such local file")
    assert_one_line_error(run_cli("append", str(tmp_path), "/err/x", namenode=nn), "is a directory")
    assert run_cli("stat", "/err/x", namenode=nn).code != 0


def test_missing_remote_file(nn, tmp_path):
    out = tmp_path / "out"
    assert_one_line_error(run_cli("get", "/err/nope", str(out), namenode=nn), "/err/nope")
    assert not out.exists()
    assert_one_line_error(run_cli("cat", "/err/nope", namenode=nn), "/err/nope")


@pytest.mark.parametrize("bad", ["/err/../etc", "relative/path", "/err/./x"])
def test_bad_remote_paths(nn, bad):
    result = run_cli("put", "-", bad, namenode=nn, input=b"x")
    assert_one_line_error(result, "invalid path")
    assert result.code == 2


def test_cat_of_a_directory(nn):
    assert_one_line_error(run_cli("cat", "/err/dir", namenode=nn), "is a directory")


def test_unknown_policy(nn):
    assert_one_line_error(run_cli("put", "--policy", "RS-6-3", "-", "/err/p", namenode=nn, input=b"x"), "policy")
    assert_one_line_error(run_cli("ec", "set-policy", "/err/dir", "XOR-2-1", namenode=nn), "policy")
    assert run_cli("stat", "/err/p", namenode=nn).code != 0


def test_policy_needing_more_datanodes_than_live(nn):
    result = run_cli("put", "--policy", "RS-10-4-64k", "-", "/err/wide", namenode=nn, input=b"x" * 1000)
    assert_one_line_error(result, "14", "live")
    assert run_cli("stat", "/err/wide", namenode=nn).code != 0


def test_overwrite_needs_force(nn):
    assert_one_line_error(run_cli("put", "-", "/err/file", namenode=nn, input=b"new"), "exists", "-f")
    assert run_cli("cat", "/err/file", namenode=nn).stdout == b"original"
    assert run_cli("put", "-f", "-", "/err/file", namenode=nn, input=b"replaced").code == 0
    assert run_cli("cat", "/err/file", namenode=nn).stdout == b"replaced"


def test_unreachable_namenode_fails_fast():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again when the block ends: nothing listens there
    start = time.monotonic()
    result = run_cli("ls", "/", namenode=f"127.0.0.1:{port}")
    assert time.monotonic() - start < 15
    assert_one_line_error(result, "NameNode", str(port))
    assert result.code == 3


def test_get_to_a_missing_local_directory(nn, tmp_path):
    assert_one_line_error(run_cli("get", "/err/file", str(tmp_path / "no" / "such" / "f"), namenode=nn), "no such local directory")


def test_usage_errors_are_one_line(nn):
    assert_one_line_error(run_cli("put", namenode=nn), "Missing argument")
    assert_one_line_error(run_cli("frobnicate", namenode=nn), "No such command")


def test_bad_hedge_environment_is_a_usage_error_for_every_verb(nn):
    result = run_cli("ls", "/", namenode=nn, env={"HEDGEFS_HEDGE_THRESHOLD_MS": "abc"})
    assert_one_line_error(result, "HEDGEFS_HEDGE_THRESHOLD_MS")
    assert result.code == 2


def test_bad_hedge_flags_are_one_line_usage_errors(nn):
    for args, fragment in ((("--hedge-threshold-ms", "soon"), "auto or a number"),
                           (("--hedge-threshold-ms", "0"), "> 0 ms"),
                           (("--read-extra", "-1"), "--read-extra"),
                           (("--hedge-budget-pct", "-5"), "--hedge-budget-pct")):
        result = run_cli("cat", *args, "/nothing", namenode=nn)
        assert_one_line_error(result, fragment)
        assert result.code == 2, (args, result)
    result = run_cli("ls", "/", namenode=nn, env={"HEDGEFS_HEDGE_THRESHOLD_MS": "auto"})
    assert result.code == 0, result.stderr


def test_cat_into_a_closed_pipe_ends_quietly(nn):
    import subprocess
    import sys

    data = b"x" * (3 << 20)
    assert run_cli("put", "-f", "-", "/err/big", namenode=nn, input=data).code == 0
    env = {**__import__("os").environ, "HEDGEFS_NAMENODE": nn}
    cat = subprocess.Popen([sys.executable, "-m", "hedgefs", "cat", "/err/big"], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, env=env)
    assert cat.stdout.read(10) == b"x" * 10
    cat.stdout.close()  # like `| head -c 10`
    _, stderr = cat.communicate(timeout=60)
    assert stderr == b"", stderr
    assert cat.returncode in (0, -13)  # done, or SIGPIPE as cat(1) gets


def test_cluster_up_on_a_running_cluster_leaves_it_running(cluster):
    result = run_cli("cluster", "up", "--dir", str(cluster.root), "--namenode-port", "0")
    assert_one_line_error(result, "already running")
    assert all(cluster.is_running(name) for name in ["namenode", *cluster.datanode_ids])


def test_each_error_class_has_its_documented_exit_code(nn):
    """docs/cli.md's exit codes: 2 for a path wrong for what it names, as for a bad or missing one."""
    for args, fragment in ((("cat", "/err/dir"), "is a directory"),
                           (("mkdir", "/err/file/sub"), "not a directory"),
                           (("rm", "/err"), "directory not empty"),
                           (("ec", "set-policy", "/err/file", "REPLICATE-3"), "not a directory"),
                           (("stat", "/err/nope"), "no such file"),
                           (("put", "-", "/err/file"), "file exists")):
        result = run_cli(*args, namenode=nn, input=b"x")
        assert_one_line_error(result, fragment)
        assert result.code == 2, (args, result)
    result = run_cli("ls", "/", namenode="127.0.0.1:1")
    assert result.code == 3, result


def test_misleading_and_raw_messages_are_one_clear_line(nn, cluster, tmp_path):
    ca = tmp_path / "ca.pem"
    ca.write_text("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n")
    ca.chmod(0o644)
    result = run_cli("ls", "/", namenode=nn, env={"HEDGEFS_CREDENTIALS": str(ca)})
    assert_one_line_error(result, "no private key", "CA certificate")
    assert "others may read it" not in result.stderr
    datanode_port = cluster.state["datanodes"]["dn1"]["port"]
    result = run_cli("ls", "/", namenode=f"127.0.0.1:{datanode_port}")
    assert_one_line_error(result, "does not answer as a NameNode")
    assert "Method not found" not in result.stderr
    result = run_cli("ls", "/", namenode="garbage")
    assert_one_line_error(result, "bad NameNode address 'garbage'")
    assert result.code == 2
    result = run_cli("put", "-", "/err/" + "d" * 100_000, namenode=nn, input=b"x")
    assert_one_line_error(result, "longer than")
    assert result.code == 2 and "Stream removed" not in result.stderr
    bare = run_cli()
    assert bare.code == 2 and bare.stdout.startswith(b"Usage: hedgefs") and bare.stderr == ""


def test_cluster_up_with_three_datanodes_fits_its_policy_and_prints_its_dir(tmp_path):
    root = tmp_path / "c3"
    up = run_cli("cluster", "up", "--dir", str(root), "--datanodes", "3", "--namenode-port", "0", "--http-port", "0",
                 "--no-fsync", timeout=120)
    try:
        assert up.code == 0, up.stderr
        assert "default policy REPLICATE-3 (RS-6-3-1024k needs 9 DataNodes" in up.stderr
        assert f"export HEDGEFS_CLUSTER_DIR={root.resolve()}" in up.stdout.decode()
        namenode = up.stdout.decode().split("export HEDGEFS_NAMENODE=")[1].split()[0]
        assert run_cli("put", "-", "/plain", namenode=namenode, input=b"fits").code == 0
        frozen = run_cli("cluster", "freeze", "dn1", "--dir", str(root), env={"HEDGEFS_NAMENODE": "127.0.0.1:1"})
        assert frozen.code == 0 and "another cluster" in frozen.stderr
        assert run_cli("cluster", "thaw", "dn1", "--dir", str(root)).code == 0
        missing = run_cli("cluster", "status", "--dir", str(tmp_path / "none"))
        assert_one_line_error(missing, "HEDGEFS_CLUSTER_DIR")
        wide = run_cli("cluster", "up", "--dir", str(tmp_path / "c4"), "--datanodes", "3", "--policy", "RS-6-3-1024k")
        assert_one_line_error(wide, "needs 9 DataNodes")
    finally:
        run_cli("cluster", "down", "--dir", str(root))


@pytest.mark.parametrize("flags, message", [(["--rack", "r2"], "bad rack 'r2'"),
                                            (["--host-id", "a b"], "bad host id 'a b'")])
def test_a_datanode_refuses_a_bad_rack_or_host_id(tmp_path, flags, message):
    result = run_cli("datanode", "--id", "dn1", "--data-dir", str(tmp_path / "dn1"), "--namenode", "127.0.0.1:1",
                     *flags)
    assert_one_line_error(result, message)
    assert result.code == 2
    assert not (tmp_path / "dn1").exists()   # refused before its data dir was made


def test_bad_bench_tail_flags_are_one_line_usage_errors(nn):
    """Refused before any cluster starts: exit 2, one line."""
    for args, fragment in ((("--policies", "RS-9-9-1k"), "no policy 'RS-9-9-1k'"),
                           (("--faults", "slow"), "no fault 'slow'"),
                           (("--rounds", "1"), "--rounds")):
        result = run_cli("bench", "tail", *args, namenode=nn)
        assert_one_line_error(result, fragment)
        assert result.code == 2, (args, result)
