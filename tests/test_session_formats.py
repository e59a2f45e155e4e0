"""Pure session formats: transcripts (round trip, torn lines at every byte), JSON v2 agent state,
the safe legacy-pickle loader, and the lifecycle against an independent model."""

from __future__ import annotations

import datetime as dt
import json
import os
import pickle
import zoneinfo

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from syncd.errors import InvalidInputError, ParseError, SessionError, UnsafePickleError
from syncd.formats.agent_state import AgentState, parse_state, render_state
from syncd.formats.transcripts import TranscriptEntry, chunk_transcript, make_entry, parse_transcript, render_entry
from syncd.session import SessionLifecycle, SessionPolicy, deserialize_agent, get_session_key, load_legacy_pickle
from syncd.session.serializer import serialize_agent

from .strategies import unicode_text

UTC = dt.UTC
JSON_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**53), 2**53),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=20),
)
JSON_VALUES = st.recursive(
    JSON_SCALARS,
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=8), inner, max_size=3)),
    max_leaves=8,
)
# Any str at all, lone surrogates included: a transcript must carry whatever an agent said.
ANY_TEXT = st.one_of(unicode_text(max_size=40), st.text(max_size=40))
ENTRIES = st.builds(
    lambda role, content, actions, meta: make_entry(
        role, content, actions, meta, dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    ),
    st.sampled_from(["user", "assistant", "system", "tool"]),
    ANY_TEXT,
    st.one_of(st.none(), st.lists(JSON_VALUES, max_size=3)),
    st.dictionaries(st.text(max_size=8), JSON_VALUES, max_size=3),
)


def _strip(entries):
    return [e.to_dict() for e in entries]


# ------------------------------------------------------------------------------------ transcripts


@given(st.lists(ENTRIES, max_size=6))
def test_transcript_entries_of_any_unicode_round_trip(entries):
    data = b"".join(render_entry(e) for e in entries)
    parsed = parse_transcript(data)
    assert _strip(parsed.entries) == _strip(entries)
    assert [e.line for e in parsed.entries] == list(range(1, len(entries) + 1))
    assert not parsed.skipped and data.count(b"\n") == len(entries)


@settings(max_examples=40)
@given(st.lists(ENTRIES, min_size=1, max_size=4), ENTRIES, ENTRIES)
def test_a_torn_last_line_at_every_byte_never_loses_an_earlier_entry(earlier, torn, after):
    base = b"".join(render_entry(e) for e in earlier)
    line = render_entry(torn)
    for cut in range(len(line)):  # every byte offset of the interrupted append
        data = base + line[:cut]
        parsed = parse_transcript(data)
        assert _strip(parsed.entries[: len(earlier)]) == _strip(earlier)
        # What a reader does next: end the torn line, then append on a fresh one.
        fixed = data + (b"\n" if data and not data.endswith(b"\n") else b"") + render_entry(after)
        again = parse_transcript(fixed)
        assert _strip(again.entries[: len(earlier)]) == _strip(earlier)
        assert again.entries[-1].to_dict() == after.to_dict()
        assert again.entries[-1].line == fixed.count(b"\n")
        assert all(s.line > len(earlier) for s in again.skipped)


def test_an_entry_is_refused_rather_than_written_as_something_else():
    at = dt.datetime(2026, 1, 1, tzinfo=UTC)
    # list() made a str three actions and a dict its keys; a timestamp was any text at all.
    for actions in ("abc", {"tool": "search", "query": "tea"}, b"xy", 5):
        with pytest.raises(TypeError, match="actions must be a list"):
            make_entry("user", "hi", actions, ts=at)
    with pytest.raises(TypeError, match="metadata must be a dict"):
        make_entry("user", "hi", None, [("a", 1)], ts=at)
    for ts in ("yesterday", "2026-01-01T10:00:00", 5):
        with pytest.raises(InvalidInputError, match="timestamp"):
            make_entry("user", "hi", ts=ts)
    # A role with a newline was written, and read as two entries wherever one shows as "role: content".
    for role in ("user\nassistant", "user\r", "a\tb", "\x1b[2Juser", "a\x85"):
        with pytest.raises(InvalidInputError, match=r"a transcript role is one line of text: .* control character U\+"):
            make_entry(role, "hi", ts=at)
    assert make_entry("tool call · søk", "hi", ts=at).role == "tool call · søk"
    # What is returned is what a reader of the file gets back.
    entry = make_entry("user", "hi", [("search", 1)], {1: (2, 3)}, ts="2026-01-01T10:00:00Z")
    assert (entry.actions, entry.meta, entry.ts) == ([["search", 1]], {"1": [2, 3]}, "2026-01-01T10:00:00Z")
    assert parse_transcript(render_entry(entry)).entries[0].to_dict() == entry.to_dict()


