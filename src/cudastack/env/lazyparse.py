"""``ast.parse`` with function bodies parsed when first read.

Most of a package's Python that the import model parses is the bodies of functions and methods
that nothing reads (vllm 0.33: 61 % of the lines parsed; ``ast.parse`` was a fifth of the doctor's
CPU). :func:`parse` parses a *skeleton* of the file: the same bytes, except that the body of each
outermost ``def`` whose body is an indented block is replaced by one stand-in statement that ends
where the real body ends. Every node outside those bodies is the node ``ast.parse`` makes, with
the same positions (the ``def`` node's own and its enclosing statements' ends included). Reading
such a ``def`` node's ``body`` parses that function alone, at its own lines and columns, once.

Where a body ends is decided from the bytes, without parsing: strings and comments are blanked
(:func:`_blank`: one regular expression, :data:`_LEX`; on Python 3.12 and later an f-string with a
replacement field is read by :func:`_fstring_end`, as PEP 701 lets its fields hold its own quote
and nested f-strings), and a body ends at the first later line that starts a logical line (not
inside a string, not after a backslash) at the ``def``'s indentation or less. The brackets of
each body must balance, else a line inside brackets could have ended it. A file is parsed whole,
as by ``ast.parse``, wherever that reading could be wrong: a tab, form feed, vertical tab or
carriage return, a NUL, a BOM or a coding cookie other than UTF-8, a quote that starts no string,
an f-string field with a comment or a backslash. A header with a ``lambda`` keeps its body.
``tests/unit/test_lazyparse.py`` compares the result with ``ast.parse`` on every Python file of
the test environments (and of Python 3.12's and 3.13's standard libraries, under those Pythons);
``tools/lazyparse_check.py`` does it on any directory.

Laziness needs ``body`` to be computed on access while ``type(node) is ast.FunctionDef`` still
holds (the import model dispatches on exact types): importing this module sets a data descriptor
on ``ast.FunctionDef.body`` and ``ast.AsyncFunctionDef.body`` that stores and returns the value in
the node's ``__dict__`` as before, and parses a lazy body on its first read. A function body that
does not compile (``ast.parse`` of the whole file would have failed) reads as one ``pass``.
"""

from __future__ import annotations

import ast
import collections
import re
import sys
import warnings
from collections.abc import Iterator
from typing import Any

_MIN_BYTES = 4096
"""Smaller files are parsed whole: blanking them costs about what laziness saves."""

_FILENAME = "<cudastack-parse>"
"""The file name the target's code is compiled under: the warnings compiling it gives (Python 3.12's
``SyntaxWarning: invalid escape sequence``) are about the target, not for this tool's user to see."""
warnings.filterwarnings("ignore", category=SyntaxWarning, module=re.escape(_FILENAME))
warnings.filterwarnings("ignore", category=DeprecationWarning, module=re.escape(_FILENAME))


def _parse(raw: bytes) -> ast.Module:
    return ast.parse(raw, _FILENAME)


_LAZY = "_cudastack_lazy"
"""The key in a lazy ``def`` node's ``__dict__``: ``(raw, start, end, line, indent)``."""


class _Body:
    """``FunctionDef.body``: the value in the node's ``__dict__``, parsed first when lazy."""

    def __get__(self, node: Any, owner: type | None = None) -> Any:
        if node is None:
            return self
        d = node.__dict__
        lazy = d.get(_LAZY)
        if lazy is not None:
            d["body"] = _body(*lazy)
            del d[_LAZY]
        try:
            return d["body"]
        except KeyError:
            raise AttributeError(f"'{type(node).__name__}' object has no attribute 'body'") from None

    def __set__(self, node: Any, value: Any) -> None:
        d = node.__dict__
        d.pop(_LAZY, None)
        d["body"] = value

    def __delete__(self, node: Any) -> None:
        d = node.__dict__
        d.pop(_LAZY, None)
        try:
            del d["body"]
        except KeyError:
            raise AttributeError("body") from None


