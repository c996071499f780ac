"""A hostile source checkout: its git config and attributes name commands, each of which touches
a sentinel file. cudastack snapshot, diff and patches status/save/upgrade/restore must run none of
them; commands that write refuse (exit 4), naming the configuration they cannot switch off.

Real git on real repositories; the editable install is a real PEP 610 dist-info (what pip writes
for ``pip install -e``) written by hand, so that no build backend runs git in the checkout first.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from cudastack.cli import main
from tests.unit.test_patches import ENV, commit, edit, git, lines, snapshot
from tests.venvs import make_venv, site_of

pytestmark = pytest.mark.oracle("git")

HOOKS = (
    "pre-commit",
    "prepare-commit-msg",
    "commit-msg",
    "post-commit",
    "post-checkout",
    "post-merge",
    "post-rewrite",
    "pre-rebase",
    "reference-transaction",
    "post-index-change",
    "pre-auto-gc",
    "fsmonitor-watchman",
)


def _script(path: Path, body: str) -> str:
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)
    return str(path)


def arm(repo: Path, evil: Path, sentinels: Path, *, filters: bool) -> None:
    """Point every command-running knob of ``repo`` at a script that touches ``sentinels/<name>``."""
    evil.mkdir(exist_ok=True)
    sentinels.mkdir(exist_ok=True)

    def cmd(name: str, tail: str = "exit 0\n") -> str:
        return _script(evil / name, f'touch "{sentinels}/{name}"\n{tail}')

    config = {
        "core.fsmonitor": cmd("fsmonitor", "exit 1\n"),
        "diff.external": cmd("diff-external"),
        "diff.evil.textconv": cmd("textconv", 'exec cat "$1"\n'),
        "diff.evil.command": cmd("diff-command"),
        "core.pager": cmd("pager", "exec cat\n"),
        "pager.status": cmd("pager-status", "exec cat\n"),
        "core.editor": cmd("editor"),
        "sequence.editor": cmd("sequence-editor"),
        "core.askPass": cmd("askpass"),
        "credential.helper": "!" + cmd("credential"),
        "commit.gpgSign": "true",
        "gpg.program": cmd("gpg", "exit 1\n"),
        "log.showSignature": "true",
    }
    if filters:
        config["filter.evil.clean"] = cmd("clean", "exec cat\n")
        config["filter.evil.smudge"] = cmd("smudge", "exec cat\n")
    for key, value in config.items():
        git(repo, "config", key, value)
    hooks = repo / ".git" / "hooks"
    hooks.mkdir(exist_ok=True)
    for h in HOOKS:
        _script(hooks / h, f'touch "{sentinels}/hook-{h}"\nexit 0\n')


def snap(work: Path, sentinels: Path) -> dict[str, Any]:
    """The test's own snapshot of the checkout; its plain ``git ls-files`` runs the fsmonitor
    knob, so the sentinels are cleared after it."""
    got = snapshot(work)
    for p in sentinels.iterdir():
        p.unlink()
    return got


def touched(sentinels: Path) -> list[str]:
    return sorted(p.name for p in sentinels.iterdir())


@pytest.fixture
def hostile(tmp_path: Path) -> tuple[Path, Path]:
    """upstream v1 and v2; a clone at v1 with a local commit, staged, unstaged and untracked work,
    ``*.txt diff=evil`` in .gitattributes (textconv), and every knob armed."""
    up = tmp_path / "upstream"
    up.mkdir()
    git(up, "init", "-q", "-b", "main")
    (up / "a.txt").write_text(lines(30, "a"))
    (up / "b.txt").write_text(lines(30, "b"))
    (up / ".gitattributes").write_text("*.txt diff=evil\n")
    commit(up, "v1")
    git(up, "tag", "v1")
    work = tmp_path / "checkout"
    git(tmp_path, "clone", "-q", str(up), str(work))
    git(work, "checkout", "-q", "-b", "local", "v1")
    edit(work / "a.txt", "a line 3\n", "a line 3 LOCAL\n")
    commit(work, "local fix")
    edit(up / "b.txt", "b line 20\n", "b line 20 UPSTREAM\n")
    commit(up, "v2")
    git(up, "tag", "v2")
    git(work, "fetch", "-q", "--tags", "origin")
    (work / "staged.txt").write_text("staged\n")
    git(work, "add", "staged.txt")
    edit(work / "a.txt", "a line 25\n", "a line 25 WIP\n")
    (work / "untracked.txt").write_text("mine\n")
    sentinels = tmp_path / "sentinels"
    arm(work, tmp_path / "evil", sentinels, filters=False)
    return work, sentinels


def _cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict[str, Any], str]:
    rc = main([*args, "--format", "json"])
    out = capsys.readouterr()
    return rc, (json.loads(out.out) if out.out.strip() else {}), out.err


def test_patches_commands_run_nothing_a_hostile_checkout_configures(
    hostile: tuple[Path, Path], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    work, sentinels = hostile
    monkeypatch.setenv("CUDASTACK_STATE_DIR", str(work.parent / "state"))
    before = snap(work, sentinels)
    rc, data, err = _cli(capsys, "patches", "status", str(work))
    assert rc == 0, err
    assert touched(sentinels) == []
    rc, data, err = _cli(capsys, "patches", "save", str(work))
    assert rc == 0, err
    assert touched(sentinels) == []
    said = "\n".join(data["neutralised"])
    for name in ("core.fsmonitor", "diff.evil.textconv", "diff.external", "core.pager", "gpg.program"):
        assert name in said, said
    assert "hook .git/hooks/post-checkout" in said and "hook .git/hooks/reference-transaction" in said
    rc, data, err = _cli(capsys, "patches", "upgrade", str(work), "--to", "v2")
    assert rc == 0, err
    assert [p["outcome"] for p in data["patches"]] == ["applied", "applied", "applied"]
    assert data["range_diff"]  # range-diff ran (its git log would run textconv)
    assert touched(sentinels) == []
    rc, data, err = _cli(capsys, "patches", "restore", str(work), "refs/cudastack/saves/1")
    assert rc == 0, err
    assert touched(sentinels) == []
    assert snap(work, sentinels) == before


def _editable(tmp_path: Path, checkout: Path) -> Path:
    """A venv with ``edpkg`` installed editable from ``checkout``: the dist-info pip writes."""
    python = make_venv(tmp_path / "env")
    site = site_of(python)
    di = site / "edpkg-0.1.dist-info"
    di.mkdir()
    (di / "METADATA").write_text("Metadata-Version: 2.1\nName: edpkg\nVersion: 0.1\n")
    (di / "INSTALLER").write_text("pip\n")
    (di / "direct_url.json").write_text(json.dumps({"url": checkout.as_uri(), "dir_info": {"editable": True}}))
    (site / "__editable__.edpkg-0.1.pth").write_text(str(checkout) + "\n")
    (di / "RECORD").write_text(
        "edpkg-0.1.dist-info/METADATA,,\nedpkg-0.1.dist-info/INSTALLER,,\nedpkg-0.1.dist-info/direct_url.json,,\n"
        "edpkg-0.1.dist-info/RECORD,,\n__editable__.edpkg-0.1.pth,,\n"
    )
    return python


def test_snapshot_and_diff_run_nothing_a_hostile_editable_checkout_configures(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = tmp_path / "src"
    (repo / "edpkg").mkdir(parents=True)
    (repo / "edpkg" / "__init__.py").write_text("")
    (repo / "data.dat").write_text("filtered\n")
    (repo / "notes.txt").write_text("textconv\n")
    (repo / ".gitattributes").write_text("*.dat filter=evil\n*.txt diff=evil\n")
    git(repo, "init", "-q", "-b", "main")
    commit(repo, "one")
    sentinels = tmp_path / "sentinels"
    arm(repo, tmp_path / "evil", sentinels, filters=True)
    future = os.stat(repo / "data.dat").st_mtime + 10
    for f in ("data.dat", "notes.txt", "edpkg/__init__.py"):
        os.utime(repo / f, (future, future))  # stat-dirty: git must hash them again (clean filter)
    python = _editable(tmp_path, repo)
    assert main(["snapshot", "--python", str(python), "-o", str(tmp_path / "a.json")]) == 0
    capsys.readouterr()
    assert touched(sentinels) == []
    src = next(
        d for d in json.loads((tmp_path / "a.json").read_text())["snapshot"]["distributions"] if d["key"] == "edpkg"
    )["source"]
    assert src["git_commit"] == git(repo, "rev-parse", "HEAD")
    (repo / "notes.txt").write_text("changed\n")
    rc, data, err = _cli(capsys, "diff", str(tmp_path / "a.json"), str(python))
    assert rc == 0, err
    assert [(c["kind"], c["name"]) for c in data["changes"]] == [("source", "edpkg")]  # now dirty
    assert touched(sentinels) == []
    # what git itself would have run here: the sentinels work
    subprocess.run(["git", "status"], cwd=repo, env={**os.environ, **ENV}, capture_output=True, check=True)
    assert "fsmonitor" in touched(sentinels)


def _refused(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    rc = main(argv)
    err = capsys.readouterr().err
    assert rc == 4, err
    return err


def test_a_filter_selected_by_a_nested_gitattributes_is_refused_by_save_upgrade_and_restore(
    hostile: tuple[Path, Path], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    work, sentinels = hostile
    monkeypatch.setenv("CUDASTACK_STATE_DIR", str(work.parent / "state"))
    assert main(["patches", "save", str(work)]) == 0
    capsys.readouterr()
    arm(work, work.parent / "evil", sentinels, filters=True)
    (work / "deep" / "er").mkdir(parents=True)
    (work / "deep" / "er" / ".gitattributes").write_text("*.dat filter=evil\n")
    (work / "deep" / "er" / "x.dat").write_text("x\n")
    before = snap(work, sentinels)
    for argv in (["save"], ["upgrade", "--to", "v2"], ["restore"]):
        err = _refused(capsys, ["patches", argv[0], str(work), *argv[1:]])
        assert "filter.evil.clean" in err and "filter.evil.smudge" in err and "deep/er/.gitattributes" in err, err
    assert touched(sentinels) == []
    assert snap(work, sentinels) == before


def test_a_filter_that_only_the_target_tag_selects_is_refused_before_checkout(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    up = tmp_path / "upstream"
    up.mkdir()
    git(up, "init", "-q", "-b", "main")
    (up / "a.txt").write_text("a\n")
    commit(up, "v1")
    git(up, "tag", "v1")
    (up / ".gitattributes").write_text("*.bin filter=evil\n")
    (up / "w.bin").write_text("weights\n")
    commit(up, "v2")
    git(up, "tag", "v2")
    work = tmp_path / "checkout"
    git(tmp_path, "clone", "-q", str(up), str(work))
    git(work, "checkout", "-q", "-b", "local", "v1")
    (work / "b.txt").write_text("b\n")
    commit(work, "local")
    sentinels = tmp_path / "sentinels"
    arm(work, tmp_path / "evil", sentinels, filters=True)
    monkeypatch.setenv("CUDASTACK_STATE_DIR", str(tmp_path / "state"))
    before = snap(work, sentinels)
    err = _refused(capsys, ["patches", "upgrade", str(work), "--to", "v2"])
    assert "filter.evil.smudge" in err and ":.gitattributes" in err, err
    assert touched(sentinels) == []
    assert snap(work, sentinels) == before


@pytest.mark.parametrize(
    ("knob", "named"),
    [
        ("merge", "merge.evil.driver"),
        ("include", "include.path"),
        ("uploadpack", "remote.origin.uploadpack"),
        ("sshcommand", "core.sshCommand"),
    ],
)
def test_what_no_flag_switches_off_is_refused_by_name(
    hostile: tuple[Path, Path],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    knob: str,
    named: str,
) -> None:
    work, sentinels = hostile
    monkeypatch.setenv("CUDASTACK_STATE_DIR", str(work.parent / "state"))
    evil = work.parent / "evil"
    to = "v2"
    if knob == "merge":
        git(work, "config", "merge.evil.driver", _script(evil / "merge", f'touch "{sentinels}/merge"\nexit 0\n'))
        (work / ".gitattributes").write_text("*.txt diff=evil merge=evil\n")
    elif knob == "include":
        inc = work.parent / "included.cfg"
        inc.write_text("[user]\n\tname = x\n")
        git(work, "config", "include.path", str(inc))
    else:  # the tag is not here: upgrade would fetch it from origin, a local path
        to = "v3"
        up = work.parent / "upstream"
        (up / "c.txt").write_text("c\n")
        commit(up, "v3")
        git(up, "tag", "v3")
        if knob == "uploadpack":
            git(
                work,
                "config",
                "remote.origin.uploadpack",
                _script(evil / "uploadpack", f'touch "{sentinels}/uploadpack"\nexec git-upload-pack "$@"\n'),
            )
        else:
            git(work, "remote", "set-url", "origin", "ssh://nowhere.invalid/repo")
            git(work, "config", "core.sshCommand", _script(evil / "ssh", f'touch "{sentinels}/ssh"\nexit 1\n'))
    before = snap(work, sentinels)
    argv = ["patches", "upgrade", str(work), "--to", to]
    err = _refused(capsys, argv)
    assert named.lower() in err.lower(), err
    if knob in ("merge", "include"):
        assert named.lower() in _refused(capsys, ["patches", "save", str(work)]).lower()
    assert touched(sentinels) == []
    assert snap(work, sentinels) == before


def test_the_sentinels_fire_under_plain_git(hostile: tuple[Path, Path]) -> None:
    """The knobs are really armed: plain git runs them (so the tests above can fail)."""
    work, sentinels = hostile
    env = {**os.environ, **ENV}
    env.pop("GIT_CONFIG_NOSYSTEM")
    (work / "plain.dat").write_text("no diff attribute: diff.external\n")
    git(work, "add", "-N", "plain.dat")
    for args in (["status"], ["diff"], ["log", "-1", "-p"], ["checkout", "-q", "-b", "x"], ["commit", "-qm", "x"]):
        subprocess.run(["git", *args], cwd=work, env=env, capture_output=True, check=False)
    got = touched(sentinels)
    for name in ("fsmonitor", "diff-external", "diff-command", "textconv", "gpg", "hook-post-checkout"):
        assert name in got, got
