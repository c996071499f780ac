"""LDD002 shadowing, ld.so.cache parsing, and the judged process environment (--env-file / -e)."""

from __future__ import annotations

import json
import struct
import sysconfig
from pathlib import Path

import pytest

from cudastack.cli import main
from cudastack.loader.ldcache import NEW_MAGIC, parse_ld_cache, read_ld_cache
from tests import oracles, scenario
from tests.native import build, real_dlopen
from tests.venvs import make_venv, site_of


def _cache(entries: list[tuple[str, str]]) -> bytes:
    strings = b""
    offs = []
    base = 48 + 24 * len(entries)
    for k, v in entries:
        ko = base + len(strings)
        strings += k.encode() + b"\0"
        vo = base + len(strings)
        strings += v.encode() + b"\0"
        offs.append((ko, vo))
    head = NEW_MAGIC + struct.pack("<IIB3xI12x", len(entries), len(strings), 2, 0)
    body = b"".join(struct.pack("<iIIIQ", 0x0303, k, v, 0, 0) for k, v in offs)
    return head + body + strings


def test_ld_cache_roundtrip_and_garbage() -> None:
    c = parse_ld_cache(_cache([("libz.so.1", "/lib/x86_64-linux-gnu/libz.so.1")]))
    assert c.problem is None and c.entries[("libz.so.1", 0x0300)] == "/lib/x86_64-linux-gnu/libz.so.1"
    for bad in (b"", b"garbage" * 10, _cache([("a", "b")])[:60], NEW_MAGIC + b"\xff" * 40):
        assert parse_ld_cache(bad).problem is not None
    corrupt = bytearray(_cache([("libz.so.1", "/x")]))
    corrupt[52:56] = struct.pack("<I", 10_000_000)  # key offset far outside the file
    assert parse_ld_cache(bytes(corrupt)).problem is not None


