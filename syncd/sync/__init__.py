"""Keeping the index in step with the tree: scan (stat + hash), plan (pure), apply, and the daemon
that drives them from filesystem events.
"""
