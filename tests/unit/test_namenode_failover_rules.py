"""What a new active NameNode must not do before the DataNodes have reported to it, and the retry
cache, on an in-process Namesystem (the same rules run on etcd: ha/roles.py promotes this class).

Safe mode (``safe_mode_share``): no deletes and no repairs until that share of the block groups is
readable (k units of a group) from DataNodes that have block-reported to this process; and never a delete to a DataNode before its own
block report (HDFS's stale block contents after a failover).
"""

import pytest

from hedgefs.namenode.blocks.blockmap import GroupCommit
from hedgefs.namenode.errors import AlreadyExists
from hedgefs.namenode.journal import records
from hedgefs.namenode.journal.sqlite import SqliteEngine
from hedgefs.namenode.model import DeleteUnit
from hedgefs.namenode.namespace.retry_cache import TTL_MS

from nn_support import FakeClock, add_datanodes, heartbeat_all, listed_while_deleting, make_namenode, write_file


def _deletes(commands) -> list:
    return [c for c in commands if isinstance(c, DeleteUnit)]


def _report(nn, dn, held):
    nn.block_report(dn, held[dn])


def _held(nn, dn):
    return [(g, i, nn.blocks.generation(g)) for g, i, _group in nn.blocks.units_on(dn, 1 << 30)]


def test_a_new_active_deletes_nothing_before_reports_and_leaves_safe_mode_at_the_share(tmp_path):
    clock = FakeClock()
    nn = make_namenode(tmp_path / "nn", clock)
    dns = add_datanodes(nn, 5)
    write_file(nn, "/keep", 4096)
    write_file(nn, "/gone", 4096)
    held = {dn: _held(nn, dn) for dn in dns}   # what each really holds, /gone's units included
    nn.delete("/gone")   # (just before the failover: its deletes are not sent yet)
    nn.close()

    # the same namespace opened anew (a start-up's safe mode keeps a new active's rules) with safe
    # mode at 60 %: it knows no location, and no delete is owed (deletes are memory only)
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
        first = nn.create("/f", retry=("client-a", "call-1"))
        again = nn.create("/f", retry=("client-a", "call-1"))
        assert again == first
        group = nn.add_block_group(first.file_id, retry=("client-a", "call-2"))
        assert nn.add_block_group(first.file_id, retry=("client-a", "call-2")) == group
        assert len(nn.tree.writing[first.file_id].file.groups) == 1
        with pytest.raises(AlreadyExists):   # another call runs: /f is being written
            nn.create("/f", retry=("client-a", "call-3"))
        # entries expire with the monitor's pass
        clock.advance(TTL_MS / 1000 + 1)
        nn.tick()
        assert len(nn.retry) == 0
    finally:
        nn.close()


def _standby_of(tmp_path, clock, **kwargs):
    """A standby on the namespace in ``tmp_path/nn`` (its journal read, nothing written), and
    the engine it would write once promoted."""
    engine = SqliteEngine(str(tmp_path / "nn" / "namenode.db"))
    return make_namenode(tmp_path / "nn", clock, engine=engine, standby=True, **kwargs), engine


def _active_and_standby(tmp_path, clock):
    """An active with six DataNodes, and a standby of its namespace that they registered with
    too: (active, DataNode ids, standby, the standby's engine once promoted)."""
    nn = make_namenode(tmp_path / "nn", clock)
    dns = add_datanodes(nn, 6)
    sb, engine = _standby_of(tmp_path, clock)
    for dn in dns:
        sb.register(dn, f"127.0.0.1:{40000 + int(dn[2:])}")
    return nn, dns, sb, engine


def test_a_promoted_standby_places_on_the_datanodes_that_reported_to_it_and_asks_them_to_report(tmp_path):
    clock = FakeClock()
    nn = make_namenode(tmp_path / "nn", clock)
    nn.close()
    nn, engine = _standby_of(tmp_path, clock, safe_mode_share=0.9)
    try:
        dns = add_datanodes(nn, 5)    # DataNodes report to every NameNode: the standby too
        assert not nn.heartbeat(dns[0], "").commands
        nn.promote(engine)
        nn.create("/at-once")          # placeable at once: no "only 0 are live" after a failover
        first = nn.heartbeat(dns[0], "")
        assert first.reregister         # but it registers and reports to this active once
        nn.register(dns[0], "127.0.0.1:40001")
        assert not nn.heartbeat(dns[0], "").reregister
    finally:
        nn.close()


