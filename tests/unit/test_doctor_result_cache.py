"""The whole doctor's answer replayed from the cache (cudastack.result_cache): on a real venv with
gcc-built libraries, every change the answer depends on gives the answer a cache-off run gives,
and an unchanged environment is replayed, saying so.

Each test makes the first (recording) run, checks that a second run is a replay equal to a
``CUDASTACK_NO_CACHE=1`` run, changes one thing, and checks that the next run is not a replay and
equals a cache-off run that differs from the answer before the change (so the change matters, and
a stale replay would fail the test). Every run is a fresh ``python -m cudastack`` process.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from cudastack.result_cache import RACY_S
from tests import native, scenario

SRC = Path(__file__).resolve().parents[2] / "src"
EXT = "_ext" + str(sysconfig.get_config_var("EXT_SUFFIX"))
LIB_WITH = "int bar_fn(void) { return 1; }\n"
LIB_WITHOUT = "int bar_other(void) { return 2; }\n"  # the same soname, missing bar_fn


@dataclass
class Env:
    root: Path
    python: Path
    site: Path
    state: Path
    src: Path = SRC
    log: list[str] = field(default_factory=list)

    def doctor(self, *extra: str, cache: bool = True, env: dict[str, str] | None = None) -> dict[str, Any]:
        run_env = {k: v for k, v in os.environ.items() if k not in ("CUDASTACK_NO_CACHE", "LD_LIBRARY_PATH")}
        run_env.update(CUDASTACK_STATE_DIR=str(self.state), PYTHONPATH=str(self.src), **(env or {}))
        run_env["CUDASTACK_DEBUG_RESULT_CACHE"] = "1"  # why a run was not replayed, in the failure
        if not cache:
            run_env["CUDASTACK_NO_CACHE"] = "1"
        argv = [sys.executable, "-m", "cudastack", "doctor", "--python", str(self.python), "--format", "json"]
        proc = subprocess.run([*argv, *extra], capture_output=True, text=True, env=run_env, check=False)
        assert proc.returncode in (0, 1), proc.stderr
        self.log.append(proc.stderr)
        return json.loads(proc.stdout)  # type: ignore[no-any-return]

    def check(self, *extra: str, env: dict[str, str] | None = None) -> tuple[dict[str, Any] | None, dict[str, Any]]:
        """(the result-cache note of a cached run, the answer), the cached answer equal to a cache-off one."""
        fresh = self.doctor(*extra, cache=False, env=env)
        cached = self.doctor(*extra, env=env)
        note = cached.pop("result_cache", None)
        assert cached == fresh
        return note, fresh

    def replayed(self, *extra: str, env: dict[str, str] | None = None) -> dict[str, Any]:
        """Record, then replay: the answer of an unchanged environment."""
        self.doctor(*extra, env=env)
        note, answer = self.check(*extra, env=env)
        assert note is not None and note["replayed"] is True, f"an unchanged environment was not replayed: {self.log}"
        assert note["files"] > 0 and note["directories"] > 0
        return answer

    def changed(self, before: dict[str, Any], *extra: str, env: dict[str, str] | None = None) -> dict[str, Any]:
        """After a change: not a replay, equal to a cache-off run, different from ``before``."""
        note, after = self.check(*extra, env=env)
        assert note is None, f"replayed after a change: {note}"
        assert after != before, "the change does not change the answer: the test proves nothing"
        return after


def lib(out: Path, source: str) -> Path:
    """A gcc-built ``libbar.so`` put in place by rename (a new inode, as an installer does)."""
    tmp = native.build(out.parent / f".{out.name}.{time.monotonic_ns()}.so", source, flags=("-Wl,-soname,libbar.so",))
    os.replace(tmp, out)
    return out


@pytest.fixture
def env(tmp_path: Path) -> Env:
    """A venv with one distribution ``foo``: an extension module needing ``bar_fn`` from
    ``libbar.so``, found through its RUNPATH ``$ORIGIN/../first:$ORIGIN/../foo.libs`` (``first``
    exists and is empty); ``foo/__init__.py`` imports it. Its files are older than RACY_S when
    the first run reads them, as an installed environment's are."""
    native.need_compilers()
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    site = Path(sysconfig.get_path("purelib", vars={"base": str(venv), "platbase": str(venv)}))
    libbar = lib(tmp_path / "build" / "libbar.so", LIB_WITH)
    ext = native.build(
        tmp_path / "build" / EXT,
        "extern int bar_fn(void);\nvoid *PyInit__ext(void) { return (void *)(long)bar_fn(); }\n",
        libs=(f"-L{libbar.parent}", "-lbar"),
        flags=("-Wl,--enable-new-dtags,-rpath,$ORIGIN/../first:$ORIGIN/../foo.libs",),
    )
    scenario.write_dist(
        site,
        {
            "name": "foo",
            "version": "1.0",
            "files": {
                "foo/__init__.py": "from foo import _ext\n",
                f"foo/{EXT}": ext.read_bytes(),
                "foo.libs/libbar.so": libbar.read_bytes(),
            },
        },
    )
    (site / "first").mkdir()
    lib(tmp_path / "ldlp" / "libbar.so", LIB_WITHOUT)
    state = tmp_path / "state"
    state.mkdir()
    time.sleep(RACY_S + 0.2)
    return Env(root=tmp_path, python=venv / "bin" / "python", site=site, state=state)


