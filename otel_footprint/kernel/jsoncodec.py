"""The one edge where kernel data meets the reference's camelCase JSON (vectors, CLI, events).

Absent optional keys stay absent and ``null`` is never written; a present ``""`` stays present.
Decoding checks every value's JSON type and names the offending path. Unknown keys are ignored, as
the upstream reducer ignores them, except a known key spelt in another case: that one is refused
(it would otherwise be read silently as absent). For any value this module writes,
``x_from_json(x_to_json(v)) == v``, and for valid JSON without unknown keys
``x_to_json(x_from_json(j)) == j`` (unknown keys, which the kernel never reads, are not written
back).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeAlias, cast, get_args

from otel_footprint.kernel.plan import PlanError, validate_plan
from otel_footprint.kernel.types import (
    EngagedChange,
    EngagementAdvance,
    EngagementChange,
    EngagementPass,
    EngagementPlan,
    MapEngagementRecord,
    MountedMap,
    ParkedChange,
    Standing,
    Strength,
    ToolResult,
)

Json: TypeAlias = bool | int | float | str | list["Json"] | dict[str, "Json"] | None
JsonObject: TypeAlias = dict[str, Json]

_STRENGTHS: frozenset[str] = frozenset(get_args(Strength))
_STANDINGS: frozenset[str] = frozenset(get_args(Standing))


class JsonShapeError(ValueError):
    """A JSON value that is not the reference's shape; the message starts with its path."""


# ── reading ──────────────────────────────────────────────────────────────────────────────────


