"""Search as of a past commit (syncd.engine.asof): over generated histories (facts added, edited
and deleted, pages written and removed, one commit each), a search at revision R equals the
search of a fresh home made from a checkout of R (git worktree), for any R and either user; no
user ever sees another's past rows; revisions by name and by date; clear errors."""

from __future__ import annotations

import datetime as dt
import hashlib
import itertools
import os
import subprocess
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.compute
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import syncd
from syncd.engine import asof
from syncd.engine.asof import past_engine, resolve_revision, search_at
from syncd.errors import InvalidInputError, NotFoundError
from syncd.index import snapshot

from .cli_helpers import run_main
from .strategies import examples

USERS = ["ana", "bob"]
TOPICS = ["green tea", "sailing to Oslo", "the cello", "beekeeping", "old maps", "a peanut allergy"]


def git(root: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, check=True).stdout


def view(hits) -> list[tuple]:
    # Scores to 1e-9: the past index starts as a copy of the nearest index's rows, so a row whose
    # copy went wrong (its vector, its words, its date) would move its score far more than that.
    return [(h.id, h.path, h.line, h.user_id, round(h.score, 9)) for h in hits]


STEP = st.tuples(st.sampled_from(["add", "edit", "delete", "refile", "page", "unpage", "move"]),
                 st.sampled_from(USERS), st.integers(0, len(TOPICS) - 1))  # fmt: skip
# Histories of up to 8 commits a CI run (each costs a sync and a commit), up to 50 under --slow.
LONGEST = 8 if examples(1) <= 1 else 50


def apply_step(root: Path, step: tuple[str, str, int], n: int) -> None:
    what, user, topic = step
    log = root / "memory" / "users" / user / "2026-11-20.md"
    page = root / "vault" / f"Topic{topic}.md"
    lines = log.read_text().splitlines(keepends=True) if log.exists() else ["# 2026-11-20\n", "\n"]
    facts = [i for i, line in enumerate(lines) if line.startswith("- [")]
    if what == "add" or (what in ("edit", "delete", "refile") and not facts):
        lines.append(f"- [context] {user.title()} talks about {TOPICS[topic]} (step {n}).\n")
    elif what == "edit":
        lines[facts[topic % len(facts)]] = f"- [context] {user.title()} changed her mind on {TOPICS[topic]}.\n"
    elif what == "delete":
        del lines[facts[topic % len(facts)]]
    elif what == "refile":  # a fact moved to the next day's log, word for word
        later = log.with_name("2026-11-21.md")
        kept = later.read_text() if later.exists() else "# 2026-11-21\n\n"
        later.write_text(kept + lines.pop(facts[topic % len(facts)]))
    elif what == "page":
        page.write_text(f"# Topic {topic}\n\nNotes on {TOPICS[topic]}, written at step {n}.\n")
    elif what == "move" and page.exists():  # a page moved into a folder, word for word
        (root / "vault" / "moved").mkdir(exist_ok=True)
        page.rename(root / "vault" / "moved" / page.name)
    elif what == "unpage" and page.exists():
        page.unlink()
    log.parent.mkdir(parents=True, exist_ok=True)
    log.write_text("".join(lines))


@settings(max_examples=examples(3), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=st.lists(STEP, min_size=2, max_size=LONGEST), picks=st.lists(st.tuples(st.integers(0, LONGEST - 1),
       st.sampled_from(USERS), st.integers(0, len(TOPICS) - 1)), min_size=1, max_size=2))  # fmt: skip
def test_a_search_at_a_revision_equals_a_fresh_home_checked_out_there(tmp_path_factory, embedder, steps, picks):
    folder = tmp_path_factory.mktemp("asof")
    root = syncd.init(folder / "home").home
    shas = []
    with syncd.open(root, embedder=embedder) as engine:
        for n, step in enumerate(steps):
            apply_step(root, step, n)
            engine.sync()
            engine.commit()
            shas.append(git(root, "rev-parse", "HEAD").strip())
        for index, user, topic in picks:
            sha = shas[index % len(shas)]
            query = f"What about {TOPICS[topic]}?"
            # One moment for both: recency moves every score a little with each second.
            now = dt.datetime.now(dt.UTC)
            got = search_at(engine, query, sha, user_id=user, limit=5, now=now)
            checkout = folder / f"checkout-{sha[:8]}"
            if not checkout.exists():
                git(root, "worktree", "add", "--detach", "--quiet", str(checkout), sha)
            with syncd.open(checkout, embedder=embedder) as fresh:
                fresh.sync()
                expected = fresh.search(query, user_id=user, limit=5, now=now)
                expected_rows = rows(fresh)
            assert view(got) == view(expected)
            assert all(h.user_id in (user, None) for h in got)
            # The kept past index holds the rebuild's very rows: every column, and the vectors
            # it takes from the home's embedding cache (syncd.index.frozen).
            with past_engine(engine, sha) as past:
                assert rows(past) == expected_rows


