"""What the installer would install, from its machine-readable dry run (pip ``--report``)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import urllib.parse
from dataclasses import dataclass

from cudastack.errors import CudastackError
from cudastack.plan.reuse import Memo, NotReusableError, load, memo_for, store
from cudastack.target import Target


class PlanError(CudastackError, RuntimeError):
    """Resolution, download or extraction failed: the plan could not be made (exit 3)."""

    exit_code = 3


@dataclass(frozen=True, slots=True, kw_only=True)
class Planned:
    """One distribution the installer would install."""

    name: str
    version: str
    url: str
    """Where the installer would take the archive from (``download_info.url``)."""
    sha256: str | None
    """The archive's digest as the index gave it, or ``None`` (then it is hashed after download)."""
    requested: bool = False
    is_wheel: bool = True


@dataclass(frozen=True, slots=True, kw_only=True)
class Resolution:
    installer: str
    """Which installer resolved (``pip``), and how it merges indexes."""
    command: tuple[str, ...]
    items: tuple[Planned, ...]
    reused: bool = False
    """Taken from an earlier run with the same inputs (plan/reuse.py), the installer not run."""
    reuse: str = ""
    """Why it was reused, or why the installer ran."""


def pip_base(target: Target) -> list[str]:
    """The target's own pip when it has one, else this interpreter's pip aimed at it (``--python``)."""
    python = target.python or sys.executable
    if any(os.path.isdir(os.path.join(d, "pip")) for d in target.site_dirs):
        return [python, "-m", "pip"]
    return [sys.executable, "-m", "pip", "--python", python]


def quiet_env() -> dict[str, str]:
    """The environment of the installer's subprocesses: no ``__pycache__`` written into the
    inspected environment by its own pip (the plan changes nothing there)."""
    return {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}


def run_pip(cmd: list[str], *, timeout: float, what: str, env: dict[str, str] | None = None) -> str:
    """Run the installer under install's supervisor: when cudastack dies (SIGKILL too) or the
    timeout passes, its whole process group dies with it (issue 13: no orphaned pip download)."""
    from cudastack.install.run import run_supervised

    try:
        rc, out, err, interrupted = run_supervised(cmd, env or quiet_env(), capture=True, timeout=timeout)
    except OSError as exc:
        raise PlanError(f"{what} could not start: {' '.join(cmd)}: {exc.strerror or exc}") from None
    if interrupted:
        raise PlanError(f"{what} was stopped (timed out after {timeout:.0f} s, or interrupted): {' '.join(cmd)}")
    if rc != 0:
        raise PlanError(
            f"{what} failed (exit {rc}): {' '.join(cmd)}: {err.strip()[-800:]}",
            hint="nothing was changed",
        )
    return out


def resolve(target: Target, args: list[str], *, timeout: float = 1800) -> Resolution:
    """``pip install --dry-run --report -`` with the user's arguments, for the target's interpreter
    (pip merges every index it is given and takes the highest version, local label included)."""
    return start_resolve(target, args).result(timeout=timeout)


class Supervised:
    """An installer command started in the background under install's supervisor, in a session of
    its own: when cudastack dies (SIGKILL too) the supervisor sees the life pipe close and kills
    the whole group (pip and its children). No thread: the doctor may fork meanwhile."""

    def __init__(self, cmd: list[str], *, stdin: str | None = None, what: str = "resolution") -> None:
        self.cmd = cmd
        self.stdin = stdin
        self.what = what
        from cudastack.install.run import SUPERVISOR

        life_r, self._life_w = os.pipe()
        self._status_r, status_w = os.pipe()
        try:
            self.proc: subprocess.Popen[str] | None = subprocess.Popen(
                [sys.executable, "-I", "-S", str(SUPERVISOR), str(life_r), str(status_w), *cmd],
                pass_fds=(life_r, status_w),
                start_new_session=True,
                stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                env=quiet_env(),
            )
            self.error: str | None = None
        except OSError as exc:
            self.proc, self.error = None, f"{what} could not start: {' '.join(cmd)}: {exc.strerror or exc}"
        finally:
            os.close(life_r)
            os.close(status_w)

    def _kill(self) -> None:
        if self.proc is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)

    def _status(self) -> int:
        """The installer's exit status as the supervisor reports it (closes the pipes)."""
        with os.fdopen(self._status_r, "rb") as fh:
            answer = fh.read().decode(errors="replace")
        os.close(self._life_w)
        self._kill()  # anything left in the group
        if answer.startswith("error "):
            return 127
        return int(answer) if answer.lstrip("-").isdigit() else -signal.SIGKILL

    def cancel(self) -> None:
        """Stop a command no longer needed (the search accepted an earlier label)."""
        if self.proc is None:
            return
        self._kill()
        self.proc.communicate()  # reads and closes its pipes, finished or killed
        self._status()

    def output(self, *, timeout: float = 1800) -> tuple[str, str]:
        """(stdout, stderr) of the finished command; :class:`PlanError` when it could not start,
        timed out or failed."""
        if self.proc is None:
            raise PlanError(self.error or f"{self.what} could not start")
        try:
            out, err = self.proc.communicate(self.stdin, timeout=timeout)
        except subprocess.TimeoutExpired:
            self._kill()
            self.proc.communicate()
            self._status()
            raise PlanError(f"{self.what} timed out after {timeout:.0f} s: {' '.join(self.cmd)}") from None
        rc = self._status()
        if rc != 0:
            raise PlanError(
                f"{self.what} failed (exit {rc}): {' '.join(self.cmd)}: {err.strip()[-800:]}",
                hint="nothing was changed",
            )
        return out, err


