"""Real wheels for integration tests: resolved by the machine's own pip, read straight from disk.

``pip install --dry-run --report`` resolves ``torch==2.14.1 torchvision==0.29.1`` exactly as a user's
install would (same pip configuration, same local index), and gives each wheel's URL. Wheels on
this disk are read in place; a few small ones come from PyPI into a cache. From each wheel only
what cudastack reads is extracted: the dist-info, the version files, and empty stand-ins for the
native files (ENV004 stats them). That keeps a 4.4 GB environment to a few seconds and megabytes.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.parse
import zipfile
from pathlib import Path

from cudastack.env.dists import _NATIVE
from cudastack.env.versionfiles import VERSION_FILES

CACHE = Path(os.environ.get("CUDASTACK_TEST_WHEELS", Path.home() / ".cache" / "cudastack-test-wheels"))


class UnavailableError(Exception):
    """The wheels cannot be had here (no index, no network): tests skip with this reason."""


def resolve(requirements: list[str]) -> list[dict[str, object]]:
    """``pip install --dry-run --report`` for the running interpreter; raises UnavailableError."""
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--dry-run",
            "--ignore-installed",
            "--quiet",
            "--report",
            "-",
            *requirements,
        ],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    if proc.returncode != 0:
        raise UnavailableError(f"pip could not resolve {' '.join(requirements)}: {proc.stderr.strip()[-300:]}")
    return list(json.loads(proc.stdout)["install"])


def wheel_path(item: dict[str, object]) -> Path:
    info = item["download_info"]
    assert isinstance(info, dict)
    url = str(info["url"])
    if url.startswith("file://"):
        return Path(urllib.parse.unquote(urllib.parse.urlparse(url).path))
    CACHE.mkdir(parents=True, exist_ok=True)
    name = urllib.parse.unquote(url.rsplit("/", 1)[-1].split("#")[0])
    dest = CACHE / name
    if not dest.exists():
        err = _pip_download(url, timeout=600)
        if err is not None or not dest.exists():
            raise UnavailableError(f"cannot download {name}: {err}")
    return dest


def _pip_download(requirement: str, timeout: int) -> str | None:
    """``pip download --no-deps`` into the cache; None on success, else the end of pip's stderr."""
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "download", "--no-deps", "--quiet", "-d", str(CACHE), requirement],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    return None if proc.returncode == 0 else proc.stderr.strip()[-300:]


def extract_metadata(whl: Path, site: Path) -> None:
    """Lay down what an install would, minus the payload cudastack never reads."""
    with zipfile.ZipFile(whl) as zf:
        for info in zf.infolist():
            name = info.filename
            if info.is_dir():
                continue
            target = site / name
            keep = ".dist-info/" in name or name in VERSION_FILES or name.endswith(".pth")
            if keep:
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(zf.read(info))
            elif _NATIVE.search(name):
                target.parent.mkdir(parents=True, exist_ok=True)
                target.touch()
        dist_info = next(n.split("/")[0] for n in zf.namelist() if ".dist-info/" in n)
    (site / dist_info / "INSTALLER").write_text("pip\n")


def build_env(requirements: list[str], site: Path) -> list[str]:
    """Materialise the resolution of ``requirements`` into ``site``; returns the dist names."""
    items = resolve(requirements)
    site.mkdir(parents=True, exist_ok=True)
    names = []
    for item in items:
        extract_metadata(wheel_path(item), site)
        meta = item["metadata"]
        assert isinstance(meta, dict)
        names.append(str(meta["name"]))
    return names


def cached_wheel(requirement: str, pattern: str) -> Path:
    """``pip download --no-deps requirement`` into the cache (once), the wheel matching ``pattern``.

    The wheels this fetches from PyPI for the plan and kernel-build tests: sgl-kernel 0.3.21
    (536 MB) and torch 2.9.1 (900 MB, the torch sgl-kernel 0.3.21 was built for): 1.4 GB.
    """
    CACHE.mkdir(parents=True, exist_ok=True)
    found = sorted(CACHE.glob(pattern))
    if not found:
        err = _pip_download(requirement, timeout=1800)
        found = sorted(CACHE.glob(pattern))
        if err is not None or not found:
            raise UnavailableError(f"cannot download {requirement}: {err}")
    return found[0]


def pathfinder_answer(version: str, oracle: str, into: Path) -> object:
    """What ``oracle`` (Python that prints JSON) prints with cuda-pathfinder ``version``'s wheel
    unpacked into ``into`` and first on ``sys.path``: the real module's own tables, for tests that
    read them from the files instead."""
    whl = cached_wheel(f"cuda-pathfinder=={version}", f"cuda_pathfinder-{version}-*.whl")
    with zipfile.ZipFile(whl) as zf:
        zf.extractall(into)
    real = subprocess.run(
        [sys.executable, "-I", "-c", f"import sys; sys.path.insert(0, {str(into)!r})\n{oracle}"],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert real.returncode == 0, real.stderr[-1000:]
    return json.loads(real.stdout)
