"""Memory for code work through the engine: a migration of a shared table component, its twelve
consumers, an entry that earns trust, and changes that send both back to review."""

import hashlib
import subprocess

import pytest

from dreamer.core.errors import NotFound
from dreamer.engine.code_work.book import CodeBook, EntryInput, StateInput
from dreamer.engine.code_work.changes import change, check_workspace
from dreamer.engine.markdown.code import code_sections
from dreamer.store import experience as rows
from dreamer.store.db import session_scope
from dreamer.store.experience import Where

WHERE = Where("dana", "shop-web", "main")
CONSUMERS = [
    "OrderList",
    "RefundList",
    "AuditList",
    "UserList",
    "StockList",
    "CouponList",
    "InvoiceList",
    "ShipList",
    "ReturnList",
    "PriceList",
    "TaxList",
    "VendorList",
]
CONTRACT = "src/components/LegacyTable.vue"


def sha(text: str) -> str:
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


def _workspace(tmp_path):
    root = tmp_path / "repo"
    (root / "src/components/Table").mkdir(parents=True)
    (root / CONTRACT).write_text("<template>old table</template>\n")
    (root / "src/components/Table/index.tsx").write_text("export const Table = () => null\n")
    for name in CONSUMERS:
        (root / f"src/{name}.tsx").write_text(f"// {name} uses Table\n")
    return root


def _record_migration(book: CodeBook, root) -> dict[str, str]:
    """The table's own state, rested on its files, and one state per consumer resting on the table."""
    ids = {}
    table = book.set_state(
        WHERE,
        StateInput(
            "LegacyTable",
            "checks.typecheck",
            "passed",
            "verified",
            {
                "command": "tsc --noEmit",
                "result": "passed",
                "files": {
                    CONTRACT: sha((root / CONTRACT).read_text()),
                    "src/components/Table/index.tsx": sha((root / "src/components/Table/index.tsx").read_text()),
                },
            },
            [f"file:{CONTRACT}"],
        ),
    )
    ids["LegacyTable"] = table.id
    for name in CONSUMERS:
        path = f"src/{name}.tsx"
        ev = {"command": "vitest run", "result": "passed", "files": {path: sha((root / path).read_text())}}
        ids[name] = book.set_state(WHERE, StateInput(name, "migrated", True, "verified", ev, ["unit:LegacyTable"])).id
    return ids


def _statuses(engine, ids):
    with session_scope(engine) as s:
        return {name: rows.state(s, "dana", i).status for name, i in ids.items()}


def test_a_migration_earns_trust_and_a_contract_change_sends_everything_back(engine, tmp_path):
    """On SQLite and PostgreSQL."""
    book = CodeBook(engine, depth=8)
    root = _workspace(tmp_path)
    ids = _record_migration(book, root)
    assert set(_statuses(engine, ids).values()) == {"verified"}

    e = book.add_entry(
        WHERE,
        EntryInput(
            "When a table column only renders row data, prefer a column render function over the slot",
            unit="LegacyTable",
            task="T1",
            conditions=["callers do not depend on the slot name"],
            unverified=["reload's request parameters compared with the Vue version"],
            versions={"react": "18.2"},
            depends_on=[f"file:{CONTRACT}"],
        ),
    )
    assert (e.status, e.unverified) == ("candidate", ["reload's request parameters compared with the Vue version"])
    e = book.counterexample("dana", e.id, "RefundList calls reload() on the table ref", unit="RefundList", task="T2")
    assert e.status == "candidate"
    assert e.conditions == [
        "callers do not depend on the slot name",
        "not when: RefundList calls reload() on the table ref",
    ]
    assert book.verify("dana", e.id, "OrderList", "passed", "T3").status == "candidate"
    assert book.verify("dana", e.id, "OrderList", "passed", "T3").status == "candidate"
    e = book.verify("dana", e.id, "AuditList", "passed", "T4")
    assert (e.status, e.verified_units) == ("verified", ["OrderList", "AuditList"])

    demoted = change(book, WHERE, f"file:{CONTRACT}")
    assert {d.id for d in demoted} == {*ids.values(), e.id}
    assert set(_statuses(engine, ids).values()) == {"review_required"}
    with session_scope(engine) as s:
        entry = rows.entry(s, "dana", e.id)
        assert (entry.status, entry.reason) == ("review_required", f"file:{CONTRACT} changed")
        consumer = rows.state(s, "dana", ids["TaxList"])
        assert consumer.reason == f"depends on unit:LegacyTable: file:{CONTRACT} changed"
        last = rows.history(s, "dana", ids["TaxList"])[-1]
        assert (last.event, last.status_before, last.status_after) == ("demote", "verified", "review_required")
    text = code_sections(engine, "dana")["shop-web"]
    assert "  - counterexample: RefundList calls reload() on the table ref" in text
    assert "**TaxList** `migrated` = true [review_required]" in text


