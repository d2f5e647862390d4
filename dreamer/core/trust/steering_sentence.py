"""One sentence read as the words it is made of (pure): where each category of
`steering_words.json` stands in it, for the readings of `steering_reader`, `steering_claims` and
`steering_labels`."""

from __future__ import annotations

from bisect import bisect_left

from dreamer.core.trust.steering_view import word_view
from dreamer.core.trust.steering_words import Hit, lexicon

NEAR = 48  # characters between two words that belong together ("as ... your developer")


class Sentence:
    """One sentence and where each category's words are in it."""

    def __init__(self, text: str) -> None:
        self.raw, self.text = text, word_view(text)
        self.hits = lexicon().hits(self.text)
        self.by: dict[str, list[Hit]] = {}
        for hit in self.hits:
            self.by.setdefault(hit.category, []).append(hit)
        self.has = set(self.by)

    def at(self, category: str) -> list[Hit]:
        return self.by.get(category, [])

    def any(self, *categories: str) -> bool:
        return not self.has.isdisjoint(categories)

    def near(self, one: str, other: str, span: int = NEAR) -> bool:
        """Whether a word of `one` starts within `span` characters of a word of `other`."""
        starts = sorted(h.start for h in self.at(other))
        for a in self.at(one):
            i = bisect_left(starts, a.start - span)
            if i < len(starts) and starts[i] <= a.start + span:
                return True
        return False

    def chain(self, first: str, *steps: tuple[str, int]) -> list[Hit]:
        """Words in order: one of `first`, then one of each step's categories (either ``"a|b"``)
        starting at most its gap of characters after the last ended ("the user" "is" "root");
        the last words of the chains found."""
        found = [h for c in first.split("|") for h in self.at(c)]
        for categories, gap in steps:
            ends = [h.end for h in found]
            found = [
                h for c in categories.split("|") for h in self.at(c) if any(0 < h.start - end <= gap for end in ends)
            ]
        return found

    def opening(self) -> tuple[list[Hit], bool]:
        """The words the sentence opens with, past a greeting ("hey", "listen,") or an address
        ("to the"), and whether a greeting opened it."""
        at, greeted = 0, False
        for hit in sorted(self.hits, key=lambda h: h.start):
            if hit.start > at + 2:
                break
            if hit.category in ("hey", "to"):  # "hey model", or "to the AI:" (then a colon follows)
                rest = self.text[hit.end :]
                at, greeted = hit.end + len(rest) - len(rest.lstrip(" ,!")), greeted or hit.category == "hey"
        return [h for h in self.hits if at <= h.start <= at + 1], greeted
