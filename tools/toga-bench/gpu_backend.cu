// toga-bench GPU backend: cases T1-T13 of docs/benchmarks.md on one CUDA device, for four
// allocators measured in the same process:
//
//   toga         toga::cuda::heap_ref (allocate / deallocate; the warp-cooperative overloads with
//                cooperative_groups::coalesced_threads() in T6).
//   cuda-malloc  CUDA's device malloc / free. Its heap is fixed for the process before the first
//                kernel launch: cudaDeviceSetLimit(cudaLimitMallocHeapSize, max(16 GiB, toga
//                heap)) runs once, on the first run_case. It has no warp API (T6 uses plain
//                malloc; the row says so).
//   bump-warp    the floor, and the reference of every "x bump" ratio: a cudaMalloc'd buffer and
//                a 64-bit counter; allocate = the lanes that call it together
//                (cooperative_groups::coalesced_threads) scan their sizes rounded up to 16 B
//                (shfl_up over the active lanes), the last of them does one atomicAdd of the
//                total, shfl hands out the base; nullptr past the end. Its free kernel is the
//                floor of a free: each thread loads its block pointer (kept alive by an empty
//                asm, so that the load is not optimised away) and releases nothing. Every case
//                uses this allocate, T6 included; the counter is reset between repetitions.
//   bump         the same buffer with one atomicAdd per thread and a runtime size (which ptxas
//                does not aggregate: ~25x slower than bump-warp); free does nothing at all (the
//                pointer load is optimised away). An extra row, never a ratio's reference; T6
//                uses the same per-thread allocate (no warp API).
//
// Memory (sized for an 80 GB H100): the toga heap for T1-T7 and T9 is 16 GiB (options::heap_bytes
// overrides), the bump buffer (shared by bump-warp and bump, which never run at once) and the
// cuda-malloc heap are max(16 GiB, toga heap); they are made lazily and kept across cases. T8 uses a fresh 1 GiB heap / buffer, T10/T11 a fresh heap
// per graph, T12 constructs 8 GiB heaps. Every case point starts from an empty allocator: the toga
// heap is reset (heap::reset) before its warm-up; between repetitions only the bump counter is set
// to 0, while toga and cuda-malloc keep the state their free kernels left (every block freed), so
// the timed repetitions see warm allocators, as in the protocol's "warm-up, then repetitions".
//
// Timing: CUDA events around exactly one kernel launch; one untimed warm-up before
// options::reps timed repetitions (for round-based cases, T8, T9, T11, the rounds are the
// samples; see there). Every launch is followed by cudaGetLastError and a synchronisation; every
// CUDA call is checked and a failure throws std::runtime_error naming the call and the error.
// Kernels use 256-thread blocks.
//
// Slow allocators (T1-T7): a case point of N > 16384 threads is first probed (untimed, twice:
// the first launch also loads the module) with 16384 threads; if N threads would take longer
// than options::slow_budget_ms per repetition (linear projection of the probe; the alloc and
// free kernels together), the point runs with the largest power of two >= 256 threads that fits.
// row::threads is the count used, row::note says "cut from N threads (slow)". The same rule holds
// for every allocator; throughput (ops/s) stays comparable.
//
// Verification (every case; a nullptr where memory should have been available counts in
// row::failures; everything below in row::corrupt):
//   * after a timed allocation kernel, an untimed kernel writes a per-allocation pattern into the
//     whole block (4-byte word w of allocation `id`: uint32(mix64(id ^ mix64(seed))) ^ w; one warp
//     per block) and a second untimed kernel verifies it before the free kernel runs: each block
//     that does not read back counts;
//   * on the first timed repetition the pointers are copied to the host and sorted: a block that
//     overlaps the next one, a block not aligned to 16 B, and (toga: heap_ref::contains; bump: the
//     buffer) a block outside the allocator's memory count.
// For independent repetitions (T1-T7, T10) failures and corrupt are those of the worst
// repetition, comparable with ops_per_rep; for sequences of rounds (T8, T9, T11) they are totals.
//
// Cases (S: bytes per allocation; options::sizes / options::threads override the defaults):
//   T1  N = 2^20 threads each allocate S in {16, 64, 256, 1024, 4096, 8192} (--sweep: 4..8192
//       step 4); a separate kernel frees. Rows alloc / free, ops_per_rep = threads.
//   T2  2^20 threads, lane 0 of each of the 32,768 warps allocates S in {16, 4096}; free likewise.
//       ops_per_rep = warps.
//   T3  N = 2^20, S = mixed_size(tid, hi, seed), hi in {64, 512, 4096, 8192} (options::sizes
//       gives hi). Rows size 0, param "hi=64".
//   T4  scaling: threads {1, 32, 1024, 32768, 2^20} (full: every 2^0..2^20), S in {16, 256,
//       4096}; rows alloc / free with threads set.
//   T5  churn: N = 2^18 threads, 16 iterations each of (allocate S, write the first and last
//       word with a tag, read both back through volatile loads: a mismatch is corrupt, free);
//       S in {16, 256, 4096}; op "churn", ops_per_rep = N * 16 pairs; one kernel timed.
//   T6  T1 through the warp-cooperative API (param "warp").
//   T7  S in {16, 64, 512, 4096} KiB, threads = toga heap capacity / 2 / S for every allocator.
//   T8  out of memory: a fresh 1 GiB toga heap (bump: 1 GiB buffer); rounds of 100,000 threads
//       allocate S in {16, 256, 4096, 8192, 16384} without freeing (one slot per allocation kept on the
//       device; 8 and 16 KiB since 2026-12-02: the 8 KiB exhausting round was 45 ms, unseen for five days)
//       until a round sees a nullptr, then one more round (exhaustion must still answer nullptr
//       cleanly; metric "extra_round_allocations" counts what it still got). After each round an
//       untimed kernel writes the pattern of the round's blocks; at the end every live block is
//       verified and the host checks overlaps and bounds. op "oom", ms = one entry, the sum of
//       the round kernels; metrics "utilisation" = successful allocations * S / 2^30, "rounds"
//       (including the extra one); failures = 0 by design. cuda-malloc: not measured (its heap
//       is fixed for the process).
//   T9  fragmentation: N = 100,000 live blocks of S in {16, 256, 4096}; rounds (quick 20, full
//       100, after one untimed warm-up round): each slot is freed and allocated again with
//       probability 1/2 (mix64 of seed, round, slot), one timed kernel per round. After each
//       round: the new blocks get their pattern, every live block is verified, the host copies the
//       pointers, checks overlaps and bounds and takes the address range max(p + S) - min(p).
//       op "rounds", ms = per-round times, ops_per_rep = mean allocations + frees of a round;
//       metrics "range_ratio" (largest range / (N * S)) and "range_ratio_final". bump stops (with
//       a note) before a round would overflow its buffer: it never frees, its range only grows.
//   T10 for each graph of options::graphs: the plan of graph_plan.hpp (rounds quick 10, full
//       100, 10,000 edges per round); a fresh toga heap of max(64 MiB, 4 * peak_bytes) rounded up
//       to a power of two (bump: the same, or what its never-freed total needs); one thread per
//       vertex allocates capacity_bytes(degree) and copies its CSR neighbours. Timed per
//       repetition; after each, a digest kernel compares every vertex with plan.digest_initial
//       (a mismatch is corrupt; a vertex whose allocation failed mismatches too) and a kernel
//       frees every array. op "build", param = graph name, ops_per_rep = vertices.
//   T11 after an untimed build: each insert round is one kernel (one thread per item: a vertex
//       that outgrows its array allocates capacity_bytes(degree + k), copies, frees the old one,
//       then appends), then each delete round (remove one occurrence of each listed neighbour by
//       swapping with the last, a neighbour not found is corrupt; if the degree fits a smaller
//       capacity: allocate it, copy, free the old one). Digests are checked after all inserts
//       (digest_peak) and after all deletes (digest_initial). One untimed warm-up pass of the
//       whole sequence, then one timed pass: rows "insert" / "delete", ms = per-round times,
//       ops_per_rep = edges per round (the mean over rounds); the insert row's failures include
//       the untimed build's. Metrics heap_bytes, peak_bytes on T10 and T11 rows.
//   T12 toga: construct an 8 GiB heap, synchronise, host clock from before the constructor until
//       the heap is ready; destroying it is timed separately (metric destroy_ms, the median;
//       device_init_ms = heap::init_ms). bump: cudaMalloc of 8 GiB + cudaMemset of the counter
//       (cudaFree as destroy). cuda-malloc: not measurable. op "init".
//   T13 cudaFuncGetAttributes of the T1 alloc and free kernels of each allocator (and the
//       warp-cooperative alloc kernels, param "warp"): metrics registers, local_bytes; no ms.
//
// The kernels are in gpu_kernels.cuh and are instantiated in the gpu_kernels_*.cu units, one of
// toga's per unit (each inlines the allocator, and ptxas takes minutes for each): this file launches
// them through the launchers declared there. Kernel instantiations are kept few: one
// alloc kernel per allocator with runtime parameters (fixed or mixed size, every thread or lane 0
// only) plus its warp-cooperative form for toga and bump; one free kernel per allocator (runtime:
// warp API, pointer stride); one churn, one fragmentation-round and one graph-update kernel per
// allocator (the graph build is an insert into empty arrays); pattern and digest kernels are not
// templates.
//
// What a thread does for one item of a case is written once for both backends, in workloads.hpp
// (alloc_item, free_item, churn_item, frag_item, graph_update_item, the pattern and the digest);
// the kernels here only map threads to items (and T2's lane 0) and call it with gpu_lane (counters
// by atomicAdd, usable() a compile-time true) or, where a kernel writes into its blocks (churn,
// graph updates), checked_lane (usable: aligned and inside the allocator's memory). The bodies are force-inlined:
// each kernel executes what it did with the body written in it (same PTX). T12 (construction),
// T13 (kernel attributes) and T14 (GPU only, on alloc_kernel / free_kernel) have no body of their
// own.
#include <cooperative_groups.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <new>
#include <optional>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "bench.hpp"
#include "graph.hpp"
#include "graph_plan.hpp"
#include "gpu_kernels.cuh"

