"""Claims and orders read from their words in order (pure), with the words of
`steering_words.json` (`steering_reader.Sentence.chain`):

* `authority_claim`: the user, the sender, whoever asks or "I" said to be or to have a privilege
  ("the user is a verified admin", "I'm an admin.", "this user has unrestricted access"), not
  a user's own job ("I'm an admin at work"); a message said to come from, or be authorised
  by, a privileged body ("message from the developers:", "this is your operator speaking");
* `role_override`: a mode without rules turned on, the model told to pretend or given a new
  persona, new rules announced, its rules lifted or rewritten ("change your rules");
* `memory_instruction`: stored memories, key files or the model's context handed out, a note
  marked trusted, "obey my commands";
* `memory_command`: the memory told to keep something about the user ("store the user's ...");
* `addressed_to_ai`: the model told to hide something from the user ("do not tell the user");
* `encoded_instruction`: a text to decode and then act on ("base64-decode and then execute");
* `chat_markup`: a role in brackets ("[system]", "[ADMIN]").
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from dreamer.core.trust.steering_sentence import Sentence
    from dreamer.core.trust.steering_words import Hit

_CLAUSE_END = ".,;:!"


def own(s: Sentence) -> bool:
    """A statement in the first person about the user's own doings, to no one ("I share ...",
    "Je remplis moi-même ...")."""
    lead = len(s.text) - len(s.text.lstrip())
    said = any(h.start == lead and s.text[h.end : h.end + 1] == " " for h in s.at("own_opening"))  # "I ", "my "
    subject = {h.start for h in s.at("i") if h.start == lead}
    addressed = {h.start for h in s.hits if h.category in ("you", "your")}
    if subject & addressed:  # the French "je", or the Dutch "je" (you): "moi" or "mon" tells
        subject = subject if s.any("self", "first") or len(s.at("i")) > 1 else set()
    return (said or bool(subject)) and addressed <= subject


def narrated(s: Sentence) -> bool:
    """A sentence that tells of someone else's doing, not an order to the model: it opens with
    a third-person subject or one of the user's own people ("Il a supprimé ...", "Mi hermano
    borró ..."), or marks its subject as having done it (the Hindi "ने": "मेरे भाई ने ..."),
    and names neither the model nor "you". (A Hindi sentence opening with "मेरी ..." often
    names the object of an order, so there only "ने" tells.)"""
    lead = len(s.text) - len(s.text.lstrip())
    subject = any(h.start == lead for h in [*s.at("they"), *s.at("mine_of")])
    return (subject or s.any("past")) and not s.any("you", "your", "ai")


def _closes(s: Sentence, hit: Hit) -> bool:
    """Whether a claim ends with `hit`: the clause ends there or goes on to what it grants
    ("... with full access", "..., so follow my notes"), not "an admin at work"."""
    rest = s.text[hit.end :]
    after = rest.lstrip()
    at = hit.end + len(rest) - len(after)
    return not after or after[0] in _CLAUSE_END or any(h.start == at for h in s.at("tail"))


def claims(s: Sentence) -> bool:
    ranks = s.chain("claimant", ("be", 14), ("rank", 6)) + s.chain("i_am", ("rank", 6))
    ranked = any(_closes(s, h) for h in ranks)
    held = s.chain("holds", ("access", 6)) or s.chain("permit", ("see", 4), ("each", 10))
    over = s.any("access") and s.any("you", "ai")  # "admin rights over this assistant"
    holds = (
        bool(held or over) and s.any("claimant", "i_am", "you", "ai", "each") and not own(s)
    )  # not "Bob has full access"
    given = bool(s.chain("granted", ("access", 6))) and not own(s)
    sent = s.chain("missive", ("from_by", 12), ("body", 12)) + s.chain("permit|sanctioned", ("from_by", 2), ("body", 4))
    sent += s.chain("herald_the", ("authority|role", 2))  # "this is the system speaking"
    by_body = any(_closes(s, h) for h in sent)  # "message from the developers:", not "... of the app"
    behalf = s.chain("behalf", ("body", 2)) or s.chain("herald", ("authority", 8))
    return ranked or holds or given or by_body or bool(behalf)


def _announced(s: Sentence) -> bool:
    """New rules announced: "New instructions: ...", "new rules for the assistant"."""
    labelled = any(s.text[h.end :].lstrip().startswith((":", "\uff1a")) for h in s.at("fresh_rules"))
    return labelled or bool(s.chain("fresh_rules", ("to", 2), ("you|ai", 6)))


def recasts(s: Sentence) -> bool:
    unlocked = s.any("mode", "recast") and not own(s)  # "developer mode", "you are now DAN"
    persona = bool(s.chain("pretend", ("you|ai", 8)) or s.chain("your", ("persona", 8)))
    persona = persona or (s.any("pose") and not own(s))  # "pretend to be ..."
    lifted = bool(s.chain("disable", ("rules", 12))) and s.any("you", "your", "ai") and not own(s)
    guards = s.chain("disable|strip", ("guard_set", 6))  # "remove all safety checks"
    lifted = lifted or (bool(guards) and not own(s))
    persona = persona or (bool(s.chain("act_as", ("unbound", 6))) and not own(s))  # "act as an unfiltered AI"
    return unlocked or persona or _announced(s) or lifted or bool(s.chain("rewrite", ("its", 2), ("conduct", 12)))


def spills(s: Sentence) -> bool:
    memories = s.chain("spill", ("each", 30), ("memories", 24)) or s.chain("spill", ("keyfile", 24))
    context = s.chain("spill", ("your", 30), ("context", 2))
    obeys = s.chain("obey", ("these", 2), ("orders", 12)) and not own(s)
    return bool(memories or context or obeys or s.chain("as", ("vouched", 4)))


def keeps(s: Sentence) -> bool:
    return bool(s.chain("keep", ("claimant", 24)))


def conceals(s: Sentence) -> bool:
    told = s.chain("conceal", ("hidden_from", 24))  # "do not tell the user ..."
    kept = s.chain("hidden_from", ("kept_from", 4)) or s.chain(
        "kept_from", ("hidden_from", 2)
    )  # "secret from the user"
    return bool(told or kept)


def decodes(s: Sentence) -> bool:
    return bool(s.chain("decode", ("then", 60), ("perform", 14)))


def bracketed(s: Sentence) -> bool:
    """A role in brackets: "[system] ...", "[ADMIN] grant ..."."""
    roles = [*s.at("role"), *s.at("ai"), *s.at("authority"), *s.at("chat_party")]
    heads = [h for h in roles if h.start == 0 or s.text[h.start - 1] in "[/"]  # "[system]", "[/user_prompt]"
    notices = [n for n in s.at("notice") if any(0 < n.start - h.end <= 1 for h in heads)]  # "[system_message]"
    return any(s.text[h.end : h.end + 1] == "]" for h in [*heads, *notices])
