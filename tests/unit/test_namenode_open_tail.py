"""An EC file's open tail at the NameNode (file_changes.sync_length, issue 45 item 1), without
gRPC: whose tail may grow the file, when it is being written, how long it may get."""

import pytest

from hedgefs.namenode.errors import FailedPrecondition, InvalidArgument, NameNodeError
from hedgefs.namenode.blocks.manager import FULL_SCAN_S
from hedgefs.namenode.model import DeleteUnit, RepairUnit
from nn_support import add_datanodes, generation, heartbeat_all, make_namenode, state, stored

FULL = 3 * 4096   # RS-3-2-1k, 4 KiB blocks: a group's data


@pytest.fixture
def nn(tmp_path, clock):
    namenode = make_namenode(tmp_path / "nn", clock)
    add_datanodes(namenode, 8)
    yield namenode
    namenode.close()


def tailed(nn, path: str = "/f", length: int = 5000):
    """A write of ``path`` hsynced once (Sync): ``length`` bytes committed, an open tail placed
    and every replica of it reported stored. Returns (file id, the tail)."""
    created = nn.create(path)
    group = nn.add_block_group(created.file_id)
    synced = nn.sync(created.file_id, path, length, [stored(nn, group, length)])
    assert synced.tail is not None and synced.tail.policy == "REPLICATE-3" and len(synced.tail.units) == 3
    stored(nn, synced.tail, 0)   # (the APPENDs at 0 that create its replicas, receipted)
    tailed.synced = synced
    return created.file_id, synced.tail


def test_a_zombie_writers_hsync_is_refused_under_the_next_writers_lease(nn):
    """W1 hsyncs on its tail, its lease is recovered and W2 (same user, same file id: an append)
    writes the file: W1's SyncLength on its old tail, still the file's last group, is refused."""
    file_id, tail = tailed(nn)
    nn.sync_length(file_id, 6000, tail.id)
    assert nn.recover_lease("/f")
    nn.append("/f")
    with pytest.raises(FailedPrecondition, match="not the open tail of the write"):
        nn.sync_length(file_id, 7000, tail.id)
    info = nn.file_info("/f")
    assert info.entry.length == 6000 and info.groups[-1].id == tail.id


def test_a_live_writes_tail_is_not_repaired_until_the_write_ends(nn, clock):
    """After its first SyncLength the tail is the file's last group, but its writer still appends
    to the replicas it was given: a copy made now would be frozen at an old length. A DataNode
    holding one leaves: nothing is copied while the write goes on; once it ended, the copy is."""
    file_id, tail = tailed(nn)
    nn.sync_length(file_id, 6000, tail.id)
    leaving = tail.units[0].datanode_id
    nn.decommission(leaving)
    assert [r for r in nn.tick() if r.group_id == tail.id] == []
    assert nn.fsck("/f").status == "HEALTHY"
    assert nn.recover_lease("/f")                      # the write ends: the tail is the file's, at 6000
    clock.advance(FULL_SCAN_S + 1)
    [planned] = [r for r in nn.tick() if r.group_id == tail.id]
    commands = [c for c in nn.heartbeat(planned.target, "").commands if isinstance(c, RepairUnit)]
    assert [(c.group_id, c.index, c.policy, c.group_length) for c in commands] == \
        [(tail.id, 0, "REPLICATE-3", 6000)]


def test_a_tail_never_holds_a_whole_group(nn):
    """A full tail would be kept as a group of the file by the next append (never sealed): the
    bytes that complete a group go by a Sync."""
    file_id, tail = tailed(nn)
    with pytest.raises(InvalidArgument, match="outside its open tail"):
        nn.sync_length(file_id, FULL, tail.id)
    nn.sync_length(file_id, FULL - 1, tail.id)
    assert nn.file_info("/f").entry.length == FULL - 1


def test_the_first_hsync_on_the_tail_may_add_nothing(nn, tmp_path, clock):
    """An hsync right after the Sync (nothing new, the replicas hold the file's last bytes) swaps
    the tail in at the same length, once; again is a retry: nothing changes. Replay agrees."""
    file_id, tail = tailed(nn)
    before = nn.file_info("/f").groups[-1].id
    nn.sync_length(file_id, 5000, tail.id)
    info = nn.file_info("/f")
    assert info.entry.length == 5000 and before != tail.id and info.groups[-1].id == tail.id
    nn.sync_length(file_id, 5000, tail.id)
    with pytest.raises(NameNodeError):
        nn.sync_length(file_id, 4999, tail.id)
    live = state(nn)
    nn.close()
    again = make_namenode(tmp_path / "nn", clock)
    assert state(again) == live and again.blocks.open_tails == {tail.id}
    again.close()


