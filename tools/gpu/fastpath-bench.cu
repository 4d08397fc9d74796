// fastpath-bench: a small, self-contained GPU benchmark of toga's small-size fast path
// (the fast-path elements E1-E12, docs/design.md §2.1), for iterating on the core between toga-bench runs. Every figure is taken beside
// the warp-aggregated bump floor (bump-warp) in the same process; medians of 5 timed launches
// after a warm-up, CUDA events around one kernel. Every allocation is checked after the timed
// kernel: nullptr, alignment, bounds, overlap (sorted on the host) and a whole-block pattern
// written by one kernel and verified by another before the free.
// Not part of the CMake build. On the GPU machine:
//   nvcc -std=c++20 -O3 -gencode=arch=compute_90,code=sm_90 -Xptxas -v -Icore/include \
//        -Ibackends/cuda/include tools/gpu/fastpath-bench.cu backends/cuda/src/heap.cu -o fastpath-bench
//   ./fastpath-bench [--threads N] [--reps R] [--sizes 16,64,256,1024] [--edges] [--edge-sizes 16,256,4096]
//                    [--full-mib M] [--full-threads K] [--full-presplit-mib P]
// Output: one table row per (case, size): toga fresh / warm alloc ms, free ms, bump-warp alloc /
// free ms, ratios, failures; exit 1 if any check failed. --edges adds toga-bench's T14 (a) and (b)
// (an exactly full heap of 8 KiB blocks against one twice as large; N requests that all fail on a
// full 256 MiB heap against N on an empty heap), each launch checked. --full-mib and --full-threads
// change (b)'s heap and its launches (fills and timed) to toga-bench T8's shape: --full-mib 1024
// --full-threads 100000 (the fill launch that first saw a nullptr is printed: T8's exhausting round);
// --full-presplit-mib sets that heap's pre-split reserve (0: none; default: half the heap).
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <thread>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#ifdef FASTPATH_PROFILE
// Event counters (config.hpp's TOGA_PROFILE_COUNT) and phase times (TOGA_PROFILE_PHASE: clock64
// cycles summed over the threads that ran the phase): build with -DFASTPATH_PROFILE to print, per
// timed kernel, how many groups took which path and where their cycles went (timings of that
// build are not the figures).
#include "toga/cuda/profile_counters.cuh"
#endif
#ifdef FASTPATH_TIMELINE
// Timeline (-DFASTPATH_TIMELINE, not with FASTPATH_PROFILE): every thread of toga_alloc records
// its start and end (%globaltimer, ns), its latency (clock64 cycles) and its SM; the leader of a
// group marks the slow-path events it went through (config.hpp's events) in its own word, without
// atomics. After the fresh and the first timed warm launch the host prints when threads finished,
// latency quantiles, and latency per path (docs/benchmarks.md "What limits toga, case by case").
struct tl_rec {
  unsigned long long t0, t1;
  unsigned cycles, sm, wslot;  // wslot: %warpid at the end
};
__device__ tl_rec* tl_recs;
__device__ unsigned long long* tl_path;
__device__ unsigned tl_n;
#define TOGA_PROFILE_COUNT(e)                                                      \
  do {                                                                             \
    const unsigned tl_i_ = blockIdx.x * blockDim.x + threadIdx.x;                  \
    if (tl_path && tl_i_ < tl_n) tl_path[tl_i_] |= 1ull << (e);                    \
  } while (0)
#endif
#include "toga/cuda/heap.cuh"

