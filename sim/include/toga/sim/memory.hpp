//! @file toga/sim/memory.hpp
//! The simulator's memory model: an operational, view-based weak memory model with PTX scopes
//! (`--memory weak`), and the scoped-race check (both models).
//!
//! Shape (after CDSChecker and C11Tester, with PTX's scopes; docs/simulator.md §4.3):
//!  - Every atomic location keeps its modification order (mo): the stores to it in the order the
//!    schedule executed them, of which the last `history_depth` are kept. The raw memory word
//!    always holds the newest store, so invariants, heap walks and scenario code that read memory
//!    directly (they are not lanes) see the latest value.
//!  - Every lane has a view: a vector clock over lanes (happens-before, hb). A store records its
//!    lane and that lane's epoch; it is hb-before lane L when L's clock has reached that epoch.
//!    A lane's epoch advances after each release (store, RMW, fence, barrier), so a release
//!    covers exactly the stores before it.
//!  - A load may read any kept store of its location that is not older than (i) the newest store
//!    hb-before the lane and (ii) the newest store the lane already read or wrote there
//!    (read-read and write-read coherence). Which one is a data choice of the schedule
//!    (`world::choose`; 0 = the newest, so the fair tail and the shrinker's default read the
//!    latest value): replay and shrinking cover it.
//!  - RMWs (and failed compare-exchanges, which are one instruction on CUDA) read the newest store.
//!  - A release store or RMW carries its lane's view; an acquire load or RMW that reads it joins
//!    that view. A relaxed store after a release fence carries the fence's view; a relaxed load
//!    keeps the views it read for a later acquire fence. An RMW carries the view of the store it
//!    read as well (release sequences).
//!  - Scopes: a release/acquire pair synchronises only when both operations' scopes include both
//!    lanes (block scope: the same block; device scope: any lane). `fence(seq_cst)` orders through
//!    a global view per scope (one per block, one for the device) and is also an acq_rel fence; a
//!    seq_cst load, store or RMW is a seq_cst fence followed by the operation with acquire/release.
//!    A seq_cst fence is cumulative: the stores its lane has read (with any order) count as
//!    happened-before it (PTX's causality order includes observation), which forbids IRIW with
//!    seq_cst fences between the reads. (This orders the writer's earlier stores too: slightly
//!    stronger than PTX, never weaker.)
//!  - `__syncwarp(mask)` orders memory among its lanes (CUDA guarantees this): it joins their
//!    views. ballot, shfl, match_any and reduce_or do not (CUDA documents no memory ordering for
//!    them); values they exchange are registers, not memory.
//!
//! What it cannot produce: load buffering (a load reading a store that comes later in the
//! schedule), 2+2W with both stores winning (mo follows the schedule), and stores older than the
//! kept history. See the litmus table in docs/simulator.md §4.4.
//!
//! Happens-before marks (--memory weak): `mark_here` names the running lane's current point and
//! `happened_before` tells whether a mark is hb-before the running lane. Scenarios use them to
//! check that plain (non-atomic) data is handed over with a happens-before chain: an RCU
//! reader's access before the reclamation of what it read, a block's previous owner before its
//! next owner. That catches the bugs whose wrong value would need load buffering (a release
//! weakened to relaxed on the hand-over path) as a data race, without producing the value.
//!
//! Scoped races (both models): two accesses to one location, at least one a write, from lanes of
//! different blocks, at least one with block scope (so the pair is not "morally strong" in PTX's
//! terms), and not ordered by happens-before, end the schedule with a cuda-rule verdict at the
//! second access. Happens-before is the view model's in both: under --memory sc the views are kept
//! (loads still read the newest store) from the first block-scope access of the schedule on, so
//! --memory sc pays nothing for programs without block scope, and accesses made before that first
//! block-scope access are not checked.
//!
//! Cost: O(lanes^2) 32-bit words per world for the views, O(history_depth) per load.
//! Single-threaded: one instance per world, reused across schedules on the same OS thread.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "toga/platform.hpp"
#include "toga/sim/types.hpp"

