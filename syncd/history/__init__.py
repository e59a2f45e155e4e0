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

  git        running git; whether the person's git work is under way; HEAD read from the files
  status     what git shows as changed (the paths a commit holds, and how)
  staging    staging exact paths and one exact commit with plumbing (revert, the tools)
  chain      a chain of commits written by syncd itself, one per turn, one ``update-ref``
  objects    git objects read through one ``cat-file --batch`` and written in-process
  committer  changes -> commits: who authored what (intents), messages, the chain
  processes  the person's running git commands, waited for before a commit pass
  intents, messages, log, blame, revert, remote: what their names say
"""