for _cls in (ast.FunctionDef, ast.AsyncFunctionDef):
    if not isinstance(_cls.__dict__.get("body"), _Body):
        _cls.body = _Body()  # type: ignore[assignment]


def walk_parsed(node: ast.AST) -> Iterator[ast.AST]:
    """``ast.walk`` that never parses a lazy body: the nodes parsed so far (a body the import model
    ran is parsed; one nobody read holds nothing a question about running code wants)."""
    todo = collections.deque([node])
    while todo:
        n = todo.popleft()
        todo.extend(children_parsed(n))
        yield n


def children_parsed(node: ast.AST) -> Iterator[ast.AST]:
    """``ast.iter_child_nodes`` that never parses a lazy body (see :func:`walk_parsed`)."""
    if _LAZY not in getattr(node, "__dict__", ()):
        yield from ast.iter_child_nodes(node)
        return
    for name in node._fields:
        if name != "body":
            v = getattr(node, name, None)
            for c in v if isinstance(v, list) else [v]:
                if isinstance(c, ast.AST):
                    yield c


def may_hold(node: ast.AST, word: bytes) -> bool:
    """False only when ``node`` is a ``def`` whose body has not been parsed and whose bytes (the
    ``def`` line to the body's end) do not hold ``word``: then no token of its body or header is
    ``word`` (``global``), and a search for one needs no parse. True otherwise."""
    lazy = node.__dict__.get(_LAZY)
    return lazy is None or lazy[0].find(word, lazy[1], lazy[2]) >= 0


def _body(raw: bytes, start: int, end: int, line: int, indent: int) -> list[ast.stmt]:
    """The body of the ``def`` at ``raw[start:end]`` (0-based ``line``), parsed at its own lines
    and columns: an indented one inside ``if 1:`` on the line before."""
    head = b"\n" * line if indent == 0 else b"\n" * (line - 1) + b"if 1:\n"
    try:
        tree = _parse(head + raw[start:end])
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return [ast.Pass(lineno=line + 2, col_offset=indent + 1, end_lineno=line + 2, end_col_offset=indent + 5)]
    node = tree.body[0]
    if indent:
        node = node.body[0]  # type: ignore[attr-defined]
    return node.body  # type: ignore[attr-defined,no-any-return]


_Q3, _q3 = b'"' * 3, b"'" * 3
_LEX = re.compile(
    rb"#[^\n]*"
    + rb'|"(?:""(?:[^"\\]++|\\.|"(?!""))*+' + _Q3 + rb'|(?:[^"\\\n]++|\\.)*+")'
    + rb"|'(?:''(?:[^'\\]++|\\.|'(?!''))*+" + _q3 + rb"|(?:[^'\\\n]++|\\.)*+')",
    re.S,
)  # fmt: skip
"""A comment or a string literal (its prefix letters stay outside the match: they do not change
where a string ends, a backslash escapes the next byte in raw strings too). Python before 3.12
allows neither the string's own quote nor a backslash in an f-string's replacement fields."""

_DEF = re.compile(rb"\n *(?:def|async[ \t]+def)[ \t]")
"""A line that starts a ``def`` (the newline before it: a literal first byte lets the search skip
to newlines, where ``^`` under ``re.M`` tries every byte; no group: 3x faster)."""
_BRACKETS = re.compile(rb"[()\[\]{}:]")
_COOKIE = re.compile(rb"^[ \t\f]*#.*?coding[:=][ \t]*([-\w.]+)", re.M)


