"""Reusing a previous resolution when every source is local and nothing it read has changed.

A resolution is a pure function of its inputs: the installer and its version, the arguments, the
installer's environment variables and configuration files, the target interpreter and what it has
installed, and the sources (indexes, find-links, wheel files). When every source is a local file
or directory, each input has a fingerprint (contents for small files, ``os.stat`` identity for the
rest), and a resolution stored under the digest of them all is the one the installer would give
again. Any remote source (PyPI by default) makes the answer depend on a server: the installer
runs again, and the plan says why.
"""

from __future__ import annotations

import configparser
import contextlib
import hashlib
import json
import os
import shlex
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from cudastack.files import read_bytes
from cudastack.target import Target, state_root

_MAX_ENTRIES = 200_000
"""A local source tree larger than this is not fingerprinted (resolved again)."""
_KEEP = 64
"""Stored resolutions kept (the newest)."""
_ENV_PREFIXES = ("PIP_", "UV_")
_ENV_NAMES = ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "CONDA_PREFIX", "HOME", "XDG_CONFIG_HOME",
              "XDG_CONFIG_DIRS", "PYTHONNOUSERSITE", "PYTHONUSERBASE")  # fmt: skip
_SOURCE_OPTIONS = {
    "-i": "index",
    "--index-url": "index",
    "--default-index": "index",
    "--extra-index-url": "extra",
    "--index": "extra",
    "-f": "links",
    "--find-links": "links",
}
_FILE_OPTIONS = ("-r", "--requirement", "-c", "--constraint", "--overrides", "--build-constraints", "-b")


