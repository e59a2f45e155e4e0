"""The REST API through a real uvicorn server on 127.0.0.1 (httpx): every endpoint, tokens, and
scoping (a user's token never reaches another user's memory, whatever the request names)."""

from __future__ import annotations

import datetime as dt
import os
import stat
from urllib.parse import quote

import pytest

import syncd

from .daemon_helpers import git, isolate_git_identity, wait_for
from .server_helpers import served_in_thread


@pytest.fixture(scope="module")
def server(tmp_path_factory, embedder):
    mp = pytest.MonkeyPatch()
    isolate_git_identity(tmp_path_factory.mktemp("git"), mp)
    home = syncd.init(tmp_path_factory.mktemp("rest") / "home").home
    (home / "vault" / "notes").mkdir()
    (home / "vault" / "notes" / "tea.md").write_text("# Tea\n\nGreen tea is brewed at 80 degrees for two minutes.\n")
    (home / "vault" / "notes" / "Kettle.MD").write_text("# Kettle\n\nA gooseneck kettle, for pour-over.\n")
    os.symlink("/etc/passwd", home / "vault" / "leak.md")
    try:
        with served_in_thread(home, embedder) as served:
            yield served
    finally:
        mp.undo()


@pytest.fixture(scope="module")
def admin(server):
    with server.client(server.admin) as client:
        yield client


def _ok(response, status=200):
    assert response.status_code == status, response.text
    return response.json()


def _error(response, status):
    assert response.status_code == status, response.text
    body = response.json()
    assert set(body) == {"error"} and body["error"]["type"] and body["error"]["message"]
    return body["error"]


def _once(server, token: str | None, method: str, path: str, **kwargs):
    """One request on a client of its own, closed after (a client left open keeps its socket)."""
    with server.client(token) as client:
        return client.request(method, path, **kwargs)


def test_every_memory_endpoint_with_the_admin_token(server, admin):
    home = server.home
    added = _ok(
        admin.post(
            "/memory/archival",
            json={
                "content": "Likes green tea in the morning.",
                "user_id": "ana",
                "category": "preference",
                "tags": ["drinks"],
            },
        )
    )
    fact = added["fact"]
    assert not added["duplicate"] and fact["id"].startswith("m-")
    today = dt.date.today().isoformat()
    log_file = home / f"memory/users/ana/{today}.md"
    assert fact["id"] in log_file.read_text()  # markdown first...
    assert fact["id"] in git(home, "show", f"HEAD:memory/users/ana/{today}.md")  # ...committed on return
    again = _ok(admin.post("/memory/archival", json={"content": "Likes green tea in the morning.", "user_id": "ana"}))
    assert again == {
        "fact": None,
        "duplicate": True,
        "duplicate_of": {
            "id": fact["id"],
            "content": "Likes green tea in the morning.",
            "path": f"memory/users/ana/{today}.md",
            "line": again["duplicate_of"]["line"],
        },
    }

    hits = _ok(admin.get("/memory/archival", params={"query": "green tea", "user_id": "ana"}))["hits"]
    assert hits[0]["id"] == fact["id"] and hits[0]["path"] == f"memory/users/ana/{today}.md"
    assert _ok(admin.get("/memory/archival", params={"query": "green tea", "user_id": "bob"}))["hits"] == []

    daily = _ok(admin.get("/memory/daily", params={"user_id": "ana", "days": 3}))
    assert [log["date"] for log in daily["logs"]] == [today]
    assert [f["id"] for f in daily["logs"][0]["facts"]] == [fact["id"]]
    one = _ok(admin.get(f"/memory/daily/{today}", params={"user_id": "ana"}))
    assert one["text"] == log_file.read_text()
    _error(admin.get("/memory/daily/2001-01-01", params={"user_id": "ana"}), 404)

    block = _ok(admin.put("/memory/core", json={"label": "user", "content": "Name: Ana.", "user_id": "ana"}))
    assert block["scope"] == "user" and block["path"] == "memory/users/ana/core/user.md"
    _ok(
        admin.put(
            "/memory/core", json={"label": "user", "content": "Lives in Oslo.", "operation": "append", "user_id": "ana"}
        )
    )
    _ok(
        admin.put(
            "/memory/core",
            json={
                "label": "user",
                "content": "Bergen",
                "operation": "search_replace",
                "old_content": "Oslo",
                "user_id": "ana",
            },
        )
    )
    _ok(
        admin.put(
            "/memory/core", json={"label": "context", "content": "Planning a trip.", "chat_id": "c1", "user_id": "ana"}
        )
    )
    assert (home / "memory/users/ana/core/user.md").read_text() == "Name: Ana.\nLives in Bergen.\n"
    core = _ok(admin.get("/memory/core", params={"user_id": "ana", "chat_id": "c1"}))
    assert core["blocks"]["user"]["content"] == "Name: Ana.\nLives in Bergen."
    assert core["blocks"]["context"]["scope"] == "chat" and core["blocks"]["persona"]["scope"] == "default"
    assert "not found" in _error(admin.put("/memory/core", json={"label": "user", "content": "x", "user_id": "ana",
                                                                "operation": "search_replace", "old_content": "Paris"}),
                                 422)["message"]  # fmt: skip
    _error(admin.put("/memory/core", json={"label": "user", "content": "z" * 6000, "user_id": "ana"}), 422)

    turn = _ok(
        admin.post(
            "/memory/turns",
            json={
                "user_message": "I run every day, training for Lyon.",
                "response": "Great!",
                "user_id": "ana",
                "chat_id": "c1",
                "session_id": "s1",
                "transcript_line": 3,
            },
        )
    )
    assert [f["content"] for f in turn["facts"]] == ["Is training for the Lyon marathon."]

    (home / "memory/users/ana/MEMORY.md").write_text("# Ana\n\nPrefers short answers.\n")
    wait_for(lambda: "MEMORY.md" in str(admin.get("/log", params={"limit": 1}).json()), 30, "the daemon's commit")
    assert _ok(admin.get("/memory/file", params={"user_id": "ana"}))["content"] == "# Ana\n\nPrefers short answers.\n"
    stats = _ok(admin.get("/memory/stats", params={"user_id": "ana"}))
    assert stats["facts"] == 2 and stats["categories"] == {"goal": 1, "preference": 1}

    blame = _ok(admin.get(f"/blame/{fact['id']}"))
    assert blame["histories"][0]["introduced"]["subject"].startswith("Remember")
    assert _ok(admin.delete(f"/memory/archival/{fact['id']}", params={"user_id": "ana"}))["deleted"] is True
    assert fact["id"] not in log_file.read_text()
    gone = _error(admin.delete(f"/memory/archival/{fact['id']}", params={"user_id": "ana"}), 404)
    # The same answer as changing a missing fact (and as MCP's memory_delete gives).
    assert gone == _error(admin.patch(f"/memory/archival/{fact['id']}", json={"content": "x", "user_id": "ana"}), 404)


