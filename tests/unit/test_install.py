"""The guarded install and its rollback, with real installers (pip, uv) installing small real
wheels from a local --find-links directory into temp venvs. "Restored" is proven by comparing a
fresh snapshot with the one taken before and the bytes of every file under site-packages and bin.
Kills are real SIGKILLs at exact points: strace's syscall fault injection inside the installer,
cudastack's own step hook, a stalling local index during the download."""

from __future__ import annotations

import hashlib
import http.server
import json
import os
import shutil
import signal
import socketserver
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, ClassVar

import pytest

from tests import oracles
from tests.native import build
from tests.venvs import make_venv, site_of
from tests.wheels import make_wheel, pip_install

STRACE = shutil.which("strace")


@pytest.fixture(scope="module")
def links(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("wheels")
    out = root / "links"
    stub = build(root / "stub" / "libgone.so", "int g(void){return 1;}\n", flags=("-Wl,-soname,libgone.so",))
    bad = build(root / "bad" / "badext.so", "int g(void); int PyInit_badext(void){return g();}\n", libs=(str(stub),))
    stub.unlink()  # badext needs a library nothing provides: installing it adds an LDD001 error
    files_1 = {f"tool/m{i}.py": f"X = {i}\n".encode() for i in range(8)}
    files_2 = {f"tool/m{i}.py": f"X = {i * 10}  # 2.0\n".encode() for i in range(8)}
    make_wheel(out, "tool", "1.0", {"tool/__init__.py": b"def main():\n    print(1)\n", **files_1},
               scripts={"tool": "tool:main"}, executable=True)  # fmt: skip
    make_wheel(out, "tool", "2.0", {"tool/__init__.py": b"def main():\n    print(2)\n", "tool/new.py": b"", **files_2},
               scripts={"tool": "tool:main", "tool2": "tool:main"}, executable=True)  # fmt: skip
    make_wheel(out, "helper", "1.0", {"helper/__init__.py": b""})
    make_wheel(out, "helper", "1.1", {"helper/__init__.py": b"# 1.1\n"})
    make_wheel(out, "badext", "1.0", {"badext.so": bad.read_bytes()}, requires=("helper==1.1",))
    make_wheel(out, "torch", "2.14.1+cu130", {"torch/__init__.py": b""})
    make_wheel(out, "torch", "2.13.0", {"torch/__init__.py": b""})
    lib = build(root / "lib" / "libtorch_cpu.so", "int at(void){return 128;}\n", flags=("-Wl,-soname,libtorch_cpu.so",))
    make_wheel(out, "torch", "2.14.1+cu128", {"torch/__init__.py": b"", "torch/lib/libtorch_cpu.so": lib.read_bytes()})
    make_wheel(out, "oldserve", "0.5", {"oldserve/__init__.py": b""}, requires=("torch==2.13.0",))
    return out


@pytest.fixture
def env(tmp_path: Path, links: Path) -> Path:
    python = make_venv(tmp_path / "env", with_pip=True)
    pip_install(python, links, "tool==1.0", "helper==1.0", "torch==2.14.1+cu130")
    return python


def cli(
    python: Path, state: Path, *argv: str, extra_env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "CUDASTACK_STATE_DIR": str(state), **(extra_env or {})}
    return subprocess.run([sys.executable, "-m", "cudastack", *argv[:1], "--python", str(python), *argv[1:]],
                          capture_output=True, text=True, env=env, timeout=600)  # fmt: skip


def install(python: Path, state: Path, links: Path, *specs: str, opts: tuple[str, ...] = (), **kw: Any) -> Any:
    return cli(python, state, "install", "--format", "json", *opts, "--", "--no-index", "--find-links",
               str(links), *specs, **kw)  # fmt: skip


def tree(python: Path) -> dict[str, str]:
    """sha256 of every file (and target of every symlink) under site-packages and bin."""
    out = {}
    for root in (site_of(python), python.parent):
        for dirpath, _dirs, files in os.walk(root):
            for f in files:
                p = os.path.join(dirpath, f)
                rel = os.path.relpath(p, root.parent)
                if os.path.islink(p):
                    out[rel] = "-> " + os.readlink(p)
                else:
                    out[rel] = hashlib.sha256(Path(p).read_bytes()).hexdigest()
    return out


def snapshot(python: Path) -> list[dict[str, Any]]:
    from cudastack.snapshot import take_snapshot
    from cudastack.target import build_target

    return take_snapshot(build_target(python=str(python), detect_gpus=False))["distributions"]


def versions(python: Path) -> dict[str, str]:
    return {d["key"]: d["version"] for d in snapshot(python)}


def test_install_keeps_a_good_result_and_rollback_restores_it_offline(env: Path, links: Path, tmp_path: Path) -> None:
    before_snap, before_tree = snapshot(env), tree(env)
    private = shutil.copytree(links, tmp_path / "links")
    r = install(env, tmp_path / "state", private, "tool==2.0")
    data = json.loads(r.stdout)
    assert r.returncode == 0, r.stderr
    assert data["outcome"] == "installed" and data["new_errors"] == []
    assert [(c["kind"], c["name"]) for c in data["changes"]] == [("upgraded", "tool")]
    assert versions(env)["tool"] == "2.0" and (env.parent / "tool2").exists()
    journal = json.loads((Path(data["transaction"]) / "journal.json").read_text())
    assert journal["state"] == "kept" and journal["backup_files"] > 8
    shutil.rmtree(private)  # nothing to reinstall from: rollback restores bytes it kept
    r = cli(env, tmp_path / "state", "rollback", "--format", "json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["remaining"] == []
    assert snapshot(env) == before_snap and tree(env) == before_tree
    assert not (env.parent / "tool2").exists()
    pip_install(env, links, "helper==1.1")  # installed since, without cudastack
    r = cli(env, tmp_path / "state", "rollback", "--format", "json")  # must not undo that
    assert r.returncode == 0 and json.loads(r.stdout)["already_rolled_back"] is True
    assert versions(env)["helper"] == "1.1"


def test_an_install_that_adds_an_error_is_refused_or_rolled_back(env: Path, links: Path, tmp_path: Path) -> None:
    before_snap, before_tree = snapshot(env), tree(env)
    r = install(env, tmp_path / "state", links, "badext")  # the plan predicts LDD001: refused, nothing changed
    assert r.returncode == 4, r.stderr
    assert "predicted to add 1 error(s)" in r.stderr and "LDD001" in r.stderr and "--allow-errors LDD001" in r.stderr
    assert snapshot(env) == before_snap and tree(env) == before_tree
    assert not list((tmp_path / "state").rglob("journal.json"))  # refused before any backup
    r = install(env, tmp_path / "state", links, "badext", opts=("--no-plan",))  # judged after: rolled back
    assert "prediction skipped (--no-plan)" in r.stderr
    data = json.loads(r.stdout)
    assert data["prediction"]["status"] == "skipped"
    assert r.returncode == 5, r.stderr  # ExitCode.ROLLED_BACK
    assert data["outcome"] == "rolled back"
    assert [f["code"] for f in data["new_errors"]] == ["LDD001"]
    assert data["rollback"]["remaining"] == []
    assert snapshot(env) == before_snap and tree(env) == before_tree
    r = install(env, tmp_path / "state2", links, "badext", opts=("--no-plan", "--no-rollback"))
    assert r.returncode == 1 and json.loads(r.stdout)["outcome"] == "installed"
    assert versions(env)["badext"] == "1.0"


def test_an_allowed_variant_swap_is_kept_then_rolled_back(env: Path, links: Path, tmp_path: Path) -> None:
    """+cu130 -> +cu128 of the same torch release: refused by default, allowed with --allow."""
    before_snap, before_tree = snapshot(env), tree(env)
    r = install(env, tmp_path / "state", links, "torch==2.14.1+cu128")
    assert r.returncode == 4 and json.loads(r.stdout)["refused"] == ["torch"]
    r = install(env, tmp_path / "state", links, "torch==2.14.1+cu128", opts=("--allow", "torch"))
    data = json.loads(r.stdout)
    assert r.returncode == 0, r.stderr
    assert [(c["kind"], c["before"], c["after"]) for c in data["changes"]] == [
        ("variant", "2.14.1+cu130", "2.14.1+cu128")
    ]
    assert (site_of(env) / "torch" / "lib" / "libtorch_cpu.so").exists()
    r = cli(env, tmp_path / "state", "rollback", "--format", "json")
    assert r.returncode == 0 and json.loads(r.stdout)["command"] == "rollback"
    assert snapshot(env) == before_snap and tree(env) == before_tree
    assert versions(env)["torch"] == "2.14.1+cu130"


def test_refused_and_locked_change_nothing(
    env: Path, links: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from cudastack.install.run import env_lock
    from cudastack.target import build_target

    before_tree = tree(env)
    r = install(env, tmp_path / "state", links, "oldserve==0.5")
    assert r.returncode == 4 and json.loads(r.stdout)["refused"] == ["torch"]
    monkeypatch.setenv("CUDASTACK_STATE_DIR", str(tmp_path / "state"))
    with env_lock(build_target(python=str(env), detect_gpus=False)):
        r = install(env, tmp_path / "state", links, "tool==2.0")
        assert r.returncode == 4 and "another cudastack install or rollback is running" in r.stderr
        r = cli(env, tmp_path / "state", "rollback")
        assert r.returncode == 4
    assert tree(env) == before_tree


def _strace_works() -> str | None:
    if STRACE is None:
        return "strace is not installed"
    probe = subprocess.run([STRACE, "-f", "-qq", "-o", "/dev/null", "true"], capture_output=True, text=True)
    return None if probe.returncode == 0 else f"ptrace refused here: {probe.stderr.strip()[:200]}"


def strace_wrapper(where: Path, inject: str) -> dict[str, str]:
    """Wrap the real install (``<target python> -m pip install``, not its dry run) in strace from
    outside cudastack: a ``sitecustomize`` on ``PYTHONPATH`` re-executes that interpreter under
    ``strace -e inject=...``. A PATH shim would miss ``python -m pip``; cudastack has no hook."""
    where.mkdir()
    (where / "sitecustomize.py").write_text(
        "import os, sys\n"
        "argv = list(getattr(sys, 'orig_argv', []))\n"
        "if argv[1:3] == ['-m', 'pip'] and 'install' in argv and '--dry-run' not in argv \\\n"
        "        and not os.environ.get('CUDASTACK_TEST_WRAPPED'):\n"
        "    os.environ['CUDASTACK_TEST_WRAPPED'] = '1'\n"
        f"    os.execv({STRACE!r}, [{STRACE!r}, '-f', '-qq', '-o', '/dev/null', '-e', {inject!r}, sys.executable,"
        " *argv[1:]])\n"
    )
    return {"PYTHONPATH": str(where)}


@pytest.mark.parametrize(
    ("where", "inject"),
    [
        # pip stashes the old version by renaming its files away: die at the 3rd rename
        ("during uninstall", "inject=rename,renameat,renameat2:signal=KILL:when=3"),
        # then writes the new files; each executable one is chmod-ed after it is written: die at the 4th
        ("during file copy", "inject=chmod,fchmod,fchmodat:signal=KILL:when=4"),
    ],
)
def test_installer_killed_mid_way_is_rolled_back(
    env: Path, links: Path, tmp_path: Path, where: str, inject: str
) -> None:
    reason = _strace_works()
    if reason:
        oracles.missing(reason)
    before_snap, before_tree = snapshot(env), tree(env)
    wrap = strace_wrapper(tmp_path / "wrap", inject)
    r = install(env, tmp_path / "state", links, "tool==2.0", opts=("--no-rollback",), extra_env=wrap)
    data = json.loads(r.stdout)
    assert r.returncode == 1 and data["outcome"] == "failed, kept", r.stderr
    assert tree(env) != before_tree  # the kill left a half-changed environment ...
    r = cli(env, tmp_path / "state", "rollback", "--format", "json")
    assert r.returncode == 0, r.stderr
    assert snapshot(env) == before_snap and tree(env) == before_tree  # ... that rollback restores
    # and without --no-rollback, cudastack rolls back by itself
    r = install(env, tmp_path / "state", links, "tool==2.0", extra_env=wrap)
    assert r.returncode == 5 and json.loads(r.stdout)["failure"].startswith("the installer")
    assert snapshot(env) == before_snap and tree(env) == before_tree


def test_a_rollback_killed_half_way_finishes_when_run_again(env: Path, links: Path, tmp_path: Path) -> None:
    before_snap, before_tree = snapshot(env), tree(env)
    assert install(env, tmp_path / "state", links, "tool==2.0").returncode == 0
    r = cli(env, tmp_path / "state", "rollback", extra_env={"CUDASTACK_TEST_KILL_AT": "rollback:restoring"})
    assert r.returncode == -signal.SIGKILL
    assert tree(env) != before_tree
    journal = json.loads(next((tmp_path / "state").rglob("journal.json")).read_text())
    assert journal["state"] == "rolling-back"
    r = cli(env, tmp_path / "state", "rollback")
    assert r.returncode == 0, r.stderr
    assert snapshot(env) == before_snap and tree(env) == before_tree


def test_cudastack_killed_while_backing_up_changed_nothing(env: Path, links: Path, tmp_path: Path) -> None:
    before_tree = tree(env)
    r = install(env, tmp_path / "state", links, "tool==2.0", extra_env={"CUDASTACK_TEST_KILL_AT": "install:backing-up"})
    assert r.returncode == -signal.SIGKILL and tree(env) == before_tree
    r = cli(env, tmp_path / "state", "rollback")
    assert r.returncode == 0 and tree(env) == before_tree


class _Stalling(http.server.SimpleHTTPRequestHandler):
    """A local index: the first download of the wheel is served, every later one stalls half-way
    (pip's dry run fetches it once; the real install's fetch never finishes)."""

    served: ClassVar[dict[str, int]] = {}
    stalled = threading.Event()

    def log_message(self, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        if self.path.endswith(".whl"):
            n = self.served[self.path] = self.served.get(self.path, 0) + 1
            if n > 1:
                data = Path(self.directory, self.path.lstrip("/").split("/")[-1]).read_bytes()
                self.send_response(200)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data[: len(data) // 2])
                self.wfile.flush()
                self.stalled.set()
                time.sleep(120)
                return
        super().do_GET()


@pytest.mark.parametrize("plan", [False, True], ids=["install", "prediction"])
def test_cudastack_killed_during_download_takes_the_installer_with_it(
    env: Path, links: Path, tmp_path: Path, plan: bool
) -> None:
    """The installer's download, or (by default) the prediction's own pip resolution that runs
    first: either way, SIGKILL to cudastack takes pip's whole process group with it."""
    before_snap, before_tree = snapshot(env), tree(env)
    _Stalling.stalled.clear()  # (a class attribute: set by an earlier run of this test)
    handler = lambda *a, **k: _Stalling(*a, directory=str(links), **k)  # noqa: E731
    socketserver.ThreadingTCPServer.daemon_threads = True
    with socketserver.ThreadingTCPServer(("127.0.0.1", 0), handler) as server:
        threading.Thread(target=server.serve_forever, daemon=True).start()
        url = f"http://127.0.0.1:{server.server_address[1]}/"
        env_vars = {**os.environ, "CUDASTACK_STATE_DIR": str(tmp_path / "state")}
        proc = subprocess.Popen(
            [sys.executable, "-m", "cudastack", "install", *([] if plan else ["--no-plan"]), "--python", str(env), "--",
             "--no-index",
             "--no-cache-dir",
             "--find-links", url, "tool==2.0"],
            env=env_vars, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        assert _Stalling.stalled.wait(120), "the install never reached the download"
        installers = _children_running(url, proc.pid)
        assert installers, "no installer process found"
        proc.kill()
        proc.wait()
        deadline = time.time() + 10
        while _children_running(url, proc.pid) and time.time() < deadline:
            time.sleep(0.1)
        assert not _children_running(url, proc.pid), "the installer outlived cudastack"
        server.shutdown()
    if not plan:  # the prediction comes before anything changes: nothing to roll back
        r = cli(env, tmp_path / "state", "rollback")  # the lock died with its holder
        assert r.returncode == 0, r.stderr
    assert snapshot(env) == before_snap and tree(env) == before_tree


def _children_running(marker: str, besides: int) -> list[int]:
    """Live processes whose command line holds ``marker``, other than ``besides``."""
    out = []
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
                state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
            except OSError:
                continue
            if marker.encode() in cmd and int(pid) != besides and state != "Z":
                out.append(int(pid))
    return out


def test_bad_snapshots_are_clear_errors_and_change_nothing(env: Path, links: Path, tmp_path: Path) -> None:
    assert install(env, tmp_path / "state", links, "tool==2.0").returncode == 0
    after = tree(env)
    txn = next((tmp_path / "state").rglob("journal.json")).parent
    plain = tmp_path / "plain.json"
    plain.write_text(cli(env, tmp_path / "state", "snapshot").stdout)
    r = cli(env, tmp_path / "state", "rollback", str(plain))
    assert r.returncode == 2 and "not a snapshot taken by 'cudastack install'" in r.stderr
    other = make_venv(tmp_path / "other")
    r = cli(other, tmp_path / "state", "rollback", str(txn / "before.json"))
    assert r.returncode == 2 and "is for the environment at" in r.stderr
    good = (txn / "before.json").read_text()
    (txn / "before.json").write_text(good[: len(good) // 2])
    r = cli(env, tmp_path / "state", "rollback", str(txn / "before.json"))
    assert r.returncode == 2 and "truncated" in r.stderr
    (txn / "before.json").write_text(good.replace('"format": 1', '"format": 99'))
    r = cli(env, tmp_path / "state", "rollback", str(txn / "before.json"))
    assert r.returncode == 2 and "format" in r.stderr
    assert tree(env) == after
    (txn / "before.json").write_text(good)
    # a blob no live file shares (an old file the install replaced): damaging it changes nothing else
    entries = json.loads((txn / "manifest.json").read_text())["entries"]
    blob = next(b for p, e in entries.items() if "__pycache__" not in p and "blob" in e
                and (b := Path(e["blob"])).stat().st_nlink == 1)  # fmt: skip
    blob.write_bytes(b"damaged" + blob.read_bytes())
    r = cli(env, tmp_path / "state", "rollback", str(txn / "before.json"))
    assert r.returncode == 6 and "is damaged" in r.stdout


def test_uv_installs_and_rolls_back_with_hardlinked_cache(env: Path, links: Path, tmp_path: Path) -> None:
    """uv hardlinks installed files from its cache; the backup must not share those inodes."""
    try:
        from cudastack.install.plan import uv_binary

        uv = uv_binary()
    except Exception as exc:  # noqa: BLE001
        oracles.missing(f"uv not available: {exc}")
    cache = tmp_path / "uvcache"
    uv_env = {"UV_CACHE_DIR": str(cache), "UV_LINK_MODE": "hardlink", "UV_NO_CONFIG": "1"}
    cmd = [uv, "pip", "install", "--python", str(env), "--no-index", "--find-links", str(links), "--reinstall"]
    subprocess.run([*cmd, "tool==1.0"], check=True, capture_output=True, env={**os.environ, **uv_env})
    installed = site_of(env) / "tool" / "m1.py"
    assert installed.stat().st_nlink > 1  # really hardlinked from uv's cache
    before_snap, before_tree = snapshot(env), tree(env)
    r = install(env, tmp_path / "state", links, "tool==2.0", opts=("--installer", "uv"), extra_env=uv_env)
    assert r.returncode == 0, r.stderr
    assert [(c["kind"], c["name"]) for c in json.loads(r.stdout)["changes"]] == [("upgraded", "tool")]
    for p in cache.rglob("m1.py"):  # the cache's copy of the old file changes after the backup
        p.unlink()
        p.write_text("X = 'cache changed'\n")
    r = cli(env, tmp_path / "state", "rollback")
    assert r.returncode == 0, r.stderr
    assert snapshot(env) == before_snap and tree(env) == before_tree


def test_a_distribution_without_record_is_restored_by_the_whole_scheme_backup(
    env: Path, links: Path, tmp_path: Path
) -> None:
    """No RECORD says which files are helper's: pip refuses to uninstall it half-way through; the
    backup of the whole install scheme, not of RECORDs, puts every byte back."""
    (next(site_of(env).glob("helper-1.0.dist-info")) / "RECORD").unlink()
    before_tree = tree(env)
    r = install(env, tmp_path / "state", links, "helper==1.1")
    assert r.returncode == 5, r.stderr  # ExitCode.ROLLED_BACK
    assert json.loads(r.stdout)["rollback"]["remaining"] == []
    assert tree(env) == before_tree


def test_a_build_backend_grandchild_dies_with_cudastack(tmp_path: Path) -> None:
    """pip runs an sdist's build backend in a subprocess of its own: PR_SET_PDEATHSIG on pip does
    not reach it. cudastack SIGKILLed mid-build takes the backend with it."""
    import io
    import tarfile

    pidfile = tmp_path / "backend.pid"
    backend = (
        "import os, time\n"
        "def get_requires_for_build_wheel(config_settings=None):\n    return []\n"
        "def prepare_metadata_for_build_wheel(d, config_settings=None):\n"
        "    os.makedirs(os.path.join(d, 'slow-1.0.dist-info'))\n"
        "    with open(os.path.join(d, 'slow-1.0.dist-info', 'METADATA'), 'w') as f:\n"
        "        f.write('Metadata-Version: 2.1\\nName: slow\\nVersion: 1.0\\n')\n"
        "    return 'slow-1.0.dist-info'\n"
        "def build_wheel(d, config_settings=None, metadata_directory=None):\n"
        f"    open({str(pidfile)!r}, 'w').write(str(os.getpid()))\n"
        "    time.sleep(300)\n"
    )
    files = {
        "slow-1.0/pyproject.toml": (
            '[build-system]\nrequires = []\nbuild-backend = "slowbackend"\nbackend-path = ["."]\n'
        ),
        "slow-1.0/slowbackend.py": backend,
        "slow-1.0/PKG-INFO": "Metadata-Version: 2.1\nName: slow\nVersion: 1.0\n",
    }
    links = tmp_path / "links"
    links.mkdir()
    with tarfile.open(links / "slow-1.0.tar.gz", "w:gz") as tf:
        for name, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    python = make_venv(tmp_path / "env", with_pip=True)
    proc = subprocess.Popen(
        [sys.executable, "-m", "cudastack", "install", "--python", str(python), "--", "--no-index", "--find-links",
         str(links), "slow"],
        env={**os.environ, "CUDASTACK_STATE_DIR": str(tmp_path / "state")},
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    deadline = time.time() + 120
    while not pidfile.exists() or not pidfile.read_text():
        assert time.time() < deadline and proc.poll() is None, "the build backend never started"
        time.sleep(0.1)
    grandchild = int(pidfile.read_text())
    assert _alive(grandchild)
    proc.kill()
    proc.wait()
    deadline = time.time() + 10
    while _alive(grandchild) and time.time() < deadline:
        time.sleep(0.1)
    assert not _alive(grandchild), "the build backend outlived cudastack"


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"
