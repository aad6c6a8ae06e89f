"""A real 3-member etcd cluster on loopback for the HA tests (Debian's etcd-server, `make etcd`).

``EtcdCluster(root).start()`` runs three ``etcd`` processes on free 127.0.0.1 ports (data dirs
under /dev/shm when there is one: fast, and it survives a ``kill -9`` of a member), a unique
``--initial-cluster-token``, waits for a leader, and ``stop()`` ends them by pid. Tests never
assume 2379 is free. ``etcd_cluster`` is the module-scoped fixture (one cluster per test
module); ``prefix(name)`` gives each test its own key prefix. Without etcd the tests skip with
one line saying why.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import uuid

import pytest

ETCD = shutil.which("etcd")
ETCDCTL = shutil.which("etcdctl")
SKIP_REASON = "etcd is not installed (as root, `make etcd` installs Debian's etcd-server): HA tests skipped"
needs_etcd = pytest.mark.skipif(ETCD is None or ETCDCTL is None, reason=SKIP_REASON)


def _free_ports(count: int) -> list[int]:
    socks = []
    try:
        for _ in range(count):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


class EtcdCluster:
    def __init__(self, root: str | os.PathLike, members: int = 3):
        base = "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None
        self.dir = tempfile.mkdtemp(prefix="hedgefs-etcd-", dir=base)
        self.log_dir = str(root)
        self.names = [f"e{i + 1}" for i in range(members)]
        self.procs: dict[str, subprocess.Popen] = {}
        self.client_ports: dict[str, int] = {}
        self.peer_ports: dict[str, int] = {}
        self.token = f"hedgefs-test-{uuid.uuid4().hex[:12]}"

    @property
    def endpoints(self) -> str:
        """``HOST:PORT,HOST:PORT,...``: what ``--meta etcd://`` takes."""
        return ",".join(f"127.0.0.1:{self.client_ports[n]}" for n in self.names)

    def url(self, prefix: str) -> str:
        return f"etcd://{self.endpoints}/{prefix}"

    def _args(self, name: str, state: str = "new") -> list[str]:
        initial = ",".join(f"{n}=http://127.0.0.1:{self.peer_ports[n]}" for n in self.names)
        return [ETCD, "--name", name, "--data-dir", os.path.join(self.dir, name),
                "--listen-client-urls", f"http://127.0.0.1:{self.client_ports[name]}",
                "--advertise-client-urls", f"http://127.0.0.1:{self.client_ports[name]}",
                "--listen-peer-urls", f"http://127.0.0.1:{self.peer_ports[name]}",
                "--initial-advertise-peer-urls", f"http://127.0.0.1:{self.peer_ports[name]}",
                "--initial-cluster", initial, "--initial-cluster-token", self.token,
                "--initial-cluster-state", state, "--max-txn-ops", "1024",
                "--heartbeat-interval", "100", "--election-timeout", "1000"]

    def start_member(self, name: str, state: str = "new") -> None:
        log = open(os.path.join(self.log_dir, f"etcd-{name}.log"), "ab")
        self.procs[name] = subprocess.Popen(self._args(name, state), stdout=log, stderr=subprocess.STDOUT,
                                            stdin=subprocess.DEVNULL)
        log.close()

    def start(self, timeout: float = 30.0) -> "EtcdCluster":
        ports = _free_ports(2 * len(self.names))
        for i, name in enumerate(self.names):
            self.client_ports[name], self.peer_ports[name] = ports[2 * i], ports[2 * i + 1]
        for name in self.names:
            self.start_member(name)
        self.wait_healthy(timeout)
        return self

    def _ctl(self, *args: str, endpoints: str | None = None, timeout: float = 5.0) -> subprocess.CompletedProcess:
        env = dict(os.environ, ETCDCTL_API="3")
        return subprocess.run([ETCDCTL, "--endpoints", endpoints or self.endpoints, "--dial-timeout", "1s",
                               "--command-timeout", "2s", *args], capture_output=True, text=True, env=env,
                              timeout=timeout)

    def wait_healthy(self, timeout: float = 30.0) -> None:
        """Until a leader is elected and a write goes through."""
        deadline = time.monotonic() + timeout
        last = ""
        while time.monotonic() < deadline:
            for name, proc in self.procs.items():
                if proc.poll() is not None:
                    raise RuntimeError(f"etcd member {name} exited ({proc.returncode}); see "
                                       f"{self.log_dir}/etcd-{name}.log")
            try:
                r = self._ctl("put", "/hedgefs-test-probe", "1")
                if r.returncode == 0:
                    return
                last = r.stderr.strip()
            except subprocess.TimeoutExpired:
                last = "etcdctl timed out"
            time.sleep(0.2)
        raise RuntimeError(f"etcd cluster not healthy within {timeout:.0f} s: {last}")

    def leader(self) -> str:
        """The name of the member that is the raft leader now."""
        for name in self.names:
            if self.procs.get(name) is None or self.procs[name].poll() is not None:
                continue
            r = self._ctl("endpoint", "status", "-w", "json", endpoints=f"127.0.0.1:{self.client_ports[name]}")
            if r.returncode == 0 and '"leader"' in r.stdout:
                import json
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

    def restart(self, name: str) -> None:
        self.kill(name)
        self.start_member(name, state="existing")

    def keys(self, prefix: str) -> list[str]:
        r = self._ctl("get", "--prefix", "--keys-only", prefix)
        return [line for line in r.stdout.splitlines() if line.strip()]

    def stop(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGCONT)
                proc.kill()
        for proc in self.procs.values():
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                pass
        shutil.rmtree(self.dir, ignore_errors=True)


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
