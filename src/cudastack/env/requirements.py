"""Requires-Dist evaluated for the target: which requirements apply, with which extras, and which
name a distribution that is not installed (a fact PKG001 and PKG017 both read)."""

from __future__ import annotations

import functools
import re
from collections import defaultdict
from collections.abc import Iterator, Mapping

from packaging.markers import UndefinedComparison, UndefinedEnvironmentName
from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from cudastack.env.dists import Distribution
from cudastack.env.inventory import Inventory

Ask = tuple[Distribution, str, Requirement]
"""One requirement line that applies: the requiring distribution, the line, the parsed line."""

_EXTRA_ONLY = re.compile(r"""^[^;]*;\s*extra\s*==\s*["']([^"']+)["']\s*$""")


@functools.cache
def parse_requirement(line: str) -> Requirement | None:
    """A Requires-Dist line, parsed once per run (the same lines recur across distributions)."""
    try:
        return Requirement(line)
    except InvalidRequirement:
        return None


def iter_requirements(
    dist: Distribution, extras: frozenset[str] | None = None
) -> Iterator[tuple[str, Requirement | None]]:
    """Requires-Dist of ``dist``; with ``extras`` given, lines that only apply to another extra
    (``; extra == "dev"``, most of them) are skipped without parsing."""
    for line in dist.requires:
        if extras is not None:
            m = _EXTRA_ONLY.match(line)
            if m and m.group(1) not in extras:
                continue
        yield line, parse_requirement(line)


def applies(req: Requirement, markers: Mapping[str, str], extras: frozenset[str]) -> bool:
    if req.marker is None:
        return True
    for extra in ("", *sorted(extras)):
        try:
            if req.marker.evaluate({**markers, "extra": extra}):
                return True
        except (UndefinedComparison, UndefinedEnvironmentName):
            return False
    return False


def requested_extras(
    inventory: Inventory, markers: Mapping[str, str], declared: Mapping[str, frozenset[str]]
) -> dict[str, frozenset[str]]:
    """Extras in effect per distribution: the ``declared`` ones (``--extras``/config) plus those
    that other installed distributions ask for (torch asks ``cuda-toolkit[cublas,...]``), to a
    fixpoint."""
    extras: dict[str, set[str]] = defaultdict(set)
    for name, ex in declared.items():
        extras[canonicalize_name(name)].update(ex)
    for _ in range(10):  # extras chains are short; bound the fixpoint
        changed = False
        for dist in inventory.dists.values():
            mine = frozenset(extras.get(dist.key, ()))
            for _line, req in iter_requirements(dist, mine):
                if req is None or not req.extras:
                    continue
                if applies(req, markers, mine):
                    key = canonicalize_name(req.name)
                    new = set(req.extras) - extras[key]
                    if new:
                        extras[key] |= new
                        changed = True
        if not changed:
            break
    return {k: frozenset(v) for k, v in extras.items()}


def find_missing_requirements(
    inventory: Inventory, markers: Mapping[str, str], extras: Mapping[str, frozenset[str]]
) -> dict[str, tuple[Ask, ...]]:
    """Normalized name of each distribution that a requirement applying to the target asks for and
    that is not installed → every such requirement, requirers sorted by key. Empty without
    ``markers`` (the target's Python is unknown: nothing can be evaluated)."""
    if not markers:
        return {}
    missing: dict[str, list[Ask]] = defaultdict(list)
    for dist in sorted(inventory.dists.values(), key=lambda d: d.key):
        mine = extras.get(dist.key, frozenset())
        for line, req in iter_requirements(dist, mine):
            if req is None or not applies(req, markers, mine) or inventory.get(req.name) is not None:
                continue
            missing[canonicalize_name(req.name)].append((dist, line, req))
    return {k: tuple(v) for k, v in sorted(missing.items())}
