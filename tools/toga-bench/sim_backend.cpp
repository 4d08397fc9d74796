// toga-bench, simulator backend: the cases T1-T13 of docs/benchmarks.md run in toga's fiber
// simulator (sim/), for the allocators
//   toga-sim  toga::allocator<toga::sim::platform> (the same core code as on the GPU) on a heap in
//             host memory;
//   bump-warp-sim  the floor (every ratio_bump refers to it): the lanes that reach an allocation
//             together (__activemask at the call site) take one fetch_add on a 64-bit offset
//             between them: a scan of their rounded sizes over the active lanes (up to five
//             __shfl_sync steps, ranks among the active lanes; one __match_any_sync when the
//             sizes are equal), the last lane adds the total, __shfl_sync hands out the base.
//             nullptr past the end of its buffer; free a no-op. Every case, every size mix
//             (T3), partial warps (T2, T10/T11). In host time it is not below bump-sim: every
//             collective is a scheduling point here (sim_steps_per_op shows the count), while
//             on a GPU a shuffle costs a few cycles and the shared atomic is what counts.
//   bump-sim  one platform fetch_add per allocation (rounded up to 16 B), nullptr past the end
//             of its buffer, free a no-op; an extra row (per-thread atomics). T6 uses the
//             warp-aggregated form too, as before.
//
// What each lane does is written once for both backends, in workloads.hpp (alloc_item,
// free_item, churn_item, frag_item, graph_update_item); this file keeps the allocators, the
// launches, the host memory, the checks and the rows. Its lane environment (sim_lane) counts
// with plain host increments, which are no scheduling points, and writes only blocks inside the
// heap.
//
// What the figures mean. Every "kernel launch" is one toga::sim::world run: every GPU thread is a
// fiber on ONE host thread, and every atomic, fence, backoff and warp intrinsic is a scheduling
// point. The timed figure is host wall-clock time (std::chrono::steady_clock) around world::run
// (fiber start-up included), that is, simulated operations per second of host time. It follows
// the number of platform operations (atomics, intrinsics, spins), the lane switches and the
// number of lanes, so it is good for trends and regressions of the core's code paths on one
// machine; it says nothing about GPU speed (no memory latency, no parallel hardware): never
// compare these figures with the GPU backend's. Rows that time launches also carry the metric
// "sim_steps_per_op": scheduling points of the timed launches per operation (every platform
// operation plus a start and an exit per lane). It is exact, host-independent and deterministic
// for a seed: the figure to watch for regressions in the number of atomics and spins.
//
// Launches. Blocks of 256 threads (32 below 256 threads; one block of n for n <= 32), blocks
// round-robin on the SMs: `base_sms` (8) SMs, more if the 2048 resident threads per SM require
// it. toga's heap has one UAlloc arena per simulated SM of its case. A launch has at most
// `lane_cap` (4096) lanes; larger counts run grid-stride (lane i serves items i, i + lanes, ...),
// and row::threads is the count of items. Schedules: the random strategy (uniform over the
// runnable lanes at every point) for the first `fair_after_per_lane` (8) x lanes points, so that
// the lanes start together and the first half of a small allocation runs interleaved with the
// others (contention), then the fair tail (a lane runs until it backs off, blocks or exits),
// which keeps a launch cheap (a fully random schedule costs 10-1000x more host time: spinning
// lanes are picked as often as the lanes they wait for). Every launch has its own schedule seed, derived from options::seed and a per-case
// launch counter, so a run is deterministic. A verdict other than pass (livelock, crash,
// cuda-rule, invariant) throws std::runtime_error with the verdict, its message, the seed and
// the launch. The livelock cap is 10^7 + 20,000 points per item and operation (a 16 B toga
// allocation takes about 30 points, a 4 KiB one about 70).
//
// Memory lives in host memory that persists across launches (anonymous mappings, lazily
// committed). Each repetition starts from an empty heap: toga's metadata is zeroed and
// init_after_zero runs again (plain host code, no launch needed); bump's offset is reset.
// Verification: after each allocation launch the host sorts the blocks and counts overlapping,
// out-of-heap and misaligned (16 B) blocks into row::corrupt, writes a per-block pattern into every
// whole block (workloads.hpp's pattern_base / pattern_word, seeded per repetition) and verifies it before the
// blocks are freed (mismatching blocks: corrupt); nullptr where memory should have been available
// counts in row::failures. failures and corrupt are summed over the warm-up and the timed
// repetitions. One untimed warm-up, then options::reps timed repetitions (row::ms, one per rep).
// Lanes that write into their blocks themselves (T5, T10, T11) first check that the block lies
// inside the heap and is 16 B aligned (else: corrupt, and the block is neither written nor freed).
//
// Scale: the GPU protocol scaled down (numbers are quick / full). On one core of an AMD EPYC
// host, T1-T9 and T12-T13 for both allocators take about 3 s / 14 s, T10 + T11 over the five
// graphs of shared/data/graphs about 8 s / 11 s (mostly loading and planning), T1 --sweep about
// 70 s (quick).
//   T1  threads 1024 / 4096, S in {16, 64, 256, 1024, 4096, 8192} (--sweep: 4..8192 step 4);
//       rows alloc and free (param "threads=N" when several thread counts are given).
//   T2  warps 64 / 256, lane 0 of each warp allocates S in {16, 4096}; rows alloc and free
//       (threads = lanes launched, ops = warps; --threads T means T / 32 warps).
//   T3  threads 1024 / 4096, S = mixed_size(tid, hi, seed), hi in {64, 512, 4096, 8192}
//       (--sizes, if given, are the hi values); size 0, param "hi=64"; alloc and free.
//   T4  threads {1, 4, 16, 64, 256, 1024} / {..., 4096}, S in {16, 256, 4096}; alloc and free
//       rows, param "threads=N".
//   T5  churn: 256 / 512 threads x 4 / 16 iterations of allocate + tag the first and last
//       4-byte word + (after the next allocation, so that other lanes run in between: churn_item
//       with Overlap, where the GPU checks at once) read them back + free; op "churn", ops = pairs.
//   T6  T1 through allocator::allocate_coalesced / deallocate_coalesced, param "warp"; bump-sim
//       aggregates per warp.
//   T7  S in {16 KiB, 64 KiB, 512 KiB, 4 MiB}, threads = heap / 2 / S capped at 2048.
//   T8  heap 2 MiB on 2 SMs (2 arenas, 4 chunks: 16 B needs 128 Ki allocations to exhaust it),
//       rounds of 512 / 1024 lanes allocating S in {16, 256, 4096} without freeing until a
//       round sees nullptr, then one more round (its successes: metric "late_successes"); op
//       "oom", ms = all rounds of a repetition, ops = attempts; metrics "utilisation" (requested
//       bytes obtained / heap bytes) and "rounds" (medians over the repetitions). The
//       exhaustion nullptrs are not failures. No block is freed (the next repetition resets).
//   T9  N = 1000 live blocks of S in {16, 256, 4096} (the first allocation is untimed); 10 / 100
//       rounds, each frees every block with probability 1/2 (mix64 of seed, round, slot; this
//       backend's rule, not the GPU's frag_chosen; a slot whose allocation failed is always
//       redone) and reallocates it in the same lane; op "rounds", ms per round, ops = reallocations per
//       round; metrics "range_ratio" (the largest (max(p + S) - min(p)) / (N S) over the rounds)
//       and "range_ratio_final" (medians over the repetitions). With 4 blocks of 256 lanes on 4
//       SMs, toga serves 16 B from 4 arenas' chunks: a range of ~3 chunks for 16 KB (ratio ~100).
//       bump-sim never frees: its buffer runs out in the full profile (failures by design).
//   T10 per graph of options::graphs: make_graph_plan(load_graph(path), 2 / 10 rounds,
//       200 / 1000 edges per round, seed); heap max(next_pow2(4 peak_bytes), 16 MiB); one lane per
//       vertex (grid-stride beyond lane_cap) allocates capacity_bytes(degree) and copies its
//       neighbours; op "build", param = graph name; digests checked against the plan.
//   T11 the same build (untimed), then the insert rounds (one launch per round, one lane per
//       batch item: grow = allocate the next capacity, copy, free the old array, append) and
//       the delete rounds (remove one occurrence per neighbour by swapping with the last, shrink
//       when the capacity of the new degree is smaller); ops "insert" and "delete", ms per round,
//       ops = edges per round; digests checked after the inserts (peak) and after the deletes.
//       As on the GPU, a failed allocation counts as a failure, and the vertex's digest then
//       mismatches too (an insert drops its neighbours).
//   T12 host time to construct and destroy the allocator for an 8 GiB heap: an untouched,
//       lazily committed mapping (MAP_NORESERVE), the zeroed metadata (32 MiB), allocator::make,
//       init_after_zero, unmap; op "init" (1 GiB, with a note, if the mapping is refused).
//   T13 registers are a GPU figure: one row per allocator with a note, nothing timed.
#include <sys/mman.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <fstream>
#include <functional>
#include <memory>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "bench.hpp"
#include "graph.hpp"
#include "graph_plan.hpp"
#include "toga/allocator.hpp"
#include "toga/sim/platform.hpp"
#include "toga/sim/strategy.hpp"
#include "toga/sim/types.hpp"
#include "toga/sim/world.hpp"
#include "workloads.hpp"

