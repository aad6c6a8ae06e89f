"""Path validation: absolute, normalised, one-line INVALID_ARGUMENT for everything else."""

import pytest

from hedgefs.namenode.namespace import paths
from hedgefs.namenode.errors import InvalidArgument

BAD = [
    ("", "must be absolute"),
    ("a/b", "must be absolute"),
    ("./a", "must be absolute"),
    ("/a//b", "empty component"),
    ("//", "must not end with '/'"),
    ("/a/", "must not end with '/'"),
    ("/a/./b", "'.' and '..'"),
    ("/a/../b", "'.' and '..'"),
    ("/..", "'.' and '..'"),
    ("/.", "'.' and '..'"),
    ("/a\x00b", "NUL"),
    ("/" + "x" * 256, "longer than 255"),
]


@pytest.mark.parametrize("path, why", BAD)
def test_bad_path_is_refused_with_one_line(path, why):
    with pytest.raises(InvalidArgument) as err:
        paths.components(path)
    message = str(err.value)
    assert message.startswith(f"invalid path {path!r}: ")
    assert why in message
    assert "\n" not in message


def test_newline_in_a_name_is_allowed_but_message_stays_one_line():
    assert paths.components("/a\nb") == ["a\nb"]


@pytest.mark.parametrize("path, parts", [
    ("/", []),
    ("/a", ["a"]),
    ("/a/b c/d.txt", ["a", "b c", "d.txt"]),
    ("/.hidden/..x", [".hidden", "..x"]),
    ("/ünïcode", ["ünïcode"]),
])
def test_good_paths(path, parts):
    assert paths.components(path) == parts


def test_join_parent_and_is_under():
    assert paths.join("/", "a") == "/a"
    assert paths.join("/a", "b") == "/a/b"
    assert paths.parent_of("/a") == "/"
    assert paths.parent_of("/a/b") == "/a"
    assert paths.is_under("/a/b", "/a")
    assert paths.is_under("/a", "/a")
    assert not paths.is_under("/ab", "/a")
    assert paths.is_under("/x", "/")
