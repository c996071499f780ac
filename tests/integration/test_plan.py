"""``cudastack plan`` against real local indexes (tests/integration/plan_index.py), with reality
as the oracle: what the plan accepts really installs and imports in a fresh venv, what it
rejects really fails to import, for the reason the plan gives."""

from __future__ import annotations

import hashlib
import json
import os
import shlex
import shutil
import subprocess
import sys
import urllib.parse
from pathlib import Path
from typing import Any

import pytest

import cudastack
from cudastack.cli import main
from tests.integration import plan_index
from tests.venvs import make_venv, site_of

DRIVER = "580.65.06"  # CUDA 13.0's minimum: every label of the fake family is allowed


@pytest.fixture(scope="module")
def indexes(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    return plan_index.build_indexes(tmp_path_factory.mktemp("plan-index"))


@pytest.fixture
def pip_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> dict[str, str]:
    """Only the test's indexes (this machine's pip.conf names others), a fresh state dir."""
    for key in list(os.environ):
        if key.startswith(("PIP_", "UV_")):
            monkeypatch.delenv(key)
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)
    monkeypatch.setenv("PIP_DISABLE_PIP_VERSION_CHECK", "1")
    monkeypatch.setenv("CUDASTACK_STATE_DIR", str(tmp_path / "state"))
    return dict(os.environ)


def plan(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, dict[str, Any], str]:
    code = main(["plan", "--format", "json", *argv])
    out, err = capsys.readouterr()
    return code, json.loads(out) if out.strip() else {}, err


def tree_state(root: Path) -> dict[str, tuple[object, ...]]:
    """Every entry under ``root``: type, mode, and bytes (digest) or link target."""
    out: dict[str, tuple[object, ...]] = {}
    for base, dirs, files in os.walk(root):
        for name in dirs + files:
            p = Path(base, name)
            st = p.lstat()
            if p.is_symlink():
                out[str(p)] = ("link", os.readlink(p))
            elif p.is_dir():
                out[str(p)] = ("dir", st.st_mode)
            else:
                out[str(p)] = ("file", st.st_mode, st.st_mtime_ns, hashlib.sha256(p.read_bytes()).hexdigest())
    return out


def venv_with(path: Path, env: dict[str, str], *args: str, with_pip: bool = False) -> Path:
    python = make_venv(path, with_pip=with_pip)
    if args:
        proc = plan_index.pip_install(python, env, *args)
        assert proc.returncode == 0, proc.stderr
    return python