namespace toga::bench {
namespace {

namespace ts = toga::sim;
using P = ts::platform;
using toga_allocator = toga::allocator<P>;
using clock_type = std::chrono::steady_clock;

constexpr std::uint64_t KiB = 1024, MiB = 1024 * KiB, GiB = 1024 * MiB;
constexpr std::uint64_t default_heap_bytes = 64 * MiB;
constexpr unsigned base_sms = 8;                                      //!< simulated SMs (at least)
constexpr unsigned lane_cap = 4096;  //!< lanes per launch (at most; grid-stride beyond)
constexpr std::uint64_t fair_after_per_lane = 8;  //!< random points per lane before the fair tail
constexpr std::uint64_t t8_heap_bytes = 2 * MiB;
constexpr unsigned t8_sms = 2;
constexpr std::uint64_t t12_heap_bytes = 8 * GiB;

std::uint64_t next_pow2(std::uint64_t x) {
  std::uint64_t p = 1;
  while (p < x) p <<= 1;
  return p;
}

// ---- host memory ------------------------------------------------------------------------------

//! An anonymous private mapping: page aligned, zero filled, committed only where touched.
class mapping {
 public:
  explicit mapping(std::uint64_t bytes) : bytes_(bytes) {
    void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) throw std::runtime_error("sim backend: cannot map " + format_bytes(bytes) + " of host memory for a heap");
    p_ = static_cast<char*>(p);
  }
  ~mapping() {
    if (p_) ::munmap(p_, bytes_);
  }
  mapping(const mapping&) = delete;
  mapping& operator=(const mapping&) = delete;
  char* data() const { return p_; }
  std::uint64_t size() const { return bytes_; }

 private:
  char* p_ = nullptr;
  std::uint64_t bytes_;
};

// ---- the allocators (workloads.hpp's allocator handles) -------------------------------------------

//! toga::allocator on a host heap of `bytes` (rounded up to a power of two), one arena per SM.
struct toga_state {
  static constexpr const char* name = "toga-sim";
  unsigned sms;
  toga::heap_layout layout;
  mapping heap;
  std::vector<std::uint64_t> meta;
  toga_allocator a{};

  toga_state(std::uint64_t bytes, unsigned sms_)
      : sms(sms_),
        layout(toga::heap_layout::make<P>(toga::heap_layout::levels_for(bytes), sms_)),
        heap(toga::geom::page_bytes << (layout.levels - 1)) {
    reset();
  }
  //! An empty heap: zeroed metadata, init_after_zero (sequential host code).
  void reset() {
    meta.assign(layout.bytes / 8 + 1, 0);
    a = toga_allocator::make(heap.data(), reinterpret_cast<char*>(meta.data()), layout);
    a.init_after_zero(0);
  }
  char* base() const { return heap.data(); }
  std::uint64_t bytes() const { return heap.size(); }
  void* allocate(std::uint64_t s) const { return a.allocate(s); }
  void deallocate(void* p) const { a.deallocate(p); }
  void* allocate_warp(std::uint64_t s) const { return a.allocate_coalesced(s); }
  void deallocate_warp(void* p) const { a.deallocate_coalesced(p); }
  static constexpr bool frees = true;
};

//! A bump allocator on a 64-bit offset; no free. Warp = false: one fetch_add per allocation
//! (bump-sim); Warp = true: one fetch_add per group of lanes that reach the allocation together
//! (bump-warp-sim, the floor).
template <bool Warp>
struct bump_state_t {
  static constexpr const char* name = Warp ? "bump-warp-sim" : "bump-sim";
  unsigned sms;
  mapping buf;
  std::uint64_t next = 0;

  bump_state_t(std::uint64_t bytes, unsigned sms_) : sms(sms_), buf(toga::geom::page_bytes << (toga::heap_layout::levels_for(bytes) - 1)) {}
  void reset() { next = 0; }
  char* base() const { return buf.data(); }
  std::uint64_t bytes() const { return buf.size(); }
  static std::uint64_t rounded(std::uint64_t s) { return s ? (s + 15) & ~std::uint64_t{15} : 16; }
  void* at(std::uint64_t off, std::uint64_t s) const {
    if (off > buf.size() || buf.size() - off < s) return nullptr;
    return buf.data() + off;
  }
  void* allocate(std::uint64_t s) {
    if constexpr (Warp) {
      return allocate_warp(s);
    } else {
      s = rounded(s);
      return at(P::fetch_add(&next, s, toga::relaxed, toga::device_scope), s);
    }
  }
  void deallocate(void*) const {}
  //! Warp-aggregated: an inclusive scan of the rounded sizes over the lanes grouped by
  //! __activemask (rank r reads rank r - d at step d; one __match_any_sync instead when every
  //! lane asks for the same size, since each shuffle is a scheduling point here), the
  //! highest-ranked lane adds the group's total with one fetch_add, __shfl_sync hands out the
  //! base; lane r's block starts at base + (scan - its own size).
  void* allocate_warp(std::uint64_t s) {
    s = rounded(s);
    const std::uint32_t mask = P::activemask();
    const unsigned n = static_cast<unsigned>(__builtin_popcount(mask));
    const unsigned rank = static_cast<unsigned>(__builtin_popcount(mask & P::lanemask_lt()));
    auto lane_of_rank = [mask](unsigned r) {
      std::uint32_t m = mask;
      for (unsigned k = 0; k < r; ++k) m &= m - 1;
      return static_cast<int>(__builtin_ctz(m));
    };
    std::uint64_t incl = s;
    if (P::match_any(mask, s) == mask) {
      incl = std::uint64_t{rank + 1} * s;  // one size for the whole group: the scan is a product
    } else {
      for (unsigned d = 1; d < n; d <<= 1) {
        const std::uint64_t y = P::shfl(mask, incl, lane_of_rank(rank >= d ? rank - d : rank));
        if (rank >= d) incl += y;
      }
    }
    const int last = lane_of_rank(n - 1);
    std::uint64_t first = 0;
    if (rank == n - 1) first = P::fetch_add(&next, incl, toga::relaxed, toga::device_scope);
    first = P::shfl(mask, first, last);
    return at(first + incl - s, s);
  }
  void deallocate_warp(void*) const {}
  static constexpr bool frees = false;
};
using bump_state = bump_state_t<false>;
using bump_warp_state = bump_state_t<true>;

// ---- launches ---------------------------------------------------------------------------------

//! Runs simulated kernels for one case: shapes, schedule seeds, limits, timing, verdicts.
class launcher {
 public:
  launcher(std::uint64_t seed, unsigned sms, std::string what) : seed_(seed), sms_(sms), what_(std::move(what)) {}
  void label(std::string s) { label_ = std::move(s); }

