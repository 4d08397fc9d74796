// Counts TBuddy's algorithm events (config.hpp's TOGA_PROFILE_COUNT) during allocation kernels,
// to see where the time of large-block allocation goes (docs/benchmarks.md, "what limits toga").
// Not part of the CMake build; on a machine with nvcc and a GPU:
//   nvcc -std=c++20 -O3 -gencode=arch=compute_90,code=sm_90 --expt-relaxed-constexpr \
//        -Icore/include -Ibackends/cuda/include tools/gpu/tbuddy-profile.cu -o tbuddy-profile
//   ./tbuddy-profile [size_bytes ...]
// Environment: LANES=k (1..32, default 32): only lanes 0..k-1 of each warp allocate (LANES=1 is
// toga-bench's T2, one allocation per warp); THREADS="n n ...": thread counts (default 1 .. 2^20).
// PASSES=k (1..100, default 3): a pass from a fresh heap, then k - 1 warm passes on it.
// HEAP_MIB=m (1..65536, default 16384): the heap's size; with it, launches that ask for more than
// the heap are run too (failing launches: docs/design.md §13; history: docs/devlog.md).
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "../../backends/cuda/include/toga/cuda/profile_counters.cuh"
#include "../../backends/cuda/src/heap.cu"

#define CK(x)                                                                                      \
  do {                                                                                             \
    cudaError_t e_ = (x);                                                                          \
    if (e_ != cudaSuccess) {                                                                       \
      std::fprintf(stderr, "%s failed: %s (%s:%d)\n", #x, cudaGetErrorString(e_), __FILE__, __LINE__); \
      std::exit(1);                                                                                \
    }                                                                                              \
  } while (0)

__global__ void alloc_kernel(toga::cuda::heap_ref h, void** out, unsigned n, unsigned size, unsigned* fails, unsigned lanes) {
  const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  if (i % 32 >= lanes) {
    out[i] = nullptr;  // (free of nullptr: a no-op)
    return;
  }
  void* p = h.allocate(size);
  if (!p) atomicAdd(fails, 1u);
  out[i] = p;
}
__global__ void free_kernel(toga::cuda::heap_ref h, void** in, unsigned n) {
  const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) h.deallocate(in[i]);
}

