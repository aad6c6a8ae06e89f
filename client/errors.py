"""The errors a user can see, each with a one-line message and an exit code scripts can rely on.

Exit codes: 1 = operation failed (I/O, unreadable data, too few DataNodes, refused by the cluster),
2 = usage / bad input (bad path, not valid UTF-8, no such file, file exists, is / is not a
directory, directory not empty, unknown policy), 3 = NameNode unreachable, 4 = not allowed (no
or the wrong credential, an admin's call, file permissions, TLS refused).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:
    import grpc

T = TypeVar("T")


class HedgefsError(Exception):
    """Anything the CLI reports as one line on stderr; never a traceback."""

    exit_code = 1


class UsageError(HedgefsError):
    exit_code = 2


class NotFound(UsageError):
    pass


class AlreadyExists(UsageError):
    pass


class IsADirectory(UsageError):
    pass


class NotADirectory(UsageError):
    """A path names a file where a directory is needed (a parent, mkdir under a file, rmdir)."""


class DirectoryNotEmpty(UsageError):
    """A delete without ``recursive`` (or a rename onto) a directory that holds entries."""


class Unavailable(HedgefsError):
    exit_code = 3


class Unimplemented(UsageError):
    """The server has no such method: not a NameNode (a DataNode's port?), or an older NameNode
    that lacks a newer call (the batched ones: the client then makes the single calls)."""


class NotAllowed(HedgefsError):
    """The cluster refused who we are, or what we asked, on security grounds."""

    exit_code = 4


class DataUnavailable(HedgefsError):
    """Too few units of a stripe, or no replica of a block, could be read: the bytes cannot be had.
    Its message always starts "data unavailable", whichever step found out."""

    def __str__(self) -> str:
        message = super().__str__()
        return message if message.startswith("data unavailable") else f"data unavailable: {message}"


class FileChanged(HedgefsError):
    """The file was replaced or deleted while it was read: its old bytes are gone, and the new
    ones are another file's. Read it again from the start."""


class WriteAborted(HedgefsError):
    """A FileWriter was aborted (or closed after a failure): nothing was committed."""


def translate(err: HedgefsError, table: "dict[type[HedgefsError], T]", default: "T") -> "T":
    """What ``table`` says for ``err``: the entry of its most specific class (a gateway's errno,
    S3 code or Python exception per client error class), else ``default``."""
    for cls in type(err).__mro__:
        if cls in table:
            return table[cls]
    return default


# By the status code's name: this module is imported by every CLI verb (`hedgefs --help` too) and
# needs no gRPC of its own (~0.1 s of CPU a process).
_BY_CODE = {
    "NOT_FOUND": NotFound,
    "ALREADY_EXISTS": AlreadyExists,
    "INVALID_ARGUMENT": UsageError,
    "OUT_OF_RANGE": UsageError,
    "FAILED_PRECONDITION": HedgefsError,
    "PERMISSION_DENIED": NotAllowed,
    "UNAUTHENTICATED": NotAllowed,
}


# Refusals of a path for what it names (FAILED_PRECONDITION, as gRPC files rmdir of a non-empty
# directory): the path the user gave is wrong for the verb, so they are bad input (exit 2), as
# "no such file" and "file exists" are. The NameNode's messages start so (namenode/namespace.py);
# this is the one place that reads them: the gateways translate the classes (their tables).
_WRONG_KIND = {"is a directory:": IsADirectory, "not a directory:": NotADirectory,
               "directory not empty:": DirectoryNotEmpty}


def from_namenode_error(err: grpc.RpcError, address: str, tls_refusal: str | None = None) -> HedgefsError:
    """Turn a NameNode RPC failure into the error the user should read. ``tls_refusal``: why TLS
    refused the connection, when it did (``security.tls.diagnose``)."""
    code = err.code()
    if tls_refusal and code.name == "UNAVAILABLE":
        return NotAllowed(tls_refusal)
    if code.name in ("UNAVAILABLE", "DEADLINE_EXCEEDED"):
        return Unavailable(f"cannot reach the NameNode at {address} ({code.name.lower()})")
    if code.name == "UNIMPLEMENTED":   # "Method not found!": some other server on that port
        return Unimplemented(f"{address} does not answer as a NameNode (a DataNode's port?): check "
                             f"HEDGEFS_NAMENODE or --namenode")
    return refusal(code, err.details() or code.name.lower())


def refusal(code: grpc.StatusCode, details: str) -> HedgefsError:
    """The error of a NameNode's refusal ``code`` with its one-line message: a call's, or one
    item's of a batched call (ItemResult)."""
    if code.name == "FAILED_PRECONDITION":
        for prefix, kind in _WRONG_KIND.items():
            if details.startswith(prefix):
                return kind(details)
    return _BY_CODE.get(code.name, HedgefsError)(details)
