"""The healthy corpus (issue 11, *Proof*): real-world stacks installed by pip from real wheels,
judged against reality.

For each stack of ``tests/corpus.py`` a fresh interpreter under ``env -i`` imports every top-level
package of every distribution (one interpreter per distribution). Then the doctor judges the same
environment, with the same process environment (``--env-file`` holding only PATH):

- an ``error`` on a distribution all of whose packages import is a false alarm;
- a distribution with a package that does not import must carry an ``error`` (the failure named on
  the right distribution); one without is a miss.

The false alarms and misses the doctor has today are listed below, each with the rule and its
cause, and each is a strict xfail of its own: it flips to a failure when the cause is fixed, so the
entry gets removed. Any other false alarm or miss fails at once.
"""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests import corpus, oracles
from tests.venvs import make_venv, site_of

pytestmark = pytest.mark.realwheels

# (stack, rule, distribution) -> why the doctor says error although every import works
# (none left: the last five were fixed in the parsers merge and PKG009's consequence rule)
KNOWN_FALSE_ALARMS: dict[tuple[str, str, str], str] = {}

# (stack, rule, distribution) -> why an error on a distribution that does fail to import names a
# wrong cause: it does not count as naming the failure
KNOWN_WRONG_CAUSES: dict[tuple[str, str, str], str] = {
    ("sglang", "PKG014", "sglang-kernel"): (
        "PKG014 (checks/pkg.py): sglang-kernel 0.4.10 ships infllm_ops.cpython-310-x86_64-linux-gnu.so, which "
        "`import sgl_kernel` does not reach; sgl_kernel fails for libcuda.so.1 (common_ops)"
    ),
}

# (stack, distribution) -> why the doctor does not name a real import failure of that distribution
# (none left: sglang's matplotlib-inline, which imports the matplotlib it does not declare, is PKG017's)
KNOWN_MISSES: dict[tuple[str, str], str] = {}


@dataclass(frozen=True, slots=True, kw_only=True)
class Judged:
    """One stack: reality and the doctor's report."""

    imports: dict[str, corpus.DistImports]
    errors: tuple[tuple[str, str | None, str], ...]
    """(code, normalized distribution or None, message) of each error finding."""
    warnings: tuple[tuple[str, str | None, str], ...]
    failing_modules: frozenset[tuple[str, str]] = frozenset()
    """(code, normalized distribution) for each native module the report's `modules` table calls
    failing at import, with the error finding that explains it: one root cause (libcuda.so.1
    missing) is one finding, and every distribution whose module it breaks is named there."""

    @property
    def failing(self) -> set[str]:
        return {d for d, r in self.imports.items() if r.failures}

    def false_alarms(self) -> set[tuple[str, str]]:
        """(code, dist) of each error on a distribution whose packages all import; an error on no
        distribution counts when every import of the stack works."""
        return {
            (code, dist or "")
            for code, dist, _ in self.errors
            if (dist is not None and dist not in self.failing) or (dist is None and not self.failing)
        }

    def misses(self, stack: str) -> set[str]:
        named = {dist for code, dist, _ in self.errors if dist and (stack, code, dist) not in KNOWN_WRONG_CAUSES}
        named |= {dist for code, dist in self.failing_modules if (stack, code, dist) not in KNOWN_WRONG_CAUSES}
        return self.failing - named