#define CK(x)                                                                                          \
  do {                                                                                                 \
    cudaError_t e_ = (x);                                                                              \
    if (e_ != cudaSuccess) {                                                                           \
      std::fprintf(stderr, "fastpath-bench: %s failed: %s (%s:%d)\n", #x, cudaGetErrorString(e_), __FILE__, __LINE__); \
      std::exit(1);                                                                                    \
    }                                                                                                  \
  } while (0)

namespace {

constexpr unsigned block = 256;
// __launch_bounds__(256, 4): at most 64 registers per thread, so 32 warps per SM fit (docs/usage.md §5:
// the slow paths are compiled into the kernel's call graph and would otherwise set its count).
#define TOGA_BOUNDS __launch_bounds__(block, 4)
// The free kernel's blocks per SM: 5 gives at most 51 registers, 48 in practice (E10's budget);
// -DTOGA_FREE_MIN_BLOCKS=4 for 64.
#ifndef TOGA_FREE_MIN_BLOCKS
#define TOGA_FREE_MIN_BLOCKS 5
#endif

// The names of config.hpp's profiling events, in its order (the profile and the timeline print them).
[[maybe_unused]] const char* const event_names[] = {
    "tb_alloc",    "tb_climb",       "tb_visit",  "tb_restart", "tb_claim_lost", "tb_lock_spin", "tb_split",
    "tb_propagate", "tb_free",       "tb_merge",  "tb_t_stage1", "tb_t_search",  "tb_t_split",   "ua_group",
    "ua_fast",     "ua_take_failed", "ua_no_pin", "ua_short",   "ua_emptied",    "ua_lost_bits", "ua_find_step",
    "ua_grow",     "ua_reconcile",   "ua_lock_spin", "ua_free_group", "ua_free_cold", "ua_retire", "ua_steal", "ua_reclaim",
    "ua_reclaim_walk", "ua_fallback", "ua_t_reclaim_walk", "gw_attempt", "gw_overlap", "gw_post", "gw_t_attempt", "gw_t_wait",
    "ua_t_stage1", "ua_t_grow", "ua_t_fallback", "tb_top_fail", "tb_gave_up", "sem_reserve", "sem_break", "sem_poll", "sem_cas_lost", "ua_fallback_take", "tb_stale_fail", "tb_drain", "tb_refused"};
static_assert(sizeof event_names / sizeof event_names[0] == toga::prof_event_count, "one name per profiling event");

// (what == nullptr: reset the counters without printing)
void print_profile(const char* what) {
#ifdef FASTPATH_PROFILE
  const char* const* names = event_names;
  unsigned long long h[64];
  CK(cudaMemcpyFromSymbol(h, toga_prof, sizeof h));
  if (what) {
    // the phase times (config.hpp's "time:" events), in millions of cycles summed over threads
    auto is_time = [](unsigned i) {
      return i == toga::prof_tbuddy_t_stage1 || i == toga::prof_tbuddy_t_search || i == toga::prof_tbuddy_t_split ||
             i == toga::prof_ua_t_reclaim_walk || i == toga::prof_gw_t_attempt || i == toga::prof_gw_t_wait ||
             i == toga::prof_ua_t_stage1 || i == toga::prof_ua_t_grow || i == toga::prof_ua_t_fallback;
    };
    std::printf("      profile %-12s", what);
    for (unsigned i = 0; i < toga::prof_event_count; ++i)
      if (h[i] && !is_time(i)) std::printf(" %s=%llu", names[i], h[i]);
    bool any_time = false;
    for (unsigned i = 0; i < toga::prof_event_count; ++i)
      if (h[i] && is_time(i)) {
        if (!any_time) std::printf(" | Mcycles:");
        any_time = true;
        std::printf(" %s=%.1f", names[i], static_cast<double>(h[i]) / 1e6);
      }
    std::printf("\n");
  }
  std::memset(h, 0, sizeof h);
  CK(cudaMemcpyToSymbol(toga_prof, h, sizeof h));
#else
  (void)what;
#endif
}

// How the kernels take the heap: by value (the default), or `const __grid_constant__` (A/B of the
// parameter's local copy: -DTOGA_HEAP_PARAM='const __grid_constant__ toga::cuda::heap_ref')
#ifndef TOGA_HEAP_PARAM
#define TOGA_HEAP_PARAM toga::cuda::heap_ref
#endif
__global__ void TOGA_BOUNDS toga_alloc(TOGA_HEAP_PARAM h, void** out, unsigned n, unsigned size) {
  const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
#ifdef FASTPATH_TIMELINE
  if (i >= n) return;
  unsigned long long g0, g1;
  unsigned sm;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(g0));
  const long long c0 = clock64();
  out[i] = h.allocate(size);
  const long long c1 = clock64();
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(g1));
  unsigned ws;
  asm volatile("mov.u32 %0, %%smid;" : "=r"(sm));
  asm volatile("mov.u32 %0, %%warpid;" : "=r"(ws));
  if (tl_recs) tl_recs[i] = tl_rec{g0, g1, static_cast<unsigned>(c1 - c0), sm, ws};
#else
  if (i < n) out[i] = h.allocate(size);
#endif
}
__global__ void __launch_bounds__(block, TOGA_FREE_MIN_BLOCKS) toga_free(TOGA_HEAP_PARAM h, void** in, unsigned n) {
  const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) h.deallocate(in[i]);
}
// churn (T5): every thread `iters` times allocates, writes its block's first and last word, frees
__global__ void TOGA_BOUNDS toga_churn(TOGA_HEAP_PARAM h, unsigned n, unsigned size, unsigned iters, unsigned* fails) {
  const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  for (unsigned k = 0; k < iters; ++k) {
    auto* p = static_cast<volatile std::uint64_t*>(h.allocate(size));
    if (!p) {
      atomicAdd(fails, 1u);
      continue;
    }
    const std::uint64_t tag = (std::uint64_t{i} << 32) | k;
    p[0] = tag;
    p[size / 8 - 1] = tag;
    if (p[0] != tag || p[size / 8 - 1] != tag) atomicAdd(fails + 1, 1u);
    h.deallocate(const_cast<std::uint64_t*>(p));
  }
}