def test_a_standby_built_again_knows_the_datanodes_the_last_one_heard(tmp_path):
    """A fresh-clone CI run: an etcd member died, the active fail-stopped, re-entered standby (its
    namespace read again, knowing no DataNode) and won the election again at once; the DataNodes
    it had heard were not known and the next put said "needs 3 live DataNodes, only 0 are live"."""
    clock = FakeClock()
    nn = make_namenode(tmp_path / "nn", clock)
    dns = add_datanodes(nn, 6)
    clock.advance(nn.liveness.dead_interval_s + 1)
    for dn in dns[1:]:
        nn.heartbeat(dn, "")
    nn.close()
    again, engine = _standby_of(tmp_path, clock)
    try:
        again.inherit_datanodes(nn)
        assert again.liveness.live_ids() == dns[1:]     # dns[0] went quiet
        assert again.liveness.address(dns[1]) == "127.0.0.1:40002"
        again.promote(engine)
        again.create("/at-once")         # was: "needs 5 live DataNodes, only 0 are live"
    finally:
        again.close()


def test_too_few_registered_right_after_a_start_is_a_refusal_the_client_retries(tmp_path):
    """A restarted (or newly active) NameNode that knows enough DataNodes, of which too few have
    registered with it yet, says so and the client retries (safe mode's "retry"); a dead interval
    later, with them still silent, it is the plain "only N are live" again."""
    from hedgefs.namenode.errors import InvalidArgument
    from hedgefs.namenode.blocks.safe_mode import SafeModeRefusal

    clock = FakeClock()
    nn = make_namenode(tmp_path / "nn", clock)
    dns = add_datanodes(nn, 5)
    nn.close()
    nn = make_namenode(tmp_path / "nn", clock)
    try:
        for dn in dns[:2]:
            nn.register(dn, "127.0.0.1:1")
        for dn in dns[2:]:   # they heartbeat (and are told to register): known, not yet registered
            assert nn.heartbeat(dn, "127.0.0.1:1").reregister
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

    epoch = 1

    def __init__(self, nn, switching=False):
        self.namesystem, self._switching = nn, switching

    def writer(self):
        return self.namesystem

    reader = namesystem_for_datanodes = writer

    def is_active(self) -> bool:
        return not self._switching

    def switching(self) -> bool:
        return self._switching

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


def test_a_failed_journal_is_unavailable_or_not_active_while_the_role_switches_and_a_bug_is_internal(
        tmp_path, caplog):
    """A journal that failed (fail-stop) is UNAVAILABLE on a NameNode that stays what it is (a
    retry goes elsewhere), a NotActive naming the active while an HA role is switching under the
    call (a demotion), and any other error is a bug: INTERNAL, its traceback logged."""
    import grpc

    from hedgefs.namenode.rpc.servicer import NameNodeServicer
    from hedgefs.proto import hedgefs_pb2 as pb

    nn = make_namenode(tmp_path / "nn", FakeClock())
    try:
        nn.journal.fail("disk gone (injected)")
        servicer = NameNodeServicer(None, role=_Role(nn))
        ctx = _Context()
        with pytest.raises(_Aborted, match="disk gone"):
            servicer.Mkdir(pb.MkdirRequest(path="/d"), ctx)
        assert ctx.code == grpc.StatusCode.UNAVAILABLE

        servicer.role, ctx = _Role(nn, switching=True), _Context()
        with pytest.raises(_Aborted):
            servicer.Mkdir(pb.MkdirRequest(path="/d"), ctx)
        assert ctx.code == grpc.StatusCode.FAILED_PRECONDITION and dict(ctx.trailing)["hedgefs-active"]

        class Broken(_Role):
            def writer(self):
                raise KeyError("a bug")
        servicer.role, ctx = Broken(nn), _Context()
        with pytest.raises(_Aborted):
            servicer.Mkdir(pb.MkdirRequest(path="/d"), ctx)
        assert ctx.code == grpc.StatusCode.INTERNAL
        assert any(r.exc_info and "Mkdir failed" in r.getMessage() for r in caplog.records)
    finally:
        nn.close()