int main(int argc, char** argv) {
  std::vector<unsigned> sizes;
  for (int i = 1; i < argc; ++i) sizes.push_back(static_cast<unsigned>(std::atoi(argv[i])));
  if (sizes.empty()) sizes = {4096};
  const char* lanes_env = std::getenv("LANES");
  const unsigned lanes = lanes_env ? static_cast<unsigned>(std::atoi(lanes_env)) : 32u;
  if (lanes < 1 || lanes > 32) {
    std::fprintf(stderr, "LANES=%s: want 1 .. 32 (lanes per warp that allocate)\n", lanes_env);
    return 2;
  }
  std::vector<unsigned> threads = {1u, 32u, 1024u, 8192u, 65536u, 1048576u};
  if (const char* t = std::getenv("THREADS")) {
    threads.clear();
    for (char* q = const_cast<char*>(t); *q;) {
      char* end = nullptr;
      const unsigned long x = std::strtoul(q, &end, 10);
      if (end == q || x == 0 || x > (1u << 20)) {
        std::fprintf(stderr, "THREADS='%s': want thread counts 1 .. 1048576 separated by spaces\n", t);
        return 2;
      }
      threads.push_back(static_cast<unsigned>(x));
      q = end;
      while (*q == ' ') ++q;
    }
  }
  const char* names[] = {"alloc", "climb", "visit", "restart", "claim_lost", "lock_spin", "split", "propagate", "free", "merge"};
  const char* ua_names[] = {"group", "fast", "take_failed", "no_pin", "short", "(unused)", "lost_bits", "find_step", "grow",
                            "take_inbox", "lock_spin", "free_group", "free_cold", "retire", "steal", "reclaim",
                            "reclaim_walk", "fallback", "t_reclaim_walk_cycles", "gw_attempt", "gw_overlap", "gw_post",
                            "gw_t_attempt_cycles", "gw_t_wait_cycles",
                            "ua_t_stage1_cycles", "ua_t_grow_cycles", "ua_t_fallback_cycles", "tb_top_fail", "tb_gave_up", "sem_reserve", "sem_break", "sem_poll", "sem_cas_lost",
                            "fallback_take", "tb_stale_fail", "tb_drain", "tb_refused"};
  static_assert(sizeof ua_names / sizeof ua_names[0] == toga::prof_event_count - toga::prof_ua_group, "one name per event");
  const char* passes_env = std::getenv("PASSES");
  const int passes = passes_env ? std::atoi(passes_env) : 3;
  if (passes < 1 || passes > 100) {
    std::fprintf(stderr, "PASSES=%s: want 1 .. 100 (a fresh pass, then warm ones)\n", passes_env);
    return 2;
  }
  void** ptrs;
  unsigned* fails;
  CK(cudaMalloc(&ptrs, sizeof(void*) << 20));
  CK(cudaMalloc(&fails, sizeof(unsigned)));
  const char* heap_env = std::getenv("HEAP_MIB");
  const unsigned long heap_mib = heap_env ? std::strtoul(heap_env, nullptr, 10) : 16384ul;
  if (heap_mib < 1 || heap_mib > 65536) {
    std::fprintf(stderr, "HEAP_MIB=%s: want 1 .. 65536 (the heap's size in MiB)\n", heap_env);
    return 2;
  }
  toga::cuda::heap heap(static_cast<std::size_t>(heap_mib) << 20);
  cudaEvent_t a, b;
  CK(cudaEventCreate(&a));
  CK(cudaEventCreate(&b));
  for (unsigned size : sizes)
    for (unsigned n : threads) {
      const unsigned allocs = (n / 32) * lanes + (n % 32 < lanes ? n % 32 : lanes);  // lanes that allocate
      if (!heap_env && std::uint64_t{allocs} * size > (8ull << 30)) continue;  // at most half the heap
      for (int warm = 0; warm < passes; ++warm) {
        if (!warm) heap.reset();
        unsigned long long zero[64] = {};
        CK(cudaMemcpyToSymbol(toga_prof, zero, sizeof zero));
        CK(cudaMemset(fails, 0, sizeof(unsigned)));
        CK(cudaEventRecord(a));
        alloc_kernel<<<(n + 255) / 256, 256>>>(heap.ref(), ptrs, n, size, fails, lanes);
        CK(cudaEventRecord(b));
        CK(cudaGetLastError());
        CK(cudaEventSynchronize(b));
        float ms = 0;
        CK(cudaEventElapsedTime(&ms, a, b));
        unsigned long long c[64];
        CK(cudaMemcpyFromSymbol(c, toga_prof, sizeof c));
        unsigned f = 0;
        CK(cudaMemcpy(&f, fails, sizeof f, cudaMemcpyDeviceToHost));
        std::printf("size %u threads %6u lanes %u %s: %9.3f ms, %u failed; per allocation:", size, n, lanes, warm ? "warm" : "cold", ms, f);
        for (int e = 0; e < 8; ++e) std::printf(" %s=%.1f", names[e], double(c[e]) / allocs);
        std::printf(" | us: stage1=%.1f search=%.1f split=%.1f", c[10] / 1980.0 / allocs, c[11] / 1980.0 / allocs, c[12] / 1980.0 / allocs);
        std::printf("\n");
        if (size <= 65536) {  // the UAlloc / superbin path's events (totals)
          std::printf("      slot path totals:");
          for (int e = toga::prof_ua_group; e < toga::prof_event_count; ++e)
            if (e != 18) std::printf(" %s=%llu", ua_names[e - 13], c[e]);
          std::printf("\n");
        }
        CK(cudaMemcpyToSymbol(toga_prof, zero, sizeof zero));
        CK(cudaEventRecord(a));
        free_kernel<<<(n + 255) / 256, 256>>>(heap.ref(), ptrs, n);
        CK(cudaEventRecord(b));
        CK(cudaGetLastError());
        CK(cudaEventSynchronize(b));
        CK(cudaEventElapsedTime(&ms, a, b));
        CK(cudaMemcpyFromSymbol(c, toga_prof, sizeof c));
        std::printf("      free %9.3f ms; per free: merge=%.1f lock_spin=%.1f propagate=%.1f", ms, double(c[9]) / allocs,
                    double(c[5]) / allocs, double(c[7]) / allocs);
        if (size <= 65536) std::printf(" | free_group=%llu free_cold=%llu retire=%llu", c[24], c[25], c[26]);
        std::printf("\n");
      }
    }
  return 0;
}
