"""Mounts for tests: `hedgefs mount -f` in a process of its own, started and stopped cleanly,
and whether this machine can mount at all (``WHY_NOT``: "" if it can)."""

import os
import shutil
import subprocess
import sys

from conftest import cli_env, wait_until

try:
    import pyfuse3  # noqa: F401
    WHY_NOT = "" if os.path.exists("/dev/fuse") else "no /dev/fuse"
except ImportError:
    WHY_NOT = "no pyfuse3 (make installs it with Debian's libfuse3-dev, as root)"
if not WHY_NOT and not shutil.which("fusermount3"):
    WHY_NOT = "no fusermount3 (Debian's fuse3)"


def start_mount(namenode: str, mountpoint, log, *extra: str, env: dict | None = None) -> subprocess.Popen:
    """`hedgefs mount -f` in its own process; returns once the mount is there."""
    os.makedirs(mountpoint, exist_ok=True)
    proc = subprocess.Popen([sys.executable, "-m", "hedgefs", "mount", "-f", *extra, str(mountpoint)],
                            stdout=subprocess.DEVNULL, stderr=open(log, "ab"), env=env or cli_env(namenode))
    wait_until(lambda: os.path.ismount(mountpoint) or proc.poll() is not None, 30, f"the mount at {mountpoint}")
    assert proc.poll() is None, open(log).read()
    return proc


def stop_mount(proc: subprocess.Popen, mountpoint) -> None:
    if proc.poll() is None:
        subprocess.run(["fusermount3", "-u", str(mountpoint)], capture_output=True)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    if os.path.ismount(mountpoint):
        subprocess.run(["fusermount3", "-u", "-z", str(mountpoint)], capture_output=True)


def sh(*args: str, **kwargs) -> subprocess.CompletedProcess:
    result = subprocess.run(args, capture_output=True, timeout=120, **kwargs)
    assert result.returncode == 0, f"{args}: exit {result.returncode}: {result.stderr.decode(errors='replace')}"
    return result