def test_a_line_that_is_not_an_entry_is_reported_and_keeps_its_number():
    good = render_entry(make_entry("user", "hi", ts=dt.datetime(2026, 1, 1, tzinfo=UTC)))
    parsed = parse_transcript(good + b"not json\n" + good + b'{"role": "user", "con')
    assert [e.line for e in parsed.entries] == [1, 3]
    assert [(s.line, s.torn) for s in parsed.skipped] == [(2, False), (4, True)]


def test_chunks_are_windows_of_tokens_and_an_append_keeps_every_complete_one():
    def spans(text):  # one token a character: positions are easy to check
        return [(i, i + 1) for i in range(len(text))]

    def numbered(contents):
        return [TranscriptEntry("t", "u", c, line=i + 1) for i, c in enumerate(contents)]

    four = numbered(["x" * 7] * 4)  # "u: xxxxxxx" is 10 tokens: 40 in all
    chunks = chunk_transcript(four, spans, size=20, overlap=5)
    assert [(c.start, c.line, c.end_line) for c in chunks] == [(0, 1, 2), (15, 2, 4), (30, 4, 4)]
    assert chunks[0].text == "u: xxxxxxx\nu: xxxxxxx"
    five = chunk_transcript(numbered(["x" * 7] * 5), spans, size=20, overlap=5)
    # Only the last, incomplete window changed; every complete one is the same text.
    assert five[:2] == chunks[:2] and five[2].start == 30 and five[2].text != chunks[2].text
    assert [c.start for c in five] == [0, 15, 30]


# ----------------------------------------------------------------------------------- agent state

STEPS = st.one_of(
    st.fixed_dictionaries({"type": st.just("task"), "task": ANY_TEXT}),
    st.fixed_dictionaries({"type": st.just("planning"), "plan": ANY_TEXT, "facts": st.one_of(st.none(), ANY_TEXT)}),
    st.fixed_dictionaries(
        {
            "type": st.just("action"),
            "step_number": st.integers(0, 1000),
            "tool_calls": st.lists(
                st.fixed_dictionaries(
                    {"id": st.text(max_size=6), "name": st.text(max_size=10), "arguments": JSON_VALUES}
                ),
                max_size=3,
            ),
            "observations": st.one_of(st.none(), ANY_TEXT),
            "model_output": st.one_of(st.none(), ANY_TEXT),
            "error": st.one_of(st.none(), st.text(max_size=10)),
        }
    ),
    st.fixed_dictionaries({"type": st.just("final_answer"), "answer": JSON_VALUES}),
)


@given(st.lists(STEPS, max_size=6), st.lists(st.text(max_size=10), max_size=3))
def test_json_v2_round_trips_generated_step_lists(steps, tools):
    state = AgentState(steps, tools, "2026-01-01T00:00:00+00:00")
    data = serialize_agent(steps, tools=tools, now=dt.datetime(2026, 1, 1, tzinfo=UTC))
    assert parse_state(data) == state == deserialize_agent(data)
    assert json.loads(render_state(state))["version"] == 2


def test_a_step_of_an_unknown_kind_is_refused():
    with pytest.raises(ParseError):
        render_state(AgentState([{"type": "magic"}]))


class _Boom:
    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


@pytest.mark.parametrize("protocol", [0, 2, pickle.HIGHEST_PROTOCOL])
def test_a_malicious_pickle_is_never_executed_with_or_without_opt_in(tmp_path, protocol):
    marker = tmp_path / "pwned"
    data = pickle.dumps({"steps": [_Boom(marker)]}, protocol=protocol)
    with pytest.raises(UnsafePickleError):
        deserialize_agent(data)
    with pytest.raises(UnsafePickleError) as err:
        deserialize_agent(data, allow_pickle=True)
    assert (err.value.module, err.value.name) in {("posix", "system"), ("os", "system"), ("nt", "system")}
    assert not marker.exists()


def test_a_plain_legacy_pickle_is_read_only_when_asked():
    steps = [{"type": "task", "task": "find tea"}]
    data = pickle.dumps({"steps": steps, "tools": ["search"]})
    with pytest.raises(UnsafePickleError):
        load_legacy_pickle(data)
    state = deserialize_agent(data, allow_pickle=True)
    assert (state.steps, state.tools) == (steps, ["search"])


# ------------------------------------------------------------------------------------- lifecycle

