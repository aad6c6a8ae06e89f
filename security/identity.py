"""Who is who in a secure cluster, without the cryptography: roles, names, credentials as data.

The certificates and keys behind these live in material.py; this module is imported by every
client (a plain ``hedgefs cat`` included), so it stays light: no ``cryptography`` here.
"""

from __future__ import annotations

import dataclasses
import datetime
import re

NAMENODE, DATANODE, ADMIN, USER = "namenode", "datanode", "admin", "user"
ROLES = (NAMENODE, DATANODE, ADMIN, USER)

NAMENODE_NAME = "namenode.hedgefs"          # the DNS SAN of the NameNode's certificate
SUPERUSER = "hedgefs"                       # the admin `cluster up --secure` makes; everyone, when insecure
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
_DATANODE_ID = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?$")   # one DNS label


class CredentialError(Exception):
    """A credential file that cannot be used; ``str()`` is one line saying why."""


class Refused(Exception):
    """A server refuses to serve with what it was given (another cluster's NameNode or data dir,
    a credential of someone else); ``str()`` is one line. The CLI exits 4 (not allowed)."""


@dataclasses.dataclass(frozen=True)
class Identity:
    """Who a caller is, as its certificate says."""

    name: str
    role: str
    groups: tuple[str, ...] = ()

    @property
    def is_admin(self) -> bool:
        return self.role == ADMIN

    def __str__(self) -> str:
        return f"{self.role} {self.name}"


def check_name(name: str, role: str) -> str:
    """A name a certificate may carry (user, group, DataNode id); ValueError saying why not."""
    if role == DATANODE:
        if not _DATANODE_ID.match(name or ""):
            raise ValueError(f"bad DataNode id {name!r}: letters, digits and '-' (a DNS label) in secure mode")
    elif not _NAME.match(name or ""):
        raise ValueError(f"bad {role} name {name!r}: 1-64 of letters, digits, '.', '_', '-', "
                         f"starting with a letter or digit")
    return name


def server_name(role: str, name: str) -> str:
    """The DNS name a server's certificate carries and its clients check."""
    return NAMENODE_NAME if role == NAMENODE else f"{name}.datanode.hedgefs"


@dataclasses.dataclass(frozen=True)
class Credential:
    """A loaded credential file (material.load_credential reads and checks one)."""

    path: str
    key_pem: bytes            # this process's private key
    cert_pem: bytes           # its certificate
    ca_pem: bytes             # the cluster CA's certificate
    identity: Identity
    cluster_id: str
    not_after: datetime.datetime
    cluster_key: bytes | None = None   # servers: signs and checks block tokens
    ca_key_pem: bytes | None = None    # the NameNode: issues credentials

    @property
    def server_name(self) -> str:
        return server_name(self.identity.role, self.identity.name)
