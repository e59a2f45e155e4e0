"""Keeping the index in step with the tree: scan (stat + hash), plan (pure), apply, and the pure
rules that turn filesystem events into work (the daemon that drives them is ``syncd.daemon.loop``).
"""