namespace toga::bench {

#ifndef TOGA_BENCH_TENANT_KERNELS
#define TOGA_BENCH_TENANT_KERNELS 1  // CMake sets it: option TOGA_BENCH_TENANT_KERNELS
#endif

#ifdef TOGA_BENCH_PROFILE
namespace gpu {
namespace {
std::vector<profile_reader>& profile_readers() {
  static std::vector<profile_reader> r;
  return r;
}
}  // namespace
void add_profile_reader(profile_reader r) { profile_readers().push_back(r); }
}  // namespace gpu
#endif

namespace {

using namespace gpu;  // the device side: gpu_kernels.cuh

constexpr std::uint64_t KiB = 1024;
constexpr std::uint64_t MiB = 1024 * KiB;
constexpr std::uint64_t GiB = 1024 * MiB;
constexpr std::uint64_t default_heap_bytes = 16 * GiB;  // toga heap for T1-T7, T9
constexpr std::uint64_t probe_threads = 16384;          // slow-allocator probe
constexpr std::uint64_t min_cut_threads = 256;

// ---- errors and device memory -----------------------------------------------------------------

std::string cuda_text(cudaError_t e) { return std::string(cudaGetErrorName(e)) + " (" + cudaGetErrorString(e) + ")"; }

//! Throws std::runtime_error naming `call` unless `e` is cudaSuccess.
void check(cudaError_t e, const std::string& call) {
  if (e == cudaSuccess) return;
  (void)cudaGetLastError();  // clear a non-sticky error
  throw std::runtime_error("toga-bench gpu: " + call + ": " + cuda_text(e));
}
#define BENCH_CUDA(call) check((call), #call)

//! Checks a launch and waits for the kernel; `what` names the kernel in the error.
void finish_launch(const std::string& what) {
  check(cudaGetLastError(), "launching " + what);
  check(cudaDeviceSynchronize(), "cudaDeviceSynchronize after " + what);
}

//! Owning device array of n T's (cudaMalloc / cudaFree). Move-only.
template <class T>
class dev_array {
 public:
  dev_array() = default;
  dev_array(std::size_t n, const std::string& what) : n_(n) {
    if (n == 0) return;
    const cudaError_t e = cudaMalloc(reinterpret_cast<void**>(&p_), n * sizeof(T));
    if (e != cudaSuccess) {
      p_ = nullptr;
      check(e, "cudaMalloc of " + std::to_string(n * sizeof(T)) + " B for " + what);
    }
  }
  ~dev_array() {
    if (p_ != nullptr) (void)cudaFree(p_);
  }
  dev_array(dev_array&& o) noexcept : p_(std::exchange(o.p_, nullptr)), n_(std::exchange(o.n_, 0)) {}
  dev_array& operator=(dev_array&& o) noexcept {
    if (this != &o) {
      if (p_ != nullptr) (void)cudaFree(p_);
      p_ = std::exchange(o.p_, nullptr);
      n_ = std::exchange(o.n_, 0);
    }
    return *this;
  }
  dev_array(const dev_array&) = delete;
  dev_array& operator=(const dev_array&) = delete;
  T* get() const { return p_; }
  std::size_t size() const { return n_; }

 private:
  T* p_ = nullptr;
  std::size_t n_ = 0;
};

template <class T>
dev_array<T> upload(const std::vector<T>& v, const std::string& what) {
  dev_array<T> d(v.size(), what);
  if (!v.empty()) check(cudaMemcpy(d.get(), v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice), "cudaMemcpy of " + what + " to the device");
  return d;
}

template <class T>
std::vector<T> download(const T* d, std::size_t n, const std::string& what) {
  std::vector<T> v(n);
  if (n != 0) check(cudaMemcpy(v.data(), d, n * sizeof(T), cudaMemcpyDeviceToHost), "cudaMemcpy of " + what + " to the host");
  return v;
}

std::uint64_t pow2_at_least(std::uint64_t x) {
  std::uint64_t p = 1;
  while (p < x) p <<= 1;
  return p;
}

std::uint64_t round16(std::uint64_t b) { return (b + 15) & ~std::uint64_t{15}; }

std::string join_note(const std::string& a, const std::string& b) {
  if (a.empty()) return b;
  if (b.empty()) return a;
  return a + "; " + b;
}

//! Counts vertices whose neighbour digest differs from `expect`.
__global__ void digest_kernel(const vstate* state, std::uint32_t n, const std::uint64_t* expect, unsigned long long* bad) {
  const std::uint64_t v = global_thread();
  if (v >= n) return;
  const vstate s = state[v];
  if (vertex_digest(s) != expect[v]) atomicAdd(bad, 1ull);
}

// ---- host side ----------------------------------------------------------------------------------

unsigned grid_for(std::uint64_t threads) {
  const std::uint64_t blocks = std::max<std::uint64_t>(1, (threads + block_threads - 1) / block_threads);
  if (blocks > static_cast<std::uint64_t>(INT_MAX)) throw std::runtime_error("toga-bench gpu: " + std::to_string(threads) + " threads do not fit one grid");
  return static_cast<unsigned>(blocks);
}

enum class akind { toga, cuda_malloc, bump_warp, bump };

akind parse_allocator(const std::string& a) {
  if (a == "toga") return akind::toga;
  if (a == "cuda-malloc") return akind::cuda_malloc;
  if (a == "bump-warp") return akind::bump_warp;
  if (a == "bump") return akind::bump;
  throw std::invalid_argument("toga-bench gpu: unknown allocator '" + a + "' (this backend measures toga, cuda-malloc, bump-warp, bump)");
}

const char* kind_name(akind k) {
  switch (k) {
    case akind::toga: return "toga";
    case akind::cuda_malloc: return "cuda-malloc";
    case akind::bump_warp: return "bump-warp";
    case akind::bump: return "bump";
  }
  return "?";
}

//! bump-warp and bump: a buffer and a counter, no free.
bool is_bump(akind k) { return k == akind::bump || k == akind::bump_warp; }

//! A bump allocator's memory: the buffer and its counter.
struct bump_buffer {
  dev_array<char> mem;
  dev_array<unsigned long long> counter;
  bump_buffer() = default;
  bump_buffer(std::uint64_t bytes, const std::string& what)
      : mem(bytes, "the bump buffer (" + what + ")"), counter(1, "the bump counter") {
    BENCH_CUDA(cudaMemset(counter.get(), 0, sizeof(unsigned long long)));
  }
};

//! What one measurement allocates from.
struct target {
  akind kind = akind::toga;
  toga::cuda::heap* heap = nullptr;  // toga
  bump_buffer* bump = nullptr;       // bump
};

//! Calls f(policy) with the policy of `t` (instantiates f for each policy).
template <class F>
void with_policy(const target& t, F&& f) {
  switch (t.kind) {
    case akind::toga:
#if TOGA_BENCH_TENANT_KERNELS
      if (t.heap->has_tenants()) f(toga_tenant_policy{t.heap->tenant(0)});
      else f(toga_policy{t.heap->ref()});
#else
      f(toga_policy{t.heap->ref()});  // (make_heap refuses --tenants in this build)
#endif
      return;
    case akind::cuda_malloc: f(malloc_policy{}); return;
    case akind::bump_warp: f(bump_warp_policy{t.bump->mem.get(), t.bump->mem.size(), t.bump->counter.get()}); return;
    case akind::bump: f(bump_policy{t.bump->mem.get(), t.bump->mem.size(), t.bump->counter.get()}); return;
  }
}

//! Empties the allocator: toga heap::reset, bump counter = 0 (cuda-malloc: its free kernels did it).
void reset_target(const target& t) {
  if (t.kind == akind::toga) {
    t.heap->reset();
  } else if (is_bump(t.kind)) {
    BENCH_CUDA(cudaMemset(t.bump->counter.get(), 0, sizeof(unsigned long long)));
    BENCH_CUDA(cudaDeviceSynchronize());
  }
}

//! Between the repetitions of one point: bump starts over (it never frees); toga and cuda-malloc
//! keep their state, so that the warm-up warms them (their free kernels emptied them).
void rewind_bump(const target& t) {
  if (is_bump(t.kind)) reset_target(t);
}

//! A toga heap of `bytes` for case `what`, with superbins of `o.superbin_bytes` (0: toga's choice,
//! and toga's choice too where the heap is too small for them: the option tunes the large heaps).
std::unique_ptr<toga::cuda::heap> make_heap(std::uint64_t bytes, const std::string& what, const options& o) {
  try {
    toga::cuda::heap_options ho;
    if (o.superbin_bytes != 0 && o.superbin_bytes < bytes) ho.superbin_bytes = o.superbin_bytes;
    ho.superbin_sharing = o.superbin_sharing;
    ho.presplit_bytes = o.presplit_bytes;
    ho.tenants = o.tenants;
#if !TOGA_BENCH_TENANT_KERNELS
    if (o.tenants != 0)
      throw std::runtime_error("toga-bench gpu: --tenants needs the tenant kernels, which this build left out "
                               "(-DTOGA_BENCH_TENANT_KERNELS=OFF, toga-gpu build --no-tenant-kernels): build it with them");
#endif
    return std::make_unique<toga::cuda::heap>(bytes, ho);
  } catch (const toga::bad_alloc& e) {
    throw std::runtime_error("toga-bench gpu: cannot construct the " + format_bytes(bytes) + " toga heap for " + what + ": " + e.what());
  }
}

//! Whether block [addr, addr + size) lies in the allocator's memory (empty function: unknown).
using bounds_fn = std::function<bool(std::uintptr_t, std::uint64_t)>;

bounds_fn bounds_of(const target& t) {
  if (t.kind == akind::toga && t.heap->has_tenants()) {
    const toga::cuda::tenant_ref ref = t.heap->tenant(0);
    return [ref](std::uintptr_t a, std::uint64_t s) {
      return ref.contains(reinterpret_cast<const void*>(a)) && ref.contains(reinterpret_cast<const void*>(a + (s ? s : 1) - 1));
    };
  }
  if (t.kind == akind::toga) {
    const toga::cuda::heap_ref ref = t.heap->ref();
    return [ref](std::uintptr_t a, std::uint64_t s) {
      return ref.contains(reinterpret_cast<const void*>(a)) && ref.contains(reinterpret_cast<const void*>(a + (s ? s : 1) - 1));
    };
  }
  if (is_bump(t.kind)) {
    const auto lo = reinterpret_cast<std::uintptr_t>(t.bump->mem.get());
    const std::uint64_t cap = t.bump->mem.size();
    return [lo, cap](std::uintptr_t a, std::uint64_t s) { return a >= lo && a - lo + s <= cap; };
  }
  return {};
}

//! Sorts `blocks` by address and counts blocks that overlap the next one, are not 16 B aligned
//! or lie outside `in`.
template <class Block, class Addr, class Size>
std::uint64_t check_blocks(std::vector<Block>& blocks, Addr addr, Size size, const bounds_fn& in) {
  std::sort(blocks.begin(), blocks.end(), [&](const Block& x, const Block& y) { return addr(x) < addr(y); });
  std::uint64_t bad = 0;
  for (std::size_t i = 0; i < blocks.size(); ++i) {
    const std::uintptr_t a = addr(blocks[i]);
    const std::uint64_t s = size(blocks[i]);
    if (i + 1 < blocks.size() && a + s > addr(blocks[i + 1])) ++bad;
    if (a % 16 != 0) ++bad;
    if (in && !in(a, s)) ++bad;
  }
  return bad;
}

//! Host check of slots [0, count) with sizes `sizes.of(id_base + i)` (nullptr slots skipped).
std::uint64_t check_slots(void* const* dslots, std::uint64_t count, const size_rule& sizes, std::uint64_t id_base, const bounds_fn& in) {
  const std::vector<void*> p = download(dslots, count, "the block pointers");
  if (sizes.hi == 0) {
    std::vector<std::uintptr_t> v;
    v.reserve(count);
    for (void* x : p)
      if (x != nullptr) v.push_back(reinterpret_cast<std::uintptr_t>(x));
    const std::uint64_t s = sizes.size;
    return check_blocks(v, [](std::uintptr_t a) { return a; }, [s](std::uintptr_t) { return s; }, in);
  }
  std::vector<std::pair<std::uintptr_t, std::uint64_t>> v;
  v.reserve(count);
  for (std::uint64_t i = 0; i < count; ++i)
    if (p[i] != nullptr) v.emplace_back(reinterpret_cast<std::uintptr_t>(p[i]), sizes.of(id_base + i));
  return check_blocks(v, [](const auto& b) { return b.first; }, [](const auto& b) { return b.second; }, in);
}

//! The largest power of two >= 256 threads (below n) whose projected time fits the budget, or n.
std::uint64_t cut_threads(std::uint64_t n, std::uint64_t probed, double probe_ms, double budget_ms) {
  if (budget_ms <= 0 || probe_ms <= 0) return n;
  const double projected = probe_ms * static_cast<double>(n) / static_cast<double>(probed);
  if (projected <= budget_ms) return n;
  const double fit = budget_ms / probe_ms * static_cast<double>(probed);
  std::uint64_t c = min_cut_threads;
  while (static_cast<double>(c * 2) <= fit && c * 2 < n) c *= 2;
  return std::min(c, n);
}

//! One allocation-case point (T1-T4, T6, T7).
struct pair_point {
  std::string case_id;
  std::string param;
  std::string label;  //!< for progress: "256 B", "hi=512"
  std::uint64_t row_size = 0;
  size_rule sizes;
  std::uint64_t threads = 0;
  bool lane0 = false;
  bool warp = false;
  std::string note;
};

struct rep_result {
  double alloc_ms = 0;
  double free_ms = 0;
  std::uint64_t failures = 0;
  std::uint64_t corrupt = 0;
};

std::string version_text(int v) { return std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10); }

// ---- the backend ----------------------------------------------------------------------------------

class gpu_backend final : public backend {
 public:
  gpu_backend() = default;
  ~gpu_backend() override {
    heap_.reset();
    bump_.reset();
    if (ev_start_ != nullptr) (void)cudaEventDestroy(ev_start_);
    if (ev_stop_ != nullptr) (void)cudaEventDestroy(ev_stop_);
  }
  gpu_backend(const gpu_backend&) = delete;
  gpu_backend& operator=(const gpu_backend&) = delete;

