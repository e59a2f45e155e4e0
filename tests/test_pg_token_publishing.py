"""Token hashes reach a shared PostgreSQL index whoever writes the home: `syncd token add|revoke`
publish at once (no server running), and the daemon of `syncd watch` publishes at its start and
every second after, as `syncd serve`'s does (engine.database.TokenMirror, run by Daemon.run).

Real parts: the session's PostgreSQL, real homes, the CLI in-process (CliRunner), `syncd watch`
and the any-home reader (`syncd serve --read-only --index URL`) each a real process. A token is
judged by what the reader answers for it: 200 for its own user, 401 once revoked."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest
from click.testing import CliRunner

import syncd
from syncd.cli import cli
from syncd.home import Home
from syncd.index.backend import record_home_index
from syncd.server.database_server import TOKENS_TTL_S
from syncd.server.tokens import TokenStore

from .daemon_helpers import new_home, start_cli_daemon
from .helpers import wait_for, write
from .pg_fixtures import start_database_reader

# The delays the README states: a published change is seen by a reader within its TTL; a change
# left to the writer, within the writer's round (1 s) plus the TTL. SLACK: a loaded 2-core runner.
MIRROR_ROUND_S = 1.0
SLACK_S = 2.0


@pytest.fixture(scope="module")
def database(pg_server, tmp_path_factory):
    """One database and its any-home reader process."""
    url = pg_server.new_database()
    folder = tmp_path_factory.mktemp("readers")
    reader, base = start_database_reader(url, folder)
    try:
        with httpx.Client(base_url=base, timeout=60) as client:
            yield {"url": url, "client": client}
    finally:
        reader.terminate()
        reader.wait(30)


def _home(folder: Path, url: str, embedder) -> tuple[Path, str]:
    """A home whose index is in ``url``'s database, synced once and left with no writer running
    (so no server ever published its tokens): its root and schema."""
    root = new_home(folder, embedder)
    record_home_index(root, url)
    write(root, "memory/users/ana/2026-11-21.md", "# 2026-11-21\n\n## 10:00\n\n- [preference] Drinks green tea.\n")
    with syncd.open(root, embedder=embedder) as engine:
        engine.sync()
        engine.commit()
        return root, engine.index.schema


def _cli(*args: str) -> tuple[str, str]:
    result = CliRunner().invoke(cli, list(args))
    assert result.exit_code == 0, (result.output, result.exception)
    return result.stdout, result.stderr


def _add(root: Path, user: str) -> tuple[str, str, str]:
    """`syncd token add --json`: (token id, token, what it said on stderr)."""
    out, err = _cli("token", "add", "--user", user, "--json", "--home", str(root))
    made = json.loads(out)
    return made["id"], made["token"], err


def _status(client: httpx.Client, schema: str, token: str, user: str) -> int:
    return client.get(
        f"/homes/{schema}/memory/stats", params={"user_id": user}, headers={"Authorization": f"Bearer {token}"}
    ).status_code


def _within(seconds: float, check: Callable[[], bool], what: str) -> None:
    """``check`` holds within ``seconds`` (the delay the README states), or the test fails."""
    start = time.monotonic()
    wait_for(check, seconds, what)
    took = time.monotonic() - start
    assert took <= seconds, f"{what} took {took:.1f} s, more than {seconds} s"


def test_token_commands_publish_to_the_reader_with_no_writer_running(database, tmp_path, embedder):
    client = database["client"]
    root, schema = _home(tmp_path / "home", database["url"], embedder)
    ana_id, ana, said = _add(root, "ana")
    assert "published" in said
    _within(
        TOKENS_TTL_S + SLACK_S, lambda: _status(client, schema, ana, "ana") == 200, "an added token opening the reader"
    )
    assert _status(client, schema, ana, "bob") == 403  # its own user only
    _, out_of_home, _ = _add(_home(tmp_path / "other", database["url"], embedder)[0], "ana")
    assert _status(client, schema, out_of_home, "ana") == 401  # ana of another home
    _cli("token", "revoke", ana_id, "--home", str(root))
    _within(TOKENS_TTL_S + SLACK_S, lambda: _status(client, schema, ana, "ana") == 401, "a revoked token refused")


def test_a_change_made_while_the_database_is_down_is_kept_and_published_by_watch_alone(
    database, pg_server, tmp_path, embedder
):
    client = database["client"]
    root, schema = _home(tmp_path / "home", database["url"], embedder)
    dan_id, dan, _ = _add(root, "dan")  # published now: the reader opens it
    _within(TOKENS_TTL_S + SLACK_S, lambda: _status(client, schema, dan, "dan") == 200, "dan's token")
    pg_server.stop()
    try:
        _, carl, said = _add(root, "carl")
        assert "cannot be reached" in said and "next runs" in said, said
        out, said = _cli("token", "revoke", dan_id, "--home", str(root))
        assert f"revoked token {dan_id}" in out and "next runs" in said, said
    finally:
        pg_server.start()
    # The change is the home's (its files), not yet the reader's: it opens dan still, not carl.
    assert [t.user for t in TokenStore.of(Home(root)).list()] == ["carl"]
    time.sleep(TOKENS_TTL_S + 0.1)  # the wait is the point: past whatever the reader held, nothing changed
    assert _status(client, schema, carl, "carl") == 401
    assert _status(client, schema, dan, "dan") == 200
    daemon = start_cli_daemon(root)
    try:
        # `syncd watch` alone (no server ever ran on this home) publishes at its start...
        _within(120, lambda: _status(client, schema, carl, "carl") == 200, "watch publishing carl's token")
        assert _status(client, schema, dan, "dan") == 401
        # ...and keeps them published: a change made in the files alone (as an older syncd, or a
        # restored backup, would) reaches the reader within the writer's round and the TTL.
        carl_id = TokenStore.of(Home(root)).list()[0].id
        TokenStore.of(Home(root)).revoke(carl_id)
        _within(
            MIRROR_ROUND_S + TOKENS_TTL_S + SLACK_S,
            lambda: _status(client, schema, carl, "carl") == 401,
            "watch publishing a revocation",
        )
        assert daemon.poll() is None
    finally:
        daemon.terminate()
        daemon.wait(60)
