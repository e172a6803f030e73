"""Generated code for proto/footprint_query.proto (the hop's query service). Do not edit.

Regenerate from the repository root (tests/test_service_proto.py checks this copy is current)::

    python -m grpc_tools.protoc -Iotel_footprint/service/proto_gen=proto \
        --python_out=. --pyi_out=. --grpc_python_out=. proto/footprint_query.proto
"""
