//! @file toga/sim/world.hpp
//! One simulated kernel launch: every GPU thread (lane) is a Boost.Fiber fiber, all on the
//! calling OS thread; a strategy decides at every scheduling point which lane runs next.
//!
//! Model (see docs/simulator.md §3-§5):
//!  - Lanes are grouped in warps of 32 (the last warp of a block may be partial), warps in
//!    blocks, blocks placed round-robin on SMs. Identity functions answer as CUDA would.
//!  - Volta+ independent thread scheduling: any lane may be preempted at any scheduling point.
//!    Shared memory is sequentially consistent at the granularity of Platform operations
//!    (each operation is atomic with respect to the schedule).
//!  - Warp intrinsics wait for exactly the lanes named in their mask, excluding lanes that
//!    exited (and lanes a partial warp does not have). The caller must be in the mask.
//!    `activemask()` returns the lanes of the warp that reached the same call site and were
//!    grouped with the caller: the grouping is a scheduling choice (a singleton is legal).
//!  - A lane that blocks in an intrinsic stops being runnable; if no lane is runnable while
//!    lanes are alive the verdict is a deadlock (or a CUDA-rule violation when the lanes wait
//!    on mismatched intrinsics). Lanes of a warp that wait for each other in different
//!    intrinsics (or with different masks) are a CUDA-rule verdict as soon as the cycle closes,
//!    and so is a lane that exits while a lane of its warp waits in an intrinsic whose mask
//!    names it (it will never execute that intrinsic).
//!  - Memory: sequentially consistent by default; `run_limits::memory == weak` selects the
//!    view-based model of toga/sim/memory.hpp. Block-scope atomics are checked for scoped
//!    races under both.
//!  - Fault sites (toga/sim/faults.hpp) enabled in `run_limits::faults` may stall a lane, fail
//!    an operation, split an activemask group or poison freed memory.
//!  - Aborting a schedule unwinds every lane's fiber with a `lane_abort` exception; code run
//!    on the simulator must therefore not be `noexcept` (see TOGA_NOEXCEPT) nor swallow
//!    exceptions with `catch (...)`.
//!
//! A world is single-threaded: run independent schedules on independent threads, one world at
//! a time per thread.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "toga/fault.hpp"
#include "toga/sim/memory.hpp"
#include "toga/sim/strategy.hpp"
#include "toga/sim/types.hpp"

namespace boost::fibers {
class context;
}

namespace toga::sim {

//! Identity of one simulated lane, as CUDA would report it.
struct lane_info {
  unsigned index;          //!< global lane index in the launch
  unsigned block;          //!< block index
  unsigned thread;         //!< thread index within the block
  unsigned warp;           //!< warp index within the block
  unsigned lane;           //!< lane index within the warp
  unsigned sm;             //!< SM the block runs on (in the launch; Platform::sm_id numbers them per device)
  unsigned device;         //!< device of that SM (launch_config::devices)
  unsigned warp_global;    //!< warp index in the launch
};

//! Thrown inside lanes to unwind them when a schedule is aborted. Not a std::exception, so
//! that `catch (const std::exception&)` in code under test does not catch it.
struct lane_abort {};

//! Thrown by a lane to report a failure of the code under test (Platform::fail).
struct lane_failure {
  verdict_kind kind;
  std::string message;
};

//! Told what every step of a lane does to shared state: the dpor strategy's dependency relation
//! (toga/sim/dpor.hpp, docs/simulator.md §20). A world with an observer tracks memory under
//! --memory sc as well (with the scoped-race check off until the first block-scope access, as
//! without one), so that loads name their address; values, verdicts and trace hashes are the same.
class step_observer {
 public:
  virtual ~step_observer() = default;
  //! Lane `lane` reached a scheduling point before an operation of kind k (or started or exited);
  //! `views`: the memory model's views matter (--memory weak, or the scoped-race check is on).
  virtual void point_op(unsigned lane, op k, bool views) = 0;
  //! The running lane read (write false) or wrote the word at `addr` (a store, an RMW, a
  //! successful compare-exchange; a failed one reads). `sc_order`: the operation also went
  //! through the seq_cst order (a seq_cst fence before it: toga/sim/memory.hpp).
  virtual void access(unsigned lane, std::uintptr_t addr, bool write, bool sc_order) = 0;
  //! The running lane read state that every step changes (the step count: `platform::clock_ns`).
  virtual void global(unsigned lane) = 0;
  //! The running lane runs a fence of order `o` (after its scheduling point, before the memory
  //! model applies it); `views` as in point_op. Only a seq_cst fence touches state other lanes
  //! read (the seq_cst order): an acquire, release or acq_rel fence changes its own lane's views
  //! only (memory_state::fence), a relaxed fence nothing.
  virtual void fence(unsigned lane, memory_order o, bool views) { (void)lane, (void)o, (void)views; }
  //! The running lane read or wrote a declared plain (non-atomic) word at `addr`
  //! (world::plain_access: scenario ghost state, toga/sim/plain.hpp).
  virtual void plain(unsigned lane, std::uintptr_t addr, bool write) {
    (void)lane, (void)addr, (void)write;
  }
  //! The running lane added to a declared plain integer word at `addr` (`ghost<T>::operator+=`,
  //! `-=`, `++`, `--`): a write whose value no lane reads in the same step, so two adds of one word
  //! leave the same value in either order (by default an ordinary write). `down`: the add lowers
  //! the value (a decrement), else it raises it or leaves it.
  virtual void plain_add(unsigned lane, std::uintptr_t addr, bool down) {
    (void)down;
    plain(lane, addr, true);
  }
  //! Invariant number `index` (in the order of add_invariant) reads the byte ranges [first,
  //! second) of `reads`; nullptr: undeclared (it may read anything). Told when it is added.
  virtual void invariant_reads(std::size_t index, const std::vector<std::pair<std::uintptr_t, std::uintptr_t>>* reads) {
    (void)index, (void)reads;
  }
  //! Invariant number `index` (declared with invariant_reads just before) is a sum equality
  //! (world::invariant_form::sum_equal).
  virtual void invariant_is_sum(std::size_t index) { (void)index; }
  //! Invariant number `index` (declared with invariant_reads just before) checks words one at a
  //! time (world::invariant_form::word_bounds).
  virtual void invariant_is_word_bounds(std::size_t index) { (void)index; }
  //! The running lane arrives at a warp intrinsic of kind k with `mask` (activemask: mask 0, the
  //! lane parks at its call site), before the world records it or checks its mask.
  virtual void arrival(unsigned lane, op k, std::uint32_t mask) { (void)lane, (void)k, (void)mask; }
  //! The running step completed a rendezvous of the warp whose lane 0 is `base` (an arrival, or
  //! an exit that the rendezvous no longer waits for): the lanes `released` (bits, lanes of the
  //! warp) have their results; the caller, when it is one of them, included.
  virtual void released(unsigned base, std::uint32_t released) { (void)base, (void)released; }
};

class world {
 public:
  using invariant_fn = std::function<std::optional<std::string>()>;

