//! @file toga/heap_walk.hpp
//! Quiescent heap inspection (host code over host-visible memory; nothing may run in the heap
//! meanwhile): the live blocks (leak reports), the invariants of design.md §2.3 that hold at
//! quiescence (G6, S5, T1-T4, U1-U3, U5, R4; T7 is checked by the exhaust-recover scenario), fragmentation quality (T6: unmerged buddy pairs,
//! counted, not asserted) and a quiescent merge of free buddies.
//! The simulator runs these after every schedule; the CUDA backend after copying the heap back.
#pragma once

#include <algorithm>
#include <bit>
#include <cstdint>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "toga/allocator.hpp"

namespace toga {

struct live_block {
  std::uint64_t offset;  //!< from the heap base
  std::uint64_t bytes;   //!< served (rounded) size
  bool small;            //!< UAlloc slot, of a bin or a superbin (else a TBuddy block)
};

struct heap_quality {
  std::uint64_t unmerged_pairs = 0;  //!< pairs of AVAILABLE siblings (T6)
  std::uint64_t live_blocks = 0, live_bytes = 0;
  std::uint64_t chunks = 0, bins = 0, superbins = 0;
  std::uint64_t unmapped_granules = 0;  //!< growable heaps: granules without memory behind them
  //! Growable heaps: mapped granules that hold nothing (no ALLOCATED node covers or lies below
  //! them): what a trim to 0 after a reclaim (allocator::trim) withdraws.
  std::uint64_t free_granules = 0;
  //! Blocks of the pre-split reserve that no climb has taken (design.md §10.5): free memory.
  std::uint64_t presplit_blocks = 0;
};

namespace detail {
template <class A>
std::uint32_t st(const A& a, std::uint64_t v) { return a.small.buddy.state[v]; }
}  // namespace detail

//! Calls f(live_block) for every live block, in address order within TBuddy blocks.
template <class A, class F>
void for_each_live_block(const A& a, F&& f) {
  const auto& b = a.small.buddy;
  const std::uint64_t nodes = std::uint64_t{1} << b.levels;
  for (std::uint64_t v = 1; v < nodes; ++v) {
    const std::uint32_t s = b.state[v];
    if ((s & node_state_mask) != node_allocated || (s & (node_unmapped_tag | node_presplit_tag))) continue;
    // only frontier nodes: an ALLOCATED node whose parent is split (or the root)
    if (v != 1 && (b.state[v >> 1] & node_state_mask) != node_partial && b.state[v >> 1] != node_busy) continue;
    const std::uint64_t off = b.offset_of(v);
    if (s & node_superbin_tag) {
      const auto* h = a.super().bin_at(a.super().superbin_id(off));
      const unsigned c = h->class_id;
      // (never past the side-table entry, whatever a corrupt header says)
      const unsigned n = std::min<unsigned>(h->capacity, geom::sb_bitmap_words_for(a.super().sb_shift) * 64);
      for (unsigned i = 0; i < n; ++i)
        if ((h->bitmap[i / 64] >> (i % 64)) & 1) f(live_block{off + (std::uint64_t{i} << (geom::sb_min_class_shift + c)), geom::sb_class_bytes(c), true});
      continue;
    }
    if (!(s & node_chunk_tag)) {
      f(live_block{off, geom::page_bytes << b.height(v), false});
      continue;
    }
    const auto* ch = reinterpret_cast<const chunk_header*>(a.small.base + off);
    for (unsigned bi = geom::header_bins; bi < geom::bins_per_chunk; ++bi) {
      if (!((ch->bin_bitmap[bi / 64] >> (bi % 64)) & 1)) continue;
      const auto* h = reinterpret_cast<const bin_header*>(a.small.base + off + std::uint64_t{bi} * geom::page_bytes);
      const unsigned c = h->class_id;
      for (unsigned i = 0; i < h->capacity; ++i)
        if ((h->bitmap[i / 64] >> (i % 64)) & 1)
          f(live_block{off + geom::slot_offset(bi, c, i), geom::class_bytes(c), true});
    }
  }
}

namespace detail {
// U1, U5 and U2' for one live bin (a regular bin or a superbin) whose pins and inbox live in `owner`.
template <class H, class L>
std::optional<std::string> check_live_bin(const H* h, std::uint64_t bin, std::uint32_t cap, const L& owner) {
  using std::to_string;
  if (h->free == bin_dead) return std::string("U5: a retired (DEAD) bin is still in use");
  if (h->capacity != cap) return "U1: bin " + to_string(bin) + " capacity " + to_string(h->capacity) + ", its class has " + to_string(cap);
  unsigned pop = 0;
  // a regular bin's whole bitmap; a superbin's words of its class (its side-table entry ends there)
  const unsigned nbits = std::is_same_v<H, superbin_header> ? (cap + 63) / 64 * 64 : static_cast<unsigned>(sizeof(h->bitmap) * 8);
  for (unsigned i = 0; i < nbits; ++i) {
    const bool bit = (h->bitmap[i / 64] >> (i % 64)) & 1;
    if (i >= cap && !bit) return std::string("U1: bitmap bit beyond capacity is clear");
    if (i < cap && bit) ++pop;
  }
  if (h->free != cap - pop) return "U1: bin free=" + to_string(h->free) + " but " + to_string(cap - pop) + " clear bits";
  unsigned pins = 0;
  for (unsigned s = 0; s < max_pin_slots; ++s) pins += (owner.pins[s] & ~std::uint64_t{1}) == bin;
  if (h->queued != 0 && h->queued != 1) return "U2': a live bin in inbox state " + to_string(h->queued);
  if (static_cast<std::int32_t>(h->free) > 0 && !pins && h->queued != 1)
    return "U2': bin with free=" + to_string(static_cast<std::int32_t>(h->free)) + " is neither pinned nor queued";
  return std::nullopt;
}
// S5, U2' and R4 for one class list of `u` (UAlloc's or the superbins'): the findable bins' free
// slots are what the slot semaphore counts.
template <class U, class L>
std::optional<std::string> check_class_list(const U& u, const L& list, unsigned ai, unsigned c, std::uint64_t max_bins) {
  using std::to_string;
  if (list.rcu.readers_raw(0) || list.rcu.readers_raw(1) || list.rcu.pending_raw() || list.rcu.cb_head_raw())
    return "R4: RCU domain of arena " + to_string(ai) + " class " + to_string(c) + " not quiescent";
  // findable bins, each counted once (a bin may sit in two slots, or in a slot and the list)
  std::uint64_t sum = 0, n = 0;
  std::vector<std::uint64_t> seen;
  for (unsigned s = 0; s < max_pin_slots; ++s) {
    const std::uint64_t pb = list.pins[s] & ~std::uint64_t{1};  // owned, or borrowed (low bit)
    if (pb == 0) continue;
    if (s >= u.num_pins) return "U2': pin slot " + to_string(s) + " beyond the heap's " + to_string(u.num_pins) + " is used";
    const auto* h = u.bin_at(pb);
    if (h->class_id != c || h->arena != ai) return std::string("U2': pinned bin of the wrong class or arena");
    if (h->free == bin_dead) return std::string("U2': a pinned bin is DEAD");
    if (std::find(seen.begin(), seen.end(), pb) != seen.end()) continue;
    seen.push_back(pb);
    sum += h->free;
  }
  for (std::uint64_t bin = list.inbox; bin != 0; bin = u.bin_at(bin)->inbox_next) {
    const auto* h = u.bin_at(bin);
    if (++n > max_bins) return std::string("U2: the inbox has a cycle");
    if (h->queued != 1 || h->class_id != c || h->arena != ai) return std::string("U2': inbox bin with wrong state, class or arena");
    if (std::find(seen.begin(), seen.end(), bin) != seen.end()) continue;
    seen.push_back(bin);
    if (static_cast<std::int32_t>(h->free) > 0) sum += h->free;
  }
  using slot_sem_t = std::remove_reference_t<decltype(list.slot_sem)>;
  auto sf = slot_sem_t::unpack(list.slot_sem.raw());
  if (sf.c < slot_sem_t::bias) return std::string("S1': slot semaphore C below its bias at quiescence");
  sf.c -= slot_sem_t::bias;
  if (sf.e || sf.r || sf.c != sum)
    return "S5: arena " + to_string(ai) + " class " + to_string(c) + " slot semaphore C/E/R=" + to_string(sf.c) + "/" + to_string(sf.e) +
           "/" + to_string(sf.r) + ", pinned and queued bins have " + to_string(sum) + " free slots";
  return std::nullopt;
}
}  // namespace detail

//! Checks the quiescent invariants; returns the first violation, fills `q` (may be null).
template <class A>
std::optional<std::string> check_quiescent(const A& a, heap_quality* q = nullptr) {
  using std::to_string;
  heap_quality local;
  heap_quality& Q = q ? *q : local;
  Q = heap_quality{};  // counts start at 0 on every walk
  const auto& b = a.small.buddy;
  const std::uint64_t nodes = std::uint64_t{1} << b.levels;
  std::vector<std::uint64_t> avail(b.levels, 0);
  // T1/T2: walk from the root; frontier nodes are AVAILABLE/ALLOCATED, below them BUSY, above
  // them split nodes whose state is derived from their children.
  std::vector<std::uint8_t> covered(nodes, 0);
  std::uint64_t allocated_bytes = 0;
  for (std::uint64_t v = 1; v < nodes; ++v) {
    if (b.lock[v]) return "T4: node " + to_string(v) + " still locked";
    const std::uint32_t s = b.state[v];
    const bool cov = v != 1 && (covered[v >> 1] || (b.state[v >> 1] & node_state_mask) == node_available ||
                                (b.state[v >> 1] & node_state_mask) == node_allocated);
    covered[v] = cov;
    if (cov) {
      if (s != node_busy) return "T1: node " + to_string(v) + " below a block is not BUSY (" + to_string(s) + ")";
      continue;
    }
    const std::uint32_t k = s & node_state_mask;
    if (k == node_available) ++avail[b.height(v)];
    if (s & node_unmapped_tag) {  // a growable heap's unmapped granule (issue 14)
      if (a.small.buddy.grow_granule == 0 || b.height(v) != a.small.buddy.grow_granule - 1 || s != (node_allocated | node_unmapped_tag))
        return "G7: node " + to_string(v) + " has the unmapped tag in state " + to_string(s) + " at height " + to_string(b.height(v));
      ++Q.unmapped_granules;
      continue;
    }
    if (s & node_presplit_tag) {  // a block of the pre-split reserve (design.md §10.5): free memory
      bool untaken = false;
      for (unsigned t = 0; b.limit && t < presplit_tiers && !untaken; ++t) {
        const std::uint64_t n = b.limit->presplit_count[t], first = b.limit->presplit_first[t];
        untaken = n != 0 && b.height(v) == b.limit->presplit_order[t] && v >= first + std::min(b.limit->presplit_next[t], n) && v < first + n;
      }
      if (s != (node_allocated | node_presplit_tag) || !untaken)
        return "P1: node " + to_string(v) + " has the pre-split tag in state " + to_string(s) + " but is not an untaken block of the reserve";
      ++Q.presplit_blocks;
      continue;
    }
    if (k == node_allocated) allocated_bytes += geom::page_bytes << b.height(v);
    if (k == node_available || k == node_allocated) continue;
    if (b.height(v) == 0) return "T1: leaf " + to_string(v) + " is neither free, allocated nor covered";
    const std::uint32_t l = b.state[2 * v] & node_state_mask, r = b.state[2 * v + 1] & node_state_mask;
    const std::uint32_t d = (l == node_available || l == node_partial || r == node_available || r == node_partial) ? node_partial : node_busy;
    if (s != d) return "T2: split node " + to_string(v) + " has state " + to_string(s) + ", its children derive " + to_string(d);
    if (l == node_available && r == node_available) ++Q.unmerged_pairs;
  }
  if (a.small.buddy.grow_granule != 0) {  // G7: the mapped-granule count matches the tree
    const std::uint64_t granules = a.heap_bytes >> (geom::page_shift + a.small.buddy.grow_granule - 1);
    // wholly free granules: mapped, and no ALLOCATED block covers or lies below them
    const unsigned gh = static_cast<unsigned>(a.small.buddy.grow_granule - 1);
    std::vector<std::uint8_t> used(granules, 0);
    for (std::uint64_t v = 1; v < nodes; ++v) {
      if (covered[v] || (b.state[v] & node_state_mask) != node_allocated || (b.state[v] & node_unmapped_tag)) continue;
      const unsigned h = b.height(v);
      if (h <= gh) used[(v >> (gh - h)) - granules] = 1;
      else
        for (std::uint64_t g = v << (h - gh); g < (v + 1) << (h - gh); ++g) used[g - granules] = 1;
    }
    for (std::uint64_t g = 0; g < granules; ++g)
      if (!used[g] && !(b.state[granules + g] & node_unmapped_tag)) ++Q.free_granules;
    if (a.globals->growth.mapped_granules != granules - Q.unmapped_granules)
      return "G7: " + to_string(a.globals->growth.mapped_granules) + " granules counted mapped, but the tree has " +
             to_string(granules - Q.unmapped_granules) + " without the unmapped tag";
  }
  if (b.limit) {  // P1: the reserve's untaken blocks are exactly the tagged ones, every taken one is settled
    std::uint64_t untaken = 0;
    for (unsigned t = 0; t < presplit_tiers; ++t) {
      const std::uint64_t n = b.limit->presplit_count[t], taken = std::min(b.limit->presplit_next[t], n);
      untaken += n - taken;
      if (b.limit->presplit_settled[t] != taken)
        return "P1: " + to_string(taken) + " blocks of tier " + to_string(t) + " of the pre-split reserve were taken but " +
               to_string(b.limit->presplit_settled[t]) + " are settled";
    }
    if (Q.presplit_blocks != untaken)
      return "P1: the pre-split reserve has " + to_string(untaken) + " untaken blocks but " + to_string(Q.presplit_blocks) + " nodes carry its tag";
  }
  if (b.limit && b.limit->reserved != allocated_bytes)
    return "statistics: buddy bytes handed out = " + to_string(b.limit->reserved) + " but ALLOCATED blocks hold " + to_string(allocated_bytes);
  if (b.limit && b.limit->reserved_high < b.limit->reserved) return "statistics: buddy high-water below the current value";
  // T3 / S5 for TBuddy.
  for (unsigned k = 0; k < b.levels; ++k) {
    const auto f = std::remove_reference_t<decltype(b.sem[0])>::unpack(b.sem[k].raw());
    if (f.e || f.r) return "S5: buddy semaphore " + to_string(k) + " has E=" + to_string(f.e) + " R=" + to_string(f.r) + " at quiescence";
    if (f.c != avail[k]) return "T3: buddy semaphore " + to_string(k) + " C=" + to_string(f.c) + " but " + to_string(avail[k]) + " AVAILABLE nodes";
  }
  // Arenas: chunk lists (U3), bin lists (U2), semaphores (S5), RCU domains (R4).
  std::vector<std::uint64_t> chunk_free_listed(a.small.num_arenas, 0);
  for (std::uint64_t v = 1; v < nodes; ++v) {
    if (covered[v] || b.state[v] != (node_allocated | node_chunk_tag)) continue;
    if (b.height(v) != geom::chunk_order) return "G6: a chunk-tagged node of order " + to_string(b.height(v));
    ++Q.chunks;
    const std::uint64_t off = b.offset_of(v);
    const auto* ch = reinterpret_cast<const chunk_header*>(a.small.base + off);
    unsigned used = 0;
    for (unsigned bi = 0; bi < geom::bins_per_chunk; ++bi) {
      const bool in_use = (ch->bin_bitmap[bi / 64] >> (bi % 64)) & 1;
      if (bi < geom::header_bins) {
        if (!in_use) return "U3: header bin not marked used";
        continue;
      }
      if (!in_use) continue;
      ++used;
      ++Q.bins;
      const std::uint64_t bin = off + std::uint64_t{bi} * geom::page_bytes;
      const auto* h = a.small.bin_at(bin);
      if (h->class_id >= geom::num_classes || h->arena >= a.small.num_arenas) return std::string("U1: bin of an unknown class or arena");
      if (auto e = detail::check_live_bin(h, bin, a.small.capacity(h->class_id), a.small.arenas[h->arena].lists[h->class_id])) return e;
    }
    if (ch->free_bins != geom::usable_bins - used) return "U3: chunk free_bins=" + to_string(ch->free_bins) + " but " + to_string(geom::usable_bins - used) + " unused";
    if ((ch->listed != 0) != (ch->free_bins > 0)) return "U3: chunk listed=" + to_string(ch->listed) + " with free_bins=" + to_string(ch->free_bins);
    if (ch->arena >= a.small.num_arenas) return "U3: chunk arena out of range";
    if (ch->listed) chunk_free_listed[ch->arena] += ch->free_bins;
  }
  // Superbins (E6, design.md §11): tagged nodes of the superbin order, headers in the side table.
  for (std::uint64_t v = 1; v < nodes; ++v) {
    if (covered[v] || !(b.state[v] & node_superbin_tag)) continue;
    if (b.state[v] != (node_allocated | node_superbin_tag) || (b.state[v] & node_chunk_tag)) return "G6: node " + to_string(v) + " has a superbin tag in state " + to_string(b.state[v]);
    if (a.sb_max_bytes == 0 || b.height(v) + geom::page_shift != a.super().sb_shift) return "G6: a superbin-tagged node of order " + to_string(b.height(v));
    ++Q.superbins;
    const std::uint64_t bin = a.super().superbin_id(b.offset_of(v));
    const auto* h = a.super().bin_at(bin);
    if (h->class_id >= geom::sb_max_classes || geom::sb_class_bytes(h->class_id) > a.sb_max_bytes || h->arena >= a.super().num_arenas)
      return "U1: superbin at " + to_string(b.offset_of(v)) + " of an unknown class or arena";
    if (auto e = detail::check_live_bin(h, bin, a.super().capacity(h->class_id), a.super().arenas[h->arena].lists[h->class_id])) return "superbin: " + *e;
  }
  for (unsigned ai = 0; ai < a.small.num_arenas; ++ai) {
    const auto& ar = a.small.arenas[ai];
    if (ar.chunk_mtx) return "chunk mutex of arena " + to_string(ai) + " held at quiescence";
    using chunk_sem_t = std::remove_reference_t<decltype(ar.chunk_sem)>;
    auto cf = chunk_sem_t::unpack(ar.chunk_sem.raw());
    if (cf.c < chunk_sem_t::bias) return "S1': arena " + to_string(ai) + " chunk semaphore C below its bias at quiescence";
    cf.c -= chunk_sem_t::bias;
    if (cf.e || cf.r || cf.c != chunk_free_listed[ai])
      return "S5/U3: arena " + to_string(ai) + " chunk semaphore C/E/R=" + to_string(cf.c) + "/" + to_string(cf.e) + "/" + to_string(cf.r) +
             ", listed chunks have " + to_string(chunk_free_listed[ai]) + " free bins";
    for (unsigned c = 0; c < geom::num_classes; ++c)
      if (auto e = detail::check_class_list(a.small, ar.lists[c], ai, c, a.heap_bytes >> geom::page_shift)) return e;
    if (a.sb_max_bytes == 0) continue;
    for (unsigned c = 0; c < geom::sb_max_classes; ++c)
      if (auto e = detail::check_class_list(a.super(), a.super().arenas[ai].lists[c], ai, c, a.heap_bytes >> geom::page_shift)) return "superbins: " + *e;
  }
  for_each_live_block(a, [&](const live_block& lb) {
    ++Q.live_blocks;
    Q.live_bytes += lb.bytes;
  });
  const heap_statistics stats = collect_statistics(a);
  if (stats.used_bytes != Q.live_bytes)
    return "statistics: used_bytes=" + to_string(stats.used_bytes) + " but live blocks hold " + to_string(Q.live_bytes);
  return std::nullopt;
}

//! The first AVAILABLE node of TBuddy tree `b` (a free block) of height >= k, i.e. of at least
//! 4 KiB x 2^k, in index order; 0 if there is none. Read without atomics (quiescence, or a check
//! that tolerates a stale view).
template <class B>
std::uint64_t first_free_node_of(const B& b, unsigned k) {
  for (std::uint64_t v = 1; v < (std::uint64_t{1} << b.levels); ++v)
    if (b.state[v] == node_available && b.height(v) >= k) return v;
  return 0;
}

//! Quiescent: merges every pair of AVAILABLE buddies upward (what concurrent frees left
//! unmerged, T6), keeping the semaphores exact. Returns the number of merges.
template <class A>
std::uint64_t merge_free_buddies_quiescent(A& a) {
  auto& b = a.small.buddy;
  std::uint64_t merges = 0;
  for (unsigned h = 1; h < b.levels; ++h) {
    const std::uint64_t first = std::uint64_t{1} << (b.levels - 1 - h), last = first << 1;
    for (std::uint64_t v = first; v < last; ++v) {
      if (b.state[2 * v] != node_available || b.state[2 * v + 1] != node_available) continue;
      using sem_t = std::remove_reference_t<decltype(b.sem[0])>;
      auto lo = sem_t::unpack(b.sem[h - 1].raw());
      lo.c -= 2;
      b.sem[h - 1].init(lo.c);
      b.state[2 * v] = b.state[2 * v + 1] = node_busy;
      b.state[v] = node_available;
      b.sem[h].init(sem_t::unpack(b.sem[h].raw()).c + 1);
      ++merges;
    }
    // parents above a merged node: recompute derived states bottom-up
  }
  // merged blocks appeared without a free: recorded failures (tbuddy::known_exhausted) go
  if (merges != 0 && b.limit != nullptr) ++b.limit->free_generation;
  for (std::uint64_t v = (std::uint64_t{1} << (b.levels - 1)) - 1; v >= 1; --v) {
    const std::uint32_t s = b.state[v] & node_state_mask;
    if (s == node_available || s == node_allocated) continue;
    bool cov = false;
    for (std::uint64_t u = v >> 1; u; u >>= 1) {
      const std::uint32_t su = b.state[u] & node_state_mask;
      if (su == node_available || su == node_allocated) cov = true;
    }
    if (cov) continue;
    const std::uint32_t l = b.state[2 * v] & node_state_mask, r = b.state[2 * v + 1] & node_state_mask;
    b.state[v] = (l == node_available || l == node_partial || r == node_available || r == node_partial) ? node_partial : node_busy;
  }
  return merges;
}

}  // namespace toga
