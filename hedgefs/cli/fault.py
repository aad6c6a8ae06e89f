"""`hedgefs fault ...`: fault knobs of running DataNodes, over their admin RPCs.

Only DataNodes registered with the NameNode are asked (their addresses come from it). In a
secure cluster the calls are TLS, with the admin's credential, and each DataNode must show its
own certificate (dn3's and no other for dn3) before anything is sent; nothing travels in
plaintext (a credential never does: TLS proves who we are without sending a secret).
"""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING

import click

from hedgefs.cli.common import CONTEXT, Group, client_credentials, namenode_option, open_fs
from hedgefs.client.errors import HedgefsError, NotAllowed, UsageError
from hedgefs.client.metrics import natural_key

if TYPE_CHECKING:   # gRPC and protobuf come with a verb that runs, not with `hedgefs --help`
    from hedgefs.client.admin import ClusterReport
    from hedgefs.proto import hedgefs_pb2 as pb


def _registered(namenode: str | None) -> ClusterReport:
    """The DataNodes the NameNode knows (an admin's call: fault knobs are an admin's too)."""
    with open_fs(namenode) as fs:
        try:
            return fs.admin.report()
        except NotAllowed as err:
            if "needs an admin credential" in str(err):
                raise NotAllowed(str(err).replace("Report needs", "fault commands need", 1)) from None
            raise


def _fault_rpc(report: ClusterReport, datanode_id: str, method: str, request) -> pb.FaultState:
    import grpc

    from hedgefs.proto import GRPC_OPTIONS, hedgefs_pb2_grpc
    from hedgefs.security import tls
    from hedgefs.security.identity import DATANODE, server_name

    found = [dn for dn in report.datanodes if dn.id == datanode_id]
    if not found:
        known = ", ".join(sorted((d.id for d in report.datanodes), key=natural_key)) or "none"
        raise UsageError(f"no DataNode {datanode_id!r} (known: {known})")
    credential, name = client_credentials(), server_name(DATANODE, datanode_id)
    with tls.channel(found[0].address, credential, name, GRPC_OPTIONS) as channel:
        try:
            return getattr(hedgefs_pb2_grpc.DataNodeStub(channel), method)(request, timeout=5)
        except grpc.RpcError as err:
            if err.code() in (grpc.StatusCode.PERMISSION_DENIED, grpc.StatusCode.UNAUTHENTICATED):
                raise NotAllowed(f"{datanode_id}: {err.details()}") from None
            if err.code() == grpc.StatusCode.UNAVAILABLE:
                refusal = tls.diagnose(found[0].address, credential, name, datanode_id)
                if refusal:
                    raise NotAllowed(refusal) from None
            raise HedgefsError(f"{datanode_id}: {err.details() or err.code().name}") from None


def _fault_line(datanode_id: str, s: pb.FaultState) -> str:
    if not s.enabled:
        return f"{datanode_id}: fault injection disabled"
    parts = []
    if s.read_delay_ms:
        parts.append(f"read-delay {s.read_delay_ms} ms (p={s.probability:g}, jitter {s.jitter_ms} ms)")
    if s.stall:
        parts.append(f"STALL ({s.stalled_reads} reads held)")
    if s.error_probability:
        parts.append(f"errors p={s.error_probability:g}")
    if s.corrupt_probability:
        parts.append(f"corrupt p={s.corrupt_probability:g}")
    if s.wire_corrupt_probability:
        parts.append(f"wire-corrupt p={s.wire_corrupt_probability:g}")
    if s.bandwidth_bps:
        parts.append(f"bandwidth {s.bandwidth_bps} B/s")
    calls = ", ".join(f"{k}={v}" for k, v in sorted(s.calls.items()))
    return f"{datanode_id}: {'; '.join(parts) or 'no faults'} | calls: {calls or '-'} | cancelled reads: {s.cancelled_reads}"


@click.group(cls=Group, context_settings=CONTEXT)
def fault() -> None:
    """Inject faults into running DataNodes (they must run with --enable-faults).

    \b
    Examples:
      hedgefs fault set dn3 --read-delay-ms 2000            # every read +2 s
      hedgefs fault set dn4 --read-delay-ms 2000 --probability 0.01
      hedgefs fault set dn5 --stall                         # accept reads, never answer
      hedgefs fault set dn6 --wire-corrupt-probability 1    # the reader's checksums catch it
      hedgefs fault clear dn3
      hedgefs fault show
    """


