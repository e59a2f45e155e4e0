"""Turning a conversation turn into facts through an LLM, and checking what the LLM says.

Everything from the LLM is untrusted input: it is size-capped, parsed as JSON and validated with
pydantic before any of it can become a line in a user's file. A turn is cleaned before it is sent:
the memory context syncd injected into the prompt (wrapped in ``<syncd-memory>`` markers by
:func:`wrap_injected`) and the system prompt are removed, because an extractor that sees its own
recalled memories or instructions will happily "remember" them again.
"""

from __future__ import annotations

import json
import logging
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, ValidationError

from ..config import Settings
from ..errors import ExtractionError
from ..formats import Fact
from ..formats.fact_ids import normalise_content
from .prompts import (
    EXTRACTION_SYSTEM,
    MAX_SUMMARY_WORDS,
    SUMMARY_SYSTEM,
    extraction_user_message,
    summary_user_message,
)

__all__ = [
    "NO_LLM_MESSAGE",
    "ConversationTurn",
    "ExtractedFact",
    "ExtractedTurn",
    "LLMReply",
    "as_turn",
    "wrap_injected",
    "strip_injected",
    "render_turn",
    "normalise_text",
    "complete",
    "parse_extraction",
    "parse_summary",
    "drop_echoes",
    "protected_texts",
    "extract_facts",
    "summarise_facts",
]

log = logging.getLogger(__name__)

NO_LLM_MESSAGE = "no LLM configured: set Settings.llm_model (SYNCD_LLM_MODEL) to extract or summarise facts"

# Bounds on untrusted sizes: a reply longer than this is not "a few facts", it is a runaway model.
MAX_REPLY_CHARS = 20_000
MAX_FACTS_PER_TURN = 30
MAX_FACT_CHARS = 400
MAX_TAGS = 8
# The turn sent for extraction; a long tool trace is cut in the middle, keeping both ends.
MAX_TURN_CHARS = 24_000
_MAX_STEP_CHARS = 2_000

_MARK = "syncd-memory"
_INJECTED_RE = re.compile(rf"<{_MARK}\b[^>]*>.*?(?:</{_MARK}>|\Z)", re.DOTALL)
_FENCE_RE = re.compile(r"\A\s*```[A-Za-z0-9_-]*\s*\n(.*?)\n?```\s*\Z", re.DOTALL)
_BULLET_RE = re.compile(r"\A\s*(?:[-*+•]|\d{1,3}[.)])\s+")
_TAG_CLEAN_RE = re.compile(r"[^\w./+-]+")


# --------------------------------------------------------------------------- the turn


class ConversationTurn(BaseModel):
    """One turn of a conversation: what the person said, what the agent did, what it answered.

    ``system_prompt`` is accepted only so its text can be kept out of extraction.
    """

    model_config = ConfigDict(extra="ignore", populate_by_name=True)

    user_message: str = Field("", validation_alias=AliasChoices("user_message", "user", "input", "message", "query"))
    steps: list[Any] = Field(default_factory=list, validation_alias=AliasChoices("steps", "agent_steps", "tool_calls"))
    response: str = Field("", validation_alias=AliasChoices("response", "assistant", "output", "answer"))
    system_prompt: str | None = None
    session_id: str | None = None
    transcript_line: int | None = Field(None, ge=0)
    turn_id: str | None = None


@dataclass(frozen=True)
class ExtractedTurn:
    """What the LLM made of one turn, not yet remembered (``MemoryManager.extract_turn``): the
    turn as parsed, the facts it holds and the model that answered."""

    turn: ConversationTurn
    facts: tuple[Fact, ...]
    model: str


def _from_messages(messages: Sequence[Mapping]) -> ConversationTurn:
    """An OpenAI-style message list: system text is kept aside, tool traffic becomes steps."""
    users, steps, answers, systems = [], [], [], []
    for message in messages:
        role = message.get("role")
        content = message.get("content")
        text = content if isinstance(content, str) else json.dumps(content, default=str)
        if role == "system":
            systems.append(text)
        elif role == "user":
            users.append(text)
        elif role == "assistant" and not message.get("tool_calls"):
            answers.append(text)
        else:
            steps.append(dict(message))
    return ConversationTurn(
        user_message="\n\n".join(users),
        steps=steps,
        response="\n\n".join(answers),
        system_prompt="\n\n".join(systems) or None,
    )


def as_turn(turn: ConversationTurn | Mapping | Sequence[Mapping] | str) -> ConversationTurn:
    """Accept what agents have at hand: a turn, a dict, a message list or the user's text."""
    if isinstance(turn, ConversationTurn):
        return turn
    if isinstance(turn, str):
        return ConversationTurn(user_message=turn)
    try:
        if isinstance(turn, Mapping):
            return ConversationTurn.model_validate(dict(turn))
        if isinstance(turn, Sequence) and not isinstance(turn, str) and all(isinstance(m, Mapping) for m in turn):
            return _from_messages(turn)
    except ValidationError as exc:
        raise ExtractionError(f"not a conversation turn: {_first_error(exc)}") from None
    raise ExtractionError(f"not a conversation turn: {type(turn).__name__}")


