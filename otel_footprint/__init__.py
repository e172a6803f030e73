"""otel_footprint: explain AI-agent runs inside the OpenTelemetry tracing stack you already run."""

from importlib.machinery import EXTENSION_SUFFIXES, PathFinder

__version__ = "0.1.0"


def _compiled() -> bool:
    # The event codec is in every compiled build (pyproject: the mypyc hook's list); finding its
    # spec asks the import system which file it loads, without importing it.
    spec = PathFinder.find_spec("otel_footprint.codec", __path__)
    origin = spec.origin if spec is not None else None
    return origin is not None and origin.endswith(tuple(EXTENSION_SUFFIXES))


compiled: bool = _compiled()
"""True when the decision path runs compiled: the opt-in mypyc wheel (docs/performance.md, "A
compiled core"). False for ``pip install .`` and ``pip install -e .``: the same code, pure Python."""