def test_patching_a_fact_typed_by_hand_answers_its_new_id_and_commits_once(server, admin):
    """A hand-typed line has no id marker: the PATCH answers the fact as written with its derived
    id (which follows the new content), and that id finds it for the next change."""
    home = server.home
    log_file = home / "memory/users/hal/2026-11-02.md"
    log_file.parent.mkdir(parents=True)
    log_file.write_text("# 2026-11-02\n\n## 10:00\n- [preference] Likes green tea.\n")
    wait_for(lambda: not git(home, "status", "--porcelain", "memory/users/hal"), 30, "the daemon's commit of the log")
    hit = _ok(admin.get("/memory/archival", params={"query": "green tea", "user_id": "hal"}))["hits"][0]
    before = git(home, "rev-list", "--count", "HEAD")
    changed = _ok(admin.patch(f"/memory/archival/{hit['id']}", json={"content": "Likes black tea.", "user_id": "hal"}))
    assert changed["content"] == "Likes black tea." and changed["id"].startswith("h-") and changed["id"] != hit["id"]
    assert log_file.read_text() == "# 2026-11-02\n\n## 10:00\n- [preference] Likes black tea.\n"
    assert int(git(home, "rev-list", "--count", "HEAD")) == int(before) + 1
    again = _ok(admin.patch(f"/memory/archival/{changed['id']}", json={"importance": 0.9, "user_id": "hal"}))
    assert again["content"] == "Likes black tea." and again["importance"] == 0.9