def tail_deletes(nn, group) -> dict:
    """The DeleteUnits of ``group`` each of its DataNodes gets at its next heartbeat."""
    return {u.datanode_id: [(c.group_id, c.index) for c in nn.heartbeat(u.datanode_id, "").commands
                            if isinstance(c, DeleteUnit) and c.group_id == group.id] for u in group.units}


@pytest.mark.parametrize("length, units", [(6000, [0, 1, 2, 3, 4]), (6100, [0, 1, 2])],
                         ids=["whole", "past-the-last-hsync"])
def test_the_seal_takes_its_group_and_the_tails_replicas_go(nn, length, units):
    """close's Complete seals the tail: the group the writer wrote from the tail's start takes its
    place, in one record, and the tail's replicas are deleted at their DataNodes' next heartbeats;
    when that group is whole, or when the tail does not hold every byte of it (close could not
    tail-sync the last bytes: it is then taken with k units, as any Complete's group is; a refusal
    would end the writer on a routine DataNode loss, the review's F8)."""
    file_id, tail = tailed(nn)
    nn.sync_length(file_id, 6000, tail.id)
    last = tailed.synced.created.first_group   # the group the write rewrites the tail's bytes into
    nn.complete(file_id, length, [stored(nn, last, length, units)])
    info = nn.file_info("/f")
    assert info.entry.length == length and [g.id for g in info.groups] == [last.id]
    assert nn.blocks.get(tail.id) is None and not nn.blocks.open_tails
    assert tail_deletes(nn, tail) == {u.datanode_id: [(tail.id, u.index)] for u in tail.units}


def test_the_hsynced_bytes_survive_a_loss_after_a_seal_with_k_units(nn, clock, tmp_path):
    """Issue 45's F4 (review-opentail2 R1): hsynced on 3 replicas (tolerance 2), then closed while
    the writer's group over the same bytes has only k = 3 of RS-3-2's 5 units (tolerance 0). The
    Complete keeps the tail as the file's last group (REPLICATE-3, in its own code) and the short
    group goes: a DataNode of that group lost afterwards costs nothing. Replay agrees."""
    file_id, tail = tailed(nn)
    nn.sync_length(file_id, 6000, tail.id)
    last = tailed.synced.created.first_group
    nn.complete(file_id, 6000, [stored(nn, last, 6000, [0, 1, 2])])
    info = nn.file_info("/f")
    assert info.entry.length == 6000 and [(g.id, g.policy) for g in info.groups] == [(tail.id, "REPLICATE-3")]
    assert not nn.blocks.open_tails and nn.blocks.get(last.id) is None
    assert tail_deletes(nn, tail) == {u.datanode_id: [] for u in tail.units}
    assert tail_deletes(nn, last) == {u.datanode_id: [(last.id, u.index)] for u in last.units}
    lost = next(u.datanode_id for u in last.units if u.index == 0)
    for _ in range(5):   # past the dead interval, the others heartbeating
        clock.advance(10)
        heartbeat_all(nn, [f"dn{i}" for i in range(1, 9) if f"dn{i}" != lost])
    nn.tick()
    assert not nn.liveness.is_live(lost) and nn.fsck("/f").status != "CORRUPT"
    live = state(nn)
    nn.close()
    again = make_namenode(tmp_path / "nn", clock)
    assert state(again) == live
    again.close()


def test_a_tail_no_safer_than_the_short_group_is_sealed(nn, clock):
    """The Complete keeps whichever form has more redundancy: a tail with one of its 3 replicas'
    DataNodes dead (tolerance 1) against a group of 4 of 5 units (tolerance 1): the group."""
    file_id, tail = tailed(nn)
    nn.sync_length(file_id, 6000, tail.id)
    dead = tail.units[0].datanode_id
    for _ in range(5):   # past the dead interval, the others heartbeating
        clock.advance(10)
        heartbeat_all(nn, [f"dn{i}" for i in range(1, 9) if f"dn{i}" != dead])
    assert not nn.liveness.is_live(dead)
    last = tailed.synced.created.first_group
    units = [u.index for u in last.units if u.datanode_id != dead][:4]
    nn.complete(file_id, 6000, [stored(nn, last, 6000, units)])
    assert [g.id for g in nn.file_info("/f").groups] == [last.id] and nn.blocks.get(tail.id) is None


