"""Path rules: absolute, already normalised, checked once at the edge.

A valid path is "/" or "/" followed by components joined with single slashes. We refuse what
other systems silently normalise ("a/b", "/a//b", "/a/./b", "/a/", "/a/../b"): a path is a key,
and two spellings of one key are a bug waiting to happen.
"""

from __future__ import annotations

from hedgefs.namenode.errors import InvalidArgument

ROOT = "/"
MAX_COMPONENT = 255


def _refuse(path: object, why: str) -> InvalidArgument:
    return InvalidArgument(f"invalid path {path!r}: {why}")


def components(path: str) -> list[str]:
    """Validate ``path`` and return its components ("/" has none)."""
    if not isinstance(path, str) or not path:
        raise _refuse(path, "must be absolute (start with '/')")
    if not path.startswith("/"):
        raise _refuse(path, "must be absolute (start with '/')")
    if "\x00" in path:
        raise _refuse(path, "contains a NUL byte")
    if path == ROOT:
        return []
    if path.endswith("/"):
        raise _refuse(path, "must not end with '/'")
    parts = path[1:].split("/")
    for part in parts:
        if not part:
            raise _refuse(path, "empty component ('//')")
        if part in (".", ".."):
            raise _refuse(path, "'.' and '..' are not allowed; use a normalised absolute path")
        if len(part) > MAX_COMPONENT // 4 and len(part.encode("utf-8", "surrogatepass")) > MAX_COMPONENT:
            raise _refuse(path, f"a component is longer than {MAX_COMPONENT} bytes")
    return parts


def check(path: str) -> str:
    """Validate ``path`` and return it unchanged."""
    components(path)
    return path


def join(parent: str, name: str) -> str:
    return parent + name if parent == ROOT else f"{parent}/{name}"


def parent_of(path: str) -> str:
    """The parent of a valid non-root path."""
    head = path.rsplit("/", 1)[0]
    return head or ROOT


def is_under(path: str, ancestor: str) -> bool:
    """True if ``path`` is ``ancestor`` or lies below it."""
    return path == ancestor or ancestor == ROOT or path.startswith(ancestor + "/")
