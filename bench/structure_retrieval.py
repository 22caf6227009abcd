"""Retrieval with structure: section-aware chunking beside plain chunking, in the same run.

    python -m bench.structure_retrieval [--embedder onnx|hashing] [--chunk-tokens 400]

A set of our own, generated here: twelve appliance manuals (four DOCX by python-docx, four
HTML, four in one 24-page PDF, a section a page), each with the same six sections
(unpacking, installation, daily use, cleaning, troubleshooting, warranty), so every section
has eleven look-alikes; the product is named in the manual's title and in its sections' prose,
not in the fact; each section holds one fact only it states (a number), and one question,
worded unlike the fact, asks for it. Each file is chunked two ways: *sections*, today's path
(`app.ingestion.prepare`, which never crosses a heading), and *plain*, the chunker from
before formats (`app.ingestion.chunking.chunk_text`) over the same file's flattened text.
Every chunk is embedded with its manual's title (as the product does) and each question
ranks all chunks of its way by cosine (the dense leg alone, in process; no database). A
chunk is relevant when it holds the question's fact. Printed: chunks, recall@5, nDCG@5
(and recall@1) of each way, overall and per format. Fewer, larger chunks make recall@5
easier: compare with the chunk counts in view.
"""

from __future__ import annotations

import argparse
import asyncio
import io
import math
from dataclasses import dataclass

from app.embeddings.base import Embedder, document_input, query_input
from app.ingestion.chunking import chunk_text
from app.ingestion.extract import extract_text
from app.ingestion.formats.types import DOCX, HTML, PDF
from app.ingestion.prepare import PrepareOptions, prepare
from tests.knowledge.files import make_paged_pdf

PRODUCTS = [
    "Brindle kettle",
    "Quillet coffee machine",
    "Marrow toaster",
    "Fenwick blender",
    "Osric air purifier",
    "Talbot dehumidifier",
    "Wendell rice cooker",
    "Hollis fan heater",
    "Corwin food processor",
    "Ansel steam iron",
    "Dorrit juicer",
    "Pell humidifier",
]
FILLER = (
    "Read this section before you go on. Keep the appliance away from children and pets. "
    "Use only the parts supplied with the {p}, and keep this manual for later. "
)
SECTIONS: list[tuple[str, str, str]] = [
    # (heading, the fact with its number {n}, the question about product {p})
    ("Unpacking", "The box holds {n} accessory bags.", "What comes in the box of the {p}?"),
    (
        "Installation",
        "Mount it at least {n} centimetres from the wall.",
        "Where should I put the {p}?",
    ),
    ("Daily use", "Press the dial for {n} seconds to start it.", "How do I switch on the {p}?"),
    ("Cleaning", "Descale every {n} weeks with citric acid.", "How do I keep the {p} clean?"),
    (
        "Troubleshooting",
        "If the light blinks red, hold the button {n} times.",
        "The {p} shows a red light, what now?",
    ),
    (
        "Warranty",
        "The guarantee lasts {n} months from purchase.",
        "Can I get the {p} repaired for free?",
    ),
]


@dataclass(frozen=True)
class Question:
    text: str
    fact: str


def _number(product: int, section: int) -> int:
    return 3 + (product * 7 + section * 5) % 40


def _sections(product: int) -> list[tuple[str, str]]:
    """Each section's heading and body (three paragraphs, the fact in the second)."""
    name = PRODUCTS[product]
    out = []
    for index, (heading, fact, _) in enumerate(SECTIONS):
        filler = FILLER.format(p=name)
        body = [
            filler + f"This part of the {name} manual covers {heading.lower()}.",
            fact.format(n=_number(product, index)) + " " + filler,
            filler * 2,
        ]
        out.append((heading, "\n\n".join(body)))
    return out


def _docx(product: int) -> bytes:
    import docx

    document = docx.Document()
    document.add_heading(f"{PRODUCTS[product]} manual", 0)
    for heading, body in _sections(product):
        document.add_heading(heading, 1)
        for paragraph in body.split("\n\n"):
            document.add_paragraph(paragraph)
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


def _html(product: int) -> bytes:
    parts = [f"<!DOCTYPE html><html><body><h1>{PRODUCTS[product]} manual</h1>"]
    for heading, body in _sections(product):
        parts.append(f"<h2>{heading}</h2>")
        parts.extend(f"<p>{paragraph}</p>" for paragraph in body.split("\n\n"))
    return ("".join(parts) + "</body></html>").encode()


