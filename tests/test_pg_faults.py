"""The PostgreSQL index when its server goes away and comes back (tests/pg_fixtures.py stops
and starts the real server): writes to markdown are kept and committed, say the index is behind
(StorageError with ``saved=True``, as the LanceDB path says a failed index write), status says the
database is unreachable, and the index converges once the server is back."""

from __future__ import annotations

import shutil
import socket
import subprocess

import pytest
from click.testing import CliRunner

import syncd
from syncd.cli import main
from syncd.errors import StorageError
from syncd.index.backend import INDEX_UNREACHABLE, redact_url

from .daemon_helpers import running_daemon, wait_for
from .helpers import write
from .test_pg_index import assert_same, pg_snapshot

LOG = "memory/users/ana/2026-11-28.md"


def _syncd(*args: str) -> tuple[int, str]:
    """(exit status, stdout and stderr) of ``syncd args`` run by its ``main()`` in this process."""
    with CliRunner().isolation() as (out, err, _):
        code = main(list(args))
        return code, out.getvalue().decode() + err.getvalue().decode()


def _append(engine, line: str) -> None:
    path = engine.home.root / LOG
    size = path.stat().st_size if path.exists() else 0
    engine.append_file(LOG, line.encode(), size)


def test_writes_survive_a_database_restart_and_the_index_catches_up(pg_server, pg_home, embedder):
    write(pg_home, LOG, "# 2026-11-28\n\n## 10:00\n\n- [fact] Green tea in the morning.\n")
    with syncd.open(pg_home, embedder=embedder) as engine:
        engine.sync()
        assert engine.status().fresh
        pg_server.stop()
        try:
            with pytest.raises(StorageError) as raised:
                _append(engine, "- [fact] Ran the Lyon marathon.\n")
            assert raised.value.saved, "the markdown was written: the error must say so"
            assert "cannot be reached" in str(raised.value)
            assert "Ran the Lyon marathon." in (pg_home / LOG).read_text()
            committed = subprocess.run(
                ["git", "show", f"HEAD:{LOG}"], cwd=pg_home, capture_output=True, text=True, check=True
            )
            assert "Ran the Lyon marathon." in committed.stdout  # acknowledged-or-saved is committed
            status = engine.status()
            assert status.index == INDEX_UNREACHABLE and not status.fresh
            with pytest.raises(StorageError) as again:
                _append(engine, "- [fact] Adopted a cat named Miso.\n")
            assert again.value.saved
        finally:
            pg_server.start()
        engine.sync()
        assert engine.status().fresh
        texts = {h.content for h in engine.search("marathon cat miso", user_id="ana", limit=10)}
        assert {"Ran the Lyon marathon.", "Adopted a cat named Miso."} <= texts
        before = pg_snapshot(engine)
        engine.reindex()
        assert_same(pg_snapshot(engine), before)


def test_a_running_daemon_catches_up_by_itself_once_the_database_is_back(pg_server, pg_home, embedder, caplog):
    write(pg_home, LOG, "# 2026-11-28\n\n## 10:00\n\n- [fact] Green tea in the morning.\n")
    with running_daemon(pg_home, embedder, reconcile_interval_s=1) as run:
        run.settle()
        pg_server.stop()
        try:
            # A person's edit while the database is down: the daemon's batch and its reconciles fail.
            write(
                pg_home,
                LOG,
                "# 2026-11-28\n\n## 10:00\n\n- [fact] Green tea in the morning.\n"
                "- [fact] Edited while the database slept.\n",
            )
            wait_for(
                # Said in one line, with no traceback: an error syncd can name (daemon/loop.py).
                lambda: any(
                    r.name == "syncd.daemon.loop"
                    and "watch step failed" in r.getMessage()
                    and "cannot be reached" in r.getMessage()
                    for r in caplog.records
                ),
                60,
                "the daemon to fail to index the edit",
            )
            assert run.reader.status().index == INDEX_UNREACHABLE
        finally:
            pg_server.start()
        run.settle()  # nobody runs `syncd sync`: the daemon's own next reconcile brings it level
        hits = run.reader.search("edited database slept", user_id="ana", limit=5)
        assert any(h.content == "Edited while the database slept." for h in hits)


