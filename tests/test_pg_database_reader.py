"""A read-only server for every home of one PostgreSQL database (`syncd serve --read-only --index
URL`, no home): two real homes in one real database, their writers in this process, the reader a
real uvicorn process holding neither home.

Laws: a request is answered only for a token of the home it names, and only for the token's own
user unless it is the admin's (hypothesis: any token, home, user and query, hostile ones too); what
it answers equals what the home's own engine answers from its files: the same hits, the same core
blocks, the same stats. A revoked token is refused within the published bound."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import syncd
from syncd.engine.database import TokenMirror, publish_tokens
from syncd.engine.search import hit_record, search
from syncd.home import Home
from syncd.memory import MemoryManager
from syncd.server.database_server import TOKENS_TTL_S
from syncd.server.tokens import TokenStore

from .daemon_helpers import new_home
from .helpers import wait_for, write
from .pg_fixtures import start_database_reader
from .strategies import examples

# Both homes hold a user "ana": a token of one home must not open the other's ana.
HOMES = {
    "a": {
        "ana": ["Drinks green tea every morning.", "Plays the cello on Sundays."],
        "bob": ["Keeps bees in the garden.", "Drinks black coffee."],
    },
    "b": {
        "ana": ["Collects old maps of Lisbon.", "Drinks mint tea at night."],
        "carl": ["Races sailboats on the lake.", "Is allergic to bees."],
    },
}
QUERIES = ["tea", "bees", "what does she drink", "cello", "maps", "sailboats", "coffee", "nothing here"]
HOSTILE = ["x'; DROP SCHEMA public; --", "../a", "%00", "ana/../bob"]


def _build(folder: Path, users: dict[str, list[str]], embedder, url: str):
    root = new_home(folder, embedder)
    from syncd.index.backend import record_home_index

    record_home_index(root, url)
    write(root, "memory/core/persona.md", f"I am the assistant of home {folder.name}.\n")
    for user, facts in users.items():
        lines = "".join(f"- [preference] {fact}\n" for fact in facts)
        write(root, f"memory/users/{user}/2026-11-2{len(user)}.md", f"# 2026-11-2{len(user)}\n\n## 10:00\n\n{lines}")
        write(root, f"memory/users/{user}/core/user.md", f"---\nlimit: 900\n---\n{user} of home {folder.name}.\n")
        write(root, f"memory/users/{user}/chats/c1/core/context.md", f"Chat c1 of {user}.\n")
        write(root, f"memory/users/{user}/core/hobby.md", f"The hobbies of {user}.\n")
        write(root, f"memory/users/{user}/MEMORY.md", f"# {user}\n\n{user} likes long walks.\n")
    engine = syncd.open(root, embedder=embedder)
    engine.sync()
    engine.commit()
    tokens = TokenStore.of(Home(root))
    admin = tokens.admin_token(create=True)
    users_tokens = {user: tokens.add(user)[1] for user in users}
    publish_tokens(engine, tokens.hashes())
    return root, engine, tokens, admin, users_tokens


@pytest.fixture(scope="module")
def world(pg_server, embedder, tmp_path_factory):
    """Two homes in one database, their engines open here, and the reader process."""
    url = pg_server.new_database()
    folder = tmp_path_factory.mktemp("homes")
    homes = {}
    try:
        for name, users in HOMES.items():
            root, engine, tokens, admin, users_tokens = _build(folder / name, users, embedder, url)
            schema = engine.index.schema
            homes[name] = {
                "root": root,
                "engine": engine,
                "tokens": tokens,
                "admin": admin,
                "users": users_tokens,
                "schema": schema,
                "manager": MemoryManager(engine),
            }
        reader, base = start_database_reader(url, folder)
        try:
            with httpx.Client(base_url=base, timeout=60) as client:
                yield {"homes": homes, "client": client, "url": url}
        finally:
            reader.terminate()
            reader.wait(30)
    finally:
        for home in homes.values():
            home["engine"].close()


def _get(client: httpx.Client, path: str, token: str | None, **params) -> httpx.Response:
    headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
    return client.get(path, params={k: v for k, v in params.items() if v is not None}, headers=headers)


def test_it_lists_the_homes_a_token_opens_and_refuses_a_token_of_no_home(world):
    client, homes = world["client"], world["homes"]
    listed = _get(client, "/homes", homes["a"]["admin"])
    assert listed.status_code == 200, listed.text
    assert listed.json()["homes"] == [{"home": homes["a"]["schema"], "user_id": None}]
    mine = _get(client, "/homes", homes["b"]["users"]["carl"]).json()["homes"]
    assert mine == [{"home": homes["b"]["schema"], "user_id": "carl"}]
    assert _get(client, "/homes", "sdu_not_a_token").status_code == 401
    assert _get(client, "/homes", None).status_code == 401
    assert client.get("/health").status_code == 200
    # Nothing but reads: a write is no route of this server.
    schema = homes["a"]["schema"]
    wrote = client.post(
        f"/homes/{schema}/memory/archival",
        json={"content": "x", "user_id": "ana"},
        headers={"Authorization": f"Bearer {homes['a']['admin']}"},
    )
    assert wrote.status_code == 405, wrote.text


_ENDPOINTS = ("archival", "core", "stats")


@settings(max_examples=examples(40), deadline=None, suppress_health_check=list(HealthCheck))
@given(
    token_home=st.sampled_from(["a", "b", None]),
    token_user=st.sampled_from([None, "ana", "bob", "carl"]),
    home=st.sampled_from(["a", "b", *HOSTILE]),
    user=st.sampled_from([None, "ana", "bob", "carl", "ANA", *HOSTILE]),
    chat=st.sampled_from([None, "c1"]),
    endpoint=st.sampled_from(_ENDPOINTS),
    query=st.sampled_from(QUERIES),
)
def test_a_token_reads_only_its_own_home_and_user_and_reads_what_the_home_holds(
    world, token_home, token_user, home, user, chat, endpoint, query
):
    homes, client = world["homes"], world["client"]
    if token_home is None:
        token = "sda_" + "x" * 43
    elif token_user is None:
        token = homes[token_home]["admin"]
    else:
        token = homes[token_home]["users"].get(token_user, "sdu_unknown_token")
    valid = token_home is not None and (token_user is None or token_user in HOMES[token_home])
    named = homes[home]["schema"] if home in homes else home
    answer = _get(
        client,
        f"/homes/{named}/memory/{endpoint}",
        token,
        user_id=user,
        query=query if endpoint == "archival" else None,
        chat_id=chat if endpoint != "stats" else None,
    )
    if not valid or home != token_home:
        # A token opens its own home only: another home (the same user name there too), no home,
        # or a name that is no schema are all one answer, which says nothing of what exists.
        assert answer.status_code in (401, 404), answer.text
        assert answer.status_code == 401 or home not in homes, answer.text
        return
    if user in HOSTILE:
        assert answer.status_code in (403, 422), answer.text
        return
    if token_user is not None and user is not None and user != token_user:
        assert answer.status_code == 403, answer.text
        return
    assert answer.status_code == 200, answer.text
    acting = token_user or user or "default"
    engine, manager = homes[home]["engine"], homes[home]["manager"]
    # A case twin of a user of the home (ANA beside ana) owns nothing there: the reader answers as
    # for a user with no memory in any home (zed), whose blocks and counts the home itself can
    # give (it refuses to make the twin a folder of its own, tests/test_home.py).
    twin = acting != acting.lower() and acting.lower() in HOMES[home]
    expected_as = "zed" if twin else acting
    body = answer.json()
    if endpoint == "archival":
        hits = body["hits"]
        expected = [hit_record(h) for h in search(engine, query, user_id=acting, chat_id=chat)]
        assert [(h["path"], h["id"]) for h in hits] == [(h["path"], h["id"]) for h in expected]
        assert [h["score"] for h in hits] == pytest.approx([h["score"] for h in expected], abs=1e-6)
        assert all(h["user_id"] in (None, acting) for h in hits)
    elif endpoint == "core":
        blocks = manager.core_blocks(user_id=expected_as, chat_id=chat)
        assert body["blocks"] == {
            label: {"label": b.label, "content": b.content, "scope": b.scope, "path": b.path, "limit": b.limit}
            for label, b in blocks.items()
        }
    else:
        own = asyncio.run(manager.get_memory_stats(expected_as)) | {"user_id": acting}
        assert {k: v for k, v in body.items() if k != "as_of"} == {k: own[k] for k in body if k != "as_of"}


def test_the_writers_mirror_publishes_a_new_token_and_a_revocation(world):
    """What the home's writer runs (engine.database.TokenMirror, in the daemon of `syncd serve` and
    `watch`): a token added or revoked in the home's files reaches every reader within the
    mirror's round plus the readers' TTL."""
    homes, client = world["homes"], world["client"]
    a = homes["a"]
    mirror = TokenMirror(a["engine"], a["tokens"], every_s=0.2).start()
    try:
        info, token = a["tokens"].add("bob")
        path = f"/homes/{a['schema']}/memory/stats"
        wait_for(lambda: _get(client, path, token).status_code == 200, 10 * TOKENS_TTL_S, "the added token accepted")
        a["tokens"].revoke(info.id)
        revoked = time.monotonic()
        wait_for(lambda: _get(client, path, token).status_code == 401, 10 * TOKENS_TTL_S, "the revoked token refused")
        # The bound the README states: the mirror's round (0.2 s here) and the readers' TTL.
        assert time.monotonic() - revoked <= 0.2 + TOKENS_TTL_S + 1.0
    finally:
        mirror.stop()


def test_the_database_down_is_a_503_then_answers_again(world, pg_server):
    homes, client = world["homes"], world["client"]
    path = f"/homes/{homes['b']['schema']}/memory/archival"
    token = homes["b"]["users"]["carl"]
    pg_server.stop()
    try:
        time.sleep(TOKENS_TTL_S)  # past the cached token hashes: the gate asks the database too
        down = _get(client, path, token, query="sailboats")
    finally:
        pg_server.start()
    assert down.status_code == 503 and "cannot be reached" in down.text, down.text
    assert down.headers.get("retry-after") == "1"
    back = _get(client, path, token, query="sailboats")
    assert back.status_code == 200 and back.json()["hits"], back.text


def test_a_home_indexed_with_another_model_is_told_only_to_its_own_tokens(world, embedder, tmp_path):
    """A home this reader cannot search (its index made with another model) is, to a token of
    another home or to no token at all, what a home that does not exist is: a 401 naming nothing.
    Its own tokens are told why it cannot be searched."""
    import psycopg

    client, a = world["client"], world["homes"]["a"]
    _, engine, _, admin, users = _build(tmp_path / "c", {"dee": ["Grows tomatoes."]}, embedder, world["url"])
    try:
        schema = engine.index.schema
        with psycopg.connect(world["url"], autocommit=True) as conn:
            conn.execute(
                psycopg.sql.SQL("UPDATE {}.meta SET value = jsonb_set(value, '{{model_id}}', %s) WHERE key = 'meta'")
                .format(psycopg.sql.Identifier(schema)),
                ('"another-model"',),
            )  # fmt: skip
        path = f"/homes/{schema}/memory/stats"
        wait_for(lambda: _get(client, path, admin).status_code == 400, 10 * TOKENS_TTL_S, "the home listed")
        assert "another-model" in _get(client, path, admin).text
        assert "another-model" in _get(client, path, users["dee"]).text
        for token in (a["admin"], a["users"]["ana"], "sda_" + "x" * 43):
            refused = _get(client, path, token)
            assert refused.status_code == 401 and schema not in refused.text, refused.text
            assert refused.json() == _get(client, "/homes/no_such_home/memory/stats", token).json()
    finally:
        engine.close()
