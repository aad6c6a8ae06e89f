"""The DataNode's fault knobs: what they are set to, and what they do to reads (``FaultyStore``).

Knobs (all act on reads only; writes are never slowed):

    read_delay_ms, probability, jitter_ms   sleep before the first byte (probability of applying)
    stall                                   hold reads, answer nothing, until the stall is cleared
    error_probability                       fail a read with UNAVAILABLE
    corrupt_probability                     a bad disk: one byte of a read comes off the disk flipped
    wire_corrupt_probability                a bad link: one byte flipped after the DataNode's storage
    bandwidth_bps                           pace the node's read bytes (0 = no cap)

Both corruptions reach the reader with the stored CRC32C values beside the bytes; the reader's
end-to-end check is what catches them (the DataNode ``sendfile``s and never reads what it serves).
The two differ in what they model, and in their counters.

``FaultyStore`` wraps the real block store, the way MinIO wraps a disk in a "naughty disk": the
data server asks it for a range to send and never looks at a knob.

Every wait here is on an Event that the read's cancellation sets (the client closing its
connection), so a client that gives up on a read (a hedge loser) frees the server at once.
"""

from __future__ import annotations

import os
import random
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass

from hedgefs.datanode.storage import BlockStore, OpenUnit, RangeError

_U32 = 2**32 - 1


@dataclass
class FaultConfig:
    read_delay_ms: int = 0
    probability: float = 1.0
    jitter_ms: int = 0
    stall: bool = False
    error_probability: float = 0.0
    corrupt_probability: float = 0.0
    bandwidth_bps: int = 0
    wire_corrupt_probability: float = 0.0


FIELDS = tuple(FaultConfig.__dataclass_fields__)


# ---------------------------------------------------------------- parsing (--fault KEY=VALUE, env)

def _uint(limit):
    def parse(text: str) -> int:
        v = int(text.strip())
        if not 0 <= v <= limit:
            raise ValueError(f"must be between 0 and {limit}")
        return v
    return parse


def _prob(text: str) -> float:
    v = float(text.strip())
    if not 0.0 <= v <= 1.0:
        raise ValueError("must be between 0 and 1")
    return v


def _bool(text: str) -> bool:
    t = text.strip().lower()
    if t in ("1", "true", "yes", "on"):
        return True
    if t in ("0", "false", "no", "off", ""):
        return False
    raise ValueError("must be true or false")


_UNITS = {"": 1, "k": 1024, "m": 1024**2, "g": 1024**3}


def parse_bandwidth(text: str) -> int:
    """Bytes per second: 1048576, or with a binary suffix: 512k, 10M, 1GiB, 10MB/s."""
    t = text.strip().lower().removesuffix("/s").removesuffix("b").removesuffix("i")
    unit = t[-1:] if t[-1:] in _UNITS and t[-1:] else ""
    number = t[: len(t) - len(unit)]
    try:
        v = float(number) * _UNITS[unit]
    except ValueError:
        raise ValueError("must be a non-negative number of bytes per second") from None
    if v < 0 or v != v or v > 2**63:
        raise ValueError("must be a non-negative number of bytes per second")
    return int(v)


# spec key -> (config field, parser, environment variable)
SPEC_KEYS = {
    "read-delay-ms": ("read_delay_ms", _uint(_U32), "HEDGEFS_FAULT_READ_DELAY_MS"),
    "probability": ("probability", _prob, "HEDGEFS_FAULT_PROBABILITY"),
    "jitter-ms": ("jitter_ms", _uint(_U32), "HEDGEFS_FAULT_JITTER_MS"),
    "stall": ("stall", _bool, "HEDGEFS_FAULT_STALL"),
    "error-probability": ("error_probability", _prob, "HEDGEFS_FAULT_ERROR_PROBABILITY"),
    "corrupt-probability": ("corrupt_probability", _prob, "HEDGEFS_FAULT_CORRUPT_PROBABILITY"),
    "bandwidth": ("bandwidth_bps", parse_bandwidth, "HEDGEFS_FAULT_BANDWIDTH"),
    "wire-corrupt-probability": ("wire_corrupt_probability", _prob, "HEDGEFS_FAULT_WIRE_CORRUPT_PROBABILITY"),
}


