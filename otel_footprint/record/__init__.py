"""The agent-side recorder: emits footprint events on the current span (or as log records).

``from otel_footprint import record as footprint`` then ``with footprint.run(tracer, ...) as run:``;
see :mod:`otel_footprint.record.recorder` for the whole API. With an instrumentation making the
model-call spans, state each pass on the run (``run.evaluated(...)``) and let
:mod:`otel_footprint.record.attach` land it on the instrumentation's span. ``run(...,
policy=True)`` is enforce mode with the live policy of :mod:`otel_footprint.record.policy`.
"""

from otel_footprint.kernel.types import MountedMap
from otel_footprint.record.attach import PassAttacher, install_attach
from otel_footprint.record.policy import Decision
from otel_footprint.record.recorder import (
    EmitAs,
    ModelCall,
    Run,
    ToolCall,
    current_run,
    emit,
    run,
)

__all__ = [
    "Decision",
    "EmitAs",
    "ModelCall",
    "MountedMap",
    "PassAttacher",
    "Run",
    "ToolCall",
    "current_run",
    "emit",
    "install_attach",
    "run",
]