// the floor: lanes of a warp sum their sizes (shuffle prefix over the active lanes), one lane does
// one atomicAdd on a global offset
__global__ void TOGA_BOUNDS bumpw_alloc(char* base, unsigned long long* top, unsigned long long cap, void** out, unsigned n,
                                                     unsigned size) {
  const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const unsigned mask = __activemask();
  const unsigned lane = threadIdx.x % 32;
  unsigned long long mine = size, incl = size;
  for (unsigned d = 1; d < 32; d <<= 1) {
    const unsigned long long v = __shfl_up_sync(mask, incl, d);
    if (lane >= d && ((mask >> (lane - d)) & 1u)) incl += v;
  }
  const unsigned last = 31 - __clz(mask);
  const unsigned long long total = __shfl_sync(mask, incl, last);
  unsigned long long start = 0;
  if (lane == last) start = atomicAdd(top, total);
  start = __shfl_sync(mask, start, last);
  const unsigned long long off = start + incl - mine;
  out[i] = off + size <= cap ? base + off : nullptr;
}
__global__ void TOGA_BOUNDS bumpw_free(void** in, unsigned n, unsigned* sink) {
  const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n && in[i] == reinterpret_cast<void*>(1)) atomicAdd(sink, 1u);  // reads the pointer, frees nothing
}
__global__ void TOGA_BOUNDS bumpw_churn(char* base, unsigned long long* top, unsigned long long cap, unsigned n, unsigned size,
                                                     unsigned iters, unsigned* fails) {
  const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  for (unsigned k = 0; k < iters; ++k) {
    const unsigned mask = __activemask();
    const unsigned lane = threadIdx.x % 32;
    const unsigned leader = __ffs(mask) - 1;
    const unsigned rank = __popc(mask & ((1u << lane) - 1));
    unsigned long long start = 0;
    if (lane == leader) start = atomicAdd(top, static_cast<unsigned long long>(__popc(mask)) * size);
    start = __shfl_sync(mask, start, leader);
    const unsigned long long off = start + static_cast<unsigned long long>(rank) * size;
    if (off + size > cap) {
      atomicAdd(fails, 1u);
      continue;
    }
    auto* p = reinterpret_cast<volatile std::uint64_t*>(base + off);
    const std::uint64_t tag = (std::uint64_t{i} << 32) | k;
    p[0] = tag;
    p[size / 8 - 1] = tag;
    if (p[0] != tag || p[size / 8 - 1] != tag) atomicAdd(fails + 1, 1u);
  }
}

// checks: fill every block with its pattern, then verify it
__global__ void fill(void** ptrs, unsigned n, unsigned size) {
  const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n || !ptrs[i]) return;
  auto* w = static_cast<std::uint64_t*>(ptrs[i]);
  for (unsigned k = 0; k < size / 8; ++k) w[k] = (std::uint64_t{i} << 20) ^ k ^ 0x5a5a000000000000ull;
}
__global__ void verify(void** ptrs, unsigned n, unsigned size, unsigned* bad) {
  const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n || !ptrs[i]) return;
  const auto* w = static_cast<const std::uint64_t*>(ptrs[i]);
  for (unsigned k = 0; k < size / 8; ++k)
    if (w[k] != ((std::uint64_t{i} << 20) ^ k ^ 0x5a5a000000000000ull)) {
      atomicAdd(bad, 1u);
      return;
    }
}

// counts the nullptr slots of [0, n) (T14's failing launches)
__global__ void count_nulls(void* const* ptrs, unsigned long long n, unsigned* nulls) {
  const unsigned long long i = blockIdx.x * 1ull * blockDim.x + threadIdx.x;
  if (i < n && ptrs[i] == nullptr) atomicAdd(nulls, 1u);
}

