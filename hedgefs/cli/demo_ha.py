"""`hedgefs demo --ha`: the namespace on etcd, two NameNodes, and a kill -9 of the active.

1. start 3 etcd members, two NameNodes on them (one active, one standby) and 10 DataNodes
2. write a file; open it; start a writer putting small files one after another
3. kill -9 the active NameNode mid-read: the open file reads on (it needs only the DataNodes), the
   writer's next write is acknowledged by the new active; say how long the gap was
4. every file the writer was told was written reads back exactly, through the new active

Exit codes: 0 when every byte read back as written; 1 with one line on stderr when the cluster
does not start, no NameNode becomes active, the writer gets no write acknowledged within
ACK_TIMEOUT_S (before the kill, or after it) or stops on an error, or the bytes read differ.
"""

import hashlib
import os
import tempfile
import threading
import time

from hedgefs.client.errors import HedgefsError
from hedgefs.client.fs import FileSystem
from hedgefs.cluster.launcher import ClusterError, LocalCluster, Options
from hedgefs.proto import hedgefs_pb2 as pb

PATH = "/demo/data.bin"
ACK_TIMEOUT_S = 60.0   # how long the demo waits for the writer's acknowledgements


def say(text: str) -> None:
    print(text, flush=True)


def run_demo_ha(root: str | None, size_mib: int) -> None:
    with tempfile.TemporaryDirectory(prefix="hedgefs-demo-") as tmp:
        cluster = LocalCluster(root or os.path.join(tmp, "cluster"))
        say(f"== starting a local HA cluster in {cluster.root}: 3 etcd members, 2 NameNodes, 10 DataNodes")
        try:
            cluster.up(Options(datanodes=10, namenode_port=0, fsync=False, ha=True))
            _story(cluster, size_mib)
        except ClusterError as err:
            raise HedgefsError(f"demo: {err}") from None
        finally:
            say("== stopping the cluster")
            cluster.down()


def _roles(cluster: LocalCluster) -> dict[str, str]:
    out = {}
    for name in cluster.namenode_names:
        try:
            r = cluster.namenode_rpc(name, "Report", pb.Empty(), timeout=2).namenode
            out[name] = f"{r.role} (epoch {r.epoch})" if r.role == "active" else r.role
        except Exception:   # down, or refusing while it switches roles
            out[name] = "down"
    return out


def _active(cluster: LocalCluster, timeout_s: float = 30.0) -> str:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        found = [n for n, r in _roles(cluster).items() if r.startswith("active")]
        if len(found) == 1:
            return found[0]
        time.sleep(0.1)
    raise HedgefsError(f"demo: no active NameNode within {timeout_s:.0f} s ({_roles(cluster)})")


class Writer(threading.Thread):
    """Small files one after another; when each was acknowledged."""

    def __init__(self, fs: FileSystem):
        super().__init__(daemon=True)
        self.fs, self.acked, self.failed = fs, [], []
        self.stop = threading.Event()
        self.error: BaseException | None = None   # what stopped it, if not ``stop``

    def run(self) -> None:
        i = 0
        try:
            while not self.stop.is_set():
                path, data = f"/demo/w/{i:05d}", hashlib.sha256(str(i).encode()).digest() * 512
                try:
                    self.fs.write_bytes(path, data)
                    self.acked.append((time.monotonic(), path, data))
                except HedgefsError as err:   # a clean error: not acknowledged, not counted as written
                    self.failed.append((path, str(err)))
                i += 1
        except BaseException as err:   # told by wait_acked, as one line
            self.error = err

    def wait_acked(self, count: int, after: float = 0.0, timeout_s: float = ACK_TIMEOUT_S) -> list[float]:
        """When ``count`` writes acknowledged after ``after`` (monotonic) were; HedgefsError when
        not within ``timeout_s`` or when the writer stopped on an error."""
        deadline = time.monotonic() + timeout_s
        while True:
            times = [t for t, _, _ in self.acked if t > after]
            if len(times) >= count:
                return times
            if not self.is_alive():
                why = f"{type(self.error).__name__}: {self.error}" if self.error else "it ended"
                raise HedgefsError(f"demo: the writer stopped ({why}) after {len(self.acked)} acknowledged writes")
            if time.monotonic() >= deadline:
                last = f"; last error: {self.failed[-1][1]}" if self.failed else ""
                raise HedgefsError(f"demo: {len(times)} of {count} writes acknowledged within {timeout_s:.0f} s"
                                   f"{last}")
            time.sleep(0.05)


def _story(cluster: LocalCluster, size_mib: int) -> None:
    data = os.urandom(size_mib << 20)
    active = _active(cluster)
    say(f"   NameNodes: {_roles(cluster)}; clients and DataNodes are given both ({cluster.namenode})")
    with FileSystem(cluster.namenode, credentials=cluster.credentials) as fs:
        fs.mkdir("/demo/w", parents=True)
        fs.write_bytes(PATH, data, overwrite=True)
        say(f"== wrote {PATH}: {size_mib} MiB")
        writer = Writer(fs)
        writer.start()
        writer.wait_acked(3)
        with fs.open(PATH) as f:
            half = len(data) // 2
            first = f.pread(0, half)
            say(f"\n== kill -9 of the active NameNode, {active}, mid-read and mid-write")
            killed_at = time.monotonic()
            cluster.kill(active)
            rest = f.pread(half, len(data) - half)
            say(f"   the open file read on: {len(first) + len(rest) >> 20} MiB, "
                f"{'identical' if first + rest == data else 'DIFFERENT'} (reads need only the DataNodes)")
        try:
            after = writer.wait_acked(1, after=killed_at)
        finally:
            writer.stop.set()
            writer.join(60)
        say(f"   first write acknowledged by the new active {after[0] - killed_at:.2f} s after the kill; "
            f"NameNodes now: {_roles(cluster)}")
        bad = [p for _, p, d in writer.acked if fs.read_bytes(p) != d]
        say(f"   the writer was told {len(writer.acked)} writes succeeded ({len(writer.failed)} failed cleanly, "
            f"not acknowledged): {len(writer.acked) - len(bad)} read back exactly")
        if bad or first + rest != data:
            raise SystemExit("demo: the bytes read differ from the bytes written")
