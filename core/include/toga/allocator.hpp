//! @file toga/allocator.hpp
//! toga's allocator: one allocate/deallocate for every size, over UAlloc (<= 32 B, and 64 B .. 1 KiB without superbins; superbins 64 B .. 64 KiB) and TBuddy
//! (larger), with statistics, an optional byte limit and a checked mode (design.md §6, §14, §15).
//!
//! `allocator<P>` is a trivially copyable view (pointers into the heap and into a metadata
//! block), the shape of `heap_ref` in the CUDA backend: pass it by value to every thread.
//!
//! Sizes: `allocate(bytes)` serves next_pow2(max(bytes, 16)) bytes: <= 32 B from UAlloc's bins;
//! 64 B .. sb_max_bytes (64 KiB on heaps of >= 4 x arenas x 6 x 2 MiB, less on smaller heaps,
//! heap_layout::auto_sb_shift) from superbins at that size (E6, design.md §11; which
//! classes and why: design.md §11.6; from UAlloc's classes on heaps without
//! superbins); else, or when no superbin can be had, a TBuddy block of max(4 KiB, that) bytes
//! (`served_bytes` says which; a 64 B .. 1 KiB request first tries UAlloc's class);
//! requests larger than the heap fail. allocate(0) serves the smallest class (a unique pointer,
//! as C permits); deallocate(nullptr) does nothing.
//! Alignment: every block is aligned to min(served size, 128) bytes (UAlloc) or to its size
//! (superbin slots and TBuddy blocks), relative to the heap base, which the backends align to
//! 4 KiB at least; so at least 16 B. `allocate(bytes, alignment)` honours any power of two.
//! Errors: exhaustion (or the byte limit) returns nullptr; nothing traps or hangs. In checked
//! builds (TOGA_CHECKED) a deallocate of a pointer toga did not hand out, or of one already
//! freed, is recorded in the error log (kind, offset) and changes nothing.
//! Thread-safety: every member may be called concurrently by any thread of the device; memory
//! allocated by one thread (or kernel) may be freed by any other.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "toga/bits.hpp"
#include "toga/config.hpp"
#include "toga/geometry.hpp"
#include "toga/growth_service.hpp"
#include "toga/platform.hpp"
#include "toga/tbuddy.hpp"
#include "toga/ualloc.hpp"

namespace toga {

#if defined(TOGA_CHECKED)
inline constexpr bool checked_build = true;
#else
inline constexpr bool checked_build = false;
#endif

//! Kinds of error the checked mode records.
enum class heap_error_kind : std::uint64_t {
  none = 0,
  foreign_pointer = 1,  //!< not inside this heap
  invalid_pointer = 2,  //!< inside the heap but not the start of a block toga handed out
  double_free = 3,      //!< the block is not allocated (already freed)
};
inline const char* to_string(heap_error_kind k) {
  switch (k) {
    case heap_error_kind::none: return "none";
    case heap_error_kind::foreign_pointer: return "pointer not from this heap";
    case heap_error_kind::invalid_pointer: return "pointer inside the heap that toga did not hand out";
    case heap_error_kind::double_free: return "block freed twice (not allocated)";
  }
  return "?";
}


//! Global metadata: the error log and the byte limit.
struct heap_globals {
  static constexpr unsigned max_errors = 32;
  std::uint32_t error_count;  //!< errors seen (may exceed max_errors; the first are kept)
  std::uint32_t pad;
  std::uint64_t errors[max_errors][2];  //!< (heap_error_kind, heap offset or address)
  byte_limit limit;
  growth_state growth;
};
// ualloc::growth_comes_first reaches the growth state from the byte limit it holds (buddy.limit)
static_assert(offsetof(heap_globals, growth) == offsetof(heap_globals, limit) + sizeof(byte_limit),
              "heap_globals: growth_state follows byte_limit (ualloc::growth_comes_first)");

//! Where everything lives in the metadata block, for a heap of 4 KiB x 2^(levels-1) bytes and
//! `arenas` arenas. The block must be zeroed, then `allocator::init_after_zero` run once.
struct heap_layout {
  unsigned levels = 0;
  unsigned arenas = 0;
  unsigned pins = max_pin_slots;  //!< pin slots used per (arena, class), 1 .. max_pin_slots
  //! Superbins (E6, design.md §11.1): log2 of their bytes (0: none) and the classes they serve
  //! (64 B << c for c < sb_classes; larger requests go to TBuddy).
  unsigned sb_shift = 0, sb_classes = 0;
  //! Superbin arenas in use (1 .. arenas): SM s allocates superbin slots from arena s % sb_arenas,
  //! so that SMs share superbins when sb_arenas < arenas (design.md §11.7: a more compact
  //! address range for slower allocation; the CUDA heap's heap_options::superbin_sharing).
  unsigned sb_arenas = 0;
  std::uint64_t state_off = 0, lock_off = 0, sem_off = 0, sb_table_off = 0, arena_off = 0, sb_arena_off = 0, globals_off = 0,
                view_off = 0, bytes = 0;
  //! The allocator view's resident copy (`allocator::resident`) at view_off.
  static constexpr std::uint64_t resident_bytes = 256;

  //! Most levels of the buddy tree: 4 KiB x 2^25 = 128 GiB. The buddy semaphores' C field (26
  //! bits, design.md §3.1) must count every leaf of the tree.
  static constexpr unsigned max_levels = 26;
  //! Largest heap, in bytes (128 GiB).
  static constexpr std::uint64_t max_heap_bytes = geom::page_bytes << (max_levels - 1);
  //! Levels of the buddy tree for a heap of at least `heap_bytes` bytes (the heap is rounded up
  //! to 4 KiB x 2^(levels-1); below one chunk, 512 KiB, only TBuddy can serve and small requests
  //! fail). Returns 0 when `heap_bytes` exceeds max_heap_bytes: callers must reject such sizes
  //! (the CUDA heap throws std::invalid_argument naming the limit).
  static constexpr unsigned levels_for(std::uint64_t heap_bytes) {
    if (heap_bytes > max_heap_bytes) return 0;
    unsigned l = 1;
    while ((geom::page_bytes << (l - 1)) < heap_bytes) ++l;
    return l;
  }
  //! The superbin size (log2) toga picks for a heap: 2 MiB, or less on heaps too small for four
  //! superbins per (arena, class) (one superbin per arena and class must not strand a small
  //! heap: design.md §11.1); 0 (no superbins) when even 8 KiB ones would not fit.
  static constexpr unsigned auto_sb_shift(unsigned levels, unsigned arenas) {
    // (counted over the six classes of 2 .. 64 KiB, with 8 KiB superbins at least: the choice of
    // before the 1 KiB class joined the superbins, so that the heaps that get superbins stay the same)
    constexpr unsigned classes = 6, min_shift = 13;
    const std::uint64_t heap = geom::page_bytes << (levels - 1);
    const std::uint64_t per = 4 * std::uint64_t{arenas ? arenas : 1} * classes;
    unsigned s = geom::sb_max_shift;
    while (s > min_shift && (std::uint64_t{1} << s) * per > heap) --s;
    return (std::uint64_t{1} << s) * per > heap ? 0u : s;
  }
  //! sb_shift: log2 of the superbin bytes (12 .. 21), 0 for none, -1 (default) for auto_sb_shift.
  //! sb_arenas: superbin arenas in use, 1 .. arenas (0, the default, and larger values: `arenas`,
  //! one per arena).
  template <class P>
  static constexpr heap_layout make(unsigned levels, unsigned arenas, int sb_shift = -1, unsigned sb_arenas = 0) {
    heap_layout h;
    h.levels = levels;
    h.arenas = arenas;
    unsigned sbs = sb_shift < 0 ? auto_sb_shift(levels, arenas) : static_cast<unsigned>(sb_shift);
    // (none larger than 2 MiB, none as large as the heap, none without a class to serve)
    if (sbs > geom::sb_max_shift || (std::uint64_t{1} << sbs) >= (geom::page_bytes << (levels - 1)) || geom::sb_classes_for(sbs) == 0) sbs = 0;
    h.sb_shift = sbs;
    h.sb_classes = geom::sb_classes_for(sbs);
    h.sb_arenas = sb_arenas && sb_arenas < arenas ? sb_arenas : arenas;
    auto up = [](std::uint64_t x) { return (x + 127) & ~std::uint64_t{127}; };
    const std::uint64_t nodes = std::uint64_t{1} << levels;
    const std::uint64_t superbins = sbs ? (geom::page_bytes << (levels - 1)) >> sbs : 0;
    h.state_off = 0;
    h.lock_off = up(h.state_off + nodes * 4);
    h.sem_off = up(h.lock_off + nodes * 4);
    h.sb_table_off = up(h.sem_off + levels * 8);
    h.arena_off = up(h.sb_table_off + superbins * geom::sb_header_stride(sbs));
    h.sb_arena_off = up(h.arena_off + arenas * sizeof(arena<P>));
    h.globals_off = up(h.sb_arena_off + arenas * sizeof(arena<P, superbin_geometry>));
    h.view_off = up(h.globals_off + sizeof(heap_globals));
    h.bytes = up(h.view_off + resident_bytes);
    return h;
  }
};

//! `Checked` (default: the TOGA_CHECKED build option) turns on the checked frees; as a template
//! parameter, checked and unchecked allocators can live in one program.
template <class P, ualloc_bug UB = ualloc_bug::none, tbuddy_bug TB = tbuddy_bug::none, bool Checked = checked_build,
          service_bug SB = service_bug::none>
  requires Platform<P>
struct allocator {
  //! UAlloc's chunk geometry; holds the heap base, the arenas, the buddy tree, and (table,
  //! sb_shift, peer) what the superbin view needs.
  ualloc<P, UB, TB> small;
  heap_globals* globals;
  std::uint64_t heap_bytes;
  std::uint64_t sb_max_bytes;  //!< largest size superbins serve (0: none)
  //! This view's copy in the metadata (layout.view_off), on which out-of-line members run (see
  //! ualloc::resident); nullptr for views built by hand (the call site then copies the view).
  const allocator* resident = nullptr;

