# Sourced by the gpu-host scripts (no network on a lent machine): the carried wheels (.whl/)
# and this tree into /tmp/site, once per call - a script that runs another (fleet_round.sh
# runs holdout.sh) finds GPUCHAR_SITE_READY set and installs nothing again.
# Usage: . tools/gpu-host/install.sh [LOG]   (LOG: the package install's output, /tmp/install.log)
if [ "${GPUCHAR_SITE_READY:-}" != 1 ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl/*.whl
  if python3 -m pip install -q --no-index --no-deps --no-build-isolation --no-compile \
      --target /tmp/site . > "${1:-/tmp/install.log}" 2>&1; then
    export GPUCHAR_SITE_READY=1
  else
    echo "install failed"; tail "${1:-/tmp/install.log}"
  fi
fi
case ":$PATH:" in *:/usr/local/cuda/bin:*) ;; *) PATH=$PATH:/usr/local/cuda/bin ;; esac
export PYTHONPATH=/tmp/site PATH PYTHONUNBUFFERED=1
