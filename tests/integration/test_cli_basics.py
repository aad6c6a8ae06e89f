"""The HDFS shell basics: rm -f and several paths, mkdir of several, chmod -R with symbolic modes,
chown -R, touchz, head, tail, test, count, du, ls -l/-h/--json, stat's mtime."""

import json

import pytest

from conftest import assert_one_line_error, client, pattern, run_cli


@pytest.fixture(scope="module")
def nn(cluster):
    with client(cluster.namenode) as fs:
        fs.mkdir("/b/tree/sub", parents=True)
        fs.write_bytes("/b/tree/a", b"a" * 10, overwrite=True)
        fs.write_bytes("/b/tree/sub/big", pattern(3000, seed=2), overwrite=True)
    return cluster.namenode


def _stat(nn, path) -> dict:
    result = run_cli("stat", "--json", path, namenode=nn)
    assert result.code == 0, result.stderr
    return json.loads(result.stdout)


def test_rm_several_paths_and_rm_f(nn):
    assert run_cli("mkdir", "/b/r1", "/b/r2", namenode=nn).code == 0
    assert run_cli("rm", "-r", "/b/r1", "/b/r2", namenode=nn).code == 0
    assert_one_line_error(run_cli("rm", "/b/r1", namenode=nn), "/b/r1")
    result = run_cli("rm", "-r", "-f", "/b/r1", "/b/never", namenode=nn)
    assert result.code == 0 and result.stderr == ""


def test_chmod_recursive_symbolic_and_chown_recursive(nn):
    result = run_cli("chmod", "-R", "go-rx,u+w", "/b/tree", namenode=nn)
    assert result.code == 0, result.stderr
    assert _stat(nn, "/b/tree")["permission"] == "0700"
    assert _stat(nn, "/b/tree/sub/big")["permission"] == "0600"
    assert run_cli("chmod", "-R", "a+rX", "/b/tree", namenode=nn).code == 0
    assert _stat(nn, "/b/tree/sub")["permission"] == "0755" and _stat(nn, "/b/tree/a")["permission"] == "0644"
    assert_one_line_error(run_cli("chmod", "u+q", "/b/tree", namenode=nn), "bad mode")
    assert run_cli("chown", "-R", "alice:staff", "/b/tree", namenode=nn).code == 0
    assert (_stat(nn, "/b/tree/sub/big")["owner"], _stat(nn, "/b/tree/sub/big")["group"]) == ("alice", "staff")


def test_touchz_head_tail(nn):
    assert run_cli("touchz", "/b/_SUCCESS", namenode=nn).code == 0
    assert run_cli("touchz", "/b/_SUCCESS", namenode=nn).code == 0   # already empty: fine
    assert_one_line_error(run_cli("touchz", "/b/tree/a", namenode=nn), "not an empty file")
    data = pattern(3000, seed=2)
    assert run_cli("head", "/b/tree/sub/big", namenode=nn).stdout == data[:1024]
    assert run_cli("tail", "-c", "100", "/b/tree/sub/big", namenode=nn).stdout == data[-100:]
    assert run_cli("tail", "-c", "5000", "/b/tree/sub/big", namenode=nn).stdout == data


def test_test_and_count_and_du(nn):
    assert run_cli("test", "-e", "/b/tree/a", namenode=nn).code == 0
    assert run_cli("test", "-d", "/b/tree/a", namenode=nn).code == 1
    missing = run_cli("test", "-e", "/b/nope", namenode=nn)
    assert missing.code == 1 and missing.stderr == ""
    count = run_cli("count", "/b/tree", namenode=nn).stdout.decode().split()
    assert count[:3] == ["2", "2", "3010"] and count[3] == "/b/tree"
    du = run_cli("du", "--json", "/b/tree", namenode=nn)
    rows = {r["path"]: r for r in json.loads(du.stdout)}
    assert rows["/b/tree/a"]["length"] == 10 and rows["/b/tree/sub"]["length"] == 3000
    assert rows["/b/tree/sub"]["disk_bytes"] > 3000, "parity counts on disk"
    summary = run_cli("du", "-s", "-h", "/b/tree", namenode=nn).stdout.decode()
    assert summary.split()[0] == "2.9K" and summary.split()[-1] == "/b/tree"


def test_ls_long_human_json_and_stat_mtime(nn):
    human = run_cli("ls", "-l", "-h", "/b/tree/sub", namenode=nn)
    assert human.code == 0, human.stderr
    assert " 2.9K " in human.stdout.decode()
    assert run_cli("ls", "--help", namenode=nn).stdout.decode().startswith("Usage: hedgefs ls")
    docs = [json.loads(line) for line in run_cli("ls", "--json", "/b/tree", "/b/tree/sub", namenode=nn).stdout.splitlines()]
    assert {d["path"] for d in docs} == {"/b/tree/a", "/b/tree/sub", "/b/tree/sub/big"}
    assert all(d["mtime_ms"] > 0 for d in docs)
    st = _stat(nn, "/b/tree/a")
    assert st["mtime_ms"] > 0 and st["mtime"].startswith("20")
    assert "mtime:" in run_cli("stat", "/b/tree/a", namenode=nn).stdout.decode()


