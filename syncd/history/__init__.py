"""Git history of the memory tree: plumbing, the committer (intents -> commits with trailers),
commit messages, log, blame and revert.

Every commit sets its author and committer explicitly: an agent's change is authored by the agent
(from its intent), a person's by their own ``git config user.name``/``user.email`` (the
repository's, then the global one), and by the settings' human identity where git has none, so a
machine with no git identity configured (CI, a fresh server) still commits.

Every public function here raises only SyncdError subclasses: GitBusyError while the user's own
git work is under way (a held index.lock, a merge, rebase, cherry-pick, revert, bisect, unmerged
paths, a detached HEAD for commits), HistoryError when git fails otherwise, NotFoundError and
RevertError where they say. See git.py for what we refuse and why.
"""
