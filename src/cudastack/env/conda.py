"""Conda environments: ``conda-meta/*.json`` records, since conda's torch, cudatoolkit and
libstdcxx-ng carry no dist-info of their own."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass

from cudastack.files import open_file


@dataclass(frozen=True, slots=True, kw_only=True)
class CondaPackage:
    name: str
    version: str
    build: str
    channel: str | None
    path: str


def read_conda_meta(prefix: str) -> tuple[list[CondaPackage], list[tuple[str, str]]]:
    """Packages recorded in ``prefix/conda-meta``; second value lists ``(file, problem)``."""
    meta = os.path.join(prefix, "conda-meta")
    packages: list[CondaPackage] = []
    problems: list[tuple[str, str]] = []
    try:
        names = sorted(n for n in os.listdir(meta) if n.endswith(".json"))
    except OSError:
        return packages, problems
    for name in names:
        path = os.path.join(meta, name)
        try:
            with open_file(path) as fh:
                data = json.loads(fh.read(64 << 20))
        except (OSError, ValueError, RecursionError) as exc:
            problems.append((path, str(exc)))
            continue
        if not isinstance(data, dict) or not isinstance(data.get("name"), str):
            problems.append((path, "not a conda package record"))
            continue
        packages.append(
            CondaPackage(
                name=data["name"],
                version=str(data.get("version", "")),
                build=str(data.get("build", "")),
                channel=str(data["channel"]) if data.get("channel") else None,
                path=path,
            )
        )
    return packages, problems
