"""The NameNode's batched calls and fused creates without gRPC (issue 44): each item of a batch is
answered in its own slot as its single call would be (one bad item fails alone, named), each
change with its own retry ids (a batch sent again is applied once, also after a restart that
replays the journal), a small file in two calls, an empty one in one."""

import pytest

from hedgefs.namenode.errors import AlreadyExists, FailedPrecondition, InvalidArgument, NotFound
from nn_support import add_datanodes, make_namenode, stored, write_file


@pytest.fixture
def nn(tmp_path, clock):
    namenode = make_namenode(tmp_path / "nn", clock)
    add_datanodes(namenode, 5)
    yield namenode
    namenode.close()


def ids(prefix: str, n: int) -> list[tuple[str, str]]:
    return [("client-a", f"{prefix}{i}") for i in range(n)]


def test_mkdir_many_answers_each_item_and_names_the_bad_one(nn):
    write_file(nn, "/file", 1)
    out = nn.mkdir_many([("/a", False), ("/file/x", False), ("/b/c", True, 0o700), ("/missing/d", False)])
    assert (out[0].path, out[0].is_dir, out[0].mode) == ("/a", True, 0o755)   # each made one's entry
    assert (out[2].path, out[2].mode) == ("/b/c", 0o700)
    assert isinstance(out[1], FailedPrecondition) and str(out[1]) == "not a directory: /file"
    assert isinstance(out[3], NotFound) and "/missing" in str(out[3])
    assert sorted(e.path for e in nn.list("/", recursive=True)) == ["/a", "/b", "/b/c", "/file"]


def test_delete_many_answers_each_item(nn):
    for name in ("x", "y"):
        write_file(nn, f"/{name}", 10)
    nn.mkdir("/full/sub", parents=True)
    out = nn.delete_many([("/x", False), ("/nope", False), ("/full", False), ("/y", False)])
    assert out[0] is None and out[3] is None
    assert isinstance(out[1], NotFound) and "/nope" in str(out[1])
    assert isinstance(out[2], FailedPrecondition) and str(out[2]) == "directory not empty: /full"
    assert sorted(e.path for e in nn.list("/")) == ["/full"]


def test_file_infos_answer_each_path(nn):
    write_file(nn, "/f", 100)
    nn.mkdir("/d")
    out = nn.file_infos(["/f", "/gone", "/d"])
    assert out[0].entry.length == 100 and len(out[0].groups) == 1
    assert isinstance(out[1], NotFound) and "/gone" in str(out[1])
    assert out[2].entry.is_dir


def test_a_batch_of_more_than_1000_items_is_refused_whole(nn):
    with pytest.raises(InvalidArgument, match="at most 1000 items, not 1001"):
        nn.mkdir_many([(f"/d{i}", False) for i in range(1001)])
    assert nn.list("/") == []
    with pytest.raises(InvalidArgument, match="2 call ids for 1 items"):
        nn.delete_many([("/x", False)], retries=ids("c", 2))


def test_an_empty_file_is_one_call_complete_and_visible(nn):
    created = nn.create("/empty", empty=True)
    info = nn.file_info("/empty")
    assert info.entry.length == 0 and info.groups == [] and created.first_group is None
    assert not nn.tree.writing   # no lease left behind
    with pytest.raises(AlreadyExists):
        nn.create("/empty", empty=True)
    nn.create("/empty", overwrite=True, empty=True)
    assert nn.file_info("/empty").entry.length == 0


def test_a_small_file_is_create_with_its_group_then_complete(nn):
    created = nn.create("/small", with_group=True)
    group = created.first_group
    assert group is not None and len(group.units) == 5
    assert nn.tree.writing[created.file_id].file.groups[0].id == group.id
    nn.complete(created.file_id, 10, [stored(nn, group, 10)])
    info = nn.file_info("/small")
    assert info.entry.length == 10 and [g.id for g in info.groups] == [group.id]


def test_an_unused_first_group_goes_at_complete(nn):
    created = nn.create("/e", with_group=True)
    nn.complete(created.file_id, 0, [])
    assert nn.file_info("/e").groups == []
    assert nn.blocks.get(created.first_group.id) is None


