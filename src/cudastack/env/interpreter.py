"""The target interpreter: found, probed in isolation, never asked to import the environment."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from cudastack.errors import TargetError

_PROBE = Path(__file__).with_name("_probe.py")
_PROBE_TIMEOUT_S = 30


@dataclass(frozen=True, slots=True, kw_only=True)
class Interpreter:
    """What the target interpreter told us about itself (``python -I -S _probe.py``)."""

    executable: str
    """Path of the interpreter as given (not resolved: a venv's ``bin/python`` symlink stays)."""
    sys_executable: str
    """``sys.executable`` as the interpreter reports it (a pyenv shim resolves to the real binary)."""
    version: str
    implementation: str
    cache_tag: str | None
    abiflags: str
    gil_disabled: bool
    prefix: str
    base_prefix: str
    stdlib: str | None
    site_dirs: tuple[str, ...]
    """Site directories before ``.pth`` processing, in ``sys.path`` order."""
    base_site_dirs: tuple[str, ...] = ()
    """The base installation's site directories (``site.getsitepackages([base_prefix])``, those
    that exist): what a venv with ``include-system-site-packages = true`` puts after its own."""
    extension_suffixes: tuple[str, ...]
    builtin_module_names: tuple[str, ...] = ()
    """Modules compiled into the interpreter (``sys.builtin_module_names``): no file to find."""
    frozen_module_names: tuple[str, ...] = ()
    """Modules frozen into the interpreter (3.11+): found without a file too."""
    stdlib_module_names: tuple[str, ...] = ()
    """``sys.stdlib_module_names`` (3.10+): the standard library as documented, installed or not
    (Debian leaves ``tkinter`` and ``distutils`` to separate packages)."""
    ldlibrary: str | None
    libdir: str | None
    enable_shared: bool
    libc: str
    """``os.confstr('CS_GNU_LIBC_VERSION')`` of that interpreter, e.g. ``glibc 2.36``."""
    markers: dict[str, str] = field(hash=False)
    """PEP 508 marker environment (without ``extra``)."""
    install_scheme: dict[str, str] = field(default_factory=dict, hash=False)
    """The sysconfig install paths an installer writes to: purelib, platlib, scripts, data, include."""

    @property
    def is_venv(self) -> bool:
        return os.path.realpath(self.prefix) != os.path.realpath(self.base_prefix)


def _from_probe(executable: str, data: dict[str, object]) -> Interpreter:
    def s(key: str) -> str:
        value = data.get(key)
        return value if isinstance(value, str) else ""

    def opt(key: str) -> str | None:
        value = data.get(key)
        return value if isinstance(value, str) and value else None

    def strs(key: str) -> tuple[str, ...]:
        value = data.get(key)
        return tuple(v for v in value if isinstance(v, str)) if isinstance(value, list) else ()

    markers = data.get("markers")
    scheme = data.get("install_scheme")
    return Interpreter(
        executable=executable,
        sys_executable=s("executable") or executable,
        version=s("version"),
        implementation=s("implementation"),
        cache_tag=opt("cache_tag"),
        abiflags=s("abiflags"),
        gil_disabled=bool(data.get("gil_disabled")),
        prefix=s("prefix"),
        base_prefix=s("base_prefix"),
        stdlib=opt("stdlib"),
        site_dirs=strs("site_dirs"),
        base_site_dirs=strs("base_site_dirs"),
        extension_suffixes=strs("extension_suffixes"),
        builtin_module_names=strs("builtin_module_names"),
        frozen_module_names=strs("frozen_module_names"),
        stdlib_module_names=strs("stdlib_module_names"),
        ldlibrary=opt("ldlibrary"),
        libdir=opt("libdir"),
        enable_shared=bool(data.get("enable_shared")),
        libc=s("libc"),
        markers={str(k): str(v) for k, v in markers.items()} if isinstance(markers, dict) else {},
        install_scheme={str(k): str(v) for k, v in scheme.items()} if isinstance(scheme, dict) else {},
    )


def current_interpreter() -> Interpreter:
    """The interpreter cudastack runs in, probed in-process (no subprocess needed)."""
    from cudastack.env import _probe

    return _from_probe(sys.executable, _probe.probe())


def _resolve(executable: str | os.PathLike[str]) -> str:
    exe = os.fspath(executable)
    if os.sep not in exe:
        found = shutil.which(exe)
        if found is None:
            raise TargetError(f"interpreter {exe!r} not found on PATH")
        exe = found
    if not os.path.exists(exe):
        raise TargetError(f"interpreter {exe} does not exist")
    if os.path.isdir(exe):
        raise TargetError(
            f"{exe} is a directory, not an interpreter",
            hint=f"pass the interpreter ({exe}/bin/python) or use --site-packages for a bare directory",
        )
    return exe


_STARTED: dict[str, subprocess.Popen[bytes]] = {}
"""Probes started ahead of need by :func:`start_probe`, by resolved executable."""


def _spawn(exe: str) -> subprocess.Popen[bytes]:
    try:
        return subprocess.Popen(
            [exe, "-I", "-S", str(_PROBE)], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
    except OSError as exc:
        raise TargetError(f"cannot run interpreter {exe}: {exc.strerror or exc}") from exc


def start_probe(executable: str | os.PathLike[str]) -> None:
    """Start probing ``executable`` now, to be collected by :func:`probe_interpreter`.

    The target interpreter needs ~30 ms to start; started before cudastack imports its rules, that
    time overlaps them (BENCHMARKS.md). Problems are left for :func:`probe_interpreter` to report.
    """
    try:
        exe = _resolve(executable)
        if os.path.abspath(exe) != os.path.abspath(sys.executable) and exe not in _STARTED:
            _STARTED[exe] = _spawn(exe)
    except TargetError:
        pass


def _run_probe(exe: str) -> tuple[int, bytes, bytes]:
    proc = _STARTED.pop(exe, None) or _spawn(exe)
    try:
        stdout, stderr = proc.communicate(timeout=_PROBE_TIMEOUT_S)
    except subprocess.TimeoutExpired as exc:
        proc.kill()
        proc.wait()
        raise TargetError(f"interpreter {exe} did not answer within {_PROBE_TIMEOUT_S} s") from exc
    from cudastack import result_cache

    result_cache.note_probe(exe, (proc.returncode, stdout))
    return proc.returncode, stdout, stderr


def probe_output(exe: str) -> tuple[int, bytes] | None:
    """The exit status and output of the probe of ``exe`` (started by :func:`start_probe` or
    now), as the result cache compares them; None when it cannot run or answer."""
    try:
        returncode, stdout, _ = _run_probe(exe)
    except TargetError:
        return None
    return returncode, stdout


def probe_interpreter(executable: str | os.PathLike[str]) -> Interpreter:
    """Run ``executable -I -S _probe.py`` and parse its answer.

    ``-I`` ignores ``PYTHON*`` variables and the user site; ``-S`` skips ``site``, so no ``.pth``
    file of the target runs. The probe itself is cudastack's own stdlib-only script.
    """
    exe = _resolve(executable)
    if os.path.abspath(exe) == os.path.abspath(sys.executable):
        return current_interpreter()
    returncode, stdout, stderr_b = _run_probe(exe)
    if returncode != 0:
        stderr = stderr_b.decode(errors="replace").strip().splitlines()
        raise TargetError(
            f"probing interpreter {exe} failed (`{exe} -I -S {_PROBE.name}` exited {returncode})",
            hint=stderr[-1] if stderr else None,
        )
    try:
        data = json.loads(stdout)
    except ValueError as exc:
        raise TargetError(f"interpreter {exe} gave an unreadable answer to the probe") from exc
    if not isinstance(data, dict):
        raise TargetError(f"interpreter {exe} gave an unreadable answer to the probe")
    return _from_probe(exe, data)


def is_tool_environment(prefix: str) -> bool:
    """True when ``prefix`` is a pipx or ``uv tool`` environment (cudastack's own, not a target)."""
    p = Path(prefix)
    return (p / "uv-receipt.toml").is_file() or (p / "pipx_metadata.json").is_file()


def find_active_environment(environ: dict[str, str]) -> tuple[str, str] | None:
    """The interpreter of the activated environment, as uv looks it up: ``$VIRTUAL_ENV``, then
    ``$CONDA_PREFIX``; with how it was found. None when neither names one with ``bin/python``."""
    for var in ("VIRTUAL_ENV", "CONDA_PREFIX"):
        prefix = environ.get(var)
        if prefix:
            exe = os.path.join(prefix, "bin", "python")
            if os.path.exists(exe):
                return exe, f"${var}"
    return None


def find_default_interpreter(environ: dict[str, str]) -> tuple[str, str]:
    """Which interpreter to inspect when none was named, and why (like ``uv pip``).

    From an ordinary environment that is the running interpreter. From cudastack's own tool
    environment (pipx, ``uv tool``) the target is looked up as uv does: ``VIRTUAL_ENV``, then
    ``CONDA_PREFIX``, then ``python3`` on ``PATH``.
    """
    if not is_tool_environment(sys.prefix):
        return sys.executable, "the interpreter running cudastack"
    active = find_active_environment(environ)
    if active is not None:
        return active
    found = shutil.which("python3", path=environ.get("PATH"))
    if found:
        return found, "python3 on PATH"
    raise TargetError(
        "no target environment found",
        hint="cudastack runs from its own tool environment: pass --python PATH or activate a venv",
    )
