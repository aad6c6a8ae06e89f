"""Helpers for tests of DataNodes: a real DataNode process (launch, stop), a blocking data-port
client (``Data``), and the ``faults`` fixture of the modules that slow, stall or freeze a
cluster's DataNodes.
"""

import os
import signal
import socket
import subprocess
import sys

import pytest

from conftest import wait_until
from hedgefs.plumbing import read_port_file
from hedgefs.proto import datatransfer as dt
from hedgefs.proto import hedgefs_pb2 as pb

MiB = 1024 * 1024


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch(tmp_path, *extra, name="dn3", env=None, wait=True):
    """Start a DataNode; returns (process, gRPC port, data port), or (process, port file) unless ``wait``."""
    port_file = tmp_path / f"{name}.port"
    cmd = [sys.executable, "-m", "hedgefs", "datanode", "--id", name, "--port", "0",
           "--data-dir", str(tmp_path / name), "--namenode", f"127.0.0.1:{closed_port()}",
           "--port-file", str(port_file), "--heartbeat-interval-s", "0.2", "--no-fsync", *extra]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=dict(os.environ, **(env or {})))
    return wait_port(proc, port_file) if wait else (proc, port_file)


def wait_port(proc, port_file):
    wait_until(lambda: port_file.exists() or proc.poll() is not None, 20, "the datanode to write its port file")
    if not port_file.exists():
        raise AssertionError(f"datanode exited: {proc.stderr.read()}")
    ports = read_port_file(port_file)
    return proc, ports["rpc"], ports["data"]


def stop(proc):
    proc.send_signal(signal.SIGTERM)
    try:
        assert proc.wait(10) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return proc.stderr.read()


class Data:
    """A blocking data-port client for one DataNode: a connection per call, like a cold client."""

    def __init__(self, port: int):
        self.port = port

    def connect(self, timeout=10.0) -> socket.socket:
        return socket.create_connection(("127.0.0.1", self.port), timeout=timeout)

    def write(self, g, i, data, finalize=True, expected=None, chunk=MiB, end_length=None, generation=0):
        """Stream a unit; its length goes with END (``end_length``, default ``expected`` or the
        data's length); ``expected`` also goes up front when given."""
        with self.connect() as s:
            s.sendall(dt.pack_request(dt.OP_WRITE, g, i, 0, expected or 0, generation=generation))
            dt.recv_response(s, "dn3")
            for p in range(0, len(data), chunk):
                s.sendall(dt.PACKET.pack(dt.PACKET_DATA, len(data[p:p + chunk])) + data[p:p + chunk])
            if not finalize:
                return None
            if end_length is None:
                end_length = len(data) if expected is None else expected
            s.sendall(dt.PACKET.pack(dt.PACKET_END, end_length))
            dt.recv_response(s, "dn3")
            stored = bytearray(8)
            dt.recv_exactly(s, memoryview(stored))
            return dt.STORED.unpack(stored)[0]

    def append(self, g, i, offset, data, generation=0):
        """APPEND ``data`` to a stored unit whose length is ``offset``; its new length."""
        with self.connect() as s:
            return dt.append(s, g, i, offset, data, where="dn3", generation=generation)

    def read(self, g, i, off, n, timeout=10.0, generation=0):
        with self.connect(timeout) as s:
            return bytes(dt.read_range(s, g, i, off, n, where="dn3", generation=generation))


def faults_fixture(cluster_fixture: str):
    """A ``faults`` fixture for the cluster fixture named ``cluster_fixture``: ``faults(dn, **knobs)``
    sets a DataNode's fault knobs; after the test every frozen DataNode is thawed and every knob
    set is cleared."""

    @pytest.fixture
    def faults(request):
        cluster = request.getfixturevalue(cluster_fixture)
        touched = set()

        def set_faults(dn: str, **knobs) -> None:
            touched.add(dn)
            cluster.datanode_rpc(dn, "SetFaults", pb.FaultConfig(**knobs))

        yield set_faults
        for dn in cluster.datanode_ids:
            if cluster.process_state(dn) == "frozen":
                cluster.thaw(dn)
        for dn in touched:
            cluster.datanode_rpc(dn, "ClearFaults", pb.FaultClearRequest())

    return faults
