"""Stack locks: ``snapshot`` an environment into JSON, ``diff`` two of them (or live ones).

A snapshot is what a later ``install``/``rollback`` compares against and restores to: the host
(driver, GPUs, CUDA toolkits found, glibc), the interpreter, and every distribution with its full
version (local label included), installer, source (index, file, VCS, editable path with its git
commit and dirty state) and a fingerprint of its native files. The fingerprint is built from the
sha256 hashes RECORD already carries; only native files RECORD does not hash (in-tree ``.so`` of
an editable install) are read and hashed.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from cudastack.errors import ReportError
from cudastack.files import file_digest

if TYPE_CHECKING:  # imported where used: `diff` of two files needs none of them
    from cudastack.env.dists import Distribution
    from cudastack.env.inventory import Inventory
    from cudastack.target import Target

SNAPSHOT_FORMAT = 1
"""Version of the ``snapshot`` object inside the report envelope (bumped on incompatible change)."""

ABI_RELEVANT_PREFIXES = ("nvidia-", "cuda-", "cupy-")
"""Besides STACK_KEYS: distributions whose change moves the CUDA/torch ABI floor."""


def _source(dist: Distribution) -> dict[str, Any]:
    du = dist.direct_url or {}
    url = du.get("url") if isinstance(du.get("url"), str) else None
    src: dict[str, Any] = {"kind": "index", "url": None}
    if url:
        if isinstance(du.get("vcs_info"), dict):
            vcs = du["vcs_info"]
            src = {"kind": "vcs", "url": url, "commit": vcs.get("commit_id") if isinstance(vcs, dict) else None}
        elif isinstance(du.get("dir_info"), dict):
            src = {"kind": "editable" if dist.editable_path else "directory", "url": url}
        else:
            src = {"kind": "file", "url": url}
    path = dist.editable_path
    if path:
        src["editable_path"] = path
        src.update(_git_state(path))
    return src


def _git_state(path: str) -> dict[str, Any]:
    """Commit and dirty state of the checkout an editable install points into. Through
    :class:`cudastack.git.Git`, so the checkout's fsmonitor, hooks, pager and filters never run
    (a clean filter switched off can make a filtered file read as changed: dirty, never code run)."""
    from cudastack.git import Git, GitError

    try:
        git = Git(path, timeout=60)
        head = git.run("rev-parse", "HEAD", check=False)
        if head.returncode != 0:
            return {"git_commit": None, "git_dirty": None}
        dirty = git.run("status", "--porcelain", "--untracked-files=no")
    except GitError:
        return {"git_commit": None, "git_dirty": None}
    return {"git_commit": head.stdout.decode().strip(), "git_dirty": bool(dirty.stdout.strip())}


def _fingerprint(dist: Distribution) -> dict[str, Any]:
    h = hashlib.sha256()
    count, computed = 0, 0
    entries = sorted(
        (e for e in dist.record or () if ".so" in os.path.basename(e.path) or e.path.endswith((".cubin", ".fatbin"))),
        key=lambda e: e.path,
    )
    for e in entries:
        digest = e.hash
        if not digest:
            digest = _hash_file(dist.abspath(e.path))
            computed += 1
        h.update(f"{e.path}\0{digest}\n".encode())
        count += 1
    src = dist.editable_path
    if src and os.path.isdir(src):
        for dirpath, dirnames, filenames in os.walk(src):
            dirnames[:] = sorted(d for d in dirnames if d not in (".git", "__pycache__", "build"))
            for f in sorted(filenames):
                if ".so" in f:
                    p = os.path.join(dirpath, f)
                    h.update(f"{os.path.relpath(p, src)}\0{_hash_file(p)}\n".encode())
                    count += 1
                    computed += 1
    return {"native_files": count, "hashed_here": computed, "digest": h.hexdigest() if count else None}


def _is_native(rel: str) -> bool:
    return ".so" in os.path.basename(rel) or rel.endswith((".cubin", ".fatbin"))


def _hash_file(path: str) -> str:
    try:
        return "sha256=" + file_digest(path).hex()
    except OSError as exc:
        return f"unreadable:{exc.strerror}"


def take_snapshot(target: Target, inventory: Inventory | None = None) -> dict[str, Any]:
    """The snapshot object of a target (the ``snapshot`` key of the report)."""
    from cudastack.env.inventory import read_inventory

    inv = inventory or read_inventory(target)
    interp = target.interpreter
    dists = []
    for d in sorted(inv.dists.values(), key=lambda d: d.key):
        dists.append(
            {
                "name": d.name,
                "key": d.key,
                "version": d.version,
                "installer": d.installer,
                "site_dir": d.site_dir,
                "source": _source(d),
                "native": _fingerprint(d),
                "record": _hash_record(d),
            }
        )
    torch = inv.torch
    if torch is not None:
        for entry in dists:
            if entry["key"] == "torch":
                entry["build"] = {"version": torch.version, "cuda": torch.cuda}
    return {
        "format": SNAPSHOT_FORMAT,
        "host": {**target.gpu.as_dict(), "glibc": target.glibc, "cuda_toolkits": _toolkits(target.environ)},
        "interpreter": {
            "executable": interp.executable if interp else None,
            "version": target.python_version,
            "prefix": target.prefix,
        },
        "distributions": dists,
    }


def _hash_record(d: Distribution) -> str | None:
    try:
        return "sha256=" + file_digest(os.path.join(d.meta_dir, "RECORD")).hex()
    except OSError:
        return None


def _toolkits(environ: dict[str, str]) -> list[dict[str, Any]]:
    from cudastack.cuda.host import find_cuda_home, toolkit_version

    found: dict[str, Any] = {}
    home, how = find_cuda_home(environ)
    candidates = ([home] if home else []) + ["/usr/local/cuda"]
    try:
        candidates += sorted(os.path.join("/usr/local", n) for n in os.listdir("/usr/local") if n.startswith("cuda-"))
    except OSError:
        pass
    for c in candidates:
        real = os.path.realpath(c)
        v = toolkit_version(real)
        if v and real not in found:
            found[real] = {
                "path": real,
                "version": f"{v[0]}.{v[1]}",
                "selected": c == home,
                "how": how if c == home else None,
            }
    return list(found.values())


def load_snapshot(path: str) -> dict[str, Any]:
    """A snapshot from a file written by ``cudastack snapshot -o``; clear errors, never a traceback."""
    from cudastack.report import read_json_report

    data = read_json_report(path, "snapshot")
    snap = data.get("snapshot") if isinstance(data, dict) else None
    if not isinstance(snap, dict) or not isinstance(snap.get("distributions"), list):
        raise ReportError(f"{path} is not a cudastack snapshot (no snapshot.distributions)")
    if snap.get("format") != SNAPSHOT_FORMAT:
        raise ReportError(f"{path} has snapshot format {snap.get('format')}, this cudastack reads {SNAPSHOT_FORMAT}")
    for i, d in enumerate(snap["distributions"]):  # what diff reads: checked here, never a KeyError there
        ok = isinstance(d, dict) and all(isinstance(d.get(k), str) for k in ("key", "name", "version"))
        if not ok or not all(isinstance(d.get(k), dict) for k in ("native", "source")):
            raise ReportError(
                f"{path}: snapshot.distributions[{i}] is not a distribution "
                "(needs string key, name, version and objects native, source)"
            )
    return snap


@dataclass(frozen=True, slots=True)
class Change:
    name: str
    kind: str
    """``added``, ``removed``, ``upgraded``, ``downgraded``, ``variant``, ``source``."""
    before: str | None
    after: str | None
    abi_relevant: bool
    detail: str = ""

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "kind": self.kind,
            "before": self.before,
            "after": self.after,
            "abi_relevant": self.abi_relevant,
            "detail": self.detail,
        }


_KIND_ORDER = ("variant", "downgraded", "upgraded", "removed", "added", "source")
"""Within ABI-relevant and then the rest: what breaks builds silently comes first."""


def abi_relevant(key: str) -> bool:
    from cudastack.data.families import STACK_KEYS

    return key in STACK_KEYS or key.startswith(ABI_RELEVANT_PREFIXES)


def version_change(before: str, after: str) -> str:
    """``variant`` (same release, another local label), ``upgraded`` or ``downgraded``."""
    from packaging.version import InvalidVersion, Version

    if before.split("+", 1)[0] == after.split("+", 1)[0]:
        return "variant"
    try:
        return "upgraded" if Version(after) > Version(before) else "downgraded"
    except InvalidVersion:
        return "upgraded" if after > before else "downgraded"


def diff_snapshots(a: dict[str, Any], b: dict[str, Any]) -> list[Change]:
    """Changes from ``a`` to ``b``; ABI-relevant ones (torch, CUDA libraries, kernels) first."""
    before = {d["key"]: d for d in a["distributions"]}
    after = {d["key"]: d for d in b["distributions"]}
    out: list[Change] = []
    for key in sorted(before.keys() | after.keys()):
        x, y = before.get(key), after.get(key)
        rel = abi_relevant(key)
        if x is None and y is not None:
            out.append(Change(y["name"], "added", None, y["version"], rel))
            continue
        if y is None and x is not None:
            out.append(Change(x["name"], "removed", x["version"], None, rel))
            continue
        assert x is not None and y is not None
        vx, vy = x["version"], y["version"]
        if vx != vy:
            kind = version_change(vx, vy)
            detail = "same release, another build variant" if kind == "variant" else ""
            out.append(Change(y["name"], kind, vx, vy, rel, detail))
            continue
        nx, ny = x["native"].get("digest"), y["native"].get("digest")
        if nx != ny:
            out.append(Change(y["name"], "variant", vx, vy, rel, "same version, different native files"))
            continue
        sx, sy = x["source"], y["source"]
        if (sx.get("kind"), sx.get("url"), sx.get("git_commit"), sx.get("commit")) != (
            sy.get("kind"),
            sy.get("url"),
            sy.get("git_commit"),
            sy.get("commit"),
        ):
            ends = [
                f"{s.get('kind')} {s.get('git_commit') or s.get('commit') or s.get('url') or ''}".strip()
                for s in (sx, sy)
            ]
            detail = " → ".join(ends)  # was 'editable 9736…→ editable 0175…': strip() ate the space
            out.append(Change(y["name"], "source", vx, vy, rel, detail))
        elif sx.get("git_dirty") != sy.get("git_dirty") and sy.get("git_dirty") is not None:
            out.append(
                Change(
                    y["name"],
                    "source",
                    vx,
                    vy,
                    rel,
                    "editable checkout " + ("now dirty" if sy["git_dirty"] else "now clean"),
                )
            )
    out.sort(
        key=lambda c: (
            not c.abi_relevant,
            ["variant", "downgraded", "upgraded", "removed", "added", "source"].index(c.kind),
            c.name.lower(),
        )
    )
    return out