  //! A view over `heap` (heap_bytes = 4 KiB x 2^(layout.levels-1) bytes, 4 KiB aligned) and
  //! `meta` (layout.bytes, zeroed).
  TOGA_HOST_DEVICE static allocator make(char* heap, char* meta, const heap_layout& layout) {
    allocator a{};
    a.small.base = heap;
    a.small.buddy.state = reinterpret_cast<std::uint32_t*>(meta + layout.state_off);
    a.small.buddy.lock = reinterpret_cast<std::uint32_t*>(meta + layout.lock_off);
    a.small.buddy.sem = reinterpret_cast<tbuddy_semaphore<P>*>(meta + layout.sem_off);
    a.small.buddy.levels = layout.levels;
    a.small.arenas = reinterpret_cast<arena<P>*>(meta + layout.arena_off);
    a.small.num_arenas = layout.arenas;
    a.small.num_pins = layout.pins < 1 ? 1u : layout.pins > max_pin_slots ? max_pin_slots : layout.pins;
    a.globals = reinterpret_cast<heap_globals*>(meta + layout.globals_off);
    a.small.buddy.limit = &a.globals->limit;
    a.heap_bytes = geom::page_bytes << (layout.levels - 1);
    // superbins: their arenas are small's peer (each geometry's reclaim also gives back what the
    // other caches); super() builds their view from small's fields
    a.small.table = meta + layout.sb_table_off;
    a.small.sb_shift = layout.sb_shift;
    a.small.peer = meta + layout.sb_arena_off;
    a.small.peer_arenas = layout.sb_arenas ? layout.sb_arenas : layout.arenas;
    a.sb_max_bytes = layout.sb_classes ? geom::sb_class_bytes(layout.sb_classes - 1) : 0;
    // the resident copy (written by init_after_zero)
    if (layout.view_off != 0) a.resident = reinterpret_cast<const allocator*>(meta + layout.view_off);
    return a;
  }
  //! Superbins (64 B .. 64 KiB, E6, design.md §11): the same machinery over TBuddy blocks, sharing
  //! small's base and buddy tree; a view built on demand (kernels pass the allocator by value, and
  //! a second stored view made every kernel's copy of it larger).
  TOGA_HOST_DEVICE ualloc<P, UB, TB, superbin_geometry> super() const {
    return {small.base, small.buddy, static_cast<arena<P, superbin_geometry>*>(small.peer), small.peer_arenas, small.num_pins,
            small.table, small.sb_shift, small.num_arenas, small.arenas};
  }
  //! Runs f(view) on the resident copy (views built by hand: on a copy made here), so that no
  //! kernel parameter's address is taken (design.md §8.8; ualloc::out_of_line).
  //! (TOGA_RESIDENT_VIEW = 0: on this view, except where `Always`: the free path, which takes the
  //! resident copy in every build, design.md §8.8.)
  template <bool Always = false, class F>
  TOGA_DEVICE TOGA_FORCEINLINE auto out_of_line(F&& f) const TOGA_NOEXCEPT(P) {
    if constexpr (TOGA_RESIDENT_VIEW != 0 || Always) {
      if (resident != nullptr) return f(*resident);
      const allocator copy = *this;
      return f(copy);
    } else {
      return f(*this);
    }
  }
  //! Most blocks in the pre-split reserve's superbin tier: 2^14 (32 GiB of 2 MiB superbins), so
  //! that the sequential initialisation writes at most that many states.
  static constexpr unsigned max_presplit_log2 = 14;
  //! presplit_chunks' default: two chunks per arena.
  static constexpr std::uint64_t presplit_chunks_auto = ~std::uint64_t{0};
  //! The pre-split reserve (design.md §10.5) of `presplit_bytes` (capped at half the heap; 0:
  //! none): first `presplit_chunks` UAlloc chunks (default two per arena; at most half the reserve,
  //! rounded down so that the superbins after them stay aligned), then as many superbins as fit
  //! in the rest (at most 2^max_presplit_log2); on heaps without superbins, chunks only.
  TOGA_HOST_DEVICE presplit_plan presplit_for(std::uint64_t presplit_bytes, std::uint64_t presplit_chunks) const {
    presplit_plan plan;
    const std::uint64_t total = presplit_bytes < heap_bytes / 2 ? presplit_bytes : heap_bytes / 2;
    if (small.sb_shift == 0 || small.sb_shift == geom::chunk_order + geom::page_shift) {  // one tier: chunks (or superbins of a chunk's size)
      plan.order[0] = geom::chunk_order;
      const std::uint64_t n = total / geom::chunk_bytes;
      plan.count[0] = n < (std::uint64_t{1} << max_presplit_log2) ? n : std::uint64_t{1} << max_presplit_log2;
      return plan;
    }
    const unsigned sbo = small.sb_shift - geom::page_shift;
    const std::uint64_t align = sbo > geom::chunk_order ? std::uint64_t{1} << (sbo - geom::chunk_order) : 1;
    std::uint64_t chunks = presplit_chunks == presplit_chunks_auto ? 2 * std::uint64_t{small.num_arenas} : presplit_chunks;
    if (chunks > total / 2 / geom::chunk_bytes) chunks = total / 2 / geom::chunk_bytes;
    chunks -= chunks % align;
    std::uint64_t sbs = (total - chunks * geom::chunk_bytes) >> small.sb_shift;
    if (sbs > (std::uint64_t{1} << max_presplit_log2)) sbs = std::uint64_t{1} << max_presplit_log2;
    plan.order[0] = geom::chunk_order;
    plan.count[0] = chunks;
    plan.order[1] = sbo;
    plan.count[1] = sbs;
    return plan;
  }
  //! One-time initialisation after the metadata was zeroed (sequential; the CUDA backend runs
  //! it in a one-thread kernel). limit_bytes: 0 for none. presplit_bytes, presplit_chunks: the
  //! pre-split reserve (presplit_for; 0 bytes: none).
  TOGA_HOST_DEVICE void init_after_zero(std::uint64_t limit_bytes, std::uint64_t presplit_bytes = 0,
                                        std::uint64_t presplit_chunks = presplit_chunks_auto) {
    small.buddy.init_after_zero(presplit_for(presplit_bytes, presplit_chunks));
    for (unsigned a = 0; a < small.num_arenas; ++a) {  // biased semaphores start at C = 0 + bias
      small.arenas[a].chunk_sem.init(0);
      for (unsigned c = 0; c < geom::num_classes; ++c) small.arenas[a].lists[c].slot_sem.init(0);
      super().arenas[a].chunk_sem.init(0);
      for (unsigned c = 0; c < geom::sb_max_classes; ++c) super().arenas[a].lists[c].slot_sem.init(0);
    }
    globals->limit.limit = limit_bytes;
    if (resident != nullptr && UB != ualloc_bug::resident_views_unpublished) {  // the copy out-of-line members run on (make)
      static_assert(sizeof(allocator) <= heap_layout::resident_bytes, "heap_layout's resident region holds the view");
      *const_cast<allocator*>(resident) = *this;
    }
  }

