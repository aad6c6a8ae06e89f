"""`get` and a user's disk: devices, FIFOs and symlinks written into, never replaced; an existing
file kept unless -f; errors naming the target; leftovers of a killed `get` cleaned."""

import os
import stat
import subprocess
import sys
import threading

import pytest

from conftest import assert_one_line_error, run_cli


@pytest.fixture(scope="module")
def nn(cluster):
    assert run_cli("mkdir", "-p", "/lw", namenode=cluster.namenode).code == 0
    assert run_cli("put", "-f", "-", "/lw/hello", namenode=cluster.namenode, input=b"hello\n").code == 0
    return cluster.namenode


def test_symlink_to_a_device_stays_a_symlink_and_the_device_a_device(nn, tmp_path):
    link = tmp_path / "null"
    link.symlink_to("/dev/null")
    result = run_cli("get", "/lw/hello", str(link), namenode=nn)
    assert result.code == 0, result.stderr
    assert link.is_symlink()
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)


def test_get_to_dev_null_writes_into_it(nn):
    result = run_cli("get", "/lw/hello", "/dev/null", namenode=nn)
    assert result.code == 0, result.stderr
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)


def test_fifo_is_written_into(nn, tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    got = []
    reader = threading.Thread(target=lambda: got.append(open(fifo, "rb").read()))
    reader.start()
    result = run_cli("get", "/lw/hello", str(fifo), namenode=nn)
    reader.join(30)
    assert result.code == 0, result.stderr
    assert got == [b"hello\n"]
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)


def test_symlink_to_a_file_writes_the_target_and_keeps_the_link(nn, tmp_path):
    target = tmp_path / "target.txt"
    target.write_bytes(b"old target")
    link = tmp_path / "link.txt"
    link.symlink_to("target.txt")
    assert_one_line_error(run_cli("get", "/lw/hello", str(link), namenode=nn), "exists", "-f")
    assert target.read_bytes() == b"old target"
    result = run_cli("get", "-f", "/lw/hello", str(link), namenode=nn)
    assert result.code == 0, result.stderr
    assert link.is_symlink() and target.read_bytes() == b"hello\n"


def test_existing_file_needs_force(nn, tmp_path):
    local = tmp_path / "exists.txt"
    local.write_bytes(b"old")
    result = run_cli("get", "/lw/hello", str(local), namenode=nn)
    assert_one_line_error(result, "local file exists", str(local), "-f")
    assert result.code == 2
    assert local.read_bytes() == b"old"
    assert run_cli("get", "-f", "/lw/hello", str(local), namenode=nn).code == 0
    assert local.read_bytes() == b"hello\n"


def test_get_into_a_directory_puts_the_file_inside(nn, tmp_path):
    result = run_cli("get", "/lw/hello", str(tmp_path), namenode=nn)
    assert result.code == 0, result.stderr
    assert (tmp_path / "hello").read_bytes() == b"hello\n"


def test_errors_name_the_target_not_the_temp_file(nn, tmp_path):
    readonly = tmp_path / "ro"
    readonly.mkdir()
    target = readonly / "out"
    result = run_cli("get", "/lw/hello", "/proc/forbidden", namenode=nn)
    assert_one_line_error(result, "/proc/forbidden")
    assert ".part" not in result.stderr
    os.chmod(readonly, 0o500)
    try:
        if os.geteuid() == 0:
            result = run_cli("get", "/lw/hello", "/sys/hedgefs-forbidden", namenode=nn)
            assert_one_line_error(result, "/sys/hedgefs-forbidden")
        else:
            assert_one_line_error(run_cli("get", "/lw/hello", str(target), namenode=nn), str(target))
        assert ".part" not in result.stderr
    finally:
        os.chmod(readonly, 0o700)


def test_leftover_temp_file_of_a_killed_get_is_cleaned(nn, tmp_path):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()   # a PID that no longer runs
    leftover = tmp_path / f".out.bin.hedgefs-{dead.pid}.part"
    leftover.write_bytes(b"partial")
    alive = tmp_path / f".out.bin.hedgefs-{os.getpid()}.part"   # a running process's: kept
    alive.write_bytes(b"in progress")
    result = run_cli("get", "/lw/hello", str(tmp_path / "out.bin"), namenode=nn)
    assert result.code == 0, result.stderr
    assert not leftover.exists()
    assert alive.exists()
    assert (tmp_path / "out.bin").read_bytes() == b"hello\n"
