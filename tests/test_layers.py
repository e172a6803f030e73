"""The package layers, from the base up: a module imports only its own package and the layers below.

The order is the architecture (docs/design.md): names and the event codec at the base, then the
kernel, reconstruction, the account, the engine, annotation, the agent-side recorder, the two
delivery paths, the importers, and the commands on top. A loop or an upward import fails here.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import otel_footprint

PACKAGE = Path(otel_footprint.__file__).parent

LAYERS: tuple[tuple[str, ...], ...] = (
    ("__init__", "semconv"),
    ("codec",),
    ("kernel",),
    ("runs",),
    ("account",),
    ("engine",),
    ("annotate",),
    ("record",),
    ("integrations",),
    ("sdk",),
    ("service",),
    ("bridges",),
    ("commands",),
)
RANK = {name: rank for rank, names in enumerate(LAYERS) for name in names}


def _unit(module: Path) -> str:
    """The layer unit a file belongs to: its top-level package, or the top-level module's name."""
    parts = module.relative_to(PACKAGE).with_suffix("").parts
    return parts[0]


def _imported_units(module: Path) -> set[str]:
    units: set[str] = set()
    for node in ast.walk(ast.parse(module.read_text(encoding="utf-8"))):
        names: list[str] = []
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module]
            if node.module == "otel_footprint":
                names = [f"otel_footprint.{alias.name}" for alias in node.names]
        elif isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        for name in names:
            parts = name.split(".")
            if parts[0] == "otel_footprint" and len(parts) > 1:
                units.add(parts[1])
    return units


MODULES = sorted(p for p in PACKAGE.rglob("*.py") if "proto_gen" not in p.parts)


def test_every_unit_has_a_layer() -> None:
    assert {_unit(p) for p in MODULES} <= set(RANK), "a new package needs a place in LAYERS"


@pytest.mark.parametrize("module", MODULES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_imports_go_down(module: Path) -> None:
    own = _unit(module)
    upward = sorted(
        unit
        for unit in _imported_units(module)
        if unit != own and RANK.get(unit, -1) >= RANK[own] and unit != "__init__"
    )
    assert not upward, f"{module.relative_to(PACKAGE)} imports {upward}, at or above {own!r}"
