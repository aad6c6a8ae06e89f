"""The write path without gRPC: Create -> AddBlockGroup* -> Complete / Abandon, placement (leases:
test_namenode_leases.py)."""

import threading
from collections import Counter

import pytest

from conftest import wait_until
from hedgefs.namenode.blocks.blockmap import GroupCommit
from hedgefs.namenode.model import DataNodeStats
from hedgefs.namenode.errors import AlreadyExists, FailedPrecondition, InvalidArgument, NotFound
from nn_support import WHOLE, add_datanodes, heartbeat_all, make_namenode, stored, write_file

BLOCK = 4096
FULL = 3 * BLOCK  # data bytes in a full RS-3-2 group


def test_create_is_invisible_until_complete(nn):
    add_datanodes(nn, 5)
    created = nn.create("/f")
    assert (created.policy, created.block_size) == ("RS-3-2-1k", BLOCK)
    with pytest.raises(NotFound):
        nn.file_info("/f")
    assert nn.list("/") == []
    group = nn.add_block_group(created.file_id)
    nn.complete(created.file_id, 10, [stored(nn, group, 10, (0, 1, 2, 3, 4))])
    info = nn.file_info("/f")
    assert info.entry.length == 10 and [g.id for g in info.groups] == [group.id]
    assert [(u.index, u.datanode_id, u.address) for u in info.groups[0].units] == \
        [(u.index, u.datanode_id, u.address) for u in group.units]


def test_overwrite_keeps_old_file_readable_until_complete(nn):
    add_datanodes(nn, 5)
    write_file(nn, "/f", 100)
    old = nn.file_info("/f")
    with pytest.raises(AlreadyExists, match=r"^file exists: /f \(use -f to overwrite\)$"):
        nn.create("/f")
    created = nn.create("/f", overwrite=True)
    group = nn.add_block_group(created.file_id)
    assert nn.file_info("/f") == old
    nn.complete(created.file_id, 7, [stored(nn, group, 7, (0, 1, 2, 3, 4))])
    new = nn.file_info("/f")
    assert new.entry.length == 7 and new.groups[0].id == group.id
    # the old file's units are owed deletes on their DataNodes
    owed = {(dn, g) for dn in nn.liveness.live_ids() for g, _, _gen in nn.blocks.pending_deletes(dn)}
    assert owed == {(u.datanode_id, old.groups[0].id) for u in old.groups[0].units}


def test_create_refusals(nn):
    add_datanodes(nn, 5)
    nn.mkdir("/d")
    write_file(nn, "/file", 1)
    with pytest.raises(FailedPrecondition, match="is a directory: /d"):
        nn.create("/d")
    with pytest.raises(FailedPrecondition, match="is a directory: /"):
        nn.create("/")
    with pytest.raises(NotFound, match="no such file or directory: /missing$"):
        nn.create("/missing/f")
    with pytest.raises(FailedPrecondition, match="not a directory: /file"):
        nn.create("/file/f")
    with pytest.raises(InvalidArgument, match="unknown policy 'RS-nope'"):
        nn.create("/f", policy="RS-nope")
    with pytest.raises(InvalidArgument, match="not a positive multiple of the cell size"):
        nn.create("/f", block_size=1000)
    with pytest.raises(InvalidArgument, match="invalid path"):
        nn.create("f")


def test_create_needs_k_plus_m_live_datanodes(nn):
    """A policy the live DataNodes cannot hold is bad input (exit 2), for EC and replication alike."""
    add_datanodes(nn, 5)
    with pytest.raises(InvalidArgument,
                       match=r"^policy RS-6-3-1024k needs 9 live DataNodes, only 5 are live$"):
        nn.create("/big", policy="RS-6-3-1024k")
    assert nn.list("/") == []  # nothing left behind
    nn.mkdir("/d")
    nn.set_policy("/d", "REPLICATE-5")   # five are live: enough
    nn.clock.advance(nn.liveness.dead_interval_s + 1)
    heartbeat_all(nn, ["dn1", "dn2", "dn3", "dn4"])   # dn5 falls silent
    with pytest.raises(InvalidArgument, match=r"^policy REPLICATE-5 needs 5 live DataNodes, only 4 are live$"):
        nn.create("/d/f")
    with pytest.raises(InvalidArgument, match=r"^policy REPLICATE-5 needs 5 live DataNodes, only 4 are live$"):
        nn.set_policy("/", "REPLICATE-5")
    assert nn.get_policy("/") == ("RS-3-2-1k", "")   # unchanged
    assert [e.path for e in nn.list("/", recursive=True)] == ["/d"]


