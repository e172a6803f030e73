"""The OTLP hop (`otel-footprint serve`): receivers, run buffer, annotation, forwarder, operations."""
