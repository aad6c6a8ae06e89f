"""A retried batch is applied once (issue 44): a NameNode process killed -9 between a batched
call's journal record and its answer (the fault point ``after:METHOD``: the records durable, the
reply not sent), restarted, and the same batch sent again with the same ids, as a client retrying
a lost reply does: every item gets its first answer (not "exists" or "no such file"), the bad
item its own refusal, naming it; the same batch with new ids shows what a second application
would have said."""

from __future__ import annotations

import signal

import grpc
import pytest

from hedgefs.proto import hedgefs_pb2 as pb
from test_namenode_crash import start

NOT_FOUND, ALREADY_EXISTS = grpc.StatusCode.NOT_FOUND.value[0], grpc.StatusCode.ALREADY_EXISTS.value[0]


def meta(client: str = "batch-client"):
    return (("hedgefs-client-id", client),)


def mkdirs(nn, paths, call_ids, parents=False):
    return nn.Mkdirs(pb.MkdirsRequest(dirs=[pb.MkdirRequest(path=p, parents=parents) for p in paths],
                                      call_ids=call_ids), timeout=10, metadata=meta())


def deletes(nn, paths, call_ids):
    return nn.DeleteMany(pb.DeleteManyRequest(deletes=[pb.DeleteRequest(path=p) for p in paths],
                                              call_ids=call_ids), timeout=10, metadata=meta())


@pytest.mark.parametrize("method", ["Mkdirs", "DeleteMany"])
def test_a_batch_retried_after_a_kill_9_before_its_answer_is_applied_once(tmp_path, method):
    data_dir = tmp_path / "nn"
    names = [f"/p/d{i}" for i in range(10)]
    bad = "/nowhere/x" if method == "Mkdirs" else "/p/nope"
    batch = names[:5] + [bad] + names[5:]
    call_ids = [f"{method}-{i}" for i in range(len(batch))]
    proc, channel, nn = start(data_dir, tmp_path, "first", {"HEDGEFS_NAMENODE_CRASH": f"after:{method}"})
    try:
        nn.Mkdir(pb.MkdirRequest(path="/p"), timeout=10)
        if method == "DeleteMany":
            assert all(r.code == 0 for r in mkdirs(nn, names, [f"m{i}" for i in range(10)]).results)
        with pytest.raises(grpc.RpcError) as lost:
            (mkdirs if method == "Mkdirs" else deletes)(nn, batch, call_ids)
        assert lost.value.code() == grpc.StatusCode.UNAVAILABLE
        proc.wait(30)
    finally:
        channel.close()
    assert proc.returncode == -signal.SIGKILL, f"it did not die after {method}"

    proc, channel, nn = start(data_dir, tmp_path, "again")
    try:
        listed = {e.path for e in nn.List(pb.ListRequest(path="/p", limit=1000), timeout=10).entries}
        assert listed == (set(names) if method == "Mkdirs" else set()), "the batch's records were not durable"
        answer = (mkdirs if method == "Mkdirs" else deletes)(nn, batch, call_ids)   # the client's retry
        codes = [r.code for r in answer.results]
        assert codes == [0] * 5 + [NOT_FOUND] + [0] * 5, answer
        assert bad.rsplit("/", 1)[0] in answer.results[5].message   # the bad item names its path
        fresh = (mkdirs if method == "Mkdirs" else deletes)(nn, batch, [f"new-{i}" for i in range(len(batch))])
        again = ALREADY_EXISTS if method == "Mkdirs" else NOT_FOUND
        assert [r.code for r in fresh.results] == [again] * 5 + [NOT_FOUND] + [again] * 5
        listed = {e.path for e in nn.List(pb.ListRequest(path="/p", limit=1000), timeout=10).entries}
        assert listed == (set(names) if method == "Mkdirs" else set())
    finally:
        channel.close()
        proc.terminate()
        proc.wait(30)
