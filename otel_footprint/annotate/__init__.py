"""Decisions -> one neutral annotation form -> writers for OTLP protobuf spans and SDK spans.

The form is re-exported here; import the writers from ``annotate.otlp`` (protobuf, in place) and
``annotate.sdk`` (SDK span copies) so each path loads only what it writes.
"""

from otel_footprint.annotate.form import (
    AnnotateOptions,
    NoteEvent,
    NoteLink,
    SpanNote,
    WitnessPolicy,
    annotations_for,
    hash_witness,
    merge_notes,
    unannotated_notes,
)

__all__ = [
    "AnnotateOptions",
    "NoteEvent",
    "NoteLink",
    "SpanNote",
    "WitnessPolicy",
    "annotations_for",
    "hash_witness",
    "merge_notes",
    "unannotated_notes",
]
