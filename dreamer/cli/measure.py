"""CLI for measuring: `dreamer eval locomo`, `dreamer eval profiles`, `dreamer eval compaction` and `dreamer bench`."""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import typer

from dreamer.cli import app, command_group, err, out, settings_of

eval_app = command_group("eval", "Evaluate recall on benchmark data.")

MEMORY_MODES = ("observations", "turns")
SEARCHES = ("hybrid", "dense", "text")
BENCHES = ("recall", "pass", "consolidate", "flush", "modes", "cli")
CLI_RUNS = 20  # `dreamer bench cli` times `dreamer --help` this often (3 with --small)


def parse_ks(value: str) -> list[int]:
    try:
        ks = sorted({int(part) for part in value.split(",") if part.strip()})
    except ValueError as exc:
        raise typer.BadParameter(f"--k takes comma-separated integers, got {value!r}") from exc
    if not ks or ks[0] < 1:
        raise typer.BadParameter("--k needs positive integers")
    return ks


def check_json_target(target: str | None) -> None:
    """Before any work: `--json PATH` can take the result (`-` and no target always can), or
    `ConfigError`. Nothing is written to find out."""
    if target is None or target == "-":
        return
    problem = json_target_problem(Path(target))
    if problem is not None:
        from dreamer.core.errors import ConfigError

        raise ConfigError(f"--json {target}: {problem}")


def json_target_problem(path: Path) -> str | None:
    """Why `path` cannot be written, or None (a device, a pipe or a symlink is written through)."""
    if path.is_dir():
        return "is a folder"
    parent = path.parent
    if not parent.is_dir():
        return f"{parent} is not a folder" if parent.exists() else f"folder {parent} does not exist"
    if os.path.lexists(path):
        return None if os.access(path, os.W_OK) else "cannot be written (permission denied)"
    return None if os.access(parent, os.W_OK | os.X_OK) else f"folder {parent} cannot be written"


def write_json(result: Any, target: str | None) -> None:
    """`-` prints the JSON on stdout; a path gets it written there. Should that fail, the JSON goes
    to stdout before the error, so the run is not lost."""
    if target is None:
        return
    text = json.dumps(result, indent=2, ensure_ascii=False) + "\n"
    if target == "-":
        sys.stdout.write(text)
        return
    try:
        with open(target, "w", encoding="utf-8") as handle:
            handle.write(text)
    except OSError as exc:
        from dreamer.core.errors import ConfigError, os_reason

        sys.stdout.write(text)
        raise ConfigError(f"--json {target}: cannot be written ({os_reason(exc)}); the result is on stdout") from exc


@eval_app.command("locomo")
def eval_locomo(
    ctx: typer.Context,
    path: Path = typer.Argument(..., exists=True, dir_okay=False, metavar="PATH", help="A file in the LoCoMo format."),
    conversations: str = typer.Option(
        None, "--conversations", metavar="IDS", help="Comma-separated sample_ids (default: all)."
    ),
    memories: str = typer.Option("observations", "--memories", metavar="MODE", help="observations | turns"),
    search: str = typer.Option("hybrid", "--search", metavar="SEARCH", help="hybrid | dense | text"),
    k: str = typer.Option("5,10", "--k", metavar="K,K", help="Cut-offs, comma-separated."),
    json_out: str = typer.Option(
        None, "--json", metavar="PATH", help="Write the result as JSON to PATH, or '-' for stdout."
    ),
    work_dir: Path = typer.Option(
        None, "--work-dir", metavar="PATH", help="Keep each conversation's data directory here."
    ),
) -> None:
    """Recall of LoCoMo evidence through the real pipeline, per conversation in a fresh store."""
    from dreamer.eval.harness import EvalOptions, run_locomo

    if memories not in MEMORY_MODES:
        raise typer.BadParameter(f"--memories must be one of {', '.join(MEMORY_MODES)}")
    if search not in SEARCHES:
        raise typer.BadParameter(f"--search must be one of {', '.join(SEARCHES)}")
    ids = [c.strip() for c in conversations.split(",") if c.strip()] if conversations else None
    opts = EvalOptions(
        path=path,
        memories="turns" if memories == "turns" else "observations",
        search=search,
        ks=parse_ks(k),
        conversations=ids,
        work_dir=work_dir,
    )
    check_json_target(json_out)
    result = run_locomo(settings_of(ctx), opts)
    if json_out != "-":
        _print_eval(result, memories, search)
    write_json(result, json_out)


