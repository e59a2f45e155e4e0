"""Three-way merges by file kind (syncd.formats.merging): over generated histories of two
machines appending, editing and deleting facts in one daily log, the merge keeps every fact
either side has and the other did not delete, each once, with the edit where one side edited;
never a conflict marker; the same facts whichever side merges."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from syncd.formats import parse_daily_log
from syncd.formats.merging import (
    CONFLICT_CALLOUT,
    MARKER_SIZE,
    callouts_for_conflicts,
    merge_appends,
    merge_daily_log,
    merge_session_meta,
    merge_state,
)

REL = "memory/users/ana/2026-11-20.md"
WORDS = ["tea", "kites", "Oslo", "cello", "bees", "maps", "March 3", "peanuts", "sushi", "ferry"]


def fact_line(n: int, text: str) -> str:
    return f"- [context] Fact {n} about {text}. <!-- id:m-{n:016x} imp:0.5 -->\n"


def render(facts: dict[int, str], heading: str = "## 10:00\n") -> str:
    return "# 2026-11-20\n\n" + heading + "".join(fact_line(n, t) for n, t in facts.items())


def facts_of(text: str) -> dict[str, str]:
    log = parse_daily_log(text)
    return dict(zip(log.fact_ids(REL), (f.fact.content for f in log.facts()), strict=True))


side = st.fixed_dictionaries({
    "edit": st.sets(st.integers(0, 7), max_size=3),
    "delete": st.sets(st.integers(0, 7), max_size=3),
    "add": st.lists(st.integers(100, 140), max_size=5, unique=True),
    "word": st.sampled_from(WORDS),
})  # fmt: skip


def apply(base: dict[int, str], change: dict, tag: str) -> dict[int, str]:
    out = {}
    for n, text in base.items():
        if n in change["delete"] - change["edit"]:
            continue
        out[n] = f"{text} edited on {tag}" if n in change["edit"] else text
    for n in change["add"]:
        out[n] = f"{change['word']} {n}"  # the same n on both sides: the same fact appended twice
    return out


@settings(max_examples=150, deadline=None)
@given(size=st.integers(0, 8), ours=side, theirs=side)
def test_a_daily_log_merge_keeps_every_fact_once_with_its_edit(size, ours, theirs):
    base = {n: WORDS[n % len(WORDS)] for n in range(size)}
    mine, their = apply(base, ours, "A"), apply(base, theirs, "B")
    merged = merge_daily_log(render(base), render(mine), render(their), REL)
    got = facts_of(merged.text)
    assert "<" * 7 not in merged.text and ">" * 7 not in merged.text
    for n in set(mine) | set(their):
        key = f"m-{n:016x}"
        gone = (n in base and (n not in mine and base[n] == their.get(n))) or (
            n in base and n not in their and base[n] == mine.get(n)
        )
        if gone:
            assert key not in got, f"fact {n} was deleted on one side and untouched on the other"
            continue
        assert key in got, f"fact {n} lost"
        versions = {v for v in (mine.get(n), their.get(n)) if v is not None and v != base.get(n)}
        if len(versions) == 1:
            assert got[key] == f"Fact {n} about {versions.pop()}."
        if len(versions) == 2:  # edited differently on both: ours is the fact, theirs kept beside it
            assert got[key] == f"Fact {n} about {mine[n]}." and key in merged.kept_both
            assert f"Fact {n} about {their[n]}." in got.values()
    # each fact once: the text holds each id at most once
    for key in got:
        assert merged.text.count(f"id:{key} ") <= 1
    # whichever side merges, the same facts survive
    other = facts_of(merge_daily_log(render(base), render(their), render(mine), REL).text)
    assert set(other) == set(got) or merged.kept_both


def test_their_new_section_follows_ours_and_a_shared_append_is_one_line():
    base = render({0: "tea"})
    ours = base + "\n## 11:00\n" + fact_line(1, "kites") + fact_line(2, "bees")
    theirs = base + "\n## 11:05\n" + fact_line(2, "bees") + fact_line(3, "cello")
    text = merge_daily_log(base, ours, theirs, REL).text
    assert text == ours + "\n## 11:05\n" + fact_line(3, "cello")


def test_hand_written_text_and_a_missing_final_newline_survive():
    base = "# 2026-11-20\n\nA note of the person's.\n"
    ours = base + "- [note] Ours, without a final newline."
    theirs = base + "Another note.\n- [note] Theirs.\n"
    text = merge_daily_log(base, ours, theirs, REL).text
    assert text == ours + "\nAnother note.\n- [note] Theirs.\n"


@settings(max_examples=100, deadline=None)
@given(base=st.lists(st.text("abc{}:,\"", min_size=1, max_size=6), max_size=5, unique=True),
       ours=st.lists(st.text("abc{}", min_size=1, max_size=6), max_size=4),
       theirs=st.lists(st.text("abc{}", min_size=1, max_size=6), max_size=4))  # fmt: skip
def test_an_append_only_merge_loses_no_line_and_repeats_none_of_theirs(base, ours, theirs):
    def text(lines):
        return "".join(f"{line}\n" for line in lines)

    merged = merge_appends(text(base), text(base + ours), text(base + theirs)).text
    lines = merged.splitlines()
    assert lines[: len(base) + len(ours)] == base + ours
    assert set(lines) == set(base + ours + theirs)
    assert len(lines) == len(base + ours) + len(set(theirs) - set(base + ours))


def test_session_state_the_changed_side_wins_else_the_later():
    base = '{"last_active_at": "2026-11-20T10:00:00"}'
    later = '{"last_active_at": "2026-11-20T12:00:00"}'
    earlier = '{"last_active_at": "2026-11-20T11:00:00"}'
    assert merge_state(base, base, later).text == later
    assert merge_state(base, later, base).text == later
    assert merge_state(base, earlier, later).text == later
    assert merge_state(base, later, earlier).text == later


def _meta(turns: int, minute: int, resets: int = 0, flushed: tuple[str, ...] = ()) -> str:
    return json.dumps(
        {
            "created_at": "2026-11-20T09:00:00+00:00",
            "last_active_at": f"2026-11-20T10:{minute:02d}:00+00:00",
            "turn_count": turns,
            "resets": resets,
            "flushed": list(flushed),
            "compressions": 0,
        }
    )


@settings(max_examples=100, deadline=None)
@given(base=st.integers(0, 5), mine=st.integers(0, 4), their=st.integers(0, 4), mine_at=st.integers(1, 59),
       their_at=st.integers(1, 59), reset=st.sampled_from([None, "ours", "theirs"]),
       digests=st.lists(st.sampled_from("abcd"), max_size=4))  # fmt: skip
def test_session_meta_counts_the_turns_of_both_sides_and_keeps_the_later(
    base, mine, their, mine_at, their_at, reset, digests
):
    """session.json changed on both machines: the later side's fields; without a reset since the
    base the turn count is the base's plus each side's new turns (what the merged transcript
    holds); after a reset the later side's count; every flushed digest of either side kept."""
    ours_flushed, theirs_flushed = tuple(digests[:2]), tuple(digests[2:])
    old = _meta(base, 0)
    ours = _meta(mine if reset == "ours" else base + mine, mine_at, int(reset == "ours"), ours_flushed)
    theirs = _meta(their if reset == "theirs" else base + their, their_at, int(reset == "theirs"), theirs_flushed)
    merged = merge_session_meta(old, ours, theirs)
    if ours == theirs or theirs == old:
        assert merged.text == ours
        return
    if ours == old:
        assert merged.text == theirs
        return
    got = json.loads(merged.text)
    later = json.loads(theirs if their_at > mine_at else ours)
    assert got["last_active_at"] == later["last_active_at"] and got["resets"] == later["resets"]
    if reset is None:
        assert got["turn_count"] == base + mine + their
    else:
        assert got["turn_count"] == later["turn_count"]
    assert set(got["flushed"]) == set(ours_flushed) | set(theirs_flushed)
    assert len(got["flushed"]) == len(set(got["flushed"]))


