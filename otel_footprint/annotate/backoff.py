"""The one backoff policy of every background sender: the hop's forwarder and both Phoenix posters.

Exponential from ``initial`` to ``maximum``, then a multiplicative jitter of ``±jitter`` (many
hops must not retry in lockstep), then a server hint (gRPC RetryInfo, HTTP Retry-After) taken as a
floor, capped at :data:`HINT_CAP` so one answer cannot park a sender for long. It lives in
``annotate/`` because that is the lowest layer holding a sender: the in-process Phoenix exporter
(``annotate/phoenix.py``) uses it, and ``service/`` sits above. It is ours, not a library's, by
the numbers in docs/design.md ("One backoff policy").
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Final

HINT_CAP: Final = 60.0
"""A server's retry hint is honoured up to this many seconds."""
_MAX_EXPONENT: Final = 30
"""Doubling stops counting here: 2**30 × any sane initial interval is past every maximum."""


@dataclass(frozen=True, slots=True)
class Backoff:
    """How long to wait before retry number ``attempt`` (0 = the wait after the first failure).

    ``maximum`` may be ``math.inf`` (plain doubling); ``jitter`` is a fraction in [0, 1);
    ``max_attempts`` bounds the tries of a bounded sender (None: the caller stops it otherwise,
    e.g. by elapsed time).
    """

    initial: float
    maximum: float = math.inf
    jitter: float = 0.0
    max_attempts: int | None = None

    def __post_init__(self) -> None:
        if not (self.initial >= 0 and self.maximum >= self.initial and 0 <= self.jitter < 1):
            raise ValueError(
                "backoff needs initial >= 0, maximum >= initial and 0 <= jitter < 1, "
                f"got {self.initial}, {self.maximum}, {self.jitter}"
            )
        if self.max_attempts is not None and self.max_attempts < 1:
            raise ValueError(f"max_attempts must be >= 1, got {self.max_attempts}")

    def base(self, attempt: int) -> float:
        """The delay before jitter: ``initial × 2**attempt``, at most ``maximum`` (monotone)."""
        return min(self.maximum, self.initial * 2.0 ** min(max(attempt, 0), _MAX_EXPONENT))

    def delay(
        self,
        attempt: int,
        hint: float | None = None,
        uniform: Callable[[float, float], float] = random.uniform,
    ) -> float:
        """The wait before retry ``attempt``: jittered base, at least ``min(hint, HINT_CAP)``."""
        delay = self.base(attempt)
        if self.jitter:
            delay *= uniform(1.0 - self.jitter, 1.0 + self.jitter)
        if hint is not None:
            delay = max(delay, min(hint, HINT_CAP))
        return delay

    def delays(self) -> Iterator[float]:
        """The waits between the tries of a bounded sender: ``max_attempts - 1`` of them
        (endless when ``max_attempts`` is None)."""
        attempt = 0
        while self.max_attempts is None or attempt < self.max_attempts - 1:
            yield self.delay(attempt)
            attempt += 1


__all__ = ["HINT_CAP", "Backoff"]
