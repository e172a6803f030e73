"""One run's decision: passes -> kernel -> account -> verdict. Both delivery paths (the in-process
processor and the hop) and ``explain`` call :func:`decide_run`; what it returns is frozen data
(:mod:`otel_footprint.engine.verdict`) that ``annotate`` writes onto the spans."""

from otel_footprint.engine.decide import EngineOptions, decide_run
from otel_footprint.engine.verdict import Mode, PassVerdict, RunVerdict

__all__ = ["EngineOptions", "Mode", "PassVerdict", "RunVerdict", "decide_run"]
