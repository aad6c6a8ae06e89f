"""The journal on etcd, below the NameNode process: guarded batches, a standby tailing them, the
lease, checkpoints and compaction.

Real etcd (a 3-member cluster on loopback for the module, tests/etcd_support.py), real
namesystems in process: an active's records go to etcd as guarded Txns (journal/etcd.py), a
standby built from etcd and fed by its watch (ha/tailer.py) holds the same namespace, a deposed
epoch commits nothing, a lease that is not renewed ends, an image on etcd plus the batches after
it rebuild the namespace and the batches it covers are compacted away.
"""

import signal
import threading
import time

import pytest
from conftest import wait_until
from etcd_support import etcd_cluster, prefix  # noqa: F401  (the fixture)
from nn_support import FakeClock, add_datanodes, make_namenode, state, write_file

from hedgefs.namenode.ha.election import Lease, leader_address, leader_value
from hedgefs.namenode.ha.tailer import Tailer
from hedgefs.namenode.journal.etcd import KEY_BYTES, EtcdJournal
from hedgefs.namenode.journal.etcd_meta import EtcdMeta, Fenced, MetaUnavailable, parse_meta_url
from hedgefs.namenode.journal import records
from hedgefs.namenode.journal.journal import StoreFailed


def _standby(meta: EtcdMeta, path, clock):
    """A standby namesystem read from etcd, and its tailer."""
    engine = EtcdJournal(meta, 24)
    nn = make_namenode(path, clock, engine=engine, standby=True)
    return nn, Tailer(meta, nn, engine.read_revision)


def _active(meta: EtcdMeta, path, clock, ttl_s: int = 3):
    """An active namesystem: a standby that won the campaign, promoted (as ha/roles.py does)."""
    nn, tailer = _standby(meta, path, clock)
    lease = Lease(meta, ttl_s=ttl_s)
    epoch, _ = meta.campaign(leader_value("127.0.0.1:1", ""), lease.id)
    assert epoch > 0
    assert tailer.wait_applied(epoch, 10)
    tailer.stop()
    nn.journal.engine.start_writing(epoch, lease.serving, tailer.applied)
    nn.promote(nn.journal.engine)
    if not nn.cluster_id:
        nn.format(None)
    return nn, lease, epoch


def test_parse_meta_url():
    u = parse_meta_url("etcd://10.0.0.1:2379,nn2:2380/hfs/prod")
    assert u.endpoints == (("10.0.0.1", 2379), ("nn2", 2380)) and u.prefix == "hfs/prod"
    assert parse_meta_url("sqlite:///srv/nn/namespace.sqlite").path == "/srv/nn/namespace.sqlite"
    for bad in ("etcd://h:1", "etcd://h/p", "mysql://x", "sqlite://rel/path", "etcd://h:99999/p"):
        with pytest.raises(ValueError):
            parse_meta_url(bad)


def test_records_reach_a_standby_and_a_deposed_epoch_commits_nothing(etcd_cluster, tmp_path):
    clock = FakeClock()
    meta = EtcdMeta(parse_meta_url(etcd_cluster.url(prefix("journal"))))
    active, lease, epoch = _active(meta, tmp_path / "a", clock)
    standby = tailer = None
    try:
        add_datanodes(active, 5)
        active.mkdir("/d/e", parents=True)
        for i in range(5):
            write_file(active, f"/d/f{i}", 3000 * i)
        standby, tailer = _standby(meta, tmp_path / "b", clock)
        assert tailer.leader == ("127.0.0.1:1", epoch, lease.id)
        assert state(standby) == state(active)
        active.rename("/d/f1", "/d/e/g")
        active.delete("/d/f2")
        active.create("/d/open")
        assert tailer.wait_applied(active.journal.engine.revision, 10)
        assert state(standby) == state(active)

        # the lease ends (not renewed): the leader key goes, and the epoch's next batch is refused
        lease.stop()
        wait_until(lambda: tailer.leader == ("", 0, 0), 15, "the leader key to expire")
        with pytest.raises(StoreFailed, match="no longer the leader"):
            active.mkdir("/late")
        assert [p for p in etcd_cluster.keys(f"/{meta.url.prefix}/j/")
                if int(p.rsplit("/", 1)[1], 16) > standby.journal.last] == []
        assert standby.tree.find("/late") is None
    finally:
        if tailer is not None:
            tailer.stop()
        if standby is not None:
            standby.close()
        active.close(checkpoint=False)
        meta.close()


