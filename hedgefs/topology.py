"""Where a DataNode runs: its host and its rack, the words placement is made of.

A rack is a path of names, HDFS's network location: ``/dc1/r2`` (a rack r2 in data centre dc1),
``/r2`` or the default, ``/default-rack``. A host is one machine (or one network namespace of a
multi-host cluster on one machine, or one Kubernetes node): DataNodes on one host fail together,
DataNodes in one rack share a switch and a power feed and may all go at once. Placement puts a
block group's units on distinct hosts and at most m of them in a rack.

The DataNode parses its ``--rack`` and ``--host-id`` here and sends both in its registration; the
NameNode keeps them as a ``Location``. Pure: no I/O.
"""

from __future__ import annotations

import dataclasses
import re

DEFAULT_RACK = "/default-rack"
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,62}")
MAX_DEPTH = 4


def parse_rack(text: str) -> str:
    """``text`` as a rack path (``/dc1/r2``; a trailing slash dropped), or ValueError saying why."""
    if not text.startswith("/"):
        raise ValueError(f"bad rack {text!r}: a rack is a path such as /dc1/r2 (it starts with /)")
    names = text[1:].rstrip("/").split("/")
    if names == [""]:
        raise ValueError(f"bad rack {text!r}: a rack names at least one level, e.g. /r1")
    if len(names) > MAX_DEPTH:
        raise ValueError(f"bad rack {text!r}: at most {MAX_DEPTH} levels")
    for name in names:
        if not _NAME.fullmatch(name):
            raise ValueError(f"bad rack {text!r}: {name!r} is not a name (letters, digits, '.', '_', '-'; "
                             f"at most 63)")
    return "/" + "/".join(names)


def parse_host_id(text: str) -> str:
    """``text`` as a host id (a host name, an IP address, or any name of letters, digits, '.', ':',
    '_', '-'), or ValueError."""
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,252}", text):
        raise ValueError(f"bad host id {text!r}: letters, digits, '.', ':', '_', '-' (at most 253)")
    return text


def host_of(address: str) -> str:
    """The host of ``host:port`` (``[v6]:port`` too): a DataNode's host id when none is given."""
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit():
        return address
    return host[1:-1] if host.startswith("[") and host.endswith("]") else host


@dataclasses.dataclass(frozen=True)
class Location:
    """A DataNode's place: its host and its rack (a DataNode that said neither: its address's host,
    the default rack)."""

    host: str
    rack: str = DEFAULT_RACK

    @classmethod
    def of(cls, host_id: str, rack: str, address: str) -> "Location":
        """From a registration's fields ("" where a DataNode did not send one)."""
        return cls(host_id or host_of(address), rack or DEFAULT_RACK)

    @property
    def path(self) -> str:
        """HDFS's network path of the node: ``/dc1/r2/host7``."""
        return f"{self.rack}/{self.host}"
