// toga-bench: the per-thread workloads of the cases, written once for both backends.
//
// Each function below is what ONE thread does for ONE item of a case: a CUDA thread of a kernel
// in the GPU backend (gpu_backend.cu), a simulated lane of a toga::sim::world launch in the
// simulator backend (sim_backend.cpp). The backends keep only what differs: which thread serves
// which item (grid and blocks vs simulated SMs and grid-stride lanes; T2's "lane 0 of each
// warp"), launching and timing (CUDA events vs host time around world::run), where memory lives
// (device buffers vs host vectors), the allocators themselves, the host-side checks and the rows.
//
//   case            per-thread body          GPU kernel                  simulator lane
//   T1-T4, T6, T7   alloc_item, free_item    alloc_kernel, free_kernel   alloc_free()
//   T5              churn_item<Overlap>      churn_kernel (false)        case_t5 (true)
//   T8              alloc_item (rounds)      alloc_kernel                case_t8
//   T9              alloc_item, frag_item    alloc_kernel, frag_kernel   case_t9
//   T10, T11        graph_update_item        graph_update_kernel         graph_run
//   verification    pattern_base/_word, vertex_digest (both); churn_check (T5, in the lanes)
//   T12-T14 have no per-thread workload of their own (T12 times construction; T13 reads the
//   GPU kernels' attributes, a GPU-only figure; T14, GPU only, reuses alloc_item / free_item
//   through alloc_kernel / free_kernel; the simulator writes note rows for T13 and T14).
//
// What still differs between the backends, on purpose (see each function): T5 runs with one live
// block per thread on the GPU and with two in the simulator (Overlap, so that other lanes run
// between a block's write and its check); T9's choice of the slots a round frees is each
// backend's own rule (the simulator also retries slots whose allocation failed); the case sizes
// (threads, rounds, heaps) are scaled down in the simulator.
//
// Template parameters of the bodies:
//   A  an allocator handle (by reference, const or not): void* allocate(std::uint64_t bytes),
//      void deallocate(void* p) (nullptr: nothing), and for the warp-cooperative forms
//      allocate_warp / deallocate_warp. GPU: toga_policy, malloc_policy, bump_warp_policy,
//      bump_policy; simulator: toga_state, bump_state_t.
//   E  the lane environment, a backend type:
//        static void count(unsigned long long* c): adds 1 to a result counter that many threads
//          share. GPU: atomicAdd. Simulator: ++*c, a plain host increment: every lane is a fiber
//          on one host thread, and a plain increment is no scheduling point, so the benchmark's
//          bookkeeping does not change the schedule it measures (a platform fetch_add would).
//        bool usable(const void* p, std::uint64_t bytes) const: whether a fresh block may be
//          written. GPU: in the kernels that only store their pointers, constexpr true (the
//          host checks bounds and overlaps afterwards, and the check costs nothing there); in
//          churn and the graph updates, which write first, 16 B aligned and inside the
//          allocator's memory (gpu_backend.cu's checked_lane). Simulator: inside the heap and
//          16 B aligned, so that a wrong block never overwrites the host process's memory; a
//          block that is not usable is counted in a corrupt counter, is never written and never
//          freed.
//
// Every body is TOGA_DEVICE (device code under nvcc, plain C++ for the simulator) and force-
// inlined (remove_neighbours excepted, out of line on purpose), so that a kernel executes exactly
// what it did with the body written in it: no call, no extra memory traffic, and the statements
// in the same order (the PTX of every kernel was compared, names aside, when the bodies moved
// here). gpu_backend.cu's __launch_bounds__ variants (T13) measure this code.
//
// Thread safety: an item belongs to one thread (a slot, a vertex of one round); what threads
// share are the allocator and the counters, which go through the allocator and E::count only.
// Counters are unsigned long long (CUDA's atomicAdd type) on both backends.
#pragma once

#include <cstddef>
#include <cstdint>

#include "bench.hpp"
#include "graph_plan.hpp"
#include "toga/config.hpp"

