"""What ``import torch`` does before ``torch._C``, read from the installed ``torch/__init__.py``.

Torch's start-up differs between releases, and it decides which copy of a CUDA library wins:

- every release loads ``torch/lib/libtorch_global_deps.so`` RTLD_GLOBAL (``_load_global_deps``);
- when that fails with an OSError naming a CUDA library, it preloads the nvidia wheels' libraries
  (``_preload_cuda_deps(err)``, each required) and tries again;
- torch 2.14 also preloads them when it succeeds, best-effort (``required=False``), but only if
  ``libcudart.so`` is then mapped (it reads ``/proc/self/maps``) — so a wheel's libnvJitLink wins
  over a stub on ``LD_LIBRARY_PATH`` for libcusparse, where older releases let the stub win.

The list of libraries (folder and glob, in order) and the directory layouts searched
(``nvidia/<folder>/lib``, ``nvidia/cu<major>/lib`` since CUDA 13, ``<folder>/lib``) are read from
the same file with ``ast``; nothing of torch is imported.
"""

from __future__ import annotations

import ast
import os
from dataclasses import dataclass, field

from cudastack.files import open_file

# torch 2.5-2.13's list, for a torch/__init__.py that cannot be read (never guessed silently:
# TorchStart.source says so)
_DEFAULT_LIBS = (
    ("cublas", "libcublas.so.*[0-9]"),
    ("cudnn", "libcudnn.so.*[0-9]"),
    ("cuda_nvrtc", "libnvrtc.so.*[0-9]"),
    ("cuda_runtime", "libcudart.so.*[0-9]"),
    ("cuda_cupti", "libcupti.so.*[0-9]"),
    ("cufft", "libcufft.so.*[0-9]"),
    ("curand", "libcurand.so.*[0-9]"),
    ("nvjitlink", "libnvJitLink.so.*[0-9]"),
    ("cusparse", "libcusparse.so.*[0-9]"),
    ("cusparselt", "libcusparseLt.so.*[0-9]"),
    ("cusolver", "libcusolver.so.*[0-9]"),
    ("nccl", "libnccl.so.*[0-9]"),
    ("nvshmem", "libnvshmem_host.so.*[0-9]"),
    ("cufile", "libcufile.so.*[0-9]"),
)


@dataclass(frozen=True, slots=True, kw_only=True)
class TorchStart:
    """torch's start-up sequence, as its ``__init__.py`` spells it."""

    source: str
    """The file read, or why the defaults are used."""
    libs: tuple[tuple[str, str], ...] = field(default=_DEFAULT_LIBS)
    """(folder, file glob) that ``_preload_cuda_deps`` loads, in order (then the optional ones)."""
    optional: frozenset[str] = frozenset({"nvtx"})
    """Folders preloaded with an explicit ``required=False`` (libnvToolsExt)."""
    eager_preload: bool = False
    """After libtorch_global_deps loads: preload the libraries when ``libcudart.so`` is mapped
    (torch 2.13 and 2.14 read ``/proc/self/maps``)."""
    eager_required: bool = True
    """Each eager preload is required (torch 2.13: the first library not present stops the rest,
    silently) or best-effort (torch 2.14's ``required=False``: absent ones are passed over). Either
    way a library that fails to load stops the rest (the ``try`` around it swallows the error)."""
    fallback_preload: bool = True
    """When libtorch_global_deps fails: preload them (each required), then load it again."""
    major_layout: bool = False
    """Also look in ``nvidia/cu<major>/lib`` (the CUDA 13 wheels' layout)."""

    def candidates(self, site_dir: str, folder: str, pattern: str, cuda_major: int | None) -> list[str]:
        """The files ``_get_cuda_dep_paths`` would glob for one library in one ``sys.path`` entry,
        in its order (sorted within each directory: glob's own order is the file system's)."""
        import glob

        dirs = [os.path.join(site_dir, "nvidia", folder, "lib")]
        if self.major_layout and cuda_major is not None:
            dirs.append(os.path.join(site_dir, "nvidia", f"cu{cuda_major}", "lib"))
        dirs.append(os.path.join(site_dir, folder, "lib"))
        return [hit for d in dirs for hit in sorted(glob.glob(os.path.join(glob.escape(d), pattern)))]


