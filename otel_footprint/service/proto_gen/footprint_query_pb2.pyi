from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class GetRunRequest(_message.Message):
    __slots__ = ("run_id",)
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    run_id: str
    def __init__(self, run_id: _Optional[str] = ...) -> None: ...

class GetRunResponse(_message.Message):
    __slots__ = ("legs",)
    LEGS_FIELD_NUMBER: _ClassVar[int]
    legs: _containers.RepeatedCompositeFieldContainer[RunAccount]
    def __init__(self, legs: _Optional[_Iterable[_Union[RunAccount, _Mapping]]] = ...) -> None: ...

class StreamVerdictsRequest(_message.Message):
    __slots__ = ("replay_recent",)
    REPLAY_RECENT_FIELD_NUMBER: _ClassVar[int]
    replay_recent: int
    def __init__(self, replay_recent: _Optional[int] = ...) -> None: ...

class RunAccount(_message.Message):
    __slots__ = ("run_id", "trace_id", "run_span_id", "mode", "complete", "resumed", "reasons", "passes", "engagement", "checks", "signals", "summary", "decided_time_unix_nano", "findings")
    class ChecksEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: CheckResult
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[CheckResult, _Mapping]] = ...) -> None: ...
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    TRACE_ID_FIELD_NUMBER: _ClassVar[int]
    RUN_SPAN_ID_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    COMPLETE_FIELD_NUMBER: _ClassVar[int]
    RESUMED_FIELD_NUMBER: _ClassVar[int]
    REASONS_FIELD_NUMBER: _ClassVar[int]
    PASSES_FIELD_NUMBER: _ClassVar[int]
    ENGAGEMENT_FIELD_NUMBER: _ClassVar[int]
    CHECKS_FIELD_NUMBER: _ClassVar[int]
    SIGNALS_FIELD_NUMBER: _ClassVar[int]
    SUMMARY_FIELD_NUMBER: _ClassVar[int]
    DECIDED_TIME_UNIX_NANO_FIELD_NUMBER: _ClassVar[int]
    FINDINGS_FIELD_NUMBER: _ClassVar[int]
    run_id: str
    trace_id: str
    run_span_id: str
    mode: str
    complete: bool
    resumed: bool
    reasons: _containers.RepeatedScalarFieldContainer[str]
    passes: _containers.RepeatedCompositeFieldContainer[PassTimeline]
    engagement: _containers.RepeatedCompositeFieldContainer[EngagementRecord]
    checks: _containers.MessageMap[str, CheckResult]
    signals: _containers.RepeatedScalarFieldContainer[str]
    summary: Summary
    decided_time_unix_nano: int
    findings: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, run_id: _Optional[str] = ..., trace_id: _Optional[str] = ..., run_span_id: _Optional[str] = ..., mode: _Optional[str] = ..., complete: _Optional[bool] = ..., resumed: _Optional[bool] = ..., reasons: _Optional[_Iterable[str]] = ..., passes: _Optional[_Iterable[_Union[PassTimeline, _Mapping]]] = ..., engagement: _Optional[_Iterable[_Union[EngagementRecord, _Mapping]]] = ..., checks: _Optional[_Mapping[str, CheckResult]] = ..., signals: _Optional[_Iterable[str]] = ..., summary: _Optional[_Union[Summary, _Mapping]] = ..., decided_time_unix_nano: _Optional[int] = ..., findings: _Optional[_Iterable[str]] = ...) -> None: ...

class PassTimeline(_message.Message):
    __slots__ = ("iteration", "span_id", "engaged_maps", "parked_maps", "served_while_parked", "served_chars_while_parked", "changes", "mismatch")
    ITERATION_FIELD_NUMBER: _ClassVar[int]
    SPAN_ID_FIELD_NUMBER: _ClassVar[int]
    ENGAGED_MAPS_FIELD_NUMBER: _ClassVar[int]
    PARKED_MAPS_FIELD_NUMBER: _ClassVar[int]
    SERVED_WHILE_PARKED_FIELD_NUMBER: _ClassVar[int]
    SERVED_CHARS_WHILE_PARKED_FIELD_NUMBER: _ClassVar[int]
    CHANGES_FIELD_NUMBER: _ClassVar[int]
    MISMATCH_FIELD_NUMBER: _ClassVar[int]
    iteration: int
    span_id: str
    engaged_maps: _containers.RepeatedScalarFieldContainer[str]
    parked_maps: _containers.RepeatedScalarFieldContainer[str]
    served_while_parked: _containers.RepeatedScalarFieldContainer[str]
    served_chars_while_parked: int
    changes: _containers.RepeatedCompositeFieldContainer[EngagementChange]
    mismatch: bool
    def __init__(self, iteration: _Optional[int] = ..., span_id: _Optional[str] = ..., engaged_maps: _Optional[_Iterable[str]] = ..., parked_maps: _Optional[_Iterable[str]] = ..., served_while_parked: _Optional[_Iterable[str]] = ..., served_chars_while_parked: _Optional[int] = ..., changes: _Optional[_Iterable[_Union[EngagementChange, _Mapping]]] = ..., mismatch: _Optional[bool] = ...) -> None: ...

