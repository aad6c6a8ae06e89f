"""Clients of an HA cluster: a list of NameNodes, failover, retry ids (client/namenodes.py).

One real cluster (one SQLite NameNode, today's) for the module; the other addresses of a list
are dead ports (closed: connection refused) or ``StandInStandby``: a test-only gRPC server that
answers every call as a standby does by the contract (proto/hedgefs.proto: FAILED_PRECONDITION
with ``hedgefs-active``) and records what it was sent. It stands in for the real standby
NameNode only until that lands (branch ha-nn); it serves no namespace at all.
"""

import dataclasses
import re
import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import grpc
import pytest

from conftest import assert_one_line_error, client, pattern, run_cli, start_cluster, wait_until
from hedgefs.client.errors import NotFound, Unavailable, UsageError
from hedgefs.client.fs import FileSystem
from hedgefs.client.namenodes import ACTIVE_KEY, CALL_ID_KEY, CLIENT_ID, CLIENT_ID_KEY, call_id, parse_addresses
from hedgefs.proto import GRPC_OPTIONS, hedgefs_pb2_grpc

DATA = pattern(700_000, seed=24)


_HELD: list[socket.socket] = []


def dead_address() -> str:
    """A loopback port nobody listens on: bound and never listening, so connecting is refused,
    and held for the session, so no other server (of a test running beside) can take it."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    _HELD.append(s)
    return f"127.0.0.1:{s.getsockname()[1]}"


class StandInStandby:
    """A test-only stand-in for a standby NameNode (until the real one lands): every NameNode
    method answers FAILED_PRECONDITION with the trailing metadata ``hedgefs-active: <active>``
    ("" = an election is on), and each call's method and metadata are recorded."""

    def __init__(self, active: str):
        self.active = active
        self.calls: list[tuple[str, dict]] = []
        self.lock = threading.Lock()
        self.server = grpc.server(ThreadPoolExecutor(4), options=GRPC_OPTIONS)
        handlers = {name: grpc.unary_unary_rpc_method_handler(self._refuse(name))
                    for name in hedgefs_pb2_grpc.NameNodeServicer.__dict__ if name[0].isupper()}
        self.server.add_generic_rpc_handlers([grpc.method_handlers_generic_handler("hedgefs.NameNode", handlers)])
        self.address = f"127.0.0.1:{self.server.add_insecure_port('127.0.0.1:0')}"
        self.server.start()

    def _refuse(self, method: str):
        def handler(request_bytes, context):
            with self.lock:
                self.calls.append((method, dict(context.invocation_metadata())))
            context.set_trailing_metadata(((ACTIVE_KEY, self.active),))
            context.abort(grpc.StatusCode.FAILED_PRECONDITION, "not the active NameNode")
        return handler

    def of(self, method: str) -> list[dict]:
        with self.lock:
            return [md for m, md in self.calls if m == method]

    def stop(self) -> None:
        self.server.stop(0)


@pytest.fixture(scope="module")
def live(tmp_path_factory):
    c = start_cluster(tmp_path_factory.mktemp("ha-client"), datanodes=3, policy="REPLICATE-3")
    yield c
    c.down()


def test_a_list_whose_first_namenode_is_dead_works_from_the_cli(live):
    nodes = f"{dead_address()},{live.namenode}"
    assert run_cli("mkdir", "-p", "/cli", namenode=nodes).code == 0
    put = run_cli("put", "-", "/cli/f", namenode=nodes, input=DATA)
    assert put.code == 0, put.stderr
    cat = run_cli("cat", "/cli/f", namenode=nodes)
    assert cat.code == 0 and cat.stdout == DATA, cat.stderr
    ls = run_cli("ls", "/cli", "--namenode", nodes)   # the flag takes a list too
    assert ls.code == 0 and b"/cli/f" in ls.stdout, ls.stderr


def test_the_library_fails_over_and_remembers_the_active(live):
    dead = dead_address()
    with FileSystem(f"{dead}, {live.namenode}") as fs:
        assert fs.namenode == f"{dead},{live.namenode}"
        fs.mkdir("/lib", parents=True)
        assert fs.namenodes.active == live.namenode   # the next call goes there first
        fs.write_bytes("/lib/f", DATA)
        assert fs.read_bytes("/lib/f") == DATA
        assert [s.path for s in fs.list("/lib")] == ["/lib/f"]
        with pytest.raises(NotFound):   # the NameNode's own answers are not failover
            fs.stat("/lib/missing")


