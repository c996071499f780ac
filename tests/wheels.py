"""Small real wheels built by the tests (a valid zip: METADATA, WHEEL, RECORD with hashes), and
real installs of them with pip from a local --find-links directory, no network."""

from __future__ import annotations

import base64
import hashlib
import subprocess
import sys
import zipfile
from pathlib import Path


def _hash(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def _entry_points(scripts: dict[str, str]) -> bytes:
    return ("[console_scripts]\n" + "".join(f"{k} = {v}\n" for k, v in scripts.items())).encode()


def make_wheel(
    out_dir: Path,
    name: str,
    version: str,
    files: dict[str, bytes],
    requires: tuple[str, ...] = (),
    *,
    scripts: dict[str, str] | None = None,
    executable: bool = False,
    extras: tuple[str, ...] = (),
) -> Path:
    """``scripts``: console_scripts entry points (``{"tool": "tool:main"}``); ``executable``: the
    package files carry the x bit in the zip, so pip chmods each one after writing it; ``extras``:
    ``Provides-Extra`` names (pip installs an extra's requirements only when it is provided)."""
    norm = name.replace("-", "_")
    dist_info = f"{norm}-{version}.dist-info"
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"{norm}-{version}-py3-none-any.whl"
    meta = "Metadata-Version: 2.1\n" + f"Name: {name}\nVersion: {version}\n"
    meta += "".join(f"Provides-Extra: {e}\n" for e in extras)
    meta += "".join(f"Requires-Dist: {r}\n" for r in requires)
    contents = {
        **files,
        f"{dist_info}/METADATA": meta.encode(),
        **({f"{dist_info}/entry_points.txt": _entry_points(scripts)} if scripts else {}),
        f"{dist_info}/WHEEL": (
            b"Wheel-Version: 1.0\nGenerator: cudastack-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
        ),
    }
    record = "".join(f"{p},{_hash(d)},{len(d)}\n" for p, d in contents.items()) + f"{dist_info}/RECORD,,\n"
    with zipfile.ZipFile(path, "w") as zf:
        for p, d in contents.items():
            info = zipfile.ZipInfo(p)
            if executable and p in files:
                info.external_attr = 0o100755 << 16
            zf.writestr(info, d)
        zf.writestr(f"{dist_info}/RECORD", record)
    return path


def pip_install(python: Path, find_links: Path, *specs: str, extra: tuple[str, ...] = ()) -> None:
    """Install into the venv of ``python`` with this interpreter's pip (``pip --python``)."""
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet", "--no-index",
         "--find-links", str(find_links), *extra, *specs],
        capture_output=True,
        text=True,
        check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
