"""``--search``: one resolution per variant label (never merged indexes), tried in a stated order,
bounded by count, time and bytes; the first set that adds no error is the plan."""

from __future__ import annotations

import re
import shlex
import time
from collections.abc import Callable
from dataclasses import dataclass

from packaging.version import InvalidVersion, Version

from cudastack.cuda.archs import MIN_DRIVER_FOR_MAJOR, format_driver, parse_version
from cudastack.errors import UsageError
from cudastack.install.plan import split_args
from cudastack.plan.candidate import Candidate, Today, judge_candidate
from cudastack.plan.fetch import WheelCache
from cudastack.plan.offered import Listing, Offer, named_packages
from cudastack.plan.resolve import PendingResolution, ReusedResolution, start_resolve

PYTORCH_INDEX = "https://download.pytorch.org/whl/{label}"
"""PyTorch's URL pattern for a variant label (``cu130``, ``cpu``)."""
DEFAULT_LABELS = ("cu130", "cu128", "cu126", "cpu")
_CU = re.compile(r"^cu(\d{2,3})$")


def parse_indexes(items: list[str]) -> list[tuple[str, str]]:
    """``--index LABEL=URL`` (``LABEL`` alone: PyTorch's URL for it)."""
    out = []
    for item in items:
        label, sep, url = item.partition("=")
        label = label.strip()
        if not label or not re.match(r"^[A-Za-z0-9_.+-]+$", label):
            raise UsageError(f"--index {item!r}: expected LABEL=URL, e.g. cu130=https://download.pytorch.org/whl/cu130")
        out.append((label, url.strip() if sep else PYTORCH_INDEX.format(label=label)))
    return out or [(label, PYTORCH_INDEX.format(label=label)) for label in DEFAULT_LABELS]


def label_cuda(label: str) -> tuple[int, int] | None:
    """``cu130`` → (13, 0), ``cu128`` → (12, 8), ``cu92`` → (9, 2); ``cpu`` and others → None."""
    m = _CU.match(label)
    if not m:
        return None
    digits = m.group(1)
    return int(digits[:-1]), int(digits[-1])


def order_labels(
    labels: list[tuple[str, str]], driver: str | None
) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """(labels to try, newest CUDA first, non-CUDA labels last; labels the driver rules out, each
    with why). A CUDA major runs on a driver at least its minimum under minor-version
    compatibility (``MIN_DRIVER_FOR_MAJOR``)."""
    drv = None
    if driver:
        try:
            drv = parse_version(driver)
        except ValueError:
            raise UsageError(f"--driver {driver!r} is not a driver version like 580.65.06") from None
    keep: list[tuple[str, str]] = []
    skipped: list[tuple[str, str]] = []
    for label, url in labels:
        cuda = label_cuda(label)
        need = MIN_DRIVER_FOR_MAJOR.get(cuda[0]) if cuda else None
        if drv is not None and cuda is not None and (need is None or drv < need):
            why = f"needs driver >= {format_driver(need)}" if need else f"CUDA {cuda[0]} has no known driver"
            skipped.append((label, f"{why}; the driver is {driver}"))
        else:
            keep.append((label, url))
    keep.sort(key=lambda lu: (label_cuda(lu[0]) is not None, label_cuda(lu[0]) or (0, 0)), reverse=True)
    return keep, skipped


@dataclass(frozen=True, slots=True, kw_only=True)
class Bounds:
    count: int = 8
    seconds: float = 1800.0
    bytes: int = 20 << 30


@dataclass(frozen=True, slots=True, kw_only=True)
class SearchResult:
    candidates: tuple[Candidate, ...]
    chosen: Candidate | None
    not_tried: tuple[tuple[str, str], ...]
    """(label, why) of every label not tried: ruled out by the driver, or past a bound."""
    offered: tuple[Offer, ...] = ()
    """Per label tried, what its indexes offer of each package the user named (and of each a new
    error blamed), with the verdict on each version tried and why each other was not."""


