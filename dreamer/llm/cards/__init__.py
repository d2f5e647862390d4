"""Prompt cards: each prompt the project sends a model is one readable Markdown file here.

A card holds its purpose, what to keep and what to drop and why, how its input is marked, its
rubric and worked examples (``### Example:`` headings, each a ```` ```text ```` input block and a
```` ```json ```` output block). ``{{name}}`` includes the shared fragment ``_name.md``; ``$limit``
and the like are filled in at render time. The output schema is not written in the card: it is
rendered from the pydantic model the caller hands in (every field's description lives on its
`Field`), so the card and the schema the client sends cannot drift apart.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from string import Template
from typing import Any

from pydantic import BaseModel

_INCLUDE = re.compile(r"^\{\{(\w+)\}\}$", re.M)
_EXAMPLE = re.compile(r"^### Example: (.+?)\n```text\n(.*?)\n```\n```json\n(.*?)\n```", re.M | re.S)
CARDS = ("extract_agent", "extract_code", "judge", "flush", "team", "compact", "screen")


@dataclass(frozen=True)
class Example:
    """A worked example of a card: its title, the input lines and the output JSON text."""

    title: str
    given: str
    answer: str


@lru_cache(maxsize=32)
def card_text(name: str) -> str:
    """The card's Markdown, shared fragments included, placeholders left as they are."""
    text = _read(name)
    return _INCLUDE.sub(lambda m: _read(f"_{m.group(1)}").rstrip("\n"), text)


def _read(name: str) -> str:
    if not re.fullmatch(r"_?\w+", name):
        raise ValueError(f"no card {name!r}")
    path = resources.files(__name__) / f"{name}.md"
    if not path.is_file():
        raise ValueError(f"no card {name!r}")
    return path.read_text(encoding="utf-8")


_EXAMPLES = re.compile(r"^## Examples\n.*?(?=^## |\Z)", re.M | re.S)


def render_card(name: str, schema: type[BaseModel], *, examples: bool = True, **values: object) -> str:
    """The system prompt of card `name`: its text with `values` filled in (without its
    `## Examples` section unless `examples`: the lean card a small window gets), then the
    output fields of `schema` described. A placeholder left without a value is an error."""
    text = card_text(name) if examples else _EXAMPLES.sub("", card_text(name))
    body = Template(text).substitute({k: str(v) for k, v in values.items()})
    return f"{body.rstrip()}\n\n## Output: one JSON object\n{describe_schema(schema)}"


def examples(name: str) -> list[Example]:
    """The card's worked examples, in order."""
    return [Example(t.strip(), g, a) for t, g, a in _EXAMPLE.findall(card_text(name))]


# --------------------------------------------------------------------------- the schema, described


def describe_schema(schema: type[BaseModel]) -> str:
    """One line per field of the answer object, then per field of each object it lists:
    ``- name: description`` (``- name (list of Item): ...`` for a list of objects). A field without a description is an error: the model would
    have to guess it."""
    js = schema.model_json_schema()
    defs: dict[str, Any] = js.get("$defs", {})
    lines = _field_lines(js, defs)
    for ref in _refs(js, defs):
        lines += [f"{ref}:", *_field_lines(defs[ref], defs)]
    return "\n".join(lines)


def _field_lines(obj: dict[str, Any], defs: dict[str, Any]) -> list[str]:
    out = []
    for name, prop in obj.get("properties", {}).items():
        description = prop.get("description")
        if not description:
            raise ValueError(f"field {name!r} of {obj.get('title', 'the answer')} has no description")
        out.append(f"- {name}{_shape(prop)}: {description}")
    return out


def _shape(prop: dict[str, Any]) -> str:
    """What a field holds when it holds objects: `` (list of Item)``; plain values are left to
    the schema the request carries."""
    items = prop.get("items", {})
    ref = prop.get("$ref") or (items.get("$ref") if isinstance(items, dict) else None)
    if not isinstance(ref, str):
        return ""
    name = ref.rsplit("/", 1)[-1]
    return f" (list of {name})" if "items" in prop else f" ({name})"


def _refs(obj: Any, defs: dict[str, Any], seen: list[str] | None = None) -> list[str]:
    """The object definitions `obj` refers to, depth first, each once."""
    seen = [] if seen is None else seen
    if isinstance(obj, dict):
        ref = obj.get("$ref")
        if isinstance(ref, str):
            name = ref.rsplit("/", 1)[-1]
            if name not in seen and "properties" in defs.get(name, {}):
                seen.append(name)
                _refs(defs[name], defs, seen)
        for key, value in obj.items():
            if key != "$defs":
                _refs(value, defs, seen)
    elif isinstance(obj, list):
        for value in obj:
            _refs(value, defs, seen)
    return seen
