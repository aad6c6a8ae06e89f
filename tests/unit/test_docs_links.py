"""The documents a reader follows: every relative link in README.md, docs/*.md and the results
index points at a file that exists (and at a heading that exists, where it names one), and
README.md stays a front page: at most 200 lines, no date, no commit id.

Anchors are GitHub's: a heading's text lower-cased, punctuation other than `-` and `_` dropped,
spaces made `-`, a repeated heading numbered `-1`, `-2`, ...
"""

import pathlib
import re
from collections import Counter

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), ROOT / "bench" / "results" / "README.md",
             ROOT / "bench" / "README.md"]

# [text](target) or ![alt](target); a target is cut at its first space (a title may follow).
LINK = re.compile(r"!?\[(?:[^\]\[]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
FENCE = re.compile(r"^(```|~~~)")
DATE = re.compile(r"\b20\d\d-[01]\d-[0-3]\d\b")
# A commit id as the project writes them: 7 to 40 hex digits with at least one letter and one digit,
# standing alone (not part of a longer word, a path or a number).
COMMIT = re.compile(r"(?<![\w./-])(?=[0-9a-f]*[a-f])(?=[0-9a-f]*[0-9])[0-9a-f]{7,40}(?![\w/-])")


def prose(text: str) -> list[tuple[int, str]]:
    """(line number, line) of every line outside fenced code blocks."""
    out, fenced = [], False
    for number, line in enumerate(text.splitlines(), 1):
        if FENCE.match(line.strip()):
            fenced = not fenced
            continue
        if not fenced:
            out.append((number, line))
    return out


def slug(heading: str) -> str:
    text = re.sub(r"`|\*\*|\*|_(?=\w)|(?<=\w)_", "", heading.strip().lower())
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)        # a link in a heading: its text
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path: pathlib.Path) -> set[str]:
    seen: Counter = Counter()
    found = set()
    for _, line in prose(path.read_text()):
        m = re.match(r"^(#{1,6})\s+(.*?)\s*#*\s*$", line)
        if not m:
            continue
        base = slug(m.group(2))
        found.add(base if seen[base] == 0 else f"{base}-{seen[base]}")
        seen[base] += 1
    return found


def links(path: pathlib.Path) -> list[tuple[int, str]]:
    out = []
    for number, line in prose(path.read_text()):
        line = re.sub(r"`[^`]*`", "", line)   # code spans are not links ([`file`](target) stays one)
        out.extend((number, target) for target in LINK.findall(line))
    return out


def relative(target: str) -> bool:
    return not re.match(r"^[a-z][a-z0-9+.-]*:", target)   # http:, https:, mailto: ... are not checked here


@pytest.mark.parametrize("doc", DOCUMENTS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_points_at_a_file_and_heading_that_exist(doc):
    assert doc.exists(), f"{doc.relative_to(ROOT)} is missing"
    problems = []
    for number, target in links(doc):
        if not relative(target):
            continue
        where = f"{doc.relative_to(ROOT)}:{number}: {target}"
        path_part, _, anchor = target.partition("#")
        file = (doc.parent / path_part).resolve() if path_part else doc
        if not file.exists():
            problems.append(f"{where}: no such file")
            continue
        if not file.resolve().is_relative_to(ROOT):
            problems.append(f"{where}: outside the repository")
            continue
        if anchor:
            if file.suffix != ".md":
                problems.append(f"{where}: an anchor into a file that is not Markdown")
            elif anchor not in anchors(file):
                problems.append(f"{where}: no heading #{anchor} in {file.relative_to(ROOT)}")
    assert not problems, "\n".join(problems)


def test_the_manual_and_results_index_are_linked_from_the_front_page():
    targets = {target.partition("#")[0] for _, target in links(ROOT / "README.md")}
    missing = [str(p.relative_to(ROOT)) for p in DOCUMENTS[1:]
               if p.name != "README.md" and str(p.relative_to(ROOT)) not in targets]
    assert "bench/results/README.md" in targets
    assert not missing, f"README.md links to no: {missing}"


def test_readme_is_a_front_page():
    text = (ROOT / "README.md").read_text()
    lines = text.splitlines()
    assert len(lines) <= 200, f"README.md is {len(lines)} lines: the manual belongs in docs/"
    dated = [f"{n}: {line}" for n, line in enumerate(lines, 1) if DATE.search(line)]
    assert not dated, "README.md has dates (dated results go to bench/results/):\n" + "\n".join(dated)
    commits = [f"{n}: {line}" for n, line in enumerate(lines, 1) if COMMIT.search(line)]
    assert not commits, "README.md has commit ids:\n" + "\n".join(commits)
    assert "make test" in text and "make demo" in text


@pytest.mark.parametrize("heading, expected", [
    ("Exit codes of `hedgefs namenode`", "exit-codes-of-hedgefs-namenode"),
    ("The operator's view", "the-operators-view"),
    ("EC vs replication", "ec-vs-replication"),
    ("What `make test` covers", "what-make-test-covers"),
    ("Not in `make test`", "not-in-make-test"),
    ("Changing a file's policy: `ec convert`", "changing-a-files-policy-ec-convert"),
])
def test_anchors_are_githubs(heading, expected):
    assert slug(heading) == expected


@pytest.mark.parametrize("line, found", [
    ("measured on c2c3df8 in one run", True),
    ("measured on (c2c3df8), one run", True),
    ("`ba33736`", True),
    ("a 1,000,000-file namespace", False),
    ("RS-6-3-1024k at 1.50 bytes", False),
    ("the file deadbeef.md", False),
    ("sha256 6307c953b7b01319 matches", True),
    ("decade", False),
])
def test_a_commit_id_is_recognised(line, found):
    assert bool(COMMIT.search(line)) is found
