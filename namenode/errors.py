"""Refusals the NameNode's metadata code raises; ``str(e)`` is the one-line message for the user.

This module never imports grpc: ``server.py`` maps each class to its status code.
"""


class NameNodeError(Exception):
    """A request the NameNode refuses."""


class NotFound(NameNodeError):
    """No such file, directory, write in progress or group."""


class AlreadyExists(NameNodeError):
    """The target path is taken."""


class InvalidArgument(NameNodeError):
    """The request itself is malformed: a bad path, an unknown policy, inconsistent lengths."""


class FailedPrecondition(NameNodeError):
    """The request is well formed but the current state refuses it.

    Not a directory, directory not empty, too few live DataNodes, too few stored units.
    """


class PermissionDenied(NameNodeError):
    """The caller may not: file permissions, a write that is someone else's."""
