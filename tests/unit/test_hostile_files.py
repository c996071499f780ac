"""Hostile files in the environment give a finding or a clear error, never a hang, crash or
traceback (issue 13, scenario 6). The doctor runs in a subprocess with a timeout, so a hang fails
the test instead of stalling the suite."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from cudastack.files import NotRegularFileError, read_bytes
from tests import scenario, users

TIMEOUT = 60


def _site(tmp_path: Path, extra_record: str = "") -> Path:
    site = tmp_path / "site-packages"
    scenario.write_dist(site, {"name": "foo", "version": "2.0", "paths": ["foo/__init__.py"]})
    if extra_record:
        record = site / "foo-2.0.dist-info" / "RECORD"
        record.write_text(record.read_text() + extra_record)
    return site


def _cudastack(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(
            [sys.executable, "-m", "cudastack", *args],
            cwd=cwd,
            capture_output=True,
            text=True,
            timeout=TIMEOUT,
            env={**os.environ, "NO_COLOR": "1"},
            check=False,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"cudastack {' '.join(args)} hung (no answer in {TIMEOUT} s)")


def _doctor(site: Path, tmp_path: Path, *args: str) -> tuple[int, dict[str, Any]]:
    proc = _cudastack(
        "doctor", "--site-packages", str(site), "--python-version", "3.11", "--format", "json", *args, cwd=tmp_path
    )
    assert "Traceback" not in proc.stderr, proc.stderr
    assert proc.returncode != 3, proc.stderr
    return proc.returncode, json.loads(proc.stdout)


def _evidence(data: dict[str, Any], code: str) -> list[str]:
    return [e for f in data["findings"] if f["code"] == code for e in f["evidence"]]


def test_fifo_where_record_lists_a_library_is_a_finding_not_a_hang(tmp_path: Path) -> None:
    site = _site(tmp_path, "foo/_c.so,,\n")
    os.mkfifo(site / "foo" / "_c.so")
    rc, data = _doctor(site, tmp_path)
    assert rc == 1
    assert any("_c.so: is a FIFO" in e for e in _evidence(data, "ENV004")), data["findings"]
    # snapshot hashes native files that RECORD does not hash: it must not wait on the FIFO either
    proc = _cudastack("snapshot", "--site-packages", str(site), "-o", str(tmp_path / "snap.json"), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr


def test_socket_where_a_library_belongs_is_a_finding(tmp_path: Path) -> None:
    site = _site(tmp_path, "foo/_c.so,,\n")
    sock = socket.socket(socket.AF_UNIX)
    try:
        os.chdir(site / "foo")  # an AF_UNIX path is limited to 108 bytes: bind a relative one
        sock.bind("_c.so")
    finally:
        os.chdir(tmp_path)
        rc, data = _doctor(site, tmp_path)
        sock.close()
    assert rc == 1
    assert any("_c.so: is a socket" in e for e in _evidence(data, "ENV004")), data["findings"]


def test_device_where_a_library_belongs_is_a_finding(tmp_path: Path) -> None:
    site = _site(tmp_path, "foo/_c.so,,\n")
    os.symlink("/dev/zero", site / "foo" / "_c.so")
    rc, data = _doctor(site, tmp_path)
    assert rc == 1
    assert any("_c.so: is a character device" in e for e in _evidence(data, "ENV004")), data["findings"]


def test_symlink_loop_is_a_finding(tmp_path: Path) -> None:
    site = _site(tmp_path, "foo/_c.so,,\nfoo/_d.so,,\n")
    os.symlink("_d.so", site / "foo" / "_c.so")
    os.symlink("_c.so", site / "foo" / "_d.so")
    rc, data = _doctor(site, tmp_path)
    assert rc == 1
    assert any("_c.so: is a symlink loop" in e for e in _evidence(data, "ENV004")), data["findings"]


def test_nul_byte_in_a_record_path_crashes_neither_doctor_nor_snapshot(tmp_path: Path) -> None:
    site = _site(tmp_path, "foo/a\0b.so,,\n")
    rc, data = _doctor(site, tmp_path)
    assert rc == 1
    assert any("NUL byte" in e for e in _evidence(data, "ENV004")), data["findings"]
    assert all(c["outcome"] != "error" for c in data["checks"]), [c for c in data["checks"] if c["outcome"] == "error"]
    proc = _cudastack("snapshot", "--site-packages", str(site), "-o", str(tmp_path / "snap.json"), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr


def test_non_utf8_record_and_metadata_are_findings(tmp_path: Path) -> None:
    site = _site(tmp_path)
    meta = site / "foo-2.0.dist-info"
    (meta / "RECORD").write_bytes((meta / "RECORD").read_bytes() + b"foo/\xff\xfe.so,,\n")
    (meta / "METADATA").write_bytes(b"Metadata-Version: 2.1\nName: foo\nVersion: 2.0\nSummary: \xff\xfe\n")
    rc, data = _doctor(site, tmp_path)
    assert rc == 1
    assert any("not UTF-8" in e for e in _evidence(data, "ENV002"))


def test_deeply_nested_direct_url_json_is_a_finding_not_exit_3(tmp_path: Path) -> None:
    site = _site(tmp_path)
    (site / "foo-2.0.dist-info" / "direct_url.json").write_text("[" * 100_000 + "]" * 100_000)
    _rc, data = _doctor(site, tmp_path)
    assert any("direct-url-malformed: nested too deeply" in e for e in _evidence(data, "ENV002")), data["findings"]


def test_record_over_the_read_limit_says_where_it_was_cut(tmp_path: Path) -> None:
    site = _site(tmp_path)
    record = site / "foo-2.0.dist-info" / "RECORD"
    line = b"foo/" + b"x" * 200 + b".py,,\n"
    with open(record, "ab") as fh:
        fh.write(line * ((65 << 20) // len(line)))
    size = record.stat().st_size
    _rc, data = _doctor(site, tmp_path, "--select", "ENV002")
    cut = [e for e in _evidence(data, "ENV002") if "record-truncated" in e]
    assert cut, data["findings"]
    assert f"of {size} " in cut[0] and "cut off at byte" in cut[0]


def test_read_bytes_refuses_a_fifo_at_once(tmp_path: Path) -> None:
    """A plain open() of a FIFO blocks until a writer comes; the safe read must not."""
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    start = time.monotonic()
    with pytest.raises(NotRegularFileError, match="FIFO"):
        read_bytes(str(fifo), 100)
    assert time.monotonic() - start < 5


def test_read_bytes_reports_truncation(tmp_path: Path) -> None:
    f = tmp_path / "f"
    f.write_bytes(b"0123456789")
    got = read_bytes(str(f), 4)
    assert (got.data, got.size, got.truncated) == (b"0123", 10, True)
    whole = read_bytes(str(f), 10)
    assert (whole.data, whole.truncated) == (b"0123456789", False)


def test_read_bytes_follows_a_library_symlink_deliberately(tmp_path: Path) -> None:
    (tmp_path / "libx.so.1").write_bytes(b"\x7fELF")
    (tmp_path / "libx.so").symlink_to("libx.so.1")
    assert read_bytes(str(tmp_path / "libx.so"), 16).data == b"\x7fELF"
    with pytest.raises(OSError):
        read_bytes(str(tmp_path / "libx.so"), 16, follow_symlinks=False)


def test_a_crashed_check_makes_the_summary_say_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], validate_report: Any
) -> None:
    """A check that raised judged nothing: the summary line must not say "OK 0 error(s)" over it,
    the exit code is 3, and the JSON envelope names it."""
    import dataclasses

    from cudastack.checks import registry
    from cudastack.cli import main

    def boom(ctx: registry.Context) -> Any:
        raise ValueError("embedded null byte")

    monkeypatch.setitem(registry._RULES, "ENV004", dataclasses.replace(registry._RULES["ENV004"], func=boom))
    site = _site(tmp_path)
    base = ["doctor", "--site-packages", str(site), "--python-version", "3.11", "--color", "never"]
    assert main(base) == 3
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert last.startswith("CRASHED 1 check(s) crashed (ENV004); 0 error(s)"), last
    assert main([*base, "--format", "json"]) == 3
    data = json.loads(capsys.readouterr().out)
    validate_report(data)
    assert data["summary"]["crashed"] == ["ENV004"] and data["summary"]["exit_code"] == 3
    assert main([*base, "--format", "json", "--select", "ENV001"]) == 0
    assert json.loads(capsys.readouterr().out)["summary"]["crashed"] == []


@pytest.mark.parametrize(
    ("unreadable", "code", "says"),
    [
        ("foo", "ENV004", "_c.so: is not readable"),  # the package directory RECORD points into
        ("foo-2.0.dist-info", "ENV002", "Permission denied"),  # the metadata directory
        (".", "ENV001", "no distributions found"),  # site-packages itself: was a PermissionError traceback
    ],
)
def test_unreadable_directory_is_a_finding(
    unprivileged_user: users.User, unreadable: str, code: str, says: str
) -> None:
    """Root reads any directory: the doctor runs as an unprivileged user (created when needed)."""
    root = unprivileged_user.mkdtemp()
    site = _site(root, "foo/_c.so,,\n")
    (site / "foo" / "_c.so").write_bytes(b"")
    try:
        os.chmod(site / unreadable, 0)
        proc = unprivileged_user.run(
            [sys.executable, "-m", "cudastack", "doctor", "--site-packages", str(site), "--python-version", "3.11",
             "--format", "json"],
            cwd=root,
        )  # fmt: skip
        assert proc.returncode in (0, 1), proc.stderr
        assert "Traceback" not in proc.stderr
        data = json.loads(proc.stdout)
        found = [f for f in data["findings"] if f["code"] == code]
        assert found and says in found[0]["message"] + "\n".join(found[0]["evidence"]), data["findings"]
    finally:
        os.chmod(site / unreadable, 0o755)
        shutil.rmtree(root)


def test_pyvenv_cfg_that_is_a_fifo_does_not_hang(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "pyvenv.cfg")
    code = "import sys; from cudastack.target import _read_pyvenv_cfg; print(_read_pyvenv_cfg(sys.argv[1]))"
    try:
        proc = subprocess.run(
            [sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, timeout=TIMEOUT, check=False
        )
    except subprocess.TimeoutExpired:
        pytest.fail("reading a FIFO pyvenv.cfg hung")
    assert proc.returncode == 0 and proc.stdout.strip() == "{}", proc.stderr


def test_metadata_over_the_read_limit_says_where_it_was_cut(tmp_path: Path) -> None:
    site = _site(tmp_path)
    meta = site / "foo-2.0.dist-info" / "METADATA"
    with open(meta, "ab") as fh:
        fh.write(b"\nLong description.\n" + b"x" * (17 << 20))
    size = meta.stat().st_size
    _rc, data = _doctor(site, tmp_path, "--select", "ENV002")
    cut = [e for e in _evidence(data, "ENV002") if "metadata-truncated" in e]
    assert cut and f"of {size} " in cut[0], data["findings"]


@pytest.mark.oracle("git")
def test_fifo_git_attributes_file_does_not_hang_patches(tmp_path: Path) -> None:
    """The attribute files scanned before git writes (info/attributes, core.attributesFile) are
    the checkout's to choose: a FIFO there must not stall ``patches save``."""
    repo = tmp_path / "repo"
    repo.mkdir()
    env = {**os.environ, "GIT_CONFIG_GLOBAL": "/dev/null", "GIT_CONFIG_NOSYSTEM": "1"}
    ident = ["-c", "user.name=dev", "-c", "user.email=dev@example.com"]
    for args in (["init", "-q"], ["add", "-A"], [*ident, "commit", "-q", "--allow-empty", "-m", "one"]):
        subprocess.run(["git", *args], cwd=repo, env=env, check=True, capture_output=True)
    os.makedirs(repo / ".git" / "info", exist_ok=True)
    os.mkfifo(repo / ".git" / "info" / "attributes")
    os.mkfifo(tmp_path / "global-attributes")
    subprocess.run(
        ["git", "config", "core.attributesFile", str(tmp_path / "global-attributes")], cwd=repo, env=env, check=True
    )
    proc = _cudastack("patches", "save", str(repo), cwd=tmp_path)
    assert "Traceback" not in proc.stderr, proc.stderr
    assert proc.returncode in (0, 4), proc.stderr


