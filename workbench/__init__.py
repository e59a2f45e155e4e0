"""The syncd workbench: explore, edit and audit a memory home from JupyterLab.

``Workbench(home)`` is one widget with tabs (Search, Browse, Edit, History, Health). It uses only
syncd's public API and is installed with ``pip install 'syncd[workbench]'``; syncd itself never
imports it. ``workbench.ipynb`` next to this file opens it on ``$SYNCD_HOME``.
"""

from __future__ import annotations

from .app import Workbench
from .data import HomeData, env_home

__all__ = ["Workbench", "HomeData", "env_home"]
