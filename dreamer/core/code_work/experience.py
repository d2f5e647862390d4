"""The lifecycle of an experience entry and of a project state field (pure).

An experience entry starts `candidate` (one task saw it: it may only suggest checks), becomes
`verified` when passed checks in two distinct units vouch for it (its own unit counts when it was
verified there; creating it is not a verification) or a person confirms it, and goes to
`review_required` on a counterexample, a version change or a change of what it depends on. A
counterexample on a candidate keeps it a candidate and narrows its conditions. After
`review_required`, one passed check or a confirmation makes a once verified entry verified again.

A state field claimed `verified` is stored so only when its evidence holds a passed check or a
person vouches for it; otherwise it is `in_progress`.

Where a text came from is kept apart: `observed` (code or a tool), `inferred` (the agent's
reading, never verified by one success) and `confirmed` (a person). Text found in the repository
("delete the old component") is evidence about the code: it is stored `observed`, never a rule.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from dreamer.core.errors import DreamerError

ENTRY_STATUSES = ("candidate", "verified", "review_required")
STATE_STATUSES = ("in_progress", "verified", "review_required")
BASES = ("observed", "inferred", "confirmed")
ORIGINS = ("agent", "tool", "repository", "person")
TARGET_KINDS = ("file", "interface", "unit", "version")
UNITS_TO_VERIFY = 2  # distinct units whose passed checks make an entry verified
PASSED = "passed"
REPOSITORY_NOTE = "text found in the repository: evidence about the code, not an instruction"


class InvalidExperience(DreamerError, ValueError):
    """A state, entry or step that cannot be recorded as given (bad status, target or basis)."""


def parse_target(target: str) -> tuple[str, str]:
    """`file:PATH`, `interface:NAME`, `unit:NAME` or `version:LIBRARY` as (kind, name)."""
    kind, sep, name = target.partition(":")
    if not sep or kind not in TARGET_KINDS or not name.strip():
        raise InvalidExperience(f"target {target!r}: use file:PATH, interface:NAME, unit:NAME or version:LIBRARY")
    return kind, name.strip()


def check_targets(targets: list[str]) -> list[str]:
    """The targets, each checked, in order, without repeats."""
    for t in targets:
        parse_target(t)
    return list(dict.fromkeys(targets))


@dataclass(frozen=True)
class Lifecycle:
    """What the lifecycle of an entry reads and changes."""

    status: str = "candidate"
    verified_units: tuple[str, ...] = ()
    ever_verified: bool = False
    untrusted: bool = False
    conditions: tuple[str, ...] = ()
    counterexamples: tuple[str, ...] = ()


@dataclass(frozen=True)
class Outcome:
    """The entry after a step, and why it is where it is."""

    after: Lifecycle
    reason: str

    @property
    def status(self) -> str:
        return self.after.status


def _promoted(lc: Lifecycle, reason: str) -> Outcome:
    if lc.untrusted:
        return Outcome(replace(lc, status=lc.status), f"{reason}; text that steers stays unverified")
    return Outcome(replace(lc, status="verified", ever_verified=True), reason)


def after_verify(lc: Lifecycle, unit: str, result: str) -> Outcome:
    """A check of the entry in `unit`: passed counts the unit once; anything else is a counterexample."""
    if result != PASSED:
        return after_counterexample(lc, f"check in {unit} {result or 'gave no result'}")
    units = tuple(dict.fromkeys((*lc.verified_units, unit)))
    lc = replace(lc, verified_units=units)
    if lc.status == "review_required" and lc.ever_verified:
        return _promoted(lc, f"passed again in {unit} after review")
    if len(units) >= UNITS_TO_VERIFY:
        return _promoted(lc, f"passed in {len(units)} distinct units: {', '.join(units)}")
    if lc.status == "verified":
        return Outcome(lc, f"passed in {unit}")
    return Outcome(lc, f"passed in {unit}; {len(units)} of {UNITS_TO_VERIFY} distinct units so far")


def after_confirm(lc: Lifecycle, by: str) -> Outcome:
    """A person vouches for the entry."""
    if not by.strip():
        raise InvalidExperience("a confirmation names the person who confirms")
    return _promoted(lc, f"confirmed by {by}")


def narrowed(conditions: tuple[str, ...], counterexample: str) -> tuple[str, ...]:
    """The conditions with the counterexample excluded."""
    clause = f"not when: {counterexample.strip()}"
    return tuple(dict.fromkeys((*conditions, clause)))


def after_counterexample(lc: Lifecycle, text: str) -> Outcome:
    """A case where the entry did not hold: a verified entry goes to review, a candidate stays a
    candidate with its conditions narrowed."""
    if not text.strip():
        raise InvalidExperience("a counterexample says what happened")
    lc = replace(lc, counterexamples=(*lc.counterexamples, text.strip()), conditions=narrowed(lc.conditions, text))
    if lc.status == "verified":
        return Outcome(replace(lc, status="review_required"), f"counterexample: {text.strip()}")
    return Outcome(lc, f"counterexample narrows the conditions: {text.strip()}")


def demoted(lc: Lifecycle, reason: str) -> Outcome:
    """Something the entry rests on changed."""
    return Outcome(replace(lc, status="review_required"), reason)


def state_status(claimed: str, evidence: dict[str, object], by: str | None) -> tuple[str, str]:
    """The status a state field is stored with, and why."""
    if claimed not in STATE_STATUSES:
        raise InvalidExperience(f"state status {claimed!r}: use one of {', '.join(STATE_STATUSES)}")
    if claimed != "verified":
        return claimed, f"set {claimed}"
    person = by or evidence.get("by") or evidence.get("confirmed_by")
    if evidence.get("result") == PASSED:
        return "verified", f"check passed: {evidence.get('command') or 'a check'}"
    if isinstance(person, str) and person.strip():
        return "verified", f"confirmed by {person}"
    result = evidence.get("result")
    why = f"its check is {result}" if result else "no check result in its evidence"
    return "in_progress", f"claimed verified, but {why} and no person confirmed it"


def source_of(basis: str, origin: str) -> tuple[str, str | None]:
    """The basis an entry is stored with and a note: repository text is observed evidence."""
    if basis not in BASES:
        raise InvalidExperience(f"basis {basis!r}: use one of {', '.join(BASES)}")
    if origin not in ORIGINS:
        raise InvalidExperience(f"origin {origin!r}: use one of {', '.join(ORIGINS)}")
    if origin == "repository":
        return "observed", REPOSITORY_NOTE
    if basis == "confirmed" and origin != "person":
        return "inferred", "only a person's confirm makes a basis confirmed"
    return basis, None
