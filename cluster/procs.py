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


def wait_gone(pid: int, timeout_s: float = 10.0) -> None:
    """After SIGKILL: until the process has exited (a zombie has let go of its namespaces and files)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        stat = proc_stat(pid)
        if stat is None or stat[0] in ("Z", "X"):
            return
        time.sleep(0.01)
