"""Extract, while the installer resolves, the wheels it will most likely choose: each requirement
pinned with ``==`` whose wheels a local source (find-links directory, ``file://`` index) offers.

A cold plan waits ~10 s for pip's dry run (it hashes every local wheel it considers for its
report) and only then extracts 9.5 GB. The pinned wheels are known before: the best file for the
target's tags, the highest version (local label included) first, as pip picks. A wrong guess costs
only the extraction of a wheel the plan does not use: the extraction cache is keyed by the wheel's
sha256, so nothing of it reaches the overlay unless the resolution names that very file.
"""

from __future__ import annotations

import html
import os
import re
import urllib.parse
import urllib.request
from pathlib import Path
from typing import TYPE_CHECKING

from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename
from packaging.version import InvalidVersion, Version

from cudastack.files import check_regular, read_bytes

if TYPE_CHECKING:
    from cudastack.parallel import Forked
    from cudastack.plan.fetch import WheelCache
    from cudastack.target import Target

_HREF = re.compile(rb'href\s*=\s*"([^"]+)"', re.IGNORECASE)


def pinned(names: list[str]) -> dict[str, SpecifierSet]:
    """``name==version`` requirements (no wildcard, no URL), by canonical name (``==2.14.1``
    matches ``2.14.1+cu130`` too: local labels, as pip reads them)."""
    out: dict[str, SpecifierSet] = {}
    for spec in names:
        try:
            req = Requirement(spec)
        except InvalidRequirement:
            continue
        specs = list(req.specifier)
        if req.url or len(specs) != 1 or specs[0].operator != "==" or "*" in specs[0].version:
            continue
        out[str(canonicalize_name(req.name))] = req.specifier
    return out


def _target_tags(version: str | None) -> dict[object, int]:
    from packaging import tags

    parts = (version or "").split(".")
    py = (int(parts[0]), int(parts[1])) if len(parts) >= 2 and parts[0].isdigit() and parts[1].isdigit() else None
    platforms = list(tags.platform_tags())
    every = [*tags.cpython_tags(py, platforms=platforms), *tags.compatible_tags(py, platforms=platforms)] if py else []
    return {t: i for i, t in enumerate(every)}


def _offered(source: str, name: str) -> list[tuple[str, str | None]]:
    """(path, sha256 from the index or None) of the wheel files a local source offers for ``name``."""
    if os.path.isdir(source) and not os.path.isfile(os.path.join(source, name, "index.html")):
        with os.scandir(source) as it:  # a find-links directory
            return [(e.path, None) for e in it if e.name.endswith(".whl") and e.is_file()]
    page = os.path.join(source, name, "index.html")
    try:
        text = read_bytes(page, 16 << 20).data  # (a FIFO or a device there is refused, not waited on)
    except OSError:
        return []
    out = []
    base = Path(page).as_uri()
    for href in _HREF.findall(text):
        url = urllib.parse.urljoin(base, html.unescape(href.decode("utf-8", "replace")))
        parsed = urllib.parse.urlparse(url)
        if parsed.scheme != "file" or not parsed.path.endswith(".whl"):
            continue
        frag = dict(urllib.parse.parse_qsl(parsed.fragment))
        digest = frag.get("sha256")
        out.append((urllib.request.url2pathname(parsed.path), digest if digest and len(digest) == 64 else None))
    return out


def guesses(args: list[str], target: Target) -> list[tuple[str, str | None]]:
    """(wheel path, sha256 or None) the installer will most likely choose for the pinned
    requirements of ``args``, from local sources only; empty when nothing is pinned or a source
    cannot be read as local."""
    from cudastack.plan.reuse import NotReusableError, _Inputs, _local_path, _pip_config_sources, pip_config_files

    cwd = os.getcwd()
    inputs = _Inputs(cwd)
    try:
        inputs.scan_args(list(args), base=cwd)
    except NotReusableError:
        return []
    wanted = pinned(inputs.names)
    if not wanted:
        return []
    sources = list(inputs.sources)
    for path in pip_config_files(dict(os.environ), [target.prefix or ""]):
        if path != os.devnull and os.path.isfile(path):
            try:
                sources += _pip_config_sources(path)
            except NotReusableError:
                continue
    for key, kind in (("PIP_INDEX_URL", "index"), ("PIP_EXTRA_INDEX_URL", "extra"), ("PIP_FIND_LINKS", "links")):
        sources += [(kind, v) for v in os.environ.get(key, "").split()]
    no_index = any(kind == "no-index" for kind, _ in sources)
    local = []
    for kind, source in sources:
        if kind in ("no-index", "file") or (no_index and kind in ("index", "extra")):
            continue
        try:
            local.append(_local_path(source, cwd))
        except NotReusableError:
            continue  # a remote index: its files are not guessed
    rank = _target_tags(target.python_version)
    out = []
    for name, spec in wanted.items():
        best: tuple[Version, int, str, str | None] | None = None
        for source in dict.fromkeys(local):
            for path, digest in _offered(source, name):
                try:
                    wname, wver, _build, wtags = parse_wheel_filename(os.path.basename(path))
                except (InvalidWheelFilename, InvalidVersion):
                    continue
                fit = min((rank[t] for t in wtags if t in rank), default=None)
                if wname != name or fit is None or not spec.contains(wver, prereleases=True):
                    continue
                found = (wver, -fit, path, digest)
                if best is None or found[:2] > best[:2]:
                    best = found
        if best is not None:
            out.append((best[2], best[3]))
    return out


class Guessed:
    """The child extracting the guessed wheels (``paths``); :meth:`wait` for it."""

    def __init__(self, child: Forked, paths: frozenset[str]) -> None:
        self.child, self.paths = child, paths
        self.fresh: frozenset[str] | None = None

    def wait(self) -> frozenset[str]:
        """The paths the child extracted (not found in the cache), once it has finished."""
        if self.fresh is None:
            got = self.child.result()
            self.fresh = frozenset(got) if isinstance(got, list) else frozenset()
        return self.fresh


def start(args: list[str], target: Target, cache: WheelCache) -> Guessed | None:
    """Extract the guessed wheels in a forked child, largest first; None when there is nothing to
    guess, no spare CPU, or ``CUDASTACK_PLAN_SPECULATE=0``."""
    from cudastack.parallel import Forked, spare_cpus

    if os.environ.get("CUDASTACK_PLAN_SPECULATE") == "0":
        return None
    picks = [p for p in guesses(args, target) if check_regular(p[0]) is None]  # (an index page may name anything)
    if not picks or spare_cpus() < 1:
        return None
    picks.sort(key=lambda p: -os.path.getsize(p[0]))
    child = Forked(_extract, cache, picks)
    return Guessed(child, frozenset(p for p, _sha in picks)) if child.pid > 0 else None


def _extract(cache: WheelCache, picks: list[tuple[str, str | None]]) -> list[str]:
    from cudastack.plan.fetch import Fetched
    from cudastack.plan.resolve import Planned

    fresh = []
    for path, digest in picks:
        whl = Path(path)
        if check_regular(path) is not None:  # what an index page names may be anything
            continue
        sha = digest or cache._hash(whl)
        name, version, _b, _t = parse_wheel_filename(whl.name)
        item = Planned(name=str(name), version=str(version), url=whl.as_uri(), sha256=sha)
        got = cache.extract(Fetched(planned=item, path=whl, sha256=sha, size=whl.stat().st_size, how="read in place"))
        if not got.cached:
            fresh.append(path)
    return fresh