def test_placement_uses_distinct_live_nodes_and_honours_exclusions(nn, clock):
    add_datanodes(nn, 7)
    created = nn.create("/f")
    for _ in range(20):
        group = nn.add_block_group(created.file_id, exclude=["dn1"])
        targets = [u.datanode_id for u in group.units]
        assert [u.index for u in group.units] == [0, 1, 2, 3, 4]
        assert len(set(targets)) == 5 and "dn1" not in targets
    # dead nodes are never chosen
    clock.advance(31)
    heartbeat_all(nn, ["dn1", "dn2", "dn3", "dn4", "dn5"])
    group = nn.add_block_group(created.file_id)
    assert {u.datanode_id for u in group.units} == {"dn1", "dn2", "dn3", "dn4", "dn5"}
    with pytest.raises(FailedPrecondition, match=r"only 4 are live and not excluded \(dn2\)"):
        nn.add_block_group(created.file_id, exclude=["dn2", "dn7"])


def test_placement_prefers_the_least_used_and_spreads_between_heartbeats(nn):
    add_datanodes(nn, 6)
    for i, dn in enumerate(["dn1", "dn2", "dn3", "dn4", "dn5", "dn6"]):
        nn.heartbeat(dn, "", used_bytes=1000 * i)
    created = nn.create("/f")
    first = {u.datanode_id for u in nn.add_block_group(created.file_id).units}
    assert first == {"dn1", "dn2", "dn3", "dn4", "dn5"}
    # dn6 is now the least loaded: the bytes just placed count until the next heartbeat
    second = {u.datanode_id for u in nn.add_block_group(created.file_id).units}
    assert "dn6" in second
    counts = Counter()
    for _ in range(30):
        counts.update(u.datanode_id for u in nn.add_block_group(created.file_id).units)
    assert max(counts.values()) - min(counts.values()) <= 5


def test_complete_drops_units_not_stored(nn):
    add_datanodes(nn, 5)
    created = nn.create("/f")
    group = nn.add_block_group(created.file_id)
    lost = {u.index: u.datanode_id for u in group.units if u.index in (1, 4)}
    nn.complete(created.file_id, WHOLE, [stored(nn, group, WHOLE, (0, 2, 3))])
    info = nn.file_info("/f")
    assert [u.index for u in info.groups[0].units] == [0, 2, 3]
    for index, dn in lost.items():
        assert (group.id, index, group.generation) in nn.blocks.pending_deletes(dn)
    assert nn.fsck("/").status == "DEGRADED"


def test_complete_refusals(nn):
    add_datanodes(nn, 5)
    created = nn.create("/f")
    g1 = nn.add_block_group(created.file_id)
    g2 = nn.add_block_group(created.file_id)
    with pytest.raises(FailedPrecondition, match=fr"group {g1.id} has only 2 stored units reported by their DataNodes "
                                                 fr"\(the writer claimed 2\), policy RS-3-2-1k needs at least 3"):
        nn.complete(created.file_id, WHOLE, [stored(nn, g1, WHOLE, (0, 1))])
    with pytest.raises(InvalidArgument, match="not the sum of its group lengths"):
        nn.complete(created.file_id, 11, [stored(nn, g1, 10, (0, 1, 2))])
    with pytest.raises(InvalidArgument, match="every group but the last holds exactly"):
        nn.complete(created.file_id, 20, [stored(nn, g1, 10, (0, 1, 2)), stored(nn, g2, 10, (0, 1, 2))])
    with pytest.raises(InvalidArgument, match="does not belong to file"):
        nn.complete(created.file_id, 10, [GroupCommit(g1.id + 100, 10, (0, 1, 2))])
    with pytest.raises(NotFound, match="no file is being written with id 999"):
        nn.complete(999, 0, [])
    # still writable after refusals: a full first group, a short second one
    nn.complete(created.file_id, FULL + 1, [stored(nn, g1, FULL, (0, 1, 2, 3, 4)),
                                            stored(nn, g2, 1, (0, 1, 2, 3, 4))])
    # a retried Complete of the same file is accepted
    nn.complete(created.file_id, FULL + 1, [])
    assert [g.length for g in nn.file_info("/f").groups] == [FULL, 1]