def test_project_check_changes_nothing_on_an_unchanged_workspace_and_exactly_the_dependents_of_a_change(
    sqlite_engine, tmp_path
):
    book = CodeBook(sqlite_engine, depth=8)
    root = _workspace(tmp_path)
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    ids = _record_migration(book, root)
    other = book.set_state(WHERE, StateInput("Header", "checks.lint", "passed", "verified", {"result": "passed"}))

    report = check_workspace(book, WHERE, root)
    assert report["demoted"] == []
    assert report["files_checked"] == 14
    assert set(_statuses(sqlite_engine, ids).values()) == {"verified"}

    (root / "src/StockList.tsx").write_text("// StockList now uses its own grid\n")
    report = check_workspace(book, WHERE, root)
    assert [(d["id"], d["label"]) for d in report["demoted"]] == [(ids["StockList"], "StockList.migrated")]
    assert report["demoted"][0]["reason"].startswith("file src/StockList.tsx changed (sha256:")

    (root / CONTRACT).write_text("<template>new contract</template>\n")
    report = check_workspace(book, WHERE, root)
    assert {d["id"] for d in report["demoted"]} == set(ids.values()) - {ids["StockList"]}
    assert _statuses(sqlite_engine, {"Header": other.id}) == {"Header": "verified"}
    assert check_workspace(book, WHERE, root)["demoted"] == []


def test_a_claimed_verified_state_without_a_passed_check_or_a_person_is_in_progress(sqlite_engine):
    book = CodeBook(sqlite_engine)
    row = book.set_state(
        WHERE, StateInput("LegacyTable", "checks.integration_test", "done", "verified", {"result": "pending"})
    )
    assert (row.status, row.reason) == (
        "in_progress",
        "claimed verified, but its check is pending and no person confirmed it",
    )
    row = book.confirm("dana", row.id, "lead")
    assert (row.status, row.evidence["confirmed_by"]) == ("verified", "lead")


def test_records_are_the_users_own(sqlite_engine):
    book = CodeBook(sqlite_engine)
    e = book.add_entry(WHERE, EntryInput("prefer render functions", unit="LegacyTable"))
    with session_scope(sqlite_engine) as s:
        assert [r.id for r in rows.entries(s, Where("eve", "shop-web", "main"))] == []
    with pytest.raises(NotFound, match=f"^no experience entry {e.id}$"):
        book.verify("eve", e.id, "OrderList", "passed")


def _git(root, *args):
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.org", "GIT_COMMITTER_NAME": "t"}
    env |= {"GIT_COMMITTER_EMAIL": "t@example.org", "PATH": "/usr/bin:/bin:/usr/local/bin", "HOME": str(root)}
    done = subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True, text=True, env=env)
    return done.stdout.strip()


def test_a_state_resting_on_a_commit_alone_goes_to_review_when_the_head_moves(sqlite_engine, tmp_path):
    root = tmp_path / "repo"
    root.mkdir()
    _git(root, "init", "-q")
    (root / "a.txt").write_text("one\n")
    _git(root, "add", "a.txt")
    _git(root, "commit", "-qm", "one")
    head = _git(root, "rev-parse", "HEAD")
    book = CodeBook(sqlite_engine)
    row = book.set_state(
        WHERE, StateInput("Api", "checks.e2e", "passed", "verified", {"result": "passed", "commit": head[:7]})
    )
    assert check_workspace(book, WHERE, root) == {"head": head, "files_checked": 0, "demoted": []}
    (root / "a.txt").write_text("two\n")
    _git(root, "commit", "-qam", "two")
    report = check_workspace(book, WHERE, root)
    assert [(d["id"], d["reason"]) for d in report["demoted"]] == [
        (row.id, f"the workspace is at {report['head'][:12]}, not at {head[:7]}")
    ]


def test_a_check_run_again_moves_a_state(sqlite_engine):
    book = CodeBook(sqlite_engine)
    row = book.set_state(WHERE, StateInput("OrderList", "checks.e2e", None, "verified", {"result": "pending"}))
    assert book.check_state("dana", row.id, "passed", "playwright test").status == "verified"
    again = book.check_state("dana", row.id, "failed")
    assert (again.status, again.reason) == (
        "in_progress",
        "claimed verified, but its check is failed and no person confirmed it",
    )
