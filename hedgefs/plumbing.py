"""Small plumbing shared by the servers and the client: addresses, port files, signals, errors.

Nothing here knows a NameNode from a DataNode; it imports only the standard library and grpc.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import threading
from collections.abc import Iterator

import grpc


def hostport(host: str, port: int) -> str:
    """``host:port``, with an IPv6 host in brackets (``[::1]:8020``)."""
    return f"[{host}]:{port}" if ":" in host and not host.startswith("[") else f"{host}:{port}"


def write_port_file(path: str, port: int, **more: int) -> None:
    """Write the ports a server bound, atomically: a reader sees no file or all of it.

    The first line is the RPC port (a plain number, as it always was); other ports follow as
    ``name=port`` lines, e.g. ``http=9870``. ``read_port_file`` reads both.
    """
    tmp = f"{path}.tmp.{os.getpid()}"
    with open(tmp, "w") as f:
        f.write(f"{port}\n")
        f.writelines(f"{name}={value}\n" for name, value in more.items())
    os.replace(tmp, path)


def read_port_file(path: str | os.PathLike) -> dict[str, int]:
    """``{"rpc": port, <name>: port, ...}`` from a file ``write_port_file`` wrote."""
    with open(path) as f:
        first, *rest = f.read().split()
    ports = {"rpc": int(first)}
    for line in rest:
        name, _, value = line.partition("=")
        ports[name] = int(value)
    return ports


@contextlib.contextmanager
def stop_on_signal() -> Iterator[threading.Event]:
    """An Event that SIGTERM or SIGINT sets while the block runs; the old handlers come back after.

    Signal handlers can be installed only from the main thread; elsewhere (a test running a server
    in a thread) the Event is set by whoever owns it.
    """
    stop = threading.Event()
    previous = {}
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGTERM, signal.SIGINT):
            previous[sig] = signal.signal(sig, lambda signum, frame: stop.set())
    try:
        yield stop
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def serve_until(stop: threading.Event) -> None:
    """Block until ``stop`` is set (waking once a second, so signals are handled promptly)."""
    while not stop.wait(1.0):
        pass


def is_loopback(host: str) -> bool:
    """Does binding ``host`` keep a server to this machine?"""
    import ipaddress

    if host in ("localhost", ""):
        return host == "localhost"
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False   # a host name: it may well resolve to a public address


def warn_if_open(what: str, host: str) -> None:
    """The one warning line of an insecure server that other machines can reach."""
    if not is_loopback(host):
        import logging

        logging.getLogger("hedgefs.security").warning(
            "%s listens on %s without --credentials: anyone who can reach it owns the cluster "
            "(see docs/security.md)", what, host)


def describe(err: BaseException) -> str:
    """One line for a failed call: ``CODE: details`` for an RPC error, else the error's text."""
    if isinstance(err, grpc.RpcError):
        try:
            return f"{err.code().name}: {err.details()}"
        except Exception:  # an RpcError that is not a Call (rare): its text is all there is
            return str(err) or type(err).__name__
    if isinstance(err, (asyncio.TimeoutError, TimeoutError)) and not str(err):
        return "timed out"
    return str(err) or type(err).__name__