def parse_fault_specs(specs: Iterable[str] = (), environ: Mapping[str, str] | None = None) -> dict:
    """Fault settings from ``HEDGEFS_FAULT_*`` variables, then ``KEY=VALUE`` specs (specs win).

    Returns only the fields that were given, by FaultConfig/FaultState field name, e.g.
    ``{"read_delay_ms": 2000, "probability": 0.5}``. A bad spec raises ValueError (one line).
    """
    environ = os.environ if environ is None else environ
    out: dict = {}
    for key, (field, parse, env) in SPEC_KEYS.items():
        if env in environ and environ[env].strip() != "":
            try:
                out[field] = parse(environ[env])
            except ValueError as e:
                raise ValueError(f"bad {env}={environ[env]!r}: {_reason(e)}") from None
    for spec in specs:
        key, sep, value = spec.partition("=")
        key = key.strip().lower().replace("_", "-")
        if not sep and key == "stall":
            value = "true"     # a bare "stall" means stall=true
        elif not sep:
            raise ValueError(f"bad fault spec {spec!r}: expected KEY=VALUE with KEY one of "
                             f"{', '.join(SPEC_KEYS)}")
        if key not in SPEC_KEYS:
            raise ValueError(f"unknown fault {key!r} in {spec!r}: "
                             f"use one of {', '.join(SPEC_KEYS)}")
        field, parse, _env = SPEC_KEYS[key]
        try:
            out[field] = parse(value)
        except ValueError as e:
            raise ValueError(f"bad fault spec {spec!r}: {key} {_reason(e)}") from None
    return out


def fault_env_present(environ: Mapping[str, str] | None = None) -> list[str]:
    environ = os.environ if environ is None else environ
    return [env for (_f, _p, env) in SPEC_KEYS.values() if environ.get(env, "").strip()]


def _reason(e: ValueError) -> str:
    msg = str(e)
    return msg if msg.startswith("must") else "is not a valid value"


# ---------------------------------------------------------------- run-time state

class ReadGuard:
    """One read as the fault knobs see it; ``cancel()`` is wired to the RPC's cancellation."""

    def __init__(self, faults: Faults):
        self._faults = faults
        self.cancelled = threading.Event()
        self.wake = threading.Event()     # set on cancel or on a stall release
        self._finished = False
        self._counted = False

    def cancel(self) -> None:
        """The client went away. Counted once per read, and only if the read had not finished."""
        with self._faults._lock:
            if self._finished:
                return
            if not self._counted:
                self._counted = True
                self._faults._cancelled_reads += 1
        self.cancelled.set()
        self.wake.set()

    def finish(self) -> None:
        """The read ended on its own (data sent or an error returned): not a cancellation."""
        with self._faults._lock:
            self._finished = True

    def wait(self, seconds: float) -> bool:
        """Sleep up to ``seconds``; True if the read was cancelled meanwhile."""
        if seconds > 0:
            return self.cancelled.wait(seconds)
        return self.cancelled.is_set()


