"""The repair worker against real in-process DataNodes (their data ports on loopback, no NameNode).

Group layout for RS-3-2-4k: a group of 5 full stripes and a short last stripe (data cells of
4096, 904, 0 bytes; parity 4096), so every unit has a different length; one group shorter than
one cell (units 1 and 2 empty). Each unit is rebuilt from the others and compared byte for byte;
then sources fail (error, stall, DATA_LOSS) and are replaced; too few sources fails cleanly.
LRC-6-2-2-4k on 10 of the DataNodes: a data or local parity unit is rebuilt from its 3 group peers,
a global parity from the 6 data units, and a failed group peer sends the repair global.
"""

import os
import threading
import time

import pytest

from conftest import wait_until
from hedgefs.datanode.repair_worker import RepairError, RepairRunner, repair_unit
from hedgefs.datanode.server import DataNode
from hedgefs.ec.codec import codec_for
from hedgefs.ec.layout import cell_length, num_stripes
from hedgefs.ec.policy import parse_policy
from hedgefs.proto import hedgefs_pb2 as pb

POLICY = "RS-3-2-4k"
P = parse_policy(POLICY)


def encode_group(data: bytes, policy=P) -> list[bytes]:
    """The k+m internal blocks of one group, built stripe by stripe like a striped writer."""
    codec = codec_for(policy)
    units = [bytearray() for _ in range(policy.units)]
    pos = 0
    for s in range(num_stripes(policy, len(data))):
        cells = []
        for u in range(policy.k):
            n = cell_length(policy, len(data), s, u)
            cells.append(data[pos:pos + n])
            pos += n
        for u, c in enumerate(cells):
            units[u] += c
        for j, parity in enumerate(codec.encode(cells)):
            units[policy.k + j] += parity.tobytes()
    return [bytes(u) for u in units]


@pytest.fixture(scope="module")
def nodes(tmp_path_factory):
    root = tmp_path_factory.mktemp("repair")
    dns = []
    for n in range(1, 12):
        dn = DataNode(datanode_id=f"dn{n}", port=0, data_dir=str(root / f"dn{n}"),
                      namenode="127.0.0.1:1", enable_faults=True, fsync=False,
                      heartbeat_interval_s=60)
        dn.start()
        dns.append(dn)
    yield dns
    for dn in dns:
        dn.stop(grace=0)


def store_group(nodes, gid: int, data: bytes, policy=P, skip=()) -> list[bytes]:
    """Unit u of the group on nodes[u] (dn1..dn5 for RS-3-2), but units ``skip``; dn6, dn7 hold
    nothing of it."""
    units = encode_group(data, policy)
    for u, blob in enumerate(units):
        if u in skip:
            continue
        w = nodes[u].store.open_writer(gid, u, len(blob), generation=0)
        w.write(blob)
        w.commit()
    return units


def command(nodes, gid, index, group_length, sources=None, policy=P) -> pb.RepairUnitCommand:
    sources = range(policy.units) if sources is None else sources
    return pb.RepairUnitCommand(
        group_id=gid, index=index, policy=policy.name, group_length=group_length,
        sources=[pb.UnitLocation(index=u, datanode_id=nodes[u].datanode_id, address=nodes[u].address,
                                 data_address=nodes[u].data_address)
                 for u in sources if u != index])


def stored(dn, gid, index) -> bytes:
    return b"".join(dn.store.read(gid, index, 0, dn.store.length(gid, index, generation=0), generation=0))


@pytest.fixture(autouse=True)
def no_faults(nodes):
    for dn in nodes:
        dn.faults.clear()
    yield
    for dn in nodes:
        dn.faults.clear()


GROUP_LENGTH = 5 * P.stripe_data_size + P.cell_size + 904


