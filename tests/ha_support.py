"""NameNodes on etcd as real processes, for the HA tests, and a raw gRPC stub to talk to them.

``NameNodeProcess(root, name, meta_url)`` runs ``hedgefs namenode --meta etcd://...`` on a free
port (a port file says which); ``kill``/``freeze``/``thaw`` send signals by pid. The client's own
failover is not used here (it is the client's business): the tests call one NameNode at a time
with ``stub(address)`` and assert what each answers, the redirect included (``not_active``).
"""

from __future__ import annotations

import itertools
import os
import signal
import subprocess
import sys
import time
import uuid

import grpc

from hedgefs.plumbing import read_port_file
from hedgefs.proto import hedgefs_pb2 as pb
from hedgefs.proto import hedgefs_pb2_grpc

from conftest import wait_until

CLIENT_ID = f"test-{uuid.uuid4().hex[:8]}"
_calls = itertools.count(1)


class NameNodeProcess:
    def __init__(self, root, name: str, meta: str, *extra: str, lease_ttl_s: int = 3, env: dict | None = None):
        self.env = {**os.environ, **(env or {})}
        self.root, self.name, self.meta = root, name, meta
        self.data_dir = os.path.join(str(root), name)
        self.port_file = os.path.join(str(root), f"{name}.port")
        self.log_path = os.path.join(str(root), f"{name}.log")
        self.extra = [*extra, "--lease-ttl-s", str(lease_ttl_s)]
        self.proc: subprocess.Popen | None = None
        self.port = 0

    def start(self, port: int | None = None, wait: bool = True) -> "NameNodeProcess":
        if os.path.exists(self.port_file):
            os.remove(self.port_file)
        log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "hedgefs", "namenode", "--port", str(port if port is not None else self.port),
             "--data-dir", self.data_dir, "--meta", self.meta, "--port-file", self.port_file,
             "--dead-interval-s", "5", *self.extra],
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=self.env)
        log.close()
        if wait:
            wait_until(lambda: os.path.exists(self.port_file) or self.proc.poll() is not None, 30,
                       f"{self.name} to serve", detail=self.tail)
            assert self.proc.poll() is None, f"{self.name} exited {self.proc.returncode}: {self.tail()}"
            self.port = read_port_file(self.port_file)["rpc"]
        return self

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def tail(self, lines: int = 15) -> str:
        try:
            with open(self.log_path, errors="replace") as f:
                return "".join(f.readlines()[-lines:])
        except OSError:
            return ""

    def kill(self, sig: int = signal.SIGKILL) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(sig)
            if sig in (signal.SIGKILL, signal.SIGTERM):
                self.proc.wait(20)

    def freeze(self) -> None:
        """SIGSTOP, and wait until the kernel says it is stopped (the signal is asynchronous)."""
        self.proc.send_signal(signal.SIGSTOP)

        def stopped():
            with open(f"/proc/{self.proc.pid}/stat") as f:
                return f.read().rsplit(")", 1)[1].split()[0] == "T"
        wait_until(stopped, 10, f"{self.name} to be stopped")

    def thaw(self) -> None:
        self.proc.send_signal(signal.SIGCONT)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGCONT)
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)


class DataNodeProcess:
    """``hedgefs datanode`` reporting to ``namenode`` (one address, or the list a DataNode takes)."""

    def __init__(self, root, name: str, namenode: str):
        self.root, self.name, self.namenode = root, name, namenode
        self.port_file = os.path.join(str(root), f"{name}.port")
        self.log_path = os.path.join(str(root), f"{name}.log")
        self.proc: subprocess.Popen | None = None

    def start(self) -> "DataNodeProcess":
        if os.path.exists(self.port_file):
            os.remove(self.port_file)
        log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "hedgefs", "datanode", "--id", self.name, "--data-dir",
             os.path.join(str(self.root), self.name), "--namenode", self.namenode, "--port", "0", "--data-port", "0",
             "--heartbeat-interval-s", "0.5", "--no-fsync", "--port-file", self.port_file],
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        log.close()
        wait_until(lambda: os.path.exists(self.port_file) or self.proc.poll() is not None, 30, f"{self.name} to serve")
        assert self.proc.poll() is None, f"{self.name} exited {self.proc.returncode}"
        return self

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()


