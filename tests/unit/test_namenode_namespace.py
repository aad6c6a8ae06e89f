"""Namespace semantics on a real SQLite database, no gRPC: mkdir, list, delete, rename, policies."""

import sqlite3

import pytest
from nn_support import add_datanodes, make_namenode, nn, write_file  # noqa: F401 (nn: a fixture)

from hedgefs.namenode.errors import AlreadyExists, FailedPrecondition, InvalidArgument, NotFound
from hedgefs.namenode.journal.sqlite import NotAJournal



def names(entries):
    return [e.path for e in entries]


def test_root_always_exists_and_is_an_empty_directory(nn):
    info = nn.file_info("/")
    assert info.entry.is_dir and info.entry.path == "/" and info.groups == []
    assert nn.list("/") == []


def test_mkdir_without_parents_needs_the_parent(nn):
    with pytest.raises(NotFound, match="no such file or directory: /a$"):
        nn.mkdir("/a/b")
    nn.mkdir("/a")
    nn.mkdir("/a/b")
    with pytest.raises(AlreadyExists, match="directory exists: /a/b"):
        nn.mkdir("/a/b")


def test_mkdir_parents_creates_ancestors_and_tolerates_existing(nn):
    nn.mkdir("/a/b/c", parents=True)
    nn.mkdir("/a/b/c", parents=True)
    nn.mkdir("/", parents=True)
    assert names(nn.list("/", recursive=True)) == ["/a", "/a/b", "/a/b/c"]


def test_mkdir_with_a_mode_gives_it_to_the_new_directory_only(tmp_path, clock):
    """mkdir(2)'s mode in the one call (tar's mkdirat(0700): no chmod after it), answered with the
    directory's entry; ancestors made with it get 0755, one there already keeps its own; the
    journal replays it."""
    nn = make_namenode(tmp_path / "nn", clock)
    made = nn.mkdir("/p/q/r", parents=True, mode=0o1700)
    assert (made.path, made.is_dir, made.mode) == ("/p/q/r", True, 0o1700)
    assert made == nn.file_info("/p/q/r").entry
    assert [nn.file_info(p).entry.mode for p in ("/p", "/p/q")] == [0o755, 0o755]
    assert nn.mkdir("/p/q", parents=True, mode=0o700).mode == 0o755   # there already: kept
    assert nn.mkdir("/plain").mode == 0o755
    with pytest.raises(InvalidArgument, match="bad mode 2000"):
        nn.mkdir("/setgid", mode=0o2000)
    assert nn.list("/") == [nn.file_info("/p").entry, nn.file_info("/plain").entry]
    nn.close(checkpoint=False)   # the next start replays the journal
    nn = make_namenode(tmp_path / "nn", clock)
    assert [nn.file_info(p).entry.mode for p in ("/p", "/p/q", "/p/q/r", "/plain")] == [0o755, 0o755, 0o1700, 0o755]
    nn.close()


def test_mkdir_over_or_through_a_file(nn):
    write_file(nn, "/f", 10)
    with pytest.raises(AlreadyExists, match="file exists: /f"):
        nn.mkdir("/f", parents=True)
    with pytest.raises(FailedPrecondition, match="not a directory: /f"):
        nn.mkdir("/f/x", parents=True)


def test_list_directory_file_and_recursive(nn):
    nn.mkdir("/d/sub", parents=True)
    write_file(nn, "/d/b", 100)
    write_file(nn, "/d/a", 5)
    write_file(nn, "/d/sub/x", 7)
    assert names(nn.list("/d")) == ["/d/a", "/d/b", "/d/sub"]
    assert names(nn.list("/d", recursive=True)) == ["/d/a", "/d/b", "/d/sub", "/d/sub/x"]
    [only] = nn.list("/d/b")
    assert (only.path, only.is_dir, only.length, only.policy) == ("/d/b", False, 100, "RS-3-2-1k")
    with pytest.raises(NotFound, match="no such file or directory: /nope"):
        nn.list("/nope")


def test_lookup_through_a_file_is_not_a_directory(nn):
    write_file(nn, "/f", 1)
    with pytest.raises(FailedPrecondition, match="not a directory: /f$"):
        nn.file_info("/f/x")


