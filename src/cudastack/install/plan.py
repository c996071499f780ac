"""What an install would change, read from the installer's machine-readable dry run, and which of
those changes touch protected distributions. Nothing here changes the environment."""

from __future__ import annotations

import json
import os
import shlex
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cudastack.elf.cache import ElfCache
from cudastack.env.inventory import Inventory
from cudastack.errors import CudastackError, UsageError
from cudastack.snapshot import Change, abi_relevant, version_change
from cudastack.target import Target

PROTECTED_NAMES = ("torch", "torchvision", "torchaudio", "triton")
PROTECTED_PREFIXES = ("nvidia-",)
LINKS_TO_PROTECT = ("libtorch", "libc10", "libcudart.so", "libcuda.so", "libcublas", "libnccl.so", "libnvrtc.so")
"""A distribution whose native files need one of these is built against torch/CUDA: protected."""


class InstallerError(CudastackError, RuntimeError):
    """The installer could not produce a plan (resolution failed, no pip in the target)."""

    exit_code = 2  # the request does not resolve as given; nothing was changed


class InstallerStoppedError(CudastackError, RuntimeError):
    """The installer's dry run was stopped (interrupted, or timed out) before it gave a plan."""

    exit_code = 3  # like plan's PlanError: the plan could not be made; nothing was changed


DRY_RUN_TIMEOUT = 1800
"""Seconds the installer's dry run may take (a stalled index): then it is stopped, with its group."""


@dataclass(slots=True)
class Plan:
    command: list[str]
    """The dry run that produced the plan."""
    install: list[str]
    """The real install: the same installer and arguments."""
    changes: list[Change]
    protected: dict[str, str]
    refused: list[Change] = field(default_factory=list)
    strategy: list[str] = field(default_factory=list)
    builds_from_source: list[str] = field(default_factory=list)
    resolved: list[Resolved] = field(default_factory=list)
    """What the dry run resolved: exactly this is installed (:func:`exact_install`)."""
    installer: str = "pip"
    args: list[str] = field(default_factory=list)
    base: list[str] = field(default_factory=list)


def protected_distributions(inventory: Inventory, extra: tuple[str, ...] = ()) -> dict[str, str]:
    """Protected distribution keys, each with why."""
    out: dict[str, str] = {}
    cache = ElfCache()
    for key, dist in inventory.dists.items():
        if key in PROTECTED_NAMES or key in extra:
            out[key] = "protected by name" if key in PROTECTED_NAMES else "protected on request (--protect)"
            continue
        if key.startswith(PROTECTED_PREFIXES):
            out[key] = "a CUDA library wheel (nvidia-*)"
            continue
        for path in dist.native_files():
            if ".so" not in os.path.basename(path) or not os.path.exists(path):
                continue
            elf = cache.headers(path)
            if isinstance(elf, str):
                continue
            hit = next((n for n in elf.needed if n.startswith(LINKS_TO_PROTECT)), None)
            if hit:
                out[key] = f"{os.path.relpath(path, dist.site_dir)} links {hit}"
                break
    return out


def uv_binary() -> str:
    """The ``uv`` executable of the ``uv`` package (cudastack's ``[install]`` extra), else PATH's."""
    try:
        from uv import find_uv_bin  # type: ignore[import-not-found,unused-ignore]

        return str(find_uv_bin())
    except (ImportError, FileNotFoundError):
        found = shutil.which("uv")
        if found:
            return found
    raise UsageError("--installer uv needs uv: pip install 'cudastack[install]' (or put uv on PATH)")


class UnmodelledOptionError(CudastackError, ValueError):
    """An installer option that sends the install somewhere cudastack does not back up or check."""

    exit_code = 4  # refused: nothing was changed


UNMODELLED = {
    "pip": ("--user", "--target", "-t", "--prefix", "--root"),
    "uv": ("--user", "--target", "-t", "--prefix", "--root", "--system", "--break-system-packages"),
}
"""Options that install outside the target's install scheme (or into another interpreter's)."""
UNMODELLED_ENV = {
    "pip": ("PIP_USER", "PIP_TARGET", "PIP_PREFIX", "PIP_ROOT"),
    "uv": ("UV_SYSTEM_PYTHON", "UV_BREAK_SYSTEM_PACKAGES", "UV_TARGET", "UV_PREFIX"),
}


