"""Mounting and unmounting: one FileSystem served at a mount point until it is unmounted.

``serve`` returns when the mount ends: ``fusermount3 -u`` / ``umount`` (the kernel closes the
session), or SIGTERM / SIGINT / SIGHUP (we leave the session and unmount). Files still being
written then are abandoned (they never appear). A process killed with SIGKILL cannot unmount:
the mount point answers "Transport endpoint is not connected" until ``fusermount3 -u``.

``Daemon`` is the background mode: the process forks before any client thread exists, the
parent waits for the child to say "mounted" (exit 0) or why not (one line, its exit code).
"""

import dataclasses
import logging
import os
import signal
import sys

from hedgefs.client.errors import HedgefsError, UsageError
from hedgefs.client.fs import FileSystem
from hedgefs.mount.attrs import INSECURE_USER, Owners

log = logging.getLogger("hedgefs.mount")


@dataclasses.dataclass(frozen=True)
class MountOptions:
    timeout_s: float = 1.0        # entry and attribute timeout
    allow_other: bool = False     # other local users may use the mount (the kernel checks modes)
    max_tasks: int = 64           # requests served at once


def check_mountpoint(path: str) -> str:
    """The absolute mount point, or a UsageError saying what is wrong with it (before any
    connection is made)."""
    if not os.path.exists(path):
        raise UsageError(f"no such directory: {path}")
    if not os.path.isdir(path):
        raise UsageError(f"not a directory: {path}")
    return os.path.abspath(path)


def check_fuse() -> None:
    """A HedgefsError (one line) when this machine cannot mount: no /dev/fuse, no pyfuse3."""
    try:
        import pyfuse3  # noqa: F401
    except ImportError as err:
        raise HedgefsError(f"cannot mount: pyfuse3 is not installed ({err}); see docs/mount.md") from None
    if not os.path.exists("/dev/fuse"):
        raise HedgefsError("cannot mount: no /dev/fuse (load the fuse module, or give the container the device)")


def serve(fs: FileSystem, mountpoint: str, options: MountOptions = MountOptions(), ready=None) -> None:
    """Serve ``fs`` at ``mountpoint`` until unmounted; ``ready()`` is called once it is mounted."""
    import pyfuse3
    import trio

    from hedgefs.mount.ops import Operations

    user = fs.credential.identity.name if fs.credential else INSECURE_USER
    ops = Operations(fs, Owners(user), options.timeout_s)
    fuse_options = set(pyfuse3.default_options) | {"fsname=hedgefs", "subtype=hedgefs"}
    if options.allow_other:
        fuse_options.add("allow_other")
    try:
        pyfuse3.init(ops, mountpoint, fuse_options)
    except RuntimeError as err:
        raise HedgefsError(f"cannot mount at {mountpoint}: {err} (is something mounted there already?)") from None
    try:
        trio.run(_main, options.max_tasks, ready)
    finally:
        _abandon_writes(ops)
        pyfuse3.close(unmount=True)


async def _main(max_tasks: int, ready) -> None:
    import pyfuse3
    import trio

    async with trio.open_nursery() as nursery:
        nursery.start_soon(_stop_on_signal, nursery.cancel_scope)
        if ready is not None:
            ready()
        await pyfuse3.main(max_tasks=max_tasks)
        nursery.cancel_scope.cancel()   # unmounted: stop waiting for signals


async def _stop_on_signal(scope) -> None:
    import pyfuse3
    import trio

    with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT, signal.SIGHUP) as signals:
        async for signum in signals:
            log.info("%s: unmounting", signal.Signals(signum).name)
            pyfuse3.terminate()
            return


def _abandon_writes(ops) -> None:
    for handle in list(ops._handles.values()):
        writer = getattr(handle, "writer", None)
        if writer is not None and writer.committed is None:
            log.warning("%s: unmounted while being written: not stored", writer.path)
            writer.abort()


class Daemon:
    """Fork into the background; the parent exits with the child's verdict."""

    def __init__(self, log_file: str | None = None):
        read_end, self._write_end = os.pipe()
        pid = os.fork()
        if pid:
            os.close(self._write_end)
            self._parent(read_end, pid)   # never returns
        os.close(read_end)
        os.setsid()
        null = os.open(os.devnull, os.O_RDWR)
        out = os.open(log_file, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644) if log_file else null
        os.dup2(null, 0)
        os.dup2(out, 1)
        os.dup2(out, 2)

    @staticmethod
    def _parent(read_end: int, pid: int) -> None:
        with os.fdopen(read_end, "rb") as pipe:
            verdict = pipe.read().decode(errors="replace")
        if verdict.startswith("ok"):
            os._exit(0)
        code, _, message = verdict.partition("\t")
        if not message:   # the child died before it could say
            _, status = os.waitpid(pid, 0)
            code, message = "1", f"the mount process ended before mounting (status {status})"
        sys.stderr.write(f"hedgefs: {message.strip()}\n")
        sys.stderr.flush()
        os._exit(int(code) if code.isdigit() else 1)

    def mounted(self) -> None:
        os.write(self._write_end, b"ok")
        os.close(self._write_end)
        self._write_end = -1

    def failed(self, code: int, message: str) -> None:
        if self._write_end >= 0:
            os.write(self._write_end, f"{code}\t{message}".encode())
            os.close(self._write_end)
            self._write_end = -1