namespace toga::sim {

class world;

//! Stores kept per location (the newest ones in modification order).
inline constexpr unsigned history_depth = 8;

//! A point of one lane in happens-before: its lane and that lane's epoch there. The default
//! mark (no lane) happens before everything.
struct hb_mark {
  std::uint32_t lane = ~0u;
  std::uint32_t epoch = 0;
};

class memory_state {
 public:
  //! Prepares for one schedule of `w`: `blocks[i]` is lane i's block.
  void reset(world& w, memory_model m, const std::vector<unsigned>& blocks, unsigned num_blocks);
  bool weak() const { return weak_; }

  //! A load of `bytes` (4 or 8) at p by the running lane; returns the value read.
  std::uint64_t load(const void* p, unsigned bytes, memory_order o, scope s);
  //! A store.
  void store(void* p, unsigned bytes, std::uint64_t v, memory_order o, scope s);
  //! An RMW in two halves with no scheduling point between them: rmw_read returns the newest
  //! value; then exactly one of rmw_write (the new value, with the success order) or rmw_fail
  //! (no write, with the failure order: a failed compare-exchange).
  std::uint64_t rmw_read(void* p, unsigned bytes);
  void rmw_write(void* p, unsigned bytes, std::uint64_t v, memory_order o, scope s);
  void rmw_fail(void* p, unsigned bytes, memory_order o, scope s);
  void fence(memory_order o, scope s);
  //! A completed __syncwarp: the lanes `lanes[0..n)` (global indices) exchange views.
  void barrier(const unsigned* lanes, unsigned n);

  //! Called for every operation of a tracked location (replay --trace): what ("load", "store",
  //! "rmw", "cas-fail"), the lane, the address, the value read or written, and for loads which
  //! store was read (0 = the newest) out of how many it could read.
  using tracer_fn = std::function<void(const char* what, unsigned lane, const void* addr, std::uint64_t value,
                                       unsigned pick, unsigned candidates)>;
  void set_tracer(tracer_fn t) { tracer_ = std::move(t); }

  //! Turns the scoped-race verdict off (litmus tests that observe what non-morally-strong pairs do).
  void set_race_check(bool on) { check_races_ = on; }
  //! What the model's two scopes are called in verdicts: "block" / "device" (one device), or
  //! "device" / "system" (launch_config::devices > 1, where the groups are devices).
  void set_group_names(const char* inner, const char* outer) {
    inner_name_ = inner;
    outer_name_ = outer;
  }

  //! The running lane's current point (not a scheduling point). Accesses it made before the
  //! call are covered by the mark; a later release of the lane publishes it.
  hb_mark mark_here();
  //! True when `m` happens before the running lane's current point (program order, or a
  //! release/acquire, fence or __syncwarp chain from m's lane); always true for the default mark.
  bool happened_before(const hb_mark& m);

  //! Stale reads (a load that read other than the newest store) in this schedule.
  std::uint64_t stale_reads() const { return stale_reads_; }

 private:
  static constexpr std::uint32_t init_lane = ~0u;    // the store a location held before tracking
  static constexpr std::uint32_t mixed_block = ~0u;  // a view joined from several blocks' releases
  struct token {             // a view carried by a store (0 = none)
    std::uint32_t view = 0;
    std::uint32_t block = 0;  // writer's block, or mixed_block
    scope sc = scope::device;
  };
  struct store_rec {
    std::uint64_t value;
    std::uint32_t mo;
    std::uint32_t lane;
    std::uint32_t epoch;
    token carried;
  };
  struct access_rec {
    std::uint32_t lane = init_lane;
    std::uint32_t epoch = 0;
    std::uint32_t block = 0;
    scope sc = scope::device;
    bool write = false;
  };
  static constexpr unsigned kept_reads = 4;
  struct location {
    std::uintptr_t addr = 0;
    unsigned bytes = 0;
    std::uint32_t first = 0;  // ring index of the oldest kept store
    std::uint32_t count = 0;  // kept stores
    std::uint32_t next_mo = 0;
    store_rec ring[history_depth];
    access_rec last_write;
    access_rec reads[kept_reads];
    unsigned nreads = 0;
    const store_rec& newest() const { return ring[(first + count - 1) % history_depth]; }
    const store_rec& nth_newest(unsigned k) const { return ring[(first + count - 1 - k) % history_depth]; }
  };

