"""`dreamer project`, `dreamer experience` and `dreamer eval experience` as a user runs them."""

import hashlib
import json
from pathlib import Path

from clikit import assert_one_error_line, run

DEV_SET = Path(__file__).parent / "data" / "experience-dev.json"
SCOPE = ("--project", "shop-web", "--user", "dana")


def test_eval_experience_on_the_dev_set(tmp_path):
    proc = run(tmp_path, "eval", "experience", str(DEV_SET), "--json", "-")
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result["scenarios"] == 11
    assert result["lifecycle_accuracy"] == 1.0
    assert result["retrieval"] == {"searches": 22, "hit_at_3": 0.9545, "forbidden_returned": 0}
    assert result["propagation"] == {"changes": 9, "exact": 1.0}
    assert result["misses"] == [  # a paraphrase sharing no word needs the embedder (words only here)
        {
            "scenario": "paraphrased-queries",
            "op": "search",
            "query": "two-way binding on a form field component",
            "want": ["E4"],
            "got": [],
            "forbidden": [],
        }
    ]
    assert proc.stderr.startswith("experience: 11 scenarios, embedder none; lifecycle accuracy 1.0 over 55 expects")


def test_eval_experience_reports_misses(tmp_path):
    bad = tmp_path / "bad.json"
    steps = [
        {"op": "experience", "id": "E1", "text": "prefer render functions", "unit": "A"},
        {"op": "verify", "id": "E1", "unit": "A", "result": "passed"},
        {"op": "expect", "id": "E1", "status": "verified"},
        {"op": "search", "query": "render functions", "expect": [], "forbid": ["E1"]},
        {"op": "expect", "id": "E9", "status": "verified"},
    ]
    bad.write_text(json.dumps({"scenarios": [{"name": "wrong", "project": "p", "steps": steps}]}))
    result = json.loads(run(tmp_path, "eval", "experience", str(bad), "--json", "-").stdout)
    assert (result["lifecycle_accuracy"], result["expects"]) == (0.0, 2)
    assert result["misses"][-1] == {"scenario": "wrong", "step": 4, "op": "expect", "error": "no earlier step made E9"}
    assert result["retrieval"] == {"searches": 1, "hit_at_3": 1.0, "forbidden_returned": 1}
    assert result["misses"][0] == {
        "scenario": "wrong",
        "op": "expect",
        "id": "E1",
        "want": "verified",
        "got": "candidate",
    }


def test_project_set_check_and_show(tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    (work / "Table.vue").write_text("old\n")
    digest = "sha256:" + hashlib.sha256(b"old\n").hexdigest()
    evidence = json.dumps({"command": "tsc", "result": "passed", "files": {"Table.vue": digest}})
    made = run(
        tmp_path,
        "project",
        "set",
        "Table",
        "checks.typecheck",
        "--value",
        "passed",
        "--status",
        "verified",
        "--evidence",
        evidence,
        *SCOPE,
        "--json",
    )
    assert json.loads(made.stdout)["status"] == "verified", made.stderr
    page = run(
        tmp_path,
        "project",
        "set",
        "OrderList",
        "migrated",
        "--value",
        "true",
        "--status",
        "verified",
        "--depends-on",
        "unit:Table",
        *SCOPE,
        "--json",
    )
    assert json.loads(page.stdout)["status"] == "in_progress"
    same = json.loads(run(tmp_path, "project", "check", str(work), *SCOPE, "--json").stdout)
    assert (same["head"], same["files_checked"], same["demoted"]) == (None, 1, [])
    (work / "Table.vue").write_text("new\n")
    moved = json.loads(run(tmp_path, "project", "check", str(work), *SCOPE, "--json").stdout)
    assert [(d["label"], d["subject"]) for d in moved["demoted"]] == [
        ("Table.checks.typecheck", "state"),
        ("OrderList.migrated", "state"),
    ]
    shown = json.loads(run(tmp_path, "project", "show", *SCOPE, "--json").stdout)
    assert [(s["unit"], s["status"]) for s in shown["states"]] == [
        ("OrderList", "review_required"),
        ("Table", "review_required"),
    ]
    view = next((tmp_path / "data").rglob("coding/shop-web*.md")).read_text()
    assert '**Table** `checks.typecheck` = "passed" [review_required]' in view


def test_experience_add_verify_search_and_history(tmp_path):
    added = json.loads(
        run(
            tmp_path,
            "experience",
            "add",
            "TS2322 on columns: return a ReactNode",
            "--unit",
            "Table",
            "--condition",
            "columns render strings",
            *SCOPE,
            "--json",
        ).stdout
    )
    assert added["status"] == "candidate"
    run(tmp_path, "experience", "verify", added["id"], "--unit", "OrderList", "--user", "dana")
    done = json.loads(
        run(tmp_path, "experience", "verify", added["id"], "--unit", "RefundList", "--user", "dana", "--json").stdout
    )
    assert done["status"] == "verified"
    found = run(tmp_path, "experience", "search", "TS2322 in InvoiceList", "--unit", "InvoiceList", *SCOPE)
    assert found.stdout.splitlines()[2] == "    - check in InvoiceList: columns render strings"
    history = json.loads(run(tmp_path, "experience", "show", added["id"], "--user", "dana", "--json").stdout)
    assert [(h["event"], h["status_after"]) for h in history] == [
        ("add", "candidate"),
        ("verify", "candidate"),
        ("verify", "verified"),
    ]


def test_bad_input_is_one_error_line(tmp_path):
    run(tmp_path, "init")
    assert_one_error_line(run(tmp_path, "project", "set", "T", "f", "--depends-on", "path:x", *SCOPE))
    assert_one_error_line(run(tmp_path, "project", "set", "T", "f", "--status", "done", *SCOPE))
    assert_one_error_line(run(tmp_path, "experience", "verify", "nope", "--unit", "A"))
    assert_one_error_line(run(tmp_path, "project", "check", str(tmp_path / "missing"), *SCOPE))
    assert_one_error_line(run(tmp_path, "experience", "add", "x", "--basis", "guessed", *SCOPE))
    broken = tmp_path / "broken.json"
    broken.write_text("{")
    assert_one_error_line(run(tmp_path, "eval", "experience", str(broken)))
    shown = json.loads(run(tmp_path, "project", "show", *SCOPE, "--json").stdout)
    assert shown["states"] == []


def test_project_set_hashes_the_workspace_it_is_given(tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    (work / "Table.vue").write_text("old\n")
    args = ("project", "set", "Table", "contract.props", "--value", '["columns"]', "--status", "verified")
    made = run(
        tmp_path, *args, "--by", "lead", "--depends-on", "file:Table.vue", "--workspace", str(work), *SCOPE, "--json"
    )
    digest = "sha256:" + hashlib.sha256(b"old\n").hexdigest()
    assert json.loads(made.stdout)["evidence"] == {"files": {"Table.vue": digest}}
    (work / "Table.vue").write_text("new\n")
    moved = json.loads(run(tmp_path, "project", "check", str(work), *SCOPE, "--json").stdout)
    assert [d["label"] for d in moved["demoted"]] == ["Table.contract.props"]
    missing = run(tmp_path, *args, "--depends-on", "file:Gone.vue", "--workspace", str(work), *SCOPE)
    assert_one_error_line(missing)
    assert missing.stderr.strip() == f"error: no file Gone.vue in the workspace {work}"