@functools.cache
def judged(name: str) -> Judged:
    try:
        python = corpus.build(corpus.BY_NAME[name])
    except corpus.UnavailableError as e:
        oracles.missing(str(e))
    imports = corpus.oracle(python)
    env_file = python.parent.parent / "process.env"
    env_file.write_text(f"PATH={os.environ.get('PATH', '/usr/bin:/bin')}\n")
    proc = subprocess.run(
        [sys.executable, "-m", "cudastack", "doctor", "--python", str(python), "--format", "json"]
        + ["--env-file", str(env_file)],
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert proc.returncode in (0, 1), proc.stderr[-2000:]
    report = json.loads(proc.stdout)
    findings = report["findings"]
    error_codes = {f["code"] for f in findings if f["severity"] == "error"}
    failing_modules = frozenset(
        (code, corpus.normalize(m["distribution"]))
        for m in report.get("modules", [])
        if m["predicted"] == "fails" and m.get("distribution")
        for code in m.get("codes", [])
        if code in error_codes
    )

    def rows(severity: str) -> tuple[tuple[str, str | None, str], ...]:
        return tuple(
            (f["code"], corpus.normalize(f["distribution"]) if f.get("distribution") else None, f["message"])
            for f in findings
            if f["severity"] == severity
        )

    return Judged(imports=imports, errors=rows("error"), warnings=rows("warning"), failing_modules=failing_modules)


STACK_NAMES = [s.name for s in corpus.STACKS]


@pytest.mark.parametrize("stack", STACK_NAMES)
def test_the_oracle_really_imports(stack: str) -> None:
    """Not vacuous: every distribution with Python code gave names, and most of them import."""
    j = judged(stack)
    assert j.imports
    tried = sum(len(r.names) for r in j.imports.values())
    failed = sum(len(r.failures) for r in j.imports.values())
    assert tried >= 3 and failed * 4 < tried, (tried, failed)


@pytest.mark.parametrize("stack", STACK_NAMES)
def test_no_error_where_every_import_succeeds(stack: str) -> None:
    j = judged(stack)
    new = {fa for fa in j.false_alarms() if (stack, *fa) not in KNOWN_FALSE_ALARMS}
    detail = [e for e in j.errors if (e[0], e[1] or "") in new]
    assert not new, detail


@pytest.mark.parametrize("stack", STACK_NAMES)
def test_every_import_failure_is_named_on_its_distribution(stack: str) -> None:
    j = judged(stack)
    new = {d for d in j.misses(stack) if (stack, d) not in KNOWN_MISSES}
    assert not new, {d: j.imports[d].failures for d in new}


if KNOWN_FALSE_ALARMS:  # an empty parameter set would show as a skip

    @pytest.mark.parametrize(
        ("stack", "code", "dist"),
        [
            pytest.param(*k, marks=pytest.mark.xfail(strict=True, reason=why), id="-".join(k))
            for k, why in sorted(KNOWN_FALSE_ALARMS.items())
        ],
    )
    def test_known_false_alarm(stack: str, code: str, dist: str) -> None:
        assert (code, dist) not in judged(stack).false_alarms()


if KNOWN_MISSES:  # an empty parameter set would show as a skip

    @pytest.mark.parametrize(
        ("stack", "dist"),
        [
            pytest.param(*k, marks=pytest.mark.xfail(strict=True, reason=why), id="-".join(k))
            for k, why in sorted(KNOWN_MISSES.items())
        ],
    )
    def test_known_miss(stack: str, dist: str) -> None:
        assert dist not in judged(stack).misses(stack)


def table() -> str:
    """The report's table: stack, dists, top-level imports, imports failing, doctor errors/warnings."""
    lines = ["| stack | dists | top-level imports | failing imports | errors | warnings |", "|---|---|---|---|---|---|"]
    for name in STACK_NAMES:
        j = judged(name)
        tried = sum(len(r.names) for r in j.imports.values())
        failing = ", ".join(f"{d}:{n}" for d, r in sorted(j.imports.items()) for n in r.failures) or "0"
        dists = len(corpus.dist_infos(site_of(corpus.env_dir(corpus.BY_NAME[name]) / "bin" / "python")))
        lines.append(f"| {name} | {dists} | {tried} | {failing} | {len(j.errors)} | {len(j.warnings)} |")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.stdout.write(table() + "\n")
    for name in STACK_NAMES:
        for code, dist, msg in judged(name).errors:
            sys.stdout.write(f"{name}\t{code}\t{dist}\t{msg[:200]}\n")


def test_cudnn_frontend_imports_without_libcudnn_and_the_doctor_agrees(tmp_path: Path) -> None:
    """nvidia-cudnn-frontend's ``__init__`` opens libcudnn by path when it finds one and falls back
    to ``ctypes.CDLL("libcudnn.so.9")`` / ``("libcudnn.so")`` inside ``try/except Exception`` in an
    ``else:`` branch: on a host without cuDNN ``import cudnn`` still works (was two LDD001)."""
    python = make_venv(tmp_path / "env")
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-deps", "--no-compile"]
        + ["nvidia-cudnn-frontend"],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    if proc.returncode != 0:
        oracles.missing(f"cannot install nvidia-cudnn-frontend here: {proc.stderr.strip()[-300:]}")
    real = subprocess.run(
        ["env", "-i", f"PATH={os.environ.get('PATH', '')}", str(python), "-c", "import cudnn"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert real.returncode == 0, real.stderr[-600:]
    out = subprocess.run(
        [sys.executable, "-m", "cudastack", "doctor", "--python", str(python), "--format", "json", "--select", "LDD"]
        + ["-e", "LD_LIBRARY_PATH="],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    errors = [(f["code"], f["subject"]) for f in json.loads(out.stdout)["findings"] if f["severity"] == "error"]
    assert errors == []


def test_the_shared_torch_base_is_intact() -> None:
    """The stacks on CUDA torch share its files by hard links; pip unlinks a file before it writes
    one, so however they changed their own copies (jax's resolution moves nvidia-nvjitlink to
    13.5), every file the base's RECORDs hash still has those bytes."""
    import base64
    import csv
    import hashlib

    for stack in corpus.STACKS:
        if stack.base:
            try:
                corpus.build(stack)
            except corpus.UnavailableError as e:
                oracles.missing(str(e))
    site = site_of(corpus.env_dir(corpus.BY_NAME["torch-cu130"]) / "bin" / "python")
    changed, checked = [], 0
    for record in sorted(site.glob("*.dist-info/RECORD")):
        for row in csv.reader(record.read_text().splitlines()):
            if len(row) < 2 or not row[1].startswith("sha256="):
                continue
            digest = hashlib.sha256()
            with open(site / row[0], "rb") as fh:
                for chunk in iter(lambda: fh.read(1 << 20), b""):
                    digest.update(chunk)
            checked += 1
            if base64.urlsafe_b64encode(digest.digest()).rstrip(b"=").decode() != row[1][len("sha256=") :]:
                changed.append(row[0])
    assert checked > 1000 and changed == []


# --- PKG008: severity follows what bitsandbytes' own code loads (issue 11, the audit) -------------

_BNB_PICKS = r"""
import torch, bitsandbytes.cextension as c
from bitsandbytes.cuda_specs import CUDASpecs
cuda = torch.version.cuda
spec = CUDASpecs(highest_compute_capability=(9, 0), cuda_version_string=cuda.replace(".", ""),
                 cuda_version_tuple=tuple(int(x) for x in cuda.split(".")[:2]))
path = c.get_cuda_bnb_library_path(spec)
print(path.name, path.exists())
"""


def _bnb_doctor(python: Path, *env: str) -> dict[str, object]:
    args = [a for e in env for a in ("-e", e)]
    proc = subprocess.run(
        [sys.executable, "-m", "cudastack", "doctor", "--python", str(python), "--format", "json"]
        + ["--select", "PKG008", "-e", f"PATH={os.environ.get('PATH', '')}", *args],
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    findings = [f for f in json.loads(proc.stdout)["findings"] if f["code"] == "PKG008"]
    assert len(findings) == 1, findings
    return dict(findings[0])


def _bnb_picks(python: Path, *env: str) -> tuple[str, bool]:
    """Reality: bitsandbytes' own selection (``get_cuda_bnb_library_path``) in a fresh interpreter,
    for torch's CUDA (no GPU here, so its CUDASpecs are built from ``torch.version.cuda``)."""
    proc = subprocess.run(
        ["env", "-i", f"PATH={os.environ.get('PATH', '')}", *env, str(python), "-c", _BNB_PICKS],
        capture_output=True,
        text=True,
        timeout=600,
        check=True,
    )
    name, exists = proc.stdout.split()[-2:]
    return name, exists == "True"


def _bnb_python() -> Path:
    try:
        return corpus.build(corpus.BY_NAME["transformers-accelerate-bnb"])
    except corpus.UnavailableError as e:
        oracles.missing(str(e))


def test_pkg008_is_an_error_when_no_binary_will_load() -> None:
    """``BNB_CUDA_VERSION=125`` beside bitsandbytes 0.50.2, which ships no cuda125: its own code
    returns the absent path (the override bypasses the fallback), the load error is caught at
    import and every CUDA call raises. Error, with where it is caught."""
    python = _bnb_python()
    # `import bitsandbytes.cextension` imports the package first: that it runs at all shows the import works
    name, exists = _bnb_picks(python, "BNB_CUDA_VERSION=125")
    assert (name, exists) == ("libbitsandbytes_cuda125.so", False)
    f = _bnb_doctor(python, "BNB_CUDA_VERSION=125")
    assert f["severity"] == "error"
    assert any("catches the load error at import" in e for e in f["evidence"]), f["evidence"]  # type: ignore[attr-defined]


def test_pkg008_is_a_warning_when_bitsandbytes_falls_back_within_the_major(tmp_path: Path) -> None:
    """The same bitsandbytes without its cuda130 binary (a hard-linked copy of the stack, the file
    and its RECORD row removed: what a torch on a CUDA minor bitsandbytes does not ship meets):
    its own code falls back to cuda132 and loads it. A warning that names it."""
    stack = _bnb_python()
    python = make_venv(tmp_path / "env")
    site = site_of(python)
    subprocess.run(["cp", "-al", f"{site_of(stack)}/.", str(site)], check=True)
    (site / "bitsandbytes" / "libbitsandbytes_cuda130.so").unlink()
    record = next(site.glob("bitsandbytes-*.dist-info")) / "RECORD"
    rows = [r for r in record.read_text().splitlines(keepends=True) if "libbitsandbytes_cuda130.so" not in r]
    record.unlink()  # a hard link: the stack's own RECORD keeps its bytes
    record.write_text("".join(rows))
    assert _bnb_picks(python) == ("libbitsandbytes_cuda132.so", True)
    f = _bnb_doctor(python)
    assert f["severity"] == "warning"
    assert any("libbitsandbytes_cuda132.so" in e for e in f["evidence"]), f["evidence"]  # type: ignore[attr-defined]


# --- PKG003: a jit-cache for another CUDA than torch is judged by whether its kernels load --------


@pytest.mark.parametrize(
    ("runtime", "target", "severity"),
    [("dynamic", "--python", "error"), ("static", "--python", "warning"), ("static", "--site-packages", "error")],
)
def test_pkg003_follows_whether_the_kernels_load(tmp_path: Path, runtime: str, target: str, severity: str) -> None:
    """flashinfer-jit-cache 0.7.4+cu128 beside torch 2.14.1+cu130 (the CUDA torch stack, hard-linked):
    a kernel library that needs ``libcudart.so.12`` (not on this host, not in the stack) really
    fails to dlopen — error, naming it; one built with the static runtime (no cudart dependency)
    really loads — warning, saying why. With ``--site-packages`` alone there is no loader
    prediction to contradict the label: error, and the evidence says it is the table alone."""
    from tests import native, wheels

    try:
        base = corpus.build(corpus.BY_NAME["torch-cu130"])
    except corpus.UnavailableError as e:
        oracles.missing(str(e))
    python = make_venv(tmp_path / "env")
    site = site_of(python)
    subprocess.run(["cp", "-al", f"{site_of(base)}/.", str(site)], check=True)
    src = "int fmha_run(int x) { return x + 1; }\n"
    if runtime == "dynamic":
        stub = native.build(tmp_path / "stub" / "libcudart.so.12", "int cudaFree(void *p) { return 0; }\n",
                            flags=("-Wl,-soname,libcudart.so.12",))  # fmt: skip
        kernel = native.build(tmp_path / "k" / "fmha.so", src, flags=("-Wl,--no-as-needed", f"-L{stub.parent}"),
                              libs=("-l:libcudart.so.12",))  # fmt: skip
    else:
        kernel = native.build(tmp_path / "k" / "fmha.so", src)
    files = {
        "flashinfer_jit_cache/__init__.py": b"",
        "flashinfer_jit_cache/jit_cache/fmha/fmha.so": kernel.read_bytes(),
    }
    wheels.make_wheel(tmp_path / "wheels", "flashinfer-jit-cache", "0.7.4+cu128", files)
    wheels.pip_install(python, tmp_path / "wheels", "flashinfer-jit-cache", extra=("--no-deps",))
    installed = site / "flashinfer_jit_cache" / "jit_cache" / "fmha" / "fmha.so"
    [(_, loads, why)] = native.real_dlopen([str(installed)])
    assert loads == (runtime == "static"), why
    proc = subprocess.run(
        [sys.executable, "-m", "cudastack", "doctor", target, str(python if target == "--python" else site)]
        + ["--format", "json", "--select", "PKG003", "-e", f"PATH={os.environ.get('PATH', '')}"],
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    [f] = [f for f in json.loads(proc.stdout)["findings"] if f["code"] == "PKG003"]
    assert f["severity"] == severity, f
    if target == "--site-packages":
        assert any(e.startswith("error from the table alone") for e in f["evidence"]), f["evidence"]
    elif runtime == "dynamic":
        assert any("libcudart.so.12" in e for e in f["evidence"]), f["evidence"]
    else:
        assert any("every kernel library" in e for e in f["evidence"]), f["evidence"]


def test_a_module_that_fails_when_loaded_later_is_not_said_to_load() -> None:
    """xformers 0.0.35 as pip resolves it beside torch 2.14.1+cu130: ``import xformers`` works, but
    its ``_C.so`` needs ``libcudart.so.12`` and really fails to load when xformers asks for it
    (``torch.ops.load_library``; xformers catches that and warns). PKG006 is a warning (the import
    works); its evidence said "every native module of xformers loads (1 judged)", now it names
    the module that fails when loaded later."""
    try:
        python = corpus.build(corpus.BY_NAME["xformers"])
    except corpus.UnavailableError as e:
        oracles.missing(str(e))
    so = site_of(python) / "xformers" / "_C.so"
    real = subprocess.run(
        ["env", "-i", f"PATH={os.environ.get('PATH', '')}", str(python), "-c"]
        + [f"import torch, xformers; torch.ops.load_library({str(so)!r})"],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert real.returncode != 0 and "libcudart.so.12" in real.stderr, real.stderr[-600:]
    proc = subprocess.run(
        [sys.executable, "-m", "cudastack", "doctor", "--python", str(python), "--format", "json"]
        + ["--select", "PKG006", "-e", f"PATH={os.environ.get('PATH', '')}"],
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    [f] = [f for f in json.loads(proc.stdout)["findings"] if f["code"] == "PKG006"]
    assert f["severity"] == "warning", f
    said = " ".join(f["evidence"])
    assert "every native module" not in said and "_C.so (libcudart.so.12" in said, f["evidence"]
