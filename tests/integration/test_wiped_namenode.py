"""A NameNode whose database was wiped, restarted over surviving DataNodes.

Secure: its credential gives it the same cluster id, so the DataNodes join it; its group ids
start at 1 again, as its predecessor's did, but its generations are its own: the old units are
foreign (reported, left alone, never mapped, served or deleted) and every new file reads back as
itself. Insecure: the new namespace has a new cluster id, and every DataNode refuses it (exit 4).
"""

import hashlib

from conftest import GROUP, POLICY, client, data_socket, pattern, start_cluster, wait_until
from hedgefs.datanode.storage import parse_name
from hedgefs.ec.layout import unit_length
from hedgefs.ec.policy import parse_policy
from hedgefs.proto import datatransfer as dt


def unit_files(cluster) -> dict:
    """(DataNode, file name) -> sha256 of every unit block file on every DataNode."""
    return {(dn, p.name): hashlib.sha256(p.read_bytes()).hexdigest()
            for dn in cluster.datanode_ids for p in (cluster.root / dn / "blocks").glob("*/*.blk")}


def wipe_namenode(cluster) -> None:
    import shutil

    cluster.kill("namenode")
    shutil.rmtree(cluster.root / "namenode")
    cluster.start("namenode")


def test_a_wiped_namenode_never_serves_adopts_or_deletes_its_predecessors_units(tmp_path):
    cluster = start_cluster(tmp_path / "c", "secure")
    try:
        old = {f"/old/{i}": pattern(GROUP + 1000 * i, seed=i) for i in range(6)}   # 11 groups
        with client(cluster.namenode) as fs:
            fs.mkdir("/old")
            for path, data in old.items():
                fs.write_bytes(path, data)
            old_groups = {g.id: g.generation for path in old for g in fs.stat(path).groups}
        before = unit_files(cluster)
        assert len(old_groups) == 11

        wipe_namenode(cluster)
        cluster.wait_live(cluster.datanode_ids, 60)
        with client(cluster.namenode) as fs:
            # every DataNode has reported its old units, as foreign
            wait_until(lambda: sum(d.foreign_units for d in fs.admin.report().datanodes) == len(before),
                     60, "every old unit reported foreign")
            assert [e.path for e in fs.list("/")] == []
            new, new_groups = {}, {}
            fs.mkdir("/new")
            while not set(old_groups) <= set(new_groups):      # until the new ids have caught up
                path = f"/new/{len(new)}"
                new[path] = pattern(GROUP + 777 * len(new), seed=100 + len(new))
                fs.write_bytes(path, new[path])
                new_groups.update((g.id, g) for g in fs.stat(path).groups)
            assert all(new_groups[i].generation != old_groups[i] for i in old_groups)   # the same ids, other generations
            for path, data in new.items():
                assert fs.read_bytes(path) == data
            assert fs.admin.fsck("/").status == "HEALTHY"
            # Where a DataNode holds both the old and the new unit (g, i), each generation reads as itself.
            both = [(g, u) for g in new_groups.values() for u in g.units.values()
                    if any(parse_name(name)[:2] == (g.id, u.index) and parse_name(name)[2] == old_groups[g.id]
                           for dn, name in before if dn == u.datanode_id)]
            assert both    # ten DataNodes, eleven groups of nine units: some (g, i) land twice (p of none < 1e-4)
            for g, u in both:
                n = min(100, unit_length(parse_policy(POLICY), g.length, u.index))
                with data_socket(cluster.namenode, u) as s:
                    # the new unit's bytes (checked against its CRCs), and its token opens nothing else
                    assert len(dt.read_range(s, g.id, u.index, 0, n, token=u.token, generation=g.generation)) == n
                    try:
                        dt.read_range(s, g.id, u.index, 0, n, token=u.token, generation=old_groups[g.id])
                        raise AssertionError("the token of the new unit read the old one")
                    except dt.TransferError as err:
                        assert err.status == "PERMISSION_DENIED"
            # Deletes travel in heartbeats, from the NameNode's pending deletes: it owes none, for
            # any DataNode, though every old unit has been reported (and found foreign).
            assert sum(d.pending_deletes for d in fs.admin.report().datanodes) == 0
        after = unit_files(cluster)
        assert {k: v for k, v in after.items() if k in before} == before   # every old unit, byte for byte
    finally:
        cluster.down()


def test_an_insecure_wiped_namenode_is_a_new_cluster_and_datanodes_refuse_it(tmp_path):
    cluster = start_cluster(tmp_path / "c", datanodes=9)
    try:
        with client(cluster.namenode) as fs:
            fs.write_bytes("/f", pattern(1000, seed=1))
        before = unit_files(cluster)
        joined = {line for dn in cluster.datanode_ids for line in (cluster.root / dn / "VERSION").read_text().splitlines()
                  if line.startswith("cluster_id=")}
        assert len(joined) == 1
        wipe_namenode(cluster)
        for dn in cluster.datanode_ids:   # each re-registers with the id it joined, is refused, and stops
            wait_until(lambda: cluster.exit_code(dn) is not None, 60, f"{dn} to be refused")
            assert cluster.exit_code(dn) == 4
        log = (cluster.root / "logs" / "dn1.log").read_text().strip().splitlines()
        assert log[-1].startswith(f"hedgefs: datanode dn1: namenode {cluster.namenode} refused dn1: DataNode dn1 "
                                  f"belongs to cluster CID-")
        assert "; this NameNode's cluster is CID-" in log[-1]
        assert unit_files(cluster) == before
    finally:
        cluster.down()
