"""Every command has --help with examples, and the manual's command reference (docs/cli.md) matches
the CLI: every command is listed, with every flag it takes, and nothing that no longer exists.

A failure prints the reference line to put in docs/cli.md's "Command reference" section.
"""

import pathlib
import re

import click
import pytest

from hedgefs.cli import cli

REFERENCE = pathlib.Path(__file__).resolve().parents[2] / "docs" / "cli.md"
SECTION = "## Command reference"


def commands():
    """(path, command) of every leaf command, in help order."""
    out = []

    def walk(cmd, path, ctx):
        if isinstance(cmd, click.Group):
            for name in cmd.list_commands(ctx):
                sub = cmd.get_command(ctx, name)
                walk(sub, path + [name], click.Context(sub, info_name=name, parent=ctx))
        else:
            out.append((" ".join(path), cmd))

    walk(cli, [], click.Context(cli, info_name="hedgefs"))
    return out


# Option sets many verbs share, written once in docs/cli.md: a line may say [READ OPTIONS] for the
# hedge flags and [CLIENT OPTIONS] for --namenode and --credentials.
SHARED = {"[READ OPTIONS]": ("--hedge-threshold-ms", "--no-hedge", "--hedge-max-impaired-nodes",
                             "--hedge-impaired-window-ms", "--hedge-cooldown-ms", "--hedge-max-per-second",
                             "--hedge-budget-pct", "--read-extra", "--stats"),
          "[CLIENT OPTIONS]": ("--namenode", "--credentials")}
_TYPES = {"integer": "N", "integer range": "N", "float": "X", "float range": "X", "text": "TEXT",
          "directory": "DIR", "file": "FILE"}


def flag(opt: click.Option) -> str:
    name = max(opt.opts, key=len)
    if opt.is_flag:
        return name
    return f"{name} {opt.metavar or _TYPES.get(opt.type.name, opt.type.name.upper())}"


def _long(opt: click.Option) -> str:
    return max(opt.opts, key=len)


def reference_line(path: str, cmd: click.Command) -> str:
    opts = [p for p in cmd.params if isinstance(p, click.Option) and not p.hidden]
    names = {_long(p) for p in opts}
    options = []
    for p in opts:
        shared = next((token for token, members in SHARED.items() if _long(p) in members and set(members) <= names), None)
        options.append(shared or flag(p))
    options = list(dict.fromkeys(options))
    arguments = [p.make_metavar(click.Context(cmd)) if hasattr(p, "make_metavar") else p.name.upper()
                 for p in cmd.params if isinstance(p, click.Argument)]
    parts = [f"hedgefs {path}"] + [o if o in SHARED else f"[{o}]" for o in options] + arguments
    return "- `" + " ".join(parts) + "`"


def manual_reference(known: set[str]) -> tuple[dict[str, str], list[str]]:
    """docs/cli.md's reference lines by the command they describe, and the lines naming none."""
    text = REFERENCE.read_text()
    assert SECTION in text, f"docs/cli.md has no {SECTION!r} section"
    body = text.split(SECTION, 1)[1].split("\n## ", 1)[0]
    found, unknown = {}, []
    for line in body.splitlines():
        m = re.match(r"- `hedgefs ([a-z][a-z0-9 -]*)", line)
        if not m:
            continue
        words = m.group(1).split()
        paths = [" ".join(words[:n]) for n in range(len(words), 0, -1) if " ".join(words[:n]) in known]
        if paths:
            found[paths[0]] = line
        else:
            unknown.append(line)
    return found, unknown


def test_the_manuals_reference_lists_every_command_and_flag():
    every = commands()
    lines, unknown = manual_reference({p for p, _ in every})
    problems = [f"docs/cli.md lists a command that does not exist: {ln}" for ln in unknown]
    for path, cmd in every:
        line = lines.get(path)
        if line is None:
            problems.append(f"missing: {reference_line(path, cmd)}")
            continue
        covered = line + " ".join(" ".join(members) for token, members in SHARED.items() if token in line)
        for p in cmd.params:
            if isinstance(p, click.Option) and not p.hidden and not re.search(re.escape(_long(p)) + r"\b(?!-)", covered):
                problems.append(f"{path}: flag {max(p.opts, key=len)} not in docs/cli.md; expected {reference_line(path, cmd)}")
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("path", [p for p, _ in commands()])
def test_every_command_has_help_with_examples(path):
    cmd = dict(commands())[path]
    assert "Examples:" in (cmd.help or ""), f"hedgefs {path} --help has no examples"


def test_help_runs_for_every_command():
    from click.testing import CliRunner

    runner = CliRunner()
    for path, _ in commands():   # in-process: a process per command would cost ~0.5 s each
        result = runner.invoke(cli, [*path.split(), "--help"], prog_name="hedgefs")
        assert result.exit_code == 0 and result.output.startswith(f"Usage: hedgefs {path}"), (path, result.output)
        assert "Examples:" in result.output, path
