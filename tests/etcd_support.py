"""A real 3-member etcd cluster on loopback for the HA tests (Debian's etcd-server, `make etcd`).

``EtcdCluster(root).start()`` runs three ``etcd`` processes (cluster/etcd.py: free 127.0.0.1
ports, data dirs under /dev/shm when there is one: fast, and it survives a ``kill -9`` of a
member; a unique ``--initial-cluster-token``), waits for a write to go through, and ``stop()``
ends them by pid. Tests never
assume 2379 is free. ``etcd_cluster`` is the module-scoped fixture (one cluster per test
module); ``prefix(name)`` gives each test its own key prefix. Without etcd the tests skip with
one line saying why.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import uuid

import pytest

from hedgefs.cluster.etcd import EtcdMembers
from hedgefs.cluster.procs import wait_stopped

ETCD = shutil.which("etcd")
ETCDCTL = shutil.which("etcdctl")
SKIP_REASON = "etcd is not installed (as root, `make etcd` installs Debian's etcd-server): HA tests skipped"


class EtcdCluster(EtcdMembers):
    """cluster/etcd.py's members, and what the tests do to them: find the raft leader, kill,
    list keys (``start_member(name, state="existing")`` restarts one)."""

    def _ctl(self, *args: str, endpoints: str | None = None, timeout: float = 5.0) -> subprocess.CompletedProcess:
        env = dict(os.environ, ETCDCTL_API="3")
        return subprocess.run([ETCDCTL, "--endpoints", endpoints or self.endpoints, "--dial-timeout", "1s",
                               "--command-timeout", "2s", *args], capture_output=True, text=True, env=env,
                              timeout=timeout)

    def leader(self) -> str:
        """The name of the member that is the raft leader now."""
        for name in self.names:
            if self.procs.get(name) is None or self.procs[name].poll() is not None:
                continue
            r = self._ctl("endpoint", "status", "-w", "json", endpoints=f"127.0.0.1:{self.client_ports[name]}")
            if r.returncode == 0 and '"leader"' in r.stdout:
                status = json.loads(r.stdout)[0]["Status"]
                if status["leader"] == status["header"]["member_id"]:
                    return name
        raise RuntimeError("no etcd leader")

    def kill(self, name: str, sig: int = signal.SIGKILL) -> None:
        proc = self.procs[name]
        if proc.poll() is None:
            proc.send_signal(sig)
            if sig in (signal.SIGKILL, signal.SIGTERM):
                proc.wait(10)
            elif sig == signal.SIGSTOP:   # every thread stopped: one on another core may still send
                wait_stopped(proc.pid)

    def keys(self, prefix: str) -> list[str]:
        r = self._ctl("get", "--prefix", "--keys-only", prefix)
        return [line for line in r.stdout.splitlines() if line.strip()]


_counter = iter(range(1, 1 << 30))


def prefix(name: str = "t") -> str:
    """A key prefix of its own for one test (``hfs-<name>-<n>-<random>``)."""
    return f"hfs-{name}-{next(_counter)}-{uuid.uuid4().hex[:6]}"


@pytest.fixture(scope="module")
def etcd_cluster(tmp_path_factory):
    if ETCD is None or ETCDCTL is None:
        pytest.skip(SKIP_REASON)
    cluster = EtcdCluster(tmp_path_factory.mktemp("etcd"))
    try:
        cluster.start()
    except Exception:
        cluster.stop()
        raise
    yield cluster
    cluster.stop()
