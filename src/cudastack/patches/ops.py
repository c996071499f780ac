"""status, save, restore and upgrade of a source checkout's local patches (git CLI only).

A *save* is a commit under ``refs/cudastack/saves/<n>`` whose tree is the working tree (tracked
and untracked-not-ignored files, built with a temporary index and ``commit-tree``, so neither the
real index nor the working tree is touched) and whose second parent is a commit of the exact
index; the message holds the HEAD commit and branch as JSON. ``restore`` rebuilds HEAD, branch,
index and working tree from it. Ignored files (in-tree ``.so`` from ``pip install -e``) are never
saved nor touched.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import tempfile
from dataclasses import dataclass, field

from cudastack.files import read_bytes
from cudastack.patches.git import Git, Hazards, PatchError, preflight, step

SAVE_REF = "refs/cudastack/saves"
AUTOSAVE_REF = "refs/cudastack/autosaves"
"""Where ``restore`` keeps the state it is about to replace (never the default of ``restore``)."""
UPGRADE_MARKER = "cudastack-upgrade.json"
"""In the git directory while an upgrade changes the checkout: its save and its new branch. A
cherry-pick or three-way apply left by a killed upgrade is cudastack's own, and ``restore`` may
undo it; any other one is the user's, and ``restore`` refuses."""


@dataclass(slots=True)
class Patch:
    name: str
    kind: str
    """``commit``, ``staged``, ``unstaged`` (untracked files included)."""
    files: list[str]
    commit: str | None = None
    subject: str = ""
    patch_id: str | None = None
    outcome: str | None = None
    """After an upgrade: ``applied``, ``upstream``, ``partial``, ``conflict``."""
    evidence: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, object]:
        return {
            "name": self.name,
            "kind": self.kind,
            "files": self.files,
            "commit": self.commit,
            "subject": self.subject,
            "patch_id": self.patch_id,
            "outcome": self.outcome,
            "evidence": self.evidence,
        }


@dataclass(slots=True)
class Status:
    repo: str
    head: str
    branch: str | None
    base: str | None
    base_how: str
    patches: list[Patch]
    ignored_note: str


def _base(git: Git) -> tuple[str | None, str]:
    tag = git.out("describe", "--tags", "--abbrev=0", "HEAD", check=False)
    if tag:
        return tag, "nearest tag (git describe --tags)"
    upstream = git.out("rev-parse", "--abbrev-ref", "--symbolic-full-name", "@{upstream}", check=False)
    if upstream and not upstream.startswith("fatal"):
        mb = git.out("merge-base", "HEAD", upstream, check=False)
        if mb:
            return mb, f"merge-base with {upstream}"
    return None, "no tag and no upstream branch: every commit counts as local"


def _patch_id(git: Git, rev: str) -> str | None:
    diff = git.run("show", "--format=", "--binary", rev).stdout
    out = git.run("patch-id", "--stable", input=diff).stdout.decode().split()
    return out[0] if out else None


def status(git: Git) -> Status:
    preflight(git, for_change=False)
    head = git.out("rev-parse", "HEAD")
    branch = git.out("symbolic-ref", "--short", "-q", "HEAD", check=False) or None
    base, how = _base(git)
    if base is None and os.path.exists(os.path.join(git.git_dir, "shallow")):
        raise PatchError(
            f"{git.repo} is a shallow clone with no tag or upstream merge-base in reach: the local commits "
            "cannot be told from upstream ones",
            hint="git fetch --unshallow --tags",
        )
    patches: list[Patch] = []
    rng = f"{base}..HEAD" if base else "HEAD"
    for line in git.lines("rev-list", "--reverse", "--no-merges", rng):
        files = git.lines("diff-tree", "--no-commit-id", "--name-only", "-r", "--root", line)
        subject = git.out("log", "-1", "--format=%s", line)
        patches.append(
            Patch(f"{len(patches) + 1:02d}-{_slug(subject)}", "commit", files, line, subject, _patch_id(git, line))
        )
    staged = git.lines("diff", "--cached", "--name-only", "-z")
    if staged:
        patches.append(Patch("staged", "staged", staged))
    unstaged = git.lines("diff", "--name-only", "-z")
    untracked = git.lines("ls-files", "--others", "--exclude-standard", "-z")
    if unstaged or untracked:
        patches.append(Patch("unstaged", "unstaged", sorted(set(unstaged) | set(untracked))))
    n_ignored = len(git.lines("ls-files", "--others", "--ignored", "--exclude-standard", "--directory", "-z"))
    note = f"{n_ignored} ignored path(s) (build outputs such as in-tree .so) are not saved" if n_ignored else ""
    return Status(git.repo, head, branch, base, how, patches, note)


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:40] or "patch"