def test_home_and_vault_endpoints(server, admin):
    status = _ok(admin.get("/status"))
    assert status["files"] >= 4 and status["compatible"]
    entries = _ok(admin.get("/log", params={"limit": 3}))["entries"]
    assert entries and all(e["sha"] for e in entries)

    hits = _ok(admin.get("/vault/search", params={"query": "brewing temperature for green tea"}))["hits"]
    assert hits and all(h["source"] == "vault_page" for h in hits) and hits[0]["path"] == "vault/notes/tea.md"
    page = _ok(admin.get("/vault/page", params={"path": "notes/tea.md"}))
    assert page["content"].startswith("# Tea")
    # A page whatever its extension's case, as search finds it and lint reads it.
    assert _ok(admin.get("/vault/page", params={"path": "notes/Kettle.MD"}))["content"].startswith("# Kettle")
    # A symbolic link in the vault is never followed out of the home.
    assert "root:" not in _error(admin.get("/vault/page", params={"path": "leak.md"}), 404)["message"]
    findings = _ok(admin.get("/vault/lint"))["findings"]
    assert all({"code", "severity", "path", "message"} <= f.keys() for f in findings)

    added = _ok(admin.post("/memory/archival", json={"content": "Owns a red bicycle.", "user_id": "rev"}))["fact"]
    head = git(server.home, "rev-parse", "HEAD").strip()
    reverted = _ok(admin.post("/revert", json={"commit": head}))
    assert reverted["commit"] != head
    assert _ok(admin.get("/memory/archival", params={"query": "red bicycle", "user_id": "rev"}))["hits"] == []
    assert added["id"].startswith("m-") and not (server.home / f"memory/users/rev/{dt.date.today()}.md").exists()

    # A reindex rebuilds from the markdown: a fact stored before it is still found after it.
    kept = _ok(admin.post("/memory/archival", json={"content": "Keeps bees on the roof.", "user_id": "rev"}))["fact"]
    report = _ok(admin.post("/memory/reindex"))
    assert "new" in report["summary"]
    hits = _ok(admin.get("/memory/archival", params={"query": "bees on the roof", "user_id": "rev"}))["hits"]
    assert [h["id"] for h in hits][:1] == [kept["id"]]


def test_vault_lint_answers_for_a_file_name_that_is_not_utf8(server, admin):
    # Its lone surrogate (how Python reads the name) failed the whole JSON answer: a 500.
    name = os.path.join(os.fsencode(server.home / "vault"), b"caf\xe9.md")
    with open(name, "wb") as page:
        page.write(b"# Cafe\n\n[[Nowhere at all]]\n")
    try:
        findings = _ok(admin.get("/vault/lint"))["findings"]
    finally:
        os.unlink(name)
    assert {(f["code"], f["path"]) for f in findings} >= {("broken-link", "caf\ufffd.md"), ("orphan", "caf\ufffd.md")}


def test_tokens_scope_every_request_to_their_user(server, admin):
    _error(_once(server, None, "GET", "/memory/archival", params={"query": "tea"}), 401)
    _error(_once(server, "sda_not-a-token", "GET", "/memory/archival", params={"query": "tea"}), 401)
    _error(_once(server, None, "POST", "/mcp", json={}), 401)
    assert _once(server, None, "GET", "/health").json()["status"] == "ok"

    _, bob_token = server.tokens.add("bob")
    ana_fact = _ok(admin.post("/memory/archival", json={"content": "Her locker code is 4711.", "user_id": "ana"}))[
        "fact"
    ]
    with server.client(bob_token) as bob:
        mine = _ok(bob.post("/memory/archival", json={"content": "Collects vinyl records."}))["fact"]
        assert mine["id"] in (server.home / f"memory/users/bob/{dt.date.today()}.md").read_text()
        assert _ok(bob.get("/memory/archival", params={"query": "vinyl"}))["hits"][0]["id"] == mine["id"]
        # Naming another user is refused; naming none acts for the token's user.
        for method, path, kwargs in [
            ("get", "/memory/archival", {"params": {"query": "locker code", "user_id": "ana"}}),
            ("post", "/memory/archival", {"json": {"content": "x y z", "user_id": "ana"}}),
            ("get", "/memory/daily", {"params": {"user_id": "ana"}}),
            ("get", "/memory/core", {"params": {"user_id": "ana"}}),
            ("put", "/memory/core", {"json": {"label": "user", "content": "pwned", "user_id": "ana"}}),
            ("get", "/memory/file", {"params": {"user_id": "ana"}}),
            ("get", "/memory/stats", {"params": {"user_id": "ana"}}),
            ("delete", f"/memory/archival/{ana_fact['id']}", {"params": {"user_id": "ana"}}),
            ("get", "/log", {"params": {"path": "memory/users/ana"}}),
            ("post", "/memory/reindex", {}),
            ("post", "/revert", {"json": {"commit": "abcdef12"}}),
        ]:
            _error(getattr(bob, method)(path, **kwargs), 403)
        assert not any(
            h["id"] == ana_fact["id"]
            for h in _ok(bob.get("/memory/archival", params={"query": "locker code 4711"}))["hits"]
        )
        # Another user's fact id is simply not there for bob.
        _error(bob.delete(f"/memory/archival/{ana_fact['id']}"), 404)
        _error(bob.get(f"/blame/{ana_fact['id']}"), 404)
        assert ana_fact["id"] in (server.home / f"memory/users/ana/{dt.date.today()}.md").read_text()
        assert "ana" not in str(_ok(bob.get("/log"))) and "ana" not in str(_ok(bob.get("/status")))
        assert _ok(bob.get("/vault/page", params={"path": "index.md"}))["content"]  # the vault is shared

    server.tokens.revoke_user("bob")
    _error(_once(server, bob_token, "GET", "/memory/archival", params={"query": "vinyl"}), 401)
    for name in ("admin.token", "tokens.json"):
        assert stat.S_IMODE((server.tokens.dir / name).stat().st_mode) == 0o600
    assert bob_token not in (server.tokens.dir / "tokens.json").read_text()  # only its hash is kept