def _promoted_after_a_repair(tmp_path, clock, *, holder_dead: bool):
    """A one-group file (RS-3-2: units on dn1..dn5) written by an active that then went away; a
    standby that heard every DataNode report it; the old active's repair of unit 0 copied onto
    dn6 (its word that unit 0's copy was lost); the standby promoted. Returns (new active,
    engine, group id, generation, {unit index: DataNode}, dn1..dn6)."""
    nn = make_namenode(tmp_path / "nn", clock)
    dns = add_datanodes(nn, 6)
    nn.heartbeat("dn6", "", used_bytes=10**9)        # dn6 takes no unit: the repair's target
    write_file(nn, "/f", 3 * 1024)
    [group] = nn.file_info("/f").groups
    placed = {u.index: u.datanode_id for u in group.units}
    held = {dn: _held(nn, dn) for dn in dns}
    nn.close()
    sb, engine = _standby_of(tmp_path, clock, safe_mode_share=0.9)
    for dn in dns:
        sb.register(dn, f"127.0.0.1:{40000 + int(dn[2:])}")
        _report(sb, dn, held)
    if holder_dead:   # unit 0's holder went quiet: the standby too saw it dead, and the repair moved unit 0
        clock.advance(sb.liveness.dead_interval_s + 1)
        heartbeat_all(sb, [dn for dn in dns if dn != placed[0]])
    sb.unit_stored("dn6", group.id, 0, group.generation)
    sb.promote(engine)
    return sb, engine, group.id, group.generation, placed, dns


def test_a_copy_the_old_active_deleted_is_not_listed_once_its_datanode_reported_to_the_new_one(tmp_path):
    """Chaos seed 33 --ha (a make test on main): a repair's copy the standby had mapped just before
    the failover was deleted meanwhile (the old active judged it surplus); the DataNode's report to
    the new active lacked it, yet the map kept it, "mapped less than 10 s ago: the report may
    predate it", and listed it as unit 0's only live copy: reads got NOT_FOUND. A report a DataNode
    sends after registering with this process cannot predate what was mapped before that."""
    clock = FakeClock()
    nn, _engine, gid, gen, placed, dns = _promoted_after_a_repair(tmp_path, clock, holder_dead=True)
    try:
        assert {u.index: u.datanode_id for u in nn.file_info("/f").groups[0].units}[0] == "dn6"
        nn.register("dn6", "127.0.0.1:40006")
        assert nn.block_report("dn6", []) == {"missing": 1}     # the copy is gone: the report says so
        units = {u.index: u.datanode_id for u in nn.file_info("/f").groups[0].units}
        assert 0 not in units, units                            # not listed: no read goes there
        assert sorted(units) == [1, 2, 3, 4]
        assert listed_while_deleting(nn) == []
    finally:
        nn.close()


def test_a_new_active_deletes_no_copy_as_surplus_on_the_word_of_a_holder_that_has_not_reported(tmp_path):
    """HDFS's postponed over-replicated blocks after a failover: the standby's map says unit 0 is
    on its writer's DataNode, which may have lost it since (the old active repaired unit 0 onto dn6
    because it had). Until that DataNode reports to the new active, its copy is no reason to
    delete dn6's: dn6's copy takes unit 0, and the other goes once its report shows it surplus."""
    clock = FakeClock()
    nn, _engine, gid, gen, placed, dns = _promoted_after_a_repair(tmp_path, clock, holder_dead=False)
    try:
        for dn in dns:
            nn.register(dn, f"127.0.0.1:{40000 + int(dn[2:])}")
        slow = placed[0]
        for dn in dns:                  # everyone reports but unit 0's holder (slow to come back)
            if dn != slow:
                nn.block_report(dn, [(gid, i, gen) for i, d in placed.items() if d == dn] +
                                ([(gid, 0, gen)] if dn == "dn6" else []))
        nn.tick()
        assert not nn.in_safe_mode
        assert not any(_deletes(c) for c in heartbeat_all(nn, dns).values())
        assert {u.index: u.datanode_id for u in nn.file_info("/f").groups[0].units}[0] == "dn6"
        # the holder reports: it had lost unit 0 (nothing to delete), or still has it (surplus: deleted)
        assert nn.block_report(slow, [(gid, 0, gen)]) == {"deleting": 1}
        sent = {dn: _deletes(c) for dn, c in heartbeat_all(nn, dns).items()}
        assert sent == {dn: [DeleteUnit(gid, 0, gen)] if dn == slow else [] for dn in dns}
        assert listed_while_deleting(nn) == []
        assert {u.index: u.datanode_id for u in nn.file_info("/f").groups[0].units}[0] == "dn6"
    finally:
        nn.close()