@pytest.mark.parametrize("index", range(P.units))
def test_every_unit_is_rebuilt_exactly(nodes, index):
    data = os.urandom(GROUP_LENGTH)
    units = store_group(nodes, 100, data)
    target = nodes[5]
    length, used = repair_unit(command(nodes, 100, index, GROUP_LENGTH), target.store)
    assert length == len(units[index])
    assert stored(target, 100, index) == units[index]
    # data units are preferred: parity is read only when a data unit is the one lost
    assert len(used) == P.k and ("dn4" in used) == (index < P.k)


def test_group_shorter_than_one_cell(nodes):
    """Units 1 and 2 are zero units (ec/layout.py): never stored, never named as sources; each
    stored unit is rebuilt from one other and the zeros; a zero unit is refused."""
    data = os.urandom(1000)
    units = store_group(nodes, 101, data, skip=(1, 2))
    assert [len(u) for u in units] == [1000, 0, 0, 1000, 1000]
    for index in (0, 3, 4):
        length, used = repair_unit(command(nodes, 101, index, 1000, sources=(0, 3, 4)), nodes[6].store)
        assert stored(nodes[6], 101, index) == units[index] and length == len(units[index])
        # k = 3 sources, 2 of them the zero units: one DataNode read
        assert len(used) == 1 and used[0] in {nodes[u].datanode_id for u in (0, 3, 4) if u != index}
    with pytest.raises(RepairError, match="unit 1 of a group of 1000 bytes is zeros"):
        repair_unit(command(nodes, 101, 1, 1000, sources=(0, 3, 4)), nodes[6].store)


@pytest.mark.parametrize("fault", [{"error_probability": 1.0}, {"corrupt_probability": 1.0}])
def test_a_failing_source_is_replaced(nodes, fault):
    data = os.urandom(GROUP_LENGTH)
    units = store_group(nodes, 102, data)
    nodes[0].faults.set(**fault)      # UNAVAILABLE / DATA_LOSS from the first byte
    length, used = repair_unit(command(nodes, 102, 2, GROUP_LENGTH), nodes[5].store)
    assert stored(nodes[5], 102, 2) == units[2]
    assert used == ["dn1", "dn2", "dn4", "dn5"]


def test_a_source_failing_mid_unit_is_replaced_at_the_current_stripe(nodes):
    data = os.urandom(GROUP_LENGTH)
    units = store_group(nodes, 103, data)
    # dn2 serves unit 1's first cell, then its disk goes away: stripes 1.. come from unit 4
    real_open = nodes[1].store.open_unit
    calls = []

    def open_then_fail(g, i, **kw):
        calls.append(i)
        if len(calls) > 1:
            raise OSError("disk went away")
        return real_open(g, i, **kw)
    nodes[1].store.open_unit = open_then_fail
    try:
        _, used = repair_unit(command(nodes, 103, 0, GROUP_LENGTH), nodes[6].store)
    finally:
        del nodes[1].store.open_unit
    assert stored(nodes[6], 103, 0) == units[0]
    assert used == ["dn2", "dn3", "dn4", "dn5"]


def test_a_stalled_source_is_replaced_after_the_stripe_timeout(nodes):
    data = os.urandom(GROUP_LENGTH)
    units = store_group(nodes, 104, data)
    nodes[2].faults.set(stall=True)
    t0 = time.monotonic()
    _, used = repair_unit(command(nodes, 104, 1, GROUP_LENGTH), nodes[5].store,
                          stripe_timeout_s=0.5)
    assert time.monotonic() - t0 < 10
    assert stored(nodes[5], 104, 1) == units[1] and "dn3" in used and "dn4" in used
    # The stalled read is hung up on; the DataNode sees the hang-up a moment later (its own thread).
    wait_until(lambda: nodes[2].faults.state()["cancelled_reads"] >= 1, 10, "dn3 to see its stalled read cancelled")


def test_too_few_sources_fails_and_leaves_nothing(nodes):
    data = os.urandom(GROUP_LENGTH)
    store_group(nodes, 105, data)
    nodes[3].faults.set(error_probability=1.0)
    with pytest.raises(RepairError, match="too few sources"):
        repair_unit(command(nodes, 105, 0, GROUP_LENGTH, sources=[1, 2, 3]), nodes[6].store)
    assert not nodes[6].store.has(105, 0, generation=0)
    assert list((nodes[6].store.root / "tmp").iterdir()) == []
    with pytest.raises(RepairError, match="need 3"):
        repair_unit(command(nodes, 105, 0, GROUP_LENGTH, sources=[1, 2]), nodes[6].store)


