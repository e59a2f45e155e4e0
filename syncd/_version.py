"""syncd's version, in one place: the package exports it (``syncd.__version__``), pyproject.toml
reads it for the wheel, and the parts that report it (``--version``, the servers, the daemon's
ping) import it from here rather than from the package, which would import them back."""

__version__ = "0.1.0"