def test_groups_left_out_of_complete_are_dropped(nn):
    add_datanodes(nn, 5)
    created = nn.create("/f")
    abandoned = nn.add_block_group(created.file_id)
    kept = nn.add_block_group(created.file_id)
    nn.complete(created.file_id, 5, [stored(nn, kept, 5, (0, 1, 2, 3, 4))])
    assert [g.id for g in nn.file_info("/f").groups] == [kept.id]
    assert nn.blocks.get(abandoned.id) is None
    assert sum(nn.blocks.pending_delete_counts().values()) == 5


def test_zero_byte_file(nn):
    add_datanodes(nn, 5)
    created = nn.create("/empty")
    nn.complete(created.file_id, 0, [])
    info = nn.file_info("/empty")
    assert info.entry.length == 0 and info.groups == []


def test_a_ranged_file_info_holds_only_the_groups_of_its_bytes(nn):
    """HDFS's getBlockLocations(offset, length): the groups holding the span, where they sit, and
    how many the file has (an S3 GET of 64 KiB asks for one group, not all)."""
    add_datanodes(nn, 5)
    write_file(nn, "/f", 3 * FULL + 5)
    every = nn.file_info("/f").groups
    assert len(every) == 4

    def ranged(offset, length):
        info = nn.file_info("/f", span=(offset, length))
        return [g.id for g in info.groups], info.first_group, info.group_count

    assert ranged(0, 1) == ([every[0].id], 0, 4)
    assert ranged(FULL + 7, 100) == ([every[1].id], 1, 4)
    assert ranged(FULL - 1, 2) == ([every[0].id, every[1].id], 0, 4)
    assert ranged(3 * FULL, 5) == ([every[3].id], 3, 4)
    assert ranged(3 * FULL + 5, 1) == ([], 4, 4)   # past the end: nothing to read
    assert nn.file_info("/f").first_group is None


def test_complete_refuses_when_someone_else_created_the_file_meanwhile(nn):
    add_datanodes(nn, 5)
    slow = nn.create("/f")
    write_file(nn, "/g", 3)
    nn.rename("/g", "/f")          # a file appears at the path by another way than a create
    with pytest.raises(AlreadyExists, match="file exists: /f"):
        nn.complete(slow.file_id, 0, [])
    nn.abandon(slow.file_id)
    assert nn.file_info("/f").entry.length == 3


def test_a_second_create_of_a_path_being_written_fails_at_once(nn):
    add_datanodes(nn, 5)
    first = nn.create("/f")
    for overwrite in (False, True):
        with pytest.raises(AlreadyExists, match=r"/f is being written by .* \(file \d+\)"):
            nn.create("/f", overwrite=overwrite)
    nn.abandon(first.file_id)
    write_file(nn, "/f", 3)        # once that write is over, the path is free again
    assert nn.file_info("/f").entry.length == 3


def test_abandon_drops_the_file_and_queues_deletes(nn):
    add_datanodes(nn, 5)
    created = nn.create("/f")
    nn.add_block_group(created.file_id)
    nn.abandon(created.file_id)
    nn.abandon(created.file_id)  # idempotent
    with pytest.raises(NotFound):
        nn.add_block_group(created.file_id)
    assert sum(nn.blocks.pending_delete_counts().values()) == 5
    assert nn.list("/") == []


def test_deleting_the_directory_of_a_file_being_written_drops_the_write(nn):
    add_datanodes(nn, 5)
    nn.mkdir("/d")
    created = nn.create("/d/f")
    nn.add_block_group(created.file_id)
    nn.delete("/d")  # empty as far as anyone can see
    with pytest.raises(NotFound):
        nn.complete(created.file_id, 0, [])


