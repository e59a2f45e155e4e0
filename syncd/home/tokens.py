"""Bearer tokens of a home's servers, kept in the home's private folder (``<git dir>/syncd/``,
see ``Home.private_dir``) with mode 0600: not under ``.syncd/``, which is derived and may be
deleted at any moment, while a token lost is a client locked out for good.

  admin.token   the admin token, in clear: local clients (the CLI, ``syncd mcp``, the
                workbench) of the account that owns the home read it; the first
                ``syncd serve`` creates it
  tokens.json   user tokens: ``{"tokens": [{"id", "user", "sha256", "created"}]}``, a
                token bound to one user, shown once when issued and kept only as a hash

Earlier versions kept both under ``.syncd/``; :meth:`TokenStore.of` moves them over the first
time it opens the home, so no user loses a token.

A presented token is compared in constant time (``hmac.compare_digest``) against every hash
and the admin token. The server re-reads the files when they change, so ``syncd token add`` and
``revoke`` take effect on a running server at its next request.

The store lives on the home's floor (not the servers') because the home's writer, whichever
process it is (``syncd serve`` or ``watch``'s daemon), publishes the hashes into a shared
PostgreSQL index for the readers that hold no copy of the home (engine/database.TokenMirror), and
``syncd token add|revoke`` publish at once (:meth:`TokenStore.publish`).
"""

from __future__ import annotations

import builtins  # TokenStore.list shadows the builtin inside the class
import contextlib
import datetime as dt
import fcntl
import hashlib
import hmac
import json
import os
import secrets
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ..errors import ConfigError, HomeError, NotFoundError
from .disk import Home, disk_failure, write_refused
from .layout import validate_id

__all__ = ["ADMIN_FILE", "USERS_FILE", "Principal", "TokenInfo", "TokenStore", "match_token"]

ADMIN_FILE = "admin.token"
USERS_FILE = "tokens.json"
_PREFIX_ADMIN = "sda_"
_PREFIX_USER = "sdu_"


@dataclass(frozen=True)
class Principal:
    """Who a request acts for: ``user`` None is the admin (names the user per request)."""

    user: str | None
    token_id: str

    @property
    def admin(self) -> bool:
        return self.user is None


@dataclass(frozen=True)
class TokenInfo:
    id: str
    user: str
    created: str


