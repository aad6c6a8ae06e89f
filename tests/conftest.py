"""Fixtures: real local clusters (the same launcher as `hedgefs cluster`) and a CLI runner.

The shared cluster uses RS-6-3-64k and 256 KiB internal blocks, so a stripe is 384 KiB and a
block group 1.5 MiB: every boundary (cell, stripe, group) is a few hundred KiB away.

Secure and insecure: the test modules in SECURE_SUITES (round trips, hedged reads, durability,
the short chaos run) run every test that uses a cluster twice, on an insecure cluster and on a
secure one (TLS on every channel, credentials, block tokens, permissions); the ``security``
fixture says which (``"insecure"`` / ``"secure"``). A test marked ``insecure_only`` (a reason
given) runs once: it checks logic no channel touches (lease timing, the breaker, the scrubber),
and `make test` must stay under 10 minutes. ``run_cli`` and ``client`` know the
credentials of every cluster started here, so a test needs no change to run in both.
"""

import dataclasses
import os
import subprocess
import sys
import threading
import time

import pytest

from hedgefs.cluster.launcher import LocalCluster, Options
from hedgefs.ec.policy import parse_policy

POLICY = "RS-6-3-64k"
BLOCK_SIZE = 256 * 1024
CELL = parse_policy(POLICY).cell_size
STRIPE = 6 * CELL
GROUP = 6 * BLOCK_SIZE

# Receive buffers are poisoned when given back, in this process and every CLI it starts: a
# buffer used after its return is wrong bytes in a test, not luck (client/transport.py).
os.environ["HEDGEFS_POISON_BUFFERS"] = "1"


SECURE_SUITES = {"test_put_get_cat", "test_hedged_reads", "test_durability", "test_chaos"}
# The NameNode address of every cluster started here -> its admin's credential file (secure ones).
CREDENTIALS: dict[str, str] = {}


def pytest_generate_tests(metafunc):
    if "security" in metafunc.fixturenames:
        both = metafunc.module.__name__ in SECURE_SUITES and not metafunc.definition.get_closest_marker("insecure_only")
        modes = ["insecure", "secure"] if both else ["insecure"]
        metafunc.parametrize("security", modes, indirect=True, scope="session")


def pytest_collection_modifyitems(items):
    """The longest modules first: the order make test's workers take them (tests/module_times.py)."""
    import module_times

    module_times.longest_first(items)


@pytest.fixture(scope="session")
def security(request) -> str:
    """``"insecure"`` or ``"secure"``: how the clusters of this test run (see the module docstring)."""
    return getattr(request, "param", "insecure")


def cluster_options(**overrides) -> Options:
    base = Options(datanodes=10, namenode_port=0, policy=POLICY, block_size=BLOCK_SIZE, heartbeat_interval_s=0.3,
                   dead_interval_s=3.0, repair_interval_s=0.3, fsync=False)
    return dataclasses.replace(base, **overrides)


def start_cluster(root, security: str = "insecure", fork: bool = True, **overrides) -> LocalCluster:
    """A cluster whose servers are forked from the fork server (cli_support.py); ``fork=False``:
    ``python -m hedgefs`` each, as ``hedgefs cluster`` starts them."""
    cluster = LocalCluster(root, spawn=fork_server().spawn if fork else None)
    try:
        cluster.up(cluster_options(secure=security == "secure", **overrides))
    except BaseException:
        cluster.down()
        raise
    # Keyed by address, and a dead cluster's port is free for the next one: an insecure cluster on a
    # port a secure one had must not inherit its credential (CI failed on exactly that).
    if cluster.credentials:
        CREDENTIALS[cluster.namenode] = cluster.credentials
    else:
        CREDENTIALS.pop(cluster.namenode, None)
    return cluster


def cli_env(namenode: str) -> dict:
    """The environment of a CLI process for a cluster started here (its credentials if secure)."""
    env = {k: v for k, v in os.environ.items() if k not in ("HEDGEFS_NAMENODE", "HEDGEFS_CREDENTIALS")}
    env["HEDGEFS_NAMENODE"] = namenode
    if namenode in CREDENTIALS:
        env["HEDGEFS_CREDENTIALS"] = CREDENTIALS[namenode]
    return env


def data_socket(namenode: str, location):
    """A blocking connection to the data port of the DataNode holding ``location`` (a client
    UnitLocation) of a cluster started here: TLS, checked to be that DataNode, if it is secure."""
    from hedgefs.proto.datatransfer import connect
    from hedgefs.security import material, tls

    wrap = None
    if namenode in CREDENTIALS:
        ctx = tls.client_context(material.load_credential(CREDENTIALS[namenode]))
        name = material.server_name(material.DATANODE, location.datanode_id)
        wrap = lambda sock: ctx.wrap_socket(sock, server_hostname=name)  # noqa: E731
    return connect(location.data_address, 10, wrap)


def fetch(cluster: LocalCluster, port: int, path: str) -> str:
    """GET http(s)://127.0.0.1:PORT/PATH of a server of ``cluster`` (HTTPS checked against its CA if
    secure; no client certificate: what /metrics and /health serve to anyone)."""
    import ssl
    import urllib.request

    context = None
    if cluster.secure:
        from hedgefs.security.material import load_credential

        context = ssl.create_default_context(cadata=load_credential(cluster.credentials).ca_pem.decode())
        context.check_hostname = False   # the certificate names the server, not 127.0.0.1
    scheme = "https" if cluster.secure else "http"
    with urllib.request.urlopen(f"{scheme}://127.0.0.1:{port}/{path.lstrip('/')}", timeout=10, context=context) as r:
        return r.read().decode()


