"""A fake torch family and a kernel package, built with gcc into real wheels, served from real
PEP 503 indexes (with PEP 658 ``.metadata`` files) in a directory: one index per variant label.

- ``minitorch 2.0.0+cu128|cu130|cpu``: ``minitorch/lib/libc10.so`` exports ``c10_v1`` (cu128,
  cpu) or ``c10_v2`` (cu130, a changed ABI); the CUDA builds' ``libtorch_cuda.so`` needs
  ``libcudart.so.12``/``.13`` from ``minicuda-runtime12``/``13`` (a requirement);
  ``minitorch/_C.abi3.so`` is the extension ``import minitorch`` loads.
- ``kern 1.0`` (the "pypi" index): declares no requirement at all (like sgl-kernel 0.3.21) and
  its ``kern/_C.abi3.so`` was built against the cu128 build: it needs ``c10_v1`` and
  ``libcudart.so.12``.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import os
import shutil
import signal
import subprocess
import sys
import sysconfig
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path

from tests import native

EXT = """#define Py_LIMITED_API 0x03080000
#include <Python.h>
{decls}
static struct PyModuleDef m = {{PyModuleDef_HEAD_INIT, "_C", NULL, -1, NULL}};
PyMODINIT_FUNC PyInit__C(void) {{ {calls} return PyModule_Create(&m); }}
"""
TAG = "py3-none-linux_x86_64"
VARIANTS = {"cu130": ("c10_v2", 13), "cu128": ("c10_v1", 12), "cpu": ("c10_v1", None)}


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def wheel(out: Path, name: str, version: str, files: dict[str, bytes], requires: tuple[str, ...] = ()) -> Path:
    norm = name.replace("-", "_")
    di = f"{norm}-{version}.dist-info"
    meta = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n" + "".join(
        f"Requires-Dist: {r}\n" for r in requires
    )
    contents = {
        **files,
        f"{di}/METADATA": meta.encode(),
        f"{di}/WHEEL": f"Wheel-Version: 1.0\nGenerator: cudastack-tests\nRoot-Is-Purelib: false\nTag: {TAG}\n".encode(),
    }
    record = "".join(f"{p},sha256={_b64(d)},{len(d)}\n" for p, d in contents.items()) + f"{di}/RECORD,,\n"
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{norm}-{version}-{TAG}.whl"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for p, d in contents.items():
            info = zipfile.ZipInfo(p)
            info.external_attr = 0o100755 << 16 if p.endswith(".so") or ".so." in p else 0o100644 << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(info, d)
        zf.writestr(f"{di}/RECORD", record)
    path.with_name(path.name + ".metadata").write_bytes(meta.encode())
    return path


def publish(index: Path, wheels: list[Path]) -> str:
    """A PEP 503 simple index of ``wheels`` (PEP 658 metadata attributes); returns its URL."""
    files = index / "files"
    files.mkdir(parents=True, exist_ok=True)
    by_project: dict[str, list[Path]] = {}
    for w in wheels:
        shutil.copy(w, files / w.name)
        shutil.copy(w.with_name(w.name + ".metadata"), files / (w.name + ".metadata"))
        by_project.setdefault(w.name.split("-")[0].replace("_", "-").lower(), []).append(files / w.name)
    for project, ws in by_project.items():
        d = index / "simple" / project
        d.mkdir(parents=True, exist_ok=True)
        links = ""
        for w in ws:
            digest = hashlib.sha256(w.read_bytes()).hexdigest()
            meta = hashlib.sha256(w.with_name(w.name + ".metadata").read_bytes()).hexdigest()
            links += (
                f'<a href="../../files/{w.name}#sha256={digest}" data-dist-info-metadata="sha256={meta}">{w.name}</a>\n'
            )
        (d / "index.html").write_text(f"<!DOCTYPE html><html><body>\n{links}</body></html>\n")
    (index / "simple" / "index.html").write_text(
        "<html><body>" + "".join(f'<a href="{p}/">{p}</a>' for p in by_project) + "</body></html>"
    )
    return (index / "simple").as_uri()


def _ext(out: Path, sym: str, libs: tuple[str, ...], rpath: str) -> bytes:
    """An extension module ``_C`` whose init calls each of the ``,``-separated symbols ``sym``
    (a call, so the linker's --as-needed keeps every library it names)."""
    inc = sysconfig.get_paths()["include"]
    syms = sym.split(",")
    source = EXT.format(
        decls="".join(f"extern int {s}(void);\n" for s in syms), calls=" ".join(f"{s}();" for s in syms)
    )
    native.build(out, source, flags=(f"-I{inc}", f"-Wl,-rpath,{rpath}", "-Wl,--disable-new-dtags"),
                 libs=libs)  # fmt: skip
    return out.read_bytes()


def build_indexes(root: Path) -> dict[str, str]:
    """Build everything under ``root``; returns ``{label: index URL}`` for cu130, cu128, cpu, pypi
    and kernels (kern 2.0, a CUDA 12 build, and kern 1.5, built for the cu130 family)."""
    native.need_compilers()
    work = root / "build"
    urls = {}
    runtimes: dict[int, Path] = {}
    for major in (12, 13):
        lib = work / f"cudart{major}" / f"libcudart.so.{major}"
        native.build(
            lib, f"int cudart_{major}(void) {{ return {major}; }}\n", flags=(f"-Wl,-soname,libcudart.so.{major}",)
        )
        runtimes[major] = wheel(work / "wheels", f"minicuda-runtime{major}", f"{major}.0.0",
                                {f"minicuda/cu{major}/lib/libcudart.so.{major}": lib.read_bytes()})  # fmt: skip
    c10_v1 = work / "cu128" / "libc10.so"
    for label, (sym, major) in VARIANTS.items():
        d = work / label
        c10 = native.build(d / "libc10.so", f"int {sym}(void) {{ return 1; }}\n", flags=("-Wl,-soname,libc10.so",))
        files = {"minitorch/lib/libc10.so": c10.read_bytes()}
        version = f"2.0.0+{label}"
        requires: tuple[str, ...] = ()
        if major:
            cudart = runtimes[major].parent.parent / f"cudart{major}"
            tc = native.build(
                d / "libtorch_cuda.so",
                f"extern int {sym}(void); extern int cudart_{major}(void);\n"
                f"int torch_cuda(void) {{ return {sym}() + cudart_{major}(); }}\n",
                flags=("-Wl,-soname,libtorch_cuda.so", f"-L{d}", f"-L{cudart}",
                       f"-Wl,-rpath,$ORIGIN:$ORIGIN/../../minicuda/cu{major}/lib", "-Wl,--disable-new-dtags"),
                libs=("-lc10", f"-l:libcudart.so.{major}"),
            )  # fmt: skip
            files["minitorch/lib/libtorch_cuda.so"] = tc.read_bytes()
            ext = _ext(d / "_C.abi3.so", "torch_cuda", (f"-L{d}", "-ltorch_cuda"), "$ORIGIN/lib")
            requires = (f"minicuda-runtime{major}",)
        else:
            ext = _ext(d / "_C.abi3.so", sym, (f"-L{d}", "-lc10"), "$ORIGIN/lib")
        files["minitorch/_C.abi3.so"] = ext
        files["minitorch/__init__.py"] = f"from minitorch import _C\n__version__ = {version!r}\n".encode()
        torch_whl = wheel(work / "wheels" / label, "minitorch", version, files, requires)
        urls[label] = publish(root / label, [torch_whl, *([runtimes[major]] if major else [])])
    kern_ext = _ext(
        work / "kern" / "_C.abi3.so",
        "c10_v1,cudart_12",
        (f"-L{c10_v1.parent}", "-lc10", f"-L{work / 'cudart12'}", "-l:libcudart.so.12"),
        "$ORIGIN/../minitorch/lib:$ORIGIN/../minicuda/cu12/lib",
    )
    kern = wheel(work / "wheels" / "kern", "kern", "1.0",
                 {"kern/__init__.py": b"from kern import _C\n", "kern/_C.abi3.so": kern_ext})  # fmt: skip
    urls["pypi"] = publish(root / "pypi", [kern, runtimes[12], runtimes[13]])
    # "kernels": kern 2.0 (newest) is the CUDA 12 build again; kern 1.5 was built for the cu130 family
    kern2 = wheel(work / "wheels" / "kern2", "kern", "2.0",
                  {"kern/__init__.py": b"from kern import _C\n", "kern/_C.abi3.so": kern_ext})  # fmt: skip
    kern15_ext = _ext(
        work / "kern15" / "_C.abi3.so",
        "c10_v2,cudart_13",
        (f"-L{work / 'cu130'}", "-lc10", f"-L{work / 'cudart13'}", "-l:libcudart.so.13"),
        "$ORIGIN/../minitorch/lib:$ORIGIN/../minicuda/cu13/lib",
    )
    kern15 = wheel(work / "wheels" / "kern15", "kern", "1.5",
                   {"kern/__init__.py": b"from kern import _C\n", "kern/_C.abi3.so": kern15_ext})  # fmt: skip
    urls["kernels"] = publish(root / "kernels", [kern2, kern15, runtimes[12], runtimes[13]])
    return urls


def isolated_pip_env(base: dict[str, str]) -> dict[str, str]:
    """No pip configuration of this machine (its indexes, find-links and constraints): only the
    indexes a test names."""
    env = {k: v for k, v in base.items() if not k.startswith(("PIP_", "UV_"))}
    env["PIP_CONFIG_FILE"] = "/dev/null"
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    return env


def pip_install(python: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet", *args],
        capture_output=True, text=True, env=env, check=False, timeout=300,
    )  # fmt: skip


def try_import(python: Path, *modules: str) -> subprocess.CompletedProcess[str]:
    """A real import in a fresh interpreter of the venv (the oracle)."""
    code = "".join(f"import {m}\n" for m in modules)
    return subprocess.run([str(python), "-c", code], capture_output=True, text=True, check=False, timeout=120)


GPU_EXT = """#define Py_LIMITED_API 0x03080000
#include <Python.h>
extern "C" __global__ void add(float *a, float b) { a[threadIdx.x] += b; }
static struct PyModuleDef m = {PyModuleDef_HEAD_INIT, "_C", NULL, -1, NULL};
extern "C" PyMODINIT_FUNC PyInit__C(void) { return PyModule_Create(&m); }
"""


def build_gpu_index(root: Path, archs: list[str]) -> tuple[str, Path]:
    """``gkern 1.0``: an extension module with device code for ``archs`` only (nvcc, static
    cudart, so it imports anywhere; a launch needs a kernel image for the GPU). Returns the
    index URL and the built module (for cuobjdump)."""
    from tests import cuda_build

    inc = sysconfig.get_paths()["include"]
    ext = cuda_build.nvcc(root / "build" / "gkern" / "_C.abi3.so", archs, kind="so", flags=(f"-I{inc}",),
                          source=GPU_EXT)  # fmt: skip
    whl = wheel(root / "build" / "wheels", "gkern", "1.0",
                {"gkern/__init__.py": b"from gkern import _C\n", "gkern/_C.abi3.so": ext.read_bytes()})  # fmt: skip
    return publish(root / "gpu", [whl]), ext


_SERVE = r"""
import http.server, os, sys
root, port_file, once, slow = sys.argv[1], sys.argv[2], sys.argv[3] == "1", float(sys.argv[4])
served = set()

class Handler(http.server.SimpleHTTPRequestHandler):
    def __init__(self, *a, **k):
        super().__init__(*a, directory=root, **k)

    def log_message(self, *a):
        pass

    def do_GET(self):
        if once and self.path.endswith(".whl"):
            if self.path in served:  # the index changed after the resolution: the file is gone
                self.send_error(404)
                return
            served.add(self.path)
        if self.path.endswith(".whl"):
            with open(port_file + ".wheels", "a") as fh:  # what was downloaded, for the test to read
                fh.write(self.path + "\n")
            if slow:  # the wheel in 20 pieces over `slow` seconds
                import time, urllib.parse
                data = open(os.path.join(root, urllib.parse.unquote(self.path).lstrip("/")), "rb").read()
                self.send_response(200)
                self.send_header("Content-Type", "application/octet-stream")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                step = max(1, len(data) // 20)
                for i in range(0, len(data), step):
                    self.wfile.write(data[i : i + step])
                    self.wfile.flush()
                    time.sleep(slow / 20)
                return
        super().do_GET()

server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
with open(port_file + ".tmp", "w") as fh:
    fh.write(str(server.server_address[1]))
os.replace(port_file + ".tmp", port_file)
server.serve_forever()
"""


@contextlib.contextmanager
def serve(directory: Path, *, wheels_once: bool = False, slow: float = 0.0) -> Iterator[str]:
    """``directory`` over HTTP on 127.0.0.1 (a real server, its own process, stopped by pid);
    yields the base URL. ``wheels_once``: each wheel is served once, then 404 (as if the index
    dropped it between the resolution and the download); ``slow``: each wheel takes that many
    seconds to send. Each wheel request's path is appended to :func:`served_wheels`' file."""
    port_file = directory.parent / f".{directory.name}.port"
    argv = [str(directory), str(port_file), str(int(wheels_once)), str(slow)]
    proc = subprocess.Popen([sys.executable, "-c", _SERVE, *argv])
    try:
        deadline = time.monotonic() + 30
        while not port_file.exists():
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the index server did not start (exit {proc.poll()})")
            time.sleep(0.05)
        yield f"http://127.0.0.1:{port_file.read_text()}"
    finally:
        os.kill(proc.pid, signal.SIGTERM)
        proc.wait(timeout=10)
        port_file.unlink(missing_ok=True)


def served_wheels(directory: Path) -> list[str]:
    """The wheel paths :func:`serve` answered for ``directory`` (in order; kept after it stops)."""
    log = directory.parent / f".{directory.name}.port.wheels"
    return log.read_text().splitlines() if log.exists() else []
