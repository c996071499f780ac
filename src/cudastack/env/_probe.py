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


def probe() -> dict:  # type: ignore[type-arg]
    import site  # importing site under -S defines its functions without running main()

    impl = sys.implementation
    version = "%d.%d.%d" % sys.version_info[:3]
    try:
        site_dirs = list(site.getsitepackages())
    except AttributeError:  # pragma: no cover - very old virtualenv's site.py
        site_dirs = []
    paths = sysconfig.get_paths()
    for key in ("purelib", "platlib"):
        if paths.get(key) and paths[key] not in site_dirs:
            site_dirs.append(paths[key])
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
        "prefix": sys.prefix,
        "base_prefix": getattr(sys, "base_prefix", sys.prefix),
        "exec_prefix": sys.exec_prefix,
        "stdlib": paths.get("stdlib"),
        "site_dirs": site_dirs,
        "extension_suffixes": list(EXTENSION_SUFFIXES),
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