def _blank(raw: bytes) -> bytes | None:
    """``raw`` with each comment's bytes made spaces and each string's made ``\\x01`` (its first
    byte ``\\x02``: a line may start with a string), newlines kept: every other byte stays where it
    was. None where a quote is not where a string starts (a file ``ast.parse`` refuses) or an
    f-string is beyond :func:`_fstring_end`."""
    nested = sys.version_info >= (3, 12)
    out: list[bytes] = []
    at = 0
    search = _LEX.search
    while (m := search(raw, at)) is not None:
        s, e = m.span()
        gap = raw[at:s]
        if b'"' in gap or b"'" in gap:
            return None  # a quote no string starts at: an unterminated string
        out.append(gap)
        if raw[s] == 0x23:  # '#'
            out.append(b" " * (e - s))
            at = e
            continue
        if nested and b"{" in raw[s:e] and _prefix(raw, s) in _F_PREFIXES:
            end = _fstring_end(raw, s)
            if end is None:
                return None
            e = end
        text = raw[s:e]
        if b"\n" in text:
            out.append(b"\x02" + b"\n".join(b"\x01" * len(p) for p in text.split(b"\n"))[1:])
        else:
            out.append(b"\x02" + b"\x01" * (e - s - 1))
        at = e
    rest = raw[at:]
    if b'"' in rest or b"'" in rest:
        return None
    out.append(rest)
    return b"".join(out)


_F_PREFIXES = frozenset(
    {bytes([f]) for f in b"fFtT"} | {bytes(p) for f in b"fFtT" for r in b"rR" for p in ((f, r), (r, f))}
)
"""The prefixes of f-strings (and Python 3.14's t-strings), in any case."""


def _prefix(raw: bytes, quote: int) -> bytes:
    """The identifier characters right before the quote at ``quote`` (a string's prefix, or a
    keyword: ``if"x"``)."""
    k = quote
    while k > 0 and (raw[k - 1] in _IDENT):
        k -= 1
    return raw[k:quote]