def search(
    today: Today,
    args: list[str],
    labels: list[tuple[str, str]],
    *,
    cache: WheelCache,
    progress: Callable[[str], None],
    bounds: Bounds = Bounds(),
    installer: str = "pip",
) -> SearchResult:
    """Try ``args`` against each label's index alone (``--index-url URL``), in order; the next
    label resolves while one is fetched and judged."""
    ordered, skipped = order_labels(labels, today.driver)
    not_tried = list(skipped)
    tried: list[Candidate] = []
    chosen = None
    start = time.monotonic()
    base_bytes = cache.downloaded_bytes

    def downloaded() -> int:
        """Bytes fetched so far: the plan's own downloads, plus the remote wheels each resolution
        named (pip's dry run downloads them too, PEP 658 metadata or not; its HTTP cache may spare
        some: an upper bound)."""
        resolving = sum(f.size for c in tried for f in c.fetched if not f.planned.url.startswith("file:"))
        return cache.downloaded_bytes - base_bytes + resolving

    pending: dict[int, PendingResolution | ReusedResolution] = {}

    def begin(i: int) -> None:
        if i < len(ordered) and i not in pending:
            label, url = ordered[i]
            progress(f"[{label}] resolving with {installer}: --index-url {url} {' '.join(args)}")
            pending[i] = start_resolve(today.target, ["--index-url", url, *first_args], installer)

    first_args, alternatives = split_alternatives(args)
    names = named_packages(args)
    offered: list[Offer] = []
    listing: Listing | None = None
    try:
        for i, (label, url) in enumerate(ordered):
            over = None
            if len(tried) >= bounds.count:
                over = f"past the bound of {bounds.count} candidate(s)"
            elif time.monotonic() - start > bounds.seconds:
                over = f"past the time bound of {bounds.seconds:.0f} s"
            elif downloaded() > bounds.bytes:
                over = f"past the download bound of {bounds.bytes / 1e9:.1f} GB"
            if over:
                not_tried += [(lbl, over) for lbl, _ in ordered[i:]]
                break
            begin(i)
            if len(tried) + 1 < bounds.count:
                begin(i + 1)
            # what this label's indexes offer of each named package, listed while it resolves
            if names:
                progress(f"[{label}] listing what its indexes offer of {', '.join(names)} (pip index versions)")
            listing = Listing(today.target, label, ["--index-url", url, *first_args], names)
            cand = judge_candidate(today, label, ["--index-url", url, *first_args], cache=cache, progress=progress,
                                   installer=installer, resolution=pending.pop(i))  # fmt: skip
            tried.append(cand)
            on_label = [cand]
            current = list(first_args)
            left = {name: list(refs) for name, refs in alternatives.items()}
            rejected: dict[str, list[str]] = {}  # name -> versions rejected on this label
            excluded: list[str] = []
            steps: list[str] = []
            end = f"the resolution on {label} failed" if cand.failure else ""
            while not cand.accepted and cand.failure is None:
                # then the newest versions: step the blamed kernel package back, on the same label
                blamed = blamed_version(cand, label)
                if blamed is None:
                    end = f"not stepped back: no new error on {label} blames a package other than the variant's own"
                    break
                key = _canonical(blamed[0])
                rejected.setdefault(key, []).append(blamed[1])
                if left.get(key):  # the next of the files or URLs the user gave for it
                    ref = left[key].pop(0)
                    current = with_reference(current, key, ref)
                    steps.append(f"{blamed[0]}: {_short(ref)}")
                else:  # a wheel named by path or URL gives way to what the indexes offer
                    offer = listing.offer(key)
                    others = _others(offer, rejected[key])
                    if not others and offer.error is None:  # nothing else to resolve: said, not tried
                        shown = ", ".join(offer.versions) or "none"
                        end = f"no other version of {blamed[0]} is offered on {label} (offered: {shown})"
                        not_tried.append((f"{label} ({', '.join([*steps, f'{blamed[0]}!={blamed[1]}'])})", end))
                        break
                    current = without_direct(current, {key})
                    new = [f"{blamed[0]}!={v}" for v in rejected[key] if f"{blamed[0]}!={v}" not in excluded]
                    excluded += new
                    steps += new
                again = f"{label} ({', '.join(steps)})"
                if len(tried) >= bounds.count or time.monotonic() - start > bounds.seconds:
                    end = "past the bound of the search"
                    not_tried.append((again, end))
                    break
                cand = judge_candidate(today, again, ["--index-url", url, *current, *excluded], cache=cache,
                                       progress=progress, installer=installer)  # fmt: skip
                if cand.failure is not None:
                    end = f"no other version of {blamed[0]} resolves on {label}"
                    not_tried.append((again, end))
                    break
                tried.append(cand)
                on_label.append(cand)
            if cand.accepted:
                chosen = cand
                end = f"not needed: {cand.label} was accepted first"
                not_tried += [(lbl, end) for lbl, _ in ordered[i + 1 :]]
            offered += _account(listing.all(), on_label, end)
            listing = None
            if chosen is not None:
                break
    finally:
        for p in pending.values():
            p.cancel()
        if listing is not None:
            listing.cancel()
    return SearchResult(candidates=tuple(tried), chosen=chosen, not_tried=tuple(not_tried), offered=tuple(offered))


