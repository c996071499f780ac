"""Explaining undefined C++ symbols: demangling, the closest export, and what a mismatch means.

Demangling uses binutils' ``c++filt`` in one batch (only for symbols a finding shows); without
it the mangled names are shown and the report says so.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Iterable

_SOURCE_NAME = re.compile(r"(\d+)([A-Za-z_][A-Za-z0-9_]*)")
TORCH_NAMESPACES = ("_ZN3c10", "_ZNK3c10", "_ZN2at", "_ZNK2at", "_ZN5torch", "_ZNK5torch", "_ZN6caffe2", "_ZN3c104cuda")


def demangle(names: Iterable[str]) -> dict[str, str]:
    """Mangled → demangled, for the names given; unknown ones map to themselves."""
    names = [n for n in dict.fromkeys(names) if n.startswith("_Z")]
    out = {n: n for n in names}
    exe = shutil.which("c++filt")
    if not names or exe is None:
        return out
    try:
        proc = subprocess.run(
            [exe],
            input="\n".join(names) + "\n",
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
            env={"PATH": os.environ.get("PATH", "")},
        )
    except (OSError, subprocess.TimeoutExpired):
        return out
    lines = proc.stdout.splitlines()
    if len(lines) == len(names):
        out.update(zip(names, lines, strict=True))
    return out


def identifier_tokens(mangled: str) -> list[str]:
    """``<length><identifier>`` source names in an Itanium-mangled name, in order."""
    tokens: list[str] = []
    i = 0
    while True:
        m = _SOURCE_NAME.search(mangled, i)
        if not m:
            return tokens
        n = int(m.group(1))
        ident = m.group(2)[:n]
        if len(ident) == n and n > 0:
            tokens.append(f"{n}{ident}")
        i = m.start(2) + max(n, 1)


def closest_exports(name: str, exports: Iterable[tuple[str, str]], limit: int = 3) -> list[tuple[str, str]]:
    """Exports (symbol, file) that share the needed symbol's qualified name, best first.

    ``_ZN3c104cuda29c10_cuda_check_implementationEiPKcS2_ib`` (needs ``(int, ...)``) finds
    ``..._implementationEjPKcS3_jb`` (``(unsigned int, ...)``) in libc10_cuda.so.
    """
    key = _key(name)
    return _ranked(name, [(sym, path) for sym, path in exports if key in sym], limit) if key else []


def _key(name: str) -> str:
    """The longest source name of a mangled C++ symbol, what its closest exports must hold; empty
    for a name that is not one."""
    tokens = identifier_tokens(name)
    return max(tokens, key=len) if name.startswith("_Z") and tokens else ""


def _ranked(name: str, candidates: Iterable[tuple[str, str]], limit: int) -> list[tuple[str, str]]:
    """The ``limit`` best of ``(symbol, file)`` candidates for ``name`` (itself excluded): the
    longest common prefix first, then the nearest length, then by name and file."""
    scored = []
    for sym, path in candidates:
        if sym != name:
            common = len(os.path.commonprefix([sym, name]))  # noqa: RUF071 - character prefix wanted
            scored.append((-common, abs(len(sym) - len(name)), sym, path))
    scored.sort()
    return [(s, p) for _, _, s, p in scored[:limit]]


def export_table(names: Iterable[str]) -> str:
    """Exported names as one string for :func:`closest_in`: each between NUL bytes (no ELF name
    holds one: a string table entry ends at its NUL)."""
    return "\0" + "\0".join(names) + "\0"


def closest_in(
    name: str,
    tables: Iterable[tuple[str, str]],
    limit: int = 3,
    memo: dict[tuple[str, str], list[str]] | None = None,
) -> list[tuple[str, str]]:
    """:func:`closest_exports` over ``(file, export_table(...))`` pairs: the same answer, the
    candidates found by ``str.find`` of the key in each file's table instead of a test of every
    name, and kept in ``memo`` (by table and key: the modules of one broken build miss the same
    symbols). On vllm 0.33 under a stub ``libstdc++.so.6`` ABI001 asks for 375 symbols' closest
    exports, each over every export of the environment (~2M names): 6.6 s of the run's ~40 s."""
    key = _key(name)
    if not key:
        return []
    candidates: list[tuple[str, str]] = []
    for path, text in tables:
        # keyed by the table itself (its hash is computed once and kept by the str; a lookup of the
        # same object compares by identity), not its id: a freed table's id can come back
        found = memo.get((text, key)) if memo is not None else None
        if found is None:
            found = []
            at = text.find(key)
            while at >= 0:
                end = text.find("\0", at)
                found.append(text[text.rfind("\0", 0, at) + 1 : end])
                at = text.find(key, end)
            if memo is not None:
                memo[(text, key)] = found
        candidates.extend((sym, path) for sym in found)
    return _ranked(name, candidates, limit)


def abi_flavour(mangled: str) -> str | None:
    """``cxx11`` or ``old`` when the name involves std::string/list (whose ABI differs), else None."""
    if "B5cxx11" in mangled or "NSt7__cxx11" in mangled:
        return "cxx11"
    if re.search(r"Ss|NSs|St12basic_string|Sb", mangled):
        return "old"
    return None


def explain(name: str, closest: list[tuple[str, str]], torch_version: str | None) -> list[str]:
    """Plain-language meaning of an undefined symbol, given its closest exports."""
    notes: list[str] = []
    if name.startswith(TORCH_NAMESPACES):
        notes.append(
            f"a torch C++ symbol: the file was built against a different torch than the installed "
            f"{torch_version or 'one'}; rebuild it or install the wheel built for this torch"
        )
    if closest:
        mine, theirs = abi_flavour(name), abi_flavour(closest[0][0])
        if mine and theirs and mine != theirs:
            notes.append(
                f"_GLIBCXX_USE_CXX11_ABI mismatch: the file uses the {mine} std::string ABI, "
                f"{os.path.basename(closest[0][1])} the {theirs} one"
            )
    if re.match(r"^cu[A-Z]", name):
        notes.append("a CUDA driver API symbol: the installed NVIDIA driver (libcuda) is older than the file needs")
    if name.startswith("nccl"):
        notes.append("an NCCL symbol: the libnccl.so.2 that loads is another NCCL release than the file was built for")
    return notes