  //! Runs body(i) for every item i < items (one lane per item up to lane_cap, grid-stride
  //! beyond); ops_per_item sizes the livelock cap. Returns the host milliseconds of world::run.
  template <class F>
  double run(std::uint64_t items, std::uint64_t ops_per_item, F&& body) {
    if (items == 0) return 0;
    const unsigned lanes = static_cast<unsigned>(std::min<std::uint64_t>(items, lane_cap));
    const unsigned tpb = lanes <= 32 ? lanes : lanes < 256 ? 32 : 256;
    const unsigned blocks = (lanes + tpb - 1) / tpb;
    const unsigned per_sm = ts::max_threads_per_sm / tpb;
    const unsigned sms = std::max(sms_, (blocks + per_sm - 1) / per_sm);
    const ts::launch_config cfg{sms, blocks, tpb};
    const std::uint64_t launch = ++launches_;
    const std::uint64_t sched_seed = mix64(seed_ ^ mix64(0x73696d00ull + launch));
    ts::random_strategy strat;
    strat.begin(sched_seed, cfg.lanes());
    const std::uint64_t work = items * std::max<std::uint64_t>(ops_per_item, 1);
    const std::uint64_t fair_after = fair_after_per_lane * cfg.lanes();
    const ts::run_limits limits{fair_after, fair_after + 10'000'000 + work * 20'000};
    ts::world w(cfg, strat, limits);
    const std::uint64_t stride = lanes;
    const std::function<void()> fn = [&] {
      const std::uint64_t first = std::uint64_t{P::block_id()} * P::block_dim() + P::thread_id();
      if (first >= stride) return;
      for (std::uint64_t i = first; i < items; i += stride) body(i);
    };
    const auto t0 = clock_type::now();
    const ts::run_result r = w.run(fn);
    const auto t1 = clock_type::now();
    if (r.failed()) {
      std::ostringstream m;
      m << "sim backend: " << what_ << (label_.empty() ? "" : " ") << label_ << ": simulator verdict "
        << ts::to_string(r.kind) << ": " << r.message << " (seed " << seed_ << ", launch " << launch << " of this case, schedule seed "
        << sched_seed << ", " << cfg.blocks << " blocks x " << cfg.threads_per_block << " threads on " << cfg.sms << " SMs, "
        << r.steps << " steps)";
      throw std::runtime_error(m.str());
    }
    last_steps_ = r.steps;
    return std::chrono::duration<double, std::milli>(t1 - t0).count();
  }
  //! Scheduling points of the last launch (every platform operation, plus a start and an exit
  //! per lane): deterministic for a seed, independent of the host.
  std::uint64_t last_steps() const { return last_steps_; }

 private:
  std::uint64_t seed_;
  unsigned sms_;
  std::string what_, label_;
  std::uint64_t launches_ = 0;
  std::uint64_t last_steps_ = 0;
};

//! Sums the scheduling points of the timed launches of one row.
struct step_count {
  std::uint64_t steps = 0, ops = 0;
  void add(std::uint64_t s, std::uint64_t o) {
    steps += s;
    ops += o;
  }
  void put(row& r) const {
    if (ops) r.metrics["sim_steps_per_op"] = static_cast<double>(steps) / static_cast<double>(ops);
  }
};

// ---- verification -----------------------------------------------------------------------------

//! A block to verify: where, how large, and the first word of its pattern.
struct block {
  char* p;
  std::uint64_t bytes;
  std::uint32_t key;  //!< pattern_base of the block
};

//! The pattern of block `id` of repetition `rep` (workloads.hpp's pattern_base; every repetition
//! writes other values).
std::uint32_t block_key(std::uint64_t seed, std::uint64_t rep, std::uint64_t id) { return pattern_base(id, seed ^ (rep << 48)); }

void fill(const block& b) {
  auto* w = reinterpret_cast<std::uint32_t*>(b.p);
  const std::uint64_t n = b.bytes / 4;
  for (std::uint64_t i = 0; i < n; ++i) w[i] = pattern_word(b.key, i);
}

bool verify(const block& b) {
  const auto* w = reinterpret_cast<const std::uint32_t*>(b.p);
  const std::uint64_t n = b.bytes / 4;
  std::uint32_t diff = 0;
  for (std::uint64_t i = 0; i < n; ++i) diff |= w[i] ^ pattern_word(b.key, i);
  return diff == 0;
}

//! Per block of v: 1 when it lies (partly) outside [base, base + heap), is not 16 B aligned or
//! overlaps another block of v.
std::vector<char> geometry(const std::vector<block>& v, const char* base, std::uint64_t heap) {
  std::vector<char> bad(v.size(), 0);
  std::vector<std::uint32_t> order(v.size());
  for (std::uint32_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](std::uint32_t x, std::uint32_t y) { return v[x].p < v[y].p; });
  const auto lo = reinterpret_cast<std::uintptr_t>(base);
  const std::uintptr_t hi = lo + heap;
  std::uintptr_t end = 0;
  std::uint32_t end_owner = 0;
  for (const std::uint32_t i : order) {
    const auto p = reinterpret_cast<std::uintptr_t>(v[i].p);
    if (p < lo || p > hi || hi - p < v[i].bytes) {
      bad[i] = 1;
      continue;
    }
    if (p % 16) bad[i] = 1;
    if (p < end) bad[i] = bad[end_owner] = 1;
    if (p + v[i].bytes > end) {
      end = p + v[i].bytes;
      end_owner = i;
    }
  }
  return bad;
}

bool inside(const char* p, std::uint64_t bytes, const char* base, std::uint64_t heap) {
  return p >= base && static_cast<std::uint64_t>(p - base) <= heap && heap - static_cast<std::uint64_t>(p - base) >= bytes;
}

//! workloads.hpp's lane environment for one allocator's memory [base, base + heap). count: a
//! plain host increment (every lane is a fiber on one host thread, and a plain increment is no
//! scheduling point: the bookkeeping leaves the schedule alone). usable: inside the memory and
//! 16 B aligned, so that a wrong block is never written (it would overwrite host memory).
struct sim_lane {
  const char* base;
  std::uint64_t heap;
  static void count(unsigned long long* c) { ++*c; }
  bool usable(const void* p, std::uint64_t bytes) const {
    return inside(static_cast<const char*>(p), bytes, base, heap) && reinterpret_cast<std::uintptr_t>(p) % 16 == 0;
  }
};
template <class S>
sim_lane lane_env(const S& st) {
  return sim_lane{st.base(), st.bytes()};
}

//! The full check of a set of fresh blocks: geometry, then write every pattern, then read
//! every pattern back (blocks outside the heap are never written). Returns the bad blocks.
std::uint64_t check_fresh(const std::vector<block>& v, const char* base, std::uint64_t heap) {
  std::vector<char> bad = geometry(v, base, heap);
  for (std::size_t i = 0; i < v.size(); ++i)
    if (inside(v[i].p, v[i].bytes, base, heap)) fill(v[i]);
  for (std::size_t i = 0; i < v.size(); ++i)
    if (inside(v[i].p, v[i].bytes, base, heap) && !verify(v[i])) bad[i] = 1;
  return static_cast<std::uint64_t>(std::count(bad.begin(), bad.end(), 1));
}

double median_of(std::vector<double> v) { return median(std::move(v)); }

row make_row(std::string alloc, std::string id, std::string op, std::string param, std::uint64_t size, std::uint64_t threads) {
  row r;
  r.allocator = std::move(alloc);
  r.case_id = std::move(id);
  r.op = std::move(op);
  r.param = std::move(param);
  r.size = size;
  r.threads = threads;
  return r;
}

// ---- cases ------------------------------------------------------------------------------------

struct case_env {
  const options& o;
  sink& out;
  bool quick() const { return o.prof == profile::quick; }
  std::uint64_t heap() const { return o.heap_bytes ? o.heap_bytes : default_heap_bytes; }
  unsigned total_reps() const { return o.reps + 1; }  // one untimed warm-up first
};

//! One alloc launch, verification, one free launch, per repetition: the shape of T1, T2, T3,
//! T4, T6 and T7. Items with i % stride != 0 do nothing (T2: lane 0 of each warp allocates).
struct af_spec {
  std::string case_id, param, what;
  std::uint64_t row_size = 0;
  std::uint64_t items = 0;
  std::uint64_t stride = 1;
  bool warp = false;
  size_rule sizes;  //!< bytes of item i: sizes.of(i)
  std::string note;
};

template <class S>
void alloc_free(S& st, launcher& L, const case_env& env, const af_spec& sp) {
  const std::uint64_t active = (sp.items + sp.stride - 1) / sp.stride;
  row ra = make_row(S::name, sp.case_id, "alloc", sp.param, sp.row_size, sp.items);
  ra.ops_per_rep = active;
  ra.note = sp.note;
  row rf = ra;
  rf.op = "free";
  env.out.progress(sp.case_id + " " + S::name + " " + sp.what);
  L.label(sp.what);
  std::vector<std::uint64_t> sz(sp.items, 0);
  for (std::uint64_t i = 0; i < sp.items; i += sp.stride) sz[i] = sp.sizes.of(i);
  std::vector<void*> ptr(sp.items, nullptr);
  std::vector<block> blocks;
  blocks.reserve(active);
  step_count sa, sf;
  const sim_lane le = lane_env(st);
  for (unsigned rep = 0; rep < env.total_reps(); ++rep) {
    st.reset();
    unsigned long long fails = 0;
    const double ta = L.run(sp.items, 1, [&](std::uint64_t i) {
      if (i % sp.stride) return;
      if (sp.warp)
        alloc_item<true>(st, le, ptr.data(), i, sz[i], &fails);
      else
        alloc_item<false>(st, le, ptr.data(), i, sz[i], &fails);
    });
    if (rep > 0) sa.add(L.last_steps(), active);
    ra.failures += fails;
    blocks.clear();
    for (std::uint64_t i = 0; i < sp.items; i += sp.stride)
      if (ptr[i]) blocks.push_back({static_cast<char*>(ptr[i]), sz[i], block_key(env.o.seed, rep, i)});
    ra.corrupt += check_fresh(blocks, st.base(), st.bytes());
    const double tf = L.run(sp.items, 1, [&](std::uint64_t i) {
      if (i % sp.stride) return;
      free_item(st, ptr[i], sp.warp);
    });
    if (rep > 0) {
      sf.add(L.last_steps(), active);
      ra.ms.push_back(ta);
      rf.ms.push_back(tf);
    }
  }
  sa.put(ra);
  sf.put(rf);
  env.out.add(std::move(ra));
  env.out.add(std::move(rf));
}

std::vector<std::uint64_t> sizes_or(const options& o, std::vector<std::uint64_t> d) { return o.sizes.empty() ? d : o.sizes; }
std::vector<std::uint64_t> threads_or(const options& o, std::vector<std::uint64_t> d) { return o.threads.empty() ? d : o.threads; }

std::string join_param(const std::string& a, const std::string& b) {
  if (a.empty()) return b;
  if (b.empty()) return a;
  return a + " " + b;
}

template <class S>
void case_t1_t6(const case_env& env, bool warp) {
  const std::string id = warp ? "T6" : "T1";
  std::vector<std::uint64_t> sizes;
  if (!env.o.sizes.empty())
    sizes = env.o.sizes;
  else if (env.o.sweep && !warp)
    for (std::uint64_t s = 4; s <= 8192; s += 4) sizes.push_back(s);
  else
    sizes = {16, 64, 256, 1024, 4096, 8192};
  const auto threads = threads_or(env.o, {env.quick() ? 1024u : 4096u});
  S st(env.heap(), base_sms);
  launcher L(env.o.seed, st.sms, id + " " + S::name);
  for (const std::uint64_t t : threads)
    for (const std::uint64_t s : sizes) {
      af_spec sp;
      sp.case_id = id;
      sp.param = join_param(warp ? "warp" : "", threads.size() > 1 ? "threads=" + std::to_string(t) : "");
      sp.what = format_bytes(s) + (threads.size() > 1 ? " x " + std::to_string(t) : "");
      sp.row_size = s;
      sp.items = t;
      sp.warp = warp;
      sp.sizes.size = s;
      alloc_free(st, L, env, sp);
    }
}

template <class S>
void case_t2(const case_env& env) {
  const auto sizes = sizes_or(env.o, {16, 4096});
  std::vector<std::uint64_t> warps;
  if (env.o.threads.empty())
    warps = {env.quick() ? 64u : 256u};
  else
    for (const std::uint64_t t : env.o.threads) warps.push_back(std::max<std::uint64_t>(1, t / 32));
  S st(env.heap(), base_sms);
  launcher L(env.o.seed, st.sms, std::string("T2 ") + S::name);
  for (const std::uint64_t w : warps)
    for (const std::uint64_t s : sizes) {
      af_spec sp;
      sp.case_id = "T2";
      sp.param = warps.size() > 1 ? "warps=" + std::to_string(w) : "";
      sp.what = format_bytes(s) + " x " + std::to_string(w) + " warps";
      sp.row_size = s;
      sp.items = w * 32;
      sp.stride = 32;
      sp.sizes.size = s;
      alloc_free(st, L, env, sp);
    }
}

template <class S>
void case_t3(const case_env& env) {
  const auto his = sizes_or(env.o, {64, 512, 4096, 8192});
  const auto threads = threads_or(env.o, {env.quick() ? 1024u : 4096u});
  S st(env.heap(), base_sms);
  launcher L(env.o.seed, st.sms, std::string("T3 ") + S::name);
  const std::uint64_t seed = env.o.seed;
  for (const std::uint64_t t : threads)
    for (std::uint64_t hi : his) {
      hi = std::max<std::uint64_t>(hi, 16);
      af_spec sp;
      sp.case_id = "T3";
      sp.param = join_param("hi=" + std::to_string(hi), threads.size() > 1 ? "threads=" + std::to_string(t) : "");
      sp.what = "hi=" + std::to_string(hi) + (threads.size() > 1 ? " x " + std::to_string(t) : "");
      sp.row_size = 0;
      sp.items = t;
      sp.sizes.hi = hi;
      sp.sizes.seed = seed;
      alloc_free(st, L, env, sp);
    }
}

template <class S>
void case_t4(const case_env& env) {
  const auto sizes = sizes_or(env.o, {16, 256, 4096});
  const auto threads = threads_or(env.o, env.quick() ? std::vector<std::uint64_t>{1, 4, 16, 64, 256, 1024}
                                                       : std::vector<std::uint64_t>{1, 4, 16, 64, 256, 1024, 4096});
  S st(env.heap(), base_sms);
  launcher L(env.o.seed, st.sms, std::string("T4 ") + S::name);
  for (const std::uint64_t s : sizes)
    for (const std::uint64_t t : threads) {
      af_spec sp;
      sp.case_id = "T4";
      sp.param = "threads=" + std::to_string(t);
      sp.what = format_bytes(s) + " x " + std::to_string(t);
      sp.row_size = s;
      sp.items = t;
      sp.sizes.size = s;
      alloc_free(st, L, env, sp);
    }
}

template <class S>
void case_t7(const case_env& env) {
  const auto sizes = sizes_or(env.o, {16 * KiB, 64 * KiB, 512 * KiB, 4 * MiB});
  S st(env.heap(), base_sms);
  launcher L(env.o.seed, st.sms, std::string("T7 ") + S::name);
  for (const std::uint64_t s : sizes) {
    const std::uint64_t t = std::min<std::uint64_t>(2048, st.bytes() / 2 / std::max<std::uint64_t>(s, 1));
    if (t == 0) {
      row r = make_row(S::name, "T7", "alloc", "", s, 0);
      r.note = "S is larger than half the " + format_bytes(st.bytes()) + " heap: nothing to run (raise --heap)";
      env.out.add(std::move(r));
      continue;
    }
    af_spec sp;
    sp.case_id = "T7";
    sp.what = format_bytes(s) + " x " + std::to_string(t);
    sp.row_size = s;
    sp.items = t;
    sp.sizes.size = s;
    alloc_free(st, L, env, sp);
  }
}

//! T5: workloads.hpp's churn_item with Overlap: each lane allocates, tags the first and last
//! word, allocates the next block, then reads the previous block's tag back and frees it (so
//! another lane's steps lie between the write and the check).
template <class S>
void case_t5(const case_env& env) {
  const auto sizes = sizes_or(env.o, {16, 256, 4096});
  const auto threads = threads_or(env.o, {env.quick() ? 256u : 512u});
  const std::uint64_t iters = env.quick() ? 4 : 16;
  S st(env.heap(), base_sms);
  launcher L(env.o.seed, st.sms, std::string("T5 ") + S::name);
  for (const std::uint64_t t : threads)
    for (const std::uint64_t s : sizes) {
      row r = make_row(S::name, "T5", "churn", threads.size() > 1 ? "threads=" + std::to_string(t) : "", s, t);
      r.ops_per_rep = t * iters;
      r.metrics["iterations"] = static_cast<double>(iters);
      const std::string what = format_bytes(s) + (threads.size() > 1 ? " x " + std::to_string(t) : "");
      env.out.progress("T5 " + std::string(S::name) + " " + what);
      L.label(what);
      step_count sc;
      const sim_lane le = lane_env(st);
      for (unsigned rep = 0; rep < env.total_reps(); ++rep) {
        st.reset();
        unsigned long long fails = 0, bad = 0;
        // the tags' seed differs per repetition
        const churn_args c{t, s, static_cast<unsigned>(iters), mix64(env.o.seed ^ (std::uint64_t{rep} << 32)), &fails, &bad};
        const double ms = L.run(t, 2 * iters, [&](std::uint64_t i) { churn_item<true>(st, le, c, i); });
        if (rep > 0) sc.add(L.last_steps(), t * iters);
        r.failures += fails;
        r.corrupt += bad;
        if (rep > 0) r.ms.push_back(ms);
      }
      sc.put(r);
      if (!S::frees) r.note = std::string(S::name) + " never frees: churn consumes " + format_bytes(bump_state::rounded(s)) + " per pair";
      env.out.add(std::move(r));
    }
}

template <class S>
void case_t8(const case_env& env) {
  const auto sizes = sizes_or(env.o, {16, 256, 4096});
  const std::uint64_t lanes = env.quick() ? 512 : 1024;
  S st(t8_heap_bytes, t8_sms);
  launcher L(env.o.seed, st.sms, std::string("T8 ") + S::name);
  for (const std::uint64_t s : sizes) {
    row r = make_row(S::name, "T8", "oom", "", s, lanes);
    env.out.progress("T8 " + std::string(S::name) + " " + format_bytes(s));
    L.label(format_bytes(s));
    std::vector<double> util, rounds_v, late_v;
    std::vector<void*> ptr(lanes);
    std::vector<block> all;
    const std::uint64_t max_rounds = st.bytes() / (16 * lanes) + 16;
    bool never = false;
    step_count sc;
    const sim_lane le = lane_env(st);
    for (unsigned rep = 0; rep < env.total_reps(); ++rep) {
      st.reset();
      all.clear();
      double ms = 0;
      std::uint64_t rounds = 0, late = 0;
      bool seen_null = false, extra = false;
      while (true) {
        unsigned long long nulls = 0;  // exhaustion: not failures
        ms += L.run(lanes, 1, [&](std::uint64_t i) { alloc_item<false>(st, le, ptr.data(), i, s, &nulls); });
        if (rep > 0) sc.add(L.last_steps(), lanes);
        ++rounds;
        const bool null_here = nulls != 0;
        for (std::uint64_t i = 0; i < lanes; ++i) {
          if (!ptr[i]) continue;
          if (extra) ++late;
          block b{static_cast<char*>(ptr[i]), s, block_key(env.o.seed, rep, all.size())};
          if (inside(b.p, b.bytes, st.base(), st.bytes())) fill(b);
          all.push_back(b);
        }
        if (extra) break;
        if (null_here && !seen_null) {
          seen_null = true;
          extra = true;  // one more round, which should answer nullptr
          continue;
        }
        if (rounds >= max_rounds) {
          never = true;
          break;
        }
      }
      std::vector<char> bad = geometry(all, st.base(), st.bytes());
      for (std::size_t i = 0; i < all.size(); ++i)
        if (!bad[i] && !verify(all[i])) bad[i] = 1;
      r.corrupt += static_cast<std::uint64_t>(std::count(bad.begin(), bad.end(), 1));
      if (rep > 0 || env.o.reps == 0) {
        util.push_back(static_cast<double>(all.size() * s) / static_cast<double>(st.bytes()));
        rounds_v.push_back(static_cast<double>(rounds));
        late_v.push_back(static_cast<double>(late));
      }
      if (rep > 0) r.ms.push_back(ms);
      r.ops_per_rep = rounds * lanes;
    }
    r.metrics["utilisation"] = median_of(util);
    r.metrics["rounds"] = median_of(rounds_v);
    r.metrics["late_successes"] = median_of(late_v);
    r.metrics["heap_bytes"] = static_cast<double>(st.bytes());
    sc.put(r);
    r.note = "heap " + format_bytes(st.bytes()) + " on " + std::to_string(st.sms) + " SMs, rounds of " + std::to_string(lanes) +
             " allocations";
    if (never) r.note += "; the heap was never exhausted within " + std::to_string(max_rounds) + " rounds";
    env.out.add(std::move(r));
  }
}

template <class S>
void case_t9(const case_env& env) {
  const auto sizes = sizes_or(env.o, {16, 256, 4096});
  const std::uint64_t n = 1000;
  const std::uint64_t rounds = env.quick() ? 10 : 100;
  S st(env.heap(), base_sms);
  launcher L(env.o.seed, st.sms, std::string("T9 ") + S::name);
  for (const std::uint64_t s : sizes) {
    row r = make_row(S::name, "T9", "rounds", "", s, n);
    env.out.progress("T9 " + std::string(S::name) + " " + format_bytes(s));
    L.label(format_bytes(s));
    std::vector<double> ratio_max_v, ratio_final_v;
    std::vector<void*> ptr(n);
    std::vector<std::uint32_t> key(n);
    std::vector<char> redo(n);
    const sim_lane le = lane_env(st);
    std::vector<block> live;
    std::uint64_t reallocs_total = 0;
    step_count sc;
    const auto ratio = [&]() {
      std::uintptr_t lo = ~std::uintptr_t{0}, hi = 0;
      for (std::uint64_t i = 0; i < n; ++i)
        if (ptr[i]) {
          lo = std::min(lo, reinterpret_cast<std::uintptr_t>(ptr[i]));
          hi = std::max(hi, reinterpret_cast<std::uintptr_t>(ptr[i]) + s);
        }
      return hi > lo ? static_cast<double>(hi - lo) / static_cast<double>(n * s) : 0.0;
    };
    const auto check_live = [&](bool fill_new, const std::vector<char>* fresh) {
      live.clear();
      std::vector<std::uint64_t> slot;
      for (std::uint64_t i = 0; i < n; ++i)
        if (ptr[i]) {
          live.push_back({static_cast<char*>(ptr[i]), s, key[i]});
          slot.push_back(i);
        }
      std::vector<char> bad = geometry(live, st.base(), st.bytes());
      if (fill_new)
        for (std::size_t j = 0; j < live.size(); ++j)
          if ((!fresh || (*fresh)[slot[j]]) && inside(live[j].p, s, st.base(), st.bytes())) fill(live[j]);
      for (std::size_t j = 0; j < live.size(); ++j)
        if (!bad[j] && !verify(live[j])) bad[j] = 1;
      return static_cast<std::uint64_t>(std::count(bad.begin(), bad.end(), 1));
    };
    for (unsigned rep = 0; rep < env.total_reps(); ++rep) {
      st.reset();
      unsigned long long fails = 0;
      L.run(n, 1, [&](std::uint64_t i) { alloc_item<false>(st, le, ptr.data(), i, s, &fails); });
      for (std::uint64_t i = 0; i < n; ++i) key[i] = block_key(env.o.seed, rep, i);
      r.corrupt += check_live(true, nullptr);
      double rmax = ratio();
      double ms = 0;
      std::uint64_t reallocs = 0;
      for (std::uint64_t round = 0; round < rounds; ++round) {
        // this backend's choice rule (the GPU's is frag_chosen): a slot is redone with
        // probability 1/2, and always when its last allocation failed
        for (std::uint64_t i = 0; i < n; ++i) {
          redo[i] = !ptr[i] || (mix64(env.o.seed ^ mix64((round << 32) ^ i ^ 0x7439000000000000ull)) & 1);
          reallocs += redo[i];
        }
        ms += L.run(n, 2, [&](std::uint64_t i) {
          if (redo[i]) frag_item(st, le, ptr.data(), i, s, &fails);
        });
        if (rep > 0) sc.add(L.last_steps(), static_cast<std::uint64_t>(std::count(redo.begin(), redo.end(), 1)));
        for (std::uint64_t i = 0; i < n; ++i)
          if (redo[i]) key[i] = block_key(env.o.seed, rep, (round + 1) * n + i);
        r.corrupt += check_live(true, &redo);
        rmax = std::max(rmax, ratio());
      }
      if (rep > 0 || env.o.reps == 0) {
        ratio_max_v.push_back(rmax);
        ratio_final_v.push_back(ratio());
      }
      if (rep > 0) {
        r.ms.push_back(ms / static_cast<double>(rounds));
        reallocs_total += reallocs;
      }
      r.failures += fails;
    }
    r.ops_per_rep = env.o.reps ? reallocs_total / env.o.reps / rounds : n / 2;
    r.metrics["range_ratio"] = median_of(ratio_max_v);
    r.metrics["range_ratio_final"] = median_of(ratio_final_v);
    r.metrics["rounds"] = static_cast<double>(rounds);
    sc.put(r);
    if (!S::frees) r.note = std::string(S::name) + " never frees: its " + format_bytes(st.bytes()) + " buffer runs out (failures by design)";
    env.out.add(std::move(r));
  }
}

// ---- T10 / T11 --------------------------------------------------------------------------------

std::uint64_t graph_heap_bytes(const graph_plan& p) { return std::max<std::uint64_t>(next_pow2(4 * p.peak_bytes), 16 * MiB); }

//! T10/T11 on one allocator: workloads.hpp's graph_update_item over host vertex records (one lane
//! per item, grid-stride beyond lane_cap), and the host's checks.
template <class S>
class graph_run {
 public:
  graph_run(S& st, launcher& L, const graph_plan& plan) : st_(st), L_(L), plan_(plan), le_(lane_env(st)), vs_(plan.vertices) {}