  //! One-time initialisation of a growable heap (issue 14) after the metadata was zeroed
  //! (sequential): every granule of 4 KiB x 2^granule_order bytes starts unmapped, so nothing can
  //! be allocated (a request fails with nullptr and is counted as demand) until `adopt_granule`.
  //! The view must be made again afterwards (or copied from the resident copy): it carries the
  //! granule order.
  TOGA_HOST_DEVICE void init_growable(std::uint64_t limit_bytes, unsigned granule_order) {
    small.buddy.grow_granule = granule_order + 1;
    init_after_zero(limit_bytes);
    small.buddy.init_unmapped(granule_order);
    globals->growth.max_granules = heap_bytes >> (geom::page_shift + granule_order);
  }
  //! Growable heaps: the granule at heap offset `off` (a multiple of the granule size) now has
  //! memory behind it; frees it into the tree (a run of one: adopt_run). Any thread, while others
  //! allocate and free. False if it was not unmapped (already adopted).
  TOGA_DEVICE bool adopt_granule(std::uint64_t off) const TOGA_NOEXCEPT(P) { return adopt_run(off, 0); }
  //! Growable heaps: adopts the run of granules in a growth-service ring entry (ring_entry: the
  //! run's heap offset and log2 of its granules; one physical handle, design.md §12.8) as one
  //! block (adopt_run). False if one of them was not unmapped (adopted already).
  TOGA_DEVICE bool adopt_entry(std::uint64_t entry) const TOGA_NOEXCEPT(P) {
    return adopt_run(ring_entry_offset(entry), SB == service_bug::run_adopts_head_only ? 0u : ring_entry_log2(entry));
  }
  //! Growable heaps: the run of 2^k granules at heap offset `off` (aligned to the run) now has
  //! memory behind it; frees it into the tree as one block (tbuddy::adopt_run). Any thread, while
  //! others allocate and free. False if a granule of it was not unmapped (already adopted).
  TOGA_DEVICE bool adopt_run(std::uint64_t off, unsigned k) const TOGA_NOEXCEPT(P) {
    if (small.buddy.grow_granule == 0 || !small.buddy.adopt_run(off, static_cast<unsigned>(small.buddy.grow_granule - 1), k)) return false;
    // adopted before mapped_granules, both release: a request that sees the granules counted in
    // mapped_granules (acquire) also sees them in adopted, and one that sees them in adopted sees
    // them in the tree (allocate_waiting's `gen`)
    P::fetch_add(&globals->growth.adopted, std::uint64_t{1} << k, release, device_scope);
    P::fetch_add(&globals->growth.mapped_granules, std::uint64_t{1} << k, release, device_scope);
    return true;
  }
  //! Growable heaps, at quiescence only (one thread, nothing else in the heap): reclaims UAlloc's
  //! caches, then withdraws wholly free runs of granules from the highest address down until at
  //! most `keep_bytes` (rounded up to granules) stay mapped; on_withdrawn(offset) for each granule
  //! (the backend unmaps them afterwards). `run_log2`: per granule, log2 of the granules of the
  //! run (one physical handle) that holds it, runs aligned to their size; a run goes back whole
  //! or not at all (design.md §12.8). nullptr: every granule is a run of its own. Returns the
  //! bytes still mapped.
  template <class F>
  TOGA_DEVICE std::uint64_t trim_granules(std::uint64_t keep_bytes, F&& on_withdrawn, const std::uint8_t* run_log2 = nullptr) const
      TOGA_NOEXCEPT(P) {
    if (small.buddy.grow_granule == 0) return heap_bytes;
    const unsigned go = static_cast<unsigned>(small.buddy.grow_granule - 1);
    const std::uint64_t gbytes = geom::page_bytes << go;
    if constexpr (UB != ualloc_bug::trim_without_reclaim) trim();
    small.buddy.trim_prepare();
    const std::uint64_t left = withdraw_granules_phase(keep_bytes, on_withdrawn, run_log2);
    small.buddy.trim_finish(go);
    return left * gbytes;
  }
  //! trim_granules' phase 2 (tbuddy::withdraw_granules) with growth_state's counts, also for
  //! backends that run the tree's other phases in parallel (the CUDA heap): after reclaim (trim)
  //! and tbuddy::trim_prepare, withdraws runs of granules above `keep_bytes` (`run_log2` as for
  //! trim_granules). One thread, quiescent. Returns the granules still mapped.
  template <class F>
  TOGA_DEVICE std::uint64_t withdraw_granules_phase(std::uint64_t keep_bytes, F&& on_withdrawn, const std::uint8_t* run_log2 = nullptr) const
      TOGA_NOEXCEPT(P) {
    const unsigned go = static_cast<unsigned>(small.buddy.grow_granule - 1);
    const std::uint64_t gbytes = geom::page_bytes << go;
    std::uint64_t withdrawn = 0;
    const std::uint64_t left = small.buddy.withdraw_granules(go, (keep_bytes + gbytes - 1) / gbytes, run_log2, [&](std::uint64_t off) {
      ++withdrawn;
      on_withdrawn(off);
    });
    P::store(&globals->growth.mapped_granules, left, relaxed, device_scope);
    P::fetch_add(&globals->growth.withdrawn, withdrawn, relaxed, device_scope);
    return left;
  }
  //! Growable heaps: whether heap offset `off` lies in an unmapped granule; then a free of it
  //! changes nothing (checked builds log an invalid pointer).
  TOGA_DEVICE TOGA_NOINLINE bool free_of_unmapped(std::uint64_t off) const TOGA_NOEXCEPT(P) {
    if (!in_unmapped_granule(off)) return false;
    if constexpr (Checked) report(heap_error_kind::invalid_pointer, off);
    return true;
  }
  //! Whether heap offset `off` lies in an unmapped granule (growable heaps; racy).
  TOGA_DEVICE bool in_unmapped_granule(std::uint64_t off) const TOGA_NOEXCEPT(P) {
    return small.buddy.grow_granule != 0 && small.buddy.unmapped(off, static_cast<unsigned>(small.buddy.grow_granule - 1));
  }

  //! At least `bytes` bytes (see the file comment for size and alignment), or nullptr.
  //! Lanes of a warp that call it together for sizes of one class are served as one group (one
  //! semaphore operation, one reservation, one bitmap claim, statistics once: E1, design.md §8.1);
  //! any subset of a warp may call it, and no lane waits for lanes that do not.
  TOGA_DEVICE TOGA_FORCEINLINE void* allocate(std::uint64_t bytes) const TOGA_NOEXCEPT(P) {
    if (bytes > heap_bytes) return fail_too_large();  // before rounding: round_up overflows past 2^63
    const std::uint64_t s = geom::round_up(bytes ? bytes : 1);
    // (growable heaps with a growth service: a request that fails waits for growth and tries
    // again, out of line from the failure's branch: allocate_waiting, design.md §12.6)
    if (s <= geom::ualloc_always_max_bytes) return allocate_small(geom::class_of(s), true);
#if TOGA_INLINE_SUPERBINS
    // a superbin class: its group's fast path inline too; what it does not serve goes out of line
    // (design.md §11.10)
    if (s >= geom::sb_min_class_bytes && s <= sb_max_bytes) {
      const unsigned c = geom::sb_class_of(s);
      const std::uint64_t off = super_group(c);
      if (off != no_block) return small.base + off;
      return out_of_line([&](const allocator& v) { return v.allocate_super_failed(c, s); });
    }
#endif
    // one call site off the inline fast path (E10)
    return out_of_line([&](const allocator& v) { return v.allocate_above_small(s, true); });
  }
  //! At least `bytes` bytes aligned to `alignment` (a power of two), or nullptr.
  TOGA_DEVICE void* allocate(std::uint64_t bytes, std::uint64_t alignment) const TOGA_NOEXCEPT(P) {
    if (alignment == 0 || (alignment & (alignment - 1))) return nullptr;
    if (bytes > heap_bytes || alignment > heap_bytes) return fail_too_large();
    std::uint64_t s = geom::round_up(bytes ? bytes : 1);
    if (alignment > s) s = alignment;
    // UAlloc slots are aligned to min(s, 128); beyond 128 only superbin slots (aligned to their
    // size) and TBuddy blocks are aligned enough.
    const bool ualloc_ok = alignment <= (UB == ualloc_bug::alignment_limit_doubled ? 2 * geom::bin_header_bytes : geom::bin_header_bytes);
    return s <= geom::ualloc_always_max_bytes && ualloc_ok ? allocate_small(geom::class_of(s), true)
                                                          : out_of_line([&](const allocator& v) { return v.allocate_above_small(s, ualloc_ok); });
  }
  //! The bytes a request of `bytes` (aligned to `alignment`, 0 or a power of two) is served with:
  //! a UAlloc class (16 B, 32 B; up to 1 KiB without superbins), a superbin class (64 B ..
  //! sb_max_bytes) or a TBuddy block (4 KiB x 2^k). Requests larger than the heap: 0.
  TOGA_HOST_DEVICE std::uint64_t served_bytes(std::uint64_t bytes, std::uint64_t alignment = 0) const {
    if (bytes > heap_bytes || alignment > heap_bytes) return 0;
    std::uint64_t s = geom::round_up(bytes ? bytes : 1);
    if (alignment > s) s = alignment;
    if (s <= geom::ualloc_always_max_bytes && alignment <= geom::bin_header_bytes) return s;
    if (s >= geom::sb_min_class_bytes && s <= sb_max_bytes) return s;
    if (s <= geom::max_class_bytes && alignment <= geom::bin_header_bytes) return s;
    return geom::page_bytes << geom::order_of(s);
  }

