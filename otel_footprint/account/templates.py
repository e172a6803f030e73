"""Every sentence the account can write: template ids, their exact words, vouchers and chips.

Texts marked ``quoted=True`` are the upstream's own words (reference §4.4–4.8) and must stay
byte-identical; ``quoted=False`` texts are ours, written where the reference names a template but
not its words, or where this processor says something the upstream cannot (a carried verdict).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Final

from otel_footprint.account.model import Chip, Tone

TEMPLATE_SET_VERSION: Final = 1
"""Bumped whenever a template's words change (reference §4.9)."""

SOURCE_RANK: Final[Mapping[str, int]] = {"person": 0, "library": 1, "model": 3, "app": 4}
"""Voucher strength, strongest first; ``tool:<name>`` sits between library and model."""

ID_CHARS: Final = 200
"""Ids the model (or a long graph) chooses are cut here before they reach a sentence."""
VAR_CHARS: Final = 2_000
"""No string variable is longer than this, whatever the long-text budget holds."""


@dataclass(frozen=True, slots=True)
class Template:
    """One sentence shape: ``{name}`` placeholders are filled once, never recursively."""

    id: str
    text: str
    voucher: str = "library"
    quoted: bool = True
    """True when the words are the upstream's own (a conformance test pins them byte for byte)."""


def _t(template_id: str, text: str, voucher: str = "library", quoted: bool = True) -> Template:
    return Template(template_id, text, voucher, quoted)


