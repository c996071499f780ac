"""What is judged: one :class:`Target`, detected from the host or declared on the command line.

Every layer reads the target, never the host directly, so a CPU CI runner can judge an
environment for a GPU fleet. Later layers add GPUs, the driver and the process environment.
"""

from __future__ import annotations

import os
import platform
import re
from dataclasses import dataclass, field
from pathlib import Path

from cudastack.cuda.host import GpuHost, declared_host, detect_host
from cudastack.env.interpreter import (
    Interpreter,
    current_interpreter,
    find_default_interpreter,
    probe_interpreter,
)
from cudastack.env.pth import PthResult, read_pth_files
from cudastack.errors import TargetError, UsageError
from cudastack.files import read_bytes

_PY_VERSION = re.compile(r"^(\d+)\.(\d+)(?:\.(\d+))?$")


@dataclass(frozen=True, slots=True, kw_only=True)
class Target:
    """The environment under judgement and the machine it is judged for."""

    origin: str
    """How the target was chosen: ``--python``, ``--site-packages``, ``$VIRTUAL_ENV`` ..."""
    interpreter: Interpreter | None
    """``None`` with ``--site-packages`` alone: then interpreter facts below are declared/guessed."""
    site_dirs: tuple[str, ...]
    """Where distributions are looked up, in ``sys.path`` order (``.pth`` additions included)."""
    python_version: str | None
    python_version_source: str
    extension_suffixes: tuple[str, ...]
    extension_suffixes_source: str
    markers: dict[str, str] = field(hash=False)
    platform: str
    glibc: str | None
    """glibc version of the target machine, e.g. ``2.36`` (``CUDASTACK_GLIBC_VERSION`` overrides)."""
    pth: tuple[PthResult, ...] = ()
    extras: dict[str, frozenset[str]] = field(default_factory=dict, hash=False)
    """Extras the user says were requested (``sglang[all]``): installed metadata does not record them."""
    environ: dict[str, str] = field(default_factory=dict, hash=False)
    """The process environment the target runs with (defaults to this shell's)."""
    gpu: GpuHost = field(default_factory=GpuHost, hash=False)
    """The GPUs and driver judged against: this machine's, or declared (``--gpu``/``--driver``)."""
    deep: bool = False
    """Read device code outside ``.nv_fatbin`` too (``--deep``)."""

    @property
    def python(self) -> str | None:
        """Interpreter path for fix commands, or ``None`` for a bare site-packages target."""
        return self.interpreter.executable if self.interpreter else None

    @property
    def prefix(self) -> str:
        """The environment's prefix (the site dir itself for a bare directory)."""
        if self.interpreter is not None:
            return self.interpreter.prefix
        if not self.site_dirs:
            return ""
        site = Path(self.site_dirs[0])
        # <prefix>/lib/pythonX.Y/site-packages: the layout of venvs and conda environments
        if site.name == "site-packages" and site.parent.name.startswith("python") and site.parent.parent.name == "lib":
            return str(site.parent.parent.parent)
        return str(site)


def detect_glibc(environ: dict[str, str], interpreter: Interpreter | None) -> str | None:
    """glibc version: ``CUDASTACK_GLIBC_VERSION``, else the interpreter's, else this process's."""
    override = environ.get("CUDASTACK_GLIBC_VERSION")
    if override:
        return override
    text = interpreter.libc if interpreter else ""
    if not text:
        try:
            text = os.confstr("CS_GNU_LIBC_VERSION") or ""
        except (AttributeError, ValueError, OSError):
            text = ""
    m = re.search(r"glibc\s+(\d+\.\d+)", text)
    return m.group(1) if m else None


def _suffixes_for(version: str, machine: str) -> tuple[str, ...]:
    """CPython's ``EXTENSION_SUFFIXES`` on Linux for a version, as CPython builds them."""
    major, minor = version.split(".")[:2]
    return (f".cpython-{major}{minor}-{machine}-linux-gnu.so", ".abi3.so", ".so")