def refuse_unmodelled(args: list[str], installer: str, environ: dict[str, str] | None = None) -> None:
    """Refuse (exit 4) what would install outside the environment cudastack checks and backs up."""
    env = os.environ if environ is None else environ
    found = []
    for a in args:
        if a == "--":
            break
        for opt in UNMODELLED[installer]:
            short = len(opt) == 2
            if a == opt or a.startswith(opt + "=") or (short and a.startswith(opt) and not a.startswith("--")):
                found.append(a)
    found += [
        f"${v}={env[v]}"
        for v in UNMODELLED_ENV[installer]
        if env.get(v, "").lower() not in ("", "0", "false", "no", "off")
    ]
    if found:
        raise UnmodelledOptionError(
            f"cudastack install does not model {', '.join(found)}: the install would go outside the environment "
            "it checks and backs up, so it could be neither judged nor rolled back",
            hint="install into the environment of --python without it, or run the installer yourself (unguarded)",
        )


VALUE_OPTIONS = frozenset(
    [
        "-c",
        "--constraint",
        "-i",
        "--index-url",
        "--extra-index-url",
        "-f",
        "--find-links",
        "--platform",
        "--python-version",
        "--implementation",
        "--abi",
        "--src",
        "--upgrade-strategy",
        "-C",
        "--config-settings",
        "--global-option",
        "--build-option",
        "--install-option",
        "--no-binary",
        "--only-binary",
        "--progress-bar",
        "--root-user-action",
        "--report",
        "--python",
        "--log",
        "--log-file",
        "--proxy",
        "--retries",
        "--timeout",
        "--exists-action",
        "--trusted-host",
        "--cert",
        "--client-cert",
        "--cache-dir",
        "--keyring-provider",
        "--use-feature",
        "--use-deprecated",
        "--index",
        "--default-index",
        "--index-strategy",
        "--link-mode",
        "--resolution",
        "--prerelease",
        "--exclude-newer",
        "--reinstall-package",
        "--upgrade-package",
        "-P",
        "--refresh-package",
        "--config-file",
        "--torch-backend",
        "--python-platform",
        "--overrides",
        "--build-constraints",
        "-b",
        "--color",
        "--directory",
        "--project",
        "--extra",
        "--group",
    ]
)
"""Installer options (pip's and uv's) that take a value as the next argument."""


def split_args(args: list[str]) -> tuple[list[str], list[str]]:
    """(options, requirements) of an installer's arguments: positionals and ``-r``/``-e`` values
    are requirements."""
    options: list[str] = []
    reqs: list[str] = []
    it = iter(args)
    for a in it:
        if a in ("-r", "--requirement", "-e", "--editable"):
            reqs += [a, next(it, "")]
        elif a.startswith(("--requirement=", "--editable=")) or (a[:2] in ("-r", "-e") and len(a) > 2 and a[1] != "-"):
            reqs.append(a)
        elif a in VALUE_OPTIONS:
            options += [a, next(it, "")]
        elif a.startswith("-"):
            options.append(a)
        else:
            reqs.append(a)
    return options, reqs


def exact_install(plan: Plan, pins_file: Path) -> list[str]:
    """The real install: exactly the resolved plan, nothing resolved again. Every distribution
    pinned (``==version``, or the URL the dry run chose), ``--no-deps``, and, when pip gave a digest
    for each, pip's hash-checking mode, so the installed archives are the ones that were checked.
    The user's options (index, find-links, proxy ...) are kept; their requirements are replaced by
    the pins."""
    options, _reqs = split_args(plan.args)
    hashed = plan.installer == "pip" and bool(plan.resolved) and all(
        r.sha256 and not r.pin.startswith("-e ") for r in plan.resolved
    )  # fmt: skip
    lines = [r.pin + (f" --hash=sha256:{r.sha256}" if hashed else "") for r in plan.resolved]
    pins_file.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return [*plan.base, *options, "--no-deps", "-r", str(pins_file)]