  world(const launch_config& cfg, strategy& strat, run_limits limits);
  ~world();
  world(const world&) = delete;
  world& operator=(const world&) = delete;

  //! The world running on this OS thread (nullptr outside a run).
  static world* current() { return tls_current_; }

  //! Registers a named invariant, checked at every scheduling point of this world (it sees
  //! the state after the previous operation). Returns a message when violated.
  void add_invariant(std::string name, invariant_fn fn);
  //! Byte ranges [begin, end) an invariant reads.
  using watched_ranges = std::vector<std::pair<const void*, const void*>>;
  //! As add_invariant, but checked only at the points that follow an atomic write (store, CAS,
  //! RMW of the simulated Platform) into one of `watched`, and at quiescence. Only for an
  //! invariant whose truth changes nothing but through such writes (and ghost state that the
  //! same operation updates with them, before the next point): then its first violation is found
  //! at the same step as by a check at every point, for a fraction of the cost (the buddy tree's
  //! per-step checks were 75 % of alloc-storm's time, 2026-11-28).
  void add_invariant(std::string name, invariant_fn fn, watched_ranges watched);
  //! As add_invariant(name, fn) (checked at every point), declaring what it reads: the words in
  //! the byte ranges `reads` (atomic words and declared plain words, toga/sim/plain.hpp). Only
  //! the step observer uses the declaration (dpor --plain declared orders the steps that write
  //! what one invariant reads); an invariant that reads anything else makes the declaration wrong
  //! and such an exploration unsound.
  void add_invariant_reading(std::string name, invariant_fn fn, const watched_ranges& reads);
  //! What an invariant's check is, for the step observer (dpor, docs/simulator.md §20.1).
  enum class invariant_form : std::uint8_t {
    any,        //!< anything over the words it reads
    sum_equal,  //!< a sum of terms f_w(value of w), one per word w it reads, equal to a constant:
                //!< each step changes the sum by the same amount in every execution equivalent to
                //!< its own, so the first step that changes it is found in any of them, and dpor
                //!< need not order the steps that write its words (the invariant rule)
    word_bounds,  //!< a conjunction of checks, each of one word's value alone (R4: each reader
                  //!< counter <= the readers); a check of a word that lanes change by adds
                  //!< (ghost<T>'s +=, -=) is a bound on it (value <= hi and/or value >= lo).
                  //!< Each word's writes are ordered among themselves in every equivalent
                  //!< execution (they conflict) and adds of one direction pass the same bounds in
                  //!< either order, so dpor orders no steps for it but an add that raises a word
                  //!< against one that lowers it (docs/simulator.md §20.1)
  };
  //! As add_invariant_reading(name, fn, reads), declaring the check's form. A sum_equal declaration
  //! of a check that is not one makes dpor explorations unsound (they may miss its violations).
  void add_invariant_reading(std::string name, invariant_fn fn, const watched_ranges& reads, invariant_form form);
  //! A declared plain (non-atomic) access of the running lane to the word at `p` (scenario ghost
  //! state: toga/sim/plain.hpp). Tells the step observer; nothing otherwise (not a scheduling
  //! point, no effect on values or trace hashes). Ignored outside lanes and inside invariants.
  void plain_access(const void* p, bool write) {
    if (observer_ && !checking_ && current_ < lanes_.size())
      observer_->plain(current_, reinterpret_cast<std::uintptr_t>(p), write);
  }
  //! A declared plain add of the running lane to the integer word at `p` (ghost<T>'s +=, -=, ++,
  //! --; the step observer may let two adds of one word commute).
  void plain_add(const void* p, bool down = false) {
    if (observer_ && !checking_ && current_ < lanes_.size()) observer_->plain_add(current_, reinterpret_cast<std::uintptr_t>(p), down);
  }
  //! The simulated Platform's fence of order `o`, after its scheduling point (tells the step
  //! observer).
  void note_fence(memory_order o) {
    if (observer_ && current_ < lanes_.size()) observer_->fence(current_, o, mem_ && !shadow_memory_);
  }
  //! The simulated Platform's atomic writes (before they take effect): `p` is written.
  void note_write(const void* p) {
    if (watching_) writes_.push_back(reinterpret_cast<std::uintptr_t>(p));
  }