class Faults:
    def __init__(self, datanode_id: str, enabled: bool, initial: Mapping | None = None,
                 *, rng: random.Random | None = None, clock=time.monotonic):
        self.datanode_id = datanode_id
        self.enabled = enabled
        self._lock = threading.Lock()
        self._cfg = FaultConfig()
        self._calls: dict[str, int] = {}
        self._cancelled_reads = 0
        self._held: set[ReadGuard] = set()
        self._rng = rng or random.Random()
        self._clock = clock
        self._bucket_t = 0.0           # token bucket as a virtual clock: when the next byte may go
        if initial:
            self.set(**initial)

    # -------------------------------------------------------- admin

    def set(self, **fields) -> None:
        """Change only the given fields."""
        unknown = set(fields) - set(FIELDS)
        if unknown:
            raise ValueError(f"unknown fault fields {sorted(unknown)}")
        with self._lock:
            for k, v in fields.items():
                setattr(self._cfg, k, v)
            release = not self._cfg.stall
        if release:
            self._release_stalled()

    def clear(self) -> None:
        with self._lock:
            self._cfg = FaultConfig()
        self._release_stalled()

    def config(self) -> FaultConfig:
        with self._lock:
            return FaultConfig(**asdict(self._cfg))

    def state(self) -> dict:
        """Everything GetFaults returns, by FaultState field name."""
        with self._lock:
            return dict(asdict(self._cfg), enabled=self.enabled, calls=dict(self._calls),
                        cancelled_reads=self._cancelled_reads, stalled_reads=len(self._held))

    def count(self, name: str, n: int = 1) -> None:
        with self._lock:
            self._calls[name] = self._calls.get(name, 0) + n

    # -------------------------------------------------------- the read path

    def guard(self) -> ReadGuard:
        return ReadGuard(self)

    def hold_if_stalled(self, guard: ReadGuard) -> bool:
        """Block while the stall knob is on. Returns True if the read was cancelled meanwhile."""
        with self._lock:
            if not self._cfg.stall or guard.cancelled.is_set():
                return guard.cancelled.is_set()
            self._held.add(guard)
            self._calls["fault:stall"] = self._calls.get("fault:stall", 0) + 1
        try:
            while True:
                guard.wake.wait()
                with self._lock:
                    guard.wake.clear()
                    if guard.cancelled.is_set():
                        return True
                    if not self._cfg.stall:
                        return False
        finally:
            with self._lock:
                self._held.discard(guard)

    def _release_stalled(self) -> None:
        with self._lock:
            held = list(self._held)
        for g in held:
            g.wake.set()

    def read_delay_s(self) -> float:
        """The delay to impose on this read (0 if none), drawing the probability and jitter."""
        with self._lock:
            c = self._cfg
            if c.read_delay_ms <= 0 or self._rng.random() >= c.probability:
                return 0.0
            jitter = self._rng.uniform(-c.jitter_ms, c.jitter_ms) if c.jitter_ms else 0.0
            ms = c.read_delay_ms + jitter
            self._calls["fault:delay"] = self._calls.get("fault:delay", 0) + 1
        return max(ms, 0.0) / 1000.0

    def _draw(self, p: float, counter: str) -> bool:
        with self._lock:
            hit = p > 0 and self._rng.random() < p
            if hit:
                self._calls[counter] = self._calls.get(counter, 0) + 1
            return hit

    def draw_error(self) -> bool:
        return self._draw(self._cfg.error_probability, "fault:error")

    def draw_corrupt(self) -> bool:
        return self._draw(self._cfg.corrupt_probability, "fault:corrupt")

    def draw_wire_corrupt(self) -> bool:
        return self._draw(self._cfg.wire_corrupt_probability, "fault:wire-corrupt")

    def may_wait(self) -> bool:
        """Could a read wait on a knob now (stall, delay, bandwidth)? Then the server watches
        its connection, so that a client hanging up cancels the wait."""
        with self._lock:
            c = self._cfg
            return self.enabled and (c.stall or c.read_delay_ms > 0 or c.bandwidth_bps > 0)

    def pace(self, guard: ReadGuard, nbytes: int) -> bool:
        """Wait until ``nbytes`` more may be sent under the bandwidth cap. True if cancelled."""
        with self._lock:
            bps = self._cfg.bandwidth_bps
            if bps <= 0:
                return guard.cancelled.is_set()
            now = self._clock()
            # Up to 50 ms of unused allowance may be spent at once (a small burst).
            t = max(self._bucket_t, now - 0.05) + nbytes / bps
            self._bucket_t = t
        if not guard.wait(t - now):
            return False
        with self._lock:   # cancelled: its bytes were never sent, and a link does not spend them
            self._bucket_t -= min(nbytes / bps, max(0.0, self._bucket_t - self._clock()))
        return True

    def corrupter(self):
        """A storage ``tamper`` hook that flips one byte in the first chunk read (once)."""
        done = False
        rng = self._rng

        def tamper(buf, _offset):
            nonlocal done
            if not done and len(buf):
                with self._lock:
                    i = rng.randrange(min(len(buf), 64 * 1024))
                    flip = rng.randrange(1, 256)
                buf[i] ^= flip
                done = True
        return tamper


