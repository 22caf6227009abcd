"""The terminal client of `threadline chat`, for a running server.

Logs in (password prompt without echo), lets the user pick one of their sessions or start a
new one, then reads questions and streams each answer from `/chat/stream` as it arrives,
followed by the sources. `--verbose` also shows the triage decision, tool calls and the
validation of each answer. `quit`, `exit` or Ctrl-D leaves; Ctrl-C stops the current answer
(closing the stream cancels it on the server, which stores the turn as incomplete).

Only HTTP: it needs no database and works against any deployment.
"""

from __future__ import annotations

import getpass
import json
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, TextIO

import httpx

QUIT_WORDS = frozenset({"quit", "exit"})
PROMPT = "you> "


class ChatClientError(Exception):
    """Something the user should read; the client exits with status 1."""


@dataclass
class Connection:
    """A logged-in connection to the API that refreshes its token once on a 401."""

    url: str
    access_token: str
    refresh_token: str
    http: httpx.Client

    def request(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        """Send a request with the access token; raises ChatClientError on failure."""
        response = self.http.request(method, path, headers=self._headers(), **kwargs)
        if response.status_code == 401 and self._refresh():
            response = self.http.request(method, path, headers=self._headers(), **kwargs)
        return _checked(response)

    def stream(self, path: str, body: dict[str, Any]) -> httpx.Response:
        """An open streamed POST (the caller closes it)."""
        for attempt in range(2):
            request = self.http.build_request("POST", path, json=body, headers=self._headers())
            response = self.http.send(request, stream=True)
            if response.status_code == 401 and attempt == 0 and self._refresh():
                response.close()
                continue
            if response.status_code != 200:
                response.read()
                response.close()
                _checked(response)
            return response
        raise ChatClientError("the server refused the credentials")

    def _headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.access_token}"}

    def _refresh(self) -> bool:
        response = self.http.post("/auth/refresh", json={"refresh_token": self.refresh_token})
        if response.status_code != 200:
            return False
        self.access_token = response.json()["access_token"]
        self.refresh_token = response.json()["refresh_token"]
        return True


def _checked(response: httpx.Response) -> httpx.Response:
    if response.is_success:
        return response
    try:
        message = response.json()["error"]["message"]
    except (ValueError, KeyError, TypeError):
        message = response.text[:200] or response.reason_phrase
    raise ChatClientError(f"{response.status_code}: {message}")


def login(http: httpx.Client, url: str, email: str, password: str) -> Connection:
    """Log in with email and password; the connection that holds the tokens."""
    response = _checked(http.post("/auth/token", json={"email": email, "password": password}))
    body = response.json()
    return Connection(url, body["access_token"], body["refresh_token"], http)


@dataclass
class Turn:
    """What arrived for one question."""

    streamed: list[str] = field(default_factory=list)
    sources: list[dict[str, Any]] = field(default_factory=list)
    done: dict[str, Any] | None = None
    error: dict[str, Any] | None = None


def sse_events(lines: Iterator[str]) -> Iterator[tuple[str, dict[str, Any]]]:
    """(event name, data) for each event of a Server-Sent Events stream; comments skipped."""
    name, data = "", ""
    for line in lines:
        if not line:
            if name:
                yield name, json.loads(data or "{}")
            name, data = "", ""
        elif line.startswith(":"):
            continue
        elif line.startswith("event:"):
            name = line.partition(":")[2].strip()
        elif line.startswith("data:"):
            data += line.partition(":")[2].strip()


