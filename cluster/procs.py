"""What /proc says of the launcher's processes: state, start time, threads stopped; log tails."""

from __future__ import annotations

import os
import pathlib
import time


def _stat_fields(path: str) -> list[str] | None:
    """The fields of a /proc stat file after the command name, None if it is gone."""
    try:
        with open(path) as f:
            return f.read().rsplit(")", 1)[1].split()
    except OSError:
        return None


def proc_stat(pid: int) -> tuple[str, int] | None:
    """(state letter, start time in clock ticks since boot) of a process, None if it is gone."""
    fields = _stat_fields(f"/proc/{pid}/stat")
    return None if fields is None else (fields[0], int(fields[19]))


def all_stopped(pid: int) -> bool:
    """Is every thread of ``pid`` stopped (state T or t), or the process gone?"""
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return True
    states = (_stat_fields(f"/proc/{pid}/task/{tid}/stat") for tid in tids)
    return all(fields is None or fields[0] in ("T", "t") for fields in states)   # None: a thread that ended


def wait_stopped(pid: int, timeout_s: float = 5.0) -> None:
    """After SIGSTOP: kill() returns before a thread running on another core has stopped."""
    deadline = time.monotonic() + timeout_s
    while not all_stopped(pid) and time.monotonic() < deadline:
        time.sleep(0.002)


def last_line(path: pathlib.Path) -> str:
    try:
        lines = [ln for ln in path.read_text(errors="replace").splitlines() if ln.strip()]
    except OSError:
        return "(no log)"
    return lines[-1] if lines else "(empty log)"


def gone(pid: int) -> bool:
    """Has the process let go of everything it held? Its leader turns zombie while other threads
    may still be exiting (one in an fsync on a busy disk, say), and they share its open files: a
    killed NameNode's data-dir lock was still held when a restart came, so every thread must be gone."""
    stat = proc_stat(pid)
    if stat is None:
        return True
    if stat[0] not in ("Z", "X"):
        return False
    try:
        return os.listdir(f"/proc/{pid}/task") == [str(pid)]
    except OSError:
        return True


def wait_gone(pid: int, timeout_s: float = 30.0) -> bool:
    """After SIGKILL: until the process has exited and let go of its namespaces and files; False if
    it has not within ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while not gone(pid):
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.01)
    return True
