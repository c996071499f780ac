"""Pure parsers of metadata files: the happy path, the odd-but-valid, and the broken."""

from __future__ import annotations

import pytest

from cudastack.env.dists import parse_metadata, parse_record, parse_requires_txt
from cudastack.env.pth import parse_editable_finder
from cudastack.env.versionfiles import parse_py_assignments, parse_version_file


def test_metadata_headers_stop_at_the_body_and_multi_fields_accumulate() -> None:
    raw = b"Name: torch\nVersion: 2.14.1\nRequires-Dist: a\nRequires-Dist: b; extra == 'x'\n\nRequires-Dist: body\n"
    fields, problems = parse_metadata(raw)
    assert problems == []
    assert fields["name"] == ["torch"]
    assert fields["requires-dist"] == ["a", "b; extra == 'x'"]


def test_metadata_continuation_lines_join_the_previous_header() -> None:
    fields, _ = parse_metadata(b"Name: x\nLicense: line one\n        line two\nVersion: 1\n")
    assert fields["license"] == ["line one\nline two"]
    assert fields["version"] == ["1"]


def test_metadata_that_is_not_utf8_is_read_as_latin1_and_said() -> None:
    fields, problems = parse_metadata(b"Name: caf\xe9\nVersion: 1\n")
    assert fields["name"] == ["café"]
    assert problems and "not UTF-8" in problems[0] and "0xe9" in problems[0]


def test_metadata_garbage_lines_are_problems_not_exceptions() -> None:
    fields, problems = parse_metadata(b"\x00\x01\x02 no colon here\nName: ok\n")
    assert fields["name"] == ["ok"]
    assert len(problems) == 1


def test_record_rows_with_quotes_commas_and_no_hash() -> None:
    text = 'a/b.py,sha256=abc,12\n"dir, with comma/x.so",sha256=def,3\nx.dist-info/RECORD,,\n'
    entries, problems = parse_record(text)
    assert problems == []
    assert [e.path for e in entries] == ["a/b.py", "dir, with comma/x.so", "x.dist-info/RECORD"]
    assert entries[2].hash == "" and entries[0].size == "12"


def test_record_bad_rows_are_reported() -> None:
    entries, problems = parse_record("a,b,c,d\nok.py,,notanumber\n")
    assert [e.path for e in entries] == ["ok.py"]
    assert len(problems) == 2


def test_requires_txt_sections_become_markers() -> None:
    text = "numpy\n\n[gui]\npyqt5\n\n[:sys_platform == 'win32']\npywin32\n\n[cuda:python_version < '3.12']\ncupy\n"
    assert parse_requires_txt(text) == [
        "numpy",
        'pyqt5; extra == "gui"',
        "pywin32; (sys_platform == 'win32')",
        "cupy; extra == \"cuda\" and (python_version < '3.12')",
    ]


def test_torch_version_py_is_read_without_running_it() -> None:
    src = (
        "from typing import Optional\n__version__ = '2.14.1+cu130'\ncuda: Optional[str] = '13.0'\n"
        "hip: Optional[str] = None\nimport os\nos.system('echo must not run')\n"
    )
    assert parse_py_assignments(src) == {"__version__": "2.14.1+cu130", "cuda": "13.0", "hip": None}


def test_torchvision_runtime_cuda_is_skipped_not_evaluated() -> None:
    src = (
        "__version__ = '0.29.1+cu130'\n"
        "from torchvision.extension import _check_cuda_version\ncuda = _check_cuda_version()\n"
    )
    assert parse_py_assignments(src) == {"__version__": "0.29.1+cu130"}


@pytest.mark.parametrize("raw", [b"def (:", b"\xff\xfe\x00", b"x = " + b"[" * 5000 + b"]" * 5000])
def test_version_file_that_does_not_parse_is_a_problem(raw: bytes) -> None:
    vf = parse_version_file("x/version.py", "py", raw)  # never raises
    # the problem must be set: "values == {} or ..." passed as well when it never was
    assert vf.problem is not None and vf.problem.startswith("cannot parse: "), vf
    assert vf.values == {}


def test_xformers_cpp_lib_json() -> None:
    vf = parse_version_file("xformers/cpp_lib.json", "json", b'{"version": {"torch": "2.9.0+cu128"}}')
    assert vf.values["version"] == {"torch": "2.9.0+cu128"}
    assert parse_version_file("p", "json", b"[1]").problem == "not a JSON object"
    assert parse_version_file("p", "json", b"{nope").problem is not None


def test_editable_finder_mapping_is_read_with_ast() -> None:
    src = "import sys\nMAPPING = {'sglang': '/src/sglang/python/sglang'}\nNAMESPACES = {}\ndef install(): ...\n"
    assert parse_editable_finder(src) == {"sglang": "/src/sglang/python/sglang"}
    assert parse_editable_finder("MAPPING = compute()") == {}
    assert parse_editable_finder("def (") == {}
