"""The decision path's ``Record`` classes (kernel/record.py): one method, ``_values``, gives their
equality, hashing, printing and pickling, so it must list every attribute in ``__init__``'s order."""

from __future__ import annotations

import inspect
import pickle

import pytest

import otel_footprint
import otel_footprint.account.model
import otel_footprint.engine.verdict
import otel_footprint.kernel.evidence
import otel_footprint.kernel.types  # for their Record subclasses
from otel_footprint.kernel import EngagedChange, MapEngagementRecord, ParkedChange
from otel_footprint.kernel.record import Record


def _records() -> list[type[Record]]:
    found: list[type[Record]] = []
    pending = list(Record.__subclasses__())
    while pending:
        cls = pending.pop()
        found.append(cls)
        pending.extend(cls.__subclasses__())
    return sorted(found, key=lambda cls: cls.__qualname__)


def test_the_decision_path_records_are_records() -> None:
    names = {cls.__name__ for cls in _records()}
    assert {
        "EngagementPass",
        "MapEngagementRecord",
        "EngagedChange",
        "PassVerdict",
        "Line",
        "Pointer",
    } <= names


@pytest.mark.skipif(
    getattr(otel_footprint, "compiled", False), reason="compiled: typed slots refuse the markers"
)
@pytest.mark.parametrize("cls", _records(), ids=lambda cls: cls.__name__)
def test_values_are_every_slot_in_init_order(cls: type[Record]) -> None:
    params = list(inspect.signature(cls.__init__).parameters)[1:]
    assert sorted(cls.__slots__) == sorted(params)
    markers = [object() for _ in params]
    record = cls(*markers)
    assert list(record._values()) == markers
    assert [getattr(record, name) for name in params] == markers


def test_equal_values_are_equal_records_with_one_hash() -> None:
    record = MapEngagementRecord("m", "engaged", "lexical", 2, "lexical", 2, at="a", witness="w")
    twin = MapEngagementRecord("m", "engaged", "lexical", 2, "lexical", 2, at="a", witness="w")
    assert record == twin and hash(record) == hash(twin) and len({record, twin}) == 1
    assert record != MapEngagementRecord("m", "engaged", "lexical", 2, "lexical", 2, at="a")
    # Same values, another class: never equal (a change's kind is its class).
    assert EngagedChange("m", 3, "lexical") != ParkedChange("m", 3, "lexical", 0)
    assert EngagedChange("m", 3, "lexical").kind == "engaged"


def test_records_pickle_and_print_by_their_values() -> None:
    change = ParkedChange("m", 4, "lexical", 3, witness="w")
    assert pickle.loads(pickle.dumps(change)) == change
    assert repr(change) == "ParkedChange('m', 4, 'lexical', 3, 'w')"
