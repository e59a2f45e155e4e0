"""The LLM wiki: Obsidian-exact link resolution, the vault's link graph, lint, and WikiManager.

``resolve``, ``graph`` and ``lint`` are pure; ``store`` reads the vault and keeps the derived
graph store under ``.syncd/`` (which the sync also writes, batch by batch); ``provenance`` reads
git history; ``manager`` ties them together; ``report`` turns findings and links into what the
commands print.
"""