def _markers_for(version: str, machine: str) -> dict[str, str]:
    full = version if version.count(".") == 2 else version + ".0"
    return {
        "implementation_name": "cpython",
        "implementation_version": full,
        "os_name": "posix",
        "platform_machine": machine,
        "platform_release": platform.release(),
        "platform_system": "Linux",
        "platform_version": "",
        "python_full_version": full,
        "platform_python_implementation": "CPython",
        "python_version": ".".join(version.split(".")[:2]),
        "sys_platform": "linux",
    }


def _version_from_site_dir(site_dir: Path) -> tuple[str | None, str]:
    """Find the Python version of a bare site-packages from ``pyvenv.cfg`` or its path."""
    for parent in list(site_dir.parents)[:4]:
        cfg = parent / "pyvenv.cfg"
        if cfg.is_file():
            try:
                text = read_bytes(str(cfg), 1 << 20).data.decode("utf-8", "replace")
            except OSError:
                break
            m = re.search(r"^\s*version(?:_info)?\s*=\s*(\d+\.\d+(?:\.\d+)?)", text, re.M)
            if m:
                return m.group(1), f"read from {cfg}"
    m = re.search(r"python(\d+\.\d+)", str(site_dir))
    if m:
        return m.group(1), f"taken from the directory name {site_dir}"
    return None, "unknown: pass --python-version"


def _read_pyvenv_cfg(prefix: str) -> dict[str, str]:
    cfg = Path(prefix) / "pyvenv.cfg"
    out: dict[str, str] = {}
    try:
        for line in read_bytes(str(cfg), 1 << 20).data.decode("utf-8", "replace").splitlines():
            key, sep, value = line.partition("=")
            if sep:
                out[key.strip().lower()] = value.strip()
    except OSError:
        pass
    return out


def _expand_site_dirs(base: list[str]) -> tuple[tuple[str, ...], tuple[PthResult, ...]]:
    """Add what ``.pth`` files append to ``sys.path``, statically, keeping order."""
    dirs: list[str] = []
    results: list[PthResult] = []
    for d in base:
        if d in dirs:
            continue
        dirs.append(d)
        if os.path.isdir(d):
            res = read_pth_files(d)
            results.append(res)
            dirs.extend(p for p in res.paths if p not in dirs)
    return tuple(dirs), tuple(results)