def test_completed_file_survives_reopen_but_a_half_written_one_stays_invisible(tmp_path, clock):
    nn = make_namenode(tmp_path / "nn", clock)
    add_datanodes(nn, 5)
    write_file(nn, "/done", FULL + 10)
    half = nn.create("/half")
    nn.add_block_group(half.file_id)
    nn.close()
    nn = make_namenode(tmp_path / "nn", clock)
    assert nn.file_info("/done").entry.length == FULL + 10
    with pytest.raises(NotFound):
        nn.file_info("/half")
    # the writer can still finish after the restart (its lease is kept in SQLite)
    nn.complete(half.file_id, 0, [])
    assert nn.file_info("/half").entry.length == 0
    nn.close()


def test_concurrent_writers_heartbeats_and_monitor_passes(nn):
    add_datanodes(nn, 6)
    errors = []

    def writer(w):
        try:
            for i in range(15):
                write_file(nn, f"/w{w}-{i}", 1 + i * 1000, overwrite=True)
        except Exception as err:  # surfaced below
            errors.append(err)

    def background(stop):
        while not stop.is_set():
            heartbeat_all(nn)
            nn.tick()

    stop = threading.Event()
    threads = [threading.Thread(target=writer, args=(w,)) for w in range(6)]
    bg = threading.Thread(target=background, args=(stop,))
    bg.start()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    stop.set()
    bg.join()
    assert errors == []
    assert len(nn.list("/")) == 6 * 15
    report = nn.fsck("/")
    assert (report.files, report.status) == (90, "HEALTHY")


def test_placement_after_a_restart_uses_only_registered_datanodes(tmp_path, clock):
    nn = make_namenode(tmp_path / "nn", clock, block_size=BLOCK)
    add_datanodes(nn, 10)  # dn1..dn5 will never come back
    clock.advance(1000)
    nn.close()
    nn = make_namenode(tmp_path / "nn", clock, block_size=BLOCK)
    live = [f"dn{i}" for i in range(6, 11)]
    for dn in live:
        nn.register(dn, f"127.0.0.1:{40000 + int(dn[2:])}")
        nn.heartbeat(dn, "", used_bytes=10**6)
    group = nn.add_block_group(nn.create("/f").file_id)
    assert sorted(u.datanode_id for u in group.units) == sorted(live)
    nn.close()


def test_complete_with_forged_stored_units_is_refused_and_the_file_stays_invisible(nn):
    add_datanodes(nn, 5)
    created = nn.create("/f")
    group = nn.add_block_group(created.file_id)
    nn.unit_stored(group.units[0].datanode_id, group.id, 0, group.generation)   # one unit really stored; five claimed
    with pytest.raises(FailedPrecondition, match=fr"group {group.id} has only 1 stored units reported by their "
                                                 r"DataNodes \(the writer claimed 5\)"):
        nn.complete(created.file_id, WHOLE, [GroupCommit(group.id, WHOLE, (0, 1, 2, 3, 4))])
    with pytest.raises(NotFound):
        nn.file_info("/f")
    # the writer may still finish once the receipts are in
    nn.complete(created.file_id, WHOLE, [stored(nn, group, WHOLE)])
    assert len(nn.file_info("/f").groups[0].units) == 5


def test_complete_keeps_only_the_units_their_datanodes_reported(nn):
    add_datanodes(nn, 5)
    created = nn.create("/f")
    group = nn.add_block_group(created.file_id)
    commit = stored(nn, group, 10, (0, 1, 2, 3))
    nn.complete(created.file_id, 10, [GroupCommit(group.id, 10, (0, 1, 2, 3, 4))])  # claims unit 4 too
    assert [u.index for u in nn.file_info("/f").groups[0].units] == list(commit.stored_units)
    assert nn.fsck().status == "DEGRADED"
    assert (group.id, 4, group.generation) in nn.blocks.pending_deletes(group.units[4].datanode_id)   # if it turns up after all