  //! Empties every vertex record and builds every array from the CSR; host ms of the launch.
  double build() {
    std::fill(vs_.begin(), vs_.end(), vstate{});
    return update(nullptr, plan_.offsets.data(), plan_.adj.data(), plan_.vertices, false, 1);
  }
  //! One insert round; host ms of the launch.
  double insert(const graph_batch& b) { return update(b.vertex.data(), b.offsets.data(), b.nbr.data(), b.vertex.size(), false, 2); }
  //! One delete round; host ms of the launch.
  double erase(const graph_batch& b) { return update(b.vertex.data(), b.offsets.data(), b.nbr.data(), b.vertex.size(), true, 2); }

  //! Failures and bad blocks (neighbours not found, unusable blocks) since the last call, plus
  //! digest mismatches against `digest` and overlapping / misplaced arrays.
  std::pair<std::uint64_t, std::uint64_t> check(const std::vector<std::uint64_t>& digest) {
    std::uint64_t fails = fails_, bad = missing_;
    fails_ = missing_ = 0;
    std::vector<block> arrays;
    for (std::uint32_t v = 0; v < plan_.vertices; ++v) {
      const vstate& s = vs_[v];
      if (vertex_digest(s) != digest[v]) ++bad;
      if (s.data != nullptr) arrays.push_back({reinterpret_cast<char*>(s.data), s.cap_bytes, 0});
    }
    const std::vector<char> g = geometry(arrays, st_.base(), st_.bytes());
    bad += static_cast<std::uint64_t>(std::count(g.begin(), g.end(), 1));
    return {fails, bad};
  }

