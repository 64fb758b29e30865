"""A requantization as the hardware computes it, in words and constants: what an op's
``requantization`` facet tells a reader (``tessera report``), beside ``form``.

The constants are listed per channel, the first :data:`LISTED_CHANNELS` of them; ``exactness``
says why the form equals the exact definition (proven at compile time, or exact by
construction)."""

from __future__ import annotations

from dataclasses import dataclass

#: Channels whose constants a :class:`Requantization` lists (the rest are counted).
LISTED_CHANNELS = 8
#: Thresholds listed per channel (the rest are counted).
LISTED_THRESHOLDS = 6


@dataclass(frozen=True)
class Requantization:
    """One requantizing node: its form (``multiply-shift``, ``thresholds``, ``shift``), the
    formula it evaluates, its channels, each listed channel's constants in words, and why it
    is exact."""

    form: str
    formula: str
    channels: int
    constants: tuple[str, ...]
    exactness: str

    @property
    def unlisted_channels(self) -> int:
        """Channels whose constants are not listed."""
        return max(0, self.channels - len(self.constants))


def listed_thresholds(values) -> str:
    """A channel's thresholds, the first :data:`LISTED_THRESHOLDS` and a count of the rest."""
    values = [int(v) for v in values]
    head = ", ".join(str(v) for v in values[:LISTED_THRESHOLDS])
    more = len(values) - LISTED_THRESHOLDS
    return f"[{head}{f', ... {more} more' if more > 0 else ''}]"


__all__ = ["LISTED_CHANNELS", "LISTED_THRESHOLDS", "Requantization", "listed_thresholds"]
