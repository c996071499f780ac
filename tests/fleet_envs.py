"""Small real venvs for the fleet tests: the same stack on most nodes, one node drifted (its
kernel package another build variant whose native module needs a library nothing ships, its
helper downgraded)."""

from __future__ import annotations

from pathlib import Path

from tests.native import build
from tests.venvs import make_venv
from tests.wheels import make_wheel, pip_install


def make_fleet_venvs(root: Path, good: int = 2) -> tuple[list[Path], Path]:
    """``good`` identical venvs and one drifted one; returns their prefixes."""
    so_a = build(root / "src" / "a" / "_k.so", "int k(void){return 1;}\n").read_bytes()
    gone = build(root / "src" / "gone" / "libgone.so", "int gone(void){return 0;}\n")
    so_b = build(
        root / "src" / "b" / "_k.so",
        "int gone(void);\nint k(void){return gone();}\n",
        libs=(f"-L{gone.parent}", "-lgone"),
    ).read_bytes()
    links = root / "wheels"
    make_wheel(
        links, "kernpkg", "1.0+cu130", {"kernpkg/__init__.py": b"from kernpkg import _k\n", "kernpkg/_k.so": so_a}
    )
    make_wheel(
        links, "kernpkg", "1.0+cu128", {"kernpkg/__init__.py": b"from kernpkg import _k\n", "kernpkg/_k.so": so_b}
    )
    make_wheel(links, "helper", "2.0", {"helper/__init__.py": b"v2"})
    make_wheel(links, "helper", "1.5", {"helper/__init__.py": b"v15"})
    goods = []
    for i in range(good):
        prefix = root / f"good{i}"
        pip_install(make_venv(prefix), links, "kernpkg==1.0+cu130", "helper==2.0")
        goods.append(prefix)
    bad = root / "drifted"
    pip_install(make_venv(bad), links, "kernpkg==1.0+cu128", "helper==1.5")
    return goods, bad