def test_delete_file_and_directories(nn):
    nn.mkdir("/d/e", parents=True)
    write_file(nn, "/d/e/f", 10)
    with pytest.raises(FailedPrecondition, match="directory not empty: /d"):
        nn.delete("/d")
    nn.delete("/d/e/f")
    nn.delete("/d/e")
    write_file(nn, "/d/g", 10)
    nn.delete("/d", recursive=True)
    assert nn.list("/") == []
    with pytest.raises(NotFound):
        nn.delete("/d")
    with pytest.raises(InvalidArgument, match="root"):
        nn.delete("/", recursive=True)


def test_delete_queues_every_unit_for_deletion(nn):
    write_file(nn, "/f", 3 * 4096 * 2 + 1)  # three groups of RS-3-2
    assert sum(nn.blocks.pending_delete_counts().values()) == 0
    nn.delete("/f")
    # every stored unit: the last group holds 1 byte, its units 1 and 2 are zeros (never stored)
    assert sum(nn.blocks.pending_delete_counts().values()) == 5 + 5 + 3


def test_rename_file_and_directory(nn):
    nn.mkdir("/a/b", parents=True)
    write_file(nn, "/a/b/f", 10)
    nn.mkdir("/z")
    nn.rename("/a/b/f", "/z/g")
    assert nn.file_info("/z/g").entry.length == 10
    nn.rename("/a", "/z/a2")
    assert names(nn.list("/", recursive=True)) == ["/z", "/z/a2", "/z/a2/b", "/z/g"]


@pytest.mark.parametrize("src, dst, error, message", [
    ("/nope", "/x", NotFound, "no such file or directory: /nope"),
    ("/a", "/f", AlreadyExists, "file exists: /f"),
    ("/f", "/a", AlreadyExists, "directory exists: /a"),
    ("/f", "/f", AlreadyExists, "file exists: /f"),
    ("/f", "/missing/g", NotFound, "no such file or directory: /missing"),
    ("/f", "/f2/g", FailedPrecondition, "not a directory: /f2"),
    ("/a", "/a/b/c", InvalidArgument, "cannot move directory /a into itself"),
    ("/", "/x", InvalidArgument, "root"),
    ("/f", "/", AlreadyExists, "directory exists: /"),
    ("/f", "rel", InvalidArgument, "invalid path 'rel'"),
])
def test_rename_refusals(nn, src, dst, error, message):
    nn.mkdir("/a/b", parents=True)
    write_file(nn, "/f", 1)
    write_file(nn, "/f2", 1)
    with pytest.raises(error, match=message):
        nn.rename(src, dst)


def test_policy_inheritance_from_nearest_ancestor(nn):
    nn.mkdir("/a/b/c", parents=True)
    assert nn.get_policy("/a/b/c") == ("RS-3-2-1k", "")
    nn.set_policy("/a", "RS-3-2-64k")
    assert nn.get_policy("/a/b/c") == ("RS-3-2-64k", "/a")
    nn.set_policy("/a/b", "rs-3-2-2k")  # canonicalised
    assert nn.get_policy("/a/b/c") == ("RS-3-2-2k", "/a/b")
    assert nn.file_info("/a/b/c").entry.policy == "RS-3-2-2k"
    assert [e.policy for e in nn.list("/", recursive=True)] == ["RS-3-2-64k", "RS-3-2-2k", "RS-3-2-2k"]
    nn.set_policy("/a/b", "")  # clear
    assert nn.get_policy("/a/b/c") == ("RS-3-2-64k", "/a")
    nn.set_policy("/", "RS-3-2-4k")
    assert nn.get_policy("/a/b/c") == ("RS-3-2-64k", "/a")
    assert nn.get_policy("/") == ("RS-3-2-4k", "/")


def test_files_keep_the_policy_they_were_written_with(nn):
    nn.mkdir("/d")
    nn.set_policy("/d", "RS-3-2-2k")
    write_file(nn, "/d/f", 10)
    nn.set_policy("/d", "RS-3-2-4k")
    assert nn.file_info("/d/f").entry.policy == "RS-3-2-2k"
    assert nn.get_policy("/d/f") == ("RS-3-2-2k", "/d/f")


