"""Paths as HDFS and cp users type them: into directories, trailing and doubled slashes, missing
parents, hedgefs:// URLs, a global --namenode, non-UTF-8 names, names with escapes, one writer
per path, and distcp's staging."""

import json
import os
import threading

import pytest

from conftest import PausingSource, assert_one_line_error, client, pattern, run_cli, wait_until


@pytest.fixture(scope="module")
def nn(cluster):
    assert run_cli("mkdir", "-p", "/cp/dir", namenode=cluster.namenode).code == 0
    return cluster.namenode


def cat(nn, path) -> bytes:
    result = run_cli("cat", path, namenode=nn)
    assert result.code == 0, result.stderr
    return result.stdout


def test_put_into_a_directory_with_or_without_a_trailing_slash(nn, tmp_path):
    local = tmp_path / "hello.txt"
    local.write_bytes(b"hello\n")
    assert run_cli("put", str(local), "/cp/dir", namenode=nn).code == 0
    assert cat(nn, "/cp/dir/hello.txt") == b"hello\n"
    assert run_cli("put", "-f", str(local), "/cp/dir/", namenode=nn).code == 0
    assert_one_line_error(run_cli("put", "-", "/cp/dir", namenode=nn, input=b"x"), "is a directory", "NAME")


def test_put_creates_missing_parents_as_the_readme_examples_need(nn):
    result = run_cli("put", "-", "/cp/backups/src.tar", namenode=nn, input=b"tar")
    assert result.code == 0, result.stderr
    assert run_cli("put", "-p", "--policy", "REPLICATE-3", "-", "/cp/hbase/hot.bin", namenode=nn, input=b"hot").code == 0
    assert cat(nn, "/cp/hbase/hot.bin") == b"hot"
    assert run_cli("put", "-", "/cp/new/", namenode=nn, input=b"x").code != 0   # stdin has no name to put inside


def test_trailing_and_doubled_slashes_are_normalised(nn):
    assert run_cli("put", "-f", "-", "//cp//dir//norm.txt", namenode=nn, input=b"n").code == 0
    for spelling in ("/cp/dir/", "//cp/dir", "/cp//dir//"):
        result = run_cli("ls", spelling, namenode=nn)
        assert result.code == 0, result.stderr
        assert b"/cp/dir/norm.txt" in result.stdout
    assert_one_line_error(run_cli("ls", "/cp/../etc", namenode=nn), "invalid path")


def test_mv_and_cp_into_an_existing_directory(nn):
    assert run_cli("put", "-f", "-", "/cp/a.txt", namenode=nn, input=b"a").code == 0
    assert run_cli("put", "-f", "-", "/cp/b.txt", namenode=nn, input=b"b").code == 0
    assert run_cli("mkdir", "/cp/into", "/cp/copies", namenode=nn).code == 0
    assert run_cli("mv", "/cp/a.txt", "/cp/into", namenode=nn).code == 0
    assert cat(nn, "/cp/into/a.txt") == b"a"
    result = run_cli("cp", "/cp/into/a.txt", "/cp/b.txt", "/cp/copies/", namenode=nn)
    assert result.code == 0, result.stderr
    assert cat(nn, "/cp/copies/a.txt") == b"a" and cat(nn, "/cp/copies/b.txt") == b"b"
    assert_one_line_error(run_cli("cp", "/cp/b.txt", "/cp/copies/b.txt", namenode=nn), "exists", "-f")
    big = pattern(1 << 20, seed=3)
    assert run_cli("put", "-f", "-", "/cp/big", namenode=nn, input=big).code == 0
    assert run_cli("cp", "-f", "/cp/big", "/cp/big2", namenode=nn).code == 0
    assert cat(nn, "/cp/big2") == big
    assert_one_line_error(run_cli("mv", "/cp/b.txt", "/cp/copies/b.txt", "/cp/b.txt", namenode=nn), "several sources")


