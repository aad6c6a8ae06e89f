"""`hedgefs ec ...`: erasure-coding policies on directories."""

import click

from hedgefs.cli.common import CONTEXT, Group, check_policy, namenode_option, open_fs


@click.group(cls=Group, context_settings=CONTEXT)
def ec() -> None:
    """Erasure-coding policies (set on directories, inherited by new files)."""


@ec.command("set-policy", context_settings=CONTEXT)
@click.argument("path")
@click.argument("name")
@namenode_option
def ec_set_policy(path: str, name: str, namenode: str | None) -> None:
    """Set policy NAME (e.g. RS-6-3-1024k) on directory PATH."""
    check_policy(name)
    with open_fs(namenode) as fs:
        fs.set_policy(path, name)


@ec.command("get-policy", context_settings=CONTEXT)
@click.argument("path")
@namenode_option
def ec_get_policy(path: str, namenode: str | None) -> None:
    """Show the policy PATH uses and where it is inherited from."""
    with open_fs(namenode) as fs:
        response = fs.get_policy(path)
    source = response.source_path or "cluster default"
    click.echo(f"{response.policy}\t(from {source})")


@ec.command("list-policies", context_settings=CONTEXT)
def ec_list_policies() -> None:
    """List the built-in policies (any RS-<k>-<m>-<cell>k is accepted)."""
    from hedgefs.ec.policy import BUILTIN_POLICIES, DEFAULT_POLICY, parse_policy

    for name in BUILTIN_POLICIES:
        p = parse_policy(name)
        mark = "  (default)" if name == DEFAULT_POLICY else ""
        click.echo(f"{name:<14} {p.k} data + {p.m} parity units, {p.cell_size // 1024} KiB cells, "
                   f"tolerates {p.m} lost DataNodes{mark}")