def test_complete_waits_for_receipts_still_on_their_way(tmp_path, clock):
    nn = make_namenode(tmp_path / "nn", clock, receipt_wait_s=30)
    add_datanodes(nn, 5)
    created = nn.create("/f")
    group = nn.add_block_group(created.file_id)
    stored(nn, group, 10, (0, 1, 2))
    done = []
    t = threading.Thread(target=lambda: done.append(
        nn.complete(created.file_id, 10, [GroupCommit(group.id, 10, (0, 1, 2, 3, 4))])))
    t.start()
    # Complete is waiting, the lock released
    wait_until(lambda: nn.writes.receipts._waiters or not t.is_alive(), 10, "Complete to wait for the receipts",
               interval=0.005)
    assert t.is_alive()
    nn.unit_stored(group.units[3].datanode_id, group.id, 3, group.generation)
    assert t.is_alive() and not done             # one of two claimed: still waiting
    nn.unit_stored(group.units[4].datanode_id, group.id, 4, group.generation)
    t.join(10)
    assert done == [None]
    assert [u.index for u in nn.file_info("/f").groups[0].units] == [0, 1, 2, 3, 4]
    nn.close()


# ---------------------------------------------------------------------------- replication, conversion


def _write(nn, path, length, policy="", overwrite=False, convert_from=None):
    created = nn.create(path, overwrite=overwrite, policy=policy, convert_from=convert_from)
    group = nn.add_block_group(created.file_id)
    nn.complete(created.file_id, length, [stored(nn, group, length)], convert_from=convert_from)
    return created


def test_a_replicated_block_needs_min_replicas_stored(tmp_path, clock):
    """REPLICATE-3 with --min-replicas 2: two receipts make a block durable, one does not; the
    writer is told (min_units) so that it stops at the same point. EC needs k whatever it says."""
    nn = make_namenode(tmp_path / "nn", clock, min_replicas=2)
    add_datanodes(nn, 5)
    created = nn.create("/two", policy="REPLICATE-3")
    assert (created.policy, created.min_units) == ("REPLICATE-3", 2)
    group = nn.add_block_group(created.file_id)
    assert len({u.datanode_id for u in group.units}) == 3
    nn.complete(created.file_id, 100, [stored(nn, group, 100, (0, 2))])
    assert {u.index for u in nn.file_info("/two").groups[0].units} == {0, 2}
    assert nn.fsck("/two").status == "DEGRADED"   # under-replicated: the monitor re-replicates it
    assert nn.report().blocks_under_replicated == 1

    created = nn.create("/one", policy="REPLICATE-3")
    group = nn.add_block_group(created.file_id)
    with pytest.raises(FailedPrecondition, match="policy REPLICATE-3 needs at least 2$"):
        nn.complete(created.file_id, 100, [stored(nn, group, 100, (1,))])
    assert nn.create("/r1", policy="REPLICATE-1").min_units == 1      # never more than n
    assert nn.create("/ec", policy="RS-3-2-1k").min_units == 3       # k
    nn.close()


def test_convert_replaces_only_the_version_read_and_keeps_its_mtime(nn, clock):
    add_datanodes(nn, 5)
    _write(nn, "/f", 100)
    old = nn.file_info("/f").entry
    version = (old.length, old.mtime_ms)
    clock.advance(5)
    with pytest.raises(InvalidArgument, match=r"^/f is already RS-3-2-1k: nothing to convert$"):
        nn.create("/f", policy="rs-3-2-1k", convert_from=version)
    with pytest.raises(FailedPrecondition, match="/f changed during the conversion"):
        nn.create("/f", policy="REPLICATE-3", convert_from=(old.length, old.mtime_ms - 1))
    with pytest.raises(NotFound):
        nn.create("/nope", policy="REPLICATE-3", convert_from=version)

    _write(nn, "/f", 100, policy="REPLICATE-3", convert_from=version)
    new = nn.file_info("/f")
    assert (new.entry.policy, new.entry.length, new.entry.mtime_ms) == ("REPLICATE-3", 100, old.mtime_ms)
    assert [len(g.units) for g in new.groups] == [3]

    # A file replaced while its conversion was being written is left as the newer writer made it.
    # (Not by a create: a path being written, converted included, is refused to another writer.)
    created = nn.create("/f", policy="RS-3-2-1k", convert_from=version)
    group = nn.add_block_group(created.file_id)
    with pytest.raises(AlreadyExists, match="/f is being written"):
        nn.create("/f", overwrite=True)
    _write(nn, "/g", 7)
    nn.delete("/f")
    nn.rename("/g", "/f")
    with pytest.raises(FailedPrecondition, match="/f changed during the conversion"):
        nn.complete(created.file_id, 100, [stored(nn, group, 100)], convert_from=version)
    assert (nn.file_info("/f").entry.length, nn.file_info("/f").entry.policy) == (7, "RS-3-2-1k")


