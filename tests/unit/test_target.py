"""Finding and describing the target with real interpreters and real venvs (nothing imported)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from cudastack.cli import main
from cudastack.doctor import run_doctor
from cudastack.target import build_target, state_dir
from tests import scenario, users
from tests.venvs import make_venv, site_of

SRC = Path(__file__).resolve().parents[2] / "src"


@pytest.fixture(scope="module")
def target_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("venv")
    python = make_venv(root / "env")
    site = site_of(python)
    assert site.is_relative_to(root), f"refusing to write outside the test venv: {site}"
    scenario.write_dist(site, {"name": "flashinfer-python", "version": "0.6.3"})
    scenario.write_dist(site, {"name": "flashinfer-cubin", "version": "0.6.4"})
    # a .pth that adds a source tree holding an egg-info, and one that would run code
    src = root / "checkout" / "python"
    (src / "sglang.egg-info").mkdir(parents=True)
    (src / "sglang.egg-info" / "PKG-INFO").write_text("Name: sglang\nVersion: 0.5.9.dev0\n")
    (src / "sglang.egg-info" / "requires.txt").write_text("flashinfer-python==0.6.3\n")
    (site / "sglang.pth").write_text(f"{src}\n")
    (site / "evil.pth").write_text("import os; os.system('touch /tmp/cudastack-pth-ran')\n")
    (site / "__editable___vllm_0_11_finder.py").write_text("MAPPING = {'vllm': '/src/vllm/vllm'}\n")
    return python


def test_python_option_probes_the_venv_without_running_its_pth(
    target_venv: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    marker = Path("/tmp/cudastack-pth-ran")
    marker.unlink(missing_ok=True)
    rc = main(["doctor", "--python", str(target_venv), "--format", "json", "--fail-on", "info"])
    data = json.loads(capsys.readouterr().out)
    assert not marker.exists(), "a .pth file of the target was executed"
    assert rc == 1
    assert data["target"]["python"] == str(target_venv)
    assert data["target"]["origin"] == "--python"
    assert data["target"]["python_version"] == ".".join(map(str, sys.version_info[:3]))
    by_code = {f["code"]: f for f in data["findings"]}
    assert set(by_code) == {"PKG002", "ENV005"}
    # the venv has no pip: fixes go through uv, naming this interpreter
    assert by_code["PKG002"]["fix"]["commands"] == [f"uv pip install --python {target_venv} flashinfer-cubin==0.6.3"]
    assert "evil.pth" in by_code["ENV005"]["message"]


def test_pth_directories_and_egg_info_in_them_are_inventoried(target_venv: Path) -> None:
    target = build_target(python=str(target_venv))
    assert any(d.endswith("checkout/python") for d in target.site_dirs)
    mappings = [m for p in target.pth for m in p.editable_mappings]
    assert ("vllm", "/src/vllm/vllm") in mappings
    report = run_doctor(target)
    assert report.stack["sglang"] == "0.5.9.dev0"


def test_include_system_site_packages_adds_the_base(tmp_path: Path) -> None:
    python = make_venv(tmp_path / "env", system_site_packages=True)
    target = build_target(python=str(python))
    base_site = site_of(Path(sys.base_prefix) / "bin" / "python3")
    assert str(base_site) in target.site_dirs
    assert target.site_dirs.index(str(base_site)) > 0  # after the venv's own


@pytest.mark.parametrize("base", ["/usr/bin/python3", "running"], ids=["debian-python3", "this-python"])
def test_include_system_site_packages_adds_what_site_py_adds(base: str, tmp_path: Path) -> None:
    """A venv with include-system-site-packages gets the base's site directories from the base's
    own ``site.getsitepackages``: Debian's python3 answers /usr/local/lib/python3.X/dist-packages
    and /usr/lib/python3/dist-packages, not <base>/lib/python3.X/site-packages. Reading only the
    venv's distributions, the doctor called matplotlib's pyparsing (in dist-packages) missing: a
    PKG001 error where everything imports (a hunt, docs/validation.md; fails before the fix).
    Oracle: the site directories on the real venv interpreter's sys.path, and the distributions
    its importlib.metadata sees. .ci/run installs Debian's python3 where it is missing."""
    exe = os.path.realpath(getattr(sys, "_base_executable", sys.executable)) if base == "running" else base
    assert os.access(exe, os.X_OK), f"{exe} is needed: apt-get install python3 python3-venv"
    subprocess.run(
        [exe, "-I", "-m", "venv", "--without-pip", "--system-site-packages", str(tmp_path / "env")], check=True
    )
    python = tmp_path / "env" / "bin" / "python"
    probe = (
        "import sys, json, importlib.metadata as m; "
        "names = {d.metadata['Name'].lower() for d in m.distributions() if d.metadata['Name']}; "
        "print(json.dumps([sys.path, sorted(names)]))"
    )
    real_path, real_dists = json.loads(
        subprocess.run([str(python), "-I", "-c", probe], capture_output=True, text=True, check=True).stdout
    )
    target = build_target(python=str(python))
    stdlib = {p for p in real_path if "site-packages" not in p and "dist-packages" not in p}
    real_sites = [p for p in real_path if p not in stdlib and os.path.isdir(p)]
    assert [d for d in target.site_dirs if d in real_sites] == real_sites, (target.site_dirs, real_path)
    from cudastack.env.inventory import read_inventory

    seen = {d.name.lower() for d in read_inventory(target).dists.values()}
    assert set(real_dists) <= seen, set(real_dists) - seen


