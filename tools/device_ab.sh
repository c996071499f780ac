#!/usr/bin/env bash
# One device call that compares this checkout's doctor with another's (BASE: the src/ of that
# checkout, e.g. `mkdir base_src && git archive REV src | tar -x -C base_src --strip-components=1`,
# untracked, so `run` carries it) on the device's real stack: healthy, under an empty
# libstdc++.so.6 on LD_LIBRARY_PATH, and with numpy's OpenBLAS removed from a hard-linked copy of
# the environment (nothing of the original changed). Each case: both doctors timed (cache off), the
# findings and module verdicts compared, and tools/false_alarms.py run with this checkout (real
# imports in fresh interpreters as the truth). Run from the repo root: BASE=base_src bash tools/device_ab.sh
set -u
export PYTHONUNBUFFERED=1
P=${P:-/opt/torch/.venv/bin/python}
OUT=${OUT:-/tmp/out}
BASE=${BASE:-base_src}
mkdir -p "$OUT"
SITE=$($P -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
log() { echo "== $(date +%T) $*"; }
TIMEFORMAT='%R s wall, %U s user, %S s sys'
same() {  # same NEW.json OLD.json: are the two reports' findings and module verdicts the same
  $P - "$1" "$2" <<'PY'
import collections, json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
print("findings identical:", a["findings"] == b["findings"], "modules identical:", a.get("modules") == b.get("modules"))
print(collections.Counter((f["code"], f["severity"]) for f in a["findings"]))
PY
}
ab() {  # ab NAME DOCTOR-ARGS...: both doctors, timed, then compared
  local name=$1; shift
  log "$name, this checkout"; time (PYTHONPATH=$PWD/src CUDASTACK_NO_CACHE=1 timeout 250 $P -m cudastack doctor --format json "$@" >"$OUT/$name-new.json")
  log "$name, $BASE"; time (PYTHONPATH=$PWD/$BASE CUDASTACK_NO_CACHE=1 timeout 250 $P -m cudastack doctor --format json "$@" >"$OUT/$name-old.json")
  same "$OUT/$name-new.json" "$OUT/$name-old.json"
}
{
  log "device"; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; nproc
  for i in 1 2 3; do
    ab healthy
    log "import torch"; time (timeout 100 $P -c "import torch")
  done
  log "false alarms, healthy"; PYTHONPATH=$PWD/src timeout 150 $P tools/false_alarms.py "$OUT/fa" --python $P | tail -6
  $P -c "import sys; sys.path.insert(0, 'tools'); from pathlib import Path; import stub_experiment as s; s.make_stub(Path('$OUT/stub'), 'libstdc++.so.6')"
  ab stub -e LD_LIBRARY_PATH="$OUT/stub"
  log "false alarms under the stub"
  PYTHONPATH=$PWD/src LD_LIBRARY_PATH=$OUT/stub timeout 200 $P tools/false_alarms.py "$OUT/fa-stub" --python $P | tail -8
  rm -rf "$OUT/stub"  # (a name with + does not come back from the device)
  BR=/tmp/brokennumpy
  if [ ! -e "$BR" ] && $P -m venv --without-pip "$BR" \
      && BSITE=$("$BR/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])') \
      && cp -al "$SITE/." "$BSITE/" 2>/dev/null; then
    rm -f "$BSITE"/numpy.libs/libscipy_openblas*.so "$BSITE"/numpy.libs/libopenblas*.so
    ab brokennumpy --python "$BR/bin/python"
    log "false alarms, broken numpy"
    PYTHONPATH=$PWD/src timeout 200 $P tools/false_alarms.py "$OUT/fa-brokennumpy" --python "$BR/bin/python" | tail -8
    rm -rf "$BR"
  else
    echo "no hard-linked copy at $BR: the broken-numpy step skipped"
  fi
  log "done"
} 2>&1 | tee "$OUT/log.txt"