def test_set_policy_refusals(nn):
    write_file(nn, "/f", 1)
    with pytest.raises(InvalidArgument, match="unknown policy 'XOR-2-1'"):
        nn.set_policy("/", "XOR-2-1")
    with pytest.raises(FailedPrecondition, match="not a directory: /f"):
        nn.set_policy("/f", "RS-3-2-1k")
    with pytest.raises(NotFound):
        nn.set_policy("/nope", "RS-3-2-1k")


def test_namespace_survives_reopening_and_locations_come_back_from_block_reports(tmp_path, clock):
    """The namespace is the journal's; where units are is memory only (DESIGN.md), so a restarted
    NameNode knows the file and its groups at once, and their units once the DataNodes report."""
    nn = make_namenode(tmp_path / "nn", clock)
    add_datanodes(nn, 5)
    nn.mkdir("/a/b", parents=True)
    nn.set_policy("/a", "RS-3-2-2k")
    write_file(nn, "/a/b/f", 5000)
    before = nn.file_info("/a/b/f")
    nn.close()
    again = make_namenode(tmp_path / "nn", clock)
    try:
        after = again.file_info("/a/b/f")
        assert after.entry == before.entry
        assert [(g.id, g.length, g.generation, g.units) for g in after.groups] == \
            [(g.id, g.length, g.generation, []) for g in before.groups]
        assert again.get_policy("/a/b") == ("RS-3-2-2k", "/a")
        assert again.liveness.all() == []   # DataNodes are known once they speak to this process
        for dn in ("dn1", "dn2", "dn3", "dn4", "dn5"):
            again.register(dn, f"127.0.0.1:{40000 + int(dn[2:])}")
            again.block_report(dn, [(g.id, u.index, g.generation) for g in before.groups for u in g.units
                                    if u.datanode_id == dn])
        assert again.file_info("/a/b/f") == before
    finally:
        again.close()


def test_recursive_delete_of_a_large_directory(nn):
    nn.mkdir("/d/sub", parents=True)
    for i in range(600):
        write_file(nn, f"/d/f{i:04d}", 10 if i % 100 == 0 else 0)
    write_file(nn, "/d/sub/g", 10)
    nn.delete("/d", recursive=True)
    assert nn.list("/") == []
    assert sum(nn.blocks.pending_delete_counts().values()) == 7 * 3   # 10 bytes: units 0, 3, 4 stored


def test_a_journal_of_another_format_is_refused_not_guessed_at(tmp_path, clock):
    nn = make_namenode(tmp_path / "nn", clock)
    nn.close()
    conn = sqlite3.connect(tmp_path / "nn" / "namenode.db")
    conn.execute("UPDATE journal_meta SET value = 'hedgefs-journal-9' WHERE key = 'format'")
    conn.commit()
    conn.close()
    with pytest.raises(NotAJournal, match=r"namenode.db: a journal of format 'hedgefs-journal-9'; this NameNode "
                                          r"reads 'hedgefs-journal-1'"):
        make_namenode(tmp_path / "nn", clock)


def all_pages(nn, path, recursive, limit):
    out, pages, after = [], 0, ""
    while True:
        page, more = nn.list_page(path, recursive, after, limit)
        assert len(page) <= limit
        out += page
        pages += 1
        if not more:
            return out, pages
        after = page[-1].path


def test_listing_in_pages_of_any_size_is_the_whole_listing_in_order(nn):
    for d in ("/a/x/y", "/a/z", "/b", "/c/é", "/c/e"):
        nn.mkdir(d, parents=True)
    nn.set_policy("/a/x", "RS-3-2-2k")
    for f in ("/a/f", "/a/x/y/f", "/a/x/g", "/c/é/h", "/top"):
        write_file(nn, f, 1)
    whole = ["/a", "/a/f", "/a/x", "/a/x/g", "/a/x/y", "/a/x/y/f", "/a/z", "/b", "/c", "/c/e", "/c/é", "/c/é/h", "/top"]
    for limit in (1, 2, 3, 5, 1000):
        entries, pages = all_pages(nn, "/", True, limit)
        assert names(entries) == whole
        assert pages >= len(whole) // limit
        assert [e.policy for e in entries if e.path.startswith("/a/x")] == ["RS-3-2-2k", "RS-3-2-2k", "RS-3-2-2k", "RS-3-2-2k"]
        assert names(all_pages(nn, "/a", False, limit)[0]) == ["/a/f", "/a/x", "/a/z"]
    with pytest.raises(InvalidArgument, match="start_after '/b' is not an entry of the listing of /a"):
        nn.list_page("/a", True, "/b", 10)


