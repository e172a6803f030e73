"""The committed generated code of proto/footprint_query.proto matches a fresh grpcio-tools run."""

from __future__ import annotations

import filecmp
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
GENERATED = REPO / "otel_footprint" / "service" / "proto_gen"
FILES = ("footprint_query_pb2.py", "footprint_query_pb2.pyi", "footprint_query_pb2_grpc.py")


def test_generated_code_is_in_sync_with_the_proto(tmp_path: Path) -> None:
    pytest.importorskip("grpc_tools")
    # The same command as in proto_gen/__init__.py, written into tmp instead of the tree.
    subprocess.run(
        [
            sys.executable,
            "-m",
            "grpc_tools.protoc",
            f"-Iotel_footprint/service/proto_gen={REPO / 'proto'}",
            f"--python_out={tmp_path}",
            f"--pyi_out={tmp_path}",
            f"--grpc_python_out={tmp_path}",
            str(REPO / "proto" / "footprint_query.proto"),
        ],
        check=True,
        cwd=REPO,
        capture_output=True,
    )
    fresh = tmp_path / "otel_footprint" / "service" / "proto_gen"
    stale = [
        name
        for name in FILES
        if not (GENERATED / name).is_file()
        or not filecmp.cmp(fresh / name, GENERATED / name, shallow=False)
    ]
    assert stale == [], (
        f"{stale} differ from proto/footprint_query.proto; regenerate with the command in "
        "otel_footprint/service/proto_gen/__init__.py"
    )


def test_the_messages_round_trip() -> None:
    from otel_footprint.service.proto_gen import footprint_query_pb2 as pb

    msg = pb.RunAccount(run_id="r", mode="shadow", complete=True)
    msg.checks["decided-delivered"].status = "reachable"
    msg.passes.add(iteration=1).changes.add(kind="parked", map_id="m", idle_calls=3)
    assert pb.RunAccount.FromString(msg.SerializeToString()) == msg
