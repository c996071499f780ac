"""Malformed input: whatever the bytes, parsers return problems, never raise."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from cudastack.env.dists import parse_metadata, parse_record, parse_requires_txt
from cudastack.env.pth import parse_editable_finder
from cudastack.env.versionfiles import parse_version_file

REAL_METADATA = (
    b"Metadata-Version: 2.1\nName: torch\nVersion: 2.14.1\nRequires-Dist: filelock\n"
    b'Requires-Dist: cuda-toolkit[cublas,cudart]==13.0.3; platform_system == "Linux"\n\nbody\n'
)


@settings(max_examples=2000, deadline=None)
@given(st.binary(max_size=400))
def test_metadata_parser_never_raises(raw: bytes) -> None:
    fields, problems = parse_metadata(raw)
    assert isinstance(fields, dict) and isinstance(problems, list)


@settings(max_examples=2000, deadline=None)
@given(st.integers(0, len(REAL_METADATA) - 1), st.integers(0, 255))
def test_byte_flipped_real_metadata_never_raises(pos: int, byte: int) -> None:
    raw = bytearray(REAL_METADATA)
    raw[pos] = byte
    parse_metadata(bytes(raw))


@settings(max_examples=1000, deadline=None)
@given(st.text(max_size=400))
def test_record_and_requires_parsers_never_raise(text: str) -> None:
    parse_record(text)
    parse_requires_txt(text)
    parse_editable_finder(text)


@settings(max_examples=1000, deadline=None)
@given(st.binary(max_size=300), st.sampled_from(["py", "json", "py-version"]))
def test_version_file_parser_never_raises(raw: bytes, kind: str) -> None:
    parse_version_file("f", kind, raw)