# ---------------------------------------------------------------- the store as reads see it

class ReadCancelled(Exception):
    """The client went away while the read waited on a knob."""


class InjectedError(Exception):
    """The error knob failed this read."""


class FaultyStore:
    """A BlockStore whose reads obey the fault knobs; with faults disabled it only passes through."""

    def __init__(self, store: BlockStore, faults: Faults):
        self.store = store
        self.faults = faults

    def open_writer(self, group_id: int, index: int, expected_length: int | None, *, generation: int,
                    once: bool = False):
        # writes are never slowed
        return self.store.open_writer(group_id, index, expected_length, generation=generation, once=once)

    def append(self, group_id: int, index: int, offset: int, data, *, generation: int) -> int:
        # appends are never slowed either
        return self.store.append(group_id, index, offset, data, generation=generation)

    def chunk_checksums(self, group_id: int, index: int, *, generation: int) -> tuple[int, int, tuple[int, ...]]:
        """(unit length, chunk size, CRC32C per chunk) of the committed version, as stored: no data
        is read, and the read knobs do not apply (it is metadata)."""
        with self.store.open_unit(group_id, index, generation=generation) as unit:
            return unit.length, unit.chunk, unit.crcs

    def open_read(self, group_id: int, index: int, offset: int, length: int, guard: ReadGuard, *,
                  generation: int) -> ReadPlan:
        """The whole checksum chunks to send for [offset, offset+length) (see ``ReadPlan``), after
        the stall and the delay, with the error knob drawn and what to do to the bytes on the way.
        Raises ReadCancelled if the client leaves during a wait, InjectedError if the error knob
        fires, and the store's UnitNotFound / RangeError / ChecksumError (a damaged sidecar)."""
        faults = self.faults
        if not faults.enabled:
            return ReadPlan.of(self.store.open_unit(group_id, index, generation=generation), offset, length)
        if faults.hold_if_stalled(guard) or guard.wait(faults.read_delay_s()):
            raise ReadCancelled()
        if faults.draw_error():
            raise InjectedError(f"injected error on {faults.datanode_id}")
        unit = self.store.open_unit(group_id, index, generation=generation)
        tamper = faults.corrupter() if faults.draw_corrupt() or faults.draw_wire_corrupt() else None
        paced = faults.config().bandwidth_bps > 0
        return ReadPlan.of(unit, offset, length, tamper, (lambda n: faults.pace(guard, n)) if paced else None)


def _no_record(sent: int, outcome: str) -> None:
    pass


@dataclass
class ReadPlan:
    """What the data server sends: ``nbytes`` bytes of ``unit`` from ``start`` (the whole checksum
    chunks a range touches, so the reader can check every byte it uses) and their CRC32C values.

    ``tamper(buffer, unit_offset)`` flips bytes of a piece before it is sent; ``pace(nbytes)``
    waits under the bandwidth cap and returns True if the read was cancelled meanwhile. With
    neither, the server can ``sendfile`` the range in one go. ``done(bytes_sent, outcome)`` is
    called once when the read ends (metrics)."""

    unit: OpenUnit
    start: int
    nbytes: int
    crcs: tuple[int, ...]
    tamper: Callable[[memoryview, int], None] | None = None
    pace: Callable[[int], bool] | None = None
    done: Callable[[int, str], None] = _no_record

    @classmethod
    def of(cls, unit: OpenUnit, offset: int, length: int, tamper=None, pace=None) -> ReadPlan:
        if offset < 0 or length < 0 or offset + length > unit.length:
            unit.close()
            raise RangeError(f"range {offset}+{length} exceeds unit {unit.group_id}/{unit.index} "
                             f"of {unit.length} bytes")
        start, crcs = unit.chunks_for(offset, length)
        nbytes = min(unit.length, start + len(crcs) * unit.chunk) - start
        return cls(unit, start, nbytes if crcs else 0, crcs, tamper, pace)
