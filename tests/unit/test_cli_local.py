"""The CLI's local side: open_local, the one way `put` and `append` open what they copy."""

import io
import sys

import pytest

from hedgefs.cli.local import open_local
from hedgefs.client.errors import HedgefsError, IsADirectory, NotFound


def test_a_file_opens_with_its_length(tmp_path):
    path = tmp_path / "f"
    path.write_bytes(b"x" * 1234)
    source, length = open_local(str(path))
    with source:
        assert length == 1234 and source.read() == b"x" * 1234


def test_dash_is_stdin_of_unknown_length(monkeypatch):
    stdin = io.TextIOWrapper(io.BytesIO(b"piped"))
    monkeypatch.setattr(sys, "stdin", stdin)
    source, length = open_local("-")
    assert source is stdin.buffer and length is None and source.read() == b"piped"


def test_missing_file_and_directory_are_named(tmp_path):
    with pytest.raises(NotFound, match=f"^no such local file: {tmp_path}/nope$"):
        open_local(str(tmp_path / "nope"))
    with pytest.raises(IsADirectory, match=r"^is a directory: .* \(put -r copies a tree\)$"):
        open_local(str(tmp_path), "(put -r copies a tree)")
    with pytest.raises(IsADirectory, match=f"^is a directory: {tmp_path}$"):
        open_local(str(tmp_path))


def test_other_trouble_is_one_line(tmp_path):
    looping = tmp_path / "loop"
    looping.symlink_to(looping)   # ELOOP: neither missing nor a directory
    with pytest.raises(HedgefsError, match=f"^cannot read {looping}: Too many levels of symbolic links$"):
        open_local(str(looping))