def test_fsspec_takes_a_list_too(live):
    import fsspec

    hfs = fsspec.filesystem("hedgefs", namenode=f"{dead_address()},{live.namenode}", skip_instance_cache=True)
    try:
        hfs.pipe_file("/fsspec-list", DATA[:1000])
        assert hfs.cat_file("/fsspec-list") == DATA[:1000]
    finally:
        hfs.close()


def test_only_dead_namenodes_fail_in_one_line_with_exit_3_at_the_deadline():
    nodes = f"{dead_address()},{dead_address()}"
    t0 = time.monotonic()
    result = run_cli("ls", "/", namenode=nodes, env={"HEDGEFS_FAILOVER_DEADLINE_S": "2"}, timeout=60)
    took = time.monotonic() - t0
    assert_one_line_error(result, "cannot reach the NameNode at any of", nodes.replace(",", ", "), "tried for ")
    assert result.code == Unavailable.exit_code == 3
    said = float(re.search(r"tried for ([\d.]+) s", result.stderr).group(1))
    assert 2 <= said <= took   # it kept trying until its deadline, and says how long it tried
    with pytest.raises(Unavailable, match="cannot reach the NameNode at any of"):
        with FileSystem(nodes, failover=_deadline(0.5)) as fs:
            fs.stat("/")


def test_one_dead_namenode_fails_at_once_as_before():
    dead = dead_address()
    result = run_cli("ls", "/", namenode=dead, timeout=60)
    assert_one_line_error(result, f"cannot reach the NameNode at {dead} (unavailable)")
    assert result.code == 3


@pytest.mark.parametrize("nodes, fragment", [
    ("127.0.0.1:1,,127.0.0.1:2", "an empty entry"),
    ("127.0.0.1:1,", "an empty entry"),
    ("127.0.0.1:1,127.0.0.1:0", "bad NameNode address '127.0.0.1:0' in"),
    ("127.0.0.1:1,nohost", "bad NameNode address 'nohost' in"),
    ("127.0.0.1:99999", "bad NameNode address '127.0.0.1:99999'"),
])
def test_a_bad_address_list_is_a_usage_error(nodes, fragment):
    for result in (run_cli("ls", "/", namenode=nodes), run_cli("ls", "/", "--namenode", nodes)):
        assert_one_line_error(result, fragment)
        assert result.code == UsageError.exit_code == 2
    with pytest.raises(UsageError, match="bad NameNode address"):
        parse_addresses(nodes)


def test_a_bad_failover_deadline_is_a_usage_error():
    result = run_cli("ls", "/", namenode="127.0.0.1:1", env={"HEDGEFS_FAILOVER_DEADLINE_S": "soon"})
    assert_one_line_error(result, "HEDGEFS_FAILOVER_DEADLINE_S")
    assert result.code == 2


def test_a_standby_redirect_is_followed_at_once(live):
    """The stand-in names the live NameNode as the active: the client goes there, though the
    list's only other entry is a dead port."""
    standby = StandInStandby(active=live.namenode)
    try:
        with FileSystem(f"{standby.address},{dead_address()}", failover=_deadline(30)) as fs:
            fs.mkdir("/redirected", parents=True)
            assert fs.stat("/redirected").is_dir
            assert fs.namenodes.active == live.namenode
        assert len(standby.of("Mkdir")) == 1 and len(standby.of("GetFileInfo")) == 0   # remembered
    finally:
        standby.stop()


def test_a_retried_call_keeps_its_call_id_and_reads_carry_none(live):
    """Two stand-ins in an election (no active known): a Mkdir goes to each in turn, then to the
    live NameNode, with the same call id every time; the next Mkdir has another; a read has none."""
    first, second = StandInStandby(active=""), StandInStandby(active="")
    try:
        with FileSystem(f"{first.address},{second.address},{live.namenode}", failover=_deadline(30)) as fs:
            fs.mkdir("/retried/a", parents=True)
            tries = first.of("Mkdir") + second.of("Mkdir")
            assert len(tries) == 2
            assert {md[CLIENT_ID_KEY] for md in tries} == {CLIENT_ID}
            assert len({md[CALL_ID_KEY] for md in tries}) == 1
            assert fs.stat("/retried/a").is_dir
            fs.namenodes.active = first.address   # as if the live one had failed over back to a standby
            fs.mkdir("/retried/b")
            again = first.of("Mkdir")[-1][CALL_ID_KEY]
            assert again != tries[0][CALL_ID_KEY] and second.of("Mkdir")[-1][CALL_ID_KEY] == again
            fs.namenodes.active = first.address
            fs.stat("/retried/b")
            assert CALL_ID_KEY not in first.of("GetFileInfo")[-1] and CLIENT_ID_KEY not in first.of("GetFileInfo")[-1]
    finally:
        first.stop()
        second.stop()


