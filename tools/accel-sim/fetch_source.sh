#!/usr/bin/env bash
# Clone the simulator sources check_config.py reads into tools/accel-sim/.src (git-ignored):
# accel-sim/gpgpu-sim_distribution (the option parser, the option registrations and
# SM90_H100's gpgpusim.config on branch h100-test) and accel-sim/accel-sim-framework (the
# trace-mode options and SM90_H100's trace.config). Needs network access to github.com.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
mkdir -p "$here/.src"
for repo in gpgpu-sim_distribution accel-sim-framework; do
  dest="$here/.src/$repo"
  if [ -d "$dest" ]; then
    git -C "$dest" fetch --quiet origin
  else
    git clone --quiet --no-checkout "https://github.com/accel-sim/$repo.git" "$dest"
  fi
  git -C "$dest" rev-parse --verify --quiet origin/h100-test >/dev/null \
    || { echo "$repo: no branch h100-test" >&2; exit 1; }
done
echo "sources in $here/.src; run: python tools/accel-sim/check_config.py"
