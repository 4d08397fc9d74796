// toga-bench GPU backend: the kernels of cuda-malloc, bump-warp and bump (small: none inlines
// toga), in one unit (gpu_kernels.cuh says why toga's are split).
#include "gpu_launch.cuh"

namespace toga::bench::gpu {
TOGA_BENCH_INSTANTIATE_alloc(malloc_policy)
TOGA_BENCH_INSTANTIATE_free(malloc_policy)
TOGA_BENCH_INSTANTIATE_churn(malloc_policy)
TOGA_BENCH_INSTANTIATE_frag(malloc_policy)
TOGA_BENCH_INSTANTIATE_graph(malloc_policy)
TOGA_BENCH_INSTANTIATE_alloc(bump_policy)
TOGA_BENCH_INSTANTIATE_free(bump_policy)
TOGA_BENCH_INSTANTIATE_churn(bump_policy)
TOGA_BENCH_INSTANTIATE_frag(bump_policy)
TOGA_BENCH_INSTANTIATE_graph(bump_policy)
TOGA_BENCH_INSTANTIATE_alloc(bump_warp_policy)
TOGA_BENCH_INSTANTIATE_alloc_warp(bump_warp_policy)
TOGA_BENCH_INSTANTIATE_free(bump_warp_policy)
TOGA_BENCH_INSTANTIATE_churn(bump_warp_policy)
TOGA_BENCH_INSTANTIATE_frag(bump_warp_policy)
TOGA_BENCH_INSTANTIATE_graph(bump_warp_policy)
}  // namespace toga::bench::gpu
