"""Where units go: k+m distinct live DataNodes, least loaded first, random among equals."""

from __future__ import annotations

import random
from typing import Callable, Hashable, Iterable


def choose(candidates: Iterable[str], n: int, load: Callable[[str], Hashable], rng: random.Random) -> list[str]:
    """The ``n`` least loaded of ``candidates`` (fewer if there are not enough), ties at random."""
    keyed = [(load(c), rng.random(), c) for c in sorted(set(candidates))]
    keyed.sort()
    return [c for _, _, c in keyed[:n]]
