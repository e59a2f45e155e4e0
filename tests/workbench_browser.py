"""JupyterLab and Chromium for the workbench's browser test and benchmark: a lab server on
127.0.0.1 with a token and its own root, config and runtime folders, and Debian's chromium driven
through Playwright's Python API (Playwright's own browser download cannot work here)."""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import syncd

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
NOTEBOOK = Path(__file__).resolve().parents[1] / "workbench" / "workbench.ipynb"
# Loads this checkout's workbench/ as syncd.workbench in the kernel when the installed syncd has
# none (a checkout run over another install, with PYTHONPATH); a pip install needs nothing.
_SHIM = """
import importlib.util, sys
try:
    import syncd.workbench
except ModuleNotFoundError:
    folder = {folder!r}
    spec = importlib.util.spec_from_file_location(
        "syncd.workbench", folder + "/__init__.py", submodule_search_locations=[folder])
    module = importlib.util.module_from_spec(spec)
    sys.modules["syncd.workbench"] = module
    spec.loader.exec_module(module)
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _installed() -> bool:
    code = "import syncd.workbench"
    return subprocess.run([sys.executable, "-c", code], capture_output=True, env=os.environ.copy()).returncode == 0


@contextlib.contextmanager
def jupyterlab(workdir: Path, home: Path, timeout: float = 60.0) -> Iterator[str]:
    """A JupyterLab serving ``workdir/lab`` (holding a copy of the notebook) on ``$SYNCD_HOME=home``;
    yields the notebook's URL, token included."""
    lab = workdir / "lab"
    lab.mkdir(parents=True, exist_ok=True)
    shutil.copy(NOTEBOOK, lab / "workbench.ipynb")
    config = workdir / "jupyter-config"
    (config / "labconfig").mkdir(parents=True, exist_ok=True)
    # The news prompt would cover part of every screenshot.
    (config / "labconfig" / "page_config.json").write_text(
        json.dumps({"disabledExtensions": {"@jupyterlab/apputils-extension:announcements": True}})
    )
    env = {
        **os.environ,
        "SYNCD_HOME": str(home),
        "JUPYTER_CONFIG_DIR": str(config),
        "JUPYTER_RUNTIME_DIR": str(workdir / "jupyter-runtime"),
        "IPYTHONDIR": str(workdir / "ipython"),
        "JUPYTER_PLATFORM_DIRS": "1",
    }
    if not _installed():
        shim = workdir / "shim"
        shim.mkdir(exist_ok=True)
        (shim / "sitecustomize.py").write_text(_SHIM.format(folder=str(NOTEBOOK.parent)))
        source = str(Path(syncd.__file__).resolve().parents[1])
        env["PYTHONPATH"] = os.pathsep.join([str(shim), source, env.get("PYTHONPATH", "")])
    port, token = _free_port(), secrets.token_hex(16)
    log = open(workdir / "jupyterlab.log", "wb")  # noqa: SIM115 (closed when the server is stopped, below)
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "jupyterlab",
            "--no-browser",
            "--ServerApp.ip=127.0.0.1",
            f"--ServerApp.port={port}",
            f"--IdentityProvider.token={token}",
            f"--ServerApp.root_dir={lab}",
            "--ServerApp.port_retries=0",
            "--allow-root",
            "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
        ],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        cwd=lab,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + timeout
        while True:
            try:
                urllib.request.urlopen(f"{base}/api/status?token={token}", timeout=2).read()
                break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"JupyterLab did not start; see {workdir / 'jupyterlab.log'}") from None
                time.sleep(0.2)
        yield f"{base}/lab/tree/workbench.ipynb?token={token}"
    finally:
        server.terminate()
        try:
            server.wait(10)
        except subprocess.TimeoutExpired:
            server.kill()
        log.close()


@contextlib.contextmanager
def chromium(width: int = 1400, height: int = 1700):
    """A Playwright page in Debian's chromium."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        try:
            yield browser.new_page(viewport={"width": width, "height": height})
        finally:
            browser.close()


def run_all(page, url: str, timeout_ms: int = 90_000) -> float:
    """Open the notebook, run all cells; seconds until the workbench shows."""
    page.goto(url)
    page.wait_for_selector(".jp-Notebook", timeout=timeout_ms)
    # The kernel is up (the status bar says so) before anything is run.
    page.wait_for_selector(".jp-StatusBar-Widget:has-text('| Idle')", timeout=timeout_ms)
    start = time.monotonic()
    page.click("li.lm-MenuBar-item:has-text('Run')")
    page.click("li.lm-Menu-item:has-text('Run All Cells')")
    page.wait_for_selector(".syncd-workbench .syncd-query input", timeout=timeout_ms)
    return time.monotonic() - start


def tab(page, title: str) -> None:
    page.click(f".syncd-tabs .lm-TabBar-tab:has-text('{title}')")


def search(page, query: str, expect: str, timeout_ms: int = 60_000) -> float:
    """Type a query, press Enter; seconds until a hit containing ``expect`` shows."""
    box = page.locator(".syncd-query input")
    box.fill(query)
    start = time.monotonic()
    box.press("Enter")
    page.wait_for_selector(f".syncd-hit:has-text('{expect}')", timeout=timeout_ms)
    return time.monotonic() - start
