"""The daemon's side of sharing a home through a git remote (``syncd watch --remote NAME``): every
few seconds a pull (fetch, merge by file kind, index what came in), and a push whenever HEAD
moved since the last one; an unreachable remote is retried with a growing pause (up to
``MAX_BACKOFF_S``) and never holds up local writes, which go on committing meanwhile.

A remote that refuses us for good (RemoteRefused: another history, a hook declining our pushes,
credentials it does not take, a folder there that is no repository) is not retried: retrying
every five minutes forever changes nothing and buries the one line that says what to do (a
remote on a drive not mounted, or over ssh while the agent is locked, is no refusal: it passes,
and is retried; syncd.history.remote_failures tells them apart). Sharing stops until
something changes: the remote's settings in git's config, the person asking (``syncd remote
retry``, the control method ``remote_retry``), or a restart of the daemon.

What it last did is kept in ``remote.json`` in the home's private directory (pid, remote, times of
the last pull and push, the last error, when it retries or that it stopped), which ``syncd
status`` shows.

Concurrency: the thread calls the same use cases as ``syncd pull`` / ``push``
(syncd.engine.sharing) on the daemon's engine. A pull's merge runs with the write path quiesced
(the write turn and the commit stage held), so no agent write and no commit pass of the daemon's
lands mid-merge; its sync and commits take the engine's own locks as the daemon's do.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from pathlib import Path

from ..engine import sharing
from ..errors import InvalidInputError, RemoteRefused, SyncdError
from ..history.git import head_sha

__all__ = ["MAX_BACKOFF_S", "RemoteSharing", "read_remote_state"]

log = logging.getLogger(__name__)

MAX_BACKOFF_S = 300.0
STATE_FILE = "remote.json"


def read_remote_state(private_dir: Path) -> dict | None:
    """What the daemon's sharing last did, or None (never shared, or its daemon is gone)."""
    try:
        state = json.loads((private_dir / STATE_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(state, dict):
        return None
    try:
        os.kill(int(state.get("pid", -1)), 0)
    except (OSError, ValueError):
        return None
    return state


class RemoteSharing:
    """Pull every ``every_s`` seconds from ``remote`` and push what is new, on a thread of its own."""

    def __init__(self, engine, remote: str, every_s: float):
        self.engine = engine
        self.remote = remote
        self.every_s = every_s
        self._stop = threading.Event()
        self._retry = threading.Event()  # asked to try now (remote_retry)
        self._wake = threading.Event()  # set with either: what the thread's pauses wait on
        self._thread = threading.Thread(target=self._run, name="syncd-remote", daemon=True)
        self._pushed: str | None = None
        self._state: dict = {
            "pid": os.getpid(),
            "remote": remote,
            "last_pull": None,
            "last_push": None,
            "error": None,
            "retry_at": None,
            "stopped": False,  # refused for good: not retried until something changes
        }

    def start(self, control_methods: dict | None = None) -> RemoteSharing:
        """Set the home up for sharing and start; InvalidInputError for a remote the home lacks.
        ``control_methods`` (the daemon's socket's, before it serves them) gains ``remote_retry``."""
        sharing.check_remote(self.engine.home.root, self.remote)
        sharing.share(self.engine, self.remote, None)
        if control_methods is not None:
            control_methods["remote_retry"] = self.retry  # `syncd remote retry`
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread.is_alive():
            self._thread.join(60)
        (self.engine.home.private_dir / STATE_FILE).unlink(missing_ok=True)

    def _save(self) -> None:
        path = self.engine.home.ensure_private_dir() / STATE_FILE
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self._state), encoding="utf-8")
        os.replace(tmp, path)

    def round(self) -> None:
        """One pull, and a push if HEAD moved since the last push. Raises what they raise."""
        report = sharing.pull(self.engine, self.remote)
        self._state["last_pull"] = time.time()
        if report.head is not None:
            log.info("pulled: %s", report.summary())
        head = head_sha(self.engine.home.root)
        if head != self._pushed:
            pushed = sharing.push(self.engine, self.remote)
            self._pushed = pushed.head
            self._state["last_push"] = time.time()

    def retry(self, remote: str | None = None) -> dict:
        """Try the remote again now (the control method ``remote_retry``, `syncd remote retry`):
        after a refusal for good once it is fixed, or during a pause after a failure. What the
        try does, ``syncd status`` shows."""
        if remote is not None and remote != self.remote:
            raise InvalidInputError(f"this daemon shares the home through remote {self.remote!r}, not {remote!r}")
        stopped = bool(self._state["stopped"])
        self._retry.set()
        self._wake.set()
        return {"remote": self.remote, "stopped": stopped}

    def _pause(self, seconds: float) -> bool:
        """Wait ``seconds`` or until asked to stop or retry; True when asked to stop."""
        if self._wake.wait(seconds):
            self._wake.clear()
        self._retry.clear()
        return self._stop.is_set()

    def _held(self, exc: RemoteRefused) -> bool:
        """After a refusal for good: say so once, and wait until the remote's settings change or
        someone asks to try again. True when asked to stop meanwhile."""
        self._state.update(error=str(exc), retry_at=None, stopped=True)
        self._save()
        log.error(
            "sharing with %s stopped: %s; waiting and retrying cannot help: once it is fixed (the remote's "
            "URL, its hook, your credentials), run `syncd remote retry %s` (changing the remote's settings, or "
            "restarting the daemon, tries again too); local writes go on",
            self.remote,
            exc,
            self.remote,
        )
        settings = sharing.remote_config(self.engine.home.root, self.remote)
        while True:
            # Woken by a retry or a stop at once; the settings are looked at every pull interval.
            if self._wake.wait(self.every_s):
                self._wake.clear()
            if self._stop.is_set():
                return True
            if self._retry.is_set():
                why = "asked to"
                break
            try:
                changed = sharing.remote_config(self.engine.home.root, self.remote) != settings
            except SyncdError:  # git busy or its config unreadable now: look again later
                continue
            if changed:
                why = "its settings changed"
                break
        self._retry.clear()
        log.info("sharing with %s: trying again (%s)", self.remote, why)
        self._state.update(stopped=False)
        return False

    def _run(self) -> None:
        pause = 0.0
        while not self._pause(pause):
            try:
                self.round()
            except RemoteRefused as exc:
                if self._held(exc):
                    break
                pause = 0.0
                continue
            except SyncdError as exc:
                # Unreachable, or git busy: local writes go on; try again, waiting longer each time.
                pause = min(max(pause * 2, self.every_s), MAX_BACKOFF_S)
                self._state.update(error=str(exc), retry_at=time.time() + pause)
                log.warning("sharing with %s: %s; retrying in %.0f s", self.remote, exc, pause)
            except Exception:  # a bug: say so loudly, keep the daemon alive, try again later
                pause = MAX_BACKOFF_S
                log.exception("sharing with %s failed", self.remote)
            else:
                pause = self.every_s
                self._state.update(error=None, retry_at=None)
            self._save()