  std::string name() const override { return "gpu"; }
  std::vector<std::string> allocators() const override { return {"toga", "cuda-malloc", "bump-warp", "bump"}; }

  std::optional<std::string> unavailable() const override {
    int n = 0;
    const cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) {
      (void)cudaGetLastError();
      return "no CUDA device (cudaGetDeviceCount: " + cuda_text(e) +
             "); run on a machine with an NVIDIA GPU or use --allocators toga-sim";
    }
    if (n == 0)
      return std::string("no CUDA device (cudaGetDeviceCount returned 0); run on a machine with an NVIDIA GPU or use --allocators toga-sim");
    return std::nullopt;
  }

  std::map<std::string, std::string> environment() const override {
    std::map<std::string, std::string> env;
    int rt = 0;
    if (cudaRuntimeGetVersion(&rt) == cudaSuccess) env["cuda_runtime"] = version_text(rt);
    int drv = 0;
    if (cudaDriverGetVersion(&drv) == cudaSuccess) env["driver"] = drv ? version_text(drv) : "none";
    (void)cudaGetLastError();
    if (const auto why = unavailable()) {
      env["gpu"] = "none: " + *why;
      return env;
    }
    int dev = 0;
    cudaDeviceProp p{};
    if (cudaGetDevice(&dev) != cudaSuccess || cudaGetDeviceProperties(&p, dev) != cudaSuccess) {
      (void)cudaGetLastError();
      env["gpu"] = "unknown (cudaGetDeviceProperties failed)";
      return env;
    }
    env["gpu"] = p.name;
    env["device"] = std::to_string(dev);
    env["sms"] = std::to_string(p.multiProcessorCount);
    env["cc"] = std::to_string(p.major) + "." + std::to_string(p.minor);
    char mem[32];
    std::snprintf(mem, sizeof mem, "%.1f", static_cast<double>(p.totalGlobalMem) / static_cast<double>(GiB));
    env["memory_gib"] = mem;
    return env;
  }

  void run_case(const std::string& id, const std::vector<std::string>& allocs, const options& o, sink& out) override {
    static const std::map<std::string, void (gpu_backend::*)(const std::vector<akind>&, const options&, sink&)> cases = {
        {"T1", &gpu_backend::t1},   {"T2", &gpu_backend::t2},   {"T3", &gpu_backend::t3},   {"T4", &gpu_backend::t4},
        {"T5", &gpu_backend::t5},   {"T6", &gpu_backend::t6},   {"T7", &gpu_backend::t7},   {"T8", &gpu_backend::t8},
        {"T9", &gpu_backend::t9},   {"T10", &gpu_backend::t10}, {"T11", &gpu_backend::t11}, {"T12", &gpu_backend::t12},
        {"T13", &gpu_backend::t13}, {"T14", &gpu_backend::t14},
    };
    const auto c = cases.find(id);
    if (c == cases.end()) throw std::invalid_argument("toga-bench gpu: unknown case '" + id + "' (T1 .. T13)");
    std::vector<akind> kinds;
    for (const std::string& a : allocs) kinds.push_back(parse_allocator(a));
    ensure_ready(o);
    (this->*(c->second))(kinds, o, out);
  }

  std::string heap_problem(const std::string& id, const options& o) const override {
    if (unavailable()) return "";  // the run reports that itself
    // What the cases keep live at once on the heap of T1-T7 and T9 (T8, T10-T12 size their own
    // heaps; T7 sizes its thread count to half the heap). Cut thread counts only lower this.
    const std::uint64_t cap = toga_capacity(o);
    int dev = 0, sms = 132;
    if (cudaGetDevice(&dev) != cudaSuccess || cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess) {
      (void)cudaGetLastError();
      sms = 132;
    }
    // The three heaps of T1-T7 and T9 live at once: toga's (--heap rounded up to a power of two),
    // cuda-malloc's device heap and bump-warp's buffer (both max(16 GiB, toga's)). Without room
    // for all three, cuda-malloc's first kernel fails to launch (cudaErrorLaunchOutOfResources).
    const bool big_case = id == "T1" || id == "T2" || id == "T3" || id == "T4" || id == "T5" || id == "T6" || id == "T7" || id == "T9";
    if (big_case && !ready_) {
      std::size_t free_b = 0, total_b = 0;
      if (cudaMemGetInfo(&free_b, &total_b) == cudaSuccess) {
        const std::uint64_t need = cap + 2 * big_bytes(o);
        if (need > free_b)
          return "--heap " + (o.heap_bytes ? format_bytes(o.heap_bytes) : std::string("(default)")) + " gives toga a " +
                 format_bytes(cap) + " heap (a power of two), and cuda-malloc's heap and bump-warp's buffer take " +
                 format_bytes(big_bytes(o)) + " each beside it: " + format_bytes(need) + " in all, but the GPU has " +
                 format_bytes(free_b) + " free: use a --heap of at most " +
                 format_bytes(pow2_at_least(std::max<std::uint64_t>(free_b / 3, 4 * KiB) / 2 + 1)) +
                 " (and fewer --threads or smaller --sizes where the case needs more)";
      } else {
        (void)cudaGetLastError();
      }
    }
    // heap.cu's default: one arena per SM, at most one per 2 MiB of heap
    const unsigned arenas = static_cast<unsigned>(std::max<std::uint64_t>(1, std::min<std::uint64_t>(static_cast<std::uint64_t>(sms), cap / (2 * MiB))));
    const std::uint64_t mega = std::uint64_t{1} << 20;
    auto sizes = [&](std::vector<std::uint64_t> d) { return o.sizes.empty() ? d : o.sizes; };
    auto threads = [&](std::vector<std::uint64_t> d) { return o.threads.empty() ? d : o.threads; };
    std::vector<heap_demand> demands;
    auto add = [&](std::uint64_t blocks, std::uint64_t size, const std::string& how) {
      demands.push_back({id + " " + format_bytes(size) + " x " + how, blocks, size});
    };
    if (id == "T1" || id == "T6") {
      for (auto n : threads({mega}))
        for (auto s : (o.sweep && o.sizes.empty() && id == "T1") ? std::vector<std::uint64_t>{8192} : t1_sizes(o))
          add(n, s, std::to_string(n) + " threads");
    } else if (id == "T2") {
      for (auto n : threads({mega}))
        for (auto s : sizes({16, 4096})) add((n + 31) / 32, s, std::to_string((n + 31) / 32) + " warps");
    } else if (id == "T3") {
      for (auto n : threads({mega}))
        for (auto hi : sizes({64, 512, 4096, 8192})) add(n, std::max<std::uint64_t>(hi, 16), std::to_string(n) + " threads (mixed sizes up to hi)");
    } else if (id == "T4") {
      for (auto n : threads({mega}))
        for (auto s : sizes({16, 256, 4096})) add(n, s, std::to_string(n) + " threads");
    } else if (id == "T5") {
      for (auto n : threads({std::uint64_t{1} << 18}))
        for (auto s : sizes({16, 256, 4096})) add(n, s, std::to_string(n) + " threads");
    } else if (id == "T9") {
      for (auto s : sizes({16, 256, 4096})) add(100000, s, "100000 live blocks");
    }
    return check_heap(demands, cap, arenas, "toga",
                      o.heap_bytes ? "--heap " + format_bytes(o.heap_bytes) : "the default heap (" + format_bytes(default_heap_bytes) + ")");
  }

 private:
  // ---- state ----
  bool ready_ = false;
  std::uint64_t malloc_limit_ = 0;
  cudaEvent_t ev_start_ = nullptr;
  cudaEvent_t ev_stop_ = nullptr;
  std::unique_ptr<toga::cuda::heap> heap_;
  std::unique_ptr<bump_buffer> bump_;
  dev_array<void*> slots_;
  dev_array<unsigned long long> counters_;  // 0 failures, 1 corrupt, 2 missing, 3 digest
  std::map<std::string, std::shared_ptr<const graph_plan>> plans_;

  static std::uint64_t toga_capacity(const options& o) {
    return std::max<std::uint64_t>(4 * KiB, pow2_at_least(o.heap_bytes ? o.heap_bytes : default_heap_bytes));
  }
  static std::uint64_t big_bytes(const options& o) { return std::max(default_heap_bytes, toga_capacity(o)); }