def test_a_listing_resumes_after_a_directory_deleted_between_pages(nn):
    for d in ("/a/1", "/a/2", "/b"):
        nn.mkdir(d, parents=True)
    page, more = nn.list_page("/", True, "", 2)
    assert names(page) == ["/a", "/a/1"] and more
    nn.delete("/a", recursive=True)
    assert names(nn.list_page("/", True, "/a/1", 10)[0]) == ["/b"]


def test_a_1000_level_path(nn):
    deep = "/" + "/".join(["d"] * 1000)
    nn.mkdir(deep, parents=True)
    write_file(nn, deep + "/f", 3)
    entries = nn.list("/", recursive=True)
    assert len(entries) == 1001 and entries[-1].path == deep + "/f"
    entries, pages = all_pages(nn, "/", True, 100)
    assert len(entries) == 1001 and pages == 11
    nn.delete("/d", recursive=True)
    assert nn.list("/") == []


def test_the_status_pages_directory_listing_is_paged_by_name(nn):
    for name in ("a", "b", "c", "d"):
        nn.mkdir(f"/d/{name}/x", parents=True)
    assert not nn.browse("/d", limit=4).more
    first = nn.browse("/d", limit=3)
    assert names(first.entries) == ["/d/a", "/d/b", "/d/c"] and first.more
    second = nn.browse("/d", after="c", limit=3)
    assert names(second.entries) == ["/d/d"] and not second.more


def test_a_stat_or_listing_asked_for_xattrs_carries_each_files_own_where_it_may_be_read(nn):
    """(issue 48) GetFileInfo / List with xattrs: the attributes of the very version answered for,
    in the same lookup; in a listing only of files the caller may read (getXAttrs needs r)."""
    from hedgefs.security.identity import Identity

    nn.mkdir("/b", parents=True)
    nn.set_permission("/b", 0o777)
    for name in ("one", "two", "bare"):
        write_file(nn, f"/b/{name}", 5)
    nn.set_xattr("/b/one", "user.s3", b'{"etag": "1"}')
    nn.set_xattr("/b/two", "user.s3", b'{"etag": "2"}')
    nn.set_permission("/b/two", 0o600)   # root's, unreadable to alice
    assert nn.file_info("/b/one").entry.xattrs is None           # not asked: none
    assert nn.file_info("/b/one", xattrs=True).entry.xattrs == {"user.s3": b'{"etag": "1"}'}
    assert nn.file_info("/b/one", span=(0, 1), xattrs=True).entry.xattrs == {"user.s3": b'{"etag": "1"}'}
    assert nn.file_info("/b/bare", xattrs=True).entry.xattrs is None
    page, _ = nn.list_page("/b", xattrs=True)
    assert {e.path: e.xattrs for e in page} == {"/b/bare": None, "/b/one": {"user.s3": b'{"etag": "1"}'},
                                                "/b/two": {"user.s3": b'{"etag": "2"}'}}
    assert all(e.xattrs is None for e in nn.list_page("/b")[0])
    alice = Identity("alice", "user", ("staff",))
    page, _ = nn.list_page("/b", xattrs=True, who=alice)
    assert {e.path: e.xattrs for e in page} == {"/b/bare": None, "/b/one": {"user.s3": b'{"etag": "1"}'},
                                                "/b/two": None}
    write_file(nn, "/b/one", 7, overwrite=True)                  # another version: none of the old one's
    assert nn.file_info("/b/one", xattrs=True).entry.xattrs is None
