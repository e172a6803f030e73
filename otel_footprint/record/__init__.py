"""The agent-side recorder: emits footprint events on the current span (or as log records).

``from otel_footprint import record as footprint`` then ``with footprint.run(tracer, ...) as run:``;
see :mod:`otel_footprint.record.recorder` for the whole API.
"""

from otel_footprint.kernel.types import MountedMap
from otel_footprint.record.recorder import EmitAs, ModelCall, Run, ToolCall, emit, run

__all__ = ["EmitAs", "ModelCall", "MountedMap", "Run", "ToolCall", "emit", "run"]