class PendingResolution(Supervised):
    """A dry run started in the background: today's doctor runs meanwhile."""

    def __init__(self, cmd: list[str], *, installer: str = "pip", stdin: str | None = None,
                 target: Target | None = None, memo: Memo | None = None, why: str = "") -> None:  # fmt: skip
        self.installer = installer
        self.target = target
        self.memo = memo
        self.why = why
        super().__init__(cmd, stdin=stdin, what="resolution")

    def result(self, *, timeout: float = 1800) -> Resolution:
        out, _err = self.output(timeout=timeout)
        resolution = parse_output(out, self.installer, self.target, self.cmd, why=self.why)
        if self.memo is not None:
            store(self.memo, out, [i.url for i in resolution.items])
        return resolution


class ReusedResolution:
    """A stored resolution of the same inputs (plan/reuse.py): nothing runs."""

    def __init__(self, cmd: list[str], *, installer: str, output: str, target: Target, why: str) -> None:
        self.cmd, self.installer, self.output, self.target, self.why = cmd, installer, output, target, why

    def cancel(self) -> None:
        return None

    def result(self, *, timeout: float = 1800) -> Resolution:
        return parse_output(self.output, self.installer, self.target, self.cmd, why=self.why, reused=True)


def parse_output(out: str, installer: str, target: Target | None, cmd: list[str], *, why: str,
                 reused: bool = False) -> Resolution:  # fmt: skip
    """The installer's answer: uv's pylock.toml or pip's JSON report."""
    if installer == "uv":
        items = parse_pylock(out, target)
        return Resolution(installer="uv", command=tuple(cmd), items=items, reused=reused, reuse=why)
    try:
        report = json.loads(out)
    except ValueError as exc:
        raise PlanError(f"pip's dry-run report is not JSON: {exc}") from None
    return Resolution(installer="pip", command=tuple(cmd), items=parse_pip_report(report), reused=reused, reuse=why)


def start(cmd: list[str], target: Target, *, installer: str, stdin: str | None = None
          ) -> PendingResolution | ReusedResolution:  # fmt: skip
    """The installer's resolution, or an earlier one of exactly the same inputs when every source
    is local and nothing it read changed (``CUDASTACK_PLAN_REUSE=0``: never reused)."""
    if os.environ.get("CUDASTACK_PLAN_REUSE", "1") in ("0", "false", "no"):
        return PendingResolution(cmd, installer=installer, stdin=stdin, target=target,
                                 why="resolved: reuse is off (CUDASTACK_PLAN_REUSE=0)")  # fmt: skip
    try:
        memo = memo_for(cmd, installer=installer, target=target, stdin=stdin)
    except NotReusableError as exc:
        return PendingResolution(cmd, installer=installer, stdin=stdin, target=target,
                                 why=f"resolved: not reusable: {exc}")  # fmt: skip
    hit = load(memo)
    if hit is not None:
        output, when = hit
        why = (f"reused the resolution of {when}: same {installer} and version, arguments, environment, "
               f"configuration, interpreter and installed distributions; {len(memo.sources)} local "
               f"source(s) and the resolved wheels unchanged")  # fmt: skip
        return ReusedResolution(cmd, installer=installer, output=output, target=target, why=why)
    why = (f"resolved: no earlier resolution of these inputs ({len(memo.sources)} local source(s), "
           f"all local: stored for reuse)")  # fmt: skip
    return PendingResolution(cmd, installer=installer, stdin=stdin, target=target, memo=memo, why=why)