namespace toga::bench {

// ---- sizes and patterns ---------------------------------------------------------------------------

//! Bytes of allocation `id`: a fixed size, or T3's mixed_size. Trivially copyable (a kernel
//! argument).
struct size_rule {
  std::uint64_t size = 0;  //!< bytes, when hi == 0
  std::uint64_t hi = 0;    //!< > 0: mixed_size(id, hi, seed), uniform in [16, hi]
  std::uint64_t seed = 0;
  TOGA_HOST_DEVICE std::uint64_t of(std::uint64_t id) const { return hi != 0 ? mixed_size(id, hi, seed) : size; }
};

//! First word of the verification pattern of allocation `id`; word w of the block holds
//! pattern_word(pattern_base(id, seed), w). The simulator passes seed ^ (repetition << 48) so
//! that every repetition writes other values.
TOGA_HOST_DEVICE inline std::uint32_t pattern_base(std::uint64_t id, std::uint64_t seed) {
  return static_cast<std::uint32_t>(mix64(id ^ mix64(seed)));
}
//! 4-byte word `w` of a block whose pattern starts with `base`.
TOGA_HOST_DEVICE inline std::uint32_t pattern_word(std::uint32_t base, std::uint64_t w) { return base ^ static_cast<std::uint32_t>(w); }

// ---- T1-T4, T6, T7, T8, T9 (population), T14: one allocation, one free ---------------------------

//! One allocation of `bytes` into slots[i] (nullptr on failure, counted in `*failures`). Warp:
//! the warp-cooperative entry point (T6; A must have allocate_warp).
template <bool Warp, class A, class E>
TOGA_DEVICE TOGA_FORCEINLINE void alloc_item(A& a, const E& env, void** slots, std::uint64_t i, std::uint64_t bytes,
                                             unsigned long long* failures) {
  void* p;
  if constexpr (Warp) {
    p = a.allocate_warp(bytes);
  } else {
    p = a.allocate(bytes);
  }
  if (p == nullptr) env.count(failures);
  slots[i] = p;
}

//! Frees `p` (nullptr: nothing), through the warp-cooperative entry point when `warp` (T6).
template <class A>
TOGA_DEVICE TOGA_FORCEINLINE void free_item(A& a, void* p, bool warp) {
  if (warp) {
    a.deallocate_warp(p);
  } else {
    a.deallocate(p);
  }
}

// ---- T5: churn ---------------------------------------------------------------------------------------

//! T5's parameters (one launch). Trivially copyable (a kernel argument).
struct churn_args {
  std::uint64_t threads;         //!< threads taking part (items of the launch)
  std::uint64_t size;            //!< bytes per allocation
  unsigned iterations;           //!< allocate / free pairs per thread
  std::uint64_t seed;            //!< seeds the tags (the simulator: one seed per repetition)
  unsigned long long* failures;  //!< nullptr from allocate
  unsigned long long* corrupt;   //!< a tag that did not read back; (simulator) an unusable block
};

//! T5's second tag word: the first word holds the tag, the last one the tag ^ churn_mark.
inline constexpr std::uint32_t churn_mark = 0x5a5a5a5au;

//! T5's check of a tagged block (`words` 4-byte words, >= 1; volatile loads): a tag that does
//! not read back counts in `*corrupt`.
template <class E>
TOGA_DEVICE TOGA_FORCEINLINE void churn_check(const E& env, const volatile std::uint32_t* q, std::uint64_t words, std::uint32_t tag,
                                              unsigned long long* corrupt) {
  const bool ok = q[0] == tag && (words == 1 || q[words - 1] == (tag ^ churn_mark));
  if (!ok) env.count(corrupt);
}

//! T5 for thread `item`: c.iterations times, allocate c.size bytes and tag the block's first and
//! last word (blocks under 4 bytes are not tagged), read the tag back (a mismatch counts in
//! c.corrupt) and free the block; a nullptr counts in c.failures. Overlap = false (GPU): each
//! block is checked and freed before the next allocation (one live block per thread). Overlap =
//! true (simulator): a block is checked and freed after the next allocation, so that other lanes
//! run between its write and its check (two live blocks per thread).
template <bool Overlap, class A, class E>
TOGA_DEVICE TOGA_FORCEINLINE void churn_item(A& a, const E& env, const churn_args& c, std::uint64_t item) {
  const std::uint64_t words = c.size / 4;
  [[maybe_unused]] volatile std::uint32_t* prev = nullptr;  // Overlap: the block to check and free next
  [[maybe_unused]] std::uint32_t prev_tag = 0;
  for (unsigned it = 0; it < c.iterations; ++it) {
    void* p = a.allocate(c.size);
    [[maybe_unused]] std::uint32_t tag = 0;
    if (p == nullptr) {
      env.count(c.failures);
      if constexpr (!Overlap) continue;
    } else if (!env.usable(p, c.size)) {  // a wild pointer (the GPU checks alignment and range too)
      env.count(c.corrupt);
      p = nullptr;  // never written, never freed
      if constexpr (!Overlap) continue;
    } else if (words != 0) {
      volatile std::uint32_t* q = static_cast<volatile std::uint32_t*>(p);
      tag = static_cast<std::uint32_t>(mix64((item * c.iterations + it) ^ c.seed));
      q[words - 1] = tag ^ churn_mark;
      q[0] = tag;
      if constexpr (!Overlap) churn_check(env, q, words, tag, c.corrupt);
    }
    if constexpr (Overlap) {
      if (prev != nullptr) {
        if (words != 0) churn_check(env, prev, words, prev_tag, c.corrupt);
        a.deallocate(const_cast<std::uint32_t*>(prev));
      }
      prev = static_cast<volatile std::uint32_t*>(p);
      prev_tag = tag;
    } else {
      a.deallocate(p);
    }
  }
  if constexpr (Overlap) {
    if (prev != nullptr) {
      if (words != 0) churn_check(env, prev, words, prev_tag, c.corrupt);
      a.deallocate(const_cast<std::uint32_t*>(prev));
    }
  }
}

// ---- T9: fragmentation round ---------------------------------------------------------------------

//! T9, slot i, which the round chose (each backend has its own choice rule, see there): frees
//! the slot's block and allocates `size` bytes into it (nullptr on failure, counted in
//! `*failures`).
template <class A, class E>
TOGA_DEVICE TOGA_FORCEINLINE void frag_item(A& a, const E& env, void** slots, std::uint64_t i, std::uint64_t size,
                                            unsigned long long* failures) {
  a.deallocate(slots[i]);
  void* p = a.allocate(size);
  if (p == nullptr) env.count(failures);
  slots[i] = p;
}

// ---- T10 / T11: dynamic graphs ---------------------------------------------------------------------

//! A vertex's adjacency array: `degree` neighbour ids in `data`, a block of `cap_bytes` (a
//! capacity_bytes value). 16 bytes, `data` first: the GPU's free kernel reads `data` at a
//! 16-byte stride. All zero: no array yet.
struct vstate {
  std::uint32_t* data;
  std::uint32_t degree;
  std::uint32_t cap_bytes;
};
static_assert(sizeof(vstate) == 16 && offsetof(vstate, data) == 0, "the free kernel reads vstate::data at a 16 B stride");

//! One launch of T10's build or a T11 round. Item i is vertex vertex[i] (vertex == nullptr:
//! vertex i, the build) and the neighbours nbr[offsets[i], offsets[i + 1]) it gains (insert) or
//! loses (delete). One thread per item: each vertex appears at most once per launch, so no locks.
//! Trivially copyable (a kernel argument).
struct update_args {
  vstate* state;                 //!< per vertex
  const std::uint32_t* vertex;   //!< item i's vertex; nullptr: vertex i (the build)
  const std::uint32_t* offsets;  //!< items + 1 entries into nbr
  const std::uint32_t* nbr;
  std::uint32_t items;
  int del;                       //!< 0: insert (and build), 1: delete
  unsigned long long* failures;  //!< nullptr from allocate
  unsigned long long* missing;   //!< a neighbour to delete was not found; (simulator) an unusable block
};

//! T11 delete: removes each of nbr[b, e) from data[0, degree) (a linear search from the front,
//! then the last element moves into the hole) and returns the new degree; a neighbour not found
//! counts in `missing`. Out of line on purpose, for every allocator alike: inlined into the GPU's
//! graph_update_kernel beside toga's allocate and free, ptxas kept `data` and `degree` in local
//! memory and reloaded them on every probe of the search (1.6x slower delete rounds;
//! docs/benchmarks.md, T11). In its own function they stay in registers.
template <class E>
TOGA_DEVICE TOGA_NOINLINE std::uint32_t remove_neighbours(std::uint32_t* data, std::uint32_t degree, const std::uint32_t* nbr,
                                                         std::uint32_t b, std::uint32_t e, unsigned long long* missing) {
  for (std::uint32_t j = b; j < e; ++j) {
    const std::uint32_t x = nbr[j];
    std::uint32_t k = 0;
    while (k < degree && data[k] != x) ++k;
    if (k == degree) {
      E::count(missing);
      continue;
    }
    data[k] = data[degree - 1];
    --degree;
  }
  return degree;
}

//! T10 build (an insert into empty arrays) and T11 insert and delete rounds, item i of `u`. An
//! insert that outgrows the array allocates capacity_bytes(new degree), copies, frees the old
//! array, then appends; a delete removes the neighbours, then shrinks to capacity_bytes(new
//! degree) when that is smaller (allocate, copy, free the old one). A failed allocation counts in
//! u.failures: an insert then drops its neighbours (the vertex's digest will not match), a delete
//! keeps the larger array.
template <class A, class E>
TOGA_DEVICE TOGA_FORCEINLINE void graph_update_item(A& a, const E& env, const update_args& u, std::uint64_t i) {
  const std::uint32_t v = u.vertex != nullptr ? u.vertex[i] : static_cast<std::uint32_t>(i);
  const std::uint32_t b = u.offsets[i];
  const std::uint32_t e = u.offsets[i + 1];
  vstate s = u.state[v];
  std::uint64_t want = 0;
  if (u.del) {
    s.degree = remove_neighbours<E>(s.data, s.degree, u.nbr, b, e, u.missing);
    const std::uint64_t c = capacity_bytes(s.degree);
    if (c < s.cap_bytes) want = c;
  } else {
    const std::uint64_t nd = std::uint64_t{s.degree} + (e - b);
    if (s.data == nullptr || nd * 4 > s.cap_bytes) want = capacity_bytes(nd);
  }
  if (want != 0) {
    std::uint32_t* q = static_cast<std::uint32_t*>(a.allocate(want));
    const bool unusable = q != nullptr && !env.usable(q, want);  // a wild pointer
    if (unusable) env.count(u.missing);
    if (q == nullptr || unusable) {
      if (q == nullptr) env.count(u.failures);
      if (!u.del) return;  // the neighbours are not added: the vertex's digest will not match
    } else {
      for (std::uint32_t k = 0; k < s.degree; ++k) q[k] = s.data[k];
      a.deallocate(s.data);
      s.data = q;
      s.cap_bytes = static_cast<std::uint32_t>(want);
    }
  }
  if (!u.del) {
    for (std::uint32_t j = b; j < e; ++j) s.data[s.degree++] = u.nbr[j];
  }
  u.state[v] = s;
}

//! The order-independent digest of a vertex's neighbours (graph_plan.hpp's neighbour_digest,
//! summed), compared with graph_plan::digest_initial / digest_peak.
TOGA_HOST_DEVICE TOGA_FORCEINLINE std::uint64_t vertex_digest(const vstate& s) {
  std::uint64_t d = 0;
  for (std::uint32_t k = 0; k < s.degree; ++k) d += neighbour_digest(s.data[k]);
  return d;
}

}  // namespace toga::bench