 private:
  double update(const std::uint32_t* vertex, const std::uint32_t* offsets, const std::uint32_t* nbr, std::size_t items, bool del,
                std::uint64_t ops_per_item) {
    const update_args u{vs_.data(), vertex, offsets, nbr, static_cast<std::uint32_t>(items), del ? 1 : 0, &fails_, &missing_};
    return L_.run(items, ops_per_item, [&](std::uint64_t i) { graph_update_item(st_, le_, u, i); });
  }

  S& st_;
  launcher& L_;
  const graph_plan& plan_;
  const sim_lane le_;
  std::vector<vstate> vs_;
  unsigned long long fails_ = 0, missing_ = 0;
};

template <class S>
void case_graph(const case_env& env, const std::vector<graph_plan>& plans, bool updates) {
  const std::string id = updates ? "T11" : "T10";
  if (plans.empty()) {
    row r = make_row(S::name, id, updates ? "insert" : "build", "", 0, 0);
    r.note = "no graph given (--graphs)";
    env.out.add(std::move(r));
    return;
  }
  for (const graph_plan& plan : plans) {
    S st(graph_heap_bytes(plan), base_sms);
    launcher L(env.o.seed, st.sms, id + " " + S::name + " " + plan.name);
    graph_run<S> g(st, L, plan);
    env.out.progress(id + " " + S::name + " " + plan.name);
    row rb = make_row(S::name, "T10", "build", plan.name, 0, 0);
    row ri = make_row(S::name, "T11", "insert", plan.name, 0, 0);
    row rd = make_row(S::name, "T11", "delete", plan.name, 0, 0);
    rb.threads = rb.ops_per_rep = plan.vertices;
    const std::uint64_t epr = plan.inserts.empty() ? 0 : plan.inserts[0].edges;
    ri.ops_per_rep = rd.ops_per_rep = epr;
    for (const auto& b : plan.inserts) ri.threads = std::max<std::uint64_t>(ri.threads, b.vertex.size());
    for (const auto& b : plan.deletes) rd.threads = std::max<std::uint64_t>(rd.threads, b.vertex.size());
    step_count sb, si, sd;
    for (unsigned rep = 0; rep < env.total_reps(); ++rep) {
      st.reset();
      const double tb = g.build();
      if (rep > 0) sb.add(L.last_steps(), plan.vertices);
      auto [f0, c0] = g.check(plan.digest_initial);
      rb.failures += f0;
      rb.corrupt += c0;
      if (!updates) {
        if (rep > 0) rb.ms.push_back(tb);
        continue;
      }
      double ti = 0, td = 0;
      for (const auto& b : plan.inserts) {
        ti += g.insert(b);
        if (rep > 0) si.add(L.last_steps(), b.edges);
      }
      auto [f1, c1] = g.check(plan.digest_peak);
      ri.failures += f1;
      ri.corrupt += c1;
      for (const auto& b : plan.deletes) {
        td += g.erase(b);
        if (rep > 0) sd.add(L.last_steps(), b.edges);
      }
      auto [f2, c2] = g.check(plan.digest_initial);
      rd.failures += f2;
      rd.corrupt += c2;
      if (rep > 0 && !plan.inserts.empty()) {
        ri.ms.push_back(ti / static_cast<double>(plan.inserts.size()));
        rd.ms.push_back(td / static_cast<double>(plan.deletes.size()));
      }
    }
    const std::string heap_note = "heap " + format_bytes(st.bytes());
    if (!updates) {
      rb.metrics["vertices"] = plan.vertices;
      rb.metrics["edges"] = static_cast<double>(plan.edges);
      rb.metrics["initial_bytes"] = static_cast<double>(plan.initial_bytes);
      rb.metrics["heap_bytes"] = static_cast<double>(st.bytes());
      rb.note = heap_note;
      sb.put(rb);
      env.out.add(std::move(rb));
    } else {
      // build failures/corruption would also show in T11's digests: report them there too
      ri.failures += rb.failures;
      ri.corrupt += rb.corrupt;
      for (row* r : {&ri, &rd}) {
        r->metrics["rounds"] = static_cast<double>(plan.inserts.size());
        r->metrics["peak_bytes"] = static_cast<double>(plan.peak_bytes);
        r->metrics["reallocations"] = static_cast<double>(plan.reallocations);
        r->metrics["heap_bytes"] = static_cast<double>(st.bytes());
        r->note = heap_note + (S::frees ? "" : "; " + std::string(S::name) + " never frees: old arrays stay allocated");
      }
      si.put(ri);
      sd.put(rd);
      env.out.add(std::move(ri));
      env.out.add(std::move(rd));
    }
  }
}

// ---- T12 / T13 --------------------------------------------------------------------------------

template <class S>
void case_t12(const case_env& env) {
  row r = make_row(S::name, "T12", "init", "", 0, 0);
  r.ops_per_rep = 1;
  env.out.progress("T12 " + std::string(S::name) + " " + format_bytes(t12_heap_bytes));
  std::uint64_t bytes = t12_heap_bytes;
  try {
    mapping probe(bytes);
  } catch (const std::runtime_error&) {
    bytes = 1 * GiB;
    r.note = "an 8 GiB mapping was refused: measured with a 1 GiB heap";
  }
  r.param = "heap=" + format_bytes(bytes);
  volatile std::uint64_t keep = 0;
  for (unsigned rep = 0; rep < env.total_reps(); ++rep) {
    const auto t0 = clock_type::now();
    {
      mapping heap(bytes);  // never touched: lazily committed, as a device allocation would be
      if constexpr (S::frees) {
        const auto layout = toga::heap_layout::make<P>(toga::heap_layout::levels_for(bytes), base_sms);
        std::vector<std::uint64_t> meta(layout.bytes / 8 + 1, 0);
        auto a = toga_allocator::make(heap.data(), reinterpret_cast<char*>(meta.data()), layout);
        a.init_after_zero(0);
        keep = keep + a.heap_bytes + meta[layout.state_off / 8];
      } else {
        std::uint64_t next = 0;
        keep = keep + next + heap.size();
      }
    }
    const auto t1 = clock_type::now();
    if (rep > 0) r.ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
  }
  if (S::frees) {
    const auto layout = toga::heap_layout::make<P>(toga::heap_layout::levels_for(bytes), base_sms);
    r.metrics["metadata_bytes"] = static_cast<double>(layout.bytes);
  }
  r.metrics["heap_bytes"] = static_cast<double>(bytes);
  const std::string what = S::frees ? "host time: map the heap (untouched), zero the metadata, make + init_after_zero, unmap"
                                    : "host time: map the buffer (untouched), zero the offset, unmap";
  r.note = r.note.empty() ? what : r.note + "; " + what;
  env.out.add(std::move(r));
}

void case_t13(const std::string& alloc, sink& out) {
  row r = make_row(alloc, "T13", "registers", "", 0, 0);
  r.note = "registers are a GPU figure: run toga-bench on a GPU";
  out.add(std::move(r));
}

// ---- dispatch ---------------------------------------------------------------------------------

template <class S>
void run_for(const std::string& id, const case_env& env, const std::vector<graph_plan>& plans) {
  if (id == "T1") return case_t1_t6<S>(env, false);
  if (id == "T2") return case_t2<S>(env);
  if (id == "T3") return case_t3<S>(env);
  if (id == "T4") return case_t4<S>(env);
  if (id == "T5") return case_t5<S>(env);
  if (id == "T6") return case_t1_t6<S>(env, true);
  if (id == "T7") return case_t7<S>(env);
  if (id == "T8") return case_t8<S>(env);
  if (id == "T9") return case_t9<S>(env);
  if (id == "T10") return case_graph<S>(env, plans, false);
  if (id == "T11") return case_graph<S>(env, plans, true);
  if (id == "T12") return case_t12<S>(env);
  // T13 (registers of the GPU kernels) and T14 (the GPU heap's edges at 2^20 threads) have no
  // simulator version: note rows only.
  if (id == "T13") return case_t13(S::name, env.out);
  if (id == "T14") {
    row r = make_row(S::name, "T14", "edges", "", 0, 0);
    r.note = "the edges (full, failing, 80 % full and fresh heaps at 2^20 threads) are GPU figures: run toga-bench on a GPU";
    return env.out.add(std::move(r));
  }
  throw std::invalid_argument("sim backend: unknown case '" + id + "'");
}

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("model name", 0) == 0) {
      const auto colon = line.find(':');
      if (colon != std::string::npos) {
        std::string m = line.substr(colon + 1);
        m.erase(0, m.find_first_not_of(" \t"));
        return m;
      }
    }
  return "unknown";
}

