"""The ``otel-footprint`` command line: argument parsing and output only, on top of every other
layer. :mod:`otel_footprint.commands.cli` dispatches to one module per command."""
