"""The hedgefs command line: one small function per verb over the client library.

Errors are one line on stderr and a non-zero exit (see client/errors.py for the codes).
"""

import json
import logging
import os
import signal
import sys
import time

import click

from hedgefs.client.config import HedgeConfig
from hedgefs.client.errors import HedgefsError, IsADirectory, NotFound, UsageError
from hedgefs.client.fs import FileSystem, namenode_address
from hedgefs.client.progress import Progress

log = logging.getLogger("hedgefs.cli")

CONTEXT = {"help_option_names": ["-h", "--help"], "max_content_width": 100}


def setup_logging(verbose: bool = False, default_level: int = logging.WARNING) -> None:
    logging.basicConfig(
        level=logging.DEBUG if verbose else default_level,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
        force=True,
    )


# ---------------------------------------------------------------------------- shared options

def namenode_option(f):
    return click.option("--namenode", metavar="HOST:PORT",
                        help="NameNode address (default: $HEDGEFS_NAMENODE, else 127.0.0.1:8020).")(f)


def hedge_options(f):
    """The read-side flags: hedge threshold and breaker keys (flags win over HEDGEFS_HEDGE_*)."""
    opts = [
        click.option("--stats", is_flag=True, help="Print read counters (hedges, wins, latencies) to stderr."),
        click.option("--hedge-max-per-second", "max_per_second", type=int, help="Hard cap on hedges started per second [200]."),
        click.option("--hedge-cooldown-ms", "cooldown_ms", type=float, help="Hedging stays off this long after a trip [30000]."),
        click.option("--hedge-impaired-window-ms", "impaired_window_ms", type=float, help="Window for counting impaired DataNodes [60000]."),
        click.option("--hedge-max-impaired-nodes", "max_impaired_nodes", type=int, help="Impaired DataNodes allowed before the breaker trips [2]."),
        click.option("--no-hedge", "no_hedge", is_flag=True, help="Never hedge; failed reads are still rebuilt."),
        click.option("--hedge-threshold-ms", "threshold_ms", type=float, help="Hedge a cell read slower than this [250]."),
    ]
    for opt in opts:
        f = opt(f)
    return f


def hedge_config(kwargs: dict) -> HedgeConfig:
    flags = {key: kwargs.pop(key, None) for key in
             ("threshold_ms", "max_impaired_nodes", "impaired_window_ms", "cooldown_ms", "max_per_second")}
    if kwargs.pop("no_hedge", False):
        flags["enabled"] = False
    try:
        return HedgeConfig.from_sources(flags)
    except ValueError as err:
        raise UsageError(str(err)) from None


def open_fs(namenode: str | None, hedge: HedgeConfig | None = None) -> FileSystem:
    if hedge is None:
        hedge = hedge_config({})  # HEDGEFS_HEDGE_* may be set (and wrong) for any verb
    return FileSystem(namenode_address(namenode), hedge=hedge)


def print_stats(fs: FileSystem) -> None:
    stats = fs.stats()
    c = stats.counters
    refused = c["hedges_refused_breaker"] + c["hedges_refused_rate"]
    click.echo(
        f"reads={c['reads']} cell_reads={c['cell_reads']} hedges={c['hedges']} hedge_wins={c['hedge_wins']} "
        f"hedges_refused={refused} (breaker={c['hedges_refused_breaker']} rate={c['hedges_refused_rate']}) "
        f"breaker_trips={stats.breaker_trips} decodes_on_failure={c['decodes_on_failure']}",
        err=True,
    )
    for dn, row in stats.per_datanode.items():
        click.echo(f"  {dn:>6}: cell_reads={row['cell_reads']:<6} p50={row['p50_ms']:.1f} ms p99={row['p99_ms']:.1f} ms "
                   f"overdue={row['overdue']}", err=True)


# ---------------------------------------------------------------------------- the group

class _Group(click.Group):
    """Keeps `hedgefs --help` in the order the verbs were defined, which reads like a tour."""

    def list_commands(self, ctx):
        return list(self.commands)


@click.group(cls=_Group, context_settings=CONTEXT)
@click.option("-v", "--verbose", is_flag=True, help="Log debug detail to stderr (which DataNode was slow, hedges, rebuilds).")
@click.version_option(package_name="hedgefs")
def cli(verbose: bool) -> None:
    """hedgefs: a small distributed filesystem with hedged reads of erasure-coded data.

    \b
    Examples:
      hedgefs cluster up                 # a local NameNode + 10 DataNodes
      hedgefs put big.bin /data/big.bin  # write, RS-6-3-1024k by default
      hedgefs cat /data/big.bin | sha256sum
      hedgefs cluster freeze dn3         # SIGSTOP a DataNode: reads hedge around it
      hedgefs get --stats /data/big.bin copy.bin
      hedgefs demo                       # the whole story in one command
    """
    setup_logging(verbose, logging.INFO if verbose else logging.WARNING)


