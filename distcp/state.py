"""What a copy job knows about each file and each segment as it goes (job.py, listing.py, copier.py, commit.py)."""

from __future__ import annotations

import dataclasses

from hedgefs.distcp import plan
from hedgefs.distcp.sides import Entry, Location
from hedgefs.distcp.stream import SegmentStream


@dataclasses.dataclass
class Attempt:
    n: int
    started: float
    exclude: tuple[str, ...] = ()
    ended: float | None = None
    outcome: str = "running"        # running | won | lost | cancelled | failed
    part: str | None = None
    error: str = ""
    stream: SegmentStream | None = None
    overdue_at_start: dict = dataclasses.field(default_factory=dict)


@dataclasses.dataclass
class SegmentState:
    file: "FileJob"
    segment: plan.Segment
    attempts: list[Attempt] = dataclasses.field(default_factory=list)
    done: bool = False
    resumed: bool = False
    hedged: bool = False
    part: str | None = None          # the winner's part (cluster destination)
    crc: int = 0


@dataclasses.dataclass
class FileJob:
    src: Location
    source: Entry
    target: str
    overwrite: bool
    tkey: str
    skey: str
    policy: str | None = None
    block_size: int = 0
    states: list[SegmentState] = dataclasses.field(default_factory=list)
    reader: object = None
    local_fd: int | None = None
    left: int = 0
    failed: str = ""
