"""ENV: discovering the target — its site directories, metadata files and what could not be read."""

from __future__ import annotations

import os
from collections.abc import Iterator

from packaging.requirements import InvalidRequirement, Requirement

from cudastack.checks.registry import Context, SkipCheck, rule
from cudastack.data.families import KNOWN_PTH
from cudastack.env.imports import _MAX_PY_BYTES as IMPORT_SCAN_LIMIT  # the import model's read bound
from cudastack.env.requirements import parse_requirement
from cudastack.files import check_regular
from cudastack.findings import Finding, Fix, Severity


@rule(
    code="ENV001",
    name="empty-target",
    severity=Severity.ERROR,
    summary="No installed distribution was found in the target",
)
def empty_target(ctx: Context) -> Iterator[Finding]:
    """## What it checks
    That the target's site directories exist and hold at least one distribution.

    ## Why is this bad?
    An empty target usually means the wrong interpreter or directory was named (a base Python
    instead of the serving venv), so every other check would pass vacuously.

    ## Example
    `no distributions found in /srv/venv/lib/python3.12/site-packages`

    ## Fix
    Point cudastack at the environment the server runs in: `--python /srv/venv/bin/python`.

    ## References
    - https://docs.astral.sh/uv/pip/environments/
    """
    if ctx.inventory.dists:
        return
    missing = [d for d in ctx.target.site_dirs if not os.path.isdir(d)]
    yield Finding(
        code="ENV001",
        severity=Severity.ERROR,
        message="no distributions found in " + ", ".join(ctx.target.site_dirs or ("(no site directory)",)),
        subject="target",
        evidence=(f"target chosen by {ctx.target.origin}",) + tuple(f"{d} does not exist" for d in missing),
        fix=Fix(
            summary="Name the environment the server runs in",
            commands=("cudastack doctor --python /path/to/venv/bin/python",),
        ),
    )


@rule(
    code="ENV002",
    name="unreadable-metadata",
    severity=Severity.WARNING,
    summary="A distribution's metadata is missing, malformed or not UTF-8",
)
def unreadable_metadata(ctx: Context) -> Iterator[Finding]:
    """## What it checks
    Every `.dist-info`/`.egg-info`: METADATA present and readable, UTF-8, well-formed headers with
    Name and Version, a PEP 440 version, parseable Requires-Dist lines and `direct_url.json`.

    ## Why is this bad?
    Installers and `importlib.metadata` skip or crash on such a distribution: pip cannot
    uninstall or upgrade it cleanly, and checks that need its metadata cannot judge it.

    ## Example
    `METADATA of torch-2.9.1.dist-info is not UTF-8 (byte 0xff at offset 12)`

    ## Fix
    Reinstall the distribution with `--force-reinstall --no-deps`.

    ## References
    - https://packaging.python.org/en/latest/specifications/core-metadata/
    """
    for dist in sorted([*ctx.inventory.dists.values(), *ctx.inventory.shadowed], key=lambda d: d.meta_dir):
        details = [f"{p.kind}: {p.detail} ({p.path})" for p in dist.problems if p.kind not in ("record-missing",)]
        for line in dist.requires:
            if parse_requirement(line) is None:
                try:
                    Requirement(line)
                except InvalidRequirement as exc:
                    details.append(f"invalid Requires-Dist {line!r}: {exc}")
        if not details:
            continue
        yield Finding(
            code="ENV002",
            severity=Severity.WARNING,
            message=f"metadata of {os.path.basename(dist.meta_dir)} is damaged: {details[0].split(' (')[0]}",
            subject=dist.key,
            distribution=dist.key,
            path=dist.meta_dir,
            evidence=tuple(details),
            fix=ctx.reinstall_fix(dist),
        )