# ---------------------------------------------------------------------------- file verbs

@cli.command(context_settings=CONTEXT)
@click.argument("local")
@click.argument("remote")
@click.option("-f", "--force", is_flag=True, help="Overwrite REMOTE if it exists.")
@click.option("--policy", metavar="NAME", help="Erasure-coding policy for this file (default: inherited).")
@namenode_option
def put(local: str, remote: str, force: bool, policy: str | None, namenode: str | None) -> None:
    """Copy LOCAL (a file, or - for stdin) to REMOTE.

    The file becomes visible only when every block group is durable on at least k DataNodes.

    \b
    Examples:
      hedgefs put report.csv /data/report.csv
      tar c dir | hedgefs put - /backups/dir.tar
    """
    if policy:
        _check_policy(policy)
    if local == "-":
        source, total = sys.stdin.buffer, None
    else:
        try:
            source = open(local, "rb")
        except FileNotFoundError:
            raise NotFound(f"no such local file: {local}") from None
        except IsADirectoryError:
            raise IsADirectory(f"is a directory: {local}") from None
        except OSError as err:
            raise HedgefsError(f"cannot read {local}: {err.strerror}") from None
        total = os.fstat(source.fileno()).st_size
    progress = Progress(f"put {remote}", total)
    try:
        with open_fs(namenode) as fs, source:
            fs.write(remote, source, overwrite=force, policy=policy, progress=progress.advance)
    finally:
        progress.finish()


@cli.command(context_settings=CONTEXT)
@click.argument("remote")
@click.argument("local")
@hedge_options
@namenode_option
def get(remote: str, local: str, namenode: str | None, stats: bool, **hedge) -> None:
    """Copy REMOTE to LOCAL (a file, or - for stdout).

    LOCAL appears only when complete: the data goes to a temporary file beside it first.

    \b
    Examples:
      hedgefs get /data/report.csv report.csv
      hedgefs get --stats --hedge-threshold-ms 100 /data/big.bin -
    """
    config = hedge_config(hedge)
    with open_fs(namenode, config) as fs:
        try:
            with fs.open(remote) as f:
                if local == "-":
                    _copy_out(f, _stdout_pipe_like_cat(), Progress(f"get {remote}", f.length))
                else:
                    _write_local_atomically(f, local, Progress(f"get {remote}", f.length))
        finally:
            if stats:
                print_stats(fs)


@cli.command(context_settings=CONTEXT)
@click.argument("remotes", nargs=-1, required=True, metavar="REMOTE...")
@hedge_options
@namenode_option
def cat(remotes: tuple[str, ...], namenode: str | None, stats: bool, **hedge) -> None:
    """Write the bytes of each REMOTE file to stdout, in order.

    \b
    Examples:
      hedgefs cat /data/a.txt /data/b.txt
      hedgefs cat --stats --no-hedge /data/big.bin > /dev/null
    """
    config = hedge_config(hedge)
    with open_fs(namenode, config) as fs:
        try:
            readers = [fs.open(path) for path in remotes]  # every path is checked before any output
            out = _stdout_pipe_like_cat()
            for f in readers:
                _copy_out(f, out, None)
        finally:
            if stats:
                print_stats(fs)


def _stdout_pipe_like_cat():
    """`hedgefs cat big | head`: end quietly (SIGPIPE) like cat does when the reader goes away."""
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    return sys.stdout.buffer


def _copy_out(f, out, progress: Progress | None) -> None:
    try:
        for chunk in f.chunks():
            out.write(chunk)
            if progress:
                progress.advance(len(chunk))
        out.flush()
    finally:
        if progress:
            progress.finish()


def _write_local_atomically(f, local: str, progress: Progress) -> None:
    directory = os.path.dirname(os.path.abspath(local))
    if os.path.isdir(local):
        raise IsADirectory(f"is a directory: {local}")
    if not os.path.isdir(directory):
        raise NotFound(f"no such local directory: {directory}")
    tmp = os.path.join(directory, f".{os.path.basename(local)}.hedgefs-{os.getpid()}.part")
    try:
        with open(tmp, "wb") as out:
            _copy_out(f, out, progress)
        os.replace(tmp, local)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


