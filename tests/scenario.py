"""Materialise a scenario (TOML: distributions, files, expected codes) into a site-packages dir.

Like uv's packse scenarios: each file states the situation, why it matters, and the exact set of
finding codes the doctor must report — no more, no fewer.
"""

from __future__ import annotations

import base64
import hashlib
import os
import tomllib
from pathlib import Path
from typing import Any

SCENARIOS = Path(__file__).parent / "scenarios"


def record_hash(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def _dist_dirname(name: str, version: str) -> str:
    return f"{name.replace('-', '_')}-{version}.dist-info"


def write_dist(site: Path, spec: dict[str, Any]) -> Path:
    """Write one ``.dist-info`` (and its files) as an installer would, RECORD with real hashes."""
    name, version = spec["name"], spec["version"]
    meta = site / _dist_dirname(name, version)
    meta.mkdir(parents=True, exist_ok=True)
    if "metadata_hex" in spec:
        metadata = bytes.fromhex(spec["metadata_hex"])
    else:
        lines = ["Metadata-Version: 2.1", f"Name: {name}", f"Version: {version}"]
        lines += [f"Requires-Dist: {r}" for r in spec.get("requires", [])]
        lines += [f"Provides-Extra: {e}" for e in spec.get("extras", [])]
        metadata = ("\n".join(lines) + "\n\nLong description.\n").encode()
    if spec.get("metadata", True):
        (meta / "METADATA").write_bytes(metadata)
    (meta / "INSTALLER").write_text(spec.get("installer", "pip") + "\n")
    (meta / "WHEEL").write_text(
        "Wheel-Version: 1.0\n" + "".join(f"Tag: {t}\n" for t in spec.get("tags", ["py3-none-any"]))
    )
    rows: list[str] = []
    files: dict[str, Any] = dict(spec.get("files", {}))
    for rel in spec.get("paths", []):
        files.setdefault(rel, "")
    for rel, content in files.items():
        data = content.encode() if isinstance(content, str) else bytes(content)
        p = site / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        if not spec.get("skip_write", False) and rel not in spec.get("not_on_disk", []):
            p.write_bytes(data)
        rows.append(f"{rel},{record_hash(data)},{len(data)}")
    for extra in spec.get("record_hashes", {}).items():
        rows.append(f"{extra[0]},{extra[1]},1")
    for f in ("METADATA", "INSTALLER", "WHEEL"):
        rows.append(f"{meta.name}/{f},,")
    rows.append(f"{meta.name}/RECORD,,")
    if spec.get("record", True):
        (meta / "RECORD").write_text("\n".join(rows) + "\n")
    return meta


def materialize(scenario: dict[str, Any], root: Path) -> Path:
    site = root / "lib" / f"python{scenario.get('python_version', '3.11')}" / "site-packages"
    site.mkdir(parents=True, exist_ok=True)
    for spec in scenario.get("dist", []):
        write_dist(site, spec)
    for rel, content in scenario.get("files", {}).items():
        p = site / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(content)
    for rel, target in scenario.get("symlinks", {}).items():
        p = site / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        if p.exists() or p.is_symlink():
            p.unlink()
        os.symlink(target, p)
    for rel, meta in scenario.get("conda_meta", {}).items():
        d = root / "conda-meta"
        d.mkdir(exist_ok=True)
        (d / rel).write_text(meta)
    return site


def load(name: str) -> dict[str, Any]:
    """Load a scenario; ``base = "other"`` starts from another scenario's dists and files, and
    ``drop = [names]`` removes some of them (a dist given again replaces the base's)."""
    with open(SCENARIOS / f"{name}.toml", "rb") as fh:
        data = tomllib.load(fh)
    if "base" in data:
        base = load(data["base"])
        names = {d["name"] for d in data.get("dist", [])} | set(data.get("drop", []))
        data["dist"] = [d for d in base.get("dist", []) if d["name"] not in names] + data.get("dist", [])
        data["files"] = {**base.get("files", {}), **data.get("files", {})}
        for key in ("python_version", "environ"):
            if key not in data and key in base:
                data[key] = base[key]
    return data


def all_names() -> list[str]:
    return sorted(p.stem for p in SCENARIOS.glob("*.toml"))
