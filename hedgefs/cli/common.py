"""What every command module shares: options, the client handle, logging, help layout, checks.

Errors are one line on stderr and a non-zero exit (codes in client/errors.py); ``hedgefs.cli.main``
turns them into that.
"""

from __future__ import annotations

import contextlib
import logging
import sys

import click

from hedgefs.client.config import HedgeConfig, parse_threshold
from hedgefs.client.errors import HedgefsError, UsageError

# The client library (hedgefs.client.fs: the reader, asyncio, the codec's neighbours) is imported by
# the verbs that use it, not by the servers' verbs: every DataNode and NameNode starts through here.

log = logging.getLogger("hedgefs.cli")

CONTEXT = {"help_option_names": ["-h", "--help"], "max_content_width": 100}
# For verbs where -h means human-readable sizes, as in HDFS and coreutils (ls, du, df): help is --help.
CONTEXT_NO_SHORT_HELP = {"help_option_names": ["--help"], "max_content_width": 100}


def remote_path(text: str) -> str:
    """A cluster path as typed, in the NameNode's spelling (hedgefs.cli.paths)."""
    from hedgefs.cli.paths import remote_path as convert

    return convert(text)


def setup_logging(verbose: bool = False, default_level: int = logging.WARNING) -> None:
    logging.basicConfig(
        level=logging.DEBUG if verbose else default_level,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
        force=True,
    )
    if verbose:   # -v is about hedgefs: gRPC's and asyncio's own debug lines are noise to a user
        for noisy in ("grpc", "asyncio", "urllib3"):
            logging.getLogger(noisy).setLevel(logging.WARNING)


# ---------------------------------------------------------------------------- shared options

_credentials_flag: str | None = None


def _remember_credentials(ctx, param, value):
    global _credentials_flag
    if value:
        _credentials_flag = value
    return value


def namenode_address_option(f):
    return click.option("--namenode", metavar="HOST:PORT[,...]",
                        help="NameNode address; an HA cluster's NameNodes as HOST:PORT,HOST:PORT (a client "
                             "follows the active, a DataNode reports to each) (default: $HEDGEFS_NAMENODE, "
                             "else 127.0.0.1:8020).")(f)


def namenode_option(f):
    """A client's ``--namenode`` and ``--credentials``: where the cluster is and who we are to it."""
    f = click.option("--credentials", metavar="FILE", expose_value=False, callback=_remember_credentials,
                     help="Credential file for a secure cluster (default: $HEDGEFS_CREDENTIALS; none = insecure).")(f)
    return namenode_address_option(f)


def client_credentials():
    """The credential this command runs with: ``--credentials``, else $HEDGEFS_CREDENTIALS, else
    None (an insecure cluster). A bad file is bad input (exit 2)."""
    from hedgefs.client.fs import FROM_ENVIRONMENT, credentials_from

    return credentials_from(_credentials_flag or FROM_ENVIRONMENT)


def load_credential_or_exit(path: str):
    """A server's credential file, loaded and checked (bad input, exit 2, if it cannot be used)."""
    from hedgefs.client.fs import credentials_from

    return credentials_from(path)


class _Threshold(click.ParamType):
    name = "auto|MS"

    def convert(self, value, param, ctx):
        if value is None or isinstance(value, float):
            return value
        try:
            threshold = parse_threshold(str(value))
        except ValueError:
            self.fail(f"{value!r}: expected auto or a number of milliseconds", param, ctx)
        return "auto" if threshold is None else threshold


def hedge_options(f):
    """The read-side flags: hedge threshold, breaker keys, budget (flags win over HEDGEFS_HEDGE_*)."""
    opts = [
        click.option("--stats", is_flag=True,
                     help="Print read counters (hedges and hedge_wins, HDFS's hedgedReadOps and "
                          "hedgedReadOpsWin; reads avoided; latencies per DataNode) to stderr."),
        click.option("--read-extra", "read_extra", type=click.IntRange(0), metavar="N",
                     help="Late binding: whole-stripe reads ask k+N units and use the first k; "
                          "replicated blocks ask 1+N replicas and use the first answer [0]."),
        click.option("--hedge-budget-pct", "budget_pct", type=click.FloatRange(0, 1000), metavar="PCT",
                     help="Extra unit reads (hedges, probes, extra sources) at most PCT % of the reads "
                          "needed, plus a small burst (auto threshold only) [5]."),
        click.option("--hedge-max-per-second", "max_per_second", type=int, help="Hard cap on hedges started per second [200]."),
        click.option("--hedge-cooldown-ms", "cooldown_ms", type=float, help="Hedging stays off this long after a trip [30000]."),
        click.option("--hedge-impaired-window-ms", "impaired_window_ms", type=float, help="Window for counting impaired DataNodes [60000]."),
        click.option("--hedge-max-impaired-nodes", "max_impaired_nodes", type=int, help="Impaired DataNodes allowed before the breaker trips [2]."),
        click.option("--no-hedge", "no_hedge", is_flag=True, help="Never hedge; failed reads are still rebuilt."),
        click.option("--hedge-threshold-ms", "threshold_ms", type=_Threshold(),
                     help="auto: learn it per read size from the DataNodes' latency (1.5 x the healthy p99, "
                          "10 ms..250 ms for a cell) and read around slow DataNodes; a number: hedge a read "
                          "slower than that, nothing more (the behaviour before auto) [auto]."),
    ]
    for opt in opts:
        f = opt(f)
    return f


