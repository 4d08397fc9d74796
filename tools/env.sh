# Sourced by the run scripts: puts nvcc on PATH when the CUDA toolkit is installed in its usual
# place but not on PATH.
if ! command -v nvcc >/dev/null 2>&1 && [ -x /usr/local/cuda/bin/nvcc ]; then
  export PATH="/usr/local/cuda/bin:$PATH"
fi