def test_every_replacement_gets_a_later_mtime_even_within_a_millisecond(nn):
    """(length, mtime) names one version of a path's bytes: a reader holding the old version must
    never take a plain overwrite for a conversion of it (the clock does not move here)."""
    add_datanodes(nn, 5)
    _write(nn, "/f", 10)
    first = nn.file_info("/f").entry.mtime_ms
    _write(nn, "/f", 10, overwrite=True)
    second = nn.file_info("/f").entry.mtime_ms
    _write(nn, "/p", 10)
    nn.concat("/f", ["/p"], overwrite=True)
    assert first < second < nn.file_info("/f").entry.mtime_ms


def test_a_sync_commits_the_write_so_far_and_goes_on_with_it_in_one_call(nn):
    add_datanodes(nn, 5)
    created = nn.create("/log")
    group = nn.add_block_group(created.file_id)
    retry = ("client", "sync-1")
    synced = nn.sync(created.file_id, "/log", 5000, [stored(nn, group, 5000)], retry=retry)
    assert nn.file_info("/log").entry.length == 5000                        # visible to new readers
    assert (synced.kept_length, synced.length, synced.created.file_id) == (0, 5000, created.file_id)
    tail = synced.created.first_group                                      # the partial group, to write again
    assert tail is not None and tail.id != group.id
    again = nn.sync(created.file_id, "/log", 5000, [stored(nn, group, 5000)], retry=retry)
    assert again.created.first_group.id == tail.id                         # a retry: nothing done twice
    with pytest.raises(AlreadyExists, match="being written"):
        nn.append("/log")                                                  # the write goes on: still one writer
    nn.complete(created.file_id, 6000, [stored(nn, tail, 6000)])
    assert nn.file_info("/log").entry.length == 6000
    assert [g.id for g in nn.file_info("/log").groups] == [tail.id]


def test_a_sync_on_a_group_boundary_has_nothing_to_write_again_and_a_wrong_path_changes_nothing(nn):
    add_datanodes(nn, 5)
    created = nn.create("/full")
    group = nn.add_block_group(created.file_id)
    full = FULL
    with pytest.raises(InvalidArgument, match="being written at /full, not /other"):
        nn.sync(created.file_id, "/other", full, [stored(nn, group, full)])
    with pytest.raises(NotFound):
        nn.file_info("/full")                                              # nothing committed
    synced = nn.sync(created.file_id, "/full", full, [stored(nn, group, full)])
    assert (synced.kept_length, synced.length, synced.created.first_group) == (full, full, None)
    more = nn.add_block_group(created.file_id)
    nn.complete(created.file_id, full + 10, [stored(nn, more, 10)])
    assert [g.id for g in nn.file_info("/full").groups] == [group.id, more.id]


def test_a_complete_write_gives_back_the_room_held_for_its_units_before_the_next_heartbeat(nn):
    """Each target is held a whole unit (block size 4096 here) from placement on. 5 DataNodes
    with room for 3 units each: 3 files at a time fit, and once complete the room is theirs
    again at once: 20 files one after another need no heartbeat between them."""
    add_datanodes(nn, 5)
    for dn in [f"dn{i}" for i in range(1, 6)]:
        nn.heartbeat(dn, "", stats=DataNodeStats(capacity_bytes=1 << 30, remaining_bytes=3 * 4096))
    held = [nn.create(f"/held{i}") for i in range(3)]
    groups = [nn.add_block_group(h.file_id) for h in held]
    with pytest.raises(FailedPrecondition, match="5 DataNodes with room for a unit of 4096 bytes, only 0"):
        nn.add_block_group(nn.create("/one-too-many").file_id)
    for h, g in zip(held, groups):
        nn.complete(h.file_id, 10, [stored(nn, g, 10)])
    for i in range(20):
        write_file(nn, f"/small{i}", 10 if i % 2 else WHOLE)


