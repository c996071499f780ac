"""Wheels in a sha256-addressed cache in cudastack's state directory, and the few files of each
that the doctor reads, extracted once, streamed, with the fastest inflater installed."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
import shutil
import struct
import tempfile
import time
import urllib.parse
import urllib.request
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any, Protocol

from cudastack.env.dists import _NATIVE
from cudastack.env.versionfiles import VERSION_FILES
from cudastack.plan.resolve import PlanError, Planned, quiet_env, run_pip
from cudastack.target import state_root

Progress = Callable[[str], None]
_CHUNK = 1 << 20
_SHA = re.compile(r"^[0-9a-f]{64}$")


def _quiet(_: str) -> None:
    return None


def find_inflater() -> tuple[str, ModuleType]:
    """isal (ISA-L) or zlib-ng when installed (PyPI ``isal``, ``zlib-ng``: ``cudastack[fast]``),
    else the stdlib zlib. ``CUDASTACK_INFLATER=zlib|isal|zlib-ng`` chooses one (the bench does)."""
    import importlib

    modules = {"isal": "isal.isal_zlib", "zlib-ng": "zlib_ng.zlib_ng", "zlib": "zlib"}
    wanted = os.environ.get("CUDASTACK_INFLATER")
    for name in [wanted] if wanted in modules else list(modules):
        assert name is not None
        try:
            return name, importlib.import_module(modules[name])
        except ImportError:
            continue
    import zlib

    return "zlib", zlib


def is_read(name: str) -> bool:
    """Is this wheel member one the doctor reads? dist-info, Python sources (the import model),
    native files, version files and ``.pth`` files; not headers, stubs or data."""
    return (
        ".dist-info/" in name or name.endswith((".py", ".pth")) or bool(_NATIVE.search(name)) or name in VERSION_FILES
    )


def site_path(name: str) -> str | None:
    """Where a wheel member lands relative to site-packages (``X.data/purelib|platlib/`` too), or
    ``None`` for what goes elsewhere (scripts, headers, data)."""
    top, _, rest = name.partition("/")
    if top.endswith(".data"):
        kind, _, inner = rest.partition("/")
        return inner if kind in ("purelib", "platlib") and inner else None
    return name


@dataclass(frozen=True, slots=True, kw_only=True)
class Fetched:
    planned: Planned
    path: Path
    sha256: str
    size: int
    how: str
    """``cached``, ``downloaded`` or ``read in place`` (a ``file://`` URL)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Extracted:
    root: Path
    """A site-packages-relative tree of what the doctor reads."""
    files: int
    bytes_out: int
    seconds: float
    inflater: str
    cached: bool
    by: str = "here"
    """Who extracted it: ``cache`` (an earlier run), ``here``, ``helper`` (a forked helper) or
    ``guessed`` (while the installer resolved: plan/speculate.py)."""


class Elsewhere(Protocol):
    """Wheels another process is extracting into the same cache."""

    @property
    def paths(self) -> frozenset[str]: ...

    def wait(self) -> frozenset[str]:
        """Wait for it; the paths it extracted (the others it found in the cache)."""
        ...


def _human(n: int) -> str:
    return f"{n / 1e6:.1f} MB" if n >= 1e5 else f"{n / 1e3:.1f} kB"


class _Watch:
    """While pip downloads, every 2 s, the bytes of the files under its temporary directory (its
    partial wheel), handed to ``say`` when they grew. A thread, joined on exit: nothing forks meanwhile."""

    def __init__(self, root: Path, say: Callable[[int], None], every: float = 2.0) -> None:
        import threading

        self.root, self.say, self.every = root, say, every
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="cudastack-download-progress", daemon=True)

    def _size(self) -> int:
        total = 0
        for base, _dirs, files in os.walk(self.root):
            for name in files:
                try:
                    total += os.lstat(os.path.join(base, name)).st_size
                except OSError:
                    continue
        return total

    def _run(self) -> None:
        last = 0
        while not self._stop.wait(self.every):
            n = self._size()
            if n > last:
                last = n
                self.say(n)

    def __enter__(self) -> _Watch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


