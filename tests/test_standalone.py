"""The repository stands alone: nothing the suite, the benchmarks or the scripts run reads outside
the checkout (issue 23, part 1).

Two cheap guards. The first reads the sources: no path climbs out of the checkout (``../shared``,
``/work/...``, ``Path(__file__).parents[k]`` past the repository's root). The second runs the
suite's collection (every test module imported, every parametrization over the reference data
walked) in a child interpreter with an audit hook that notes every file opened and every directory
listed, and fails on one outside the checkout, the interpreter's own installation and the temporary
directory. ``.ci/run`` proves the rest from a clone with nothing beside it.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

_SCANNED = ("tests", "benchmarks", "scripts", "examples", ".ci")
_SKIPPED_DIRS = {"node_modules", "__pycache__", ".venv", "dist", "compiled-venv", "compiled-dist"}
"""Folders of installed or generated files; ``tests/data`` holds the reference data itself."""
_SUFFIXES = {".py", ".sh", ".mjs", ".js", ".ts", ".toml", ".cfg", ".yaml", ".yml", ""}

_OUTSIDE = re.compile(
    r"\.\./+(shared|holdout)\b"  # a sibling of the checkout
    r"|parent\s*/\s*[\"'](shared|holdout)[\"']"  # Path(...).parent / "shared"
    r"|[\"']/work/\w"  # this machine's layout
)
_PARENTS = re.compile(r"__file__\)(?:\.resolve\(\))?\.parents\[(\d+)\]")
_PARENT_CHAIN = re.compile(r"__file__\)(?:\.resolve\(\))?((?:\.parent)+)")


def _sources() -> list[Path]:
    found: list[Path] = []
    for top in _SCANNED:
        for path in sorted((REPO / top).rglob("*")):
            rel = path.relative_to(REPO)
            if _SKIPPED_DIRS & set(rel.parts) or rel.parts[:2] == ("tests", "data"):
                continue
            if not path.is_file():
                continue
            if path.suffix in _SUFFIXES and path != Path(__file__).resolve():
                found.append(path)
    return found


def _climbs_out(path: Path, line: str) -> bool:
    """``Path(__file__).parents[k]`` (or ``.parent`` k+1 times) above the repository's root."""
    root_index = len(path.relative_to(REPO).parts) - 1  # parents[root_index] is the checkout
    for match in _PARENTS.finditer(line):
        if int(match.group(1)) > root_index:
            return True
    return any(
        match.group(1).count(".parent") - 1 > root_index for match in _PARENT_CHAIN.finditer(line)
    )


def test_no_source_names_a_path_outside_the_checkout() -> None:
    sources = _sources()
    assert len(sources) > 50, "the scan found too few files: the layout changed"
    offending = []
    for path in sources:
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        for number, line in enumerate(text.splitlines(), start=1):
            if _OUTSIDE.search(line) or _climbs_out(path, line):
                offending.append(f"{path.relative_to(REPO)}:{number}: {line.strip()}")
    assert not offending, "reads outside the checkout:\n" + "\n".join(offending)


def test_the_climb_check_sees_a_path_past_the_root() -> None:
    """The guard itself: ``tests/x.py`` reaching ``parents[2]`` (the checkout's parent) is caught."""
    here = REPO / "tests" / "x.py"
    assert _climbs_out(here, 'Path(__file__).resolve().parents[2] / "shared"')
    assert _climbs_out(here, "Path(__file__).parent.parent.parent")
    assert not _climbs_out(here, "Path(__file__).resolve().parents[1]")
    assert not _climbs_out(REPO / "tests" / "e2e" / "x.py", "Path(__file__).parents[2]")
    assert _OUTSIDE.search('SHARED = REPO.parent / "shared"')


# The child: an audit hook notes every opened file and listed directory outside the allowed
# roots, then pytest collects the whole suite; the notes go to stdout as one JSON line.
_CHILD = r"""
import json, os, sys, sysconfig, tempfile
roots = [os.path.realpath(p) for p in sys.argv[1:]]
roots += [os.path.realpath(p) for p in {sys.prefix, sys.base_prefix, sys.exec_prefix,
          sys.base_exec_prefix, tempfile.gettempdir(), *sysconfig.get_paths().values()}]
roots += ["/proc", "/sys", "/dev", "/etc", "/usr", "/lib", "/lib64"]
seen = set()
def inside(path):
    return any(path == r or path.startswith(r.rstrip("/") + "/") for r in roots)
def hook(event, args):
    if event not in ("open", "os.listdir", "os.scandir", "glob.glob"):
        return
    path = args[0] if args else None
    if isinstance(path, int) or path is None:
        return
    try:
        path = os.path.realpath(os.fsdecode(path))
    except (TypeError, ValueError):
        return
    if not inside(path):
        seen.add(path)
sys.addaudithook(hook)
import pytest
code = pytest.main(["--collect-only", "-q", "-p", "no:randomly", "-p", "no:cacheprovider"])
print("\n" + json.dumps({"code": int(code), "outside": sorted(seen)}))
"""


def test_collecting_the_suite_reads_nothing_outside_the_checkout() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_FOOTPRINT_")}
    done = subprocess.run(
        [sys.executable, "-c", _CHILD, str(REPO)],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    last = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else ""
    assert last.startswith("{"), done.stdout[-2000:] + done.stderr[-2000:]
    result = json.loads(last)
    assert result["code"] == 0, done.stdout[-3000:]
    assert result["outside"] == [], "collection read outside the checkout: " + ", ".join(
        result["outside"]
    )