@dataclass(frozen=True, slots=True)
class Saved:
    ref: str
    commit: str
    head: str
    branch: str | None
    index_tree: str
    work_tree: str
    neutralised: tuple[str, ...] = ()
    """Configured commands cudastack's git overrides kept from running (hooks, fsmonitor, ...)."""


def _next_ref(git: Git, base: str) -> str:
    existing = git.lines("for-each-ref", "--format=%(refname)", base)
    n = 1 + max((int(r.rsplit("/", 1)[1]) for r in existing if r.rsplit("/", 1)[1].isdigit()), default=0)
    return f"{base}/{n}"


def save(
    git: Git,
    state_dir: str | None = None,
    st: Status | None = None,
    *,
    ref_base: str = SAVE_REF,
    checked: Hazards | None = None,
    allow_unmerged: bool = False,
    keep: tuple[str, ...] = (),
) -> Saved:
    """Record HEAD, branch, index, working tree and untracked files under a recovery ref; with
    ``state_dir``, also the patch series and manifest of ``st`` (the checkout's status, computed
    here when the caller has none). Touches neither the index nor the working tree, runs no hook.
    ``checked``: the caller ran the preflight already. ``allow_unmerged``: an index with conflict
    stages (cudastack's own killed upgrade) is saved as HEAD's tree; its working tree is exact.
    ``keep``: more commits the save keeps reachable (extra parents: a branch tip about to move)."""
    hazards = checked if checked is not None else preflight(git, for_change=False, writes=True)
    head = git.out("rev-parse", "HEAD")
    branch = git.out("symbolic-ref", "--short", "-q", "HEAD", check=False) or None
    written = git.run("write-tree", check=not allow_unmerged)
    index_tree = written.stdout.decode().strip() if written.returncode == 0 else git.out("rev-parse", "HEAD^{tree}")
    gd = git.git_dir
    with tempfile.TemporaryDirectory(prefix="cudastack-index-") as tmp:
        tmp_index = os.path.join(tmp, "index")
        real_index = os.path.join(gd, "index")
        if os.path.exists(real_index):
            shutil.copyfile(real_index, tmp_index)
        env = {"GIT_INDEX_FILE": tmp_index}
        git.run("add", "-A", "--", ".", env=env)
        work_tree = git.out("write-tree", env=env)
    step("save:trees")
    meta = json.dumps({"cudastack": "save", "head": head, "branch": branch})
    ident = {"GIT_AUTHOR_NAME": "cudastack", "GIT_AUTHOR_EMAIL": "cudastack@localhost",
             "GIT_COMMITTER_NAME": "cudastack", "GIT_COMMITTER_EMAIL": "cudastack@localhost"}  # fmt: skip
    index_commit = git.out("commit-tree", index_tree, "-p", head, "-m", "cudastack save: index", env=ident)
    more = [arg for c in keep for arg in ("-p", c)]
    commit = git.out("commit-tree", work_tree, "-p", head, "-p", index_commit, *more, "-m", meta, env=ident)
    ref = _next_ref(git, ref_base)
    git.run("update-ref", ref, commit, "")  # "": the ref must not exist yet
    step("save:ref")
    if state_dir:
        _write_series(git, state_dir, int(ref.rsplit("/", 1)[1]), head, st or status(git))
    return Saved(ref, commit, head, branch, index_tree, work_tree, hazards.neutralised)


def _write_series(git: Git, state_dir: str, n: int, head: str, st: Status) -> None:
    out = os.path.join(state_dir, f"save-{n}")
    os.makedirs(out, exist_ok=True)
    if st.base:
        git.run("format-patch", "-q", "--binary", "-o", out, f"{st.base}..{head}")
    with open(os.path.join(out, "manifest.json"), "w", encoding="utf-8") as fh:
        json.dump({"base": st.base, "head": head, "patches": [p.as_dict() for p in st.patches]}, fh, indent=1)


def latest_save(git: Git) -> str:
    refs = git.lines("for-each-ref", "--format=%(refname)", SAVE_REF)
    nums = sorted(int(r.rsplit("/", 1)[1]) for r in refs if r.rsplit("/", 1)[1].isdigit())
    if not nums:
        raise PatchError(f"no save in {git.repo} (refs/cudastack/saves/*): run `cudastack patches save` first")
    return f"{SAVE_REF}/{nums[-1]}"


