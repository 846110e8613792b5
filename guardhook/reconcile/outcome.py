"""What one reconciler round wrote, shared by the readiness and leader-service reconcilers."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field


@dataclass
class RoundOutcome:
    """What one round wrote, one line per object ("namespace/name", or "Kind namespace/name"):
    patched, replaced meanwhile (409/422 conflicts), gone (404), and error messages."""

    patched: list[str] = field(default_factory=list)
    conflicts: list[str] = field(default_factory=list)
    gone: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, list[str]]:
        """The outcome as a `--once` round prints it: each field, in declaration order."""
        return asdict(self)