def test_an_election_that_does_not_end_fails_cleanly():
    standby = StandInStandby(active="")
    try:
        result = run_cli("mkdir", "/x", namenode=standby.address, env={"HEDGEFS_FAILOVER_DEADLINE_S": "1"}, timeout=60)
        assert_one_line_error(result, "no active NameNode among", standby.address, "an election is on")
        assert result.code == 3
    finally:
        standby.stop()


def test_a_standby_in_an_election_beside_a_dead_namenode_says_no_active():
    standby = StandInStandby(active="")
    nodes = f"{dead_address()},{standby.address}"
    try:
        with FileSystem(nodes, failover=_deadline(1)) as fs:
            with pytest.raises(Unavailable, match=f"^no active NameNode among {nodes.replace(',', ', ')} \\("):
                fs.stat("/")
    finally:
        standby.stop()


def test_standbys_that_name_each_other_fail_cleanly_at_the_deadline():
    first, second = StandInStandby(active=""), StandInStandby(active="")
    first.active, second.active = second.address, first.address   # two stale views, a circle
    try:
        with FileSystem(first.address, failover=_deadline(1)) as fs:
            with pytest.raises(Unavailable, match=f"no active NameNode among {first.address} "
                                                  r"\(the active named, .*, did not answer as one; tried for [\d.]+ s\)"):
                fs.mkdir("/circle")
        tries = first.of("Mkdir") + second.of("Mkdir")
        assert 2 < len(tries) < 100   # round the circle, with pauses: no busy loop
        assert len({md[CALL_ID_KEY] for md in tries}) == 1
    finally:
        first.stop()
        second.stop()


def test_an_open_file_reads_on_while_its_namenode_is_frozen(live):
    with client(live.namenode) as fs:
        fs.write_bytes("/frozen-read", DATA)
        with fs.open("/frozen-read") as f:
            live.freeze("namenode")
            try:
                assert f.pread(0, len(DATA)) == DATA
            finally:
                live.thaw("namenode")


def test_a_secure_open_file_renews_its_tokens_without_waiting_on_a_frozen_namenode(tmp_path):
    """Past the renewal time, tokens still good: the read goes on at once with them while the
    renewal waits on the (frozen) NameNode, and the renewal lands once it is back."""
    sc = start_cluster(tmp_path / "secure", "secure", datanodes=3, policy="REPLICATE-3")
    try:
        with client(sc.namenode) as fs:
            fs.write_bytes("/tokens", DATA)
            with fs.open("/tokens") as f:
                assert f.status.renew_tokens_at < f.status.tokens_expire_at
                f.status = dataclasses.replace(f.status, renew_tokens_at=time.monotonic() - 1)
                sc.freeze("namenode")
                try:
                    assert f.pread(0, len(DATA)) == DATA
                    assert not f._renewing.done()   # read done; the renewal still waits on the NameNode
                finally:
                    sc.thaw("namenode")
                wait_until(lambda: fs.stats().counters["token_refreshes"] >= 1, 30, "the renewal, once thawed")
                assert f.status.renew_tokens_at > time.monotonic()
    finally:
        sc.down()


def _deadline(seconds: float):
    from hedgefs.client.config import FailoverConfig

    return FailoverConfig(deadline_s=seconds)


def test_call_ids_increase_within_a_process_and_do_not_repeat():
    """The retry cache keys its rows by (client id, call id): ids that increase make one client's
    rows append to one page of the table's B-tree instead of dirtying a random page each."""
    made = [call_id() for _ in range(2000)]
    assert made == sorted(made) and len(set(made)) == len(made)
    assert len({m[12:] for m in made}) == len(made)   # the random part alone differs too