def _hash(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()


def _write_private(path: Path, data: bytes) -> None:
    """Atomically replace ``path`` with ``data``, readable by its owner only (never for an instant
    by anyone else: the temporary file is created 0600)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
        raise


class TokenStore:
    """The tokens kept in ``folder`` (a home's: :meth:`of`)."""

    def __init__(self, folder: Path):
        self.dir = Path(folder)
        self.admin_path = self.dir / ADMIN_FILE
        self.users_path = self.dir / USERS_FILE
        self._mutex = threading.Lock()
        self._seen: tuple[object, object] | None = None
        self._admin_hash: str | None = None
        self._users: list[dict] = []

    @classmethod
    def of(cls, home: Home) -> TokenStore:
        """The tokens of ``home``, in its private folder; those an earlier version kept under
        ``.syncd/`` are moved there first."""
        store = cls(home.ensure_private_dir())
        store._adopt(home.state_dir)
        return store

    def _adopt(self, old: Path) -> None:
        """Move the token files of an earlier layout from ``old`` (once; a no-op after). User
        tokens found in both places are merged, so none is lost; an admin token already here
        wins over the old one, which local clients no longer read."""
        old_admin, old_users = old / ADMIN_FILE, old / USERS_FILE
        if not (old_admin.exists() or old_users.exists()):
            return
        with self._locked():
            if old_users.exists():
                mine = self._read_users()
                known = {t["id"] for t in mine}
                theirs = TokenStore(old)._read_users()
                merged = mine + [t for t in theirs if t["id"] not in known]
                if merged != mine or not self.users_path.exists():
                    self._write_users(merged)
                old_users.unlink(missing_ok=True)
            with contextlib.suppress(FileNotFoundError):
                token = old_admin.read_text(encoding="utf-8").strip()
                if token and self.admin_token() is None:
                    _write_private(self.admin_path, (token + "\n").encode())
                old_admin.unlink()

    # -- files -----------------------------------------------------------------------------------

    @contextlib.contextmanager
    def _locked(self):
        """Serialise changes across processes (two `syncd token add` at once)."""
        try:
            self.dir.mkdir(mode=0o700, parents=True, exist_ok=True)
            fd = os.open(self.dir / "tokens.lock", os.O_RDWR | os.O_CREAT, 0o600)
        except OSError as exc:
            if not write_refused(exc):
                raise
            # Else 'Read-only file system: .../tokens.lock': neither what nor what to do.
            raise HomeError(
                f"cannot change the tokens kept in {self.dir} ({disk_failure(exc) or 'permission denied'}): "
                "issuing or revoking a token, and a server's first start, need write access to the home's .git folder"
            ) from exc
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)

    def _read_users(self) -> list[dict]:
        try:
            data = json.loads(self.users_path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return []
        except (OSError, ValueError) as exc:
            raise ConfigError(f"cannot read {self.users_path}: {exc}") from None
        tokens = data.get("tokens") if isinstance(data, dict) else None
        if not isinstance(tokens, list):
            raise ConfigError(f"{self.users_path} is not a syncd token file")
        return [t for t in tokens if isinstance(t, dict) and {"id", "user", "sha256"} <= t.keys()]

    def _write_users(self, tokens: list[dict]) -> None:
        _write_private(self.users_path, (json.dumps({"tokens": tokens}, indent=2) + "\n").encode())

    def admin_token(self, create: bool = False) -> str | None:
        """The admin token (made now, when ``create`` and there is none yet)."""
        try:
            token = self.admin_path.read_text(encoding="utf-8").strip()
            if token:
                return token
        except FileNotFoundError:
            pass
        if not create:
            return None
        with self._locked():
            if self.admin_path.exists() and self.admin_path.read_text(encoding="utf-8").strip():
                return self.admin_path.read_text(encoding="utf-8").strip()
            token = _PREFIX_ADMIN + secrets.token_urlsafe(32)
            _write_private(self.admin_path, (token + "\n").encode())
            return token

    def add(self, user: str) -> tuple[TokenInfo, str]:
        """Issue a token bound to ``user``; returns its record and the token (shown only now)."""
        validate_id("user", user)
        token_id = secrets.token_hex(4)
        token = f"{_PREFIX_USER}{token_id}_{secrets.token_urlsafe(32)}"
        created = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
        with self._locked():
            tokens = self._read_users()
            tokens.append({"id": token_id, "user": user, "sha256": _hash(token), "created": created})
            self._write_users(tokens)
        return TokenInfo(token_id, user, created), token

    def list(self) -> builtins.list[TokenInfo]:
        return [TokenInfo(t["id"], t["user"], t.get("created", "")) for t in self._read_users()]

    def revoke(self, token_id: str) -> TokenInfo:
        """Revoke the token with this id, or this token itself (only that one: a user's name is no
        token id here, whatever it looks like; :meth:`revoke_user` revokes all of a user's tokens)."""
        if token_id.startswith(_PREFIX_USER):
            # The token itself, pasted whole: the one whose hash it has (never echoed back).
            digest = _hash(token_id)
            gone = self._revoke(lambda t: t.get("sha256") == digest)
            if not gone:
                raise NotFoundError("no such token: revoked already, or not of this home (see `syncd token list`)")
            return gone[0]
        gone = self._revoke(lambda t: t["id"] == token_id)
        if not gone:
            named = any(t.user == token_id for t in self.list())
            hint = f"; to revoke every token of user {token_id!r}, use --user" if named else ""
            raise NotFoundError(f"no token with id {token_id!r} (see `syncd token list`){hint}")
        return gone[0]

    def revoke_user(self, user: str) -> builtins.list[TokenInfo]:
        """Revoke every token of ``user``."""
        gone = self._revoke(lambda t: t["user"] == user)
        if not gone:
            raise NotFoundError(f"user {user!r} has no token (see `syncd token list`)")
        return gone

    def _revoke(self, which) -> builtins.list[TokenInfo]:
        with self._locked():
            tokens = self._read_users()
            gone = [t for t in tokens if which(t)]
            if gone:
                self._write_users([t for t in tokens if not which(t)])
        return [TokenInfo(t["id"], t["user"], t.get("created", "")) for t in gone]

    # -- checking --------------------------------------------------------------------------------

    def _signature(self) -> tuple[object, object]:
        def stat(path: Path) -> object:
            try:
                st = path.stat()
            except FileNotFoundError:
                return None
            return (st.st_ino, st.st_mtime_ns, st.st_size)

        return stat(self.admin_path), stat(self.users_path)

    def _refresh(self) -> None:
        signature = self._signature()
        if signature == self._seen:
            return
        admin = self.admin_token()
        self._admin_hash = _hash(admin) if admin else None
        self._users = self._read_users()
        self._seen = signature

    def check(self, token: str) -> Principal | None:
        """Who ``token`` stands for, or None when it is no token of this home."""
        with self._mutex:
            self._refresh()
            admin_hash, users = self._admin_hash, self._users
        return match_token(token, admin_hash, users)

    def publish(self, write: Callable[[dict], bool]) -> bool:
        """Hand the current :meth:`hashes` to ``write`` (a shared index's ``write_tokens``) while
        holding the lock every change takes: two publishers (a `syncd token revoke` and the
        writer's mirror) can then never put an older set over a newer one, so a revoked token
        never comes back. What ``write`` returns (True: the index held another set)."""
        with self._locked():
            return write(self.hashes())

    def hashes(self) -> dict:
        """What readers of a shared index check this home's tokens against (published into the
        index by the home's writer): the admin token's hash and each user token's id, user and
        hash. Never a token itself."""
        with self._mutex:
            self._refresh()
            return {
                "admin": self._admin_hash,
                "users": [
                    {"id": str(t["id"]), "user": str(t["user"]), "sha256": str(t["sha256"])} for t in self._users
                ],
            }


def match_token(token: str, admin_hash: str | None, users: builtins.list[dict]) -> Principal | None:
    """Who ``token`` stands for among a home's token hashes (TokenStore.hashes' fields), or None."""
    presented = _hash(token)
    match: Principal | None = None
    # Every comparison is made, in constant time each: how long this takes says nothing
    # about which token (if any) is closest.
    if admin_hash is not None and hmac.compare_digest(presented, str(admin_hash)):
        match = Principal(None, "admin")
    for record in users:
        if hmac.compare_digest(presented, str(record["sha256"])) and match is None:
            match = Principal(str(record["user"]), str(record["id"]))
    return match
