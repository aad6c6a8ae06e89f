"""Concat without gRPC: parts become one file in one transaction, nothing copied.

RS-3-2-1k with 4 KiB blocks: a full group is 12 KiB, so parts of 12 KiB, 24 KiB and a short tail
exercise the group-boundary rule.
"""

import pytest

from hedgefs.namenode.errors import AlreadyExists, FailedPrecondition, InvalidArgument, NotFound
from nn_support import add_datanodes, make_namenode, write_file

FULL = 3 * 4096


def _groups(nn, path):
    return [(g.id, g.length) for g in nn.file_info(path).groups]


def test_parts_become_one_file_with_their_groups_in_order(nn):
    add_datanodes(nn, 5)
    nn.mkdir("/stage", parents=True)
    nn.mkdir("/dst")
    write_file(nn, "/stage/p0", 2 * FULL)
    write_file(nn, "/stage/p1", FULL)
    write_file(nn, "/stage/p2", 100)
    expected = _groups(nn, "/stage/p0") + _groups(nn, "/stage/p1") + _groups(nn, "/stage/p2")
    nn.concat("/dst/f", ["/stage/p0", "/stage/p1", "/stage/p2"])
    info = nn.file_info("/dst/f")
    assert info.entry.length == 3 * FULL + 100
    assert _groups(nn, "/dst/f") == expected
    assert nn.list("/stage") == []
    assert nn.fsck("/").status == "HEALTHY"


def test_a_single_part_is_a_rename_and_an_empty_part_is_allowed(nn):
    add_datanodes(nn, 5)
    write_file(nn, "/p0", 0)
    nn.concat("/f", ["/p0"])
    assert nn.file_info("/f").entry.length == 0
    with pytest.raises(NotFound):
        nn.file_info("/p0")


def test_overwrite_replaces_the_target_and_frees_its_groups(nn):
    add_datanodes(nn, 5)
    write_file(nn, "/f", 5)
    old = _groups(nn, "/f")
    write_file(nn, "/p0", 7)
    with pytest.raises(AlreadyExists):
        nn.concat("/f", ["/p0"])
    assert nn.file_info("/p0").entry.length == 7   # a refused concat changes nothing
    nn.concat("/f", ["/p0"], overwrite=True)
    assert nn.file_info("/f").entry.length == 7
    assert old[0][0] not in [g for g, _ in _groups(nn, "/f")]
    assert nn.blocks.get(old[0][0]) is None      # the old file's units are pending deletes now


@pytest.mark.parametrize("case,error,fragment", [
    ("part not ending on a group", InvalidArgument, "not a multiple of its block group size"),
    ("policies differ", InvalidArgument, "RS-3-2-1k"),
    ("missing part", NotFound, "no such file"),
    ("directory part", FailedPrecondition, "is a directory"),
    ("target is a directory", FailedPrecondition, "is a directory"),
    ("target among sources", InvalidArgument, "also a source"),
    ("no parent", NotFound, "no such file or directory"),
    ("listed twice", InvalidArgument, "twice"),
])
def test_refusals_change_nothing(nn, case, error, fragment):
    add_datanodes(nn, 5)
    nn.mkdir("/d")
    write_file(nn, "/p0", FULL + 1)
    write_file(nn, "/p1", FULL)
    write_file(nn, "/q", FULL, policy="RS-2-1-1k")
    target, sources = {
        "part not ending on a group": ("/f", ["/p0", "/p1"]),
        "policies differ": ("/f", ["/p1", "/q"]),
        "missing part": ("/f", ["/p1", "/nope"]),
        "directory part": ("/f", ["/d"]),
        "target is a directory": ("/d", ["/p1"]),
        "target among sources": ("/p1", ["/p1"]),
        "no parent": ("/x/f", ["/p1"]),
        "listed twice": ("/f", ["/p1", "/p1"]),
    }[case]
    before = {p: _groups(nn, p) for p in ("/p0", "/p1", "/q")}
    with pytest.raises(error, match=fragment):
        nn.concat(target, sources)
    assert {p: _groups(nn, p) for p in before} == before


def test_concat_survives_a_restart(tmp_path, clock):
    nn = make_namenode(tmp_path / "nn", clock)
    add_datanodes(nn, 5)
    write_file(nn, "/p0", FULL)
    write_file(nn, "/p1", 3)
    nn.concat("/f", ["/p0", "/p1"])
    groups = _groups(nn, "/f")
    nn.close()
    again = make_namenode(tmp_path / "nn", clock)
    try:
        assert again.file_info("/f").entry.length == FULL + 3
        assert _groups(again, "/f") == groups
    finally:
        again.close()
