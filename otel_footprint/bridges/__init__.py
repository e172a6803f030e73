"""Importers from other agent frameworks' records into our OTLP input schema."""
