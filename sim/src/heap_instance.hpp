// The simulated heap of the allocator scenarios (sim/src/scenarios_allocator.cpp): one
// instance type per planted bug, `heap_inst<UB, TB>`, and make_one's definition. Private to the
// simulator library and included only by the heap_variants_*.cpp files, which instantiate the
// 44 pairs in parallel (one file of all of them took about 10 minutes to compile alone).
#pragma once

#include <sys/mman.h>

#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <sstream>

#include "heap_scenarios.hpp"
#include "toga/allocator.hpp"
#include "toga/growth.hpp"
#include "toga/heap_walk.hpp"
#include "toga/sim/faults.hpp"
#include "toga/sim/ghost.hpp"
#include "toga/sim/platform.hpp"
#include "toga/sim/scenario.hpp"
#include "toga/sim/strategy.hpp"
#include "toga/sim/world.hpp"

namespace toga::sim::heap_scenarios {

using P = toga::sim::platform;
inline std::string str(std::uint64_t v) { return std::to_string(v); }


// The simulated heap: aligned_alloc, or for growable heaps an mmap(PROT_NONE) range whose
// granules become read-write when adopted (touching an unbacked granule crashes the test: issue 14).
struct free_deleter {
  std::uint64_t mapped_len = 0;  // 0: from aligned_alloc
  void operator()(char* p) const {
    if (mapped_len) munmap(p, mapped_len);
    else std::free(p);
  }
};

template <ualloc_bug UB, tbuddy_bug TB>
struct heap_inst final : instance {
  using A = allocator<P, UB, TB>;
  mode m;
  unsigned lanes, ops, keep;
  bool leak;  // lanes keep their last blocks: the quiescent checks then see a live heap
  unsigned rounds;
  bool coalesced;
  std::uint64_t fixed_size;  // 0: drawn per allocation
  std::uint64_t align;       // alignment asked for with every allocation (0: none)
  std::uint64_t anchor;      // storm, mixed, superbins: lane 0 holds a block of this size (no alignment) all along (0: none)
  bool walker;               // storm, mixed, superbins, exhaust: lane 0 walks before each allocation; the lanes meet and check failing fast
  // exhaust: the lanes of SM 0 first allocate at most this many blocks each and stop, alone; then the
  // other SMs' lanes allocate until nullptr while SM 0's arena holds partly used bins and chunks
  // (0, or no lane on another SM: every lane allocates until nullptr)
  unsigned sm0_ops = 0;
  unsigned sm0_lanes = 0;       // exhaust with sm0_ops: the lanes on SM 0 (blocks are placed round-robin on the SMs)
  std::uint32_t sm0_done = 0;   // exhaust with sm0_ops: SM 0's lanes that are done
  heap_layout layout;
  std::unique_ptr<char, free_deleter> heap;
  std::vector<std::uint64_t> meta;
  A a;
  // ghost state
  struct ghost_block {
    std::uint64_t bytes, served, tag;
    hb_mark filled;  // the owner's pattern write (weak memory)
  };
  // H1 (--memory weak): a block's previous owner's accesses happen before its next owner's. For
  // every freed range: the last owner's fill and its verification at free (the allocator's
  // free-to-allocate chain must carry them: release on free, acquire on claim).
  struct freed_range {
    std::uint64_t end;
    hb_mark filled, checked;
  };
  std::map<std::uint64_t, freed_range> freed;  // start -> range
  std::map<std::uint64_t, ghost_block> live;
  std::uint64_t live_bytes = 0, peak_live_bytes = 0;
  std::vector<std::uint64_t> mailbox;  // per lane: offset + 1 of a block handed over, or 0
  std::uint32_t failed_lanes = 0;      // exhaust: lanes that saw nullptr
  std::uint64_t exhaust_held = 0;      // exhaust: bytes the lanes held at their first nullptr
  std::uint32_t exhaust_checked = 0;   // exhaust: lane 0 checked the semaphores after every lane failed
  std::uint64_t limit_bytes = 0;
  // A recovery request of `bytes` (a fraction of the heap), at most half the byte limit rounded
  // down to a power of two: what a heap with nothing allocated must serve under its limit.
  std::uint64_t recovery_bytes(std::uint64_t bytes) const {
    if (limit_bytes == 0) return bytes;
    std::uint64_t half = 1;
    while (half * 2 <= limit_bytes / 2) half *= 2;
    return std::min(bytes, half);
  }
  std::uint32_t finished_lanes = 0;    // storm/mixed: lanes past their loop
  std::uint32_t met_lanes = 0, met_checked = 0;  // walker=1: the lanes' meeting before their final frees
  std::vector<std::uint64_t> keep_at_end;
  std::uint64_t tag_counter = 0;
  std::uint64_t failures = 0;
  std::string grow_refused;  // grow: the recovery request's nullptr, excused by unmerged pairs (T6) until the final check
  heap_quality quality;
  // growable heaps (issue 14)
  std::uint64_t granule_bytes = 0, granules = 0;
  unsigned run_log2 = 0;              // grow, trim: the driver maps runs of 2^run_log2 granules (design.md §12.8)
  std::vector<std::uint8_t> run_of;   // per granule: log2 of its run's granules (the device trim's run table)
  std::uint64_t next_granule = 0;  // grow-exhaust: the next granule to adopt (fetch_add)
  std::uint32_t adopted_all = 0;   // grow, trim: the driver adopted every granule
  std::uint64_t expected_errors = 0;
  // fault sites that fail allocations are on: the targeted scenarios' "must be served" do not hold
  bool failures_injected = false;

