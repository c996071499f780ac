"""Why does the import model say ``import DIST`` reaches a module? Prints the distribution's version,
the files the walk runs in order (first N), and every module ``__getattr__`` the walk asks, with
how many files had run by then — the usual source of an over-reach (scipy's ``__getattr__``).

    PYTHONPATH=src python tools/reach_trace.py SITE_PACKAGES DIST [--first N]
"""

from __future__ import annotations

import argparse
import glob
import os

from cudastack.env import imports as model
from cudastack.env.dists import read_distribution


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("site")
    ap.add_argument("dist")
    ap.add_argument("--first", type=int, default=25)
    a = ap.parse_args()
    (meta,) = [
        p
        for p in glob.glob(os.path.join(a.site, "*.dist-info"))
        if os.path.basename(p).lower().startswith(a.dist.lower().replace("-", "_") + "-")
    ]
    dist = read_distribution(a.site, os.path.basename(meta))
    print(dist.name, dist.version)
    asked: list[tuple[str, str, int]] = []
    original = model.ImportTime._module_getattr

    def traced(self: model.ImportTime, module: str, name: str) -> None:
        asked.append((module, name, len(self.order)))
        original(self, module, name)

    model.ImportTime._module_getattr = traced  # type: ignore[method-assign]
    run = model.ImportTime(dist)
    while run.advance():
        pass
    print(f"{len(run.order)} files run")
    for p in run.order[: a.first]:
        print("  ", os.path.relpath(p, a.site))
    for module, name, at in asked[:40]:
        print(f"  __getattr__ {module}.{name} after {at} files")


if __name__ == "__main__":
    main()
