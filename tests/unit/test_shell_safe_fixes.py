"""Every printed fix line is shell-safe: names and paths holding quotes, ``$()``, backticks, spaces
and newlines are quoted, so pasting the line runs only the command it names (issue 13, scenario 5).

Each fix line is really run by bash in a scratch directory; the installers it names are shell
functions that do nothing, so only an injected command could create the ``INJ`` file."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

from cudastack.cli import main
from tests import scenario

HOSTILE = [
    "'$(touch INJ)'",
    '"$(touch INJ)"',
    "`touch INJ`",
    "a b;touch INJ",
    "x\n touch INJ\n",
    "$(touch INJ)",
]
# the installers a fix names never run here: only an injected command can create INJ
_STUBS = "uv() { :; }; conda() { :; }; pip() { :; }; sudo() { :; }; "


def _fix_commands(data: dict[str, Any], code: str) -> list[str]:
    found = [f for f in data["findings"] if f["code"] == code]
    assert found, f"{code} did not fire: {[f['code'] for f in data['findings']]}"
    return [c for f in found for c in (f.get("fix") or {}).get("commands", [])]


def _assert_runs_nothing_else(commands: list[str], scratch: Path) -> None:
    assert commands
    for cmd in commands:
        work = scratch / "sh"
        work.mkdir()
        subprocess.run(["bash", "-c", _STUBS + cmd], cwd=work, capture_output=True, timeout=30, check=False)
        assert not (work / "INJ").exists(), f"pasting {cmd!r} ran an injected command"
        subprocess.run(["rm", "-rf", str(work)], check=True)


def _doctor(site: Path, capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, Any]:
    main(["doctor", "--site-packages", str(site), "--python-version", "3.11", "--format", "json", *args])
    data: dict[str, Any] = json.loads(capsys.readouterr().out)
    return data


@pytest.mark.parametrize("evil", HOSTILE)
def test_duplicate_distribution_fix_quotes_the_dist_info_name(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], evil: str
) -> None:
    """PKG015: ``rm -r`` of a stale dist-info named ``numpy-3.0<evil>.dist-info``."""
    site = tmp_path / "site-packages"
    scenario.write_dist(site, {"name": "numpy", "version": "2.3.4"})
    stale = scenario.write_dist(site, {"name": "numpy", "version": "3.0"})  # sorts after: the shadowed one
    os.rename(stale, site / f"numpy-3.0{evil}.dist-info")
    commands = _fix_commands(_doctor(site, capsys, "--select", "PKG015"), "PKG015")
    _assert_runs_nothing_else(commands, tmp_path)


@pytest.mark.parametrize("evil", HOSTILE)
def test_conda_reinstall_fix_quotes_the_prefix(tmp_path: Path, capsys: pytest.CaptureFixture[str], evil: str) -> None:
    """PKG016: ``conda install -p <prefix>`` for an environment whose path is hostile."""
    spec = scenario.load("pkg016_conda")
    site = scenario.materialize(spec, tmp_path / f"env{evil}")
    data = _doctor(site, capsys, "--select", "PKG016")
    _assert_runs_nothing_else(_fix_commands(data, "PKG016"), tmp_path)


@pytest.mark.parametrize("evil", HOSTILE)
def test_cccl_include_path_fix_quotes_the_toolkit(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], evil: str
) -> None:
    """CUDA012: ``export CPLUS_INCLUDE_PATH=<toolkit>/include/cccl:...`` for a toolkit whose path is hostile."""
    home = tmp_path / f"cuda{evil}"
    (home / "include" / "cccl" / "cuda" / "std").mkdir(parents=True)
    (home / "include" / "cuda_runtime_api.h").write_text("#define CUDART_VERSION  13000\n")
    (home / "bin").mkdir()
    (home / "bin" / "nvcc").write_text("#!/bin/sh\n")
    src = tmp_path / "sgl-kernel"
    (src / "csrc").mkdir(parents=True)
    (src / "csrc" / "norm.cu").write_text("// kernel\n")
    site = tmp_path / "site-packages"
    scenario.write_dist(
        site,
        {
            "name": "sgl-kernel",
            "version": "0.3.9",
            "files": {
                "sgl_kernel-0.3.9.dist-info/direct_url.json": json.dumps(
                    {"url": f"file://{src}", "dir_info": {"editable": True}}
                )
            },
        },
    )
    data = _doctor(site, capsys, "--select", "CUDA012", "-e", f"CUDA_HOME={home}")
    commands = _fix_commands(data, "CUDA012")
    _assert_runs_nothing_else(commands, tmp_path)
    # the quoted path still means the same directory to the shell
    out = subprocess.run(
        ["bash", "-c", f'CPLUS_INCLUDE_PATH=/old; {commands[0]}; printf %s "$CPLUS_INCLUDE_PATH"'],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert out == f"{home}/include/cccl:/old"


def test_reinstall_fix_quotes_a_hostile_distribution_name(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """ENV004's reinstall line names the distribution from METADATA, which the environment controls."""
    site = tmp_path / "site-packages"
    scenario.write_dist(
        site,
        {"name": "foo", "version": "2.0", "paths": ["foo/_c.so"], "not_on_disk": ["foo/_c.so"]},
    )
    meta = site / "foo-2.0.dist-info" / "METADATA"
    meta.write_text("Metadata-Version: 2.1\nName: foo$(touch INJ)\nVersion: 2.0\n")
    data = _doctor(site, capsys, "--select", "ENV004")
    _assert_runs_nothing_else(_fix_commands(data, "ENV004"), tmp_path)