def _tail(standby, db):
    """The standby applies what the active logged since it last looked (its tailer's work)."""
    engine = SqliteEngine(str(db))
    try:
        for first, _last, data in list(engine.batches(standby.journal.last)):
            for txid, record in records.frames(data, first):
                if txid > standby.journal.last:
                    standby.follow(txid, record)
    finally:
        engine.close()


def _written_group(nn, path):
    """A new file's first block group, every unit's receipt heard by ``nn``: (file id, group)."""
    created = nn.create(path)
    group = nn.add_block_group(created.file_id)
    for u in group.units:
        nn.unit_stored(u.datanode_id, group.id, u.index, group.generation)
    return created.file_id, group


def test_a_standby_behind_the_journal_keeps_the_receipts_of_groups_it_has_not_tailed_yet(tmp_path):
    """Chaos seed 33 --ha: an etcd member frozen held the standby's watch back while the active
    wrote; the DataNodes' receipts reached the standby before the groups did ("a generation this
    namespace never issued": left alone), so it caught up with groups none of whose units it had
    heard of, and once promoted listed no live unit for them (reads failed until the DataNodes
    reported again). As HDFS's standby queues the messages of blocks from its future (pending
    DataNode messages), it keeps them and applies them as it tails their groups."""
    clock = FakeClock()
    nn, dns, sb, engine = _active_and_standby(tmp_path, clock)
    try:
        created = nn.create("/f")
        group = nn.add_block_group(created.file_id)
        for u in group.units:             # every DataNode tells both NameNodes
            nn.unit_stored(u.datanode_id, group.id, u.index, group.generation)
            assert sb.unit_stored(u.datanode_id, group.id, u.index, group.generation) == "ahead"
        nn.complete(created.file_id, 3 * 1024, [GroupCommit(group.id, 3 * 1024, tuple(range(5)))])
        _tail(sb, tmp_path / "nn" / "namenode.db")
        placed = {u.index: u.datanode_id for u in group.units}
        assert {u.index: u.datanode_id for u in sb.file_info("/f").groups[0].units} == placed
        # a repair's copy stored after the group was complete, heard before the standby tailed that
        created = nn.create("/g")
        second = nn.add_block_group(created.file_id)
        for u in second.units:
            nn.unit_stored(u.datanode_id, second.id, u.index, second.generation)
        spare = next(dn for dn in dns if dn not in {u.datanode_id for u in second.units})
        sb.unit_stored(spare, second.id, 0, second.generation)
        nn.complete(created.file_id, 3 * 1024, [GroupCommit(second.id, 3 * 1024, tuple(range(5)))])
        _tail(sb, tmp_path / "nn" / "namenode.db")
        assert sb.blocks.reported_units(sb.blocks.get(second.id)) == {0: spare}   # (a read of it: the active's)
        sb.promote(engine)
        assert {u.index: u.datanode_id for u in sb.file_info("/f").groups[0].units} == placed
    finally:
        sb.close()
        nn.close()


