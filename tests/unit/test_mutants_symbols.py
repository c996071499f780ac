"""Tests that kill the mutants mutmut found alive in ``elf/symbols.py`` (issue 13; docs/validation.md,
"Mutation testing"). Oracles: the names g++ really mangles (read back with the ELF reader) and
binutils' c++filt run on its own, one name per process."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from cudastack.elf.reader import read_elf
from cudastack.elf.symbols import (
    abi_flavour,
    closest_exports,
    closest_in,
    demangle,
    explain,
    export_table,
    identifier_tokens,
)
from tests.native import build

SRC = """#include <string>
namespace c10 { namespace cuda {
int check_impl(int a, const char* f, const char* g, int l, bool b) { return a + l + b + (f == g); }
int check_impl(unsigned a, const char* f, const char* g, unsigned l, bool b) { return (int)(a + l) + b + (f == g); }
} }
int name_len(const std::string& s) { return (int)s.size(); }
int take(std::string s) { return (int)s.size(); }
std::string make_name(int) { return ""; }
"""


def _exports(path: Path) -> list[str]:
    ours = ("check_impl", "name_len", "take", "make_name")
    return sorted(n for n in read_elf(str(path)).exports if any(f"{len(f)}{f}" in n for f in ours))


def _cxxfilt(name: str) -> str:
    exe = shutil.which("c++filt")
    if exe is None:
        pytest.fail("c++filt (binutils) is the oracle of this test")
    return subprocess.run([exe, name], capture_output=True, text=True, check=True).stdout.strip()


@pytest.fixture(scope="module")
def abi_builds(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[str]]:
    d = tmp_path_factory.mktemp("abi")
    return {
        flavour: _exports(build(d / f"lib{flag}.so", SRC, lang="c++", flags=(f"-D_GLIBCXX_USE_CXX11_ABI={flag}",)))
        for flavour, flag in (("old", 0), ("cxx11", 1))
    }


def test_abi_flavour_of_what_gxx_mangles(abi_builds: dict[str, list[str]]) -> None:
    """Every symbol g++ emits under _GLIBCXX_USE_CXX11_ABI=0/1 is judged as c++filt shows it:
    ``cxx11`` (``std::__cxx11::`` or ``[abi:cxx11]``), ``old`` (``std::string``, ``std::basic_string``),
    or neither."""
    for flavour, names in abi_builds.items():
        seen = set()
        for n in names:
            shown = _cxxfilt(n)
            want = "cxx11" if "cxx11" in shown else "old" if "basic_string" in shown or "std::string" in shown else None
            assert abi_flavour(n) == want, (n, shown)
            seen.add(want)
        assert seen == {flavour, None}, names
    for spelled in ("_Z1fSs", "_Z1fNSs4sizeEv", "_Z1fSt12basic_stringIcE", "_Z1fSbIwE"):
        assert abi_flavour(spelled) == "old", spelled
    assert abi_flavour("_Z1fNSt7__cxx114listIiEE") == "cxx11"


def test_demangle_agrees_with_cxxfilt_one_by_one(abi_builds: dict[str, list[str]]) -> None:
    names = [n for ns in abi_builds.values() for n in ns]
    got = demangle([*names, "main", names[0]])  # a C name and a duplicate
    assert set(got) == set(names)
    for n in names:
        assert got[n] == _cxxfilt(n) != n


def test_demangle_keeps_mangled_names_when_it_cannot(monkeypatch: pytest.MonkeyPatch) -> None:
    assert demangle([]) == {}
    # a name with a newline would shift every line of c++filt's answer: nothing is demangled then
    assert demangle(["_Z1fv", "_Z1g\nv"]) == {"_Z1fv": "_Z1fv", "_Z1g\nv": "_Z1g\nv"}
    assert demangle(["_Z1fv"]) == {"_Z1fv": "f()"}
    monkeypatch.setenv("PATH", "/nonexistent")  # no c++filt: names stay mangled
    assert demangle(["_Z1fv"]) == {"_Z1fv": "_Z1fv"}


def test_cxxfilt_runs_without_the_callers_ld_preload(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """c++filt gets only PATH: an LD_PRELOAD in cudastack's environment (the inspected stack's, often)
    never runs inside it. The preloaded library's constructor would leave a marker file."""
    marker = tmp_path / "ran"
    lib = build(
        tmp_path / "libmark.so",
        f'#include <stdio.h>\n__attribute__((constructor)) static void m(void) {{ fclose(fopen("{marker}", "w")); }}\n',
    )
    probe = subprocess.run(["true"], env={"LD_PRELOAD": str(lib), "PATH": "/usr/bin:/bin"}, check=True)
    assert probe.returncode == 0 and marker.exists()  # the marker does work
    marker.unlink()
    monkeypatch.setenv("LD_PRELOAD", str(lib))
    assert demangle(["_Z1fv"]) == {"_Z1fv": "f()"}
    assert not marker.exists()


def test_identifier_tokens_longest_is_a_source_name_cxxfilt_prints(abi_builds: dict[str, list[str]]) -> None:
    for name in (n for ns in abi_builds.values() for n in ns):
        # the longest token is what closest_exports keys on: a real source name
        key = max(identifier_tokens(name), key=len)
        ident = key.lstrip("0123456789")
        assert key == f"{len(ident)}{ident}" and ident in _cxxfilt(name), (name, key)
    assert identifier_tokens("_ZN3c104cuda10check_implEib") == ["3c10", "4cuda", "10check_impl"]
    assert identifier_tokens("_Z10abc") == []  # a length longer than what follows is not a name
    assert identifier_tokens("_Z0a1b") == ["1b"]  # a zero length is skipped, and the scan goes on
    assert identifier_tokens("_Z3foo3bar") == ["3foo", "3bar"]