_ALL: Final[tuple[Template, ...]] = (
    # ── You asked ───────────────────────────────────────────────────────────────────────────
    _t("asked.question", "“{question}”", "person", quoted=False),
    _t(
        "asked.resumed",
        "This answer continued after a pause. The message, as the run held it: “{message}”",
        "person",
    ),
    _t(
        "asked.carried",
        "This answer continued after a pause. The message, as the run's earlier leg recorded it: "
        "“{message}”",
        "person",
        quoted=False,
    ),
    _t("asked.none", "The question is not in this record.", quoted=False),
    # ── It understood (check 1) ─────────────────────────────────────────────────────────────
    _t(
        "understood.rule",
        "The library's routing picked the {skill} because one of the app's rules matched.",
    ),
    _t(
        "understood.rule.witness",
        "The library's routing picked the {skill} because one of the app's rules matched your "
        "words “{witness}”.",
    ),
    _t("understood.intent", "The library's routing picked the {skill}."),
    _t(
        "understood.scores.allOthers",
        "The app's scoring put it first: {top} against {next} for every other skill.",
        "app",
    ),
    _t(
        "understood.scores",
        "The app's scoring put it first: {top} against {next} for the next one, the {nextSkill}.",
        "app",
    ),
    _t("understood.continuity", "It stayed with the {skill} from the previous question."),
    _t("understood.decider", "A separate routing model ({model}) picked the {skill}.", "model"),
    _t("understood.decider.noModel", "A separate routing model picked the {skill}.", "model"),
    _t(
        "understood.menu",
        "No routing rule decided; the model was offered {offered} to choose from.",
    ),
    _t(
        "understood.menu.bare",
        "No routing rule decided; the model was offered skills to choose from.",
    ),
    _t("understood.menu.picked", "The model then opened the {skill}.", "model"),
    _t("understood.none", "No skill was chosen; the answer ran on the general instructions."),
    _t("understood.notConfigured", "This app does not route questions to skills."),
    _t("understood.notRecorded", "How the question was routed is not recorded."),
    _t("understood.resumed", "The routing happened before the pause and is not in this record."),
    _t("understood.delivered", "The skill was given to the model before it answered."),
    _t("understood.notDelivered", "The {skill} was not given to the model."),
    _t(
        "understood.notDelivered.other",
        "The {skill} was not given to the model; it was given the {other} instead.",
    ),
    _t(
        "understood.delivery.unknown",
        "Whether the skill was given to the model cannot be told from this record.",
    ),
    _t("understood.refused", "A check named {by} refused to open the {skill}."),
    _t("understood.refused.unnamed", "A check refused to open the {skill}."),
    _t(
        "understood.refused.more",
        "…and {more} of the same skill, not listed here.",
    ),
    _t("understood.rejected", "The skill graph refused to open the {skill}."),
    _t("understood.confidence.none", "How sure the routing was is not recorded."),
    _t(
        "understood.app.notRecorded",
        "Whether the app itself decided a skill for this question is not recorded.",
        "app",
    ),
    # ── It checked / It did not check / It found (ours: the reference names, not words) ─────
    _t("checked.noCalls", "No tool was called for this answer.", quoted=False),
    _t("checked.declared", "{tool} says it checked:", quoted=False),
    _t("checked.item", "{what}", quoted=False),
    _t("checked.undeclared", "{tool} did not say what it checked.", quoted=False),
    _t("checked.failed", "{tool} failed.", quoted=False),
    _t("checked.refused", "{tool} was refused by a rule and did not run.", quoted=False),
    _t(
        "checked.paused",
        "{tool} was waiting for a person's answer when this part of the run paused.",
        quoted=False,
    ),
    _t("checked.unnamed", "A tool call is in this record without its tool's name.", quoted=False),
    _t("checked.more", "…and {more}.", quoted=False),
    _t("notChecked.noCalls", "No tool was called for this answer.", quoted=False),
    _t("notChecked.declared", "{tool} says it did not check:", quoted=False),
    _t("notChecked.cannotCover", "{tool} says it can never check:", quoted=False),
    _t("notChecked.item", "{what}", quoted=False),
    _t("notChecked.none", "{tool} says there is nothing it left unchecked.", quoted=False),
    _t("notChecked.undeclared", "{tool} did not say what it did not check.", quoted=False),
    _t(
        "notChecked.notRun",
        "No tool call of this answer ran, so none could say what it did not check.",
        quoted=False,
    ),
    _t("notChecked.more", "…and {more}.", quoted=False),
    _t("found.noCalls", "No tool was called for this answer.", quoted=False),
    _t("found.absent", "{tool} found nothing and said what it searched.", quoted=False),
    _t(
        "found.undeclaredEmpty",
        "{tool} returned an empty result without saying what it searched.",
        quoted=False,
    ),
    _t("found.rows", "{tool} returned {rows}.", quoted=False),
    _t("found.result", "{tool} returned: “{result}”", quoted=False),
    _t("found.shapeUnknown", "{tool} returned a result whose shape is not declared.", quoted=False),
    _t("found.notRecorded", "What {tool} returned is not in this record.", quoted=False),
    _t("found.paused", "{tool} had not returned when this part of the run paused.", quoted=False),
    _t("found.failed", "{tool} failed; it returned no result.", quoted=False),
    _t("found.refused", "{tool} was refused and returned no result.", quoted=False),
    _t("found.more", "…and {more}.", quoted=False),
    # ── How sure ────────────────────────────────────────────────────────────────────────────
    _t("howSure.standing.none", "The record does not rate how sure this answer is."),
    _t("howSure.evidence.off", "No evidence check was set up for this answer.", quoted=False),
    _t(
        "howSure.evidence.notRecorded",
        "What the evidence check decided is not in this record.",
        quoted=False,
    ),
    # ── Signals ─────────────────────────────────────────────────────────────────────────────
    _t(
        "signal.decidedNotDelivered",
        "The {skill} was decided for this question but was not given to the model.",
    ),
    _t("signal.existenceNotChecked", "{tool} says it did not check {short}."),
    _t("signal.existenceNotChecked.full", "{tool} says it did not check {what}.", quoted=False),
    # The reference elides this one ("… can never check …"): completed like its sibling.
    _t("signal.existenceCannotCheck", "{tool} says it can never check {short}.", quoted=False),
    _t("signal.existenceCannotCheck.full", "{tool} says it can never check {what}.", quoted=False),
    _t(
        "signal.undeclaredEmptyUsed",
        "This answer's {tool} call returned an empty result that did not declare what it searched.",
    ),
    _t(
        "signal.undeclaredEmptyInView",
        "An empty result that did not declare what it searched, from {tool} in an earlier answer "
        "{distance}, was in front of the model when it answered.",
    ),
    # ── Unreachable (why a check could not run) ─────────────────────────────────────────────
    _t(
        "unreachable.decided",
        "It cannot be told whether the chosen skill was given to the model: the routing is not "
        "in this record.",
    ),
    _t(
        "unreachable.delivery",
        "It cannot be told whether the chosen skill was given to the model: what the model was "
        "given is not fully in this record.",
    ),
    _t(
        "unreachable.unnamed",
        "It cannot be told whether a tool checked that the thing asked about exists: the record "
        "does not name the tool.",
        quoted=False,
    ),
    _t(
        "unreachable.existence",
        "It cannot be told whether {tool} checked that the thing asked about exists: its "
        "not-checked items do not say what kind they are.",
    ),
    _t(
        "unreachable.shape",
        "It cannot be told whether the result of {tool} was empty: its shape is not declared.",
    ),
    _t(
        "unreachable.result",
        "It cannot be told whether the result of {tool} was empty: what the model read is not in "
        "this record.",
        quoted=False,
    ),
    # ── Check explanations (gen_ai.evaluation.explanation; ours) ────────────────────────────
    _t(
        "check.decided.delivered",
        "The {skill} was decided for this question and was given to the model.",
        quoted=False,
    ),
    _t(
        "check.decided.notApplicable",
        "No routing rule decided a skill for this question, so there is no decided skill to check.",
        quoted=False,
    ),
    _t(
        "check.existence.passed",
        "No tool said it left unchecked whether the thing asked about exists.",
        quoted=False,
    ),
    _t(
        "check.existence.notApplicable",
        "No tool call of this answer said what it did not check.",
        quoted=False,
    ),
    _t(
        "check.empty.passed",
        "No tool result of this answer was an empty result that did not declare what it searched.",
        quoted=False,
    ),
    _t(
        "check.empty.notApplicable",
        "No tool call of this answer returned a result to judge.",
        quoted=False,
    ),
    # ── Anything wrong ──────────────────────────────────────────────────────────────────────
    _t(
        "wrong.errors",
        "{calls} did not run cleanly: {failed} failed, {refused} refused by a rule, {declined} "
        "declined by a person, {notRun} not run.",
    ),
    _t("wrong.noErrors", "No tool call failed or was refused."),
    _t("wrong.none", "The {checks} this report could run found nothing."),
    _t("wrong.unreachable", "{u} of the {a} checks could not be run on this record."),
    _t(
        "wrong.unreachable.all",
        "None of the checks this report looks for could be run on this record.",
    ),
    _t("wrong.more", "…and {more}, not listed here.", quoted=False),
    _t("wrong.notApplicable", "None of the checks this report looks for applies to this answer."),
    _t(
        "wrong.beforePause",
        "Part of this answer happened before a pause; what happened then is not in this record.",
        quoted=False,
    ),
    _t(
        "wrong.beforePause.held",
        "Part of this answer happened before a pause; this record holds the state the run kept "
        "from before it, and that state holds no routing verdict.",
        quoted=False,
    ),
    _t(
        "wrong.beforePause.held.events",
        "Part of this answer happened before a pause; this record holds the state the run kept "
        "from before it, not that part's events.",
        quoted=False,
    ),
    _t(
        "wrong.beforePause.carried",
        "Part of this answer happened before a pause; its routing was read from the earlier leg "
        "of this run, which is a separate trace.",
        quoted=False,
    ),
    _t("unreadable.line", "This line could not be written from the record."),
    # ── Summary ─────────────────────────────────────────────────────────────────────────────
    _t("summary.unfinished", "This record does not show the run finishing."),
    _t("summary.signals", "{signals}", quoted=False),
    _t("summary.signals.beforePause", "What happened before the pause is not in this record."),
    _t(
        "summary.resumed",
        "This answer continued after a pause; what happened before the pause is not in this "
        "record.",
    ),
    _t(
        "summary.resumed.held",
        "This answer continued after a pause; this record holds the state the run kept from "
        "before it, not that part's events.",
    ),
    _t(
        "summary.resumed.carried",
        "This answer continued after a pause; its routing was read from the earlier leg of this "
        "run.",
        quoted=False,
    ),
    _t("summary.none.nothingRun", "This report could not run any of its checks on this record."),
    _t(
        "summary.none.partial",
        "Nothing this report looks for turned up, but {u} of the {a} checks could not be run on "
        "this record.",
    ),
    _t(
        "summary.none.notApplicable",
        "None of the checks this report looks for applies to this answer.",
        quoted=False,
    ),
    _t("summary.none", "Nothing this report looks for turned up in the record."),
)