def test_host_ld_cache_agrees_with_ldconfig() -> None:
    import shutil
    import subprocess

    ldconfig = shutil.which("ldconfig") or "/sbin/ldconfig"
    try:
        out = subprocess.run([ldconfig, "-p"], capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        oracles.missing("ldconfig -p is not available")
    ours = read_ld_cache()
    if ours.problem:
        oracles.missing(f"no usable /etc/ld.so.cache: {ours.problem}")
    for line in out.splitlines()[1:]:
        if "x86-64" not in line or "=>" not in line or "hwcap" in line:
            continue
        name = line.split()[0]
        path = line.rsplit("=>", 1)[1].strip()
        first = ours.entries.get((name, 0x0300))
        assert first is not None, name
        # ldconfig -p lists every entry; the loader (and we) take the first one per name
        assert first == path or any(
            ln.split()[0] == name and ln.rsplit("=>", 1)[1].strip() == first
            for ln in out.splitlines()[1:]
            if "=>" in ln
        )


@pytest.fixture
def shadowed_env(tmp_path: Path) -> tuple[Path, Path, Path]:
    """A venv with a package whose library has DT_RUNPATH $ORIGIN (as NVIDIA's do) and a second
    copy of its dependency in another directory that LD_LIBRARY_PATH can name."""
    python = make_venv(tmp_path / "env")
    site = site_of(python)
    lib = site / "pkgx" / "lib"
    build(lib / "libdep.so", "int dep(void){return 1;}\n", flags=("-Wl,-soname,libdep.so",))
    other = tmp_path / "system"
    build(other / "libdep.so", "int dep(void){return 2;}\n", flags=("-Wl,-soname,libdep.so",))
    build(
        lib / "libmain.so",
        "int dep(void); int m(void){return dep();}\n",
        libs=(str(lib / "libdep.so"),),
        flags=("-Wl,--enable-new-dtags", "-Wl,-rpath,$ORIGIN"),
    )
    ext = build(
        site / "pkgx" / f"_ext{sysconfig.get_config_var('EXT_SUFFIX')}",
        "int m(void); int PyInit__ext(void){return m();}\n",
        libs=(str(lib / "libmain.so"),),
        flags=("-Wl,--enable-new-dtags", "-Wl,-rpath,$ORIGIN/lib"),
    )
    scenario.write_dist(
        site, {"name": "pkgx", "version": "1.0", "files": {"pkgx/__init__.py": "from pkgx import _ext\n"}}
    )
    record = next(site.glob("pkgx-1.0.dist-info")) / "RECORD"
    record.write_text(
        record.read_text() + "".join(f"{p.relative_to(site)},,\n" for p in (ext, lib / "libdep.so", lib / "libmain.so"))
    )
    return python, other, lib


def test_ld_library_path_shadowing_one_level_down(
    shadowed_env: tuple[Path, Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    python, other, lib = shadowed_env
    env_file = tmp_path / "serving.env"
    env_file.write_text(f"# the serving process\nexport LD_LIBRARY_PATH={other}\n")
    rc = main(
        ["doctor", "--python", str(python), "--env-file", str(env_file), "--format", "json", "--fail-on", "warning"]
    )
    data = json.loads(capsys.readouterr().out)
    f = [f for f in data["findings"] if f["code"] == "LDD002"]
    assert len(f) == 1 and f[0]["subject"] == "libdep.so"
    assert f[0]["path"] == str(other / "libdep.so") and str(lib / "libdep.so") in f[0]["message"]
    assert rc == 1
    # reality: with that LD_LIBRARY_PATH the loader really picks the other copy (dep() == 2)
    import subprocess

    code = f"import ctypes; ctypes.CDLL('{lib / 'libmain.so'}'); print(ctypes.CDLL('libdep.so').dep())"
    out = subprocess.run([str(python), "-c", code], capture_output=True, text=True, env={"LD_LIBRARY_PATH": str(other)})
    assert out.stdout.strip() == "2"
    assert real_dlopen([str(lib / "libmain.so")], {"LD_LIBRARY_PATH": str(other)})[0][1] is True
    # -e overrides the file: without LD_LIBRARY_PATH, no shadowing
    rc = main(
        [
            "doctor",
            "--python",
            str(python),
            "--env-file",
            str(env_file),
            "-e",
            "LD_LIBRARY_PATH=",
            "--format",
            "json",
            "--fail-on",
            "warning",
        ]
    )
    data = json.loads(capsys.readouterr().out)
    assert rc == 0 and not [f for f in data["findings"] if f["code"] == "LDD002"]


def test_bad_env_file_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "x.env"
    bad.write_text("LD_LIBRARY_PATH\n")
    assert main(["doctor", "--env-file", str(bad)]) == 2
    assert "expected KEY=VALUE" in capsys.readouterr().err
    assert main(["doctor", "--env-file", str(tmp_path / "missing.env")]) == 2


def _venv_with(tmp_path: Path, files: dict[str, str], dists: list[dict]) -> Path:  # type: ignore[type-arg]
    python = make_venv(tmp_path / "env")
    site = site_of(python)
    for spec in dists:
        spec = dict(spec)
        libs = spec.pop("so", {})
        meta = scenario.write_dist(site, spec)
        rows = []
        for rel, (src, soname, needs) in libs.items():
            flags = (f"-Wl,-soname,{soname}",) if soname else ()
            build(
                site / rel,
                src,
                flags=(*flags, "-Wl,--enable-new-dtags", "-Wl,-rpath,$ORIGIN"),
                libs=tuple(str(site / n) for n in needs),
            )
            rows.append(f"{rel},,\n")
        (meta / "RECORD").write_text((meta / "RECORD").read_text() + "".join(rows))
    for rel, text in files.items():
        (site / rel).parent.mkdir(parents=True, exist_ok=True)
        (site / rel).write_text(text)
    return python


def test_nvrtc_builtins_of_the_release_must_sit_beside_libnvrtc(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    nvrtc = {"nvidia/cu13/lib/libnvrtc.so.13": ("int nvrtcVersion(void){return 0;}\n", "libnvrtc.so.13", ())}
    python = _venv_with(tmp_path, {}, [{"name": "nvidia-cuda-nvrtc", "version": "13.0.88", "so": nvrtc}])
    site = site_of(python)
    rc = main(["doctor", "--python", str(python), "--format", "json", "--select", "LDD004"])
    data = json.loads(capsys.readouterr().out)
    assert (rc, [f["subject"] for f in data["findings"]]) == (1, ["libnvrtc-builtins.so.13.0"])
    (site / "nvidia" / "cu13" / "lib" / "libnvrtc-builtins.so.13.0").write_bytes(b"")
    assert main(["doctor", "--python", str(python), "--format", "json", "--select", "LDD004"]) == 0
    capsys.readouterr()


def test_two_cuda_runtime_majors_in_one_import(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    libs = {
        "kern/libcudart.so.12": ("int rt12(void){return 12;}\n", "libcudart.so.12", ()),
        "kern/libcudart.so.13": ("int rt13(void){return 13;}\n", "libcudart.so.13", ()),
        f"kern/_ops{sysconfig.get_config_var('EXT_SUFFIX')}": (
            "int rt12(void); int rt13(void); int PyInit__ops(void){return rt12()+rt13();}\n",
            None,
            ("kern/libcudart.so.12", "kern/libcudart.so.13"),
        ),
    }
    python = _venv_with(
        tmp_path, {"kern/__init__.py": "from kern import _ops\n"}, [{"name": "kern", "version": "1.0", "so": libs}]
    )
    rc = main(["doctor", "--python", str(python), "--format", "json", "--select", "LDD003", "--fail-on", "warning"])
    data = json.loads(capsys.readouterr().out)
    assert rc == 1
    assert [f["subject"] for f in data["findings"]] == ["libcudart"]
    assert "majors 12, 13" in data["findings"][0]["message"]