def test_a_group_whose_late_stream_still_stored_its_unit_is_whole_and_sealed(nn):
    """review-seal S2: the writer dropped unit 4's stream as late and claims units 0-3, but its
    DataNode stored the unit and reported it: the group is whole in the NameNode's view, so the
    Complete seals with it (RS-3-2) and the tail's 3 replicas go, not the other way round."""
    from hedgefs.namenode.blocks.blockmap import GroupCommit

    file_id, tail = tailed(nn)
    nn.sync_length(file_id, 6000, tail.id)
    last = tailed.synced.created.first_group
    stored(nn, last, 6000)   # every unit reported stored by its DataNode
    nn.complete(file_id, 6000, [GroupCommit(last.id, 6000, (0, 1, 2, 3))])
    assert [(g.id, g.policy) for g in nn.file_info("/f").groups] == [(last.id, "")]
    assert nn.blocks.get(tail.id) is None and sorted(nn.blocks.reported_units(nn.blocks.get(last.id))) == \
        [0, 1, 2, 3, 4]


def test_a_group_claimed_whole_with_a_dead_datanode_loses_to_a_live_tail(nn, clock):
    """review-seal S2, the other way: every unit stored and reported, then a DataNode of the
    group (none of the tail's) declared dead before the Complete: the group has 4 live units
    (tolerance 1), the tail 3 live replicas (tolerance 2): the tail is kept."""
    file_id, tail = tailed(nn)
    nn.sync_length(file_id, 6000, tail.id)
    last = tailed.synced.created.first_group
    commit = stored(nn, last, 6000)
    tail_datanodes = {u.datanode_id for u in tail.units}
    dead = next(u.datanode_id for u in last.units if u.datanode_id not in tail_datanodes)
    for _ in range(5):   # past the dead interval, the others heartbeating
        clock.advance(10)
        heartbeat_all(nn, [f"dn{i}" for i in range(1, 9) if f"dn{i}" != dead])
    assert not nn.liveness.is_live(dead)
    nn.complete(file_id, 6000, [commit])
    assert [(g.id, g.policy) for g in nn.file_info("/f").groups] == [(tail.id, "REPLICATE-3")]


def test_an_addgroup_without_a_code_is_the_record_older_namenodes_read():
    """A group in its file's code is journaled as before groups had codes (a standby not yet
    upgraded reads it); a tail's carries its code, and both read back as they were. So is a
    SyncLength that drops no replica, as before it could."""
    import msgpack

    from hedgefs.namenode.journal import records as r

    plain = r.AddGroup(7, 9, ("dn1", "dn2"), ("client", "call"))
    tail = r.AddGroup(7, 10, ("dn3",), None, "REPLICATE-3")
    assert msgpack.unpackb(r.encode(plain), use_list=False, raw=False) == (4, 7, 9, ("dn1", "dn2"), ("client", "call"))
    assert r.decode(r.encode(plain)) == plain and r.decode(r.encode(tail)) == tail
    synced = r.SyncLength(7, 10, 6000, 1)   # (review-final F1: a SyncLength that drops no replica)
    dropped = r.SyncLength(7, 10, 6100, 2, ((2, "dn3"),))
    assert msgpack.unpackb(r.encode(synced), use_list=False, raw=False) == (20, 7, 10, 6000, 1)
    assert r.decode(r.encode(synced)) == synced and r.decode(r.encode(dropped)) == dropped


class _Context:
    """A gRPC call's context, as the servicer uses it."""

    def __init__(self):
        self.code = None

    def invocation_metadata(self):
        return ()

    def set_trailing_metadata(self, md):
        pass

    def abort(self, code, details):
        self.code = code
        raise _Refused(details)


class _Refused(Exception):
    pass