def test_runner_reports_stored_units_and_skips_duplicates(nodes):
    data = os.urandom(GROUP_LENGTH)
    units = store_group(nodes, 106, data)
    got = []
    done = threading.Event()

    def on_stored(g, i, _gen, n):
        got.append((g, i, n))
        done.set()
    nodes[0].faults.set(read_delay_ms=300)   # keep the first repair busy while we resubmit
    runner = RepairRunner("dn7", nodes[6].store, max_repairs=2, on_stored=on_stored)
    try:
        assert runner.submit(command(nodes, 106, 4, GROUP_LENGTH)) is not None
        assert runner.submit(command(nodes, 106, 4, GROUP_LENGTH)) is None
        assert runner.active() == 1
        assert done.wait(20)
    finally:
        runner.shutdown()
    assert got == [(106, 4, len(units[4]))]
    assert stored(nodes[6], 106, 4) == units[4]
    wait_until(lambda: not runner.active(), 5, "the repair runner to have no repair active", interval=0.01)


def test_decode_uses_the_commands_policy(nodes):
    data = os.urandom(GROUP_LENGTH)
    store_group(nodes, 107, data)
    cmd = command(nodes, 107, 0, GROUP_LENGTH)
    cmd.policy = "RS-6-3-4k"            # wrong k: needs 6 sources, there are 4
    with pytest.raises(RepairError, match="need 6"):
        repair_unit(cmd, nodes[6].store)
    cmd.policy = "nonsense"
    with pytest.raises(ValueError):
        repair_unit(cmd, nodes[6].store)


LRC = parse_policy("LRC-6-2-2-4k")
LRC_LENGTH = 3 * LRC.stripe_data_size + 2 * LRC.cell_size + 77   # a short last stripe


@pytest.mark.parametrize("index", range(LRC.units))
def test_lrc_units_are_rebuilt_from_their_group_or_globally_for_a_global_parity(nodes, index):
    units = store_group(nodes, 200 + index, os.urandom(LRC_LENGTH), LRC)
    target = nodes[10]
    length, used = repair_unit(command(nodes, 200 + index, index, LRC_LENGTH, policy=LRC), target.store)
    assert length == len(units[index]) and stored(target, 200 + index, index) == units[index]
    group = {0: 0, 1: 0, 2: 0, 6: 0, 3: 1, 4: 1, 5: 1, 7: 1}.get(index)
    members = {0: [0, 1, 2, 6], 1: [3, 4, 5, 7]}
    expected = [u for u in members[group] if u != index] if group is not None else list(range(6))
    assert used == [nodes[u].datanode_id for u in expected]   # 3 reads, not 6 (6 for a global parity)


def test_a_failed_group_peer_sends_the_lrc_repair_global(nodes):
    units = store_group(nodes, 220, os.urandom(LRC_LENGTH), LRC)
    nodes[1].faults.set(error_probability=1.0)   # unit 1, a peer of unit 0
    _, used = repair_unit(command(nodes, 220, 0, LRC_LENGTH, policy=LRC), nodes[10].store)
    assert stored(nodes[10], 220, 0) == units[0]
    # the group (units 1, 2, 6), then without unit 1: 2 and 6 kept, group 1's data and global parity 8
    assert used == ["dn2", "dn3", "dn7", "dn4", "dn5", "dn6", "dn9"]
    with pytest.raises(RepairError, match=r"cannot rebuild unit 0: LRC-6-2-2: cannot rebuild units \[0\]"):
        repair_unit(command(nodes, 220, 0, LRC_LENGTH, sources=[1, 2, 3, 4, 5, 7], policy=LRC), nodes[10].store)
