"""``$PLATFORM`` and the legacy HWCAP subdirectories as the host's ld.so really uses them.

glibc 2.26–2.36 on x86-64 replaces the kernel's AT_PLATFORM ``x86_64`` with ``haswell`` (or
``xeon_phi``) on CPUs with those features, and probes ``tls/haswell/avx512_1/x86_64`` … under every
search directory. The model used ``x86_64`` and a fixed list, so on an AVX-512 machine it predicted
that a library under ``$ORIGIN/$PLATFORM`` loads while the real dlopen failed (found by CI on such a
machine). The oracle here is ld.so itself: ``LD_DEBUG=libs`` prints the search path it walks."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from cudastack.loader.system import detect_loader, legacy_subdirs, parse_ld_so_help, parse_ld_so_platform
from tests.native import build
from tests.unit.test_loader_fixtures import F_C, USES_F

DATA = Path(__file__).parent.parent / "data" / "ld_so"


def test_the_search_path_equals_ld_debugs(tmp_path: Path) -> None:
    """The subdirectories and ``$PLATFORM`` the model probes under a RUNPATH are, in order, the ones
    the real ld.so tries (``LD_DEBUG=libs``) for a library it cannot find there."""
    build(tmp_path / "f" / "libf.so", F_C)
    g = build(
        tmp_path / "libg.so",
        USES_F,
        libs=(f"-L{tmp_path / 'f'}", "-lf"),
        flags=("-Wl,--enable-new-dtags", "-Wl,-rpath,$ORIGIN/r/$PLATFORM"),
    )
    proc = subprocess.run(
        [sys.executable, "-c", f"import ctypes; ctypes.CDLL({str(g)!r})"],
        env={**os.environ, "LD_DEBUG": "libs"},
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode != 0  # libf.so is not under r/$PLATFORM: the walk is printed in full
    m = re.search(r"search path=(\S+)\s+\(RUNPATH from file " + re.escape(str(g)), proc.stderr)
    assert m, proc.stderr[-2000:]
    cfg = detect_loader({})
    base = f"{tmp_path}/r/{cfg.platform}"
    assert m.group(1).split(":") == [f"{base}/{s}" for s in cfg.subdirs] + [base]


def test_glibc_2_36_on_an_avx512_cpu() -> None:
    """Debian 12's ld.so --help on an AVX-512 machine, as captured: AT_PLATFORM is haswell."""
    text = (DATA / "debian12-glibc2.36-avx512.help.txt").read_text()
    assert parse_ld_so_platform(text) == "haswell"
    dirs, subdirs = parse_ld_so_help(text)
    assert dirs[0] == "/lib/x86_64-linux-gnu"
    legacy = [
        f"{t}{p}{a}{x}"
        for t in ("tls/", "")
        for p in ("haswell/", "")
        for a in ("avx512_1/", "")
        for x in ("x86_64", "")
    ]
    hwcaps = ("glibc-hwcaps/x86-64-v4", "glibc-hwcaps/x86-64-v3", "glibc-hwcaps/x86-64-v2")
    assert subdirs == (*hwcaps, *(s.rstrip("/") for s in legacy[:-1]))


def test_platform_from_list_diagnostics_and_plain_x86_64() -> None:
    """glibc >= 2.37 has no legacy section; --list-diagnostics names dl_platform. A plain x86-64
    CPU lists x86_64 both as the platform and as a HWCAP name, and ld.so probes ``tls/x86_64`` and
    ``x86_64`` twice each (Debian 12's ld.so with ``LD_DEBUG=libs`` on an x86-64-v4 machine whose
    AT_PLATFORM is x86_64, session 32; the oracle test above checks it on whatever machine runs it)."""
    assert parse_ld_so_platform('dl_pagesize=0x1000\ndl_platform="x86_64"\n') == "x86_64"
    assert parse_ld_so_platform("Usage: ld.so [OPTION]...\n") is None
    entries = [
        ("x86_64", "(AT_PLATFORM; supported, searched)"),
        ("tls", "(supported, searched)"),
        ("x86_64", "(supported, searched)"),
    ]
    assert legacy_subdirs(entries) == (
        "tls/x86_64/x86_64", "tls/x86_64", "tls/x86_64", "tls", "x86_64/x86_64", "x86_64", "x86_64",
    )  # fmt: skip
