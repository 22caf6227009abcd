"""Prompt-injection detection: detection rate and false positives, today's rule beside the new.

    python -m bench.injection [--show-misses]

Data (tests/data/injection, provenance in its README), never the phrasings the detector was
built from:
  * eval_bastioncorpus.jsonl — 118 attacks and 63 benign look-alikes (bastioncorpus 0.6.0);
  * eval_questions.jsonl — 50 ordinary questions with the words attacks use;
  * the same attacks and questions disguised five ways (fullwidth, spaced-out letters, split
    over lines, zero-width characters, look-alike Cyrillic letters), made here.
dev.jsonl (the calibration set) is reported apart.

Obfuscations (issue 33 item 7, ADR 0067), scored apart: `obfuscations_eval.jsonl` (68
attacks in 10 forms: base64, hex, rot13 and reversed text, bare and wrapped in an order to
decode; "repeat the text above"; paraphrases; fenced or tagged "system" blocks; and 20 ordinary
questions that share those words), with `obfuscations_dev.jsonl` its calibration set.

Detectors, in the same run:
  * baseline — today's rule: the patterns over the text as it is;
  * lexical  — the new input check without an embedder: patterns over folded text and
    fuzzy containment of a known phrasing;
  * +hashing — lexical, or close to a known phrasing under the default hashing embedder;
  * +onnx    — the same with the default embedder (all-MiniLM-L6-v2 int8 on onnxruntime);
  * +minilm  — the same with all-MiniLM-L6-v2 on torch, when the `minilm` extra is installed.
Latency: the median (and p95) of one message's check (the fastest of three runs of it),
phrasings' vectors already cached; the one-time cost of embedding the phrasings is printed
apart.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from app.embeddings.base import Embedder
from app.embeddings.hashing import HashingEmbedder
from app.embeddings.onnx import OnnxMiniLMEmbedder
from app.guardrails.injection import SemanticCheck, find, pattern_hits
from bench.common import ROOT, percentile

DATA = ROOT / "tests" / "data" / "injection"
CYRILLIC = str.maketrans("aceopxyiAEOPCXBHKMT", "асеорхуіАЕОРСХВНКМТ")


def _fullwidth(text: str) -> str:
    return "".join(chr(ord(c) + 0xFEE0) if "!" <= c <= "~" else c for c in text)


def _spaced(text: str) -> str:
    return "  ".join(" ".join(word) for word in text.split())


def _lines(text: str) -> str:
    return "\n".join(text.split())


def _zero_width(text: str) -> str:
    return "\u200b".join(text)


DISGUISES: dict[str, Callable[[str], str]] = {
    "fullwidth": _fullwidth,
    "spaced": _spaced,
    "newlines": _lines,
    "zero-width": _zero_width,
    "homoglyph": lambda t: t.translate(CYRILLIC),
}


@dataclass
class Sample:
    id: str
    attack: bool
    group: str
    text: str


def _load(name: str) -> list[dict[str, str]]:
    return [json.loads(line) for line in (DATA / name).read_text("utf-8").splitlines()]


def samples() -> list[Sample]:
    rows = _load("eval_bastioncorpus.jsonl") + _load("eval_questions.jsonl")
    out: list[Sample] = []
    for row in rows:
        attack = row["label"] == "attack"
        if attack:
            group = "attack/en" if row["lang"] == "en" else "attack/other-lang"
        else:
            group = "benign/ordinary" if row["category"] == "ordinary_question" else "benign/trap"
        out.append(Sample(row["id"], attack, group, row["text"]))
    english = [s for s in out if s.group in ("attack/en", "benign/ordinary")]
    for name, disguise in DISGUISES.items():
        for s in english:
            kind = "attack" if s.attack else "benign"
            out.append(Sample(f"{s.id}~{name}", s.attack, f"{kind}/{name}", disguise(s.text)))
    return out


def dev_samples() -> list[Sample]:
    rows = _load("dev.jsonl")
    return [Sample(r["id"], r["label"] == "attack", "dev", r["text"]) for r in rows]


def obfuscation_samples(name: str) -> list[Sample]:
    """An obfuscation set: attacks grouped by form, ordinary questions as one group."""
    return [
        Sample(r["id"], r["label"] == "attack", f"{r['label']}/{r['form']}", r["text"])
        for r in _load(name)
    ]


Detector = Callable[[str], Awaitable[bool]]


def detectors(onnx: Embedder, minilm: Embedder | None) -> dict[str, Detector]:
    async def baseline(text: str) -> bool:
        return bool(pattern_hits(text))

    async def lexical(text: str) -> bool:
        return bool(find(text))

    def with_embedder(embedder: Embedder) -> Detector:
        check = SemanticCheck(embedder, None)

        async def detect(text: str) -> bool:
            return bool(find(text)) or (await check.hits([text]))[0]

        return detect

    found: dict[str, Detector] = {
        "baseline": baseline,
        "lexical": lexical,
        "+hashing": with_embedder(HashingEmbedder(384)),
        "+onnx": with_embedder(onnx),
    }
    if minilm is not None:
        found["+minilm"] = with_embedder(minilm)
    return found


def _minilm() -> Embedder | None:
    try:
        from app.embeddings.minilm import MiniLMEmbedder

        return MiniLMEmbedder()
    except Exception as exc:  # the optional extra is not installed
        print(f"minilm: not importable here ({type(exc).__name__}); skipped")
        return None


async def _warm(embedders: list[Embedder]) -> None:
    for embedder in embedders:
        started = time.perf_counter()
        await SemanticCheck(embedder, 1.0).scores(["warm up"])
        ms = (time.perf_counter() - started) * 1000
        print(f"{embedder.name}: phrasings embedded once per process in {ms:.1f} ms")


async def _score(
    detect: Detector, rows: list[Sample]
) -> tuple[dict[str, tuple[int, int]], list[float], list[Sample]]:
    by_group: dict[str, tuple[int, int]] = {}
    times: list[float] = []
    wrong: list[Sample] = []
    for sample in rows:
        # The fastest of three runs: on a shared machine a single run mostly times the
        # scheduler.
        took = []
        for _ in range(3):
            started = time.perf_counter()
            hit = await detect(sample.text)
            took.append((time.perf_counter() - started) * 1000)
        times.append(min(took))
        caught, total = by_group.get(sample.group, (0, 0))
        by_group[sample.group] = (caught + hit, total + 1)
        if hit != sample.attack:
            wrong.append(sample)
    return by_group, times, wrong


def _rate(counts: list[tuple[int, int]]) -> str:
    hit = sum(c for c, _ in counts)
    total = sum(t for _, t in counts)
    return f"{hit:>4}/{total:<4} {100 * hit / max(1, total):5.1f}%"


async def run(show_misses: bool) -> None:
    minilm, onnx = _minilm(), OnnxMiniLMEmbedder()
    await _warm([HashingEmbedder(384), onnx, *([minilm] if minilm else [])])
    rows, dev = samples(), dev_samples()
    groups = sorted({s.group for s in rows}, key=lambda g: (not g.startswith("attack"), g))
    found = detectors(onnx, minilm)
    results = {name: await _score(detect, rows) for name, detect in found.items()}
    devs = {name: await _score(detect, dev) for name, detect in found.items()}

    width = 28
    print()
    print(f"{'':<{width}}" + "".join(f"{name:>20}" for name in found))
    for group in groups:
        cells = [_rate([results[n][0][group]]) for n in found]
        print(f"{group:<{width}}" + "".join(f"{c:>20}" for c in cells))
    print()
    summary = {
        "DETECTION (plain attacks)": ("attack/en", "attack/other-lang"),
        "DETECTION (disguised)": tuple(f"attack/{d}" for d in DISGUISES),
        "FALSE POSITIVES (plain)": ("benign/ordinary", "benign/trap"),
        "FALSE POSITIVES (disguised)": tuple(f"benign/{d}" for d in DISGUISES),
    }
    for label, wanted in summary.items():
        cells = [_rate([results[n][0][g] for g in wanted]) for n in found]
        print(f"{label:<{width}}" + "".join(f"{c:>20}" for c in cells))
    print("calibration set (dev.jsonl):")
    for name in found:
        dev_rows = dev
        dev_wrong = devs[name][2]
        attacks = sum(s.attack for s in dev_rows)
        missed = sum(s.attack for s in dev_wrong)
        flagged = sum(not s.attack for s in dev_wrong)
        print(
            f"  dev {name:<9} attacks caught {attacks - missed}/{attacks}, "
            f"benign flagged {flagged}/{len(dev_rows) - attacks}"
        )
    for title, name in (
        ("OBFUSCATIONS, evaluation (obfuscations_eval.jsonl)", "obfuscations_eval.jsonl"),
        ("OBFUSCATIONS, calibration (obfuscations_dev.jsonl)", "obfuscations_dev.jsonl"),
    ):
        await _obfuscations(title, found, obfuscation_samples(name), width)
    print()
    print("per-check latency (one message, phrasings cached):")
    for name, (_, times, _) in results.items():
        print(
            f"  {name:<10} p50 {statistics.median(times) * 1000:8.1f} us"
            f"   p95 {percentile(times, 95) * 1000:8.1f} us   (n={len(times)})"
        )
    if show_misses:
        for name, (_, _, wrong) in results.items():
            print(f"\n{name}: wrong verdicts")
            for sample in wrong:
                kind = "MISSED" if sample.attack else "FLAGGED"
                print(f"  {kind:<8}{sample.id:<22}{sample.text[:90]!r}")


async def _obfuscations(
    title: str, found: dict[str, Detector], rows: list[Sample], width: int
) -> None:
    scored = {name: await _score(detect, rows) for name, detect in found.items()}
    groups = sorted({s.group for s in rows}, key=lambda g: (not g.startswith("attack"), g))
    print()
    print(title)
    for group in groups:
        cells = [_rate([scored[n][0][group]]) for n in found]
        print(f"  {group:<{width - 2}}" + "".join(f"{c:>20}" for c in cells))
    attacks = [g for g in groups if g.startswith("attack")]
    benign = [g for g in groups if not g.startswith("attack")]
    for label, wanted in (("  DETECTION", attacks), ("  FALSE POSITIVES", benign)):
        cells = [_rate([scored[n][0][g] for g in wanted]) for n in found]
        print(f"{label:<{width}}" + "".join(f"{c:>20}" for c in cells))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--show-misses", action="store_true")
    args = parser.parse_args()
    asyncio.run(run(args.show_misses))


if __name__ == "__main__":
    main()
