"""The compiled core (docs/performance.md, "A compiled core"): which build is loaded, and that it is
the build this test run means to test.

The mypyc build hook in ``pyproject.toml`` is the one list of compiled modules. In a pure install
none of them is an extension module; in the compiled wheel every one is, and
``otel_footprint.compiled`` says which. CI's compiled step sets ``OTEL_FOOTPRINT_EXPECT_COMPILED=1``
and runs the decision-path suites against the installed wheel: this file fails that step if the
source tree was imported instead. In a source checkout it also fails on extension modules left
beside the sources (a compiled build run in place), which would silently shadow every edit.
"""

from __future__ import annotations

import importlib
import os
import tomllib
from importlib.machinery import EXTENSION_SUFFIXES
from pathlib import Path
from typing import Any

import otel_footprint

ROOT = Path(__file__).resolve().parents[1]
LOADED = Path(otel_footprint.__file__).resolve().parent
"""The directory the package was imported from (the checkout, or site-packages)."""


def _hook() -> dict[str, Any]:
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    hook: dict[str, Any] = pyproject["tool"]["hatch"]["build"]["targets"]["wheel"]["hooks"]["mypyc"]
    return hook


def _matches(pattern: str, path: str) -> bool:
    """A gitignore-style pattern as the hook reads it: ``/a/b`` anchored at the project root (the
    file or everything below the folder), a bare name matching that name anywhere."""
    if pattern.startswith("/"):
        anchored = pattern.strip("/")
        return path == anchored or path.startswith(anchored + "/")
    return path.rsplit("/", 1)[-1] == pattern


def compiled_modules() -> list[str]:
    """The dotted names of the modules the hook compiles: its ``include`` minus its ``exclude``."""
    hook = _hook()
    names = []
    for source in sorted((ROOT / "otel_footprint").rglob("*.py")):
        path = source.relative_to(ROOT).as_posix()
        included = any(_matches(p, path) for p in hook["include"])
        if included and not any(_matches(p, path) for p in hook["exclude"]):
            names.append(path.removesuffix(".py").replace("/", "."))
    return names


def _is_extension(module: str) -> bool:
    return str(importlib.import_module(module).__file__).endswith(tuple(EXTENSION_SUFFIXES))


def test_the_hook_is_opt_in_and_compiles_the_decision_path() -> None:
    hook = _hook()
    assert hook["enable-by-default"] is False  # `pip install .` and `-e .` stay pure Python
    names = compiled_modules()
    for core in ("codec", "engine.decide", "runs.passes", "account.checks", "annotate.form"):
        assert f"otel_footprint.{core}" in names
    # The hop's per-span layer around the decision (docs/performance.md, "Issue 29: the compiled
    # set").
    for hop in ("runs.holding", "service.pipeline", "service.buffer", "service.annotation"):
        assert f"otel_footprint.{hop}" in names
    # I/O, locks and checks of untyped arguments stay pure Python (pyproject says why).
    for kept in ("runs.store", "service.journal", "kernel.plan", "account.account", "semconv"):
        assert f"otel_footprint.{kept}" not in names
    assert not [n for n in names if n.endswith("__init__")]


def test_the_flag_says_which_build_every_listed_module_is() -> None:
    names = compiled_modules()
    assert len(names) > 30
    builds = {name: _is_extension(name) for name in names}
    assert set(builds.values()) == {otel_footprint.compiled}, builds
    assert not _is_extension("otel_footprint.runs.store")  # never compiled


def test_the_build_this_run_means_to_test() -> None:
    expected = os.environ.get("OTEL_FOOTPRINT_EXPECT_COMPILED")
    if expected == "1":
        assert otel_footprint.compiled, "the compiled wheel is not what was imported"
        assert LOADED != ROOT / "otel_footprint", "imported the source tree, not the wheel"
    elif expected == "0":
        assert not otel_footprint.compiled
    if LOADED == ROOT / "otel_footprint":
        suffixes = tuple(EXTENSION_SUFFIXES)
        leftovers = sorted(
            p.relative_to(ROOT).as_posix()
            for p in [*LOADED.rglob("*"), *ROOT.glob("*__mypyc*")]
            if p.name.endswith(suffixes)
        )
        assert not leftovers, (
            "compiled modules beside the sources shadow the .py files (an edit would do nothing): "
            f"delete them, and build the compiled wheel from an sdist (README): {leftovers}"
        )
