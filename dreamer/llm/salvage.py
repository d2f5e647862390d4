"""Reading a weak reply: JSON in code fences or with prose around it, cut short at the reply
budget, a list where an object was asked, an object where a list was asked, extra keys, missing
optional fields. Each item of a list field is validated on its own: the valid ones are kept and
each dropped one is told with its reason. Pure: no model, no I/O.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Generic, TypeVar, get_args, get_origin

from pydantic import BaseModel, TypeAdapter, ValidationError

from dreamer.core.errors import validation_summary

M = TypeVar("M", bound=BaseModel)

_FENCE = re.compile(r"```[a-zA-Z0-9_-]*\s*\n?(.*?)```", re.S)
_CLOSERS = {"{": "}", "[": "]"}
MAX_SHOWN = 80  # characters of a dropped item kept in its reason


@dataclass
class Salvaged(Generic[M]):
    """What a reply gave: the answer (None when nothing in it could be read as one), the items
    dropped with their reasons, how many list items were kept, and why there is no answer."""

    value: M | None
    dropped: list[str] = field(default_factory=list)
    kept: int = 0
    problem: str = ""

    @property
    def empty_handed(self) -> bool:
        """No answer, or one whose every item was dropped."""
        return self.value is None or (self.kept == 0 and bool(self.dropped))


def salvage(schema: type[M], content: str | None) -> Salvaged[M]:
    """The answer `content` holds for `schema`, as much of it as is valid."""
    if not content or not content.strip():
        return Salvaged(None, problem="empty content")
    data = read_json(content)
    if data is None:
        return Salvaged(None, problem="no JSON object in the reply")
    shaped = shape(schema, data)
    if not isinstance(shaped, dict):
        return Salvaged(None, problem=f"a JSON {type(data).__name__} where an object was asked")
    return _validate_items(schema, shaped)


def read_json(content: str) -> Any:
    """The first JSON value in `content`: the whole text, a fenced block, the span from the first
    brace to its match, or a reply cut short closed after its last complete item; None if none."""
    texts = [content.strip(), *(m.strip() for m in _FENCE.findall(content))]
    start = _first_opening(content)
    if start is not None:
        texts.append(content[start:])
    for text in texts:
        value = _loads(text)
        if value is not None:
            return value
    for text in texts[1:] if len(texts) > 1 else texts:
        value = _close_cut(text)
        if value is not None:
            return value
    return None


def _first_opening(text: str) -> int | None:
    found = [i for i in (text.find("{"), text.find("[")) if i >= 0]
    return min(found) if found else None


def _loads(text: str) -> Any:
    """`text` as JSON (a trailing prose tail after a complete value is ignored); None if not."""
    if not text or text[0] not in "{[":
        return None
    try:
        value, _ = json.JSONDecoder().raw_decode(text)
    except ValueError:
        return None
    return value


def _close_cut(text: str) -> Any:
    """A reply cut short (at its reply budget) read up to its last complete element, with the
    brackets still open closed; None when no such prefix parses."""
    if not text or text[0] not in "{[":
        return None
    ends = _element_ends(text)
    for end, still_open in reversed(ends[-64:]):
        closing = "".join(_CLOSERS[b] for b in reversed(still_open))
        value = _loads(text[:end] + closing)
        if value is not None:
            return value
    return None


def _element_ends(text: str) -> list[tuple[int, str]]:
    """Each place where a list's element ends (right after it closes, or before the comma after
    it), outside strings, with the brackets open there: an object is kept only whole."""
    stack: list[str] = []
    ends: list[tuple[int, str]] = []
    in_string = escaped = False
    for i, ch in enumerate(text):
        if in_string:
            escaped, in_string = (False, True) if escaped else (ch == "\\", ch != '"')
        elif ch == '"':
            in_string = True
        elif ch in _CLOSERS:
            stack.append(ch)
        elif ch in "}]" and stack:
            stack.pop()
            if not stack or stack[-1] == "[":  # a whole element of a list ends; inside an object, none does
                ends.append((i + 1, "".join(stack)))
        elif ch == "," and stack and stack[-1] == "[":  # a list's element ends here; an object is
            ends.append((i, "".join(stack)))  # kept only whole, never with the defaults of what was cut
    return ends


def shape(schema: type[BaseModel], data: Any) -> Any:
    """`data` in the shape `schema` asks for, where the reply's meaning is plain: an object
    wrapped in one key unwrapped; a list given for the whole answer put in the one list field
    (or grouped by its items' `kind`); a single item where a list was asked made a list."""
    lists = _list_fields(schema)
    if isinstance(data, list):
        data = _object_of_list(schema, lists, data)
    if not isinstance(data, dict):
        return data
    data = _unwrapped(schema, data)
    return {key: _as_list(value) if key in lists else value for key, value in data.items()}


def _object_of_list(schema: type[BaseModel], lists: dict[str, Any], items: list[Any]) -> Any:
    if len(lists) == 1:
        return {next(iter(lists)): items}
    kinds = {item.get("kind") for item in items if isinstance(item, dict)}
    if items and all(isinstance(item, dict) for item in items) and kinds <= set(lists):
        grouped: dict[str, list[Any]] = {}
        for item in items:
            grouped.setdefault(item["kind"], []).append({k: v for k, v in item.items() if k != "kind"})
        return grouped
    return items


def _unwrapped(schema: type[BaseModel], data: dict[str, Any]) -> dict[str, Any]:
    """`{"result": {...fields...}}` read as `{...fields...}` when no field is at the top."""
    names = set(schema.model_fields)
    if names & set(data) or len(data) != 1:
        return data
    inner = next(iter(data.values()))
    return inner if isinstance(inner, dict) and names & set(inner) else data


def _as_list(value: Any) -> Any:
    return [value] if isinstance(value, dict | str) else value


def _validate_items(schema: type[M], data: dict[str, Any]) -> Salvaged[M]:
    lists = _list_fields(schema)
    dropped: list[str] = []
    kept = 0
    cleaned = dict(data)
    for name, item_type in lists.items():
        items = data.get(name)
        if not isinstance(items, list):
            if items is not None:
                dropped.append(f"{name}: not a list ({_shown(items)})")
                cleaned.pop(name)
            continue
        good = []
        for i, item in enumerate(items):
            problem = _item_problem(item_type, _item_of(item_type, item))
            if problem is None:
                good.append(_item_of(item_type, item))
            else:
                dropped.append(f"{name}[{i}] {_shown(item)}: {problem}")
        cleaned[name], kept = good, kept + len(good)
    try:
        return Salvaged(schema.model_validate(cleaned), dropped, kept)
    except ValidationError as exc:
        return Salvaged(None, dropped, 0, validation_summary(exc))


def _item_of(item_type: Any, item: Any) -> Any:
    """A bare sentence given where an object with a `text` was asked, as that object."""
    if isinstance(item, str) and isinstance(item_type, type) and issubclass(item_type, BaseModel):
        if "text" in item_type.model_fields:
            return {"text": item}
    return item


def _item_problem(item_type: Any, item: Any) -> str | None:
    try:
        _adapter(item_type).validate_python(item)
    except ValidationError as exc:
        return "; ".join(f"{_place(e['loc'])}{e['msg']}" for e in exc.errors()[:3])
    return None


def _place(loc: tuple[int | str, ...]) -> str:
    return ".".join(str(p) for p in loc) + ": " if loc else ""


@lru_cache(maxsize=64)
def _adapter(item_type: Any) -> TypeAdapter[Any]:
    return TypeAdapter(item_type)


def _list_fields(schema: type[BaseModel]) -> dict[str, Any]:
    """The schema's fields that hold a list, with their item type."""
    out: dict[str, Any] = {}
    for name, info in schema.model_fields.items():
        if get_origin(info.annotation) is list:
            (item_type,) = get_args(info.annotation) or (Any,)
            out[name] = item_type
    return out


def _shown(item: Any) -> str:
    text = item.get("text", item) if isinstance(item, dict) else item
    shown = json.dumps(text, ensure_ascii=False) if not isinstance(text, str) else repr(text)
    return shown if len(shown) <= MAX_SHOWN else shown[: MAX_SHOWN - 3] + "..."