  //! The same as allocate: every entry point aggregates per warp (kept for source compatibility).
  TOGA_DEVICE void* allocate_coalesced(std::uint64_t bytes) const TOGA_NOEXCEPT(P) { return allocate(bytes); }
  //! The same as deallocate (kept for source compatibility).
  TOGA_DEVICE void deallocate_coalesced(void* ptr) const TOGA_NOEXCEPT(P) { deallocate(ptr); }

  //! Frees a block from allocate (any thread, any kernel). nullptr: nothing. Lanes of a warp
  //! that free slots of one bin together are served as one group (E9, design.md §9.2).
  TOGA_DEVICE TOGA_FORCEINLINE void deallocate(void* ptr) const TOGA_NOEXCEPT(P) {
    if (ptr == nullptr) return;
    const char* p = static_cast<const char*>(ptr);
    const std::uint64_t off = static_cast<std::uint64_t>(p - small.base);
    if constexpr (Checked) {
      if (p < small.base || off >= heap_bytes) return report(heap_error_kind::foreign_pointer, reinterpret_cast<std::uintptr_t>(ptr));
    }
    // A growable heap's unmapped granule holds no block: the free changes nothing (checked builds
    // log it), and nothing there may be touched (issue 14).
    // (off the inline path: the check in line cost a third of T5's churn rate at 16 B on an H200)
    if constexpr (UB != ualloc_bug::free_into_unmapped)
      if (small.buddy.grow_granule != 0 && out_of_line<true>([&](const allocator& v) { return v.free_of_unmapped(off); })) return;
    // Superbin slots start on 64 B boundaries (their TBuddy node's tag routes them), TBuddy
    // blocks on 4 KiB ones; UAlloc slots never start on 4 KiB boundaries (those of 16 B and 32 B
    // on some 64 B ones, and all of 64 B .. 1 KiB on heaps without superbins or in the fallback:
    // such lanes look at the tag and join the other lanes' slot free).
    if (off % (UB == ualloc_bug::superbin_route_coarse ? 256 : geom::sb_min_class_bytes) == 0) {
#if TOGA_INLINE_SUPER_FREE
      if (in_superbin(off)) return deallocate_super_inline(off);
#else
      if (in_superbin(off)) return out_of_line<true>([&](const allocator& v) { v.deallocate_super(off); });
#endif
      if (off % geom::page_bytes == 0) return out_of_line<true>([&](const allocator& v) { v.deallocate_large(off); });
    }
    deallocate_slot(off);
  }

  // Frees a UAlloc slot (not 4 KiB aligned); lanes freeing slots of one bin form one group (E9).
  TOGA_DEVICE TOGA_FORCEINLINE void deallocate_slot(std::uint64_t off) const TOGA_NOEXCEPT(P) {
    if constexpr (Checked) {
      if (!plausible_slot(off)) return report(heap_error_kind::invalid_pointer, off);
    }
    const std::uint64_t chunk = off & ~(geom::chunk_bytes - 1);
    const std::uint64_t in = off - chunk;
    const std::uint64_t bin = chunk + std::uint64_t{geom::owner_bin(in)} * geom::page_bytes;
    const bin_header* h = reinterpret_cast<const bin_header*>(small.base + bin);
    // valid: the slot is live, so its bin cannot change class or arena
    const unsigned c = P::load(const_cast<std::uint32_t*>(&h->class_id), relaxed, device_scope);
    const unsigned a = P::load(const_cast<std::uint32_t*>(&h->arena), relaxed, device_scope);
    // group: the lanes freeing slots of the same bin, keyed by its address (not its offset: lanes
    // of one warp may free into two heaps at once)
    const auto g = coalesced_group<P>::of(P::match_any(P::activemask(), reinterpret_cast<std::uint64_t>(small.base + bin)));
    const std::uint32_t ok = small.template deallocate_group<Checked>(bin, geom::owner_slot(in, c), c, a, g);
    count_group_free(g, ok, geom::class_bytes(c), off);
  }
  // After a group free (E9): the leader counts the lanes whose slot was allocated (`ok`) once;
  // checked builds report every other lane's free as a double free.
  TOGA_DEVICE TOGA_FORCEINLINE void count_group_free(const coalesced_group<P>& g, std::uint32_t ok, std::uint64_t slot_bytes,
                                                     std::uint64_t off) const TOGA_NOEXCEPT(P) {
    if (g.is_leader() && ok != 0) {
      arena_stats& st = small.arenas[P::sm_id() % small.num_arenas].stats;
      const unsigned k = bits::popc(ok);
      P::fetch_add(&st.deallocations, std::uint64_t{k}, relaxed, device_scope);
      P::fetch_sub(&st.used_bytes, slot_bytes * k, relaxed, device_scope);
    }
    if constexpr (Checked) {
      if (!((ok >> P::lane_id()) & 1u)) report(heap_error_kind::double_free, off);
    }
  }

  //! Gives back what hysteresis keeps (E11, design.md §9.4): retires every empty bin, runs pending
  //! RCU callbacks and returns cached free chunks to the buddy tree, in every arena. Safe while
  //! other threads allocate and free; called at quiescence (the host's trim), it leaves the heap
  //! as new once every block is freed (invariant T7 "after trim"). One thread; returns whether
  //! anything was given back. Walks every arena even when the heap is known clean (ualloc::reclaim).
  TOGA_DEVICE bool trim() const TOGA_NOEXCEPT(P) { return small.reclaim(true); }  // (and the superbins: its peer)

  //! Whether `ptr` points into this heap.
  TOGA_HOST_DEVICE bool contains(const void* ptr) const {
    const char* p = static_cast<const char*>(ptr);
    return p >= small.base && static_cast<std::uint64_t>(p - small.base) < heap_bytes;
  }

