"""kill -9 of the active at three points of a create (the issue's first failure test), on real
processes and a real etcd: before the Create runs, after its transaction but before its reply,
and between Create and Complete. The writer retries on the new active with the same call id, as
the client does: in every case exactly one file, and the write completes there.

The crash points are the NameNode's own fault injection (HEDGEFS_NAMENODE_CRASH=before:Create or
after:Create: it kill -9s itself there). The client's failover is not used (the client's own
work): the test is the client, with a raw stub and the retry-cache ids.
"""

import grpc
import pytest

from etcd_support import etcd_cluster, prefix  # noqa: F401  (the fixture)
from ha_support import DataNodeProcess, NameNodeProcess, active_of, ids, live_datanodes, stub
from hedgefs.proto import hedgefs_pb2 as pb

from conftest import wait_until

POLICY = ("--default-policy", "REPLICATE-1", "--min-replicas", "1")


@pytest.mark.parametrize("crash", ["before:Create", "after:Create", "between"])
def test_kill_9_of_the_active_mid_create_leaves_exactly_one_file(etcd_cluster, tmp_path, crash):
    url = etcd_cluster.url(prefix("crash"))
    env = {"HEDGEFS_NAMENODE_CRASH": crash} if crash != "between" else {}
    a = NameNodeProcess(tmp_path, "nn1", url, *POLICY, env=env).start()
    b = dn = None
    try:
        active_of([a])
        b = NameNodeProcess(tmp_path, "nn2", url, *POLICY).start()
        dn = DataNodeProcess(tmp_path, "dn1", a.address).start()
        wait_until(lambda: live_datanodes(a.address) == 1, 30, "the DataNode on nn1")
        stub(a.address).Mkdir(pb.MkdirRequest(path="/c"), timeout=5, metadata=ids())
        create = pb.CreateRequest(path="/c/f", client_name="test")
        call = ids()   # the same ids on every retry of this Create
        try:
            first = stub(a.address).Create(create, timeout=10, metadata=call)
        except grpc.RpcError as err:
            assert crash != "between", err
            assert err.code() == grpc.StatusCode.UNAVAILABLE, err   # the NameNode died under the call
            first = None
        if crash == "between":
            a.kill()
        else:
            a.proc.wait(20)
        active_of([b], timeout=20)
        if crash == "after:Create":
            # committed, the reply lost: the retry finds its first answer in the retry cache (a
            # new create would be refused here: no DataNode has reported to nn2 yet)
            first = stub(b.address).Create(create, timeout=10, metadata=call)
        if first is None:
            # never committed: the retry creates it; the DataNode follows the new active first
            # (a DataNode reporting to every NameNode does so by itself)
            dn.stop()
            dn = DataNodeProcess(tmp_path, "dn1", b.address).start()
            wait_until(lambda: live_datanodes(b.address) == 1, 30, "the DataNode on nn2")
            first = stub(b.address).Create(create, timeout=10, metadata=call)   # the retry
        stub(b.address).Complete(pb.CompleteRequest(file_id=first.file_id, length=0), timeout=10, metadata=ids())
        listed = stub(b.address).List(pb.ListRequest(path="/c"), timeout=5).entries
        assert [e.path for e in listed] == ["/c/f"]
        assert stub(b.address).GetFileInfo(pb.PathRequest(path="/c/f"), timeout=5).length == 0
        with pytest.raises(grpc.RpcError) as exists:   # a new Create (not a retry) finds it
            stub(b.address).Create(create, timeout=10, metadata=ids())
        assert exists.value.code() == grpc.StatusCode.ALREADY_EXISTS
    finally:
        for n in (dn, a, b):
            if n is not None:
                n.stop()
