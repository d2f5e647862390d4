"""The words that say a secret follows, in English, French, German, Spanish, Portuguese, Italian
and Japanese: read by `meaning`, from the table `meaning_words.json` (data, read once).

A label is a *head* (what the secret is: a password, a PIN, a code, an answer, ...), which may
carry a *thing* (what it opens: the Wi-Fi, a door, an alarm, a safe, a locker, a card) before it
("door code", "WLAN-Passwort", "玄関の暗証番号"), right after it ("code wifi", "clé Wi-Fi") or in
the words that follow it ("the code for the front door", "il codice del cancello"). The head
says the shape the value takes (its *family*: `shapes.SHAPES`); a "code" or "key" head says
nothing alone ("the code is 200 lines") and counts only with a thing it opens; the first thing
said names the kind of a PIN, key or code (and makes a password a Wi-Fi password).

Every entry of a list is a regex fragment, matched case-insensitively (longer entries first
where one begins another); the table's other lists are:

* ``not_a_value``: words that, after "the password is", describe a secret instead of giving it;
* ``describing``: forms of a word that describe ("abgelaufen", "bloqué", "expired");
* ``function_words``: words a sentence has and a passphrase of plain words seldom does;
* ``units``: after a number, a size, a time or a price, not a code;
* ``articles``, ``prepositions`` ("the code *for the* door"), ``after_label`` ("la contraseña
  *nueva* es"), ``verbs`` ("is", "lautet", "c'est", "は"), ``changed`` ("was reset to");
* ``questions`` and ``personal_question``: a question before a bare "answer:" that makes it a
  secret;
* ``plain_word_heads``: heads whose value may be a plain word ("my password is swordfish");
* ``door`` and ``login``: words before a bare "pass" or "code" that say what it opens;
* ``use_verbs``, ``use_for``, ``targets``, ``everything``: "*use* X *for* the *VPN* / *everything*";
* ``open_verbs``, ``open_with``, ``type_verbs``: "the gate *opens with* X", "*type* X";
* ``now``: "the password is *now* X".
"""

from __future__ import annotations

import json
from importlib.resources import files

_DATA = json.loads(files("dreamer.core.secrets").joinpath("meaning_words.json").read_text(encoding="utf-8"))


def _alt(name: str) -> str:
    return "|".join(_DATA[name])


HEADS: tuple[tuple[str, str, tuple[str, ...]], ...] = tuple(
    (h["family"], h["kind"], tuple(h["words"])) for h in _DATA["heads"]
)
THINGS: tuple[tuple[str, tuple[str, ...]], ...] = tuple((t["kind"], tuple(t["words"])) for t in _DATA["things"])
NOT_A_VALUE = frozenset(_DATA["not_a_value"])
FUNCTION_WORDS = frozenset(_DATA["function_words"])
DESCRIBING = _alt("describing")
UNITS = _alt("units")
ARTICLES = _alt("articles")
PREPOSITIONS = _alt("prepositions")
VERBS = _alt("verbs")
CHANGED = _alt("changed")
QUESTIONS = _alt("questions")
AFTER_LABEL = _alt("after_label")
PERSONAL_QUESTION: str = _DATA["personal_question"]
PLAIN_WORD_HEADS = _alt("plain_word_heads")
DOOR = _alt("door")
LOGIN = _alt("login")
NOW = _alt("now")
TARGETS = _alt("targets")
EVERYTHING = _alt("everything")
USE_VERBS = _alt("use_verbs")
USE_FOR = _alt("use_for")
OPEN_VERBS = _alt("open_verbs")
OPEN_WITH = _alt("open_with")
TYPE_VERBS = _alt("type_verbs")