def read_save(git: Git, ref: str) -> Saved:
    commit = git.out("rev-parse", "--verify", f"{ref}^{{commit}}", check=False)
    if not commit:
        raise PatchError(f"{ref}: no such save")
    meta = json.loads(git.out("log", "-1", "--format=%B", commit))
    parents = git.out("log", "-1", "--format=%P", commit).split()
    return Saved(
        ref,
        commit,
        meta["head"],
        meta.get("branch"),
        git.out("rev-parse", f"{parents[1]}^{{tree}}"),
        git.out("rev-parse", f"{commit}^{{tree}}"),
    )


@dataclass(frozen=True, slots=True)
class Restored:
    saved: Saved
    """The save the checkout is now at."""
    before: Saved
    """The state just before, kept under ``refs/cudastack/autosaves/N``."""
    moved: tuple[str, str] | None = None
    """(branch, its tip before) when restore moved a branch that HEAD was not on: that tip is a
    parent of the autosave, so its commits stay reachable."""


def _own_upgrade(git: Git) -> dict[str, str] | None:
    """The marker of an upgrade that was killed while HEAD is still on the branch it builds."""
    try:
        with open(os.path.join(git.git_dir, UPGRADE_MARKER), encoding="utf-8") as fh:
            marker = json.load(fh)
    except (OSError, ValueError):
        return None
    if not isinstance(marker, dict) or not isinstance(marker.get("branch"), str):
        return None
    on = git.out("symbolic-ref", "-q", "HEAD", check=False)
    return {str(k): str(v) for k, v in marker.items()} if on == f"refs/heads/{marker['branch']}" else None


def _drop_marker(git: Git) -> None:
    try:
        os.unlink(os.path.join(git.git_dir, UPGRADE_MARKER))
    except FileNotFoundError:
        pass


def restore(git: Git, ref: str | None = None) -> Restored:
    """Return to the saved state exactly: branch and HEAD, then working tree, then index.

    The same preflight as ``save`` and ``upgrade`` first (mid-merge, rebase, cherry-pick or
    revert, unmerged paths, lock files, line-ending conversion, filters, a dirty submodule,
    configuration that would run a command): refused, nothing changed. Then, before any
    ``checkout -f``, ``reset`` or ``clean``, the current state (HEAD, branch, index, working tree,
    untracked files) is saved under ``refs/cudastack/autosaves/N``: restoring that gets it back."""
    own = _own_upgrade(git)
    saved = read_save(git, ref or latest_save(git))
    hazards = preflight(
        git, for_change=True, writes=True, revs=(saved.head, saved.work_tree), own_upgrade=own is not None
    )
    moved = None
    if saved.branch:
        tip = git.out("rev-parse", "-q", "--verify", f"refs/heads/{saved.branch}^{{commit}}", check=False)
        if tip and tip != saved.head and tip != git.out("rev-parse", "HEAD"):
            moved = (saved.branch, tip)  # commits made on it since the save, from another branch
    before = save(
        git, ref_base=AUTOSAVE_REF, checked=hazards, allow_unmerged=own is not None, keep=(moved[1],) if moved else ()
    )
    step("restore:autosaved")
    gd = git.git_dir
    if own is not None:  # cudastack's own pick or apply, killed: forget it (the autosave holds its files)
        if os.path.exists(os.path.join(gd, "CHERRY_PICK_HEAD")):
            git.run("cherry-pick", "--quit", check=False)
        if os.path.exists(os.path.join(gd, "MERGE_HEAD")):
            git.run("merge", "--quit", check=False)
    if saved.branch:
        git.run("checkout", "-q", "-f", "-B", saved.branch, saved.head)  # -B: made again if deleted
    else:
        git.run("checkout", "-q", "-f", "--detach", saved.head)
    git.run("clean", "-q", "-f", "-d")  # untracked, not ignored: both saves hold every one of them
    # working tree = saved tree: write its files, delete what it does not have
    git.run("read-tree", saved.work_tree)
    git.run("checkout-index", "-a", "-f")
    for path in git.lines("diff", "--name-only", "--diff-filter=D", "-z", saved.head, saved.work_tree):
        full = os.path.join(git.repo, path)
        if os.path.lexists(full):
            os.unlink(full)
    git.run("read-tree", saved.index_tree)
    git.run("update-index", "-q", "--refresh", check=False)
    _drop_marker(git)
    return Restored(saved, before, moved)


@dataclass(slots=True)
class Upgrade:
    saved: Saved
    target: str
    branch: str
    base: str | None
    patches: list[Patch]
    conflicts: list[str]
    range_diff: str = ""
    head: str = ""
    neutralised: tuple[str, ...] = ()