def test_a_client_that_does_not_read_groups_in_their_own_code_is_refused_a_tailed_file(nn):
    """An older client reads every group in the file's code: a tail's replicas as RS cells (wrong
    bytes). It does not say ``group_codes``: its GetFileInfo (and StatMany item) of a file whose
    last group is a tail fails closed with FailedPrecondition naming the upgrade; a client that
    says so gets the tail with its code; the same old client reads a file without a tail."""
    import grpc

    from hedgefs.namenode.rpc.servicer import NameNodeServicer
    from hedgefs.proto import hedgefs_pb2 as pb

    file_id, tail = tailed(nn)
    nn.sync_length(file_id, 6000, tail.id)
    servicer, ctx = NameNodeServicer(nn), _Context()
    with pytest.raises(_Refused, match="upgrade the client"):
        servicer.GetFileInfo(pb.PathRequest(path="/f"), ctx)
    assert ctx.code == grpc.StatusCode.FAILED_PRECONDITION
    info = servicer.GetFileInfo(pb.PathRequest(path="/f", group_codes=True), _Context())
    assert info.length == 6000 and [g.policy for g in info.groups] == ["REPLICATE-3"]
    nn.complete(nn.create("/plain").file_id, 0, [])
    many = servicer.StatMany(pb.StatManyRequest(paths=[pb.PathRequest(path="/f"), pb.PathRequest(path="/plain")]),
                             _Context())
    assert many.results[0].code == grpc.StatusCode.FAILED_PRECONDITION.value[0]
    assert "upgrade the client" in many.results[0].message and many.results[1].code == 0
    assert servicer.GetFileInfo(pb.PathRequest(path="/plain"), _Context()).path == "/plain"


def test_a_sync_places_the_next_tail_off_the_datanodes_that_failed_the_last(nn):
    """A replica that refused an APPEND gives the tail up; the writer's Sync names its DataNode and
    the new tail is placed without it (one that keeps refusing would cost a Sync per hsync). Too
    few DataNodes without the excluded: the tail goes where placement puts it, the Sync is taken."""
    file_id, tail = tailed(nn)
    everyone = tuple(f"dn{i}" for i in range(1, 9))
    failed = everyone[:5]   # (five: the three left are the only place for the tail)
    last = tailed.synced.created.first_group
    again = nn.sync(file_id, "/f", 5100, [stored(nn, last, 5100)], exclude=failed)
    assert again.tail is not None and {u.datanode_id for u in again.tail.units} == set(everyone[5:])
    last = again.created.first_group
    crowded = nn.sync(file_id, "/f", 5200, [stored(nn, last, 5200)], exclude=everyone[:7])
    assert crowded.tail is not None and len(crowded.tail.units) == 3
    assert nn.file_info("/f").entry.length == 5200


def test_a_tail_is_placed_where_it_can_grow_to_a_group(nn):
    """A tail's replica grows to a group's data less a byte (RS-3-2-1k, 4 KiB blocks: 12 KiB),
    not one block: it goes only to DataNodes with room for that. Where no m + 1 have it, the Sync
    is taken without a tail (its Complete is logged already) and the write's hsyncs stay Syncs."""
    from hedgefs.namenode.model import DataNodeStats

    def room(roomy: set[str]) -> None:
        for i in range(1, 9):
            dn = f"dn{i}"
            nn.heartbeat(dn, "", stats=DataNodeStats(capacity_bytes=1 << 30,
                                                     remaining_bytes=1 << 20 if dn in roomy else 2 * 4096))

    created = nn.create("/f")
    group = nn.add_block_group(created.file_id)
    room({"dn2", "dn5", "dn7"})
    synced = nn.sync(created.file_id, "/f", 5000, [stored(nn, group, 5000)])
    assert {u.datanode_id for u in synced.tail.units} == {"dn2", "dn5", "dn7"}
    room({"dn2", "dn5"})
    again = nn.sync(created.file_id, "/f", 5100, [stored(nn, synced.created.first_group, 5100)])
    assert again.tail is None and again.created.first_group is not None
    assert nn.file_info("/f").entry.length == 5100


def test_a_shorter_tail_length_is_refused_and_a_repeated_one_is_a_retry(nn):
    file_id, tail = tailed(nn)
    nn.sync_length(file_id, 6000, tail.id)
    with pytest.raises(FailedPrecondition, match="length 5500 would lose some"):
        nn.sync_length(file_id, 5500, tail.id)
    nn.sync_length(file_id, 6000, tail.id)   # a retry of the last: taken, nothing changed
    assert nn.file_info("/f").entry.length == 6000


def test_the_first_tail_length_is_refused_while_a_replica_is_not_reported_stored(nn):
    # The replicas' DataNode died after its APPEND at 0 (no receipt): the tail is no use, and the
    # writer's hsync becomes a Sync (client/file_writer.py); the file keeps what the Sync committed.
    created = nn.create("/f")
    group = nn.add_block_group(created.file_id)
    tail = nn.sync(created.file_id, "/f", 5000, [stored(nn, group, 5000)]).tail
    stored(nn, tail, 0, indexes=[u.index for u in tail.units][:2])
    with pytest.raises(FailedPrecondition, match="has 2 of its 3 replicas reported stored"):
        nn.sync_length(created.file_id, 6000, tail.id)
    assert nn.file_info("/f").entry.length == 5000


