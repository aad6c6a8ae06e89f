"""How a FUSE request calls the cluster, and what becomes of its errors.

``run``: a blocking FileSystem call in a worker thread (a slow NameNode holds up only the request
that waits for it); ``wait``: a client future (a hedged read in flight) awaited on trio, with no
thread parked on it; ``guarded``: an operation whose bug is its caller's EIO, never the end of
the mount. A HedgefsError becomes its errno (attrs.errno_of); EIO is logged as a warning.
"""

import concurrent.futures
import errno
import functools
import logging

import pyfuse3
import trio

from hedgefs.client.errors import HedgefsError
from hedgefs.mount.attrs import errno_of
from hedgefs.mount.files import WriteFailed

log = logging.getLogger("hedgefs.mount")


def as_fuse_error(err: HedgefsError) -> pyfuse3.FUSEError:
    code = errno_of(err)
    (log.warning if code == errno.EIO else log.debug)("%s", err)
    return pyfuse3.FUSEError(code)


def fail(code: int, why: str = "") -> pyfuse3.FUSEError:
    if why:
        log.info("%s: %s", errno.errorcode.get(code, code), why)
    return pyfuse3.FUSEError(code)


async def run(fn, *args):
    """``fn(*args)`` in a worker thread; a HedgefsError becomes its errno."""
    try:
        return await trio.to_thread.run_sync(fn, *args)
    except WriteFailed as err:
        raise fail(err.errno, str(err)) from None
    except HedgefsError as err:
        raise as_fuse_error(err) from None


async def wait(future: concurrent.futures.Future):
    """The result of a client future, awaited on trio: no worker thread sits in result()."""
    if not future.done():
        token = trio.lowlevel.current_trio_token()
        done = trio.Event()

        def wake(_future) -> None:
            try:
                token.run_sync_soon(done.set)
            except trio.RunFinishedError:
                pass   # unmounted meanwhile
        future.add_done_callback(wake)
        try:
            await done.wait()
        except trio.Cancelled:
            future.cancel()
            raise
    return future.result()


def guarded(method):
    """An operation whose bug is an EIO for its caller (and a logged traceback), never the end of
    the mount: pyfuse3 stops serving on any exception but FUSEError."""
    @functools.wraps(method)
    async def guarded_method(*args):
        try:
            return await method(*args)
        except (pyfuse3.FUSEError, trio.Cancelled):
            raise
        except Exception:   # noqa: BLE001
            log.exception("%s failed", method.__name__)
            raise pyfuse3.FUSEError(errno.EIO) from None
    return guarded_method