_IDENT = {"GIT_COMMITTER_NAME": "cudastack", "GIT_COMMITTER_EMAIL": "cudastack@localhost"}


def _hunks(diff: str) -> list[tuple[str, str]]:
    """Split a unified diff into single-hunk patches: (file, patch text)."""
    out: list[tuple[str, str]] = []
    header: list[str] = []
    current: list[str] | None = None
    name = ""
    for line in diff.splitlines(keepends=True):
        if line.startswith("diff --git "):
            if current:
                out.append((name, "".join(header + current)))
            header, current = [line], None
            name = line.split(" b/", 1)[-1].strip()
        elif line.startswith("@@"):
            if current:
                out.append((name, "".join(header + current)))
            current = [line]
        elif current is not None:
            current.append(line)
        else:
            header.append(line)
    if current:
        out.append((name, "".join(header + current)))
    return out


def _upstream_hunks(git: Git, diff: str) -> tuple[list[str], list[str]]:
    """Hunks of ``diff`` whose result is already in the index (reverse-apply cleanly), and the rest."""
    present, missing = [], []
    for name, text in _hunks(diff):
        label = f"{name} {text.split('@@')[1].strip() if '@@' in text else ''}".strip()
        if git.run("apply", "--cached", "--reverse", "--check", input=text.encode(), check=False).returncode == 0:
            present.append(label)
        else:
            missing.append(label)
    return present, missing


def _conflict_markers(git: Git, files: list[str]) -> list[str]:
    out = []
    for f in files:
        try:
            # a working-tree file is the checkout's, not ours: a FIFO there must not block (files.py)
            text = read_bytes(os.path.join(git.repo, f), 64 << 20).data.decode("utf-8", "replace")
            for n, line in enumerate(text.splitlines(), 1):
                if line.startswith("<<<<<<< "):
                    out.append(f"{f}:{n}")
        except OSError:
            continue
    return out


def _refuse_fetch_commands(git: Git, remote: str, to: str) -> None:
    """A fetch runs transport commands the checkout's config may name (``core.sshCommand``,
    ``remote.<name>.uploadpack`` for a local path, ``core.gitProxy``, a remote helper): refuse."""
    from cudastack.git import scan_config

    refused = scan_config(git, attributes={}, fetch=True).refused
    if refused:
        raise PatchError(
            f"{to} is not in {git.repo}, and fetching it from {remote} would run what its config names: "
            + "; ".join(refused),
            hint="fetch the tag yourself once you trust that config "
            f"(git fetch --tags {shlex.quote(remote)}), then run again",
        )