def test_deeply_nested_snapshot_given_to_diff_is_a_clear_error(tmp_path: Path) -> None:
    snap = tmp_path / "a.json"
    snap.write_text('{"schema_version": "1.2", "snapshot": ' + "[" * 100_000 + "]" * 100_000 + "}")
    proc = _cudastack("diff", str(snap), str(snap), cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr  # a report that cannot be read: usage-level error, not a crash
    assert "nested too deeply" in proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.parametrize("dists", ["[1, 2]", '[{"name": null}]', '[{"key": "a", "name": "a", "version": "1"}]'])
def test_malformed_snapshot_given_to_diff_is_a_clear_error(tmp_path: Path, dists: str) -> None:
    snap = tmp_path / "a.json"
    snap.write_text('{"schema_version": "1.2", "snapshot": {"format": 1, "distributions": ' + dists + "}}")
    proc = _cudastack("diff", str(snap), str(snap), cwd=tmp_path)
    assert proc.returncode == 2 and "is not a distribution" in proc.stderr, proc.stderr


def test_fifos_where_judging_rules_read_package_code_do_not_hang(tmp_path: Path) -> None:
    """The rules that read a package's own files to judge severity (PKG001's import-time version
    check in ``pkg/__init__.py`` and its NumPy-1 C API scan of extension modules, PKG002's
    ``flashinfer/jit/env.py``) open them as the loader does: a FIFO there is no hang."""
    site = tmp_path / "site-packages"
    so = "foo/_c.cpython-311-x86_64-linux-gnu.so"
    scenario.write_dist(site, {"name": "numpy", "version": "2.2.6", "paths": ["numpy/__init__.py"]})
    scenario.write_dist(site, {"name": "foo", "version": "1.0", "requires": ["numpy<2"], "paths": [so]})
    scenario.write_dist(site, {"name": "flashinfer-python", "version": "0.7.4", "paths": ["flashinfer/jit/env.py"]})
    scenario.write_dist(site, {"name": "flashinfer-cubin", "version": "0.6.13", "paths": ["flashinfer_cubin/x.py"]})
    for rel in ("foo/__init__.py", so, "flashinfer/jit/env.py"):
        (site / rel).unlink(missing_ok=True)
        os.mkfifo(site / rel)
    record = site / "foo-1.0.dist-info" / "RECORD"
    record.write_text(record.read_text() + "foo/__init__.py,,\n")
    _rc, data = _doctor(site, tmp_path)
    assert {"PKG001", "PKG002"} <= {f["code"] for f in data["findings"]}, data["findings"]


def test_generated_code_nested_too_deep_to_parse_is_skipped_not_a_crash(tmp_path: Path) -> None:
    """A generated `__init__.py` whose expression nests past the parser's limit (RecursionError,
    not SyntaxError) next to a ctypes load: the import model skips the file; every rule that
    needs the prediction still runs."""
    import ast

    from cudastack.env.dists import iter_distributions
    from cudastack.env.native_loads import find_native_loads

    def loads(code: str, where: str) -> list[str | None]:
        site = tmp_path / where
        scenario.write_dist(site, {"name": "foo", "version": "1.0", "files": {"foo/__init__.py": code}})
        (dist,) = iter_distributions([str(site)])
        return [n.soname for n in find_native_loads(dist)]

    deep = "x = 1" + "+1" * 20000
    with pytest.raises(RecursionError):  # the premise: this file really is past the parser's limit
        ast.parse(deep)
    # the control: the same file, shallow, is read and its load found (an empty answer is not the default)
    assert loads("import ctypes\nctypes.CDLL('libx.so.1')\nx = 1+1\n", "shallow") == ["libx.so.1"]
    assert loads("import ctypes\nctypes.CDLL('libx.so.1')\n" + deep + "\n", "deep") == []


def _in_child(code: str) -> str:
    """``code``'s output, run in a fresh interpreter with a timeout: a hang fails the test."""
    try:
        proc = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, timeout=TIMEOUT, check=False
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"hung (no answer in {TIMEOUT} s): {code}")
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip()