def client(namenode: str, **kwargs):
    """A FileSystem for a cluster started here, with its credentials if it is secure."""
    from hedgefs.client.fs import FileSystem

    return FileSystem(namenode, credentials=CREDENTIALS.get(namenode), **kwargs)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory, security):
    """One cluster for a module's tests that leave it as they found it. Per module, not per session:
    an idle cluster costs a sixth of a core (heartbeats every 0.3 s), more than starting one anew
    for each module, and a session's clusters would idle beside every later module of a worker."""
    c = start_cluster(tmp_path_factory.mktemp(f"cluster-{security}"), security)
    yield c
    c.down()


@pytest.fixture
def private_cluster(tmp_path, security):
    """A cluster of the test's own, for tests that kill, freeze or slow its processes."""
    c = start_cluster(tmp_path / "cluster", security)
    yield c
    c.down()


@pytest.fixture
def fs(cluster):
    with client(cluster.namenode) as f:
        yield f


@pytest.fixture
def clock():
    """A hand-driven clock for the NameNode unit tests."""
    from nn_support import FakeClock

    return FakeClock()


@pytest.fixture
def nn(tmp_path, clock):
    """A NameNode core on real SQLite in a temp dir, no gRPC, on the fake clock."""
    from nn_support import make_namenode

    namenode = make_namenode(tmp_path / "nn", clock)
    yield namenode
    namenode.close()


def pattern(length: int, seed: int = 0) -> bytes:
    """Bytes whose value depends on their offset (and a seed), non-UTF-8 included."""
    import numpy as np

    offsets = np.arange(length, dtype=np.uint64)
    return ((offsets * 2654435761 + seed * 40503 + (offsets >> 8)) % 251).astype(np.uint8).tobytes()


@dataclasses.dataclass
class Result:
    code: int
    stdout: bytes
    stderr: str


_FORK_SERVER = None


def fork_server():
    """This pytest process's fork server (cli_support.py): CLI calls, and the NameNodes and
    DataNodes of the clusters started here (``LocalCluster(root, spawn=fork_server().spawn)``)."""
    global _FORK_SERVER
    if _FORK_SERVER is None:
        from cli_support import ForkServer

        _FORK_SERVER = ForkServer()
    return _FORK_SERVER


def run_cli(*args: str, namenode: str | None = None, input: bytes | None = None, timeout: float = 120,
            env: dict | None = None, fresh: bool = False) -> Result:
    """The CLI as a user runs it, a process of its own; against a secure cluster started here, with
    its admin's credential (``env`` may give another, or none: ``HEDGEFS_CREDENTIALS=""``). The
    process is forked from a server that has the CLI imported (cli_support.py); ``fresh`` starts
    ``python -m hedgefs`` instead, for a test of start-up itself."""
    full_env = dict(os.environ)
    full_env.pop("HEDGEFS_NAMENODE", None)
    full_env.pop("HEDGEFS_CREDENTIALS", None)
    if namenode:
        full_env["HEDGEFS_NAMENODE"] = namenode
        if namenode in CREDENTIALS:
            full_env["HEDGEFS_CREDENTIALS"] = CREDENTIALS[namenode]
    full_env.update(env or {})
    if fresh:
        proc = subprocess.run([sys.executable, "-m", "hedgefs", *args], input=input, capture_output=True,
                              timeout=timeout, env=full_env)
        return Result(proc.returncode, proc.stdout, proc.stderr.decode(errors="replace"))
    code, stdout, stderr = fork_server().run(list(args), full_env, input, timeout)
    return Result(code, stdout, stderr.decode(errors="replace"))


def assert_one_line_error(result: Result, *fragments: str) -> None:
    assert result.code != 0, f"expected failure, got exit 0; stderr={result.stderr!r}"
    assert "Traceback" not in result.stderr, result.stderr
    lines = [ln for ln in result.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, f"expected one line on stderr, got: {result.stderr!r}"
    for fragment in fragments:
        assert fragment in lines[0], f"{fragment!r} not in {lines[0]!r}"


# ---------------------------------------------------------------------------- waiting

def wait_until(predicate, timeout: float, what: str, interval: float = 0.05, detail=None):
    """Poll `predicate` until it returns something truthy (returned); fail clearly at the deadline."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            extra = f"; {detail()}" if detail else f"; last value {value!r}"
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}{extra}")
        time.sleep(interval)


class PausingSource:
    """A file-like source whose read() blocks at `pause_at` until `go` is set.

    `reached` is set when the writer asks for the byte at `pause_at`: from then on it is stuck
    mid-put, with the streams of the current block group open.
    """

    def __init__(self, data: bytes, pause_at: int):
        self.data, self.pos, self.pause_at = data, 0, pause_at
        self.reached, self.go = threading.Event(), threading.Event()

    def read(self, n: int = -1) -> bytes:
        if self.pos >= self.pause_at and not self.go.is_set():
            self.reached.set()
            if not self.go.wait(60):
                raise TimeoutError("the test never released the paused put")
        end = len(self.data) if n < 0 else min(len(self.data), self.pos + n)
        chunk = self.data[self.pos:end]
        self.pos = end
        return chunk
