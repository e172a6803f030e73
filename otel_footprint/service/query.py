"""The query service (proto/footprint_query.proto) served on the hop's gRPC port.

``GetRun`` answers every decided leg of a run by run id; ``StreamVerdicts`` streams accounts as runs
are decided. Messages are stored serialized, so answers are sent without re-encoding.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

import grpc

from otel_footprint.annotate.otlp import length_delimited
from otel_footprint.service.verdicts import VerdictLog

SERVICE = "otel_footprint.v1.RunQuery"


class QueryService:
    """Handlers for ``otel_footprint.v1.RunQuery``; ``max_streams`` bounds stream subscribers."""

    def __init__(
        self,
        verdicts: VerdictLog,
        check_auth: Callable[[grpc.ServicerContext], None],
        max_streams: int = 2,
    ) -> None:
        self.verdicts = verdicts
        self.check_auth = check_auth
        self._streams = threading.BoundedSemaphore(max_streams)
        self._alive = threading.Event()
        self._alive.set()

    def handler(self) -> grpc.GenericRpcHandler[Any, Any]:
        from otel_footprint.service.proto_gen import footprint_query_pb2 as pb

        return grpc.method_handlers_generic_handler(
            SERVICE,
            {
                "GetRun": grpc.unary_unary_rpc_method_handler(
                    self._get_run,
                    request_deserializer=pb.GetRunRequest.FromString,
                ),
                "StreamVerdicts": grpc.unary_stream_rpc_method_handler(
                    self._stream,
                    request_deserializer=pb.StreamVerdictsRequest.FromString,
                ),
            },
        )

    def _get_run(self, request: object, context: grpc.ServicerContext) -> bytes:
        from otel_footprint.service.proto_gen import footprint_query_pb2 as pb

        self.check_auth(context)
        assert isinstance(request, pb.GetRunRequest)
        if not request.run_id:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, "run_id is required")
        legs = self.verdicts.legs(request.run_id)
        if not legs:
            context.abort(grpc.StatusCode.NOT_FOUND, f"no decided run with id {request.run_id!r}")
        # GetRunResponse { repeated RunAccount legs = 1; }: frame the stored messages directly.
        return b"".join(length_delimited(1, leg) for leg in legs)

    def _stream(self, request: object, context: grpc.ServicerContext) -> Iterator[bytes]:
        from otel_footprint.service.proto_gen import footprint_query_pb2 as pb

        self.check_auth(context)
        assert isinstance(request, pb.StreamVerdictsRequest)
        if not self._streams.acquire(blocking=False):
            context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, "too many verdict streams open")
        alive = threading.Event()
        alive.set()
        context.add_callback(alive.clear)
        try:
            sub = self.verdicts.subscribe(request.replay_recent)
            for item in self.verdicts.stream(sub, alive):
                if not self._alive.is_set():
                    return
                yield item
        finally:
            self._streams.release()

    def close(self) -> None:
        self._alive.clear()
