"""The interpreter's own start-up under the target's environment, against real processes: an
LD_PRELOAD entry glibc ignores, and a stub library on LD_LIBRARY_PATH that the python binary
binds to and dies on at first call."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from cudastack.cli import main
from tests.native import build
from tests.unit.test_optional_modules import UNGUARDED, _make


def _doctor(python: Path, capsys: pytest.CaptureFixture[str], *env: str) -> tuple[int, dict]:  # type: ignore[type-arg]
    import json

    args = ["doctor", "--python", str(python), "--format", "json", "-e", "LD_LIBRARY_PATH="]
    for e in env:
        args += ["-e", e]
    rc = main(args)
    return rc, json.loads(capsys.readouterr().out)


def test_a_preload_that_is_missing_is_ignored_and_every_module_still_judged(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """glibc prints "ERROR: ld.so: object … cannot be preloaded …: ignored." and goes on, so the
    package's real import failure must still be reported (it was skipped: 'would not start')."""
    python = _make(tmp_path, UNGUARDED)
    preload = f"{tmp_path}/gone/libhook.so:libnothere.so"
    real = subprocess.run(
        ["env", "-i", f"LD_PRELOAD={preload}", str(python), "-c", "import optpkg"], capture_output=True, text=True
    )
    assert "cannot be preloaded (cannot open shared object file): ignored." in real.stderr
    assert real.returncode != 0 and "libmissing.so" in real.stderr
    ok = subprocess.run(["env", "-i", f"LD_PRELOAD={preload}", str(python), "-c", "pass"], capture_output=True)
    assert ok.returncode == 0  # the interpreter does start
    rc, data = _doctor(python, capsys, f"LD_PRELOAD={preload}")
    assert rc == 1
    assert sorted((f["code"], f["severity"], f["subject"]) for f in data["findings"]) == [
        ("LDD001", "error", "libmissing.so"),
        ("LDD008", "warning", f"{tmp_path}/gone/libhook.so"),
        ("LDD008", "warning", "libnothere.so"),
    ]
    assert data["loader"]["skipped"] is None


def test_a_stub_library_the_interpreter_binds_to_is_a_crash_at_first_call(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A libm.so.6 without libm's functions on LD_LIBRARY_PATH: the python binary starts (lazy
    binding), then dies with "symbol lookup error" at its first float power."""
    python = _make(tmp_path, "X = 1\n")
    stub = build(tmp_path / "stub-libm" / "libm.so.6", "int stub_m;\n", flags=("-Wl,-soname,libm.so.6",))
    llp = f"LD_LIBRARY_PATH={stub.parent}"
    started = subprocess.run(["env", "-i", llp, str(python), "-c", "pass"], capture_output=True, text=True)
    assert started.returncode == 0, started.stderr
    crash = subprocess.run(["env", "-i", llp, str(python), "-c", "print(2.0 ** 0.5)"], capture_output=True, text=True)
    assert crash.returncode != 0 and "symbol lookup error" in crash.stderr and "undefined symbol: pow" in crash.stderr
    rc, data = _doctor(python, capsys, llp)
    assert rc == 1
    start = [f for f in data["findings"] if f["code"] == "LDD007"]
    assert len(start) == 1 and start[0]["severity"] == "error"
    evidence = "\n".join(start[0]["evidence"])
    assert f"libm.so.6 is {stub} (LD_LIBRARY_PATH)" in evidence
    assert "libpython3" in evidence and "pow@GLIBC_2.29" in evidence, evidence


def test_a_healthy_interpreter_has_no_start_finding(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    python = _make(tmp_path, "X = 1\n")
    _rc, data = _doctor(python, capsys, f"LD_PRELOAD={os.environ.get('LD_PRELOAD', '')}")
    assert [f["code"] for f in data["findings"] if f["code"] in ("LDD007", "LDD008")] == []
    # the checks ran: a skipped LDD007/LDD008 also reports no finding
    assert {c["code"]: c["outcome"] for c in data["checks"] if c["code"] in ("LDD007", "LDD008")} == {
        "LDD007": "pass",
        "LDD008": "pass",
    }


def test_an_interpreter_that_cannot_start_is_an_error_and_the_summary_names_what_was_not_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A libpython3.X.so.1.0 on LD_LIBRARY_PATH that needs a library nowhere to be found: the real
    interpreter does not start at all (exit 127, "error while loading shared libraries"). The doctor
    says so as an error, judges no module, and its summary line names every loader check it did
    not run and why (they were skipped silently before but for a count)."""
    import sysconfig

    python = _make(tmp_path, "X = 1\n")
    ldlib = sysconfig.get_config_var("INSTSONAME") or ""
    needs = subprocess.run(["readelf", "-d", os.path.realpath(python)], capture_output=True, text=True).stdout
    if ldlib not in needs or not ldlib.startswith("libpython"):
        pytest.fail(f"this test needs a python linked to its libpython ({ldlib!r} not in its DT_NEEDED)")
    gone = build(tmp_path / "gone" / "libgone.so.1", "int gone_f(void) { return 1; }\n",
                 flags=("-Wl,-soname,libgone.so.1",))  # fmt: skip
    stub = build(tmp_path / "stub" / ldlib, "int gone_f(void);\nint stub_py(void) { return gone_f(); }\n",
                 flags=(f"-Wl,-soname,{ldlib}", f"-L{gone.parent}", "-l:libgone.so.1"))  # fmt: skip
    llp = f"LD_LIBRARY_PATH={stub.parent}"
    real = subprocess.run(["env", "-i", llp, str(python), "-c", "pass"], capture_output=True, text=True)
    assert real.returncode == 127 and "error while loading shared libraries: libgone.so.1" in real.stderr
    rc, data = _doctor(python, capsys, llp)
    assert rc == 1
    [start] = [f for f in data["findings"] if f["code"] == "LDD007"]
    assert start["severity"] == "error" and "cannot start" in start["message"] and "libgone.so.1" in start["message"]
    assert data["loader"]["skipped"].startswith("the interpreter itself would not start")
    not_run = sorted(
        c["code"] for c in data["checks"] if c["outcome"] == "skip" and c["reason"] == data["loader"]["skipped"]
    )
    assert {"LDD001", "ABI001", "LDD006"} <= set(not_run)
    assert main(["doctor", "--python", str(python), "-e", "LD_LIBRARY_PATH=", "-e", llp]) == 1
    [summary] = [ln for ln in capsys.readouterr().out.splitlines() if "checks ran" in ln]
    assert (
        f"{len(not_run)} loader checks not run ({', '.join(not_run)}): the interpreter itself would not start"
        in summary
    )
