"""The agent-side recorder: emits footprint events on the current span (or as log records)."""