def test_escape_sequences_in_names_reach_the_terminal_as_visible_characters(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A dist-info named with OSC 52 (write the clipboard) or a cursor move: the human output,
    colours on, carries no escape but rich's own colour codes; the JSON keeps the exact name."""
    site = tmp_path / "site-packages"
    scenario.write_dist(site, {"name": "numpy", "version": "2.3.4"})
    stale = scenario.write_dist(site, {"name": "numpy", "version": "3.0"})
    evil = "\x1b]52;c;ZWNobyBwd25lZAo=\x1b\\\x1b[2K\x9b1A"
    os.rename(stale, site / f"numpy-3.0{evil}.dist-info")
    args = ["doctor", "--site-packages", str(site), "--python-version", "3.11", "--select", "PKG015"]
    main([*args, "--color", "always"])
    out = capsys.readouterr().out
    assert "PKG015" in out
    without_colours = re.sub(r"\x1b\[[0-9;]*m", "", out)
    assert not re.search(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]", without_colours), repr(without_colours)
    assert "\u241b]52;c;ZWNobyBwd25lZAo=" in without_colours
    data = _doctor(site, capsys, "--select", "PKG015")
    assert evil in data["findings"][0]["path"]


_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
_EVIL = "\x1b]52;c;ZWNobyBwd25lZAo=\x1b\\\x1b[2K\x9b1A"


def test_escape_sequences_in_error_lines_are_visible(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """An error names the path the user gave or the environment holds: no escape reaches stderr."""
    missing = tmp_path / f"venv{_EVIL}" / "bin" / "python"
    assert main(["doctor", "--python", str(missing)]) == 2
    err = capsys.readouterr().err
    assert "venv\u241b]52;c;" in err and not _CONTROL.search(err), repr(err)


def test_escape_sequences_in_patches_output_are_visible(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A local commit's file names are the checkout's (git allows control characters there):
    `patches status` prints them visibly."""
    repo = tmp_path / "repo"
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t"}  # fmt: skip

    def git(*a: str) -> None:
        subprocess.run(["git", "-C", str(repo), *a], check=True, capture_output=True, env=env)

    repo.mkdir()
    git("init", "-q", "-b", "main")
    (repo / "a.py").write_text("a = 1\n")
    git("add", "a.py")
    git("commit", "-q", "-m", "base")
    git("tag", "v1")
    (repo / f"f{_EVIL}.py").write_text("a = 2\n")
    git("add", ".")
    git("commit", "-q", "-m", "local fix")
    main(["patches", "status", str(repo)])
    out = capsys.readouterr().out
    # git quotes ESC itself (\033), but not the C1 CSI (U+009B): that one must not reach the terminal
    assert "1 file(s)" in out and not _CONTROL.search(out), repr(out)


@pytest.mark.parametrize("evil", HOSTILE)
def test_unprovided_import_fix_quotes_the_environment(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], evil: str
) -> None:
    """PKG017: the install line for ``yaml``'s provider (PyYAML) names an environment whose path is hostile."""
    site = tmp_path / f"env{evil}" / "site-packages"
    scenario.write_dist(site, {"name": "app", "version": "1.0", "files": {"app/__init__.py": "import yaml\n"}})
    commands = _fix_commands(_doctor(site, capsys, "--select", "PKG017"), "PKG017")
    assert all("PyYAML" in c for c in commands)
    _assert_runs_nothing_else(commands, tmp_path)