  //! First use: the device must exist; the cuda-malloc heap limit is set before any launch.
  void ensure_ready(const options& o) {
    if (ready_) return;
    if (const auto why = unavailable()) throw std::runtime_error("toga-bench gpu: " + *why);
    const std::uint64_t limit = big_bytes(o);
    BENCH_CUDA(cudaDeviceSetLimit(cudaLimitMallocHeapSize, limit));
    std::size_t got = 0;
    BENCH_CUDA(cudaDeviceGetLimit(&got, cudaLimitMallocHeapSize));
    malloc_limit_ = got;
    BENCH_CUDA(cudaEventCreate(&ev_start_));
    BENCH_CUDA(cudaEventCreate(&ev_stop_));
    counters_ = dev_array<unsigned long long>(8, "the counters");
    ready_ = true;
  }

  target big_target(akind k, const options& o) {
    target t;
    t.kind = k;
    if (k == akind::toga) {
      const std::uint64_t cap = toga_capacity(o);
      if (!heap_ || heap_->capacity() != cap) {
        heap_.reset();
        heap_ = make_heap(cap, "T1-T7 and T9", o);
      }
      t.heap = heap_.get();
    } else if (is_bump(k)) {
      const std::uint64_t bytes = big_bytes(o);
      if (!bump_ || bump_->mem.size() != bytes) {
        bump_.reset();
        bump_ = std::make_unique<bump_buffer>(bytes, format_bytes(bytes));
      }
      t.bump = bump_.get();
    }
    return t;
  }

  void ensure_slots(std::uint64_t n) {
    if (slots_.size() < n) {
      slots_ = dev_array<void*>();
      slots_ = dev_array<void*>(n, "the block pointers");
    }
  }

  void zero_counters() { BENCH_CUDA(cudaMemset(counters_.get(), 0, 8 * sizeof(unsigned long long))); }
  std::vector<unsigned long long> read_counters() { return download(counters_.get(), 8, "the counters"); }
  unsigned long long* counter(int i) const { return counters_.get() + i; }

  //! Milliseconds of exactly one launch (events around it); checks and synchronises.
  template <class Launch>
  double timed(const std::string& what, Launch&& launch) {
    BENCH_CUDA(cudaEventRecord(ev_start_));
    launch();
    check(cudaGetLastError(), "launching " + what);
    BENCH_CUDA(cudaEventRecord(ev_stop_));
    check(cudaEventSynchronize(ev_stop_), "cudaEventSynchronize after " + what);
    check(cudaDeviceSynchronize(), "cudaDeviceSynchronize after " + what);
    float ms = 0;
    BENCH_CUDA(cudaEventElapsedTime(&ms, ev_start_, ev_stop_));
    return ms;
  }

  //! Writes (verify = false) or checks the pattern of t's blocks in slots [0, count); returns the
  //! bad blocks: in both modes those outside t's memory (their slots become nullptr: see
  //! pattern_kernel), and when verifying those that do not hold the pattern.
  std::uint64_t pattern(const target& t, void* const* slots, std::uint64_t count, const size_rule& sizes, std::uint64_t id_base,
                        std::uint64_t seed, bool verify, std::int64_t only_round = -1) {
    if (count == 0) return 0;
    BENCH_CUDA(cudaMemset(counter(1), 0, sizeof(unsigned long long)));
    const pattern_args a{slots, count, sizes, id_base, seed, only_round, verify ? 1 : 0, counter(1)};
    const std::uint64_t warps = std::min<std::uint64_t>(count, std::uint64_t{1} << 18);
    with_policy(t, [&](const auto& pol) {
      gpu::launch_pattern(grid_for(warps * 32), pol, a);
    });
    finish_launch(verify ? "the pattern verify kernel" : "the pattern fill kernel");
    return read_counters()[1];
  }

  // -- alloc / free kernels, dispatched by allocator --

  template <class P>
  static void launch_alloc(const P& pol, const alloc_args& a, bool warp) {
    if constexpr (P::has_warp) {
      if (warp) {
        gpu::launch_alloc<P, true>(grid_for(a.threads), pol, a);
        return;
      }
    }
    gpu::launch_alloc<P, false>(grid_for(a.threads), pol, a);
  }

  void run_alloc(const target& t, const alloc_args& a, bool warp, double* ms) {
    const std::string what = std::string("the ") + kind_name(t.kind) + " alloc kernel";
    with_policy(t, [&](const auto& pol) {
      if (ms != nullptr) {
        *ms = timed(what, [&] { launch_alloc(pol, a, warp); });
      } else {
        launch_alloc(pol, a, warp);
        finish_launch(what);
      }
    });
    print_profile("alloc", a.threads, ms);
  }
  static void print_profile([[maybe_unused]] const char* op, [[maybe_unused]] std::uint64_t threads, [[maybe_unused]] const double* ms) {
#ifdef TOGA_BENCH_PROFILE
    unsigned long long h[64] = {};
    for (gpu::profile_reader r : gpu::profile_readers()) r(h);  // each kernel unit's counters, cleared
    std::fprintf(stderr, "profile %s threads=%llu ms=%.4f", op, static_cast<unsigned long long>(threads), ms ? *ms : -1.0);
    for (unsigned i = 0; i < 64; ++i)
      if (h[i]) std::fprintf(stderr, " e%u=%llu", i, h[i]);
    std::fprintf(stderr, "\n");
#endif
  }

  void run_free(const target& t, const free_args& a, double* ms) {
    const std::string what = std::string("the ") + kind_name(t.kind) + " free kernel";
    with_policy(t, [&](const auto& pol) {
      auto launch = [&] { gpu::launch_free(grid_for(a.threads), pol, a); };
      if (ms != nullptr) {
        *ms = timed(what, launch);
      } else {
        launch();
        finish_launch(what);
      }
    });
    print_profile("free", a.threads, ms);
  }

  free_args slot_free_args(std::uint64_t threads, bool lane0, bool warp) const {
    return free_args{reinterpret_cast<const char*>(slots_.get()), sizeof(void*), threads, lane0 ? 1 : 0, warp ? 1 : 0};
  }

  //! One repetition of an alloc / free point with n threads.
  rep_result alloc_free_rep(const target& t, const pair_point& pt, std::uint64_t n, std::uint64_t seed, bool verify, bool host_check) {
    rep_result r;
    rewind_bump(t);
    zero_counters();
    const std::uint64_t ops = pt.lane0 ? (n + 31) / 32 : n;
    const alloc_args a{slots_.get(), n, pt.sizes, 0, pt.lane0 ? 1 : 0, counter(0)};
    run_alloc(t, a, pt.warp, &r.alloc_ms);
    r.failures = read_counters()[0];
    if (verify) {
      r.corrupt = pattern(t, slots_.get(), ops, pt.sizes, 0, seed, false);
      r.corrupt += pattern(t, slots_.get(), ops, pt.sizes, 0, seed, true);
      if (host_check) r.corrupt += check_slots(slots_.get(), ops, pt.sizes, 0, bounds_of(t));
    }
    run_free(t, slot_free_args(n, pt.lane0, pt.warp), &r.free_ms);
    return r;
  }

  //! The slow-allocator rule: probe with 16384 threads, cut n to fit the budget.
  template <class Probe>
  std::uint64_t choose_threads(std::uint64_t n, const options& o, std::string& note, Probe&& probe) {
    if (n <= probe_threads) return n;
    (void)probe(probe_threads);  // also loads the module
    const double ms = probe(probe_threads);
    const std::uint64_t c = cut_threads(n, probe_threads, ms, o.slow_budget_ms);
    if (c < n) note = join_note(note, "cut from " + std::to_string(n) + " threads (slow)");
    return c;
  }

  void run_pair_point(akind k, const pair_point& pt, const options& o, sink& out) {
    const target t = big_target(k, o);
    const std::uint64_t ops_max = pt.lane0 ? (pt.threads + 31) / 32 : pt.threads;
    ensure_slots(std::max<std::uint64_t>(ops_max, 1));
    std::string note = pt.note;
    if (pt.warp && k == akind::bump) note = join_note(note, "no warp API: per-thread atomicAdd");
    if (pt.warp && k == akind::cuda_malloc) note = join_note(note, "no warp API: plain malloc / free");
    // The probe and the warm-up are the first allocations on a fresh heap: verified too, and
    // their failures and corrupt blocks count (worst single pass, like the repetitions).
    std::uint64_t cold_failures = 0, cold_corrupt = 0;
    const std::uint64_t n = choose_threads(pt.threads, o, note, [&](std::uint64_t m) {
      const rep_result r = alloc_free_rep(t, pt, m, o.seed, true, false);
      cold_failures = std::max(cold_failures, r.failures);
      cold_corrupt = std::max(cold_corrupt, r.corrupt);
      return r.alloc_ms + r.free_ms;
    });
    const std::uint64_t ops = pt.lane0 ? (n + 31) / 32 : n;
    row ra;
    ra.allocator = kind_name(k);
    ra.case_id = pt.case_id;
    ra.op = "alloc";
    ra.param = pt.param;
    ra.size = pt.row_size;
    ra.threads = n;
    ra.ops_per_rep = ops;
    ra.note = note;
    row rf = ra;
    rf.op = "free";
    out.progress(pt.case_id + " " + kind_name(k) + " " + pt.label + (pt.case_id == "T4" ? " x " + std::to_string(n) + " threads" : ""));
    {
      const rep_result w = alloc_free_rep(t, pt, n, o.seed, true, true);  // warm-up, verified
      ra.failures = std::max(cold_failures, w.failures);
      ra.corrupt = std::max(cold_corrupt, w.corrupt);
    }
    for (unsigned rep = 0; rep < o.reps; ++rep) {
      const rep_result r = alloc_free_rep(t, pt, n, o.seed, true, rep == 0);
      ra.ms.push_back(r.alloc_ms);
      rf.ms.push_back(r.free_ms);
      ra.failures = std::max(ra.failures, r.failures);
      ra.corrupt = std::max(ra.corrupt, r.corrupt);
    }
    // T1 from a fresh heap (issue 11: "within 10x from a fresh heap"): the same pass right after a
    // reset, every repetition (toga and bump; cuda-malloc's heap cannot be reset)
    if (pt.case_id == "T1" && k != akind::cuda_malloc) {
      row rc = ra;
      rc.op = "alloc-fresh";
      rc.ms.clear();
      for (unsigned rep = 0; rep < o.reps; ++rep) {
        reset_target(t);
        const rep_result r = alloc_free_rep(t, pt, n, o.seed, true, false);
        rc.ms.push_back(r.alloc_ms);
        rc.failures = std::max(rc.failures, r.failures);
        rc.corrupt = std::max(rc.corrupt, r.corrupt);
      }
      out.add(std::move(rc));
    }
    reset_target(t);
    out.add(std::move(ra));
    out.add(std::move(rf));
  }

  // ---- cases ----

