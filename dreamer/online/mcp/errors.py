"""How an MCP tool's failure is said: one line, named by its tool, never a traceback."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TypeVar

from mcp.server.context import HandlerResult
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import CallToolResult, TextContent
from pydantic import ValidationError
from sqlalchemy.exc import SQLAlchemyError

from dreamer.core.errors import DreamerError, validation_summary
from dreamer.store.db import database_problem

log = logging.getLogger(__name__)
T = TypeVar("T")


def named_error(name: object, result: HandlerResult) -> HandlerResult:
    """A tool error as "<tool>: <reason>", not the SDK's "Error executing tool <tool>: <reason>"
    (`result` is the wire form)."""
    if not isinstance(result, dict) or not result.get("isError") or len(result.get("content") or []) != 1:
        return result
    [block] = result["content"]
    prefix = f"Error executing tool {name}: "
    text = block.get("text") if isinstance(block, dict) else None
    if isinstance(text, str) and text.startswith(prefix):
        return {**result, "content": [{**block, "text": f"{name}: {text[len(prefix) :]}"}]}
    return result


def tool_error(line: str) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=line)], is_error=True)


def one_line_error(run: Callable[[], T]) -> T:
    """Run a tool's body; an expected failure becomes a tool error of one line."""
    try:
        return run()
    except ToolError:
        raise
    except ValidationError as exc:
        raise ToolError(f"invalid arguments: {validation_summary(exc)}") from None
    except DreamerError as exc:
        raise ToolError(" ".join(str(exc).split())) from None
    except SQLAlchemyError as exc:
        log.error("MCP tool: the database refused: %s", database_problem(exc))
        raise ToolError(f"the database refused: {database_problem(exc)}") from None