@pytest.mark.parametrize("reset", [0, 1])
def test_session_meta_counts_the_failed_flushes_of_both_sides(reset):
    """Each machine's failed pre-compaction flushes count in the merged session.json, a reset on
    one side or not (a reset does not set them back): the later side's count alone lost the
    other's."""
    old, ours, theirs = (json.loads(_meta(1, minute)) for minute in (0, 10, 20))
    old["flush_failures"], ours["flush_failures"], theirs["flush_failures"] = 1, 2, 4
    theirs["resets"], theirs["turn_count"] = reset, 2 - reset
    merged = merge_session_meta(json.dumps(old), json.dumps(ours), json.dumps(theirs))
    assert json.loads(merged.text)["flush_failures"] == 1 + (2 - 1) + (4 - 1)


def test_agent_state_the_later_serialized_wins_whatever_its_offset():
    base = '{"serialized_at": "2026-11-20T10:00:00+00:00", "steps": []}'
    earlier = '{"serialized_at": "2026-11-20T12:30:00+02:00", "steps": [1]}'  # 10:30 UTC
    later = '{"serialized_at": "2026-11-20T10:45:00", "steps": [2]}'  # no offset: UTC
    assert merge_state(base, earlier, later).text == later
    assert merge_state(base, later, earlier).text == later


@settings(max_examples=60, deadline=None)
@given(common=st.lists(st.sampled_from(["# Page", "Shared line.", "", "- a list item"]), max_size=4),
       ours=st.lists(st.sampled_from(["Our words.", "More of ours.", ""]), min_size=1, max_size=3),
       theirs=st.lists(st.sampled_from(["Their words.", "Theirs again.", ""]), min_size=1, max_size=3))  # fmt: skip
def test_git_conflicts_become_a_callout_with_both_versions(tmp_path_factory, common, ours, theirs):
    folder: Path = tmp_path_factory.mktemp("m")
    files = {}
    for name, lines in (("base", [*common, "The line both change."]), ("ours", [*common, *ours]),
                        ("theirs", [*common, *theirs])):  # fmt: skip
        files[name] = folder / name
        files[name].write_text("".join(f"{line}\n" for line in lines))
    done = subprocess.run(["git", "merge-file", "-p", f"--marker-size={MARKER_SIZE}", "-L", "ours", "-L", "base",
                           "-L", "theirs", str(files["ours"]), str(files["base"]), str(files["theirs"])],
                          capture_output=True, text=True, check=False)  # fmt: skip
    merged = callouts_for_conflicts(done.stdout, "the other machine")
    assert "<" * MARKER_SIZE not in merged.text and "=" * MARKER_SIZE not in merged.text
    if done.returncode:
        assert merged.kept_both and CONFLICT_CALLOUT in merged.text
        for line in theirs:
            if line.strip():
                assert f"> {line}\n" in merged.text
    for line in ours:
        assert line in merged.text.splitlines()