def test_cli_status_says_the_database_is_unreachable(pg_server, pg_home, embedder):
    write(pg_home, LOG, "# 2026-11-28\n\n## 10:00\n\n- [fact] Green tea.\n")
    with syncd.open(pg_home, embedder=embedder) as engine:
        engine.sync()
    pg_server.stop()
    try:
        _, output = _syncd("status", "--home", str(pg_home))
    finally:
        pg_server.start()
    assert "unreachable" in output, output
    assert "Traceback" not in output


@pytest.mark.parametrize(
    "url, said",
    [
        ("mysql://localhost/x", "must start with postgresql://"),
        ("postgresql://nobody@/nodb?host=/nonexistent-socket-dir", "cannot be reached"),
        # a port that is not a number: urlsplit raised ValueError from the redaction (a traceback)
        ("postgresql://nobody:s3cret@localhost:notaport/x", "cannot be reached"),
    ],
)
def test_init_refuses_a_bad_index_url_in_one_line(tmp_path, url, said):
    code, output = _syncd("init", str(tmp_path / "h"), "--index", url)
    assert code != 0
    assert said in output, output
    assert "Traceback" not in output
    assert "s3cret" not in output
    assert not (tmp_path / "h").exists()


@pytest.mark.parametrize(
    "with_password",
    [
        lambda url: url.replace("postgres:@", "postgres:s3cret@"),
        # libpq's other place for a password: it was recorded in .git/config and printed as given
        lambda url: f"{url}&password=s3cret",
    ],
    ids=["userinfo", "query"],
)
def test_init_records_the_url_without_its_password(tmp_path, pg_url, with_password):
    code, output = _syncd("init", str(tmp_path / "h"), "--index", with_password(pg_url))
    assert code == 0, output
    recorded = subprocess.run(
        ["git", "config", "--local", "syncd.index"], cwd=tmp_path / "h", capture_output=True, text=True, check=True
    ).stdout.strip()
    assert recorded == pg_url.replace("postgres:@", "postgres@")
    assert "s3cret" not in output
    assert not any("s3cret" in p.read_text(errors="replace") for p in (tmp_path / "h").rglob("*") if p.is_file())


def test_an_ipv6_host_is_recorded_as_written():
    """urlsplit's hostname drops an IPv6 address's brackets: the recorded URL was unreadable."""
    assert redact_url("postgresql://ana:s3cret@[::1]:5432/db") == "postgresql://ana@[::1]:5432/db"
    assert redact_url("postgresql://ana:s3cret@h1:5432,h2:5433/db") == "postgresql://ana@h1:5432,h2:5433/db"


def test_a_copy_of_a_home_does_not_write_its_originals_schema(tmp_path, pg_home, embedder):
    """``cp -a`` of a home carries its recorded schema: the copy's writer wrote its files into the
    original's rows (the original's search found the copy's facts). It is refused in one line
    that says how to give the copy its own schema, and then both stay apart."""
    write(pg_home, LOG, "# 2026-11-28\n\n## 10:00\n\n- [fact] Green tea in the morning.\n")
    with syncd.open(pg_home, embedder=embedder) as engine:
        engine.sync()
    copy = tmp_path / "copy"
    shutil.copytree(pg_home, copy, symlinks=True)
    write(copy, LOG, "# 2026-11-28\n\n## 10:00\n\n- [fact] Coffee only.\n")
    code, output = _syncd("sync", "--home", str(copy))
    assert code != 0 and "config --unset syncd.indexschema" in output, output
    assert "Traceback" not in output and len(output.strip().splitlines()) == 1
    with syncd.open(pg_home, embedder=embedder) as engine:
        assert engine.status().fresh
        assert _facts(engine) == {"Green tea in the morning."}
    subprocess.run(["git", "config", "--unset", "syncd.indexschema"], cwd=copy, check=True)
    with syncd.open(copy, embedder=embedder) as engine:
        engine.sync()
        assert _facts(engine) == {"Coffee only."}
    with syncd.open(pg_home, embedder=embedder) as engine:
        assert _facts(engine) == {"Green tea in the morning."}


