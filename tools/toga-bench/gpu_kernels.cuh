// toga-bench GPU backend: the device side (allocator policies, kernel arguments, kernels) and the
// launchers the host side calls (gpu_backend.cu). The kernels that call toga are instantiated in
// gpu_kernels_*.cu, one or two per translation unit, so that a build compiles them in parallel:
// ptxas takes minutes for each kernel that inlines the allocator, and as one translation unit the
// backend took 22-40 minutes of one core (2026-12-01; 13 units since). gpu_backend.cu sees only
// the launchers' declarations (no kernel is instantiated there but the digest kernel);
// gpu_launch.cuh defines them, included by the gpu_kernels_*.cu files only.
#pragma once
#include <cooperative_groups.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "bench.hpp"
#ifdef TOGA_BENCH_PROFILE
// Measurement builds only (toga-gpu build --name X --what bench -- -DTOGA_BENCH_PROFILE): config.hpp's
// event counters, printed to stderr after every alloc and free kernel of T1-T3 (timings of that build
// are not the figures; the names are fastpath-bench's event_names, in config.hpp's order).
static __device__ unsigned long long toga_bench_prof[64];  // (one per unit: see below)
#define TOGA_PROFILE_COUNT(e) atomicAdd(&toga_bench_prof[(e)], 1ull)
#endif
#include "toga/cuda/heap.cuh"
#include "workloads.hpp"

