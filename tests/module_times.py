"""The order in which `make test` hands test modules to its workers: the longest first.

pytest-xdist's ``--dist loadfile`` gives a worker a whole module at a time, by default the modules
with the most tests first. The modules that take longest (a chaos run, a mount, a dozen clusters)
have few tests, so they came last, and one worker ran the final one alone for minutes while the
others had nothing left. conftest.py sorts the collection by the seconds each module took in a
measured run (``module_times.json`` beside this file; ``make test`` passes
``--no-loadscope-reorder`` so that xdist keeps the order): longest processing time first, the
classic bound for greedy scheduling. A module missing from the file counts as the median of its
tier's modules, so a new one needs no entry to be scheduled sensibly. Only the order changes: no
test is skipped or timed.

Refresh the file after a run of the whole suite with ``--junitxml`` (e.g. ``make test
PYTEST_ARGS=--junitxml=build/junit.xml``)::

    .venv/bin/python tests/module_times.py build/junit.xml
"""

from __future__ import annotations

import json
import pathlib
import statistics
import sys
import xml.etree.ElementTree as ET

TIMES_FILE = pathlib.Path(__file__).with_name("module_times.json")


def load() -> dict[str, float]:
    try:
        return json.loads(TIMES_FILE.read_text())["seconds"]
    except (OSError, ValueError, KeyError):
        return {}


def tier(module: str) -> str:
    """tests/integration/test_x.py -> tests/integration"""
    return module.rsplit("/", 1)[0]


def estimates(modules: list[str], known: dict[str, float]) -> dict[str, float]:
    """Seconds for each module: its measured time, else the median of its tier's, else 0."""
    by_tier: dict[str, list[float]] = {}
    for module, seconds in known.items():
        by_tier.setdefault(tier(module), []).append(seconds)
    return {m: known.get(m, statistics.median(by_tier.get(tier(m), [0.0]))) for m in modules}


def longest_first(items: list) -> None:
    """Reorder pytest items in place: modules by estimated time, longest first; the order of the
    tests inside a module is kept (its module-scoped fixtures rely on it)."""
    modules = list(dict.fromkeys(item.nodeid.split("::")[0] for item in items))
    seconds = estimates(modules, load())
    rank = {m: i for i, m in enumerate(sorted(modules, key=lambda m: -seconds[m]))}
    items.sort(key=lambda item: rank[item.nodeid.split("::")[0]])   # stable: a module's own order kept


def from_junit(*paths: str) -> dict[str, float]:
    """Seconds per module (setup, call and teardown of each test) from pytest's --junitxml files."""
    seconds: dict[str, float] = {}
    cases = [case for path in paths for case in ET.parse(path).getroot().iter("testcase")]
    for case in cases:
        if not case.get("classname"):   # a module that failed to collect
            continue
        module = case.get("classname").split(".")
        # classname is the dotted module path, then any class: keep the parts up to test_*.
        parts = []
        for part in module:
            parts.append(part)
            if part.startswith("test_"):
                break
        name = "/".join(parts) + ".py"
        seconds[name] = seconds.get(name, 0.0) + float(case.get("time", 0))
    return seconds


if __name__ == "__main__":
    measured = from_junit(*sys.argv[1:])
    TIMES_FILE.write_text(json.dumps({
        "about": "seconds per test module in a run of make test (tests/module_times.py): the order workers get them",
        "seconds": {m: round(s, 1) for m, s in sorted(measured.items(), key=lambda kv: -kv[1])},
    }, indent=1) + "\n")
    print(f"{TIMES_FILE}: {len(measured)} modules, {sum(measured.values()):.0f} s in all")