def hedge_config(kwargs: dict) -> HedgeConfig:
    flags = {key: kwargs.pop(key, None) for key in
             ("threshold_ms", "max_impaired_nodes", "impaired_window_ms", "cooldown_ms", "max_per_second",
              "budget_pct", "read_extra")}
    if kwargs.pop("no_hedge", False):
        flags["enabled"] = False
    try:
        return HedgeConfig.from_sources(flags)
    except ValueError as err:
        raise UsageError(str(err)) from None


def chosen_namenode(namenode: str | None) -> str:
    """The NameNode of this command: a hedgefs://HOST:PORT path's, else --namenode (the verb's;
    `hedgefs --namenode X` sets $HEDGEFS_NAMENODE for the verb), else $HEDGEFS_NAMENODE, else
    127.0.0.1:8020."""
    from hedgefs.cli.paths import check_address, url_namenode   # read now: set by remote_path()
    from hedgefs.client.config import namenode_address

    return check_address(namenode_address(url_namenode or namenode))


def open_fs(namenode: str | None, hedge: HedgeConfig | None = None) -> FileSystem:
    if hedge is None:
        hedge = hedge_config({})  # HEDGEFS_HEDGE_* may be set (and wrong) for any verb
    from hedgefs.client.fs import FileSystem

    return FileSystem(chosen_namenode(namenode), hedge=hedge, credentials=client_credentials())


def print_stats(fs: FileSystem) -> None:
    stats = fs.stats()
    c = stats.counters
    refused = c["hedges_refused_breaker"] + c["hedges_refused_rate"]
    click.echo(
        f"reads={c['reads']} unit_reads={c['unit_reads']} hedges={c['hedges']} hedge_wins={c['hedge_wins']} "
        f"hedges_refused={refused} (breaker={c['hedges_refused_breaker']} rate={c['hedges_refused_rate']}) "
        f"breaker_trips={stats.breaker_trips} rebuilt_on_failure={c['rebuilt_on_failure']} "
        f"avoided={c['avoided']} probes={c['probes']} checksum_failures={c['checksum_failures']}",
        err=True,
    )
    for dn, row in stats.per_datanode.items():
        click.echo(f"  {dn:>6}: unit_reads={row['unit_reads']:<6} p50={row['p50_ms']:.1f} ms p99={row['p99_ms']:.1f} ms "
                   f"overdue={row['overdue']} avoided={row['avoided']} probes={row['probes']}"
                   + (" SLOW" if row.get("slow") else ""), err=True)


# ---------------------------------------------------------------------------- groups

class Group(click.Group):
    """Keeps `hedgefs --help` in the order the verbs were defined, which reads like a tour."""

    def list_commands(self, ctx):
        return list(self.commands)


def threads_option(f):
    """``-t/--threads N`` of the tree verbs (put -r, get -r, cp -r), as `hdfs dfs -put -t`."""
    from hedgefs.cli.trees import DEFAULT_THREADS

    return click.option("-t", "--threads", type=click.IntRange(1, 256), default=DEFAULT_THREADS, show_default=True,
                        metavar="N", help="With -r: files copied at once.")(f)


def check_policy(name: str) -> None:
    """A bad policy name is bad input (exit 2), caught before anything is contacted."""
    from hedgefs.ec.policy import parse_policy

    try:
        parse_policy(name)
    except ValueError as err:
        raise UsageError(str(err)) from None


def metrics_port_option(f):
    """``--metrics-port [HOST:]PORT`` for long-running commands: serve this process's hedge
    counters (``hedgefs_client_*``) at http://HOST:PORT/metrics while the command runs."""
    return click.option("--metrics-port", "metrics_port", metavar="[HOST:]PORT",
                        help="Serve hedge counters for Prometheus at http://HOST:PORT/metrics while running "
                             "(HOST defaults to 127.0.0.1; 0.0.0.0 for a container).")(f)


@contextlib.contextmanager
def serving_client_metrics(spec: str | None):
    """Serve ``hedgefs.client.metrics.REGISTRY`` while the block runs (nothing if ``spec`` is None)."""
    if not spec:
        yield None
        return
    from hedgefs import httpserver
    from hedgefs.client.metrics import REGISTRY

    host, _, port_text = spec.rpartition(":")
    try:
        port = int(port_text)
    except ValueError:
        raise UsageError(f"--metrics-port: expected [HOST:]PORT, got {spec!r}") from None

    def handle(request):
        if request.path == "/metrics":
            return httpserver.metrics(REGISTRY)
        if request.path == "/health":
            return httpserver.health()
        return httpserver.text(404, f"not found: {request.path} (try /metrics)\n")

    try:
        server = httpserver.open_server(host.strip("[]") or "127.0.0.1", port, handle, "client")
    except RuntimeError as err:
        raise HedgefsError(str(err)) from None
    server.start()
    click.echo(f"metrics: {server.url}metrics", err=True)
    try:
        yield server
    finally:
        server.stop()
