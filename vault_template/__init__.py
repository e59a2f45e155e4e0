"""The wiki seed. It ships inside syncd as ``syncd.vault_template``; ``syncd init`` copies only the
``.md`` files of this folder into a new vault."""
