"""The landing exporter's options, validated where they are built."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields

from clientmetrics.errors import ConfigurationError


@dataclass(frozen=True, slots=True)
class LandingOptions:
    """How the landing exporter writes, rolls and commits."""

    #: Roll the open segment once its records reach this many bytes.
    roll_bytes: int = 64 * 1024 * 1024
    #: Roll the open segment once it is this old, so readers see data soon.
    roll_seconds: float = 5.0
    #: The longest a push waits for more pushes to share its fsync.
    commit_interval_ms: float = 2.0
    #: Pushes that may wait for their fsync at once; more wait in ``export``.
    max_pending: int = 8192

    def __post_init__(self) -> None:
        if self.roll_bytes <= 0:
            raise ConfigurationError(f"landing.roll_bytes must be positive, not {self.roll_bytes}")
        if self.roll_seconds <= 0:
            raise ConfigurationError(
                f"landing.roll_seconds must be positive, not {self.roll_seconds}"
            )
        if self.commit_interval_ms < 0:
            raise ConfigurationError(
                f"landing.commit_interval_ms must not be negative, not {self.commit_interval_ms}"
            )
        if self.max_pending <= 0:
            raise ConfigurationError(
                f"landing.max_pending must be positive, not {self.max_pending}"
            )

    @classmethod
    def from_mapping(cls, options: Mapping[str, object]) -> LandingOptions:
        """Build from plugin options (TOML values or strings); reject unknown keys."""
        known = {f.name: f for f in fields(cls)}
        values: dict[str, int | float] = {}
        for key, raw in options.items():
            if key not in known:
                raise ConfigurationError(
                    f"unknown landing exporter option {key!r}; known: {', '.join(sorted(known))}"
                )
            values[key] = _number(key, raw, integer=known[key].type in (int, "int"))
        return cls(**values)  # type: ignore[arg-type]


def _number(key: str, raw: object, *, integer: bool) -> int | float:
    if isinstance(raw, bool) or not isinstance(raw, int | float | str):
        raise ConfigurationError(f"landing.{key} must be a number, not {raw!r}")
    try:
        value = int(raw) if integer and not isinstance(raw, float) else float(raw)
    except ValueError:
        raise ConfigurationError(f"landing.{key} must be a number, not {raw!r}") from None
    if integer and (not float(value).is_integer()):
        raise ConfigurationError(f"landing.{key} must be a whole number, not {raw!r}")
    return int(value) if integer else value
