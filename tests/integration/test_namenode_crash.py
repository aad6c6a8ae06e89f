"""kill -9 of a NameNode process at every point of its journal and its checkpoints (fault points,
namenode/faults.py: the process kills itself there, no sleeps), then a restart: every change a
caller was told about is there, nothing nobody asked for appeared, and the journal goes on.

  journal:written       a batch INSERTed, its COMMIT not done: the batch is not there
  journal:committed     the batch durable, its callers not told: it may be there (all of it)
  checkpoint:written    an image's chunks stored, not yet the latest: the old image and the journal serve
  checkpoint:published  the new image the latest, the journal not yet truncated: the image, no double apply
  checkpoint:truncated  the journal before the image gone: the image and what follows it

A torn write of the journal's file (a WAL frame cut short, as a power cut mid-write leaves it)
is cut by SQLite at the next open, never applied: the namespace is what the frames before it say.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import grpc
import pytest

from conftest import wait_until
from hedgefs.plumbing import read_port_file
from hedgefs.proto import hedgefs_pb2 as pb
from hedgefs.proto import hedgefs_pb2_grpc


def start(data_dir, tmp_path, name: str, env: dict | None = None, *extra: str):
    port_file = tmp_path / f"{name}.port"
    log = open(tmp_path / f"{name}.log", "ab")
    proc = subprocess.Popen([sys.executable, "-m", "hedgefs", "namenode", "--port", "0", "--data-dir", str(data_dir),
                             "--port-file", str(port_file), "--default-policy", "RS-3-2-1k", *extra],
                            stdout=log, stderr=subprocess.STDOUT, env={**os.environ, **(env or {})})
    log.close()
    wait_until(lambda: port_file.exists() or proc.poll() is not None, 30, f"{name} to serve")
    assert proc.poll() is None, (tmp_path / f"{name}.log").read_text()[-2000:]
    channel = grpc.insecure_channel(f"127.0.0.1:{read_port_file(str(port_file))['rpc']}")
    return proc, channel, hedgefs_pb2_grpc.NameNodeStub(channel)


def mkdirs_until_it_dies(proc, nn, count: int) -> tuple[list[str], list[str]]:
    """Mkdir /p/0, /p/1, ... one at a time (each with retry ids); (asked, acknowledged)."""
    asked, acked = [], []
    for i in range(count):
        path = f"/p/d{i:04d}"
        asked.append(path)
        try:
            nn.Mkdir(pb.MkdirRequest(path=path, parents=True), timeout=10,
                     metadata=(("hedgefs-client-id", "crash-test"), ("hedgefs-call-id", f"c{i}")))
        except grpc.RpcError as err:
            assert err.code() == grpc.StatusCode.UNAVAILABLE, err
            break
        acked.append(path)
    proc.wait(30)
    return asked, acked


@pytest.mark.parametrize("point,extra", [
    ("journal:written:30", ()),
    ("journal:committed:30", ()),
    ("checkpoint:written", ("--checkpoint-every", "25")),
    ("checkpoint:published", ("--checkpoint-every", "25")),
    ("checkpoint:truncated", ("--checkpoint-every", "25")),
])
def test_kill_9_at_a_fault_point_loses_nothing_acknowledged(tmp_path, point, extra):
    data_dir = tmp_path / "nn"
    proc, channel, nn = start(data_dir, tmp_path, "crash", {"HEDGEFS_NAMENODE_CRASH": point}, *extra)
    try:
        asked, acked = mkdirs_until_it_dies(proc, nn, 400)
    finally:
        channel.close()
    assert proc.returncode == -signal.SIGKILL, f"it did not die at {point}"
    assert 0 < len(acked) < len(asked)
    proc, channel, nn = start(data_dir, tmp_path, "again", None, *extra)
    try:
        listed = [e.path for e in nn.List(pb.ListRequest(path="/p", limit=10000), timeout=10).entries]
        assert set(acked) <= set(listed), f"lost: {sorted(set(acked) - set(listed))}"
        assert set(listed) <= set(asked), f"appeared: {sorted(set(listed) - set(asked))}"
        if point.startswith("journal:written"):
            assert asked[len(acked)] not in listed   # the batch that was being written is not there
        # a retry of the call the crash left unanswered gets its answer, and the journal goes on
        nn.Mkdir(pb.MkdirRequest(path=asked[len(acked)], parents=True), timeout=10,
                 metadata=(("hedgefs-client-id", "crash-test"), ("hedgefs-call-id", f"c{len(acked)}")))
        nn.Mkdir(pb.MkdirRequest(path="/p/after"), timeout=10)
    finally:
        channel.close()
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(20) == 0
    proc, channel, nn = start(data_dir, tmp_path, "third")   # and once more, from the clean shutdown's image
    try:
        listed = {e.path for e in nn.List(pb.ListRequest(path="/p", limit=10000), timeout=10).entries}
        assert set(acked) | {asked[len(acked)], "/p/after"} <= listed
    finally:
        channel.close()
        proc.send_signal(signal.SIGTERM)
        proc.wait(20)


def test_a_torn_journal_tail_is_cut_never_applied(tmp_path):
    data_dir = tmp_path / "nn"
    proc, channel, nn = start(data_dir, tmp_path, "first")
    try:
        for i in range(50):
            nn.Mkdir(pb.MkdirRequest(path=f"/t/d{i:03d}", parents=True), timeout=10)
    finally:
        channel.close()
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
    wal = data_dir / "namenode.db-wal"
    size = wal.stat().st_size
    assert size > 4096, "the journal's batches should still be in SQLite's WAL"
    with open(wal, "r+b") as f:   # the last frame torn: its end (and its checksum) never reached the disk
        f.truncate(size - 100)
    proc, channel, nn = start(data_dir, tmp_path, "again")
    try:
        listed = [e.path for e in nn.List(pb.ListRequest(path="/t", limit=1000), timeout=10).entries]
        assert listed == [f"/t/d{i:03d}" for i in range(len(listed))]   # a prefix of what was made, in order
        assert 40 <= len(listed) < 50
        nn.Mkdir(pb.MkdirRequest(path="/t/after"), timeout=10)
    finally:
        channel.close()
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(20) == 0