class WheelCache:
    """``<state>/plan/wheels/<sha256>/<file>.whl`` and ``<state>/plan/extract/<sha256>/``."""

    def __init__(self, root: Path | None = None, *, progress: Progress = _quiet) -> None:
        self.root = root if root is not None else state_root() / "plan"
        self.progress = progress
        self.downloaded_bytes = 0
        self.helpers = 0
        """Forked helpers the last :meth:`extract_all` used."""

    def cached_wheel(self, sha256: str) -> Path | None:
        d = self.root / "wheels" / sha256
        found = sorted(d.glob("*.whl")) if d.is_dir() else []
        return found[0] if found else None

    def fetch(self, item: Planned, *, pip: list[str], timeout: float = 3600) -> Fetched:
        """The wheel of ``item``: from the cache, in place for a local file, else ``pip download``
        (the user's pip configuration, authentication and proxy apply)."""
        if not item.is_wheel:
            raise PlanError(
                f"{item.name} {item.version} would be built from source ({item.url}): plan reads wheels only"
            )
        if item.sha256 and (hit := self.cached_wheel(item.sha256)):
            return Fetched(planned=item, path=hit, sha256=item.sha256, size=hit.stat().st_size, how="cached")
        parsed = urllib.parse.urlparse(item.url)
        if parsed.scheme == "file":
            path = Path(urllib.request.url2pathname(parsed.path))
            if not path.is_file():
                raise PlanError(f"{item.name}: {path} does not exist")
            digest = item.sha256 or self._hash(path)
            return Fetched(planned=item, path=path, sha256=digest, size=path.stat().st_size, how="read in place")
        self.root.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=self.root, prefix=".download-") as tmp:
            what = f"downloading {item.name} {item.version}"
            self.progress(f"{what} ({item.url.split('#')[0].rsplit('/', 1)[-1]})")
            pip_tmp = Path(tmp, "pip-tmp")  # pip writes the wheel here while it downloads: its size is the progress
            pip_tmp.mkdir()
            cmd = [*pip, "download", "--no-deps", "--only-binary", ":all:", "--quiet", "-d", tmp, item.url]
            with _Watch(pip_tmp, lambda n: self.progress(f"{what}: {_human(n)} so far")):
                run_pip(cmd, timeout=timeout, what=what, env={**quiet_env(), "TMPDIR": str(pip_tmp)})
            got = sorted(Path(tmp).glob("*.whl"))
            if len(got) != 1:
                raise PlanError(f"pip download of {item.url} left {len(got)} wheel(s)")
            digest = self._hash(got[0])
            if item.sha256 and digest != item.sha256:
                raise PlanError(f"{item.name}: downloaded sha256 {digest} differs from the index's {item.sha256}")
            dest = self.root / "wheels" / digest / got[0].name
            dest.parent.mkdir(parents=True, exist_ok=True)
            os.replace(got[0], dest)
        size = dest.stat().st_size
        self.downloaded_bytes += size
        return Fetched(planned=item, path=dest, sha256=digest, size=size, how="downloaded")

    @staticmethod
    def _hash(path: Path) -> str:
        h = hashlib.sha256()
        with open(path, "rb") as fh:
            while chunk := fh.read(_CHUNK):
                h.update(chunk)
        return h.hexdigest()

    def _record(self, fetched: Fetched) -> dict[str, Any] | None:
        """The record a completed extraction of the wheel left (files, bytes, seconds, inflater),
        or None (read as a regular file only: a FIFO there is no record, not a wait)."""
        from cudastack.files import read_bytes

        done = self.root / "extract" / fetched.sha256 / ".cudastack-extracted.json"
        try:
            info = json.loads(read_bytes(str(done), 1 << 20).data)
        except (OSError, ValueError):
            return None
        return info if isinstance(info, dict) else None

    def extracted(self, fetched: Fetched) -> Extracted | None:
        """The wheel's extraction when an earlier run completed it, else None."""
        info = self._record(fetched)
        if info is None:
            return None
        return Extracted(root=self.root / "extract" / fetched.sha256, files=int(info["files"]),
                         bytes_out=int(info["bytes"]), seconds=0.0, inflater=str(info["inflater"]), cached=True,
                         by="cache")  # fmt: skip

    def extract_all(self, fetched: list[Fetched], elsewhere: Elsewhere | None = None) -> list[Extracted]:
        """:meth:`extract` of every wheel, in order. The ones not yet in the cache are shared with
        forked helpers, one per spare CPU (``CUDASTACK_PLAN_WORKERS`` caps the total): each takes
        the next wheel, largest first, from a pipe. Inflating is CPU work (9.5 GB for the flashinfer
        case), and so is the table prewarm that follows it. A helper that fails hands nothing back,
        and its wheels are extracted here (an error then says what it is). ``elsewhere``: wheels
        another process is extracting already (plan/speculate.py), by path; they are left to it
        and waited for at the end."""
        from cudastack.parallel import Forked, spare_cpus

        busy = elsewhere.paths if elsewhere is not None else frozenset()
        results: list[Extracted | None] = [None if str(f.path) in busy else self.extracted(f) for f in fetched]
        todo = sorted((i for i, r in enumerate(results) if r is None and str(fetched[i].path) not in busy),
                      key=lambda i: -fetched[i].size)  # fmt: skip
        cap = os.environ.get("CUDASTACK_PLAN_WORKERS", "")
        helpers = min(spare_cpus(), len(todo) - 1, (int(cap) - 1) if cap.isdigit() and int(cap) > 0 else 3)
        self.helpers = 0
        if helpers > 0 and len(todo) < 1 << 16:
            r, w = os.pipe()
            try:
                os.write(w, b"".join(struct.pack("<H", i) for i in todo))  # (64 KiB pipe: 32k wheels)
            finally:
                os.close(w)
            children: list[Forked] = []
            try:
                children = [Forked(self._take, r, fetched) for _ in range(helpers)]
                self.helpers = sum(1 for c in children if c.pid > 0)
                mine = self._take(r, fetched)
            finally:
                os.close(r)
                theirs = [c.result() for c in children]  # waited for, whatever happened here
            for by, got in [("here", mine), *(("helper", t) for t in theirs)]:
                for i, files, size, seconds, inflater in got or ():
                    root = self.root / "extract" / fetched[i].sha256
                    results[i] = Extracted(root=root, files=files, bytes_out=size, seconds=seconds,
                                           inflater=inflater, cached=False, by=by)  # fmt: skip
        fresh = elsewhere.wait() if elsewhere is not None else frozenset()
        out: list[Extracted] = []
        for f, got in zip(fetched, results, strict=True):
            if got is None:
                got = self.extract(f)
                if got.cached and str(f.path) in fresh:  # the guess was right: extracted in this run
                    seconds = float((self._record(f) or {}).get("seconds", 0.0))
                    got = dataclasses.replace(got, cached=False, by="guessed", seconds=seconds)
            out.append(got)
        return out

    def _take(self, fd: int, fetched: list[Fetched]) -> list[tuple[int, int, int, float, str]]:
        """Extract the wheels whose indexes this process reads from the pipe ``fd`` (2 bytes each:
        a read that small is atomic), until it is empty."""
        done = []
        while len(b := os.read(fd, 2)) == 2:
            (i,) = struct.unpack("<H", b)
            e = self.extract(fetched[i])
            done.append((i, e.files, e.bytes_out, e.seconds, e.inflater))
        return done

    def extract(self, fetched: Fetched) -> Extracted:
        """What the doctor reads of the wheel, under ``extract/<sha256>/`` (reused once complete)."""
        if not _SHA.match(fetched.sha256):
            raise PlanError(f"{fetched.path}: not a sha256 digest: {fetched.sha256!r}")
        dest = self.root / "extract" / fetched.sha256
        done = dest / ".cudastack-extracted.json"
        if (hit := self.extracted(fetched)) is not None:
            return hit
        dest.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(dir=dest.parent, prefix=f".{fetched.sha256[:12]}-"))
        try:
            stats, written = self._extract_into(fetched, tmp)
            t = time.perf_counter()
            stats["prewarm_seconds"] = round(_prewarm(tmp, written), 3) if written else 0.0
            stats["seconds"] = round(stats["seconds"] + time.perf_counter() - t, 3)
            (tmp / done.name).write_text(json.dumps(stats), encoding="utf-8")
            try:
                os.rename(tmp, dest)
            except OSError:  # another run finished it first
                if not done.is_file():
                    raise
        finally:
            if tmp.exists():
                shutil.rmtree(tmp, ignore_errors=True)
        return Extracted(root=dest, files=int(stats["files"]), bytes_out=int(stats["bytes"]),
                         seconds=float(stats["seconds"]), inflater=str(stats["inflater"]), cached=False)  # fmt: skip

    def _extract_into(self, fetched: Fetched, out: Path) -> tuple[dict[str, Any], list[Path]]:
        name, mod = find_inflater()
        start = time.perf_counter()
        n = total = 0
        try:
            zf = zipfile.ZipFile(fetched.path)
        except (OSError, zipfile.BadZipFile) as exc:
            raise PlanError(f"{fetched.path} is not a readable wheel: {exc}") from None
        with zf, open(fetched.path, "rb") as raw:
            members = [i for i in zf.infolist() if not i.is_dir() and is_read(i.filename)]
            want = sum(i.file_size for i in members)
            self.progress(f"extracting {len(members)} file(s), {want / 1e6:.1f} MB, of {fetched.path.name} ({name})")
            last = time.monotonic()
            made: set[Path] = set()
            written: list[Path] = []
            for info in members:
                rel = site_path(info.filename)
                if rel is None or rel.startswith("/") or ".." in rel.split("/"):
                    continue
                target = out / rel
                if target.parent not in made:  # (15,976 cubins in a few directories: one mkdir each)
                    target.parent.mkdir(parents=True, exist_ok=True)
                    made.add(target.parent)
                with open(target, "wb") as fh:
                    if info.compress_type == zipfile.ZIP_DEFLATED:
                        _inflate(raw, info, fh, mod)
                    else:
                        with zf.open(info) as src:
                            shutil.copyfileobj(src, fh, _CHUNK)
                n += 1
                total += info.file_size
                if _PREWARM.search(rel):
                    written.append(target)
                if time.monotonic() - last > 2:
                    last = time.monotonic()
                    self.progress(f"  {total / 1e6:.0f}/{want / 1e6:.0f} MB")
        stats = {"files": n, "bytes": total, "seconds": round(time.perf_counter() - start, 3), "inflater": name}
        return stats, written


