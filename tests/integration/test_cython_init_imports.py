"""What a Cython >= 3.2 extension imports at init, read from its compressed string table, against a
real import in a fresh interpreter. A small package of real gcc -O2 Cython modules: ``front``
imports ``helper`` at module level, ``optional`` inside ``try: … except ImportError`` (and
``optional`` really fails to load), ``lazymod`` only inside a function. Before the table was read,
``helper`` was a miss: Cython 3.2+ keeps the name only in the zlib-compressed blob."""

from __future__ import annotations

import json
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from cudastack.env.dists import read_distribution
from cudastack.env.imports import ImportTime
from tests import oracles
from tests.native import CC

FILLER = "".join(f"setting_number_{i} = 'the value of setting_number_{i}'\n" for i in range(60))
FRONT = (
    "from pkg import helper\n"
    "try:\n    from pkg import optional\nexcept ImportError:\n    optional = None\n"
    + FILLER
    + "def lazy():\n    from pkg import lazymod\n    return lazymod\n"
)
LEAF = "VALUE = 1\n" + FILLER
BROKEN = """
#include <Python.h>
extern int cudastack_no_such_function(void);
static struct PyModuleDef def = {PyModuleDef_HEAD_INIT, "optional", NULL, -1, NULL};
PyMODINIT_FUNC PyInit_optional(void) { cudastack_no_such_function(); return PyModule_Create(&def); }
"""


