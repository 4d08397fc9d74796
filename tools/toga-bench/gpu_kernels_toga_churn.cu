// toga-bench GPU backend: toga_policy's churn kernel(s), instantiated alone (gpu_kernels.cuh says why).
#include "gpu_launch.cuh"

namespace toga::bench::gpu {
TOGA_BENCH_INSTANTIATE_churn(toga_policy)
}  // namespace toga::bench::gpu