def read_torch_start(torch_dir: str) -> TorchStart:
    """Read ``torch_dir/__init__.py`` (bounded, never executed)."""
    path = os.path.join(torch_dir, "__init__.py")
    try:
        with open_file(path) as fh:
            tree = ast.parse(fh.read(8 << 20))
    except (OSError, SyntaxError, ValueError) as e:
        return TorchStart(source=f"defaults: {path} could not be read ({e.__class__.__name__})")
    funcs = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
    preload, global_deps, paths = (
        funcs.get("_preload_cuda_deps"),
        funcs.get("_load_global_deps"),
        funcs.get("_get_cuda_dep_paths"),
    )
    if preload is None or global_deps is None:
        return TorchStart(source=f"{path} (no _preload_cuda_deps: no preloads)", fallback_preload=False)
    libs, optional = _libs(preload)
    eager = fallback = False
    required = True
    maps = _mentions(global_deps, "/proc/self/maps")
    for node in ast.walk(global_deps):
        if isinstance(node, ast.Try):
            body_calls = [c for b in node.body for c in ast.walk(b) if _calls(c, "_preload_cuda_deps")]
            if body_calls and maps:
                eager = True
                required = not any(_keyword_false(c, "required") for c in body_calls)
            for h in node.handlers:
                if any(_calls(c, "_preload_cuda_deps") for b in h.body for c in ast.walk(b)):
                    fallback = True
    major = paths is not None and any(
        isinstance(n, ast.JoinedStr) and any(isinstance(v, ast.Constant) and v.value == "cu" for v in n.values)
        for n in ast.walk(paths)
    )
    return TorchStart(
        source=path,
        libs=libs or _DEFAULT_LIBS,
        optional=optional if libs else frozenset({"nvtx"}),
        eager_preload=eager,
        eager_required=required,
        fallback_preload=fallback,
        major_layout=major,
    )


def _libs(func: ast.FunctionDef) -> tuple[tuple[tuple[str, str], ...], frozenset[str]]:
    """``cuda_libs`` (a list of (folder, glob) tuples, or an older dict), then the
    ``_preload_cuda_lib("nvtx", …, required=False)`` calls, in order; and those optional folders."""
    out: list[tuple[str, str]] = []
    optional: set[str] = set()
    for node in ast.walk(func):
        value = node.value if isinstance(node, ast.Assign | ast.AnnAssign) else None
        if isinstance(value, ast.List):
            for elt in value.elts:
                pair = _const_pair(elt.elts if isinstance(elt, ast.Tuple) else [])
                if pair:
                    out.append(pair)
        elif isinstance(value, ast.Dict):
            for k, v in zip(value.keys, value.values, strict=True):
                pair = _const_pair([k, v] if k is not None else [])
                if pair:
                    out.append(pair)
    for node in ast.walk(func):
        if _calls(node, "_preload_cuda_lib") and isinstance(node, ast.Call):
            pair = _const_pair(node.args[:2])
            if pair and pair not in out:
                out.append(pair)
                if _keyword_false(node, "required"):
                    optional.add(pair[0])
    return tuple(out), frozenset(optional)


def _const_pair(nodes: list[ast.expr] | list[ast.expr | None]) -> tuple[str, str] | None:
    if len(nodes) == 2 and all(isinstance(n, ast.Constant) and isinstance(n.value, str) for n in nodes):
        a, b = nodes
        assert isinstance(a, ast.Constant) and isinstance(b, ast.Constant)
        return str(a.value), str(b.value)
    return None


def _calls(node: ast.AST, name: str) -> bool:
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == name


def _keyword_false(call: ast.AST, keyword: str) -> bool:
    return isinstance(call, ast.Call) and any(
        k.arg == keyword and isinstance(k.value, ast.Constant) and k.value.value is False for k in call.keywords
    )


def _mentions(node: ast.AST, text: str) -> bool:
    return any(isinstance(n, ast.Constant) and n.value == text for n in ast.walk(node))