def installer_command(target: Target, installer: str) -> list[str]:
    """The install command both the dry run and the real install use (same installer, same index
    configuration: uv does not read pip.conf, so the two installers may resolve differently)."""
    if target.python is None:
        raise UsageError("install needs an interpreter: pass --python")
    if installer == "uv":
        return [uv_binary(), "pip", "install", "--python", target.python]
    return [target.python, "-m", "pip", "install"]


@dataclass(frozen=True, slots=True)
class Resolved:
    """One distribution the installer would install."""

    name: str
    version: str
    requested: bool = False
    from_source: bool = False
    replaces: str | None = None
    """The installed version it replaces, when the installer says (uv does)."""
    pin: str = ""
    """The requirement that installs exactly this: ``name==version``, ``name @ url`` for a direct
    URL, ``-e url`` for an editable checkout."""
    sha256: str | None = None
    """The archive's digest, when the installer's report gives one (pip's ``archive_info``)."""


def resolve(target: Target, args: list[str], installer: str = "pip") -> tuple[list[str], list[Resolved], list[str]]:
    """The installer's plan from its machine-readable dry run, never its text: pip's
    ``--dry-run --report -`` JSON, uv's ``--dry-run --output-format json``. Returns the dry-run
    command, what it installs, and what it removes without replacing."""
    base = installer_command(target, installer)
    if installer == "uv":  # not --quiet: the sources of direct references are on stderr only
        cmd = [*base, "--dry-run", "--output-format", "json", *args]
    else:
        cmd = [*base, "--dry-run", "--quiet", "--report", "-", *args]
    from cudastack.install.run import run_supervised

    # a build backend the dry run starts dies with cudastack too
    # the target's own pip runs: without this it compiles itself into the environment (pip/__pycache__),
    # so even a dry run changed the files cudastack promises not to touch
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    rc, stdout, stderr, interrupted = run_supervised(cmd, capture=True, timeout=DRY_RUN_TIMEOUT, env=env)
    if interrupted:  # not the request's fault: the installer never answered (a stalled index) or ^C
        raise InstallerStoppedError(
            f"the installer's dry run was stopped before it resolved {' '.join(args)} (interrupted, or still "
            f"running after {DRY_RUN_TIMEOUT} s): {shlex.join(cmd)}",
            hint="nothing was changed; check that the index answers, then run again",
        )
    if rc != 0:
        raise InstallerError(
            f"the installer could not resolve {' '.join(args)}: {stderr.strip()[-800:]}",
            hint="nothing was changed",
        )
    try:
        report = json.loads(stdout)
    except ValueError as exc:
        raise InstallerError(f"{installer}'s dry-run output is not JSON: {exc}") from None
    if installer == "uv":
        return cmd, *_from_uv(report, _uv_sources(stderr), _editables(args))
    items = report.get("install") if isinstance(report, dict) else None
    if not isinstance(items, list):
        raise InstallerError("pip's report has no 'install' list")
    out = []
    for item in items:
        meta = item.get("metadata") or {}
        info = item.get("download_info") or {}
        source = "dir_info" in info or ("archive_info" in info and not str(info.get("url", "")).endswith(".whl"))
        name, version = str(meta.get("name", "?")), str(meta.get("version", "?"))
        url = str(info.get("url", ""))
        digest = ((info.get("archive_info") or {}).get("hashes") or {}).get("sha256")
        if (info.get("dir_info") or {}).get("editable"):
            pin = f"-e {url}"
        elif info.get("vcs_info"):  # the URL alone: pip 23's `name @ git+file://` is an invalid requirement
            pin = _direct_url(info)
        elif item.get("is_direct"):
            pin = f"{name} @ {_direct_url(info)}"
        else:
            pin = f"{name}=={version}"
        out.append(Resolved(name, version, bool(item.get("requested")), source, pin=pin,
                            sha256=digest if isinstance(digest, str) else None))  # fmt: skip
    return cmd, out, []


def _direct_url(info: dict[str, Any]) -> str:
    """A PEP 610 ``download_info`` as a requirement URL pip installs again: a VCS source as
    ``git+<url>@<commit>`` (the report's ``url`` alone names no VCS), with its subdirectory."""
    url = str(info.get("url", ""))
    vcs = info.get("vcs_info") or {}
    if vcs.get("vcs") and vcs.get("commit_id"):
        url = f"{vcs['vcs']}+{url}@{vcs['commit_id']}"
    sub = info.get("subdirectory")
    return f"{url}#subdirectory={sub}" if sub else url