def test_an_unchanged_environment_is_replayed_and_says_so(env: Env, validate_report: Any) -> None:
    answer = env.replayed()
    assert not answer["findings"]
    replay = env.doctor()
    assert replay["result_cache"]["message"].startswith("result from cache: ")
    validate_report(replay)
    # the human report is written from the same entry (--format, -o, --color, -v, --all only choose
    # how it is written): it equals a cache-off run's, plus the line that says it was replayed
    argv = [sys.executable, "-m", "cudastack", "doctor", "--python", str(env.python)]
    run_env = {**os.environ, "CUDASTACK_STATE_DIR": str(env.state), "PYTHONPATH": str(SRC)}
    first = subprocess.run(argv, capture_output=True, text=True, env={**run_env, "CUDASTACK_NO_CACHE": "1"})
    run_env.pop("CUDASTACK_NO_CACHE", None)
    second = subprocess.run([*argv, "--verbose"], capture_output=True, text=True, env=run_env, check=False)
    fresh = subprocess.run(
        [*argv, "--verbose"], capture_output=True, text=True, env={**run_env, "CUDASTACK_NO_CACHE": "1"}
    )
    assert "result from cache" not in first.stdout and "result from cache" not in fresh.stdout
    assert "result from cache: " in second.stdout and " unchanged since " in second.stdout
    assert fresh.stdout == second.stdout[: len(fresh.stdout)]


def test_a_library_replaced_by_one_missing_a_symbol(env: Env) -> None:
    before = env.replayed()
    lib(env.site / "foo.libs" / "libbar.so", LIB_WITHOUT)
    after = env.changed(before)
    assert [f["code"] for f in after["findings"]] == ["ABI001"]


def test_a_touched_library_is_not_replayed(env: Env) -> None:
    before = env.replayed()
    os.utime(env.site / "foo.libs" / "libbar.so")
    note, after = env.check()
    assert note is None and after == before


def test_a_library_added_to_a_searched_directory(env: Env) -> None:
    """``first`` was searched and held nothing (a negative lookup): a stub there shadows libbar."""
    before = env.replayed()
    lib(env.site / "first" / "libbar.so", LIB_WITHOUT)
    after = env.changed(before)
    assert [f["code"] for f in after["findings"]] == ["ABI001"]


def test_ld_library_path_changes_the_answer(env: Env) -> None:
    before = env.replayed()
    after = env.changed(before, env={"LD_LIBRARY_PATH": str(env.root / "ldlp")})
    assert "ABI001" in [f["code"] for f in after["findings"]]


def test_an_edited_python_file_changes_an_import_verdict(env: Env) -> None:
    before = env.replayed()
    init = env.site / "foo" / "__init__.py"
    init.write_text(init.read_text() + "import not_installed_anywhere\n")
    after = env.changed(before)
    assert "PKG017" in [f["code"] for f in after["findings"]]


