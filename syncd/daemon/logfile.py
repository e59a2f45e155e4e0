"""The log file of the process that holds a home (``syncd watch``, ``syncd serve``):
``.syncd/daemon.log``, which, like everything under ``.syncd/``, may be deleted at any moment."""

from __future__ import annotations

import contextlib
import logging
import logging.handlers
import sys

from ..home import Home, disk_failure

__all__ = ["daemon_log"]


class _StateLog(logging.handlers.WatchedFileHandler):
    """A WatchedFileHandler opens its file again when it was removed or replaced (by logrotate,
    or ``rm -rf .syncd``) instead of writing on into a deleted file; this one first makes
    ``.syncd/`` again, with its .gitignore, when the whole folder went (a fresh clone has none).

    A log the disk refuses (full, read-only, ``.syncd/`` gone and not to be made again) never
    stops the daemon, nor prints logging's "--- Logging error ---" traceback for every line: the
    daemon goes on, says so once on stderr, and the file, once it takes lines again, says how
    many it lost and why."""

    def __init__(self, home: Home):
        self.home = home
        self._refusal: OSError | None = None
        self._lost = 0
        # Opened at the first line: a home that cannot be written (a read-only server's) is
        # served all the same.
        super().__init__(home.state_dir / "daemon.log", encoding="utf-8", delay=True)

    def _open(self):
        self.home.ensure_state_dir()
        return super()._open()

    def emit(self, record: logging.LogRecord) -> None:
        self._refusal = None
        try:
            super().emit(record)
        except OSError as exc:  # raised outside logging's own guard: opening, reopening
            self._refusal = exc
        if self._refusal is not None:
            self._not_written(self._refusal)
        elif self._lost:
            self._written_again()

    def handleError(self, record: logging.LogRecord) -> None:
        refusal = sys.exc_info()[1]
        if isinstance(refusal, OSError):
            self._refusal = refusal
        else:
            super().handleError(record)

    def _not_written(self, refusal: OSError) -> None:
        if self.stream is not None:
            # Whatever it still buffers would only fail again on every later line.
            with contextlib.suppress(OSError):
                self.stream.close()
            self.stream = None
        if not self._lost:
            reason = disk_failure(refusal) or refusal.strerror or str(refusal)
            with contextlib.suppress(OSError, ValueError):
                sys.stderr.write(
                    f"syncd: warning: cannot write the daemon's log {self.baseFilename}: {reason}; "
                    "syncd goes on without it until it can be written\n"
                )
        self._lost += 1

    def _written_again(self) -> None:
        lost, self._lost = self._lost, 0
        if self.stream is None:
            return
        with contextlib.suppress(OSError, ValueError):
            self.stream.write(f"({lost} log line(s) before the one above could not be written here)\n")
            self.stream.flush()


def daemon_log(home: Home) -> logging.Handler:
    """Log syncd's INFO and up to the home's daemon.log until the handler is removed and closed."""
    package_logger = logging.getLogger("syncd")
    if package_logger.getEffectiveLevel() > logging.INFO:
        package_logger.setLevel(logging.INFO)
    handler = _StateLog(home)
    handler.setFormatter(logging.Formatter("%(asctime)s %(process)d %(levelname)s %(name)s: %(message)s"))
    package_logger.addHandler(handler)
    return handler