def _version(text: str) -> Version | None:
    try:
        return Version(text)
    except InvalidVersion:
        return None


def _others(offer: Offer, rejected: list[str]) -> list[str]:
    """The versions ``offer`` lists that are none of ``rejected`` (compared as versions)."""
    gone = {_version(v) or v for v in rejected}
    return [v for v in offer.versions if (_version(v) or v) not in gone]


def _account(offers: list[Offer], cands: list[Candidate], end: str) -> list[Offer]:
    """Each offer with the verdict on every version a candidate of its label resolved, and why each
    other was not tried: one above the oldest resolved was passed over by the resolver (the steps
    exclude only the rejected versions); one below it was not needed when the label was accepted,
    else the label ended first (``end``)."""
    from packaging.utils import canonicalize_name

    accepted = next((c for c in cands if c.accepted), None)
    for offer in offers:
        for c in cands:
            for f in c.fetched:
                if str(canonicalize_name(f.planned.name)) == offer.name:
                    offer.tried[f.planned.version] = "accepted" if c.accepted else "rejected"
        seen = {_version(v) or v for v in offer.tried}
        oldest = min((v for v in seen if isinstance(v, Version)), default=None)
        for v in offer.versions:
            ver = _version(v)
            if (ver or v) in seen:
                continue
            if ver is not None and oldest is not None and ver > oldest:
                offer.not_tried[v] = "passed over by the resolver (a constraint, a conflict or Requires-Python)"
            elif accepted is not None:
                offer.not_tried[v] = f"not needed: {accepted.label} was accepted first"
            else:
                offer.not_tried[v] = end or "not reached"
    return offers


def split_alternatives(args: list[str]) -> tuple[list[str], dict[str, list[str]]]:
    """Several direct references for one package (``./kern-2.0-….whl``, ``https://…/kern-1.5-….whl``)
    are alternatives pip cannot take at once: ``args`` with the newest of each (by the version in
    the wheel's file name; references without one keep their order, after), and name → the
    others, newest first, which the search tries in turn when that package is blamed."""
    from packaging.utils import InvalidWheelFilename, parse_wheel_filename
    from packaging.version import Version

    options, reqs = split_args(list(args))
    by_name: dict[str, list[str]] = {}
    it = iter(reqs)
    for a in it:
        if a in ("-r", "--requirement", "-e", "--editable"):
            next(it, "")
        elif (name := _direct_name(a)) is not None:
            by_name.setdefault(name, []).append(a)

    def version(ref: str) -> Version | None:
        try:
            return parse_wheel_filename(_short(ref).split("?")[0])[1]
        except (InvalidWheelFilename, ValueError):
            return None

    alternatives: dict[str, list[str]] = {}
    for name, refs in by_name.items():
        if len(refs) > 1:
            known = [r for r in refs if version(r) is not None]
            known.sort(key=lambda r: version(r) or Version("0"), reverse=True)  # stable: ties keep their order
            alternatives[name] = known + [r for r in refs if version(r) is None]
    if not alternatives:
        return list(args), {}
    others = {r for refs in alternatives.values() for r in refs[1:]}
    kept: list[str] = []
    it = iter(reqs)
    for a in it:
        if a in ("-r", "--requirement", "-e", "--editable"):
            kept += [a, next(it, "")]
        elif a not in others:
            kept.append(a)  # the newest reference of each package, where it was given
    alternatives = {name: refs[1:] for name, refs in alternatives.items()}
    return [*options, *kept], alternatives


