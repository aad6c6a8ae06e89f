"""Client settings: the read side (hedge threshold, circuit breaker, extra-read budget) and how
long a NameNode call keeps trying across the NameNodes of an HA cluster (FailoverConfig).

Each key can come from a CLI flag or a HEDGEFS_HEDGE_* environment variable; flags win, then the
environment, then the defaults below (the breaker's are HubSpot's production defaults).
"""

import dataclasses
import os
from typing import Mapping


@dataclasses.dataclass(frozen=True)
class HedgeConfig:
    enabled: bool = True
    # None = auto: the latency model's threshold per read size, reading around slow DataNodes
    # (client/latency.py). A number = a fixed threshold and nothing else: HubSpot's rule.
    threshold_ms: float | None = None
    max_impaired_nodes: int = 2  # one more distinct impaired DataNode in the window trips the breaker
    impaired_window_ms: float = 60_000.0
    cooldown_ms: float = 30_000.0  # hedging stays off this long after a trip
    max_per_second: int = 200  # hard cap on hedges started per second
    # auto: extra unit reads (hedges, a rebuild's extra sources, probes) earn at most this share of
    # the unit reads the reads themselves need (a token bucket with a small burst)
    budget_pct: float = 5.0
    read_extra: int = 0  # late binding: a whole-stripe read reads k + N units and uses the first k
    # auto: hedge a read under its threshold once later reads of its size to other DataNodes have
    # answered while it has not (it was overtaken; client/overtaking.py)
    overtaken: bool = True
    # auto: a DataNode this client has not read yet starts from the cluster's view of it (its own
    # read latencies, handed out with locations; client/cluster_view.py)
    cluster_view: bool = True

    @property
    def adaptive(self) -> bool:
        return self.threshold_ms is None

    @classmethod
    def from_sources(cls, flags: Mapping[str, object] | None = None, environ: Mapping[str, str] | None = None) -> "HedgeConfig":
        """Merge CLI flags (None = not given) over HEDGEFS_HEDGE_* variables over defaults."""
        environ = os.environ if environ is None else environ
        flags = flags or {}
        values: dict[str, object] = {}
        for field in dataclasses.fields(cls):
            env_name = "HEDGEFS_HEDGE_" + field.name.upper()
            if flags.get(field.name) is not None:
                raw = flags[field.name]
            elif env_name in environ:
                raw = environ[env_name]
            else:
                continue
            values[field.name] = _coerce(field.name, field.type, raw, env_name)
        config = cls(**values)
        config.validate()
        return config

    def validate(self) -> None:
        if self.threshold_ms is not None and self.threshold_ms <= 0:
            raise ValueError("hedge threshold must be > 0 ms (or auto)")
        if self.max_impaired_nodes < 0 or self.max_per_second < 0:
            raise ValueError("hedge limits must be >= 0")
        if self.impaired_window_ms < 0 or self.cooldown_ms < 0:
            raise ValueError("hedge windows must be >= 0 ms")
        if not 0 <= self.budget_pct <= 1000:
            raise ValueError("the extra-read budget must be 0..1000 %")
        if self.read_extra < 0:
            raise ValueError("--read-extra must be >= 0")


def _coerce(name: str, type_name: object, raw: object, env_name: str) -> object:
    if not isinstance(raw, str):
        return raw
    text = raw.strip().lower()
    try:
        if name == "threshold_ms":
            return None if text == "auto" else float(text)
        if type_name in (bool, "bool"):
            if text in ("1", "true", "yes", "on"):
                return True
            if text in ("0", "false", "no", "off"):
                return False
            raise ValueError
        if type_name in (int, "int"):
            return int(text)
        return float(text)
    except ValueError:
        raise ValueError(f"bad value {raw!r} for {env_name}") from None


def parse_threshold(text: str) -> float | None:
    """``auto`` or a positive number of milliseconds (the CLI's --hedge-threshold-ms)."""
    return _coerce("threshold_ms", None, text, "--hedge-threshold-ms")


@dataclasses.dataclass(frozen=True)
class FailoverConfig:
    """How long a NameNode call keeps trying (client/namenodes.py): the deadline of one call
    across the NameNodes of an HA cluster (longer than a failover: a lease of 5 s runs out, a
    standby takes over), after which no try starts (a try started has its 10 s,
    NAMENODE_TIMEOUT_S), and the pause between tries, doubling from the first to the cap.
    ``HEDGEFS_FAILOVER_DEADLINE_S`` sets the deadline."""

    deadline_s: float = 15.0
    backoff_start_s: float = 0.05
    backoff_max_s: float = 1.0

    @classmethod
    def from_environ(cls, environ: Mapping[str, str] | None = None) -> "FailoverConfig":
        environ = os.environ if environ is None else environ
        raw = environ.get("HEDGEFS_FAILOVER_DEADLINE_S")
        if raw is None or not raw.strip():
            return cls()
        try:
            deadline = float(raw)
        except ValueError:
            deadline = -1.0
        if not deadline > 0:
            raise ValueError(f"bad value {raw!r} for HEDGEFS_FAILOVER_DEADLINE_S: expected seconds > 0")
        return cls(deadline_s=deadline)


DEFAULT_NAMENODE = "127.0.0.1:8020"


def namenode_address(explicit: str | None = None) -> str:
    """The cluster's NameNode address, or comma-separated addresses (HA: ``nn1:8020,nn2:8020``):
    ``explicit``, else $HEDGEFS_NAMENODE, else 127.0.0.1:8020, as given (``FileSystem`` checks it:
    namenodes.parse_addresses)."""
    return explicit or os.environ.get("HEDGEFS_NAMENODE") or DEFAULT_NAMENODE