def test_a_torch_abi_change_is_rejected_and_installing_it_really_breaks_the_kernel_package(
    indexes: dict[str, str], pip_env: dict[str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    today = venv_with(tmp_path / "today", pip_env, "--index-url", indexes["cu128"], "--extra-index-url",
                      indexes["pypi"], "minitorch", "kern")  # fmt: skip
    site = site_of(today)
    before = tree_state(tmp_path / "today")
    code, report, err = plan(capsys, "--python", str(today), "--driver", DRIVER, "--",
                             "--index-url", indexes["cu130"], "minitorch==2.0.0+cu130")  # fmt: skip
    assert tree_state(tmp_path / "today") == before  # the plan changed nothing, not even an mtime
    assert code == 1, err
    assert report["command"] == "plan" and report["schema_version"] and report["summary"]["exit_code"] == 1
    [cand] = report["candidates"]
    assert cand["verdict"] == "rejected" and cand["installer"] == "pip"
    assert {(r["name"], r["version"]) for r in cand["resolved"]} == {
        ("minitorch", "2.0.0+cu130"),
        ("minicuda-runtime13", "13.0.0"),
    }
    assert all(len(r["sha256"]) == 64 and r["size"] > 0 and r["url"].startswith("file:") for r in cand["resolved"])
    errors = [f for f in cand["findings_added"] if f["severity"] == "error"]
    assert [(f["code"], f["path"]) for f in errors] == [("ABI001", str(site / "kern" / "_C.abi3.so"))]
    assert "c10_v1" in errors[0]["message"]
    assert "extracting" in err  # progress on stderr
    # reality: the same install, really done, breaks `import kern` for the reason given
    proc = plan_index.pip_install(today, pip_env, "--index-url", indexes["cu130"], "minitorch==2.0.0+cu130")
    assert proc.returncode == 0, proc.stderr
    imp = plan_index.try_import(today, "kern")
    assert imp.returncode != 0 and "undefined symbol: c10_v1" in imp.stderr


def test_search_takes_the_newest_cuda_label_with_no_new_error_and_both_verdicts_are_real(
    indexes: dict[str, str],
    pip_env: dict[str, str],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    validate_report: Any,
) -> None:
    empty = venv_with(tmp_path / "empty", pip_env)
    code, report, err = plan(
        capsys, "--python", str(empty), "--driver", DRIVER, "--search",
        *[a for label in ("cpu", "cu128", "cu130") for a in ("--index", f"{label}={indexes[label]}")],
        "--", "--extra-index-url", indexes["pypi"], "minitorch", "kern",
    )  # fmt: skip
    assert code == 0, err
    validate_report(report)  # the shared envelope
    import jsonschema

    plan_schema = json.loads((Path(cudastack.__file__).parent / "data" / "plan.schema.json").read_text())
    jsonschema.validate(report, plan_schema, cls=jsonschema.Draft202012Validator)
    labels = [c["label"] for c in report["candidates"]]
    assert labels == ["cu130", "cu128"]  # newest CUDA first; cpu was not needed
    assert report["not_tried"] == [  # blamed; the listing shows nothing else to step back to
        {"label": "cu130 (kern!=1.0)", "why": "no other version of kern is offered on cu130 (offered: 1.0)"},
        {"label": "cpu", "why": "not needed: cu128 was accepted first"},
    ]
    # reality: pip really finds no other kern on cu130's indexes (the step the listing spared)
    other = plan_index.pip_install(empty, pip_env, "--dry-run", "--index-url", indexes["cu130"],
                                   "--extra-index-url", indexes["pypi"], "minitorch", "kern!=1.0")  # fmt: skip
    assert other.returncode != 0 and "kern!=1.0" in other.stderr, other.stderr
    offered = {(o["label"], o["name"]): o for o in report["offered"]}
    assert set(offered) == {("cu130", "minitorch"), ("cu130", "kern"), ("cu128", "minitorch"), ("cu128", "kern")}
    assert offered["cu130", "kern"]["versions"] == ["1.0"] and offered["cu130", "kern"]["tried"] == {"1.0": "rejected"}
    assert offered["cu128", "minitorch"]["tried"] == {"2.0.0+cu128": "accepted"}
    rejected, chosen = report["candidates"]
    assert rejected["verdict"] == "rejected" and chosen["verdict"] == "accepted" and report["chosen"] == "cu128"
    [err12] = [f for f in rejected["findings_added"] if f["severity"] == "error"]
    assert err12["code"] == "LDD001" and "libcudart.so.12" in err12["message"]
    # reality, rejected: the cu130 set installs but `import kern` fails on libcudart.so.12
    bad = venv_with(tmp_path / "bad", pip_env, "--index-url", indexes["cu130"], "--extra-index-url", indexes["pypi"],
                    *[f"{r['name']}=={r['version']}" for r in rejected["resolved"]])  # fmt: skip
    imp = plan_index.try_import(bad, "minitorch", "kern")
    assert imp.returncode != 0 and "libcudart.so.12: cannot open shared object file" in imp.stderr
    # reality, chosen: the printed install line's installer arguments install and import cleanly
    line = shlex.split(report["install"])
    assert line[:4] == ["cudastack", "install", "--python", str(empty)]
    pins = line[line.index("--") + 1 :]
    assert "minitorch==2.0.0+cu128" in pins and "kern==1.0" in pins and indexes["cu128"] in pins
    good = venv_with(tmp_path / "good", pip_env, *pins)
    imp = plan_index.try_import(good, "minitorch", "kern")
    assert imp.returncode == 0, imp.stderr


def test_a_second_run_reuses_the_extraction_cache(
    indexes: dict[str, str], pip_env: dict[str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    empty = venv_with(tmp_path / "empty", pip_env)
    argv = ("--python", str(empty), "--", "--index-url", indexes["cpu"], "minitorch")
    code1, first, _ = plan(capsys, *argv)
    code2, second, err2 = plan(capsys, *argv)
    assert code1 == code2 == 0
    assert [e["cached"] for e in first["candidates"][0]["extracted"]] == [False]
    assert [e["cached"] for e in second["candidates"][0]["extracted"]] == [True]
    assert "extracting" not in err2
    shas = {r["sha256"] for r in first["candidates"][0]["resolved"]}
    assert {p.name for p in (tmp_path / "state" / "plan" / "extract").iterdir()} == shas


def test_a_resolution_failure_exits_3_and_says_so(
    indexes: dict[str, str], pip_env: dict[str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    empty = venv_with(tmp_path / "empty", pip_env)
    code = main(["plan", "--python", str(empty), "--", "--index-url", indexes["cpu"], "no-such-dist"])
    _, err = capsys.readouterr()
    assert code == 3
    assert "resolution failed" in err and "no-such-dist" in err


def test_no_installer_arguments_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan"]) == 2
    assert "nothing to plan" in capsys.readouterr().err


def test_a_package_without_sm_120_kernels_is_rejected_for_an_sm_120_gpu_and_cuobjdump_agrees(
    pip_env: dict[str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A GPU-only reason: the module imports anywhere (static cudart), but a launch on sm_120
    finds no kernel image. The evidence is cuobjdump's listing of the file the plan rejected."""
    from tests import cuda_build

    url, built = plan_index.build_gpu_index(tmp_path / "gpu-index", ["sm_90"])
    empty = venv_with(tmp_path / "empty", pip_env)
    argv = ("--python", str(empty), "--driver", DRIVER, "--", "--index-url", url, "gkern")
    code, report, err = plan(capsys, "--gpu", "sm_120", *argv)
    assert code == 1, err
    [error] = [f for f in report["candidates"][0]["findings_added"] if f["severity"] == "error"]
    assert error["code"] == "CUDA001" and "sm_120" in error["message"]
    assert error["path"] == str(site_of(empty) / "gkern" / "_C.abi3.so")
    assert set(cuda_build.cuobjdump_list(built)) == {"sm_90"}  # no sm_120 SASS, no PTX to JIT
    installed = venv_with(tmp_path / "installed", pip_env, "--index-url", url, "gkern")
    imp = plan_index.try_import(installed, "gkern")
    assert imp.returncode == 0, imp.stderr  # it imports: only a launch on the GPU fails (no device here)
    code, report, err = plan(capsys, "--gpu", "sm_90", *argv)
    assert code == 0, err
    assert report["chosen"] == "as given"


def test_install_refuses_a_predicted_error_before_changing_anything_unless_allowed(
    indexes: dict[str, str],
    pip_env: dict[str, str],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("PYTHONDONTWRITEBYTECODE", raising=False)  # as on a user's machine
    # install runs the target's own pip
    today = venv_with(tmp_path / "today", pip_env, "--index-url", indexes["cu128"], "--extra-index-url",
                      indexes["pypi"], "minitorch", "kern", with_pip=True)  # fmt: skip
    for cache in (site_of(today) / "pip").rglob("__pycache__"):
        shutil.rmtree(cache)  # the target's own pip resolves: it must not compile itself into the venv
    before = tree_state(tmp_path / "today")
    code, _report, err = plan(
        capsys, "--python", str(today), "--", "--index-url", indexes["cu130"], "minitorch==2.0.0+cu130"
    )
    assert code == 1, err
    assert tree_state(tmp_path / "today") == before
    argv = ["install", "--plan", "--python", str(today), "--allow", "minitorch"]
    rest = ["--", "--index-url", indexes["cu130"], "minitorch==2.0.0+cu130"]
    code = main([*argv, *rest])
    err = capsys.readouterr().err
    assert code == 4, err
    assert "predicted to add 1 error(s)" in err and "ABI001" in err and "--allow-errors ABI001" in err

    # refused before the backup and before pip installs; install's own dry run (install/plan.py, not
    # the plan's) runs the target's pip with bytecode writing on, so pip's __pycache__ is left aside
    def no_pycache(state: dict[str, tuple[object, ...]]) -> dict[str, tuple[object, ...]]:
        return {p: v for p, v in state.items() if "/__pycache__" not in p}

    assert no_pycache(tree_state(tmp_path / "today")) == no_pycache(before)
    # allowed: the install runs, the doctor after it finds the same error, and it is rolled back (exit 5)
    proc = subprocess.run([sys.executable, "-m", "cudastack", *argv, "--allow-errors", "ABI001", *rest],
                          capture_output=True, text=True, env=pip_env, check=False, timeout=300)  # fmt: skip
    code, err = proc.returncode, proc.stderr
    assert code == 5, err
    assert "despite 1 predicted error(s) (--allow-errors): ABI001" in err and "rolling back" in err


def test_search_is_bounded_and_says_what_it_did_not_try(
    indexes: dict[str, str], pip_env: dict[str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    empty = venv_with(tmp_path / "empty", pip_env)
    code, report, err = plan(
        capsys, "--python", str(empty), "--driver", "570.26", "--search", "--max-candidates", "1",
        *[a for label in ("cpu", "cu128", "cu130") for a in ("--index", f"{label}={indexes[label]}")],
        "--", "--extra-index-url", indexes["pypi"], "minitorch", "kern",
    )  # fmt: skip
    # the driver (CUDA 12.8) rules out cu130; cu128 is tried first and accepted within the bound
    assert code == 0, err
    assert [c["label"] for c in report["candidates"]] == ["cu128"]
    assert report["not_tried"] == [
        {"label": "cu130", "why": "needs driver >= 580.65.06; the driver is 570.26"},
        {"label": "cpu", "why": "not needed: cu128 was accepted first"},
    ]
    code, report, err = plan(
        capsys, "--python", str(empty), "--driver", DRIVER, "--search", "--max-candidates", "1",
        *[a for label in ("cpu", "cu128", "cu130") for a in ("--index", f"{label}={indexes[label]}")],
        "--", "--extra-index-url", indexes["kernels"], "--extra-index-url", indexes["pypi"], "minitorch", "kern",
    )  # fmt: skip
    assert code == 1, err  # the one candidate allowed (cu130) adds an error
    assert [c["label"] for c in report["candidates"]] == ["cu130"] and report["chosen"] is None
    assert report["not_tried"] == [
        {"label": "cu130 (kern!=2.0)", "why": "past the bound of the search"},
        {"label": "cu128", "why": "past the bound of 1 candidate(s)"},
        {"label": "cpu", "why": "past the bound of 1 candidate(s)"},
    ]
    # the versions the bound left untried are named, not only the step
    [kern] = [o for o in report["offered"] if o["name"] == "kern"]
    assert kern["label"] == "cu130" and kern["versions"] == ["2.0", "1.5", "1.0"]
    assert kern["tried"] == {"2.0": "rejected"}
    assert kern["not_tried"] == {"1.5": "past the bound of the search", "1.0": "past the bound of the search"}


def test_pip_and_uv_read_the_same_indexes_differently_and_the_plan_says_which_resolved(
    indexes: dict[str, str], pip_env: dict[str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """pip merges indexes and takes the highest version (``+cu130`` > ``+cu128``); uv takes the
    first index that has the name, and puts ``--extra-index-url`` before ``--index-url``."""
    empty = venv_with(tmp_path / "empty", pip_env)
    args = ["--index-url", indexes["cu130"], "--extra-index-url", indexes["cu128"], "--extra-index-url",
            indexes["pypi"], "minitorch", "kern"]  # fmt: skip
    code, by_pip, err = plan(capsys, "--python", str(empty), "--driver", DRIVER, "--", *args)
    assert code == 1, err
    assert by_pip["installer"] == "pip" and by_pip["candidates"][0]["installer"] == "pip"
    assert {r["name"]: r["version"] for r in by_pip["candidates"][0]["resolved"]}["minitorch"] == "2.0.0+cu130"
    code, by_uv, err = plan(capsys, "--installer", "uv", "--python", str(empty), "--driver", DRIVER, "--", *args)
    assert code == 0, err
    assert by_uv["installer"] == "uv" and by_uv["candidates"][0]["installer"] == "uv"
    assert {r["name"]: r["version"] for r in by_uv["candidates"][0]["resolved"]}["minitorch"] == "2.0.0+cu128"
    assert shlex.split(by_uv["install"])[:4] == ["cudastack", "install", "--installer", "uv"]


def test_search_steps_the_blamed_kernel_package_back_before_leaving_the_newest_label(
    indexes: dict[str, str], pip_env: dict[str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """kern 2.0 (the newest) is a CUDA 12 build; kern 1.5 was built for the cu130 family. On cu130
    the search rejects kern 2.0, then tries kern!=2.0, and takes cu130 with kern 1.5, which
    really imports; cu128 is not needed."""
    empty = venv_with(tmp_path / "empty", pip_env)
    code, report, err = plan(
        capsys, "--python", str(empty), "--driver", DRIVER, "--search",
        *[a for label in ("cu128", "cu130") for a in ("--index", f"{label}={indexes[label]}")],
        "--", "--extra-index-url", indexes["kernels"], "--extra-index-url", indexes["pypi"], "minitorch", "kern",
    )  # fmt: skip
    assert code == 0, err
    assert [(c["label"], c["verdict"]) for c in report["candidates"]] == [
        ("cu130", "rejected"),
        ("cu130 (kern!=2.0)", "accepted"),
    ]
    assert report["not_tried"] == [{"label": "cu128", "why": "not needed: cu130 (kern!=2.0) was accepted first"}]
    pins = shlex.split(report["install"])
    assert "kern==1.5" in pins and "minitorch==2.0.0+cu130" in pins
    good = venv_with(tmp_path / "good", pip_env, *pins[pins.index("--") + 1 :])
    imp = plan_index.try_import(good, "minitorch", "kern")
    assert imp.returncode == 0, imp.stderr
    # the listing up front: every kern the label's indexes hold, newest first, each with its fate
    on_disk = sorted({p.name.split("-")[1] for idx in ("kernels", "pypi")
                      for p in Path(urllib.parse.urlparse(indexes[idx]).path).parent.rglob("kern-*.whl")},
                     key=lambda v: tuple(map(int, v.split("."))), reverse=True)  # fmt: skip
    [kern] = [o for o in report["offered"] if o["label"] == "cu130" and o["name"] == "kern"]
    assert kern["versions"] == on_disk == ["2.0", "1.5", "1.0"]
    assert kern["tried"] == {"2.0": "rejected", "1.5": "accepted"}
    assert kern["not_tried"] == {"1.0": "not needed: cu130 (kern!=2.0) was accepted first"}
    # reality: kern 1.0, not tried, is really installable there (a version the search could have taken)
    also = plan_index.pip_install(empty, pip_env, "--dry-run", "--index-url", indexes["cu130"],
                                  "--extra-index-url", indexes["kernels"], "--extra-index-url", indexes["pypi"],
                                  "minitorch", "kern==1.0")  # fmt: skip
    assert also.returncode == 0, also.stderr


def _resolved(report: dict[str, Any]) -> dict[str, str]:
    return {r["name"]: r["version"] for r in report["candidates"][0]["resolved"]}


@pytest.mark.parametrize("installer", ["pip", "uv"])
def test_a_local_resolution_is_reused_until_a_find_links_directory_or_an_argument_changes(
    installer: str, pip_env: dict[str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The second run takes the first run's resolution (the installer does not run); a new wheel in
    the find-links directory, or another argument, resolves again and gives the new answer (the
    installer's own: a stale reuse would still say 1.0)."""
    links = tmp_path / "links"
    plan_index.wheel(links, "reusepkg", "1.0", {"reusepkg/__init__.py": b""})
    empty = venv_with(tmp_path / "empty", pip_env)
    argv = ["--installer", installer, "--python", str(empty), "--", "--no-index", "--find-links", str(links)]
    runs = []
    for req in ("reusepkg", "reusepkg", None, "reusepkg", "reusepkg", "reusepkg<1.1"):
        if req is None:  # a newer wheel appears in the find-links directory
            plan_index.wheel(links, "reusepkg", "1.1", {"reusepkg/__init__.py": b""})
            continue
        code, report, err = plan(capsys, *argv, req)
        assert code == 0, err
        res = report["candidates"][0]["resolution"]
        runs.append((_resolved(report)["reusepkg"], res["reused"]))
        assert res["why"].startswith("reused" if res["reused"] else "resolved"), res
    assert runs == [("1.0", False), ("1.0", True), ("1.1", False), ("1.1", True), ("1.0", False)]
    _, text, _ = plan_text(capsys, *argv, "reusepkg")
    assert "resolution: reused the resolution of" in text


def plan_text(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["plan", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_a_changed_local_index_page_resolves_again_and_a_remote_index_is_never_reused(
    pip_env: dict[str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    built = tmp_path / "built"
    old = plan_index.wheel(built, "reusepkg", "1.0", {"reusepkg/__init__.py": b""})
    url = plan_index.publish(tmp_path / "index", [old])
    empty = venv_with(tmp_path / "empty", pip_env)
    argv = ["--python", str(empty), "--", "--index-url", url, "reusepkg"]
    assert [_resolved(plan(capsys, *argv)[1])["reusepkg"] for _ in range(2)] == ["1.0", "1.0"]
    new = plan_index.wheel(built, "reusepkg", "2.0", {"reusepkg/__init__.py": b""})
    plan_index.publish(tmp_path / "index", [old, new])
    code, report, err = plan(capsys, *argv)
    assert code == 0, err
    assert _resolved(report)["reusepkg"] == "2.0" and not report["candidates"][0]["resolution"]["reused"]

    from cudastack.plan.resolve import start_resolve
    from cudastack.target import build_target

    target = build_target(python=str(empty))
    remote = start_resolve(target, ["--index-url", "https://pypi.example.invalid/simple", "reusepkg"])
    try:
        assert remote.why == "resolved: not reusable: https://pypi.example.invalid/simple is remote"
    finally:
        remote.cancel()
    default = start_resolve(target, ["reusepkg"])
    try:
        assert "the default index (PyPI) is remote" in default.why
    finally:
        default.cancel()


@pytest.mark.parametrize("how", ["pip.conf", "PIP_CONSTRAINT"])
def test_a_constraint_file_named_by_the_configuration_is_an_input_of_the_reused_resolution(
    how: str,
    pip_env: dict[str, str],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """This machine's pip.conf names /etc/xdg/pip/constraints.txt: pip reads that file's contents
    on every resolution, so a changed constraint (same path, same arguments) resolves again and
    gives pip's new answer, where a reuse keyed on the configuration's bytes alone said 1.1."""
    links = tmp_path / "links"
    for version in ("1.0", "1.1"):
        plan_index.wheel(links, "reusepkg", version, {"reusepkg/__init__.py": b""})
    constraints = tmp_path / "constraints.txt"
    constraints.write_text("")
    if how == "pip.conf":
        conf = tmp_path / "pip.conf"
        conf.write_text(f"[global]\nconstraint = {constraints}\n")
        monkeypatch.setenv("PIP_CONFIG_FILE", str(conf))
    else:
        monkeypatch.setenv("PIP_CONSTRAINT", str(constraints))
    empty = venv_with(tmp_path / "empty", pip_env)
    argv = ["--python", str(empty), "--", "--no-index", "--find-links", str(links), "reusepkg"]
    runs = []
    for cap in ("", "", "reusepkg<1.1\n", "reusepkg<1.1\n"):
        constraints.write_text(cap)
        code, report, err = plan(capsys, *argv)
        assert code == 0, err
        runs.append((_resolved(report)["reusepkg"], report["candidates"][0]["resolution"]["reused"]))
    assert runs == [("1.1", False), ("1.1", True), ("1.0", False), ("1.0", True)]


def test_pinned_wheels_are_guessed_as_pip_chooses_them_and_extracted_while_it_resolves(
    indexes: dict[str, str],
    pip_env: dict[str, str],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``minitorch==2.0.0`` matches three local labels across the merged indexes (pip takes the
    highest, +cu130); ``kern==1.0`` is on another index. The guess is pip's own choice, file for
    file; the plan then finds those wheels already extracted, and says what it says without the
    guess."""
    import urllib.parse
    import urllib.request

    from cudastack.plan import speculate
    from cudastack.target import build_target

    empty = venv_with(tmp_path / "empty", pip_env, with_pip=True)
    args = ["--index-url", indexes["cpu"], "--extra-index-url", indexes["cu128"], "--extra-index-url",
            indexes["cu130"], "--extra-index-url", indexes["pypi"], "minitorch==2.0.0", "kern==1.0"]  # fmt: skip
    proc = subprocess.run([str(empty), "-m", "pip", "install", "--dry-run", "--quiet", "--report", "-", *args],
                          capture_output=True, text=True, env=pip_env, timeout=600, check=False)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    chose = {
        i["metadata"]["name"]: urllib.request.url2pathname(urllib.parse.urlparse(i["download_info"]["url"]).path)
        for i in json.loads(proc.stdout)["install"]
    }
    assert chose["minitorch"].endswith("+cu130-" + chose["minitorch"].rsplit("+cu130-", 1)[-1])
    guessed = speculate.guesses(args, build_target(python=str(empty)))
    assert sorted(p for p, _sha in guessed) == sorted(chose[n] for n in ("minitorch", "kern"))
    reports = {}
    for mode in ("1", "0"):
        monkeypatch.setenv("CUDASTACK_PLAN_SPECULATE", mode)
        monkeypatch.setenv("CUDASTACK_STATE_DIR", str(tmp_path / f"state{mode}"))
        code, report, err = plan(capsys, "--python", str(empty), "--driver", DRIVER, "--", *args)
        assert code in (0, 1), err
        [cand] = report["candidates"]
        by = {r["name"]: (e["by"], e["cached"]) for r, e in zip(cand["resolved"], cand["extracted"], strict=True)}
        reports[mode] = (sorted(json.dumps(f, sort_keys=True) for f in cand["findings_added"]), by)
    assert reports["1"][0] == reports["0"][0]
    assert {n: b for n, (b, _c) in reports["1"][1].items()} == {
        "minitorch": "guessed", "kern": "guessed", "minicuda-runtime13": "here"}  # fmt: skip
    assert {b for b, _c in reports["0"][1].values()} <= {"here", "helper"}
    assert not any(c for _b, c in [*reports["0"][1].values(), *reports["1"][1].values()])  # all in this run


def test_a_remote_index_is_downloaded_by_pip_into_the_wheel_cache_and_reused(
    indexes: dict[str, str],
    pip_env: dict[str, str],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The cpu index served over HTTP (127.0.0.1): wheels come through ``pip download`` into
    ``<state>/plan/wheels/<sha256>/``, byte for byte the index's file; a second run takes them
    from there; a download that fails is exit 3, said as such, and nothing of it is cached."""
    root = Path(urllib.parse.urlparse(indexes["cpu"]).path).parent
    empty = venv_with(tmp_path / "empty", pip_env)
    with plan_index.serve(root) as base:
        argv = ("--python", str(empty), "--", "--index-url", f"{base}/simple", "minitorch")
        code, first, err = plan(capsys, *argv)
        assert code == 0, err
        [r] = first["candidates"][0]["resolved"]
        assert r["url"].startswith(f"{base}/") and r["fetched"] == "downloaded"
        assert "downloading minitorch" in err
        [cached] = (tmp_path / "state" / "plan" / "wheels" / r["sha256"]).glob("*.whl")
        original = root / "files" / cached.name
        assert cached.read_bytes() == original.read_bytes()
        assert hashlib.sha256(cached.read_bytes()).hexdigest() == r["sha256"] and cached.stat().st_size == r["size"]
        code2, second, err2 = plan(capsys, *argv)
        assert code2 == 0, err2
        assert [x["fetched"] for x in second["candidates"][0]["resolved"]] == ["cached"]
        assert "downloading" not in err2
    # the index drops the wheel between pip's resolution and the download: exit 3, said as such
    state = tmp_path / "state2"
    monkeypatch.setenv("CUDASTACK_STATE_DIR", str(state))
    with plan_index.serve(root, wheels_once=True) as base:
        code3 = main(["plan", "--python", str(empty), "--", "--index-url", f"{base}/simple", "minitorch"])
        _, err3 = capsys.readouterr()
    assert code3 == 3, err3
    assert "downloading minitorch 2.0.0+cpu" in err3 and "404" in err3, err3
    assert not list(state.glob("plan/wheels/*/*.whl"))  # nothing half-fetched is cached


def test_a_plan_that_mends_today_lists_the_error_it_removes_and_the_install_really_mends_it(
    indexes: dict[str, str], pip_env: dict[str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Today: kern (built against the cu128 family) beside minitorch cu130, really broken. The plan
    back to minitorch cu128 removes that error, adds none; really installed, ``import kern`` works."""
    today = venv_with(tmp_path / "today", pip_env, "--index-url", indexes["cu130"], "--extra-index-url",
                      indexes["pypi"], "minitorch==2.0.0+cu130", "kern", "minicuda-runtime12")  # fmt: skip
    broken = plan_index.try_import(today, "kern")
    assert broken.returncode != 0 and "undefined symbol: c10_v1" in broken.stderr
    site = site_of(today)
    code, report, err = plan(capsys, "--python", str(today), "--driver", DRIVER, "--",
                             "--index-url", indexes["cu128"], "minitorch==2.0.0+cu128")  # fmt: skip
    assert code == 0, err
    [cand] = report["candidates"]
    assert cand["verdict"] == "accepted"
    assert not [f for f in cand["findings_added"] if f["severity"] == "error"], cand["findings_added"]
    removed = {(f["code"], f["path"]) for f in cand["findings_removed"] if f["severity"] == "error"}
    assert ("ABI001", str(site / "kern" / "_C.abi3.so")) in removed, cand["findings_removed"]
    proc = plan_index.pip_install(today, pip_env, "--index-url", indexes["cu128"], "minitorch==2.0.0+cu128")
    assert proc.returncode == 0, proc.stderr
    imp = plan_index.try_import(today, "minitorch", "kern")
    assert imp.returncode == 0, imp.stderr


def test_search_time_and_download_bounds_stop_it_and_say_so(
    indexes: dict[str, str], pip_env: dict[str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--max-seconds 0``: nothing is tried, every label is named. ``--max-gb 0`` with the indexes
    served over HTTP: the first label's wheels are downloaded (and rejected), the next is not tried."""
    empty = venv_with(tmp_path / "empty", pip_env)
    root = Path(urllib.parse.urlparse(indexes["cu130"]).path).parents[1]
    code, report, err = plan(
        capsys, "--python", str(empty), "--driver", DRIVER, "--search", "--max-seconds", "0",
        *[a for label in ("cpu", "cu128", "cu130") for a in ("--index", f"{label}={indexes[label]}")],
        "--", "--extra-index-url", indexes["pypi"], "minitorch", "kern",
    )  # fmt: skip
    assert code == 1, err
    assert report["candidates"] == [] and report["chosen"] is None
    assert report["not_tried"] == [
        {"label": label, "why": "past the time bound of 0 s"} for label in ("cu130", "cu128", "cpu")
    ]
    # a driver too old for every CUDA label: nothing tried either, and the human report says so
    code = main(["plan", "--python", str(empty), "--driver", "450.80.02", "--search",
                 *[a for label in ("cu128", "cu130") for a in ("--index", f"{label}={indexes[label]}")],
                 "--", "--extra-index-url", indexes["pypi"], "minitorch"])  # fmt: skip
    out, err = capsys.readouterr()
    assert code == 1, err
    assert "not tried: cu130: needs driver >= 580.65.06; the driver is 450.80.02" in out
    assert "no candidate was tried" in out
    search = ("--python", str(empty), "--driver", DRIVER, "--search")
    with plan_index.serve(root) as base:
        labels = [a for label in ("cu128", "cu130") for a in ("--index", f"{label}={base}/{label}/simple")]
        rest = ("--", "--extra-index-url", f"{base}/pypi/simple", "minitorch", "kern")
        code, report, err = plan(capsys, *search, "--max-gb", "0", *labels, *rest)
        assert code == 1, err
        [cand] = report["candidates"]
        assert cand["label"] == "cu130" and cand["verdict"] == "rejected"
        assert {r["fetched"] for r in cand["resolved"]} == {"downloaded"}
        assert {"label": "cu128", "why": "past the download bound of 0.0 GB"} in report["not_tried"]
        # again: the plan's wheel cache has cu130's set, but pip's dry run downloads it anew
        before = len(plan_index.served_wheels(root))
        code, report, err = plan(capsys, *search, "--max-gb", "0", *labels, *rest)
        assert len(plan_index.served_wheels(root)) > before  # reality: the resolution fetched wheels
        [cand] = report["candidates"]
        assert {r["fetched"] for r in cand["resolved"]} == {"cached"}
        assert {"label": "cu128", "why": "past the download bound of 0.0 GB"} in report["not_tried"]


def test_the_listing_takes_only_the_index_options_and_names_a_version_the_resolver_passed_over(
    indexes: dict[str, str], pip_env: dict[str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A constraint file keeps kern 2.0 out (``-c``, which ``pip index versions`` refuses): the
    listing still names 2.0, as passed over by the resolver, the accepted 1.5, and 1.0 as not needed."""
    empty = venv_with(tmp_path / "empty", pip_env)
    constraints = tmp_path / "c.txt"
    constraints.write_text("kern<2\n")
    args = ["-c", str(constraints), "--extra-index-url", indexes["kernels"], "--extra-index-url", indexes["pypi"]]
    refused = subprocess.run([sys.executable, "-m", "pip", "--python", str(empty), "index", "versions", "kern",
                              "--index-url", indexes["cu130"], *args],
                             capture_output=True, text=True, env=pip_env, check=False)  # fmt: skip
    assert refused.returncode != 0 and "no such option: -c" in refused.stderr  # why only index options are passed
    code, report, err = plan(capsys, "--python", str(empty), "--driver", DRIVER, "--search",
                             "--index", f"cu130={indexes['cu130']}", "--", *args, "minitorch", "kern")  # fmt: skip
    assert code == 0, err
    assert [(c["label"], c["verdict"]) for c in report["candidates"]] == [("cu130", "accepted")]
    [kern] = [o for o in report["offered"] if o["name"] == "kern"]
    assert kern["versions"] == ["2.0", "1.5", "1.0"] and kern["error"] is None
    assert kern["tried"] == {"1.5": "accepted"}
    assert kern["not_tried"] == {
        "2.0": "passed over by the resolver (a constraint, a conflict or Requires-Python)",
        "1.0": "not needed: cu130 was accepted first",
    }


def test_search_steps_back_a_kernel_wheel_given_by_path_to_what_the_indexes_offer(
    indexes: dict[str, str], pip_env: dict[str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The user names kern 2.0 (a CUDA 12 build) by its file; the kernels index also offers kern 1.5
    (built for the cu130 family). ``kern!=2.0`` beside the file itself cannot resolve, so the step
    back drops the file: cu130 with kern 1.5 is taken, and really imports."""
    empty = venv_with(tmp_path / "empty", pip_env)
    kernels = Path(urllib.parse.urlparse(indexes["kernels"]).path).parent
    [kern2] = (kernels / "files").glob("kern-2.0-*.whl")
    code, report, err = plan(
        capsys, "--python", str(empty), "--driver", DRIVER, "--search",
        *[a for label in ("cu128", "cu130") for a in ("--index", f"{label}={indexes[label]}")],
        "--", "--extra-index-url", indexes["kernels"], "minitorch", str(kern2),
    )  # fmt: skip
    assert code == 0, err
    assert [(c["label"], c["verdict"]) for c in report["candidates"]] == [
        ("cu130", "rejected"),
        ("cu130 (kern!=2.0)", "accepted"),
    ]
    first, chosen = report["candidates"]
    assert [r["url"] for r in first["resolved"] if r["name"] == "kern"] == [kern2.as_uri()]
    assert str(kern2) not in chosen["args"] and "kern!=2.0" in chosen["args"]
    pins = shlex.split(report["install"])
    assert "kern==1.5" in pins and "minitorch==2.0.0+cu130" in pins
    good = venv_with(tmp_path / "good", pip_env, *pins[pins.index("--") + 1 :])
    imp = plan_index.try_import(good, "minitorch", "kern")
    assert imp.returncode == 0, imp.stderr
    # reality, rejected: kern 2.0 really fails beside minitorch cu130
    bad = venv_with(tmp_path / "bad", pip_env, "--index-url", indexes["cu130"], "--extra-index-url",
                    indexes["kernels"], "minitorch", str(kern2), "minicuda-runtime12")  # fmt: skip
    assert plan_index.try_import(bad, "minitorch", "kern").returncode != 0


def test_search_tries_each_file_given_for_a_kernel_package_newest_first(
    indexes: dict[str, str], pip_env: dict[str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Two files for kern (1.5, built for the cu130 family, given first; 2.0, a CUDA 12 build) and
    no index that offers kern: pip cannot take both, so the search takes the newest, 2.0, which is
    rejected on cu130, then the other file, which is accepted; the install line keeps that file.
    Without --search the two files are a usage error (exit 2), said as such."""
    empty = venv_with(tmp_path / "empty", pip_env)
    kernels = Path(urllib.parse.urlparse(indexes["kernels"]).path).parent
    [kern2] = (kernels / "files").glob("kern-2.0-*.whl")
    [kern15] = (kernels / "files").glob("kern-1.5-*.whl")
    labels = [a for label in ("cu128", "cu130") for a in ("--index", f"{label}={indexes[label]}")]
    code, report, err = plan(capsys, "--python", str(empty), "--driver", DRIVER, "--search", *labels,
                             "--", "minitorch", str(kern15), str(kern2))  # fmt: skip
    assert code == 0, err
    assert [(c["label"], c["verdict"]) for c in report["candidates"]] == [
        ("cu130", "rejected"),
        (f"cu130 (kern: {kern15.name})", "accepted"),
    ]
    first, chosen = report["candidates"]
    assert [r["url"] for r in first["resolved"] if r["name"] == "kern"] == [kern2.as_uri()]
    assert any(f["code"] == "LDD001" and f["distribution"] == "kern" for f in first["findings_added"]), first
    assert [r["url"] for r in chosen["resolved"] if r["name"] == "kern"] == [kern15.as_uri()]
    pins = shlex.split(report["install"])
    assert str(kern15) in pins and "minitorch==2.0.0+cu130" in pins and not any("kern==" in p for p in pins)
    good = venv_with(tmp_path / "good", pip_env, *pins[pins.index("--") + 1 :])
    imp = plan_index.try_import(good, "minitorch", "kern")
    assert imp.returncode == 0, imp.stderr
    # reality, rejected: kern 2.0 really fails beside minitorch cu130 (no libcudart.so.12)
    bad = venv_with(tmp_path / "bad", pip_env, "--index-url", indexes["cu130"], "minitorch", str(kern2))
    assert plan_index.try_import(bad, "minitorch", "kern").returncode != 0
    code, _report, err = plan(capsys, "--python", str(empty), "--", "minitorch", str(kern15), str(kern2))
    assert code == 2 and "several files or URLs for kern" in err and "--search" in err, err


def test_a_slow_download_shows_its_progress(
    pip_env: dict[str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A 2 MB wheel that takes 6 s to arrive: the plan says how much of it has come, every 2 s,
    while pip downloads it (the size of pip's partial file in the temporary directory cudastack
    gives it)."""
    payload = os.urandom(2 << 20)  # does not compress: 2 MB on the wire
    whl = plan_index.wheel(tmp_path / "build", "bigpkg", "1.0", {"bigpkg/__init__.py": b"", "bigpkg/blob.bin": payload})
    plan_index.publish(tmp_path / "index", [whl])
    empty = venv_with(tmp_path / "empty", pip_env)
    with plan_index.serve(tmp_path / "index", slow=6.0) as base:
        code, _report, err = plan(capsys, "--python", str(empty), "--", "--index-url", f"{base}/simple", "bigpkg")
    assert code == 0, err
    lines = [ln for ln in err.splitlines() if "downloading bigpkg 1.0:" in ln and "so far" in ln]
    assert len(lines) >= 2, err  # and growing
    sizes = [float(ln.rsplit(":", 1)[1].split()[0]) for ln in lines]
    assert sizes == sorted(sizes) and sizes[0] < sizes[-1], lines
