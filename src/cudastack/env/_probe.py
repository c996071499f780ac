"""Print what cudastack needs to know about an interpreter, as JSON on stdout.

Run by the *target* interpreter as ``python -I -S _probe.py``: isolated mode, and ``site`` is not
run, so no ``.pth`` file executes and none of the environment's packages is imported. Standard
library only, and it must stay importable on every Python cudastack may inspect (3.8+).
"""

import json
import os
import platform
import sys
import sysconfig
from importlib.machinery import EXTENSION_SUFFIXES


def venv_prefix() -> "str | None":
    """The venv prefix as site.venv() finds it (pyvenv.cfg beside or above the executable).

    Under -S, site.venv() never runs (and it would execute .pth files), so sys.prefix is still
    the base installation's on CPython <= 3.13: find the venv the same way, without side effects.
    """
    exe_dir = os.path.dirname(os.path.abspath(sys.executable))
    site_prefix = os.path.dirname(exe_dir)
    for conf in (os.path.join(exe_dir, "pyvenv.cfg"), os.path.join(site_prefix, "pyvenv.cfg")):
        if os.path.isfile(conf):
            return site_prefix
    return None


def probe() -> dict:  # type: ignore[type-arg]
    import site  # importing site under -S defines its functions without running main()

    impl = sys.implementation
    version = "%d.%d.%d" % sys.version_info[:3]
    base_prefix = getattr(sys, "base_prefix", sys.prefix)
    prefix = venv_prefix() or sys.prefix
    try:
        site_dirs = list(site.getsitepackages([prefix]))
    except (AttributeError, TypeError):  # pragma: no cover - very old virtualenv's site.py
        site_dirs = []
    scheme = None
    if prefix != sys.prefix:
        # a venv seen from -S: use the venv scheme (3.11+), else posix_prefix. Debian's default
        # scheme (posix_local) would point at <venv>/local/lib/.../dist-packages.
        names = sysconfig.get_scheme_names()
        scheme = "venv" if "venv" in names else "posix_prefix"
    if scheme:
        paths = sysconfig.get_paths(scheme=scheme, vars={"base": prefix, "platbase": prefix})
    else:
        paths = sysconfig.get_paths(vars={"base": prefix, "platbase": prefix})
    for key in ("purelib", "platlib"):
        if paths.get(key) and paths[key] not in site_dirs:
            site_dirs.append(paths[key])
    site_dirs = [d for d in site_dirs if os.path.isdir(d)] or site_dirs[:1]
    # what a venv's include-system-site-packages adds: site.py runs getsitepackages over the base
    # prefix too (Debian's patched one answers /usr/local/lib/python3.X/dist-packages and
    # /usr/lib/python3/dist-packages, not <base>/lib/python3.X/site-packages)
    try:
        base_site_dirs = [d for d in site.getsitepackages([base_prefix]) if os.path.isdir(d)]
    except (AttributeError, TypeError):  # pragma: no cover - very old virtualenv's site.py
        base_site_dirs = []
    try:
        import _imp

        frozen = list(_imp._frozen_module_names())  # type: ignore[attr-defined]  # 3.11+, private
    except (ImportError, AttributeError):
        frozen = []
    try:
        libc = os.confstr("CS_GNU_LIBC_VERSION") or ""
    except (AttributeError, ValueError, OSError):
        libc = ""
    return {
        "executable": sys.executable,
        "version": version,
        "implementation": impl.name,
        "cache_tag": impl.cache_tag,
        "abiflags": getattr(sys, "abiflags", ""),
        "gil_disabled": bool(sysconfig.get_config_var("Py_GIL_DISABLED")),
        "prefix": prefix,
        "base_prefix": base_prefix,
        "exec_prefix": sys.exec_prefix,
        "stdlib": sysconfig.get_paths().get("stdlib"),
        "site_dirs": site_dirs,
        "base_site_dirs": base_site_dirs,
        # where an installer writes: what a guarded install backs up and a rollback restores
        "install_scheme": {k: paths[k] for k in ("purelib", "platlib", "scripts", "data", "include") if k in paths},
        "extension_suffixes": list(EXTENSION_SUFFIXES),
        # what `import x` finds without a file: compiled into the interpreter, or frozen in it
        "builtin_module_names": list(sys.builtin_module_names),
        "frozen_module_names": frozen,
        # the standard library as documented for this version (3.10+), whether installed or not
        "stdlib_module_names": sorted(getattr(sys, "stdlib_module_names", ())),
        "ldlibrary": sysconfig.get_config_var("LDLIBRARY"),
        "libdir": sysconfig.get_config_var("LIBDIR"),
        "enable_shared": bool(sysconfig.get_config_var("Py_ENABLE_SHARED")),
        "libc": libc,
        "markers": {
            "implementation_name": impl.name,
            "implementation_version": "%d.%d.%d" % impl.version[:3],
            "os_name": os.name,
            "platform_machine": platform.machine(),
            "platform_release": platform.release(),
            "platform_system": platform.system(),
            "platform_version": platform.version(),
            "python_full_version": platform.python_version(),
            "platform_python_implementation": platform.python_implementation(),
            "python_version": "%d.%d" % sys.version_info[:2],
            "sys_platform": sys.platform,
        },
    }


if __name__ == "__main__":
    json.dump(probe(), sys.stdout)