_PREWARM = re.compile(r"\.so(\.|$)[^/]*$|\.(cubin|fatbin)$|\.dist-info/RECORD$")
"""What the prewarm reads: shared objects (as the doctor's native-file walk picks them), device
code, and RECORD (which says what a distribution's standalone device code is)."""


def _prewarm(root: Path, written: list[Path]) -> float:
    """Parse, into the ELF-table store, what the doctor reads first of the files just written under
    ``root``: the tables of every shared object and each distribution's standalone device code.
    The store's racy window (a file changed in the last 2 s is not stored) is for files someone
    else may rewrite within one clock tick; these are fresh in a private temporary directory that
    is renamed into place only afterwards, more than a tick after the last identity was taken.
    Returns the seconds it took (the doctor would otherwise spend them on the overlay)."""
    from cudastack.cuda.coverage import prewarm_standalone
    from cudastack.elf.cache import ElfCache
    from cudastack.elf.table_cache import TableStore, store_dir
    from cudastack.env.dists import read_distribution

    directory = store_dir()
    if directory is None:
        return 0.0
    start = time.perf_counter()
    store = TableStore(directory, racy_ns=0)
    cache = ElfCache(store)
    devices = False
    for path in written:
        if path.name == "RECORD":
            continue
        if path.suffix in (".cubin", ".fatbin"):
            devices = True
        else:
            cache.get(str(path))  # not an ELF object: nothing stored
    if devices:
        for path in written:
            if path.name == "RECORD":
                prewarm_standalone(read_distribution(str(root), path.parent.name), store)
    if store.writes:  # a coarse kernel tick (<= 10 ms) between the last identity taken and the rename
        time.sleep(_TICK)
    return time.perf_counter() - start


_TICK = 0.011


def _inflate(raw: object, info: zipfile.ZipInfo, fh: object, mod: ModuleType) -> None:
    """Raw deflate of one member, read from its local header on, in 1 MiB chunks."""
    from typing import BinaryIO, cast

    src = cast(BinaryIO, raw)
    dst = cast(BinaryIO, fh)
    src.seek(info.header_offset)
    header = src.read(30)
    if header[:4] != b"PK\x03\x04":
        raise PlanError(f"{info.filename}: bad local header")
    name_len, extra_len = struct.unpack("<HH", header[26:30])
    src.seek(info.header_offset + 30 + name_len + extra_len)
    d = mod.decompressobj(-15)
    left = info.compress_size
    while left > 0:
        chunk = src.read(min(_CHUNK, left))
        if not chunk:
            raise PlanError(f"{info.filename}: truncated")
        left -= len(chunk)
        dst.write(d.decompress(chunk))
    dst.write(d.flush())