  heap_inst(world& w, const params& p, mode md)
      : m(md),
        lanes(w.config().lanes()),
        ops(static_cast<unsigned>(std::max<std::int64_t>(
            1, p.get("ops", md == mode::mixed || md == mode::superbins ? 6 : md == mode::rounds ? 1 : 8)))),
        keep(static_cast<unsigned>(std::max<std::int64_t>(1, p.get("keep", 3)))),
        leak(p.get("leak", 0) != 0 || md == mode::inbox_race || md == mode::undo_race),
        rounds(static_cast<unsigned>(std::max<std::int64_t>(1, p.get("rounds", 2)))),
        coalesced(p.get("coalesced", 0) != 0),
        fixed_size(static_cast<std::uint64_t>(std::max<std::int64_t>(0, p.get("size", md == mode::exhaust ? 4096 : 0)))),
        align(static_cast<std::uint64_t>(std::max<std::int64_t>(0, p.get("align", 0)))),
        anchor(static_cast<std::uint64_t>(std::max<std::int64_t>(0, p.get("anchor", 0)))),
        walker(p.get("walker", 0) != 0),
        mailbox(w.config().lanes(), 0) {
    if (md == mode::exhaust && p.get("sm0_ops", 0) > 0 && w.config().sms > 1 && w.config().blocks > 1) {
      sm0_ops = static_cast<unsigned>(p.get("sm0_ops", 0));
      sm0_lanes = (w.config().blocks + w.config().sms - 1) / w.config().sms * w.config().threads_per_block;
    }
    const std::uint64_t heap_bytes =
        static_cast<std::uint64_t>(p.get("heap_kib", md == mode::exhaust ? 128 : md == mode::superbins ? 1024 : md == mode::failfast_race ? 8 : md == mode::clean_race ? 1024 : md == mode::refuse_race ? 512 : md == mode::undo_race ? 1024 : md == mode::promise_race ? 64 : md == mode::presplit_race ? 256 : md == mode::fallback_race ? 1024 : 2048)) * 1024;
    layout = heap_layout::make<P>(heap_layout::levels_for(heap_bytes), w.config().sms,
                                  static_cast<int>(p.get("sb_shift", md == mode::superbins || md == mode::adopt_race || md == mode::promise_race || md == mode::presplit_race || md == mode::fallback_race ? 15 : md == mode::retire_race || md == mode::word_race || md == mode::inbox_race || md == mode::failfast_race || md == mode::clean_race || md == mode::undo_race || md == mode::refuse_race ? 0 : -1)),
                                  static_cast<unsigned>(std::max<std::int64_t>(0, p.get("sb_arenas", 0))));
    layout.pins = static_cast<unsigned>(p.get("pins", md == mode::retire_race || md == mode::word_race || md == mode::inbox_race ? 1 : md == mode::adopt_race || md == mode::undo_race ? 3 : 4));
    const std::uint64_t hb = geom::page_bytes << (layout.levels - 1);
    const std::uint64_t limit = static_cast<std::uint64_t>(std::max<std::int64_t>(0, p.get("limit_kib", 0))) * 1024;
    limit_bytes = limit;
    if (growable(md)) {
      granule_bytes = static_cast<std::uint64_t>(p.get("granule_kib", 64)) * 1024;
      void* r = mmap(nullptr, hb, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
      if (r == MAP_FAILED) throw std::runtime_error("mmap of the simulated heap failed");
      heap = std::unique_ptr<char, free_deleter>(static_cast<char*>(r), free_deleter{hb});
    } else {
      // Fresh zero pages from the kernel, every schedule: a planted bug that reads a header before
      // it is written then sees the same zeros in a run and in its replay. (aligned_alloc handed
      // back freed memory with an earlier run's contents once glibc raised its mmap threshold, and
      // such a run's replay in the same process could differ: bug 14's livelock, seen 2026-11-27.)
      void* r = mmap(nullptr, hb, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
      if (r == MAP_FAILED) throw std::runtime_error("mmap of the simulated heap failed");
      heap = std::unique_ptr<char, free_deleter>(static_cast<char*>(r), free_deleter{hb});
    }
    meta.assign(layout.bytes / 8 + 1, 0);
    a = A::make(heap.get(), reinterpret_cast<char*>(meta.data()), layout);
    if (growable(md)) {
      unsigned go = 0;
      while ((geom::page_bytes << go) < granule_bytes) ++go;
      a.init_growable(limit, go);
      granules = hb / granule_bytes;
      while ((std::uint64_t{2} << run_log2) <= granules && (std::int64_t{2} << run_log2) <= p.get("run_granules", 1)) ++run_log2;
      run_of.assign(granules, 0);
    } else {
      const std::int64_t chunks = p.get("presplit_chunks", -1);
      a.init_after_zero(limit, static_cast<std::uint64_t>(std::max<std::int64_t>(0, p.get("presplit_kib", md == mode::presplit_race ? 128 : 0))) * 1024,
                        chunks < 0 ? A::presplit_chunks_auto : static_cast<std::uint64_t>(chunks));
    }
    failures_injected = (w.limits().faults & (fault_bit(fault_site::fail_chunk) | fault_bit(fault_site::fail_tbuddy_block))) != 0;
    ghost_table::current().clear();
    // (checked after writes to what they read: the tree's states and semaphores, the arenas)
    {
      const auto& b = a.small.buddy;
      w.add_invariant("T3/S5 buddy units <= AVAILABLE nodes", [this]() { return units_findable(); },
                      {{b.state, b.state + (std::uint64_t{1} << b.levels)}, {b.sem, b.sem + b.levels}});
      world::watched_ranges arenas = {{a.small.arenas, a.small.arenas + a.small.num_arenas}};
      if (a.small.peer != nullptr) {
        const auto sup = a.super();
        arenas.emplace_back(sup.arenas, sup.arenas + std::max(a.small.num_arenas, sup.num_arenas));
      }
      w.add_invariant("S1' arena semaphores: C_true + in-flight decrements >= 0", [this]() { return semaphores_in_range(); }, std::move(arenas));
    }
    if (const byte_limit* L = a.small.buddy.limit)
      w.add_invariant("F1 TBuddy failure records only move forward", [this]() { return records_forward(); },
                      {{L->failed_at, L->failed_at + std::size(L->failed_at)}});
    w.add_invariant("U1' bitmap + free + transit == capacity", [this]() { return bins_account(); });
    w.add_invariant("W1 an open reclaim gate: every item of the last walk walked, its result theirs", [this]() { return walk_settled(); });
  }

  // F1 (design.md §13.1): a failure record (failed_at[k], free_generation + 1 as read before the
  // climb that recorded it) never moves back: a climb that began long ago must not replace a
  // current record with its stale one (fetch_max; planted bug failure_record_overwritten). Checked
  // after every atomic write to the records, against the newest value each has held.
  std::uint64_t failed_seen[std::size(byte_limit{}.failed_at)] = {};
  std::optional<std::string> records_forward() {
    const byte_limit* L = a.small.buddy.limit;
    for (unsigned k = 0; k < std::size(L->failed_at); ++k) {
      const std::uint64_t v = L->failed_at[k];
      if (v < failed_seen[k])
        return "failed_at[" + str(k) + "] moved back from " + str(failed_seen[k]) + " to " + str(v) + " (free_generation " +
               str(L->free_generation) + "): a stale failure record replaced a newer one";
      failed_seen[k] = v;
    }
    return std::nullopt;
  }

  // Upper-bound form of S5 for TBuddy, true after every step of the correct code: a level's
  // semaphore never counts more units than there are AVAILABLE nodes of that height.
  std::optional<std::string> units_findable() const {
    const auto& b = a.small.buddy;
    const std::uint64_t nodes = std::uint64_t{1} << b.levels;
    std::uint64_t avail[64] = {};
    for (std::uint64_t v = 1; v < nodes; ++v)
      if (b.state[v] == node_available) ++avail[b.height(v)];
    for (unsigned k = 0; k < b.levels; ++k) {
      const auto f = tbuddy_semaphore<P>::unpack(b.sem[k].raw());
      if (f.c > avail[k]) return "buddy level " + str(k) + ": C=" + str(f.c) + " > " + str(avail[k]) + " AVAILABLE nodes";
    }
    // (No such bound holds for UAlloc's slot semaphores: a free may signal a slot of a bin that a
    // taker holds for a moment out of the pins and the inbox; the slow path then looks again.
    // Their per-step bound is S1' below, their exact accounting is checked at quiescence.)
    return std::nullopt;
  }

  // The buddy tree at a glance, for verdict messages: per level with anything to say, its
  // semaphore (C/E/R) and how many nodes are AVAILABLE, ALLOCATED (tagged or not) and BUSY.
  std::string buddy_summary() const {
    const auto& b = a.small.buddy;
    const std::uint64_t nodes = std::uint64_t{1} << b.levels;
    std::uint64_t avail[64] = {}, alloc[64] = {}, busy[64] = {};
    for (std::uint64_t v = 1; v < nodes; ++v) {
      const std::uint32_t st = b.state[v];
      if (st == node_available) ++avail[b.height(v)];
      else if (st == node_busy) ++busy[b.height(v)];
      else if (st != 0) ++alloc[b.height(v)];
    }
    std::string out = "buddy levels (C/E/R avail alloc busy):";
    for (unsigned k = 0; k < b.levels; ++k) {
      const auto f = tbuddy_semaphore<P>::unpack(b.sem[k].raw());
      if (f.c + f.e + f.r + avail[k] + alloc[k] == 0) continue;
      out += " " + str(k) + ":" + str(f.c) + "/" + str(f.e) + "/" + str(f.r) + " " + str(avail[k]) + " " + str(alloc[k]) + " " +
             str(busy[k]);
    }
    return out;
  }

  // S1' for the per-SM semaphores with the fast path (E2, design.md §3.4): the stored C minus the
  // bias plus the units of speculative decrements not yet undone (ghost) is never negative.
  std::optional<std::string> semaphores_in_range() const {
    const ghost_table& gt = ghost_table::current();
    for (unsigned ai = 0; ai < a.small.num_arenas; ++ai) {
      const auto& ar = a.small.arenas[ai];
      const std::int64_t cc = slot_semaphore<P>::c_of(ar.chunk_sem.raw()) + gt.get(ghost_kind::sem_inflight, &ar.chunk_sem);
      if (cc < 0) return "arena " + str(ai) + " chunk semaphore: C_true + in-flight = " + std::to_string(cc);
      for (unsigned c = 0; c < geom::num_classes; ++c) {
        const auto& sem = ar.lists[c].slot_sem;
        const std::int64_t v = slot_semaphore<P>::c_of(sem.raw()) + gt.get(ghost_kind::sem_inflight, &sem);
        if (v < 0) return "arena " + str(ai) + " class " + str(c) + " slot semaphore: C_true + in-flight = " + std::to_string(v);
      }
      for (unsigned c = 0; c < geom::sb_max_classes; ++c) {
        const auto& sem = a.super().arenas[ai].lists[c].slot_sem;
        const std::int64_t v = slot_semaphore<P>::c_of(sem.raw()) + gt.get(ghost_kind::sem_inflight, &sem);
        if (v < 0) return "arena " + str(ai) + " superbin class " + str(c) + " slot semaphore: C_true + in-flight = " + std::to_string(v);
      }
    }
    return std::nullopt;
  }
  // W1 (the shared reclaim walk, design.md §9.4): while the gate is open, no lane is walking an
  // item, the last walk counted every item, and the result it published is what its items found.
  std::optional<std::string> walk_settled() const {
    if (a.small.buddy.limit == nullptr) return std::nullopt;
    const byte_limit& l = *a.small.buddy.limit;
    const std::uint64_t gate = l.reclaim_gate;
    if (gate == 0 || (gate & 1u) != 0) return std::nullopt;  // never walked (no claim can exist yet), or running
    if (const std::int64_t k = ghost_table::current().get(ghost_kind::walk_items, &l); k != 0)
      return "W1: the reclaim gate is open (walk " + str(gate >> 2) + " ended) while " + std::to_string(k) + " item(s) of a walk are being walked";
    const std::uint64_t total = a.small.walk_items();
    if (l.reclaim_done != total)
      return "W1: walk " + str((gate >> 2) - 1) + " ended with " + str(l.reclaim_done) + " of its " + str(total) + " items walked";
    if (((l.reclaim_flags & 1u) != 0) != ((gate & 2u) != 0))
      return "W1: walk " + str((gate >> 2) - 1) + " published " + ((gate & 2u) ? "something given back" : "nothing given back") +
             ", but its items found " + ((l.reclaim_flags & 1u) ? "something" : "nothing");
    return std::nullopt;
  }
  // U1' for every live bin (ghost bin_live): set bits below capacity + free count + slots in
  // transit (reserved not claimed, excess not undone, freed not counted) == capacity; bits at or
  // above capacity stay set.
  mutable std::uint64_t rotation_ = 0;
  std::optional<std::string> bins_account() const {
    const ghost_table& gt = ghost_table::current();
    std::optional<std::string> bad;
    const char* table_lo = a.super().table;
    const char* table_hi = a.sb_max_bytes ? a.super().table + (a.heap_bytes >> a.super().sb_shift) * geom::sb_header_stride(a.super().sb_shift) : table_lo;
    auto check = [&](std::uintptr_t addr) {
      if (reinterpret_cast<const char*>(addr) >= table_lo && reinterpret_cast<const char*>(addr) < table_hi)
        check_header(reinterpret_cast<const superbin_header*>(addr), gt, bad);
      else
        check_header(reinterpret_cast<const bin_header*>(addr), gt, bad);
    };
    // Per step: the bins with slots in transit (the windows the fast path opens) and, in turn, one
    // other ghost entry's bin; check_quiescent checks every bin exactly at the end (U1).
    gt.for_each_nonzero(ghost_kind::bin_transit, [&](std::uintptr_t addr, std::int64_t) { check(addr); });
    if (gt.size() > 0) {
      const std::size_t i = rotation_++ % gt.size();
      if (gt.kind_at(i) == ghost_kind::bin_live) check(gt.addr_at(i));
    }
    return bad;
  }
  template <class H>
  void check_header(const H* h, const ghost_table& gt, std::optional<std::string>& bad) const {
    {
      if (bad || gt.get(ghost_kind::bin_live, h) != 1) return;
      const std::uint64_t off = static_cast<std::uint64_t>(reinterpret_cast<const char*>(h) - a.small.base);
      const unsigned cap = h->capacity;
      std::int64_t pop = 0;
      // a superbin's side-table entry holds the words of its class only (never read past it)
      const unsigned words = std::is_same_v<H, superbin_header>
                                 ? std::min<unsigned>((cap + 63) / 64, geom::sb_bitmap_words_for(a.super().sb_shift))
                                 : static_cast<unsigned>(sizeof(h->bitmap) / 8);
      for (unsigned w = 0; w < words; ++w) {
        const unsigned lo = w * 64;
        const std::uint64_t valid = cap >= lo + 64 ? ~std::uint64_t{0} : cap <= lo ? 0 : (std::uint64_t{1} << (cap - lo)) - 1;
        if ((h->bitmap[w] | valid) != ~std::uint64_t{0}) {
          bad = "U1': bin " + str(off) + ": a bit beyond capacity is clear in word " + str(w);
          return;
        }
        pop += bits::popc(h->bitmap[w] & valid);
      }
      const std::int64_t transit = gt.get(ghost_kind::bin_transit, h);
      if (pop + static_cast<std::int32_t>(h->free) + transit != cap)
        bad = "U1': bin " + str(off) + ": " + std::to_string(pop) + " set bits + free " + std::to_string(static_cast<std::int32_t>(h->free)) +
              " + transit " + std::to_string(transit) + " != capacity " + str(cap);
    }
  }

  template <class F>
  void for_each_bin(unsigned c, F&& f) const {
    const auto& b = a.small.buddy;
    for (std::uint64_t v = 1; v < (std::uint64_t{1} << b.levels); ++v) {
      if (b.state[v] != (node_allocated | node_chunk_tag)) continue;
      const std::uint64_t off = b.offset_of(v);
      const auto* ch = reinterpret_cast<const chunk_header*>(a.small.base + off);
      for (unsigned bi = geom::header_bins; bi < geom::bins_per_chunk; ++bi)
        if ((ch->bin_bitmap[bi / 64] >> (bi % 64)) & 1) {
          const auto* h = reinterpret_cast<const bin_header*>(a.small.base + off + std::uint64_t{bi} * geom::page_bytes);
          if (h->class_id == c) f(off + std::uint64_t{bi} * geom::page_bytes, h);
        }
    }
  }

  std::uint64_t draw_size() {
    if (fixed_size) return fixed_size;
    if (m == mode::mixed || growable(m)) {
      static constexpr std::uint64_t sizes[] = {1, 16, 100, 256, 1000, 1024, 2000, 4096, 9000, 65536};
      return sizes[P::choose(10)];
    }
    if (m == mode::superbins) {
      // both sides of every routing boundary: UAlloc's always-classes (16 B, 32 B: slots that may
      // start on 64 B boundaries), each superbin class (64 B .. 2 KiB with slots aligned to their
      // size that are not 4 KiB aligned; 64 B and 128 B ones also off 256 B boundaries), the
      // largest superbin class and the TBuddy block just above it
      const std::uint64_t top = a.sb_max_bytes ? a.sb_max_bytes : 2048;
      const std::uint64_t sizes[] = {16, 32, 64, 128, 256, 512, 1024, 1025, 2048, 3000, 4096, top / 2 + 1, top, top + 1, 2 * top};
      return sizes[P::choose(15)];
    }
    static constexpr std::uint64_t sizes[] = {8, 16, 48, 64, 128, 256, 512, 1024};
    return sizes[P::choose(8)];
  }
  static std::uint64_t fill_tag(std::uint64_t seq) { return 0x9e3779b97f4a7c15ull * (seq + 1) ^ 0x5a5a5a5a5a5a5a5aull; }

  std::uint64_t do_alloc(std::uint64_t bytes) { return do_alloc(bytes, align); }
  std::uint64_t do_alloc(std::uint64_t bytes, std::uint64_t align) {
    void* p = align ? a.allocate(bytes, align) : coalesced ? a.allocate_coalesced(bytes) : a.allocate(bytes);
    if (!p) {
      ++failures;
      return 0;
    }
    const std::uint64_t off = static_cast<std::uint64_t>(static_cast<char*>(p) - a.small.base);
    std::uint64_t served = a.served_bytes(bytes, align);
    if (align && off % align != 0) P::violated("G4: block at " + str(off) + " of " + str(bytes) + " B is not aligned to the " + str(align) + " B asked for");
    // G3/G4/G5: UAlloc slots never start on 4 KiB boundaries; superbin slots and TBuddy blocks are
    // aligned to their size (G4). 64 B .. 1 KiB: a superbin slot when the heap has superbins, else
    // (and when no superbin can be had) a UAlloc slot.
    bool in_sb = served >= geom::sb_min_class_bytes && served <= a.sb_max_bytes;
    bool small = !in_sb && served <= geom::max_class_bytes;
    const std::uint32_t node = a.small.buddy.load_state(a.small.buddy.leaf_of(off) >> (in_sb ? a.super().sb_shift - geom::page_shift : 0));
    if (in_sb && node != (node_allocated | node_superbin_tag) && served <= geom::max_class_bytes && off % geom::page_bytes != 0) {
      in_sb = false;  // the 64 B .. 1 KiB classes' fallback when no superbin could be had: a UAlloc slot
      small = true;
    }
    if (!in_sb && small == (off % geom::page_bytes == 0)) P::violated("G3: block at " + str(off) + " of " + str(served) + " B is on the wrong side of the 4 KiB rule");
    // (a superbin class is served by a TBuddy block of its size when no superbin can be had:
    // then the block itself is an untagged ALLOCATED node aligned to its size)
    if (in_sb && node != (node_allocated | node_superbin_tag)) {
      const std::uint64_t v = a.small.buddy.allocated_node(off);
      if (v == 0 || a.small.buddy.offset_of(v) != off || (a.small.buddy.load_state(v) & ~node_state_mask) != 0 ||
          (geom::page_bytes << a.small.buddy.height(v)) < served)
        P::violated("G3: block at " + str(off) + " of " + str(served) + " B is neither a slot of a tagged superbin nor a TBuddy block");
      served = geom::page_bytes << a.small.buddy.height(v);
    }
    if (off % (small ? std::min<std::uint64_t>(served, 128) : served) != 0) P::violated("G4: block at " + str(off) + " misaligned for " + str(served) + " B");
    if (off + served > a.heap_bytes) P::violated("G2: block beyond the heap");
    // G1 against every live block
    auto it = live.upper_bound(off);
    if (it != live.end() && it->first < off + served)
      P::violated("G1: block [" + str(off) + ", +" + str(served) + ") overlaps live block at " + str(it->first));
    if (it != live.begin()) {
      auto prev = std::prev(it);
      if (prev->first + prev->second.served > off)
        P::violated("G1: block [" + str(off) + ", +" + str(served) + ") overlaps live block at " + str(prev->first) + " (+" + str(prev->second.served) + ")");
    }
    if (P::weak_memory()) handed_over(off, served);
    const std::uint64_t tag = fill_tag(tag_counter++);
    ghost_block& g = live[off];  // (map references stay valid)
    g = {bytes, served, tag, {}};
    live_bytes += served;
    peak_live_bytes = std::max(peak_live_bytes, live_bytes);
    std::uint64_t* words = reinterpret_cast<std::uint64_t*>(p);
    for (std::uint64_t i = 0; i < (bytes + 7) / 8; ++i) words[i] = tag ^ i;
    g.filled = P::hb_here();
    return off + 1;
  }
  // H1 at an allocation of [off, off + served): every freed range it overlaps was last accessed
  // by owners whose accesses must happen before ours; the new owner's accesses then cover the
  // overlap (later owners are checked against us), so only what lies outside it stays recorded.
  void handed_over(std::uint64_t off, std::uint64_t served) {
    const std::uint64_t end = off + served;
    auto it = freed.upper_bound(off);
    if (it != freed.begin() && std::prev(it)->second.end > off) --it;
    while (it != freed.end() && it->first < end) {
      const std::uint64_t start = it->first;
      const freed_range r = it->second;
      for (const hb_mark* m : {&r.filled, &r.checked})
        if (!P::hb_before(*m))
          P::violated("H1 (happens-before): block [" + str(off) + ", +" + str(served) + ") handed out while an access of a " +
                      "previous owner of [" + str(start) + ", " + str(r.end) + ") (lane " + str(m->lane) +
                      ", its " + (m == &r.filled ? "fill" : "check at free") +
                      ") does not happen before it: the free-to-allocate path misses a release/acquire (a data race on the block)");
      it = freed.erase(it);
      if (start < off) freed.emplace(start, freed_range{off, r.filled, r.checked});
      if (r.end > end) it = freed.emplace(end, freed_range{r.end, r.filled, r.checked}).first;
    }
  }
  void do_free(std::uint64_t handle) {
    const std::uint64_t off = handle - 1;
    auto it = live.find(off);
    if (it == live.end()) P::violated("ghost: freeing " + str(off) + ", which is not live");
    const ghost_block g = it->second;
    const std::uint64_t* words = reinterpret_cast<const std::uint64_t*>(a.small.base + off);
    for (std::uint64_t i = 0; i < (g.bytes + 7) / 8; ++i)
      if (words[i] != (g.tag ^ i))
        P::violated("block at " + str(off) + " (" + str(g.bytes) + " B) corrupted at word " + str(i) + ": another owner wrote it");
    if (P::weak_memory()) freed[off] = freed_range{off + g.served, g.filled, P::hb_here()};
    live.erase(it);
    live_bytes -= g.served;
    a.deallocate(a.small.base + off);
  }

  // retire-race (3 lanes): lane 0 fills a 1024 B bin X (3 slots) and starts a second bin Y;
  // lane 1 frees one slot of X, lane 2 the other two (X becomes empty and is retired); then lane
  // 0 allocates 16 B, which takes the first free bin of the chunk: X again, if it was released.
  // The free path's read-side section is what keeps X from being reused under lane 1's free.
  std::uint32_t phase = 0;
  std::uint64_t handoff[3] = {0, 0, 0};
  void retire_race_lane(unsigned me) {
    if (me == 0) {
      handoff[1] = do_alloc(1024);
      handoff[2] = do_alloc(1024);
      const std::uint64_t third = do_alloc(1024);
      const std::uint64_t y = do_alloc(1024);
      handoff[0] = third;
      P::store(&phase, 1u, release, device_scope);
      wait_phase(2);  // lane 2 freed its two
      const std::uint64_t small = do_alloc(16);
      if (y) do_free(y);
      if (small) do_free(small);
      return;
    }
    wait_phase(1);
    if (me == 1) {
      if (handoff[1]) do_free(handoff[1]);
    } else if (me == 2) {
      if (handoff[2]) do_free(handoff[2]);
      if (handoff[0]) do_free(handoff[0]);
      P::store(&phase, 2u, release, device_scope);
    }
  }

  // word-race (design.md §9.2): a group free whose members' slots lie in two bitmap words empties
  // its bin, which is retired and its page reused by another class. 1 warp of 2 lanes, 1 SM, 32 B
  // (128 slots a bin: two bitmap words; retired by reclaim, not by the free), 1 pin slot.
  //  Lane 0 fills bin X and takes one block more (bin Y: X leaves the pin slot); it keeps A (slot 0,
  //  word 0), hands B (slot 64, word 1) to lane 1 and frees every other block of X alone. Then
  //  lanes 0 and 1 free A and B at once (one group free when they meet: lane 0 leads it and counts,
  //  lane 1 is word 1's only member), which empties X. Lane 0 waits until X's count shows it empty
  //  (relaxed loads: no order from lane 1), reclaims (X retired through its grace period) and asks
  //  for three 1 KiB blocks, the third of which lies over B in X's page: its fill is B's next owner
  //  and must happen after lane 1's check at free (H1 under --memory weak). Only a warp barrier
  //  over the whole group, before its releases or after its bitmap RMWs, orders lane 1's accesses
  //  before lane 0's count and read-side section; a barrier over each word's lanes does not
  //  (planted bug 91, which like bug 20 has neither group barrier).
  void word_race_lane(unsigned me) {
    constexpr std::uint64_t sz = 32;
    const unsigned c = geom::class_of(sz);
    const auto bin_of = [](std::uint64_t off) {
      const std::uint64_t chunk = off & ~(geom::chunk_bytes - 1);
      return chunk + std::uint64_t{geom::owner_bin(off - chunk)} * geom::page_bytes;
    };
    if (me == 0) {
      std::vector<std::uint64_t> blocks;
      for (unsigned i = 0; i <= geom::capacity(c); ++i)
        if (const std::uint64_t h = do_alloc(sz)) blocks.push_back(h);
      if (blocks.size() <= geom::capacity(c)) {
        if (!failures_injected) P::violated("word-race: set-up: nullptr for 32 B in a 2 MiB heap; " + buddy_summary());
        P::store(&phase, 1u, release, device_scope);
        for (auto h : blocks) do_free(h);
        return;
      }
      const std::uint64_t x = bin_of(blocks[0] - 1);
      std::uint64_t a_blk = 0, b_blk = 0, y_blk = 0;
      std::vector<std::uint64_t> rest;
      for (auto h : blocks) {
        const std::uint64_t off = h - 1;
        if (bin_of(off) != x) {
          if (y_blk) P::violated("word-race: set-up: more than one block outside the first bin; " + buddy_summary());
          y_blk = h;
        } else if (off == x + geom::bin_header_bytes) {
          a_blk = h;
        } else if (off == x + geom::bin_header_bytes + 64 * sz) {
          b_blk = h;
        } else {
          rest.push_back(h);
        }
      }
      if (!a_blk || !b_blk || !y_blk)
        P::violated("word-race: set-up: the first bin's slots 0 and 64 and a second bin were expected (the core's slot order changed: re-shape the scenario); " + buddy_summary());
      for (auto h : rest) do_free(h);
      handoff[0] = b_blk;
      P::store(&phase, 1u, release, device_scope);
      do_free(a_blk);
      const std::uint32_t* count = &a.small.bin_at(x)->free;
      for (unsigned attempt = 0; P::load(const_cast<std::uint32_t*>(count), relaxed, device_scope) != geom::capacity(c); ++attempt) P::backoff(attempt);
      (void)a.small.reclaim();
      std::uint64_t big[3] = {};
      for (auto& h : big) h = do_alloc(1024);
      for (auto h : big)
        if (h) do_free(h);
      do_free(y_blk);
      return;
    }
    wait_phase(1);
    if (handoff[0]) do_free(handoff[0]);
  }

  // fallback-race (design.md §13.6, simulator.md §16.9): a superbin class's fallback to UAlloc's
  // class must wait for units another group's GROW has promised, not be sent to the scan.
  // 1 SM, 5 warps of 32 lanes, 32 KiB superbins, a 1 MiB heap.
  //  Lane 0 of warp 0 asks for 16 B (UAlloc's chunk: half the heap), then for 32 KiB blocks until
  //  one fails (TBuddy's failure recorded); warps 0-2 then ask for 1 KiB four times per lane: the
  //  superbin classes fail, their fallbacks fill the chunk's bins (3 slots each) until the chunk and
  //  TBuddy's chunk order fail too. Lane 0 of warp 0 frees the three blocks of one 1 KiB bin (the
  //  bin goes back to the chunk) and walks until a walk gives nothing back (the heap recorded clean).
  //  A (warp 3, lane 0) and B (warp 4, lane 0) each ask for 256 B at once: the first whose fallback
  //  reaches the 256 B class's CAS loop promises a bin's 15 slots and its GROW takes the chunk's last
  //  bin; the other must be served from that bin, not refused because the records say "full" (with
  //  --faults stall-grow, the stall after the take holds that window open). A nullptr for either is
  //  a violation.
  std::uint64_t fb_blocks[96 * 4] = {};
  std::uint32_t fb_done = 0;
  void fallback_race_lane(unsigned me) {
    const unsigned warp = me / 32, rank = me % 32;
    std::vector<std::uint64_t> mine;
    if (warp <= 2) {
      if (me == 0) {
        if (const std::uint64_t h = do_alloc(16)) mine.push_back(h);
        while (const std::uint64_t h = do_alloc(32768)) mine.push_back(h);
        P::store(&phase, 1u, release, device_scope);
      }
      wait_phase(1);
      for (unsigned i = 0; i < 4; ++i) fb_blocks[me * 4 + i] = do_alloc(1024);
      if (P::fetch_add(&fb_done, 1u, acq_rel, device_scope) + 1 == 96) P::store(&phase, 2u, release, device_scope);
      if (me == 0) {
        wait_phase(2);
        // groups of 32 lanes leave bins they could not use whole: one lane takes the rest
        while (const std::uint64_t h = do_alloc(1024)) mine.push_back(h);
        // a 1 KiB bin whose three slots were all handed out: free them (the bin goes back to the
        // chunk), then walk until a walk gives nothing back
        std::map<std::uint64_t, std::vector<unsigned>> bins;
        for (unsigned k = 0; k < 96 * 4; ++k)
          if (fb_blocks[k]) bins[(fb_blocks[k] - 1) & ~(geom::page_bytes - 1)].push_back(k);
        for (auto& [b, ks] : bins)
          if (ks.size() == 3) {
            for (unsigned k : ks) {
              do_free(fb_blocks[k]);
              fb_blocks[k] = 0;
            }
            break;
          }
        for (unsigned k = 0; k < 8 && a.small.reclaim(); ++k) {
        }
        P::store(&phase, 3u, release, device_scope);
      }
    } else if (warp == 3 && rank == 0) {  // A
      wait_phase(3);
      const std::uint64_t x = do_alloc(256);
      if (!x && !failures_injected)
        P::violated("fallback-race: nullptr for A's 256 B while the chunk had a free bin or B's GROW had promised its slots; " + buddy_summary());
      if (x) mine.push_back(x);
      P::fetch_max(&phase, 4u, release, device_scope);  // (B may have stored 5 already)
    } else if (warp == 4 && rank == 0) {  // B: starts with A (no wait for A's promise)
      wait_phase(3);
      // (whichever GROWs the last bin, the other decides while that GROW is in flight in some
      // schedules: B's chain is as long as A's)
      const std::uint64_t y = do_alloc(256);
      if (!y && !failures_injected)
        P::violated("fallback-race: nullptr for B's 256 B while the chunk had a free bin or A's GROW had promised its slots (a group sent to the scan instead of waiting for them); " + buddy_summary());
      if (y) mine.push_back(y);
      P::store(&phase, 5u, release, device_scope);
    } else {
      return;
    }
    wait_phase(5);  // nothing is freed before B is done (a free would give B another way)
    if (warp <= 2)
      for (unsigned i = 0; i < 4; ++i)
        if (fb_blocks[me * 4 + i]) do_free(fb_blocks[me * 4 + i]);
    for (auto h : mine) do_free(h);
  }

  // inbox-race (3 lanes, 1024 B: 3-slot bins, 1 pin slot): a bin B ends up in the inbox with no
  // free slots, and a taker that holds it for a moment sees a free come in.
  //  lane 0 allocates a1, a2 (B: one slot left) and hands a1 to lane 2;
  //  lane 1 (R) allocates r: its fast path reads the pin (B) and then reserves in it;
  //  lane 2 (X) allocates x1 (GROW of C, queued: B is not exhausted), x2 (B's last slot), x3 (takes
  //  the inbox: C displaces the exhausted B), x4 (GROW of D, queued), frees a1 (B refilled, queued);
  //  once R is done, x5 (C's last slot) and x6 (C exhausted: takes the inbox, B and D).
  // If R reserved between X's free of a1 and x6 (its read of the pin before x1: a preemption), B
  // is queued and exhausted when X's x6 holds it; a free of a2 by lane 0 in that moment (a second
  // preemption) finds B held and leaves it to the taker, which must re-read B's count when it
  // lets go. R keeps r to the end (a full bin would be retired and nothing would show): a B
  // with free slots that is neither pinned nor queued is a U2' failure of the final check.
  void inbox_race_lane(unsigned me) {
    if (me == 0) {
      handoff[0] = do_alloc(1024);
      const std::uint64_t a2 = do_alloc(1024);
      P::store(&phase, 1u, release, device_scope);
      wait_phase(3);
      if (a2) do_free(a2);
    } else if (me == 1) {
      wait_phase(1);
      const std::uint64_t r = do_alloc(1024);
      P::store(&phase, 2u, release, device_scope);
      if (r) keep_at_end.push_back(r);
    } else if (me == 2) {
      wait_phase(1);
      std::uint64_t x[6] = {};
      for (unsigned i = 0; i < 4; ++i) x[i] = do_alloc(1024);
      if (handoff[0]) do_free(handoff[0]);
      wait_phase(2);
      x[4] = do_alloc(1024);
      P::store(&phase, 3u, release, device_scope);
      x[5] = do_alloc(1024);
      for (const std::uint64_t h : x)
        if (h) do_free(h);
    }
  }

  // adopt-race (5 one-warp blocks of 2 lanes, 1 SM, 4 KiB slots of 32 KiB superbins: 8 slots, 3 pin
  // slots; block k's own slot is 8k mod 3): a group leader reserves in a superbin that a member
  // found in a pin slot, adopts it into its own slot, and a third warp serves from that slot.
  //  C (block 4, own slot 2) allocates 5: superbin S2, pinned in slot 2, 3 slots left;
  //  B (block 0, both lanes, own slot 0) allocates one each: a group of 2 takes 2 units, finds its
  //    slot empty and scans: rank 0 slot 0, rank 1 slot 1 (then rank 0 slot 2);
  //  P (block 2, both lanes, own slot 1) allocates one each: 1 unit left, so a GROW of S1 (pinned in
  //    slot 1, 6 slots left);
  //  D (block 3, one lane, own slot 0) allocates one: it takes the last unit and reads slot 0.
  // If P pins S1 after B's take and before B's scan, B's rank 1 finds S1; the leader reserves 2 of
  // its 6 slots and adopts S1 into slot 0. Without the __syncwarp after the scan, the leader has not
  // seen P's stores (the superbin tag), and neither has D if its unit came before P's signal: D's
  // read of the tag may be stale (G3 in do_alloc, under --memory weak).
  std::uint32_t adopt_done = 0;
  void adopt_race_lane(unsigned me) {
    const unsigned block = me / 2, rank = me % 2;
    const bool active = block == 0 || block == 2 || (block == 3 && rank == 0) || (block == 4 && rank == 0);
    if (!active) return;
    std::vector<std::uint64_t> mine;
    if (block == 4) {
      for (unsigned i = 0; i < 5; ++i) mine.push_back(do_alloc(4096));
      P::store(&phase, 1u, release, device_scope);
    } else {
      wait_phase(1);
      mine.push_back(do_alloc(4096));
    }
    // every active lane (6) holds its blocks until all are served, then frees them
    P::fetch_add(&adopt_done, 1u, acq_rel, device_scope);
    for (unsigned attempt = 0; P::load(&adopt_done, acquire, device_scope) < 6; ++attempt) P::backoff(attempt);
    for (const std::uint64_t h : mine)
      if (h) do_free(h);
  }

  // A barrier of every lane: the n-th meeting returns when all lanes arrived at it.
  std::uint32_t met = 0;
  void meet(std::uint32_t n) {
    P::fetch_add(&met, 1u, acq_rel, device_scope);
    for (unsigned attempt = 0; P::load(&met, acquire, device_scope) < n * lanes; ++attempt) P::backoff(attempt);
  }

  // failfast-race (design.md §13, §20.2): an 8 KiB heap of two 4 KiB blocks. Lanes 0
  // and 1 take a and b; lane 0 frees a while lane 2 asks for 4 KiB (it fails unless the free came
  // first: its recorded failure must not outlive that free); then lane 3 asks for 8 KiB, which
  // fails (b is held), and for 4 KiB, which must be served (a is free: neither failure may answer
  // for it).
  void failfast_race_lane(unsigned me) {
    constexpr std::uint64_t page = geom::page_bytes;
    if (me == 0) {
      handoff[0] = do_alloc(page);
      P::fetch_add(&phase, 1u, release, device_scope);
      wait_phase(2);
      if (handoff[0]) do_free(handoff[0]);
      P::fetch_add(&phase, 1u, release, device_scope);
    } else if (me == 1) {
      handoff[1] = do_alloc(page);
      P::fetch_add(&phase, 1u, release, device_scope);
      wait_phase(5);
      if (handoff[1]) do_free(handoff[1]);
    } else if (me == 2) {
      wait_phase(2);
      if (const std::uint64_t x = do_alloc(page)) do_free(x);
      P::fetch_add(&phase, 1u, release, device_scope);
    } else if (me == 3) {
      wait_phase(4);
      if (const std::uint64_t z = do_alloc(2 * page)) do_free(z);  // (b is held: it fails)
      const std::uint64_t y = do_alloc(page);
      if (!y && !failures_injected) P::violated("failfast-race: nullptr for 4 KiB while a 4 KiB block is free (a recorded failure outlived a free or answered for a smaller order); " + buddy_summary());
      else do_free(y);
      P::fetch_add(&phase, 1u, release, device_scope);
    }
  }
  // clean-race (design.md §13, §20.2): a 1 MiB heap of two 512 KiB halves. Lane 0
  // takes a 16 B slot s (a UAlloc chunk: one half) and lane 1 the other half; lane 2 asks for
  // 512 KiB, which fails in TBuddy and makes reclaim walk while lane 0 frees s (the bin, then the
  // chunk, become free: the walk must not record the heap clean over that free); then lane 3 asks
  // for 512 KiB, which must be served (reclaim gives the chunk back).
  void clean_race_lane(unsigned me) {
    constexpr std::uint64_t half = geom::chunk_bytes;
    if (me == 0) {
      handoff[0] = do_alloc(16);
      P::fetch_add(&phase, 1u, release, device_scope);
      wait_phase(2);
      if (handoff[0]) do_free(handoff[0]);
      P::fetch_add(&phase, 1u, release, device_scope);
    } else if (me == 1) {
      wait_phase(1);  // after the chunk (else the half could be where the chunk goes)
      handoff[1] = do_alloc(half);
      P::fetch_add(&phase, 1u, release, device_scope);
      wait_phase(5);
      if (handoff[1]) do_free(handoff[1]);
    } else if (me == 2) {
      wait_phase(2);
      if (const std::uint64_t x = do_alloc(half)) do_free(x);
      P::fetch_add(&phase, 1u, release, device_scope);
    } else if (me == 3) {
      wait_phase(4);
      const std::uint64_t y = do_alloc(half);
      if (!y && !failures_injected) P::violated("clean-race: nullptr for 512 KiB while the chunk of a freed 16 B slot could be given back (reclaim recorded clean over a free); " + buddy_summary());
      else do_free(y);
      P::fetch_add(&phase, 1u, release, device_scope);
    }
  }
  // refuse-race (design.md §13.5): a 512 KiB heap, one UAlloc chunk, no superbins. Lane 0 fills
  // the chunk with 1 KiB blocks (3 a bin) until nullptr: that failure records TBuddy empty and
  // reclaim clean. Lane 1 asks for 512 B meanwhile or after (its GROW may be refused: the records
  // say it would fail, and it would). Then lane 0 frees the three blocks of one bin (the bin goes
  // back to the chunk: a free bin, nothing for TBuddy) and walks until a walk gives nothing back
  // (the heap recorded clean again); lane 1 asks for 512 B once more, which must be served from
  // the chunk's free bin: TBuddy's record and the clean record do not answer for the arena's own
  // chunk bins.
  void refuse_race_lane(unsigned me) {
    if (me == 0) {
      std::vector<std::uint64_t> mine;
      while (const std::uint64_t h = do_alloc(1024)) mine.push_back(h);
      P::fetch_add(&phase, 1u, release, device_scope);
      wait_phase(2);  // lane 1's first request is done
      // the three blocks of the bin of the first block (its slots are the first three made)
      const std::uint64_t bin = mine.empty() ? 0 : (mine[0] & ~std::uint64_t{geom::page_bytes - 1});
      std::vector<std::uint64_t> rest;
      for (auto h : mine) ((h & ~std::uint64_t{geom::page_bytes - 1}) == bin ? (void)do_free(h) : rest.push_back(h));
      for (unsigned k = 0; k < 8 && a.small.reclaim(); ++k) {
      }
      P::fetch_add(&phase, 1u, release, device_scope);
      wait_phase(4);
      for (auto h : rest) do_free(h);
      return;
    }
    if (me == 1) {
      wait_phase(1);
      if (const std::uint64_t x = do_alloc(512)) do_free(x);  // (the chunk is full: refused or failed)
      P::fetch_add(&phase, 1u, release, device_scope);
      wait_phase(3);
      const std::uint64_t y = do_alloc(512);
      if (!y && !failures_injected)
        P::violated("refuse-race: nullptr for 512 B while the arena's chunk has a free bin (a GROW refused from TBuddy's and reclaim's records alone); " + buddy_summary());
      else if (y) do_free(y);
      P::fetch_add(&phase, 1u, release, device_scope);
    }
  }
  // undo-race (design.md §13.2): an undone reservation leaves a bin empty after a walk recorded
  // the heap clean. 5 blocks of one warp of 32 lanes, 1 SM, 128 B (32 slots a bin: the class
  // whose frees stay hot, counting a change only when a free itself empties the bin), 3 pin slots;
  // block k's own slot is 8k mod 3: block 3 slot 0, block 2 slot 1, block 1 slot 2.
  //  Block 2's lane 0 fills bin B (slot 1), block 1 takes one slot of bin X (slot 2), block 2's
  //  lane 0 frees one of B's: B has one free slot, X 31, slot 0 is empty.
  //  Then G (block 3's lane 0) asks for one: its own slot is empty, so it scans and finds B with
  //  a free slot; H (block 2's lane 0), once G took its semaphore unit, takes B's last slot, and
  //  block 2's 32 lanes free B's 32 blocks together (one group free, or a few: a warp that
  //  allocated a bin's slots and frees them); W (block 4's lane 0) walks once they are freed; G
  //  goes on to X.
  // If H's reservation comes between G's look at B and G's reservation, G's reservation is undone;
  // if the frees and W's walk come before that undo, the walk sees B short of empty and records
  // the heap clean, and the undo leaves B empty in its pin slot: it must count a reclaim change
  // (else a request that fails fast gets nullptr while a walk would give B back). The lanes then
  // meet, and the last checks the record as walker=1 does; G's and X's blocks stay live to the end
  // (so no lane waits at the meeting). (Run with --faults stall-read-to-rmw,stall-speculative-undo:
  // the two windows are G's.)
  std::uint64_t undo_blocks[32] = {};
  std::uint32_t undo_freed = 0;
  void undo_race_lane(unsigned me) {
    constexpr std::uint64_t sz = 128;
    constexpr unsigned cap = 32;
    const unsigned block = me / 32, rank = me % 32;
    std::vector<std::uint64_t> mine;
    const auto served = [&](std::uint64_t h) {
      if (!h && !failures_injected) P::violated("undo-race: nullptr for 128 B in a 1 MiB heap; " + buddy_summary());
      return h != 0;
    };
    if (block == 2) {
      if (rank == 0) {
        for (unsigned i = 0; i < cap; ++i) undo_blocks[i] = do_alloc(sz);
        P::store(&phase, 1u, release, device_scope);
        wait_phase(2);
        do_free(undo_blocks[0]);
        auto* sem = const_cast<std::uint64_t*>(&a.small.arenas[0].lists[geom::class_of(sz)].slot_sem.raw());
        const std::uint64_t before = P::load(sem, relaxed, device_scope);
        P::store(&phase, 3u, release, device_scope);
        for (unsigned attempt = 0; P::load(sem, relaxed, device_scope) == before; ++attempt) P::backoff(attempt);  // G took its unit
        undo_blocks[0] = do_alloc(sz);  // H: B's last slot
        P::store(&phase, 4u, release, device_scope);
      }
      wait_phase(4);
      if (served(undo_blocks[rank])) do_free(undo_blocks[rank]);
      if (P::fetch_add(&undo_freed, 1u, acq_rel, device_scope) + 1 == 32) P::store(&phase, 5u, release, device_scope);
    } else if (block == 1 && rank == 0) {
      wait_phase(1);
      mine.push_back(do_alloc(sz));
      P::store(&phase, 2u, release, device_scope);
    } else if (block == 3 && rank == 0) {
      wait_phase(3);
      mine.push_back(do_alloc(sz));  // G
    } else if (block == 4 && rank == 0) {
      wait_phase(4);
      // W: once B's count shows every slot freed (but G's reservation), or phase 5
      std::uint32_t* count = &a.small.bin_at(undo_blocks[1] & ~(geom::page_bytes - 1))->free;
      for (unsigned attempt = 0; static_cast<std::int32_t>(P::load(count, relaxed, device_scope)) < static_cast<std::int32_t>(cap) - 1 &&
                                 P::load(&phase, acquire, device_scope) < 5;
           ++attempt)
        P::backoff(attempt);
      (void)a.small.reclaim();
    }
    for (auto h : mine)
      if (served(h)) keep_at_end.push_back(h);  // (kept: nothing waits at the meeting, nothing counts after it)
    meet_and_check_fail_fast(false);
  }
  // promise-race (design.md §13, §20.2): a 64 KiB heap of two 32 KiB superbins.
  // Lane 0 holds a 2 KiB slot (one superbin); lane 1 (P) asks for 1 KiB, whose GROW takes the
  // other superbin; once it is gone from the tree, lane 2 asks for 32 KiB, which fails and records
  // the superbin order exhausted (its reclaim finds nothing); then lane 3 (R) asks for 1 KiB, which
  // must be served: P's superbin has 31 more slots, promised while P publishes it, and neither the
  // recorded TBuddy failure nor a clean reclaim record may answer for it.
  void promise_race_lane(unsigned me) {
    if (me == 0) {
      handoff[0] = do_alloc(2048);
      P::fetch_add(&phase, 1u, release, device_scope);
      wait_phase(4);
      if (handoff[0]) do_free(handoff[0]);
      return;
    }
    wait_phase(1);
    if (me == 1) {
      const std::uint64_t p1 = do_alloc(1024);
      if (!p1 && !failures_injected) P::violated("promise-race: nullptr for 1 KiB with a free 32 KiB block; " + buddy_summary());
      P::fetch_add(&phase, 1u, release, device_scope);
      wait_phase(4);
      if (p1) do_free(p1);
    } else if (me == 2) {
      // until P's GROW took the last superbin block out of the tree
      const auto& b = a.small.buddy;
      for (unsigned attempt = 0;; ++attempt) {
        bool left = false;
        for (std::uint64_t v = 1; v < (std::uint64_t{1} << b.levels); ++v)
          left |= P::load(&b.state[v], relaxed, device_scope) == node_available && b.height(v) >= 3;
        if (!left) break;
        P::backoff(attempt);
      }
      if (const std::uint64_t z = do_alloc(32 * 1024)) do_free(z);  // (nothing of 32 KiB is left: it fails)
      P::fetch_add(&phase, 1u, release, device_scope);
    } else if (me == 3) {
      wait_phase(2);  // after lane 2's failure (or P's success)
      const std::uint64_t r = do_alloc(1024);
      if (!r && !failures_injected) P::violated("promise-race: nullptr for 1 KiB while the superbin P is publishing has free slots (a recorded failure answered for a promise); " + buddy_summary());
      P::fetch_add(&phase, 1u, release, device_scope);
      wait_phase(4);
      if (r) do_free(r);
    }
  }
  // presplit-race (design.md §10.5): a 256 KiB heap whose lower half is the pre-split reserve
  // (four 32 KiB blocks), its upper half one AVAILABLE node. Four lanes each ask for a quarter of
  // the heap: two are served from the upper half, the others find the tree empty, drain the
  // reserve (often both at once) and must be served from its merged blocks. After every lane
  // freed its block, lane 0 asks for the whole heap, which must be served too.
  void presplit_race_lane(unsigned me) {
    const std::uint64_t quarter = a.heap_bytes / 4;
    const std::uint64_t q = do_alloc(quarter);
    if (!q && !failures_injected)
      P::violated("presplit-race: nullptr for a quarter of the heap while four quarters are free (the reserve is not drained, or a drain's memory was in flight); " + buddy_summary());
    P::fetch_add(&phase, 1u, release, device_scope);
    wait_phase(lanes);
    if (q) do_free(q);
    P::fetch_add(&phase, 1u, release, device_scope);
    if (me != 0) return;
    wait_phase(2 * lanes);
    const std::uint64_t all = do_alloc(a.heap_bytes);
    if (!all && !failures_injected) P::violated("presplit-race: nullptr for the whole heap after every block was freed; " + buddy_summary());
    if (all) do_free(all);
  }
  // exhaust, after every lane got its nullptr and before any frees (no other lane allocates or
  // frees): no unit of the classes a request of fixed_size goes through (its superbin class,
  // UAlloc's class of the same size) and no free bin of any arena's chunks (UAlloc's sizes) may show
  // in any arena. A failing group scans every arena, its own first (design.md §8.6, §13.3), takes
  // the units it shows and borrows its chunks' free bins, so a unit left means some lane failed
  // while memory of its class lay in some arena (planted bugs 112, the scan without the own arena,
  // and 113, no borrowing). Lane 0 runs it; a violation ends the schedule.
  // Skipped where the classes are not the whole story: a request with alignment, or injected faults.
  void check_no_units_left_at_exhaustion() {
    if (align != 0 || failures_injected) return;
    using sem = slot_semaphore<P>;
    const std::uint64_t s = geom::round_up(fixed_size ? fixed_size : 1);
    std::uint64_t units = 0;
    std::string where;
    const auto look = [&](const sem& S, const char* geo, unsigned ai, unsigned c) {
      const std::int64_t u = sem::c_of(S.raw());  // (the newest value: a relaxed load may read an older one under --memory weak)
      if (u > 0) {
        units += static_cast<std::uint64_t>(u);
        if (where.empty()) where = std::string(geo) + " class " + str(c) + " of arena " + str(ai) + " shows " + str(u) + " units";
      }
    };
    if (a.sb_max_bytes != 0 && s >= geom::sb_min_class_bytes && s <= a.sb_max_bytes)
      for (unsigned ai = 0; ai < a.super().num_arenas; ++ai) look(a.super().arenas[ai].lists[geom::sb_class_of(s)].slot_sem, "superbin", ai, geom::sb_class_of(s));
    if (s <= geom::max_class_bytes)
      for (unsigned ai = 0; ai < a.small.num_arenas; ++ai) {
        look(a.small.arenas[ai].lists[geom::class_of(s)].slot_sem, "UAlloc", ai, geom::class_of(s));
        // and the free bins of every arena's chunks, which the fallback borrows (borrow_bins)
        look(a.small.arenas[ai].chunk_sem, "chunk bins (every class)", ai, geom::class_of(s));
      }
    if (units != 0)
      P::violated("exhaustion: every lane got nullptr for " + str(fixed_size) + " B while " + str(units) + " units of its classes show (" + where +
                  "): a group failed while units it could have taken lay in some arena; " + buddy_summary());
  }
  // walker=1: every lane is past its allocations (its blocks, and those in the mailboxes, still
  // live); the last to arrive checks design.md §13.2's invariant while the others wait here and
  // touch nothing: a reclaim recorded clean and current means a walk gives nothing back (checked
  // with a forced walk, as at quiescence). Inside the schedule, before the final frees, which
  // count reclaim changes and would retire a stale record before the quiescent check sees it.
  // (`wait`: false for a lane with nothing left to do afterwards: it arrives and exits)
  void meet_and_check_fail_fast(bool wait = true) {
    if (P::fetch_add(&met_lanes, 1u, acq_rel, device_scope) + 1 == lanes) {  // [HB] acq_rel: every lane's operations before it
      if (a.small.known_clean() && a.small.reclaim(true))
        P::violated("fail fast, at the lanes' meeting: reclaim was recorded clean (changes after the walk: " +
                    str(P::load(&a.globals->limit.reclaim_changes, relaxed, device_scope)) +
                    "), but a walk while every lane waits gave something back");
      P::store(&met_checked, 1u, release, device_scope);
      return;
    }
    if (!wait) return;
    for (unsigned attempt = 0; P::load(&met_checked, acquire, device_scope) == 0; ++attempt) P::backoff(attempt);
  }
  void wait_phase(std::uint32_t want) {
    for (unsigned attempt = 0; P::load(&phase, acquire, device_scope) < want; ++attempt) P::backoff(attempt);
  }

  void lane() override {
    const unsigned me = P::block_id() * P::block_dim() + P::thread_id();
    if (m == mode::failfast_race) return failfast_race_lane(me);
    if (m == mode::clean_race) return clean_race_lane(me);
    if (m == mode::refuse_race) return refuse_race_lane(me);
    if (m == mode::undo_race) return undo_race_lane(me);
    if (m == mode::promise_race) return promise_race_lane(me);
    if (m == mode::presplit_race) return presplit_race_lane(me);
    if (m == mode::retire_race) return retire_race_lane(me);
    if (m == mode::word_race) return word_race_lane(me);
    if (m == mode::fallback_race) return fallback_race_lane(me);
    if (m == mode::inbox_race) return inbox_race_lane(me);
    if (m == mode::adopt_race) return adopt_race_lane(me);
    std::vector<std::uint64_t> mine;
    if (m == mode::exhaust) {
      // sm0_ops: SM 0's lanes allocate first, alone, and stop; the others start once they are done
      const bool first = sm0_ops > 0 && P::sm_id() == 0;
      if (sm0_ops > 0 && !first)
        for (unsigned attempt = 0; P::load(&sm0_done, acquire, device_scope) < sm0_lanes; ++attempt) P::backoff(attempt);
      for (unsigned i = 0; i < (first ? sm0_ops : 1u << 20); ++i) {
        if (walker && me == 0) (void)a.small.reclaim();
        const std::uint64_t h = do_alloc(fixed_size);
        if (!h) break;
        mine.push_back(h);
      }
      if (first) P::fetch_add(&sm0_done, 1u, release, device_scope);  // [HB] release: the others see SM 0's bins and chunks
      P::fetch_add(&exhaust_held, mine.size() * a.served_bytes(fixed_size, align), relaxed, device_scope);
      P::fetch_add(&failed_lanes, 1u, release, device_scope);  // [HB] release: lane 0 checks the semaphores after every lane's operations (relaxed raised false alarms under --memory weak)
      for (unsigned attempt = 0; P::load(&failed_lanes, acquire, device_scope) < lanes; ++attempt) P::backoff(attempt);
      if (walker) meet_and_check_fail_fast();
      if (me == 0) {
        check_no_units_left_at_exhaustion();
        P::store(&exhaust_checked, 1u, release, device_scope);
      }
      for (unsigned attempt = 0; P::load(&exhaust_checked, acquire, device_scope) == 0; ++attempt) P::backoff(attempt);
      for (auto h : mine) do_free(h);
      return;
    }
    if (growable(m)) return grow_lane(me);
    if (m == mode::rounds) {
      // toga-bench's T1 shape: every lane allocates `ops` blocks, all lanes meet, every lane frees
      // them, all lanes meet; `rounds` times (the first round on a fresh heap, then warm)
      for (unsigned r = 0; r < rounds; ++r) {
        for (unsigned i = 0; i < ops; ++i) {
          const std::uint64_t h = do_alloc(draw_size());
          if (!h) P::violated("rounds: nullptr with memory available (round " + str(r) + "); " + buddy_summary());
          mine.push_back(h);
        }
        meet(2 * r + 1);
        for (auto h : mine) do_free(h);
        mine.clear();
        meet(2 * r + 2);
      }
      return;
    }
    // (e.g. 16 B: a UAlloc chunk exists before the byte limit stops the superbins, so that the
    // fallback of 256 B .. 1 KiB to UAlloc's classes can be served)
    const std::uint64_t anchored = anchor && me == 0 ? do_alloc(anchor, 0) : 0;
    for (unsigned i = 0; i < ops; ++i) {
      if (walker && me == 0) (void)a.small.reclaim();  // what a request that failed does (design.md §9.4, §13.2)
      const std::uint64_t h = do_alloc(draw_size());
      if (h) {
        // hand every other block to the next lane (another warp or SM frees it)
        if (P::choose(2)) {
          const std::uint64_t got = P::exchange(&mailbox[(me + 1) % lanes], h, acq_rel, device_scope);
          if (got) mine.push_back(got);
        } else {
          mine.push_back(h);
        }
      }
      while (mine.size() > keep) {
        const std::size_t k = P::choose(static_cast<std::uint32_t>(mine.size()));
        do_free(mine[k]);
        mine.erase(mine.begin() + static_cast<std::ptrdiff_t>(k));
      }
    }
    if (anchored) mine.push_back(anchored);
    if (walker) meet_and_check_fail_fast();
    if (!leak)
      for (auto h : mine) do_free(h);
    // Deposits happen only in the loop above: once every lane is past it, a last drain of our
    // mailbox leaves it empty for good.
    P::fetch_add(&finished_lanes, 1u, release, device_scope);
    for (unsigned attempt = 0;; ++attempt) {
      const bool all = P::load(&finished_lanes, acquire, device_scope) == lanes;
      const std::uint64_t got = P::exchange(&mailbox[me], std::uint64_t{0}, acq_rel, device_scope);
      if (got && !leak) do_free(got);
      if (got && leak) keep_at_end.push_back(got);
      if (all) break;
      P::backoff(attempt);
    }
  }

  // ---- growable heaps (issue 14) ------------------------------------------------------------
  // The driver (lane 0) maps granules (mprotect read-write) and adopts them; trims withdraw
  // granules and unmap them again (PROT_NONE, pages dropped), so a touch of memory the heap
  // gave back crashes the schedule.
  void unmap_granule(std::uint64_t off) {
    mprotect(a.small.base + off, granule_bytes, PROT_NONE);
    madvise(a.small.base + off, granule_bytes, MADV_DONTNEED);
    run_of[off / granule_bytes] = 0;
  }
  void adopt(std::uint64_t gi) {
    if (mprotect(a.small.base + gi * granule_bytes, granule_bytes, PROT_READ | PROT_WRITE) != 0) P::violated("mprotect failed");
    if (!a.adopt_granule(gi * granule_bytes)) P::violated("adopt: granule " + str(gi) + " was not unmapped");
  }
  // The driver maps a run of 2^run_log2 granules from granule `first` (one handle) and adopts it.
  // (allocator::adopt_run: one block for the whole run, while the other lanes allocate and free)
  void adopt_run(std::uint64_t first) {
    const std::uint64_t n = std::uint64_t{1} << run_log2;
    if (mprotect(a.small.base + first * granule_bytes, n * granule_bytes, PROT_READ | PROT_WRITE) != 0) P::violated("mprotect failed");
    for (std::uint64_t g = first; g < first + n; ++g) run_of[g] = static_cast<std::uint8_t>(run_log2);
    if (!a.adopt_run(first * granule_bytes, run_log2)) P::violated("adopt: a granule of the run at granule " + str(first) + " was not unmapped");
  }
  void adopt_all() {
    for (std::uint64_t g = 0; g < granules; g += std::uint64_t{1} << run_log2) adopt_run(g);
  }
  // A trim with the run table; a run goes back whole or not at all (growth_controller::withdrawn:
  // the host unmaps the whole handle of a run, so a run withdrawn in part is a G8 verdict).
  std::uint64_t trim_to(std::uint64_t keep_bytes) {
    std::vector<std::uint64_t> out;
    const std::uint64_t left = a.trim_granules(keep_bytes, [&out](std::uint64_t off) { out.push_back(off); }, run_of.data());
    const auto [h, n] = first_partial_run(out, granule_bytes, granules, [this](std::uint64_t i) { return run_of[i]; });
    if (n != 0)
      P::violated("G8: a trim withdrew " + str(n) + " of the " + str(std::uint64_t{1} << run_of[h]) + " granules of the run at granule " +
                  str(h) + ": the host would unmap the whole run (one handle) under its other granules' blocks");
    for (const std::uint64_t off : out) unmap_granule(off);
    return left;
  }
  void wait_adopted() {
    for (unsigned attempt = 0; P::load(&adopted_all, acquire, device_scope) == 0; ++attempt) P::backoff(attempt);
  }
  void grow_lane(unsigned me) {
    std::vector<std::uint64_t> mine;
    if (m == mode::grow) {
      // grow-while-alloc: the driver adopts every granule while the other lanes allocate (nullptr
      // allowed: memory may be missing) and free; then, everything mapped and free, one block of
      // half the heap must be had (the adopted granules merged)
      if (me == 0) {
        // a free into a granule that is still unmapped changes nothing (nothing there is touched)
        a.deallocate(a.small.base + (granules - 1) * granule_bytes + 64);
        adopt_all();
        P::store(&adopted_all, 1u, release, device_scope);
      } else {
        for (unsigned i = 0; i < ops; ++i) {
          const std::uint64_t h = do_alloc(draw_size());
          if (h) mine.push_back(h);
          while (mine.size() > keep) {
            const std::size_t k = P::choose(static_cast<std::uint32_t>(mine.size()));
            do_free(mine[k]);
            mine.erase(mine.begin() + static_cast<std::ptrdiff_t>(k));
          }
        }
        for (auto h : mine) do_free(h);
        wait_adopted();
      }
      meet(1);
      if (me == 0) {
        const std::uint64_t h = do_alloc(recovery_bytes(a.heap_bytes / 2));
        // A free whose merge found its buddy AVAILABLE but every unit of the level held by a
        // searcher leaves the pair unmerged when the searcher claims another node (T6, design.md
        // §10.3: counted, not failed on; no lazy re-merge): the request may then fail with all
        // memory free. Excused only when such a skip happened; the final check then merges the
        // pairs (merge_free_buddies_quiescent, §16.3) and asks again.
        if (!h && ghost_table::current().get(ghost_kind::merge_skipped, a.small.buddy.sem) > 0)
          grow_refused = "grow: nullptr for " + str(recovery_bytes(a.heap_bytes / 2)) + " B; " + buddy_summary();
        else if (!h)
          P::violated("grow: nullptr for " + str(recovery_bytes(a.heap_bytes / 2)) + " B (half the heap, or half the byte limit) after every granule was adopted and every block freed; " + buddy_summary());
        if (h) do_free(h);
      }
      meet(2);
      return;
    }
    if (m == mode::grow_exhaust) {
      // exhaust-grow-recover: allocate until nullptr; while a granule is unmapped the failure
      // is demand (checked at the end), and the lane adopts the next granule and goes on
      for (;;) {
        const std::uint64_t h = do_alloc(draw_size());
        if (h) {
          mine.push_back(h);
          continue;
        }
        // (whether it was recorded is checked at the end: a group's leader counts its lanes'
        // failures, maybe after this lane has moved on)
        const std::uint64_t g = P::fetch_add(&next_granule, std::uint64_t{1}, relaxed, device_scope);
        if (g >= granules) break;
        adopt(g);
      }
      P::fetch_add(&failed_lanes, 1u, relaxed, device_scope);
      for (unsigned attempt = 0; P::load(&failed_lanes, acquire, device_scope) < lanes; ++attempt) P::backoff(attempt);
      for (auto h : mine) do_free(h);
      return;
    }
    // trim-after-churn: the driver adopts every granule; the lanes allocate and keep their blocks;
    // the driver trims to 0 (only wholly free granules may go); the lanes check and free their
    // blocks (touching them); the driver trims to 0 again: now every granule must go
    if (me == 0) {
      adopt_all();
      P::store(&adopted_all, 1u, release, device_scope);
    } else {
      wait_adopted();
    }
    for (unsigned i = 0; i < ops; ++i) {
      const std::uint64_t h = do_alloc(draw_size());
      if (h) mine.push_back(h);
      if (mine.size() > keep) {  // churn: free one, keep the rest
        const std::size_t k = P::choose(static_cast<std::uint32_t>(mine.size()));
        do_free(mine[k]);
        mine.erase(mine.begin() + static_cast<std::ptrdiff_t>(k));
      }
    }
    meet(1);
    if (me == 0) trim_to(0);
    meet(2);
    for (auto h : mine) do_free(h);
    meet(3);
    if (me == 0) {
      const std::uint64_t left = trim_to(0);
      if (left != 0) P::violated("trim: " + str(left) + " bytes still mapped after every block was freed; " + buddy_summary());
    }
    meet(4);
  }

  std::vector<std::pair<std::string, double>> metrics() const override {
    return {{"utilisation (peak live bytes / heap bytes)", double(peak_live_bytes) / double(a.heap_bytes)},
            {"peak live bytes", double(peak_live_bytes)},
            {"allocations", double(tag_counter)},
            {"failed allocations", double(failures)},
            {"unmerged buddy pairs at the end (T6)", double(quality.unmerged_pairs)},
            {"bins left at the end", double(quality.bins)},
            {"chunks left at the end", double(quality.chunks)}};
  }

  // Runs allocator::trim() in a one-lane launch after every lane exited (what the host's trim
  // does at quiescence).
  std::optional<std::string> trim_at_quiescence() {
    random_strategy rs;
    return at_quiescence(rs, [this] { a.trim(); });
  }
  // Growable heaps, after every lane exited: a trim to 0 in a one-lane launch.
  std::optional<std::string> trim_all_at_quiescence() {
    replay_strategy rs({});
    return at_quiescence(rs, [this] { trim_to(0); });
  }
  // Runs f as the one lane of a launch after every lane exited (strategy rs, seed 1).
  template <class S, class F>
  std::optional<std::string> at_quiescence(S& rs, F&& f) {
    rs.begin(1, 1);
    world w({1, 1, 1}, rs, run_limits{1'000, 50'000'000});
    const run_result r = w.run(std::forward<F>(f));
    if (r.failed()) return std::string(to_string(r.kind)) + ": " + r.message;
    return std::nullopt;
  }

  // Failing fast (design.md §13), at quiescence: a TBuddy failure recorded as current means
  // no node of that order or above is AVAILABLE; a reclaim recorded clean and current means a
  // walk gives nothing back (checked with a forced walk, the last thing done to the heap here
  // when it fails).
  std::optional<std::string> check_fail_fast() {
    const auto& b = a.small.buddy;
    const byte_limit& l = a.globals->limit;
    for (unsigned k = 0; k < b.levels; ++k) {
      if (l.failed_at[k] == 0 || l.failed_at[k] != l.free_generation + 1) continue;
      if (const std::uint64_t v = first_free_node_of(b, k))
        return "fail fast: a failure of order " + str(k) + " is recorded as current (publications " + str(l.free_generation) +
               "), but node " + str(v) + " of order " + str(b.height(v)) + " is AVAILABLE";
    }
    if (l.reclaim_clean != 0 && l.reclaim_clean == l.reclaim_changes + 1) {
      bool any = false;
      random_strategy rs;
      if (auto e = at_quiescence(rs, [&] { any = a.small.reclaim(true); })) return "fail fast: a walk at quiescence: " + *e;
      if (any) return "fail fast: reclaim is recorded clean (changes " + str(l.reclaim_changes) + "), but a walk at quiescence gave something back";
    }
    return std::nullopt;
  }

  std::optional<std::string> check_final() override {
    for (auto h : mailbox)
      if (h) return "a block was left in a mailbox";
    if (!leak && !live.empty()) return "ghost: " + str(live.size()) + " blocks still live at the end";
    if (auto e = check_quiescent(a, &quality)) return *e;
    if (auto e = walk_settled()) return "at quiescence: " + *e;
    if (auto e = check_fail_fast()) return *e;
    // The heap walk (leak report) lists exactly the live blocks, and each still holds its pattern.
    std::map<std::uint64_t, std::uint64_t> walked;
    for_each_live_block(a, [&](const live_block& lb) { walked[lb.offset] = lb.bytes; });
    if (walked.size() != live.size()) return "heap walk lists " + str(walked.size()) + " live blocks, the ghost has " + str(live.size());
    for (const auto& [off, g] : live) {
      auto it = walked.find(off);
      if (it == walked.end() || it->second != g.served) return "heap walk misses live block " + str(off);
      const std::uint64_t* words = reinterpret_cast<const std::uint64_t*>(a.small.base + off);
      for (std::uint64_t i = 0; i < (g.bytes + 7) / 8; ++i)
        if (words[i] != (g.tag ^ i)) return "live block " + str(off) + " corrupted at word " + str(i);
    }
    // (grow: the driver's free into an unmapped granule is one invalid pointer in checked builds)
    const std::uint64_t expected_errors = checked_build && m == mode::grow ? 1 : 0;
    if (a.globals->error_count != expected_errors) return "checked-mode errors: " + str(a.globals->error_count);
    if (!grow_refused.empty()) {
      // the pairs concurrent frees left unmerged (T6) merged at quiescence, half the heap is had
      merge_free_buddies_quiescent(a);
      bool served = false;
      random_strategy rq;
      if (auto e = at_quiescence(rq, [&] {
            void* p = a.allocate(recovery_bytes(a.heap_bytes / 2));
            served = p != nullptr;
            if (p) a.deallocate(p);
          }))
        return "grow recovery after merging: " + *e;
      if (!served)
        return grow_refused + "; and again after merging every pair of free buddies at quiescence (not only T6's unmerged pairs); " + buddy_summary();
    }
    if (growable(m)) {
      // every failure while a granule was unmapped is demand, the others exhaustion
      const heap_statistics st = collect_statistics(a);
      if (st.failed + a.globals->growth.demand_requests != failures)
        return "growth: " + str(failures) + " nullptrs, but the statistics count " + str(st.failed) + " failures and " +
               str(a.globals->growth.demand_requests) + " requests of demand";
      if (m != mode::trim && a.globals->growth.adopted != granules)
        return "growth: " + str(a.globals->growth.adopted) + " adoptions of " + str(granules) + " granules";
      // everything freed: a trim to 0 gives every granule back
      if (auto e = trim_all_at_quiescence()) return "trim to 0: " + *e;
      if (auto e = check_quiescent(a)) return "after the trim to 0: " + *e;
      if (a.globals->growth.mapped_granules != 0)
        return "G7: " + str(a.globals->growth.mapped_granules) + " granules still mapped after freeing everything and trim_to(0)";
      const std::uint64_t first = std::uint64_t{1} << (a.small.buddy.top() - (a.small.buddy.grow_granule - 1));
      for (std::uint64_t g = first; g < 2 * first; ++g)
        if (a.small.buddy.state[g] != (node_allocated | node_unmapped_tag))
          return "G7: granule " + str(g - first) + " is not unmapped after trim_to(0) (state " + str(a.small.buddy.state[g]) + ")";
    }
    if (m == mode::exhaust) {
      // recovery without a trim: every block was freed, so a block of a quarter of the heap is
      // served (reclaim gives back what hysteresis keeps; no recorded failure outlives the frees:
      // design.md §13)
      const std::uint64_t quarter = recovery_bytes(a.heap_bytes / 4);
      bool served = false;
      random_strategy rq;
      if (auto e = at_quiescence(rq, [&] {
            void* p = a.allocate(quarter);
            served = p != nullptr;
            if (p) a.deallocate(p);
          }))
        return "recovery: " + *e;
      if (!served) return "recovery: after every block was freed, a request of " + str(quarter) + " B (a quarter of the heap, or half the byte limit) got nullptr; " + buddy_summary();
      if (auto e = walk_settled()) return "recovery (the request's reclaim walk): " + *e;
      // recovery: after every block was freed, a trim at quiescence (hysteresis keeps empty bins
      // and a free chunk per arena: the host's heap::trim does this) and a merge of free
      // buddies, the heap is as new (T7 "after trim")
      if (auto e = trim_at_quiescence()) return "trim: " + *e;
      if (auto e = check_quiescent(a)) return "after the trim: " + *e;
      merge_free_buddies_quiescent(a);
      if (auto e = check_quiescent(a)) return "after merging: " + *e;
      // T7 holds once the pre-split reserve was drained (design.md §10.5): a byte limit can end
      // the exhaustion before the tree runs empty, and the reserve's untaken blocks then stay
      // split, free and tagged (P1 above checks them); the root is whole only without them
      std::uint64_t untaken = 0;
      for (unsigned t = 0; a.small.buddy.limit && t < presplit_tiers; ++t)
        untaken += a.small.buddy.limit->presplit_count[t] - std::min(a.small.buddy.limit->presplit_next[t], a.small.buddy.limit->presplit_count[t]);
      if (untaken == 0) {
        if (a.small.buddy.state[1] != node_available) return "T7: the root is not AVAILABLE after freeing everything and a trim (state " + str(a.small.buddy.state[1]) + ")";
        for (unsigned k = 0; k < a.small.buddy.levels; ++k) {
          const auto f = tbuddy_semaphore<P>::unpack(a.small.buddy.sem[k].raw());
          if (f.c != (k == a.small.buddy.top() ? 1u : 0u)) return "T7: buddy semaphore " + str(k) + " C=" + str(f.c) + " after freeing everything and a trim";
        }
      }
    }
    if (m == mode::exhaust && failures == 0) return "exhaustion never reached";
    // TBuddy blocks alone (no slots, no byte limit, no injected failure): TBuddy fails only when
    // no block is free and none is coming (promises, drains of the pre-split reserve: design.md
    // §10), so the lanes held the whole heap at their first nullptr
    if (m == mode::exhaust && limit_bytes == 0 && !failures_injected && a.served_bytes(fixed_size, align) > std::max(a.sb_max_bytes, geom::max_class_bytes) &&
        exhaust_held != a.heap_bytes)
      return "exhaustion: the lanes held " + str(exhaust_held) + " B of " + str(a.heap_bytes) + " B of blocks of " + str(a.served_bytes(fixed_size, align)) +
             " B at their first nullptr (a spurious out-of-memory)";
    return std::nullopt;
  }
};

template <ualloc_bug UB, tbuddy_bug TB>
std::unique_ptr<instance> make_one(world& w, const params& p, mode md) {
  return std::make_unique<heap_inst<UB, TB>>(w, p, md);
}

}  // namespace toga::sim::heap_scenarios