def _print_eval(result: dict[str, Any], memories: str, search: str) -> None:
    from rich.table import Table

    ks = list(result["recall_at"])
    table = Table(title=f"LoCoMo: {memories} memories, {search} search, {result['n_questions']} questions")
    table.add_column("category")
    table.add_column("n", justify="right")
    for key in ks:
        table.add_column(f"recall@{key}", justify="right")
        table.add_column(f"hit@{key}", justify="right")
    table.add_column("ceiling", justify="right")
    rows = [("all", result)] + [(c, v) for c, v in result["by_category"].items()]
    for name, v in rows:
        cells = [f"{v['recall_at'][key]:.3f}|{v['hit_at'][key]:.3f}" for key in ks]
        flat = [part for cell in cells for part in cell.split("|")]
        table.add_row(name, str(v["n_questions"]), *flat, f"{v['evidence_ceiling']:.3f}")
    out.print(table)
    out.print(
        f"memories {result['memories']}; LLM {result['llm_calls']} call(s), {result['prompt_tokens']} prompt + "
        f"{result['completion_tokens']} completion tokens over {result['dialogue_tokens']} dialogue tokens "
        f"= {result['tokens_per_dialogue_token']} per dialogue token; {result['seconds']} s",
        markup=False,
    )


@eval_app.command("profiles")
def eval_profiles(
    ctx: typer.Context,
    path: Path = typer.Argument(..., exists=True, dir_okay=False, metavar="PATH", help="A JSON list of profiles."),
    extractor: str = typer.Option(
        None,
        "--extractor",
        metavar="EXTRACTOR",
        help="replay (the annotated facts) | rules | llm; default: llm when an endpoint is configured, else rules.",
    ),
    judge: str = typer.Option(
        None,
        "--judge",
        metavar="JUDGE",
        help="oracle (from the annotations) | llm | none; default: llm when an endpoint is configured, else none.",
    ),
    json_out: str = typer.Option(
        None, "--json", metavar="PATH", help="Write the result as JSON to PATH, or '-' for stdout."
    ),
    work_dir: Path = typer.Option(None, "--work-dir", metavar="PATH", help="Keep the run's data directory here."),
) -> None:
    """Updates, stale answers and noise over profiles whose facts change, through the real pass."""
    from dreamer.eval.profiles.run import EXTRACTORS, JUDGES, ProfilesOptions, default_judge

    settings = settings_of(ctx)
    chosen_extractor = extractor or ("llm" if settings.llm_configured else "rules")
    chosen_judge = judge or default_judge(settings)
    if chosen_extractor not in EXTRACTORS:
        raise typer.BadParameter(f"--extractor must be one of {', '.join(EXTRACTORS)}")
    if chosen_judge not in JUDGES:
        raise typer.BadParameter(f"--judge must be one of {', '.join(JUDGES)}")
    opts = ProfilesOptions(path, chosen_extractor, chosen_judge, work_dir)
    check_json_target(json_out)
    result = _run_profiles(settings, opts)
    summary = profiles_summary(result)
    if json_out == "-":
        err.print(summary, markup=False)
    else:
        out.print(summary, markup=False)
    write_json(result, json_out)