_IDENT = frozenset(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_")
_F_TEXT = re.compile(rb"[{}\\\n'\"]")
"""What ends a run of an f-string's literal text or format spec."""
_F_EXPR = re.compile(rb"[{}()\[\]'\"#:\\\n]")


def _string_end(raw: bytes, s: int) -> int | None:
    """The end of the string literal whose opening quote is at ``s``, in Python 3.12's grammar
    (PEP 701: an f-string's replacement fields may hold any expression, strings with its own
    quote and nested f-strings included)."""
    if _prefix(raw, s) in _F_PREFIXES:
        return _fstring_end(raw, s)
    m = _LEX.match(raw, s)
    return m.end() if m is not None else None


def _fstring_end(raw: bytes, s: int) -> int | None:
    """The end of the f-string whose opening quote is at ``s`` (None where this reading is not
    sure: ``ast.parse`` then reads the file whole)."""
    q = raw[s]
    quote = bytes([q]) * 3 if raw.startswith(bytes([q]) * 3, s) else bytes([q])
    triple = len(quote) == 3
    i = s + len(quote)
    while (m := _F_TEXT.search(raw, i)) is not None:
        j = m.start()
        c = raw[j]
        if c == 0x5C:  # a backslash escapes the next byte, but never a brace
            i = j + 1 if raw[j + 1 : j + 2] in (b"{", b"}") else j + 2
        elif c == 0x0A:
            if not triple:
                return None
            i = j + 1
        elif c == q:
            if raw.startswith(quote, j):
                return j + len(quote)
            i = j + 1
        elif c == 0x7B:  # '{'
            if raw[j + 1 : j + 2] == b"{":
                i = j + 2
                continue
            end = _field_end(raw, j + 1, q, triple)
            if end is None:
                return None
            i = end
        elif c == 0x7D:  # '}'
            i = j + 2 if raw[j + 1 : j + 2] == b"}" else j + 1
        else:  # the other quote
            i = j + 1
    return None


def _field_end(raw: bytes, i: int, q: int, triple: bool) -> int | None:
    """The end of a replacement field whose expression starts at ``i`` (after its ``}``)."""
    depth = 0
    while (m := _F_EXPR.search(raw, i)) is not None:
        j = m.start()
        c = raw[j]
        if c in b"([{":
            depth += 1
            i = j + 1
        elif c in b")]":
            depth -= 1
            if depth < 0:
                return None
            i = j + 1
        elif c == 0x7D:  # '}'
            if depth == 0:
                return j + 1
            depth -= 1
            i = j + 1
        elif c == 0x22 or c == 0x27:  # a string inside the expression
            end = _string_end(raw, j)
            if end is None:
                return None
            i = end
        elif c == 0x3A:  # ':'
            if depth == 0:
                return _spec_end(raw, j + 1, q, triple)
            i = j + 1
        elif c == 0x0A:
            if not triple:
                return None
            i = j + 1
        else:  # a comment or a backslash in an expression: not read here
            return None
    return None


def _spec_end(raw: bytes, i: int, q: int, triple: bool) -> int | None:
    """The end of a format spec starting at ``i`` (after the field's ``}``)."""
    while (m := _F_TEXT.search(raw, i)) is not None:
        j = m.start()
        c = raw[j]
        if c == 0x7D:
            return j + 1
        if c == 0x7B:
            if raw[j + 1 : j + 2] == b"{":
                return None
            end = _field_end(raw, j + 1, q, triple)
            if end is None:
                return None
            i = end
        elif c == q or c == 0x5C or (c == 0x0A and not triple):
            return None
        else:
            i = j + 1
    return None


_Region = tuple[int, int, int, int, int, int, int, int]
"""``(def line, body's last code line, its end column, indent, offset of the def line, of the
header's newline, of the last code line, of that line's end)``: lines 0-based."""


def _regions(raw: bytes) -> list[_Region] | None:
    """The bodies to leave out, or None when the file must be parsed whole."""
    if (
        len(raw) < _MIN_BYTES
        or b"def" not in raw
        or b"\r" in raw
        or b"\x0c" in raw
        or b"\x0b" in raw
        or b"\x00" in raw
        or b"\t" in raw
        or raw.startswith(b"\xef\xbb\xbf")
    ):
        return None
    head = raw[: raw.find(b"\n", raw.find(b"\n") + 1) + 1 or len(raw)]
    if b"coding" in head and (m := _COOKIE.search(head)) and m.group(1).lower() not in (b"utf-8", b"utf8"):
        return None  # its slices would not decode alone
    blanked = _blank(raw)
    if blanked is None:
        return None
    size = len(blanked)
    found: list[_Region] = []
    past = -1  # offsets before this one are inside a region already
    line = counted = 0
    for m in _DEF.finditer(b"\n" + blanked):
        start = m.start()  # of the line (the newline searched for is the one put in front)
        if start < past:
            continue
        line += blanked.count(b"\n", counted, start)
        counted = start
        if start >= 2 and blanked[start - 2] == 0x5C:  # after a backslash: `def` starts no statement
            continue
        text = m.group()
        indent = len(text) - 1 - len(text[1:].lstrip(b" "))
        if indent and not line:
            return None
        colon = _header_end(blanked, m.end() - 1, start)
        if colon is None:
            continue
        header_nl = blanked.find(b"\n", colon)
        if header_nl < 0 or blanked[colon + 1 : header_nl].strip():
            continue  # a body on the header's line
        stop = _body_end(blanked, header_nl, indent)
        code_end = header_nl + len(blanked[header_nl:stop].rstrip())
        if code_end <= header_nl:
            return None
        last_start = blanked.rfind(b"\n", 0, code_end) + 1
        code = blanked[last_start:code_end]  # a `;` at its end counts: the def ends after it too
        if len(code) <= indent + 1 or last_start <= header_nl or code.endswith(b"\\"):
            return None  # (a backslash before a comment line: sympy's test_solvers.py)
        body = blanked[start:code_end]
        if body.count(b"(") != body.count(b")") or body.count(b"[") != body.count(b"]"):
            return None
        if body.count(b"{") != body.count(b"}"):
            return None
        line_end = blanked.find(b"\n", code_end)
        line_end = size if line_end < 0 else line_end
        last = line + body.count(b"\n")
        found.append((line, last, len(code), indent, start, header_nl, last_start, line_end))
        past = line_end
    return found


def _header_end(blanked: bytes, pos: int, line_start: int) -> int | None:
    """Offset of the colon that ends the ``def`` header starting before ``pos`` (None: a
    ``lambda`` in it, or no such colon)."""
    depth = 0
    for m in _BRACKETS.finditer(blanked, pos):
        c = blanked[m.start()]
        if c == 0x3A:  # ':'
            if depth == 0:
                return None if b"lambda" in blanked[line_start : m.start()] else m.start()
        elif c in b"([{":
            depth += 1
        else:
            depth -= 1
            if depth < 0:
                return None
    return None


_DEDENTS: dict[int, re.Pattern[bytes]] = {}


def _body_end(blanked: bytes, pos: int, indent: int) -> int:
    """Offset of the newline before the first line after ``pos`` that starts a logical line at
    ``indent`` or less (not blank, not inside a string, not after a backslash), or the end."""
    pattern = _DEDENTS.get(indent)
    if pattern is None:
        pattern = _DEDENTS[indent] = re.compile(rb"\n {0,%d}[^ \n\x01]" % indent)
    while (m := pattern.search(blanked, pos)) is not None:
        nl = m.start()
        if blanked[nl - 1] != 0x5C:  # a line continued by a backslash goes on
            return nl
        pos = nl + 1
    return len(blanked)


def parse(raw: bytes) -> ast.Module:
    """``ast.parse(raw)``, the bodies of outermost ``def`` blocks parsed when first read (the
    module docstring says which files are parsed whole). Raises what ``ast.parse`` raises when the
    skeleton does not compile."""
    regions = _regions(raw)
    if not regions:
        return _parse(raw)
    out: list[bytes] = []
    at = 0
    for _line, _last, col, _indent, _start, header_nl, last_start, line_end in regions:
        out.append(raw[at : header_nl + 1])
        out.append(b"\n" * raw.count(b"\n", header_nl + 1, last_start))
        out.append(b" " * (col - 1) + b"0")
        at = line_end
    out.append(raw[at:])
    try:
        tree = _parse(b"".join(out))
    except (SyntaxError, ValueError):
        return _parse(raw)  # a skeleton that does not compile is a misreading: what the whole file gives
    wanted = {r[0] + 1: r for r in regions}
    if not _attach(tree.body, wanted, raw) or wanted:
        return _parse(raw)  # the skeleton's defs are not where the bytes said: take no chances
    return tree


def _attach(stmts: list[ast.stmt], wanted: dict[int, _Region], raw: bytes) -> bool:
    """Mark the skeleton's stand-in ``def`` nodes lazy (removing them from ``wanted``), looking
    only through statement lists. False when a stand-in is not what the skeleton should hold."""
    for node in stmts:
        t = type(node)
        if t is ast.FunctionDef or t is ast.AsyncFunctionDef:
            r = wanted.pop(node.lineno, None)
            if r is not None:
                line, last, col, indent, start, _nl, _last_start, end = r
                stub = node.__dict__["body"]
                if len(stub) != 1 or stub[0].lineno != last + 1 or node.end_col_offset != col:
                    return False
                node.__dict__[_LAZY] = (raw, start, end, line, indent)
                continue
            if not _attach(node.__dict__["body"], wanted, raw):
                return False
        elif t is ast.ClassDef:
            if not _attach(node.body, wanted, raw):  # type: ignore[attr-defined]
                return False
        else:
            for field in ("body", "orelse", "finalbody"):
                inner = getattr(node, field, None)
                if inner and not _attach(inner, wanted, raw):
                    return False
            for h in getattr(node, "handlers", ()) or getattr(node, "cases", ()):
                if not _attach(h.body, wanted, raw):
                    return False
    return True