def wrap_injected(kind: str, body: str) -> str:
    """Mark text syncd puts into a prompt, so :func:`strip_injected` can take it out again.
    A closing marker inside ``body`` (a fact or block saying ``</syncd-memory>``) is escaped:
    it ended the block early, so what followed it read as the person's own words, outside the
    memory, and was remembered again from the next turn that echoed the prompt."""
    inert = body.strip().replace(f"</{_MARK}", f"&lt;/{_MARK}")
    return f'<{_MARK} kind="{kind}">\n{inert}\n</{_MARK}>'


def strip_injected(text: str) -> str:
    """Remove every ``<syncd-memory>`` block (an unclosed one runs to the end: it was cut off)."""
    return _INJECTED_RE.sub("", text)


def _clean(text: str, system_prompt: str | None) -> str:
    if system_prompt:
        for variant in {system_prompt.strip(), strip_injected(system_prompt).strip()}:
            if variant:
                text = text.replace(variant, "")
    return strip_injected(text).strip()


def _step_text(step: Any) -> str:
    text = step if isinstance(step, str) else json.dumps(step, default=str, ensure_ascii=False)
    return text if len(text) <= _MAX_STEP_CHARS else text[:_MAX_STEP_CHARS] + " …"


def render_turn(turn: ConversationTurn) -> str:
    """The cleaned text of a turn as the extractor sees it."""
    system = turn.system_prompt
    parts = []
    user = _clean(turn.user_message, system)
    if user:
        parts.append(f"PERSON:\n{user}")
    steps = [s for s in (_clean(_step_text(step), system) for step in turn.steps) if s]
    if steps:
        parts.append("ASSISTANT STEPS:\n" + "\n".join(f"- {s}" for s in steps))
    answer = _clean(turn.response, system)
    if answer:
        parts.append(f"ASSISTANT ANSWER:\n{answer}")
    text = "\n\n".join(parts)
    if len(text) > MAX_TURN_CHARS:
        half = MAX_TURN_CHARS // 2
        text = text[:half] + "\n[…]\n" + text[-half:]
    return text


def normalise_text(text: str) -> str:
    """A fact id's normal form (NFC, casefolded, whitespace collapsed) without trailing
    punctuation: "the same words"."""
    return normalise_content(text).rstrip(" .!;")


# --------------------------------------------------------------------------- the LLM


@dataclass(frozen=True)
class LLMReply:
    text: str
    model: str


