"""Decisions -> one neutral annotation form -> writers for OTLP protobuf spans and SDK spans."""
