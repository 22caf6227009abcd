"""The chaos benchmark's figures: tallied per phase from the clients, their replays and
PostgreSQL, printed as one table with a column per phase, then each target per phase as OK or
FAIL (every phase's four, and the phase's own: `PhaseReport.own_targets`)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from bench.chaos_client import StreamResult
from bench.common import percentile

Row = tuple[str, str, str]
"""(session id, turn id, status) of a stored turn."""
MIB = 1024 * 1024
RSS_NOISE_MIB = 8
"""What the two API processes' RSS may be above its start 10 s after a phase and count as back
(allocator noise of a phase's turns; a leak of 40 slow clients' answers would be more)."""


@dataclass
class Probes:
    """The `/readyz` burst of a phase: what it was answered."""

    sent: int = 0
    answers: Counter[str] = field(default_factory=Counter)
    """`200 ok`, `200 degraded`, `503 unavailable`, `timeout`... with the postgres check's
    status (`postgres ok`, `postgres busy`, `postgres down`)."""
    down: int = 0
    """Not ready (503) or PostgreSQL reported `down`: PostgreSQL is up throughout."""
    bad_5xx: int = 0
    """5xx other than 503."""


@dataclass
class Rss:
    """The two API processes' RSS together (bytes): at the phase's start, its peak, and 10 s
    after its clients (and slow readers) closed."""

    before: int
    peak: int
    after: int

    def kept_mib(self) -> int:
        """MiB above the start beyond the noise (0: back)."""
        return max(0, round((self.after - self.before) / MIB - RSS_NOISE_MIB))


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
    two_answers: int = 0
    """Keys answered with two turns, or one turn two ways, among the stream's `done`, a
    replay's with the same key after the phase, and the rows (a failed turn released its key:
    not counted)."""
    unanswered_replays: int = 0
    resumes_404: int = 0
    told_vs_stored: int = 0
    """Streams told `complete` (or `incomplete`, or failed with an error, or `stopped` by Stop)
    about a turn stored otherwise."""
    answers_lost: int = 0
    """Whole answers received (their last word) whose turn is not stored `complete`."""
    bad_5xx: int = 0
    """HTTP 5xx answers to the clients other than a 503 with an error code."""
    stop_answers: Counter[str] = field(default_factory=Counter)
    told_otherwise: list[str] = field(default_factory=list)
    """What each told-vs-stored mismatch was (turn, told, stored), for the details."""
    own_targets: tuple[str, ...] = ()
    probes: Probes | None = None
    rss: Rss | None = None
    evicted: int | None = None
    slow_read: list[int] | None = None
    """Bytes each slow reader read."""

    def figures(self) -> dict[str, int]:
        """Every figure a target may be on."""
        return {
            "pending": self.statuses["pending"],
            "duplicates": self.extra_rows,
            "without terminal event": self.without_terminal,
            "complete stored as failed": self.complete_stored_failed,
            "two answers per key": self.two_answers,
            "resumes 404": self.resumes_404,
            "told vs stored": self.told_vs_stored,
            "answers lost": self.answers_lost,
            "readyz down": self.probes.down if self.probes else 0,
            "5xx w/o 503+code": self.bad_5xx + (self.probes.bad_5xx if self.probes else 0),
            "RSS MiB kept": self.rss.kept_mib() if self.rss else 0,
        }

    def targets(self) -> dict[str, int]:
        """Each target's figure; every one should be 0."""
        figures = self.figures()
        names = ["pending", "duplicates", "without terminal event", "complete stored as failed"]
        return {name: figures[name] for name in [*names, *self.own_targets]}


def tally(
    phase: str, results: list[StreamResult], rows: list[Row], replays: list[StreamResult]
) -> PhaseReport:
    """One phase's report. A client's key belongs to its own session, so a session's rows
    are the turns its key produced: more than one is a duplicate. `replays[i]` is
    `results[i]`'s key posted again after the phase."""
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
        stored = dict(turns)
        report.two_answers += _answers(r, replays[r.index], stored) > 1
        report.unanswered_replays += replays[r.index].terminal != "done"
        if _told_otherwise(r, stored):
            report.told_vs_stored += 1
            report.told_otherwise.append(_told_and_stored(r, stored))
        whole = r.whole_turn_id
        report.answers_lost += whole is not None and stored.get(whole) != "complete"
        report.resumes_404 += r.breaks.count("resume 404")
        report.bad_5xx += sum(
            status >= 500 and not (status == 503 and code) for status, code in r.http_answers
        )
        if r.stop_answer is not None:
            report.stop_answers[r.stop_answer] += 1
        report.ended[_outcome(r)] += 1
        report.breaks.update(r.breaks)
        report.posts += r.posts
        report.resumes += r.resumes
        if r.first_token_s is not None:
            report.ttft.append(r.first_token_s)
    return report