class NotReusableError(Exception):
    """Why a resolution cannot be reused (a remote source, an input not modelled)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Memo:
    """Where a resolution of these inputs is stored, and how its inputs were fingerprinted."""

    path: Path
    sources: tuple[str, ...]
    """The local sources fingerprinted (paths)."""


def _stat(path: str) -> list[object]:
    try:
        st = os.stat(path)
    except OSError as exc:
        return ["missing", exc.errno]
    return [st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_dev, st.st_mode]


_MAX_FILE = 1 << 26
"""A configuration, requirement or pyvenv.cfg file larger than this is not fingerprinted."""


def _text_bytes(path: str) -> bytes:
    """The bytes of a small regular file (:func:`cudastack.files.read_bytes`: a FIFO or device the
    inspected environment puts at ``pyvenv.cfg`` or ``pip.conf`` is refused, never waited on)."""
    got = read_bytes(path, _MAX_FILE)
    if got.size > _MAX_FILE:
        raise NotReusableError(f"{path} is larger than {_MAX_FILE} bytes")
    return got.data


def _content(path: str) -> list[object]:
    try:
        return [hashlib.sha256(_text_bytes(path)).hexdigest()]
    except OSError as exc:
        return ["missing", exc.errno]


def fingerprint_tree(root: str) -> list[object]:
    """The stat identity of every entry under ``root`` (a local index or a find-links directory;
    a file: its own). A new, removed, replaced or touched wheel or page changes it."""
    if not os.path.isdir(root):
        return [root, _stat(root)]
    out: list[object] = [root, _stat(root)]
    n = 0
    for base, dirs, files in os.walk(root):
        dirs.sort()
        for name in [*dirs, *sorted(files)]:
            p = os.path.join(base, name)
            out.append([os.path.relpath(p, root), _stat(p)])
            n += 1
            if n > _MAX_ENTRIES:
                raise NotReusableError(f"{root} has more than {_MAX_ENTRIES} entries (not fingerprinted)")
    return out


def _local_path(source: str, cwd: str) -> str:
    """The local path of a source, or raise NotReusableError for a remote one."""
    parsed = urllib.parse.urlparse(source)
    if parsed.scheme == "file":
        return urllib.request.url2pathname(parsed.path)
    if parsed.scheme and len(parsed.scheme) > 1:  # (a one-letter scheme is a Windows drive)
        raise NotReusableError(f"{source} is remote")
    return os.path.join(cwd, os.path.expanduser(source))


def _split_values(value: str) -> list[str]:
    return value.split()


def pip_config_files(environ: dict[str, str], prefixes: list[str]) -> list[str]:
    """pip's configuration files, as pip reads them: ``PIP_CONFIG_FILE`` (``os.devnull``: none of
    the global and user ones), the global and user files, and the site file of each prefix."""
    home = environ.get("HOME", os.path.expanduser("~"))
    xdg_dirs = (environ.get("XDG_CONFIG_DIRS") or "/etc/xdg").split(":")
    xdg_home = environ.get("XDG_CONFIG_HOME") or os.path.join(home, ".config")
    named = environ.get("PIP_CONFIG_FILE")
    rest = [
        "/etc/pip.conf",
        *(os.path.join(d, "pip", "pip.conf") for d in xdg_dirs),
        os.path.join(home, ".pip", "pip.conf"),
        os.path.join(xdg_home, "pip", "pip.conf"),
    ]
    head = [named] if named else []
    return [*head, *(rest if named != os.devnull else []), *(os.path.join(p, "pip.conf") for p in prefixes if p)]


def uv_config_files(environ: dict[str, str], cwd: str) -> list[str]:
    """uv's configuration files: the user's and system's ``uv.toml`` and the project's (``uv.toml``
    or ``pyproject.toml`` in the working directory or any parent)."""
    if "UV_CONFIG_FILE" in environ:
        return [environ["UV_CONFIG_FILE"]]
    home = environ.get("HOME", os.path.expanduser("~"))
    xdg_home = environ.get("XDG_CONFIG_HOME") or os.path.join(home, ".config")
    xdg_dirs = (environ.get("XDG_CONFIG_DIRS") or "/etc/xdg").split(":")
    out = [os.path.join(xdg_home, "uv", "uv.toml"), *(os.path.join(d, "uv", "uv.toml") for d in xdg_dirs),
           "/etc/uv/uv.toml"]  # fmt: skip
    d = Path(cwd)
    for parent in [d, *d.parents]:
        out += [str(parent / "uv.toml"), str(parent / "pyproject.toml")]
    return out


def _pip_config_sources(path: str) -> list[tuple[str, str]]:
    parser = configparser.RawConfigParser()
    try:
        parser.read_string(_text_bytes(path).decode("utf-8"), source=path)
    except (OSError, configparser.Error, UnicodeDecodeError) as exc:
        raise NotReusableError(f"pip's configuration {path} cannot be read ({exc})") from None
    out: list[tuple[str, str]] = []
    for section in ("global", "install"):
        if not parser.has_section(section):
            continue
        for key, value in parser.items(section):
            key = key.replace("_", "-")
            if key in ("index-url", "i"):
                out += [("index", v) for v in _split_values(value)]
            elif key == "extra-index-url":
                out += [("extra", v) for v in _split_values(value)]
            elif key in ("find-links", "f"):
                out += [("links", v) for v in _split_values(value)]
            elif key == "no-index" and value.strip().lower() in ("1", "true", "yes", "on"):
                out.append(("no-index", ""))
            elif key in _FILE_KEYS:
                out += [("file", v) for v in _split_values(value)]
    return out


_FILE_KEYS = ("constraint", "c", "requirement", "r", "build-constraint")
"""Keys of pip's configuration (and, upper-cased with ``PIP_``/``UV_``, variables) naming files
whose contents the resolution reads: this machine's pip.conf names ``/etc/xdg/pip/constraints.txt``."""
_FILE_VARIABLES = ("PIP_CONSTRAINT", "PIP_REQUIREMENT", "PIP_BUILD_CONSTRAINT", "UV_CONSTRAINT", "UV_OVERRIDE",
                   "UV_BUILD_CONSTRAINT")  # fmt: skip


