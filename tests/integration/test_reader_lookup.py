"""A reader's lookup while the NameNode marks a file's locations pending (client/fs.py ``open``,
``_readable``, ``_locate``): what a file opened by path or by a status reads after the wait, and
the one deadline the whole wait keeps, failovers included.

The NameNode here is ``ScriptedNameNode``, a test-only gRPC server on loopback answering
GetFileInfo from a script (a marked answer, then another version, or a standby's refusal while
an election is on): the timings these tests need (a file replaced exactly during the wait, an
election ending and starting again between two lookups) cannot be had from a real cluster on
demand. The real NameNode's side of the mark is tested in test_reads_at_namenode_start.py.
Time is virtual: the script advances a clock a second per call, the client's pauses are a
millisecond, so the deadlines are counted in calls, not measured.
"""

import time

import pytest

from hedgefs.client.errors import DataUnavailable, FileChanged, Unavailable
from hedgefs.proto import hedgefs_pb2 as pb
from scripted_nn_support import ELECTION, ScriptedNameNode

MARK = "cannot read /f yet: the NameNode is starting and the block reports of DataNodes it expects are still to come (dn3)"


def version(group_id: int, pending: str = "") -> pb.FileInfo:
    """/f as one RS-3-2 group ``group_id`` (its units' places do not matter: nothing is read)."""
    units = [pb.UnitLocation(index=i, datanode_id=f"dn{i + 1}", address="127.0.0.1:1", data_address="127.0.0.1:1")
             for i in range(5)]
    return pb.FileInfo(path="/f", length=1000, policy="RS-3-2-64k", block_size=65536, mtime_ms=group_id,
                       groups=[pb.BlockGroup(id=group_id, length=1000, units=units, generation=1)],
                       locations_pending=pending)


@pytest.fixture
def scripted():
    made = []

    def make(get_file_info) -> ScriptedNameNode:
        made.append(ScriptedNameNode({"GetFileInfo": lambda n, _request: get_file_info(n)}))
        return made[-1]

    yield make
    for nn in made:
        nn.stop()


def test_a_file_opened_by_path_reads_what_the_path_holds_after_the_wait(scripted):
    # Marked at the open's stat; replaced (appended to: a new last group) during the wait. Opened
    # by path, the new version is the answer (a tail -f follows it), not FileChanged.
    nn = scripted(lambda n: version(7, MARK) if n == 0 else version(8))
    with nn.client() as fs:
        with fs.open("/f") as f:
            assert [g.id for g in f.status.groups] == [8] and not f.status.locations_pending
    assert len(nn.calls) == 2


def test_a_file_opened_by_its_status_is_that_version_or_file_changed(scripted):
    # A gateway that checked a version (S3: its ETag, its length) reads that version or nothing.
    nn = scripted(lambda n: version(7, MARK) if n == 0 else version(8))
    with nn.client() as fs:
        checked = fs.stat("/f")
        assert checked.locations_pending == MARK
        with pytest.raises(FileChanged, match="the file changed while it was opened"):
            fs.open(checked)


def test_a_file_opened_by_its_status_reads_it_once_the_mark_is_gone(scripted):
    nn = scripted(lambda n: version(7, MARK) if n < 3 else version(7))
    with nn.client() as fs:
        checked = fs.stat("/f")
        with fs.open(checked) as f:
            assert [g.id for g in f.status.groups] == [7] and not f.status.locations_pending
    assert len(nn.calls) == 4


def test_the_whole_lookup_keeps_one_deadline_failovers_included(scripted):
    # An election for the lookup's first 6 s, a marked answer, then an election again: the lookup
    # gives up at its 10 s deadline, not 10 s after its second call began (the second call's own
    # failover deadline: 17 s, twice as many calls).
    nn = scripted(lambda n: version(7, MARK) if n == 6 else ELECTION)
    with nn.client(deadline_s=10.0) as fs:
        with pytest.raises(Unavailable, match="an election is on"):
            fs._call(fs._locate("/f"))
    assert len(nn.calls) == 10, len(nn.calls)   # 6 refused, 1 marked, 3 refused until the clock reads 10


def test_a_mark_that_never_clears_ends_at_the_deadline_with_its_line(scripted):
    nn = scripted(lambda n: version(7, MARK))
    with nn.client(deadline_s=10.0) as fs:
        with pytest.raises(DataUnavailable, match="^data unavailable: cannot read /f yet: "):
            fs._call(fs._locate("/f"))
    assert len(nn.calls) == 10, len(nn.calls)


def test_the_last_try_of_the_wait_is_answered_by_a_slow_namenode(scripted):
    # The open's stat (call 0, virtual time 0) finds the mark; the lookup's deadline is then 1 + 10.
    # The mark clears at its last try (call 10, virtual time 10), and the NameNode, busy after its
    # start, takes 3 s (real) to say so: the try keeps a call's usual timeout (10 s), so the open
    # succeeds. It used to get what was left of the lookup's deadline (1 s: cut off, exit 3).
    def answer(n):
        if n < 10:
            return version(7, MARK)
        time.sleep(3.0)   # the NameNode's slowness, not a wait for anything
        return version(7)

    nn = scripted(answer)
    with nn.client(deadline_s=10.0) as fs:
        with fs.open("/f") as f:
            assert not f.status.locations_pending
    assert len(nn.calls) == 11
