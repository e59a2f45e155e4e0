"""The memory home: what its paths mean and how it is read and written on disk.

  layout  pure path rules: scope from a path, id validation (no I/O)
  disk    disk I/O: atomic and compare-and-swap writes, durable appends, the single-writer lock
  seed    the files a new home starts with (the wiki vault's template)
  tokens  the bearer tokens of its servers, in its private folder (imported by name, not here)

Every other part of syncd stands on this floor, so its names are imported from the package.
"""

from .disk import (
    Home,
    atomic_write,
    blob_sha,
    common_git_dir,
    disk_failure,
    durable_append,
    file_blob_sha,
    find_home,
    git_dir,
    ignore_write_temp_files,
    read_at_most,
    read_memory_file,
    read_regular,
    remove_stale_temp_files,
    replace_unsynced,
    sync_folders,
    write_refused,
    write_some,
)
from .layout import (
    FACT_CONTENT_MAX,
    ID_MAX_LEN,
    ID_RULE,
    KINDS,
    SESSION_FILES,
    FileScope,
    check_fact_content,
    check_query,
    check_text,
    classify_path,
    is_indexable,
    is_markdown,
    validate_id,
    validate_label,
)
from .lock import CHANGE_HOLDER, DAEMON_ROLES, HomeLock

__all__ = [
    "CHANGE_HOLDER",
    "DAEMON_ROLES",
    "Home",
    "HomeLock",
    "atomic_write",
    "replace_unsynced",
    "blob_sha",
    "disk_failure",
    "durable_append",
    "file_blob_sha",
    "find_home",
    "git_dir",
    "common_git_dir",
    "ignore_write_temp_files",
    "read_at_most",
    "read_memory_file",
    "read_regular",
    "remove_stale_temp_files",
    "sync_folders",
    "write_refused",
    "write_some",
    "ID_MAX_LEN",
    "FACT_CONTENT_MAX",
    "ID_RULE",
    "KINDS",
    "SESSION_FILES",
    "FileScope",
    "check_fact_content",
    "check_query",
    "check_text",
    "classify_path",
    "is_indexable",
    "is_markdown",
    "validate_id",
    "validate_label",
]
