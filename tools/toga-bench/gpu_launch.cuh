// toga-bench GPU backend: the launchers' definitions (declared in gpu_kernels.cuh). Included only
// by the gpu_kernels_*.cu units, each of which instantiates the launchers of a few kernels
// (TOGA_BENCH_INSTANTIATE below), so that the kernels that inline the allocator compile in
// parallel and no unit compiles one twice.
#pragma once
#include "gpu_kernels.cuh"

namespace toga::bench::gpu {

template <class P, bool Warp>
void launch_alloc(unsigned grid, const P& pol, const alloc_args& a) {
  alloc_kernel<P, Warp><<<grid, block_threads>>>(pol, a);
}
template <class P>
void launch_free(unsigned grid, const P& pol, const free_args& a) {
  free_kernel<P><<<grid, block_threads>>>(pol, a);
}
template <class P>
void launch_churn(unsigned grid, const P& pol, const churn_args& a) {
  churn_kernel<P><<<grid, block_threads>>>(pol, a);
}
template <class P>
void launch_frag(unsigned grid, const P& pol, const frag_args& a) {
  frag_kernel<P><<<grid, block_threads>>>(pol, a);
}
template <class P>
void launch_graph_update(unsigned grid, const P& pol, const update_args& a) {
  graph_update_kernel<P><<<grid, block_threads>>>(pol, a);
}
template <class P>
void launch_pattern(unsigned grid, const P& pol, const pattern_args& a) {
  pattern_kernel<P><<<grid, block_threads>>>(pol, a);
}
template <class P, bool Warp>
cudaError_t alloc_attributes(cudaFuncAttributes* out) {
  return cudaFuncGetAttributes(out, alloc_kernel<P, Warp>);
}
template <class P>
cudaError_t free_attributes(cudaFuncAttributes* out) {
  return cudaFuncGetAttributes(out, free_kernel<P>);
}

#ifdef TOGA_BENCH_PROFILE
namespace {
// This unit's counters (gpu_kernels.cuh's static toga_bench_prof), added into h and cleared.
void read_this_units_profile(unsigned long long* h) {
  unsigned long long mine[64] = {};
  if (cudaMemcpyFromSymbol(mine, toga_bench_prof, sizeof mine) != cudaSuccess) return;
  bool any = false;
  for (unsigned i = 0; i < 64; ++i) {
    h[i] += mine[i];
    any = any || mine[i] != 0;
  }
  if (any) {
    for (auto& x : mine) x = 0;
    (void)cudaMemcpyToSymbol(toga_bench_prof, mine, sizeof mine);
  }
}
const bool registered_profile = (add_profile_reader(&read_this_units_profile), true);
}  // namespace
#endif

}  // namespace toga::bench::gpu

// The launchers of one allocator policy's kernels, by group (each gpu_kernels_*.cu names one or
// a few): alloc (alloc_kernel<P, false>, its attributes), alloc_warp, free (free_kernel, its
// attributes, and the pattern kernel, which only asks the policy for its range), churn, frag,
// graph.
#define TOGA_BENCH_INSTANTIATE_alloc(P)                                                      \
  template void launch_alloc<P, false>(unsigned, const P&, const alloc_args&);               \
  template cudaError_t alloc_attributes<P, false>(cudaFuncAttributes*);
#define TOGA_BENCH_INSTANTIATE_alloc_warp(P)                                                 \
  template void launch_alloc<P, true>(unsigned, const P&, const alloc_args&);                \
  template cudaError_t alloc_attributes<P, true>(cudaFuncAttributes*);
#define TOGA_BENCH_INSTANTIATE_free(P)                                                       \
  template void launch_free<P>(unsigned, const P&, const free_args&);                        \
  template cudaError_t free_attributes<P>(cudaFuncAttributes*);                              \
  template void launch_pattern<P>(unsigned, const P&, const pattern_args&);
#define TOGA_BENCH_INSTANTIATE_churn(P) template void launch_churn<P>(unsigned, const P&, const churn_args&);
#define TOGA_BENCH_INSTANTIATE_frag(P) template void launch_frag<P>(unsigned, const P&, const frag_args&);
#define TOGA_BENCH_INSTANTIATE_graph(P) \
  template void launch_graph_update<P>(unsigned, const P&, const update_args&);