HOSTILE_IDS = ["../ana", "ana/../../etc", "..", "a" * 300, "ana\x00", "ana%2F..", "-rf", "' OR 1=1 --", "ana bob", ""]


@pytest.mark.parametrize("bad", HOSTILE_IDS)
def test_hostile_ids_dates_and_paths_are_4xx_with_a_clear_body(server, admin, bad):
    responses = [
        admin.get("/memory/archival", params={"query": "tea", "user_id": bad}),
        admin.get("/memory/archival", params={"query": "tea", "user_id": "ana", "chat_id": bad}),
        admin.post("/memory/archival", json={"content": "x", "user_id": "ana", "session_id": bad}),
        admin.get("/memory/daily/2026-01-01", params={"user_id": bad}),
        admin.get(f"/memory/daily/{quote(bad, safe='')}x", params={"user_id": "ana"}),
        admin.get("/vault/page", params={"path": bad or "/etc/passwd"}),
        admin.get("/vault/page", params={"path": f"../{bad}.md"}),
        admin.put("/memory/core", json={"label": bad or "A", "content": "x", "user_id": "ana"}),
        admin.get("/log", params={"path": f"../{bad}"}),
        admin.delete(f"/memory/archival/{quote(bad, safe='') or '%20'}", params={"user_id": "ana"}),
    ]
    for response in responses:
        assert 400 <= response.status_code < 500, (response.request.url, response.text)
        if response.status_code != 404 or response.headers.get("content-type") == "application/json":
            assert response.json().get("error") or response.json().get("detail"), response.text
    assert set(os.listdir(server.home / "memory/users")) <= {".gitkeep", "ana", "bob", "hal", "rev"}
    assert sorted(os.listdir(server.home.parent)) == ["home"]


def test_request_bodies_are_limited(server, admin):
    huge = {"content": "x" * 2_000_000, "user_id": "ana"}
    _error(admin.post("/memory/archival", json=huge), 413)

    def chunks():
        for _ in range(40):
            yield b"x" * 65536

    response = admin.post("/memory/archival", content=chunks(), headers={"content-type": "application/json"})
    assert response.status_code == 413


def test_many_concurrent_writers_all_finish_and_commit(server, admin):
    """More writers at once than the event loop has worker threads: each waits its turn without
    starving the one holding it (a thread-pool deadlock hung every write before)."""
    import concurrent.futures

    def add(n: int):
        with server.client(server.admin) as client:
            return client.post(
                "/memory/archival",
                json={"content": f"Parallel fact {n} about kites.", "user_id": "par", "dedup": False},
                timeout=180,
            )

    with concurrent.futures.ThreadPoolExecutor(40) as pool:
        answers = list(pool.map(add, range(40)))
    ids = [_ok(a)["fact"]["id"] for a in answers]
    committed = git(server.home, "show", f"HEAD:memory/users/par/{dt.date.today()}.md")
    assert all(fid in committed for fid in ids)


def test_only_the_callers_errors_are_4xx_a_bare_value_error_is_ours():
    """A ValueError or TypeError that no one turned into a syncd error is a bug of the server's:
    500 and a log line, so the fuzz test's "no 5xx" can catch it. A caller's bad value is 422."""
    from pydantic import BaseModel

    from syncd.errors import InvalidInputError, QueryError
    from syncd.server.rest import status_of

    class Shape(BaseModel):
        n: int

    assert status_of(ValueError("a bug")) is None and status_of(TypeError("a bug")) is None
    assert status_of(InvalidInputError("path climbs out of the home")) == 422
    with pytest.raises(ValueError) as invalid:
        Shape.model_validate({"n": "many"})
    assert status_of(invalid.value) == 422
    assert status_of(QueryError("", "the search query is empty")) == 400
