"""The deployment files, checked without a Docker engine: every DREAMER_* variable they set is
a Settings field, and every command they run is a real CLI entry (dreamer or celery)."""

from __future__ import annotations

import configparser
import re
import shlex
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from dreamer.cli import app as dreamer_app
from dreamer.core.settings import Settings

DOCKER = Path(__file__).resolve().parent.parent / "docker"
SERVICES = {"postgres", "redis", "qdrant", "migrate", "api", "worker", "scheduler", "beat"}


@pytest.fixture(scope="module")
def compose() -> dict:
    return yaml.safe_load((DOCKER / "docker-compose.yml").read_text())


@pytest.fixture(scope="module")
def dreamer_cli() -> None:
    from dreamer.cli import cabinet, online, ops, records  # noqa: F401  (register commands)


def dreamer_services(compose: dict) -> dict[str, dict]:
    return {
        name: svc
        for name, svc in compose["services"].items()
        if "build" in svc or str(svc.get("image", "")).startswith("dreamer")
    }


def is_setting(name: str) -> bool:
    return name.startswith("DREAMER_") and name[len("DREAMER_") :].lower() in Settings.model_fields


def check_dreamer_command(args: list[str]) -> None:
    """Parse the arguments with the real CLI; `--help` stops it before anything runs."""
    result = CliRunner().invoke(dreamer_app, [*args, "--help"])
    assert result.exit_code == 0, f"dreamer {' '.join(args)}: {result.output}"


def check_celery_command(args: list[str]) -> None:
    from celery import Celery
    from celery.bin.celery import celery as celery_cli

    assert args[0] == "-A", args
    module, attr = (args[1].split(":") + ["app"])[:2]
    mod = __import__(module, fromlist=[attr])
    assert isinstance(getattr(mod, attr), Celery)
    assert args[2] in celery_cli.commands, f"no celery command {args[2]!r}"


def test_compose_has_every_part(compose):
    assert SERVICES <= set(compose["services"])
    assert compose["services"]["api"]["ports"] == ["8080:8080"]
    assert set(dreamer_services(compose)) == {"migrate", "api", "worker", "scheduler", "beat"}


def test_each_profile_runs_one_scheduler(compose):
    """The daemon and beat each enqueue every pass: a profile starts one of them, never both,
    and the services without a profile start neither."""
    services = compose["services"]
    assert services["scheduler"]["profiles"] == ["daemon"]
    assert services["beat"]["profiles"] == ["beat"]
    always = {name for name, svc in services.items() if not svc.get("profiles")}
    assert always == {"postgres", "redis", "qdrant", "migrate", "api", "worker"}


def test_every_dreamer_variable_in_compose_is_a_setting(compose):
    seen = set()
    for name, svc in compose["services"].items():
        env = svc.get("environment") or {}
        names = env if isinstance(env, dict) else [e.split("=", 1)[0] for e in env]
        for key in names:
            if key.startswith("DREAMER_"):
                assert is_setting(key), f"{name}: {key} is not a Settings field"
                seen.add(key)
    assert {"DREAMER_DATABASE_URL", "DREAMER_QDRANT_URL", "DREAMER_BROKER_URL", "DREAMER_BUSY_BACKEND"} <= seen
    interpolated = set(re.findall(r"\$\{(DREAMER_\w+)", (DOCKER / "docker-compose.yml").read_text()))
    assert all(is_setting(v) for v in interpolated), interpolated


def test_every_dreamer_service_is_configured_only_through_settings(compose):
    for name, svc in dreamer_services(compose).items():
        env = svc["environment"]
        assert env["DREAMER_DATABASE_URL"].startswith("postgresql+psycopg://"), name
        assert env["DREAMER_DATA_DIR"] == "/data" and "dreamer-data:/data" in svc["volumes"], name
        parsed = Settings(
            _env_file=None, **{k[len("DREAMER_") :].lower(): v for k, v in env.items() if "${" not in str(v)}
        )
        assert parsed.busy_backend == "redis" and parsed.scheduler_executor == "celery"


def test_each_service_runs_a_real_command(compose, dreamer_cli):
    checked = set()
    for name, svc in dreamer_services(compose).items():
        entrypoint = svc.get("entrypoint", ["dreamer"])
        command = svc["command"]
        if entrypoint == ["celery"]:
            check_celery_command(command)
        else:
            assert entrypoint == ["dreamer"]
            check_dreamer_command(command)
        checked.add(command[0] if entrypoint == ["dreamer"] else command[2])
    assert checked == {"init", "serve", "run", "worker", "beat"}
    assert compose["services"]["api"]["command"] == ["serve", "--host", "0.0.0.0", "--port", "8080"]


def test_a_bogus_command_would_be_caught(dreamer_cli):
    with pytest.raises(AssertionError):
        check_dreamer_command(["serve", "--no-such-option"])
    with pytest.raises(AssertionError):
        check_dreamer_command(["run", "--executor"])
    with pytest.raises(AssertionError):
        check_dreamer_command(["no-such-command"])
    with pytest.raises(AssertionError):
        check_celery_command(["-A", "workers.celery_app", "no-such-command"])


def test_dockerfile_installs_the_package_and_runs_as_a_user():
    text = (DOCKER / "Dockerfile").read_text()
    lines = [ln.strip() for ln in text.splitlines() if ln.strip() and not ln.startswith("#")]
    assert lines[0] == "FROM python:3.11-slim"
    assert any(ln.startswith("RUN pip install .") for ln in lines)
    users = [ln.split()[1] for ln in lines if ln.startswith("USER ")]
    assert users and users[-1] not in ("root", "0")
    assert 'ENTRYPOINT ["dreamer"]' in lines
    copied = {ln.split()[1] for ln in lines if ln.startswith("COPY ")}
    assert {"dreamer", "workers", "alembic"} <= copied


def test_env_example_names_only_settings():
    for line in (DOCKER / ".env.example").read_text().splitlines():
        if line and not line.startswith("#"):
            key = line.split("=", 1)[0]
            assert key == "POSTGRES_PASSWORD" or is_setting(key), key


def test_systemd_unit_runs_the_daemon_and_stops_it_with_sigterm(dreamer_cli):
    unit = configparser.ConfigParser(strict=False, interpolation=None)
    unit.optionxform = str
    unit.read_string((DOCKER / "dreamer.service").read_text())
    service = unit["Service"]
    start = shlex.split(service["ExecStart"])
    assert Path(start[0]).name == "dreamer"
    check_dreamer_command(start[1:])
    assert start[1:] == ["run"]
    assert service["KillSignal"] == "SIGTERM" and service["Restart"] == "on-failure"
    assert int(service["TimeoutStopSec"]) >= 60
    for key, value in (v.split("=", 1) for v in service.get("Environment", "").split()):
        assert is_setting(key), key


def test_crontab_runs_a_pass_every_four_hours(dreamer_cli):
    entries = [ln for ln in (DOCKER / "crontab.example").read_text().splitlines() if ln and not ln.startswith("#")]
    assert "0 */4 * * * dreamer dream" in entries
    for ln in entries:
        if "=" in ln.split()[0]:
            assert is_setting(ln.split("=", 1)[0])
        else:
            check_dreamer_command(shlex.split(ln)[6:])