def with_reference(args: list[str], name: str, ref: str) -> list[str]:
    """``args`` with the direct reference to ``name`` replaced by ``ref`` (added when none)."""
    return [*without_direct(args, {name}), ref]


def _short(ref: str) -> str:
    return ref.split("#")[0].rstrip("/").rsplit("/", 1)[-1]


def _canonical(name: str) -> str:
    from packaging.utils import canonicalize_name

    return str(canonicalize_name(name))


def without_direct(args: list[str], names: set[str]) -> list[str]:
    """``args`` without the requirements that name one of ``names`` by a direct reference: a wheel
    file or URL (``./kern-2.0-….whl``, ``https://…/kern-2.0-….whl``) or ``kern @ URL``. The search
    steps such a package back with ``kern!=2.0``, which pip cannot satisfy beside the file itself."""
    from packaging.utils import canonicalize_name

    wanted = {str(canonicalize_name(n)) for n in names}
    options, reqs = split_args(list(args))
    kept: list[str] = []
    it = iter(reqs)
    for a in it:
        if a in ("-r", "--requirement", "-e", "--editable"):
            kept += [a, next(it, "")]
        elif _direct_name(a) not in wanted:
            kept.append(a)
    return [*options, *kept]


def _direct_name(req: str) -> str | None:
    """The normalized name a wheel path/URL or a ``name @ URL`` requirement names, else None."""
    from packaging.requirements import InvalidRequirement, Requirement
    from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename

    bare = req.split("#")[0].split("?")[0]
    if bare.endswith(".whl"):
        try:
            return str(parse_wheel_filename(bare.rsplit("/", 1)[-1])[0])
        except (InvalidWheelFilename, ValueError):
            return None
    if "@" in req:
        try:
            parsed = Requirement(req)
        except InvalidRequirement:
            return None
        return str(canonicalize_name(parsed.name)) if parsed.url else None
    return None


def blamed_version(cand: Candidate, label: str) -> tuple[str, str] | None:
    """(name, version) of the first resolved distribution a new error belongs to that is not the
    variant's own (its version carries ``+label`` or its URL the label's directory): stepping it
    back may give a set without the error."""
    from packaging.utils import canonicalize_name

    by_key = {str(canonicalize_name(f.planned.name)): f.planned for f in cand.fetched}
    for finding in cand.new_errors:
        item = by_key.get(str(canonicalize_name(finding.distribution or "")))
        if item is None or item.version.endswith(f"+{label}") or f"/{label}/" in item.url:
            continue
        return item.name, item.version
    return None


def pinned_install(cand: Candidate, python: str | None) -> str:
    """``cudastack install --python PY -- <the candidate's options> name==version …``: every
    distribution the candidate resolved, pinned, with the index it was resolved from."""
    options, reqs = split_args(list(cand.args))
    # a package given by path or URL stays that reference: no index may offer its version
    direct = {name: r for r in reqs if (name := _direct_name(r)) is not None}
    pins = [direct.get(_canonical(f.planned.name)) or f"{f.planned.name}=={f.planned.version}" for f in cand.fetched]
    uv = cand.resolution is not None and cand.resolution.installer == "uv"
    head = [
        "cudastack",
        "install",
        *(["--installer", "uv"] if uv else []),
        *(["--python", python] if python else []),
        "--",
    ]
    return shlex.join([*head, *options, *pins])
