"""A NameNode process started on today's data of the schema-5 format converts it: an SQLite data dir
(its namenode.db), and an HA etcd prefix (its rows as t/... keys, by whichever NameNode starts
first; the others read the result). Fixtures: tests/fixtures/schema5 (made by that release)."""

import json
import pathlib
import shutil

from etcd_support import etcd_cluster, prefix  # noqa: F401  (the fixture)
from ha_support import NameNodeProcess, active_of, ids, role, stub
from hedgefs.namenode.journal.etcd_meta import EtcdMeta, parse_meta_url
from hedgefs.proto import hedgefs_pb2 as pb

from conftest import wait_until

FIXTURE = pathlib.Path(__file__).resolve().parents[1] / "fixtures" / "schema5"
LISTED = ["/data", "/data/alice.txt", "/data/ec", "/data/ec/one", "/data/ec/three", "/data/lrc", "/data/rep",
          "/data/rep/copies", "/empty", "/tmp"]


def _listing(address: str) -> list[str]:
    return [e.path for e in stub(address).List(pb.ListRequest(path="/", recursive=True), timeout=10).entries]


def test_a_namenode_started_on_a_schema5_data_dir_converts_it(tmp_path):
    (tmp_path / "nn1").mkdir()
    shutil.copyfile(FIXTURE / "namenode.db", tmp_path / "nn1" / "namenode.db")
    a = NameNodeProcess(tmp_path, "nn1", f"sqlite://{tmp_path / 'nn1' / 'namenode.db'}").start()
    try:
        assert _listing(a.address) == LISTED
        info = stub(a.address).List(pb.ListRequest(path="/data/ec"), timeout=5).entries
        assert {e.path: e.length for e in info} == {"/data/ec/one": 5000, "/data/ec/three": 74505}
        assert "converted from the schema-5 format" in a.tail(40)
        assert (tmp_path / "nn1" / "namenode.db.schema5").exists()
    finally:
        a.stop()


def test_the_first_namenode_on_a_schema5_etcd_prefix_converts_it_and_the_others_read_it(etcd_cluster, tmp_path):
    name = prefix("schema5")
    meta = EtcdMeta(parse_meta_url(etcd_cluster.url(name)))
    try:
        keys = json.loads((FIXTURE / "etcd.json").read_text())
        for rel, value in keys.items():
            meta.txn({rel: (str(value) if rel.startswith("seq/") else json.dumps(value, separators=(",", ":")))
                      .encode()})
    finally:
        meta.close()
    url = etcd_cluster.url(name)
    a = NameNodeProcess(tmp_path, "nn1", url).start()
    b = None
    try:
        active_of([a])
        assert "converted from the schema-5 format" in a.tail(40)
        assert _listing(a.address) == LISTED
        assert not [k for k in etcd_cluster.keys(f"/{name}/t/")]   # the rows went with the conversion
        b = NameNodeProcess(tmp_path, "nn2", url).start()
        wait_until(lambda: role(b.address) == f"standby:{a.address}", 15, "nn2 to be a standby naming nn1")
        assert _listing(b.address) == LISTED
        stub(a.address).Mkdir(pb.MkdirRequest(path="/after"), timeout=5, metadata=ids())
        wait_until(lambda: "/after" in _listing(b.address), 10, "the standby to follow the journal on")
        assert "converted" not in b.tail(40)
    finally:
        for n in (b, a):
            if n is not None:
                n.stop()
