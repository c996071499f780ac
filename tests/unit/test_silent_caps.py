"""Bounded reads are never silent cuts: a ``.pth`` file, a version file and ``/etc/ld.so.cache``
longer than cudastack reads say so, naming the file and the limit (issue 13). Real files; the
ld.so.cache is this machine's, grown sparse past the limit."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

from tests import oracles

MiB = 1 << 20


def test_a_pth_file_past_the_limit_is_said_and_its_cut_line_dropped(tmp_path: Path) -> None:
    """The line the cut splits (``cc`` cut to ``c``, which exists) is not taken as a path, and
    the lines past it are said not to be modelled."""
    from cudastack.env.pth import read_pth_files

    for d in ("a", "b", "c", "cc"):
        (tmp_path / d).mkdir()
    head = b"a\n" + b"#" * (MiB - 4) + b"\n"
    assert len(head) == MiB - 1
    pth = tmp_path / "big.pth"
    pth.write_bytes(head + b"cc\nb\n")  # "cc" straddles the cut: its first byte is the last one read
    res = read_pth_files(str(tmp_path))
    assert res.paths == (str(tmp_path / "a"),), res.paths
    ((path, why),) = res.unreadable
    assert path == str(pth) and f"cudastack reads at most {MiB} bytes" in why and "not modelled" in why


def test_a_version_file_past_the_limit_is_not_half_read(tmp_path: Path) -> None:
    """``cuda`` past the cut would be missed while ``__version__`` before it was read: the file
    is not parsed, and the problem names it and the limit."""
    from cudastack.env.versionfiles import read_version_files

    (tmp_path / "torch").mkdir()
    vf = tmp_path / "torch" / "version.py"
    vf.write_bytes(b"__version__ = '2.14.1+cu130'\n" + b"# pad\n" * (MiB // 6 + 1) + b"cuda = '13.0'\n")
    got = read_version_files([str(tmp_path)])["torch/version.py"]
    assert got.values == {} and got.problem is not None
    assert str(vf) in got.problem and f"at most {MiB} bytes" in got.problem


def test_an_ld_so_cache_past_the_limit_is_said_where_a_search_misses_it(tmp_path: Path) -> None:
    from cudastack.elf import read_elf
    from cudastack.elf.cache import ElfCache
    from cudastack.loader.search import Loaded, Searcher
    from cudastack.loader.system import detect_loader

    if not os.path.isfile("/etc/ld.so.cache"):
        oracles.missing("no /etc/ld.so.cache on this machine")
    cache = tmp_path / "ld.so.cache"
    shutil.copyfile("/etc/ld.so.cache", cache)
    with open(cache, "r+b") as fh:
        fh.truncate(64 * MiB + 1)  # sparse: costs no disk
    env = {"CUDASTACK_LD_SO_CACHE": str(cache)}
    config = detect_loader(env)
    assert config.cache.entries and config.cache.cut and str(cache) in config.cache.cut
    exe = os.path.realpath(sys.executable)
    searcher = Searcher(config, {}, ElfCache(), None)
    res = searcher.search("libcudastack-nowhere.so.9", Loaded(exe, read_elf(exe), "dlopen"))
    assert res.path is None
    said = [t for t in res.tried if "ld.so.cache" in t]
    assert said and f"cudastack reads at most {64 * MiB} bytes" in said[0] and str(cache) in said[0], res.tried
    libc = searcher.search("libc.so.6", Loaded(exe, read_elf(exe), "dlopen"))
    assert libc.path is not None and not any("cut off" in t for t in libc.tried)  # a hit is not affected


def test_the_doctor_says_a_pth_file_was_cut(tmp_path: Path) -> None:
    """End to end: the cut reaches the report as an ENV005 finding naming the file and the limit."""
    import json
    import subprocess

    from tests.venvs import make_venv, site_of

    python = make_venv(tmp_path / "env")
    pth = site_of(python) / "big.pth"
    pth.write_bytes(b"#" * MiB + b"\n")
    r = subprocess.run([sys.executable, "-m", "cudastack", "doctor", "--python", str(python), "--format", "json"],
                       capture_output=True, text=True, timeout=300)  # fmt: skip
    found = [f for f in json.loads(r.stdout)["findings"] if f["code"] == "ENV005" and f["path"] == str(pth)]
    assert found and f"cudastack reads at most {MiB} bytes" in found[0]["message"], r.stdout[-2000:]


def test_the_doctor_says_where_a_version_file_and_a_python_file_were_cut(tmp_path: Path) -> None:
    """End to end (ENV007): a ``torch/version.py`` past its 1 MiB bound and a Python module past the
    import model's 4 MiB bound, both in a real venv, are each named with the byte of the cut; a
    module under the bound is not. The sizes are the oracle: ``stat`` of the files written."""
    import base64
    import hashlib
    import json
    import subprocess

    from tests.venvs import make_venv, site_of

    python = make_venv(tmp_path / "env")
    site = site_of(python)
    files = {
        "torch/__init__.py": b"from torch.version import __version__\n",
        "torch/version.py": b"__version__ = '2.14.1+cu130'\n" + b"# pad\n" * (MiB // 6 + 1) + b"cuda = '13.0'\n",
        "torch/_big.py": b"import os\n" + b"# generated\n" * (4 * MiB // 12 + 1) + b"import torch._late\n",
        "torch/small.py": b"x = 1\n",
    }
    record = []
    for rel, data in files.items():
        (site / rel).parent.mkdir(parents=True, exist_ok=True)
        (site / rel).write_bytes(data)
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append(f"{rel},sha256={digest},{len(data)}")
    meta = site / "torch-2.14.1.dist-info"
    meta.mkdir()
    (meta / "METADATA").write_text("Metadata-Version: 2.1\nName: torch\nVersion: 2.14.1\n")
    record.append("torch-2.14.1.dist-info/METADATA,,\ntorch-2.14.1.dist-info/RECORD,,")
    (meta / "RECORD").write_text("\n".join(record) + "\n")
    big, version = site / "torch" / "_big.py", site / "torch" / "version.py"
    assert big.stat().st_size > 4 * MiB and version.stat().st_size > MiB
    r = subprocess.run([sys.executable, "-m", "cudastack", "doctor", "--python", str(python), "--format", "json",
                        "--select", "ENV007"], capture_output=True, text=True, timeout=300)  # fmt: skip
    found = {f["path"]: f for f in json.loads(r.stdout)["findings"] if f["code"] == "ENV007"}
    assert set(found) == {str(version), str(big)}, r.stdout[-3000:]
    assert f"cut off at byte {MiB} of {version.stat().st_size}" in found[str(version)]["message"]
    assert found[str(big)]["evidence"] == [
        f"{big}: cut off at byte {4 * MiB} of {big.stat().st_size} (cudastack reads at most {4 * MiB} bytes "
        "of a Python file)"
    ]
