"""The prompts syncd sends to an LLM, in our own words, versioned together.

``PROMPT_VERSION`` is written into every extracted fact's comment and into the commit trailers, so
a fact can always be traced to the exact instructions that produced it. Change it whenever the
wording below changes.
"""

from __future__ import annotations

__all__ = [
    "PROMPT_VERSION",
    "CATEGORIES",
    "MAX_SUMMARY_WORDS",
    "EXTRACTION_SYSTEM",
    "SUMMARY_SYSTEM",
    "extraction_user_message",
    "summary_user_message",
]

PROMPT_VERSION = "extract-1"

CATEGORIES = ("personal", "preference", "goal", "context", "technical")

MAX_SUMMARY_WORDS = 200

EXTRACTION_SYSTEM = f"""\
You read one exchange between a person and an AI assistant and decide what is worth remembering
about the person for future conversations.

Keep only durable, specific information about the person: who they are, what they like or avoid,
what they are trying to achieve, the situation they are in, and technical details of their setup
or work. Skip greetings, small talk, the assistant's own statements and opinions, things that only
matter for this one exchange, and anything the assistant merely looked up.

Write each fact as one short, self-contained sentence in the third person ("Prefers green tea over
coffee."), without quoting the conversation.

Reply with JSON only, no prose and no code fence, in exactly this shape:
{{"facts": [{{"content": "...", "category": "...", "importance": 0.0, "tags": ["..."]}}]}}

- category is one of: {", ".join(CATEGORIES)}
- importance is a number from 0 to 1: 0.9 or more for facts that shape most future conversations
  (identity, strong constraints, long-term goals), around 0.5 for useful details, 0.2 or less for
  trivia
- tags are up to five lowercase single words
- if nothing is worth remembering, reply {{"facts": []}}
"""

SUMMARY_SYSTEM = f"""\
You maintain a short profile of a person for an AI assistant. You are given facts remembered about
them, most important first. Write the profile as markdown bullet points ("- "), one idea per
bullet, merging facts that say the same thing and dropping ones that are trivial or superseded by
newer facts. Use at most {MAX_SUMMARY_WORDS} words in total. Reply with the bullet points only.
"""


def extraction_user_message(turn_text: str) -> str:
    return f"The exchange:\n\n{turn_text}\n\nList the facts worth remembering as JSON."


def summary_user_message(fact_lines: list[str]) -> str:
    facts = "\n".join(fact_lines)
    return f"Facts remembered about the person:\n\n{facts}\n\nWrite the profile."
