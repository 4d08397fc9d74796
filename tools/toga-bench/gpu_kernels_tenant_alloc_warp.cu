// toga-bench GPU backend: toga_tenant_policy's alloc_warp kernel(s), instantiated alone (gpu_kernels.cuh says why).
#include "gpu_launch.cuh"

namespace toga::bench::gpu {
TOGA_BENCH_INSTANTIATE_alloc_warp(toga_tenant_policy)
}  // namespace toga::bench::gpu