class sim_backend final : public backend {
 public:
  std::string name() const override { return "sim"; }
  std::vector<std::string> allocators() const override { return {"toga-sim", "bump-warp-sim", "bump-sim"}; }
  std::optional<std::string> unavailable() const override { return std::nullopt; }
  std::map<std::string, std::string> environment() const override {
    return {
        {"backend", "fiber simulator"},
        {"host_cpu", cpu_model()},
        {"host_threads", "1 (every lane is a fiber on one host thread)"},
        {"timing", "host wall-clock (steady_clock) around each simulated launch: trends and regressions, not GPU figures"},
        {"sim_sms", std::to_string(base_sms) + " (more when a launch needs them; T8: " + std::to_string(t8_sms) + ")"},
        {"sim_threads_per_block", "256 (32 below 256 threads)"},
        {"sim_max_lanes_per_launch", std::to_string(lane_cap) + " (grid-stride beyond)"},
        {"sim_schedule", "random strategy for the first " + std::to_string(fair_after_per_lane) + " x lanes points of a launch, then the fair tail"},
        {"sim_heap", format_bytes(default_heap_bytes) + " unless --heap (T8: " + format_bytes(t8_heap_bytes) +
                         ", T10/T11: max(4 x peak, 16 MiB), T12: 8 GiB)"},
        {"toga_checked", toga::checked_build ? "yes" : "no"},
    };
  }
  void run_case(const std::string& id, const std::vector<std::string>& allocs, const options& o, sink& out) override {
    static const std::vector<std::string> known = {"T1", "T2", "T3", "T4", "T5", "T6", "T7",
                                                   "T8", "T9", "T10", "T11", "T12", "T13", "T14"};
    if (std::find(known.begin(), known.end(), id) == known.end())
      throw std::invalid_argument("sim backend: unknown case '" + id + "'");
    for (const auto& a : allocs)
      if (a != toga_state::name && a != bump_state::name && a != bump_warp_state::name)
        throw std::invalid_argument("sim backend: unknown allocator '" + a + "' (toga-sim, bump-warp-sim, bump-sim)");
    std::vector<graph_plan> plans;
    if (id == "T10" || id == "T11") {
      const unsigned rounds = o.prof == profile::quick ? 2 : 10;
      const unsigned edges = o.prof == profile::quick ? 200 : 1000;
      for (const auto& path : o.graphs) {
        out.progress(id + " planning " + path);
        plans.push_back(make_graph_plan(load_graph(path), rounds, edges, o.seed));
      }
    }
    const case_env env{o, out};
    for (const auto& a : allocs) {
      if (a == toga_state::name)
        run_for<toga_state>(id, env, plans);
      else if (a == bump_warp_state::name)
        run_for<bump_warp_state>(id, env, plans);
      else
        run_for<bump_state>(id, env, plans);
    }
  }

