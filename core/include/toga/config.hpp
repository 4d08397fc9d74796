//! @file toga/config.hpp
//! Attribute macros shared by the core and every backend.
//!
//! The core is plain C++20 and is compiled by g++ (simulator, native threads) and by nvcc
//! (CUDA backend). These macros expand to CUDA attributes only under nvcc, so that no core
//! header ever needs `#ifdef __CUDACC__` in its logic (the CCCL practice).
#pragma once

#if defined(__CUDACC__)
#define TOGA_HOST_DEVICE __host__ __device__
#define TOGA_DEVICE __device__
#define TOGA_FORCEINLINE __forceinline__
#define TOGA_NOINLINE __noinline__
#else
#define TOGA_HOST_DEVICE
#define TOGA_DEVICE
#define TOGA_FORCEINLINE inline __attribute__((always_inline))
#define TOGA_NOINLINE __attribute__((noinline))
#endif
// TOGA_NOINLINE keeps cold paths (reclamation under memory pressure, making new bins) out of the
// hot path's register allocation on the GPU.

//! Superbins a superbin GROW makes ahead of demand (design.md §11.11): where the class's superbin
//! holds >= 16 groups' worth (64 B .. 4 KiB for full warps) and the arena already holds two
//! superbins of the class, lanes m .. m + N - 1 of the GROW each take one more (no reclaim, and
//! only while TBuddy stays at most half handed out), made empty, pinned or queued and signalled
//! as new units. 0: only what the group was promised.
#ifndef TOGA_SB_GROW_AHEAD
#define TOGA_SB_GROW_AHEAD 3
#endif
//! Rounds of the superbin steal (design.md §11.8): before a superbin GROW, a group looks
//! at up to this many x (its size) other arenas for idle units of its class. 0 turns stealing off
//! (a build-time switch for A/B measurements; toga's choice is 4).
#ifndef TOGA_SB_STEAL_ROUNDS
#define TOGA_SB_STEAL_ROUNDS 4
#endif

//! Bins that a chunk-class GROW makes when it takes a fresh chunk (design.md §8.5): at least the
//! bins its group needs, at most one per lane of the group and at most this many; the ones
//! beyond what the group needs are pinned empty (or queued) and their slots signalled, so that the
//! other warps of the SM find bins at once instead of each wave of them waiting on another GROW.
//! A fresh chunk's bins cost no claim (they are the chunk's first ones). 0 makes only what the
//! group needs (a build-time switch for A/B measurements).
#ifndef TOGA_FRESH_CHUNK_BINS
#define TOGA_FRESH_CHUNK_BINS 32
#endif

//! The fast path's claim in a superbin (design.md §8.3): 1 (default) has every lane of the group
//! load one bitmap word of the pinned superbin while the leader reserves, and a first claim that
//! lost bits its word cannot make up claims the rest in a word the lanes saw with room, instead
//! of finishing in the slow path; 0 leaves such groups to the slow path (a build-time switch for
//! A/B measurements).
#ifndef TOGA_SCAN_CLAIM
#define TOGA_SCAN_CLAIM 1
#endif

//! The superbin classes' fast path inline (design.md §11.10): 1 (default) serves a request of
//! 64 B .. the largest superbin class with the group's inline fast path over the superbin
//! geometry, and only what that path does not serve goes out of line; 0 sends every request
//! above 32 B out of line at once (allocate_above_small), as before 2026-11-30 (a build-time
//! switch for A/B measurements).
#ifndef TOGA_INLINE_SUPERBINS
#define TOGA_INLINE_SUPERBINS 1
#endif

//! The superbin free inline (design.md §11.10): 1 (default) runs a superbin slot's group free
//! inside deallocate; 0 calls it out of line (deallocate_super), as before 2026-11-30. The code is
//! the same either way (a build-time switch for A/B measurements).
#ifndef TOGA_INLINE_SUPER_FREE
#define TOGA_INLINE_SUPER_FREE 1
#endif

//! Out-of-line members on the view's resident copy (design.md §8.8): 1 runs the allocator's
//! out-of-line wrappers on its copy in the heap's metadata and UAlloc's slow paths on a local copy
//! made at the call, so that no kernel parameter's address is taken; 0 calls them on the caller's
//! view (on CUDA, nvcc then copies the kernel's heap_ref to local memory at kernel entry, in every
//! thread). Measured on an H200 (docs/benchmarks.md "The view's local copy"; the A/B runs in
//! docs/devlog.md, 2026-11-26): 1 makes every free 25-50 % faster and meets T2's target, but T1
//! allocation at 2-16 KiB 34-96 % slower, so CUDA builds keep 0 for allocation until that is
//! understood; the simulator and CPU builds use 1, which keeps the mechanism tested (the view's
//! data is the same either way). The free path takes the resident copy whatever this says
//! (design.md §8.8; frees 1.2-2.4x faster on an H200, allocation unchanged).
#ifndef TOGA_RESIDENT_VIEW
#ifdef __CUDACC__
#define TOGA_RESIDENT_VIEW 0
#else
#define TOGA_RESIDENT_VIEW 1
#endif
#endif

//! `noexcept` for core operations, conditional on the platform.
//!
//! Device code is `noexcept`. The simulator, however, stops the lanes of an aborted schedule
//! (deadlock, failed invariant, ...) by unwinding their fibers with an exception, which must
//! not meet a `noexcept` frame. Core functions therefore write `TOGA_NOEXCEPT(P)`, which is
//! `noexcept` exactly when `P::noexcept_ops` is true (CUDA, native threads) and not in the
//! simulator.
#define TOGA_NOEXCEPT(P) noexcept(P::noexcept_ops)

