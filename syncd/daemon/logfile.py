"""The log file of the process that holds a home (``syncd watch``, ``syncd serve``):
``.syncd/daemon.log``, which, like everything under ``.syncd/``, may be deleted at any moment."""

from __future__ import annotations

import logging
import logging.handlers

from ..home import Home

__all__ = ["daemon_log"]


class _StateLog(logging.handlers.WatchedFileHandler):
    """A WatchedFileHandler opens its file again when it was removed or replaced (by logrotate,
    or ``rm -rf .syncd``) instead of writing on into a deleted file; this one first makes
    ``.syncd/`` again, with its .gitignore, when the whole folder went (a fresh clone has none)."""

    def __init__(self, home: Home):
        self.home = home
        home.ensure_state_dir()
        super().__init__(home.state_dir / "daemon.log", encoding="utf-8")

    def _open(self):
        self.home.ensure_state_dir()
        return super()._open()


def daemon_log(home: Home) -> logging.Handler:
    """Log syncd's INFO and up to the home's daemon.log until the handler is removed and closed."""
    package_logger = logging.getLogger("syncd")
    if package_logger.getEffectiveLevel() > logging.INFO:
        package_logger.setLevel(logging.INFO)
    handler = _StateLog(home)
    handler.setFormatter(logging.Formatter("%(asctime)s %(process)d %(levelname)s %(name)s: %(message)s"))
    package_logger.addHandler(handler)
    return handler