def _run_profiles(settings: Any, opts: Any) -> dict[str, Any]:
    """The run, with a progress bar on stderr when it is a terminal."""
    from dreamer.cli.progress import progress_bar
    from dreamer.eval.profiles.format import load_profiles
    from dreamer.eval.profiles.run import check_options, run_profiles, sessions_in

    check_options(settings, opts)
    if not err.is_terminal:
        return run_profiles(settings, opts)
    with progress_bar("profiles", sessions_in(load_profiles(opts.path))) as update:

        def step(user_id: str, _session: int) -> None:
            update(advance=1, description=user_id)

        return run_profiles(settings, opts, on_session=step)


@eval_app.command("compaction")
def eval_compaction(
    ctx: typer.Context,
    path: Path = typer.Argument(..., exists=True, dir_okay=False, metavar="FILE", help='A JSON {"cases": [...]}.'),
    json_out: str = typer.Option(
        None, "--json", metavar="PATH", help="Write the result as JSON to PATH, or '-' for stdout."
    ),
    no_model: bool = typer.Option(
        False, "--no-model", help="Compact as with no model configured: the older span offloaded, never summarised."
    ),
    no_baselines: bool = typer.Option(False, "--no-baselines", help="Skip truncation and the summary of everything."),
) -> None:
    """Facts kept (and where), tokens and budget used by compacting long tool-heavy tasks, against
    truncation and a summary of everything (the scripted summariser when no endpoint is configured)."""
    from dreamer.cli.progress import progress_bar
    from dreamer.eval.compaction import compaction_summary, run_compaction_eval
    from dreamer.eval.compaction_cases import load_cases

    settings = settings_of(ctx)
    cases = load_cases(path)
    check_json_target(json_out)
    with progress_bar("compaction", len(cases)) as update:
        result = run_compaction_eval(
            settings,
            cases,
            lambda name: update(advance=1, description=name),
            model=not no_model,
            baselines=not no_baselines,
        )
    (err if json_out == "-" else out).print(compaction_summary(result), markup=False)
    write_json(result, json_out)


def profiles_summary(r: dict[str, Any]) -> str:
    """One line: the run's choices and its headline figures."""

    def f(value: Any) -> str:
        return "-" if value is None else f"{value:.3f}" if isinstance(value, float) else str(value)

    up, tests = r["updates"], r["tests"]
    return (
        f"profiles: {r['profiles']} profiles, {r['sessions']} sessions, extractor {r['extractor']}, judge {r['judge']['name']}: "
        f"updates {up['annotated']} routed {f(up['routed'])} resolved {f(up['resolved'])}; "
        f"false supersessions {up['false_supersessions']}; "
        f"may have changed {up['may_have_changed']} ({up['may_have_changed_queued']} in review); "
        f"judge pairs/memory {f(r['judge']['pairs_per_memory'])}; "
        f"tests {tests['n']} hit@5 {f(tests['hit_at_5']['overall'])} stale {f(tests['stale_current'])}; "
        f"noise {f(r['noise']['stored'])}; memories {r['memories']}; "
        f"LLM {r['tokens']['llm_calls']} call(s), {r['tokens']['prompt']}+{r['tokens']['completion']} tokens; "
        f"{r['seconds']} s"
    )


@app.command()
def bench(
    ctx: typer.Context,
    which: str = typer.Argument(..., metavar="WHICH", help="recall | pass | consolidate | flush | modes | cli"),
    json_out: str = typer.Option(
        None, "--json", metavar="PATH", help="Write the result as JSON to PATH, or '-' for stdout."
    ),
    small: bool = typer.Option(False, "--small", help="Tiny sizes (a smoke run)."),
    seed: int = typer.Option(7, "--seed", metavar="N"),
) -> None:
    """Seeded performance benchmarks; each prints a table and reports ratios from the same run
    (`cli`: the wall time of `dreamer --help`)."""
    if which not in BENCHES:
        raise typer.BadParameter(f"bench must be one of {', '.join(BENCHES)}")
    check_json_target(json_out)
    if which == "cli":
        result = bench_cli(3 if small else CLI_RUNS)
        if json_out != "-":
            out.print(
                f"dreamer --help: p50 {result['p50_ms']} ms, max {result['max_ms']} ms over {result['runs']} runs",
                markup=False,
            )
    else:
        from dreamer.eval.bench import suite as benches

        result = benches.run(which, settings_of(ctx), small=small, seed=seed)
        if json_out != "-":
            out.print(benches.table(result))
    write_json(result, json_out)