def test_a_complete_carries_chmod_chown_and_utimes_checked_as_those_calls_in_one_record(tmp_path, clock):
    """CommitAttributes: the version commits with them in its Complete record (they survive a
    restart's replay); each is checked as SetPermission, SetOwner and SetTimes would check it,
    and a refusal refuses the Complete (nothing committed: the write can still complete)."""
    from hedgefs.namenode.errors import PermissionDenied
    from hedgefs.namenode.model import CommitAttrs
    from hedgefs.security.identity import Identity

    nn = make_namenode(tmp_path / "nn", clock)
    add_datanodes(nn, 5)
    nn.mkdir("/home")
    nn.set_permission("/home", 0o777)
    alice = Identity("alice", "user", ("staff",))
    created = nn.create("/home/tool", who=alice)
    group = nn.add_block_group(created.file_id, who=alice)
    commit = [stored(nn, group, WHOLE)]
    for bad, error, message in [
        (CommitAttrs(owner="bob"), PermissionDenied, "only an admin may give /home/tool to another user"),
        (CommitAttrs(group="wheel"), PermissionDenied, "user alice is not in group wheel"),
        (CommitAttrs(mode=0o2755), InvalidArgument, r"^/home/tool: bad mode 2755"),
        (CommitAttrs(owner="no body"), InvalidArgument, r"^/home/tool: bad user name 'no body'"),
        (CommitAttrs(mtime_ms=-2), InvalidArgument, r"^/home/tool: bad times: mtime -2"),
    ]:
        with pytest.raises(error, match=message):
            nn.complete(created.file_id, WHOLE, commit, who=alice, attributes=bad)
        with pytest.raises(NotFound):
            nn.file_info("/home/tool")
    nn.complete(created.file_id, WHOLE, commit, who=alice,
                attributes=CommitAttrs(mode=0o750, group="staff", mtime_ms=1_400_000_000_000))
    entry = nn.file_info("/home/tool").entry
    home = nn.file_info("/home").entry
    nn.close()
    assert (entry.owner, entry.group, entry.mode, entry.mtime_ms, entry.atime_ms) == \
        ("alice", "staff", 0o750, 1_400_000_000_000, 1_400_000_000_000)
    assert home.mtime_ms != 1_400_000_000_000   # the directory's is the commit's time
    again = make_namenode(tmp_path / "nn", clock)
    try:
        assert again.file_info("/home/tool").entry == entry   # (replayed from the one Complete record)
    finally:
        again.close()


def test_times_are_checked_and_applied_alike_by_set_times_and_a_complete(tmp_path, clock):
    """utimes' values, given to SetTimes or carried by a Complete (CommitAttributes): one check,
    one message (below -1 is refused, naming the path), and -1 leaves that time as it is (the
    file's for SetTimes, the commit's for a Complete); applied alike, and alike after a replay."""
    from hedgefs.namenode.model import CommitAttrs

    nn = make_namenode(tmp_path / "nn", clock)
    add_datanodes(nn, 5)
    write_file(nn, "/t", WHOLE)
    created = nn.create("/c")
    group = nn.add_block_group(created.file_id)
    commit = [stored(nn, group, WHOLE)]
    refusals = []
    for call in (lambda: nn.set_times("/t", -2, 5), lambda: nn.complete(created.file_id, WHOLE, commit,
                                                                           attributes=CommitAttrs(mtime_ms=-2))):
        with pytest.raises(InvalidArgument) as err:
            call()
        refusals.append(str(err.value).replace("/c", "/t"))
    assert refusals[0] == refusals[1] and refusals[0].startswith("/t: bad times: mtime -2")
    before = nn.file_info("/t").entry
    nn.set_times("/t", -1, 7_000)
    nn.complete(created.file_id, WHOLE, commit, attributes=CommitAttrs(mtime_ms=-1, atime_ms=7_000))
    t, c = nn.file_info("/t").entry, nn.file_info("/c").entry
    assert (t.mtime_ms, t.atime_ms) == (before.mtime_ms, 7_000)
    assert c.atime_ms == 7_000 and c.mtime_ms > 7_000   # the commit's time
    nn.close()
    again = make_namenode(tmp_path / "nn", clock)
    try:
        assert (again.file_info("/t").entry, again.file_info("/c").entry) == (t, c)
    finally:
        again.close()
