"""What a new active NameNode must not do before the DataNodes have reported to it, and the retry
cache, on an in-process Namesystem (the same rules run on etcd: ha.py opens this class).

Safe mode (``safe_mode_share``): no deletes and no repairs until that share of the block groups is
readable (k units of a group) from DataNodes that have block-reported to this process; and never a delete to a DataNode before its own
block report (HDFS's stale block contents after a failover).
"""

import pytest

from hedgefs.namenode import retry_cache
from hedgefs.namenode.errors import AlreadyExists
from hedgefs.namenode.model import DeleteUnit

from nn_support import FakeClock, add_datanodes, heartbeat_all, make_namenode, write_file


def _deletes(commands) -> list:
    return [c for c in commands if isinstance(c, DeleteUnit)]


def _report(nn, dn, held):
    nn.block_report(dn, held[dn])


def _held(nn, dn):
    return [(r["group_id"], r["idx"], r["generation"]) for r in nn.db.query(
        "SELECT u.group_id, u.idx, g.generation FROM units u JOIN groups g ON g.id = u.group_id "
        "WHERE u.datanode_id = ?", (dn,))]


def test_a_new_active_deletes_nothing_before_reports_and_leaves_safe_mode_at_the_share(tmp_path):
    clock = FakeClock()
    nn = make_namenode(tmp_path / "nn", clock)
    dns = add_datanodes(nn, 5)
    write_file(nn, "/keep", 4096)
    write_file(nn, "/gone", 4096)
    held = {dn: _held(nn, dn) for dn in dns}   # what each really holds, /gone's units included
    nn.delete("/gone")   # (just before the failover: its deletes are not sent yet)
    nn.close()

    # the same namespace opened anew (as a new active is, on the view of the namespace it caught
    # up with; a start-up's safe mode keeps the same rules) with safe mode at 60 %
    nn = make_namenode(tmp_path / "nn", clock, safe_mode_share=0.6)
    try:
        for dn in dns:
            nn.register(dn, f"127.0.0.1:{40000 + int(dn[2:])}")
        assert nn.in_safe_mode
        assert not any(_deletes(c) for c in heartbeat_all(nn, dns).values())
        for dn in dns[:2]:       # 2 of 5 DataNodes, 40 % of the units: 2 of /keep's, fewer than k = 3
            _report(nn, dn, held)
        nn.tick()
        assert nn.in_safe_mode
        assert (nn.safe_mode_state().groups_readable, nn.safe_mode_state().groups_total) == (0, 1)
        assert not any(_deletes(c) for c in heartbeat_all(nn, dns).values())
        _report(nn, dns[2], held)      # 60 % of the units: k of /keep's, its one group readable
        nn.tick()
        assert not nn.in_safe_mode
        assert (nn.safe_mode_state().groups_readable, nn.safe_mode_state().groups_total) == (1, 1)
        sent = {dn: _deletes(c) for dn, c in heartbeat_all(nn, dns).items()}
        assert all(sent[dn] for dn in dns[:3]), sent        # reported: their deletes go out
        assert not any(sent[dn] for dn in dns[3:]), sent    # not reported yet: nothing deleted there
        _report(nn, dns[3], held)
        clock.advance(60)
        assert _deletes(heartbeat_all(nn, [dns[3]])[dns[3]])
    finally:
        nn.close()


def test_a_retried_create_returns_the_first_answer_and_a_new_call_runs(tmp_path):
    clock = FakeClock()
    nn = make_namenode(tmp_path / "nn", clock)
    try:
        add_datanodes(nn, 5)
        with retry_cache.calling("client-a", "call-1", "Create"):
            first = nn.create("/f")
        with retry_cache.calling("client-a", "call-1", "Create"):
            again = nn.create("/f")
        assert again == first
        with retry_cache.calling("client-a", "call-2", "AddBlockGroup"):
            group = nn.add_block_group(first.file_id)
        with retry_cache.calling("client-a", "call-2", "AddBlockGroup"):
            assert nn.add_block_group(first.file_id) == group
        assert len(nn.blocks.groups(first.file_id)) == 1
        with retry_cache.calling("client-a", "call-3", "Create"):   # another call runs: /f is being written
            with pytest.raises(AlreadyExists):
                nn.create("/f")
        # entries expire with the monitor's pass
        clock.advance(retry_cache.TTL_MS / 1000 + 1)
        nn.tick()
        assert nn.db.one("SELECT COUNT(*) FROM retry_cache")[0] == 0
    finally:
        nn.close()


def test_a_new_active_adopts_the_datanodes_that_reported_to_it_as_a_standby(tmp_path):
    clock = FakeClock()
    nn = make_namenode(tmp_path / "nn", clock)
    dns = add_datanodes(nn, 5)
    nn.close()
    nn = make_namenode(tmp_path / "nn", clock, safe_mode_share=0.9)
    try:
        nn.adopt_datanodes({dn: (f"127.0.0.1:{40000 + int(dn[2:])}", "") for dn in dns})
        nn.create("/at-once")          # placeable at once: no "only 0 are live" after a failover
        first = nn.heartbeat(dns[0], "")
        assert first.reregister         # but it registers and reports to this active once
        nn.register(dns[0], "127.0.0.1:40001")
        assert not nn.heartbeat(dns[0], "").reregister
    finally:
        nn.close()


