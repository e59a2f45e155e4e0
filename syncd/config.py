"""Settings: one object, built only at entry points (CLI, ``syncd.open``) and passed down."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

__all__ = ["DEFAULT_EMBED_MODEL", "Settings"]

DEFAULT_EMBED_MODEL = "sentence-transformers/all-MiniLM-L6-v2"


class Settings(BaseSettings):
    """Every knob syncd has. Environment variables use the prefix ``SYNCD_`` (``SYNCD_HOME``...)."""

    model_config = SettingsConfigDict(env_prefix="SYNCD_", extra="ignore")

    home: Path | None = Field(None, description="The memory home; else the nearest enclosing home.")

    # Embeddings: a local model folder wins, then a fastembed model name, then the bundled default.
    embed_model_path: Path | None = Field(None, description="Folder holding model.onnx + tokenizer.")
    embed_model: str | None = Field(None, description="A fastembed model name (may download).")
    embed_batch_size: int = Field(64, ge=1, le=4096)
    embed_threads: int | None = Field(None, ge=1, description="onnxruntime threads; None = all.")

    # Index: embedded LanceDB under .syncd/ unless a PostgreSQL URL names a database with pgvector
    # (syncd/index/backend.py; `syncd init --index URL` records it in the home, without password).
    index_url: str | None = Field(None, description="postgresql://... for a PostgreSQL index.")
    index_schema: str | None = Field(None, description="The home's schema in that database (readers).")
    vector_index_min_rows: int = Field(
        50_000, ge=256, description="Build an ANN vector index once a table has this many rows."
    )

    # Search: the weights of a hit's score parts (see syncd.index.search; the seed's four, and
    # context, the share of relevance a fact's conversation neighbours pass on to it, and time,
    # what a row's date says to the days a query names or to a query asking "when").
    search_weight_semantic: float = Field(0.7, ge=0)
    search_weight_fulltext: float = Field(0.3, ge=0)
    search_weight_context: float = Field(0.5, ge=0)
    search_weight_importance: float = Field(0.2, ge=0)
    search_weight_recency: float = Field(0.1, ge=0)
    search_weight_time: float = Field(0.1, ge=0)
    # Recall (MemoryManager search, retrieve_relevant_memories, the agent tools) leaves out a row
    # holding no word of the query whose cosine is below this. Calibrated for the bundled
    # all-MiniLM-L6-v2 with `benchmarks/bench_recall.py --calibrate` on LoCoMo dev conversations:
    # the best-hit cosine of nonsense queries (made-up and letter-shuffled words) is 0.21 at the
    # median, 0.30 at p95 and 0.35 at p99; of real questions 0.38 at p1. At 0.30, 3.9% of
    # word-less nonsense queries still get a hit and no answer is lost; 0.35 would cut that to
    # 0.2% but drop true paraphrases near 0.32 ("Which foods must she avoid?" / "Is allergic to
    # peanuts."). Another embedding model has other cosines: recalibrate with it.
    recall_min_cosine: float = Field(0.3, ge=-1, le=1)
    # The relevance floor of search (Engine.search(floor=...), syncd.index.search.answered): a
    # query the memory in scope does not answer at all gets no hits. Answered means its best row
    # is closer in meaning than the best of that many unrelated rows comes 19 times in 20 by
    # chance (for the bundled all-MiniLM-L6-v2: 0.18 for one row, 0.39 for 550, 0.51 for
    # 100,000), holding the query's rare words counting for up to 0.10 more.
    # retrieve_relevant_memories applies it; measured by `benchmarks/bench_no_answer.py`.
    # False: every query gets its nearest rows.
    search_floor: bool = True

    # Watcher
    debounce_ms: int = Field(40, ge=0, le=60_000, description="Quiet time before a batch is handled.")
    burst_threshold: int = Field(500, ge=1, description="Events in one batch that mean: reconcile all.")
    reconcile_interval_s: float = Field(300.0, ge=1.0, description="Periodic full reconcile.")
    watcher_check_s: float = Field(10.0, gt=0, description="How often the daemon checks its watcher is alive.")
    commit_quiet_ms: int = Field(300, ge=0, description="Quiet time after indexing before a commit.")

    # Other processes: how long a write waits for the home lock held by another non-daemon process,
    # or for the daemon to index and commit a write handed to it.
    lock_wait_s: float = Field(30.0, ge=0, description="Wait for another writer or the daemon.")

    # `syncd serve`: what a client owes each request, before its token is even checked (see
    # syncd/server/http.py): its line and headers within this long, its body within that.
    server_header_timeout_s: float = Field(10.0, gt=0, le=3600, description="Time to send a request's headers.")
    server_body_timeout_s: float = Field(30.0, gt=0, le=3600, description="Time to send a request's body.")

    # Git identity for changes nobody claimed through the API (a person in an editor).
    human_name: str = "syncd user"
    human_email: str = "user@syncd.local"
    agent_email_domain: str = "agents.syncd.local"

    # Memory
    llm_model: str | None = Field(None, description="litellm model for fact extraction.")
    llm_timeout_s: float = Field(60.0, gt=0)
    block_char_limit: int = Field(5000, ge=100, description="Max characters of one core block.")
    # Deduplication of new facts (syncd.memory.dedup): remembered facts at least this close in
    # meaning are compared with a new one word by word, and only one it restates makes it a
    # duplicate; closeness alone never does (MiniLM puts "Is not allergic to peanuts." at 0.95 from
    # "Is allergic to peanuts.", "She is allergic to peanuts." at 0.82).
    dedup_cosine: float = Field(0.7, gt=0, le=1)
    core_refresh_importance: float = Field(0.8, ge=0, le=1)

    # Sessions: transcripts become searchable rows (kind "transcript") only when asked, as in the
    # seed; they are always kept and committed. Chunks are counted in the embedding model's tokens.
    transcript_indexing_enabled: bool = False
    transcript_chunk_tokens: int = Field(400, ge=16, le=8192)
    transcript_chunk_overlap: int = Field(80, ge=0, le=4096)
    # The reset policy `syncd sessions` reports against (SessionPolicy.from_settings); 0 disables.
    session_daily_reset_hour: int = Field(0, ge=0, le=23, description="UTC hour of the daily reset.")
    session_idle_timeout_minutes: int = Field(0, ge=0)
    session_max_turns: int = Field(0, ge=0)

    # Files larger than this are recorded as errors rather than parsed (a stray export, a dump).
    max_file_bytes: int = Field(20 * 1024 * 1024, ge=1024)
