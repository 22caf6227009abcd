"""docker-compose.yml and .env.example name only settings that exist and run every service;
docs/configuration.md has a row for every setting."""

from __future__ import annotations

import re
from pathlib import Path

import yaml
from pydantic import AliasChoices

from app.config import Settings

ROOT = Path(__file__).resolve().parents[1]
COMPOSE_ONLY = {"POSTGRES_PASSWORD", "THREADLINE_PORT"}


def known_variables() -> set[str]:
    names = set()
    for name, field in Settings.model_fields.items():
        alias = field.validation_alias
        if isinstance(alias, AliasChoices):
            names.add(str(alias.choices[0]))
        else:
            names.add(f"THREADLINE_{name.upper()}")
    return names


def test_compose_runs_every_service_with_a_health_check() -> None:
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    services = compose["services"]
    assert set(services) == {"postgres", "redis", "api", "worker", "beat"}
    for name, service in services.items():
        assert "healthcheck" in service, name
    assert "threadline migrate" in " ".join(services["api"]["command"])
    assert services["postgres"]["image"].startswith("pgvector/pgvector:")


def test_configuration_files_name_only_real_settings() -> None:
    known = known_variables() | COMPOSE_ONLY
    for path in ("docker-compose.yml", ".env.example"):
        text = (ROOT / path).read_text()
        named = set(re.findall(r"\b((?:THREADLINE|DATABASE|REDIS|CELERY)_[A-Z_]+)\b", text))
        assert named <= known, (path, named - known)


def test_configuration_doc_documents_every_setting() -> None:
    text = (ROOT / "docs" / "configuration.md").read_text()
    documented = set(re.findall(r"^\| `([A-Z][A-Z0-9_]*)` \|", text, flags=re.MULTILINE))
    missing = known_variables() - documented
    assert missing == set()