def rows(engine) -> list[dict]:
    return sorted(engine.index.all_rows(with_vectors=True).to_pylist(), key=lambda r: (r["path"], r["id"]))


@pytest.fixture(scope="module")
def history(tmp_path_factory, embedder):
    """One home with four commits a second apart, shared by the tests below (they only read it)."""
    root = syncd.init(tmp_path_factory.mktemp("history") / "home").home
    with syncd.open(root, embedder=embedder) as engine:
        for n, step in enumerate([("add", "ana", 0), ("add", "bob", 1), ("edit", "ana", 0), ("delete", "bob", 1)]):
            apply_step(root, step, n)
            engine.sync()
            engine.commit()
            time.sleep(1.1)  # a commit per second: the date of each is a revision of its own
        yield engine


def test_revisions_by_name_and_by_date(history):
    root = history.home.root
    first = git(root, "rev-list", "--max-parents=0", "HEAD").strip()
    assert resolve_revision(root, "HEAD~1") == git(root, "rev-parse", "HEAD~1").strip()
    when = git(root, "log", "-1", "--format=%cI", "HEAD~2").strip()
    assert resolve_revision(root, when) == git(root, "rev-parse", "HEAD~2").strip()
    naive = dt.datetime.fromisoformat(when).astimezone().replace(tzinfo=None).isoformat()
    assert resolve_revision(root, naive) == git(root, "rev-parse", "HEAD~2").strip()
    assert resolve_revision(root, first) == first
    # bob's fact is deleted now, and was there two commits ago
    assert not any("Bob" in h.content for h in history.search("sailing to Oslo", user_id="bob"))
    assert any("Bob" in h.content for h in search_at(history, "sailing to Oslo", "HEAD~1", user_id="bob"))
    assert [h.id for h in history.search("sailing to Oslo", user_id="bob", at="HEAD~1")] == [
        h.id for h in search_at(history, "sailing to Oslo", "HEAD~1", user_id="bob")
    ]


def test_bad_revisions_are_clear_errors(history):
    with pytest.raises(NotFoundError, match="no commit"):
        search_at(history, "tea", "no-such-branch", user_id="ana")
    with pytest.raises(NotFoundError, match="at or before"):
        search_at(history, "tea", "1999-01-01", user_id="ana")
    with pytest.raises(InvalidInputError):
        search_at(history, "tea", "--all", user_id="ana")