def bench_cli(runs: int) -> dict[str, Any]:
    """Wall time of `dreamer --help` in a fresh interpreter, `runs` times: the first thing a user waits for."""
    command = [sys.executable, "-m", "dreamer", "--help"]
    ms: list[float] = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(command, check=True, capture_output=True)
        ms.append((time.perf_counter() - start) * 1000)
    return {
        "bench": "cli",
        "command": "dreamer --help",
        "runs": runs,
        "p50_ms": round(statistics.median(ms), 1),
        "min_ms": round(min(ms), 1),
        "max_ms": round(max(ms), 1),
    }


@eval_app.command("grounding")
def eval_grounding_cmd(
    ctx: typer.Context,
    path: Path = typer.Argument(..., metavar="FILE", help="Items a model wrote, labelled by hand (JSON)."),
    json_out: str = typer.Option(None, "--json", metavar="PATH", help="Write the result as JSON ('-' for stdout)."),
) -> None:
    """The grounding contract held to items a real model wrote, labelled by hand: what it kept,
    its false accepts and false rejections, and what it refused by kind of reason. No model is
    called; the configured embedder settles what only similarity can."""
    from dreamer.eval.grounding_dev import eval_grounding

    check_json_target(json_out)
    result = eval_grounding(settings_of(ctx), path)
    write_json(result, json_out)
    refused = ", ".join(f"{kind} {n}" for kind, n in result["rejected"].items())
    err.print(
        f"eval grounding: {result['items']} item(s), {result['labelled_grounded']} labelled grounded; "
        f"kept {result['kept']}: {len(result['false_accepts'])} false accept(s), "
        f"{len(result['false_rejections'])} false rejection(s); refused: {refused or 'none'}",
        markup=False,
    )


@eval_app.command("model")
def eval_model_cmd(
    ctx: typer.Context,
    path: Path = typer.Argument(..., metavar="FILE", help="A transcript file (openai, claude-code, openclaw, locomo)."),
    fmt: str = typer.Option("auto", "--format", metavar="FORMAT", help="The file's format (default: detected)."),
    sessions: int = typer.Option(None, "--sessions", min=1, metavar="N", help="Only the first N sessions."),
    json_out: str = typer.Option(None, "--json", metavar="PATH", help="Write the result as JSON ('-' for stdout)."),
) -> None:
    """How the configured model does on a transcript, as a dream pass sees it: memories per
    session, the share of the items it wrote that were valid and grounded, LLM tokens per
    dialogue token (the endpoint's own usage) and seconds per session. Nothing of your store is
    touched: the file is imported into a data dir of its own."""
    from dreamer.cli.progress import pass_step, progress_bar
    from dreamer.eval.model_eval import eval_model

    check_json_target(json_out)
    settings = settings_of(ctx)
    with progress_bar("sessions", sessions) as update:
        result = eval_model(
            settings,
            path,
            fmt=fmt,
            sessions=sessions,
            on_step=pass_step(update),
        )
    write_json(result, json_out)
    err.print(
        f"eval model {result['model']}: {result['sessions']} session(s) ({result['failed_sessions']} failed), "
        f"{result['memories_per_session']} memories/session, valid {result['valid_share']}, grounded "
        f"{result['grounded_share']}, {result['tokens_per_dialogue_token']} LLM tokens/dialogue token, "
        f"{result['seconds_per_session']} s/session",
        markup=False,
    )
    refused = ", ".join(f"{kind} {n}" for kind, n in sorted(result["rejected"].items(), key=lambda kv: -kv[1]))
    err.print(
        f"grounding: {result['items']} item(s) written, {result['grounded']} grounded by the contract, "
        f"{result['memories']} stored; rejected: {refused or 'none'}",
        markup=False,
    )
