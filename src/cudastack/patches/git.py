"""A thin wrapper around the git command line, and the checks that must pass before cudastack
touches a checkout (never guess: refuse with a clear reason)."""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass

from cudastack.errors import CudastackError
from cudastack.faults import KILL_ENV, step

__all__ = ["KILL_ENV", "Git", "PatchError", "step"]


class PatchError(CudastackError, RuntimeError):
    """A checkout cudastack refuses to work on, or a git command that failed unexpectedly."""

    exit_code = 4  # refused: a checkout cudastack will not change


@dataclass(frozen=True, slots=True)
class Git:
    repo: str

    def run(
        self, *args: str, env: dict[str, str] | None = None, check: bool = True, input: bytes | None = None
    ) -> subprocess.CompletedProcess[bytes]:
        full_env = dict(os.environ, LC_ALL="C", GIT_TERMINAL_PROMPT="0", **(env or {}))
        full_env.pop(KILL_ENV, None)
        proc = subprocess.run(
            ["git", "-c", "core.quotepath=off", "-c", "advice.detachedHead=false", *args],
            cwd=self.repo,
            env=full_env,
            capture_output=True,
            input=input,
            check=False,
        )
        if check and proc.returncode != 0:
            err = proc.stderr.decode(errors="replace").strip() or proc.stdout.decode(errors="replace").strip()
            raise PatchError(f"git {' '.join(args[:3])} failed: {err[-800:]}")
        return proc

    def out(self, *args: str, env: dict[str, str] | None = None, check: bool = True) -> str:
        return self.run(*args, env=env, check=check).stdout.decode(errors="surrogateescape").strip()

    def lines(self, *args: str, env: dict[str, str] | None = None) -> list[str]:
        text = self.run(*args, env=env).stdout.decode(errors="surrogateescape")
        return [line for line in text.split("\0" if "-z" in args else "\n") if line]

    @property
    def git_dir(self) -> str:
        return os.path.join(self.repo, self.out("rev-parse", "--git-dir"))


def open_repo(path: str) -> Git:
    if not os.path.isdir(path):
        raise PatchError(f"{path}: no such directory")
    proc = subprocess.run(
        ["git", "rev-parse", "--show-toplevel"], cwd=path, capture_output=True, text=True, check=False
    )
    if proc.returncode != 0:
        raise PatchError(f"{path} is not a git checkout: {proc.stderr.strip()}")
    return Git(proc.stdout.strip())


def _lock_files(gd: str) -> list[str]:
    """git's lock files: ``index.lock``, ``HEAD.lock``, ``ORIG_HEAD.lock``, ``packed-refs.lock``,
    ``config.lock`` and any ``refs/**.lock`` — a git killed mid-command leaves one behind (seen:
    HEAD.lock from a checkout killed with its process group), and the next git command fails."""
    found = [os.path.join(gd, n) for n in sorted(os.listdir(gd)) if n.endswith(".lock")] if os.path.isdir(gd) else []
    for dirpath, _dirs, files in os.walk(os.path.join(gd, "refs")):
        found.extend(os.path.join(dirpath, f) for f in sorted(files) if f.endswith(".lock"))
    return found


def preflight(git: Git, *, for_change: bool) -> None:
    """Refuse states in which 'byte for byte' or 'nothing lost' cannot be promised."""
    gd = git.git_dir
    for name, what in (
        ("rebase-merge", "a rebase"),
        ("rebase-apply", "a rebase or git am"),
        ("MERGE_HEAD", "a merge"),
        ("CHERRY_PICK_HEAD", "a cherry-pick"),
        ("REVERT_HEAD", "a revert"),
    ):
        if os.path.exists(os.path.join(gd, name)):
            raise PatchError(
                f"{git.repo} is in the middle of {what} ({name} exists)",
                hint="finish it or abort it (git rebase --abort / git merge --abort / git cherry-pick --abort) first",
            )
    locks = _lock_files(gd)
    if locks:
        shown = " ".join(locks[:8])
        raise PatchError(
            f"{shown} exist{'s' if len(locks) == 1 else ''}: a git process is running, or one was killed and "
            "left it behind",
            hint=f"if no git is running on this checkout, remove {'it' if len(locks) == 1 else 'them'}: rm {shown}",
        )
    autocrlf = git.out("config", "--get", "core.autocrlf", check=False).lower()
    if autocrlf in ("true", "input"):
        raise PatchError(
            f"core.autocrlf={autocrlf}: git rewrites line endings between the index and the working tree, "
            "so a byte-for-byte save and restore cannot be promised"
        )
    for attrs in (os.path.join(git.repo, ".gitattributes"), os.path.join(gd, "info", "attributes")):
        try:
            with open(attrs, encoding="utf-8", errors="replace") as fh:
                text = fh.read()
        except OSError:
            continue
        for line in text.splitlines():
            words = line.split("#", 1)[0].split()
            bad = [w for w in words[1:] if w.startswith(("filter=", "eol=", "working-tree-encoding=")) or w == "text"]
            if bad:
                raise PatchError(
                    f"{attrs}: '{line.strip()}' makes git convert files (clean/smudge, line endings): "
                    "byte-for-byte save and restore cannot be promised"
                )
    if for_change:
        for line in git.lines("status", "--porcelain=v2", "--ignore-submodules=none"):
            parts = line.split(" ")
            if parts[0] in ("1", "2") and len(parts) > 2 and parts[2].startswith("S") and parts[2] != "S...":
                raise PatchError(
                    f"submodule {parts[-1]} has local changes ({parts[2]}): commit or stash them inside it first"
                )