  //! Called at every step with (step, lane, op), before the operation takes effect.
  using tracer_fn = std::function<void(std::uint64_t, unsigned, op)>;
  void set_tracer(tracer_fn t) { tracer_ = std::move(t); }
  //! Called for every tracked memory operation (see memory_state::tracer_fn); weak model only.
  void set_memory_tracer(memory_state::tracer_fn t) { memory_tracer_ = std::move(t); }
  //! Installs a step observer (before run; nullptr: none, the default).
  void set_step_observer(step_observer* o) { observer_ = o; }

  //! Runs `body` once in every lane and returns the verdict. Call once per world.
  run_result run(const std::function<void()>& body);

  // ---- used by the simulator Platform, from inside lanes --------------------------------
  //! A scheduling point before an operation of kind k.
  //! `file`, `line`: the source site of the operation (the guided strategy's stalls).
  void point(op k, const char* file = nullptr, std::uint32_t line = 0);
  //! A warp intrinsic; returns this lane's result (ballot: the vote; shfl: the value; match:
  //! the mask; syncwarp: 0). `src` is the shuffle source lane.
  std::uint64_t collective(op k, std::uint32_t mask, std::uint64_t value, unsigned src,
                           const char* name);
  //! `__activemask()` at call site `site`.
  std::uint32_t activemask(std::uint64_t site);
  //! A data choice in [0, n) drawn from the schedule (recorded, replayed, shrunk).
  std::uint32_t choose(std::uint32_t n);
  //! A data choice with `distinct` outcomes drawn with the odds of [0, n): a value v in [0, n)
  //! as choose(n), returned as min(v, distinct - 1) (the scenario declares that the values from
  //! distinct - 1 up lead to the same outcome: `choose(4, 2) == 0` is "with probability 1/4").
  //! A strategy that enumerates values (dpor) is asked for `distinct` values only.
  std::uint32_t choose(std::uint32_t n, std::uint32_t distinct);
  //! Identity of the running lane.
  const lane_info& self() const { return lanes_[current_].info; }
  const launch_config& config() const { return cfg_; }
  const run_limits& limits() const { return limits_; }
  //! The source site of the operation at the current point (Platform atomics; nullptr otherwise).
  const char* site_file() const { return site_file_; }
  std::uint32_t site_line() const { return site_line_; }
  //! Scheduling points executed so far.
  std::uint64_t steps() const {
    if (observer_ && current_ < lanes_.size()) observer_->global(current_);
    return result_.steps;
  }
  //! The memory model's state when this schedule tracks memory (--memory weak, or a block-scope
  //! access seen under sc: the scoped-race check), else nullptr: then every operation reads and
  //! writes the word directly.
  memory_state* memory() { return mem_; }
  //! Turns the scoped-race verdict off for this schedule (call before run; for litmus tests
  //! that observe what pairs that are not morally strong do).
  void set_race_check(bool on) { race_check_ = on; }
  bool race_check() const { return race_check_; }
  //! Called before every block-scope operation: under sc, starts the scoped-race check.
  void note_block_scope() {
    if (!mem_ || shadow_memory_) start_memory_tracking(memory_model::sc);
  }
  //! A fault site (toga/sim/faults.hpp): true when a failure site fires; a stall or delay site
  //! that fires keeps the running lane off for a while (not a scheduling point otherwise).
  bool inject(toga::fault_site s);
  //! `platform::poison`: fills [p, p + bytes) with the poison byte when the poison-freed site fires.
  void poison(void* p, std::uint64_t bytes);
  //! Aborts the schedule from inside a lane with this verdict.
  [[noreturn]] void abort_run(verdict_kind k, std::string message);
  //! A short description of the running lane: "lane 5 (block 0, warp 0, lane 5, SM 0)".
  std::string describe(unsigned lane) const;

