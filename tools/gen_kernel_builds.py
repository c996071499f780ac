"""Write src/cudastack/data/kernel_builds.json: what kernel wheels' metadata does not say.

For each kernel wheel (``--kernel``): the CUDA majors its extension modules link, whether they
link torch's CUDA libraries, and how many of the torch C++ symbols they need each torch wheel
given (``--torch``) does not export. The torch minor whose wheel exports them all is the torch the
build is for. Everything is read from the wheels' ELF files, extracted through plan's wheel cache
(``$CUDASTACK_STATE_DIR/plan``, so a second run reads nothing twice).

    python tools/gen_kernel_builds.py --kernel sgl_kernel-0.3.21-cp310-abi3-manylinux2014_x86_64.whl \\
        --torch torch-2.9.1-cp311-cp311-manylinux_2_28_x86_64.whl \\
        --torch torch-2.14.1-cp311-cp311-manylinux_2_28_x86_64.whl

``--check`` compares with the shipped file instead of writing it (exit 1 when they differ).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from cudastack.elf.reader import read_elf
from cudastack.loader.builds import CUDA_LIB, TORCH_CUDA_LIB, TORCH_SYMBOL
from cudastack.plan.fetch import WheelCache
from cudastack.plan.resolve import Planned

OUT = Path(__file__).resolve().parents[1] / "src" / "cudastack" / "data" / "kernel_builds.json"


def _extracted(cache: WheelCache, wheel: Path) -> tuple[str, str, str, Path]:
    """(name, version, sha256, extraction root) of a wheel file."""
    name, version = wheel.name.split("-")[:2]
    fetched = cache.fetch(Planned(name=name, version=version, url=wheel.resolve().as_uri(), sha256=None), pip=[])
    return name.replace("_", "-"), version, fetched.sha256, cache.extract(fetched).root


def _elf_files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*.so*") if p.is_file() and not p.is_symlink())


def torch_exports(root: Path) -> set[str]:
    names: set[str] = set()
    for p in _elf_files(root / "torch" / "lib"):
        names.update(read_elf(str(p)).exports)
    return names


def kernel_build(root: Path) -> tuple[list[int], bool, set[str]]:
    """CUDA majors, links torch's CUDA libraries, torch symbols needed, over the modules that link torch."""
    majors: set[int] = set()
    cuda_torch = False
    wanted: set[str] = set()
    for p in _elf_files(root):
        elf = read_elf(str(p))
        if not any(n.startswith(("libtorch", "libc10")) for n in elf.needed):
            continue
        for n in elf.needed:
            if m := CUDA_LIB.match(n):
                majors.add(int(m.group(2)))
            cuda_torch |= n in TORCH_CUDA_LIB
        wanted.update(s for s in elf.strong_plain if TORCH_SYMBOL.match(s))
        wanted.update(s for s, _need in elf.strong_versioned if TORCH_SYMBOL.match(s))
    return sorted(majors), cuda_torch, wanted


def generate(kernels: list[Path], torches: list[Path], cache: WheelCache) -> dict[str, Any]:
    exports: dict[str, set[str]] = {}
    for w in torches:
        _name, version, _sha, root = _extracted(cache, w)
        exports[version] = torch_exports(root)
    builds = []
    for w in kernels:
        name, version, sha, root = _extracted(cache, w)
        majors, cuda_torch, wanted = kernel_build(root)
        missing = {v: len(wanted - ex) for v, ex in sorted(exports.items())}
        fits = {".".join(v.split("+")[0].split(".")[:2]) for v, n in missing.items() if n == 0}
        builds.append({
            "name": name, "version": version, "wheel": w.name, "sha256": sha, "cuda_majors": majors,
            "needs_cuda_torch": cuda_torch, "torch": fits.pop() if len(fits) == 1 else None,
            "torch_symbols": len(wanted), "missing_by_torch": missing,
        })  # fmt: skip
    command = "python tools/gen_kernel_builds.py " + " ".join(
        [*(f"--kernel {w.name}" for w in kernels), *(f"--torch {w.name}" for w in torches)]
    )
    return {
        "source": "generated from the wheels' ELF files (DT_NEEDED, undefined and exported dynamic symbols); "
        "never edit by hand",
        "regenerate": command,
        "builds": builds,
    }


def render(data: dict[str, Any]) -> str:
    return json.dumps(data, indent=1) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kernel", type=Path, action="append", required=True)
    ap.add_argument("--torch", type=Path, action="append", required=True)
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--check", action="store_true", help="compare with --out instead of writing it")
    args = ap.parse_args(argv)
    cache = WheelCache(progress=lambda m: print(m, file=sys.stderr))
    text = render(generate(args.kernel, args.torch, cache))
    if args.check:
        same = args.out.read_text(encoding="utf-8") == text
        print(f"{args.out}: {'up to date' if same else 'differs'}", file=sys.stderr)
        return 0 if same else 1
    args.out.write_text(text, encoding="utf-8")
    print(f"wrote {os.path.relpath(args.out)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