def _use_bundled_prices() -> None:
    """litellm fetches its model price list from the network when it is imported, retrying for
    a while when offline; syncd never needs prices that fresh. Its bundled copy is used unless
    the person set LITELLM_LOCAL_MODEL_COST_MAP themselves (to "False" to fetch). It has to be in
    the environment before the first ``import litellm``, which reads it once."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")


async def complete(settings: Settings, system: str, user: str, options: Mapping[str, Any]) -> LLMReply:
    """One chat completion through litellm. ``options`` go into the call unchanged (api_base,
    api_key, and in tests litellm's own ``mock_response``)."""
    if not settings.llm_model:
        raise ExtractionError(NO_LLM_MESSAGE)
    _use_bundled_prices()
    import litellm  # slow to import; only paid by processes that extract

    messages = [{"role": "system", "content": system}, {"role": "user", "content": user}]
    try:
        response = await litellm.acompletion(
            model=settings.llm_model,
            messages=messages,
            timeout=settings.llm_timeout_s,
            temperature=0,
            **dict(options),
        )
    except Exception as exc:  # litellm raises a different class per provider; all mean "no answer"
        raise ExtractionError(f"the LLM call to {settings.llm_model} failed: {exc}") from exc
    try:
        text = response.choices[0].message.content
    except (AttributeError, IndexError, TypeError):
        text = None
    if not isinstance(text, str):
        raise ExtractionError(f"the LLM {settings.llm_model} returned no text")
    return LLMReply(text=text, model=settings.llm_model)


# --------------------------------------------------------------------------- checking replies


class ExtractedFact(BaseModel):
    """One fact as the LLM must give it. Strict: a string importance or a number for content is
    a malformed reply, not something to coerce."""

    model_config = ConfigDict(strict=True, extra="ignore")

    content: str = Field(min_length=1, max_length=MAX_FACT_CHARS)
    category: Literal["personal", "preference", "goal", "context", "technical"]
    importance: float = Field(ge=0.0, le=1.0)
    tags: list[str] = Field(default_factory=list, max_length=MAX_TAGS)


class _ExtractionReply(BaseModel):
    model_config = ConfigDict(strict=True, extra="ignore")

    facts: list[ExtractedFact] = Field(max_length=MAX_FACTS_PER_TURN)


def _first_error(exc: ValidationError) -> str:
    err = exc.errors()[0]
    where = ".".join(str(p) for p in err.get("loc", ())) or "reply"
    return f"{where}: {err.get('msg', 'invalid')}"


def _unfence(text: str) -> str:
    m = _FENCE_RE.match(text)
    return m.group(1) if m else text.strip()


def _tags(raw: Iterable[str]) -> tuple[str, ...]:
    out: list[str] = []
    for tag in raw:
        clean = _TAG_CLEAN_RE.sub("-", tag.strip().lstrip("#").casefold()).strip("-")
        if clean and clean not in out:
            out.append(clean)
    return tuple(out)


def parse_extraction(text: str) -> list[Fact]:
    """The facts in an extraction reply, or ExtractionError saying what is wrong with it.

    All or nothing: one bad fact rejects the reply, so a half-understood answer writes nothing.
    """
    if len(text) > MAX_REPLY_CHARS:
        raise ExtractionError(f"the LLM reply is {len(text)} characters, over the {MAX_REPLY_CHARS} limit")
    try:
        data = json.loads(_unfence(text))
    except json.JSONDecodeError as exc:
        raise ExtractionError(f"the LLM reply is not JSON ({exc.msg} at position {exc.pos})") from None
    if isinstance(data, list):
        data = {"facts": data}
    try:
        reply = _ExtractionReply.model_validate(data)
    except ValidationError as exc:
        raise ExtractionError(f"the LLM reply is malformed: {_first_error(exc)}") from None
    facts = []
    for i, item in enumerate(reply.facts):
        content = " ".join(item.content.split())
        try:
            facts.append(
                Fact(content=content, category=item.category, tags=_tags(item.tags), importance=item.importance)
            )
        except ValueError as exc:
            raise ExtractionError(f"the LLM reply is malformed: facts.{i}: {exc}") from None
    return facts


def parse_summary(text: str, max_words: int = MAX_SUMMARY_WORDS) -> str:
    """Bullet points of at most ``max_words`` words (whole bullets kept while they fit)."""
    if len(text) > MAX_REPLY_CHARS:
        raise ExtractionError(f"the LLM summary is {len(text)} characters, over the {MAX_REPLY_CHARS} limit")
    bullets = []
    for line in strip_injected(_unfence(text)).splitlines():
        words = _BULLET_RE.sub("", line).split()
        if words:
            bullets.append(words)
    if not bullets:
        raise ExtractionError("the LLM summary is empty")
    kept: list[list[str]] = []
    used = 0
    for words in bullets:
        if used + len(words) > max_words:
            if not kept:
                kept.append(words[:max_words])
            break
        kept.append(words)
        used += len(words)
    return "\n".join("- " + " ".join(words) for words in kept) + "\n"


def drop_echoes(facts: Sequence[Fact], protected: Iterable[str]) -> list[Fact]:
    """Facts whose words the turn's injected memory or system prompt already holds are echoes."""
    haystacks = [normalise_text(p) for p in protected if p and p.strip()]
    if not haystacks:
        return list(facts)
    kept = []
    for fact in facts:
        needle = normalise_text(fact.content)
        if any(needle in hay for hay in haystacks):
            log.info("dropping an echo of injected context: %r", fact.content)
            continue
        kept.append(fact)
    return kept


def protected_texts(turn: ConversationTurn) -> list[str]:
    """What must never come back as a fact: injected memory blocks and the system prompt."""
    found = [
        m.group(0)
        for part in (turn.user_message, turn.response, *map(_step_text, turn.steps))
        for m in _INJECTED_RE.finditer(part)
    ]
    if turn.system_prompt:
        found.append(turn.system_prompt)
    return found


# --------------------------------------------------------------------------- the two LLM jobs


async def extract_facts(
    settings: Settings, turn: ConversationTurn, options: Mapping[str, Any]
) -> tuple[list[Fact], str]:
    """(facts, model) for a turn; no facts when the cleaned turn is empty (no LLM call made)."""
    if not settings.llm_model:
        raise ExtractionError(NO_LLM_MESSAGE)
    text = render_turn(turn)
    if not text:
        return [], settings.llm_model
    reply = await complete(settings, EXTRACTION_SYSTEM, extraction_user_message(text), options)
    facts = drop_echoes(parse_extraction(reply.text), protected_texts(turn))
    return facts, reply.model


async def summarise_facts(settings: Settings, fact_lines: list[str], options: Mapping[str, Any]) -> str:
    reply = await complete(settings, SUMMARY_SYSTEM, summary_user_message(fact_lines), options)
    return parse_summary(reply.text)