TEMPLATES: Final[Mapping[str, Template]] = {t.id: t for t in _ALL}
"""Every template by id (ids are unique: a test pins that)."""


# ── chips ────────────────────────────────────────────────────────────────────────────────────


@dataclass(frozen=True, slots=True)
class ChipTemplate:
    """A chip's fixed mark, words and tone, by template id."""

    id: str
    mark: str
    text: str
    tone: Tone = "plain"
    quoted: bool = True

    def chip(self) -> Chip:
        """The chip as the account's data."""
        return Chip(self.mark, self.text, self.tone)


CHIPS: Final[Mapping[str, ChipTemplate]] = {
    c.id: c
    for c in (
        ChipTemplate("chip.decidedDelivered", "decided-delivered", "decided = delivered", "ok"),
        ChipTemplate(
            "chip.decidedNotDelivered", "decided-not-delivered", "decided ≠ delivered", "bad"
        ),
        ChipTemplate("chip.notRecorded", "not-recorded", "not recorded"),
        ChipTemplate("chip.notDeclared", "not-declared", "no coverage declared"),
        ChipTemplate("chip.declared", "declared", "declared"),
        ChipTemplate("chip.undeclaredEmpty", "undeclared-empty", "undeclared empty", "bad"),
        ChipTemplate("chip.noneFound", "none-found", "none found", "ok"),
        ChipTemplate("chip.beforePause", "before-pause", "before a pause — not in this record"),
        ChipTemplate(
            "chip.beforePause.held",
            "before-pause",
            "before the pause — read from the state this record holds",
        ),
        ChipTemplate(
            "chip.beforePause.carried",
            "before-pause",
            "before the pause — read from the earlier leg of this run",
            quoted=False,
        ),
        ChipTemplate("chip.kind.existence", "kind", "whether it exists"),
        ChipTemplate("chip.kind.scope", "kind", "outside what it covers"),
    )
}


