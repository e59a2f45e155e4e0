"""The engine floor: the one facade over a home, and every use case behind it.

  facade      Engine: one home, its index, its embedder; writes, change groups, revert, status
  search      the one search every front end answers a query with, and its defaults
  status      what the index reflects, exactly; the light read of it without LanceDB
  audit       a home's history for tools: log, where a fact came from, a commit's effect, revert
  initialize  ``syncd init``: create or adopt a home
  sharing     a home shared through git remotes: pull (merge by file kind), push
  conflicts   what those merges kept both versions of: listed, and resolved through the write path

Importing this package imports nothing: ``search`` and ``status`` stay light for the command line,
and only ``facade`` loads LanceDB and the model.
"""
