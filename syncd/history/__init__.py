"""Git history of the memory tree: plumbing, the committer (intents -> commits with trailers),
commit messages, log, blame and revert.

Every commit sets its author and committer explicitly, so a machine with no git identity
configured (CI, a fresh server) still commits, and the author is the agent or person who made the
change rather than whoever happens to run the daemon.
"""