def test_an_edit_seen_only_through_the_keys_of_the_per_distribution_caches(env: Env) -> None:
    """A run whose PKG017 and import-verdict answers come from their own caches reads no ``.py``
    file: it only stats them for those caches' keys. Those stats are what must catch the edit."""
    before = env.replayed()
    shutil.rmtree(env.state / "cache" / "doctor")
    env.replayed()  # recorded with the per-distribution caches filled
    init = env.site / "foo" / "__init__.py"
    init.write_text(init.read_text() + "import not_installed_anywhere\n")
    after = env.changed(before)
    assert "PKG017" in [f["code"] for f in after["findings"]]


def test_a_requirement_added_to_metadata(env: Env) -> None:
    before = env.replayed()
    meta = env.site / "foo-1.0.dist-info" / "METADATA"
    meta.write_text(meta.read_text().replace("Version: 1.0\n", "Version: 1.0\nRequires-Dist: missingdep\n"))
    env.changed(before)


@pytest.mark.parametrize("extra", [("--gpu", "sm_90"), ("--driver", "580.65.06")])
def test_gpu_and_driver_arguments(env: Env, extra: tuple[str, ...]) -> None:
    before = env.replayed()
    env.changed(before, *extra)


def test_a_change_of_cudastack_source(env: Env) -> None:
    src = env.root / "src"
    shutil.copytree(SRC / "cudastack", src / "cudastack", ignore=shutil.ignore_patterns("__pycache__"))
    env.src = src
    time.sleep(RACY_S + 0.2)
    before = env.replayed()
    doctor_py = src / "cudastack" / "doctor.py"
    text = doctor_py.read_text()
    assert '"deep": target.deep,' in text
    doctor_py.write_text(text.replace('"deep": target.deep,', '"deep": target.deep, "edited": True,'))
    after = env.changed(before)
    assert after["target"]["edited"] is True


def test_caching_off_keeps_nothing(env: Env) -> None:
    env.doctor(cache=False)
    assert not (env.state / "cache" / "doctor").exists()


def _elsewhere(path: Path) -> None:
    """``path`` changed by someone else (the recorder does not see this write)."""
    from cudastack import result_cache

    with result_cache.unrecorded():
        path.write_text("two, longer\n")


def test_what_a_replay_cannot_check_is_not_kept(tmp_path: Path) -> None:
    """Another child process, a file written outside the state directory, a file that changed
    between two looks: the recorder refuses, and store() keeps nothing."""
    from cudastack import result_cache

    seen = tmp_path / "seen.txt"
    seen.write_text("one\n")
    for act, why in (
        (lambda: subprocess.run(["true"], check=True), "ran true"),
        (lambda: (tmp_path / "out.txt").write_text("x"), "wrote "),
        (lambda: (seen.read_text(), _elsewhere(seen), seen.read_text()), "changed while it was read"),
    ):
        rec = result_cache.start((str(tmp_path / "state"),))
        try:
            act()
        finally:
            result_cache.stop()
        assert rec.refused is not None and why in rec.refused, rec.refused
        result_cache.store("k" * 64, rec, b"payload")
        assert not os.path.exists(result_cache.entry_path("k" * 64))


def test_a_lookup_that_finds_nothing_is_recorded_and_checked_again(tmp_path: Path) -> None:
    from cudastack import result_cache

    missing = tmp_path / "libnew.so"
    rec = result_cache.start(())
    try:
        assert not os.path.exists(missing)
    finally:
        result_cache.stop()
    assert rec.refused is None and ("stat", str(missing)) in rec.seen
    result_cache.store("m" * 64, rec, b"payload")
    assert result_cache.lookup("m" * 64)[0] == b"payload"  # type: ignore[index]
    missing.write_bytes(b"")
    assert result_cache.lookup("m" * 64) == f"stat of {missing} changed"


def test_only_the_newest_entries_are_kept(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from cudastack import result_cache

    monkeypatch.setenv("CUDASTACK_STATE_DIR", str(tmp_path / "state"))
    for n in range(result_cache.KEEP + 3):
        rec = result_cache.start(())
        result_cache.stop()
        key = f"{n:02d}".ljust(64, "0")
        result_cache.store(key, rec, b"payload")
        os.utime(result_cache.entry_path(key), ns=(n * 10**9, n * 10**9))  # written in this order
    kept = sorted(os.listdir(tmp_path / "state" / "cache" / "doctor"))
    assert len(kept) == result_cache.KEEP and kept[0].startswith("03") and kept[-1].startswith("34")