def _facts(engine) -> set[str]:
    return {h.content for h in engine.search("drink", user_id="ana", limit=20) if h.kind == "fact"}


def test_a_moved_home_keeps_its_schema(tmp_path, pg_home, embedder):
    write(pg_home, LOG, "# 2026-11-28\n\n## 10:00\n\n- [fact] Green tea in the morning.\n")
    with syncd.open(pg_home, embedder=embedder) as engine:
        engine.sync()
    moved = pg_home.rename(tmp_path / "moved")
    with syncd.open(moved, embedder=embedder) as engine:
        engine.sync()
        assert engine.status().fresh and _facts(engine) == {"Green tea in the morning."}


def test_a_home_whose_machine_name_changed_keeps_its_schema(pg_home, embedder, monkeypatch):
    """A container's machine name changes with every start: the home must not be locked out of
    its own index as if it were a copy on another machine."""
    write(pg_home, LOG, "# 2026-11-28\n\n## 10:00\n\n- [fact] Green tea in the morning.\n")
    with syncd.open(pg_home, embedder=embedder) as engine:
        engine.sync()
    monkeypatch.setattr(socket, "gethostname", lambda: "the-next-container")
    with syncd.open(pg_home, embedder=embedder) as engine:
        engine.sync()
        assert engine.status().fresh and _facts(engine) == {"Green tea in the morning."}


@pytest.mark.parametrize("table", ["terms", "entries", "files"])
def test_a_table_dropped_by_hand_is_made_anew(pg_url, pg_home, embedder, table):
    """One table of the home's schema dropped (psql, a clumsy clean-up): the schema still being
    there, status said fresh, every search failed with 'relation does not exist' and syncd sync
    found nothing to do. The next writer makes the schema anew and it equals a rebuild."""
    import psycopg

    write(pg_home, LOG, "# 2026-11-28\n\n## 10:00\n\n- [fact] Green tea in the morning.\n")
    with syncd.open(pg_home, embedder=embedder) as engine:
        engine.sync()
        schema = engine.index.schema
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(f"DROP TABLE {schema}.{table} CASCADE")
    code, output = _syncd("sync", "--home", str(pg_home))
    assert code == 0, output
    with syncd.open(pg_home, embedder=embedder) as engine:
        assert engine.status().fresh
        assert _facts(engine) == {"Green tea in the morning."}
        synced = pg_snapshot(engine)
        engine.reindex()
        assert_same(synced, pg_snapshot(engine))


def test_a_search_of_another_model_s_vectors_says_to_rebuild(pg_url, pg_home, embedder):
    """The home's schema holds another model's vectors (indexed with SYNCD_EMBED_MODEL set, say,
    a 768-dimension model): `syncd search` failed with the database's "different vector
    dimensions 768 and 384", and with a model of the same size answered by vectors that mean
    something else. It says in one line which model built it, which one is configured, and the way
    on (`syncd reindex`, or the setting); the home's writer (`syncd sync`) rebuilds, and search answers."""
    import psycopg

    write(pg_home, LOG, "# 2026-11-28\n\n## 10:00\n\n- [fact] Green tea in the morning.\n")
    with syncd.open(pg_home, embedder=embedder) as engine:
        engine.sync()
        schema = engine.index.schema
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(
            f'UPDATE {schema}.meta SET value = value || \'{{"model_id": "BAAI/bge-base-en-v1.5", "dim": 768}}\''
            " WHERE key = 'meta'"
        )
        conn.execute(
            f"ALTER TABLE {schema}.entries ALTER COLUMN vector TYPE vector(768)"
            " USING (vector::real[] || array_fill(0::real, ARRAY[384]))::vector(768)"
        )
    code, output = _syncd("search", "green tea", "--user", "ana", "--home", str(pg_home))
    assert code == 1 and len(output.strip().splitlines()) == 1, output
    assert "another model (BAAI/bge-base-en-v1.5, 768 dimensions)" in output and "run `syncd reindex`" in output
    assert "syncd sync" not in output  # it rebuilds for the runner's model: not what a reader should be told
    assert "Traceback" not in output and "vector dimensions" not in output
    code, output = _syncd("sync", "--home", str(pg_home))
    assert code == 0, output
    code, output = _syncd("search", "green tea", "--user", "ana", "--home", str(pg_home))
    assert code == 0 and "Green tea in the morning." in output, output