def _pdf(products: list[int]) -> bytes:
    """One page per section of each product (pypdf's text has no headings to recover)."""
    pages = [
        f"{PRODUCTS[p]} manual. {heading}. " + body.replace("\n\n", " ")
        for p in products
        for heading, body in _sections(p)
    ]
    return make_paged_pdf(*pages)


def corpus() -> tuple[list[tuple[str, str, bytes]], list[Question]]:
    """(format, title, bytes) of each file, and the questions."""
    files = [
        *(("docx", f"manual {p + 1}", _docx(p)) for p in range(4)),
        *(("html", f"manual {p + 1}", _html(p)) for p in range(4, 8)),
        ("pdf", "manuals 9 to 12", _pdf([8, 9, 10, 11])),
    ]
    questions = [
        Question(q.format(p=PRODUCTS[p]), fact.format(n=_number(p, s)))
        for p in range(len(PRODUCTS))
        for s, (_, fact, q) in enumerate(SECTIONS)
    ]
    return files, questions


TYPES = {"docx": DOCX, "html": HTML, "pdf": PDF}


def _chunks(kind: str, data: bytes, way: str, tokens: int, overlap: int) -> list[str]:
    if way == "plain":
        text, _ = extract_text(data, TYPES[kind])
        return [c.text for c in chunk_text(text, max_tokens=tokens, overlap_tokens=overlap)]
    options = PrepareOptions(
        content_type=TYPES[kind],
        anonymise=False,
        chunk_tokens=tokens,
        chunk_overlap=overlap,
        max_chars=10_000_000,
        max_pages=100,
    )
    return [c.text for c in prepare(data, options).chunks]


def _flat(text: str) -> str:
    return " ".join(text.split())


def _scores(ranked: list[str], fact: str) -> tuple[float, float, float]:
    """recall@5 (any relevant chunk in the top 5), nDCG@5 (binary gains) and recall@1."""
    relevant = [fact in _flat(chunk) for chunk in ranked]
    gains = relevant[:5]
    dcg = sum(1 / math.log2(i + 2) for i, hit in enumerate(gains) if hit)
    ideal = sum(1 / math.log2(i + 2) for i in range(min(5, sum(relevant))))
    return float(any(gains)), (dcg / ideal if ideal else 0.0), float(relevant[0])


async def _run(embedder: Embedder, tokens: int, overlap: int) -> None:
    files, questions = corpus()
    query_vectors = await embedder.embed([query_input(q.text) for q in questions])
    print(f"\n{len(questions)} questions over {len(files)} files, {len(PRODUCTS)} manuals")
    print(f"  {'way':<9}{'format':<8}{'chunks':>7}{'recall@5':>10}{'nDCG@5':>9}{'recall@1':>10}")
    for way in ("plain", "sections"):
        chunks: list[tuple[str, str]] = []  # (format, text)
        inputs: list[str] = []
        for kind, title, data in files:
            for text in _chunks(kind, data, way, tokens, overlap):
                chunks.append((kind, text))
                inputs.append(document_input(title, text))
        vectors = await embedder.embed(inputs)
        by_format: dict[str, list[tuple[float, float, float]]] = {}
        for question, query in zip(questions, query_vectors, strict=True):
            order = sorted(
                range(len(chunks)),
                key=lambda i: -sum(a * b for a, b in zip(query, vectors[i], strict=True)),
            )
            ranked = [chunks[i][1] for i in order]
            home = next(kind for kind, text in chunks if question.fact in _flat(text))
            by_format.setdefault(home, []).append(_scores(ranked, question.fact))
            by_format.setdefault("all", []).append(by_format[home][-1])
        for kind in ("all", "docx", "html", "pdf"):
            values = by_format.get(kind, [])
            count = len(chunks) if kind == "all" else sum(k == kind for k, _ in chunks)
            recall, ndcg, first = (
                sum(v[i] for v in values) / max(len(values), 1) for i in range(3)
            )
            print(f"  {way:<9}{kind:<8}{count:>7}{recall:>10.3f}{ndcg:>9.3f}{first:>10.3f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--embedder", default="onnx", choices=["onnx", "hashing"])
    parser.add_argument("--chunk-tokens", type=int, default=400)
    parser.add_argument("--overlap", type=int, default=60)
    args = parser.parse_args()
    embedder: Embedder
    if args.embedder == "onnx":
        from app.embeddings.onnx import OnnxMiniLMEmbedder

        embedder = OnnxMiniLMEmbedder()
    else:
        from app.embeddings.hashing import HashingEmbedder

        embedder = HashingEmbedder()
    asyncio.run(_run(embedder, args.chunk_tokens, args.overlap))
    print(f"  (embedder {embedder.name}; dense leg only, in process)")


if __name__ == "__main__":
    main()