  // views: rows of `lanes_` clocks, reference counted, immutable once made
  std::uint32_t make_view(const std::uint32_t* src);
  void ref(std::uint32_t h) {
    if (h) ++refs_[h];
  }
  void unref(std::uint32_t h) {
    if (h && --refs_[h] == 0) free_views_.push_back(h);
  }
  const std::uint32_t* view(std::uint32_t h) const { return &views_[std::size_t{h} * lanes_]; }
  std::uint32_t* clock(unsigned lane) { return &clocks_[std::size_t{lane} * lanes_]; }

  location& locate(const void* p, unsigned bytes);
  std::uint32_t& seen(std::uint32_t loc_index, unsigned lane) { return seen_[std::size_t{loc_index} * lanes_ + lane]; }
  void push_store(location& l, std::uint64_t v, unsigned me, token carried);
  bool hb(unsigned me, std::uint32_t lane, std::uint32_t epoch) {
    return lane == init_lane || clock(me)[lane] >= epoch;
  }
  bool join_clock(std::uint32_t* dst, const std::uint32_t* src);
  void join_into_lane(unsigned me, const std::uint32_t* src);
  std::uint32_t snapshot(unsigned me);  // a new reference to a view equal to me's clock
  void bump(unsigned me);
  token own_release(unsigned me, scope s);
  token join_tokens(const token& a, const token& b);
  bool token_leq(const token& a, const token& b) const;
  bool subsumes(const store_rec& older, const store_rec& newer) const;
  void acquire_from(unsigned me, const token& t, scope s);
  void keep_for_fence(unsigned me, const token& t);
  void acquire_fence(unsigned me, scope s);
  void release_fence(unsigned me, scope s);
  void sc_fence(unsigned me, scope s);
  void check_race(location& l, unsigned me, bool write, scope s, const char* what);
  void record_access(location& l, unsigned me, bool write, scope s);
  bool ordered(unsigned me, const access_rec& a) { return hb(me, a.lane, a.epoch); }

  world* w_ = nullptr;
  bool weak_ = false;
  unsigned lanes_ = 0;
  unsigned blocks_count_ = 0;
  std::vector<unsigned> block_;          // per lane
  std::vector<std::uint32_t> clocks_;    // lanes x lanes
  std::vector<std::uint32_t> pend_any_;  // lanes x lanes: views read by relaxed loads, any acquire fence joins them
  std::vector<std::uint32_t> pend_dev_;  // lanes x lanes: ... that only a device-scope acquire fence joins
  std::vector<std::uint32_t> observed_;  // lanes x lanes: per writer, the newest epoch of a store the lane read
  bool check_races_ = true;
  const char* inner_name_ = "block";
  const char* outer_name_ = "device";
  tracer_fn tracer_;
  std::vector<std::uint32_t> snap_;      // per lane: a view equal to its clock, or 0
  std::vector<token> rel_fence_;         // per lane: the view of its last release fence
  std::vector<std::uint32_t> global_;    // (blocks + 1) x lanes: seq_cst fence views, [blocks] = device
  std::vector<std::uint32_t> views_;     // view storage (row 0 unused)
  std::vector<std::uint32_t> refs_;
  std::vector<std::uint32_t> free_views_;
  std::vector<location> locs_;
  std::vector<std::uint32_t> seen_;      // locs x lanes: newest mo the lane read or wrote
  // address -> location index: open addressing, entries valid for the current generation only
  struct slot {
    std::uintptr_t addr;
    std::uint32_t index;
    std::uint32_t gen;
  };
  std::vector<slot> table_;
  std::uint32_t gen_ = 0;
  std::uint32_t cur_ = 0;  // the location of the RMW in progress
  std::uint64_t stale_reads_ = 0;
  std::vector<std::uint32_t> scratch_;
};

}  // namespace toga::sim