@cli.command(name="ls", context_settings=CONTEXT)
@click.argument("path", default="/")
@click.option("-R", "recursive", is_flag=True, help="List subdirectories recursively.")
@namenode_option
def ls_(path: str, recursive: bool, namenode: str | None) -> None:
    """List a directory (or show one file).

    Columns: type, length, policy, modification time, path.
    """
    with open_fs(namenode) as fs:
        entries = fs.list(path, recursive=recursive)
    for e in entries:
        kind = "d" if e.is_dir else "-"
        length = "-" if e.is_dir else str(e.length)
        mtime = time.strftime("%Y-%m-%d %H:%M", time.localtime(e.mtime_ms / 1000)) if e.mtime_ms else "-"
        click.echo(f"{kind} {length:>12} {e.policy:<14} {mtime}  {e.path}")


@cli.command(context_settings=CONTEXT)
@click.argument("path")
@click.option("-p", "parents", is_flag=True, help="Create missing parents; no error if PATH exists.")
@namenode_option
def mkdir(path: str, parents: bool, namenode: str | None) -> None:
    """Create a directory."""
    with open_fs(namenode) as fs:
        fs.mkdir(path, parents=parents)


@cli.command(context_settings=CONTEXT)
@click.argument("path")
@click.option("-r", "recursive", is_flag=True, help="Remove a directory and everything under it.")
@namenode_option
def rm(path: str, recursive: bool, namenode: str | None) -> None:
    """Remove a file (or, with -r, a directory tree). Space is freed on the DataNodes lazily."""
    with open_fs(namenode) as fs:
        fs.delete(path, recursive=recursive)


@cli.command(context_settings=CONTEXT)
@click.argument("src")
@click.argument("dst")
@namenode_option
def mv(src: str, dst: str, namenode: str | None) -> None:
    """Rename SRC to DST (DST must not exist)."""
    with open_fs(namenode) as fs:
        fs.rename(src, dst)


@cli.command(context_settings=CONTEXT)
@click.argument("path")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@namenode_option
def stat(path: str, as_json: bool, namenode: str | None) -> None:
    """Show size, policy, block groups and where each unit lives."""
    from hedgefs.ec import layout
    from hedgefs.ec.policy import parse_policy

    with open_fs(namenode) as fs:
        st = fs.stat(path)
    doc = {"path": st.path, "type": "directory" if st.is_dir else "file", "length": st.length, "policy": st.policy}
    if not st.is_dir:
        policy = parse_policy(st.policy)
        doc["groups"] = [
            {"id": g.id, "length": g.length,
             "units": [{"index": u.index, "datanode": u.datanode_id, "length": layout.unit_length(policy, g.length, u.index)}
                       for _, u in sorted(g.units.items())]}
            for g in st.groups
        ]
    if as_json:
        click.echo(json.dumps(doc))
        return
    click.echo(f"path:    {doc['path']}\ntype:    {doc['type']}\nlength:  {doc['length']}\npolicy:  {doc['policy']}")
    for g in doc.get("groups", []):
        units = " ".join(f"{u['index']}@{u['datanode']}" for u in g["units"])
        click.echo(f"group {g['id']}: {g['length']} bytes, units {units}")


# ---------------------------------------------------------------------------- ec policies

@cli.group(cls=_Group, context_settings=CONTEXT)
def ec() -> None:
    """Erasure-coding policies (set on directories, inherited by new files)."""


@ec.command("set-policy", context_settings=CONTEXT)
@click.argument("path")
@click.argument("name")
@namenode_option
def ec_set_policy(path: str, name: str, namenode: str | None) -> None:
    """Set policy NAME (e.g. RS-6-3-1024k) on directory PATH."""
    _check_policy(name)
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


def _check_policy(name: str) -> None:
    from hedgefs.ec.policy import parse_policy

    try:
        parse_policy(name)
    except ValueError as err:
        raise UsageError(str(err)) from None


# ---------------------------------------------------------------------------- servers

@cli.command(context_settings=CONTEXT)
@click.option("--port", type=int, default=8020, show_default=True, help="Port (0 picks a free one).")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to bind.")
@click.option("--data-dir", required=True, type=click.Path(file_okay=False), help="Where the SQLite namespace lives.")
@click.option("--http-port", type=int, help="Serve Prometheus metrics at http://HOST:PORT/metrics (and /health).")
@click.option("--dead-interval-s", type=float, default=30.0, show_default=True, help="Silence after which a DataNode is dead.")
@click.option("--repair-interval-s", type=float, default=1.0, show_default=True, help="How often the repair monitor runs.")
@click.option("--lease-timeout-s", type=float, default=600.0, show_default=True,
              help="A write silent this long is abandoned (its client died) and its units deleted.")