def test_an_image_on_etcd_plus_the_batches_after_it_and_the_older_ones_compacted(etcd_cluster, tmp_path):
    """A checkpoint on etcd: the image in chunks, published, the batches it covers deleted; a new
    standby reads the image and the batches after it. A batch larger than one key (a big Txn) is
    split over keys and Txns, and read back whole."""
    clock = FakeClock()
    meta = EtcdMeta(parse_meta_url(etcd_cluster.url(prefix("image"))))
    active, lease, _epoch = _active(meta, tmp_path / "a", clock, ttl_s=30)
    try:
        add_datanodes(active, 5)
        for i in range(20):
            active.mkdir(f"/d{i}/" + "x" * 200, parents=True)
        txid = active.checkpoint()
        keys = etcd_cluster.keys(f"/{meta.url.prefix}/")
        assert [k for k in keys if "/j/" in k] == []          # every batch was covered by the image
        assert any("/img/" in k for k in keys)
        with active.lock:   # batches far larger than a key or a Txn holds
            for i in range(6000):
                active.journal.log(records.Mkdir(f"/big/{i:05d}/" + "y" * 200 + "/" + "z" * 200, 0, "hedgefs",
                                                 active.tree.next_id))
        active.journal.wait_durable(active.journal.last)
        assert len(etcd_cluster.keys(f"/{meta.url.prefix}/j/")) >= 6000 * 400 // KEY_BYTES
        standby, tailer = _standby(meta, tmp_path / "b", clock)
        try:
            assert standby.replayed == active.journal.last - txid
            assert state(standby) == state(active)
        finally:
            tailer.stop()
            standby.close()
    finally:
        lease.revoke()
        active.close(checkpoint=False)
        meta.close()


def test_an_image_larger_than_a_grpc_answer_is_read_back(etcd_cluster):
    """An image of more than 4 MiB (gRPC's default answer; ~200,000 files) on etcd: a NameNode that
    starts or a standby reads every chunk back (it was RESOURCE_EXHAUSTED: it could not start)."""
    meta = EtcdMeta(parse_meta_url(etcd_cluster.url(prefix("bigimage"))))
    reader = EtcdMeta(parse_meta_url(etcd_cluster.url(meta.url.prefix)))
    try:
        chunks = [bytes([n]) * (1 << 20) for n in range(6)]
        engine = EtcdJournal(meta)
        engine.write_image(7, iter(chunks))
        engine.publish_image(7)
        txid, read = EtcdJournal(reader).image()
        assert txid == 7 and list(read) == chunks
    finally:
        reader.close()
        meta.close()


def test_lease_deadline_and_campaign(etcd_cluster):
    meta = EtcdMeta(parse_meta_url(etcd_cluster.url(prefix("lease"))))
    a, b = Lease(meta, ttl_s=3), Lease(meta, ttl_s=3)
    try:
        assert a.serving()
        epoch_a, _ = meta.campaign(leader_value("a:1", ""), a.id)
        epoch_b, seen = meta.campaign(leader_value("b:1", ""), b.id)
        assert epoch_a > 0 and epoch_b == 0 and leader_address(seen) == "a:1"
        wait_until(lambda: a.renewals >= 2, 10, "two renewals")
        assert a.serving() and a.deadline > time.monotonic()
        a.revoke()
        assert not a.serving()
        epoch_b, _ = meta.campaign(leader_value("b:1", ""), b.id)
        assert epoch_b > epoch_a
    finally:
        b.stop()
        meta.close()


def test_unreachable_etcd_is_unavailable(tmp_path):
    meta = EtcdMeta(parse_meta_url("etcd://127.0.0.1:1/x"), timeout_s=0.5)
    with pytest.raises(MetaUnavailable):
        meta.status()
    meta.close()


def test_watch_stops_when_asked(etcd_cluster):
    meta = EtcdMeta(parse_meta_url(etcd_cluster.url(prefix("watch"))))
    stop = threading.Event()
    seen = []
    t = threading.Thread(target=lambda: seen.extend(meta.watch(meta.status() + 1, stop)))
    t.start()
    stop.set()
    t.join(5)
    assert not t.is_alive()
    meta.close()


