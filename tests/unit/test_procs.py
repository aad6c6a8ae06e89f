"""What /proc says of a killed process: gone only once every thread has let go of its files."""

import fcntl
import os
import platform
import signal
import subprocess
import sys

import pytest
from conftest import wait_until

from hedgefs.cluster.procs import gone, proc_stat, wait_gone

# The leader thread alone ends (SYS_exit, not exit_group); the process lingers as a zombie leader
# whose other thread still holds every file it opened: how a killed NameNode looked when one of its
# threads was still in an fsync, and its data-dir lock was still held when the restart came.
_LEADER_EXITS = """
import ctypes, fcntl, sys, threading, time
lock = open(sys.argv[1], "w")
fcntl.flock(lock, fcntl.LOCK_EX)
threading.Thread(target=time.sleep, args=(3600,)).start()
print("locked", flush=True)
ctypes.CDLL(None).syscall(int(sys.argv[2]), 0)
"""
_SYS_EXIT = {"x86_64": 60, "aarch64": 93}


def _lock_free(path) -> bool:
    with open(path, "w") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        return True


@pytest.mark.skipif(platform.machine() not in _SYS_EXIT, reason="SYS_exit's number is known for x86_64 and aarch64")
def test_a_zombie_leader_with_a_thread_left_is_not_gone_until_that_thread_is(tmp_path):
    lock = tmp_path / "namenode.lock"
    proc = subprocess.Popen([sys.executable, "-c", _LEADER_EXITS, str(lock), str(_SYS_EXIT[platform.machine()])],
                            stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "locked"
        wait_until(lambda: proc_stat(proc.pid)[0] == "Z", 30, "the leader thread to exit", interval=0.01)
        assert not gone(proc.pid)
        assert not wait_gone(proc.pid, timeout_s=0.1)
        assert not _lock_free(lock)
        os.kill(proc.pid, signal.SIGKILL)
        assert wait_gone(proc.pid)
        assert _lock_free(lock)
    finally:
        proc.kill()
        proc.wait()


def test_a_live_process_is_not_gone_and_a_reaped_one_is():
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3600)"])
    assert not gone(proc.pid)
    proc.kill()
    proc.wait()
    assert gone(proc.pid)
