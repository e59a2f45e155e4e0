"""The LLM wiki: Obsidian-exact link resolution, the vault's link graph, lint, and WikiManager.

``resolve`` and ``lint`` are pure; ``graph`` reads the vault (and keeps a derived cache under
``.syncd/``); ``provenance`` reads git history; ``manager`` ties them together; ``report``
turns findings and links into what the commands print.
"""
