"""METADATA and RECORD read two ways, with equal results: cudastack's parsers against the
reference readers (``packaging.metadata.parse_email`` for the whole METADATA, ``csv.reader``
for RECORD), on every file the test suite creates, the real fixtures copied from wheels, and
every dist-info on this machine."""

from __future__ import annotations

import csv
import glob
import io
import site
import sys
from pathlib import Path

import packaging.metadata
import pytest

from cudastack.env.dists import RecordEntry, _header_block, _simple_headers, parse_metadata, parse_record
from tests import scenario

FIXTURES = Path(__file__).resolve().parents[1] / "data" / "metadata"
COMPARED = ("metadata-version", "name", "version", "requires-python", "requires-dist", "provides-extra")
_MULTI = {"requires-dist", "provides-extra"}


def machine_site_dirs() -> list[str]:
    dirs = [*site.getsitepackages(), site.getusersitepackages(), "/usr/lib/python3/dist-packages"]
    dirs += glob.glob("/work/venvs/*/lib/python*/site-packages")
    dirs += glob.glob(f"{sys.base_prefix}/../*/lib/python*/site-packages")
    return sorted({str(Path(d).resolve()) for d in dirs if Path(d).is_dir()})


def machine_files(name: str) -> list[Path]:
    out: set[Path] = set()
    for d in machine_site_dirs():
        out.update(Path(p) for p in glob.glob(f"{d}/*.dist-info/{name}"))
        if name == "METADATA":
            out.update(Path(p) for p in glob.glob(f"{d}/*.egg-info/PKG-INFO"))
    return sorted(out)


