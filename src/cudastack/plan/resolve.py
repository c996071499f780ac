"""What the installer would install, from its machine-readable dry run (pip ``--report``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass

from cudastack.errors import CudastackError
from cudastack.target import Target


class PlanError(CudastackError, RuntimeError):
    """Resolution, download or extraction failed: the plan could not be made (exit 3)."""

    exit_code = 3


@dataclass(frozen=True, slots=True, kw_only=True)
class Planned:
    """One distribution the installer would install."""

    name: str
    version: str
    url: str
    """Where the installer would take the archive from (``download_info.url``)."""
    sha256: str | None
    """The archive's digest as the index gave it, or ``None`` (then it is hashed after download)."""
    requested: bool = False
    is_wheel: bool = True


@dataclass(frozen=True, slots=True, kw_only=True)
class Resolution:
    installer: str
    """Which installer resolved (``pip``), and how it merges indexes."""
    command: tuple[str, ...]
    items: tuple[Planned, ...]


def pip_base(target: Target) -> list[str]:
    """The target's own pip when it has one, else this interpreter's pip aimed at it (``--python``)."""
    python = target.python or sys.executable
    if any(os.path.isdir(os.path.join(d, "pip")) for d in target.site_dirs):
        return [python, "-m", "pip"]
    return [sys.executable, "-m", "pip", "--python", python]


def run_pip(cmd: list[str], *, timeout: float, what: str, env: dict[str, str] | None = None) -> str:
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False, env=env)
    except subprocess.TimeoutExpired:
        raise PlanError(f"{what} timed out after {timeout:.0f} s: {' '.join(cmd)}") from None
    except OSError as exc:
        raise PlanError(f"{what} could not start: {' '.join(cmd)}: {exc.strerror or exc}") from None
    if proc.returncode != 0:
        raise PlanError(
            f"{what} failed (exit {proc.returncode}): {' '.join(cmd)}: {proc.stderr.strip()[-800:]}",
            hint="nothing was changed",
        )
    return proc.stdout


def resolve(target: Target, args: list[str], *, timeout: float = 1800) -> Resolution:
    """``pip install --dry-run --report -`` with the user's arguments, for the target's interpreter
    (pip merges every index it is given and takes the highest version, local label included)."""
    return start_resolve(target, args).result(timeout=timeout)


class PendingResolution:
    """A dry run started in the background: today's doctor runs meanwhile (no thread: the
    doctor may fork)."""

    def __init__(self, cmd: list[str]) -> None:
        self.cmd = cmd
        try:
            self.proc: subprocess.Popen[str] | None = subprocess.Popen(
                cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
            )
            self.error: str | None = None
        except OSError as exc:
            self.proc, self.error = None, f"resolution could not start: {' '.join(cmd)}: {exc.strerror or exc}"

    def result(self, *, timeout: float = 1800) -> Resolution:
        if self.proc is None:
            raise PlanError(self.error or "resolution could not start")
        try:
            out, err = self.proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.communicate()
            raise PlanError(f"resolution timed out after {timeout:.0f} s: {' '.join(self.cmd)}") from None
        if self.proc.returncode != 0:
            raise PlanError(
                f"resolution failed (exit {self.proc.returncode}): {' '.join(self.cmd)}: {err.strip()[-800:]}",
                hint="nothing was changed",
            )
        try:
            report = json.loads(out)
        except ValueError as exc:
            raise PlanError(f"pip's dry-run report is not JSON: {exc}") from None
        return Resolution(installer="pip", command=tuple(self.cmd), items=parse_pip_report(report))


def start_resolve(target: Target, args: list[str]) -> PendingResolution:
    return PendingResolution([*pip_base(target), "install", "--dry-run", "--quiet", "--report", "-", *args])


def parse_pip_report(report: object) -> tuple[Planned, ...]:
    """The ``install`` list of pip's installation report (format version 1)."""
    items = report.get("install") if isinstance(report, dict) else None
    if not isinstance(items, list):
        raise PlanError("pip's report has no 'install' list")
    out = []
    for item in items:
        meta = item.get("metadata") or {}
        info = item.get("download_info") or {}
        archive = info.get("archive_info") or {}
        digest = (archive.get("hashes") or {}).get("sha256")
        if digest is None and str(archive.get("hash", "")).startswith("sha256="):
            digest = str(archive["hash"]).partition("=")[2]
        url = str(info.get("url", ""))
        out.append(
            Planned(
                name=str(meta.get("name", "?")),
                version=str(meta.get("version", "?")),
                url=url,
                sha256=digest if isinstance(digest, str) else None,
                requested=bool(item.get("requested")),
                is_wheel="archive_info" in info and url.split("#")[0].endswith(".whl"),
            )
        )
    return tuple(out)
