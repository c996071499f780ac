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


def _compile(c_file: Path, algo: int | None, opt: str = "-O2", cwd: Path | None = None) -> Path:
    """``c_file`` built at ``opt`` with string compression ``algo`` (None: the Cython's default),
    named to gcc by its path from ``cwd`` (its own folder by default). That path is the module's
    one string that comes from where it is built (``__pyx_cfilenm = __FILE__``): its length moves
    what follows it in ``.rodata``. Relative, the layout does not depend on pytest's basetemp;
    :data:`DIRS` varies it."""
    out = c_file.parent / f"a{algo}{opt}" / f"cymod{sysconfig.get_config_var('EXT_SUFFIX')}"
    out.parent.mkdir(exist_ok=True)
    cwd = cwd or c_file.parent
    include = sysconfig.get_paths()["include"]
    flags = [opt] if algo is None else [opt, f"-DCYTHON_COMPRESS_STRINGS={algo}"]
    cmd = [str(CC), *flags, "-shared", "-fPIC", f"-I{include}", str(c_file.relative_to(cwd)), "-o", str(out)]
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
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
    these reads yet.

    -O0 reads through the state pointer (``lea rax, [rip+state]; mov reg, [rax+disp]``), and they
    are resolved: exactly the strings the C of the exec function names, nothing of the lazy
    import (``__Pyx_CreateCodeObjects`` is a function of its own there). This test once expected
    None at -O0: that None was the -O0 table not being read at all, which happened only where the
    build directory's path put the length index right after the NUL-padded end of a string."""
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
    o0 = parse_exec_reads(_compile_o0(generated).read_bytes())
    assert o0 == _c_exec_strings(generated)
    assert {b"json", b"decoder", b"lazy"} <= o0 and not {b"email", b"message_from_string"} & o0


def _compile_o0(c_file: Path) -> Path:
    """-O0 with the Cython's default compression (LZSS from 3.3), as h5py 3.16's wheels."""
    return _compile(c_file, None, "-O0")


_C_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "a": "\a", "b": "\b", "f": "\f", "v": "\v"}


def _c_table(c_file: Path) -> tuple[tuple[bytes, ...], int]:
    """The string table as the generated C states it (the blob of its ``compression: none``
    branch, split by its length arrays), and how many of the strings are text (the rest: bytes)."""
    text = c_file.read_text()
    blob = re.search(r"compression: none \((\d+) bytes\) \*/\s*static const char \w+\[\] = (.*?);\n", text, re.S)
    assert blob is not None
    data = bytearray()
    for piece in re.findall(r'"((?:[^"\\]|\\.)*)"', blob.group(2), re.S):  # C's escapes: octal, or one character
        for octal, escaped, char in re.findall(r"\\([0-7]{1,3})|\\(.)|(.)", piece, re.S):
            if octal:
                data.append(int(octal, 8))
            else:
                data += _C_ESCAPES.get(escaped, escaped).encode() if escaped else char.encode()
    assert len(data) == int(blob.group(1))
    arrays = [re.search(rf"{kind}_length_index\[\] = \{{(.*?)\}};", text) for kind in ("str", "bytes")]
    lengths = [[int(n) for n in re.findall(r"\{(\d+)\}", a.group(1))] if a else [] for a in arrays]
    out, pos = [], 0
    for n in lengths[0] + lengths[1]:
        out.append(bytes(data[pos : pos + n]))
        pos += n
    assert pos == len(data)
    return tuple(out), len(lengths[0])


def _c_exec_strings(c_file: Path) -> set[bytes]:
    """The strings of the table that the C of the module's exec function names (``__pyx_n_u_json``
    and the like, macros for ``__pyx_string_tab[i]``): what its module-level code looks up."""
    text = c_file.read_text()
    index = dict(re.findall(r"#define (__pyx_\w+) __pyx_string_tab\[(\d+)\]", text))
    body = re.search(r"^static CYTHON_SMALL_CODE int __pyx_pymod_exec_cymod\(.*?^\{(.*?)^\}", text, re.S | re.M)
    assert body is not None and index
    table, _text = _c_table(c_file)
    return {table[int(index[name])] for name in re.findall(r"\b__pyx_\w+", body.group(1)) if name in index}


IMPORTS = (
    "import json\nfrom os import path\n"
    "try:\n    import tomllib\nexcept ImportError:\n    tomllib = None\n"
    "ACCELERATORS = ['cutensor', 'cub']\n"
    + "".join(f"{n} = 'the value of {n}'\n" for n in NAMES)
    + "def lazy():\n    import email\n    return email\n"
)