  static std::vector<std::uint64_t> t1_sizes(const options& o) {
    if (!o.sizes.empty()) return o.sizes;
    if (o.sweep) {
      std::vector<std::uint64_t> v;
      for (std::uint64_t s = 4; s <= 8192; s += 4) v.push_back(s);
      return v;
    }
    return {16, 64, 256, 1024, 4096, 8192};
  }
  static std::vector<std::uint64_t> thread_list(const options& o, std::vector<std::uint64_t> dflt) {
    return o.threads.empty() ? dflt : o.threads;
  }

  void t1_like(const std::string& id, bool warp, const std::vector<akind>& kinds, const options& o, sink& out) {
    for (std::uint64_t n : thread_list(o, {std::uint64_t{1} << 20}))
      for (std::uint64_t s : t1_sizes(o))
        for (akind k : kinds) {
          pair_point pt;
          pt.case_id = id;
          pt.param = warp ? "warp" : "";
          pt.label = format_bytes(s) + (warp ? " (warp)" : "");
          pt.row_size = s;
          pt.sizes.size = s;
          pt.threads = n;
          pt.warp = warp;
          run_pair_point(k, pt, o, out);
        }
  }

  void t1(const std::vector<akind>& kinds, const options& o, sink& out) { t1_like("T1", false, kinds, o, out); }
  void t6(const std::vector<akind>& kinds, const options& o, sink& out) { t1_like("T6", true, kinds, o, out); }

  void t2(const std::vector<akind>& kinds, const options& o, sink& out) {
    const std::vector<std::uint64_t> sizes = o.sizes.empty() ? std::vector<std::uint64_t>{16, 4096} : o.sizes;
    for (std::uint64_t n : thread_list(o, {std::uint64_t{1} << 20}))
      for (std::uint64_t s : sizes)
        for (akind k : kinds) {
          pair_point pt;
          pt.case_id = "T2";
          pt.label = format_bytes(s) + " (lane 0)";
          pt.row_size = s;
          pt.sizes.size = s;
          pt.threads = n;
          pt.lane0 = true;
          run_pair_point(k, pt, o, out);
        }
  }

  void t3(const std::vector<akind>& kinds, const options& o, sink& out) {
    const std::vector<std::uint64_t> his = o.sizes.empty() ? std::vector<std::uint64_t>{64, 512, 4096, 8192} : o.sizes;
    for (std::uint64_t hi : his)
      if (hi < 16) throw std::invalid_argument("toga-bench gpu: T3 needs hi >= 16 (got " + std::to_string(hi) + ")");
    for (std::uint64_t n : thread_list(o, {std::uint64_t{1} << 20}))
      for (std::uint64_t hi : his)
        for (akind k : kinds) {
          pair_point pt;
          pt.case_id = "T3";
          pt.param = "hi=" + std::to_string(hi);
          pt.label = pt.param;
          pt.sizes.hi = hi;
          pt.sizes.seed = o.seed;
          pt.threads = n;
          run_pair_point(k, pt, o, out);
        }
  }

  void t4(const std::vector<akind>& kinds, const options& o, sink& out) {
    std::vector<std::uint64_t> ns;
    if (o.prof == profile::full) {
      for (unsigned e = 0; e <= 20; ++e) ns.push_back(std::uint64_t{1} << e);
    } else {
      ns = {1, 32, 1024, 32768, std::uint64_t{1} << 20};
    }
    const std::vector<std::uint64_t> sizes = o.sizes.empty() ? std::vector<std::uint64_t>{16, 256, 4096} : o.sizes;
    for (std::uint64_t s : sizes)
      for (std::uint64_t n : thread_list(o, ns))
        for (akind k : kinds) {
          pair_point pt;
          pt.case_id = "T4";
          pt.param = "threads=" + std::to_string(n);  // the requested count: rows of one point compare even when cut
          pt.label = format_bytes(s);
          pt.row_size = s;
          pt.sizes.size = s;
          pt.threads = n;
          run_pair_point(k, pt, o, out);
        }
  }

  void t5(const std::vector<akind>& kinds, const options& o, sink& out) {
    const std::vector<std::uint64_t> sizes = o.sizes.empty() ? std::vector<std::uint64_t>{16, 256, 4096} : o.sizes;
    constexpr unsigned iterations = 16;
    for (std::uint64_t n0 : thread_list(o, {std::uint64_t{1} << 18}))
      for (std::uint64_t s : sizes)
        for (akind k : kinds) {
          const target t = big_target(k, o);
          auto rep = [&](std::uint64_t n, double* ms) {
            rewind_bump(t);
            zero_counters();
            const churn_args a{n, s, iterations, o.seed, counter(0), counter(1)};
            const std::string what = std::string("the ") + kind_name(k) + " churn kernel";
            with_policy(t, [&](const auto& pol) {
              auto launch = [&] { gpu::launch_churn(grid_for(n), pol, a); };
              if (ms != nullptr) {
                *ms = timed(what, launch);
              } else {
                launch();
                finish_launch(what);
              }
            });
            return read_counters();
          };
          std::string note;
          const std::uint64_t n = choose_threads(n0, o, note, [&](std::uint64_t m) {
            double ms = 0;
            rep(m, &ms);
            return ms;
          });
          row r;
          r.allocator = kind_name(k);
          r.case_id = "T5";
          r.op = "churn";
          r.size = s;
          r.threads = n;
          r.ops_per_rep = n * iterations;
          r.note = note;
          out.progress("T5 " + std::string(kind_name(k)) + " " + format_bytes(s));
          {
            const auto c = rep(n, nullptr);  // warm-up: its failures and corrupt blocks count too
            r.failures = c[0];
            r.corrupt = c[1];
          }
          for (unsigned i = 0; i < o.reps; ++i) {
            double ms = 0;
            const auto c = rep(n, &ms);
            r.ms.push_back(ms);
            r.failures = std::max<std::uint64_t>(r.failures, c[0]);
            r.corrupt = std::max<std::uint64_t>(r.corrupt, c[1]);
          }
          reset_target(t);
          out.add(std::move(r));
        }
  }

  void t7(const std::vector<akind>& kinds, const options& o, sink& out) {
    const std::vector<std::uint64_t> sizes = o.sizes.empty() ? std::vector<std::uint64_t>{16 * KiB, 64 * KiB, 512 * KiB, 4 * MiB} : o.sizes;
    const std::uint64_t cap = toga_capacity(o);
    for (std::uint64_t s : sizes)
      for (akind k : kinds) {
        const std::uint64_t n = s == 0 ? 0 : cap / 2 / s;
        if (n == 0) {
          row r;
          r.allocator = kind_name(k);
          r.case_id = "T7";
          r.op = "alloc";
          r.size = s;
          r.note = "not measured: " + format_bytes(s) + " is more than half the " + format_bytes(cap) + " heap";
          out.add(std::move(r));
          continue;
        }
        pair_point pt;
        pt.case_id = "T7";
        pt.label = format_bytes(s);
        pt.row_size = s;
        pt.sizes.size = s;
        pt.threads = n;
        run_pair_point(k, pt, o, out);
      }
  }

  void t8(const std::vector<akind>& kinds, const options& o, sink& out) {
    const std::vector<std::uint64_t> sizes = o.sizes.empty() ? std::vector<std::uint64_t>{16, 256, 4096, 8192, 16384} : o.sizes;
    constexpr std::uint64_t round_threads = 100000;
    constexpr std::uint64_t bytes = GiB;
    for (std::uint64_t s : sizes)
      for (akind k : kinds) {
        row r;
        r.allocator = kind_name(k);
        r.case_id = "T8";
        r.op = "oom";
        r.size = s;
        r.threads = round_threads;
        if (k == akind::cuda_malloc) {
          r.note = "not measured: cuda-malloc's heap size is fixed for the process at first use (" + format_bytes(malloc_limit_) +
                   " here), T8 needs 1 GiB";
          out.add(std::move(r));
          continue;
        }
        if (s == 0) throw std::invalid_argument("toga-bench gpu: T8 needs sizes > 0");
        out.progress("T8 " + std::string(kind_name(k)) + " " + format_bytes(s));
        std::unique_ptr<toga::cuda::heap> h;
        std::unique_ptr<bump_buffer> bb;
        target t;
        t.kind = k;
        if (k == akind::toga) {
          h = make_heap(bytes, "T8", o);
          t.heap = h.get();
        } else {
          bb = std::make_unique<bump_buffer>(bytes, "T8, 1 GiB");
          t.bump = bb.get();
        }
        const std::uint64_t max_rounds = (bytes / s + round_threads - 1) / round_threads + 2;
        dev_array<void*> slots(max_rounds * round_threads, "T8's block pointers");
        size_rule sizes_rule;
        sizes_rule.size = s;
        // load the kernel's module outside the timed rounds (a launch with no taking-part thread)
        run_alloc(t, alloc_args{slots.get(), 0, sizes_rule, 0, 0, counter(0)}, false, nullptr);
        double total_ms = 0, exhausting_ms = 0, extra_ms = 0;
        std::uint64_t ok = 0, rounds = 0, extra_ok = 0, wild = 0;  // wild: blocks outside the heap (pattern)
        bool exhausted = false, extra_done = false;
        while (rounds < max_rounds) {
          zero_counters();
          const alloc_args a{slots.get() + rounds * round_threads, round_threads, sizes_rule, rounds * round_threads, 0, counter(0)};
          double ms = 0;
          run_alloc(t, a, false, &ms);
          total_ms += ms;
          const std::uint64_t f = read_counters()[0];
          const std::uint64_t got = round_threads - std::min(f, round_threads);
          wild += pattern(t, a.ptrs, round_threads, sizes_rule, a.id_base, o.seed, false);
          ++rounds;
          ok += got;
          if (exhausted) {
            extra_ok = got;
            extra_ms = ms;
            extra_done = true;
            break;
          }
          if (f > 0) {
            exhausted = true;
            exhausting_ms = ms;
          }
        }
        const std::uint64_t live = rounds * round_threads;
        r.corrupt = wild + pattern(t, slots.get(), live, sizes_rule, 0, o.seed, true);
        r.corrupt += check_slots(slots.get(), live, sizes_rule, 0, bounds_of(t));
        if (!extra_done) r.note = "no nullptr after " + std::to_string(rounds) + " rounds: more blocks than the heap holds";
        r.ms = {total_ms};
        r.ops_per_rep = ok;
        r.metrics["utilisation"] = static_cast<double>(ok) * static_cast<double>(s) / static_cast<double>(bytes);
        r.metrics["rounds"] = static_cast<double>(rounds);
        r.metrics["extra_round_allocations"] = static_cast<double>(extra_ok);
        r.metrics["exhausting_round_ms"] = exhausting_ms;  // the first round with a nullptr
        r.metrics["extra_round_ms"] = extra_ms;            // the round after it
        r.metrics["other_rounds_ms"] = total_ms - exhausting_ms - extra_ms;
        out.add(std::move(r));
      }
  }

