"""The suite's own layout: rules pytest enforces only when a whole run collects every tier."""

import collections
import pathlib

TESTS = pathlib.Path(__file__).resolve().parents[1]


def test_no_two_test_modules_share_a_name():
    # The tiers are directories without __init__.py (rootdir-relative imports, `pythonpath = tests`):
    # two modules of one basename in two tiers pass `make test-fast` and fail make test's collection
    # ("import file mismatch"), which happened twice when branches merged.
    names = collections.defaultdict(list)
    for path in TESTS.rglob("test_*.py"):
        if "fixtures" not in path.parts:
            names[path.name].append(str(path.relative_to(TESTS)))
    assert not {n: p for n, p in names.items() if len(p) > 1}
