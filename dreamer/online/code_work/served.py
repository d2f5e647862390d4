"""A project's code work beside the memories, as recall, the context block, their MCP tools and
the CLI serve it (`dreamer.engine.code_work.served`): the project a request names (`project`,
the CLI's `--project`, by default the git repository it runs in), in the caller's user scope, on
branch main. Without a project the answers are the memories' alone, as they always were."""

from __future__ import annotations

from typing import Any

from dreamer.core.scope import Scope
from dreamer.engine.code_work.served import Hit, context_line, matching, standing
from dreamer.engine.runtime import Runtime
from dreamer.online.code_work.calls import book
from dreamer.online.recall import context
from dreamer.store.experience import Where

Answer = dict[str, Any]
BRANCH = "main"


def _where(user_id: str, project: str) -> Where:
    return Where(user_id, project, BRANCH)


def with_code_work(rt: Runtime, answer: Answer, user_id: str, project: str | None, query: str) -> Answer:
    """`answer` (a recall's) with the project's entries and state fields matching `query` under
    `code_work`, each labelled with its kind, status and whether it may be served as a rule."""
    if project is None:
        return answer
    limit = rt.settings.experience_search_k
    hits = matching(book(rt), _where(user_id, project), query, limit=limit, embedder=rt.embedder)
    return {**answer, "project": project, "code_work": hits}


def standing_work(rt: Runtime, user_id: str, project: str | None) -> list[Hit]:
    """What a context block carries of the project (nothing without one)."""
    if project is None:
        return []
    return standing(book(rt), _where(user_id, project), limit=rt.settings.experience_search_k)


def kept_work(answer: Answer, project: str | None, hits: list[Hit], kept: int) -> Answer:
    """A context block's answer with the ids of the code work its budget kept (`kept` lines)."""
    if project is None:
        return answer
    return {**answer, "project": project, "code_work_ids": [h["id"] for h in hits[:kept]]}


def context_with_work(
    rt: Runtime, scope: Scope, project: str | None, budget: int | None = None, block_id: str | None = None
) -> Answer:
    """The context block of `scope`, the project's code work after its memories, in one budget."""
    hits = standing_work(rt, scope.user_id, project)
    block = context(rt, scope, budget_tokens=budget, block_id=block_id, extra=[context_line(h) for h in hits])
    return kept_work(block.as_json(), project, hits, block.extra_kept)
