"""The agent-facing API's inputs and outputs: one set of pydantic models shared by the REST API,
the MCP tools and the agent tools in ``syncd.memory.tools``.

A tool's or endpoint's parameters are these models' fields (their JSON schema is what clients
see), and every call is validated by them, so hostile ids, dates and paths are refused here, with
the rule they broke, before they reach a path or an index filter. Pure: pydantic and the layout
rules only (no FastAPI, no MCP), so the memory layer can import it and the servers import it too;
it lives outside ``syncd.server`` because the servers import ``syncd.memory`` (no import cycle).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError

from ..home import FACT_CONTENT_MAX, ID_RULE, is_markdown, validate_id, validate_label

__all__ = [
    "AddInput",
    "AddResult",
    "BlameInput",
    "BlameOut",
    "BlockOut",
    "BlockUpdateInput",
    "ChatId",
    "CoreInput",
    "CoreMemory",
    "DailyLog",
    "DailyLogInput",
    "DailyLogs",
    "DateStr",
    "DeleteInput",
    "DeleteResult",
    "ErrorBody",
    "FactChanges",
    "FactHistoryOut",
    "FactOut",
    "Finding",
    "HitKind",
    "Input",
    "KnownFactOut",
    "Label",
    "LintInput",
    "LintResult",
    "LogEntryOut",
    "LogInput",
    "LogOut",
    "MemoryFile",
    "MemoryHit",
    "MemoryId",
    "PageInput",
    "PageOut",
    "RecentLogsInput",
    "ReindexResult",
    "RevertInput",
    "RevertResult",
    "SearchInput",
    "SearchResult",
    "SessionId",
    "SessionOut",
    "SessionStateInput",
    "SessionStateOut",
    "SessionsInput",
    "SessionsOut",
    "Stats",
    "StatusInput",
    "StatusOut",
    "TranscriptEntryOut",
    "TranscriptInput",
    "TranscriptOut",
    "TurnInput",
    "TurnResult",
    "UpdateInput",
    "UserId",
    "VaultPath",
    "VaultSearchInput",
    "describe_invalid",
    "describe_errors",
    "tool_inputs",
]


def _id(kind: str):
    return AfterValidator(lambda value: validate_id(kind, value))


def _date(value: str) -> str:
    import datetime as dt

    if not re.fullmatch(r"\d{4}-\d{2}-\d{2}", value):
        raise ValueError("dates are YYYY-MM-DD")
    dt.date.fromisoformat(value)  # a real day: 2026-02-30 is refused
    return value


def _vault_path(value: str) -> str:
    """A page of the vault, relative to it: no way out (``..``, absolute, NUL, backslash), no
    hidden part (``.obsidian``), markdown only. Links are refused when the file is read."""
    if "\x00" in value or "\\" in value or value.startswith("/"):
        raise ValueError("a vault path is relative, with / between folders")
    parts = value.split("/")
    if any(p in ("", ".", "..") or p.startswith(".") for p in parts):
        raise ValueError("a vault path has no empty, '.', '..' or hidden parts")
    if not is_markdown(value):
        raise ValueError("vault pages are .md files")
    return value


_ID_HELP = f"({ID_RULE})"

UserId = Annotated[str, _id("user"), Field(description=f"A user id {_ID_HELP}.", max_length=128)]
ChatId = Annotated[str, _id("chat"), Field(description=f"A chat id {_ID_HELP}.", max_length=128)]
SessionId = Annotated[str, _id("session"), Field(description=f"A session id {_ID_HELP}.", max_length=128)]
MemoryId = Annotated[str, _id("memory"), Field(description="A fact's id, as search shows it.", max_length=128)]
Label = Annotated[
    str,
    AfterValidator(validate_label),
    Field(description="Block label: persona, user, facts, context or another lowercase word.", max_length=64),
]
DateStr = Annotated[str, AfterValidator(_date), Field(description="A day, YYYY-MM-DD.", max_length=10)]
VaultPath = Annotated[
    str, AfterValidator(_vault_path), Field(description="A page of the vault, e.g. index.md.", max_length=1024)
]
Query = Annotated[str, Field(min_length=1, max_length=2000, description="What to look for, in plain words.")]
Category = Annotated[str, Field(pattern=r"^[a-z][a-z0-9_-]{1,31}$", description="A lowercase word.")]
Tag = Annotated[str, Field(pattern=r"^[^\s`\-][^\s`]*$", max_length=64)]
HitKind = Literal["fact", "chunk", "transcript"]


class Input(BaseModel):
    """Base of every input: unknown fields are an error, not silently dropped."""

    model_config = ConfigDict(extra="forbid")


class _ForUser(Input):
    user_id: UserId | None = Field(
        None,
        description="Whose memory. A user token always acts for its own user (naming another is "
        "refused); an admin token names the user here.",
    )


def _at(what: str) -> Any:
    """The ``at`` field of a read that can look into the past (syncd.engine.asof)."""
    return Field(
        None,
        min_length=1,
        max_length=200,
        description=f"{what} as a past commit left it: a commit, HEAD~N, a branch, a tag, or a date/time "
        "(2026-11-20T14:00, yesterday, 2 days ago: the last commit at or before it). None: as it is now. "
        "For one user (a user's token, or user_id), HEAD~N and shas count and name only the commits their "
        "log shows; ^{/text}, @{N} and :/text are refused.",
    )


class SearchInput(_ForUser):
    query: Query
    limit: int = Field(5, ge=1, le=100, description="How many memories to return (at most).")
    chat_id: ChatId | None = None
    kind: HitKind | None = Field(
        None,
        description="Only facts, only text chunks (MEMORY.md, blocks, notes, wiki pages) or only transcript "
        "chunks; none: facts and text chunks.",
    )
    include_wiki: bool = Field(False, description="Search the wiki vault too.")
    at: str | None = _at("Search the memory")


class AddInput(_ForUser):
    content: str = Field(min_length=1, max_length=FACT_CONTENT_MAX, description="The fact, one statement.")
    category: Category = "context"
    importance: float = Field(0.5, ge=0, le=1)
    tags: list[Tag] = Field(default_factory=list, max_length=32)
    chat_id: ChatId | None = None
    session_id: SessionId | None = None
    dedup: bool = Field(
        True, description="Skip the fact when it only restates one already remembered (a correction is always written)."
    )


class FactChanges(_ForUser):
    """What to change in one fact; a field left out (null) keeps its value."""

    content: str | None = Field(
        None, min_length=1, max_length=FACT_CONTENT_MAX, description="The new text; null keeps it."
    )
    category: Category | None = None
    importance: float | None = Field(None, ge=0, le=1)
    tags: list[Tag] | None = Field(None, max_length=32)


class UpdateInput(FactChanges):
    memory_id: MemoryId


class DeleteInput(_ForUser):
    memory_id: MemoryId


class CoreInput(_ForUser):
    chat_id: ChatId | None = Field(None, description="The chat whose blocks win over the user's.")
    at: str | None = _at("The blocks")


class BlockUpdateInput(_ForUser):
    label: Label
    content: str = Field(
        max_length=20_000,
        description="New text (replace), text to add (append), or the replacement (search_replace).",
    )
    operation: Literal["replace", "append", "search_replace"] = Field(
        "replace", description="replace, append or search_replace."
    )
    old_content: str | None = Field(
        None, max_length=20_000, description="For search_replace: the exact passage to replace."
    )
    chat_id: ChatId | None = Field(
        None, description="The chat, for a chat-scoped label (context); other labels are the user's."
    )


class RecentLogsInput(_ForUser):
    days: int = Field(2, ge=1, le=366, description="Calendar days back, today included.")


class DailyLogInput(_ForUser):
    date: DateStr


class BlameInput(_ForUser):
    fact_id: MemoryId


class StatusInput(_ForUser):
    pass


class SessionsInput(_ForUser):
    pass


class TranscriptInput(_ForUser):
    session_id: SessionId
    last_n: int | None = Field(None, ge=0, le=100_000, description="Only the last N entries.")


class SessionStateInput(_ForUser):
    session_id: SessionId


class LogInput(_ForUser):
    path: str | None = Field(
        None, max_length=1024, description="Only commits touching this home-relative file or folder."
    )
    limit: int = Field(20, ge=1, le=200)


class RevertInput(Input):
    commit: str = Field(pattern=r"^[0-9a-fA-F]{4,40}$", description="The commit to undo (a sha).")


class TurnInput(_ForUser):
    user_message: str = Field("", max_length=100_000)
    steps: list[Any] = Field(default_factory=list, max_length=200, description="What the agent did.")
    response: str = Field("", max_length=100_000)
    chat_id: ChatId | None = None
    session_id: SessionId | None = None
    transcript_line: int | None = Field(None, ge=0, le=2**31)
    turn_id: str | None = Field(None, max_length=128)


class VaultSearchInput(_ForUser):
    query: Query
    limit: int = Field(5, ge=1, le=100)
    at: str | None = _at("Search the vault")


class PageInput(Input):
    path: VaultPath


class LintInput(_ForUser):
    pass


# -- outputs -------------------------------------------------------------------------------------


class MemoryHit(BaseModel):
    """One search hit, the same everywhere: REST, MCP, the control socket and ``syncd search
    --json`` carry these fields (``syncd.engine.search.hit_record``)."""

    id: str
    content: str
    snippet: str = Field(description="The first line worth showing.")
    score: float
    parts: dict[str, float] = Field(description="The score's parts (semantic, fulltext, ...), each before its weight.")
    kind: str = Field(description="fact, chunk or transcript")
    source: str
    path: str = Field(description="The file, relative to the home.")
    line: int
    user_id: str | None
    chat_id: str | None
    category: str | None
    tags: list[str]
    created_at: str | None
    heading: str
    importance: float | None
    session_id: str | None
    provenance: str = Field(description="Where a fact came from: session#transcript-line, when known.")
    extra: dict[str, Any]
    title: str | None = Field(description="A wiki hit's page title; null outside the vault.")
    breadcrumb: str = Field(description="Where the hit sits: Page > Section for a wiki page, the heading path else.")
    relevant: bool = Field(description="Relevant to the query by a measure that means the same for every query.")


class SearchResult(BaseModel):
    hits: list[MemoryHit]


class FactOut(BaseModel):
    id: str
    content: str
    category: str
    tags: list[str]
    importance: float | None
    timestamp: str | None


class KnownFactOut(BaseModel):
    """A fact already remembered, as a duplicate names it."""

    id: str
    content: str
    path: str
    line: int


class AddResult(BaseModel):
    fact: FactOut | None = Field(description="The fact as written, or null when it restates one already remembered.")
    duplicate: bool
    duplicate_of: KnownFactOut | None = Field(
        None,
        description="When duplicate: the remembered fact it restates. To change that fact, update it by its id "
        "(memory_update) rather than adding another.",
    )


class TurnResult(BaseModel):
    facts: list[FactOut]


class DeleteResult(BaseModel):
    deleted: bool
    memory_id: str


class BlockOut(BaseModel):
    label: str
    content: str
    scope: str = Field(description="chat, user, global or default")
    path: str | None
    limit: int


class CoreMemory(BaseModel):
    user_id: str
    chat_id: str | None
    blocks: dict[str, BlockOut]


class StoredFactOut(FactOut):
    """A fact as its daily log holds it: where it is, and the turn it came from."""

    path: str
    line: int
    date: str
    chat_id: str | None
    session_id: str | None


class DailyLog(BaseModel):
    date: str
    path: str
    text: str
    facts: list[StoredFactOut]


class DailyLogs(BaseModel):
    user_id: str
    logs: list[DailyLog]


class MemoryFile(BaseModel):
    user_id: str
    path: str
    content: str


class Stats(BaseModel):
    user_id: str
    daily_logs: int
    first_log: str | None
    last_log: str | None
    facts: int
    categories: dict[str, int]
    memory_file_chars: int
    blocks: dict[str, str]
    as_of: str


class StatusOut(BaseModel):
    model_id: str
    files: int
    facts: int
    chunks: int
    fresh: bool
    healthy: bool
    compatible: bool
    aligned_commit: str | None
    stale: dict[str, list[str]]
    errors: dict[str, str]
    uncommitted: list[str]
    index: str = Field(
        "ok",
        description="'missing' while there is no index on disk to describe "
        "(never built, or deleted with .syncd/ and being rebuilt): then never fresh",
    )


class LogEntryOut(BaseModel):
    sha: str
    author: str
    email: str
    date: str
    subject: str
    trailers: dict[str, str]
    files: list[str]


class LogOut(BaseModel):
    entries: list[LogEntryOut]


class FactHistoryOut(BaseModel):
    path: str
    line: int
    text: str
    uncommitted: bool
    introduced: LogEntryOut | None
    edits: list[LogEntryOut]


class BlameOut(BaseModel):
    fact_id: str
    histories: list[FactHistoryOut]


class RevertResult(BaseModel):
    reverted: str
    commit: str


class ReindexResult(BaseModel):
    summary: str
    errors: dict[str, str]


class SessionOut(BaseModel):
    user_id: str
    session_id: str
    created_at: str
    last_active_at: str
    turn_count: int
    resets: int
    chat_id: str | None = None


class SessionsOut(BaseModel):
    user_id: str
    sessions: list[SessionOut]
    warnings: list[str] = Field(
        default_factory=list,
        description="A session.json a person broke, one line each (the file, why, how to recover); "
        "its session is listed with what can be read, and no turn writes over it.",
    )


class TranscriptEntryOut(BaseModel):
    line: int = Field(description="The entry's line in transcript.jsonl (what a fact's src:session#line names).")
    ts: str
    role: str
    content: str
    actions: Any = None
    meta: Any = None


class TranscriptOut(BaseModel):
    user_id: str
    session_id: str
    path: str
    entries: list[TranscriptEntryOut]


class SessionStateOut(BaseModel):
    user_id: str
    session_id: str
    path: str
    state: dict[str, Any] | None = Field(description="The JSON v2 agent state, or null when there is none.")


class PageOut(BaseModel):
    path: str
    content: str


class Finding(BaseModel):
    code: str
    severity: str
    path: str
    line: int
    message: str


class LintResult(BaseModel):
    findings: list[Finding]


class ErrorBody(BaseModel):
    """What every 4xx/5xx answer carries: ``{"error": {"type": ..., "message": ...}}``."""

    class Detail(BaseModel):
        type: str
        message: str

    error: Detail


# -- agent tools ---------------------------------------------------------------------------------

_JSON_TYPES = {"string": "string", "integer": "integer", "number": "number", "boolean": "boolean",
               "array": "array", "object": "object"}  # fmt: skip


def tool_inputs(model: type[BaseModel], skip: tuple[str, ...] = ("user_id", "chat_id")) -> dict[str, dict[str, Any]]:
    """A model's fields in the ``inputs`` form agent frameworks (smolagents) read:
    ``{name: {"type", "description", "nullable"}}``. ``skip``: fields the tool fills itself."""
    schema = model.model_json_schema()
    out: dict[str, dict[str, Any]] = {}
    for name, prop in schema["properties"].items():
        if name in skip:
            continue
        options = prop.get("anyOf", [prop])
        types = [o.get("type") for o in options if o.get("type") not in (None, "null")]
        entry: dict[str, Any] = {"type": _JSON_TYPES.get(types[0], "any") if types else "any"}
        entry["description"] = prop.get("description", name.replace("_", " "))
        if name not in schema.get("required", []):
            entry["nullable"] = True
        out[name] = entry
    return out


_LONE_SURROGATE = "holds a lone surrogate: not a character, and not writable as UTF-8"


def describe_invalid(exc: ValidationError) -> str:
    """A validation error as one line a person or an agent can act on: ``field: what is wrong``."""
    return describe_errors(exc.errors(include_url=False))


def describe_errors(errors: Iterable[Mapping[str, Any]], nowhere: str = "input") -> str:
    """pydantic's (or FastAPI's) error entries as one line: ``field: what is wrong; ...``."""
    problems = []
    for err in errors:
        where = ".".join(str(p) for p in err.get("loc", ())) or nowhere
        # pydantic's words for a str with a lone surrogate (JSON's "\ud800") say nothing of why.
        what = _LONE_SURROGATE if err.get("type") == "string_unicode" else err.get("msg", "invalid")
        problems.append(f"{where}: {what}")
    return "; ".join(problems)
