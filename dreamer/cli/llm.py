"""`dreamer llm`: the model endpoint, checked as a pass would use it."""

from __future__ import annotations

import typer

from dreamer.cli import command_group, out, print_json, settings_of
from dreamer.cli.records import prepare

llm_app = command_group("llm", "The model endpoint: which output mode and window it has, how fast it answers.")


@llm_app.command("check")
def check(ctx: typer.Context, as_json: bool = typer.Option(False, "--json")) -> None:
    """Check the endpoint: base URL, model, output mode, context window, and one extraction of
    a bundled two-turn example with the endpoint's own token usage and latency. Exit 1 with
    one line when it cannot be used (no answer, key refused, not an OpenAI-compatible
    server, a model it does not list, window too small); nothing is sent to a server that is not one."""
    from dreamer.core.errors import ConfigError
    from dreamer.engine.llm_check import check_endpoint

    settings = settings_of(ctx)
    if not settings.llm_base_url:
        raise ConfigError("no LLM endpoint: set DREAMER_LLM_BASE_URL (without one the rules extractor runs)")
    engine = prepare(settings)
    report = check_endpoint(settings, engine)
    if as_json:
        print_json(report.as_json())
        return
    rows = [
        ("endpoint", report.base_url),
        ("model", report.model),
        ("output mode", report.output_mode),
        ("context window", f"{report.window} tokens (from {report.window_source})"),
        ("extraction", f"{len(report.candidates)} item(s) in {report.seconds:.2f} s"),
        ("usage", f"{report.prompt_tokens} prompt + {report.completion_tokens} completion tokens (the endpoint's)"),
        ("request timeout", f"{report.timeout:g} s"),
    ]
    for key, value in rows:
        out.print(f"{key:16} {value}", markup=False)
    for text in report.candidates:
        out.print(f"  - {text}", markup=False)
    if report.problem:
        out.print(f"warning: the model answered, but nothing valid: {report.problem}", markup=False)
