"""An interrupted first sync, and the progress a person sees, old code against new in one run.

    .venv/bin/python benchmarks/bench_resume.py --old-python /tmp/old/venv/bin/python \
        [--new-python PY] [--files 800] [--facts 8] [--stop-at 0.5] [--workdir DIR]

``--old-python`` runs the code before the change (a tree from ``git archive <sha>`` with a venv
whose .pth files put that tree ahead of this repository's packages); the new code runs with
``--new-python`` (default: this interpreter, so this working tree). For each, on its own copy of the same generated home (``--files`` daily logs of
``--facts`` distinct facts each, as in issue 30's report of 800 daily logs):

  1. a first ``syncd sync`` with stderr on a pseudo-terminal, as a person runs it: its wall time,
     when the bar first showed any progress, how many times it was redrawn, what it left on screen;
  2. the same first sync stopped by SIGTERM at ``--stop-at`` of that wall time, then what
     ``syncd status`` says of the model, then the next ``syncd sync``: its wall time, the files it
     wrote and the texts it embedded (from its own summary line).

Prints both side by side with new/old ratios. Nothing here asserts a timing.
"""

from __future__ import annotations

import argparse
import datetime as dt
import fcntl
import os
import pty
import re
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import termios
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SUMMARY = re.compile(r"(\d+) new, .* (\d+) texts embedded")


def build_home(root: Path, files: int, facts: int) -> Path:
    import syncd

    home = syncd.init(root / "home").home
    start = dt.date(2024, 1, 1)
    for i in range(files):
        day = (start + dt.timedelta(days=i)).isoformat()
        lines = [f"# {day}", "", "## 09:30 chat:c1 session:s1"]
        lines += [
            f"- [note] On day {i} Ana wrote down item {i * facts + k}: shelf {k}, box {(i * 7 + k) % 31}."
            for k in range(facts)
        ]
        path = home / "memory/users/ana" / f"{day}.md"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("\n".join(lines) + "\n")
    return home


def syncd_cmd(python: str, home: Path, *args: str) -> list[str]:
    return [python, "-m", "syncd", *args, "--home", str(home)]


def on_terminal(cmd: list[str]) -> tuple[float, float | None, int, str, str]:
    """Run ``cmd`` with stderr on a pseudo-terminal (120 columns): (wall s, s until the bar first
    showed more than 0%, redraws, the last line left on the terminal, stdout)."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
    started = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=slave)
    os.close(slave)
    shown, first = b"", None
    while True:
        try:
            data = os.read(master, 65536)
        except OSError:
            break
        if not data:
            break
        shown += data
        if first is None and any(int(p) > 0 for p in re.findall(rb"(\d+)%", shown)):
            first = time.perf_counter() - started
    os.close(master)
    out = proc.stdout.read().decode()
    if proc.wait() != 0:
        raise SystemExit(f"{' '.join(cmd)} failed: {shown.decode(errors='replace')[-500:]}")
    wall = time.perf_counter() - started
    screen = shown.decode(errors="replace").replace("\r\n", "\n")
    last = screen.rstrip("\n").split("\n")[-1].split("\r")[-1].strip() if screen.strip() else ""
    return wall, first, screen.count("\r"), last, out


def interrupted_then_resumed(python: str, home: Path, after_s: float) -> dict:
    env = os.environ | {"PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(
        syncd_cmd(python, home, "sync", "-q"), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env
    )
    time.sleep(after_s)
    proc.send_signal(signal.SIGTERM)
    err = proc.communicate(timeout=600)[1]
    status = subprocess.run(syncd_cmd(python, home, "status"), capture_output=True, text=True, check=False).stdout
    started = time.perf_counter()
    done = subprocess.run(syncd_cmd(python, home, "sync", "-q"), capture_output=True, text=True, check=False)
    wall = time.perf_counter() - started
    match = SUMMARY.search(done.stdout)
    if done.returncode != 0 or not match:
        raise SystemExit(f"resumed sync failed: {done.stderr[-500:]}")
    return {
        "exit": proc.returncode,
        "said": (err.strip().splitlines() or [""])[-1][:150],
        "another model": "another model" in status,
        "resume wall": wall,
        "resume files": int(match[1]),
        "resume texts": int(match[2]),
    }


def measure(name: str, python: str, source: Path, work: Path, stop_at: float) -> dict:
    print(f"\n== {name} ({python})", flush=True)
    first_home = work / name / "first"
    shutil.copytree(source, first_home, symlinks=True)
    wall, first, redraws, last, out = on_terminal(syncd_cmd(python, first_home, "sync"))
    match = SUMMARY.search(out)
    result = {
        "wall": wall,
        "first progress": first,
        "redraws": redraws,
        "left on screen": last,
        "files": int(match[1]),
        "texts": int(match[2]),
    }
    print(
        f"  first sync {wall:.1f} s, first progress after {first if first is None else round(first, 1)} s, "
        f"{redraws} redraws; left: {last!r}",
        flush=True,
    )
    cut_home = work / name / "cut"
    shutil.copytree(source, cut_home, symlinks=True)
    result |= interrupted_then_resumed(python, cut_home, stop_at * wall)
    print(
        f"  stopped at {stop_at * wall:.1f} s (exit {result['exit']}: {result['said']!r}); status says "
        f"another model: {result['another model']}; next sync {result['resume wall']:.1f} s, "
        f"{result['resume files']} files, {result['resume texts']} texts embedded",
        flush=True,
    )
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--old-python", required=True, help="Interpreter that imports the old syncd.")
    parser.add_argument("--new-python", default=sys.executable, help="Interpreter that imports the new syncd.")
    parser.add_argument("--files", type=int, default=800, help="Daily logs in the home.")
    parser.add_argument("--facts", type=int, default=8, help="Facts per daily log.")
    parser.add_argument("--stop-at", type=float, default=0.5, help="SIGTERM at this share of a first sync's wall.")
    parser.add_argument("--workdir", type=Path, default=None, help="Where homes are made (default: a temp dir).")
    args = parser.parse_args()
    work = Path(args.workdir or tempfile.mkdtemp(prefix="bench-resume-")).resolve()
    work.mkdir(parents=True, exist_ok=True)
    os.chdir(work)  # not this repository: `python -m syncd` of an old tree must not find this one first
    source = build_home(work / "source", args.files, args.facts)
    print(f"home: {args.files} daily logs x {args.facts} facts under {source}")
    old = measure("old", args.old_python, source, work, args.stop_at)
    new = measure("new", args.new_python, source, work, args.stop_at)

    def num(v):
        return "-" if v is None else (f"{v:.1f}" if isinstance(v, float) else str(v))

    print(f"\n{'':<28}{'old':>12}{'new':>12}{'new/old':>10}")
    for key in ("wall", "first progress", "redraws", "texts", "resume wall", "resume files", "resume texts"):
        a, b = old[key], new[key]
        ratio = f"{b / a:.2f}" if isinstance(a, (int, float)) and isinstance(b, (int, float)) and a else "-"
        print(f"{key:<28}{num(a):>12}{num(b):>12}{ratio:>10}")
    for key in ("another model", "exit", "said", "left on screen"):
        print(f"{key:<28} old: {old[key]!r}\n{'':<28} new: {new[key]!r}")


if __name__ == "__main__":
    main()