def _answers(r: StreamResult, replay: StreamResult, stored: dict[str, str]) -> int:
    """How many ways the key was answered: the (turn, status) its stream and its replay were
    told in `done`, and its rows hold (a failed turn released its key: not one)."""
    ways = {
        (turn, status) for turn, status in stored.items() if status not in ("failed", "pending")
    }
    for told in (r, replay):
        if told.terminal == "done":
            ways |= {(turn, str(told.done_status)) for turn in told.done_turn_ids}
    return len(ways)


def _told_otherwise(r: StreamResult, stored: dict[str, str]) -> bool:
    """Whether the stream (or Stop's `stopped`) told an outcome its row does not hold."""
    if r.terminal == "done" and r.done_turn_ids:
        turn = next(iter(r.done_turn_ids))
        if stored.get(turn, r.done_status) != r.done_status:
            return True
    turn = r.turn_id or ""
    if r.terminal == "error" and stored.get(turn) == "complete":
        return True
    return bool(r.stop_answer and "stopped" in r.stop_answer and stored.get(turn) == "complete")


def _told_and_stored(r: StreamResult, stored: dict[str, str]) -> str:
    told = f"done {r.done_status}" if r.terminal == "done" else f"error {r.error_code}"
    stop = f", Stop {r.stop_answer}" if r.stop_answer else ""
    return f"turn {r.turn_id}: told {told}{stop}; stored {stored.get(r.turn_id or '')}"


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


def _rss(rss: Rss | None) -> str:
    if rss is None:
        return "-"
    return "/".join(f"{value / MIB:.0f}" for value in (rss.before, rss.peak, rss.after))


def _slow(read: list[int] | None) -> str:
    return f"{len(read)} ({percentile(read, 50) / 1000:.1f})" if read else "-"


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
    ("keys answered twice (replay)", lambda r: r.two_answers),
    ("  replays without an answer", lambda r: r.unanswered_replays),
    ("told vs stored mismatches", lambda r: r.told_vs_stored),
    ("whole answers not stored", lambda r: r.answers_lost),
    ("resumes answered 404", lambda r: r.resumes_404),
    ("5xx w/o 503+code (+readyz)", lambda r: r.figures()["5xx w/o 503+code"]),
    ("/readyz probes / down", lambda r: f"{r.probes.sent} / {r.probes.down}" if r.probes else "-"),
    ("Redis keys evicted", lambda r: "-" if r.evicted is None else r.evicted),
    ("RSS MiB before/peak/+10 s", lambda r: _rss(r.rss)),
    ("slow readers (KB read p50)", lambda r: _slow(r.slow_read)),
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
        if r.stop_answers:
            stops = ", ".join(f"{k} {v}" for k, v in r.stop_answers.most_common())
            print(f"  Stop answered: {stops}")
        for told in r.told_otherwise[:3]:
            print(f"  told vs stored: {told}")
        if r.probes is not None:
            answers = ", ".join(f"{k} {v}" for k, v in r.probes.answers.most_common(6))
            print(f"  /readyz answered: {answers}")
        for message, count in r.logged.most_common(5):
            print(f"  logged {count:>5} x {message}")
    print("\ntargets (each 0, with nothing lost):")
    for r in reports:
        verdicts = "   ".join(
            f"{name} {value} {'OK' if value == 0 else 'FAIL'}"
            for name, value in r.targets().items()
        )
        print(f"  {r.name:<12} {verdicts}")
    failed = sum(v != 0 for r in reports for v in r.targets().values())
    total = sum(len(r.targets()) for r in reports)
    print(f"\nsummary: {total - failed}/{total} targets met ({'OK' if failed == 0 else 'FAIL'})")
