"""Cython ≥ 3.1's string table read back from a module really compiled by Cython and gcc, in each
compression the generated C offers (zlib, bz2, and from Cython 3.3 its own LZSS), compared with
what the module holds when a fresh interpreter imports it."""

from __future__ import annotations

import re
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from cudastack.elf.cython import parse_string_table
from tests import oracles
from tests.native import CC

NAMES = [f"setting_number_{i}" for i in range(60)]
SOURCE = (
    "from json import decoder\n"
    + "".join(f"{n} = 'the value of {n}'\n" for n in NAMES)
    + "def lazy():\n    from email import message_from_string\n    return message_from_string\n"
)
ALGOS = {"zlib": 1, "bz2": 2, "lzss": 90}


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("Cython", minversion="3.1")
    if CC is None:
        oracles.missing("gcc is not installed")
    work = tmp_path_factory.mktemp("cy")
    (work / "cymod.pyx").write_text(SOURCE)
    proc = subprocess.run(
        [sys.executable, "-m", "cython", "-3", "cymod.pyx", "-o", "cymod.c"], cwd=work, capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stderr
    return work / "cymod.c"


def _compile(c_file: Path, algo: int, opt: str = "-O2") -> Path:
    out = c_file.parent / f"a{algo}{opt}" / f"cymod{sysconfig.get_config_var('EXT_SUFFIX')}"
    out.parent.mkdir(exist_ok=True)
    include = sysconfig.get_paths()["include"]
    cmd = [str(CC), opt, "-shared", "-fPIC", f"-DCYTHON_COMPRESS_STRINGS={algo}", f"-I{include}", str(c_file), "-o"]
    proc = subprocess.run([*cmd, str(out)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return out


@pytest.mark.parametrize("algo", sorted(ALGOS))
def test_the_compressed_table_is_read_string_by_string(generated: Path, algo: str) -> None:
    if f"compression: {algo}" not in generated.read_text():
        pytest.skip(f"this Cython does not offer {algo} for this table")
    module = _compile(generated, ALGOS[algo])
    # reality: the module imports, and its constants are what the table must hold
    real = subprocess.run(
        [sys.executable, "-E", "-s", "-c", "import cymod; print(cymod.setting_number_7); print(cymod.__name__)"],
        cwd=module.parent,
        capture_output=True,
        text=True,
    )
    assert real.returncode == 0 and real.stdout.split() == ["the", "value", "of", "setting_number_7", "cymod"]
    table = parse_string_table(module.read_bytes())
    assert table is not None
    whole = set(table)
    for n in NAMES:
        assert n.encode() in whole and f"the value of {n}".encode() in whole
    # the module names of both imports, each a whole string (not a piece of a run of identifiers)
    assert {b"json", b"decoder", b"email", b"message_from_string", b"lazy"} <= whole
    # the decoded strings add up to the blob the C source states the size of
    size = int(re.search(r"compression: none \((\d+) bytes\)", generated.read_text()).group(1))  # type: ignore[union-attr]
    assert sum(map(len, table)) == size


def test_an_uncompressed_table_or_another_compiler_gives_none(generated: Path) -> None:
    module = _compile(generated, 0)
    assert parse_string_table(module.read_bytes()) is None
    assert parse_string_table(Path(sys.executable).read_bytes()) is None


def test_garbage_never_raises() -> None:
    """Whatever bytes it is given (a truncated or corrupt module), the reader answers None or a
    table, and never raises: it runs on every compiled module of a failing package."""
    import random

    rng = random.Random(12)
    elf = Path(sys.executable).read_bytes()
    blobs = [b"", b"\x7fELF", elf[:64], elf[: len(elf) // 2]]
    for _ in range(200):
        cut = bytearray(elf[:4096])
        for _ in range(16):
            cut[rng.randrange(len(cut))] = rng.randrange(256)
        blobs.append(bytes(cut) + b"x\xda" + rng.randbytes(64) + b"BZh91AY&SY" + rng.randbytes(32))
    blobs.append(b"\x7fELF" + b"LZSS string data decompression failed" + rng.randbytes(1 << 16))
    for blob in blobs:
        assert parse_string_table(blob) is None or isinstance(parse_string_table(blob), tuple)


def test_the_exec_function_reads_of_the_table_are_found_at_o2(generated: Path) -> None:
    """At -O2 the module's exec function (found from its PyModuleDef slots, stripped or not) reads
    the strings of module-level code from the table: ``json`` and ``decoder`` of ``from json import
    decoder``, the constants. It also reads the inlined code objects' local names (``email``,
    ``message_from_string`` of the lazy import), which is why import reachability does not use
    these reads yet. -O0 reads through the state pointer: not resolved (None)."""
    from cudastack.elf.cython import _Elf, parse_exec_reads

    module = _compile(generated, 1)
    stripped = module.with_name("stripped" + module.name)
    subprocess.run(["strip", "-o", str(stripped), str(module)], check=True)
    nm = subprocess.run(["nm", str(module)], capture_output=True, text=True, check=True).stdout
    exec_addr = next(int(line.split()[0], 16) for line in nm.splitlines() if line.endswith("__pyx_pymod_exec_cymod"))
    assert _Elf(stripped.read_bytes()).exec_function() == exec_addr
    reads = parse_exec_reads(stripped.read_bytes())
    assert reads is not None and reads == parse_exec_reads(module.read_bytes())
    assert {b"json", b"decoder", b"lazy", b"the value of setting_number_7"} <= reads
    assert parse_exec_reads(_compile_o0(generated).read_bytes()) is None


def _compile_o0(c_file: Path) -> Path:
    out = c_file.parent / "o0" / f"cymod{sysconfig.get_config_var('EXT_SUFFIX')}"
    out.parent.mkdir(exist_ok=True)
    include = sysconfig.get_paths()["include"]
    proc = subprocess.run(
        [str(CC), "-O0", "-shared", "-fPIC", f"-I{include}", str(c_file), "-o", str(out)],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return out


IMPORTS = (
    "import json\nfrom os import path\n"
    "try:\n    import tomllib\nexcept ImportError:\n    tomllib = None\n"
    "ACCELERATORS = ['cutensor', 'cub']\n"
    + "".join(f"{n} = 'the value of {n}'\n" for n in NAMES)
    + "def lazy():\n    import email\n    return email\n"
)


@pytest.mark.parametrize("opt", ["-O1", "-O2", "-O3", "-Os"])
def test_init_imports_are_the_unguarded_module_level_ones(generated: Path, opt: str) -> None:
    """``import json`` and ``from os import path`` are read; ``tomllib`` (inside ``try: … except
    ImportError``), ``email`` (a function's import) and ``cutensor`` (a string constant) are not —
    all four are whole strings of the same table. A real import of the module in a fresh
    interpreter loads json and os.path, and not email. At -O3 gcc inlines the import's
    ``PyImport_GetModule`` fast path, the names loaded ahead of it (``path`` was missed before)."""
    from cudastack.elf.cython import parse_init_imports

    work = generated.parent / "imports"
    work.mkdir(exist_ok=True)
    (work / "cymod.pyx").write_text(IMPORTS)
    proc = subprocess.run(
        [sys.executable, "-m", "cython", "-3", "cymod.pyx", "-o", "cymod.c"], cwd=work, capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stderr
    module = _compile(work / "cymod.c", 1, opt)
    real = subprocess.run(
        [sys.executable, "-E", "-s", "-c", "import sys, cymod; print(' '.join(sorted(sys.modules)))"],
        cwd=module.parent,
        capture_output=True,
        text=True,
    )
    assert real.returncode == 0, real.stderr
    assert {"json", "os.path"} <= set(real.stdout.split()) and "email" not in real.stdout.split()
    table = parse_string_table(module.read_bytes())
    assert table is not None and {b"json", b"os", b"path", b"tomllib", b"email", b"cutensor"} <= set(table)
    assert parse_init_imports(module.read_bytes()) == {b"json", b"os", b"path"}
    # -O0 (h5py 3.16's wheels): read through the state pointer; the guard is not seen there (an
    # over, never a miss)
    o0 = parse_init_imports(_compile_o0(work / "cymod.c").read_bytes())
    assert o0 is not None and {b"json", b"os", b"path"} <= o0 <= {b"json", b"os", b"path", b"tomllib"}


def test_init_imports_of_a_corrupt_module_never_raise(generated: Path) -> None:
    """A real module with bytes flipped (in its code, its relocations, its unwind table) or cut
    short: the reader answers None or a set, never raises (it runs on every compiled module that a
    failing package imports)."""
    import random

    from cudastack.elf.cython import parse_init_imports

    good = _compile(generated, 1).read_bytes()
    assert parse_init_imports(good)  # the intact module is read
    rng = random.Random(7)
    for n in range(150):
        blob = bytearray(good)
        for _ in range(1 + n % 40):
            blob[rng.randrange(len(blob))] = rng.randrange(256)
        cut = bytes(blob[: rng.randrange(64, len(blob))]) if n % 5 == 0 else bytes(blob)
        result = parse_init_imports(cut)
        assert result is None or isinstance(result, frozenset)


SMALL = (
    "from json import decoder\n"
    + "".join(f"{n} = 'the value of {n}'\n" for n in NAMES[:20])
    + "def lazy():\n    from email import message_from_string\n    return message_from_string\n"
)


@pytest.mark.parametrize("algo", ["zlib", "lzss"])
@pytest.mark.parametrize("opt", ["-O0", "-O2", "-O3"])
def test_a_length_index_built_on_the_stack_is_read(
    tmp_path_factory: pytest.TempPathFactory, generated: Path, opt: str, algo: str
) -> None:
    """A small table's length index is a local array that gcc builds on the stack, one
    bit-field store at a time (at -O0 every table's: h5py 3.16's wheels, whose ``_proxy`` imports
    ``_npystrings``; at -O2 the small tables of scikit-learn 1.9, pandas 3.1, cuda-core 1.2).
    It was not read (None), so nothing such a module imports at init was seen. The strings are
    what a real import of the module holds."""
    work = tmp_path_factory.mktemp("small")
    (work / "cymod.pyx").write_text(SMALL)
    proc = subprocess.run(
        [sys.executable, "-m", "cython", "-3", "cymod.pyx", "-o", "cymod.c"], cwd=work, capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stderr
    if f"compression: {algo}" not in (work / "cymod.c").read_text():
        pytest.skip(f"this Cython does not offer {algo} for this table")
    module = _compile(work / "cymod.c", ALGOS[algo], opt)
    real = subprocess.run(
        [sys.executable, "-E", "-s", "-c", "import sys, cymod; print(cymod.setting_number_7, 'json' in sys.modules)"],
        cwd=module.parent,
        capture_output=True,
        text=True,
    )
    assert real.returncode == 0 and real.stdout.split() == ["the", "value", "of", "setting_number_7", "True"]
    table = parse_string_table(module.read_bytes())
    assert table is not None
    for n in NAMES[:20]:
        assert n.encode() in table and f"the value of {n}".encode() in table
    from cudastack.elf.cython import parse_init_imports

    assert parse_init_imports(module.read_bytes()) == {b"json", b"decoder"}
