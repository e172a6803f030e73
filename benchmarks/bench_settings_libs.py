"""Start-up + parse cost of one settings model: msgspec vs pydantic-settings vs attrs + cattrs.

Each case runs in a fresh interpreter (import the library, declare the in-process settings, read
three values from strings), 7 times; docs/design.md gives the figures that chose msgspec. A library
that is not installed is reported as such (``pip install pydantic-settings cattrs`` to compare).
"""

from __future__ import annotations

import statistics
import subprocess
import sys

CASES = {
    "msgspec": """
import msgspec
from typing import Annotated, Literal
class S(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    grace_seconds: Annotated[float, msgspec.Meta(description="x")] = 1.0
    max_wait_seconds: float = 300.0
    max_runs: int = 10000
    max_spans_per_run: int = 20000
    witness: Literal["keep","hash","drop"] = "keep"
    protocol: Literal["grpc","http/protobuf"] = "grpc"
s = msgspec.convert({"grace_seconds": "0.5", "max_runs": "7", "witness": "hash"}, S, strict=False)
""",
    "pydantic-settings": """
from typing import Literal
from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict
class S(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="FOOTPRINT_", frozen=True, extra="forbid")
    grace_seconds: float = Field(1.0, description="x")
    max_wait_seconds: float = 300.0
    max_runs: int = 10000
    max_spans_per_run: int = 20000
    witness: Literal["keep","hash","drop"] = "keep"
    protocol: Literal["grpc","http/protobuf"] = "grpc"
s = S()
""",
    "attrs+cattrs": """
import attrs, cattrs
from typing import Literal
@attrs.frozen
class S:
    grace_seconds: float = attrs.field(default=1.0, metadata={"doc": "x"})
    max_wait_seconds: float = 300.0
    max_runs: int = 10000
    max_spans_per_run: int = 20000
    witness: Literal["keep","hash","drop"] = "keep"
    protocol: Literal["grpc","http/protobuf"] = "grpc"
s = cattrs.structure({"grace_seconds": "0.5", "max_runs": "7", "witness": "hash"}, S)
""",
}
ENV = {"FOOTPRINT_GRACE_SECONDS": "0.5", "FOOTPRINT_MAX_RUNS": "7", "FOOTPRINT_WITNESS": "hash"}


def main() -> None:
    for name, code in CASES.items():
        timed = (
            f"import time\nt = time.perf_counter()\n{code}\nprint((time.perf_counter() - t) * 1000)"
        )
        runs: list[float] = []
        for _ in range(7):
            done = subprocess.run(
                [sys.executable, "-c", timed], capture_output=True, text=True, env=ENV
            )
            if done.returncode != 0:
                print(f"{name:18s} not installed ({done.stderr.strip().splitlines()[-1]})")
                break
            runs.append(float(done.stdout))
        if runs:
            median, least = statistics.median(runs), min(runs)
            print(f"{name:18s} import+declare+parse ms: median {median:.1f}  min {least:.1f}")


if __name__ == "__main__":
    main()