def test_a_fifo_named_as_a_torch_op_library_is_not_waited_on(tmp_path: Path) -> None:
    """Whether a library defines a torch op is read from its bytes (torchvision's ``_C.so``); a
    FIFO in its place is not a library that defines anything, and opening it must not block."""
    fifo = tmp_path / "_C.so"
    os.mkfifo(fifo)
    code = f"from cudastack.env.native_loads import library_defines; print(library_defines({str(fifo)!r}, 'ns::op'))"
    assert _in_child(code) == "False"
    # the batched search the prediction uses (first_defined) opens it the same way
    code = f"from cudastack.env.native_loads import first_defined; print(first_defined([{str(fifo)!r}], ['ns::op']))"
    assert _in_child(code) == "None"


def test_a_fifo_top_level_txt_is_not_waited_on_by_the_plan_overlay(tmp_path: Path) -> None:
    """The plan's overlay reads ``top_level.txt`` of a distribution without RECORD; a FIFO there
    counts as unreadable (the distribution's own name is used), it is not waited on."""
    site = tmp_path / "site-packages"
    meta = scenario.write_dist(site, {"name": "foo", "version": "2.0", "paths": ["foo/__init__.py"]})
    (meta / "RECORD").unlink()
    os.mkfifo(meta / "top_level.txt")
    code = (
        "from cudastack.env.inventory import read_inventory; from cudastack.target import build_target;"
        "from cudastack.plan.overlay import unrecorded_tops;"
        f"print(sorted(unrecorded_tops(read_inventory(build_target(site_packages={str(site)!r}, "
        f"python_version='3.11')), {str(site)!r})))"
    )
    assert _in_child(code) == "['foo']"


