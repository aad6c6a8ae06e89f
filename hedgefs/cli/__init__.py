"""The hedgefs command line: the composition root, the one place that knows every package.

Each command group lives in a module of its own (files, policies, servers, cluster, fault, admin,
demo, bench, chaos) and is registered here, explicitly, in the order `hedgefs --help` lists them.
A module is imported only when one of its commands runs (or help lists them all), so `hedgefs cat`
does not pay for the benchmark or chaos code.

Errors are one line on stderr and an exit code scripts can rely on (client/errors.py).
"""

import importlib
import logging
import os
import signal
import sys

# gRPC's own log lines (a refused TLS handshake, say) would break "one line on stderr": our
# errors say what happened. Set before grpc is first imported.
os.environ.setdefault("GRPC_VERBOSITY", "ERROR")

import click

from hedgefs.cli.common import CONTEXT, Group, setup_logging
from hedgefs.client.errors import HedgefsError

# verb -> "module:attribute", in help order.
COMMANDS = {
    "put": "files:put",
    "get": "files:get",
    "cat": "files:cat",
    "ls": "listing:ls_",
    "mkdir": "files:mkdir",
    "rm": "files:rm",
    "rmdir": "files:rmdir",
    "expunge": "trash:expunge",
    "mv": "files:mv",
    "cp": "shell:cp",
    "touchz": "shell:touchz",
    "touch": "changes:touch",
    "append": "changes:append",
    "truncate": "changes:truncate",
    "recover-lease": "changes:recover_lease",
    "ln": "changes:ln",
    "getfattr": "changes:getfattr",
    "setfattr": "changes:setfattr",
    "head": "shell:head",
    "tail": "shell:tail",
    "stat": "listing:stat",
    "count": "listing:count",
    "test": "listing:test_",
    "find": "listing:find",
    "chmod": "files:chmod",
    "chown": "files:chown",
    "mount": "mount:mount",
    "du": "space:du",
    "df": "space:df",
    "checksum": "distcp:checksum",
    "distcp": "distcp:distcp",
    "s3": "s3:s3",
    "ec": "policies:ec",
    "setrep": "policies:setrep",
    "namenode": "servers:namenode",
    "datanode": "servers:datanode",
    "cluster": "cluster:cluster",
    "fault": "fault:fault",
    "fsck": "admin:fsck",
    "admin": "admin:admin",
    "demo": "demo:demo",
    "bench": "bench:bench",
    "chaos": "chaos:chaos",
}


class RootGroup(Group):
    """The verbs of COMMANDS, each imported from its module on first use."""

    def list_commands(self, ctx):
        return list(COMMANDS)

    def get_command(self, ctx, name):
        target = COMMANDS.get(name)
        if target is None:
            return None
        module, attribute = target.split(":")
        return getattr(importlib.import_module(f"hedgefs.cli.{module}"), attribute)


@click.group(cls=RootGroup, context_settings=CONTEXT)
@click.option("-v", "--verbose", is_flag=True, help="Log debug detail to stderr (which DataNode was slow, hedges, rebuilds).")
@click.option("--namenode", "global_namenode", metavar="HOST:PORT",
              help="NameNode address for the verb (as $HEDGEFS_NAMENODE; a verb's own --namenode wins).")
@click.version_option(package_name="hedgefs")
def cli(verbose: bool, global_namenode: str | None) -> None:
    """hedgefs: a small distributed filesystem with hedged reads of erasure-coded data.

    \b
    Examples:
      hedgefs cluster up                 # a local NameNode + 10 DataNodes (--secure: TLS, credentials)
      hedgefs put big.bin /data/big.bin  # write, RS-6-3-1024k by default
      hedgefs cat /data/big.bin | sha256sum
      hedgefs cluster freeze dn3         # SIGSTOP a DataNode: reads hedge around it
      hedgefs get --stats /data/big.bin copy.bin
      hedgefs demo                       # the whole story in one command
    """
    setup_logging(verbose, logging.INFO if verbose else logging.WARNING)
    if global_namenode:
        os.environ["HEDGEFS_NAMENODE"] = global_namenode


def _exit_on_sigterm(signum, frame) -> None:
    raise SystemExit(128 + signum)  # unwinds: `get` removes its partial file on the way out


def main(argv: list[str] | None = None) -> None:
    from hedgefs.malloc import tune_malloc

    tune_malloc()
    if signal.getsignal(signal.SIGTERM) == signal.SIG_DFL:
        signal.signal(signal.SIGTERM, _exit_on_sigterm)
    try:
        cli.main(args=argv, prog_name="hedgefs", standalone_mode=False)
    except click.exceptions.Exit as e:
        sys.exit(e.exit_code)
    except click.Abort:
        click.echo("hedgefs: aborted", err=True)
        sys.exit(130)
    except click.exceptions.NoArgsIsHelpError as err:   # `hedgefs` alone: the help, not an error line
        click.echo(err.ctx.get_help() if err.ctx else "try 'hedgefs --help'")
        sys.exit(2)
    except click.UsageError as err:
        hint = f" (try '{err.ctx.command_path} --help')" if err.ctx else ""
        click.echo(f"hedgefs: {err.format_message()}{hint}", err=True)
        sys.exit(2)
    except click.ClickException as err:
        click.echo(f"hedgefs: {err.format_message()}", err=True)
        sys.exit(err.exit_code)
    except HedgefsError as err:
        click.echo(f"hedgefs: {err}", err=True)
        sys.exit(err.exit_code)
    except KeyboardInterrupt:
        click.echo("hedgefs: interrupted", err=True)
        sys.exit(130)
    except UnicodeEncodeError as err:   # a name from argv or a local disk that is not UTF-8, wherever it went
        click.echo(f"hedgefs: invalid path: not valid UTF-8 ({err.object[err.start:err.end]!a})", err=True)
        sys.exit(2)
    except OSError as err:  # local disk trouble: full, read-only, permissions
        click.echo(f"hedgefs: {err.strerror or err}" + (f": {err.filename}" if err.filename else ""), err=True)
        sys.exit(1)