  void t9(const std::vector<akind>& kinds, const options& o, sink& out) {
    const std::vector<std::uint64_t> sizes = o.sizes.empty() ? std::vector<std::uint64_t>{16, 256, 4096} : o.sizes;
    constexpr std::uint64_t n = 100000;
    const unsigned rounds = o.prof == profile::full ? 100 : 20;
    for (std::uint64_t s : sizes)
      for (akind k : kinds) {
        const target t = big_target(k, o);
        ensure_slots(n);
        size_rule rule;
        rule.size = s;
        const bounds_fn in = bounds_of(t);
        row r;
        r.allocator = kind_name(k);
        r.case_id = "T9";
        r.op = "rounds";
        r.size = s;
        r.threads = n;
        out.progress("T9 " + std::string(kind_name(k)) + " " + format_bytes(s));
        reset_target(t);
        zero_counters();
        run_alloc(t, alloc_args{slots_.get(), n, rule, 0, 0, counter(0)}, false, nullptr);  // the live population
        r.failures += read_counters()[0];
        r.corrupt += pattern(t, slots_.get(), n, rule, 0, o.seed, false);
        double worst = 0, last = 0, ops_sum = 0;
        unsigned timed_rounds = 0;
        for (unsigned round = 0; round <= rounds; ++round) {  // round 0: untimed warm-up
          std::uint64_t chosen = 0;
          for (std::uint64_t i = 0; i < n; ++i) chosen += frag_chosen(o.seed, round, i) ? 1 : 0;
          if (is_bump(k)) {
            const unsigned long long used = download(t.bump->counter.get(), 1, "the bump counter")[0];
            if (used + chosen * round16(s) > t.bump->mem.size()) {
              r.note = "stopped after " + std::to_string(timed_rounds) + " rounds: the " + format_bytes(t.bump->mem.size()) +
                       " bump buffer would overflow (bump never frees)";
              break;
            }
          }
          zero_counters();
          const frag_args a{slots_.get(), n, s, o.seed, round, counter(0)};
          const std::string what = std::string("the ") + kind_name(k) + " fragmentation kernel";
          double ms = 0;
          with_policy(t, [&](const auto& pol) {
            auto launch = [&] { gpu::launch_frag(grid_for(n), pol, a); };
            if (round == 0) {
              launch();
              finish_launch(what);
            } else {
              ms = timed(what, launch);
            }
          });
          r.failures += read_counters()[0];
          r.corrupt += pattern(t, slots_.get(), n, rule, 0, o.seed, false, round);
          r.corrupt += pattern(t, slots_.get(), n, rule, 0, o.seed, true);
          if (round == 0) continue;
          r.ms.push_back(ms);
          ops_sum += 2.0 * static_cast<double>(chosen);
          ++timed_rounds;
          // address range and host check
          const std::vector<void*> p = download(slots_.get(), n, "T9's block pointers");
          std::vector<std::uintptr_t> v;
          v.reserve(n);
          for (void* x : p)
            if (x != nullptr) v.push_back(reinterpret_cast<std::uintptr_t>(x));
          r.corrupt += check_blocks(v, [](std::uintptr_t x) { return x; }, [s](std::uintptr_t) { return s; }, in);
          if (!v.empty()) {
            const double range = static_cast<double>(v.back() + s - v.front());
            last = range / (static_cast<double>(n) * static_cast<double>(s));
            worst = std::max(worst, last);
          }
        }
        if (!is_bump(k)) run_free(t, slot_free_args(n, false, false), nullptr);
        reset_target(t);
        r.ops_per_rep = timed_rounds ? static_cast<std::uint64_t>(ops_sum / timed_rounds + 0.5) : 0;
        r.metrics["range_ratio"] = worst;
        r.metrics["range_ratio_final"] = last;
        out.add(std::move(r));
      }
  }

  // -- T10 / T11: dynamic graphs --

  struct graph_device {
    std::uint32_t vertices = 0;
    dev_array<std::uint32_t> offsets, adj;
    dev_array<vstate> state;
    dev_array<std::uint64_t> digest_initial, digest_peak;
    // every round's batch, concatenated: item offsets point into the concatenated nbr arrays
    dev_array<std::uint32_t> ins_vertex, ins_offsets, ins_nbr, del_vertex, del_offsets, del_nbr;
    std::vector<std::size_t> ins_vstart, ins_ostart, del_vstart, del_ostart;
    std::vector<std::uint32_t> ins_items, del_items;
  };

  static void concat_batches(const std::vector<graph_batch>& bs, std::vector<std::uint32_t>& vertex, std::vector<std::uint32_t>& offsets,
                             std::vector<std::uint32_t>& nbr, std::vector<std::size_t>& vstart, std::vector<std::size_t>& ostart,
                             std::vector<std::uint32_t>& items) {
    for (const graph_batch& b : bs) {
      vstart.push_back(vertex.size());
      ostart.push_back(offsets.size());
      items.push_back(static_cast<std::uint32_t>(b.vertex.size()));
      const std::uint64_t base = nbr.size();
      if (base + b.nbr.size() > UINT32_MAX) throw std::runtime_error("toga-bench gpu: the graph update batches exceed 2^32 entries");
      vertex.insert(vertex.end(), b.vertex.begin(), b.vertex.end());
      for (std::uint32_t x : b.offsets) offsets.push_back(static_cast<std::uint32_t>(base + x));
      if (b.offsets.empty()) offsets.push_back(static_cast<std::uint32_t>(base));
      nbr.insert(nbr.end(), b.nbr.begin(), b.nbr.end());
    }
  }

  static graph_device upload_graph(const graph_plan& p) {
    graph_device g;
    g.vertices = p.vertices;
    g.offsets = upload(p.offsets, "the graph's CSR offsets");
    g.adj = upload(p.adj, "the graph's CSR neighbours");
    g.state = dev_array<vstate>(p.vertices, "the vertex records");
    g.digest_initial = upload(p.digest_initial, "the initial digests");
    g.digest_peak = upload(p.digest_peak, "the peak digests");
    std::vector<std::uint32_t> v, off, nb;
    concat_batches(p.inserts, v, off, nb, g.ins_vstart, g.ins_ostart, g.ins_items);
    g.ins_vertex = upload(v, "the insert batches");
    g.ins_offsets = upload(off, "the insert batches");
    g.ins_nbr = upload(nb, "the insert batches");
    v.clear();
    off.clear();
    nb.clear();
    concat_batches(p.deletes, v, off, nb, g.del_vstart, g.del_ostart, g.del_items);
    g.del_vertex = upload(v, "the delete batches");
    g.del_offsets = upload(off, "the delete batches");
    g.del_nbr = upload(nb, "the delete batches");
    return g;
  }

  //! Bytes a never-freeing allocator hands out over build + inserts + deletes (the kernels' rule).
  static std::uint64_t bump_total(const graph_plan& p) {
    std::vector<std::uint64_t> deg(p.vertices), cap(p.vertices);
    std::uint64_t total = 0;
    for (std::uint32_t v = 0; v < p.vertices; ++v) {
      deg[v] = p.offsets[v + 1] - p.offsets[v];
      cap[v] = capacity_bytes(deg[v]);
      total += cap[v];
    }
    for (const graph_batch& b : p.inserts)
      for (std::size_t i = 0; i < b.vertex.size(); ++i) {
        const std::uint32_t v = b.vertex[i];
        deg[v] += b.offsets[i + 1] - b.offsets[i];
        if (deg[v] * 4 > cap[v]) {
          cap[v] = capacity_bytes(deg[v]);
          total += cap[v];
        }
      }
    for (const graph_batch& b : p.deletes)
      for (std::size_t i = 0; i < b.vertex.size(); ++i) {
        const std::uint32_t v = b.vertex[i];
        const std::uint64_t k = b.offsets[i + 1] - b.offsets[i];
        deg[v] -= std::min(deg[v], k);
        const std::uint64_t c = capacity_bytes(deg[v]);
        if (c < cap[v]) {
          cap[v] = c;
          total += c;
        }
      }
    return total;
  }

  std::shared_ptr<const graph_plan> plan_for(const std::string& path, const options& o) {
    const unsigned rounds = o.prof == profile::full ? 100 : 10;
    const std::string key = path + "|" + std::to_string(rounds) + "|" + std::to_string(o.seed);
    const auto it = plans_.find(key);
    if (it != plans_.end()) return it->second;
    const graph g = load_graph(path);
    auto p = std::make_shared<const graph_plan>(make_graph_plan(g, rounds, 10000, o.seed));
    plans_[key] = p;
    return p;
  }

  //! The memory of one graph measurement (fresh toga heap / bump buffer; cuda-malloc: global).
  struct graph_memory {
    std::unique_ptr<toga::cuda::heap> heap;
    std::unique_ptr<bump_buffer> bump;
    target t;
    std::uint64_t bytes = 0;
  };

  graph_memory graph_target(akind k, const graph_plan& p, const options& o) {
    graph_memory m;
    m.t.kind = k;
    const std::uint64_t h = std::max<std::uint64_t>(64 * MiB, pow2_at_least(4 * p.peak_bytes));
    if (k == akind::toga) {
      m.heap = make_heap(h, "T10/T11 (" + p.name + ")", o);
      m.t.heap = m.heap.get();
      m.bytes = m.heap->capacity();
    } else if (is_bump(k)) {
      m.bytes = std::max(h, pow2_at_least(bump_total(p)));
      m.bump = std::make_unique<bump_buffer>(m.bytes, "T10/T11, " + p.name);
      m.t.bump = m.bump.get();
    } else {
      m.bytes = malloc_limit_;
    }
    return m;
  }

  void launch_update(const target& t, const update_args& a, double* ms) {
    const std::string what = std::string("the ") + kind_name(t.kind) + " graph update kernel";
    with_policy(t, [&](const auto& pol) {
      auto launch = [&] { gpu::launch_graph_update(grid_for(a.items), pol, a); };
      if (ms != nullptr) {
        *ms = timed(what, launch);
      } else {
        launch();
        finish_launch(what);
      }
    });
  }

  //! Empties the vertex records and builds every array from the CSR (timed when ms != nullptr).
  void graph_build(const target& t, graph_device& g, double* ms) {
    if (g.vertices != 0) BENCH_CUDA(cudaMemset(g.state.get(), 0, std::size_t{g.vertices} * sizeof(vstate)));
    const update_args a{g.state.get(), nullptr, g.offsets.get(), g.adj.get(), g.vertices, 0, counter(0), counter(2)};
    launch_update(t, a, ms);
  }

  std::uint64_t graph_digest(const graph_device& g, const std::uint64_t* expect) {
    BENCH_CUDA(cudaMemset(counter(3), 0, sizeof(unsigned long long)));
    digest_kernel<<<grid_for(g.vertices), block_threads>>>(g.state.get(), g.vertices, expect, counter(3));
    finish_launch("the digest kernel");
    return read_counters()[3];
  }