def test_a_date_git_understands_names_the_last_commit_at_or_before_it(tmp_path, monkeypatch):
    # "yesterday" read "no commit 'yesterday'": only ISO dates were dates, though `git log
    # --before` takes git's own. A home made three days ago, with one commit an hour ago:
    three_days_ago = dt.datetime.now(dt.UTC) - dt.timedelta(days=3)
    monkeypatch.setenv("GIT_COMMITTER_DATE", three_days_ago.isoformat())
    root = syncd.init(tmp_path / "home").home
    monkeypatch.setenv("GIT_COMMITTER_DATE", (dt.datetime.now(dt.UTC) - dt.timedelta(hours=1)).isoformat())
    git(root, "commit", "--allow-empty", "-q", "-m", "an hour ago")
    first, last = git(root, "rev-list", "--max-parents=0", "HEAD").strip(), git(root, "rev-parse", "HEAD").strip()
    for at in (
        "yesterday",
        "2 days ago",
        "2.days.ago",
        "3 days ago",
        "Yesterday noon",
        "two days ago",
        "2 days ago at noon",
        "2 days ago 00:00 UTC",
    ):
        assert resolve_revision(root, at) == first, at
    assert resolve_revision(root, "now") == resolve_revision(root, "30 minutes ago") == last
    # Ordinals and joining words, which git reads and skips (refused for a while as "no date").
    two_days_ago = dt.datetime.now() - dt.timedelta(days=2)
    day, month = two_days_ago.day, two_days_ago.strftime("%B")
    suffix = "th" if 10 <= day % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(day % 10, "th")
    for at in (
        f"{month} {day}{suffix} {two_days_ago.year}",
        f"{day}{suffix} of {month} {two_days_ago.year}",
        "2 days and 3 hours ago",
    ):
        assert resolve_revision(root, at) == first, at
    with pytest.raises(NotFoundError, match=r"no commit at or before 4 days ago \(\d{4}-\d\d-\d\d \d\d:\d\d\)"):
        resolve_revision(root, "4 days ago")
    # Neither a date nor a commit: what git's lenient date parser would read as "now" or the
    # 5th of the month is still a missing commit, not today's memory.
    # Nor a mistyped tag or a ticket number, whose digits git reads as a day or a time.
    for at in ("no-such-branch", "never", "abc123", "HEAD~5", "main^2", "v2", "ticket-42", "x0", "release 7"):
        with pytest.raises(NotFoundError, match="no commit '"):
            resolve_revision(root, at)
    old = run_main("search", "tea", "--at", "8 days ago", "--home", str(root))
    assert old.returncode == 1 and old.stderr.startswith("syncd: error: no commit at or before 8 days ago (")
    assert old.stderr.count("\n") == 1


_NAMES = st.from_regex(r"[A-Za-z]{1,8}[-_ .]?[0-9]{1,3}", fullmatch=True)