def _describe(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return repr(value) if len(value) <= 40 else repr(value[:40]) + "…"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return repr(value)


def _object(value: object, path: str, allowed: frozenset[str]) -> dict[str, object]:
    if not isinstance(value, dict):
        raise JsonShapeError(f"{path}: expected an object, got {_describe(value)}")
    obj = cast(dict[str, object], value)
    # Other keys are ignored, as the upstream reducer ignores them (a newer build may add fields);
    # a key that matches a known one but for case is a misspelling that would silently read as
    # absent, so it is refused.
    folded = {key.lower(): key for key in allowed}
    for key in obj:
        if key not in allowed and key.lower() in folded:
            raise JsonShapeError(
                f"{path}: unknown key {key!r} (did you mean {folded[key.lower()]!r}?)"
            )
    return obj


def _required(obj: dict[str, object], key: str, path: str) -> object:
    if key not in obj:
        raise JsonShapeError(f"{path}: missing required key {key!r}")
    return obj[key]


def _str(value: object, path: str) -> str:
    if not isinstance(value, str):
        raise JsonShapeError(f"{path}: expected a string, got {_describe(value)}")
    return value


def _int(value: object, path: str, minimum: int | None = None) -> int:
    # JSON true/false decode to Python bools, which are ints; they are not integers here.
    if isinstance(value, bool) or not isinstance(value, int):
        raise JsonShapeError(f"{path}: expected an integer, got {_describe(value)}")
    if minimum is not None and value < minimum:
        raise JsonShapeError(f"{path}: expected an integer >= {minimum}, got {value}")
    return value


def _strength(value: object, path: str) -> Strength:
    if not isinstance(value, str) or value not in _STRENGTHS:
        raise JsonShapeError(
            f"{path}: expected one of {', '.join(get_args(Strength))}, got {_describe(value)}"
        )
    return cast(Strength, value)


def _standing(value: object, path: str) -> Standing:
    if not isinstance(value, str) or value not in _STANDINGS:
        raise JsonShapeError(f"{path}: expected 'engaged' or 'parked', got {_describe(value)}")
    return cast(Standing, value)


def _list(value: object, path: str) -> list[object]:
    if not isinstance(value, list):
        raise JsonShapeError(f"{path}: expected a list, got {_describe(value)}")
    return cast(list[object], value)


def _strs(value: object, path: str) -> tuple[str, ...]:
    items = _list(value, path)
    # The common case checked in one pass, without a path string per item (a plan's member and
    # tool lists are read once per run); an item that is not a string is named as before.
    if all(item.__class__ is str for item in items):
        return tuple(cast(list[str], items))
    return tuple(_str(item, f"{path}[{i}]") for i, item in enumerate(items))


def _opt_str(obj: dict[str, object], key: str, path: str) -> str | None:
    return _str(obj[key], f"{path}.{key}") if key in obj else None


def _opt_int(obj: dict[str, object], key: str, path: str) -> int | None:
    return _int(obj[key], f"{path}.{key}") if key in obj else None


def _opt_strength(obj: dict[str, object], key: str, path: str) -> Strength | None:
    return _strength(obj[key], f"{path}.{key}") if key in obj else None


def _flag(obj: dict[str, object], key: str, path: str) -> bool:
    # The reference writes these flags only as ``true``; ``false`` would not survive a round trip.
    if key not in obj:
        return False
    if obj[key] is not True:
        raise JsonShapeError(f"{path}.{key}: expected true (or no key), got {_describe(obj[key])}")
    return True


# ── plan ─────────────────────────────────────────────────────────────────────────────────────

_MAP_KEYS = frozenset({"id", "memberIds", "toolNames", "nonParkable"})
_PLAN_KEYS = frozenset({"maps", "renewalGrace"})


def mounted_map_from_json(value: object, path: str = "map") -> MountedMap:
    """A ``MountedMap`` from ``{id, memberIds, toolNames, nonParkable?}``."""
    obj = _object(value, path, _MAP_KEYS)
    non_parkable: bool | None = None
    if "nonParkable" in obj:
        raw = obj["nonParkable"]
        if not isinstance(raw, bool):
            raise JsonShapeError(
                f"{path}.nonParkable: expected true or false, got {_describe(raw)}"
            )
        non_parkable = raw
    return MountedMap(
        id=_str(_required(obj, "id", path), f"{path}.id"),
        member_ids=_strs(_required(obj, "memberIds", path), f"{path}.memberIds"),
        tool_names=_strs(_required(obj, "toolNames", path), f"{path}.toolNames"),
        non_parkable=non_parkable,
    )


def mounted_map_to_json(mounted: MountedMap) -> JsonObject:
    """The reference JSON of one mounted map; ``nonParkable`` only when it was given."""
    out: JsonObject = {
        "id": mounted.id,
        "memberIds": list(mounted.member_ids),
        "toolNames": list(mounted.tool_names),
    }
    if mounted.non_parkable is not None:
        out["nonParkable"] = mounted.non_parkable
    return out


def plan_from_json(value: object, path: str = "plan") -> EngagementPlan:
    """A checked plan from ``{maps, renewalGrace}``; shape and plan rules both raise here."""
    obj = _object(value, path, _PLAN_KEYS)
    maps = _list(_required(obj, "maps", path), f"{path}.maps")
    plan = EngagementPlan(
        maps=tuple(mounted_map_from_json(m, f"{path}.maps[{i}]") for i, m in enumerate(maps)),
        renewal_grace=_int(_required(obj, "renewalGrace", path), f"{path}.renewalGrace"),
    )
    try:
        return validate_plan(plan)
    except PlanError as error:
        raise JsonShapeError(f"{path}: {error}") from error


def plan_to_json(plan: EngagementPlan) -> JsonObject:
    """The reference JSON of a plan."""
    return {
        "maps": [mounted_map_to_json(m) for m in plan.maps],
        "renewalGrace": plan.renewal_grace,
    }


# ── pass ─────────────────────────────────────────────────────────────────────────────────────

_PASS_KEYS = frozenset(
    {
        "iteration",
        "currentNode",
        "moveBy",
        "witness",
        "toolResults",
        "pendingSkillPick",
        "acceptedSkillPicks",
        "servedLastPass",
    }
)


def _tool_result(value: object, path: str) -> ToolResult:
    # The upstream engine passes richer tool results; the kernel reads only the name, so other
    # keys are tolerated here (and are not written back).
    if not isinstance(value, dict):
        raise JsonShapeError(f"{path}: expected an object, got {_describe(value)}")
    obj = cast(dict[str, object], value)
    return ToolResult(_str(_required(obj, "toolName", path), f"{path}.toolName"))


def pass_from_json(value: object, path: str = "pass") -> EngagementPass:
    """An ``EngagementPass`` from the reference's Pass object."""
    obj = _object(value, path, _PASS_KEYS)
    results = _list(_required(obj, "toolResults", path), f"{path}.toolResults")
    return EngagementPass(
        iteration=_int(_required(obj, "iteration", path), f"{path}.iteration"),
        current_node=_opt_str(obj, "currentNode", path),
        move_by=_opt_str(obj, "moveBy", path),
        witness=_opt_str(obj, "witness", path),
        tool_results=tuple(
            _tool_result(r, f"{path}.toolResults[{i}]") for i, r in enumerate(results)
        ),
        pending_skill_pick=_opt_str(obj, "pendingSkillPick", path),
        accepted_skill_picks=_strs(
            _required(obj, "acceptedSkillPicks", path), f"{path}.acceptedSkillPicks"
        ),
        served_last_pass=_strs(_required(obj, "servedLastPass", path), f"{path}.servedLastPass"),
    )


def pass_to_json(pass_: EngagementPass) -> JsonObject:
    """The reference JSON of a pass, in the reference's key order."""
    out: JsonObject = {"iteration": pass_.iteration}
    if pass_.current_node is not None:
        out["currentNode"] = pass_.current_node
    if pass_.move_by is not None:
        out["moveBy"] = pass_.move_by
    if pass_.witness is not None:
        out["witness"] = pass_.witness
    out["toolResults"] = [{"toolName": r.tool_name} for r in pass_.tool_results]
    if pass_.pending_skill_pick is not None:
        out["pendingSkillPick"] = pass_.pending_skill_pick
    out["acceptedSkillPicks"] = list(pass_.accepted_skill_picks)
    out["servedLastPass"] = list(pass_.served_last_pass)
    return out


# ── record ───────────────────────────────────────────────────────────────────────────────────

_RECORD_KEYS = frozenset(
    {
        "mapId",
        "standing",
        "by",
        "since",
        "foundedBy",
        "foundedAt",
        "foundedOn",
        "at",
        "atBy",
        "atSince",
        "idle",
        "witness",
    }
)


def record_from_json(value: object, path: str = "record") -> MapEngagementRecord:
    """A ``MapEngagementRecord`` from the reference's record object."""
    obj = _object(value, path, _RECORD_KEYS)
    return MapEngagementRecord(
        map_id=_str(_required(obj, "mapId", path), f"{path}.mapId"),
        standing=_standing(_required(obj, "standing", path), f"{path}.standing"),
        by=_strength(_required(obj, "by", path), f"{path}.by"),
        since=_int(_required(obj, "since", path), f"{path}.since"),
        founded_by=_strength(_required(obj, "foundedBy", path), f"{path}.foundedBy"),
        founded_at=_int(_required(obj, "foundedAt", path), f"{path}.foundedAt"),
        idle=_int(_required(obj, "idle", path), f"{path}.idle", minimum=0),
        founded_on=_opt_str(obj, "foundedOn", path),
        at=_opt_str(obj, "at", path),
        at_by=_opt_strength(obj, "atBy", path),
        at_since=_opt_int(obj, "atSince", path),
        witness=_opt_str(obj, "witness", path),
    )


def record_to_json(record: MapEngagementRecord) -> JsonObject:
    """The reference JSON of a record (canonical key order; the reference's order varies)."""
    out: JsonObject = {
        "mapId": record.map_id,
        "standing": record.standing,
        "by": record.by,
        "since": record.since,
        "foundedBy": record.founded_by,
        "foundedAt": record.founded_at,
    }
    if record.founded_on is not None:
        out["foundedOn"] = record.founded_on
    if record.at is not None:
        out["at"] = record.at
    if record.at_by is not None:
        out["atBy"] = record.at_by
    if record.at_since is not None:
        out["atSince"] = record.at_since
    out["idle"] = record.idle
    if record.witness is not None:
        out["witness"] = record.witness
    return out


def engagement_from_json(
    value: object, path: str = "engagement"
) -> tuple[MapEngagementRecord, ...] | None:
    """A state (list of records) from JSON; ``null`` is "no state" and stays ``None``."""
    if value is None:
        return None
    items = _list(value, path)
    return tuple(record_from_json(item, f"{path}[{i}]") for i, item in enumerate(items))


def engagement_to_json(engagement: Sequence[MapEngagementRecord] | None) -> Json:
    """The JSON of a state; ``None`` is written as ``null``."""
    if engagement is None:
        return None
    return [record_to_json(record) for record in engagement]


# ── change ───────────────────────────────────────────────────────────────────────────────────

_ENGAGED_KEYS = frozenset(
    {
        "kind",
        "mapId",
        "iteration",
        "by",
        "witness",
        "reengaged",
        "upgraded",
        "tenantChanged",
        "at",
        "foundedBy",
    }
)
_PARKED_KEYS = frozenset({"kind", "mapId", "iteration", "by", "idleCalls", "witness"})


def change_from_json(value: object, path: str = "change") -> EngagementChange:
    """An ``EngagedChange`` or ``ParkedChange`` from the reference's change object."""
    if not isinstance(value, dict):
        raise JsonShapeError(f"{path}: expected an object, got {_describe(value)}")
    kind = cast(dict[str, object], value).get("kind")
    if kind == "parked":
        obj = _object(value, path, _PARKED_KEYS)
        return ParkedChange(
            map_id=_str(_required(obj, "mapId", path), f"{path}.mapId"),
            iteration=_int(_required(obj, "iteration", path), f"{path}.iteration"),
            by=_strength(_required(obj, "by", path), f"{path}.by"),
            idle_calls=_int(_required(obj, "idleCalls", path), f"{path}.idleCalls", minimum=0),
            witness=_opt_str(obj, "witness", path),
        )
    if kind != "engaged":
        raise JsonShapeError(f"{path}.kind: expected 'engaged' or 'parked', got {_describe(kind)}")
    obj = _object(value, path, _ENGAGED_KEYS)
    return EngagedChange(
        map_id=_str(_required(obj, "mapId", path), f"{path}.mapId"),
        iteration=_int(_required(obj, "iteration", path), f"{path}.iteration"),
        by=_strength(_required(obj, "by", path), f"{path}.by"),
        witness=_opt_str(obj, "witness", path),
        reengaged=_flag(obj, "reengaged", path),
        upgraded=_flag(obj, "upgraded", path),
        tenant_changed=_flag(obj, "tenantChanged", path),
        at=_opt_str(obj, "at", path),
        founded_by=_opt_strength(obj, "foundedBy", path),
    )


def change_to_json(change: EngagementChange) -> JsonObject:
    """The reference JSON of a change: flags only when true, optional keys only when present."""
    out: JsonObject = {
        "kind": change.kind,
        "mapId": change.map_id,
        "iteration": change.iteration,
        "by": change.by,
    }
    if isinstance(change, ParkedChange):
        out["idleCalls"] = change.idle_calls
    else:
        if change.reengaged:
            out["reengaged"] = True
        if change.upgraded:
            out["upgraded"] = True
        if change.tenant_changed:
            out["tenantChanged"] = True
        if change.at is not None:
            out["at"] = change.at
        if change.founded_by is not None:
            out["foundedBy"] = change.founded_by
    if change.witness is not None:
        out["witness"] = change.witness
    return out


# ── advance ──────────────────────────────────────────────────────────────────────────────────


def advance_to_json(advance: EngagementAdvance) -> JsonObject:
    """The reference JSON of one reducer step's result."""
    return {
        "next": [record_to_json(r) for r in advance.next],
        "parkedInjectionIds": list(advance.parked_injection_ids),
        "parkedToolNames": list(advance.parked_tool_names),
        "changes": [change_to_json(c) for c in advance.changes],
    }