@rule(
    code="ENV003",
    name="record-missing",
    severity=Severity.WARNING,
    summary="A distribution has no RECORD, so its files are unknown",
)
def record_missing(ctx: Context) -> Iterator[Finding]:
    """## What it checks
    Every `.dist-info` has a RECORD file. Legacy `.egg-info` directories are not judged: a
    `setup.py develop` checkout never has `installed-files.txt`, and pip removes it through its
    `.egg-link`/`.pth` instead.

    ## Why is this bad?
    Without it, pip refuses to uninstall (`Cannot uninstall X, RECORD file not found`), file
    ownership cannot be checked, and native files cannot be attributed to the distribution.

    ## Example
    `flash-attn 2.8.3 has no RECORD`

    ## Fix
    Reinstall it with `--force-reinstall --no-deps` (remove the dist-info first if pip refuses).

    ## References
    - https://packaging.python.org/en/latest/specifications/recording-installed-packages/
    """
    for dist in sorted(ctx.inventory.dists.values(), key=lambda d: d.key):
        if dist.record is not None or dist.format != "dist-info":
            continue
        if any(p.kind in ("metadata-missing", "unreadable") and p.path.endswith("METADATA") for p in dist.problems):
            continue
        yield Finding(
            code="ENV003",
            severity=Severity.WARNING,
            message=f"{dist.name} {dist.version} has no RECORD: its files are unknown and pip cannot uninstall it",
            subject=dist.key,
            distribution=dist.key,
            path=dist.meta_dir,
            evidence=tuple(f"{p.path}: {p.detail}" for p in dist.problems if p.kind == "record-missing"),
            fix=ctx.reinstall_fix(dist),
        )


@rule(
    code="ENV004",
    name="native-file-missing",
    severity=Severity.ERROR,
    summary="A native file listed in RECORD is missing, a broken symlink or unreadable",
)
def native_file_missing(ctx: Context) -> Iterator[Finding]:
    """## What it checks
    Every shared object, cubin and fatbin a distribution's RECORD lists: it exists, is not a
    dangling symlink or a symlink loop, is a regular file (not a FIFO, socket or device, which
    cudastack never reads from) and can be read.

    ## Why is this bad?
    The import of the module that needs it fails (`cannot open shared object file`), or the
    kernel is silently missing. Interrupted installs and hand-made symlink farms leave these.

    ## Example
    `torch/lib/libtorch_cuda.so is a symlink to a missing file`

    ## Fix
    Reinstall the distribution with `--force-reinstall --no-deps`.

    ## References
    - https://github.com/pytorch/pytorch/issues/80637
    """
    for dist in sorted(ctx.inventory.dists.values(), key=lambda d: d.key):
        bad: list[str] = []
        for path in dist.native_files():
            why = _file_problem(path)
            if why:
                bad.append(f"{path}: {why}")
        if not bad:
            continue
        yield Finding(
            code="ENV004",
            severity=Severity.ERROR,
            message=f"{len(bad)} native file(s) of {dist.name} {dist.version} cannot be read: "
            f"{bad[0].rsplit('/', 1)[-1]}",
            subject=dist.key,
            distribution=dist.key,
            path=bad[0].split(": ", 1)[0],
            evidence=tuple(bad[:20]),
            fix=ctx.reinstall_fix(dist),
        )


def _file_problem(path: str) -> str | None:
    # opened as the readers open it: a FIFO, socket or device where a library belongs is a finding
    return check_regular(path)


@rule(
    code="ENV005",
    name="pth-code-not-run",
    severity=Severity.INFO,
    summary="A .pth file runs code at start-up that cudastack did not evaluate",
)
def pth_code(ctx: Context) -> Iterator[Finding]:
    """## What it checks
    Lines of `.pth` files that Python executes at start-up (`import ...`), other than the known
    harmless ones (setuptools' `distutils-precedence.pth`, virtualenv's `_virtualenv.pth`) and
    setuptools' editable finders (whose mapping cudastack reads statically).

    ## Why is this bad?
    Such code can change `sys.path`, environment variables or preload libraries before any
    import; cudastack never runs it, so its predictions assume it does nothing.

    ## Example
    `sitecustom.pth runs "import _preload_cuda; _preload_cuda.run()"`

    ## Fix
    Nothing, if you know what it does; otherwise inspect the named file.

    ## References
    - https://docs.python.org/3/library/site.html
    """
    for res in ctx.target.pth:
        for path, line in res.imports:
            name = os.path.basename(path)
            if name in KNOWN_PTH or (name.startswith("__editable__") and "_finder" in line):
                continue
            yield Finding(
                code="ENV005",
                severity=Severity.INFO,
                message=f"{name} runs code at start-up that was not evaluated: {line[:80]}",
                subject=name,
                path=path,
                evidence=(f"{path}: {line}",),
            )
        for path, why in res.unreadable:
            yield Finding(
                code="ENV005",
                severity=Severity.INFO,
                message=f"{os.path.basename(path)} could not be read: {why}",
                subject=os.path.basename(path),
                path=path,
                evidence=(f"{path}: {why}",),
            )


