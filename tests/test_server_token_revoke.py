"""`syncd token revoke`: one token by its id, or with --user every token of one user; never both
at once because a user's name happens to be another token's id."""

from __future__ import annotations

from syncd.home import Home
from syncd.server.tokens import TokenStore

from .test_server_cli import syncd_cli


def test_revoke_takes_a_token_id_or_a_user_never_both(home):
    store = TokenStore.of(Home(home))
    first, _ = store.add("ana")
    second, _ = store.add("ana")
    # A user whose name is exactly the id of ana's first token.
    namesake, _ = store.add(first.id)

    one = syncd_cli("token", "revoke", first.id, "--home", str(home))
    assert one.returncode == 0, one.stderr
    assert one.stdout.strip() == f"revoked token {first.id} of user ana"
    assert {t.id for t in store.list()} == {second.id, namesake.id}

    every = syncd_cli("token", "revoke", "--user", "ana", "--home", str(home))
    assert every.returncode == 0 and every.stdout.strip() == f"revoked 1 token of user ana: {second.id}"
    assert {t.id for t in store.list()} == {namesake.id}

    by_name = syncd_cli("token", "revoke", first.id, "--home", str(home))
    assert by_name.returncode == 1 and "Traceback" not in by_name.stderr
    assert f"no token with id {first.id!r}" in by_name.stderr and "--user" in by_name.stderr
    assert {t.id for t in store.list()} == {namesake.id}
    for args in ([], [namesake.id, "--user", first.id]):
        usage = syncd_cli("token", "revoke", *args, "--home", str(home))
        assert usage.returncode != 0 and "TOKEN_ID or --user" in usage.stderr and "Traceback" not in usage.stderr
    assert syncd_cli("token", "revoke", "--user", "nobody", "--home", str(home)).returncode == 1


def test_revoke_takes_the_token_itself_and_never_echoes_it(home):
    store = TokenStore.of(Home(home))
    kept, _ = store.add("ana")
    info, token = store.add("ana")
    # Pasted whole, it was "no token with id 'sdu_…'" (the secret echoed back) and stayed valid.
    pasted = syncd_cli("token", "revoke", token, "--home", str(home))
    assert pasted.returncode == 0 and pasted.stdout.strip() == f"revoked token {info.id} of user ana", pasted.stderr
    assert store.check(token) is None and [t.id for t in store.list()] == [kept.id]
    again = syncd_cli("token", "revoke", token, "--home", str(home))
    assert again.returncode == 1 and "no such token" in again.stderr and token not in again.stderr
