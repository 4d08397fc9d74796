// toga-bench GPU backend: toga_tenant_policy's free kernel(s), instantiated alone (gpu_kernels.cuh says why).
#include "gpu_launch.cuh"

namespace toga::bench::gpu {
TOGA_BENCH_INSTANTIATE_free(toga_tenant_policy)
}  // namespace toga::bench::gpu
