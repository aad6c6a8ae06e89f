"""hedgefs's errors as the Python exceptions fsspec users catch, each with hedgefs's one-line message.

    NotFound                          FileNotFoundError
    AlreadyExists                     FileExistsError
    IsADirectory, "is a directory:"   IsADirectoryError
    "not a directory:"                NotADirectoryError
    "directory not empty:"            OSError(ENOTEMPTY)
    NotAllowed (credentials, modes)   PermissionError
    Unavailable (no NameNode)         ConnectionError
    any other HedgefsError            OSError (data unavailable, directory not empty, ...)

The library keeps the NameNode's FAILED_PRECONDITION as a plain HedgefsError, so "is a directory"
and "not a directory" are told apart by the message the NameNode wrote (namenode/namespace.py).
A bad argument (UsageError with no better match) is a ValueError, as for Python's own files.
"""

import contextlib
import errno

from hedgefs.client.errors import (
    AlreadyExists,
    HedgefsError,
    IsADirectory,
    NotAllowed,
    NotFound,
    Unavailable,
    UsageError,
)


def python_error(err: HedgefsError) -> Exception:
    """The Python exception for ``err``; ``str()`` of it is hedgefs's message, nothing added."""
    message = str(err)
    if isinstance(err, NotFound):
        return FileNotFoundError(message)
    if isinstance(err, AlreadyExists):
        return FileExistsError(message)
    if isinstance(err, IsADirectory) or message.startswith("is a directory"):
        return IsADirectoryError(message)
    if message.startswith("not a directory"):
        return NotADirectoryError(message)
    if message.startswith("directory not empty"):   # a usage error to the CLI (exit 2), ENOTEMPTY to Python
        error = OSError(message)
        error.errno = errno.ENOTEMPTY
        return error
    if isinstance(err, NotAllowed):
        return PermissionError(message)
    if isinstance(err, Unavailable):
        return ConnectionError(message)
    if isinstance(err, UsageError):
        return ValueError(message)
    return OSError(message)


@contextlib.contextmanager
def translated():
    """Run the block, raising any HedgefsError as its Python exception (the original chained)."""
    try:
        yield
    except HedgefsError as err:
        raise python_error(err) from err