@pytest.fixture(scope="module")
def suite_site(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    """Every scenario of the suite, materialised as the scenario tests do."""
    root = tmp_path_factory.mktemp("scenarios")
    return [scenario.materialize(scenario.load(n), root / n) for n in scenario.all_names()]


def reference_metadata(raw: bytes) -> dict[str, list[str]]:
    """The compared fields as ``packaging`` reads the whole file (values stripped, as ours)."""
    parsed, unparsed = packaging.metadata.parse_email(raw)
    out: dict[str, list[str]] = {}
    for key in COMPARED:
        value = parsed.get(key.replace("-", "_"), unparsed.get(key))  # type: ignore[misc]
        if value is None:
            continue
        values = [value] if isinstance(value, str) else list(value)  # type: ignore[arg-type]
        if key not in _MULTI:
            values = values[-1:]  # a repeated single-use field: ours keeps the last, as pip does
        out[key] = [v.strip() for v in values]
    return out


def ours(raw: bytes) -> dict[str, list[str]]:
    fields, _ = parse_metadata(raw)
    return {k: v for k, v in fields.items() if k in COMPARED}


def reference_record(text: str) -> list[RecordEntry]:
    return [RecordEntry(*r) for r in csv.reader(io.StringIO(text, newline="")) if r]


def check_metadata_files(paths: list[Path]) -> int:
    for p in paths:
        raw = p.read_bytes()
        assert ours(raw) == reference_metadata(raw), p
    return len(paths)


def check_record_files(paths: list[Path]) -> int:
    for p in paths:
        text = p.read_bytes().decode("utf-8", "replace")
        entries, problems = parse_record(text)
        if not problems:
            assert entries == reference_record(text), p
    return len(paths)


def test_real_metadata_fixtures_keep_every_header_after_a_blank_license_line() -> None:
    """scipy 1.17.0, sglang 0.5.23 and tiktoken 0.14.0, copied from their wheels: each has a
    License with a whitespace-only continuation line, after which the old parser saw nothing."""
    counts = {p.name: len(parse_metadata(p.read_bytes())[0].get("requires-dist", [])) for p in FIXTURES.iterdir()}
    assert counts == {"scipy-1.17.0.METADATA": 38, "sglang-0.5.23.METADATA": 139, "tiktoken-0.14.0.METADATA": 3}
    fields, problems = parse_metadata((FIXTURES / "scipy-1.17.0.METADATA").read_bytes())
    assert problems == []
    assert "numpy<2.7,>=1.26.4" in fields["requires-dist"]
    assert check_metadata_files(sorted(FIXTURES.iterdir())) == 3


def test_metadata_the_suite_creates_parses_as_packaging_reads_it(suite_site: list[Path]) -> None:
    files = [p for s in suite_site for p in sorted(s.glob("*.dist-info/METADATA"))]
    assert check_metadata_files(files) > 30


def test_record_the_suite_creates_parses_as_csv_reads_it(suite_site: list[Path]) -> None:
    files = [p for s in suite_site for p in sorted(s.glob("*.dist-info/RECORD"))]
    assert check_record_files(files) > 30


def test_every_metadata_on_this_machine_parses_as_packaging_reads_it() -> None:
    files = machine_files("METADATA")
    if not files:
        pytest.skip("no dist-info on this machine")
    check_metadata_files(files)


def test_every_record_on_this_machine_parses_as_csv_reads_it() -> None:
    files = machine_files("RECORD")
    if not files:
        pytest.skip("no dist-info on this machine")
    check_record_files(files)


@pytest.mark.parametrize(
    "text",
    [
        "a.py,sha256=x,1\nb\x0cc.py,sha256=y,2\n",  # a form feed inside a path is no line break for csv
        "a.py,sha256=x,1\nb\u2028c.py,,\n",  # nor is a Unicode line separator
        "a.py,sha256=x,1\r\nb.py,,\r\n",  # CRLF rows, as some installers write them
        "a.py,,\n\nb.py,,\n",  # an empty line
        "a.py,,\r\n\r\nb.py,,\nc.py,,\r\n",  # CRLF and LF mixed, an empty line
        "a.py,,\rb.py,,\r\n",  # a bare CR ends a line for csv
    ],
)
def test_record_fast_path_splits_lines_as_csv_does(text: str) -> None:
    entries, problems = parse_record(text)
    assert problems == []
    assert entries == reference_record(text)


@pytest.mark.parametrize(
    "raw",
    [
        b"Name: a\nLicense: x\n   \n   y\nRequires-Dist: b\n\nbody\n",  # whitespace-only continuation
        b"Name: a\r\nVersion: 1\r\nRequires-Dist: b\r\n\r\nRequires-Dist: body\r\n",  # CRLF
        b"Name: a\nVersion: 1\n\tfolded\nRequires-Dist: b\n",  # tab continuation
        b"Name: a\nNAME: b\nrequires-dist: c\nRequires-Dist: d\n",  # case and repeats
        b"Name: caf\xc3\xa9\nVersion: 1\n",  # UTF-8
        b"Name: a\nthis is no header\nRequires-Dist: b\n",  # a non-header line ends the headers
    ],
)
def test_odd_but_real_header_layouts_parse_as_packaging_reads_them(raw: bytes) -> None:
    assert ours(raw) == reference_metadata(raw)


def library_headers(raw: bytes) -> list[tuple[str, str]]:
    import email.parser
    import email.policy

    text = _header_block(raw).decode("utf-8", "replace")
    return [(k, str(v)) for k, v in email.parser.HeaderParser(policy=email.policy.compat32).parsestr(text).items()]


def test_hand_fast_path_returns_what_the_email_parser_returns_wherever_it_answers(suite_site: list[Path]) -> None:
    """``_simple_headers`` (kept for speed: bench/bench_parsers.py) against ``email`` itself,
    field by field and unstripped, on every METADATA/WHEEL of the suite, the fixtures and the machine."""
    files = [p for s in suite_site for p in s.glob("*.dist-info/*") if p.name in ("METADATA", "WHEEL")]
    files += [*FIXTURES.iterdir(), *machine_files("METADATA"), *machine_files("WHEEL")]
    answered = 0
    for p in files:
        raw = p.read_bytes()
        fast = _simple_headers(_header_block(raw).decode("utf-8", "replace"))
        if fast is not None:
            answered += 1
            assert fast == library_headers(raw), p
    assert answered > 0.9 * len(files)


@pytest.mark.parametrize(
    "text",
    [
        "Name: a\nLicense: x\n   \n   y\nRequires-Dist: b\n",
        "Name: a\nVersion:1\n\tfolded\n  \nRequires-Dist:   b  \n",
        "Name: a\nNAME: b\nrequires-dist: c\nRequires-Dist: d\nX:\n",
        "A: 1\nB: two: colons\nC:\t\ttabbed\n   last\n",
        "Name: a\r\nLicense: x\r\n   \r\n   y\r\nVersion: 1\r\n",
    ],
)
def test_hand_fast_path_equals_email_on_odd_layouts(text: str) -> None:
    fast = _simple_headers(text)
    assert fast is not None and fast == library_headers(text.encode())


@pytest.mark.parametrize(
    "text",
    [
        "Name: a\r\nVersion: 1\n",
        "Name: a\rVersion: 1\r",
        "A: \x0c\n",
        " first is a continuation\n",
        "no header\n",
        ": x\n",
    ],
)
def test_hand_fast_path_leaves_the_rest_to_the_library(text: str) -> None:
    assert _simple_headers(text) is None


def test_metadata_and_record_of_the_wheels_the_suite_builds(tmp_path: Path) -> None:
    """tests/wheels.make_wheel writes the METADATA/WHEEL/RECORD that pip installs in the install
    and patch tests: read both ways too."""
    import zipfile

    from tests import wheels

    whl = wheels.make_wheel(
        tmp_path, "demo-pkg", "1.0", {"demo_pkg/__init__.py": b""}, ("numpy>=1; extra == 'x'",), scripts={"d": "d:m"}
    )
    with zipfile.ZipFile(whl) as zf:
        for name in zf.namelist():
            data = zf.read(name)
            if name.endswith(("/METADATA", "/WHEEL")):
                assert ours(data) == reference_metadata(data), name
                assert _simple_headers(data.decode()) == library_headers(data), name
            elif name.endswith("/RECORD"):
                text = data.decode()
                assert parse_record(text) == (reference_record(text), []), name
