"""Installed distributions, read from their metadata files and never imported.

``.dist-info`` (PEP 376/627/610) and legacy ``.egg-info`` directories are parsed with the standard
parsers of their formats (METADATA, PKG-INFO, WHEEL: RFC 822 headers with :mod:`email`; RECORD:
:mod:`csv`), behind small pure functions; anything malformed becomes a :class:`Problem` for the ENV
checks instead of an exception.
"""

from __future__ import annotations

import csv
import functools
import io
import json
import operator
import os
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple

if TYPE_CHECKING:
    import email.message

from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from cudastack.files import read_bytes

# Header fields that may repeat (core metadata spec); others keep their last value.
_MULTI = frozenset({"requires-dist", "provides-extra", "classifier", "project-url", "dynamic", "license-file"})
_WHEEL_MULTI = frozenset({"tag"})
_NATIVE = re.compile(r"\.so(\.[0-9][0-9.]*)?$|\.cubin$|\.fatbin$")
_MAX_METADATA_BYTES = 16 << 20
_MAX_RECORD_BYTES = 64 << 20


@dataclass(frozen=True, slots=True)
class Problem:
    """Something wrong with a distribution's own files (turned into an ENV finding)."""

    kind: str
    """``metadata-encoding``, ``metadata-malformed``, ``metadata-missing``, ``metadata-truncated``,
    ``record-missing``, ``record-malformed``, ``record-truncated``, ``unreadable``,
    ``version-invalid``, ``direct-url-malformed``."""
    path: str
    detail: str


class RecordEntry(NamedTuple):
    """One RECORD row, its three fields as written (88k of them for a large environment: they are
    made straight from the split line, in C; converting fields cost more than all the rest)."""

    path: str
    """Relative to the site directory (may start with ``../``)."""
    hash: str
    """``sha256=<urlsafe b64>``, or empty."""
    size: str
    """Decimal size in bytes, or empty."""


_PY_IN_PATH = re.compile(r"python(\d)\.(\d+)")


def shadowed_sources(record_paths: Iterable[str], site_dir: str) -> set[str]:
    """The ``.py`` paths among ``record_paths`` (relative, as RECORD gives them) that the import
    system never runs: an extension module of the same name in the same directory wins, as
    ``FileFinder`` tries the extension suffixes before ``.py`` (PyAV 18 ships ``av/_core.py``, its
    Cython pure-Python source, beside ``av/_core.abi3.so``; ``import av`` runs the ``.so``). The
    suffixes are those of the Python the site directory is for (``python3.11`` in its path:
    ``.cpython-311-…so``, ``.abi3.so``, ``.so``); with no version in the path, any CPython one.
    A package directory (``X/__init__.py``) wins over both and is never shadowed."""
    paths = list(record_paths)
    m = _PY_IN_PATH.search(site_dir)
    tag = f"cpython-{m.group(1)}{m.group(2)}-" if m else "cpython-"
    stems: set[str] = set()
    for p in paths:
        if ".so" not in p:
            continue  # most paths (a substring test costs a tenth of the cutting below)
        head, _, base = p.rpartition("/")
        stem, dot, rest = base.partition(".")
        if dot and (rest in ("so", "abi3.so") or (rest.startswith(tag) and rest.endswith(".so"))):
            stems.add(f"{head}/{stem}" if head else stem)
    if not stems:
        return set()
    return {p for p in paths if p.endswith(".py") and p[:-3] in stems and not p.endswith("/__init__.py")}