def test_a_standby_keeps_at_most_early_receipts_of_unknown_units_dropping_the_oldest(tmp_path, monkeypatch, caplog):
    """Receipts a standby cannot place (no such unit yet) are kept for its promotion, but not
    without bound: past EARLY_RECEIPTS the oldest go, counted, and said in one log line."""
    from hedgefs.namenode.blocks import early_receipts

    monkeypatch.setattr(early_receipts, "EARLY_RECEIPTS", 3)
    clock = FakeClock()
    nn, dns, sb, engine = _active_and_standby(tmp_path, clock)
    try:
        file_id, group = _written_group(nn, "/f")
        nn.complete(file_id, 3 * 1024, [GroupCommit(group.id, 3 * 1024, tuple(range(5)))])
        _tail(sb, tmp_path / "nn" / "namenode.db")
        unknown = [(group.id, 100 + n, group.generation) for n in range(5)]   # no such unit index
        with caplog.at_level("WARNING", logger="hedgefs.namenode"):
            for n, unit in enumerate(unknown):
                assert sb.unit_stored(dns[n], *unit) == "unknown"
        assert list(sb.early_receipts.kept) == [(dns[n], unknown[n]) for n in (2, 3, 4)]
        assert sb.early_receipts.dropped == 2
        assert sum("dropping the oldest" in m for m in caplog.messages) == 1
        sb.promote(engine)
        assert not sb.early_receipts.kept and sb.early_receipts.dropped == 0
        assert any("2 older ones were dropped" in m for m in caplog.messages)
    finally:
        sb.close()
        engine.close()
        nn.close()


def test_a_standby_forgets_a_copy_heard_ahead_of_its_group_once_its_datanode_says_it_deleted_it(tmp_path):
    """A standby behind the journal keeps the receipt of a copy of a group it has not tailed yet;
    if the active has that copy deleted meanwhile, the DataNode's heartbeat tells the standby too
    (datanode/reports.py): the group it then tails does not list the copy that is gone."""
    clock = FakeClock()
    nn, dns, sb, engine = _active_and_standby(tmp_path, clock)
    try:
        file_id, group = _written_group(nn, "/g")
        spare = next(dn for dn in dns if dn not in {u.datanode_id for u in group.units})
        assert sb.unit_stored(spare, group.id, 0, group.generation) == "ahead"
        sb.heartbeat(spare, "", deleted=[(group.id, 0, group.generation)])
        nn.complete(file_id, 3 * 1024, [GroupCommit(group.id, 3 * 1024, tuple(range(5)))])
        _tail(sb, tmp_path / "nn" / "namenode.db")
        assert sb.blocks.reported_units(sb.blocks.get(group.id)) == {}
    finally:
        sb.close()
        engine.close()
        nn.close()


def test_a_cold_standby_sends_an_unlocated_read_to_the_active_and_once_promoted_answers_retry_until_reports(tmp_path):
    """A standby restarted a moment before the failover has heard no block report: it does not
    answer a read with no location ("no live replica"): as a standby it sends the client to the
    active, as the new active it answers it marked "starting" (a reader asks again) until the
    DataNodes it knew report."""
    from hedgefs.namenode.ha.roles import NotActive

    clock = FakeClock()
    nn = make_namenode(tmp_path / "nn", clock)
    dns = add_datanodes(nn, 5)
    write_file(nn, "/f", 4096 * 3)
    held = {dn: _held(nn, dn) for dn in dns}
    nn.close()
    sb, engine = _standby_of(tmp_path, clock, safe_mode_share=0.9)
    try:
        sb.active_hint = lambda: "127.0.0.1:8020"
        with pytest.raises(NotActive, match="the active is 127.0.0.1:8020"):
            sb.file_info("/f")
        # A lock-free read the moment promote clears the map: redirected or marked, never answered
        # short as is (the wait is armed before ``standby`` is cleared).
        at_adopt, adopt = [], sb.manager.adopt

        def adopt_then_read(heard):
            adopt(heard)
            try:
                at_adopt.append(sb.file_info("/f").locations_pending)
            except NotActive:
                at_adopt.append("redirected")
        sb.manager.adopt = adopt_then_read
        sb.promote(engine)
        assert len(at_adopt) == 1 and at_adopt[0] != ""
        pending = sb.file_info("/f").locations_pending   # answered, marked: a reader asks again
        assert pending.startswith("cannot read /f yet: ") and "(dn1, dn2, dn3, dn4, dn5)" in pending
        for dn in dns[:3]:
            sb.register(dn, f"127.0.0.1:{40000 + int(dn[2:])}")
            _report(sb, dn, held)
        info = sb.file_info("/f")
        assert len(info.groups[0].units) == 3 and info.locations_pending == ""
    finally:
        sb.close()