//! Profiling hook: TOGA_PROFILE_COUNT(event) marks algorithm events (TBuddy search steps, lock
//! spins, splits, ...) with an id from toga::profile_event. It expands to nothing unless a
//! profiling build defines it before including toga (tools/gpu/tbuddy-profile.cu counts them with
//! device atomics), so production code pays nothing.
// TOGA_PROFILE_COUNT_IF(cond, event): counts the event when cond holds; cond is not evaluated (no
// load is compiled) unless the build profiles.
#ifndef TOGA_PROFILE_COUNT
#define TOGA_PROFILE_COUNT(event) ((void)0)
#define TOGA_PROFILE_COUNT_IF(cond, event) ((void)0)
#else
#define TOGA_PROFILE_COUNT_IF(cond, event) \
  do {                                      \
    if (cond) TOGA_PROFILE_COUNT(event);    \
  } while (0)
#endif
// TOGA_PROFILE_START opens a phase clock in a function; TOGA_PROFILE_PHASE(event) charges the time
// since the last mark to `event`. Nothing unless a profiling build defines them.
#ifndef TOGA_PROFILE_START
#define TOGA_PROFILE_START ((void)0)
#define TOGA_PROFILE_PHASE(event) ((void)0)
#endif
namespace toga {
enum profile_event : unsigned {
  prof_tbuddy_alloc,     //!< tbuddy::alloc calls
  prof_tbuddy_climb,     //!< levels climbed after GROW
  prof_tbuddy_visit,     //!< nodes visited by the depth-first search
  prof_tbuddy_restart,   //!< full searches that found nothing (a promised node not yet published)
  prof_tbuddy_claim_lost,//!< try_claim found the node taken
  prof_tbuddy_lock_spin, //!< failed lock attempts (node locks)
  prof_tbuddy_split,     //!< splits
  prof_tbuddy_propagate, //!< propagate_up steps that changed a state and climbed
  prof_tbuddy_free,      //!< tbuddy::free calls
  prof_tbuddy_merge,     //!< merges
  prof_tbuddy_t_stage1,  //!< time: semaphore waits and climbing (stage 1)
  prof_tbuddy_t_search,  //!< time: search and claim (stage 2)
  prof_tbuddy_t_split,   //!< time: splits down to the order
  prof_ua_group,         //!< UAlloc allocation groups
  prof_ua_fast,          //!< groups served entirely by the fast path
  prof_ua_take_failed,   //!< groups whose speculative take failed (CAS loop)
  prof_ua_no_pin,        //!< groups that found no pin
  prof_ua_short,         //!< groups whose pin reservation was short
  prof_ua_emptied,       //!< (unused since the pin slots replaced the pin swap; kept for the event numbering)
  prof_ua_lost_bits,     //!< groups whose first claim lost bits
  prof_ua_find_step,     //!< bins tried by find_reservation (slow path)
  prof_ua_grow,          //!< bins made by GROW
  prof_ua_reconcile,     //!< take_inbox calls (a group took the inbox)
  prof_ua_lock_spin,     //!< failed chunk mutex attempts
  prof_ua_free_group,    //!< UAlloc free groups
  prof_ua_free_cold,     //!< free groups that took the cold path (re-link or retire test)
  prof_ua_retire,        //!< bins retired
  prof_ua_steal,         //!< superbin groups that took their units from another arena instead of a GROW
  prof_ua_reclaim,       //!< reclaim() calls (a GROW or an allocation found no memory; includes lanes that wait on the gate)
  prof_ua_reclaim_walk,  //!< reclaims that walked every arena (reclaim_both: the gate's holder, or every caller without a gate)
  prof_ua_fallback,      //!< lanes that entered the failure fallback (other arenas, reclaim, retry: E12)
  prof_ua_t_reclaim_walk,//!< time: reclaim walks (reclaim_both)
  prof_gw_attempt,       //!< growable heaps with a growth service: attempts in allocate_waiting
  prof_gw_overlap,       //!< wait_for_growth calls that retried at once (an adoption overlapped the attempt)
  prof_gw_post,          //!< groups that posted demand (the leader's post)
  prof_gw_t_attempt,     //!< time: attempts in allocate_waiting (allocations that had failed once)
  prof_gw_t_wait,        //!< time: wait_for_growth (posting, waiting, adopting)
  prof_ua_t_stage1,      //!< time: a group leader's stage 1 by the CAS loop (allocate_slow: reserve and wait, or GROW)
  prof_ua_t_grow,        //!< time: GROW (allocate_slow: new bins or superbins, TBuddy included)
  prof_ua_t_fallback,    //!< time: the failure fallback after a GROW (other arenas, reclaim, retry)
  prof_tbuddy_top_fail,  //!< climbs that reached the root and found nothing (out of memory, before the drain's retry)
  prof_tbuddy_gave_up,   //!< climbs that stopped at a recorded failure (design.md §13.1)
  prof_sem_reserve,      //!< TBuddy semaphores: reservations (a waiter waits for promised units)
  prof_sem_break,        //!< TBuddy semaphores: reserved waiters that left on a shortfall (a withdrawal)
  prof_sem_poll,         //!< TBuddy semaphores: polls of reserved waiters
  prof_sem_cas_lost,     //!< TBuddy semaphores: lost CASes of the decision loop
  prof_ua_fallback_take, //!< failure fallback: takes of units in another arena by a group of failed lanes (one CAS each; counted by the group's leader)
  prof_tbuddy_stale_fail,//!< failed climbs whose failure record was stale when stored (a node was published during the climb)
  prof_tbuddy_drain,     //!< presplit_drain calls (a climb found the tree empty while the reserve had untaken blocks)
  prof_tbuddy_refused,   //!< climbs whose wait was refused at a recorded failure (design.md §13.1, refused waits)
  prof_event_count
};
}  // namespace toga