def upgrade(git: Git, to: str, state_dir: str | None = None) -> Upgrade:
    """Save, then rebuild the local patches on ``to`` on a new branch ``cudastack/<to>``."""
    if not git.out("rev-parse", "--verify", "-q", f"{to}^{{commit}}", check=False):
        preflight(git, for_change=True, writes=True)  # before a fetch writes anything
        remotes = git.lines("remote")
        if remotes:
            _refuse_fetch_commands(git, remotes[0], to)
            git.run("fetch", "--no-recurse-submodules", "--tags", remotes[0], check=False)
        if not git.out("rev-parse", "--verify", "-q", f"{to}^{{commit}}", check=False):
            raise PatchError(f"{to}: no such tag or commit" + (f" (fetched tags from {remotes[0]})" if remotes else ""))
    hazards = preflight(git, for_change=True, writes=True, revs=(to,))  # what `to` checks out counts too
    st = status(git)
    if st.base and git.run("cat-file", "-e", f"{st.base}^{{commit}}", check=False).returncode != 0:
        raise PatchError(f"the base {st.base} is not in this (shallow?) clone", hint="git fetch --unshallow")
    saved = save(git, state_dir, st, checked=hazards)
    branch, n = f"cudastack/{to}", 1
    while git.out("rev-parse", "--verify", "-q", f"refs/heads/{branch}", check=False):
        n += 1  # an earlier upgrade's branch may hold resolved conflicts: never reuse it
        branch = f"cudastack/{to}-{n}"
    upstream_ids: dict[str, str] = {}
    if st.base:
        for rev in git.lines("rev-list", "--no-merges", f"{st.base}..{to}"):
            pid = _patch_id(git, rev)
            if pid:
                upstream_ids[pid] = rev
    with open(os.path.join(git.git_dir, UPGRADE_MARKER), "w", encoding="utf-8") as fh:
        json.dump({"save": saved.ref, "branch": branch}, fh)
    step("upgrade:saved")
    # the save above holds everything these two drop (untracked files too)
    git.run("checkout", "-q", "-f", "-b", branch, to)
    git.run("clean", "-q", "-f", "-d")
    step("upgrade:branch")
    conflicts: list[str] = []
    patches = [p for p in st.patches if p.kind == "commit"]
    for p in patches:
        assert p.commit is not None
        step(f"upgrade:patch:{p.name}")
        if p.patch_id and p.patch_id in upstream_ids:
            p.outcome = "upstream"
            p.evidence.append(f"identical patch-id {p.patch_id[:12]} as upstream {upstream_ids[p.patch_id][:12]}")
            continue
        diff = git.run("show", "--format=", "--binary", p.commit).stdout.decode(errors="surrogateescape")
        present, missing = _upstream_hunks(git, diff)
        if present and not missing:
            p.outcome = "upstream"
            p.evidence.append(f"every hunk reverse-applies on {to}: " + "; ".join(present))
            continue
        pick = git.run(
            "cherry-pick", "-x", "--allow-empty", "--keep-redundant-commits", p.commit, env=_IDENT, check=False
        )
        if pick.returncode == 0:
            if git.out("rev-parse", "HEAD^{tree}") == git.out("rev-parse", "HEAD~1^{tree}"):
                git.run("update-ref", "HEAD", "HEAD~1")  # same tree: index and files are already right
                p.outcome = "upstream"
                p.evidence.append(f"empty after a three-way merge onto {to}")
            elif present:
                p.outcome = "partial"
                p.evidence.append("already upstream: " + "; ".join(present))
                p.evidence.append("applied: " + "; ".join(missing))
            else:
                p.outcome = "applied"
                p.evidence.append(f"cherry-picked cleanly as {git.out('rev-parse', '--short', 'HEAD')}")
            continue
        files = git.lines("diff", "--name-only", "--diff-filter=U", "-z")
        if not files:
            raise PatchError(f"cherry-pick of {p.commit[:12]} failed: {pick.stderr.decode(errors='replace')[-400:]}")
        markers = _conflict_markers(git, files)
        git.run("add", "-A", "--", *files)
        msg = (
            f"CONFLICT (cudastack): {p.subject}\n\nresolve the markers in: {', '.join(files)}\n"
            f"(cherry picked from commit {p.commit})"
        )
        git.run(
            "commit",
            "-q",
            "--no-verify",
            "-m",
            msg,
            env={**_IDENT, "GIT_AUTHOR_NAME": "cudastack", "GIT_AUTHOR_EMAIL": "cudastack@localhost"},
        )
        p.outcome = "partial" if present else "conflict"
        if present:
            p.evidence.append("already upstream: " + "; ".join(present))
        p.evidence.append("conflict markers at " + ", ".join(markers or files))
        p.evidence.append(
            f"committed with the markers as {git.out('rev-parse', '--short', 'HEAD')} so the rest could go on"
        )
        conflicts.extend(files)
    new_head = git.out("rev-parse", "HEAD")
    step("upgrade:commits")
    # uncommitted edits come back uncommitted: the staged part staged, the rest only on disk
    # (applied with --index for the three-way merge, then the index is put back)
    staged_index = git.out("write-tree")
    for p in st.patches:
        if p.kind == "commit":
            continue
        step(f"upgrade:{p.kind}")
        a, b = (saved.head, saved.index_tree) if p.kind == "staged" else (saved.index_tree, saved.work_tree)
        patch = git.run("diff", "--binary", "--full-index", a, b).stdout
        res = git.run("apply", "--3way", "--index", input=patch, check=False)
        unmerged = git.lines("diff", "--name-only", "--diff-filter=U", "-z")
        if p.kind == "staged" and not unmerged:
            staged_index = git.out("write-tree")
        if res.returncode == 0 and not unmerged:
            p.outcome = "applied"
            p.evidence.append("re-applied as uncommitted" + (" and staged" if p.kind == "staged" else "") + " edits")
        else:
            files = unmerged or p.files
            p.outcome = "conflict"
            p.evidence.append(res.stderr.decode(errors="replace").strip()[-400:])
            p.evidence.append("conflict markers at " + ", ".join(_conflict_markers(git, files) or files))
            conflicts.extend(files)
    git.run("read-tree", staged_index)
    rd = ""
    if st.base:
        rd = git.out("range-diff", "--no-color", f"{st.base}..{saved.head}", f"{to}..{new_head}", check=False)
    _drop_marker(git)
    step("upgrade:done")
    return Upgrade(saved, to, branch, st.base, st.patches, sorted(set(conflicts)), rd, new_head, hazards.neutralised)
