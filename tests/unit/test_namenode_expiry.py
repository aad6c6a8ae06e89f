"""The monitor's expiry (``Namesystem.tick``), without gRPC on a hand-driven clock: deletes a
DataNode never confirmed are given up after DELETE_TTL_S, and so are the retry cache's entries,
a change at a time however large the backlog."""

import threading

from hedgefs.namenode import namesystem
from hedgefs.namenode.model import DeleteUnit
from hedgefs.namenode.namesystem import DELETE_RESEND_S, DELETE_TTL_S
from nn_support import add_datanodes, generation, heartbeat_all, make_namenode, write_file
from test_namenode_blocks import one_group


def test_deletes_are_owed_again_after_a_restart_as_reported_and_expire(tmp_path, clock):
    """Pending deletes are memory only: a restarted NameNode owes the deletes of a deleted file's
    units once their DataNodes report them (units of a group it no longer has), then gives them
    up after DELETE_TTL_S like any (a later report queues what is still there again)."""
    nn = make_namenode(tmp_path / "nn", clock)
    add_datanodes(nn, 5)
    write_file(nn, "/f", 10)
    held = {u.datanode_id: (g.id, u.index, g.generation) for g in nn.file_info("/f").groups for u in g.units}
    nn.delete("/f")
    nn.close()
    nn = make_namenode(tmp_path / "nn", clock)
    assert nn.blocks.pending_delete_counts() == {}
    for dn, unit in held.items():  # as DataNodes do when told to register
        assert nn.heartbeat(dn, "").reregister
        nn.register(dn, f"127.0.0.1:{40000 + int(dn[2:])}")
        assert nn.block_report(dn, [unit]) == {"unknown": 1}
    assert all(len(c) == 1 for c in heartbeat_all(nn).values())
    clock.advance(DELETE_TTL_S + 1)
    heartbeat_all(nn)
    nn.tick()
    assert nn.blocks.pending_delete_counts() == {}
    nn.close()


def test_an_expired_delete_goes_while_a_younger_one_of_the_same_datanode_stays_sent(tmp_path, clock):
    """The monitor drops deletes older than the TTL; one queued later on the same DataNode stays,
    and stays sent (not resent at once). The pass must not fail on it: a failed pass plans no repair."""
    nn = make_namenode(tmp_path / "nn", clock, dead_interval_s=3 * DELETE_TTL_S)   # live without heartbeats
    add_datanodes(nn, 5)
    one_group(nn, "/old")
    nn.delete("/old")
    heartbeat_all(nn)
    clock.advance(DELETE_TTL_S - 10)
    young, placed = one_group(nn, "/young")
    g = generation(nn, young)
    nn.delete("/young")
    heartbeat_all(nn)
    clock.advance(11)
    nn.tick()
    assert {g for dn in placed.values() for g, _i, _gen in nn.blocks.pending_deletes(dn)} == {young}
    assert heartbeat_all(nn, list(placed.values())) == {dn: [] for dn in placed.values()}   # sent 11 s ago
    clock.advance(DELETE_RESEND_S)
    assert heartbeat_all(nn)[placed[0]] == [DeleteUnit(young, 0, g)]
    nn.close()


def test_a_backlog_of_expired_deletes_and_retry_entries_goes_a_part_at_a_time_with_writers_between(
        tmp_path, clock, monkeypatch):
    """A dead DataNode's deletes of a big delete expire together, and so do the retry cache's
    entries of a busy hour: the monitor gives them up EXPIRE_STEP at a time, the writers' lock let
    go between parts (a writer gets in), and still all of it in one pass, so that no backlog can
    grow faster than it expires."""
    monkeypatch.setattr(namesystem, "EXPIRE_STEP", 50)
    nn = make_namenode(tmp_path / "nn", clock, dead_interval_s=3 * DELETE_TTL_S)
    add_datanodes(nn, 5)
    backlog = 2 * 50 + 10
    with nn.lock:
        for i in range(backlog):
            nn.blocks.queue_delete("dn1", 1_000_000 + i, 0, 1)
            nn.retry.remember(("client", f"call{i}"), 2, None, nn.wall_ms())
    clock.advance(DELETE_TTL_S + 1)   # past the retry cache's TTL (as long) too
    parts, writers = [], []
    locked = nn.locked

    def a_writer(name: str) -> None:   # another thread: it needs the lock the monitor let go
        nn.mkdir(f"/{name}")
        writers.append(name)

    def watched(handler):
        result = locked(handler)
        if isinstance(result, int) and result:
            parts.append(result)
            writer = threading.Thread(target=a_writer, args=(f"w{len(parts)}",))
            writer.start()
            writer.join(timeout=10)
        return result

    nn.locked = watched
    nn.tick()
    assert nn.blocks.pending_delete_counts() == {}
    assert len(nn.retry) == 0
    assert parts == [50, 50, 10] * 2
    assert writers == [f"w{i}" for i in range(1, 7)]   # each got in between two of the monitor's parts
    nn.close()
