"""S3 access keys: a directory of small files, one per key, that `hedgefs admin s3-key` writes.

    KEYS_DIR/<ACCESS_KEY>.json   {"access_key", "secret_key", "user", "credential"}  mode 0600
    KEYS_DIR/<ACCESS_KEY>.pem    the user's hedgefs credential (a secure cluster only)

A key maps to a hedgefs user: in a secure cluster the gateway acts for the user with the user's
own credential, so the NameNode's permissions decide (a key of alice's cannot read bob's 700
directory); in an insecure cluster everyone is the superuser anyway. Gateways share the
directory read-only (a volume) and keep nothing else, so any number can run side by side; a key
added later is found the first time it is used.
"""

from __future__ import annotations

import dataclasses
import json
import os
import pathlib
import re
import secrets
import string
import threading

_ACCESS = re.compile(r"^[A-Z0-9]{16,128}$")


@dataclasses.dataclass(frozen=True)
class AccessKey:
    access_key: str
    secret_key: str
    user: str
    credential: str | None      # path of the user's credential file, None in an insecure cluster


def new_access_key() -> str:
    return "HF" + "".join(secrets.choice(string.ascii_uppercase + string.digits) for _ in range(18))


def new_secret_key() -> str:
    return secrets.token_urlsafe(30)[:40]


def write_key(directory: str, user: str, credential_pem: bytes | None) -> AccessKey:
    """A new key for ``user`` in ``directory`` (made, mode 0700, if missing)."""
    folder = pathlib.Path(directory)
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    access = new_access_key()
    credential = None
    if credential_pem is not None:
        credential = f"{access}.pem"
        _write_private(folder / credential, credential_pem)
    key = AccessKey(access, new_secret_key(), user, credential)
    _write_private(folder / f"{access}.json", json.dumps(dataclasses.asdict(key), indent=1).encode())
    return dataclasses.replace(key, credential=str(folder / credential) if credential else None)


def _write_private(path: pathlib.Path, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data)


class KeyStore:
    """The keys of a directory, read when first asked for (None: no directory, no keys)."""

    def __init__(self, directory: str | None):
        self.directory = pathlib.Path(directory) if directory else None
        self._keys: dict[str, AccessKey] = {}
        self._lock = threading.Lock()

    def get(self, access_key: str) -> AccessKey | None:
        with self._lock:
            if access_key in self._keys:
                return self._keys[access_key]
        if self.directory is None or not _ACCESS.match(access_key or ""):
            return None
        try:
            record = json.loads((self.directory / f"{access_key}.json").read_text())
            credential = record.get("credential")
            key = AccessKey(record["access_key"], record["secret_key"], record["user"],
                            str(self.directory / credential) if credential else None)
        except (OSError, ValueError, KeyError, TypeError):
            return None
        if key.access_key != access_key:
            return None
        with self._lock:
            self._keys[access_key] = key
        return key

    def secret_of(self, access_key: str) -> str | None:
        key = self.get(access_key)
        return key.secret_key if key else None
