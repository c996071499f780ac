"""How the target machine's dynamic loader searches: its default directories, hwcap
subdirectories, ld.so.cache, preloads. Detected once from the host (with overrides) or declared.
"""

from __future__ import annotations

import glob
import os
import re
import subprocess
from dataclasses import dataclass, field

from cudastack.loader.ldcache import LdCache, read_ld_cache

# glibc's SYSTEM_DIRS for Debian/Ubuntu x86-64 multiarch builds, as `ld.so --help` prints them.
DEFAULT_DIRS = ("/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib", "/usr/lib")
# glibc >= 2.33 probes dir/glibc-hwcaps/<level>/ first (elf/dl-hwcaps.c); glibc < 2.37 then the
# legacy subdirectories (removed in 2.37). Order as LD_DEBUG=libs shows on glibc 2.36 x86-64.
_LD_SO_CANDIDATES = ("/lib64/ld-linux-x86-64.so.2", "/lib/ld-linux-aarch64.so.1", "/lib/ld-linux.so.2")


@dataclass(frozen=True, slots=True, kw_only=True)
class LoaderConfig:
    """Everything about the target's ld.so that the search depends on."""

    default_dirs: tuple[str, ...] = DEFAULT_DIRS
    subdirs: tuple[str, ...] = ()
    """Subdirectories probed under every search directory before it, in order."""
    cache: LdCache = field(default_factory=lambda: LdCache(path="(none)"))
    preload: tuple[str, ...] = ()
    """``/etc/ld.so.preload`` entries (``LD_PRELOAD`` comes from the process environment)."""
    source: str = "declared"
    lib: str = "lib"
    """``$LIB`` expansion (:func:`lib_token`: ``lib64`` on Fedora, ``lib/x86_64-linux-gnu`` on Debian)."""
    platform: str = "x86_64"
    """``$PLATFORM`` expansion (AT_PLATFORM)."""