def test_hedgefs_urls_everywhere_and_a_global_namenode(nn):
    url = f"hedgefs://{nn}/cp/url.txt"
    assert run_cli("put", "-f", "-", url, input=b"via url").code == 0     # no HEDGEFS_NAMENODE at all
    assert run_cli("cat", url).stdout == b"via url"
    assert b"/cp/url.txt" in run_cli("ls", f"hedgefs://{nn}/cp/").stdout
    assert run_cli("--namenode", nn, "cat", "/cp/url.txt").stdout == b"via url"
    result = run_cli("ls", "hedgefs://127.0.0.1/", timeout=60)    # no port: HDFS's 8020
    assert_one_line_error(result, "127.0.0.1:8020")
    assert_one_line_error(run_cli("cat", url, f"hedgefs://127.0.0.2:1/x"), "two clusters")


BAD = os.fsdecode(b"/cp/bad\xffname")


@pytest.mark.parametrize("args", [("put", "-", BAD), ("ls", BAD), ("mkdir", "-p", BAD), ("cat", BAD), ("rm", BAD)])
def test_non_utf8_paths_are_one_line_exit_2(nn, args):
    result = run_cli(*args, namenode=nn, input=b"x")
    assert_one_line_error(result, "not valid UTF-8", "\\xff")
    assert result.code == 2


def test_distcp_skips_and_reports_a_non_utf8_local_name(nn, tmp_path):
    src = tmp_path / "nonutf"
    src.mkdir()
    (src / "ok.txt").write_bytes(b"a\n")
    (src / os.fsdecode(b"bad\xffname.txt")).write_bytes(b"b\n")
    result = run_cli("distcp", "--json", f"file://{src}", "/cp/nu", namenode=nn)
    assert result.code == 1, result.stderr
    assert "Traceback" not in result.stderr
    report = json.loads(result.stdout)
    assert report["files"] == 1 and report["files_failed"] == 1
    assert any("bad\\xffname.txt" in f and "UTF-8" in f for f in report["failures"]), report["failures"]
    assert cat(nn, "/cp/nu/ok.txt") == b"a\n"


def test_names_with_escapes_are_shown_quoted_and_exact_in_json(nn):
    tricky = "/cp/esc\x1b[31mRED\x1b[0m"
    newline = "/cp/new\nline"
    for name in (tricky, newline):
        assert run_cli("put", "-f", "-", name, namenode=nn, input=b"x").code == 0
    listing = run_cli("ls", "/cp", namenode=nn).stdout.decode()
    assert "\x1b" not in listing
    assert "$'/cp/esc\\e[31mRED\\e[0m'" in listing and "$'/cp/new\\nline'" in listing
    docs = [json.loads(line) for line in run_cli("ls", "--json", "/cp", namenode=nn).stdout.splitlines()]
    assert {tricky, newline} <= {d["path"] for d in docs}


def test_a_second_writer_of_a_path_is_refused_at_once(cluster, nn):
    source = PausingSource(pattern(3 << 20, seed=1), pause_at=1 << 20)
    errors = []

    def first():
        try:
            with client(nn) as fs:
                fs.write("/cp/race.bin", source)
        except Exception as err:   # noqa: BLE001 - reported below
            errors.append(err)

    writer = threading.Thread(target=first)
    writer.start()
    try:
        assert source.reached.wait(60), "the first put never started"
        second = run_cli("put", "-f", "-", "/cp/race.bin", namenode=nn, input=b"later")
        assert_one_line_error(second, "/cp/race.bin is being written by")
        assert second.code == 2
    finally:
        source.go.set()
        writer.join(60)
    assert errors == []
    assert cat(nn, "/cp/race.bin") == pattern(3 << 20, seed=1)


def test_a_refused_distcp_leaves_no_staging_dir(nn):
    assert run_cli("put", "-f", "-", "/cp/dc/exists", namenode=nn, input=b"old").code == 0
    assert run_cli("put", "-f", "-", "/cp/dc-src", namenode=nn, input=b"new").code == 0
    refused = run_cli("distcp", "/cp/dc-src", "/cp/dc/exists", namenode=nn)
    assert_one_line_error(refused, "destination file exists")
    listing = run_cli("ls", "-R", "/cp/dc", namenode=nn).stdout.decode()
    assert ".distcp-" not in listing, listing