@rule(
    code="ENV006",
    name="conda-meta-unreadable",
    severity=Severity.WARNING,
    summary="A conda-meta record of the environment cannot be read",
)
def conda_meta(ctx: Context) -> Iterator[Finding]:
    """## What it checks
    Every `conda-meta/*.json` of a conda environment parses as a package record.

    ## Why is this bad?
    conda's torch, cudatoolkit and libstdcxx-ng have no dist-info; without their records
    cudastack cannot tell conda-managed packages from pip ones, and conda itself may fail.

    ## Example
    `conda-meta/pytorch-2.5.1-py3.11_cuda12.4_0.json: Expecting value: line 1 column 1`

    ## Fix
    Restore the file from a backup or reinstall the package with conda.

    ## References
    - https://docs.conda.io/projects/conda/en/latest/user-guide/concepts/environments.html
    """
    if not ctx.inventory.conda and not ctx.inventory.conda_problems:
        raise SkipCheck("not a conda environment")
    for path, why in ctx.inventory.conda_problems:
        yield Finding(
            code="ENV006",
            severity=Severity.WARNING,
            message=f"{os.path.basename(path)} cannot be read: {why}",
            subject=os.path.basename(path),
            path=path,
            evidence=(f"{path}: {why}",),
        )


@rule(
    code="ENV007",
    name="file-read-in-part",
    severity=Severity.INFO,
    summary="A file cudastack reads is longer than it reads, or a version file cannot be parsed",
)
def file_read_in_part(ctx: Context) -> Iterator[Finding]:
    """## What it checks
    The files cudastack reads with a size bound, where the bound cuts one: a package's version file
    (`torch/version.py`, `xformers/cpp_lib.json`, ...; at most 1 MiB, and one that is cut is not
    parsed at all), and the Python files of installed distributions that the import model parses to
    tell what importing a package runs (at most 4 MiB each; found by RECORD's sizes, then `stat`).
    A version file that cannot be read or parsed is reported here too.

    ## Why is this bad?
    Nothing fails because of it, but cudastack's answer is partial and says where: the build
    variant a version file holds (`cuda = '13.0'`) is unknown, so the checks that compare it
    skip; code past the cut of a Python file is not seen by the import model, so an import there
    is neither predicted to fail nor to load.

    ## Example
    `torch/version.py: cut off at byte 1048576 of 1310720 (cudastack reads at most 1048576 bytes): not parsed`

    ## Fix
    Nothing, if the file is meant to be that long; otherwise reinstall the distribution that ships it.

    ## References
    - https://github.com/pytorch/pytorch/blob/main/tools/generate_torch_version.py
    """
    for rel, vf in sorted(ctx.inventory.version_files.items()):
        if vf.problem:
            yield Finding(
                code="ENV007",
                severity=Severity.INFO,
                message=f"{rel} was not read: {vf.problem.removeprefix(vf.path + ': ')}",
                subject=rel,
                path=vf.path,
                evidence=(f"{vf.path}: {vf.problem.removeprefix(vf.path + ': ')}",),
            )
    for dist in sorted(ctx.inventory.dists.values(), key=lambda d: d.key):
        cut = []
        for e in dist.record or ():
            if e.path.endswith(".py") and e.size.isdigit() and int(e.size) > IMPORT_SCAN_LIMIT:
                path = dist.abspath(e.path)
                try:
                    size = os.stat(path).st_size
                except OSError:
                    continue  # a missing Python file is no cut (and not ours to report)
                if size > IMPORT_SCAN_LIMIT:
                    cut.append(
                        f"{path}: cut off at byte {IMPORT_SCAN_LIMIT} of {size} "
                        f"(cudastack reads at most {IMPORT_SCAN_LIMIT} bytes of a Python file)"
                    )
        if cut:
            yield Finding(
                code="ENV007",
                severity=Severity.INFO,
                message=f"{len(cut)} Python file(s) of {dist.name} {dist.version} are parsed only in part: "
                f"{cut[0].split(': ', 1)[0].rsplit('/', 1)[-1]}",
                subject=dist.key,
                distribution=dist.key,
                path=cut[0].split(": ", 1)[0],
                evidence=tuple(cut[:20]),
            )