def start_resolve(target: Target, args: list[str], installer: str = "pip") -> PendingResolution | ReusedResolution:
    """Start the installer's resolution: pip's dry-run report (pip merges indexes, highest
    version wins), or ``uv pip compile --format pylock.toml`` for the target's interpreter (uv
    takes the first index that has a name, ``--extra-index-url`` before ``--index-url``)."""
    if installer == "uv":
        from cudastack.install.plan import split_args, uv_binary

        options, reqs = split_args(args)
        files: list[str] = []
        plain: list[str] = []
        it = iter(reqs)
        for r in it:
            if r in ("-r", "--requirement"):
                files.append(next(it, ""))
            elif r.startswith("--requirement="):
                files.append(r.partition("=")[2])
            elif r.startswith("-r"):
                files.append(r[2:])
            else:
                plain.append(r)
        cmd = [uv_binary(), "pip", "compile", "--quiet", "--format", "pylock.toml", "--python",
               target.python or sys.executable, *options, *files, *(["-"] if plain else [])]  # fmt: skip
        return start(cmd, target, installer="uv", stdin="".join(p + "\n" for p in plain) if plain else None)
    return start([*pip_base(target), "install", "--dry-run", "--quiet", "--report", "-", *args], target,
                 installer="pip")  # fmt: skip


def parse_pylock(text: str, target: Target | None) -> tuple[Planned, ...]:
    """``packages`` of a PEP 751 lock file: each package's wheel for the target (the first whose
    tags the target's interpreter supports), minus what the target already has at that version
    (``uv pip compile`` locks the whole set, pip installs only the difference)."""
    import tomllib

    from packaging.tags import Tag, compatible_tags, cpython_tags
    from packaging.utils import canonicalize_name, parse_wheel_filename

    try:
        lock = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise PlanError(f"uv's pylock.toml cannot be read: {exc}") from None
    version = tuple(int(x) for x in ((target.python_version if target else None) or "3.11").split(".")[:2])
    supported: set[Tag] = set(cpython_tags(version)) | set(compatible_tags(version))
    installed = {}
    if target is not None:
        from cudastack.env.inventory import read_inventory

        installed = {k: d.version for k, d in read_inventory(target).dists.items()}
    out = []
    for pkg in lock.get("packages", []):
        name, ver = str(pkg.get("name", "?")), str(pkg.get("version", "?"))
        if installed.get(str(canonicalize_name(name))) == ver:
            continue
        chosen = None
        for w in pkg.get("wheels", []):
            url = str(w.get("url") or w.get("path") or "")
            try:
                tags = parse_wheel_filename(urllib.parse.unquote(url.rsplit("/", 1)[-1]))[3]
            except ValueError:
                continue
            if tags & supported:
                chosen = w
                break
        if chosen is None:
            url = str((pkg.get("sdist") or {}).get("url", "") or pkg.get("directory", {}).get("path", ""))
            out.append(Planned(name=name, version=ver, url=url, sha256=None, is_wheel=False))
            continue
        digest = (chosen.get("hashes") or {}).get("sha256")
        out.append(Planned(name=name, version=ver, url=str(chosen.get("url") or chosen.get("path")),
                           sha256=digest if isinstance(digest, str) else None))  # fmt: skip
    return tuple(out)


def parse_pip_report(report: object) -> tuple[Planned, ...]:
    """The ``install`` list of pip's installation report (format version 1)."""
    items = report.get("install") if isinstance(report, dict) else None
    if not isinstance(items, list):
        raise PlanError("pip's report has no 'install' list")
    out = []
    for item in items:
        meta = item.get("metadata") or {}
        info = item.get("download_info") or {}
        archive = info.get("archive_info") or {}
        digest = (archive.get("hashes") or {}).get("sha256")
        if digest is None and str(archive.get("hash", "")).startswith("sha256="):
            digest = str(archive["hash"]).partition("=")[2]
        url = str(info.get("url", ""))
        out.append(
            Planned(
                name=str(meta.get("name", "?")),
                version=str(meta.get("version", "?")),
                url=url,
                sha256=digest if isinstance(digest, str) else None,
                requested=bool(item.get("requested")),
                is_wheel="archive_info" in info and url.split("#")[0].endswith(".whl"),
            )
        )
    return tuple(out)