class EngagementChange(_message.Message):
    __slots__ = ("kind", "map_id", "iteration", "by", "witness", "reengaged", "upgraded", "tenant_changed", "at", "founded_by", "idle_calls")
    KIND_FIELD_NUMBER: _ClassVar[int]
    MAP_ID_FIELD_NUMBER: _ClassVar[int]
    ITERATION_FIELD_NUMBER: _ClassVar[int]
    BY_FIELD_NUMBER: _ClassVar[int]
    WITNESS_FIELD_NUMBER: _ClassVar[int]
    REENGAGED_FIELD_NUMBER: _ClassVar[int]
    UPGRADED_FIELD_NUMBER: _ClassVar[int]
    TENANT_CHANGED_FIELD_NUMBER: _ClassVar[int]
    AT_FIELD_NUMBER: _ClassVar[int]
    FOUNDED_BY_FIELD_NUMBER: _ClassVar[int]
    IDLE_CALLS_FIELD_NUMBER: _ClassVar[int]
    kind: str
    map_id: str
    iteration: int
    by: str
    witness: str
    reengaged: bool
    upgraded: bool
    tenant_changed: bool
    at: str
    founded_by: str
    idle_calls: int
    def __init__(self, kind: _Optional[str] = ..., map_id: _Optional[str] = ..., iteration: _Optional[int] = ..., by: _Optional[str] = ..., witness: _Optional[str] = ..., reengaged: _Optional[bool] = ..., upgraded: _Optional[bool] = ..., tenant_changed: _Optional[bool] = ..., at: _Optional[str] = ..., founded_by: _Optional[str] = ..., idle_calls: _Optional[int] = ...) -> None: ...

class EngagementRecord(_message.Message):
    __slots__ = ("map_id", "standing", "by", "since", "founded_by", "founded_at", "idle", "founded_on", "at", "at_by", "at_since", "witness")
    MAP_ID_FIELD_NUMBER: _ClassVar[int]
    STANDING_FIELD_NUMBER: _ClassVar[int]
    BY_FIELD_NUMBER: _ClassVar[int]
    SINCE_FIELD_NUMBER: _ClassVar[int]
    FOUNDED_BY_FIELD_NUMBER: _ClassVar[int]
    FOUNDED_AT_FIELD_NUMBER: _ClassVar[int]
    IDLE_FIELD_NUMBER: _ClassVar[int]
    FOUNDED_ON_FIELD_NUMBER: _ClassVar[int]
    AT_FIELD_NUMBER: _ClassVar[int]
    AT_BY_FIELD_NUMBER: _ClassVar[int]
    AT_SINCE_FIELD_NUMBER: _ClassVar[int]
    WITNESS_FIELD_NUMBER: _ClassVar[int]
    map_id: str
    standing: str
    by: str
    since: int
    founded_by: str
    founded_at: int
    idle: int
    founded_on: str
    at: str
    at_by: str
    at_since: int
    witness: str
    def __init__(self, map_id: _Optional[str] = ..., standing: _Optional[str] = ..., by: _Optional[str] = ..., since: _Optional[int] = ..., founded_by: _Optional[str] = ..., founded_at: _Optional[int] = ..., idle: _Optional[int] = ..., founded_on: _Optional[str] = ..., at: _Optional[str] = ..., at_by: _Optional[str] = ..., at_since: _Optional[int] = ..., witness: _Optional[str] = ...) -> None: ...

class CheckResult(_message.Message):
    __slots__ = ("status", "outcome", "label", "sentence", "pointers")
    STATUS_FIELD_NUMBER: _ClassVar[int]
    OUTCOME_FIELD_NUMBER: _ClassVar[int]
    LABEL_FIELD_NUMBER: _ClassVar[int]
    SENTENCE_FIELD_NUMBER: _ClassVar[int]
    POINTERS_FIELD_NUMBER: _ClassVar[int]
    status: str
    outcome: str
    label: str
    sentence: str
    pointers: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, status: _Optional[str] = ..., outcome: _Optional[str] = ..., label: _Optional[str] = ..., sentence: _Optional[str] = ..., pointers: _Optional[_Iterable[str]] = ...) -> None: ...

class Summary(_message.Message):
    __slots__ = ("sentence", "tone", "template_id")
    SENTENCE_FIELD_NUMBER: _ClassVar[int]
    TONE_FIELD_NUMBER: _ClassVar[int]
    TEMPLATE_ID_FIELD_NUMBER: _ClassVar[int]
    sentence: str
    tone: str
    template_id: str
    def __init__(self, sentence: _Optional[str] = ..., tone: _Optional[str] = ..., template_id: _Optional[str] = ...) -> None: ...