def parse_ld_so_help(text: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(default dirs, subdirectories searched) from ``ld.so --help`` output. Pure."""
    dirs = tuple(m.group(1) for m in re.finditer(r"^\s+(/\S+) \(system search path\)", text, re.M))
    hw = [f"glibc-hwcaps/{name}" for name, _ in _help_section(text, "Subdirectories of glibc-hwcaps")]
    legacy = _help_section(text, "Legacy HWCAP subdirectories")
    return dirs or DEFAULT_DIRS, tuple(hw) + legacy_subdirs(legacy)


def parse_ld_so_platform(text: str) -> str | None:
    """``$PLATFORM`` as ld.so expands it, from ``ld.so --help`` (the legacy HWCAP line marked
    ``AT_PLATFORM``) or ``ld.so --list-diagnostics`` (``dl_platform="…"``); None if neither says.
    glibc 2.26–2.36 on x86-64 replaces the kernel's ``x86_64`` with ``haswell`` or ``xeon_phi``
    on CPUs that have those features (seen on Debian 12 with AVX-512: AT_PLATFORM x86_64 in the
    auxiliary vector, ``$ORIGIN/$PLATFORM`` searched as ``$ORIGIN/haswell``). Pure."""
    for name, note in _help_section(text, "Legacy HWCAP subdirectories"):
        if "AT_PLATFORM" in note:
            return name
    m = re.search(r'^dl_platform="([^"]+)"', text, re.M)
    return m.group(1) if m else None


def _help_section(text: str, title: str) -> list[tuple[str, str]]:
    """The searched ``(name, note)`` entries listed under a ``ld.so --help`` section title."""
    out: list[tuple[str, str]] = []
    inside = False
    for line in text.splitlines():
        if line.startswith(title):
            inside = True
        elif inside and line.startswith("  "):
            name, _, note = line.strip().partition(" ")
            if "searched" in note:
                out.append((name, note))
        elif inside and line.strip():
            break
    return out


def legacy_subdirs(entries: list[tuple[str, str]]) -> tuple[str, ...]:
    """The legacy HWCAP subdirectories glibc (≤ 2.36) probes under each search directory, in its
    order: every combination of ``tls``, the platform and the other HWCAP names (in that order),
    the longest first, e.g. ``tls/haswell/avx512_1/x86_64`` … ``x86_64`` (``LD_DEBUG=libs``); a
    platform that is also a HWCAP name gives ``x86_64/x86_64``, and ``tls/x86_64`` and ``x86_64``
    twice each, as ld.so probes them (an x86-64-v4 machine whose AT_PLATFORM is ``x86_64``: the
    model's own de-duplication made its search path differ from ld.so's). Pure."""
    platform = [n for n, note in entries if "AT_PLATFORM" in note][:1]
    rest = [n for n, note in entries if n != "tls" and "AT_PLATFORM" not in note]
    order = ["tls"] * any(n == "tls" for n, _ in entries) + platform + rest
    return tuple(
        "/".join(n for i, n in enumerate(order) if mask & (1 << (len(order) - 1 - i)))
        for mask in range((1 << len(order)) - 1, 0, -1)
    )


def detect_loader(environ: dict[str, str] | None = None) -> LoaderConfig:
    """The host's loader configuration: ``ld.so --help`` (the system's loader, not the target's
    code), ``/etc/ld.so.cache`` and ``/etc/ld.so.preload``. ``CUDASTACK_LD_SO_HELP`` names a file
    holding that help text instead (to judge another machine)."""
    env = os.environ if environ is None else environ
    text = ""
    source = "built-in defaults"
    platform = None
    if env.get("CUDASTACK_LD_SO_HELP"):
        with open(env["CUDASTACK_LD_SO_HELP"], encoding="utf-8", errors="replace") as fh:
            text = fh.read()
        source = env["CUDASTACK_LD_SO_HELP"]
        platform = parse_ld_so_platform(text)
    else:
        ld = next(
            (p for p in (*_LD_SO_CANDIDATES, *sorted(glob.glob("/lib64/ld-linux*.so*"))) if os.path.exists(p)), None
        )
        if ld is not None:
            text = _ld_so_output(ld, "--help")
            source = f"{ld} --help"
            # glibc >= 2.37 has no legacy section; --list-diagnostics (2.33+) still names dl_platform
            platform = parse_ld_so_platform(text) or parse_ld_so_platform(_ld_so_output(ld, "--list-diagnostics"))
    dirs, subdirs = parse_ld_so_help(text) if text else (DEFAULT_DIRS, ())
    preload: list[str] = []
    try:
        with open(env.get("CUDASTACK_LD_SO_PRELOAD", "/etc/ld.so.preload"), encoding="utf-8") as fh:
            for line in fh:
                preload.extend(p for p in re.split(r"[\s:]+", line.split("#")[0]) if p)
    except OSError:
        pass
    cache = read_ld_cache(env.get("CUDASTACK_LD_SO_CACHE", "/etc/ld.so.cache"))
    return LoaderConfig(
        default_dirs=dirs,
        subdirs=subdirs,
        cache=cache,
        preload=tuple(preload),
        source=source,
        lib=lib_token(dirs),
        platform=platform or os.uname().machine,
    )


def _ld_so_output(ld: str, option: str) -> str:
    """What the system's own ld.so prints for an informational option (``--help``,
    ``--list-diagnostics``): no program of the target runs. Empty on failure."""
    try:
        proc = subprocess.run([ld, option], capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return proc.stdout


def lib_token(default_dirs: tuple[str, ...]) -> str:
    """``$LIB``: glibc defines it as the last component of its ``slibdir`` (``lib64`` on Fedora,
    ``lib`` on Arch), the first system search path; Debian and Ubuntu patch it to
    ``lib/<multiarch triplet>`` (seen with ``LD_DEBUG=libs`` on Debian 12's ld.so). Pure."""
    first = default_dirs[0].rstrip("/") if default_dirs else "/lib"
    base = os.path.basename(first)
    return f"lib/{base}" if "-linux-" in base else base or "lib"