@pytest.mark.parametrize("fault", ["kill", "freeze"])
def test_a_tailer_whose_etcd_member_dies_or_freezes_follows_on_through_another(etcd_cluster, tmp_path, fault):
    """Found by `hedgefs chaos --ha` (seed 19): a standby's watch broke with its etcd member and
    the standby stopped following for good, so when the active froze nobody took over. The watch
    re-opens on another member. A frozen member (SIGSTOP) breaks nothing: its stream just goes
    silent, so the watch asks for progress and gives up on a member that does not answer; the
    leader key's end must reach the standby too, or it never campaigns."""
    clock = FakeClock()
    name = prefix(f"member-{fault}")
    meta = EtcdMeta(parse_meta_url(etcd_cluster.url(name)))            # the standby's, every member
    member = None
    standby = tailer = writer = active = None
    try:
        member = next(m for m, port in etcd_cluster.client_ports.items()
                      if meta._client.endpoint_in_use.netloc.endswith(f":{port}"))
        others = ",".join(f"127.0.0.1:{p}" for m, p in etcd_cluster.client_ports.items() if m != member)
        writer = EtcdMeta(parse_meta_url(f"etcd://{others}/{name}"))   # the active's, on the other two
        active, lease, epoch = _active(writer, tmp_path / "a", clock, ttl_s=30)
        active.mkdir("/before")
        standby, tailer = _standby(meta, tmp_path / "b", clock)
        assert tailer.leader[1] == epoch
        etcd_cluster.kill(member, signal.SIGKILL if fault == "kill" else signal.SIGSTOP)

        def elected() -> bool:   # the member may have been the raft leader: a read needs a new one
            try:
                return writer.get("leader") is not None
            except MetaUnavailable:
                return False
        wait_until(elected, 30, "a raft leader among the two members left")
        active.mkdir("/after")
        assert tailer.wait_applied(active.journal.engine.revision, 30), f"the tailer stopped at {tailer.applied}"
        assert not tailer.failed
        assert standby.tree.find("/after") is not None
        lease.revoke()
        wait_until(lambda: tailer.leader == ("", 0, 0), 30, "the standby seeing the leader key go")
    finally:
        if tailer is not None:
            tailer.stop()
        if standby is not None:
            standby.close()
        if active is not None:
            active.close(checkpoint=False)
        if writer is not None:
            writer.close()
        meta.close()
        if member is not None:
            if fault == "kill":
                etcd_cluster.start_member(member, "existing")
            else:
                etcd_cluster.kill(member, signal.SIGCONT)
            etcd_cluster.wait_healthy()


def test_files_that_change_reach_a_standby_and_an_image_on_etcd(etcd_cluster, tmp_path):
    """setTimes, symbolic links, xattrs, an append (one left open, sharing its file's groups) and a
    truncate: the same namespace on a standby fed by etcd, and from an image on etcd."""
    from nn_support import stored

    clock = FakeClock()
    meta = EtcdMeta(parse_meta_url(etcd_cluster.url(prefix("changes"))))
    active, lease, _epoch = _active(meta, tmp_path / "a", clock, ttl_s=30)
    standby = tailer = None
    try:
        add_datanodes(active, 5)
        active.mkdir("/c", parents=True)
        write_file(active, "/c/f", 3 * 1024 * 1024 + 5)
        write_file(active, "/c/g", 3 * 1024 * 1024 + 5)
        active.set_times("/c/f", 1_000, 2_000)
        active.symlink("f", "/c/link")
        active.set_xattr("/c/f", "user.k", b"\x00v")
        reopened = active.append("/c/f")
        group = active.add_block_group(reopened.created.file_id)
        active.complete(reopened.created.file_id, reopened.length + 10,
                        [stored(active, group, reopened.length + 10 - reopened.kept_length)])
        assert active.truncate("/c/g", 0) is None                # on a group boundary: one Truncate record
        write_file(active, "/c/g", 3 * 1024 * 1024 + 5, overwrite=True)
        left_open = active.append("/c/g")
        active.add_block_group(left_open.created.file_id)
        txid = active.checkpoint()
        active.remove_xattr("/c/f", "user.k")
        standby, tailer = _standby(meta, tmp_path / "b", clock)
        assert standby.replayed == active.journal.last - txid
        assert state(standby) == state(active)
        assert standby.tree.find("/c/link").target == "f" and standby.tree.find("/c/f").length == reopened.length + 10
    finally:
        if tailer is not None:
            tailer.stop()
        if standby is not None:
            standby.close()
        lease.revoke()
        active.close(checkpoint=False)
        meta.close()
