"""What the client makes of a Mkdir's answer (client/batched.py ``_made``): the directory's status
from the NameNode; a retried call's directory gone since (a new NameNode's empty ``info``) is that,
never taken for an older NameNode (which answers no ``info`` at all, and gets SetPermission and
GetFileInfo after it). The real NameNode's side: a retried Mkdir answered after its directory was
deleted. The client's side against ``ScriptedNameNode`` (scripted_nn_support.py): the answers of
a new and of an older NameNode, on demand."""

import grpc
import pytest

from conftest import start_cluster
from hedgefs.client.errors import NotFound
from hedgefs.client.namenodes import CALL_ID_KEY, CLIENT_ID_KEY, call_id
from hedgefs.proto import hedgefs_pb2 as pb
from hedgefs.proto import hedgefs_pb2_grpc
from scripted_nn_support import ScriptedNameNode

DIR = pb.FileInfo(path="/d", is_dir=True, permission=0o700, owner="me", group="me", mtime_ms=1)


@pytest.fixture
def scripted():
    made = []

    def make(**answers) -> ScriptedNameNode:
        made.append(ScriptedNameNode(answers))
        return made[-1]

    yield make
    for nn in made:
        nn.stop()


def test_a_retried_mkdir_whose_directory_is_gone_answers_an_empty_info_not_none(tmp_path):
    cluster = start_cluster(tmp_path / "c", datanodes=0)
    try:
        with grpc.insecure_channel(cluster.namenode) as channel:
            stub = hedgefs_pb2_grpc.NameNodeStub(channel)
            ids = ((CLIENT_ID_KEY, "test-n3"), (CALL_ID_KEY, call_id()))
            first = stub.Mkdir(pb.MkdirRequest(path="/d", permission=0o700), metadata=ids)
            assert first.info.path == "/d" and first.info.permission == 0o700
            stub.Delete(pb.DeleteRequest(path="/d"))
            again = stub.Mkdir(pb.MkdirRequest(path="/d", permission=0o700), metadata=ids)   # a lost reply's retry
            assert again.HasField("info") and again.info.path == ""   # present, empty: made, gone since
            with pytest.raises(grpc.RpcError) as gone:
                stub.GetFileInfo(pb.PathRequest(path="/d"))
            assert gone.value.code() == grpc.StatusCode.NOT_FOUND   # (not made again by the retry)
    finally:
        cluster.down()


def test_a_made_directory_gone_since_is_not_found_and_nothing_else_is_sent(scripted):
    nn = scripted(Mkdir=lambda n, request: pb.MkdirResponse(info=pb.FileInfo()))
    with nn.client() as fs:
        with pytest.raises(NotFound, match="^/d: the directory was made, and is gone since"):
            fs.mkdir("/d", permission=0o700)
        assert fs.mkdirs(["/d"]) == [None]   # made: what mkdirs says (no status wanted)
    assert [m for m, _ in nn.calls] == ["Mkdir", "Mkdir"]   # no SetPermission, no GetFileInfo


def test_an_older_namenodes_answer_gets_the_mode_set_and_the_status_asked(scripted):
    nn = scripted(Mkdir=lambda n, request: pb.MkdirResponse(),   # (on the wire: Empty, as it answered)
                  SetPermission=lambda n, request: pb.Empty(),
                  GetFileInfo=lambda n, request: DIR)
    with nn.client() as fs:
        made = fs.mkdir("/d", permission=0o700)
    assert made.path == "/d" and made.is_dir and made.permission == 0o700
    assert [m for m, _ in nn.calls] == ["Mkdir", "SetPermission", "GetFileInfo"]
    assert nn.of("SetPermission")[0].permission == 0o700


def test_a_batched_mkdirs_empty_info_is_gone_since_and_no_infos_is_an_older_namenode(scripted):
    def mkdirs(n, request):
        if n == 0:   # a new NameNode: an info per item, the second's directory gone since
            return pb.MkdirsResponse(results=[pb.ItemResult(), pb.ItemResult()], infos=[DIR, pb.FileInfo()])
        return pb.MkdirsResponse(results=[pb.ItemResult(), pb.ItemResult()])   # an older one: no infos

    nn = scripted(Mkdirs=mkdirs, SetPermission=lambda n, request: pb.Empty(), GetFileInfo=lambda n, request: DIR)
    with nn.client() as fs:
        made, gone = fs.batched._mkdirs([("/d", True, 0o700), ("/e", True, 0o700)])
        assert made.path == "/d" and isinstance(gone, NotFound)
        assert [m for m, _ in nn.calls] == ["Mkdirs"]
        assert [s.path for s in fs.batched._mkdirs([("/d", True, 0o700), ("/e", True, 0o700)])] == ["/d", "/d"]
    assert [m for m, _ in nn.calls][1:] == ["Mkdirs", "SetPermission", "GetFileInfo", "SetPermission", "GetFileInfo"]
