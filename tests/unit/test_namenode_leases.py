"""Leases of files being written, without gRPC: renewed by AddBlockGroup and RenewLease, expired
by the monitor's pass (the write abandoned), and restarted when a NameNode starts to serve."""

import pytest

from hedgefs.namenode.errors import NotFound
from nn_support import add_datanodes, heartbeat_all, make_namenode


def test_expired_lease_abandons_the_write(tmp_path, clock):
    nn = make_namenode(tmp_path / "nn", clock, lease_timeout_s=60)
    add_datanodes(nn, 5)
    created = nn.create("/f")
    clock.advance(50)
    heartbeat_all(nn)
    nn.add_block_group(created.file_id)  # renews the lease
    clock.advance(50)
    heartbeat_all(nn)
    nn.tick()
    nn.add_block_group(created.file_id)
    clock.advance(61)
    heartbeat_all(nn)
    nn.tick()
    with pytest.raises(NotFound):
        nn.complete(created.file_id, 0, [])
    assert sum(nn.blocks.pending_delete_counts().values()) == 10
    nn.close()


def test_renewed_lease_keeps_a_slow_write_and_an_unrenewed_one_expires(tmp_path, clock):
    nn = make_namenode(tmp_path / "nn", clock, lease_timeout_s=20)
    add_datanodes(nn, 5)
    slow = nn.create("/slow")
    dead = nn.create("/dead")
    assert slow.lease_timeout_ms == 20_000
    for _ in range(6):          # 60 s of writing, renewed every 10 s
        clock.advance(10)
        heartbeat_all(nn)
        nn.renew_lease(slow.file_id)
        nn.tick()
    nn.complete(slow.file_id, 0, [])
    with pytest.raises(NotFound):
        nn.renew_lease(dead.file_id)
    with pytest.raises(NotFound):
        nn.renew_lease(slow.file_id)    # complete: nothing to renew
    nn.close()


def test_a_restarted_namenode_gives_every_open_write_a_whole_lease_before_it_abandons_it(tmp_path, clock):
    """HDFS renews every lease on start-up. A writer whose renewals failed while the NameNode was
    down (here: for five lease periods) must not be abandoned by the new process's first pass."""
    nn = make_namenode(tmp_path / "nn", clock, lease_timeout_s=60)
    add_datanodes(nn, 5)
    back, gone = nn.create("/back"), nn.create("/gone")
    nn.close()
    clock.advance(300)
    nn = make_namenode(tmp_path / "nn", clock, lease_timeout_s=60)
    add_datanodes(nn, 5)
    clock.advance(59)
    heartbeat_all(nn)
    nn.tick()
    nn.renew_lease(back.file_id)            # its writer comes back within a lease of the restart
    clock.advance(2)
    heartbeat_all(nn)
    nn.tick()
    nn.renew_lease(back.file_id)
    with pytest.raises(NotFound):           # its writer never came back: abandoned a lease after the restart
        nn.renew_lease(gone.file_id)
    nn.close()
