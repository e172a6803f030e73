"""otel_footprint: explain AI-agent runs inside the OpenTelemetry tracing stack you already run."""

__version__ = "0.1.0"
