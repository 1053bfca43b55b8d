#!/usr/bin/env bash
# Run a command with polymnesia on a machine without internet, from a kit made by
# scripts/offline_kit.py where the network is:
#
#   bash scripts/offline_run.sh KIT_DIR -- COMMAND [ARGS...]
#
# Installs the kit's wheels into a private folder (once per kit; nothing else is touched),
# puts it and src/ on PYTHONPATH, points POLYMNESIA_CACHE at $POLYMNESIA_CACHE or
# KIT_DIR.cache (beside the kit, so a fresh copy of the kit leaves it alone), imports every
# KIT_DIR/data-*.tar.gz into that cache (verified entries; already imported ones are kept),
# turns the Hugging Face Hub off, then runs COMMAND in the repository root. Example (the GPU
# figures of docs/scale.md):
#
#   bash scripts/offline_run.sh .offline -- python3 -m polymnesia run configs/gpu/active_forgetting.yaml
set -euo pipefail
cd "$(dirname "$0")/.."
if [ $# -lt 3 ] || [ "$2" != "--" ]; then
  echo "usage: bash scripts/offline_run.sh KIT_DIR -- COMMAND [ARGS...]" >&2
  exit 2
fi
kit=$(cd "$1" && pwd)
shift 2
python=${PYTHON:-python3}
site=${POLYMNESIA_SITE:-/tmp/polymnesia-site}
if compgen -G "$kit/wheels/*.whl" >/dev/null; then
  stamp=$(ls "$kit"/wheels/*.whl | sort | sha256sum | cut -c1-16)
  if [ "$(cat "$site/.kit" 2>/dev/null)" != "$stamp" ]; then
    rm -rf "$site"
    "$python" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir \
      --target "$site" "$kit"/wheels/*.whl
    echo "$stamp" >"$site/.kit"
  fi
fi
export PYTHONPATH="$site:$PWD/src${PYTHONPATH:+:$PYTHONPATH}"
export POLYMNESIA_CACHE=${POLYMNESIA_CACHE:-$kit.cache}
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TRANSFORMERS_OFFLINE=1
for archive in "$kit"/data-*.tar.gz; do
  [ -e "$archive" ] || continue
  "$python" -m polymnesia cache import "$archive"
done
exec "$@"