def _uv_sources(stderr: str) -> dict[str, str]:
    """The source of each direct reference uv would install (a VCS URL pinned to its commit, a
    path), by canonical name, from its dry run's change lines on stderr (`` + name @ url``): its
    JSON (schema "preview", uv 0.13) gives such an entry neither a version nor a source."""
    import re

    from packaging.utils import canonicalize_name

    out: dict[str, str] = {}
    for line in stderr.splitlines():
        # `` + name @ url`` (not built yet) or `` + name==version (from url)`` (known once built)
        m = re.fullmatch(r" \+ ([A-Za-z0-9][A-Za-z0-9._-]*)(?: @ (\S+)|==\S+ \(from (\S+)\))", line.rstrip())
        if m:
            out[str(canonicalize_name(m[1]))] = m[2] or m[3]
    return out


def _editables(args: list[str], here: str | None = None, depth: int = 0) -> dict[str, str]:
    """The user's editable requirements (``-e PATH``), on the command line and in its ``-r`` files
    (nested ones too), by the ``file://`` URL of their real path: uv prints an editable like any
    path source. The value is the path made absolute (a relative one is relative to the working
    directory, in a requirements file too: uv 0.13 and pip resolve it so), since the pins file
    that repeats it lives elsewhere."""
    from urllib.parse import unquote, urlparse

    out: dict[str, str] = {}
    _options, reqs = split_args(args)
    it = iter(reqs)
    for a in it:
        value = next(it, "") if a in ("-e", "--editable") else a.split("=", 1)[1] if a.startswith("--editable=") \
            else a[2:] if a.startswith("-e") else None  # fmt: skip
        if value:
            path = unquote(urlparse(value).path) if value.startswith("file:") else value
            out[Path(os.path.realpath(path)).as_uri()] = value if "://" in value else os.path.abspath(path)
            continue
        rfile = next(it, "") if a in ("-r", "--requirement") else a.split("=", 1)[1] if a.startswith("--requirement=") \
            else a[2:] if a.startswith("-r") else None  # fmt: skip
        if rfile and depth < 8:  # nested -r files are relative to the file that names them (pip, uv)
            out.update(_editables_in(os.path.join(here, rfile) if here else rfile, depth + 1))
    return out


def _editables_in(path: str, depth: int) -> dict[str, str]:
    """:func:`_editables` of the lines of one requirements file (comments and ``\\`` continuations
    as pip reads them); nothing when it cannot be read (the dry run has said so already)."""
    import shlex

    try:
        with open(path, encoding="utf-8") as fh:
            text = fh.read(16 << 20)
    except (OSError, UnicodeDecodeError):
        return {}
    args: list[str] = []
    for line in text.replace("\\\n", "").splitlines():
        line = line.split(" #", 1)[0].strip()
        if line.startswith(("-e", "--editable", "-r", "--requirement")):
            try:
                args += shlex.split(line)
            except ValueError:
                continue
    return _editables(args, os.path.dirname(path), depth)