namespace toga::bench::gpu {

namespace cg = cooperative_groups;

constexpr unsigned block_threads = 256;
// Every kernel that calls an allocator is compiled for 256-thread blocks at 4 blocks per SM, as
// docs/usage.md asks of toga's users: without the bound, the register count of the call graph
// (toga's non-inlined slow paths) sets the kernel's, 255 on sm_90, and halves occupancy. The
// free kernel runs 5 blocks per SM (48 registers: fast-path.md E10's budget for deallocate); on
// an H100 that freed 16 B and 64 B blocks 7-15% faster than at 64 registers (docs/benchmarks.md).

// ---- device helpers (size_rule, pattern_base / pattern_word, vstate: workloads.hpp) ---------------

//! workloads.hpp's lane environment on the GPU: result counters are device atomics; every block
//! counts as usable, for the kernels that only store or free their pointers (T1-T4, T6-T9, T14:
//! the host checks bounds and overlaps afterwards), so that check costs them nothing.
struct gpu_lane {
  __device__ static void count(unsigned long long* c) { atomicAdd(c, 1ull); }
  __device__ static constexpr bool usable(const void*, std::uint64_t) { return true; }
};

//! The lane environment of the kernels that write into their blocks before any host check (T5's
//! churn, T10/T11's graph updates): a block is usable when it is 16 B aligned and lies inside
//! the allocator's memory (the policy's `owns`; cuda-malloc's heap has no known range: alignment
//! only). An unusable block is counted (corrupt / missing), never written and never freed, so
//! that a wild pointer shows in the row instead of as an illegal address in whichever kernel
//! runs next (T5 had no such check until 2026-12-01). Costs two compares per allocation.
template <class P>
struct checked_lane {
  const P& pol;
  __device__ static void count(unsigned long long* c) { atomicAdd(c, 1ull); }
  __device__ bool usable(const void* p, std::uint64_t bytes) const {
    return (reinterpret_cast<std::uintptr_t>(p) & 15u) == 0 && pol.owns(p, bytes);
  }
};

//! T9, this backend's choice rule (the simulator has its own): whether slot `slot` is freed and
//! allocated again in round `round`.
__host__ __device__ inline bool frag_chosen(std::uint64_t seed, std::uint32_t round, std::uint64_t slot) {
  return (mix64(mix64(seed ^ 0x6672616700000000ull) ^ ((std::uint64_t{round} << 32) | slot)) & 1u) != 0;
}

__device__ inline std::uint64_t global_thread() { return std::uint64_t{blockIdx.x} * blockDim.x + threadIdx.x; }

// ---- allocator policies (device side, passed by value) ------------------------------------------

struct toga_policy {
  static constexpr bool has_warp = true;
  toga::cuda::heap_ref ref;
  __device__ void* allocate(std::uint64_t b) const { return ref.allocate(b); }
  __device__ void deallocate(void* p) const { ref.deallocate(p); }
  __device__ void* allocate_warp(std::uint64_t b) const { return ref.allocate(cg::coalesced_threads(), b); }
  __device__ void deallocate_warp(void* p) const { ref.deallocate(cg::coalesced_threads(), p); }
  //! Whether [p, p + b) lies inside the heap (b >= 1).
  __device__ bool owns(const void* p, std::uint64_t b) const { return ref.contains(p) && ref.contains(static_cast<const char*>(p) + (b - 1)); }
};

//! toga with tenants (--tenants): every kernel allocates as tenant 0 of a heap made with
//! heap_options::tenants (no quota), through its tenant_ref.
struct toga_tenant_policy {
  static constexpr bool has_warp = true;
  toga::cuda::tenant_ref ref;
  __device__ void* allocate(std::uint64_t b) const { return ref.allocate(b); }
  __device__ void deallocate(void* p) const { ref.deallocate(p); }
  __device__ void* allocate_warp(std::uint64_t b) const { return ref.allocate(cg::coalesced_threads(), b); }
  __device__ void deallocate_warp(void* p) const { ref.deallocate(cg::coalesced_threads(), p); }
  //! Whether [p, p + b) lies inside the heap (b >= 1).
  __device__ bool owns(const void* p, std::uint64_t b) const { return ref.contains(p) && ref.contains(static_cast<const char*>(p) + (b - 1)); }
};

struct malloc_policy {
  static constexpr bool has_warp = false;  // no warp API: T6 launches the plain alloc kernel
  __device__ void* allocate(std::uint64_t b) const { return malloc(b); }
  __device__ void deallocate(void* p) const { free(p); }
  __device__ void deallocate_warp(void* p) const { free(p); }  // the free kernel's warp flag
  __device__ static constexpr bool owns(const void*, std::uint64_t) { return true; }  // (no known range)
};

//! bump: one atomicAdd per thread (runtime size: ptxas does not aggregate it); free: nothing.
struct bump_policy {
  static constexpr bool has_warp = false;  // T6 launches the plain alloc kernel
  char* base;
  std::uint64_t capacity;
  unsigned long long* counter;
  __device__ void* allocate(std::uint64_t b) const {
    const std::uint64_t r = (b + 15) & ~std::uint64_t{15};
    const std::uint64_t off = atomicAdd(counter, static_cast<unsigned long long>(r));
    return off + r <= capacity ? base + off : nullptr;
  }
  __device__ void deallocate(void*) const {}
  __device__ void deallocate_warp(void*) const {}
  __device__ bool owns(const void* p, std::uint64_t b) const {
    const std::uint64_t off = static_cast<std::uint64_t>(static_cast<const char*>(p) - base);
    return static_cast<const char*>(p) >= base && off <= capacity && b <= capacity - off;
  }
};

//! bump-warp, the floor: the lanes that call allocate together scan their rounded sizes, the
//! last of them adds the group's total with one atomicAdd, lanes take base + exclusive prefix.
struct bump_warp_policy {
  static constexpr bool has_warp = true;  // allocate is warp-aggregated already: T6 = T1
  char* base;
  std::uint64_t capacity;
  unsigned long long* counter;
  __device__ void* allocate(std::uint64_t b) const {
    const cg::coalesced_group g = cg::coalesced_threads();
    const std::uint64_t r = (b + 15) & ~std::uint64_t{15};
    std::uint64_t incl = r;  // inclusive prefix over the group's ranks
    for (unsigned d = 1; d < g.size(); d <<= 1) {
      const std::uint64_t y = g.shfl_up(incl, static_cast<int>(d));
      if (g.thread_rank() >= d) incl += y;
    }
    std::uint64_t first = 0;
    if (g.thread_rank() == g.size() - 1) first = atomicAdd(counter, static_cast<unsigned long long>(incl));
    first = g.shfl(first, g.size() - 1);
    const std::uint64_t off = first + incl - r;
    return off + r <= capacity ? base + off : nullptr;
  }
  //! Nothing to release; the pointer was loaded by the caller (free_kernel) and is kept alive
  //! here, so the kernel does the per-thread work every free does: read its pointer.
  __device__ void deallocate(void* p) const { asm volatile("" ::"l"(p)); }
  __device__ void* allocate_warp(std::uint64_t b) const { return allocate(b); }
  __device__ void deallocate_warp(void* p) const { deallocate(p); }
  __device__ bool owns(const void* p, std::uint64_t b) const {
    const std::uint64_t off = static_cast<std::uint64_t>(static_cast<const char*>(p) - base);
    return static_cast<const char*>(p) >= base && off <= capacity && b <= capacity - off;
  }
};

// ---- kernels ---------------------------------------------------------------------------------------

struct alloc_args {
  void** ptrs;                   //!< out: slot i gets allocation i (nullptr on failure)
  std::uint64_t threads;         //!< threads taking part (the grid is rounded up to 256)
  size_rule sizes;               //!< bytes of allocation id_base + i
  std::uint64_t id_base;         //!< T8: the round's first slot
  int lane0;                     //!< 1: only lane 0 of each warp allocates (T2); slot = tid / 32
  unsigned long long* failures;  //!< nullptrs returned
};

//! T1-T4, T6, T7, T8 rounds, T9 population, T14: one allocation (workloads.hpp's alloc_item) per
//! taking-part thread.
template <class P, bool Warp>
__global__ void __launch_bounds__(block_threads, 4) alloc_kernel(P pol, alloc_args a) {
  const std::uint64_t tid = global_thread();
  if (tid >= a.threads) return;
  if (a.lane0 && (threadIdx.x & 31u) != 0) return;
  const std::uint64_t i = a.lane0 ? tid >> 5 : tid;
  alloc_item<Warp>(pol, gpu_lane{}, a.ptrs, i, a.sizes.of(a.id_base + i), a.failures);
}

struct free_args {
  const char* ptrs;           //!< pointer of item i at ptrs + i * stride_bytes
  std::uint64_t stride_bytes;  //!< sizeof(void*), or the T10 vertex record
  std::uint64_t threads;
  int lane0;  //!< as in alloc_args
  int warp;   //!< 1: the warp-cooperative deallocate
};

//! Frees item i's block (workloads.hpp's free_item), read from ptrs + i * stride_bytes.
template <class P>
__global__ void __launch_bounds__(block_threads, 5) free_kernel(P pol, free_args a) {
  const std::uint64_t tid = global_thread();
  if (tid >= a.threads) return;
  if (a.lane0 && (threadIdx.x & 31u) != 0) return;
  const std::uint64_t i = a.lane0 ? tid >> 5 : tid;
  free_item(pol, *reinterpret_cast<void* const*>(a.ptrs + i * a.stride_bytes), a.warp != 0);
}

//! T5: workloads.hpp's churn_item, one live block per thread (allocate, tag the first and last
//! word, read them back, free; `iterations` times).
template <class P>
__global__ void __launch_bounds__(block_threads, 4) churn_kernel(P pol, churn_args a) {
  const std::uint64_t tid = global_thread();
  if (tid >= a.threads) return;
  churn_item<false>(pol, checked_lane<P>{pol}, a, tid);
}

struct frag_args {
  void** slots;
  std::uint64_t n;
  std::uint64_t size;
  std::uint64_t seed;
  std::uint32_t round;
  unsigned long long* failures;
};

//! T9: one round; a chosen slot frees its block and allocates a new one (workloads.hpp's frag_item).
template <class P>
__global__ void __launch_bounds__(block_threads, 4) frag_kernel(P pol, frag_args a) {
  const std::uint64_t i = global_thread();
  if (i >= a.n || !frag_chosen(a.seed, a.round, i)) return;
  frag_item(pol, gpu_lane{}, a.slots, i, a.size, a.failures);
}

//! T10 build (insert into empty arrays), T11 insert and delete rounds; one thread per item
//! (workloads.hpp's graph_update_item; vstate and update_args are there too).
template <class P>
__global__ void __launch_bounds__(block_threads, 4) graph_update_kernel(P pol, update_args a) {
  const std::uint64_t i = global_thread();
  if (i >= a.items) return;
  graph_update_item(pol, checked_lane<P>{pol}, a, i);
}

struct pattern_args {
  void* const* ptrs;
  std::uint64_t count;
  size_rule sizes;
  std::uint64_t id_base;
  std::uint64_t seed;
  std::int64_t only_round;  //!< >= 0: only the slots frag_chosen in that round (T9's new blocks)
  int verify;               //!< 0: write the pattern, 1: count blocks that do not hold it
  unsigned long long* bad;
};

//! One warp per block (grid-stride over blocks), lanes stride over its words. A block outside
//! the allocator's memory or not 16 B aligned (checked_lane) is counted in `bad`, never written
//! or read, and its slot is set to nullptr, so that no later kernel writes or frees it: a wild
//! pointer is a corrupt block of its row, not an illegal address (or another allocator's
//! corrupted heap) in whichever kernel runs next. (Before 2026-12-01 the fill wrote first and the
//! host's bounds check came after it.)
template <class P>
__global__ void pattern_kernel(P pol, pattern_args a) {
  const unsigned lane = threadIdx.x & 31u;
  const std::uint64_t warps = (std::uint64_t{gridDim.x} * blockDim.x) / 32;
  for (std::uint64_t i = global_thread() / 32; i < a.count; i += warps) {
    std::uint32_t* q = static_cast<std::uint32_t*>(a.ptrs[i]);
    if (q == nullptr) continue;
    if (a.only_round >= 0 && !frag_chosen(a.seed, static_cast<std::uint32_t>(a.only_round), i)) continue;
    const std::uint64_t id = a.id_base + i;
    if (!checked_lane<P>{pol}.usable(q, a.sizes.of(id) < 1 ? 1 : a.sizes.of(id))) {
      __syncwarp();  // every lane has read the slot before lane 0 clears it
      if (lane == 0) {
        atomicAdd(a.bad, 1ull);
        const_cast<void**>(a.ptrs)[i] = nullptr;
      }
      continue;
    }
    const std::uint64_t words = a.sizes.of(id) / 4;
    const std::uint32_t base = pattern_base(id, a.seed);
    bool bad = false;
    for (std::uint64_t w = lane; w < words; w += 32) {
      const std::uint32_t want = pattern_word(base, w);
      if (a.verify) {
        bad = bad || q[w] != want;
      } else {
        q[w] = want;
      }
    }
    if (a.verify && __any_sync(0xffffffffu, bad) && lane == 0) atomicAdd(a.bad, 1ull);
  }
}

// ---- launchers (defined in gpu_launch.cuh, instantiated in gpu_kernels_*.cu) --------------------

//! Launches alloc_kernel<P, Warp> on `grid` blocks of block_threads (no check, no wait).
template <class P, bool Warp>
void launch_alloc(unsigned grid, const P& pol, const alloc_args& a);
template <class P>
void launch_free(unsigned grid, const P& pol, const free_args& a);
template <class P>
void launch_churn(unsigned grid, const P& pol, const churn_args& a);
template <class P>
void launch_frag(unsigned grid, const P& pol, const frag_args& a);
template <class P>
void launch_graph_update(unsigned grid, const P& pol, const update_args& a);
template <class P>
void launch_pattern(unsigned grid, const P& pol, const pattern_args& a);
//! cudaFuncGetAttributes of alloc_kernel<P, Warp> / free_kernel<P> (T13).
template <class P, bool Warp>
cudaError_t alloc_attributes(cudaFuncAttributes* out);
template <class P>
cudaError_t free_attributes(cudaFuncAttributes* out);

#ifdef TOGA_BENCH_PROFILE
//! Profile builds: each kernel unit has its own toga_bench_prof (no relocatable device code) and
//! registers a reader that adds its counters into h[64] and clears them (gpu_launch.cuh).
using profile_reader = void (*)(unsigned long long* h);
void add_profile_reader(profile_reader r);
#endif

}  // namespace toga::bench::gpu