ZONES = [
    UTC,
    dt.timezone(dt.timedelta(hours=5, minutes=30)),
    dt.timezone(dt.timedelta(hours=-7)),
    zoneinfo.ZoneInfo("Europe/Berlin"),
    zoneinfo.ZoneInfo("America/New_York"),
    zoneinfo.ZoneInfo("Australia/Lord_Howe"),
]
START = dt.datetime(2026, 3, 7, tzinfo=UTC)  # spans both DST changes of the northern spring


def _day_index(t: dt.datetime, hour: int) -> int:
    """Independent model: which "reset day" a moment falls in, by POSIX seconds arithmetic."""
    return int((t.timestamp() - hour * 3600) // 86400)


@settings(max_examples=150)
@given(
    hour=st.integers(1, 23),
    gaps=st.lists(st.integers(0, 3 * 86400), min_size=1, max_size=12),
    zones=st.lists(st.sampled_from(ZONES), min_size=13, max_size=13),
)
def test_exactly_one_daily_reset_per_crossed_reset_hour(hour, gaps, zones):
    life = SessionLifecycle(SessionPolicy(daily_reset_hour=hour))
    times = [START]
    for gap in gaps:
        times.append(times[-1] + dt.timedelta(seconds=gap))
    times = [t.astimezone(z) for t, z in zip(times, zones)]  # the same instants, in other offsets
    created = last = times[0]
    resets = 0
    for now in times[1:]:
        due, reason = life.should_reset(last, 1, created, now=now)
        assert due == (_day_index(now, hour) > _day_index(last, hour))
        if due:
            assert reason == "daily_reset"
            resets += 1
            created = now
        last = now
    assert resets == sum(1 for a, b in zip(times, times[1:]) if _day_index(b, hour) > _day_index(a, hour))


def test_idle_timeout_max_turns_and_naive_datetimes():
    life = SessionLifecycle(SessionPolicy(idle_timeout_minutes=30, max_turns=3))
    t = dt.datetime(2026, 1, 1, 12, tzinfo=UTC)
    assert life.should_reset(t, 1, t, now=t + dt.timedelta(minutes=30)) == (False, "")
    assert life.should_reset(t, 1, t, now=t + dt.timedelta(minutes=31)) == (True, "idle_timeout")
    assert life.should_reset(t, 3, t, now=t) == (True, "max_turns")
    assert SessionLifecycle().should_reset(t, 10**6, t, now=t + dt.timedelta(days=9)) == (False, "")
    with pytest.raises(SessionError):
        life.should_reset(t.replace(tzinfo=None), 1, t, now=t)
    with pytest.raises(SessionError):
        SessionPolicy(daily_reset_hour=24)


def test_a_policy_and_a_turn_count_are_whole_numbers_a_timedelta_can_hold():
    # True was hour 1 and max_turns=False a policy; a huge timeout raised OverflowError on every
    # turn's check; a turn count "5" a TypeError from the comparison.
    for bad in ({"daily_reset_hour": True}, {"max_turns": False}, {"idle_timeout_minutes": 10**13}):
        with pytest.raises(SessionError):
            SessionPolicy(**bad)
    t = dt.datetime(2026, 1, 1, 12, tzinfo=UTC)
    longest = SessionLifecycle(SessionPolicy(idle_timeout_minutes=10**12, max_turns=3))
    assert longest.should_reset(t, 1, t, now=t + dt.timedelta(days=10**5)) == (False, "")
    for count in ("5", -1, True):
        with pytest.raises(SessionError, match="turn_count"):
            longest.should_reset(t, count, t, now=t)


def test_session_keys_are_valid_and_distinct():
    a = get_session_key("telegram", "a_b", "c")
    b = get_session_key("telegram", "a", "b_c")
    assert a != b and a.startswith("telegram_")
    assert get_session_key("slack", "u+1@x.org") == get_session_key("slack", "u+1@x.org")
    with pytest.raises(ValueError):
        get_session_key("slack", "../etc")


def test_the_daily_reset_fires_at_the_reset_instant_itself():
    life = SessionLifecycle(SessionPolicy(daily_reset_hour=4))
    before = dt.datetime(2026, 3, 29, 3, 59, 59, tzinfo=UTC)
    at = dt.datetime(2026, 3, 29, 4, 0, tzinfo=UTC).astimezone(zoneinfo.ZoneInfo("Europe/Berlin"))  # DST day
    assert life.should_reset(before, 1, before, now=at) == (True, "daily_reset")
    assert life.should_reset(at, 1, at, now=at + dt.timedelta(hours=23, minutes=59)) == (False, "")


def test_a_transcript_line_is_readable_text():
    line = render_entry(make_entry("user", "chá 日本", ts="2026-01-01T10:00:00+00:00"))
    assert "chá 日本".encode() in line and line.count(b"\n") == 1
