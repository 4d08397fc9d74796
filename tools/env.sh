# Sourced by the run scripts: puts nvcc on PATH when the CUDA toolkit is installed in its usual
# place but not on PATH.
if ! command -v nvcc >/dev/null 2>&1 && [ -x /usr/local/cuda/bin/nvcc ]; then
  export PATH="/usr/local/cuda/bin:$PATH"
fi
# Header-only dependencies staged for a machine without them (tools/gpu/stage-deps.sh).
toga_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
if [ -d "$toga_root/.deps/usr" ]; then
  export CMAKE_PREFIX_PATH="$toga_root/.deps/usr${CMAKE_PREFIX_PATH:+:$CMAKE_PREFIX_PATH}"
fi
