"""Re-reading daily logs at the cost of what changed: :class:`LogMemo` keeps the last parse of
recently read logs, so reading one again after an edit costs the edit (``reparse_daily_log``, the
daily-log face of rescan.py) and reading it unchanged costs a comparison.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

from .daily_log import DailyLog, parse_daily_log, reparse_daily_log

__all__ = ["LogMemo", "reparse_daily_log"]


class LogMemo:
    """The last parse of recently read daily logs, by key, so reading one again after an edit
    costs the edit (:func:`reparse_daily_log`) and reading it unchanged costs a comparison.

    Bounded both ways: at most ``logs`` logs and ``chars`` characters of their text (a parse
    takes several times its text in memory), the least recently read going first; the newest
    read is kept whatever its size, as it is the one being written to. Thread-safe.
    """

    def __init__(self, logs: int, chars: int):
        self._logs, self._chars = logs, chars
        self._memo: OrderedDict[object, tuple[str, DailyLog]] = OrderedDict()
        self._held = 0
        self._lock = threading.Lock()

    def __len__(self) -> int:
        """How many logs are held now."""
        with self._lock:
            return len(self._memo)

    @property
    def chars(self) -> int:
        """How many characters of text the held logs have."""
        with self._lock:
            return self._held

    def parse(self, key: object, text: str) -> DailyLog:
        """``parse_daily_log(text)``, from the last version of ``key`` read, when there is one."""
        with self._lock:
            last = self._memo.get(key)
        log = reparse_daily_log(text, last[0], last[1]) if last else parse_daily_log(text)
        self.remember(key, text, log)
        return log

    def remember(self, key: object, text: str, log: DailyLog) -> None:
        """``log`` is the parse of ``text``, the latest version of ``key``."""
        with self._lock:
            old = self._memo.pop(key, None)
            if old is not None:
                self._held -= len(old[0])
            self._memo[key] = (text, log)
            self._held += len(text)
            while len(self._memo) > 1 and (len(self._memo) > self._logs or self._held > self._chars):
                _, (dropped, _) = self._memo.popitem(last=False)
                self._held -= len(dropped)

    def forget(self, key: object) -> None:
        with self._lock:
            old = self._memo.pop(key, None)
            if old is not None:
                self._held -= len(old[0])