def test_a_reader_never_makes_nor_remakes_the_writer_s_schema(pg_url, pg_home, embedder):
    """`syncd search` and `status` open the index as readers; over PostgreSQL they opened it as
    its writer does, so one finding a schema of another layout (written by another version of
    syncd, on the writer's machine) dropped it, every row of the home with it, and made an
    empty one; and one finding none made it in the shared database."""
    import psycopg

    write(pg_home, LOG, "# 2026-11-28\n\n## 10:00\n\n- [fact] Green tea in the morning.\n")
    with syncd.open(pg_home, embedder=embedder) as engine:
        engine.sync()
        schema = engine.index.schema

    def held() -> tuple[int, int | None]:
        with psycopg.connect(pg_url, autocommit=True) as conn:
            if not conn.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s", (schema,)).fetchone():
                return 0, None
            rows = conn.execute(f"SELECT count(*) FROM {schema}.entries").fetchone()[0]
            return rows, conn.execute(f"SELECT value FROM {schema}.meta WHERE key = 'layout'").fetchone()[0]

    rows, layout = held()
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(f"UPDATE {schema}.meta SET value = %s WHERE key = 'layout'", (str(layout + 1),))
    for command in ("search", "status"):
        args = ("green tea", "--user", "ana") if command == "search" else ()
        code, output = _syncd(command, *args, "--home", str(pg_home))
        assert code == 1 and len(output.strip().splitlines()) == 1, output
        assert "has another layout" in output and "`syncd sync`" in output and "Traceback" not in output
        assert held() == (rows, layout + 1)
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(f"DROP SCHEMA {schema} CASCADE")
    code, output = _syncd("search", "green tea", "--user", "ana", "--home", str(pg_home))
    assert code == 1 and "there is no index at" in output and "`syncd sync`" in output, output
    code, output = _syncd("status", "--home", str(pg_home))
    assert code == 0 and "missing" in output, output
    assert held() == (0, None)
    code, output = _syncd("sync", "--home", str(pg_home))
    assert code == 0, output
    assert held() == (rows, layout)


def test_a_database_that_does_not_exist_is_named_with_what_to_do(tmp_path, pg_server, pg_url, pg_home, embedder):
    """A server that answers but has no such database is not "down": waiting never helps, so the
    one line says to create it or point the home at another (the URL mistyped at init, or the
    database dropped since)."""
    code, output = _syncd("init", str(tmp_path / "h"), "--index", pg_server.url("no_such_database"))
    assert code != 0 and "Traceback" not in output, output
    assert 'database "no_such_database" does not exist; create it (CREATE DATABASE)' in output, output
    write(pg_home, LOG, "# 2026-11-28\n\n## 10:00\n\n- [fact] Green tea.\n")
    with syncd.open(pg_home, embedder=embedder) as engine:
        engine.sync()
    import psycopg

    database = psycopg.conninfo.conninfo_to_dict(pg_url)["dbname"]  # pg_home's
    with psycopg.connect(pg_server.url(), autocommit=True) as conn:
        conn.execute(f"DROP DATABASE {database} WITH (FORCE)")
    code, output = _syncd("search", "tea", "--home", str(pg_home))
    assert code != 0 and "Traceback" not in output, output
    assert f'database "{database}" does not exist; create it (CREATE DATABASE)' in output, output
