"""A local etcd cluster of real processes (Debian's etcd-server, or any ``etcd`` on PATH), for
`hedgefs bench failover` and local HA clusters.

``EtcdMembers(root, count).start()`` runs ``count`` members on free 127.0.0.1 ports (client and
peer), data under ``root`` (or /dev/shm), a unique ``--initial-cluster-token``, the flags the
docs/ha.md recommends (``--max-txn-ops 1024``), waits until a write goes through, and ``stop()``
ends them by pid. Port 2379 is never assumed free. With ``tls`` (security/material.py's DIR/etcd/)
the members speak TLS to clients and peers and accept only certificates of the cluster CA: a
client must show the NameNodes' client certificate (``--client-cert-allowed-hostname``), a peer
the peer certificate (``--peer-cert-allowed-cn``).
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


class EtcdMissing(RuntimeError):
    pass


def free_ports(count: int) -> list[int]:
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


def tls_flags(tls) -> list[str]:
    """etcd's TLS flags for the files of ``tls`` (an EtcdMaterial): docs/ha.md's secure mode."""
    from hedgefs.security.material import ETCD_CLIENT_HOSTNAME, ETCD_PEER_CN

    return ["--cert-file", str(tls.server_cert), "--key-file", str(tls.server_key), "--client-cert-auth",
            "--trusted-ca-file", str(tls.ca), "--client-cert-allowed-hostname", ETCD_CLIENT_HOSTNAME,
            "--peer-cert-file", str(tls.peer_cert), "--peer-key-file", str(tls.peer_key), "--peer-client-cert-auth",
            "--peer-trusted-ca-file", str(tls.ca), "--peer-cert-allowed-cn", ETCD_PEER_CN]


def ctl_flags(tls) -> list[str]:
    """etcdctl's flags to talk to members started with ``tls_flags`` (as a NameNode would)."""
    return ["--cacert", str(tls.ca), "--cert", str(tls.client_cert), "--key", str(tls.client_key)] if tls else []


def member_command(etcd: str, name: str, data_dir: str, client_ports: dict[str, int], peer_ports: dict[str, int],
                   token: str, state: str = "new", tls=None) -> list[str]:
    """The ``etcd`` command line of member ``name`` of a loopback cluster (docs/ha.md's flags)."""
    scheme = "https" if tls else "http"
    initial = ",".join(f"{n}={scheme}://127.0.0.1:{peer_ports[n]}" for n in peer_ports)
    client, peer = f"{scheme}://127.0.0.1:{client_ports[name]}", f"{scheme}://127.0.0.1:{peer_ports[name]}"
    return [*([etcd] + (tls_flags(tls) if tls else [])), "--name", name, "--data-dir", data_dir, "--listen-client-urls", client, "--advertise-client-urls", client,
            "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer, "--initial-cluster", initial,
            "--initial-cluster-token", token, "--initial-cluster-state", state, "--max-txn-ops", "1024",
            "--heartbeat-interval", "100", "--election-timeout", "1000"]


def wait_healthy(etcdctl: str, endpoints: str, timeout_s: float = 30.0, check=lambda: None, tls=None) -> None:
    """Until a write through ``endpoints`` goes through (``check`` raises if a member died)."""
    deadline, last = time.monotonic() + timeout_s, ""
    env = dict(os.environ, ETCDCTL_API="3")
    while time.monotonic() < deadline:
        check()
        try:
            if tls:
                endpoints = ",".join("https://" + e.split("://")[-1] for e in endpoints.split(","))
            r = subprocess.run([etcdctl, *ctl_flags(tls), "--endpoints", endpoints, "--dial-timeout", "1s", "--command-timeout", "2s",
                                "put", "/hedgefs-probe", "1"], capture_output=True, text=True, env=env, timeout=5)
            if r.returncode == 0:
                return
            last = r.stderr.strip()
        except subprocess.TimeoutExpired:
            last = "etcdctl timed out"
        time.sleep(0.2)
    raise RuntimeError(f"etcd not healthy within {timeout_s:.0f} s: {last}")


def binaries() -> tuple[str, str]:
    etcd, etcdctl = shutil.which("etcd"), shutil.which("etcdctl")
    if not etcd or not etcdctl:
        raise EtcdMissing("etcd is not installed (Debian: apt-get install etcd-server etcd-client; as root, "
                          "`make etcd` does it)")
    return etcd, etcdctl


class EtcdMembers:
    def __init__(self, log_dir: str | os.PathLike, count: int = 3, data_root: str | None = None, tls=None):
        self.etcd, self.etcdctl = binaries()
        self.tls = tls
        base = data_root or ("/dev/shm" if os.access("/dev/shm", os.W_OK) else None)
        self.dir = tempfile.mkdtemp(prefix="hedgefs-etcd-", dir=base)
        self.log_dir = str(log_dir)
        self.names = [f"etcd-{i + 1}" for i in range(count)]
        self.procs: dict[str, subprocess.Popen] = {}
        ports = free_ports(2 * count)
        self.client_ports = {n: ports[2 * i] for i, n in enumerate(self.names)}
        self.peer_ports = {n: ports[2 * i + 1] for i, n in enumerate(self.names)}
        self.token = f"hedgefs-{uuid.uuid4().hex[:12]}"

    @property
    def endpoints(self) -> str:
        return ",".join(f"127.0.0.1:{self.client_ports[n]}" for n in self.names)

    def url(self, prefix: str) -> str:
        """What ``hedgefs namenode --meta`` takes."""
        return f"{'etcds' if self.tls else 'etcd'}://{self.endpoints}/{prefix}"

    def start_member(self, name: str, state: str = "new") -> None:
        log = open(os.path.join(self.log_dir, f"{name}.log"), "ab")
        self.procs[name] = subprocess.Popen(
            member_command(self.etcd, name, os.path.join(self.dir, name), self.client_ports, self.peer_ports,
                           self.token, state, self.tls),
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
        log.close()

    def start(self, timeout_s: float = 30.0) -> "EtcdMembers":
        for name in self.names:
            self.start_member(name)
        self.wait_healthy(timeout_s)
        return self

    def wait_healthy(self, timeout_s: float = 30.0) -> None:
        def check():
            for name, proc in self.procs.items():
                if proc.poll() is not None:
                    raise RuntimeError(f"etcd member {name} exited ({proc.returncode}): see {self.log_dir}/{name}.log")
        wait_healthy(self.etcdctl, self.endpoints, timeout_s, check, self.tls)

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