# Chips are frozen: one instance per template serves every line.
_CHIP_VALUES: Final[Mapping[str, Chip]] = {c.id: c.chip() for c in CHIPS.values()}


def chip(chip_id: str) -> Chip:
    """The chip of a chip template id (KeyError on an unknown id: a programming error)."""
    return _CHIP_VALUES[chip_id]


# ── filling ──────────────────────────────────────────────────────────────────────────────────

_PLACEHOLDER = re.compile(r"\{([A-Za-z][A-Za-z0-9]*)\}")


class FillError(ValueError):
    """A template named a variable the caller did not give (the line becomes ``unreadable.line``)."""


def fill(template_id: str, values: Mapping[str, str]) -> str:
    """The template's text with each ``{name}`` replaced once by ``values[name]``.

    The template is split once at its placeholders (literal, name, literal, ...) and the values are
    joined in: a value that itself contains ``{x}`` stays as written, so a model-chosen id can never
    inject a placeholder.
    """
    parts = _parts.get(template_id)
    if parts is None:
        parts = _parts[template_id] = tuple(_PLACEHOLDER.split(TEMPLATES[template_id].text))
    if len(parts) == 1:
        return parts[0]  # most templates have no placeholder
    out = [parts[0]]
    for index in range(1, len(parts), 2):
        name = parts[index]
        if name not in values:
            raise FillError(f"template {template_id}: no value for {{{name}}}")
        out.append(values[name])
        out.append(parts[index + 1])
    return "".join(out)


_parts: dict[str, tuple[str, ...]] = {}
"""Each template's text split at its placeholders (one entry per template: a fixed set)."""


def placeholders(template_id: str) -> frozenset[str]:
    """The variable names a template uses."""
    return frozenset(_PLACEHOLDER.findall(TEMPLATES[template_id].text))


def weakest(sources: Iterable[str]) -> str:
    """The weakest voucher among ``sources`` (person > library > tool:<name> > model > app)."""
    result, result_rank = "person", SOURCE_RANK["person"]
    ranks = SOURCE_RANK
    for source in sources:
        # A tool sits between library and model; an unknown voucher is trusted least.
        rank = 2 if source.startswith("tool:") else ranks.get(source, 4)
        if rank > result_rank:
            result, result_rank = source, rank
    return result


# ── phrases used as variables ────────────────────────────────────────────────────────────────


def count_phrase(n: int, singular: str, plural: str) -> str:
    """``1 skill`` / ``2 skills``."""
    return f"{n} {singular if n == 1 else plural}"


def number_text(value: float) -> str:
    """A number as JavaScript writes it (``1``, not ``1.0``; shortest round-trip digits)."""
    if isinstance(value, int) or (
        math.isfinite(value) and value.is_integer() and abs(value) < 1e21
    ):
        return str(int(value))
    return repr(value)


def cut(text: str, limit: int = ID_CHARS) -> str:
    """``text`` cut at ``limit`` characters, marked with an ellipsis when cut."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def skill_phrase(skill_id: str, label: str | None) -> str:
    """``<label> skill (<id>)`` when a label exists, else ``<id> skill``."""
    shown = cut(skill_id)
    return f"{cut(label)} skill ({shown})" if label else f"{shown} skill"


def tool_phrase(name: str | None) -> str:
    """A tool's name as a sentence subject (``an unnamed tool`` when the record has none)."""
    return cut(name) if name else "an unnamed tool"