def test_tool_environment_finds_the_target_like_uv(tmp_path: Path) -> None:
    """Run from a pipx/uv-tool environment, cudastack looks at VIRTUAL_ENV, not at itself."""
    tool_python = make_venv(tmp_path / "tool", system_site_packages=True)
    (tmp_path / "tool" / "uv-receipt.toml").write_text("[tool]\n")
    target_python = make_venv(tmp_path / "target")
    code = "import os; from cudastack.env.interpreter import find_default_interpreter as f; print(f(dict(os.environ)))"
    env = {**os.environ, "PYTHONPATH": str(SRC), "VIRTUAL_ENV": str(tmp_path / "target")}
    out = subprocess.run([str(tool_python), "-c", code], capture_output=True, text=True, env=env, check=True).stdout
    assert out.strip() == repr((str(target_python), "$VIRTUAL_ENV"))
    env.pop("VIRTUAL_ENV")
    env["CONDA_PREFIX"] = str(tmp_path / "target")
    out = subprocess.run([str(tool_python), "-c", code], capture_output=True, text=True, env=env, check=True).stdout
    assert "$CONDA_PREFIX" in out


def test_site_packages_alone_takes_the_version_from_pyvenv_cfg(tmp_path: Path) -> None:
    site = tmp_path / "v" / "lib" / "python3.12" / "site-packages"
    site.mkdir(parents=True)
    (tmp_path / "v" / "pyvenv.cfg").write_text("home = /usr/bin\nversion = 3.12.4\n")
    t = build_target(site_packages=str(site))
    assert t.python_version == "3.12.4" and "pyvenv.cfg" in t.python_version_source
    assert t.extension_suffixes[0] == f".cpython-312-{os.uname().machine}-linux-gnu.so"
    assert t.prefix == str(tmp_path / "v")


def test_site_packages_without_any_version_skips_what_needs_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    site = tmp_path / "bare"
    scenario.write_dist(site, {"name": "a", "version": "1", "requires": ["b"]})
    rc = main(["doctor", "--site-packages", str(site), "--format", "json"])
    data = json.loads(capsys.readouterr().out)
    checks = {c["code"]: c for c in data["checks"]}
    assert checks["PKG001"]["outcome"] == "skip" and "markers cannot be evaluated" in checks["PKG001"]["reason"]
    assert checks["PKG014"]["outcome"] == "skip"
    assert rc == 0


def test_glibc_can_be_declared(tmp_path: Path) -> None:
    t = build_target(site_packages=str(tmp_path), python_version="3.11", environ={"CUDASTACK_GLIBC_VERSION": "2.28"})
    assert t.glibc == "2.28"


def test_state_lives_outside_the_target_and_checkout(tmp_path: Path) -> None:
    t = build_target(site_packages=str(tmp_path), python_version="3.11")
    d = state_dir(t, {"CUDASTACK_STATE_DIR": str(tmp_path / "state")})
    assert d.parent == tmp_path / "state" / "envs"
    d2 = state_dir(t, {"XDG_STATE_HOME": "/x"})
    assert str(d2).startswith("/x/cudastack/envs/")
    assert not d.exists()


def test_unreadable_metadata_is_a_finding(unprivileged_user: users.User) -> None:
    """Root reads files whatever their mode: the doctor runs as an unprivileged user."""
    root = unprivileged_user.mkdtemp()
    site = root / "lib" / "python3.11" / "site-packages"
    meta = scenario.write_dist(site, {"name": "a", "version": "1"})
    (meta / "METADATA").chmod(0)
    proc = unprivileged_user.run(
        [sys.executable, "-m", "cudastack", "doctor", "--site-packages", str(site), "--format", "json"], cwd=root
    )
    data = json.loads(proc.stdout)
    assert [f["code"] for f in data["findings"]] == ["ENV002"], proc.stderr
    assert "Permission denied" in data["findings"][0]["evidence"][0]
    shutil.rmtree(root)