def _deleted_while_standby_tails_the_write(tmp_path, clock, stored_again: bool = False):
    """A standby that has tailed a group (being written there) hears every unit's receipt; the
    active commits without unit 4 (its receipt late there) and has it deleted; the DataNode tells
    the standby "deleted" before the standby tails the Complete (review-halink F1)."""
    nn, _, sb, engine = _active_and_standby(tmp_path, clock)
    created = nn.create("/f")
    group = nn.add_block_group(created.file_id)
    _tail(sb, tmp_path / "nn" / "namenode.db")
    holder = {u.index: u.datanode_id for u in group.units}[4]
    for u in group.units:
        sb.unit_stored(u.datanode_id, group.id, u.index, group.generation)
        if u.index != 4:
            nn.unit_stored(u.datanode_id, group.id, u.index, group.generation)
    nn.complete(created.file_id, 3 * 1024, [GroupCommit(group.id, 3 * 1024, (0, 1, 2, 3))])
    sb.heartbeat(holder, "", deleted=[(group.id, 4, group.generation)])
    if stored_again:   # the DataNode stores unit 4 again (a repair sent there): its receipt follows the delete
        sb.unit_stored(holder, group.id, 4, group.generation)
    _tail(sb, tmp_path / "nn" / "namenode.db")
    return nn, sb, engine


def test_a_standby_told_a_copy_of_a_group_being_written_is_deleted_does_not_map_it_after_the_commit(tmp_path):
    nn, sb, engine = _deleted_while_standby_tails_the_write(tmp_path, FakeClock())
    try:
        mapped = {u.index: u.datanode_id for u in sb.file_info("/f").groups[0].units}
        assert 4 not in mapped, f"the standby maps unit 4 on {mapped.get(4)}, which told it deleted"
    finally:
        sb.close()
        engine.close()
        nn.close()


def test_promoted_it_plans_the_repair_of_that_copy(tmp_path):
    nn, sb, engine = _deleted_while_standby_tails_the_write(tmp_path, FakeClock())
    try:
        nn.close()
        sb.promote(engine)
        assert 4 not in {u.index for u in sb.file_info("/f").groups[0].units}
        assert (sb.file_info("/f").groups[0].id, 4) in {(r.group_id, r.index) for r in sb.tick()}
    finally:
        sb.close()
        engine.close()



def test_at_a_standby_a_copy_stored_again_after_its_delete_is_mapped_after_the_commit(tmp_path):
    nn, sb, engine = _deleted_while_standby_tails_the_write(tmp_path, FakeClock(), stored_again=True)
    try:
        assert 4 in {u.index for u in sb.file_info("/f").groups[0].units}
    finally:
        sb.close()
        engine.close()
        nn.close()


def test_at_the_active_a_late_deleted_for_a_writers_target_leaves_it_to_the_commit(tmp_path):
    # Every receipt in; then a heartbeat's "deleted" of unit 4 handled late, after the receipt of
    # the unit stored again (a heartbeat past its deadline): the active, which ordered no delete of
    # a target, leaves the group to its writer's commit: the copy that holds bytes stays mapped.
    nn = make_namenode(tmp_path / "nn", FakeClock(), receipt_wait_s=0.1)
    try:
        add_datanodes(nn, 6)
        created = nn.create("/f")
        group = nn.add_block_group(created.file_id)
        holder = {u.index: u.datanode_id for u in group.units}[4]
        for u in group.units:
            nn.unit_stored(u.datanode_id, group.id, u.index, group.generation)
        nn.heartbeat(holder, "", deleted=[(group.id, 4, group.generation)])
        nn.complete(created.file_id, 3 * 1024, [GroupCommit(group.id, 3 * 1024, (0, 1, 2, 3, 4))])
        assert {u.index: u.datanode_id for u in nn.file_info("/f").groups[0].units}.get(4) == holder
        assert not [d for d in nn.blocks.pending_deletes(holder) if d[0] == group.id]
    finally:
        nn.close()
