"""The chaos benchmark's figures: tallied per phase from the clients and PostgreSQL, printed
as one table with a column per phase, then each target per phase as OK or FAIL."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from bench.chaos_client import StreamResult
from bench.common import percentile

Row = tuple[str, str, str]
"""(session id, turn id, status) of a stored turn."""


@dataclass
class PhaseReport:
    """The figures of one phase, from the clients and from PostgreSQL."""

    name: str
    streams: int
    fault_at: float | None = None
    statuses: Counter[str] = field(default_factory=Counter)
    pending_wait_s: float = 0.0
    duplicate_keys: int = 0
    extra_rows: int = 0
    max_per_key: int = 0
    keys_without_turn: int = 0
    without_terminal: int = 0
    gave_up_http: int = 0
    """Clients whose last attempt got an HTTP error answer (a JSON error, not a cut stream)."""
    never_delivered: int = 0
    complete_stored_failed: int = 0
    ended: Counter[str] = field(default_factory=Counter)
    breaks: Counter[str] = field(default_factory=Counter)
    posts: int = 0
    resumes: int = 0
    ttft: list[float] = field(default_factory=list)
    wall_s: float = 0.0
    logged: Counter[str] = field(default_factory=Counter)
    """Warnings and errors the API processes logged during the phase, by message."""

    def targets(self) -> dict[str, int]:
        """Each target's figure; every one should be 0."""
        return {
            "pending": self.statuses["pending"],
            "duplicates": self.extra_rows,
            "without terminal event": self.without_terminal,
            "complete stored as failed": self.complete_stored_failed,
        }


def tally(phase: str, results: list[StreamResult], rows: list[Row]) -> PhaseReport:
    """One phase's report. A client's key belongs to its own session, so a session's rows
    are the turns its key produced: more than one is a duplicate."""
    report = PhaseReport(phase, len(results))
    by_session: dict[str, list[tuple[str, str]]] = {}
    for session_id, turn_id, status in rows:
        by_session.setdefault(session_id, []).append((turn_id, status))
        report.statuses[status] += 1
    for r in results:
        turns = by_session.get(r.session_id, [])
        report.duplicate_keys += len(turns) > 1
        report.extra_rows += max(0, len(turns) - 1)
        report.max_per_key = max(report.max_per_key, len(turns))
        report.keys_without_turn += not turns
        report.without_terminal += r.terminal is None and r.http_error is None
        report.gave_up_http += r.terminal is None and r.http_error is not None
        for turn_id, status in turns:
            if status == "complete" and turn_id not in r.done_turn_ids:
                report.never_delivered += 1
            # The client read the answer to its last word, and the turn says it failed.
            if status == "failed" and turn_id == r.whole_turn_id:
                report.complete_stored_failed += 1
        report.ended[_outcome(r)] += 1
        report.breaks.update(r.breaks)
        report.posts += r.posts
        report.resumes += r.resumes
        if r.first_token_s is not None:
            report.ttft.append(r.first_token_s)
    return report


def _outcome(r: StreamResult) -> str:
    if r.terminal == "done":
        return f"done ({r.done_status})"
    if r.terminal == "error":
        return f"error {r.error_code}"
    if r.http_error is not None:
        return f"gave up on HTTP {r.http_error}"
    return "no terminal event"


def _p(values: list[float], pct: float) -> str:
    return f"{percentile(values, pct):.2f}" if values else "-"


LINES: list[tuple[str, Callable[[PhaseReport], object]]] = [
    ("streams (keys)", lambda r: r.streams),
    ("fault injected at (s)", lambda r: "-" if r.fault_at is None else f"{r.fault_at:.1f}"),
    ("turns started (rows)", lambda r: sum(r.statuses.values())),
    ("  stored complete", lambda r: r.statuses["complete"]),
    ("  stored incomplete", lambda r: r.statuses["incomplete"]),
    ("  stored failed", lambda r: r.statuses["failed"]),
    ("  pending (after wait)", lambda r: r.statuses["pending"]),
    ("waited for pending (s)", lambda r: f"{r.pending_wait_s:.0f}"),
    ("keys with >1 turn", lambda r: r.duplicate_keys),
    ("  extra turns (max/key)", lambda r: f"{r.extra_rows} ({r.max_per_key})"),
    ("keys with no turn", lambda r: r.keys_without_turn),
    ("streams w/o terminal event", lambda r: r.without_terminal),
    ("gave up on an HTTP error", lambda r: r.gave_up_http),
    ("stored complete, undelivered", lambda r: r.never_delivered),
    ("complete stored as failed", lambda r: r.complete_stored_failed),
    ("POSTs / resumes", lambda r: f"{r.posts} / {r.resumes}"),
    ("first token p50 (s)", lambda r: _p(r.ttft, 50)),
    ("first token p95 (s)", lambda r: _p(r.ttft, 95)),
    ("streams with a token", lambda r: len(r.ttft)),
    ("phase wall time (s)", lambda r: f"{r.wall_s:.0f}"),
]


def print_reports(reports: list[PhaseReport]) -> None:
    """The table (a column per phase), how clients ended and broke, and the targets."""
    width = max(11, *(len(r.name) + 2 for r in reports))
    print("\n" + f"{'phase':<30}" + "".join(f"{r.name:>{width}}" for r in reports))
    for label, value in LINES:
        print(f"{label:<30}" + "".join(f"{value(r)!s:>{width}}" for r in reports))
    baseline = next((r for r in reports if r.name == "nofault" and r.ttft), None)
    if baseline is not None:
        base = percentile(baseline.ttft, 95)
        ratios = "".join(
            f"{percentile(r.ttft, 95) / base:>{width}.2f}" if r.ttft else f"{'-':>{width}}"
            for r in reports
        )
        print(f"{'first token p95 / nofault':<30}" + ratios)
    for r in reports:
        ended = ", ".join(f"{k} {v}" for k, v in r.ended.most_common())
        breaks = ", ".join(f"{k} {v}" for k, v in r.breaks.most_common(6)) or "none"
        print(f"\n{r.name}: clients ended: {ended}\n  attempts broken by: {breaks}")
        for message, count in r.logged.most_common(5):
            print(f"  logged {count:>5} x {message}")
    print("\ntargets (each 0, with nothing lost):")
    for r in reports:
        verdicts = "   ".join(
            f"{name} {value} {'OK' if value == 0 else 'FAIL'}"
            for name, value in r.targets().items()
        )
        print(f"  {r.name:<9} {verdicts}")
    failed = sum(v != 0 for r in reports for v in r.targets().values())
    total = sum(len(r.targets()) for r in reports)
    print(f"\nsummary: {total - failed}/{total} targets met ({'OK' if failed == 0 else 'FAIL'})")
