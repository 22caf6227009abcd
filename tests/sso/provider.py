"""A real OpenID Provider on loopback: the certified `oidc-provider` package run by Node
(tests/sso/provider/server.mjs), never a mock of the protocol (docs/adr/0081).

Its packages are pinned by tests/sso/provider/package-lock.json and installed with `npm ci`
the first time the tests need them (again when the lock changes); npm's cache makes later
installs offline. Without Node and npm the SSO tests fail in CI and skip elsewhere, like any
missing test service (tests/services.py).
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import time
import uuid
from pathlib import Path
from typing import Any

from tests.server_process import free_port
from tests.services import require_service

PROVIDER_DIR = Path(__file__).resolve().parent / "provider"
REDIRECT_URI = "http://threadline.test/sso/callback"
CLIENT_ID, CLIENT_SECRET = "threadline", "threadline-client-secret"
OTHER_CLIENT_ID, OTHER_CLIENT_SECRET = "other-app", "other-app-secret"
SHORT_CLIENT_ID, SHORT_CLIENT_SECRET = "short-lived", "short-lived-secret"
"""A client whose ID tokens live one second."""
CLIENTS: list[dict[str, Any]] = [
    {
        "client_id": CLIENT_ID,
        "client_secret": CLIENT_SECRET,
        "redirect_uris": [REDIRECT_URI],
    },
    {
        "client_id": OTHER_CLIENT_ID,
        "client_secret": OTHER_CLIENT_SECRET,
        "redirect_uris": [REDIRECT_URI],
    },
    {
        "client_id": SHORT_CLIENT_ID,
        "client_secret": SHORT_CLIENT_SECRET,
        "redirect_uris": [REDIRECT_URI],
        "id_token_ttl": 1,
    },
]
START_TIMEOUT_SECONDS = 30
INSTALL_TIMEOUT_SECONDS = 300
MIN_NODE_MAJOR = 20


def _tool(name: str) -> str:
    found = shutil.which(name)
    if found is None:
        require_service(f"{name} (Node.js runs the OpenID provider of tests/sso)")
    return found


def install() -> str:
    """The path of `node`, with the provider's packages installed as the lock file pins."""
    node = _tool("node")
    version = subprocess.run(
        [node, "--version"], capture_output=True, text=True, check=True, timeout=30
    ).stdout.strip()
    if int(version.lstrip("v").split(".")[0]) < MIN_NODE_MAJOR:
        require_service(f"Node.js >= {MIN_NODE_MAJOR} for oidc-provider (found {version})")
    lock = (PROVIDER_DIR / "package-lock.json").read_bytes()
    stamp = PROVIDER_DIR / "node_modules" / ".threadline-lock-sha256"
    wanted = hashlib.sha256(lock).hexdigest()
    # Test workers run side by side (pytest-xdist): one installs, the others wait and reuse.
    with (PROVIDER_DIR / ".install.lock").open("w") as guard:
        fcntl.flock(guard, fcntl.LOCK_EX)
        if not stamp.exists() or stamp.read_text() != wanted:
            subprocess.run(
                [_tool("npm"), "ci", "--prefer-offline", "--no-audit", "--no-fund", "--silent"],
                cwd=PROVIDER_DIR,
                check=True,
                timeout=INSTALL_TIMEOUT_SECONDS,
            )
            stamp.write_text(wanted)
    return node


class OpenIdProvider:
    """One provider process on 127.0.0.1, its issuer `http://127.0.0.1:<port>`."""

    def __init__(
        self,
        node: str,
        accounts: Path,
        *,
        clock_offset_seconds: int = 0,
        redirect_uri: str = REDIRECT_URI,
    ) -> None:
        self.node = node
        self.redirect_uri = redirect_uri
        self.clock_offset_seconds = clock_offset_seconds
        self.port = free_port()
        self.issuer = f"http://127.0.0.1:{self.port}"
        self.accounts = accounts
        self.kid = ""
        self._process: subprocess.Popen[bytes] | None = None
        self.set_accounts({})

    def set_accounts(self, accounts: dict[str, dict[str, Any]]) -> None:
        """The users' groups (and `email_verified`), read by the provider at each sign-in."""
        self.accounts.write_text(json.dumps(accounts))

    def start(self) -> None:
        """Start with a new signing key (a restart is a key rotation)."""
        self.kid = f"key-{uuid.uuid4().hex[:8]}"
        env = {
            **os.environ,
            "OP_PORT": str(self.port),
            "OP_CLIENTS": json.dumps(
                [{**c, "redirect_uris": [self.redirect_uri]} for c in CLIENTS]
            ),
            "OP_ACCOUNTS": str(self.accounts),
            "OP_KID": self.kid,
            "OP_CLOCK_OFFSET": str(self.clock_offset_seconds),
            "NODE_NO_WARNINGS": "1",
        }
        log = self.accounts.with_name(f"provider-{self.port}.log")
        with log.open("w") as output:  # a file, not a pipe: nobody has to keep reading it
            self._process = subprocess.Popen(
                [self.node, "server.mjs"],
                cwd=PROVIDER_DIR,
                env=env,
                stdout=output,
                stderr=subprocess.STDOUT,
            )
        deadline = time.monotonic() + START_TIMEOUT_SECONDS
        while time.monotonic() < deadline and self._process.poll() is None:
            if "listening " in log.read_text():
                return
            time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"the OpenID provider did not start: {log.read_text()[-2000:]}")

    def stop(self) -> None:
        """Stop the process this object started (by its own handle, nothing else)."""
        process, self._process = self._process, None
        if process is None:
            return
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)

    def rotate(self) -> None:
        """Restart with a new signing key: the old one is no longer published."""
        self.stop()
        self.start()