@fault.command("set", context_settings=CONTEXT)
@click.argument("datanode_id", metavar="DN_ID")
@click.option("--read-delay-ms", type=click.IntRange(0), help="Added delay before a read's first byte.")
@click.option("--probability", type=click.FloatRange(0, 1), help="Chance the delay applies to a read [1].")
@click.option("--jitter-ms", type=click.IntRange(0), help="Uniform +/- jitter on the delay.")
@click.option("--stall/--no-stall", default=None, help="Hold every read unanswered until cleared.")
@click.option("--error-probability", type=click.FloatRange(0, 1), help="Chance a read fails (UNAVAILABLE).")
@click.option("--corrupt-probability", type=click.FloatRange(0, 1),
              help="A bad disk: chance a read's bytes come off the disk with one byte flipped.")
@click.option("--wire-corrupt-probability", type=click.FloatRange(0, 1),
              help="A bad link: chance a read's bytes get one byte flipped after the DataNode's storage.")
@click.option("--bandwidth", type=click.IntRange(0), help="Cap on read bytes per second (0 = none).")
@namenode_option
def fault_set(datanode_id, namenode, **knobs) -> None:
    """Change fault knobs on DN_ID (only the knobs given change).

    \b
    Examples:
      hedgefs fault set dn3 --read-delay-ms 2000
      hedgefs fault set dn5 --read-delay-ms 300 --probability 0.1 --jitter-ms 50
      hedgefs fault set dn2 --corrupt-probability 0.01
    """
    fields = {"read_delay_ms": knobs["read_delay_ms"], "probability": knobs["probability"],
              "jitter_ms": knobs["jitter_ms"], "stall": knobs["stall"],
              "error_probability": knobs["error_probability"], "corrupt_probability": knobs["corrupt_probability"],
              "wire_corrupt_probability": knobs["wire_corrupt_probability"], "bandwidth_bps": knobs["bandwidth"]}
    from hedgefs.proto import hedgefs_pb2 as pb

    request = pb.FaultConfig(**{k: v for k, v in fields.items() if v is not None})
    click.echo(_fault_line(datanode_id, _fault_rpc(_registered(namenode), datanode_id, "SetFaults", request)))


@fault.command("clear", context_settings=CONTEXT)
@click.argument("datanode_id", metavar="DN_ID")
@namenode_option
def fault_clear(datanode_id, namenode) -> None:
    """Remove every fault from DN_ID (stalled reads are released).

    \b
    Examples:
      hedgefs fault clear dn3
    """
    from hedgefs.proto import hedgefs_pb2 as pb

    click.echo(_fault_line(datanode_id, _fault_rpc(_registered(namenode), datanode_id, "ClearFaults",
                                                   pb.FaultClearRequest())))


@fault.command("show", context_settings=CONTEXT)
@click.argument("datanode_id", metavar="[DN_ID]", required=False)
@click.option("--json", "as_json", is_flag=True, help="One JSON object per DataNode: its knobs and call counters.")
@namenode_option
def fault_show(datanode_id, namenode, as_json) -> None:
    """Show fault knobs and call counters of one or every live DataNode.

    \b
    Examples:
      hedgefs fault show
      hedgefs fault show dn3
    """
    from hedgefs.proto import hedgefs_pb2 as pb

    report = _registered(namenode)
    ids = [datanode_id] if datanode_id else sorted((d.id for d in report.datanodes if d.state != "dead"), key=natural_key)
    failed = False
    for dn in ids:
        try:
            state = _fault_rpc(report, dn, "GetFaults", pb.FaultClearRequest())
            if as_json:
                from google.protobuf.json_format import MessageToDict

                click.echo(json.dumps({"datanode": dn, **MessageToDict(state, preserving_proto_field_name=True,
                                                                       always_print_fields_with_no_presence=True)}))
            else:
                click.echo(_fault_line(dn, state))
        except HedgefsError as err:
            if datanode_id or isinstance(err, NotAllowed):
                raise
            failed = True
            click.echo(f"{dn}: unreachable ({str(err).split(': ', 1)[-1][:80]})")
    if failed:
        sys.exit(1)
