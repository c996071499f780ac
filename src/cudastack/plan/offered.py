"""What a label's indexes offer of each package the user names, listed before the search steps
it back: ``pip index versions NAME`` with the label's ``--index-url`` and the user's index
options (find-links, extra indexes, ``--pre``, …), run by the target's own pip (or this one's
aimed at it), so that pip's configuration, authentication and proxy apply and the versions are
those with a file the target can install (wheel tags, Requires-Python) as pip's finder sees them.

pip merges every index it is given; uv takes the first index that has a name, so under
``--installer uv`` the listing can name versions uv would not see. The resolver still picks each
step (``name!=version``); the listing says what there was to pick from, lets the search stop a
label without a resolution when nothing else is offered, and names every version not tried.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from cudastack.install.plan import VALUE_OPTIONS, split_args
from cudastack.plan.resolve import PlanError, Supervised, pip_base
from cudastack.target import Target

_VALUED = frozenset(
    {"-i", "--index-url", "--extra-index-url", "-f", "--find-links", "--trusted-host", "--only-binary",
     "--no-binary", "--platform", "--python-version", "--implementation", "--abi", "--proxy", "--cert",
     "--client-cert", "--timeout", "--retries", "--cache-dir", "--keyring-provider"}
)  # fmt: skip
"""pip options that take a value and that ``pip index versions`` understands."""
_FLAGS = frozenset({"--no-index", "--pre", "--ignore-requires-python", "--isolated", "--no-cache-dir"})
_TIMEOUT = 300.0


def index_options(args: list[str]) -> list[str]:
    """The options of ``args`` that say where and what pip may find (``pip index versions``
    refuses the others: ``--no-deps``, ``-c``, …)."""
    options, _reqs = split_args(list(args))
    out: list[str] = []
    it = iter(options)
    for a in it:
        if a in _VALUED:
            out += [a, next(it, "")]
        elif a in VALUE_OPTIONS:
            next(it, "")
        elif a.partition("=")[0] in _VALUED or a in _FLAGS:
            out.append(a)  # --index-url=URL
        elif a[:2] in ("-i", "-f") and len(a) > 2 and a[1] != "-":
            out.append(a)  # -iURL
    return out


def named_packages(args: list[str]) -> list[str]:
    """The normalized names of the packages ``args`` names directly: requirements
    (``kern>=1``, ``kern[extra]``) and wheel files or URLs; not those inside ``-r`` files."""
    from packaging.requirements import InvalidRequirement, Requirement
    from packaging.utils import canonicalize_name

    from cudastack.plan.search import _direct_name

    _options, reqs = split_args(list(args))
    names: list[str] = []
    it = iter(reqs)
    for a in it:
        if a in ("-r", "--requirement", "-e", "--editable"):
            next(it, "")
            continue
        if a.startswith(("-r", "-e", "--requirement=", "--editable=")):
            continue
        name = _direct_name(a)
        if name is None:
            try:
                name = str(canonicalize_name(Requirement(a).name))
            except InvalidRequirement:
                continue
        if name not in names:
            names.append(name)
    return names


@dataclass(slots=True)
class Offer:
    """What one label's indexes offer of one package."""

    label: str
    name: str
    versions: tuple[str, ...] = ()
    """Newest first, as pip lists them."""
    error: str | None = None
    """Why there is no listing (pip failed or is missing), else None."""
    tried: dict[str, str] = field(default_factory=dict)
    """Version → the verdict of the candidate that resolved it (``accepted``, ``rejected``)."""
    not_tried: dict[str, str] = field(default_factory=dict)
    """Version → why it was not tried."""

    def to_dict(self) -> dict[str, object]:
        return {
            "label": self.label,
            "name": self.name,
            "versions": list(self.versions),
            "error": self.error,
            "tried": dict(self.tried),
            "not_tried": dict(self.not_tried),
        }


class Listing:
    """``pip index versions`` for each name, all started at once in the background."""

    def __init__(self, target: Target, label: str, args: list[str], names: list[str]) -> None:
        self.label = label
        self._target = target
        self._options = index_options(args)
        self._running: dict[str, Supervised] = {}
        self._order: list[str] = []
        self.offers: dict[str, Offer] = {}
        for name in names:
            self.add(name)

    def add(self, name: str) -> None:
        """List ``name`` too (a package the user did not name that a new error blames)."""
        if name in self._running or name in self.offers:
            return
        self._order.append(name)
        cmd = [*pip_base(self._target), "index", "versions", name, *self._options]
        self._running[name] = Supervised(cmd, what=f"listing the versions of {name}")

    def offer(self, name: str) -> Offer:
        """The listing of ``name`` (waiting for pip)."""
        self.add(name)
        if name not in self.offers:
            self.offers[name] = _parse(self.label, name, self._running.pop(name))
        return self.offers[name]

    def all(self) -> list[Offer]:
        """Every listing, in the order the names were given (then those added)."""
        return [self.offer(name) for name in self._order]

    def cancel(self) -> None:
        for run in self._running.values():
            run.cancel()
        self._running.clear()


def _parse(label: str, name: str, run: Supervised) -> Offer:
    try:
        out, _err = run.output(timeout=_TIMEOUT)
    except PlanError as exc:
        text = str(exc)
        if "No matching distribution found" in text:
            return Offer(label=label, name=name)  # the indexes offer none the target can install
        return Offer(label=label, name=name, error=text[:400])
    for line in out.splitlines():
        head, sep, rest = line.partition(":")
        if sep and head.strip() == "Available versions":
            return Offer(label=label, name=name, versions=tuple(v.strip() for v in rest.split(",") if v.strip()))
    return Offer(label=label, name=name, error=f"pip index versions printed no versions: {out.strip()[:200]!r}")
