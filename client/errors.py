"""The errors a user can see, each with a one-line message and an exit code scripts can rely on.

Exit codes: 1 = operation failed (I/O, unreadable data, too few DataNodes, refused by the cluster),
2 = usage / bad input (bad path, not valid UTF-8, no such file, file exists, is / is not a
directory, directory not empty, unknown policy), 3 = NameNode unreachable, 4 = not allowed (no
or the wrong credential, an admin's call, file permissions, TLS refused).
"""

import grpc


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


class Unavailable(HedgefsError):
    exit_code = 3


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


_BY_CODE = {
    grpc.StatusCode.NOT_FOUND: NotFound,
    grpc.StatusCode.ALREADY_EXISTS: AlreadyExists,
    grpc.StatusCode.INVALID_ARGUMENT: UsageError,
    grpc.StatusCode.OUT_OF_RANGE: UsageError,
    grpc.StatusCode.FAILED_PRECONDITION: HedgefsError,
    grpc.StatusCode.PERMISSION_DENIED: NotAllowed,
    grpc.StatusCode.UNAUTHENTICATED: NotAllowed,
}


# Refusals of a path for what it names (FAILED_PRECONDITION, as gRPC files rmdir of a non-empty
# directory): the path the user gave is wrong for the verb, so they are bad input (exit 2), as
# "no such file" and "file exists" are. The NameNode's messages start so (namenode/namespace.py).
_WRONG_KIND = ("is a directory:", "not a directory:", "directory not empty:")


def from_namenode_error(err: grpc.RpcError, address: str, tls_refusal: str | None = None) -> HedgefsError:
    """Turn a NameNode RPC failure into the error the user should read. ``tls_refusal``: why TLS
    refused the connection, when it did (``security.tls.diagnose``)."""
    code = err.code()
    if tls_refusal and code == grpc.StatusCode.UNAVAILABLE:
        return NotAllowed(tls_refusal)
    if code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
        return Unavailable(f"cannot reach the NameNode at {address} ({code.name.lower()})")
    if code == grpc.StatusCode.UNIMPLEMENTED:   # "Method not found!": some other server on that port
        return UsageError(f"{address} does not answer as a NameNode (a DataNode's port?): check HEDGEFS_NAMENODE "
                          f"or --namenode")
    details = err.details() or code.name.lower()
    if code == grpc.StatusCode.FAILED_PRECONDITION and details.startswith(_WRONG_KIND):
        return (IsADirectory if details.startswith("is a directory:") else UsageError)(details)
    cls = _BY_CODE.get(code, HedgefsError)
    return cls(details)