class ChatTerminal:
    """The interactive chat loop in a terminal: pick a session, ask, print the answer."""

    def __init__(
        self,
        connection: Connection,
        *,
        verbose: bool,
        read: Callable[[str], str] = input,
        out: TextIO = sys.stdout,
    ) -> None:
        self.connection = connection
        self.verbose = verbose
        self.read = read
        self.out = out

    def say(self, text: str = "", end: str = "\n") -> None:
        """Write a line to the terminal."""
        self.out.write(text + end)
        self.out.flush()

    def choose_session(self, session_id: str | None, new: bool) -> str:
        """The id of the session to chat in: the one given, one picked, or a new one."""
        if session_id:
            found = self.connection.request("GET", f"/sessions/{session_id}").json()
            self.say(f"Resuming {found['title']!r}.")
            return str(found["id"])
        sessions = [] if new else self.connection.request("GET", "/sessions").json()["items"]
        if sessions:
            self.say("Your sessions:")
            for index, item in enumerate(sessions, start=1):
                self.say(f"  {index}. {item['title']}")
            while True:
                choice = self.read("Pick a number, or press Enter for a new session: ").strip()
                if not choice:
                    break
                if choice.isdigit() and 1 <= int(choice) <= len(sessions):
                    picked = sessions[int(choice) - 1]
                    self.say(f"Resuming {picked['title']!r}.")
                    return str(picked["id"])
                self.say(f"Type a number from 1 to {len(sessions)}, or press Enter.")
        created = self.connection.request("POST", "/sessions", json={}).json()
        self.say(f"Started a new session ({created['title']}).")
        return str(created["id"])

    def loop(self, session_id: str) -> None:
        """Read questions and answer them until the user quits."""
        self.say("Ask a question; 'quit', 'exit' or Ctrl-D to leave.")
        while True:
            try:
                question = self.read(PROMPT).strip()
            except EOFError:
                self.say()
                return
            except KeyboardInterrupt:
                self.say()
                continue
            if question.lower() in QUIT_WORDS:
                return
            if question:
                self.ask(session_id, question)

    def ask(self, session_id: str, question: str) -> Turn:
        """Stream one answer to the terminal; Ctrl-C stops it."""
        turn = Turn()
        try:
            response = self.connection.stream(
                "/chat/stream", {"session_id": session_id, "message": question}
            )
            try:
                for name, data in sse_events(response.iter_lines()):
                    self._on_event(turn, name, data)
            finally:
                response.close()
        except KeyboardInterrupt:
            self.say("\n[stopped]")
            return turn
        except ChatClientError as exc:
            self.say(f"error: {exc}")
            return turn
        except httpx.HTTPError as exc:
            self.say(f"error: the connection failed ({exc.__class__.__name__})")
            return turn
        self._after(turn)
        return turn

    def _on_event(self, turn: Turn, name: str, data: dict[str, Any]) -> None:
        if name == "token":
            if not turn.streamed:
                self.say("threadline> ", end="")
            turn.streamed.append(data["text"])
            self.say(data["text"], end="")
        elif name == "sources":
            turn.sources = data["sources"]
        elif name == "done":
            turn.done = data
        elif name == "error":
            turn.error = data

    def _after(self, turn: Turn) -> None:
        if turn.streamed:
            self.say()
        if turn.error is not None:
            self.say(f"error: {turn.error.get('message', 'the answer failed')}")
            return
        if turn.done is None:
            self.say("error: the answer ended early")
            return
        answer = turn.done["answer"]
        if answer != "".join(turn.streamed):  # the output guardrail changed it
            self.say("[the answer was revised after checking]")
            self.say(f"threadline> {answer}")
        shown = [s for s in turn.sources if s.get("cited")] or turn.sources
        for source in shown:
            self.say(f"  [{source['n']}] {source['title']} ({source['kind']})")
        if self.verbose:
            self._details(turn.done)

    def _details(self, done: dict[str, Any]) -> None:
        triage = done.get("triage") or {}
        self.say(f"  triage: route={triage.get('route')} skip_llm={triage.get('skip_llm')}")
        for line in triage.get("log", []):
            self.say(f"    {line}")
        tools = (done.get("context_metadata") or {}).get("tools")
        if tools:
            self.say(f"  tools: {tools.get('rounds', 0)} round(s), guard={tools.get('loop_guard')}")
            for call in tools.get("calls", []):
                self.say(f"    {call['tool']}({call.get('args', {})}) -> {call.get('result_ids')}")
        validation = done.get("validation") or {}
        grounding = validation.get("sources") or {}
        guard = validation.get("output_guardrail") or {}
        self.say(
            f"  validation: grounded={grounding.get('grounded')} "
            f"confidence={grounding.get('confidence')} safe={guard.get('safe')}"
        )
        for issue in [*grounding.get("issues", []), *guard.get("issues", [])]:
            self.say(f"    {issue}")


def run_chat(
    url: str,
    email: str | None,
    password: str | None,
    session_id: str | None,
    new: bool,
    verbose: bool,
) -> int:
    """The whole client; the exit status."""
    with httpx.Client(base_url=url.rstrip("/"), timeout=httpx.Timeout(10.0, read=300.0)) as http:
        terminal = ChatTerminal(Connection(url, "", "", http), verbose=verbose)
        try:
            email = email or terminal.read("E-mail: ").strip()
            password = password if password is not None else getpass.getpass("Password: ")
            terminal.connection = login(http, url, email, password)
            terminal.say(f"Logged in to {url} as {email}.")
            terminal.loop(terminal.choose_session(session_id, new))
        except (EOFError, KeyboardInterrupt):
            terminal.say()
        except ChatClientError as exc:
            terminal.say(f"error: {exc}")
            return 1
        except httpx.HTTPError as exc:
            terminal.say(f"error: cannot reach {url} ({exc.__class__.__name__})")
            return 1
    return 0