@pytest.mark.parametrize("checkpoint", [True, False], ids=["from-image", "replayed"])
def test_a_sync_length_that_names_its_replicas_drops_the_others_and_the_complete_counts_those_left(
        nn, clock, tmp_path, checkpoint):
    """review-final F1: close goes on without a replica whose DataNode failed in the write; its
    SyncLength names the replicas that took the bytes. The NameNode drops the other from the tail
    in the same record (its copy deleted at its DataNode's next heartbeat, never repaired to nor
    mapped again on its report, after a restart too: from the image or the journal) and the
    Complete weighs the replicas left (2 of 3: tolerance 1) against the short group (k = 3 of 5:
    tolerance 0): the tail is kept."""
    file_id, tail = tailed(nn)
    nn.sync_length(file_id, 6000, tail.id)
    by_index = {u.index: u.datanode_id for u in tail.units}
    with pytest.raises(FailedPrecondition, match="has no replica \\[7\\]"):
        nn.sync_length(file_id, 6100, tail.id, replicas=(0, 7))
    nn.sync_length(file_id, 6100, tail.id, replicas=(0, 1))
    assert sorted(nn.blocks.units(nn.blocks.get(tail.id))) == [0, 1]
    assert nn.file_info("/f").entry.length == 6100
    assert tail_deletes(nn, tail) == {d: [(tail.id, 2)] if i == 2 else [] for i, d in by_index.items()}
    with pytest.raises(FailedPrecondition, match="has no replica \\[2\\]"):
        nn.sync_length(file_id, 6200, tail.id, replicas=(0, 1, 2))
    last = tailed.synced.created.first_group
    nn.complete(file_id, 6100, [stored(nn, last, 6100, [0, 1, 2])])
    assert [(g.id, g.policy) for g in nn.file_info("/f").groups] == [(tail.id, "REPLICATE-3")]
    clock.advance(FULL_SCAN_S + 1)
    [planned] = [r for r in nn.tick() if r.group_id == tail.id]
    assert planned.index == 2 and planned.target != by_index[2]
    live = state(nn)
    nn.close(checkpoint=checkpoint)
    again = make_namenode(tmp_path / "nn", clock)
    assert state(again) == live and again.blocks.left_out == {tail.id: {(2, by_index[2])}}
    add_datanodes(again, 8)
    for i, d in by_index.items():   # every DataNode reports its copy after the restart
        again.block_report(d, [(tail.id, i, generation(again, tail.id))])
    assert sorted(again.blocks.units(again.blocks.get(tail.id))) == [0, 1]
    again.close()


def test_a_tail_left_no_safer_than_the_short_group_is_sealed(nn):
    """The same SyncLength, but the group lost one unit (4 of 5: tolerance 1): the tail's 2
    replicas left (tolerance 1) hold no more, and the Complete seals with the group."""
    file_id, tail = tailed(nn)
    nn.sync_length(file_id, 6000, tail.id)
    nn.sync_length(file_id, 6100, tail.id, replicas=(1, 2))
    last = tailed.synced.created.first_group
    nn.complete(file_id, 6100, [stored(nn, last, 6100, [0, 1, 2, 3])])
    assert [(g.id, g.policy) for g in nn.file_info("/f").groups] == [(last.id, "")]
    assert nn.blocks.get(tail.id) is None


def _left_out_and_repaired(nn, clock):
    """The F1 close (unit 2's replica on x left out, the tail kept), then unit 2 repaired onto t
    (its receipt heard): (file id, tail, {index: DataNode} at close, x, t, generation)."""
    file_id, tail = tailed(nn)
    nn.sync_length(file_id, 6000, tail.id)
    by_index = {u.index: u.datanode_id for u in tail.units}
    nn.sync_length(file_id, 6100, tail.id, replicas=(0, 1))
    last = tailed.synced.created.first_group
    nn.complete(file_id, 6100, [stored(nn, last, 6100, [0, 1, 2])])
    clock.advance(FULL_SCAN_S + 1)
    [planned] = [r for r in nn.tick() if r.group_id == tail.id]
    gen = generation(nn, tail.id)
    nn.units_stored(planned.target, [(tail.id, 2, gen)])
    return file_id, tail, by_index, by_index[2], planned.target, gen