  std::string heap_problem(const std::string& id, const options& o) const override {
    // What the cases below keep live at once on the heap of T1-T7 and T9 (T8, T10-T12 size
    // their own heaps; T7 sizes its thread count to half the heap).
    const bool quick = o.prof == profile::quick;
    const std::uint64_t heap = o.heap_bytes ? o.heap_bytes : default_heap_bytes;
    const std::uint64_t capacity = toga::geom::page_bytes << (toga::heap_layout::levels_for(heap) - 1);
    auto sizes = [&](std::vector<std::uint64_t> d) { return o.sizes.empty() ? d : o.sizes; };
    auto threads = [&](std::vector<std::uint64_t> d) { return o.threads.empty() ? d : o.threads; };
    std::vector<heap_demand> demands;
    auto add = [&](std::uint64_t blocks, std::uint64_t size, const std::string& how) {
      demands.push_back({id + " " + format_bytes(size) + " x " + how, blocks, size});
    };
    if (id == "T1" || id == "T6") {
      std::vector<std::uint64_t> ss = sizes({16, 64, 256, 1024, 4096, 8192});
      if (o.sweep && o.sizes.empty() && id == "T1") ss = {8192};
      for (auto t : threads({quick ? 1024u : 4096u}))
        for (auto s : ss) add(t, s, std::to_string(t) + " threads");
    } else if (id == "T2") {
      for (auto t : threads({(quick ? 64u : 256u) * 32}))
        for (auto s : sizes({16, 4096})) add(std::max<std::uint64_t>(1, t / 32), s, std::to_string(t / 32) + " warps");
    } else if (id == "T3") {
      for (auto t : threads({quick ? 1024u : 4096u}))
        for (auto hi : sizes({64, 512, 4096, 8192})) add(t, std::max<std::uint64_t>(hi, 16), std::to_string(t) + " threads (mixed sizes up to hi)");
    } else if (id == "T4") {
      for (auto t : threads(quick ? std::vector<std::uint64_t>{1024} : std::vector<std::uint64_t>{4096}))
        for (auto s : sizes({16, 256, 4096})) add(t, s, std::to_string(t) + " threads");
    } else if (id == "T5") {
      for (auto t : threads({quick ? 256u : 512u}))
        for (auto s : sizes({16, 256, 4096})) add(2 * t, s, std::to_string(t) + " threads (2 live blocks each)");
    } else if (id == "T9") {
      for (auto s : sizes({16, 256, 4096})) add(1000, s, "1000 live blocks");
    }
    return check_heap(demands, capacity, base_sms, "toga-sim",
                      o.heap_bytes ? "--heap " + format_bytes(o.heap_bytes) : "the default heap (" + format_bytes(default_heap_bytes) + ")");
  }
};

}  // namespace

std::unique_ptr<backend> make_sim_backend() { return std::make_unique<sim_backend>(); }

}  // namespace toga::bench
