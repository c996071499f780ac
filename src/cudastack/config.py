"""Configuration: ``cudastack.toml``, else ``[tool.cudastack]`` in the nearest ``pyproject.toml``.

Looked up from the working directory upwards; the first file found wins. Keys::

    select = ["PKG", "ENV001"]          # codes or prefixes; default: all
    fail-on = "warning"                 # info | warning | error
    extras = { sglang = ["all"] }       # extras you installed with (metadata does not record them)
    [ignore]                            # every ignore carries its reason
    PKG010 = "CUDA-12 wheels kept for cupy-cuda12x"
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from cudastack.errors import UsageError
from cudastack.findings import Severity


@dataclass(frozen=True, slots=True, kw_only=True)
class Config:
    source: str | None = None
    select: tuple[str, ...] = ()
    ignore: dict[str, str] = field(default_factory=dict)
    fail_on: Severity | None = None
    extras: dict[str, frozenset[str]] = field(default_factory=dict)


def find_config_file(start: Path) -> tuple[Path, bool] | None:
    """``(path, is_pyproject)`` of the nearest config file from ``start`` upwards."""
    for d in (start, *start.parents):
        f = d / "cudastack.toml"
        if f.is_file():
            return f, False
        p = d / "pyproject.toml"
        if p.is_file():
            text = p.read_text(encoding="utf-8", errors="replace")
            if "cudastack" not in text:
                continue  # no [tool.cudastack] in any TOML spelling: not worth parsing (or importing tomllib)
            import tomllib

            try:
                data = tomllib.loads(text)
            except tomllib.TOMLDecodeError:
                continue
            if isinstance(data.get("tool"), dict) and "cudastack" in data["tool"]:
                return p, True
    return None


def parse_config(data: dict[str, object], source: str) -> Config:
    """Validate a config table. Pure; raises :class:`UsageError` naming the file and key."""
    known = {"select", "ignore", "fail-on", "extras"}
    unknown = sorted(set(data) - known)
    if unknown:
        raise UsageError(f"{source}: unknown key(s) {', '.join(unknown)} (known: {', '.join(sorted(known))})")
    select = data.get("select", [])
    if not isinstance(select, list) or not all(isinstance(s, str) for s in select):
        raise UsageError(f"{source}: 'select' must be a list of codes or prefixes")
    ignore_raw = data.get("ignore", {})
    if not isinstance(ignore_raw, dict):
        raise UsageError(f"{source}: 'ignore' must be a table of CODE = \"reason\"")
    ignore: dict[str, str] = {}
    for code, reason in ignore_raw.items():
        if not isinstance(reason, str) or not reason.strip():
            raise UsageError(f'{source}: ignore {code} needs a reason: {code} = "why this is acceptable"')
        ignore[code.upper()] = reason.strip()
    fail_on = data.get("fail-on")
    try:
        sev = Severity.parse(fail_on) if isinstance(fail_on, str) else None
    except ValueError as exc:
        raise UsageError(f"{source}: fail-on: {exc}") from None
    if fail_on is not None and not isinstance(fail_on, str):
        raise UsageError(f"{source}: fail-on must be one of info, warning, error")
    extras_raw = data.get("extras", {})
    if not isinstance(extras_raw, dict):
        raise UsageError(f"{source}: 'extras' must be a table of dist = [\"extra\", ...]")
    extras: dict[str, frozenset[str]] = {}
    for name, ex in extras_raw.items():
        if not isinstance(ex, list) or not all(isinstance(e, str) for e in ex):
            raise UsageError(f"{source}: extras.{name} must be a list of extra names")
        extras[name] = frozenset(ex)
    return Config(source=source, select=tuple(s.upper() for s in select), ignore=ignore, fail_on=sev, extras=extras)


def load_config(start: Path | None = None, explicit: str | None = None) -> Config:
    """Load the explicit file, else the nearest one; no file → the defaults."""
    if explicit is not None:
        path = Path(explicit)
        is_pyproject = path.name == "pyproject.toml"
    else:
        found = find_config_file(Path(start or os.getcwd()).resolve())
        if found is None:
            return Config()
        path, is_pyproject = found
    import tomllib

    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise UsageError(f"cannot read config {path}: {exc.strerror or exc}") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise UsageError(f"{path} is not valid TOML: {exc}") from None
    if is_pyproject:
        tool = data.get("tool", {})
        data = tool.get("cudastack", {}) if isinstance(tool, dict) else {}
        if not isinstance(data, dict):
            raise UsageError(f"{path}: [tool.cudastack] must be a table")
    return parse_config(data, str(path))
