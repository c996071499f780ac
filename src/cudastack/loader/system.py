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
LEGACY_SUBDIRS_X86_64 = ("tls/x86_64/x86_64", "tls/x86_64", "tls", "x86_64/x86_64", "x86_64")
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
    hw = []
    legacy = False
    section = ""
    for line in text.splitlines():
        if line.startswith("Subdirectories of glibc-hwcaps"):
            section = "hwcaps"
            continue
        if line.startswith("Legacy HWCAP subdirectories"):
            section = "legacy"
            continue
        if not line.startswith("  "):
            section = "" if line.strip() else section
            continue
        if section == "hwcaps" and "searched" in line:
            hw.append("glibc-hwcaps/" + line.split()[0])
        elif section == "legacy" and "searched" in line:
            legacy = True
    subdirs = tuple(hw) + (LEGACY_SUBDIRS_X86_64 if legacy else ())
    return dirs or DEFAULT_DIRS, subdirs


def detect_loader(environ: dict[str, str] | None = None) -> LoaderConfig:
    """The host's loader configuration: ``ld.so --help`` (the system's loader, not the target's
    code), ``/etc/ld.so.cache`` and ``/etc/ld.so.preload``. ``CUDASTACK_LD_SO_HELP`` names a file
    holding that help text instead (to judge another machine)."""
    env = os.environ if environ is None else environ
    text = ""
    source = "built-in defaults"
    if env.get("CUDASTACK_LD_SO_HELP"):
        with open(env["CUDASTACK_LD_SO_HELP"], encoding="utf-8", errors="replace") as fh:
            text = fh.read()
        source = env["CUDASTACK_LD_SO_HELP"]
    else:
        for ld in (*_LD_SO_CANDIDATES, *sorted(glob.glob("/lib64/ld-linux*.so*"))):
            if os.path.exists(ld):
                try:
                    text = subprocess.run(
                        [ld, "--help"], capture_output=True, text=True, timeout=10, check=False
                    ).stdout
                    source = f"{ld} --help"
                except (OSError, subprocess.TimeoutExpired):
                    text = ""
                break
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
        default_dirs=dirs, subdirs=subdirs, cache=cache, preload=tuple(preload), source=source, lib=lib_token(dirs)
    )


def lib_token(default_dirs: tuple[str, ...]) -> str:
    """``$LIB``: glibc defines it as the last component of its ``slibdir`` (``lib64`` on Fedora,
    ``lib`` on Arch), the first system search path; Debian and Ubuntu patch it to
    ``lib/<multiarch triplet>`` (seen with ``LD_DEBUG=libs`` on Debian 12's ld.so). Pure."""
    first = default_dirs[0].rstrip("/") if default_dirs else "/lib"
    base = os.path.basename(first)
    return f"lib/{base}" if "-linux-" in base else base or "lib"
