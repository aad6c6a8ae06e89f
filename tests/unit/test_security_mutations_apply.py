"""The mutation harness (tests/security_mutations.py, run by hand) still applies to the tree: each
security check it removes is still where it says, so a refactor cannot leave it testing nothing."""
import ast
import pathlib

REPO = pathlib.Path(__file__).resolve().parents[2]


def _mutations():
    tree = ast.parse((REPO / "tests" / "security_mutations.py").read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "MUTATIONS":
            return ast.literal_eval(node.value)
    raise AssertionError("no MUTATIONS in tests/security_mutations.py")


def test_every_mutation_finds_the_check_it_removes():
    missing = []
    for name, path, old, _new, test, *extra in _mutations():
        for p, o in [(path, old)] + [(e[0], e[1]) for e in extra]:
            if o not in (REPO / p).read_text():
                missing.append(f"{name}: {p} no longer has {o.splitlines()[0].strip()!r}")
        assert (REPO / test.split("::")[0]).exists(), f"{name}: no test module {test}"
    assert not missing, "\n".join(missing)
