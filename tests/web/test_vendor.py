"""The vendored browser libraries are the pinned files, unchanged, each with its licence."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.web import vendor


def test_every_vendored_file_matches_its_recorded_sum_and_has_a_licence() -> None:
    assert vendor.check() == []
    for package in vendor.PACKAGES:
        assert "LICENSE" in package.files.values(), package.name
        assert package.directory.endswith(package.version), "the version is in the URL"


def test_check_reports_a_changed_or_unrecorded_file(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    recorded = json.loads(vendor.SUMS.read_text())
    changed, dropped = sorted(recorded)[:2]
    recorded[changed] = "0" * 64
    del recorded[dropped]
    sums = tmp_path / "SHA256SUMS.json"
    sums.write_text(json.dumps(recorded))
    monkeypatch.setattr(vendor, "SUMS", sums)
    assert sorted(vendor.check()) == [f"changed: {changed}", f"no recorded sum: {dropped}"]
