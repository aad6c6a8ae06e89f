"""Cluster paths as users type them, turned into the NameNode's one spelling before anything is sent.

- ``hedgefs://HOST[:PORT]/path`` names the cluster too (port 8020 if none, as HDFS); the command
  then talks to that NameNode. Two different clusters in one command (but distcp) are refused.
- Trailing and doubled slashes are normalised (``/data/`` and ``//data`` are ``/data``), as HDFS
  and a shell do; ``.`` and ``..`` are still refused by the NameNode (a path is a key).
- A path that is not valid UTF-8 (a name from a Latin-1 disk, say) is refused with one line and
  exit 2: the NameNode stores names as UTF-8 text.
"""

from __future__ import annotations

import re

from hedgefs.client.errors import UsageError

SCHEME = "hedgefs://"
DEFAULT_PORT = 8020

# The NameNode a hedgefs:// path of this command named (None: none did).
url_namenode: str | None = None


def check_utf8(text: str, what: str = "path") -> str:
    """``text`` (from argv or a local directory listing: undecodable bytes are surrogates) if it
    is valid UTF-8; else UsageError naming it with the bad bytes shown."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        from hedgefs.cli.humanize import visible

        raise UsageError(f"invalid {what} {visible(text)}: not valid UTF-8") from None
    return text


MAX_PATH_BYTES = 8000   # as HDFS's max path length; a longer one would not fit an error's gRPC header
MAX_COMPONENT = 255


def check_address(address: str) -> str:
    """HOST:PORT, or a comma-separated list of them (the NameNodes of an HA cluster), in one
    spelling (whitespace around entries dropped: a port file's newline); else UsageError naming
    what was given (and where it came from): an empty entry, a bad port."""
    from hedgefs.client.namenodes import parse_addresses

    return ",".join(parse_addresses(address))


def split_url(text: str) -> tuple[str | None, str]:
    """(NameNode address or None, path) of ``hedgefs://HOST[:PORT]/path`` or a bare path."""
    if not text.startswith(SCHEME):
        return None, text
    authority, slash, path = text[len(SCHEME):].partition("/")
    if not authority:
        return None, "/" + path
    host, colon, port = authority.rpartition(":")
    if not colon or "]" in port:     # no port (an IPv6 [::1] has colons inside its brackets)
        host, port = authority, str(DEFAULT_PORT)
    if not host or not port.isdigit():
        raise UsageError(f"bad hedgefs address in {text!r}: expected hedgefs://HOST[:PORT]/path")
    return f"{host}:{port}", "/" + path


def normalise(path: str) -> str:
    """Collapse doubled slashes and drop trailing ones; the NameNode checks the rest."""
    if not path.startswith("/"):
        return path
    return re.sub("/+", "/", path).rstrip("/") or "/"


def remote_path(text: str) -> str:
    """The path to send for a cluster path as typed (see the module docstring)."""
    global url_namenode
    check_utf8(text)
    namenode, path = split_url(text)
    if namenode is not None:
        if url_namenode is not None and url_namenode != namenode:
            raise UsageError(f"two clusters in one command ({url_namenode} and {namenode}): use distcp to copy between them")
        url_namenode = namenode
    path = normalise(path)
    if len(path.encode()) > MAX_PATH_BYTES:
        raise UsageError(f"invalid path {path[:40]!r}...: longer than {MAX_PATH_BYTES} bytes")
    for part in path.split("/"):
        if len(part.encode()) > MAX_COMPONENT:
            raise UsageError(f"invalid path {path[:40]!r}...: a component is longer than {MAX_COMPONENT} bytes")
    return path
