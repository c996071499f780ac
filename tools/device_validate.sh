#!/usr/bin/env bash
# One device run that re-validates the doctor against the real GPU stack (see docs/validation.md):
# doctor timings, false alarms, import reach (overs/misses), the LD_LIBRARY_PATH stub experiment,
# and traces for the named leftovers. Run from the repo root on the device: bash tools/device_validate.sh
# Every step has its own time limit, so what finished comes back even if a later step runs long.
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
P=${P:-/opt/torch/.venv/bin/python}
OUT=${OUT:-/tmp/out}
SITE=$($P -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
mkdir -p "$OUT"
log() { echo "== $(date +%T) $*"; }
{
  log "device"; nvidia-smi --query-gpu=name,driver_version,compute_cap --format=csv,noheader
  log "doctor, cache off"
  TIMEFORMAT='%R s wall, %U s user'; time (CUDASTACK_NO_CACHE=1 timeout 120 $P -m cudastack doctor --format json >"$OUT/doctor.json" 2>"$OUT/doctor.err"; echo "exit $?")
  log "doctor, warm"
  time (timeout 120 $P -m cudastack doctor --fail-on warning | tail -5)
  log "doctor, replayed from the result cache (x3)"
  for i in 1 2 3; do time (timeout 60 $P -m cudastack doctor --format json | $P -c 'import json,sys; d=json.load(sys.stdin); print("result_cache", bool(d.get("result_cache")), "exit", d["summary"]["exit_code"])'); done
  log "repeat doctor vs ldd -r, alternating"; timeout ${PAIRED_LIMIT:-150} $P bench/bench_doctor.py --python $P --paired ${PAIRED:-5} 2>&1 | tail -12
  log "false alarms"; timeout 200 $P tools/false_alarms.py "$OUT/fa" --python $P | tail -8
  # the same, every root, with one library replaced by an empty stub on LD_LIBRARY_PATH: a broken
  # stack (what fails propagates through Python imports: LDD009, the lazy submodules of transformers)
  for so in ${FA_STUBS:-libcudart.so.13}; do
    log "false alarms under a stub $so"
    d=$(echo "$so" | tr -c 'A-Za-z0-9._\n-' '_')  # (a name with + does not come back from the device)
    $P -c "import sys; sys.path.insert(0, 'tools'); from pathlib import Path; import stub_experiment as s; s.make_stub(Path('$OUT/stub-$d'), '$so')"
    LD_LIBRARY_PATH="$OUT/stub-$d" timeout 300 $P tools/false_alarms.py "$OUT/fa-$d" --python $P | tail -8
  done
  # the same with a broken numpy: a copy of the environment hard-linked (the files shared, nothing
  # of the original changed) with numpy's bundled OpenBLAS unlinked; numpy's RPATH wins over any
  # LD_LIBRARY_PATH stub, so only a missing file breaks it (torch imports numpy: issue 12, s39)
  if [ -n "${FA_BROKEN_NUMPY:-}" ]; then
    log "false alarms with numpy's OpenBLAS removed (a hard-linked copy of the environment)"
    BR=${BR:-$(dirname "$(dirname "$(dirname "$P")")")/brokennumpy}
    if [ -e "$BR" ]; then
      echo "$BR exists already: not touched, step skipped (set BR= to a new path)"
    elif $P -m venv --without-pip "$BR" && BSITE=$("$BR/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])') \
        && cp -al "$SITE/." "$BSITE/" 2>/dev/null; then
      rm -f "$BSITE"/numpy.libs/libscipy_openblas*.so "$BSITE"/numpy.libs/libopenblas*.so
      timeout 300 $P tools/false_alarms.py "$OUT/fa-brokennumpy" --python "$BR/bin/python" | tail -12
    else
      echo "could not make a hard-linked copy of $SITE at $BR (another file system?)"
    fi
    [ -n "${BSITE:-}" ] && rm -rf "$BR"  # (only the copy this step made)
  fi
  log "import reach"; timeout 200 $P tools/validate_imports.py "$OUT/vi" --python $P | tail -12
  log "scipy trace"; timeout 60 $P tools/reach_trace.py "$SITE" scipy --first 80 >"$OUT/scipy_trace.txt" 2>&1
  (cd "$SITE" && tar czf "$OUT/scipy_py.tgz" $(find scipy -name '*.py' -size -400k | head -4000) scipy-*.dist-info/METADATA) 2>/dev/null
  log "stub experiment"
  timeout ${STUB_LIMIT:-300} $P tools/stub_experiment.py --python $P \
    --import jax --import torch --import scipy --import sklearn --import cupy --import torchvision \
    --soname libstdc++.so.6 --soname libgomp.so.1 --soname libcublasLt.so.13 --soname libz.so.1 \
    --soname libnvJitLink.so.13 --soname libnvrtc.so.13 --soname libcusparse.so.12 --soname libcudart.so.13 \
    --soname libcufft.so.12 --soname libcurand.so.10 ${STUB_EXTRA:-} -o "$OUT/stub.json" | tail -15
  log "done"
} 2>&1 | tee "$OUT/log.txt"
