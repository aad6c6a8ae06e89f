"""The committed generated modules match hedgefs.proto (run `make proto` after editing it)."""

import pathlib

from hedgefs.proto import generate


def test_generated_modules_match_the_proto(tmp_path: pathlib.Path) -> None:
    generate.generate(tmp_path)
    for name in generate.GENERATED:
        committed = (generate.PROTO_DIR / name).read_text()
        assert (tmp_path / name).read_text() == committed, f"proto/{name} is stale: run `make proto`"