def test_a_standby_promoted_right_after_its_view_was_rebuilt_still_knows_the_datanodes(tmp_path):
    """A fresh-clone CI run: an etcd member died, the active fail-stopped, re-entered standby (a
    view rebuilt from etcd, knowing no DataNode) and won the election again at once; the DataNodes
    it had heard were not adopted and the next put said "needs 3 live DataNodes, only 0 are live"."""
    from hedgefs.namenode.ha import StandbyDataNodes

    clock = FakeClock()
    nn = make_namenode(tmp_path / "nn", clock)
    dns = add_datanodes(nn, 6)
    nn.close()
    heard = StandbyDataNodes(clock)
    for n, dn in enumerate(dns):   # as the servicer hears them: register, heartbeat, report
        heard.heard(dn, f"127.0.0.1:{40000 + n}", f"127.0.0.1:{41000 + n}")
        heard.heard(dn)            # a BlockReport or UnitStored names no address: the last one stays
    clock.advance(nn.liveness.dead_interval_s + 1)
    for n, dn in enumerate(dns[1:], start=1):
        heard.heard(dn, f"127.0.0.1:{40000 + n}")
    nn = make_namenode(tmp_path / "nn", clock)   # the view, rebuilt: no DataNode heard by it
    try:
        recent = heard.recent(nn.liveness.dead_interval_s)
        assert sorted(recent) == dns[1:]             # dns[0] went quiet: not adopted
        assert recent[dns[1]] == ("127.0.0.1:40001", "127.0.0.1:41001")
        nn.adopt_datanodes(recent)
        nn.create("/at-once")         # was: "needs 5 live DataNodes, only 0 are live"
    finally:
        nn.close()


def test_too_few_registered_right_after_a_start_is_a_refusal_the_client_retries(tmp_path):
    """A restarted (or newly active) NameNode that knows enough DataNodes, of which too few have
    registered with it yet, says so and the client retries (safe mode's "retry"); a dead interval
    later, with them still silent, it is the plain "only N are live" again."""
    from hedgefs.namenode.errors import InvalidArgument
    from hedgefs.namenode.safe_mode import SafeModeRefusal

    clock = FakeClock()
    nn = make_namenode(tmp_path / "nn", clock)
    dns = add_datanodes(nn, 5)
    nn.close()
    nn = make_namenode(tmp_path / "nn", clock)
    try:
        for dn in dns[:2]:
            nn.register(dn, "127.0.0.1:1")
        with pytest.raises(SafeModeRefusal, match=r"2 of the 5 known have registered") as err:
            nn.create("/early")
        assert err.value.retriable
        nn.register(dns[2], "127.0.0.1:1")
        clock.advance(nn.liveness.dead_interval_s + 1)
        heartbeat_all(nn, dns[:3])
        with pytest.raises(InvalidArgument, match=r"needs 5 live DataNodes, only 3 are live$"):
            nn.create("/late")
        for dn in dns[3:]:
            nn.register(dn, "127.0.0.1:1")
        nn.create("/now")
    finally:
        nn.close()


class _Role:
    """An HA role's face to the servicer, around an in-process Namesystem: active, or switching."""

    def __init__(self, nn):
        self.role, self.namesystem, self.epoch = "active", nn, 1

    def writer(self):
        return self.namesystem

    reader = writer

    def revision(self) -> int:
        return 0

    def caught_up(self, revision: int) -> None:
        pass

    def active_address(self) -> str:
        return "127.0.0.1:1"


class _Aborted(Exception):
    pass


class _Context:
    def __init__(self):
        self.code, self.trailing = None, ()

    def invocation_metadata(self):
        return ()

    def set_trailing_metadata(self, md):
        self.trailing = md

    def abort(self, code, details):
        self.code = code
        raise _Aborted(details)


def test_a_closed_database_is_not_active_only_when_the_role_switched(tmp_path, caplog):
    """A ProgrammingError on a healthy active is a bug: INTERNAL, its traceback logged (never a
    NotActive naming the node itself, which clients would retry until their deadline); a call
    whose namesystem the role no longer holds (a demotion or promotion under it) is NotActive."""
    import grpc

    from hedgefs.namenode.servicer import NameNodeServicer
    from hedgefs.proto import hedgefs_pb2 as pb

    nn = make_namenode(tmp_path / "nn", FakeClock())
    nn.db.close()   # any sqlite3.ProgrammingError: "Cannot operate on a closed database"
    role = _Role(nn)
    servicer = NameNodeServicer(None, role=role)

    ctx = _Context()
    with pytest.raises(_Aborted):
        servicer.Mkdir(pb.MkdirRequest(path="/d"), ctx)
    assert ctx.code == grpc.StatusCode.INTERNAL
    assert any(r.exc_info and "Mkdir failed" in r.getMessage() for r in caplog.records)

    class Switching(_Role):   # the call took nn; the role then moved on to another namesystem
        def writer(self):
            self.namesystem = object()
            return nn

    ctx = _Context()
    with pytest.raises(_Aborted):
        servicer.role = Switching(nn)
        servicer.Mkdir(pb.MkdirRequest(path="/d"), ctx)
    assert ctx.code == grpc.StatusCode.FAILED_PRECONDITION and dict(ctx.trailing)["hedgefs-active"]

    role.role = "demoting"   # the role itself is switching
    servicer.role, ctx = role, _Context()
    with pytest.raises(_Aborted):
        servicer.Mkdir(pb.MkdirRequest(path="/d"), ctx)
    assert ctx.code == grpc.StatusCode.FAILED_PRECONDITION
