"""Providers are found by entry point: a package registers a factory under the group
``dreamer.providers`` (``name = "module:factory"``), called with the `Settings`. dreamer's own
(`BUILTIN`, registered the same way in its pyproject) are known also where the package runs
from a source tree without its installed metadata; a registered entry point of the same name wins."""

from __future__ import annotations

from importlib.metadata import EntryPoint, entry_points
from typing import Any

from dreamer.core.errors import ConfigError
from dreamer.core.settings import Settings
from dreamer.providers.contract import Provider

GROUP = "dreamer.providers"
BUILTIN = {"mem0": "dreamer.providers.mem0:create", "http": "dreamer.providers.http:create"}


def provider_names() -> list[str]:
    """The names registered under the group, sorted."""
    return sorted({ep.name for ep in entry_points(group=GROUP)} | set(BUILTIN))


def load_provider(name: str, settings: Settings) -> Provider:
    """The provider registered as `name`, built from `settings`; `ConfigError` (one line) when
    there is none, or when its factory refuses the configuration."""
    found = [ep for ep in entry_points(group=GROUP) if ep.name == name]
    if not found and name not in BUILTIN:
        raise ConfigError(
            f"no memory provider {name!r} (DREAMER_MEMORY_PROVIDER); registered: {', '.join(provider_names())}"
        )
    factory: Any = found[0].load() if found else EntryPoint(name, BUILTIN[name], GROUP).load()
    provider = factory(settings)
    if not isinstance(provider, Provider):
        raise ConfigError(f"memory provider {name!r} does not offer prefetch, sync and close")
    return provider
