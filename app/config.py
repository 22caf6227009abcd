"""Settings: one object, read from the environment (and `.env`) once per process.

Over 300 lines because every setting is one documented field of that one object, which
`docs/configuration.md` lists (tests/test_config.py keeps the two in step); splitting it would
scatter the one place an operator reads."""

from __future__ import annotations

import os
import secrets
from functools import lru_cache
from ipaddress import ip_network
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import AliasChoices, Field, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

DEV_APP_DB_PASSWORD = "threadline-app-dev"  # refused outside dev with an external DB


def _env(name: str) -> AliasChoices:
    """Accept the unprefixed operator-facing name (SPEC §6) for a field."""
    return AliasChoices(name)


class Settings(BaseSettings):
    """Every knob of the platform. Names in SPEC §6 are kept verbatim."""

    model_config = SettingsConfigDict(
        env_prefix="THREADLINE_",
        env_file=".env",
        extra="ignore",
        populate_by_name=True,
    )

    env: Literal["development", "test", "production"] = "development"

    # --- PostgreSQL -------------------------------------------------------------------------
    database_url: str | None = Field(default=None, validation_alias=_env("DATABASE_URL"))
    """Owner connection (runs migrations). Unset: the embedded PostgreSQL is used."""
    app_database_url: str | None = None
    """Connection of the application role; derived from DATABASE_URL when unset."""
    app_db_role: str = "threadline_app"
    app_db_password: SecretStr = SecretStr(DEV_APP_DB_PASSWORD)
    data_dir: Path = Path(".threadline")
    db_pool_size: int = Field(default=10, ge=1)
    db_max_overflow: int = Field(default=10, ge=0)
    embedding_dim: int = Field(default=384, ge=8, le=2000)
    """Dimension of the vector columns, fixed when the schema is created."""
    embedder: Literal["onnx", "hashing", "minilm", "openai"] = "onnx"
    """`onnx`: all-MiniLM-L6-v2 on onnxruntime, shipped with the install (ADR 0036);
    `hashing`: model-free and deterministic (tests); `minilm`: the same model on torch (extra);
    `openai`: an OpenAI-compatible embeddings endpoint."""
    embedding_model: str | None = None
    """For `openai`: the embeddings model (default text-embedding-3-small)."""

    # --- Redis and background jobs ---------------------------------------------------------
    redis_url: str | None = Field(default=None, validation_alias=_env("REDIS_URL"))
    redis_prefix: str = "tl:"
    redis_max_connections: int = Field(default=200, ge=2)
    """Connections one process may open to Redis (one blocking pool; the stop channel's
    subscription holds one for good)."""
    redis_pool_timeout_seconds: float = Field(default=5.0, gt=0)
    """How long an operation waits for a free pooled connection before it fails."""
    celery_broker_url: str | None = Field(default=None, validation_alias=_env("CELERY_BROKER_URL"))
    ingestion_lease_seconds: float = Field(default=60, gt=0)
    """How long a claim on a document holds unless renewed (renewed every third of it)."""
    ingestion_recovery_seconds: float = Field(default=30, gt=0)
    """Interval of the scan that re-queues lost ingestions (also run once at start-up)."""
    ingestion_pending_grace_seconds: float = Field(default=300, ge=0)
    """How long a `pending` document may wait for its job before it counts as lost."""
    ingestion_max_attempts: int = Field(default=3, ge=1)
    """Runs a document may be taken by before an interrupted one ends `failed`."""

    # --- Auth ------------------------------------------------------------------------------
    jwt_secret: SecretStr | None = None
    """Required outside development; in development a random one is kept in the data dir."""
    jwt_issuer: str = "threadline"
    access_token_ttl_seconds: int = Field(default=900, ge=30)
    refresh_token_ttl_seconds: int = Field(default=30 * 24 * 3600, ge=60)
    refresh_reuse_window_seconds: int = Field(default=10, ge=0, le=120)
    """A refresh token presented again this soon after its exchange (two tabs refreshing at
    once) gets the same new pair back instead of counting as a replay; 0 turns it off."""
    password_min_length: int = Field(default=8, ge=6)
    login_max_failures: int = Field(default=10, ge=1)
    """Failed logins per e-mail (x5 per client address) before 429, within the window."""
    login_failure_window_seconds: int = Field(default=900, ge=1)

    # --- Chat pipeline ---------------------------------------------------------------------
    llm: Literal["extractive", "openai", "anthropic", "openai-compatible"] = "extractive"
    llm_model: str | None = None
    """Model name; default per provider (see app.llm.providers)."""
    llm_fast_model: str | None = None
    """A smaller model of the same provider for the follow-up rewrite before retrieval (the
    answer keeps `llm_model`). Unset: the rewrite uses `llm_model`."""
    llm_temperature: float = Field(default=0.2, ge=0, le=2)
    llm_max_tokens: int = Field(default=1024, ge=16)
    llm_timeout_seconds: float = Field(default=60, gt=0)
    openai_api_key: SecretStr | None = Field(default=None, validation_alias=_env("OPENAI_API_KEY"))
    openai_base_url: str | None = Field(default=None, validation_alias=_env("OPENAI_BASE_URL"))
    anthropic_api_key: SecretStr | None = Field(
        default=None, validation_alias=_env("ANTHROPIC_API_KEY")
    )
    history_turns: int = Field(default=10, ge=0, le=200)
    """Turns of a session loaded into each new turn."""
    history_cache_ttl_seconds: int = Field(default=3600, ge=1)
    context_base_tokens: int = Field(default=3500, ge=100)
    context_tokens_per_result: int = Field(default=500, ge=0)
    context_max_tokens: int = Field(default=8000, ge=100)
    summary_max_tokens: int = Field(default=400, ge=50)
    # --- The model turn: summary off the turn's path, prompt cache (ADR 0035) --------------
    summary_batch_turns: int = Field(default=5, ge=1, le=50)
    """Turns folded into a session's running summary at once, in the background, when at
    least this many have left the history window (the prompt's prefix changes only then)."""
    summary_claim_seconds: float = Field(default=120.0, gt=0)
    """How long a summary job's claim on a session holds: another job may fold that session
    only once the claim has lapsed (a job that died)."""
    cached_token_ratio: float | None = Field(default=None, ge=0, le=1)
    """Share of a prompt token's cost that a cached one counts for in the token quotas. None:
    the provider's ratio (OpenAI 0.5, Anthropic 0.1, others 1.0)."""
    retrieval_k: int = Field(default=5, ge=1, le=50)
    retrieval_candidates: int = Field(default=40, ge=1, le=1000)
    """Candidates each leg (dense, lexical) brings to the fusion."""
    retrieval_complete_scores: bool = False
    """z-score fusion: each leg also scores the candidates only the other leg brought (off:
    +0.005 nDCG@10 on SciFact dev, but /chat's follow-up nDCG@5 0.938 -> 0.934; ADR 0036)."""
    retrieval_fusion: Literal["zscore", "rrf"] = "zscore"
    """How the dense and lexical legs are combined (app/retrieval/fusion.py)."""
    retrieval_fusion_k: int = Field(default=60, ge=1)
    """Reciprocal-rank fusion constant: score = sum(weight / (k + rank))."""
    retrieval_dense_weight: float = Field(default=1.0, ge=0)
    retrieval_lexical_weight: float = Field(default=1.0, ge=0)
    retrieval_title_weight: float = Field(default=2.0, ge=0)
    """How many times a word of a document's title counts in the lexical leg's BM25."""
    hnsw_ef_search: int = Field(default=100, ge=10, le=1000)
    retrieval_exact_scan_max_chunks: int = Field(default=10_000, ge=0)
    """A knowledge base of at most this many chunks (the part the caller may see, when narrowed
    to some collections) is searched exactly, not through HNSW."""
    retrieval_tenant_index_min_chunks: int = Field(default=10_000, ge=1)
    """A tenant with at least this many chunks (and at most half of all) gets an HNSW index of
    its own (ADR 0095); the shared one serves it until then."""
    retrieval_tenant_index_seconds: float = Field(default=300.0, ge=0)
    """How often the API process builds the tenants' own HNSW indexes they lack (0: never;
    `threadline index-tenants` builds them on demand)."""
    retrieval_tenant_index_build_memory: str = Field(default="1GB", pattern=r"^\d+(kB|MB|GB)$")
    """PostgreSQL's maintenance_work_mem while building one (a graph that does not fit builds
    far slower)."""
    chunk_tokens: int = Field(default=400, ge=50, le=2000)
    chunk_overlap_tokens: int = Field(default=60, ge=0)
    language_rebuild_batch: int = Field(default=500, ge=1, le=100_000)
    """Chunks re-analysed per transaction when a tenant changes its language (ADR 0076)."""
    attachment_wait_seconds: float = Field(default=60.0, ge=0)
    """How long a turn waits for its attachments to finish processing."""
    max_message_chars: int = Field(default=32_000, ge=100)
    max_messages: int = Field(default=100, ge=1)
    pii_anonymize: bool = True
    """Anonymise PII in stored queries, answers and attachment text."""
    sse_heartbeat_seconds: float = Field(default=10.0, gt=0)
    # --- Guardrails, triage, tools and output validation (defaults; tenants may override) ---
    guard_injection: Literal["block", "flag", "off"] = "block"
    """Prompt-injection and jailbreak patterns in the user's message."""
    guard_injection_embedding_similarity: float | None = Field(default=None, gt=0, le=1)
    """Cosine similarity to a known attack phrasing, under the platform embedder, from which a
    message counts as an injection. None: the value measured for the embedder (hashing,
    onnx, minilm); another embedder skips this check unless it is set."""
    guard_abuse: Literal["block", "flag", "off"] = "block"
    """Abusive or threatening messages."""
    guard_pii: Literal["block", "flag", "off"] = "flag"
    """Personal data in the user's message (stored anonymised either way)."""
    faq_similarity_threshold: float | None = Field(default=None, gt=0, le=1)
    """Cosine similarity from which a question is answered from a tenant's FAQ. None: the value
    calibrated for the embedder (app/faqs/thresholds.py: hashing 0.90, onnx and minilm 0.72;
    0.90 for another)."""
    smalltalk_fast_path: bool = True
    """Answer greetings and thanks briefly, without retrieval or the model."""
    tool_max_rounds: int = Field(default=3, ge=1, le=10)
    """Tool-calling rounds per turn before the model must answer."""
    agent_tools: bool = True
    """Offer tools (search again, read earlier turns) to providers that support tool calling;
    they get the retrieved sources either way (ADR 0041)."""
    grounding_min_overlap: float = Field(default=0.5, gt=0, le=1)
    """Share of a sentence's content words a source must contain for it to count grounded."""
    tenant_policy_cache_seconds: float = Field(default=30.0, ge=0)
    """How long a process keeps a tenant's guardrail settings and FAQ count."""
    checkpoint_pool_size: int = Field(default=5, ge=1)
    checkpoints_per_thread: int = Field(default=3, ge=0)
    """Checkpoints kept per conversation (older ones are pruned after each turn); 0 keeps all."""

    # --- Data rights -------------------------------------------------------------------------
    retention_sweep_seconds: int = Field(default=3600, ge=1)
    """Interval of the retention sweep (turn age limits, expired logins, orphan checkpoints)."""
    export_batch_rows: int = Field(default=100, ge=1, le=10000)
    """Rows fetched per round trip while streaming `GET /me/export`."""
    export_max_concurrent: int = Field(default=4, ge=1)
    """Exports streaming at once per process (each holds a database connection); 429 above."""

    # --- Stream resilience, limits, tracing ------------------------------------------------
    sse_buffer_ttl_seconds: int = Field(default=600, ge=1)
    """How long a stream's events stay in Redis for `Last-Event-ID` resume."""
    sse_resume_grace_seconds: float = Field(default=5.0, ge=0)
    """After a disconnect, how long generation waits for a resuming client before stopping."""
    sse_retry_ms: int = Field(default=1000, ge=0)
    """The `retry:` hint sent to EventSource clients (reconnect delay)."""
    sse_backlog_events: int = Field(default=256, ge=1)
    """Events a stream's reader may have waiting in this process before it counts as slow
    and reads on from the stream's Redis buffer, a page at a time (ADR 0083)."""
    max_in_flight_per_credential: int = Field(default=64, ge=0)
    """Requests one credential (a token, an API key) may have in progress at once in one
    process; the rest get 429 before any authentication work (0: no bound). ADR 0093."""
    sse_follow_max_per_user: int = Field(default=8, ge=1)
    """Streams one user may follow at once in one process (resumes and retries that join a
    running turn); 429 above."""
    sse_follow_max_per_turn: int = Field(default=4, ge=1)
    """Of those, how many may follow the same turn (tabs, a reconnecting phone)."""
    sse_follow_per_user_per_min: int = Field(default=60, ge=0)
    """Streams one user may start following a minute, across processes (0: unlimited)."""
    idempotency_ttl_seconds: int = Field(default=24 * 3600, ge=1)
    turn_lease_seconds: float = Field(default=60.0, gt=0)
    """A running turn's lease: a pending turn not renewed for this long is an orphan (its
    process died) and is finished `incomplete` by any process. Keep it above
    `db_write_retry_seconds` plus two renewals, so a turn riding out a database outage is not
    taken for an orphan."""
    turn_lease_renew_seconds: float = Field(default=5.0, gt=0)
    """How often the process running turns renews their leases."""
    turn_sweep_seconds: float = Field(default=10.0, gt=0)
    """Interval of each API process's sweep for orphaned turns (also run at start-up)."""
    db_write_retry_seconds: float = Field(default=30.0, ge=0)
    """How long the end-of-turn write is retried (with backoff) while PostgreSQL is unreachable."""
    shutdown_grace_seconds: float = Field(default=5.0, ge=0)
    """At shutdown, how long the process waits for its stopped streams to write their last
    event (to the client and the Redis buffer) and the turns' end."""
    rate_limit_user_per_min: int = Field(default=60, ge=0)
    """Chat requests per user per minute (0: unlimited); tenants may override."""
    rate_limit_tenant_per_min: int = Field(default=600, ge=0)
    rate_limit_search_per_min: int = Field(default=120, ge=0)
    """Knowledge-base searches (`/kb/search`, MCP `search_knowledge`) per user per minute
    (0: none)."""
    token_quota_user_per_day: int = Field(default=200_000, ge=0)
    """Model tokens per user per UTC day (0: unlimited); tenants may override."""
    token_quota_tenant_per_day: int = Field(default=2_000_000, ge=0)
    token_reservation_per_turn: int | None = Field(default=None, ge=0)
    """Tokens a turn holds against the day's quotas from admission until it ends, when what it
    used replaces them: concurrent turns see each other (ADR 0049). None: `context_max_tokens
    + llm_max_tokens`, the most one model call of a turn may use."""
    langsmith_tracing: bool = Field(default=False, validation_alias=_env("LANGSMITH_TRACING"))
    langsmith_api_key: SecretStr | None = Field(
        default=None, validation_alias=_env("LANGSMITH_API_KEY")
    )
    langsmith_endpoint: str | None = Field(
        default=None, validation_alias=_env("LANGSMITH_ENDPOINT")
    )
    langsmith_project: str = Field(default="threadline", validation_alias=_env("LANGSMITH_PROJECT"))

    # --- HTTP ------------------------------------------------------------------------------
    max_body_bytes: int = Field(default=1024 * 1024, ge=1024)
    """Largest JSON request body; uploads have their own limit."""
    http_header_timeout_seconds: float = Field(default=10.0, gt=0)
    """`threadline serve`: a request's line and headers must arrive within this many seconds
    of its first byte (or of the connection opening), else the connection is closed."""
    max_upload_bytes: int = Field(default=25 * 1024 * 1024, ge=1024)
    trusted_proxies: Annotated[list[str], NoDecode] = Field(default_factory=list)
    """Addresses or CIDR ranges of reverse proxies whose `X-Forwarded-For` is believed
    (comma-separated). Empty: the peer address is the client, whatever the header says."""
    allowed_hosts: Annotated[list[str], NoDecode] = Field(
        default_factory=lambda: ["localhost", "127.0.0.1", "::1"]
    )
    """Host names the server answers to (comma-separated; `*.example.com` for subdomains, `*`
    for any): another `Host` gets 400 `invalid_host` (`/healthz` and `/readyz` excepted)."""
    hsts_max_age_seconds: int = Field(default=31_536_000, ge=0)
    """`Strict-Transport-Security: max-age` sent outside development (0: no HSTS)."""
    max_document_chars: int = Field(default=30_000_000, ge=1000)
    """Longest text a document or attachment may have (characters): a text file over it is
    refused at upload (413 `document_too_long`); a PDF whose text is fails ingestion."""
    max_pdf_pages: int = Field(default=2000, ge=1)
    """Most pages a PDF may have; a longer one fails ingestion with a readable error."""
    ingest_workers: int = Field(default=2, ge=0, le=64)
    """Worker processes extracting, sanitising and chunking documents off the event loop;
    0 runs that work in a thread of the API process instead."""
    ingest_document_cpu_seconds: float = Field(default=120, ge=1)
    """CPU a worker process may spend preparing one document (extract, sanitise, chunk);
    past it the document fails ("…took more than N s of CPU…") and its worker is replaced.
    A wall-clock backstop of 4x this kills a worker stuck where the CPU limit cannot reach.
    Applies to worker processes only (not `ingest_workers=0`)."""
    web_cookie_secure: bool | None = None
    """`Secure` flag of the web app's refresh cookie; None: set outside development."""
    public_url: str | None = None
    """The address users reach Threadline at (`https://chat.example.com`): the single sign-on
    redirect URI is `<public_url>/sso/callback`. None: taken from each request."""
    sso_http_timeout_seconds: float = Field(default=5.0, gt=0, le=60)
    """Longest wait for an OpenID provider's answer (discovery, keys, token exchange)."""
    sso_login_ttl_seconds: int = Field(default=600, ge=30, le=3600)
    """How long a sign-in sent to the provider may take to come back."""
    sso_clock_skew_seconds: int = Field(default=60, ge=0, le=600)
    """Leeway on an ID token's `exp` and `iat` for clocks that disagree."""
    sso_metadata_ttl_seconds: int = Field(default=3600, ge=0)
    """How long a provider's discovery document and keys are kept before being fetched again."""
    sso_jwks_refetch_cooldown_seconds: float = Field(default=30, ge=0)
    """After an ID token signed by an unknown key made the keys be fetched again, how long
    another unknown key is refused without fetching (a rotation needs one fetch)."""
    log_level: str = "INFO"
    log_json: bool = True

    @field_validator("allowed_hosts", mode="before")
    @classmethod
    def _host_names(cls, value: Any) -> Any:
        if isinstance(value, str):
            value = [part.strip() for part in value.split(",") if part.strip()]
        return value

    @field_validator("trusted_proxies", mode="before")
    @classmethod
    def _proxy_networks(cls, value: Any) -> Any:
        if isinstance(value, str):
            value = [part.strip() for part in value.split(",") if part.strip()]
        if isinstance(value, list):
            for entry in value:
                ip_network(str(entry), strict=False)  # ValueError: refused at start-up
        return value

    @model_validator(mode="after")
    def _refuse_development_secrets(self) -> Settings:
        if self.env == "development":
            return self
        if self.jwt_secret is None:
            raise ValueError(
                "THREADLINE_JWT_SECRET must be set outside development "
                f"(THREADLINE_ENV={self.env}); generate one with `openssl rand -hex 32`"
            )
        secret = self.jwt_secret.get_secret_value()
        if len(secret) < 32 or _is_placeholder(secret):
            raise ValueError(
                "THREADLINE_JWT_SECRET must be at least 32 random characters, not a placeholder"
            )
        external_db = self.database_url is not None and self.app_database_url is None
        password = self.app_db_password.get_secret_value()
        if external_db and (password == DEV_APP_DB_PASSWORD or _is_placeholder(password)):
            raise ValueError(
                "THREADLINE_APP_DB_PASSWORD must be set outside development when "
                "DATABASE_URL points at an external PostgreSQL"
            )
        return self

    def jwt_signing_key(self) -> str:
        """The JWT secret; in development without one, a random key kept in the data dir.

        Never a built-in constant: a server started without configuration must not accept
        tokens anyone could sign.
        """
        if self.jwt_secret is not None:
            return self.jwt_secret.get_secret_value()
        return _development_secret(self.data_dir.expanduser().resolve())

    @property
    def hsts_seconds(self) -> int:
        """The HSTS max-age to send: none in development (plain HTTP on localhost)."""
        return 0 if self.env == "development" else self.hsts_max_age_seconds

    @property
    def embedded_database(self) -> bool:
        """Whether to run the embedded PostgreSQL (no `database_url` configured)."""
        return self.database_url is None


def _is_placeholder(value: str) -> bool:
    return "change-me" in value.lower() or "changeme" in value.lower()


@lru_cache(maxsize=8)
def _development_secret(data_dir: Path) -> str:
    path = data_dir / "jwt-secret"
    data_dir.mkdir(parents=True, exist_ok=True)
    try:
        # O_EXCL: concurrent first starts agree on one key; 0600: only this user reads it.
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return path.read_text().strip()
    with os.fdopen(fd, "w") as handle:
        handle.write(secrets.token_hex(32))
    return path.read_text().strip()


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """The process's settings, read from the environment once."""
    return Settings()
