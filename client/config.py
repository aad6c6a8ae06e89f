"""Client read settings: the hedge threshold and the circuit breaker's keys.

Each key can come from a CLI flag or a HEDGEFS_HEDGE_* environment variable; flags win, then the
environment, then the defaults below (HubSpot's production defaults).
"""

import dataclasses
import os
from typing import Mapping


@dataclasses.dataclass(frozen=True)
class HedgeConfig:
    enabled: bool = True
    threshold_ms: float = 250.0  # a cell read slower than this is hedged
    max_impaired_nodes: int = 2  # one more distinct impaired DataNode in the window trips the breaker
    impaired_window_ms: float = 60_000.0
    cooldown_ms: float = 30_000.0  # hedging stays off this long after a trip
    max_per_second: int = 200  # hard cap on hedges started per second

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
        if self.threshold_ms <= 0:
            raise ValueError("hedge threshold must be > 0 ms")
        if self.max_impaired_nodes < 0 or self.max_per_second < 0:
            raise ValueError("hedge limits must be >= 0")
        if self.impaired_window_ms < 0 or self.cooldown_ms < 0:
            raise ValueError("hedge windows must be >= 0 ms")


def _coerce(name: str, type_name: object, raw: object, env_name: str) -> object:
    if isinstance(raw, str):
        text = raw.strip().lower()
        try:
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
    return raw
