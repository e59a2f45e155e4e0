"""Whether a fetch or push that git could not do is a refusal for good or a failure that passes.

A daemon sharing a home (syncd/daemon/sharing.py) stops retrying a remote that refuses it for
good (RemoteRefused) until someone acts, and retries any other failure with a growing pause. git's
words alone do not tell the two apart in two cases a person meets every day, so this looks at the
world too:

* A remote on a drive that is not mounted, or a folder moved away for a while: git says the path
  "does not appear to be a git repository", exactly as for a folder that is there and is not
  one. Only the second is a refusal; a path that is not there at all is retried until it is.
* An ssh remote while the person's ssh agent is locked (or its key not added yet): the server
  says "Permission denied (publickey)", exactly as when it does not take the key. A locked
  OpenSSH agent lists no key and signs nothing, so when the agent this process would use holds
  no key, or ssh says it could not use it, the failure is retried until the agent can sign.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path
from urllib.parse import unquote, urlsplit

from ..errors import HistoryError, RemoteRefused

__all__ = ["failed"]

# What git says when a remote refuses us for a reason that waiting does not change (lowercased):
# credentials it does not take (git's own words, ssh's, an HTTP server's), and no repository there.
# Anything else (no network, a name that does not resolve, a timeout, a lock) may pass.
_REFUSED_FOR_GOOD = re.compile(
    r"authentication failed|could not read (username|password)|permission denied \(publickey"
    r"|repository not found|does not appear to be a git repository|returned error: (401|403|404)"
    r"|repository '[^']*' not found"
)

# What ssh says when the agent holding the person's key cannot sign now: locked, or its socket gone
# with the session that started it. Unlocked, or started again, it signs.
_AGENT_CANNOT_SIGN = re.compile(
    r"agent refused operation|communication with agent failed|error connecting to agent|signing failed"
)

# git's scp-like ssh address, "host:path" or "user@host:path": a colon before any slash.
_SCP_LIKE = re.compile(r"^[^/]*:")


def failed(command: str, detail: str, root: Path, url: str | None) -> HistoryError:
    """The error of a fetch or push of the remote at ``url`` (as git's config names it, for the
    repository at ``root``) that git could not do, git's words in ``detail``: RemoteRefused when
    only someone's action (the URL, the credentials, a repository made there) can make it work,
    else HistoryError, saying why it passes when git's words alone read as a refusal."""
    said = detail.lower()
    if not _REFUSED_FOR_GOOD.search(said):
        return HistoryError(command, detail)
    passing = _why_it_passes(said, root, url)
    if passing is None:
        return RemoteRefused(command, detail)
    return HistoryError(command, f"{detail} ({passing})")


def _why_it_passes(said: str, root: Path, url: str | None) -> str | None:
    path = _local_path(root, url)
    if path is not None:
        if os.path.lexists(path):
            return None  # there, and not a repository: someone must make one or fix the URL
        return f"{path} is not there now: a drive not mounted, a folder moved? a daemon sharing this home tries again until it is back"
    if _AGENT_CANNOT_SIGN.search(said):
        return "your ssh agent cannot sign now (locked?): a daemon sharing this home tries again until it can"
    if "permission denied (publickey" in said and _agent_holds_no_key():
        return "your ssh agent holds no key now (locked, or none added yet): a daemon sharing this home tries again until it does"
    return None


def _local_path(root: Path, url: str | None) -> Path | None:
    """The folder a remote's URL names on this machine (a path, or file://), None for any other."""
    if not url:
        return None
    if "://" in url:
        parts = urlsplit(url)
        return Path(unquote(parts.path)) if parts.scheme == "file" else None
    if _SCP_LIKE.match(url):
        return None
    return root / Path(url).expanduser()  # a relative path is git's from the repository's top


def _agent_holds_no_key() -> bool:
    """Whether the ssh agent this process's ssh would ask (``SSH_AUTH_SOCK``) lists no key now
    (a locked OpenSSH agent lists none) or cannot be reached; False with no agent at all, where
    the keys ssh offered are the person's files, which the server refused."""
    if not os.environ.get("SSH_AUTH_SOCK"):
        return False
    try:
        listed = subprocess.run(["ssh-add", "-l"], capture_output=True, timeout=10, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.SubprocessError):
        return False
    # Exit 1: the agent has no identities; 2: it cannot be reached. 0: it holds keys, offered.
    return listed.returncode in (1, 2)