_NORMAL_SITES: dict[str, str] = {}
"""Site directory → its normalized form with one slash after it (:meth:`Distribution.abspath`)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Distribution:
    """One installed distribution."""

    name: str
    """Name as written in METADATA."""
    key: str
    """Normalized (PEP 503) name: ``flashinfer-python``."""
    version: str
    """Version as written in METADATA, local label included when present."""
    meta_dir: str
    """The ``.dist-info`` / ``.egg-info`` path."""
    site_dir: str
    """The directory on ``sys.path`` holding it (RECORD paths are relative to it)."""
    format: str
    """``dist-info`` or ``egg-info``."""
    requires: tuple[str, ...] = ()
    """Requires-Dist lines, markers and extras included."""
    provides_extras: tuple[str, ...] = ()
    requires_python: str | None = None
    record: tuple[RecordEntry, ...] | None = None
    """``None`` when the distribution has no RECORD (or installed-files.txt)."""
    wheel_tags: tuple[str, ...] = ()
    installer: str | None = None
    direct_url: dict[str, object] | None = field(default=None, hash=False)
    problems: tuple[Problem, ...] = ()
    _native: tuple[str, ...] | None = field(default=None, repr=False, compare=False, hash=False)
    _import_time: Any = field(default=None, repr=False, compare=False, hash=False)
    """``env.imports.ImportTime``, computed once when a module of the distribution fails to load."""

    @property
    def parsed_version(self) -> Version | None:
        try:
            return Version(self.version)
        except InvalidVersion:
            return None

    @property
    def public_version(self) -> str:
        """Version without its local label: ``0.6.3+cu130`` → ``0.6.3``."""
        return self.version.split("+", 1)[0]

    @property
    def local_label(self) -> str | None:
        """Local version label: ``2.9.1+cu130`` → ``cu130``."""
        return self.version.split("+", 1)[1] if "+" in self.version else None

    @property
    def editable_path(self) -> str | None:
        """Source directory of an editable install (PEP 610 ``dir_info.editable``)."""
        du = self.direct_url
        if not du:
            return None
        info = du.get("dir_info")
        url = du.get("url")
        if isinstance(info, dict) and info.get("editable") and isinstance(url, str):
            if url.startswith("file://"):
                from urllib.parse import unquote, urlparse

                return unquote(urlparse(url).path)
        return None

    def abspath(self, rel: str) -> str:
        """Absolute path of a RECORD entry: ``os.path.normpath(os.path.join(site_dir, rel))``, and
        for a plain relative path (no ``.`` component, no doubled or trailing slash: nearly every
        entry) the normalized site directory joined to it, which is the same string (ImportTime
        asked this of vllm 0.33's 41,809 Python files, ~0.1 s through ``normpath``)."""
        if rel and rel[0] not in "./" and rel[-1] != "/" and "/." not in rel and "//" not in rel:
            site = _NORMAL_SITES.get(self.site_dir)
            if site is None:
                site = _NORMAL_SITES[self.site_dir] = os.path.normpath(self.site_dir).rstrip("/") + "/"
            return site + rel
        return os.path.normpath(os.path.join(self.site_dir, rel))

    def top_level_names(self) -> list[str]:
        """The top-level modules and packages it says it installed (``top_level.txt``; else its
        name): what stands for its files when it has no RECORD, like the egg-info directories of
        Debian's python3-* packages."""
        try:
            raw = read_bytes(os.path.join(self.meta_dir, "top_level.txt"), 1 << 20).data
        except OSError:
            return [self.key.replace("-", "_")]
        return [n.strip() for n in raw.decode("utf-8", errors="replace").splitlines() if n.strip()]

    def native_files(self) -> Iterator[str]:
        """Absolute paths of the shared objects, cubins and fatbins the distribution installed
        (computed once: several rules ask, and RECORDs hold 88k paths in a large environment)."""
        if self._native is None:
            found: tuple[str, ...] = ()
            if self.record is not None:
                search = _NATIVE.search
                found = tuple(
                    self.abspath(e.path)
                    for e in self.record
                    if (".so" in e.path or e.path.endswith(("bin",))) and search(e.path)
                )
            object.__setattr__(self, "_native", found)
        return iter(self._native or ())


def _header_block(raw: bytes) -> bytes:
    """The bytes up to the first empty line, which ends the headers in any line-ending convention
    (``\n\n`` and ``\n\r\n`` are empty lines whatever came before), so the long description
    (megabytes for some projects) is never fed to the parser. The headers parse the same."""
    cut = raw.find(b"\n\n")
    crlf = raw.find(b"\n\r\n")
    if crlf >= 0 and (cut < 0 or crlf < cut):
        cut = crlf
    return raw[: cut + 1] if cut >= 0 else raw


def parse_metadata(raw: bytes, multi: frozenset[str] = _MULTI) -> tuple[dict[str, list[str]], list[str]]:
    """Parse the header block of a METADATA / PKG-INFO / WHEEL file as RFC 822 headers, with the
    standard library's parser in its ``compat32`` policy, as ``importlib.metadata`` (so pip) and
    ``packaging.metadata.parse_email`` read them: a continuation line starts with a space or tab,
    even one that holds only whitespace (a License with blank lines), and only an empty line ends
    the headers. A line that is no header also ends them (the rest is the body, as pip reads it)
    and is reported.

    Returns ``(fields, problems)``; field names are lower-cased, every value is a list (in file
    order for the fields in ``multi``; the others keep their last value), stripped at both ends,
    folded lines kept as written. Pure.
    """
    problems: list[str] = []
    raw = _header_block(raw)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        problems.append(f"not UTF-8 (byte 0x{raw[exc.start]:02x} at offset {exc.start}); read as Latin-1")
        text = raw.decode("latin-1")
    headers = _simple_headers(text)
    if headers is None:
        import email.parser
        import email.policy

        msg = email.parser.HeaderParser(policy=email.policy.compat32).parsestr(text)
        headers = [(name, str(value)) for name, value in msg.items()]
        problems.extend(_defects(msg, text))
    fields: dict[str, list[str]] = {}
    for name, value in headers:
        key = name.strip().lower()
        val = value.strip()
        if key in multi:
            fields.setdefault(key, []).append(val)
        else:
            fields[key] = [val]
    return fields, problems


# A header line as the email parser's feedparser sees one (``headerRE`` of ``email.feedparser``,
# with a non-empty name), and the characters that make its line splitting differ from ``\n``.
_HEADER_LINE = re.compile(r"[\041-\071\073-\176]+:")
_ODD_BREAK = re.compile("[\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]")


def _simple_headers(text: str) -> list[tuple[str, str]] | None:
    """The headers of a block laid out the usual way (``\n`` or ``\r\n`` line ends, every line a
    ``Name: value`` header or a continuation after one), as ``email``'s ``compat32`` policy
    returns them: value = the first line's text after the colon, left-stripped, plus each
    continuation line as written, joined by the line end. ``None`` for anything else, which the
    library then parses. 5× cheaper than the library (``bench/bench_parsers.py``), which the
    whole-environment scan feels; held equal to it by ``tests/unit/test_parsers_differential.py``.
    """
    sep = "\n"
    if "\r" in text:
        crlf = text.count("\r\n")
        if crlf != text.count("\r") or crlf != text.count("\n"):
            return None  # mixed or bare-CR line ends
        sep = "\r\n"
    if _ODD_BREAK.search(text):
        return None
    lines = text.split(sep)
    if lines[-1] == "":
        lines.pop()
    out: list[tuple[str, str]] = []
    conts: list[str] = []
    match = _HEADER_LINE.match
    for line in lines:
        if line[:1] in (" ", "\t"):
            if not out:
                return None
            conts.append(line)
            continue
        m = match(line)
        if m is None:
            return None
        if conts:
            name, value = out[-1]
            out[-1] = (name, sep.join((value, *conts)))
            conts.clear()
        out.append((line[: m.end() - 1], line[m.end() :].lstrip(" \t")))
    if conts:
        name, value = out[-1]
        out[-1] = (name, sep.join((value, *conts)))
    return out


def _defects(msg: email.message.Message, text: str) -> Iterator[str]:
    """The email parser's complaints about a header block, as one-line problems."""
    for defect in msg.defects:
        what = type(defect).__name__
        if what == "MissingHeaderBodySeparatorDefect":
            body = msg.get_payload()
            line = body.splitlines()[0] if isinstance(body, str) and body else ""
            lineno = len(text[: len(text) - len(body)].splitlines()) + 1 if isinstance(body, str) else 0
            yield (
                f"line {lineno} is not a 'Field: value' header and ends the headers early "
                f"(what follows is read as the body): {line[:60]!r}"
            )
        else:
            yield f"{what}: {str(defect).strip()[:80]!r}"


_make_entry = functools.partial(tuple.__new__, RecordEntry)
_first, _third = operator.itemgetter(0), operator.itemgetter(2)


def parse_record(text: str) -> tuple[list[RecordEntry], list[str]]:
    """Parse a RECORD file: CSV (PEP 376) of path, hash, size, read with :mod:`csv` as installers
    write it. Pure.

    A fast path gives the same rows for the usual file: with no quote and no line break but
    ``\n`` or ``\r\n`` (pip writes those), ``csv`` splits each line on commas and does nothing
    else, so the rows are split
    and made into entries in C (``csv`` with the row checks costs 1.8x: ``bench/bench_parsers.py``,
    92k rows in a large environment); the differential test holds it equal to ``csv.reader`` on
    every RECORD of the suite and the machine.
    """
    entries: list[RecordEntry] = []
    problems: list[str] = []
    lines = text.splitlines() if '"' not in text else None
    # splitlines() also splits at a bare \r, form feed, U+2028...: then it gives more lines than \n
    if lines is not None and len(lines) == text.count("\n") + (not text.endswith("\n") and bool(text)):
        rows = [line.split(",") for line in lines if line]
        if (
            set(map(len, rows)) <= {3}
            and all(map(_first, rows))
            and all(map(str.isdigit, filter(None, map(_third, rows))))
        ):
            return list(map(_make_entry, rows)), problems
    try:
        for lineno, row in enumerate(csv.reader(io.StringIO(text, newline="")), 1):
            if not row:
                continue
            if len(row) > 3 or not row[0]:
                problems.append(f"line {lineno} has {len(row)} fields")
                continue
            hash_ = row[1] if len(row) > 1 else ""
            size = row[2] if len(row) > 2 else ""
            if size and not size.isdigit():
                problems.append(f"line {lineno}: size {size!r} is not a number")
                size = ""
            entries.append(RecordEntry(row[0], hash_, size))
    except csv.Error as exc:
        problems.append(f"CSV error: {exc}")
    return entries, problems


def parse_requires_txt(text: str) -> list[str]:
    """Translate an egg-info ``requires.txt`` into Requires-Dist strings. Pure."""
    out: list[str] = []
    section_marker = ""
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("[") and line.endswith("]"):
            extra, _, marker = line[1:-1].partition(":")
            parts = []
            if extra:
                parts.append(f'extra == "{extra}"')
            if marker:
                parts.append(f"({marker})")
            section_marker = " and ".join(parts)
            continue
        out.append(f"{line}; {section_marker}" if section_marker else line)
    return out


def _read(path: str, limit: int) -> bytes:
    return read_bytes(path, limit).data


def _name_version_from_dirname(dirname: str) -> tuple[str, str]:
    stem = dirname.rsplit(".", 1)[0]
    name, _, version = stem.partition("-")
    return name, version.split("-")[0] if version else ""


def read_distribution(site_dir: str, dirname: str) -> Distribution:
    """Read one ``*.dist-info`` or ``*.egg-info`` entry of ``site_dir``."""
    meta_dir = os.path.join(site_dir, dirname)
    is_egg = dirname.endswith(".egg-info")
    problems: list[Problem] = []
    dir_name, dir_version = _name_version_from_dirname(dirname)

    if is_egg and os.path.isfile(meta_dir):
        meta_file = meta_dir  # a single-file egg-info is the PKG-INFO itself
    else:
        meta_file = os.path.join(meta_dir, "PKG-INFO" if is_egg else "METADATA")
    fields: dict[str, list[str]] = {}
    try:
        got = read_bytes(meta_file, _MAX_METADATA_BYTES)
        raw = got.data
        if got.truncated:  # never a silent cut
            problems.append(
                Problem(
                    "metadata-truncated",
                    meta_file,
                    f"cut off at byte {len(raw)} of {got.size} (read at most {_MAX_METADATA_BYTES} bytes)",
                )
            )
    except FileNotFoundError:
        problems.append(Problem("metadata-missing", meta_file, "file is missing"))
    except OSError as exc:
        problems.append(Problem("unreadable", meta_file, exc.strerror or str(exc)))
    else:
        fields, msgs = parse_metadata(raw)
        for msg in msgs:
            kind = "metadata-encoding" if msg.startswith("not UTF-8") else "metadata-malformed"
            problems.append(Problem(kind, meta_file, msg))

    def one(key: str) -> str | None:
        vals = fields.get(key)
        return vals[-1] if vals else None

    name = one("name") or dir_name
    version = one("version") or dir_version
    if not one("name") or not one("version"):
        if not any(p.kind in ("metadata-missing", "unreadable") for p in problems):
            problems.append(
                Problem("metadata-malformed", meta_file, "no Name/Version header; taken from the directory name")
            )
    try:
        Version(version)
    except InvalidVersion:
        problems.append(Problem("version-invalid", meta_file, f"version {version!r} is not PEP 440"))

    requires = list(fields.get("requires-dist", ()))
    record: tuple[RecordEntry, ...] | None = None
    tags: list[str] = []
    installer: str | None = None
    direct_url: dict[str, object] | None = None
    if is_egg:
        if os.path.isdir(meta_dir):
            try:
                requires = parse_requires_txt(
                    _read(os.path.join(meta_dir, "requires.txt"), _MAX_METADATA_BYTES).decode("utf-8", "replace")
                )
            except OSError:
                pass
            try:
                files = _read(os.path.join(meta_dir, "installed-files.txt"), _MAX_RECORD_BYTES)
            except OSError:
                pass
            else:
                rel = os.path.relpath(meta_dir, site_dir)
                record = tuple(
                    RecordEntry(os.path.normpath(os.path.join(rel, line)), "", "")
                    for line in files.decode("utf-8", "replace").splitlines()
                    if line.strip()
                )
    else:
        record_path = os.path.join(meta_dir, "RECORD")
        try:
            got = read_bytes(record_path, _MAX_RECORD_BYTES)
            raw = got.data
            if got.truncated:  # never a silent cut: keep whole lines and say where it stopped
                raw = raw[: raw.rfind(b"\n") + 1]
                problems.append(
                    Problem(
                        "record-truncated",
                        record_path,
                        f"cut off at byte {len(raw)} of {got.size} (read at most {_MAX_RECORD_BYTES} bytes): "
                        "files listed after it are not checked",
                    )
                )
            text = raw.decode("utf-8", errors="replace")
        except FileNotFoundError:
            problems.append(Problem("record-missing", record_path, "file is missing"))
        except OSError as exc:
            problems.append(Problem("unreadable", record_path, exc.strerror or str(exc)))
        else:
            entries, msgs = parse_record(text)
            record = tuple(entries)
            problems.extend(Problem("record-malformed", record_path, m) for m in msgs[:5])
        try:
            wheel, _ = parse_metadata(_read(os.path.join(meta_dir, "WHEEL"), 1 << 16), _WHEEL_MULTI)
            tags = wheel.get("tag", [])
        except OSError:
            pass
        try:
            installer = _read(os.path.join(meta_dir, "INSTALLER"), 256).decode("utf-8", "replace").strip() or None
        except OSError:
            pass
        du_path = os.path.join(meta_dir, "direct_url.json")
        try:
            du = json.loads(_read(du_path, 1 << 20))
        except FileNotFoundError:
            pass
        except (OSError, ValueError) as exc:
            problems.append(Problem("direct-url-malformed", du_path, str(exc)))
        except RecursionError:
            problems.append(Problem("direct-url-malformed", du_path, "nested too deeply to read"))
        else:
            if isinstance(du, dict):
                direct_url = du
            else:
                problems.append(Problem("direct-url-malformed", du_path, "not a JSON object"))

    return Distribution(
        name=name,
        key=canonicalize_name(name),
        version=version,
        meta_dir=meta_dir,
        site_dir=site_dir,
        format="egg-info" if is_egg else "dist-info",
        requires=tuple(requires),
        provides_extras=tuple(fields.get("provides-extra", ())),
        requires_python=one("requires-python"),
        record=record,
        wheel_tags=tuple(tags),
        installer=installer,
        direct_url=direct_url,
        problems=tuple(problems),
    )


def iter_distributions(site_dirs: Iterable[str]) -> Iterator[Distribution]:
    """Every distribution in ``site_dirs``, in ``sys.path`` order (shadowed copies included)."""
    for site_dir in site_dirs:
        try:
            names = sorted(os.listdir(site_dir))
        except OSError:
            continue
        for name in names:
            if name.endswith((".dist-info", ".egg-info")):
                yield read_distribution(site_dir, name)