@pytest.fixture(scope="module")
def imports_c(generated: Path) -> Path:
    """:data:`IMPORTS` through Cython: the C, which does not depend on where it is built."""
    work = generated.parent / "imports"
    work.mkdir(exist_ok=True)
    (work / "cymod.pyx").write_text(IMPORTS)
    proc = subprocess.run(
        [sys.executable, "-m", "cython", "-3", "cymod.pyx", "-o", "cymod.c"], cwd=work, capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stderr
    return work / "cymod.c"


@pytest.mark.parametrize("opt", ["-O1", "-O2", "-O3", "-Os"])
def test_init_imports_are_the_unguarded_module_level_ones(imports_c: Path, opt: str) -> None:
    """``import json`` and ``from os import path`` are read; ``tomllib`` (inside ``try: … except
    ImportError``), ``email`` (a function's import) and ``cutensor`` (a string constant) are not —
    all four are whole strings of the same table. A real import of the module in a fresh
    interpreter loads json and os.path, and not email. At -O3 gcc inlines the import's
    ``PyImport_GetModule`` fast path, the names loaded ahead of it (``path`` was missed before)."""
    from cudastack.elf.cython import parse_init_imports

    module = _compile(imports_c, 1, opt)
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
    o0 = parse_init_imports(_compile_o0(imports_c).read_bytes())
    assert o0 is not None and {b"json", b"os", b"path"} <= o0 <= {b"json", b"os", b"path", b"tomllib"}


DIRS = ["b" * 20, "b" * 33, "b" * 44, "b" * 101]
"""Where :func:`test_the_reader_does_not_depend_on_the_build_directory` builds, named to gcc by a
relative path: the same layouts whatever pytest's basetemp. The layout repeats every 32 characters
of the path; before the fix, 33 and 101 lost the -O0 table (and split :data:`SOURCE`'s -Os
table wrong, as every length of 4k+1 did), 44 lost :data:`IMPORTS`' -Os table, 20 read all."""


@pytest.mark.parametrize("where", DIRS, ids=lambda d: f"dir{len(d)}")
def test_the_reader_does_not_depend_on_the_build_directory(generated: Path, imports_c: Path, where: str) -> None:
    """The path of the C file is the one string of the module that comes from where it is built
    (``__pyx_cfilenm = __FILE__``); its length moves the rest of ``.rodata``. The length index
    then sometimes follows the last bytes of a string (``e\\0\\0\\0``, ``od\\0\\0`` of ``init
    cymod``: a small unit, read as a first length), directly (-O0's template of the local index,
    aligned to 4 only) or after padding. The -O0 table was not read (None: the -O0 checks failed
    with a basetemp of 22 characters, passed with the default), an -Os table was split wrong.
    The table must be the one the C states, and the imports the same, from every directory."""
    from cudastack.elf.cython import parse_exec_reads, parse_init_imports

    modules = {}
    for name, c_source in (("imports", imports_c), ("source", generated)):
        c_file = generated.parent / (where[:-1] + name[0]) / "cymod.c"  # gcc's path: len(where) + 8
        c_file.parent.mkdir(exist_ok=True)
        c_file.write_text(c_source.read_text())
        for algo, opt in ((None, "-O0"), (1, "-Os"), (1, "-O2")) if name == "imports" else ((1, "-Os"),):
            modules[name, opt] = c_file, _compile(c_file, algo, opt, cwd=generated.parent).read_bytes()
    for c_file, module in modules.values():
        want, texts = _c_table(c_file)
        table = parse_string_table(module)
        assert table is not None and table[:texts] == want[:texts]
        # the bytes strings (code objects' line tables): a one-entry index is an operand, the rest
        # of the blob one piece after the text strings (and the padding's 0s)
        assert b"".join(table[texts:]) == b"".join(want[texts:])
    for opt in ("-Os", "-O2"):
        assert parse_init_imports(modules["imports", opt][1]) == {b"json", b"os", b"path"}
    assert parse_init_imports(modules["source", "-Os"][1]) == {b"json", b"decoder"}
    c_file, o0 = modules["imports", "-O0"]
    found = parse_init_imports(o0)
    assert found is not None and {b"json", b"os", b"path"} <= found <= {b"json", b"os", b"path", b"tomllib"}
    assert parse_exec_reads(o0) == _c_exec_strings(c_file)


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
