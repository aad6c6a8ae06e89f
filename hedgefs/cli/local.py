"""The local side of a copy: reading a local source (`put`, `append`) and writing a local file
safely, what `get` (and distcp's local side, later) does to a user's disk.

Reading: ``open_local`` opens LOCAL, or stdin for ``-``, with the one-line errors of a missing
file, a directory, or one we may not read.

Writing:

- LOCAL that is not a regular file (a device such as /dev/null, a FIFO, a socket, anything under
  /dev or /proc such as /dev/stdout) is opened and written into, never replaced.
- A symlink is followed: its target is written (a regular target through a temp file beside it).
- A regular file appears only when complete: the bytes go to ``.NAME.hedgefs-PID.part`` beside it
  first and are renamed over it. An existing file is replaced only with ``force`` (as `put -f`).
- LOCAL naming an existing directory means DIR/basename(REMOTE), as cp and `hdfs dfs -get` do.
- Errors name LOCAL, not its temp file. Temp files left by a killed `get` (their PID is gone)
  are removed by the next `get` to the same target.
"""

from __future__ import annotations

import contextlib
import glob
import os
import stat
import sys
from typing import BinaryIO

from hedgefs.client.errors import AlreadyExists, HedgefsError, IsADirectory, NotFound

_IN_PLACE_PREFIXES = ("/dev/", "/proc/")


def open_local(local: str, directory_hint: str = "") -> tuple[BinaryIO, int | None]:
    """The byte source LOCAL names (stdin for ``-``) and its length (None for stdin: unknown until
    it ends). ``directory_hint`` follows the error for a directory, e.g. "(put -r copies a tree)"."""
    if local == "-":
        return sys.stdin.buffer, None
    try:
        source = open(local, "rb")
    except FileNotFoundError:
        raise NotFound(f"no such local file: {local}") from None
    except IsADirectoryError:
        raise IsADirectory(f"is a directory: {local}" + (f" {directory_hint}" if directory_hint else "")) from None
    except OSError as err:
        raise HedgefsError(f"cannot read {local}: {err.strerror}") from None
    return source, os.fstat(source.fileno()).st_size


def target_for(local: str, remote_name: str) -> str:
    """LOCAL, or LOCAL/remote_name when LOCAL is an existing directory."""
    if os.path.isdir(local):
        if not remote_name:
            raise IsADirectory(f"is a directory: {local}")
        return os.path.join(local, remote_name)
    return local


def _in_place(local: str) -> bool:
    """True when ``local`` must be written into rather than replaced."""
    if os.path.abspath(local).startswith(_IN_PLACE_PREFIXES):
        return True
    try:
        st = os.stat(local)   # follows symlinks: a link to a device is the device
    except FileNotFoundError:
        return False
    except OSError as err:
        raise HedgefsError(f"cannot write {local}: {err.strerror}") from None
    return not stat.S_ISREG(st.st_mode) and not stat.S_ISDIR(st.st_mode)


def check_target(local: str, force: bool) -> str:
    """Refuse what would be unsafe before any byte is read; return the path to write ("in place"
    targets unchanged, symlinks resolved to their target)."""
    if _in_place(local):
        return local
    real = os.path.realpath(local)   # a symlink: write (and rename over) its target, keep the link
    if os.path.isdir(real):
        raise IsADirectory(f"is a directory: {local}")
    directory = os.path.dirname(real)
    if not os.path.isdir(directory):
        raise NotFound(f"no such local directory: {os.path.dirname(os.path.abspath(local)) or directory}")
    if os.path.lexists(real) and not force:
        raise AlreadyExists(f"local file exists: {local} (use -f to overwrite)")
    return real


def _temp_name(real: str, pid: int | str) -> str:
    return os.path.join(os.path.dirname(real), f".{os.path.basename(real)}.hedgefs-{pid}.part")


def clean_leftovers(real: str) -> None:
    """Remove temp files of earlier `get`s to ``real`` whose process no longer runs."""
    prefix = _temp_name(real, "")[: -len(".part")]
    for leftover in glob.glob(glob.escape(prefix) + "*.part"):
        pid_text = leftover[len(prefix):-len(".part")]
        if not pid_text.isdigit():
            continue
        if int(pid_text) != os.getpid():   # ours can only be a leftover of an earlier process
            try:
                os.kill(int(pid_text), 0)
                continue           # still running (or not ours to signal): leave it
            except ProcessLookupError:
                pass
            except PermissionError:
                continue
        with contextlib.suppress(OSError):
            os.unlink(leftover)


def write(local: str, real: str, copy) -> None:
    """Write the output of ``copy(out)`` to ``real`` (from check_target), safely."""
    if real == local and _in_place(local):
        try:
            out = open(local, "wb")
        except OSError as err:
            raise HedgefsError(f"cannot write {local}: {err.strerror}") from None
        with out:
            _copy(copy, out, local)
        return
    clean_leftovers(real)
    tmp = _temp_name(real, os.getpid())
    try:
        try:
            out = open(tmp, "xb")
        except OSError as err:
            raise HedgefsError(f"cannot write {local}: {err.strerror}") from None
        with out:
            _copy(copy, out, local)
        try:
            os.replace(tmp, real)
        except OSError as err:
            raise HedgefsError(f"cannot write {local}: {err.strerror}") from None
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def _copy(copy, out, local: str) -> None:
    try:
        copy(out)
    except OSError as err:   # a full disk, a FIFO whose reader went away
        if err.strerror is None:
            raise
        raise HedgefsError(f"cannot write {local}: {err.strerror}") from None