def build_target(
    *,
    python: str | None = None,
    site_packages: str | None = None,
    python_version: str | None = None,
    extras: dict[str, frozenset[str]] | None = None,
    environ: dict[str, str] | None = None,
    gpus: list[str] | None = None,
    driver: str | None = None,
    deep: bool = False,
    detect_gpus: bool = True,
) -> Target:
    """Resolve the command-line description of a target into a :class:`Target`."""
    env = dict(os.environ if environ is None else environ)
    gpu = gpu_host(gpus or [], driver, env) if detect_gpus else GpuHost(gpus_source="not detected")
    if python_version is not None and not _PY_VERSION.match(python_version):
        raise UsageError(f"--python-version {python_version!r} is not of the form 3.12 or 3.12.1")
    machine = platform.machine() or "x86_64"
    plat = f"{platform.system().lower()}-{machine}"

    if site_packages is not None:
        sp = Path(site_packages)
        if not sp.exists():
            raise TargetError(f"--site-packages {site_packages}: no such directory")
        if not sp.is_dir():
            raise TargetError(f"--site-packages {site_packages} is not a directory")
        interp: Interpreter | None = probe_interpreter(python) if python else None
        if interp is not None:
            version: str | None = interp.version
            vsource = f"from {interp.executable}"
        elif python_version:
            version, vsource = python_version, "given with --python-version"
        else:
            version, vsource = _version_from_site_dir(sp.resolve())
        if interp is not None:
            suffixes, ssource = interp.extension_suffixes, f"from {interp.executable}"
            markers = dict(interp.markers)
        elif version:
            suffixes = _suffixes_for(version, machine)
            ssource = f"assumed for CPython {version} on {machine} (no interpreter given)"
            markers = _markers_for(version, machine)
        else:
            suffixes, ssource, markers = (), "unknown: no interpreter and no Python version", {}
        site_dirs, pth = _expand_site_dirs([str(sp.absolute())])
        return Target(
            origin="--site-packages",
            interpreter=interp,
            site_dirs=site_dirs,
            python_version=version,
            python_version_source=vsource,
            extension_suffixes=suffixes,
            extension_suffixes_source=ssource,
            markers=markers,
            platform=plat,
            glibc=detect_glibc(env, interp),
            pth=pth,
            extras=dict(extras or {}),
            environ=env,
            gpu=gpu,
            deep=deep,
        )

    if python is not None:
        interp, origin = probe_interpreter(python), "--python"
    else:
        exe, origin = find_default_interpreter(env)
        interp = current_interpreter() if origin.startswith("the interpreter") else probe_interpreter(exe)
    base = list(interp.site_dirs)
    cfg = _read_pyvenv_cfg(interp.prefix)
    if interp.is_venv and cfg.get("include-system-site-packages", "false").lower() == "true":
        # site.py appends the base installation's site directories after the venv's, as its
        # getsitepackages gives them (Debian's: /usr/local/lib/python3.X/dist-packages,
        # /usr/lib/python3/dist-packages); an old probe answer without them: the upstream layout
        major_minor = ".".join(interp.version.split(".")[:2])
        fallback = os.path.join(interp.base_prefix, "lib", f"python{major_minor}", "site-packages")
        base.extend(d for d in interp.base_site_dirs or (fallback,) if d not in base)
    site_dirs, pth = _expand_site_dirs(base)
    if python_version and not interp.version.startswith(python_version):
        raise UsageError(f"--python-version {python_version} contradicts {interp.executable} (Python {interp.version})")
    return Target(
        origin=origin,
        interpreter=interp,
        site_dirs=site_dirs,
        python_version=interp.version,
        python_version_source=f"from {interp.executable}",
        extension_suffixes=interp.extension_suffixes,
        extension_suffixes_source=f"from {interp.executable}",
        markers=dict(interp.markers),
        platform=plat,
        glibc=detect_glibc(env, interp),
        pth=pth,
        extras=dict(extras or {}),
        environ=env,
        gpu=gpu,
        deep=deep,
    )


def gpu_host(gpus: list[str], driver: str | None, environ: dict[str, str]) -> GpuHost:
    """Declared GPUs replace detection; a declared driver alone keeps the detected GPUs."""
    if gpus:
        return declared_host(gpus, driver)
    host = detect_host(environ)
    if driver is None:
        return host
    declared = declared_host([], driver)
    return GpuHost(
        gpus=host.gpus,
        gpus_source=host.gpus_source,
        driver=declared.driver,
        driver_source=declared.driver_source,
        declared=True,
        notes=host.notes,
    )


def state_root(environ: dict[str, str] | None = None) -> Path:
    """``$CUDASTACK_STATE_DIR``, else ``$XDG_STATE_HOME/cudastack`` (default ``~/.local/state``)."""
    env = os.environ if environ is None else environ
    root = env.get("CUDASTACK_STATE_DIR")
    if root:
        return Path(root)
    xdg = env.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return Path(xdg) / "cudastack"


def state_dir(target: Target, environ: dict[str, str] | None = None) -> Path:
    """Where cudastack keeps state for one target environment (caches, snapshots, locks).

    ``$CUDASTACK_STATE_DIR`` if set, else ``$XDG_STATE_HOME/cudastack`` (default
    ``~/.local/state/cudastack``), then ``envs/<name>-<hash of the prefix>``. Never inside the
    inspected environment or the project checkout. Nothing is created here.
    """
    import hashlib

    env = os.environ if environ is None else environ
    root = env.get("CUDASTACK_STATE_DIR")
    if root:
        base = Path(root)
    else:
        xdg = env.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
        base = Path(xdg) / "cudastack"
    prefix = os.path.realpath(target.prefix or ".")
    digest = hashlib.sha256(prefix.encode()).hexdigest()[:16]
    name = re.sub(r"[^A-Za-z0-9_.-]", "_", os.path.basename(prefix) or "root")
    return base / "envs" / f"{name}-{digest}"
