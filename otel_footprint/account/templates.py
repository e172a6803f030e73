"""Every sentence the account can write: template ids, their exact words, vouchers and chips.

Every text is this project's own wording. The reference (agentfootprint-reference §4.4–4.8) names
the templates and what each one says; its quoted sentences were read for their meaning only, and
a test keeps any of them from reappearing here word for word. Template ids are the reference's,
so a line can still be matched to the upstream's by id.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Final

from otel_footprint.account.model import Chip, Tone

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
    quoted: bool = False
    """Kept for readers of template set 1 (where True marked the upstream's own words); every
    text of set 2 is ours, so it is always False."""


def _t(template_id: str, text: str, voucher: str = "library", quoted: bool = False) -> Template:
    return Template(template_id, text, voucher, quoted)


_ALL: Final[tuple[Template, ...]] = (
    # ── You asked ───────────────────────────────────────────────────────────────────────────
    _t("asked.question", "“{question}”", "person"),
    _t(
        "asked.resumed",
        "This answer picked up after a pause. The message the run kept: “{message}”",
        "person",
    ),
    _t(
        "asked.carried",
        "This answer picked up after a pause. The message as the run's earlier leg recorded it: “{message}”",
        "person",
    ),
    _t("asked.none", "The question is not in this record."),
    # ── It understood (check 1) ─────────────────────────────────────────────────────────────
    _t(
        "understood.rule",
        "The {skill} was chosen by the library's router after an app rule matched.",
    ),
    _t(
        "understood.rule.witness",
        "The {skill} was chosen by the library's router after an app rule matched the words “{witness}”.",
    ),
    _t("understood.intent", "The {skill} was chosen by the library's router."),
    _t(
        "understood.scores.allOthers",
        "It ranked first in the app's scores: {top}, with {next} for each other skill.",
        "app",
    ),
    _t(
        "understood.scores",
        "It ranked first in the app's scores: {top}, ahead of {next} for the runner-up, the {nextSkill}.",
        "app",
    ),
    _t("understood.continuity", "The {skill} carried over from the previous question."),
    _t("understood.decider", "A dedicated routing model ({model}) chose the {skill}.", "model"),
    _t("understood.decider.noModel", "A dedicated routing model chose the {skill}.", "model"),
    _t(
        "understood.menu",
        "No routing rule settled it; the model was given {offered} to pick from.",
    ),
    _t(
        "understood.menu.bare",
        "No routing rule settled it; the model was given a list of skills to pick from.",
    ),
    _t("understood.menu.picked", "The model went on to open the {skill}.", "model"),
    _t(
        "understood.none",
        "No skill was chosen; the model answered with its general instructions only.",
    ),
    _t("understood.notConfigured", "This app does not send questions to skills."),
    _t("understood.notRecorded", "The record does not say how the question was routed."),
    _t(
        "understood.observed",
        "This run was read from its instrumentation alone, which records no routing decision: "
        "there is no chosen skill to check.",
    ),
    _t(
        "understood.resumed",
        "The question was routed before the pause; that part is missing from this record.",
    ),
    _t("understood.delivered", "The model had the skill in front of it when it answered."),
    _t("understood.notDelivered", "The model never received the {skill}."),
    _t(
        "understood.notDelivered.other",
        "The model never received the {skill}; it got the {other} in its place.",
    ),
    _t(
        "understood.delivery.unknown",
        "This record cannot show whether the model received the skill.",
    ),
    _t("understood.refused", "A check called {by} blocked the {skill} from opening."),
    _t("understood.refused.unnamed", "A check blocked the {skill} from opening."),
    _t(
        "understood.refused.more",
        "…plus {more} for the same skill, not shown.",
    ),
    _t("understood.rejected", "The skill graph blocked the {skill} from opening."),
    _t("understood.confidence.none", "The record does not say how confident the routing was."),
    _t(
        "understood.app.notRecorded",
        "The record does not say whether the app chose a skill for this question itself.",
        "app",
    ),
    # ── It checked / It did not check / It found (ours: the reference names, not words) ─────
    _t("checked.noCalls", "No tool was called for this answer."),
    _t("checked.declared", "{tool} says it checked:"),
    _t("checked.item", "{what}"),
    _t("checked.undeclared", "{tool} did not say what it checked."),
    _t("checked.failed", "{tool} failed."),
    _t("checked.refused", "{tool} was refused by a rule and did not run."),
    _t(
        "checked.paused",
        "{tool} was waiting for a person's answer when this part of the run paused.",
    ),
    _t("checked.unnamed", "A tool call is in this record without its tool's name."),
    _t("checked.more", "…and {more}."),
    _t("notChecked.noCalls", "No tool was called for this answer."),
    _t("notChecked.declared", "{tool} says it did not check:"),
    _t("notChecked.cannotCover", "{tool} says it can never check:"),
    _t("notChecked.item", "{what}"),
    _t("notChecked.none", "{tool} says there is nothing it left unchecked."),
    _t("notChecked.undeclared", "{tool} did not say what it did not check."),
    _t(
        "notChecked.notRun",
        "No tool call of this answer ran, so none could say what it did not check.",
    ),
    _t("notChecked.more", "…and {more}."),
    _t("found.noCalls", "No tool was called for this answer."),
    _t("found.absent", "{tool} found nothing and said what it searched."),
    _t(
        "found.undeclaredEmpty",
        "{tool} returned an empty result without saying what it searched.",
    ),
    _t("found.rows", "{tool} returned {rows}."),
    _t("found.result", "{tool} returned: “{result}”"),
    _t("found.shapeUnknown", "{tool} returned a result whose shape is not declared."),
    _t("found.notRecorded", "What {tool} returned is not in this record."),
    _t("found.paused", "{tool} had not returned when this part of the run paused."),
    _t("found.failed", "{tool} failed; it returned no result."),
    _t("found.refused", "{tool} was refused and returned no result."),
    _t("found.more", "…and {more}."),
    # ── How sure ────────────────────────────────────────────────────────────────────────────
    _t("howSure.standing.none", "The record gives no rating of how sure this answer is."),
    _t("howSure.evidence.off", "No evidence check was set up for this answer."),
    _t(
        "howSure.evidence.notRecorded",
        "What the evidence check decided is not in this record.",
    ),
    # ── Signals ─────────────────────────────────────────────────────────────────────────────
    _t(
        "signal.decidedNotDelivered",
        "The {skill} was chosen for this question, yet the model never received it.",
    ),
    _t("signal.existenceNotChecked", "{tool} reports not having checked {short}."),
    _t(
        "signal.existenceNotChecked.full",
        "{tool} reports not having checked {what}.",
    ),
    # The reference elides this one ("… can never check …"): completed like its sibling.
    _t(
        "signal.existenceCannotCheck",
        "{tool} reports being unable ever to check {short}.",
    ),
    _t(
        "signal.existenceCannotCheck.full",
        "{tool} reports being unable ever to check {what}.",
    ),
    _t(
        "signal.undeclaredEmptyUsed",
        "In this answer, {tool} came back empty without saying what it had searched.",
    ),
    _t(
        "signal.undeclaredEmptyInView",
        "The model answered with an empty result in view from {tool}, in an earlier answer {distance}, that never said what it had searched.",
    ),
    # ── Unreachable (why a check could not run) ─────────────────────────────────────────────
    _t(
        "unreachable.decided",
        "Whether the chosen skill reached the model cannot be shown: the routing is missing from this record.",
    ),
    _t(
        "unreachable.delivery",
        "Whether the chosen skill reached the model cannot be shown: this record does not hold everything the model was given.",
    ),
    _t(
        "unreachable.unnamed",
        "Whether a tool checked that the requested thing exists cannot be shown: the record does not name the tool.",
    ),
    _t(
        "unreachable.existence",
        "Whether {tool} checked that the requested thing exists cannot be shown: the items it left unchecked carry no kind.",
    ),
    _t(
        "unreachable.shape",
        "Whether {tool} came back empty cannot be shown: the shape of its result is not declared.",
    ),
    _t(
        "unreachable.result",
        "Whether {tool} came back empty cannot be shown: this record does not hold what the model read.",
    ),
    _t(
        "unreachable.calls",
        "Which tools {passes} called is not in this record, so whether their results came back "
        "empty cannot be shown.",
    ),
    # ── Check explanations (gen_ai.evaluation.explanation; ours) ────────────────────────────
    _t(
        "check.decided.delivered",
        "The {skill} was decided for this question and was given to the model.",
    ),
    _t(
        "check.decided.notApplicable",
        "No routing rule settled on a skill here, so there is no chosen skill to check.",
    ),
    _t(
        "check.existence.passed",
        "No tool said it left unchecked whether the thing asked about exists.",
    ),
    _t(
        "check.existence.notApplicable",
        "No tool call of this answer said what it did not check.",
    ),
    _t(
        "check.empty.passed",
        "Every empty tool result of this answer said what it had searched, or none came back empty.",
    ),
    _t(
        "check.empty.notApplicable",
        "No tool call of this answer returned a result to judge.",
    ),
    # ── Anything wrong ──────────────────────────────────────────────────────────────────────
    _t(
        "wrong.errors",
        "{calls} had trouble: {failed} failed, {refused} blocked by a rule, {declined} turned down by a person, {notRun} never ran.",
    ),
    _t("wrong.noErrors", "Every tool call ran without failing or being blocked."),
    _t("wrong.none", "The {checks} that could run on this record found nothing."),
    _t("wrong.unreachable", "{u} of the {a} checks had too little in this record to run."),
    _t(
        "wrong.unreachable.all",
        "None of this report's checks had enough in this record to run.",
    ),
    _t("wrong.more", "…plus {more}, not shown."),
    _t("wrong.notApplicable", "None of this report's checks concerns this answer."),
    _t(
        "wrong.beforePause",
        "Part of this answer happened before a pause; what happened then is not in this record.",
    ),
    _t(
        "wrong.beforePause.held",
        "Part of this answer came before a pause; this record has only the state the run kept from then, and no routing verdict is in it.",
    ),
    _t(
        "wrong.beforePause.held.events",
        "Part of this answer came before a pause; this record has the state the run kept from then, not the events of that part.",
    ),
    _t(
        "wrong.beforePause.carried",
        "Part of this answer happened before a pause; its routing was read from the earlier leg "
        "of this run, which is a separate trace.",
    ),
    _t("unreadable.line", "This line could not be built from the record."),
    # ── Summary ─────────────────────────────────────────────────────────────────────────────
    _t("summary.unfinished", "The record does not show this run reaching its end."),
    _t("summary.signals", "{signals}"),
    _t("summary.signals.beforePause", "What came before the pause is missing from this record."),
    _t(
        "summary.resumed",
        "This answer picked up after a pause; what came before the pause is missing from this record.",
    ),
    _t(
        "summary.resumed.held",
        "This answer picked up after a pause; this record has the state the run kept from then, not the events of that part.",
    ),
    _t(
        "summary.resumed.carried",
        "This answer picked up after a pause; its routing comes from the earlier leg of this run.",
    ),
    _t("summary.none.nothingRun", "None of this report's checks could run on this record."),
    _t(
        "summary.none.partial",
        "This report found nothing, but {u} of the {a} checks had too little in this record to run.",
    ),
    _t(
        "summary.none.notApplicable",
        "None of this report's checks concerns this answer.",
    ),
    _t("summary.none", "This report found nothing in the record."),
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
    quoted: bool = False

    def chip(self) -> Chip:
        """The chip as the account's data."""
        return Chip(self.mark, self.text, self.tone)


CHIPS: Final[Mapping[str, ChipTemplate]] = {
    c.id: c
    for c in (
        ChipTemplate("chip.decidedDelivered", "decided-delivered", "decided and delivered", "ok"),
        ChipTemplate(
            "chip.decidedNotDelivered", "decided-not-delivered", "decided, not delivered", "bad"
        ),
        ChipTemplate("chip.notRecorded", "not-recorded", "missing from the record"),
        ChipTemplate("chip.notDeclared", "not-declared", "coverage not declared"),
        ChipTemplate("chip.declared", "declared", "declared"),
        ChipTemplate(
            "chip.undeclaredEmpty", "undeclared-empty", "empty, search not declared", "bad"
        ),
        ChipTemplate("chip.noneFound", "none-found", "nothing found", "ok"),
        ChipTemplate(
            "chip.beforePause", "before-pause", "before a pause: missing from this record"
        ),
        ChipTemplate(
            "chip.beforePause.held",
            "before-pause",
            "before the pause: read from the state the run kept",
        ),
        ChipTemplate(
            "chip.beforePause.carried",
            "before-pause",
            "before the pause: read from the run's earlier leg",
        ),
        ChipTemplate("chip.kind.existence", "kind", "existence of the thing"),
        ChipTemplate("chip.kind.scope", "kind", "beyond its coverage"),
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
    parts = template_parts(template_id)
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


def template_parts(template_id: str) -> tuple[str, ...]:
    """The template's text split at its placeholders: literal, name, literal, ... (one literal
    when it has none). KeyError on an unknown id."""
    return _PARTS[template_id]


_PARTS: Final[Mapping[str, tuple[str, ...]]] = {
    t.id: tuple(_PLACEHOLDER.split(t.text)) for t in _ALL
}
"""Each template's text split at its placeholders, once at import."""


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
