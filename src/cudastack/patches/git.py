"""The checks that must pass before cudastack touches a checkout (never guess: refuse with a clear
reason). git itself runs through :class:`cudastack.git.Git`, with its overrides."""

from __future__ import annotations

import os
import shlex

from cudastack.errors import CudastackError
from cudastack.faults import KILL_ENV, step
from cudastack.git import Git, Hazards, attribute_texts, scan_attributes, scan_config

__all__ = ["KILL_ENV", "Git", "Hazards", "PatchError", "open_repo", "preflight", "step"]


class PatchError(CudastackError, RuntimeError):
    """A checkout cudastack refuses to work on, or a git command that failed unexpectedly."""

    exit_code = 4  # refused: a checkout cudastack will not change


def open_repo(path: str) -> Git:
    if not os.path.isdir(path):
        raise PatchError(f"{path}: no such directory")
    proc = Git(path, error=PatchError).run("rev-parse", "--show-toplevel", check=False)
    if proc.returncode != 0:
        raise PatchError(f"{path} is not a git checkout: {proc.stderr.decode(errors='replace').strip()}")
    return Git(proc.stdout.decode(errors="surrogateescape").strip(), error=PatchError)


def _lock_files(gd: str) -> list[str]:
    """git's lock files: ``index.lock``, ``HEAD.lock``, ``ORIG_HEAD.lock``, ``packed-refs.lock``,
    ``config.lock`` and any ``refs/**.lock`` — a git killed mid-command leaves one behind (seen:
    HEAD.lock from a checkout killed with its process group), and the next git command fails."""
    found = [os.path.join(gd, n) for n in sorted(os.listdir(gd)) if n.endswith(".lock")] if os.path.isdir(gd) else []
    for dirpath, _dirs, files in os.walk(os.path.join(gd, "refs")):
        found.extend(os.path.join(dirpath, f) for f in sorted(files) if f.endswith(".lock"))
    return found


_OWN_UPGRADE_STATES = ("CHERRY_PICK_HEAD", "MERGE_HEAD")
"""What an upgrade killed inside ``git cherry-pick`` leaves behind (a conflicted pick writes
MERGE_MSG and CHERRY_PICK_HEAD; git versions differ on MERGE_HEAD)."""


def preflight(
    git: Git,
    *,
    for_change: bool,
    writes: bool = False,
    revs: tuple[str, ...] = (),
    own_upgrade: bool = False,
) -> Hazards:
    """Refuse states in which 'byte for byte' or 'nothing lost' cannot be promised, and, before
    a command that writes (``writes``), configuration that would make git run a command cudastack
    cannot switch off. ``revs``: commits the command will check out (their ``.gitattributes``
    count too). ``own_upgrade``: the checkout is in the middle of cudastack's own upgrade, killed
    half-way (a cherry-pick or a three-way apply of its own), which ``restore`` may undo.
    Returns what was configured and is switched off for every git call."""
    gd = git.git_dir
    for name, what in (
        ("rebase-merge", "a rebase"),
        ("rebase-apply", "a rebase or git am"),
        ("MERGE_HEAD", "a merge"),
        ("CHERRY_PICK_HEAD", "a cherry-pick"),
        ("REVERT_HEAD", "a revert"),
    ):
        if os.path.exists(os.path.join(gd, name)) and not (own_upgrade and name in _OWN_UPGRADE_STATES):
            raise PatchError(
                f"{git.repo} is in the middle of {what} ({name} exists): its resolution lives only in the "
                "index and working tree",
                hint="finish it (git add, then git commit / git rebase --continue) or abort it "
                "(git merge --abort / git rebase --abort / git cherry-pick --abort) first",
            )
    locks = _lock_files(gd)
    if locks:
        shown = " ".join(locks[:8])
        raise PatchError(
            f"{shown} exist{'s' if len(locks) == 1 else ''}: a git process is running, or one was killed and "
            "left it behind",
            hint=f"if no git is running on this checkout, remove {'it' if len(locks) == 1 else 'them'}: "
            f"rm -- {shlex.join(locks[:8])}",
        )
    problems: list[str] = []
    autocrlf = git.out("config", "--get", "core.autocrlf", check=False).lower()
    if autocrlf in ("true", "input"):
        problems.append(
            f"core.autocrlf={autocrlf}: git rewrites line endings between the index and the working tree, "
            "so a byte-for-byte save and restore cannot be promised"
        )
    texts = attribute_texts(git, revs)
    for where, text in texts:
        for line in text.splitlines():
            words = line.split("#", 1)[0].split()
            bad = [w for w in words[1:] if w.startswith(("filter=", "eol=", "working-tree-encoding=")) or w == "text"]
            if bad:
                drivers = [
                    e.where()
                    for w in bad
                    if w.startswith("filter=")
                    for e in git.config()
                    if e.scope != "command" and e.section == "filter" and e.subsection == w[7:]
                ]
                problems.append(
                    f"{where}: '{line.strip()}' makes git convert files (clean/smudge, line endings): "
                    "byte-for-byte save and restore cannot be promised"
                    + (f", and it selects the filter {', '.join(drivers)}, a command git would run" if drivers else "")
                )
    hazards = Hazards()
    if writes:
        hazards = scan_config(git, attributes=scan_attributes(texts))
        # a filter an attribute selects is named above, with the attribute line
        problems.extend(f"{r}: git would run it" for r in hazards.refused if not r.startswith("filter driver"))
        if not own_upgrade and git.lines("ls-files", "-u", "-z"):
            problems.append(
                "the index has unmerged paths (a conflict in progress, e.g. from git stash pop or git apply "
                "--3way): its resolution lives only in the index and working tree"
            )
    if problems:
        raise PatchError(
            f"{git.repo}: " + "; ".join(problems),
            hint="nothing was changed; fix the above (or work in a clone without it), then run again",
        )
    if for_change:
        for line in git.lines("status", "--porcelain=v2", "--ignore-submodules=none"):
            parts = line.split(" ")
            if parts[0] in ("1", "2") and len(parts) > 2 and parts[2].startswith("S") and parts[2] != "S...":
                raise PatchError(
                    f"submodule {parts[-1]} has local changes ({parts[2]}): commit or stash them inside it first"
                )
    return hazards