def live_datanodes(address: str) -> int:
    return len([d for d in stub(address).Report(pb.Empty(), timeout=5).datanodes if d.state == "live"])


def stub(address: str) -> hedgefs_pb2_grpc.NameNodeStub:
    return hedgefs_pb2_grpc.NameNodeStub(grpc.insecure_channel(address))


def ids(call_id: str | None = None) -> tuple:
    """Retry-cache metadata: this test process's client id and a call id (a fresh one, or given)."""
    return (("hedgefs-client-id", CLIENT_ID), ("hedgefs-call-id", call_id or f"c{next(_calls)}"))


def not_active(err: grpc.RpcError) -> str | None:
    """The active a standby names (its trailing metadata), or None if ``err`` is not that refusal."""
    if err.code() != grpc.StatusCode.FAILED_PRECONDITION:
        return None
    md = dict(err.trailing_metadata() or ())
    return md.get("hedgefs-active")


def role(address: str) -> str:
    """"active", "standby:<active it names>", another role (promoting...) or "down"."""
    try:
        n = stub(address).Report(pb.Empty(), timeout=2).namenode
    except grpc.RpcError as err:
        named = not_active(err)
        return "down" if named is None else f"standby:{named}"
    return f"standby:{n.active}" if n.role == "standby" else n.role


def active_of(nodes, timeout: float = 30.0):
    """The one NameNode of ``nodes`` (running ones) that is the active, once there is one."""
    def find():
        up = [n for n in nodes if n.proc is not None and n.proc.poll() is None]
        found = [n for n in up if role(n.address) == "active"]
        return found[0] if len(found) == 1 else None
    return wait_until(find, timeout, "an active NameNode", interval=0.2,
                      detail=lambda: "; ".join(f"{n.name}: {role(n.address)}" for n in nodes))


def mkdirs(address: str, paths) -> list[str]:
    """Mkdir each path on ``address``; the ones acknowledged."""
    done = []
    s = stub(address)
    for path in paths:
        s.Mkdir(pb.MkdirRequest(path=path, parents=True), timeout=5, metadata=ids())
        done.append(path)
    return done


def stat(address: str, path: str) -> pb.FileInfo:
    return stub(address).GetFileInfo(pb.PathRequest(path=path), timeout=5)


def missing(address: str, path: str) -> bool:
    """Does ``address`` answer "not found" for ``path``?"""
    try:
        stat(address, path)
        return False
    except grpc.RpcError as err:
        if err.code() != grpc.StatusCode.NOT_FOUND:
            raise
        return True


def units_on_disk(root, group_ids: set[int]) -> list[str]:
    """The unit files of these groups on the DataNodes' disks (dnN/blocks/XX/GROUP_INDEX_GEN_VER.blk)."""
    return sorted(str(p.relative_to(root)) for p in root.glob("dn*/blocks/*/*.blk")
                  if int(p.name.split("_", 1)[0]) in group_ids)


def wait_exists(address: str, path: str, timeout: float = 15.0) -> None:
    def found():
        try:
            stat(address, path)
            return True
        except grpc.RpcError:
            return False
    wait_until(found, timeout, f"{path} on {address}")


def now() -> float:
    return time.monotonic()


def epochs(root, names) -> list[int]:
    """The highest epoch each DataNode (data dir ``root/name``) has persisted; 0 for none."""
    from hedgefs.datanode.epochs import EPOCH_FILE

    out = []
    for name in names:
        try:
            out.append(int((root / name / EPOCH_FILE).read_text()))
        except (FileNotFoundError, ValueError):
            out.append(0)
    return out