class _Inputs:
    """Everything a resolution read, gathered while walking the arguments."""

    def __init__(self, cwd: str) -> None:
        self.cwd = cwd
        self.sources: list[tuple[str, str]] = []
        self.files: list[str] = []
        """Requirement and constraint files (fingerprinted by content)."""
        self.wheels: list[str] = []
        self.names: list[str] = []
        """Requirements by name and specifier (``torch==2.14.1``), as given."""

    def scan_args(self, args: list[str], *, base: str, depth: int = 0) -> None:
        if depth > 8:
            raise NotReusableError("requirement files include each other too deeply")
        it = iter(args)
        for a in it:
            opt, eq, val = a.partition("=") if a.startswith("--") else (a, "", "")
            short = a[:2] if a.startswith("-") and not a.startswith("--") and len(a) > 2 else None
            if short is not None:
                opt, val, eq = short, a[2:], "="
            if opt in _SOURCE_OPTIONS:
                self.sources.append((_SOURCE_OPTIONS[opt], val if eq else next(it, "")))
            elif opt == "--no-index":
                self.sources.append(("no-index", ""))
            elif opt in _FILE_OPTIONS:
                self.read_requirements(val if eq else next(it, ""), base=base, depth=depth)
            elif opt in ("-e", "--editable"):
                raise NotReusableError("an editable requirement is built from its source")
            elif opt.startswith("-"):
                from cudastack.install.plan import VALUE_OPTIONS

                if opt in VALUE_OPTIONS and not eq:
                    next(it, "")
            else:
                self.requirement(a, base=base)

    def requirement(self, req: str, *, base: str) -> None:
        spec = req.split(";", 1)[0].strip()
        url = spec.partition(" @ ")[2].strip() if " @ " in spec else spec
        if "://" in url:
            path = _local_path(url, base)
        elif "/" in url or url.endswith((".whl", ".zip", ".tar.gz")) or url in (".", ".."):
            path = os.path.join(base, os.path.expanduser(url))
        else:
            self.names.append(spec)
            return  # a name and a specifier
        if not path.endswith(".whl") or not os.path.isfile(path):
            raise NotReusableError(f"{req} is built from a local source")
        self.wheels.append(path)

    def read_requirements(self, name: str, *, base: str, depth: int) -> None:
        path = _local_path(name, base)
        self.files.append(path)
        try:
            text = _text_bytes(path).decode("utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise NotReusableError(f"requirement file {name} cannot be read ({exc})") from None
        tokens: list[str] = []
        for line in text.replace("\\\n", " ").splitlines():
            line = line.split(" #", 1)[0].strip()
            if not line or line.startswith("#"):
                continue
            if line.startswith("-"):
                tokens += shlex.split(line)
            else:
                tokens.append(line)
        self.scan_args(tokens, base=os.path.dirname(path), depth=depth + 1)


def _installer_identity(cmd: list[str], target: Target) -> list[object]:
    """The installer's version: uv's binary, or the dist-info of the pip that runs."""
    if cmd[1:3] != ["-m", "pip"]:
        exe = os.path.realpath(cmd[0])
        return ["binary", exe, _stat(exe)]
    if os.path.realpath(cmd[0]) == os.path.realpath(target.python or "") and "--python" not in cmd:
        dirs = list(target.site_dirs)
    else:
        import importlib.util

        spec = importlib.util.find_spec("pip")
        dirs = [os.path.dirname(os.path.dirname(spec.origin))] if spec and spec.origin else []
    for d in dirs:
        with contextlib.suppress(OSError):
            for name in sorted(os.listdir(d)):
                if name.startswith("pip-") and name.endswith(".dist-info"):
                    record = os.path.join(d, name, "RECORD")
                    return ["pip", d, name, _stat(record)]
    raise NotReusableError("the version of the pip that resolves is not known")


def _installed(target: Target) -> list[object]:
    """What the target has installed: every entry of every site directory, by identity."""
    out: list[object] = []
    for d in target.site_dirs:
        out.append([d, _stat(d)])
        with contextlib.suppress(OSError):
            for entry in sorted(os.scandir(d), key=lambda e: e.name):
                out.append([entry.name, _stat(entry.path)])
    return out


def memo_for(cmd: list[str], *, installer: str, target: Target, stdin: str | None) -> Memo:
    """Where the resolution of ``cmd`` for ``target`` is stored, keyed on a fingerprint of every
    input; raises NotReusableError (with why) when an input is remote or not modelled."""
    environ = dict(os.environ)
    cwd = os.getcwd()
    inputs = _Inputs(cwd)
    args = cmd[cmd.index("compile") + 1 :] if installer == "uv" else cmd[cmd.index("install") + 1 :]
    inputs.scan_args(list(args), base=cwd)
    for line in (stdin or "").splitlines():
        if line.strip():
            inputs.requirement(line.strip(), base=cwd)
    config: list[object] = []
    if installer == "uv":
        for key in ("UV_INDEX_URL", "UV_DEFAULT_INDEX"):
            if environ.get(key):
                inputs.sources.append(("index", environ[key]))
        for key in ("UV_EXTRA_INDEX_URL", "UV_INDEX"):
            inputs.sources += [("extra", v) for v in _split_values(environ.get(key, ""))]
        inputs.sources += [("links", v) for v in _split_values(environ.get("UV_FIND_LINKS", ""))]
        if environ.get("UV_NO_INDEX", "").lower() in ("1", "true", "yes"):
            inputs.sources.append(("no-index", ""))
        if "--no-config" not in cmd and environ.get("UV_NO_CONFIG", "") in ("", "0", "false"):
            for path in uv_config_files(environ, cwd):
                if path.endswith("pyproject.toml"):
                    with contextlib.suppress(OSError, UnicodeDecodeError):
                        if b"[tool.uv" not in _text_bytes(path):
                            continue
                if os.path.exists(path):
                    raise NotReusableError(f"uv reads the configuration {path}, whose sources are not modelled here")
    else:
        files = pip_config_files(environ, [target.prefix or "", sys.prefix])
        for path in files:
            config.append([path, _content(path)])
            if path != os.devnull and os.path.isfile(path):
                inputs.sources += _pip_config_sources(path)
        for key, kind in (("PIP_INDEX_URL", "index"), ("PIP_EXTRA_INDEX_URL", "extra"), ("PIP_FIND_LINKS", "links")):
            inputs.sources += [(kind, v) for v in _split_values(environ.get(key, ""))]
        if environ.get("PIP_NO_INDEX", "").lower() in ("1", "true", "yes", "on"):
            inputs.sources.append(("no-index", ""))
    for key in _FILE_VARIABLES:
        if key.startswith("PIP_" if installer == "pip" else "UV_"):
            inputs.sources += [("file", v) for v in _split_values(environ.get(key, ""))]
    # files the configuration or the environment names: their contents are inputs, not sources
    inputs.files += [os.path.join(cwd, v) for kind, v in inputs.sources if kind == "file"]
    inputs.sources = [(kind, v) for kind, v in inputs.sources if kind != "file"]
    no_index = any(kind == "no-index" for kind, _ in inputs.sources)
    if not no_index and not any(kind == "index" for kind, _ in inputs.sources):
        raise NotReusableError("the default index (PyPI) is remote: pass --index-url file://… or --no-index")
    local: list[str] = []
    for kind, source in inputs.sources:
        if kind == "no-index" or (no_index and kind in ("index", "extra")):
            continue
        local.append(_local_path(source, cwd))
    fingerprint = {
        "cudastack": 1,
        "installer": installer,
        "identity": _installer_identity(cmd, target),
        "command": cmd,
        "stdin": stdin,
        "cwd": cwd,
        "env": sorted((k, v) for k, v in environ.items() if k.startswith(_ENV_PREFIXES) or k in _ENV_NAMES),
        "config": config,
        "python": [os.path.realpath(target.python or ""), _stat(os.path.realpath(target.python or ""))],
        "pyvenv": _content(os.path.join(target.prefix or "", "pyvenv.cfg")),
        "installed": _installed(target),
        "requirement_files": [[p, _content(p)] for p in inputs.files],
        "wheels": [[p, _stat(p)] for p in inputs.wheels],
        "sources": [fingerprint_tree(p) for p in sorted(set(local))],
    }
    blob = json.dumps(fingerprint, sort_keys=True, default=str).encode()
    digest = hashlib.sha256(blob).hexdigest()
    return Memo(path=state_root() / "plan" / "resolutions" / f"{digest}.json", sources=tuple(sorted(set(local))))


def _resolved_files(urls: list[str]) -> dict[str, list[object]]:
    out: dict[str, list[object]] = {}
    for url in urls:
        parsed = urllib.parse.urlparse(url)
        if parsed.scheme == "file":
            path = urllib.request.url2pathname(parsed.path)
            out[path] = _stat(path)
    return out


def load(memo: Memo) -> tuple[str, str] | None:
    """(the installer's output, when it was stored) of a stored resolution whose resolved local
    wheels are unchanged too, else None."""
    try:
        entry = json.loads(memo.path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    files = entry.get("files", {})
    if not isinstance(files, dict) or _resolved_files(list(files)) != {
        urllib.request.url2pathname(urllib.parse.urlparse(u).path): v for u, v in files.items()
    }:
        return None
    with contextlib.suppress(OSError):
        os.utime(memo.path)  # last use: the newest are kept
    return str(entry["output"]), str(entry.get("stored", "?"))


def store(memo: Memo, output: str, urls: list[str]) -> None:
    """Keep the installer's output under the memo's key (atomically; a failure only loses reuse)."""
    files: dict[str, list[object]] = {}
    for url in urls:
        parsed = urllib.parse.urlparse(url)
        if parsed.scheme == "file":
            files[url] = _stat(urllib.request.url2pathname(parsed.path))
    entry = {"output": output, "files": files, "stored": time.strftime("%Y-%m-%d %H:%M:%S %Z")}
    with contextlib.suppress(OSError):
        memo.path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=memo.path.parent, prefix=".tmp-")
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(entry, fh)
        os.replace(tmp, memo.path)
        kept = sorted(memo.path.parent.glob("*.json"), key=lambda p: p.stat().st_mtime_ns, reverse=True)
        for old in kept[_KEEP:]:  # the newest _KEEP resolutions stay (a report is ~0.1-0.5 MB)
            old.unlink(missing_ok=True)