def test_a_fifo_named_as_a_pip_configuration_is_not_waited_on_by_the_plans_reuse_key(tmp_path: Path) -> None:
    """The reuse key reads pip's configuration files (the site file in the target's prefix among
    them) and the target's pyvenv.cfg by content; a FIFO there is fingerprinted as unreadable, not
    waited on."""
    fifo = tmp_path / "pip.conf"
    os.mkfifo(fifo)
    code = f"from cudastack.plan.reuse import _content; print(_content({str(fifo)!r})[0])"
    assert _in_child(code) == "missing"


def test_plan_guesses_from_a_fifo_index_page_or_a_fifo_wheel_do_not_hang(tmp_path: Path) -> None:
    """Speculation reads local index pages and extracts what they name, before pip has looked: a
    FIFO where ``<index>/<name>/index.html`` or the named wheel should be is passed over."""
    fifo_page = tmp_path / "one" / "simple" / "torch"
    fifo_page.mkdir(parents=True)
    os.mkfifo(fifo_page / "index.html")
    page = tmp_path / "two" / "simple" / "sglang"
    page.mkdir(parents=True)
    (tmp_path / "two" / "files").mkdir()
    os.mkfifo(tmp_path / "two" / "files" / "sglang-1.0-py3-none-any.whl")
    (page / "index.html").write_text('<a href="../../files/sglang-1.0-py3-none-any.whl">w</a>')
    code = (
        "import sys; from cudastack.plan import speculate; from cudastack.plan.fetch import WheelCache; "
        "from cudastack.target import build_target; from pathlib import Path; "
        "args = ['--index-url', (Path(sys.argv[1]) / 'one' / 'simple').as_uri(), '--extra-index-url', "
        "(Path(sys.argv[1]) / 'two' / 'simple').as_uri(), 'torch==2.14.1', 'sglang==1.0']; "
        "t = build_target(python=sys.executable); print(len(speculate.guesses(args, t))); "
        "print(speculate.start(args, t, WheelCache(Path(sys.argv[1]) / 'cache')))"
    )
    env = {**os.environ, "PIP_CONFIG_FILE": os.devnull}
    try:
        proc = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True,
                              timeout=TIMEOUT, check=False, env=env)  # fmt: skip
    except subprocess.TimeoutExpired:
        pytest.fail("a FIFO index page or wheel hung the plan's guesses")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["1", "None"]  # the FIFO wheel is named, and not extracted