def _cythonize(work: Path, name: str, source: str) -> Path:
    (work / f"{name}.pyx").write_text(source)
    proc = subprocess.run(
        [sys.executable, "-m", "cython", "-3", f"{name}.pyx", "-o", f"{name}.c"],
        cwd=work,
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr
    return work / f"{name}.c"


def _compile(c_file: Path, out: Path, opt: str = "-O2", flags: tuple[str, ...] = ()) -> None:
    include = sysconfig.get_paths()["include"]
    proc = subprocess.run(
        [str(CC), opt, *flags, "-shared", "-fPIC", f"-I{include}", str(c_file), "-o", str(out)],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _site(tmp_path_factory, FRONT, LEAF, "-O2")


def _site(
    tmp_path_factory: pytest.TempPathFactory, front: str, leaf: str, opt: str, flags: tuple[str, ...] = ()
) -> Path:
    pytest.importorskip("Cython", minversion="3.2")
    if CC is None:
        oracles.missing("gcc is not installed")
    work = tmp_path_factory.mktemp("cysrc")
    site = tmp_path_factory.mktemp("site")
    pkg = site / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("from pkg import front\n")
    suffix = sysconfig.get_config_var("EXT_SUFFIX")
    records = ["pkg/__init__.py,,"]
    for name, source in (("front", front), ("helper", leaf), ("lazymod", leaf)):
        _compile(_cythonize(work, name, source), pkg / f"{name}{suffix}", opt, flags)
        records.append(f"pkg/{name}{suffix},,")
    (work / "optional.c").write_text(BROKEN)
    _compile(work / "optional.c", pkg / f"optional{suffix}")
    records.append(f"pkg/optional{suffix},,")
    info = site / "pkg-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: pkg\nVersion: 1.0\n")
    (info / "RECORD").write_text("\n".join([*records, "pkg-1.0.dist-info/RECORD,,"]) + "\n")
    return site


def test_init_imports_of_a_cython_module_match_a_real_import(site: Path) -> None:
    real = subprocess.run(
        [
            sys.executable,
            "-I",
            "-c",
            f"import sys, json; sys.path.insert(0, {str(site)!r}); import pkg; "
            "print(json.dumps(sorted(m for m in sys.modules if m.startswith('pkg.'))))",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert real.returncode == 0, real.stderr[-2000:]
    loaded = set(json.loads(real.stdout))
    assert loaded == {"pkg.front", "pkg.helper"}  # optional failed, swallowed; lazymod never asked
    run = ImportTime(read_distribution(str(site), "pkg-1.0.dist-info"))
    predicted = {n for n in ("pkg.front", "pkg.helper", "pkg.lazymod", "pkg.optional") if run.loads(n)}
    assert predicted == loaded


def test_a_small_module_built_at_o0_is_read_too(tmp_path_factory: pytest.TempPathFactory) -> None:
    """h5py 3.16's wheels are built at -O0, where gcc builds every table's length index on the
    stack: ``h5py._proxy``'s ``from . import _npystrings``-style import was a miss on the H200
    (a real ``import h5py`` loads ``_npystrings``). The same package with 20 constants a module,
    built at -O0: ``helper`` is found; at -O0 the guard is not seen, so ``optional`` counts too
    (an over, never a miss); ``lazymod``, imported in a function only, does not."""
    filler = "".join(f"setting_number_{i} = 'the value of setting_number_{i}'\n" for i in range(20))
    front = FRONT.replace(FILLER, filler)
    site = _site(tmp_path_factory, front, "VALUE = 1\n" + filler, "-O0")
    real = subprocess.run(
        [
            sys.executable,
            "-I",
            "-c",
            f"import sys, json; sys.path.insert(0, {str(site)!r}); import pkg; "
            "print(json.dumps(sorted(m for m in sys.modules if m.startswith('pkg.'))))",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert real.returncode == 0, real.stderr[-2000:]
    loaded = set(json.loads(real.stdout))
    assert loaded == {"pkg.front", "pkg.helper"}
    run = ImportTime(read_distribution(str(site), "pkg-1.0.dist-info"))
    predicted = {n for n in ("pkg.front", "pkg.helper", "pkg.lazymod", "pkg.optional") if run.loads(n)}
    assert loaded <= predicted and "pkg.lazymod" not in predicted


LIMITED_API = ("-DCYTHON_LIMITED_API=1", "-DPy_LIMITED_API=0x030B0000")


@pytest.mark.parametrize(
    ("compression", "constants", "opt", "empty"),
    [(1, 60, o, True) for o in ("-O0", "-O2", "-O3", "-Os")]  # zlib, the length index a static array
    + [(1, 5, o, True) for o in ("-O2", "-O3")]  # zlib, a small table: the index built on the stack
    + [(1, 5, "-O2", False)]  # no empty string: a lone 0 stored to another slot is no part of it
    + [(90, 60, o, True) for o in ("-O0", "-O2")],  # Cython 3.3's LZSS
)
def test_a_limited_api_module_whose_table_starts_with_the_empty_string(
    tmp_path_factory: pytest.TempPathFactory, compression: int, constants: int, opt: str, empty: bool
) -> None:
    """RAPIDS' pylibcudf 26.10 wheels are Cython 3.2.9 limited-API builds (``abi3.so``): their
    tables hold the empty string, first, and its length 0 read as the padding before the length
    index (or, built on the stack, as no store at all: gcc clears the field with ``and word
    [rsp+d], 0xf800``). The table came out one entry short and no fill loop matched it:
    ``pylibcudf.binaryop``'s ``from pylibcudf.libcudf.binaryop import …`` was a miss (a real
    ``import pylibcudf`` loads it). The same package built with the limited API, ``front`` starting
    with a function whose default is ``""``: ``helper`` is found, ``lazymod`` is not. Without it,
    a small table's index (on the stack) was read with a lone 0 stored elsewhere on the stack
    before it (pylibcudf.utilities): one entry too many."""
    filler = "".join(f"setting_number_{i} = 'the value of setting_number_{i}'\n" for i in range(constants))
    front = ('def first(x=""):\n    return x\n' if empty else "") + FRONT.replace(FILLER, filler)
    flags = (*LIMITED_API, f"-DCYTHON_COMPRESS_STRINGS={compression}")
    site = _site(tmp_path_factory, front, "VALUE = 1\n" + filler, opt, flags)
    real = subprocess.run(
        [
            sys.executable,
            "-I",
            "-c",
            f"import sys, json; sys.path.insert(0, {str(site)!r}); import pkg; "
            f"assert {not empty} or pkg.front.first() == ''; "
            "print(json.dumps(sorted(m for m in sys.modules if m.startswith('pkg.'))))",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert real.returncode == 0, real.stderr[-2000:]
    loaded = set(json.loads(real.stdout))
    assert loaded == {"pkg.front", "pkg.helper"}
    run = ImportTime(read_distribution(str(site), "pkg-1.0.dist-info"))
    predicted = {n for n in ("pkg.front", "pkg.helper", "pkg.lazymod", "pkg.optional") if run.loads(n)}
    if opt == "-O0":  # the guard is not seen at -O0: optional counts too (an over, never a miss)
        assert loaded <= predicted and "pkg.lazymod" not in predicted
    else:
        assert predicted == loaded


def test_the_init_imports_are_kept_between_runs_under_the_file_identity(
    site: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A repeat plan reads each Cython module's init imports from the ELF-table store: the second
    read answers without the bytes; a file rewritten in place is parsed again."""
    import os
    import shutil
    import time

    from cudastack.elf.cython import parse_init_imports, read_init_imports
    from cudastack.parallel import run_memo

    monkeypatch.setenv("CUDASTACK_STATE_DIR", str(tmp_path / "state"))
    suffix = sysconfig.get_config_var("EXT_SUFFIX")
    copy = tmp_path / f"front{suffix}"
    shutil.copy2(site / "pkg" / f"front{suffix}", copy)
    time.sleep(2.1)  # past the store's racy window (a file changed within 2 s is not stored)
    data = copy.read_bytes()
    fd = os.open(copy, os.O_RDONLY)
    try:
        first = read_init_imports(fd, data)
        assert first is not None and b"helper" in first and first == parse_init_imports(data)
        run_memo("cython-init-imports").clear()  # this run's memo answers first: ask the store
        assert read_init_imports(fd, b"") == first  # from the store: b"" alone parses to None
    finally:
        os.close(fd)
    assert parse_init_imports(b"") is None
    shutil.copyfile(site / "pkg" / f"helper{suffix}", copy)  # rewritten in place: another identity
    other = copy.read_bytes()
    fd = os.open(copy, os.O_RDONLY)
    try:
        assert read_init_imports(fd, other) == parse_init_imports(other) != first
    finally:
        os.close(fd)


def test_what_a_forked_child_read_is_not_read_again_in_the_parent(
    site: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the cache off, an import-verdict child reads the init imports of a package's Cython
    modules, and the doctor's parent asks the same of the same files when it walks a requirer's
    import (cuda-core's 45 modules on the vllm 0.33 environment, ~0.3 s of the run's serial end).
    The child hands its answers back with its own (:func:`cudastack.parallel.run_memo`): the
    parent's answer is the child's, without a parse; a file that changed is parsed again."""
    import os
    import shutil
    import time

    from cudastack.elf import cython
    from cudastack.parallel import Forked, run_memo

    monkeypatch.setenv("CUDASTACK_NO_CACHE", "1")
    suffix = sysconfig.get_config_var("EXT_SUFFIX")
    copy = tmp_path / f"front{suffix}"
    shutil.copy2(site / "pkg" / f"front{suffix}", copy)
    time.sleep(2.1)  # past the racy window: an identity younger than a clock tick vouches for nothing
    data = copy.read_bytes()
    expected = cython.parse_init_imports(data)
    assert expected is not None and b"helper" in expected

    def read() -> list[bytes]:
        fd = os.open(copy, os.O_RDONLY)
        try:
            got = cython.read_init_imports(fd, data)
        finally:
            os.close(fd)
        return sorted(got or ())

    run_memo("cython-init-imports").clear()
    child = Forked(read)
    assert child.pid > 0
    assert child.result() == sorted(expected)
    monkeypatch.setattr(cython, "parse_init_imports", lambda _data: pytest.fail("parsed again in the parent"))
    assert read() == sorted(expected)
    shutil.copyfile(site / "pkg" / f"helper{suffix}", copy)  # rewritten in place: another identity
    monkeypatch.undo()
    monkeypatch.setenv("CUDASTACK_NO_CACHE", "1")
    data = copy.read_bytes()
    assert read() == sorted(cython.parse_init_imports(data) or ()) != sorted(expected)
