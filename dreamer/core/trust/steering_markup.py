"""Markup that acts, whatever it is named (pure): what a renderer, a chat template or a tool
runner would act on, found in a text that should be plain data.

* `markdown_exfiltration`: a Markdown image or link (inline or by reference) whose URL carries
  a query or data out (``![](https://x/p.png?d=...)``): the client fetches it, and the data;
* `html_comment`: ``<!-- ... -->``, text a reader of the rendered page never sees;
* `markup_tag`: any HTML or XML element, not a listed set: a closing tag, a tag with an
  attribute or self-closing, or a machine name (``<note-to-model>``, ``<start_of_turn>``).
  A lone ``<div>`` or ``vector<int>`` mentioned in a sentence is not one;
* `tool_call`: tool-call or function-call JSON of any name (an object with a name and its
  arguments, ``"tool_calls"``, ``"function_call"``);
* `front_matter`: a YAML (``---``) or TOML (``+++``) block of keys opening a section;
* `chat_markup`: a chat template's tokens (``<|im_start|>``, ``[INST]``, ``<start_of_turn>``,
  ``</s>``, ``### Response:``), steering in a transcript line too.
"""

from __future__ import annotations

import re
from collections.abc import Callable

NAME = r"[^\W\d_][\w:.-]{0,60}"
_LINK = re.compile(r"!?\[[^\]\n]{0,300}\]\(\s*<?([^)\s>]{1,2000})")
_REFERENCE = re.compile(r"^[ \t]{0,3}\[[^\]\n]{1,100}\]:[ \t]*<?(\S{1,2000})", re.M)
_DATA = re.compile(r"[?{}]|%7b|[A-Za-z0-9+/=_-]{24,}", re.I)
_COMMENT = re.compile(r"<!--")
_TAG = re.compile(
    rf"</\s*{NAME}\s*>"  # a closing tag
    rf"|<{NAME}\s[^<>]{{0,400}}?=[^<>]{{0,400}}>"  # an attribute
    rf"|<{NAME}(?:\s[^<>]{{0,400}})?/>"  # self-closing
    r"|<[^\W\d_][\w.]{0,30}[_-][\w.-]{0,30}(?:\s[^<>]{0,400})?>"  # a machine name
)
_KEY = re.compile(r"[\"']([A-Za-z_][\w.-]{0,40})[\"']\s*:")
NAMES = frozenset({"name", "tool", "action", "function", "recipient_name", "tool_name", "function_name"})
ARGUMENTS = frozenset({"arguments", "args", "parameters", "params", "input", "tool_input", "action_input", "kwargs"})
CALLS = frozenset({"tool_calls", "tool_call", "function_call", "tool_use", "tool_uses", "tool_result"})
_CALL_TYPE = re.compile(r"[\"']type[\"']\s*:\s*[\"'](?:function|tool_use|tool_call|function_call|tool_result)[\"']")
_TEMPLATE = re.compile(
    r"<\|[^|<>\n]{1,40}\|>|</?s>|<(?:bos|eos|pad|unk|sep|start_of_turn|end_of_turn)>|<</?sys>>"
    r"|\[/?(?:inst|system_prompt|available_tools|tool_calls|tool_results)\]"
    r"|^[ \t]*#{2,4}[ \t]*(?:instruction|response|input|system|assistant|user)[ \t]*:",
    re.I | re.M,
)
_FENCE = re.compile(r"[ \t]*(---|\+\+\+)[ \t]*")
_FIELD = re.compile(r"[ \t]*[\w.-]{1,40}[ \t]*[:=](?:[ \t].*)?|[ \t]*-[ \t].*|[ \t]*")
MEMORY_ONLY = frozenset({"markdown_exfiltration", "html_comment", "markup_tag", "tool_call", "front_matter"})


def carries_data(url: str) -> bool:
    """Whether a URL of a remote host carries a query or data (not a relative path)."""
    if not re.match(r"(?:https?:)?//", url, re.I):
        return False
    return bool(_DATA.search(url.split("//", 1)[1]))


def _tool_call(view: str) -> bool:
    keys = {k.lower() for k in _KEY.findall(view)}
    return bool(keys & CALLS or (keys & NAMES and keys & ARGUMENTS) or _CALL_TYPE.search(view))


def _front_matter(view: str) -> bool:
    """A fence line, one or more lines of keys (or list items), and the same fence again."""
    lines = view.split("\n")
    for i, line in enumerate(lines):
        if not (fence := _FENCE.fullmatch(line)):
            continue
        keys = 0
        for body in lines[i + 1 : i + 42]:
            if (close := _FENCE.fullmatch(body)) and close.group(1) == fence.group(1):
                if keys:
                    return True
                break
            if not _FIELD.fullmatch(body):
                break
            keys += ":" in body or "=" in body
    return False


def markup_markers(view: str, *, line: bool = False) -> list[str]:
    """The kinds of acting markup in `view` (`steering_view.matching_view`); a transcript line
    (`line`: code, a page, a tool's output) is read for chat-template tokens only."""
    found = ["chat_markup"] if _TEMPLATE.search(view) else []
    if line:
        return found
    urls = [m.group(1) for m in _LINK.finditer(view)] + _REFERENCE.findall(view)
    checks: list[tuple[str, Callable[[], bool]]] = [
        ("markdown_exfiltration", lambda: any(carries_data(u) for u in urls)),
        ("html_comment", lambda: bool(_COMMENT.search(view))),
        ("markup_tag", lambda: bool(_TAG.search(view))),
        ("tool_call", lambda: _tool_call(view)),
        ("front_matter", lambda: "\n" in view and _front_matter(view)),
    ]
    return found + [name for name, test in checks if test()]