def test_closest_exports_finds_the_other_overload(abi_builds: dict[str, list[str]]) -> None:
    needed = "_ZN3c104cuda10check_implEiPKcS2_ib"  # (int, ...)
    exports = [(n, "/lib/libc10_cuda.so") for n in abi_builds["old"]]
    (best,) = closest_exports(needed, exports)
    assert best == ("_ZN3c104cuda10check_implEjPKcS2_jb", "/lib/libc10_cuda.so")
    assert closest_exports(needed, [(needed, "/x.so")]) == []  # the symbol itself is not a hint
    assert closest_exports("check_impl", exports) == []  # not a C++ name
    # keyed on the longest source name (10check_impl), not the greatest string (4cuda)
    assert closest_exports(needed, [("_ZN3c104cuda5otherEv", "/x.so")]) == []
    assert closest_exports("_Z", exports) == []


def test_closest_exports_ranks_by_common_prefix_then_length() -> None:
    needed = "_ZN2at6native9add_kernelERKNS_6TensorE"
    exports = [
        ("_ZN2at6native9add_kernelERKNS_6TensorES3_", "/d.so"),  # shares the most, longer
        ("_ZN2at6native9add_kernelEv", "/a.so"),
        ("_ZN2at6native9add_kernelERKNS_6TensorEi", "/c.so"),  # shares the most, 1 longer
        ("_ZN3c109add_kernelEv", "/b.so"),
        ("_ZN2at3mul7unrelatedEv", "/e.so"),  # lacks the longest source name
    ]
    assert closest_exports(needed, exports) == [
        ("_ZN2at6native9add_kernelERKNS_6TensorEi", "/c.so"),
        ("_ZN2at6native9add_kernelERKNS_6TensorES3_", "/d.so"),
        ("_ZN2at6native9add_kernelEv", "/a.so"),
    ]
    assert len(closest_exports(needed, exports, limit=4)) == 4
    # same common prefix: the nearer length wins, shorter or longer
    near = [("_Z3fooj", "/shorter-by-3.so"), ("_Z3foojjjjj", "/longer-by-1.so")]
    assert closest_exports("_Z3fooiiii", near) == [("_Z3foojjjjj", "/longer-by-1.so"), ("_Z3fooj", "/shorter-by-3.so")]
    assert closest_exports(needed, exports, limit=1) == [("_ZN2at6native9add_kernelERKNS_6TensorEi", "/c.so")]


def test_closest_in_answers_as_closest_exports_on_real_libraries(abi_builds: dict[str, list[str]]) -> None:
    """ABI001's search over whole export tables (a ``str.find`` per table, candidates kept per
    table and key) gives what the name-by-name search gives, on the C++ exports of g++'s own
    libstdc++ and of the two ABI builds, for needed names that are exports (not their own hint)
    and the same names with one parameter changed (``i`` → ``j``, as a torch ABI change does)."""
    libstdcxx = subprocess.run(
        ["g++", "-print-file-name=libstdc++.so.6"], capture_output=True, text=True, check=True
    ).stdout.strip()
    files = {libstdcxx: sorted(read_elf(libstdcxx).exports)}
    files.update({f"/lib/{k}.so": v for k, v in abi_builds.items()})
    files["/lib/ctor.so"] = ["_ZN5Outer5OuterC1Ev", "_ZN5Outer5OuterC2Ev", "_ZN5Outer3runEv"]  # the key twice in one
    assert len(files[libstdcxx]) > 3000
    pairs = [(n, path) for path, names in files.items() for n in names]
    tables = [(path, export_table(names)) for path, names in files.items()]
    cxx = sorted({n for n, _ in pairs if n.startswith("_Z")})
    ours = [n for k in abi_builds for n in abi_builds[k]]
    changed = [n.replace("i", "j", 1) for n in cxx[::31]]
    needed = cxx[::23] + ours + changed + ["_ZN5Outer5OuterC1Ei", "notmangled", "_Z"]
    memo: dict[tuple[str, str], list[str]] = {}
    hinted = 0
    for name in needed:
        want = closest_exports(name, pairs)
        assert closest_in(name, tables) == want, name
        assert closest_in(name, tables, memo=memo) == want == closest_in(name, tables, memo=memo), name
        hinted += bool(want)
    assert hinted > 100 and len(memo) > 100


def test_explain_says_what_each_kind_of_symbol_means(abi_builds: dict[str, list[str]]) -> None:
    torch = "_ZN3c104cuda10check_implEiPKcS2_ib"
    assert explain(torch, [], "2.13.0") == [
        "a torch C++ symbol: the file was built against a different torch than the installed 2.13.0; "
        "rebuild it or install the wheel built for this torch"
    ]
    assert "than the installed one;" in explain(torch, [], None)[0]
    (new,) = (n for n in abi_builds["cxx11"] if "name_len" in n)
    (old,) = (n for n in abi_builds["old"] if "name_len" in n)
    assert explain(new, [(old, "/srv/lib/libabi.so")], None) == [
        "_GLIBCXX_USE_CXX11_ABI mismatch: the file uses the cxx11 std::string ABI, libabi.so the old one"
    ]
    assert explain(new, [(new + "x", "/l.so")], None) == []  # same flavour
    assert explain("_Z1fv", [("_Z1fi", "/l.so")], None) == []  # no std::string on either side
    assert explain("cuMemAlloc_v2", [], None) == [
        "a CUDA driver API symbol: the installed NVIDIA driver (libcuda) is older than the file needs"
    ]
    assert explain("cudaMalloc", [], None) == []  # the runtime API is not the driver's
    assert explain("ncclCommInitRank", [], None) == [
        "an NCCL symbol: the libnccl.so.2 that loads is another NCCL release than the file was built for"
    ]
