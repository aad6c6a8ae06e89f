"""hedgefs's errors as the Python exceptions fsspec users catch, each with hedgefs's one-line message:
one table (``EXCEPTIONS``) over the client's error classes (client/errors.py). A bad argument
(a UsageError with no better match) is a ValueError, as for Python's own files; anything else
(data unavailable, a failed write) is an OSError.
"""

import contextlib
import errno

from hedgefs.client import errors
from hedgefs.client.errors import HedgefsError


def _not_empty(message: str) -> OSError:
    error = OSError(message)   # a usage error to the CLI (exit 2), ENOTEMPTY to Python
    error.errno = errno.ENOTEMPTY
    return error


EXCEPTIONS = {
    errors.NotFound: FileNotFoundError,
    errors.AlreadyExists: FileExistsError,
    errors.IsADirectory: IsADirectoryError,
    errors.NotADirectory: NotADirectoryError,
    errors.DirectoryNotEmpty: _not_empty,
    errors.NotAllowed: PermissionError,
    errors.Unavailable: ConnectionError,
    errors.UsageError: ValueError,
}


def python_error(err: HedgefsError) -> Exception:
    """The Python exception for ``err``; ``str()`` of it is hedgefs's message, nothing added."""
    return errors.translate(err, EXCEPTIONS, OSError)(str(err))


@contextlib.contextmanager
def translated():
    """Run the block, raising any HedgefsError as its Python exception (the original chained)."""
    try:
        yield
    except HedgefsError as err:
        raise python_error(err) from err