def test_create_many_empty_and_small_with_one_bad(nn):
    write_file(nn, "/taken", 1)
    out = nn.create_many([dict(path="/e1", empty=True), dict(path="/taken", empty=True),
                          dict(path="/s1", with_group=True)])
    assert out[0].first_group is None and nn.file_info("/e1").entry.length == 0
    assert isinstance(out[1], AlreadyExists) and "/taken" in str(out[1])
    assert out[2].first_group is not None
    with pytest.raises(NotFound):   # invisible until complete
        nn.file_info("/s1")


def test_a_retried_batch_is_applied_once(nn):
    retries = ids("m", 3)
    first = nn.mkdir_many([("/a", False), ("/b", False), ("/a", False)], retries=retries)
    assert [e.path for e in first[:2]] == ["/a", "/b"] and isinstance(first[2], AlreadyExists)
    again = nn.mkdir_many([("/a", False), ("/b", False), ("/a", False)], retries=retries)
    assert again[:2] == first[:2]   # answered from the retry cache, not "exists"
    assert isinstance(again[2], AlreadyExists)   # a refusal is not kept: it runs again
    write_file(nn, "/f", 5)
    deletes = ids("d", 2)
    assert nn.delete_many([("/f", False), ("/b", False)], retries=deletes) == [None, None]
    assert nn.delete_many([("/f", False), ("/b", False)], retries=deletes) == [None, None]
    creates = ids("c", 2)
    made = nn.create_many([dict(path="/e", empty=True), dict(path="/s", with_group=True)], retries=creates)
    again = nn.create_many([dict(path="/e", empty=True), dict(path="/s", with_group=True)], retries=creates)
    assert [c.file_id for c in again] == [c.file_id for c in made]
    assert again[1].first_group.id == made[1].first_group.id   # the same group, not a second one
    assert len(nn.tree.writing[made[1].file_id].file.groups) == 1


def test_a_retried_batch_after_a_restart_is_applied_once(tmp_path, clock):
    nn = make_namenode(tmp_path / "nn", clock)
    add_datanodes(nn, 5)
    write_file(nn, "/f", 5)
    deletes, creates = ids("d", 2), ids("c", 2)
    batch = [dict(path="/e", empty=True), dict(path="/s", with_group=True)]
    assert nn.delete_many([("/f", False), ("/nope", False)], retries=deletes)[0] is None
    made = nn.create_many(batch, retries=creates)
    nn.close(checkpoint=False)   # the next start replays the journal: the retry cache with it
    nn = make_namenode(tmp_path / "nn", clock)
    try:
        add_datanodes(nn, 5)
        out = nn.delete_many([("/f", False), ("/nope", False)], retries=deletes)
        assert out[0] is None and isinstance(out[1], NotFound)
        again = nn.create_many(batch, retries=creates)
        assert [c.file_id for c in again] == [c.file_id for c in made]
        assert again[1].first_group.id == made[1].first_group.id
        assert nn.file_info("/e").entry.length == 0
    finally:
        nn.close()


def test_a_fused_create_cut_between_its_records_is_finished_by_its_retry(nn):
    """A crash between a fused create's Create record and its Complete (or AddGroup) record: the
    retry, with the same ids, finds the Create kept and logs only what is missing."""
    retry = ("client-a", "x1")
    created = nn.create("/e", retry=retry)              # as if the crash came after the first record
    assert created.file_id in nn.tree.writing
    again = nn.create("/e", retry=retry, empty=True)
    assert again.file_id == created.file_id and nn.file_info("/e").entry.length == 0
    retry = ("client-a", "x2")
    created = nn.create("/s", retry=retry)
    again = nn.create("/s", retry=retry, with_group=True)
    assert again.file_id == created.file_id and again.first_group is not None
    third = nn.create("/s", retry=retry, with_group=True)
    assert third.first_group.id == again.first_group.id


def test_a_fused_create_whose_group_cannot_be_placed_leaves_no_write_behind(nn):
    """Create with_group when its group cannot be placed (every DataNode excluded by being dead):
    the caller gets the refusal and no file id, so the Create is abandoned at once, not left
    holding the path for a lease's length."""
    calls = []
    real = nn.manager.choose_targets

    def refuse(*args):
        calls.append(args)
        raise FailedPrecondition("not enough DataNodes to place a group")
    nn.manager.choose_targets = refuse
    with pytest.raises(FailedPrecondition, match="not enough DataNodes"):
        nn.create("/f", with_group=True)
    assert calls and not nn.tree.writing
    nn.manager.choose_targets = real
    assert nn.create("/f", with_group=True).first_group is not None   # the path is free