def _from_uv(report: object, sources: dict[str, str] | None = None,
             editables: dict[str, str] | None = None) -> tuple[list[Resolved], list[str]]:  # fmt: skip
    """uv 0.9+ ``{"changes": [{"name", "version", "action": "installed"|"uninstalled"}]}``
    (schema "preview": checked field by field). A direct reference has no version there: it is
    pinned to the source uv named (:func:`_uv_sources`), as an editable again when it was one."""
    from packaging.utils import canonicalize_name

    sources = sources or {}
    editables = editables or {}
    changes = report.get("changes") if isinstance(report, dict) else None
    if not isinstance(changes, list):
        raise InstallerError("uv's dry-run JSON has no 'changes' list (a uv release with another schema?)")
    gone: dict[str, str] = {}
    new: list[tuple[str, str, str | None]] = []
    for c in changes:
        if not isinstance(c, dict) or not isinstance(c.get("name"), str):
            raise InstallerError(f"uv's dry-run JSON has an entry cudastack cannot read: {c!r}"[:300])
        source = sources.get(str(canonicalize_name(c["name"]))) if c.get("action") == "installed" else None
        if not isinstance(c.get("version"), str):
            if source is None:
                raise InstallerError(f"uv's dry run names no version and no source for {c['name']!r}: cannot pin it")
            c = {**c, "version": "?"}
        c = {**c, "source": source}  # a direct reference is pinned to its source, whatever its version
        if c.get("action") == "uninstalled":
            gone[c["name"]] = c["version"]
        elif c.get("action") == "installed":
            new.append((c["name"], c["version"], c.get("source")))
        else:
            raise InstallerError(f"uv's dry-run JSON has an unknown action {c.get('action')!r}")
    out = []
    for n, v, src in new:
        pin = f"{n}=={v}" if src is None else f"-e {editables[src]}" if src in editables else f"{n} @ {src}"
        built = src is not None and not src.endswith(".whl")  # a checkout or a source tree: built
        out.append(Resolved(n, v, replaces=gone.pop(n, None), from_source=built, pin=pin))
    return out, sorted(gone)


def plan_install(
    target: Target,
    inventory: Inventory,
    args: list[str],
    *,
    allow: tuple[str, ...] = (),
    protect: tuple[str, ...] = (),
    installer: str = "pip",
) -> Plan:
    from packaging.utils import canonicalize_name

    cmd, items, removed = resolve(target, args, installer)
    changes: list[Change] = []
    from_source: list[str] = []
    for item in items:
        key = canonicalize_name(item.name)
        if item.from_source:
            from_source.append(item.name)
        have = inventory.get(key)
        if have is None:
            changes.append(Change(item.name, "added", None, item.version, abi_relevant(key)))
        elif item.version == "?":  # a direct reference uv names by source only: its version is known once built
            changes.append(Change(item.name, "source", have.version, "?", abi_relevant(key), item.pin))
        elif have.version != item.version:
            kind = version_change(have.version, item.version)
            changes.append(Change(item.name, kind, have.version, item.version, abi_relevant(key)))
        elif item.requested or item.replaces is not None:
            changes.append(Change(item.name, "variant", have.version, item.version, abi_relevant(key), "reinstalled"))
    for name in removed:
        have = inventory.get(canonicalize_name(name))
        changes.append(Change(name, "removed", have.version if have else None, None, abi_relevant(name)))
    changes.sort(key=lambda c: (not c.abi_relevant, c.name.lower()))
    protected = protected_distributions(inventory, protect)
    allowed = {canonicalize_name(a) for a in allow}
    refused = [
        c for c in changes if canonicalize_name(c.name) in protected and canonicalize_name(c.name) not in allowed
    ]
    base = installer_command(target, installer)
    plan = Plan(cmd, [*base, *args], changes, protected, refused, builds_from_source=from_source,
                resolved=items, installer=installer, args=list(args), base=base)  # fmt: skip
    if refused:
        plan.strategy = _strategy(target, inventory, plan, args, installer)
    return plan


def _strategy(target: Target, inventory: Inventory, plan: Plan, args: list[str], installer: str) -> list[str]:
    """Commands that install what was asked while pinning what is protected."""
    from cudastack.target import state_dir

    pins = sorted(f"{inventory.dists[k].name}=={inventory.dists[k].version}" for k in plan.protected)
    path = state_dir(target) / "constraints.txt"
    extra = ["--no-build-isolation"] if plan.builds_from_source else []
    quoted = shlex.join(args)
    again = ["cudastack", "install", *(["--installer", "uv"] if installer == "uv" else [])]
    lines = [
        f"mkdir -p {shlex.quote(str(path.parent))} && printf '%s\\n' {shlex.join(pins)} > {shlex.quote(str(path))}",
        shlex.join([*again, "--python", target.python or "python", "--", "-c", str(path), *extra]) + " " + quoted,
    ]
    if any(not c.abi_relevant and c.kind == "added" for c in plan.changes):
        lines.append(f"# or, for a kernel wheel whose pins are too strict: cudastack install -- --no-deps {quoted}")
    return lines