  void graph_free_all(const target& t, const graph_device& g) {
    if (!is_bump(t.kind))
      run_free(t, free_args{reinterpret_cast<const char*>(g.state.get()), sizeof(vstate), g.vertices, 0, 0}, nullptr);
    rewind_bump(t);
  }

  std::uint64_t graph_host_check(const target& t, const graph_device& g) {
    std::vector<vstate> s = download(g.state.get(), g.vertices, "the vertex records");
    s.erase(std::remove_if(s.begin(), s.end(), [](const vstate& x) { return x.data == nullptr; }), s.end());
    return check_blocks(
        s, [](const vstate& x) { return reinterpret_cast<std::uintptr_t>(x.data); }, [](const vstate& x) { return std::uint64_t{x.cap_bytes}; },
        bounds_of(t));
  }

  void graph_rows_note(const std::vector<akind>& kinds, const std::string& id, const std::string& op, sink& out) {
    for (akind k : kinds) {
      row r;
      r.allocator = kind_name(k);
      r.case_id = id;
      r.op = op;
      r.note = "not measured: no graph files given (--graphs)";
      out.add(std::move(r));
    }
  }

  void t10(const std::vector<akind>& kinds, const options& o, sink& out) {
    if (o.graphs.empty()) return graph_rows_note(kinds, "T10", "build", out);
    for (const std::string& path : o.graphs) {
      const auto plan = plan_for(path, o);
      graph_device g = upload_graph(*plan);
      for (akind k : kinds) {
        graph_memory m = graph_target(k, *plan, o);
        row r;
        r.allocator = kind_name(k);
        r.case_id = "T10";
        r.op = "build";
        r.param = plan->name;
        r.threads = plan->vertices;
        r.ops_per_rep = plan->vertices;
        r.metrics["heap_bytes"] = static_cast<double>(m.bytes);
        r.metrics["peak_bytes"] = static_cast<double>(plan->peak_bytes);
        out.progress("T10 " + std::string(kind_name(k)) + " " + plan->name);
        for (unsigned rep = 0; rep <= o.reps; ++rep) {  // rep 0: warm-up
          reset_target(m.t);
          zero_counters();
          double ms = 0;
          graph_build(m.t, g, rep == 0 ? nullptr : &ms);
          const std::uint64_t failures = read_counters()[0];
          std::uint64_t bad = graph_digest(g, g.digest_initial.get());
          if (rep == 1) bad += graph_host_check(m.t, g);
          graph_free_all(m.t, g);
          if (rep == 0) continue;
          r.ms.push_back(ms);
          r.failures = std::max(r.failures, failures);
          r.corrupt = std::max(r.corrupt, bad);
        }
        out.add(std::move(r));
      }
    }
  }

  void t11(const std::vector<akind>& kinds, const options& o, sink& out) {
    if (o.graphs.empty()) {
      graph_rows_note(kinds, "T11", "insert", out);
      return graph_rows_note(kinds, "T11", "delete", out);
    }
    for (const std::string& path : o.graphs) {
      const auto plan = plan_for(path, o);
      graph_device g = upload_graph(*plan);
      for (akind k : kinds) {
        graph_memory m = graph_target(k, *plan, o);
        row ri;
        ri.allocator = kind_name(k);
        ri.case_id = "T11";
        ri.op = "insert";
        ri.param = plan->name;
        ri.metrics["heap_bytes"] = static_cast<double>(m.bytes);
        ri.metrics["peak_bytes"] = static_cast<double>(plan->peak_bytes);
        row rd = ri;
        rd.op = "delete";
        std::uint64_t ins_edges = 0, del_edges = 0;
        for (const graph_batch& b : plan->inserts) ins_edges += b.edges;
        for (const graph_batch& b : plan->deletes) del_edges += b.edges;
        ri.ops_per_rep = plan->inserts.empty() ? 0 : (ins_edges + plan->inserts.size() / 2) / plan->inserts.size();
        rd.ops_per_rep = plan->deletes.empty() ? 0 : (del_edges + plan->deletes.size() / 2) / plan->deletes.size();
        for (std::uint32_t x : g.ins_items) ri.threads = std::max<std::uint64_t>(ri.threads, x);
        for (std::uint32_t x : g.del_items) rd.threads = std::max<std::uint64_t>(rd.threads, x);
        out.progress("T11 " + std::string(kind_name(k)) + " " + plan->name);
        for (int pass = 0; pass < 2; ++pass) {  // pass 0: warm-up
          const bool timing = pass == 1;
          reset_target(m.t);
          zero_counters();
          graph_build(m.t, g, nullptr);
          for (std::size_t round = 0; round < g.ins_items.size(); ++round) {
            const update_args a{g.state.get(), g.ins_vertex.get() + g.ins_vstart[round], g.ins_offsets.get() + g.ins_ostart[round],
                                g.ins_nbr.get(), g.ins_items[round], 0, counter(0), counter(2)};
            double ms = 0;
            if (a.items != 0) launch_update(m.t, a, timing ? &ms : nullptr);
            if (timing) ri.ms.push_back(ms);
          }
          const auto ci = read_counters();
          const std::uint64_t bad_peak = graph_digest(g, g.digest_peak.get());
          const std::uint64_t overlap = timing ? graph_host_check(m.t, g) : 0;
          zero_counters();
          for (std::size_t round = 0; round < g.del_items.size(); ++round) {
            const update_args a{g.state.get(), g.del_vertex.get() + g.del_vstart[round], g.del_offsets.get() + g.del_ostart[round],
                                g.del_nbr.get(), g.del_items[round], 1, counter(0), counter(2)};
            double ms = 0;
            if (a.items != 0) launch_update(m.t, a, timing ? &ms : nullptr);
            if (timing) rd.ms.push_back(ms);
          }
          const auto cd = read_counters();
          const std::uint64_t bad_final = graph_digest(g, g.digest_initial.get());
          graph_free_all(m.t, g);
          if (!timing) continue;
          ri.failures = ci[0];
          ri.corrupt = bad_peak + overlap + ci[2];
          rd.failures = cd[0];
          rd.corrupt = bad_final + cd[2];
        }
        out.add(std::move(ri));
        out.add(std::move(rd));
      }
    }
  }

  void t12(const std::vector<akind>& kinds, const options& o, sink& out) {
    constexpr std::uint64_t bytes = 8 * GiB;
    using clock = std::chrono::steady_clock;
    auto ms_between = [](clock::time_point a, clock::time_point b) { return std::chrono::duration<double, std::milli>(b - a).count(); };
    for (akind k : kinds) {
      row r;
      r.allocator = kind_name(k);
      r.case_id = "T12";
      r.op = "init";
      r.param = format_bytes(bytes);
      r.ops_per_rep = 1;
      if (k == akind::cuda_malloc) {
        r.note = "not measurable: the heap is set once per process by cudaDeviceSetLimit";
        out.add(std::move(r));
        continue;
      }
      out.progress("T12 " + std::string(kind_name(k)) + " " + format_bytes(bytes));
      std::vector<double> destroy, device_init;
      for (unsigned rep = 0; rep <= o.reps; ++rep) {  // rep 0: warm-up
        double make_ms = 0, destroy_ms = 0;
        if (k == akind::toga) {
          const auto t0 = clock::now();
          std::unique_ptr<toga::cuda::heap> h = make_heap(bytes, "T12", o);
          BENCH_CUDA(cudaDeviceSynchronize());
          const auto t1 = clock::now();
          const double init = h->init_ms();
          const auto t2 = clock::now();
          h.reset();
          BENCH_CUDA(cudaDeviceSynchronize());
          const auto t3 = clock::now();
          make_ms = ms_between(t0, t1);
          destroy_ms = ms_between(t2, t3);
          if (rep != 0) device_init.push_back(init);
        } else {
          const auto t0 = clock::now();
          char* p = nullptr;
          check(cudaMalloc(reinterpret_cast<void**>(&p), bytes + 256), "cudaMalloc of the 8 GiB bump buffer (T12)");
          const cudaError_t e = cudaMemset(p + bytes, 0, sizeof(unsigned long long));
          const cudaError_t s = cudaDeviceSynchronize();
          const auto t1 = clock::now();
          if (e != cudaSuccess || s != cudaSuccess) {
            (void)cudaFree(p);
            check(e, "cudaMemset of the bump counter (T12)");
            check(s, "cudaDeviceSynchronize after the bump buffer's cudaMemset (T12)");
          }
          const auto t2 = clock::now();
          BENCH_CUDA(cudaFree(p));
          BENCH_CUDA(cudaDeviceSynchronize());
          const auto t3 = clock::now();
          make_ms = ms_between(t0, t1);
          destroy_ms = ms_between(t2, t3);
        }
        if (rep == 0) continue;
        r.ms.push_back(make_ms);
        destroy.push_back(destroy_ms);
      }
      r.metrics["destroy_ms"] = median(destroy);
      if (k == akind::toga) r.metrics["device_init_ms"] = median(device_init);
      out.add(std::move(r));
    }
  }

  // ---- T14: the edges (docs/benchmarks.md "T14"): toga's heap when it is exactly full, when
  // every request fails, when it is 80 % full, and its first kernel on a fresh heap; each beside
  // the reference it is judged against, measured in the same run ("ref_ms", "x_ref").

  //! n allocations of `size` into slots [first, first + n) of `slots`; returns the nullptrs.
  std::uint64_t t14_alloc(const target& t, dev_array<void*>& slots, std::uint64_t first, std::uint64_t n, std::uint64_t size,
                          double* ms) {
    zero_counters();
    size_rule sr;
    sr.size = size;
    const alloc_args a{slots.get() + first, n, sr, 0, 0, counter(0)};
    run_alloc(t, a, false, ms);
    return read_counters()[0];
  }
  void t14_free(const target& t, dev_array<void*>& slots, std::uint64_t first, std::uint64_t n) {
    if (n == 0) return;
    run_free(t, free_args{reinterpret_cast<const char*>(slots.get() + first), sizeof(void*), n, 0, 0}, nullptr);
  }
  //! Writes and verifies the pattern of slots [first, first + n) (nullptr slots are skipped).
  std::uint64_t t14_verify(const target& t, dev_array<void*>& slots, std::uint64_t first, std::uint64_t n, std::uint64_t size,
                           std::uint64_t seed) {
    size_rule sr;
    sr.size = size;
    const std::uint64_t wild = pattern(t, slots.get() + first, n, sr, 0, seed, false);
    return wild + pattern(t, slots.get() + first, n, sr, 0, seed, true);
  }
  //! Median of reps timed launches of `n` x `size` on `t` (one warm-up first), each freed after.
  row t14_timed(const target& t, dev_array<void*>& slots, std::uint64_t first, std::uint64_t n, std::uint64_t size,
                const std::string& op, const std::string& param, const options& o, sink& out) {
    row r;
    r.allocator = kind_name(t.kind);
    r.case_id = "T14";
    r.op = op;
    r.param = param;
    r.size = size;
    r.threads = n;
    r.ops_per_rep = n;
    out.progress("T14 " + op + " " + format_bytes(size));
    for (unsigned rep = 0; rep <= o.reps; ++rep) {
      double ms = 0;
      r.failures = std::max<std::uint64_t>(r.failures, t14_alloc(t, slots, first, n, size, &ms));
      if (rep == 1) r.corrupt += t14_verify(t, slots, first, n, size, o.seed);
      t14_free(t, slots, first, n);
      if (rep > 0) r.ms.push_back(ms);
    }
    return r;
  }
  static void t14_ratio(row& r, const row& ref) {
    r.metrics["ref_ms"] = ref.median_ms();
    if (ref.median_ms() > 0) r.metrics["x_ref"] = r.median_ms() / ref.median_ms();
  }

