"""A ``session.json`` a person broke by hand is theirs: a turn (or a compressor's flush) refuses to
write over it, before writing anything, with one line naming the file, why, and how to recover;
once it is corrected or moved aside, turns go on. Keys a person added that syncd does not know
survive a turn."""

from __future__ import annotations

import asyncio
import json

import pytest

from syncd.config import Settings
from syncd.errors import ParseError
from syncd.memory import MemoryManager
from syncd.session import SessionRunner, read_transcript_file

REL = "memory/users/ana/sessions/s-1/session.json"

BROKEN = {
    "not JSON": b'{"created_at": "2026-03-01T10:00:00+00:00",\n  "turn_count": 3,,\n}\n',
    "not UTF-8": b'{"created_at": "\xff"}',
    "not an object": b"[1, 2, 3]\n",
    "a count of the wrong type": json.dumps(
        {"created_at": "2026-03-01T10:00:00+00:00", "last_active_at": "2026-03-01T11:00:00+00:00", "turn_count": "7"}
    ).encode(),
    "flushed of the wrong type": json.dumps(
        {"created_at": "2026-03-01T10:00:00+00:00", "last_active_at": "2026-03-01T11:00:00+00:00", "flushed": "abc"}
    ).encode(),
    "no timestamps": b'{"turn_count": 4}\n',
}


def runner_for(engine) -> SessionRunner:
    manager = MemoryManager(engine, settings=Settings(llm_model="gpt-4o-mini"))
    return SessionRunner(manager, extract=False)


@pytest.mark.parametrize("how", list(BROKEN))
def test_a_turn_refuses_to_write_over_a_broken_session_json_and_goes_on_once_it_is_fixed(engine, home, how):
    runner = runner_for(engine)
    asyncio.run(runner.process_turn("s-1", "hello", "hi", user_id="ana"))
    lines = len(read_transcript_file(engine.home, "ana", "s-1"))
    broken = BROKEN[how]
    (home / REL).write_bytes(broken)
    with pytest.raises(ParseError) as raised:
        asyncio.run(runner.process_turn("s-1", "again", "yes", user_id="ana"))
    message = str(raised.value)
    assert message.startswith(REL) and "will not write over it" in message
    assert f"git show HEAD:{REL}" in message and "\n" not in message
    if how == "not JSON":
        assert message.startswith(f"{REL}:2: not valid JSON")
    assert (home / REL).read_bytes() == broken  # every byte the person left
    assert len(read_transcript_file(engine.home, "ana", "s-1")) == lines  # nothing of the turn written
    # Moved aside (the fix the message names), the next turn starts the fields afresh.
    (home / REL).rename(home / (REL + ".broken"))
    result = asyncio.run(runner.process_turn("s-1", "again", "yes", user_id="ana"))
    assert result.session is not None and result.session.turn_count == 1
    assert (home / (REL + ".broken")).read_bytes() == broken


def test_keys_a_person_added_to_session_json_survive_a_turn(engine, home):
    runner = runner_for(engine)
    asyncio.run(runner.process_turn("s-1", "hello", "hi", user_id="ana"))
    fields = json.loads((home / REL).read_text())
    (home / REL).write_text(json.dumps({**fields, "note": "the bee project", "turn_count": 5}))
    result = asyncio.run(runner.process_turn("s-1", "again", "yes", user_id="ana"))
    assert result.session is not None and result.session.turn_count == 6
    kept = json.loads((home / REL).read_text())
    assert kept["note"] == "the bee project" and kept["turn_count"] == 6
