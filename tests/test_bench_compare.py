"""``benchmarks/compare.py`` measures two trees side by side and leaves no worktree behind."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

import compare

REPO = compare.REPO


def _worktrees() -> str:
    return subprocess.run(
        ["git", "-C", str(REPO), "worktree", "list"], capture_output=True, text=True, check=True
    ).stdout


def test_a_tiny_comparison_against_head_prints_both_ratios(
    capsys: pytest.CaptureFixture[str],
) -> None:
    tiny = ["--base", "HEAD", "--rounds", "1", "--spans", "300", "--warmup", "138"]
    assert compare.main([*tiny, "--batch", "2", "--repeat", "1"]) == 0
    out = capsys.readouterr().out
    hop = re.search(r"^hop .*ratio head/base (\d+\.\d+) \(paired rounds: \d+\.\d+\)$", out, re.M)
    decide = re.search(
        r"^decide .*ratio base/head (\d+\.\d+) \(paired rounds: \d+\.\d+\)$", out, re.M
    )
    assert hop and decide, out
    assert float(hop.group(1)) > 0 and float(decide.group(1)) > 0
    assert "load average" in out
    assert "bench-compare-" not in _worktrees()  # the base's checkout is removed