@settings(max_examples=examples(25), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(at=_NAMES)
def test_law_a_name_with_a_number_that_names_no_commit_is_no_date(tmp_path, at):
    """A branch or tag name that is not there ("v2", "ticket-42", "rc 7") is a missing commit,
    whatever git's date parser would make of its digits, unless its word is one of a date's."""
    root = tmp_path / "home"
    if not root.exists():
        syncd.init(root)
    word = at.rstrip("0123456789 -_.").lower()
    assume(not asof._date_word(word))  # white-box: which words a date may hold is the module's table
    with pytest.raises(NotFoundError, match="no commit '"):
        resolve_revision(root, at)


def test_a_date_that_is_no_date_or_a_path_holding_one_is_an_error_not_another_time(tmp_path):
    # git's date parser is lenient: 2026-13-45 read as now and 9999-99-99T99:99 as 1999 (the
    # workbench's "as of" showed HEAD as the past asked for), 2026-11-22T25:00 as that day at the
    # current time, and HEAD:memory/users/ana/2026-11-22.md as the date in its file name.
    root = syncd.init(tmp_path / "home").home
    for at in ("2026-13-45", "0000-00-00", "9999-99-99T99:99", "2026-11-22T25:00", "2026-02-30 10:00"):
        with pytest.raises(InvalidInputError, match=f"bad date '{at}'"):
            resolve_revision(root, at)
    for at in ("HEAD:memory/users/ana/2026-11-22.md", "main:2026-11-22"):
        with pytest.raises(NotFoundError, match="no commit '"):
            resolve_revision(root, at)
    head = git(root, "rev-parse", "HEAD").strip()
    # Past 2099 git's date parser reads no year: those said "no commit at or before" them.
    for at in ("2099-01-01", "2099-01-01 14:00", "2099-1-1T09:30:00", "2100-01-01", "9999-12-31T23:59:59"):
        assert resolve_revision(root, at) == head, at
    with pytest.raises(NotFoundError, match="no commit at or before last friday 14:00"):
        resolve_revision(root, "last friday 14:00")  # still a date: the home is younger


def test_a_date_yet_to_come_names_a_commit_dated_ahead_of_this_clock(tmp_path):
    # A commit made on a machine whose clock runs ahead (pulled here) is dated after this
    # machine's now: a date yet to come, taken as now, held it back and named the one before.
    root = syncd.init(tmp_path / "home").home
    (root / "vault" / "Ahead.md").write_text("# Ahead\n\nWritten where the clock runs a day ahead.\n")
    ahead = (dt.datetime.now(dt.UTC) + dt.timedelta(days=2)).isoformat(timespec="seconds")
    env = {**os.environ, "GIT_COMMITTER_DATE": ahead, "GIT_AUTHOR_DATE": ahead}
    for args in (
        ["add", "vault/Ahead.md"],
        ["-c", "user.name=Bo", "-c", "user.email=bo@example.org", "commit", "-qm", "ahead"],
    ):
        subprocess.run(["git", *args], cwd=root, env=env, check=True)
    head = git(root, "rev-parse", "HEAD").strip()
    for at in ("2099-01-01", "2100-01-01", "9999-12-31T23:59:59"):
        assert resolve_revision(root, at) == head, at


def test_a_range_or_an_exclusion_is_not_one_revision(history):
    # git prints two shas (or a ^sha) for these: taken as a commit, read-tree failed on "^<sha>".
    root = history.home.root
    for at in ("HEAD~1..HEAD", "HEAD~2...HEAD", "^HEAD"):
        with pytest.raises(InvalidInputError, match="not one commit"):
            resolve_revision(root, at)
    with pytest.raises(InvalidInputError, match="not one commit"):
        search_at(history, "tea", "HEAD~1..HEAD", user_id="ana")


def test_a_short_sha_two_commits_share_is_ambiguous_not_missing(tmp_path):
    root = syncd.init(tmp_path / "home").home
    tree = git(root, "rev-parse", "HEAD^{tree}").strip()
    by_prefix: dict[str, str] = {}
    for n in itertools.count():  # commits whose shas share 4 hex digits: a few hundred tries
        body = f"tree {tree}\nauthor a <a@b> 0 +0000\ncommitter a <a@b> 0 +0000\n\ncommit {n}\n".encode()
        sha = hashlib.sha1(b"commit %d\0" % len(body) + body).hexdigest()
        if sha[:4] in by_prefix:
            break
        by_prefix[sha[:4]] = body.decode()
    for text in (by_prefix[sha[:4]], body.decode()):
        subprocess.run(
            ["git", "hash-object", "-t", "commit", "-w", "--stdin"], cwd=root, input=text.encode(), check=True
        )
    # git names neither: it read "no commit '<prefix>' in this home's history".
    with pytest.raises(InvalidInputError, match=r"ambiguous revision .*2 commits"):
        resolve_revision(root, sha[:4])
    assert resolve_revision(root, sha[:12]) == sha


def test_git_is_left_as_it_was_and_past_indexes_are_kept_few(history):
    root = history.home.root
    status, head, counts = git(root, "status", "--porcelain"), git(root, "rev-parse", "HEAD"), history.counts()
    for back in range(4):
        with past_engine(history, f"HEAD~{back}") as past:
            assert past.home.root != root
    assert git(root, "status", "--porcelain") == status and git(root, "rev-parse", "HEAD") == head
    history.sync()  # the past trees under .syncd/ are never the home's files
    assert history.counts() == counts and history.status().fresh
    kept = [p for p in (history.home.state_dir / "asof").iterdir() if p.is_dir()]
    assert len(kept) <= 4


def test_a_past_index_held_open_is_never_evicted(history):
    root = history.home.root
    others = ["HEAD", "HEAD~1", "HEAD~2", git(root, "rev-list", "--max-parents=0", "HEAD").strip()]
    with past_engine(history, "HEAD~3") as held:
        before = [h.id for h in held.search("sailing to Oslo", user_id="bob")]
        for revision in others:  # more than KEEP others: the held one would be the oldest
            search_at(history, "tea", revision, user_id="ana")
        assert held.home.root.is_dir()
        assert [h.id for h in held.search("sailing to Oslo", user_id="bob")] == before


def test_an_unfinished_past_index_is_made_again_and_two_processes_share_one(history):
    import sys

    root = history.home.root
    sha = git(root, "rev-parse", "HEAD~1").strip()
    # What a kill halfway through an older syncd's build left: the tree, no mark of completion.
    folder = history.home.state_dir / "asof" / sha
    subprocess.run(["rm", "-rf", str(folder)], check=True)
    (folder / "tree" / "memory").mkdir(parents=True)
    assert any("Bob" in h.content for h in search_at(history, "sailing to Oslo", sha, user_id="bob"))
    # Two processes asking the same new revision at once both answer, from one past index.
    other = git(root, "rev-parse", "HEAD~2").strip()
    subprocess.run(["rm", "-rf", str(history.home.state_dir / "asof" / other)], check=True)
    command = [sys.executable, "-m", "syncd", "search", "tea", "--at", other, "--user", "ana", "--home", str(root)]
    runs = [subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    outputs = [run.communicate(timeout=300) for run in runs]
    assert [run.returncode for run in runs] == [0, 0], outputs
    assert outputs[0][0] == outputs[1][0] and "Ana" in outputs[0][0]
    assert not [p for p in (history.home.state_dir / "asof").iterdir() if p.name.startswith(".")]


def test_the_command_line_searches_a_past_commit(history):
    from click.testing import CliRunner

    from syncd.cli import cli

    root = str(history.home.root)
    past = CliRunner().invoke(cli, ["search", "sailing to Oslo", "--at", "HEAD~1", "--user", "bob", "--home", root])
    now = CliRunner().invoke(cli, ["search", "sailing to Oslo", "--user", "bob", "--home", root])
    assert past.exit_code == 0 and "Bob talks about sailing to Oslo" in past.output
    assert now.exit_code == 0 and "Bob talks about" not in now.output
    bad = CliRunner().invoke(cli, ["search", "tea", "--at", "nope", "--home", root])
    assert bad.exit_code == 1


def test_the_rest_api_searches_a_past_commit_within_the_tokens_user(tmp_path, embedder):
    from .server_helpers import served_in_thread

    root = syncd.init(tmp_path / "home").home
    with syncd.open(root, embedder=embedder) as engine:
        for n, step in enumerate([("add", "ana", 3), ("add", "bob", 5), ("delete", "ana", 0)]):
            apply_step(root, step, n)
            engine.sync()
            engine.commit()
    with served_in_thread(root, embedder) as served:
        _, bob_token = served.tokens.add("bob")
        with served.client(served.admin) as admin, served.client(bob_token) as bob:

            def hits(client, **params):
                answer = client.get("/memory/archival", params={"query": "Who keeps bees?", **params})
                assert answer.status_code == 200, answer.text
                return [h["content"] for h in answer.json()["hits"]]

            assert not any("Ana" in h for h in hits(admin, user_id="ana"))
            assert any("Ana talks about beekeeping" in h for h in hits(admin, user_id="ana", at="HEAD~1"))
            # bob's token searches bob's past only, whatever the revision
            assert not any("Ana" in h for h in hits(bob, at="HEAD~1"))
            assert bob.get("/memory/archival", params={"query": "bees", "at": "nope"}).status_code == 404


def test_a_kept_revision_holds_rows_not_vectors_and_outlives_every_change_of_now(tmp_path, embedder):
    root = syncd.init(tmp_path / "home").home
    with syncd.open(root, embedder=embedder) as engine:
        for n, step in enumerate([("add", "ana", 0), ("add", "ana", 1), ("page", "ana", 2), ("add", "bob", 3)]):
            apply_step(root, step, n)
            engine.sync()
            engine.commit()
        sha = git(root, "rev-parse", "HEAD~1").strip()
        now = dt.datetime.now(dt.UTC)

        def then() -> list[tuple]:
            return view(search_at(engine, "green tea and the cello", sha, user_id="ana", limit=5, now=now))

        before = then()
        assert before
        folder = engine.home.state_dir / "asof" / sha
        # Rows without vectors, no LanceDB table, none of the commit's files: the vectors are the
        # embedding cache's, shared with now and with every other revision.
        assert "vector" not in pq.read_schema(folder / "rows.parquet").names
        assert not list(folder.rglob("*.lance")) and not (folder / "tree" / "memory").exists()
        # Now changes every way it can: new commits, a rebuild, a compaction.
        for n, step in enumerate([("edit", "ana", 0), ("delete", "ana", 1), ("unpage", "ana", 2)]):
            apply_step(root, step, 10 + n)
            engine.sync()
            engine.commit()
        engine.reindex()
        engine.index.optimize()
        with past_engine(engine, sha) as kept:
            pass
        asof.close_past_engines()  # the next search at the revision reads its folder
        with past_engine(engine, sha) as again:
            assert again is not kept
        assert then() == before
        # The embedding cache deleted (it is derived data): the past's vectors are made again.
        (engine.home.state_dir / "embed_cache.sqlite").unlink()
        asof.close_past_engines()  # the next search at the revision reads its folder
        assert then() == before
        # A reader of files gets the commit's files, checked out into the past folder once.
        with past_engine(engine, sha, files=True) as past:
            log = "memory/users/ana/2026-11-20.md"
            assert (past.home.root / log).read_text() == git(root, "show", f"{sha}:{log}")
        assert (folder / "tree" / "memory").is_dir()


def test_a_past_index_starts_from_a_state_the_writer_vouched_for(tmp_path, embedder, monkeypatch):
    """A writer (a daemon, in another process) stores a change in two commits, rows and then file
    records. Caught between them, the index of now holds a row of the log whose record still
    names the log as the commit has it: a past index starting from that pair would keep the row."""
    import lancedb

    root = syncd.init(tmp_path / "home").home
    with syncd.open(root, embedder=embedder) as engine:
        for n in range(3):
            apply_step(root, ("add", "ana", n), n)
            engine.sync()
            engine.commit()
        sha = git(root, "rev-parse", "HEAD").strip()
        entries = lancedb.connect(str(engine.home.state_dir / "index" / "lance")).open_table("entries")
        row = entries.to_arrow().filter(pa.compute.equal(entries.to_arrow()["user"], "ana")).slice(0, 1).to_pylist()[0]
        text = "Ana talks about old maps, written by a writer between its two commits."
        row |= {"id": "h-0123456789abcdef", "line": 99, "text": text, "search_text": text,
                "vector": embedder.embed([text])[0].tolist()}  # fmt: skip
        # A copy that started at a point the writer vouched for reads the rows of that point,
        # even when the writer commits right after it was taken.
        stamps: list = []
        look = snapshot.lance_stamp

        def stamp_then_write(lance: Path):
            stamps.append(look(lance))
            if len(stamps) == 2:  # the look that confirms the point
                entries.add([row])
            return stamps[-1]

        monkeypatch.setattr(snapshot, "lance_stamp", stamp_then_write)
        records, rows_then = snapshot.consistent_tables(engine.home.state_dir / "index", embedder.dim)
        monkeypatch.undo()
        assert row["id"] not in rows_then.read_all()["id"].to_pylist()
        assert set(records["path"].to_pylist()) == set(engine.indexed_files())
        # The writer caught between its two commits again: its mirror vouches for nothing then,
        # and the past index is made from nothing rather than from that pair.
        entries.add([row | {"id": "h-fedcba9876543210", "line": 100}])
        now = dt.datetime.now(dt.UTC)
        got = view(search_at(engine, "old maps", sha, user_id="ana", limit=5, now=now))
    checkout = tmp_path / "checkout"
    git(root, "worktree", "add", "--detach", "--quiet", str(checkout), sha)
    with syncd.open(checkout, embedder=embedder) as fresh:
        fresh.sync()
        assert got == view(fresh.search("old maps", user_id="ana", limit=5, now=now))
    assert not {"h-0123456789abcdef", "h-fedcba9876543210"} & {hit[0] for hit in got}


def _write_blocks(root: Path, blocks: dict[str, str | None]) -> None:
    for rel, text in blocks.items():
        path = root / rel
        if text is None:
            path.unlink()
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text + "\n")


def test_core_memory_as_a_past_commit_left_it(tmp_path, embedder):
    import asyncio

    from syncd.memory import MemoryManager

    root = syncd.init(tmp_path / "home").home
    steps = [
        {"memory/core/persona.md": "Old global persona.", "memory/users/ana/core/user.md": "Ana likes tea."},
        {
            "memory/users/ana/core/user.md": "Ana likes coffee.",
            "memory/users/ana/chats/c1/core/persona.md": "Chat one.",
        },
        {"memory/users/ana/chats/c1/core/persona.md": None, "memory/core/persona.md": "New global persona."},
    ]
    with syncd.open(root, embedder=embedder) as engine:
        for step in steps:
            _write_blocks(root, step)
            engine.sync()
            engine.commit()
        manager = MemoryManager(engine)

        def core(at=None):
            return asyncio.run(manager.get_core_memory(chat_id="c1", user_id="ana", at=at))

        # chat > user > global, resolved from each revision's own files
        assert (core("HEAD~2")["persona"], core("HEAD~2")["user"]) == ("Old global persona.", "Ana likes tea.")
        assert (core("HEAD~1")["persona"], core("HEAD~1")["user"]) == ("Chat one.", "Ana likes coffee.")
        assert (core()["persona"], core()["user"]) == ("New global persona.", "Ana likes coffee.")
        assert core("HEAD") == core()
        blocks = manager.core_blocks(chat_id="c1", user_id="ana", at="HEAD~1")
        assert blocks["persona"].scope == "chat"
        assert blocks["persona"].path == "memory/users/ana/chats/c1/core/persona.md"
        with pytest.raises(NotFoundError):
            core("no-such-revision")
        # reading the past leaves nothing behind, and never the home's own files
        assert not [p for p in (engine.home.state_dir / "asof").iterdir() if p.name.startswith(".read-")]
        assert (root / "memory/core/persona.md").read_text() == "New global persona.\n"


def test_the_rest_api_reads_core_memory_and_the_vault_at_a_past_commit(tmp_path, embedder):
    from .server_helpers import served_in_thread

    root = syncd.init(tmp_path / "home").home
    with syncd.open(root, embedder=embedder) as engine:
        for step in [
            {"memory/users/bob/core/user.md": "Bob sails.", "vault/Bees.md": "# Bees\n\nOn keeping bees in a city."},
            {"memory/users/bob/core/user.md": "Bob rows.", "vault/Bees.md": None},
        ]:
            _write_blocks(root, step)
            engine.sync()
            engine.commit()
    with served_in_thread(root, embedder) as served:
        _, bob_token = served.tokens.add("bob")
        with served.client(bob_token) as bob:

            def user_block(**params):
                answer = bob.get("/memory/core", params=params)
                assert answer.status_code == 200, answer.text
                return answer.json()["blocks"]["user"]["content"]

            def pages(**params):
                answer = bob.get("/vault/search", params={"query": "keeping bees", **params})
                assert answer.status_code == 200, answer.text
                return [h["path"] for h in answer.json()["hits"]]

            assert (user_block(), user_block(at="HEAD~1")) == ("Bob rows.", "Bob sails.")
            assert "vault/Bees.md" in pages(at="HEAD~1") and "vault/Bees.md" not in pages()
            assert bob.get("/memory/core", params={"at": "nope"}).status_code == 404


def test_a_commit_holding_the_index_folder_is_searched_without_it(tmp_path, embedder):
    # A commit holding .syncd/ (a `git add -f`, or pushed by a machine whose syncd kept no
    # .gitignore in it): checked out into the past tree, its files stood where the past engine
    # keeps its own, and a search at that commit failed with "File exists: .../.syncd/index".
    root = syncd.init(tmp_path / "home").home
    with syncd.open(root, embedder=embedder) as engine:
        apply_step(root, ("page", "ana", 2), 0)
        engine.sync()
        engine.commit()
        blob = subprocess.run(["git", "hash-object", "-w", "--stdin"], cwd=root, input=b"# Stale\n\nThe cello.\n",
                              capture_output=True, check=True).stdout.decode().strip()  # fmt: skip
        index = {"GIT_INDEX_FILE": str(tmp_path / "index")}
        subprocess.run(["git", "read-tree", "HEAD"], cwd=root, env={**os.environ, **index}, check=True)
        for name in (".syncd/index", ".syncd/notes.md"):
            subprocess.run(["git", "update-index", "--add", "--cacheinfo", f"100644,{blob},{name}"], cwd=root,
                           env={**os.environ, **index}, check=True)  # fmt: skip
        tree = subprocess.run(["git", "write-tree"], cwd=root, env={**os.environ, **index}, capture_output=True,
                              check=True, text=True).stdout.strip()  # fmt: skip
        sha = git(root, "commit-tree", tree, "-p", "HEAD", "-m", "the index too").strip()
        assert ".syncd/index" in git(root, "ls-tree", "-r", "--name-only", sha)
        assert [h.path for h in search_at(engine, "the cello", sha, limit=5)] == ["vault/Topic2.md"]
        with past_engine(engine, sha, files=True) as past:
            assert (past.home.root / "vault/Topic2.md").is_file() and not (past.home.root / ".syncd/notes.md").exists()
