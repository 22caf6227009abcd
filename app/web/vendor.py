"""The browser libraries the pages load, pinned, served from `static/vendor/<name>-<version>/`.

`python -m app.web.vendor check` verifies every vendored file against its recorded sha256
(the tests run it); `python -m app.web.vendor update` fetches the pinned packages with
`npm pack` (the npm registry, nothing else; Node is needed only for this maintainer step) and
copies the files below, then records their sums. To move to a new version, change it here,
run `update`, and change the path where the pages load it (the version is in the directory
name, so a browser's cache never mixes two).
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path

VENDOR_DIR = Path(__file__).parent / "static" / "vendor"
SUMS = VENDOR_DIR / "SHA256SUMS.json"

_HLJS_LANGUAGES = [
    "bash",
    "c",
    "cpp",
    "csharp",
    "css",
    "diff",
    "dockerfile",
    "go",
    "ini",
    "java",
    "javascript",
    "json",
    "markdown",
    "php",
    "python",
    "ruby",
    "rust",
    "shell",
    "sql",
    "typescript",
    "xml",
    "yaml",
]


@dataclass(frozen=True)
class Package:
    """One npm package: where its files go, and which (package path → vendored name)."""

    name: str
    version: str
    directory: str
    files: dict[str, str]


PACKAGES = (
    Package(
        "marked",
        "18.2.1",
        "marked-18.2.1",
        {"lib/marked.esm.js": "marked.esm.js", "LICENSE": "LICENSE"},
    ),
    Package(
        "dompurify",
        "3.4.18",
        "dompurify-3.4.18",
        # `.js`, not `.mjs`: every server's MIME table knows it, and a module needs one.
        {
            "dist/purify.es.mjs": "purify.es.js",
            "LICENSE": "LICENSE",
            "LICENSE-MPL": "LICENSE-MPL",
        },
    ),
    Package(
        "@highlightjs/cdn-assets",
        "11.12.0",
        "highlightjs-11.12.0",
        {
            "es/core.min.js": "core.min.js",
            "styles/github.min.css": "github.min.css",
            "styles/github-dark.min.css": "github-dark.min.css",
            "LICENSE": "LICENSE",
            **{f"es/languages/{n}.min.js": f"languages/{n}.min.js" for n in _HLJS_LANGUAGES},
        },
    ),
    # Not loaded by any page: the browser tests inject it to audit every page (issue 28).
    Package(
        "axe-core",
        "4.14.1",
        "axe-core-4.14.1",
        {"axe.min.js": "axe.min.js", "LICENSE": "LICENSE"},
    ),
)


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def vendored_files() -> list[Path]:
    """Every file this module vendors, where it is served from."""
    return [VENDOR_DIR / p.directory / dest for p in PACKAGES for dest in p.files.values()]


def check() -> list[str]:
    """What is wrong with the vendored files (missing, changed, unrecorded); empty when none."""
    recorded: dict[str, str] = json.loads(SUMS.read_text()) if SUMS.exists() else {}
    problems = []
    for path in vendored_files():
        key = path.relative_to(VENDOR_DIR).as_posix()
        if not path.exists():
            problems.append(f"missing: {key}")
        elif key not in recorded:
            problems.append(f"no recorded sum: {key}")
        elif recorded[key] != _sha256(path):
            problems.append(f"changed: {key}")
    return problems


def update() -> None:
    """Fetch each pinned package with `npm pack`, copy its files, record their sums."""
    sums: dict[str, str] = {}
    npm = shutil.which("npm")
    if npm is None:
        raise SystemExit("npm is needed to refresh the vendored files (and only for that)")
    with tempfile.TemporaryDirectory() as tmp:
        for package in PACKAGES:
            spec = f"{package.name}@{package.version}"
            # A fixed argv of pinned names, no shell: `npm` from PATH is the maintainer's own.
            packed = subprocess.run(  # noqa: S603
                [npm, "pack", spec, "--silent"],
                cwd=tmp,
                check=True,
                capture_output=True,
            )
            tarball = Path(tmp) / packed.stdout.decode().strip().splitlines()[-1]
            with tarfile.open(tarball) as archive:
                for source, dest in package.files.items():
                    member = archive.extractfile(f"package/{source}")
                    if member is None:
                        raise SystemExit(f"{spec} has no {source}")
                    target = VENDOR_DIR / package.directory / dest
                    target.parent.mkdir(parents=True, exist_ok=True)
                    target.write_bytes(member.read())
                    sums[target.relative_to(VENDOR_DIR).as_posix()] = _sha256(target)
    SUMS.write_text(json.dumps(sums, indent=1, sort_keys=True) + "\n")


def main(argv: list[str]) -> int:
    """`check` (the default) or `update`."""
    if argv[1:] == ["update"]:
        update()
    problems = check()
    for problem in problems:
        print(problem, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