@pytest.mark.parametrize("after", ["from-image", "replayed", "standby"])
def test_a_move_onto_the_datanode_a_replica_was_left_out_on_is_refused_alike_everywhere(tmp_path, clock, after):
    """review-tailgo R1: the mark on a left-out copy (group, index, DataNode) comes from the
    journal alone and goes only with the group, so the active, a restart (from the image or by
    replaying the SyncLength) and a standby agree on it. A move of that unit onto that DataNode (a
    balancer's plan: the balancer never makes one, the move's receipt refuses it as a backstop) is
    refused by each alike: the copy there is owed a delete and the unit stays where the repair put
    it. Before, the active mapped the moved copy and cleared the mark, a replay or a standby kept
    it and refused and deleted the one good copy left."""
    from hedgefs.namenode.blocks.repairs import InFlight
    from test_namenode_failover_rules import _standby_of, _tail
    nn = make_namenode(tmp_path / "nn", clock)
    dns = add_datanodes(nn, 8)
    file_id, tail, by_index, x, t, gen = _left_out_and_repaired(nn, clock)
    heartbeat_all(nn)   # x is sent the delete of its short copy, does it and says so
    nn.heartbeat(x, "", deleted=[(tail.id, 2, gen)])
    assert nn.blocks.deletes.kind(x, tail.id, 2) is None
    nn.repairs.start_moves([InFlight(tail.id, 2, x, clock(), source=t)])
    assert nn.units_stored(x, [(tail.id, 2, gen)]) == ["deleting"]
    kept = {0: by_index[0], 1: by_index[1], 2: t}
    assert nn.blocks.units(nn.blocks.get(tail.id)) == kept
    assert nn.blocks.left_out == {tail.id: {(2, x)}}
    assert [(c.group_id, c.index) for c in nn.heartbeat(x, "").commands if isinstance(c, DeleteUnit)] == [(tail.id, 2)]
    if after == "standby":
        nn.close()
        other, engine = _standby_of(tmp_path, clock)
        add_datanodes(other, 8)
        _tail(other, tmp_path / "nn" / "namenode.db")
        assert other.blocks.left_out == {tail.id: {(2, x)}}
        other.units_stored(t, [(tail.id, 2, gen)])        # the DataNodes tell every NameNode
        assert other.units_stored(x, [(tail.id, 2, gen)]) == ["deleting"]   # (moves are the active's)
        other.promote(engine)
        add_datanodes(other, 8)
    else:
        nn.close(checkpoint=after == "from-image")
        other = make_namenode(tmp_path / "nn", clock)
        add_datanodes(other, 8)
    try:
        assert other.blocks.left_out == {tail.id: {(2, x)}}
        for i, d in kept.items():
            other.block_report(d, [(tail.id, i, gen)])
        other.block_report(x, [(tail.id, 2, gen)])   # the refused move's copy, not yet deleted
        for d in dns:
            if d not in kept.values() and d != x:
                other.block_report(d, [])
        assert other.blocks.units(other.blocks.get(tail.id)) == kept
        deletes = {d: [(c.group_id, c.index) for c in other.heartbeat(d, "").commands
                       if isinstance(c, DeleteUnit) and c.group_id == tail.id] for d in dns}
        assert deletes == {d: [(tail.id, 2)] if d == x else [] for d in dns}
    finally:
        other.close()


def test_the_balancer_never_moves_a_unit_onto_the_datanode_its_copy_was_left_out_on(nn, clock):
    """review-tailgo R1: t, which took unit 2 of the kept tail, is the fullest DataNode, and x,
    on which that unit's replica was left out at close, the emptiest: the balancer evens them with
    other units, never by moving unit 2 onto x."""
    file_id, tail, by_index, x, t, gen = _left_out_and_repaired(nn, clock)
    heartbeat_all(nn)
    for d in nn.blocks.mapped:
        nn.heartbeat(d, "", used_bytes={t: 1 << 30, x: 0}.get(d, 1 << 20))
    nn.balance(0, 10.0, restart=True)
    nn.balance(1 << 40, 10.0)
    moves = {key: (m.source, m.target) for key, m in nn.repairs.in_flight.items() if m.source}
    assert moves and moves.get((tail.id, 2), (t, None))[1] != x, moves