 private:
  TOGA_DEVICE void* fail_too_large() const TOGA_NOEXCEPT(P) {
    P::fetch_add(&small.arenas[P::sm_id() % small.num_arenas].stats.failed_too_large, std::uint64_t{1}, relaxed, device_scope);
    return nullptr;
  }
  // A request of s bytes (rounded; `ualloc_ok` as for allocate_above_small) failed on a growable
  // heap: with a growth service, wait for growth and try again until served or given up
  // (wait_for_growth); without one, nullptr at once.
  // Each attempt here starts after reading the adoptions so far (`gen`): a failure that an
  // adoption overlapped proves nothing (the memory it needed may have come meanwhile), so the
  // request tries again instead of posting demand or giving up as exhausted. Without it, when
  // the waiters adopt while others allocate, lanes that failed just before an adoption posted
  // demand already served (the service mapped the whole range for half its worth of blocks) and,
  // once every granule was mapped, gave up with memory free (H200, 2026-11-28; the simulator's
  // S5).
  // While growth comes first, the attempts skip the superbin classes' fallbacks (allocate_super);
  // before giving up, the request makes one attempt with them (`fallbacks`, set by
  // wait_for_growth): memory that growth cannot add may still serve it there.
  TOGA_DEVICE TOGA_NOINLINE void* allocate_waiting(std::uint64_t s, bool ualloc_ok) const TOGA_NOEXCEPT(P) {
    if (P::load(&globals->growth.service, relaxed, device_scope) == 0) return nullptr;  // demand recorded (count_failed)
    bool fallbacks = false;
    for (std::uint64_t deadline = 0;;) {
      const std::uint64_t gen = P::load(&globals->growth.adopted, acquire, device_scope);
      TOGA_PROFILE_COUNT(prof_gw_attempt);
      TOGA_PROFILE_START;
      bool skipped = false;
      void* p = s <= geom::ualloc_always_max_bytes && ualloc_ok ? allocate_small(geom::class_of(s))
                                                                : allocate_above_small_once(s, ualloc_ok, !fallbacks, &skipped);
      TOGA_PROFILE_PHASE(prof_gw_t_attempt);
      if (p != nullptr) return p;
      fallbacks |= !skipped;  // (they were tried: no attempt with them is owed before giving up)
      deadline = wait_for_growth(s, ualloc_ok, deadline, gen, fallbacks);
      TOGA_PROFILE_PHASE(prof_gw_t_wait);
      if (deadline == 0) return nullptr;
    }
  }
  // A request of s bytes (rounded) failed on a growable heap. With a growth service (design.md
  // §12.6, toga/growth_service.hpp) and growth able to serve it (granules left to map, no byte
  // limit refusing), the lanes here post their demand together, the group's leader waits for the
  // service to answer and adopts what it published; then the caller tries the request again
  // (and, if it fails, calls this again with the deadline returned). Returns the deadline
  // (P::clock_ns, never 0) to go on with, or 0: give up with nullptr (counted here, once).
  // `deadline` 0: the request's first wait. `gen`: growth_state::adopted before the failed
  // attempt; if a granule was adopted since, the request tries again at once (no post). Without
  // a service: 0 at once (the failure was recorded as demand for grow_if_needed).
  // `fallbacks`: whether the failed attempt tried the superbin classes' fallbacks (or had none to
  // skip); a request about to give up that skipped them makes one more attempt with them (set here).
  TOGA_DEVICE TOGA_NOINLINE std::uint64_t wait_for_growth(std::uint64_t s, bool ualloc_ok, std::uint64_t deadline, std::uint64_t gen,
                                                          bool& fallbacks) const TOGA_NOEXCEPT(P) {
    growth_state& gs = globals->growth;
    growth_mailbox* m = reinterpret_cast<growth_mailbox*>(P::load(&gs.service, relaxed, device_scope));
    if (m == nullptr) return 0;
    using W = growth_waiter<P, SB>;
    if (deadline == 0) {
      deadline = P::clock_ns() + P::load(&gs.service_wait_ns, relaxed, device_scope);
      deadline += deadline == 0;
      P::fetch_add(&gs.relay.waits, std::uint64_t{1}, relaxed, device_scope);
    }
    const std::uint64_t served = served_bytes(s, ualloc_ok ? 0 : s);
    const bool small_class = served <= geom::max_class_bytes && (served < geom::sb_min_class_bytes || sb_max_bytes == 0);
    const std::uint64_t block = small_class ? geom::chunk_bytes : served < (std::uint64_t{1} << small.sb_shift) ? (std::uint64_t{1} << small.sb_shift) : served;
    const std::uint32_t order = geom::order_of(block);
    const int arena = small_class ? static_cast<int>(P::sm_id() % small.num_arenas) : -1;
    arena_stats& st = small.arenas[P::sm_id() % small.num_arenas].stats;
    // growth cannot serve it: the byte limit refuses, or every granule is mapped and adopted
    // (count_failed counted nothing for it: counted here, once)
    // Growth came first (ualloc::growth_comes_first): the failed attempt may have left the
    // reclaim walk to growth, so before giving up here the walk runs (and if it gave something
    // back, the request tries again).
    const std::uint64_t lim = P::load(&globals->limit.limit, relaxed, device_scope);
    if (lim != 0 && P::load(&globals->limit.reserved, relaxed, device_scope) + block > lim) {
      if (retry_before_giving_up(fallbacks)) return deadline;
      P::fetch_add(&st.failed_limit, std::uint64_t{1}, relaxed, device_scope);
      P::fetch_add(&gs.relay.exhausted, std::uint64_t{1}, relaxed, device_scope);
      return 0;
    }
    // every granule mapped (read first, with acquire: then `adopted` below counts each of them)
    const bool full = P::load(&gs.mapped_granules, acquire, device_scope) >= P::load(&gs.max_granules, relaxed, device_scope);
    if (SB != service_bug::adoption_overlap_ignored && P::load(&gs.adopted, acquire, device_scope) != gen) {
      TOGA_PROFILE_COUNT(prof_gw_overlap);
      return deadline;  // an adoption overlapped the failed attempt: try again (no post, not exhausted)
    }
    if (full) {
      if (retry_before_giving_up(fallbacks)) return deadline;
      P::fetch_add(&st.failed, std::uint64_t{1}, relaxed, device_scope);
      P::fetch_add(&gs.relay.exhausted, std::uint64_t{1}, relaxed, device_scope);
      return 0;
    }
    // post as one group per warp (the lanes here now); the leader's ticket for all
    const auto g = coalesced_group<P>::of(P::match_any(P::activemask(), reinterpret_cast<std::uint64_t>(m)));
    std::uint64_t total = 0, max_order = 0;
    int chunk_arena = -1;
    for (std::uint32_t mm = g.mask; mm; mm &= mm - 1) {  // the group's bytes, largest order, chunk need
      const int l = static_cast<int>(bits::ctz(mm));
      total += g.size == 1 ? served : P::shfl(g.mask, served, l);
      const std::uint32_t ol = g.size == 1 ? order : P::shfl(g.mask, order, l);
      max_order = ol > max_order ? ol : max_order;
      const std::uint32_t al = g.size == 1 ? static_cast<std::uint32_t>(arena + 1) : P::shfl(g.mask, static_cast<std::uint32_t>(arena + 1), l);
      if (al != 0) chunk_arena = static_cast<int>(al) - 1;
    }
    // the leader posts, waits and adopts for the group (one poller per warp; one courier at a
    // time reads the host's words)
    std::uint32_t ow = 0;
    std::uint64_t adopted_seen = 0;
    if (g.is_leader()) {
      TOGA_PROFILE_COUNT(prof_gw_post);
      const std::uint64_t ticket = W::post(&gs.relay, g.size, total, static_cast<unsigned>(max_order), chunk_arena);
      auto o = await_growth(m, deadline, ticket);
      // a refusal too adopts what was published: it may be a later round's than the one that
      // served this ticket, and granules of earlier rounds may serve the group
      const bool adopt = o == W::outcome::retry || (o == W::outcome::refused && SB != service_bug::refusal_ignores_adoptions);
      if (adopt && !adopt_published_granules(m, P::load(&gs.relay.published, acquire, device_scope), deadline) && o == W::outcome::retry)
        o = W::outcome::timeout;
      ow = static_cast<std::uint32_t>(o);
      // the adoptions the leader has seen (every published granule once adopt_published returned;
      // after a timeout, those a courier adopted while the leader waited)
      if (o == W::outcome::refused || o == W::outcome::timeout) adopted_seen = P::load(&gs.adopted, acquire, device_scope);
    }
    const auto o = static_cast<typename W::outcome>(g.broadcast(ow));
    // granules adopted since this lane's failed attempt: try them before giving up (the leader's
    // count, not the lane's own load: a shuffle orders no memory, so the lane could still read
    // the count it read before its attempt). Also after a timeout: the wait may have ended just
    // after the group's own courier adopted what serves it (each such retry needs a new adoption,
    // and the next wait times out at once: bounded).
    if (((o == W::outcome::refused && SB != service_bug::refusal_ignores_adoptions) || o == W::outcome::timeout) &&
        g.broadcast(adopted_seen) != gen)
      return deadline;
    if (o != W::outcome::retry) {
      if (retry_before_giving_up(fallbacks)) return deadline;
      P::fetch_add(o == W::outcome::timeout ? &gs.relay.timeouts : &gs.relay.refusals, std::uint64_t{1}, relaxed, device_scope);
      return 0;
    }
    return deadline;
  }
  // A request about to give up on growth (refused, timed out, the range full, or the byte limit)
  // gets what growth coming first left to it; true: the caller tries again. First, if its
  // attempts skipped the superbin classes' fallbacks (allocate_super), one attempt with them
  // (`fallbacks`, design.md §12.10); then the reclaim walk its failed attempt left to growth
  // (design.md §12.9), true if it gave something back. Planted bugs give up without either.
  TOGA_DEVICE bool retry_before_giving_up(bool& fallbacks) const TOGA_NOEXCEPT(P) {
    if (!fallbacks && SB != service_bug::give_up_without_fallbacks) {
      fallbacks = true;
      return true;
    }
    if constexpr (SB == service_bug::give_up_without_walk) return false;
    return small.reclaim(false, true);
  }
  // Adopts the granules the growth service published (growth_waiter::adopt_published; a call of
  // its own: TBuddy's free path under it stays off the waiting path's frame).
  TOGA_DEVICE TOGA_NOINLINE bool adopt_published_granules(growth_mailbox* m, std::uint64_t want, std::uint64_t deadline) const TOGA_NOEXCEPT(P) {
    return growth_waiter<P, SB>::adopt_published(&globals->growth.relay, m, want,
                                                 [&](std::uint64_t e) { return adopt_entry_out_of_line(e); }, deadline);
  }
  // adopt_entry in a call of its own (the waiting path's frames stay shallow)
  TOGA_DEVICE TOGA_NOINLINE bool adopt_entry_out_of_line(std::uint64_t e) const TOGA_NOEXCEPT(P) { return adopt_entry(e); }
  // Waits for the growth service to answer `ticket`, relaying when no other waiter does
  // (growth_waiter::await; the courier's adoption calls adopt_published_granules' callee).
  TOGA_DEVICE TOGA_NOINLINE typename growth_waiter<P, SB>::outcome await_growth(growth_mailbox* m, std::uint64_t deadline,
                                                                               std::uint64_t ticket) const TOGA_NOEXCEPT(P) {
    return growth_waiter<P, SB>::await(&globals->growth.relay, m, deadline, ticket,
                                       [&](std::uint64_t e) { return adopt_entry_out_of_line(e); });
  }
  // Counts n failed requests that needed a TBuddy block of `block_bytes` (a chunk for UAlloc):
  // refused by the byte limit if charging that block would exceed it now, else exhaustion.
  // Growable heaps: a failure that growth could serve (a granule is still unmapped, and the
  // limit did not refuse) is counted as demand instead (issue 14): the bytes the n lanes asked
  // for at their served size (`bytes` each: a class of 16 B counts 16 B, not the 512 KiB chunk
  // every failing group would otherwise claim), and the order of the block they needed.
  TOGA_DEVICE void count_failed(arena_stats& st, unsigned n, std::uint64_t bytes, std::uint64_t block_bytes) const TOGA_NOEXCEPT(P) {
    // with a growth service every failure goes on to wait_for_growth, which counts it once
    if (small.buddy.grow_granule != 0 && P::load(&globals->growth.service, relaxed, device_scope) != 0) return;
    const std::uint64_t lim = P::load(&globals->limit.limit, relaxed, device_scope);
    const bool by_limit = lim != 0 && P::load(&globals->limit.reserved, relaxed, device_scope) + block_bytes > lim;
    if (!by_limit && small.buddy.grow_granule != 0 &&
        P::load(&globals->growth.mapped_granules, relaxed, device_scope) < P::load(&globals->growth.max_granules, relaxed, device_scope)) {
      growth_state& g = globals->growth;
      P::fetch_add(&g.demand_requests, std::uint64_t{n}, relaxed, device_scope);
      P::fetch_add(&g.demand_bytes, std::uint64_t{n} * bytes, relaxed, device_scope);
      P::fetch_max(&g.demand_max_order, std::uint64_t{geom::order_of(block_bytes)}, relaxed, device_scope);
      if (block_bytes == geom::chunk_bytes) {  // UAlloc: this arena needs a chunk of its own (counted once)
        const unsigned a = (P::sm_id() % small.num_arenas) % (64 * growth_state::arena_bit_words);
        const std::uint64_t bit = std::uint64_t{1} << (a % 64);
        if (!(P::fetch_or(&g.demand_arena_bits[a / 64], bit, relaxed, device_scope) & bit))
          P::fetch_add(&g.demand_chunks, std::uint64_t{1}, relaxed, device_scope);
      }
      return;
    }
    P::fetch_add(by_limit ? &st.failed_limit : &st.failed, std::uint64_t{n}, relaxed, device_scope);
  }
  // A UAlloc class for the lanes that ask for it now, as one group keyed by (arena, class).
  // `wait`: on a growable heap, a failed request goes on to allocate_waiting (the growth service).
  TOGA_DEVICE TOGA_FORCEINLINE void* allocate_small(unsigned c, bool wait = false) const TOGA_NOEXCEPT(P) {
    const unsigned a = P::sm_id() % small.num_arenas;
    // Key: the (arena, class) of this heap [DECISION design.md §8.1: the semaphore's identity, not its
    // batch size]: the arena's address (8 B aligned at least; classes < 8) with the class in its
    // low bits, so that lanes of one warp allocating from two heaps at once form two groups. All
    // lanes of a warp run on one SM, so they share the arena.
    const auto g = coalesced_group<P>::of(P::match_any(P::activemask(), reinterpret_cast<std::uint64_t>(&small.arenas[a]) | c));
    const std::uint64_t off = small.allocate_group(a, c, g);
    count_group_alloc(g, off != no_block, small.arenas[a].stats, geom::class_bytes(c), geom::chunk_bytes);
    if (off != no_block) return small.base + off;
    if (wait && small.buddy.grow_granule != 0) return out_of_line([&](const allocator& v) { return v.allocate_waiting(geom::class_bytes(c), true); });
    return nullptr;
  }
  // A superbin class for the lanes that ask for it now, as one group keyed by (arena, class) of the
  // superbin arenas: the same path as allocate_small over the superbin geometry (E6, design.md §11.2).
  // s > 32 B (or a large alignment): a superbin class (64 B .. sb_max_bytes), UAlloc's 64 B ..
  // 1 KiB classes on heaps without superbins (when 128 B alignment is enough: `ualloc_ok`), or a
  // TBuddy block.
  // Then, on a growable heap, allocate_waiting if it failed.
  TOGA_DEVICE TOGA_NOINLINE void* allocate_above_small(std::uint64_t s, bool ualloc_ok) const TOGA_NOEXCEPT(P) {
    void* p = allocate_above_small_once(s, ualloc_ok);
    if (p == nullptr && small.buddy.grow_granule != 0) p = allocate_waiting(s, ualloc_ok);
    return p;
  }
  // `growth_first`: a superbin class whose superbin could not be had skips its fallbacks while
  // growth comes first (allocate_super), and says so in `skipped` (if given).
  TOGA_DEVICE TOGA_NOINLINE void* allocate_above_small_once(std::uint64_t s, bool ualloc_ok, bool growth_first = true,
                                                           bool* skipped = nullptr) const TOGA_NOEXCEPT(P) {
    if (s >= geom::sb_min_class_bytes && s <= sb_max_bytes) return allocate_super(geom::sb_class_of(s), ualloc_ok, growth_first, skipped);
    if (ualloc_ok && s <= geom::max_class_bytes) return allocate_small(geom::class_of(s));
    return allocate_large(s);
  }
  // The group of the lanes asking for superbin class c now (keyed by the superbin arena and the
  // class): this lane's heap offset, or no_block when the group's allocation found no superbin (a
  // failed GROW has already reclaimed both geometries and retried: E12).
  TOGA_DEVICE TOGA_FORCEINLINE std::uint64_t super_group(unsigned c) const TOGA_NOEXCEPT(P) {
    const unsigned au = P::sm_id() % small.num_arenas;
    const unsigned a = UB == ualloc_bug::superbin_arena_ignores_sharing ? au : P::sm_id() % super().num_arenas;
    const auto g = coalesced_group<P>::of(P::match_any(P::activemask(), reinterpret_cast<std::uint64_t>(&super().arenas[a]) | c));
    const std::uint64_t off = super().allocate_group(a, c, g);
    count_group_served(g, off != no_block, small.arenas[au].stats, geom::sb_class_bytes(c));
    return off;
  }
  // allocate(bytes)'s superbin class c (request s bytes) after the inline group found no superbin:
  // the fallbacks, then growth on a growable heap, as allocate_above_small does.
  TOGA_DEVICE TOGA_NOINLINE void* allocate_super_failed(unsigned c, std::uint64_t s) const TOGA_NOEXCEPT(P) {
    void* p = UB == ualloc_bug::inline_super_skips_fallbacks ? nullptr : allocate_super_fallbacks(c, true, true, nullptr);
    if (p == nullptr && small.buddy.grow_granule != 0) p = allocate_waiting(s, true);
    return p;
  }
  // `skipped` (if given) is set when the fallbacks were skipped for growth.
  TOGA_DEVICE TOGA_NOINLINE void* allocate_super(unsigned c, bool ualloc_ok, bool growth_first = true, bool* skipped = nullptr) const
      TOGA_NOEXCEPT(P) {
    const std::uint64_t off = super_group(c);
    if (off != no_block) return small.base + off;
    return allocate_super_fallbacks(c, ualloc_ok, growth_first, skipped);
  }
  // What allocate_super does when the group found no superbin: growth first, UAlloc's class, a
  // TBuddy block.
  TOGA_DEVICE TOGA_NOINLINE void* allocate_super_fallbacks(unsigned c, bool ualloc_ok, bool growth_first, bool* skipped) const
      TOGA_NOEXCEPT(P) {
    const unsigned au = P::sm_id() % small.num_arenas;
    // No superbin could be had (no free block of 2^sb_shift bytes, or the byte limit). Growth
    // first (design.md §12.10): on a growable heap whose growth service can still map a granule,
    // the request waits for the service (allocate_waiting), which maps whole runs, instead of
    // carving a UAlloc slot or a TBuddy block out of what is left (a climb over a nearly full
    // tree, for every failing group of a launch that outruns the mapping); before giving up it
    // tries them (growth_first false).
    if (growth_first && small.growth_comes_first()) {
      if (skipped) *skipped = true;
      return nullptr;
    }
    // 64 B .. 1 KiB: UAlloc's class (62, 31, 15, 7 or 3 slots per 4 KiB bin, from 512 KiB chunks) before a whole
    // 4 KiB block, when 128 B alignment is enough (`ualloc_ok`; a TBuddy block is aligned to its size).
    const std::uint64_t sbytes = geom::sb_class_bytes(c);
    if ((ualloc_ok || UB == ualloc_bug::fallback_ignores_alignment) &&
        sbytes <= (UB == ualloc_bug::super_fallback_bound_doubled ? 2 * geom::max_class_bytes : geom::max_class_bytes)) {
      const unsigned cu = geom::class_of(sbytes);
      const auto gu = coalesced_group<P>::of(P::match_any(P::activemask(), reinterpret_cast<std::uint64_t>(&small.arenas[au]) | cu));
      // (a group that stage 1 would refuse at once goes straight to the other arenas' units:
      // ualloc::allocate_group_or_scan, design.md §13.5)
      const std::uint64_t ou = small.allocate_group_or_scan(au, cu, gu);
      count_group_served(gu, ou != no_block, small.arenas[au].stats, sbytes);
      if (ou != no_block) return small.base + ou;
    }
    // A TBuddy block of the class's size (at least 4 KiB) still serves the request;
    // allocate_large counts its success or failure.
    return allocate_large(sbytes);
  }
  // Whether heap offset `off` (64 B aligned) lies in a superbin: its TBuddy ancestor of the
  // superbin's order carries the superbin tag. Stable while `off` is a live block: a superbin
  // with a live slot is not returned, and a live TBuddy block keeps its ancestor split or BUSY.
  TOGA_DEVICE bool in_superbin(std::uint64_t off) const TOGA_NOEXCEPT(P) {
    if (sb_max_bytes == 0) return false;
    if constexpr (UB == ualloc_bug::superbin_free_to_tbuddy)
      if (off % geom::page_bytes == 0) return false;
    const std::uint64_t v = small.buddy.leaf_of(off) >> (super().sb_shift - geom::page_shift);
    return small.buddy.load_state(v) == (node_allocated | node_superbin_tag);
  }
  // deallocate_super_inline out of line: deallocate's call with TOGA_INLINE_SUPER_FREE=0 (design.md §11.10).
  TOGA_DEVICE TOGA_NOINLINE void deallocate_super(std::uint64_t off) const TOGA_NOEXCEPT(P) { deallocate_super_inline(off); }
  // Frees a superbin slot; lanes freeing slots of one superbin together form one group (E9).
  TOGA_DEVICE TOGA_FORCEINLINE void deallocate_super_inline(std::uint64_t off) const TOGA_NOEXCEPT(P) {
    const std::uint64_t sb = off & ~((std::uint64_t{1} << super().sb_shift) - 1);
    const auto sbv = super();
    const std::uint64_t bin = sbv.superbin_id(sb);
    const superbin_header* h = sbv.bin_at(bin);
    const unsigned c = P::load(const_cast<std::uint32_t*>(&h->class_id), relaxed, device_scope);
    const unsigned a = P::load(const_cast<std::uint32_t*>(&h->arena), relaxed, device_scope);
    if constexpr (Checked) {
      if (c >= geom::sb_max_classes || a >= sbv.num_arenas || (off - sb) % geom::sb_class_bytes(c) != 0)
        return report(heap_error_kind::invalid_pointer, off);
    }
    const auto g = coalesced_group<P>::of(P::match_any(P::activemask(), reinterpret_cast<std::uint64_t>(small.base + bin)));
    const std::uint32_t ok =
        sbv.template deallocate_group<Checked>(bin, static_cast<unsigned>((off - sb) >> (geom::sb_min_class_shift + c)), c, a, g);
    count_group_free(g, ok, geom::sb_class_bytes(c), off);
  }
  // A TBuddy block of at least s bytes (s > 64 KiB, a superbin class without a superbin, or a
  // large alignment). Lanes asking for the same order form one group (E7, design.md §10.4): one
  // semaphore operation or one carved run for the group; what the group path cannot serve goes
  // per lane through tbuddy::alloc (exact at exhaustion), with the trim-and-retry of E12.
  TOGA_DEVICE TOGA_NOINLINE void* allocate_large(std::uint64_t s) const TOGA_NOEXCEPT(P) {
    arena_stats& st = small.arenas[P::sm_id() % small.num_arenas].stats;
    if (s > heap_bytes) {
      P::fetch_add(&st.failed_too_large, std::uint64_t{1}, relaxed, device_scope);
      return nullptr;
    }
    const unsigned order = geom::order_of(s);
    const std::uint64_t served = geom::page_bytes << order;
    // key: this heap's base (4 KiB aligned) with the order (< 64) in its low bits
    const auto g = coalesced_group<P>::of(P::match_any(P::activemask(), reinterpret_cast<std::uint64_t>(small.base) | order));
    std::uint64_t off = g.size > 1 ? small.buddy.alloc_group(order, g) : no_block;
    if (off == no_block) {
      off = P::inject(fault_site::fail_tbuddy_block) ? no_block : small.buddy.alloc(order);
      if (off == no_block && small.reclaim()) off = small.buddy.alloc(order);  // chunks and superbins UAlloc could give back
    }
    count_group_alloc(g, off != no_block, st, served, served);
    return off == no_block ? nullptr : small.base + off;
  }
  // Frees a TBuddy block. Lanes freeing blocks of one order form a group; when their blocks tile
  // one aligned block, it is freed once (tbuddy::free_group, E7), else each lane frees its own.
  TOGA_DEVICE TOGA_NOINLINE void deallocate_large(std::uint64_t off) const TOGA_NOEXCEPT(P) {
    const std::uint64_t v = small.buddy.allocated_node(off);
    if constexpr (Checked) {
      if (v == 0) return report(heap_error_kind::double_free, off);
      const std::uint32_t s = small.buddy.load_state(v);
      if (small.buddy.offset_of(v) != off || (s & (node_chunk_tag | node_superbin_tag | node_presplit_tag))) return report(heap_error_kind::invalid_pointer, off);
    } else {
      if (v == 0) return P::fail("tbuddy::free: no allocated block at this address");
    }
    const unsigned h = small.buddy.height(v);
    const auto g = coalesced_group<P>::of(P::match_any(P::activemask(), reinterpret_cast<std::uint64_t>(small.base) | h));
    if (!small.buddy.free_group(v, g)) small.buddy.free_node(v);
    count_group_free(g, g.mask, geom::page_bytes << h, off);  // every lane's block was allocated
  }
  // After a group allocation (E8): the leader counts the lanes that got a block of `bytes` and,
  // as failures that needed a TBuddy block of `block_bytes`, the others.
  TOGA_DEVICE TOGA_FORCEINLINE void count_group_alloc(const coalesced_group<P>& g, bool got, arena_stats& st, std::uint64_t bytes,
                                                      std::uint64_t block_bytes) const TOGA_NOEXCEPT(P) {
    const std::uint32_t ok = g.ballot(got);
    if (g.is_leader()) {
      const unsigned n_ok = bits::popc(ok);
      if (n_ok) count_alloc(st, n_ok, bytes * n_ok);
      if (n_ok < g.size) count_failed(st, g.size - n_ok, bytes, block_bytes);
    }
  }
  // The successes only (a path that may still serve the failed lanes counts nothing for them).
  TOGA_DEVICE void count_group_served(const coalesced_group<P>& g, bool got, arena_stats& st, std::uint64_t bytes) const TOGA_NOEXCEPT(P) {
    const std::uint32_t ok = g.ballot(got);
    if (g.is_leader() && ok != 0) count_alloc(st, bits::popc(ok), bytes * bits::popc(ok));
  }
  TOGA_DEVICE void count_alloc(arena_stats& st, unsigned n, std::uint64_t bytes) const TOGA_NOEXCEPT(P) {
    P::fetch_add(&st.allocations, std::uint64_t{n}, relaxed, device_scope);
    const std::uint64_t used = P::fetch_add(&st.used_bytes, bytes, relaxed, device_scope) + bytes;
    // a negative (two's complement) per-arena count never raises the peak
    if (static_cast<std::int64_t>(used) > 0) P::fetch_max(&st.peak_used_bytes, used, relaxed, device_scope);
  }
  TOGA_DEVICE void report(heap_error_kind k, std::uint64_t where) const TOGA_NOEXCEPT(P) {
    const std::uint32_t i = P::fetch_add(&globals->error_count, 1u, relaxed, device_scope);
    if (i < heap_globals::max_errors) {
      P::store(&globals->errors[i][1], where, relaxed, device_scope);
      P::store(&globals->errors[i][0], static_cast<std::uint64_t>(k), release, device_scope);
    }
  }
  // Checked builds: is `off` (not 4 KiB aligned) a slot start in a live bin of a chunk?
  TOGA_DEVICE bool plausible_slot(std::uint64_t off) const TOGA_NOEXCEPT(P) {
    const std::uint64_t chunk = off & ~(geom::chunk_bytes - 1);
    const std::uint64_t v = small.buddy.leaf_of(chunk) >> geom::chunk_order;
    if (small.buddy.load_state(v) != (node_allocated | node_chunk_tag)) return false;
    const std::uint64_t in = off - chunk;
    if (in % geom::page_bytes < geom::bin_header_bytes) return false;
    const unsigned b = geom::owner_bin(in);
    const chunk_header* ch = reinterpret_cast<const chunk_header*>(small.base + chunk);
    const std::uint64_t bits = P::load(const_cast<std::uint64_t*>(&ch->bin_bitmap[b / 64]), relaxed, device_scope);
    if (!((bits >> (b % 64)) & 1)) return false;
    const bin_header* h = reinterpret_cast<const bin_header*>(small.base + chunk + std::uint64_t{b} * geom::page_bytes);
    const std::uint32_t c = P::load(const_cast<std::uint32_t*>(&h->class_id), relaxed, device_scope);
    return c < geom::num_classes && geom::is_slot_start(in, c) && geom::owner_slot(in, c) < geom::capacity(c) &&
           geom::owner_bin(in) == b;
  }
};

//! Totals over the arenas, read at quiescence (host-visible memory). Signed counters are summed
//! as two's complement, so blocks freed on another SM than they were allocated on balance out.
struct heap_statistics {
  std::uint64_t heap_bytes = 0;           //!< capacity
  std::uint64_t used_bytes = 0;           //!< rounded bytes of live blocks
  //! High-water mark of used_bytes: the smaller of two upper bounds of the true peak, the sum of
  //! the per-arena peaks and buddy_high_bytes (live blocks always lie in TBuddy blocks). Never
  //! above the capacity; exact when one SM allocates.
  std::uint64_t peak_used_bytes = 0;
  std::uint64_t buddy_bytes = 0;          //!< bytes of TBuddy blocks handed out (chunks, superbins, and blocks TBuddy serves itself)
  std::uint64_t buddy_high_bytes = 0;     //!< high-water mark of buddy_bytes (exact)
  std::uint64_t chunk_bytes = 0;          //!< bytes UAlloc holds in chunks
  std::uint64_t allocations = 0, deallocations = 0;
  std::uint64_t failed = 0;               //!< all failed requests: the three below
  std::uint64_t failed_exhausted = 0;     //!< the heap had no block for the request
  std::uint64_t failed_limit = 0;         //!< the byte limit refused the TBuddy block it needed
  std::uint64_t failed_too_large = 0;     //!< larger than the heap
  std::uint64_t bins[geom::num_classes] = {};
  std::uint64_t chunks = 0;
  //! Superbins held per superbin class c (slots of 64 B << c: 64 B .. 64 KiB), their bytes and the largest size they serve (0: none).
  std::uint64_t superbins[geom::sb_max_classes] = {};
  std::uint64_t superbin_bytes = 0;
  std::uint64_t superbin_max_class_bytes = 0;
  //! UAlloc's shared reclaim walks run so far (design.md §9.4; a failed request walks every arena
  //! for empty bins and chunks to give back, unless nothing changed since a walk that found
  //! nothing): a fill that keeps reaching the heap's edge pays one per edge.
  std::uint64_t reclaim_walks = 0;
  std::uint32_t errors = 0;
};

//! Sets every high-water mark to the current value (host, at quiescence). The per-arena used
//! counts are partial sums (a block freed on another SM than it was allocated on moves bytes
//! between arenas, so a count may be negative); only their total means anything. The total moves
//! to arena 0 and the others restart at 0, so that every per-arena peak starts at a non-negative
//! count it can rise from (a peak set to a negative count, stored as a huge unsigned word, would
//! never be raised again by fetch_max: the GPU test saw peak < used).
template <class A>
void reset_high_water(A& a) {
  std::uint64_t total = 0;
  for (unsigned i = 0; i < a.small.num_arenas; ++i) total += a.small.arenas[i].stats.used_bytes;
  for (unsigned i = 0; i < a.small.num_arenas; ++i) {
    a.small.arenas[i].stats.used_bytes = i == 0 ? total : 0;
    a.small.arenas[i].stats.peak_used_bytes = i == 0 ? total : 0;
  }
  a.globals->limit.reserved_high = a.globals->limit.reserved;
}

template <class A>
heap_statistics collect_statistics(const A& a) {
  heap_statistics s;
  s.heap_bytes = a.heap_bytes;
  std::uint64_t peaks = 0;
  for (unsigned i = 0; i < a.small.num_arenas; ++i) {
    const arena_stats& st = a.small.arenas[i].stats;
    s.used_bytes += st.used_bytes;
    peaks += st.peak_used_bytes;
    s.allocations += st.allocations;
    s.deallocations += st.deallocations;
    s.failed_exhausted += st.failed;
    s.failed_limit += st.failed_limit;
    s.failed_too_large += st.failed_too_large;
    for (unsigned c = 0; c < geom::num_classes; ++c) s.bins[c] += st.bins[c];
    s.chunks += st.chunks;
    if (a.sb_max_bytes)
      for (unsigned c = 0; c < geom::sb_max_classes; ++c) s.superbins[c] += a.super().arenas[i].stats.bins[c];
  }
  for (unsigned c = 0; c < geom::sb_max_classes; ++c) s.superbin_bytes += s.superbins[c] << a.small.sb_shift;
  s.superbin_max_class_bytes = a.sb_max_bytes;
  s.failed = s.failed_exhausted + s.failed_limit + s.failed_too_large;
  s.buddy_bytes = a.globals->limit.reserved;
  s.buddy_high_bytes = a.globals->limit.reserved_high;
  s.peak_used_bytes = peaks < s.buddy_high_bytes ? peaks : s.buddy_high_bytes;
  s.chunk_bytes = s.chunks * geom::chunk_bytes;
  s.reclaim_walks = a.globals->limit.reclaim_gate >> 2;  // (ualloc::walk_end: the gate's count above 2 flag bits)
  s.errors = a.globals->error_count;
  return s;
}

}  // namespace toga