  // ---- used by the Boost.Fiber scheduling algorithm -------------------------------------
  struct sched_hooks;

 private:
  enum class status : std::uint8_t { runnable, blocked, exited };
  struct lane_rec {
    lane_info info;
    status st = status::runnable;
    op last_op = op::start;
    std::uint64_t points = 0;  // scheduling points this lane reached (anchor_key)
    std::uint32_t picks = 0;   // lane choices made at the current one
  };
  struct warp_rec {
    unsigned base = 0;          // global index of lane 0
    std::uint32_t exited = 0;   // exited lanes, and lanes a partial warp does not have
    std::uint32_t pending = 0;  // lanes blocked in an intrinsic
    std::uint32_t parked = 0;   // lanes waiting in activemask for their group to close
    op kind[32]{};
    const char* name[32]{};
    std::uint32_t mask[32]{};
    std::uint64_t value[32]{};
    std::uint32_t src[32]{};
    std::uint64_t site[32]{};
    std::uint64_t result[32]{};
  };

  void lane_main(unsigned i, const std::function<void()>& body);
  void lane_exit(unsigned i);
  void check_invariants();
  unsigned pick(bool yield, bool current_runnable);
  void switch_to(unsigned next);
  void block_current();
  bool try_complete(warp_rec& w, unsigned lane, unsigned self_lane);
  void make_runnable(unsigned i);
  [[noreturn]] void report_stuck();
  void note_step(op k);
  void start_memory_tracking(memory_model m);
  void check_wait_cycle(warp_rec& w, unsigned lane);
  std::optional<std::string> exit_breaks_rendezvous(unsigned i) const;
  bool fault_fires(toga::fault_site s);
  void stall_current(std::uint32_t steps);
  void wake_stalled(bool force);

  launch_config cfg_;
  strategy* strategy_;
  run_limits limits_;
  std::vector<lane_rec> lanes_;
  std::vector<warp_rec> warps_;
  lane_set runnable_;
  unsigned alive_ = 0;
  unsigned current_ = 0;
  bool aborting_ = false;
  run_result result_;
  std::vector<std::pair<std::string, invariant_fn>> invariants_;
  std::vector<std::vector<std::pair<std::uintptr_t, std::uintptr_t>>> watched_;  // per invariant (empty: every point)
  const char* site_file_ = nullptr;  // the site of the operation after the current point
  std::uint32_t site_line_ = 0;
  bool watching_ = false;                    // some invariant is watched: writes_ is kept
  std::vector<std::uintptr_t> writes_;       // addresses written since the last check
  tracer_fn tracer_;

  // memory model (nullptr: sequentially consistent, no tracking)
  memory_state* mem_ = nullptr;
  bool race_check_ = true;
  memory_state::tracer_fn memory_tracer_;
  // dpor: the observer, and whether mem_ tracks only for it (sc, race check off; replaced by real
  // tracking at the first block-scope access). Per lane: its own epoch at its last point, to tell
  // a seq_cst operation (a seq_cst fence inside it advances the epoch) from the others.
  step_observer* observer_ = nullptr;
  bool shadow_memory_ = false;
  bool checking_ = false;  // inside check_invariants (their plain reads are not the lane's)
  std::vector<std::uint32_t> epoch_at_point_;
  void observe_memory(const char* what, unsigned lane, const void* addr);
  // fault sites: per site 0 = not yet decided, 1 = inactive, 2 = active in this schedule
  std::uint8_t fault_state_[32] = {};
  struct stalled_lane {
    unsigned lane;
    std::uint64_t until;  // step at which it becomes runnable again
  };
  std::vector<stalled_lane> stalled_;

  // scheduler interface state
  std::vector<boost::fibers::context*> ready_;  // per lane: its context when suspended
  unsigned next_lane_;                          // lane pick_next must return (or none)
  unsigned registered_ = 0;

  static thread_local world* tls_current_;
  friend class fiber_algorithm;
};

}  // namespace toga::sim