@click.option("--block-size", type=int, default=128 * 1024 * 1024, show_default=True, help="Bytes per internal block in a full group.")
@click.option("--default-policy", default="RS-6-3-1024k", show_default=True, help="Policy where no directory sets one.")
@click.option("--port-file", type=click.Path(dir_okay=False), help="Write the bound port here once serving.")
def namenode(port, host, data_dir, http_port, dead_interval_s, repair_interval_s, lease_timeout_s, block_size,
             default_policy, port_file) -> None:
    """Run a NameNode (namespace and block-group map in SQLite)."""
    from hedgefs.namenode.server import serve

    setup_logging(default_level=logging.INFO)
    _check_policy(default_policy)
    try:
        serve(port=port, data_dir=data_dir, host=host, port_file=port_file, dead_interval_s=dead_interval_s,
              default_block_size=block_size, default_policy=default_policy, repair_interval_s=repair_interval_s,
              lease_timeout_s=lease_timeout_s, http_port=http_port)
    except (ValueError, RuntimeError) as err:
        raise HedgefsError(str(err)) from None


@cli.command(context_settings=CONTEXT)
@click.option("--id", "datanode_id", required=True, help="DataNode id, e.g. dn3.")
@click.option("--port", type=int, default=0, show_default=True, help="Port (0 picks a free one).")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to bind.")
@click.option("--advertise-host", help="Host other processes use to reach this DataNode (default: --host).")
@click.option("--data-dir", required=True, type=click.Path(file_okay=False), help="Where internal blocks live.")
@namenode_option
@click.option("--enable-faults", is_flag=True, help="Accept fault-injection RPCs (hedgefs fault ...).")
@click.option("--fault", "fault_specs", multiple=True, metavar="KEY=VALUE",
              help="Start with a fault: read-delay-ms, probability, jitter-ms, stall, error-probability, "
                   "corrupt-probability, bandwidth. Repeatable. Also HEDGEFS_FAULT_* variables.")
@click.option("--heartbeat-interval-s", type=float, default=3.0, show_default=True)
@click.option("--no-fsync", is_flag=True, help="Skip fsync on finalize (tests, benchmarks).")
@click.option("--port-file", type=click.Path(dir_okay=False), help="Write the bound port here once serving.")
def datanode(datanode_id, port, host, advertise_host, data_dir, namenode, enable_faults, fault_specs,
             heartbeat_interval_s, no_fsync, port_file) -> None:
    """Run a DataNode (internal blocks on local disk, CRC32C-checked)."""
    from hedgefs.datanode.server import serve

    setup_logging(default_level=logging.INFO)
    enable_faults = enable_faults or os.environ.get("HEDGEFS_ENABLE_FAULTS", "").lower() in ("1", "true", "yes")
    try:
        serve(datanode_id=datanode_id, port=port, data_dir=data_dir, namenode=namenode_address(namenode), host=host,
              advertise_host=advertise_host, port_file=port_file, enable_faults=enable_faults,
              fault_specs=list(fault_specs), token=os.environ.get("HEDGEFS_TOKEN"),
              heartbeat_interval_s=heartbeat_interval_s, fsync=not no_fsync)
    except ValueError as err:
        raise UsageError(str(err)) from None


# ---------------------------------------------------------------------------- entry point

def _register_more_commands() -> None:
    # Each module adds its verbs to `cli`: cluster, fault, fsck, admin, demo; bench; chaos.
    from hedgefs.client import cli_admin, cli_bench, cli_chaos  # noqa: F401


def _exit_on_sigterm(signum, frame) -> None:
    raise SystemExit(128 + signum)  # unwinds: `get` removes its partial file on the way out


def main(argv: list[str] | None = None) -> None:
    from hedgefs.malloc import tune_malloc

    tune_malloc()
    if signal.getsignal(signal.SIGTERM) == signal.SIG_DFL:
        signal.signal(signal.SIGTERM, _exit_on_sigterm)
    _register_more_commands()
    try:
        cli.main(args=argv, prog_name="hedgefs", standalone_mode=False)
    except click.exceptions.Exit as e:
        sys.exit(e.exit_code)
    except click.Abort:
        click.echo("hedgefs: aborted", err=True)
        sys.exit(130)
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
    except OSError as err:  # local disk trouble: full, read-only, permissions
        click.echo(f"hedgefs: {err.strerror or err}" + (f": {err.filename}" if err.filename else ""), err=True)
        sys.exit(1)
