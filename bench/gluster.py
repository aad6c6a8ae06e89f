"""A GlusterFS disperse 6+3 volume on nine local bricks, FUSE-mounted: the baseline of `bench mount`.

Debian's glusterfs-server (10.x): glusterd is started if none runs (and stopped after), the
bricks are directories under ``root``, the volume is created, started, mounted with the
glusterfs FUSE client, and removed again at the end. GlusterFS refuses "localhost"/"127.0.0.1"
as a brick host, so the bricks are named by this machine's host name, which must resolve to a
loopback address: every byte stays on this machine. ``GlusterUnavailable`` says why not, in one
line, when it cannot be had (not installed, not root, a host name that is not loopback).
"""

from __future__ import annotations

import os
import pathlib
import shutil
import signal
import socket
import subprocess
import time

VOLUME = "hedgefsbench"


class GlusterUnavailable(Exception):
    pass


def _gluster(*args: str, timeout: float = 120) -> str:
    result = subprocess.run(["gluster", "--mode=script", *args], capture_output=True, text=True, timeout=timeout)
    if result.returncode != 0:
        raise GlusterUnavailable(f"gluster {' '.join(args[:3])}: {(result.stderr or result.stdout).strip()}")
    return result.stdout


class GlusterVolume:
    def __init__(self, root: pathlib.Path):
        self.root = pathlib.Path(root)
        self.mountpoint = self.root / "mnt"
        self._started_glusterd = False
        self._mounted = False
        self._created = False

    def start(self) -> "GlusterVolume":
        if not shutil.which("glusterd") or not shutil.which("gluster") or not shutil.which("glusterfs"):
            raise GlusterUnavailable("GlusterFS is not installed (Debian: apt-get install glusterfs-server)")
        if os.geteuid() != 0:
            raise GlusterUnavailable("GlusterFS needs root here (glusterd and its bricks)")
        host = socket.gethostname()
        try:
            address = socket.gethostbyname(host)
        except OSError as err:
            raise GlusterUnavailable(f"host name {host} does not resolve ({err})") from None
        if not address.startswith("127."):
            raise GlusterUnavailable(f"host name {host} is {address}, not loopback: the bricks would not be local")
        if subprocess.run(["pgrep", "-x", "glusterd"], capture_output=True).returncode != 0:
            subprocess.run(["glusterd", "-p", str(self.root / "glusterd.pid"),
                            f"--log-file={self.root / 'glusterd.log'}"], check=True, timeout=60)
            self._started_glusterd = True
        deadline = time.monotonic() + 30
        while True:
            try:
                _gluster("peer", "status", timeout=10)
                break
            except GlusterUnavailable:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.5)
        self._drop_volume()   # one left by an interrupted run
        bricks = []
        for i in range(1, 10):
            brick = self.root / "bricks" / f"b{i}"
            brick.mkdir(parents=True, exist_ok=True)
            bricks.append(f"{host}:{brick}")
        _gluster("volume", "create", VOLUME, "disperse", "9", "redundancy", "3", *bricks, "force")
        self._created = True
        _gluster("volume", "start", VOLUME)
        self.mountpoint.mkdir(parents=True, exist_ok=True)
        subprocess.run(["glusterfs", f"--volfile-server={host}", f"--volfile-id={VOLUME}", str(self.mountpoint)],
                       check=True, timeout=60)
        self._mounted = True
        deadline = time.monotonic() + 30
        while not os.path.ismount(self.mountpoint):
            if time.monotonic() > deadline:
                raise GlusterUnavailable("the GlusterFS mount did not appear in 30 s")
            time.sleep(0.2)
        return self

    def brick_pids(self) -> list[int]:
        """The brick processes (glusterfsd), in brick order."""
        out = _gluster("volume", "status", VOLUME, "detail", timeout=30)
        return [int(line.split(":")[1]) for line in out.splitlines() if line.strip().startswith("Pid")]

    def freeze_brick(self, pid: int) -> None:
        os.kill(pid, signal.SIGSTOP)

    def thaw_brick(self, pid: int) -> None:
        os.kill(pid, signal.SIGCONT)

    def stop(self) -> None:
        if self._mounted:
            subprocess.run(["umount", "-l", str(self.mountpoint)], capture_output=True, timeout=60)
            self._mounted = False
        if self._created:
            self._drop_volume()
        if self._started_glusterd:
            pid_file = self.root / "glusterd.pid"
            if pid_file.exists():
                try:
                    os.kill(int(pid_file.read_text().strip()), signal.SIGTERM)
                except (OSError, ValueError):
                    pass

    def _drop_volume(self) -> None:
        info = subprocess.run(["gluster", "--mode=script", "volume", "info", VOLUME], capture_output=True, timeout=60)
        if info.returncode == 0:
            subprocess.run(["gluster", "--mode=script", "volume", "stop", VOLUME, "force"], capture_output=True,
                           timeout=120)
            subprocess.run(["gluster", "--mode=script", "volume", "delete", VOLUME], capture_output=True, timeout=120)