  void t14(const std::vector<akind>& kinds, const options& o, sink& out) {
    for (akind k : kinds) {
      if (k == akind::toga) continue;
      row r;
      r.allocator = kind_name(k);
      r.case_id = "T14";
      r.op = "edges";
      r.note = "T14 measures toga's edges (full, failing, 80 % full, fresh heaps) against toga's own references";
      out.add(std::move(r));
    }
    if (std::find(kinds.begin(), kinds.end(), akind::toga) == kinds.end()) return;
    const std::uint64_t n = o.threads.empty() ? (std::uint64_t{1} << 20) : o.threads.front();
    dev_array<void*> slots;
    auto need_slots = [&](std::uint64_t m) {
      if (slots.size() < m) {
        slots = dev_array<void*>();
        slots = dev_array<void*>(m, "T14's block pointers");
      }
    };
    // (a) an exactly full heap: n x 8 KiB into a heap of exactly n x 8 KiB, against a heap twice as large
    {
      constexpr std::uint64_t s = 8 * KiB;
      const std::uint64_t exact = pow2_at_least(n * s);
      need_slots(n);
      row half, full;
      {
        auto h = make_heap(2 * exact, "T14 (a)", o);
        target t{akind::toga, h.get(), nullptr};
        half = t14_timed(t, slots, 0, exact / s, s, "fill-half", format_bytes(2 * exact) + " heap", o, out);
      }
      {
        auto h = make_heap(exact, "T14 (a)", o);
        target t{akind::toga, h.get(), nullptr};
        full = t14_timed(t, slots, 0, exact / s, s, "fill-exact", format_bytes(exact) + " heap", o, out);
      }
      t14_ratio(full, half);
      out.add(std::move(half));
      out.add(std::move(full));
    }
    // (b) every request fails: a heap filled with blocks of the size until a launch fails, then n
    // more requests of that size; against n successful requests of the size on an empty heap
    for (std::uint64_t s : o.sizes.empty() ? std::vector<std::uint64_t>{16, 256, 4096} : o.sizes) {
      constexpr std::uint64_t heap_bytes = 256 * MiB;
      const std::uint64_t per = std::max<std::uint64_t>(n, 1);
      const std::uint64_t most = heap_bytes / std::max<std::uint64_t>(s, 16) + 2 * per;  // fill slots, at most
      row ok;
      {
        auto h = make_heap(pow2_at_least(std::max<std::uint64_t>(4 * n * std::max<std::uint64_t>(s, 16), GiB)), "T14 (b)", o);
        target t{akind::toga, h.get(), nullptr};
        need_slots(n);
        ok = t14_timed(t, slots, 0, n, s, "alloc-empty", "", o, out);
      }
      auto h = make_heap(heap_bytes, "T14 (b)", o);
      target t{akind::toga, h.get(), nullptr};
      need_slots(most + n);
      row fail;
      // full: until a launch of n requests gets no block at all (a launch that fails only in part
      // leaves room that the next launch, on other SMs, still finds)
      std::uint64_t filled = 0, fill_failures = 0, last = 0;
      out.progress("T14 fill " + format_bytes(heap_bytes) + " with " + format_bytes(s));
      while (filled + per <= most) {
        last = t14_alloc(t, slots, filled, per, s, nullptr);
        fill_failures += last;
        filled += per;
        if (last == per) break;
      }
      if (last != per) fail.note = "the heap never refused a whole launch (" + std::to_string(filled - fill_failures) + " blocks)";
      fail.allocator = kind_name(akind::toga);
      fail.case_id = "T14";
      fail.op = "alloc-full";
      fail.param = format_bytes(heap_bytes) + " heap, full";
      fail.size = s;
      fail.threads = n;
      fail.ops_per_rep = n;
      std::uint64_t served = 0;  // requests on the full heap that got a block (frees in between)
      for (unsigned rep = 0; rep <= o.reps; ++rep) {
        out.progress("T14 alloc-full " + format_bytes(s) + " rep " + std::to_string(rep) + "/" + std::to_string(o.reps));
        double ms = 0;
        const std::uint64_t f = t14_alloc(t, slots, filled, n, s, &ms);
        served += n - f;
        t14_free(t, slots, filled, n);
        if (rep > 0) fail.ms.push_back(ms);
      }
      fail.metrics["served"] = static_cast<double>(served);
      fail.metrics["blocks_before"] = static_cast<double>(filled - fill_failures);
      if (served != 0) fail.note = join_note(fail.note, std::to_string(served) + " requests on the full heap got a block");
      fail.corrupt = t14_verify(t, slots, 0, filled, s, o.seed);
      t14_free(t, slots, 0, filled);
      t14_ratio(fail, ok);
      out.add(std::move(ok));
      out.add(std::move(fail));
    }
    // (c) 4 KiB on a heap 80 % full of 4 KiB blocks, against an empty heap of the same size
    {
      constexpr std::uint64_t s = 4 * KiB, heap_bytes = 4 * GiB;
      const std::uint64_t pre = heap_bytes / s * 4 / 5;
      const std::uint64_t m = std::min<std::uint64_t>(n, std::uint64_t{1} << 17);  // fits in the 20 %
      need_slots(pre + m);
      row empty, busy;
      auto h = make_heap(heap_bytes, "T14 (c)", o);
      target t{akind::toga, h.get(), nullptr};
      empty = t14_timed(t, slots, 0, m, s, "alloc-empty", format_bytes(heap_bytes) + " heap", o, out);
      out.progress("T14 fill 80 % of " + format_bytes(heap_bytes));
      const std::uint64_t pre_failures = t14_alloc(t, slots, 0, pre, s, nullptr);
      busy = t14_timed(t, slots, pre, m, s, "alloc-80", format_bytes(heap_bytes) + " heap, 80 % full", o, out);
      busy.failures += pre_failures;
      t14_free(t, slots, 0, pre);
      t14_ratio(busy, empty);
      out.add(std::move(empty));
      out.add(std::move(busy));
    }
    // (d) the first kernel on a fresh heap (constructed for it) at each T1 size, against the
    // second kernel on the same heap (after the first one's blocks were freed)
    for (std::uint64_t s : t1_sizes(o)) {
      need_slots(n);
      row first, warm;
      for (unsigned rep = 0; rep <= o.reps; ++rep) {
        out.progress("T14 first " + format_bytes(s) + " rep " + std::to_string(rep) + "/" + std::to_string(o.reps));
        auto h = make_heap(toga_capacity(o), "T14 (d)", o);
        target t{akind::toga, h.get(), nullptr};
        double ms1 = 0, ms2 = 0;
        const std::uint64_t f1 = t14_alloc(t, slots, 0, n, s, &ms1);
        const std::uint64_t c1 = rep == 1 ? t14_verify(t, slots, 0, n, s, o.seed) : 0;
        t14_free(t, slots, 0, n);
        const std::uint64_t f2 = t14_alloc(t, slots, 0, n, s, &ms2);
        t14_free(t, slots, 0, n);
        if (rep == 0) continue;
        first.ms.push_back(ms1);
        warm.ms.push_back(ms2);
        first.failures = std::max(first.failures, f1);
        warm.failures = std::max(warm.failures, f2);
        first.corrupt += c1;
      }
      for (row* r : {&first, &warm}) {
        r->allocator = kind_name(akind::toga);
        r->case_id = "T14";
        r->size = s;
        r->threads = n;
        r->ops_per_rep = n;
        r->param = format_bytes(toga_capacity(o)) + " heap";
      }
      first.op = "alloc-first";
      warm.op = "alloc-second";
      t14_ratio(first, warm);
      out.add(std::move(warm));
      out.add(std::move(first));
    }
  }

  void t13(const std::vector<akind>& kinds, const options& o, sink& out) {
    auto add = [&](akind k, const std::string& op, const std::string& param, const cudaFuncAttributes& a, const std::string& note) {
      row r;
      r.allocator = kind_name(k);
      r.case_id = "T13";
      r.op = op;
      r.param = param;
      r.metrics["registers"] = a.numRegs;
      r.metrics["local_bytes"] = static_cast<double>(a.localSizeBytes);
      r.note = note;
      out.add(std::move(r));
    };
    for (akind k : kinds) {
      out.progress("T13 " + std::string(kind_name(k)));
      cudaFuncAttributes al{}, wa{}, fr{};
      switch (k) {
        case akind::toga:
#if TOGA_BENCH_TENANT_KERNELS
          if (o.tenants) {  // --tenants: the kernels that run, tenant_ref's
            BENCH_CUDA((gpu::alloc_attributes<toga_tenant_policy, false>(&al)));
            BENCH_CUDA((gpu::alloc_attributes<toga_tenant_policy, true>(&wa)));
            BENCH_CUDA(gpu::free_attributes<toga_tenant_policy>(&fr));
            break;
          }
#endif
          BENCH_CUDA((gpu::alloc_attributes<toga_policy, false>(&al)));
          BENCH_CUDA((gpu::alloc_attributes<toga_policy, true>(&wa)));
          BENCH_CUDA(gpu::free_attributes<toga_policy>(&fr));
          break;
        case akind::cuda_malloc:
          BENCH_CUDA((gpu::alloc_attributes<malloc_policy, false>(&al)));
          BENCH_CUDA(gpu::free_attributes<malloc_policy>(&fr));
          break;
        case akind::bump_warp:
          BENCH_CUDA((gpu::alloc_attributes<bump_warp_policy, false>(&al)));
          BENCH_CUDA((gpu::alloc_attributes<bump_warp_policy, true>(&wa)));
          BENCH_CUDA(gpu::free_attributes<bump_warp_policy>(&fr));
          break;
        case akind::bump:
          BENCH_CUDA((gpu::alloc_attributes<bump_policy, false>(&al)));
          BENCH_CUDA(gpu::free_attributes<bump_policy>(&fr));
          break;
      }
      add(k, "alloc", "", al, "");
      add(k, "free", "", fr, "");
      if (k == akind::toga || k == akind::bump_warp) add(k, "alloc", "warp", wa, "");
    }
  }
};

}  // namespace

std::unique_ptr<backend> make_gpu_backend() { return std::make_unique<gpu_backend>(); }

}  // namespace toga::bench
