//! @file toga/ghost.hpp
//! Ghost state: counters that exist only for the simulator's invariant checks (design.md §2.3,
//! §17.2). The core reports transient quantities that no shared word holds (units taken
//! by a speculative decrement and not yet undone, slots reserved but not yet claimed) through
//! `toga::ghost_add<P>(kind, key, delta)`, right after the atomic operation they mirror (no
//! scheduling point in between, so an invariant comparing ghost and real words is exact at every
//! step).
//!
//! A platform that keeps ghost state provides `static void ghost_add(ghost_kind, const void*,
//! std::int64_t)` (the simulator does). The Platform concept does not require it: on CUDA and
//! native threads `ghost_add` compiles to nothing.
#pragma once

#include <cstdint>

#include "toga/config.hpp"

namespace toga {

//! What a ghost counter counts. The key is the address of the structure it belongs to.
enum class ghost_kind : std::uint8_t {
  sem_inflight,  //!< units a speculative fetch_sub took from a semaphore's C and has not undone or kept (S1')
  bin_transit,   //!< slots of a bin counted neither in its bitmap nor in its free count: reserved and
                 //!< not yet claimed, excess of a clamped reservation not yet undone, bits cleared by a
                 //!< free not yet counted (U1')
  bin_live,      //!< 1 while a bin is initialised and not retired (U1' is checked only then)
  walk_items,    //!< items of a shared reclaim walk claimed and not yet counted done (keyed by the byte_limit)
  merge_skipped, //!< TBuddy frees that found their buddy AVAILABLE but no unit of its level to take (every unit
                 //!< held by a searcher): each may leave a pair of AVAILABLE buddies (T6; keyed by the tree's
                 //!< semaphore array)
};

//! Adds `delta` to the ghost counter (kind, key) when the platform keeps ghost state.
template <class P>
TOGA_DEVICE TOGA_FORCEINLINE void ghost_add(ghost_kind kind, const void* key, std::int64_t delta) {
  if constexpr (requires { P::ghost_add(kind, key, delta); }) P::ghost_add(kind, key, delta);
  (void)kind;
  (void)key;
  (void)delta;
}

}  // namespace toga
