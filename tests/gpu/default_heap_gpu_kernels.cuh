//! @file tests/gpu/default_heap_gpu_kernels.cuh
//! Host launchers of the kernels in default_heap_gpu_kernels.cu (another translation unit than
//! the test, each with its own copy of the default-heap slot). Each waits for its kernel.
#pragma once

#include <cuda_runtime.h>

namespace toga::test {
//! Frees ptrs[(t * 7919) % n] from thread t through toga::cuda::deallocate; counts in *bad the
//! blocks whose first word is not their index.
cudaError_t launch_free_default(void* const* ptrs, unsigned n, unsigned* bad);
//! *out = toga::cuda::has_default_heap() on the current device.
cudaError_t launch_has_default(int* out);
}  // namespace toga::test