struct timer {
  cudaEvent_t a, b;
  timer() {
    CK(cudaEventCreate(&a));
    CK(cudaEventCreate(&b));
  }
  ~timer() {
    cudaEventDestroy(a);
    cudaEventDestroy(b);
  }
  const char* what = "";
  double deadline_s = 30;
  template <class F>
  float ms(F&& launch) {
    CK(cudaEventRecord(a));
    launch();
    CK(cudaGetLastError());
    CK(cudaEventRecord(b));
    // watchdog: a kernel that runs past the deadline is reported (a hang is a bug) and the
    // process exits, which tears the context down
    const auto t0 = std::chrono::steady_clock::now();
    while (cudaEventQuery(b) == cudaErrorNotReady) {
      if (std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() > deadline_s) {
        std::printf("\nWATCHDOG: %s still running after %.0f s: a hang\n", what, deadline_s);
        std::fflush(stdout);
        std::_Exit(3);
      }
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    CK(cudaEventSynchronize(b));
    float t = 0;
    CK(cudaEventElapsedTime(&t, a, b));
    return t;
  }
};

float median(std::vector<float> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Host checks of one allocation round: counts nullptrs, misaligned, out-of-bounds and
// overlapping blocks, and pattern mismatches (written by `fill`, read by `verify`).
struct check_result {
  unsigned nulls = 0, misaligned = 0, outside = 0, overlaps = 0, corrupt = 0;
  unsigned bad() const { return misaligned + outside + overlaps + corrupt; }
};
check_result check_round(void** d_ptrs, unsigned n, unsigned size, const char* base, std::uint64_t heap_bytes, unsigned* d_bad) {
  check_result r;
  const unsigned grid = (n + block - 1) / block;
  fill<<<grid, block>>>(d_ptrs, n, size);
  CK(cudaMemset(d_bad, 0, sizeof(unsigned)));
  verify<<<grid, block>>>(d_ptrs, n, size, d_bad);
  CK(cudaGetLastError());
  CK(cudaMemcpy(&r.corrupt, d_bad, sizeof(unsigned), cudaMemcpyDeviceToHost));
  std::vector<std::uintptr_t> p(n);
  CK(cudaMemcpy(p.data(), d_ptrs, n * sizeof(void*), cudaMemcpyDeviceToHost));
  std::vector<std::uintptr_t> live;
  live.reserve(n);
  const std::uintptr_t lo = reinterpret_cast<std::uintptr_t>(base), hi = lo + heap_bytes;
  const std::uintptr_t align = std::min<unsigned>(size, 128) < 16 ? 16 : std::min<unsigned>(size, 128);
  for (auto v : p) {
    if (!v) {
      ++r.nulls;
      continue;
    }
    if ((v - lo) % align) ++r.misaligned;
    if (v < lo || v + size > hi) ++r.outside;
    live.push_back(v);
  }
  std::sort(live.begin(), live.end());
  for (std::size_t i = 1; i < live.size(); ++i)
    if (live[i] < live[i - 1] + size) ++r.overlaps;
  return r;
}

#ifdef FASTPATH_TIMELINE
struct timeline {
  tl_rec* recs = nullptr;
  unsigned long long* path = nullptr;
  unsigned n = 0;
  explicit timeline(unsigned n_) : n(n_) {
    CK(cudaMalloc(&recs, std::size_t{n} * sizeof(tl_rec)));
    CK(cudaMalloc(&path, std::size_t{n} * sizeof(unsigned long long)));
  }
  ~timeline() {
    cudaFree(recs);
    cudaFree(path);
  }
  timeline(const timeline&) = delete;
  timeline& operator=(const timeline&) = delete;
  void arm(bool on) {
    if (on) {
      CK(cudaMemset(recs, 0, std::size_t{n} * sizeof(tl_rec)));
      CK(cudaMemset(path, 0, std::size_t{n} * sizeof(unsigned long long)));
    }
    tl_rec* r = on ? recs : nullptr;
    unsigned long long* p = on ? path : nullptr;
    CK(cudaMemcpyToSymbol(tl_recs, &r, sizeof r));
    CK(cudaMemcpyToSymbol(tl_path, &p, sizeof p));
    CK(cudaMemcpyToSymbol(tl_n, &n, sizeof n));
  }
  void report(const char* what) const {
    std::vector<tl_rec> r(n);
    std::vector<unsigned long long> p(n);
    CK(cudaMemcpy(r.data(), recs, r.size() * sizeof(tl_rec), cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(p.data(), path, p.size() * sizeof(unsigned long long), cudaMemcpyDeviceToHost));
    unsigned long long t0 = ~0ull, t1 = 0;
    for (auto& x : r) t0 = std::min(t0, x.t0), t1 = std::max(t1, x.t1);
    auto q = [](std::vector<double> v, double f) {
      std::sort(v.begin(), v.end());
      return v.empty() ? 0.0 : v[std::min(v.size() - 1, static_cast<std::size_t>(f * v.size()))];
    };
    std::vector<double> start, end, lat;
    for (auto& x : r) start.push_back((x.t0 - t0) / 1e3), end.push_back((x.t1 - t0) / 1e3), lat.push_back(x.cycles);
    std::printf("  timeline %s: span %.1f us (globaltimer)\n", what, (t1 - t0) / 1e3);
    std::printf("    started by (us):  50%% %.1f  90%% %.1f  99%% %.1f  100%% %.1f\n", q(start, .5), q(start, .9), q(start, .99), q(start, 1));
    std::printf("    finished by (us): 10%% %.1f  50%% %.1f  90%% %.1f  99%% %.1f  99.9%% %.1f  100%% %.1f\n", q(end, .1), q(end, .5),
                q(end, .9), q(end, .99), q(end, .999), q(end, 1));
    std::printf("    latency (cycles): 50%% %.0f  90%% %.0f  99%% %.0f  99.9%% %.0f  max %.0f\n", q(lat, .5), q(lat, .9), q(lat, .99),
                q(lat, .999), q(lat, 1));
    // per warp: the OR of its lanes' event marks (the group leader's), its slowest lane
    // the allocation path's events (not the phase clocks, the group counts, the unused one, the frees)
    auto shown = [](unsigned b) {
      return b < toga::prof_tbuddy_t_stage1 || (b > toga::prof_ua_fast && b != toga::prof_ua_emptied &&
                                                (b < toga::prof_ua_free_group || b > toga::prof_ua_retire));
    };
    const char* const* ev = event_names;
    const unsigned nev = toga::prof_event_count;
    std::vector<std::vector<double>> by(nev + 1);
    std::vector<std::vector<double>> endby(nev + 1);
    for (unsigned w = 0; w * 32 < n; ++w) {
      unsigned long long m = 0;
      double l = 0, e = 0;
      for (unsigned k = w * 32; k < std::min(n, w * 32 + 32); ++k) m |= p[k], l = std::max(l, lat[k]), e = std::max(e, end[k]);
      const unsigned long long slow = m & ~((1ull << 13) | (1ull << 14));  // beyond ua_group / ua_fast
      if (slow == 0) by[nev].push_back(l), endby[nev].push_back(e);
      for (unsigned b = 0; b < nev; ++b)
        if (shown(b) && (m >> b & 1)) by[b].push_back(l), endby[b].push_back(e);
    }
    std::printf("    per warp (slowest lane), by event: %-14s %7s %9s %9s %9s %11s\n", "event", "warps", "p50 cyc", "p99 cyc", "max cyc",
                "p99 end us");
    for (unsigned b = 0; b <= nev; ++b) {
      if (by[b].empty()) continue;
      std::printf("      %-14s %7zu %9.0f %9.0f %9.0f %11.1f\n", b == nev ? "fast only" : ev[b], by[b].size(), q(by[b], .5),
                  q(by[b], .99), q(by[b], 1), q(endby[b], .99));
    }
    // per SM: threads served and when its last thread finished
    std::vector<double> sm_end(1024, 0.0);
    std::vector<unsigned> sm_n(1024, 0);
    unsigned nsm = 0;
    for (unsigned i = 0; i < n; ++i) {
      const unsigned s = r[i].sm % 1024;
      sm_end[s] = std::max(sm_end[s], end[i]);
      ++sm_n[s];
      nsm = std::max(nsm, s + 1);
    }
    std::vector<double> se, sn;
    for (unsigned s = 0; s < nsm; ++s)
      if (sm_n[s]) se.push_back(sm_end[s]), sn.push_back(sm_n[s]);
    std::printf("    per SM (%zu): last thread done (us) min %.1f  p50 %.1f  max %.1f; threads min %.0f  p50 %.0f  max %.0f\n", se.size(),
                q(se, 0), q(se, .5), q(se, 1), q(sn, 0), q(sn, .5), q(sn, 1));
    // warps per (SM, pin slot of 32) under the two mappings design.md §8.2 compares: the block id's
    // ((block x 8 + warp) mod 32, until 2026-11-30) and the hardware slot's (%warpid mod 32)
    std::vector<double> by_id(nsm * 32, 0.0), by_hw(nsm * 32, 0.0);
    for (unsigned w = 0; w * 32 < n; ++w) {
      const tl_rec& x = r[w * 32];
      const unsigned blk = w * 32 / block, wib = (w * 32 % block) / 32;
      if (x.sm < nsm) by_id[x.sm * 32 + (blk * 8 + wib) % 32] += 1, by_hw[x.sm * 32 + x.wslot % 32] += 1;
    }
    std::vector<double> hw_ids;
    for (unsigned i = 0; i < n; i += 32) hw_ids.push_back(r[i].wslot);
    std::printf("    warps per (SM, pin slot): block-id mapping min %.0f p10 %.0f p50 %.0f p90 %.0f max %.0f; %%warpid mapping min %.0f p10 %.0f p50 %.0f p90 %.0f max %.0f; %%warpid max %.0f\n",
                q(by_id, 0), q(by_id, .1), q(by_id, .5), q(by_id, .9), q(by_id, 1), q(by_hw, 0), q(by_hw, .1), q(by_hw, .5), q(by_hw, .9),
                q(by_hw, 1), q(hw_ids, 1));
  }
};
#endif

std::vector<unsigned> parse_list(const char* s) {
  std::vector<unsigned> v;
  for (const char* p = s; *p;) {
    char* end = nullptr;
    v.push_back(static_cast<unsigned>(std::strtoul(p, &end, 10)));
    p = *end == ',' ? end + 1 : end;
    if (end == p && *p) break;
  }
  return v;
}

}  // namespace

int main(int argc, char** argv) {
  unsigned n = 1u << 20, reps = 5, churn_n = 1u << 18, iters = 16;
  std::vector<unsigned> sizes = {16, 64, 256, 1024};
  std::vector<unsigned> churn_sizes = {16, 256};
  std::uint64_t heap_bytes = std::uint64_t{8} << 30;
  double watchdog_s = 30;
  bool edges = false;
  std::vector<unsigned> edge_sizes = {16, 256, 4096};
  std::uint64_t full_mib = 256;
  unsigned full_threads = 0;  // 0 (not given): --threads
  std::uint64_t full_presplit = ~std::uint64_t{0};  // (b)'s full heap's pre-split reserve in bytes (~0: the default)
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> const char* {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "fastpath-bench: %s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--threads") n = static_cast<unsigned>(std::strtoul(next(), nullptr, 10));
    else if (a == "--reps") reps = static_cast<unsigned>(std::strtoul(next(), nullptr, 10));
    else if (a == "--sizes") sizes = parse_list(next());
    else if (a == "--churn-sizes") churn_sizes = parse_list(next());
    else if (a == "--heap-gib") heap_bytes = std::strtoull(next(), nullptr, 10) << 30;
    else if (a == "--watchdog-s") watchdog_s = std::strtod(next(), nullptr);
    else if (a == "--edges") edges = true;
    else if (a == "--edge-sizes") edge_sizes = parse_list(next()), edges = true;
    else if (a == "--full-mib") full_mib = std::strtoull(next(), nullptr, 10), edges = true;
    else if (a == "--full-presplit-mib") full_presplit = std::strtoull(next(), nullptr, 10) << 20, edges = true;
    else if (a == "--full-threads") {
      full_threads = static_cast<unsigned>(std::strtoul(next(), nullptr, 10)), edges = true;
      if (full_threads == 0) {
        std::fprintf(stderr, "fastpath-bench: --full-threads must be a positive number of threads (at most --threads)\n");
        return 2;
      }
    }
    else {
      std::fprintf(stderr,
                   "fastpath-bench: unknown option %s (--threads N --reps R --sizes a,b --churn-sizes a,b --heap-gib G --edges "
                   "--edge-sizes a,b --full-mib M --full-threads K --full-presplit-mib P)\n",
                   a.c_str());
      return 2;
    }
  }
  if (n == 0 || reps == 0 || sizes.empty() || (edges && edge_sizes.empty()) || full_mib == 0 || full_mib > (1u << 20) || full_threads > n) {
    std::fprintf(stderr, "fastpath-bench: --threads, --reps, --sizes, --edge-sizes and --full-mib must be positive, --full-mib at most "
                         "1048576 and --full-threads at most --threads\n");
    return 2;
  }
  if (full_threads == 0) full_threads = n;
  for (const auto* list : {&sizes, &churn_sizes, &edge_sizes})
    for (unsigned v : *list)
      if (v < 8 || v > (1u << 20) || v % 8 != 0) {
        std::fprintf(stderr, "fastpath-bench: size %u in --sizes, --churn-sizes or --edge-sizes: give whole bytes from 8 to 1048576, "
                             "multiples of 8 (the checks write 8-byte words)\n", v);
        return 2;
      }
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  cudaDeviceProp prop{};
  CK(cudaGetDeviceProperties(&prop, 0));
  int driver = 0;
  CK(cudaDriverGetVersion(&driver));
  std::printf("GPU %s, %d SMs, driver %d; %u threads, %u-thread blocks, %u timed reps (median) after a warm-up\n", prop.name,
              prop.multiProcessorCount, driver, n, block, reps);
  {
    cudaFuncAttributes fa{}, ff{};
    CK(cudaFuncGetAttributes(&fa, toga_alloc));
    CK(cudaFuncGetAttributes(&ff, toga_free));
    std::printf("registers: toga_alloc %d, toga_free %d (stack %zu / %zu B)\n", fa.numRegs, ff.numRegs, fa.localSizeBytes, ff.localSizeBytes);
  }

  void** d_ptrs = nullptr;
  unsigned* d_bad = nullptr;
  CK(cudaMalloc(&d_ptrs, std::size_t{n} * sizeof(void*)));
  CK(cudaMalloc(&d_bad, 4 * sizeof(unsigned)));
  char* bump_base = nullptr;
  unsigned long long* bump_top = nullptr;
  const unsigned long long bump_cap = std::uint64_t{n} * 1024 * 2;
  CK(cudaMalloc(&bump_base, bump_cap));
  CK(cudaMalloc(&bump_top, sizeof(unsigned long long)));
  const unsigned grid = (n + block - 1) / block;
  timer tm;
  tm.deadline_s = watchdog_s;
  unsigned failures = 0;

  std::printf("\n%-6s %6s | %9s %9s %9s | %9s %9s | %8s %8s %8s | %s\n", "case", "size", "fresh ms", "alloc ms", "free ms",
              "bumpw a", "bumpw f", "x fresh", "x alloc", "x free", "checks");
  for (unsigned size : sizes) {
    // bump-warp, same process
    std::vector<float> ba, bf;
    for (unsigned r = 0; r <= reps; ++r) {
      CK(cudaMemset(bump_top, 0, sizeof(unsigned long long)));
      tm.what = "bump-warp";
      const float a = tm.ms([&] { bumpw_alloc<<<grid, block>>>(bump_base, bump_top, bump_cap, d_ptrs, n, size); });
      const float f = tm.ms([&] { bumpw_free<<<grid, block>>>(d_ptrs, n, d_bad); });
      if (r > 0) ba.push_back(a), bf.push_back(f);
    }
    // toga: the first round on a fresh heap, then warm rounds
    toga::cuda::heap h(heap_bytes);
#ifdef FASTPATH_TIMELINE
    timeline tl(n);
#endif
    std::vector<float> ta, tf;
    float fresh = 0;
    check_result worst;
    for (unsigned r = 0; r <= reps; ++r) {
      print_profile("(before)");
      static char label[96];
      std::snprintf(label, sizeof label, "toga_alloc %u B round %u", size, r);
      tm.what = label;
#ifdef FASTPATH_TIMELINE
      tl.arm(r == 0 || r == 2);
#endif
      const float a = tm.ms([&] { toga_alloc<<<grid, block>>>(h.ref(), d_ptrs, n, size); });
      if (r <= 1) print_profile(r == 0 ? "fresh alloc" : "warm alloc");
#ifdef FASTPATH_TIMELINE
      if (r == 0 || r == 2) {
        tl.arm(false);
        std::printf("  %u B round %u: %.4f ms\n", size, r, a);
        tl.report(r == 0 ? "fresh" : "warm");
      }
#endif
      const check_result c = check_round(d_ptrs, n, size, static_cast<const char*>(h.ref().view().small.base), h.capacity(), d_bad);
      if (c.bad() + c.nulls > worst.bad() + worst.nulls) worst = c;
      print_profile("(checks)");
      std::snprintf(label, sizeof label, "toga_free %u B round %u", size, r);
      const float f = tm.ms([&] { toga_free<<<grid, block>>>(h.ref(), d_ptrs, n); });
      if (r <= 1) print_profile("free");
      if (r == 0) fresh = a;
      else ta.push_back(a), tf.push_back(f);
    }
    const toga::heap_statistics st = h.stats();
    const bool ok = worst.bad() == 0 && worst.nulls == 0 && st.used_bytes == 0 && st.failed == 0;
    failures += !ok;
    const float ma = median(ta), mf = median(tf), mba = median(ba), mbf = median(bf);
    std::printf("%-6s %6u | %9.4f %9.4f %9.4f | %9.4f %9.4f | %8.2f %8.2f %8.2f | %s (null %u, misaligned %u, outside %u, overlap %u, corrupt %u; used %llu)\n",
                "T1", size, fresh, ma, mf, mba, mbf, fresh / mba, ma / mba, mf / mbf, ok ? "ok" : "FAILED", worst.nulls,
                worst.misaligned, worst.outside, worst.overlaps, worst.corrupt, static_cast<unsigned long long>(st.used_bytes));
  }
  // churn (T5)
  std::printf("\n%-6s %6s | %12s %12s | %8s | %s\n", "case", "size", "toga Mpair/s", "bumpw Mpair/s", "ratio", "checks");
  for (unsigned size : churn_sizes) {
    toga::cuda::heap h(heap_bytes);
    const unsigned cg = (churn_n + block - 1) / block;
    std::vector<float> t, b;
    unsigned fails[2] = {0, 0};
    for (unsigned r = 0; r <= reps; ++r) {
      CK(cudaMemset(d_bad, 0, 2 * sizeof(unsigned)));
      print_profile("(before)");
      static char clabel[96];
      std::snprintf(clabel, sizeof clabel, "toga_churn %u B round %u", size, r);
      tm.what = clabel;
      const float x = tm.ms([&] { toga_churn<<<cg, block>>>(h.ref(), churn_n, size, iters, d_bad); });
      if (r <= 1) print_profile("churn");
      unsigned f[2];
      CK(cudaMemcpy(f, d_bad, sizeof f, cudaMemcpyDeviceToHost));
      fails[0] += f[0], fails[1] += f[1];
      CK(cudaMemset(bump_top, 0, sizeof(unsigned long long)));
      const float y = tm.ms([&] { bumpw_churn<<<cg, block>>>(bump_base, bump_top, bump_cap, churn_n, size, iters, d_bad + 2); });
      if (r > 0) t.push_back(x), b.push_back(y);
    }
    const double pairs = double(churn_n) * iters;
    const toga::heap_statistics st = h.stats();
    const bool ok = fails[0] == 0 && fails[1] == 0 && st.used_bytes == 0;
    failures += !ok;
    std::printf("%-6s %6u | %12.0f %12.0f | %8.2f | %s (nullptr %u, corrupt %u)\n", "T5", size, pairs / (median(t) * 1e3), pairs / (median(b) * 1e3),
                median(t) / median(b), ok ? "ok" : "FAILED", fails[0], fails[1]);
  }
  // T14 (toga-bench's edges, docs/benchmarks.md "T14"): (a) n x 8 KiB filling a heap of exactly
  // that size, against a heap twice as large; (b) n requests on a 256 MiB heap filled with blocks
  // of the size until a whole launch failed, against n requests on an empty heap. Each timed
  // launch is checked (nullptrs counted, patterns on the successful rounds) and freed after.
  if (edges) {
    std::printf("\n%-6s %6s | %-14s %9s %9s | %8s | %s\n", "case", "size", "launch", "ref ms", "edge ms", "x ref", "checks");
    unsigned* d_nulls = d_bad + 2;
    auto nulls_of = [&](void** p, unsigned long long m) {
      CK(cudaMemset(d_nulls, 0, sizeof(unsigned)));
      count_nulls<<<static_cast<unsigned>((m + block - 1) / block), block>>>(p, m, d_nulls);
      CK(cudaGetLastError());
      unsigned k = 0;
      CK(cudaMemcpy(&k, d_nulls, sizeof k, cudaMemcpyDeviceToHost));
      return k;
    };
    // reps + 1 launches of n x size into slots p (the first a warm-up), each checked and freed;
    // returns the median ms, and the worst round's checks in c
    // `observe`: the timeline of rounds 0 (fresh) and 2 (warm) in a -DFASTPATH_TIMELINE build, the
    // path counters of rounds 0 and 1 in a -DFASTPATH_PROFILE build (T14 (a)'s fill-exact and (b)'s
    // launch on a full heap)
    auto timed = [&](toga::cuda::heap& h, void** p, unsigned nt, unsigned size, const char* what, check_result& c, bool expect_full,
                     [[maybe_unused]] bool observe = false) {
      std::vector<float> t;
      const unsigned grid = (nt + block - 1) / block;
#ifdef FASTPATH_TIMELINE
      timeline tl(observe ? n : 1);
#endif
      for (unsigned r = 0; r <= reps; ++r) {
        static char label[96];
        std::snprintf(label, sizeof label, "T14 %s %u B round %u", what, size, r);
        tm.what = label;
#ifdef FASTPATH_TIMELINE
        if (observe) tl.arm(r == 0 || r == 2);
#endif
        if (observe) print_profile("(before)");
        const float ms = tm.ms([&] { toga_alloc<<<grid, block>>>(h.ref(), p, nt, size); });
        if (observe && r <= 1) print_profile(r == 0 ? "fresh fill" : "warm fill");
#ifdef FASTPATH_TIMELINE
        if (observe && (r == 0 || r == 2)) {
          tl.arm(false);
          std::printf("  %s %u B round %u: %.4f ms\n", what, size, r, ms);
          tl.report(r == 0 ? "fresh" : "warm");
        }
#endif
        if (expect_full) {  // c.nulls: the fewest failures of a round (the most requests served)
          const unsigned k = nulls_of(p, nt);
          if (r == 0 || k < c.nulls) c.nulls = k;
        } else {
          const check_result k = check_round(p, nt, size, static_cast<const char*>(h.ref().view().small.base), h.capacity(), d_bad);
          if (k.bad() + k.nulls > c.bad() + c.nulls) c = k;
        }
        CK(cudaDeviceSynchronize());
        toga_free<<<grid, block>>>(h.ref(), p, nt);
        CK(cudaGetLastError());
        CK(cudaDeviceSynchronize());
        if (r > 0) t.push_back(ms);
      }
      return median(t);
    };
    // (a)
    {
      constexpr unsigned s = 8192;
      std::uint64_t exact = 1;
      while (exact < std::uint64_t{n} * s) exact <<= 1;
      check_result ch, cf;
      float half = 0, full = 0;
      {
        toga::cuda::heap h(2 * exact);
        half = timed(h, d_ptrs, n, s, "fill-half", ch, false);
      }
      unsigned long long used = 0;
      {
        toga::cuda::heap h(exact);
        full = timed(h, d_ptrs, n, s, "fill-exact", cf, false, true);
        used = h.stats().used_bytes;
      }
      const bool ok = ch.bad() + ch.nulls + cf.bad() + cf.nulls == 0 && used == 0;
      failures += !ok;
      std::printf("%-6s %6u | %-14s %9.4f %9.4f | %8.2f | %s (null %u / %u, bad %u / %u)\n", "T14a", s, "fill-exact", half, full,
                  full / half, ok ? "ok" : "FAILED", ch.nulls, cf.nulls, ch.bad(), cf.bad());
    }
    // (b); with --full-mib / --full-threads, T8's shape (a 1 GiB heap, launches of 100,000)
    for (unsigned size : edge_sizes) {
      const unsigned nb = full_threads, gb = (nb + block - 1) / block;
      const std::uint64_t full_bytes = full_mib << 20;
      const unsigned long long most = full_bytes / std::max(size, 16u) + 2ull * nb;  // fill slots, at most
      check_result ce;
      float empty = 0;
      {
        std::uint64_t hb = std::uint64_t{1} << 30;
        while (hb < 4ull * nb * std::max(size, 16u)) hb <<= 1;
        toga::cuda::heap h(hb);
        empty = timed(h, d_ptrs, nb, size, "alloc-empty", ce, false);
      }
      void** fill_ptrs = nullptr;
      CK(cudaMalloc(&fill_ptrs, (most + nb) * sizeof(void*)));
      toga::cuda::heap_options ho;
      ho.presplit_bytes = full_presplit;
      toga::cuda::heap h(full_bytes, ho);
      unsigned long long filled = 0, last = 0, blocks = 0, launches = 0;
      float fill_ms = 0;  // all fill launches
      bool seen_null = false;  // the first fill launch with a nullptr is printed
      print_profile(nullptr);
      while (filled + nb <= most) {
        tm.what = "T14 fill";
        const float ms = tm.ms([&] { toga_alloc<<<gb, block>>>(h.ref(), fill_ptrs + filled, nb, size); });
        last = nulls_of(fill_ptrs + filled, nb);
        blocks += nb - last;
        filled += nb;
        fill_ms += ms;
        ++launches;
        if (last > 0 && !seen_null) {
          seen_null = true;
          static char label[96];
          std::snprintf(label, sizeof label, "exhausting fill %u B", size);
          print_profile(label);
          std::printf("  %u B: fill launch %llu of %u threads was the first with nullptrs: %.4f ms, %llu nullptrs\n", size, launches,
                      nb, ms, last);
        } else {
          print_profile(nullptr);
        }
        if (last == nb) break;
      }
      std::printf("  %u B: %llu fill launches, %.3f ms in all, %llu blocks served on a %llu MiB heap (%.4f of it)\n", size, launches,
                  fill_ms, blocks, static_cast<unsigned long long>(full_mib), double(blocks) * size / double(full_bytes));
      check_result cf;
      const float full = timed(h, fill_ptrs + filled, nb, size, "alloc-full", cf, true, true);
      const unsigned served = nb - cf.nulls;  // the most of any round
      const unsigned bad = check_round(fill_ptrs, static_cast<unsigned>(filled), size, static_cast<const char*>(h.ref().view().small.base),
                                       h.capacity(), d_bad).bad();
      toga_free<<<static_cast<unsigned>((filled + block - 1) / block), block>>>(h.ref(), fill_ptrs, static_cast<unsigned>(filled));
      CK(cudaGetLastError());
      CK(cudaDeviceSynchronize());
      const unsigned long long used = h.stats().used_bytes;
      CK(cudaFree(fill_ptrs));
      const bool ok = ce.bad() + ce.nulls + bad == 0 && last == nb && used == 0;
      failures += !ok;
      std::printf("%-6s %6u | %-14s %9.4f %9.4f | %8.2f | %s (empty: null %u; full: %llu blocks before, at most %u served in a round, bad %u; used after %llu)\n",
                  "T14b", size, "alloc-full", empty, full, full / empty, ok ? "ok" : "FAILED", ce.nulls, blocks, served, bad, used);
    }
  }
  cudaFree(d_ptrs);
  cudaFree(d_bad);
  cudaFree(bump_base);
  cudaFree(bump_top);
  std::printf("\n%s\n", failures ? "SOME CHECKS FAILED" : "all checks passed");
  return failures ? 1 : 0;
}