def test_progress_ends_on_the_true_total_and_plurals_read_right():
    import io

    from hedgefs.cli.distcp import _summary
    from hedgefs.cli.progress import Progress

    class Tty(io.StringIO):
        def isatty(self):
            return True

    out = Tty()
    bar = Progress("put -", None, stream=out)
    for _ in range(64):
        bar.advance(1 << 20)   # redraws at most every 0.1 s: the last one may be far behind
    bar.finish()
    assert out.getvalue().rstrip("\n").rsplit("\r", 1)[-1].startswith("put - 64.0 MiB")
    report = dict(files=1, files_resumed=0, files_skipped=0, files_failed=0, bytes=0, seconds=1.0, mb_per_s=0.0,
                  segments=1, segments_resumed=0, segments_hedged=0, hedge_wins=1)
    assert "1 file copied" in _summary(report) and "1 segment," in _summary(report) and "1 hedge win)" in _summary(report)


def test_verbose_leaves_out_grpc_and_asyncio_debug():
    import logging

    from hedgefs.cli.common import setup_logging

    setup_logging(verbose=True)
    try:
        assert logging.getLogger("hedgefs.client").isEnabledFor(logging.DEBUG)
        assert not logging.getLogger("grpc._cython.cygrpc").isEnabledFor(logging.DEBUG)
        assert not logging.getLogger("asyncio").isEnabledFor(logging.DEBUG)
    finally:
        setup_logging()


def test_rmdir_find_setrep_and_json_views(nn):
    assert run_cli("mkdir", "-p", "/b/empty", namenode=nn).code == 0
    assert_one_line_error(run_cli("rmdir", "/b/tree", namenode=nn), "directory not empty")
    assert_one_line_error(run_cli("rmdir", "/b/tree/a", namenode=nn), "not a directory")
    assert run_cli("rmdir", "/b/empty", namenode=nn).code == 0
    found = run_cli("find", "/b/tree", "-name", "b*", namenode=nn).stdout.decode().split()
    assert found == ["/b/tree/sub/big"]
    dirs = run_cli("find", "/b/tree", "-type", "d", namenode=nn).stdout.decode().split()
    assert dirs == ["/b/tree", "/b/tree/sub"]
    result = run_cli("setrep", "2", "/b/tree/a", namenode=nn)
    assert result.code == 0, result.stderr
    assert _stat(nn, "/b/tree/a")["policy"] == "REPLICATE-2"
    got = json.loads(run_cli("ec", "get-policy", "--json", "/b/tree/a", namenode=nn).stdout)
    assert got["policy"] == "REPLICATE-2"
    policies = [json.loads(line) for line in run_cli("ec", "list-policies", "--json").stdout.splitlines()]
    assert any(p["name"] == "RS-6-3-1024k" and p["default"] for p in policies)
    shown = [json.loads(line) for line in run_cli("fault", "show", "--json", namenode=nn).stdout.splitlines()]
    assert {s["datanode"] for s in shown} >= {"dn1", "dn2"} and all("read_delay_ms" in s for s in shown)


def test_trash_when_on_skip_trash_and_expunge(nn):
    on = {"HEDGEFS_TRASH_MINUTES": "60"}
    assert run_cli("put", "-f", "-", "/b/keep.txt", namenode=nn, input=b"precious").code == 0
    moved = run_cli("rm", "/b/keep.txt", namenode=nn, env=on)
    assert moved.code == 0, moved.stderr
    assert "moved /b/keep.txt to trash" in moved.stderr
    assert run_cli("cat", "/user/hedgefs/.Trash/Current/b/keep.txt", namenode=nn).stdout == b"precious"
    assert run_cli("test", "-e", "/b/keep.txt", namenode=nn).code == 1
    assert run_cli("put", "-f", "-", "/b/gone.txt", namenode=nn, input=b"x").code == 0
    assert run_cli("rm", "-skipTrash", "/b/gone.txt", namenode=nn, env=on).code == 0
    assert run_cli("test", "-e", "/user/hedgefs/.Trash/Current/b/gone.txt", namenode=nn).code == 1
    assert run_cli("mkdir", "-p", "/user/hedgefs/.Trash/2001010000", namenode=nn).code == 0   # a checkpoint of 2020
    expunged = run_cli("expunge", namenode=nn, env=on)
    assert expunged.code == 0, expunged.stderr
    listing = run_cli("ls", "/user/hedgefs/.Trash", namenode=nn).stdout.decode()
    assert "2001010000" not in listing and "/Current" not in listing, listing
    assert "keep.txt" in run_cli("ls", "-R", "/user/hedgefs/.Trash", namenode=nn).stdout.decode()


def test_ec_unset_policy_and_every_replication_listed(nn):
    assert run_cli("mkdir", "-p", "/b/pol", namenode=nn).code == 0
    assert run_cli("ec", "set-policy", "/b/pol", "REPLICATE-2", namenode=nn).code == 0
    assert run_cli("ec", "unset-policy", "/b/pol", namenode=nn).code == 0
    got = json.loads(run_cli("ec", "get-policy", "--json", "/b/pol", namenode=nn).stdout)
    assert got["from"] != "/b/pol"
    listing = run_cli("ec", "list-policies").stdout.decode()
    assert "REPLICATE-4" in listing and "REPLICATE-5" in listing and "needs 14 DataNodes" in listing
    assert "tolerates 1 lost DataNode," in listing
