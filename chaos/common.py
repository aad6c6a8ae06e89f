"""What the chaos modules share: the record of a file whose put returned, and an error in one line."""

from __future__ import annotations

import dataclasses

import grpc


@dataclasses.dataclass(frozen=True)
class StoredFile:
    path: str
    data: bytes
    sha256: str
    step: int                             # the step during which its put returned


def short(err: BaseException) -> str:
    if isinstance(err, grpc.RpcError):
        return f"{err.code().name}: {err.details()}"
    return str(err) or type(err).__name__
