#include "toga/sim/mutants.hpp"

#include <nlohmann/json.hpp>

#include <chrono>
#include <fstream>

#include "toga/sim/faults.hpp"
#include "toga/sim/runner.hpp"
#include "toga/sim/scenario.hpp"

#ifndef TOGA_SIM_SOURCE_DIR
#define TOGA_SIM_SOURCE_DIR "."
#endif

namespace toga::sim {

namespace {

// A catalogue entry, built with chained setters: mb(id, class, scenario, {params}, what).weak().gpu()...
struct mb {
  mutant m;
  mb(std::string id, std::string cls, std::string scenario, std::vector<std::pair<std::string, std::int64_t>> params,
     std::string what) {
    m.id = std::move(id);
    m.cls = std::move(cls);
    m.scenario = std::move(scenario);
    m.params = std::move(params);
    m.what = std::move(what);
    m.strategy.kind = strategy_kind::portfolio;
  }
  mb& gpu() {
    m.gpu_specific = true;
    return *this;
  }
  mb& weak() {
    m.memory = memory_model::weak;
    return *this;
  }
  mb& with(strategy_kind k, unsigned pct_depth = 3) {
    m.strategy.kind = k;
    m.strategy.pct_depth = pct_depth;
    return *this;
  }
  mb& faults(std::uint32_t f) {
    m.faults = f;
    return *this;
  }
  mb& depth(unsigned d) {
    m.depth = d;
    return *this;
  }
  mb& ci() {
    m.ci = true;
    return *this;
  }
  mb& note(std::string n) {
    m.note = std::move(n);
    return *this;
  }
  mb& equivalent(std::string why) {
    m.equivalent = true;
    m.note = std::move(why);
    return *this;
  }
  operator mutant() const { return m; }
};

constexpr auto random = strategy_kind::random;
constexpr auto pct = strategy_kind::pct;
constexpr auto stall = strategy_kind::stall;

std::vector<mutant> build() {
  const std::uint32_t stall_sites = fault_bit(fault_site::stall_read_to_rmw) | fault_bit(fault_site::stall_speculative_undo) |
                                    fault_bit(fault_site::stall_read_section) | fault_bit(fault_site::stall_pin_swap) |
                                    fault_bit(fault_site::stall_grow) | fault_bit(fault_site::delay_grace_period);
  using P = std::vector<std::pair<std::string, std::int64_t>>;
  // the superbins shape in which random shapes killed the group fallback's planted bugs (2026-12-02)
  const auto fallback_shape = [](std::int64_t bug) {
    return P{{"bug", bug}, {"align", 32}, {"coalesced", 1}, {"heap_kib", 512}, {"keep", 3}, {"leak", 1}, {"limit_kib", 1024},
             {"ops", 7}, {"pins", 2}, {"presplit_kib", 128}, {"sb_arenas", 4}, {"sb_shift", 0}, {"size", 1024}, {"sms", 2},
             {"threads", 8}, {"walker", 1}, {"warps", 4}};
  };
  // the grow-while-alloc shape in which random shapes found the group free's missing barrier (2026-11-30)
  const auto failing_free_shape = [](std::int64_t bug) {
    return P{{"bug", bug}, {"anchor", 32768}, {"coalesced", 1}, {"granule_kib", 32}, {"heap_kib", 1024}, {"keep", 4}, {"leak", 1},
             {"ops", 4}, {"sb_shift", 15}, {"size", 2}, {"sms", 2}, {"threads", 16}, {"warps", 4}};
  };
  std::vector<mutant> c = {
      // ---- toy scenarios (scenarios.cpp) ----------------------------------------------------------
      mb("lost-update", "atomicity", "lost-update", P{}, "increment as a separate load and store").with(random).depth(1).ci(),
      mb("aba-stack", "atomicity", "aba-stack", P{}, "Treiber pop without a version tag (ABA)").with(pct, 3).depth(2).ci(),
      mb("lock-order", "liveness", "lock-order", P{}, "two spin locks taken in opposite orders").with(random).depth(1),
      mb("dining.ring-order", "liveness", "dining", P{{"bug", 1}}, "locks taken in ring order instead of a global order")
          .depth(3),
      mb("admission.check-then-act", "atomicity", "admission", P{{"bug", 1}, {"cap", 3}},
         "capacity check and increment as two steps (no CAS)").depth(4),
      mb("admission.retry-less-cas", "atomicity", "admission", P{{"bug", 2}}, "a failed CAS is taken for a success")
          .depth(2),
      mb("admission.early-release", "mutual-exclusion", "admission", P{{"bug", 3}, {"cap", 3}},
         "the permit is given back before the hold ends").depth(3),
      mb("admission.off-by-one", "off-by-one", "admission", P{{"bug", 4}, {"cap", 3}}, "the capacity check is <= cap")
          .depth(3),
      mb("warp.mask-excludes-caller", "warp-mask", "warp-mask", P{}, "__ballot_sync with a mask that excludes the caller")
          .gpu().with(random).depth(0).ci(),
      mb("warp.mismatched-intrinsics", "warp-mask", "warp-mismatch", P{}, "lanes of one mask call different intrinsics")
          .gpu().with(random).depth(0).ci(),
      mb("warp-ticket.full-mask", "warp-mask", "warp-ticket", P{{"bug", 1}},
         "group formed from the full mask instead of activemask while some lanes skip").gpu().with(random).depth(0).ci(),
      mb("warp-ticket.no-syncwarp", "its", "warp-ticket", P{{"bug", 2}},
         "members read the leader's slot without __syncwarp").gpu().with(random).depth(1).ci(),
      // ---- bulk semaphore (toga/bulk_semaphore.hpp) ----------------------------------------------
      mb("sem.fetch-sub", "accounting", "semaphore", P{{"bug", 1}}, "C decremented by fetch_sub and undone (C < 0 briefly)")
          .depth(4).ci()
          .note("4 deviations: the delay-bounded search with 3 is complete without a failure, with 4 it finds a "
                "4-preemption schedule (about 900,000 schedules, which the shrinker's search runs in 4 s)"),
      mb("sem.spin-ignores-shortfall", "liveness", "semaphore", P{{"bug", 2}, {"capacity", 1}, {"keep", 1}},
         "a waiter leaves its spin only when C >= N, never when R > C + E").depth(1),
      mb("sem.grow-full-batch", "off-by-one", "semaphore", P{{"bug", 3}}, "GROW promises B instead of B - N").depth(0).ci(),
      mb("sem.oom-keeps-promise", "liveness", "semaphore", P{{"bug", 4}, {"capacity", 1}, {"keep", 1}},
         "a producer that runs out of memory does not withdraw its promise").depth(0),
      mb("sem.fast-no-undo", "accounting", "semaphore", P{{"bug", 5}}, "biased fast path: a failed fetch_sub is not undone")
          .depth(0),
      mb("sem.fast-undo-short", "off-by-one", "semaphore", P{{"bug", 6}}, "biased fast path: the undo gives back one unit less")
          .depth(0),
      mb("sem.fast-ignores-bias", "accounting", "semaphore", P{{"bug", 7}},
         "biased fast path judges the stored C without the bias").depth(0),
      mb("sem.slow-below-bias", "atomicity", "semaphore", P{{"bug", 8}},
         "the CAS loop decides on a snapshot whose C is below the bias").depth(1),
      mb("sem.shortfall-leave-short", "liveness", "semaphore", P{{"bug", 9}, {"capacity", 1}, {"keep", 1}},
         "on a shortfall each waiter leaves with probability (excess - 1) / R instead of excess / R: a withdrawal of "
         "one promise releases nobody, and its waiter spins forever").depth(1),
      mb("sem.upto-takes-all-asked", "accounting", "semaphore", P{{"bug", 10}, {"upto", 1}},
         "try_wait_upto(n) takes all n units whenever any is available, not min(n, C): C below the bias (a unit taken twice)")
          .depth(1).ci(),
      // ---- collective mutex and pop-k (toga/group.hpp) -------------------------------------------
      mb("mutex.no-entry-sync", "its", "collective-mutex", P{{"bug", 1}},
         "members enter before the leader holds the lock (no __syncwarp)").gpu().depth(0).ci(),
      mb("mutex.lock-count-one", "off-by-one", "collective-mutex", P{{"bug", 2}},
         "the leader stores 1, not the group size").depth(0),
      mb("mutex.leader-frees-all", "mutual-exclusion", "collective-mutex", P{{"bug", 3}},
         "the leader's unlock frees the lock while members are inside").depth(0),
      mb("mutex.relaxed-lock", "memory-order", "collective-mutex", P{{"bug", 4}}, "lock CAS acquire -> relaxed")
          .gpu().weak().with(random).depth(1).ci(),
      mb("mutex.relaxed-unlock", "memory-order", "collective-mutex", P{{"bug", 5}}, "unlock fetch_sub release -> relaxed")
          .gpu().weak().with(random).depth(1).ci(),
      mb("mutex.block-scope", "scope", "collective-mutex", P{{"bug", 6}}, "lock word device scope -> block scope")
          .gpu().weak().with(random).depth(0).ci(),
      mb("pop.no-read-barrier", "its", "pop-k", P{{"bug", 1}}, "the last lane moves the head before the others read it")
          .gpu().depth(0),
      mb("pop.head-off-by-one", "off-by-one", "pop-k", P{{"bug", 2}}, "the head is set to the last taken element").depth(0),
      mb("pop.lock-count-one", "mutual-exclusion", "pop-k", P{{"bug", 3}}, "pop under a lock-count-1 mutex").depth(1),
      mb("pop.relaxed-lock", "memory-order", "pop-k", P{{"bug", 4}}, "pop under a relaxed lock CAS").gpu().weak().with(random).depth(1),
      mb("pop.block-scope-head", "scope", "pop-k", P{{"bug", 5}}, "head accessed with block scope under the device-scope lock")
          .gpu().weak().equivalent("every access to the head is ordered by the device-scope lock, so it is no race in PTX"),
      // ---- RCU (toga/rcu.hpp) -----------------------------------------------------------------------
      mb("rcu.no-epoch-recheck", "reclamation", "rcu", P{{"bug", 1}, {"lanes", 3}, {"readers", 1}, {"passes", 3}},
         "readers register without re-checking the epoch").with(pct, 4).depth(2),
      mb("rcu.barrier-skips-wait", "reclamation", "rcu", P{{"bug", 2}}, "the barrier does not wait for the readers").depth(1).ci(),
      mb("rcu.collect-before-clear", "reclamation", "rcu", P{{"bug", 3}}, "collect the LIFO before clearing pending").depth(1),
      mb("rcu.reader-relaxed-increment", "memory-order", "rcu", P{{"bug", 4}}, "read_lock's counter increment acquire -> relaxed")
          .gpu().weak().depth(1),
      mb("rcu.writer-load-not-rmw", "memory-order", "rcu", P{{"bug", 7}},
         "the grace period's first read of the readers is an acquire load instead of an acq_rel RMW")
          .gpu().weak().depth(0).ci(),
      mb("rcu.relaxed-unlock", "memory-order", "rcu", P{{"bug", 5}}, "read_unlock release -> relaxed")
          .gpu().weak()
          .note("the stale value needs load buffering, which the model cannot produce; killed as a data race instead: "
                "the reclamation is not happens-after the reader's access (R1 happens-before check)")
          .depth(0),
      mb("rcu.relaxed-recheck", "memory-order", "rcu", P{{"bug", 6}}, "the epoch re-check acquire -> relaxed")
          .gpu().weak().depth(0)
          .note("equivalent while read_lock had a seq_cst fence (the fence made the relaxed re-load an acquire pattern); "
                "since the read side meets the writer on the counter's RMW order, the acquire re-load is what makes the "
                "unlinks before the flip visible"),
      // ---- publication (how the allocator publishes a bin or chunk header) ------------------------
      mb("publish.relaxed-push", "memory-order", "publish", P{{"bug", 1}}, "push CAS release -> relaxed").gpu().weak().with(random).depth(1).ci(),
      mb("publish.relaxed-pop", "memory-order", "publish", P{{"bug", 2}}, "pop load and CAS acquire -> relaxed")
          .gpu().weak().with(random).depth(1),
      mb("publish.before-init", "publication", "publish", P{{"bug", 3}}, "the record is pushed before it is initialised")
          .with(random).depth(1).ci(),
      mb("publish.no-release-fence", "memory-order", "publish", P{{"bug", 4}}, "fence form: fence(release) dropped")
          .gpu().weak().with(random).depth(1),
      mb("publish.no-acquire-fence", "memory-order", "publish", P{{"bug", 5}}, "fence form: fence(acquire) dropped")
          .gpu().weak().with(random).depth(1).ci(),
      mb("publish.block-scope-push", "scope", "publish", P{{"bug", 6}}, "push CAS device scope -> block scope")
          .gpu().weak().with(random).depth(0),
      mb("publish.block-scope-fence", "scope", "publish", P{{"bug", 7}}, "fence form: fence(acquire) device -> block scope")
          .gpu().weak().with(random).depth(1).ci(),
      // ---- allocator (toga/ualloc.hpp, toga/tbuddy.hpp): run under sc until the core orders the
      // header reads of its shfl-served group members (docs/simulator.md §4.6) ---------------------
      mb("ualloc.free-outside-read-section", "reclamation", "retire-race", P{{"bug", 1}},
         "deallocate touches the bin outside an RCU read-side section").with(stall).faults(stall_sites).depth(2),
      mb("ualloc.retire-without-try-wait", "accounting", "alloc-storm",
         P{{"bug", 2}, {"size", 1024}, {"sb_shift", 0}, {"ops", 4}, {"keep", 2}, {"sms", 1}},
         "a bin is retired without taking its units from the semaphore").depth(1),
      mb("ualloc.chunk-with-live-bins", "reclamation", "alloc-storm", P{{"bug", 3}, {"size", 1024}, {"sb_shift", 0}, {"pins", 1}},
         "a chunk goes back to TBuddy while bins are in use").depth(1),
      mb("ualloc.no-unlink-on-exhaustion", "list-integrity", "inbox-race", P{{"bug", 4}},
         "a taker drops an exhausted inbox bin without re-reading its count")
          .faults(fault_bit(fault_site::stall_read_to_rmw) | fault_bit(fault_site::stall_inbox_hold))
          .depth(3)
          .note("at least 3 deviations on 2026-11-27's core: in inbox-race without faults the delay-bounded search with 2 "
                "is complete without a failure (120,726 schedules); its failures need two interrupted windows (the fast "
                "path between the pin and its reservation, a taker holding an exhausted bin) and shrink to those two "
                "stalls; in alloc-storm (128 B, 8 lanes a warp) they shrank to hundreds of preemptions (simulator.md 16.5)"),
      mb("ualloc.no-relink-on-refill", "list-integrity", "alloc-storm",
         P{{"bug", 5}, {"size", 1024}, {"sb_shift", 0}, {"ops", 3}, {"keep", 1}, {"sms", 1}, {"pins", 1}},
         "a free that refills an exhausted bin does not re-link it")
          .depth(1)
          .note("exactly 1 on 2026-11-26's core: the delay-bounded search with 0 deviations passes, with 1 it fails at "
                "schedule 1,071; the shape before (ops=4 keep=2, 4 pins) failed first with a livelock that shrank to 6"),
      mb("tbuddy.merge-without-unit", "accounting", "mixed-sizes", P{{"bug", 6}}, "merge with an AVAILABLE buddy without its unit")
          .depth(1).ci(),
      mb("tbuddy.claim-without-lock", "atomicity", "exhaust-recover", P{{"bug", 7}, {"heap_kib", 16}, {"threads", 4}},
         "claim a node without lock(parent)")
          .depth(2)
          .note("exactly 2 on 2026-11-26's core: the delay-bounded search with 1 deviation is complete without a failure "
                "(691 schedules), with 2 it fails; the shape before (2 lanes, 128 KiB) needs at least 3 (bound 2 "
                "complete, 847,127 schedules) and its failures shrank to 19"),
      mb("tbuddy.oom-keeps-promises", "liveness", "exhaust-recover", P{{"bug", 8}, {"threads", 4}},
         "out of memory does not withdraw the climb's promises").depth(1),
      mb("ualloc.claim-without-reservation", "accounting", "alloc-storm",
         P{{"bug", 9}, {"threads", 4}, {"warps", 1}, {"sms", 1}, {"size", 16}}, "fast path claims bits without a reservation")
          .depth(1),
      mb("ualloc.two-lanes-one-bit", "off-by-one", "alloc-storm", P{{"bug", 10}, {"threads", 4}, {"warps", 1}, {"sms", 1}, {"size", 16}},
         "claimed bits handed out off by one").gpu().depth(0),
      mb("ualloc.pin-swap-drops-bin", "list-integrity", "alloc-storm",
         P{{"bug", 11}, {"threads", 4}, {"warps", 1}, {"sms", 1}, {"size", 1024}, {"sb_shift", 0}, {"leak", 1}},
         "a GROW displaces a pin with free slots without linking it")
          .depth(2)
          .note("at least 2 on 2026-11-26's core: the delay-bounded search with 1 deviation is complete without a "
                "failure (4,224 schedules); its failures shrink to 1 preemption (the other deviations are switches at "
                "yields); the shape before (2 warps) shrank to 14"),
      mb("ualloc.retire-keeps-pin", "reclamation", "alloc-storm",
         P{{"bug", 12}, {"size", 1024}, {"sb_shift", 0}, {"ops", 3}, {"keep", 1}, {"sms", 1}, {"warps", 1}, {"threads", 3}},
         "retiring a pinned bin keeps the pin")
          .depth(3)
          .note("at least 3: the exhaustive search with 2 deviations of this shape is complete without a failure "
                "(300,354 schedules); 3 is out of its reach"),
      mb("ualloc.dead-near-wrap", "off-by-one", "alloc-storm",
         P{{"bug", 13}, {"size", 1024}, {"sb_shift", 0}, {"threads", 3}, {"warps", 3}, {"sms", 1}, {"pins", 1}},
         "a retired bin's count is INT32_MIN: a transient decrement wraps").with(random).depth(1)
          .note("the wrapped count sends a lane to a wild bin address: the process crashes (a GPU would report an "
                "illegal address); toga-sim turns the crash into a verdict with its replay line"),
      mb("ualloc.pin-before-init", "publication", "retire-race", P{{"bug", 14}},
         "a GROW publishes its bin as the pin before writing the header").depth(0),
      mb("ualloc.or-drops-lane", "warp-mask", "alloc-storm", P{{"bug", 15}, {"threads", 8}, {"warps", 1}, {"sms", 1}, {"size", 16}},
         "the free path's OR reduction drops the highest lane").gpu().depth(0),
      mb("ualloc.free-signals-short", "off-by-one", "alloc-storm", P{{"bug", 16}, {"threads", 4}, {"warps", 1}, {"sms", 1}, {"size", 16}},
         "a group free signals k - 1 units").depth(0),
      mb("ualloc.undo-whole-reservation", "accounting", "alloc-storm",
         P{{"bug", 17}, {"threads", 4}, {"warps", 2}, {"sms", 1}, {"size", 1024}, {"sb_shift", 0}},
         "a short reservation undoes all it asked for").depth(1).ci(),
      // the slot hand-over's orders: killed by H1 (the previous owner's accesses happen before the
      // next owner's) under --memory weak; under sc they pass
      mb("ualloc.relaxed-slot-free", "memory-order", "alloc-storm", P{{"bug", 18}, {"size", 16}, {"ops", 3}, {"keep", 1}, {"sms", 1}, {"threads", 1}},
         "the slot free's fetch_and release -> relaxed")
          .gpu().weak(),
      mb("ualloc.relaxed-slot-claim", "memory-order", "alloc-storm", P{{"bug", 19}, {"size", 16}, {"ops", 3}, {"keep", 1}, {"sms", 1}, {"threads", 1}},
         "the slot claim's fetch_or acquire -> relaxed").gpu().weak(),
      mb("ualloc.free-without-syncwarp", "its", "alloc-storm", P{{"bug", 20}},
         "a group free releases the bitmap word without the __syncwarp that orders its members' accesses").gpu().weak(),
      // (the correct core's behaviour until 2026-11-30: found by random shapes of grow-while-alloc under
      // --memory weak, seed 2003319, in the 2026-11-30 campaign toward 10^6 schedules; design.md §9.2)
      // (its first shape, failing_free_shape(91) of grow-while-alloc, killed it at schedule 238 until the
      // refusal of GROWs known to fail (c68c34a) moved that shape's schedules: 50,000 schedules and 11,273
      // random weak stall shapes did not kill it there (2026-12-01); word-race was written for it)
      mb("ualloc.free-barrier-per-word", "its", "word-race", P{{"bug", 91}},
         "a group free's __syncwarp covers the lanes of one bitmap word only: members of the other words are not ordered "
         "before the leader's read-side section, so a slot's owner after its bin is retired and re-made races with them")
          .gpu()
          .weak()
          .ci()
          .note("not killed in 10,000 random shapes of each generic scenario (seed 1); grow-while-alloc's failing shape "
                "killed it at 238 before c68c34a"),
      mb("ualloc.free-no-barrier-after-rmw", "its", "grow-while-alloc",
         failing_free_shape(92),
         "a group free has no __syncwarp after its bitmap RMWs: the other words' fetch_and reach the leader's count by "
         "value only, so nothing orders them before a later init_bin's stores to the same words")
          .gpu()
          .weak()
          .with(stall)
          .equivalent("the simulator's RMWs read the newest value and run in one total order, so a fetch_and that the "
                      "leader's count depends on cannot come after a later store to its word; PTX does not promise that "
                      "without happens-before (design.md §9.2)"),
      mb("ualloc.free-hint-trusted", "off-by-one", "alloc-storm", P{{"bug", 93}, {"size", 256}, {"sms", 1}, {"threads", 8}, {"warps", 2}},
         "the fast path takes the bits at the free hint (where the last group free's run began) as its own without "
         "looking at what its fetch_or found: two groups that read one hint get one run"),
      // a fresh chunk's extra bins (design.md §8.5): the shape random shapes drew when they killed it
      mb("ualloc.fresh-extra-signalled-as-promised", "off-by-one", "alloc-storm",
         P{{"bug", 94}, {"coalesced", 1}, {"heap_kib", 1024}, {"sb_shift", 0}, {"size", 600}, {"sms", 1}, {"threads", 16}, {"warps", 3}},
         "a GROW's extra bin of a fresh chunk settles a promise that was never made for it (E -= cap): the waiters that "
         "reserved against another producer's promise lose it").depth(0).ci(),
      mb("ualloc.fresh-extra-unqueued", "list-integrity", "alloc-storm",
         P{{"bug", 95}, {"coalesced", 1}, {"heap_kib", 1024}, {"pins", 1}, {"sb_shift", 0}, {"size", 600}, {"sms", 1}, {"threads", 16}, {"warps", 3}},
         "a GROW's extra bin of a fresh chunk that finds no empty pin slot is neither pinned nor queued: its units are "
         "signalled for a bin nobody can find (the waiters spin: livelock)"),
      // the fast path's scan of a superbin's bitmap (design.md §8.3, TOGA_SCAN_CLAIM)
      mb("ualloc.scan-claim-trusted", "off-by-one", "superbins",
         P{{"bug", 96}, {"anchor", 32768}, {"heap_kib", 128}, {"keep", 6}, {"limit_kib", 2048}, {"ops", 9}, {"sb_arenas", 2},
           {"size", 114}, {"sms", 2}, {"threads", 26}, {"warps", 1}},
         "the fast path takes the zero bits a lane saw in its scan of the superbin's bitmap as its own without looking at "
         "what its fetch_or found: two groups that saw one word free get the same slots")
          .depth(1)
          .ci(),
      // allocate(bytes)'s inline superbin path (design.md §11.10, TOGA_INLINE_SUPERBINS)
      mb("ualloc.inline-super-skips-fallbacks", "routing", "exhaust-recover",
         P{{"bug", 97}, {"align", 4096}, {"anchor", 256}, {"coalesced", 1}, {"heap_kib", 4096}, {"keep", 5}, {"limit_kib", 16},
           {"ops", 1}, {"sb_arenas", 4}, {"sms", 3}, {"threads", 4}, {"warps", 3}},
         "allocate(bytes)'s inline superbin path returns nullptr when its group found no superbin, without the fallbacks "
         "(UAlloc's class, a TBuddy block) that the out-of-line path tries: a request that a TBuddy block would serve fails")
          .depth(0)
          .ci(),
      // superbins made ahead of demand (TOGA_SB_GROW_AHEAD, design.md §11.11)
      mb("ualloc.ahead-extra-unpinned", "list-integrity", "superbins",
         P{{"bug", 98}, {"align", 1024}, {"heap_kib", 2048}, {"keep", 4}, {"ops", 4}, {"presplit_kib", 128}, {"sb_arenas", 4},
           {"size", 1}, {"sms", 1}, {"threads", 19}, {"walker", 1}, {"warps", 3}},
         "a superbin made ahead of demand is initialised and signalled but neither pinned nor queued: waiters spin for "
         "units of a bin nobody can find"),
      mb("ualloc.ahead-failed-take-signalled", "accounting", "exhaust-recover",
         P{{"bug", 99}, {"heap_kib", 2048}, {"keep", 5}, {"ops", 8}, {"pins", 3}, {"sb_arenas", 4}, {"sb_shift", 17}, {"sms", 4},
           {"threads", 2}, {"warps", 1}},
         "a lane whose superbin ahead of demand could not be had signals its units anyway: units without a bin"),
      // GROWs known to fail are refused (design.md §13.5)
      mb("ualloc.refuse-despite-promises", "fail-fast", "promise-race", P{{"bug", 100}},
         "the refusal of a GROW known to fail is asked before the class semaphore's CAS loop, not where it would promise: "
         "a request that another group's promised slots cover gets nullptr")
          .with(pct)
          .faults(fault_bit(fault_site::stall_grow))
          .depth(1),
      mb("ualloc.refuse-keeps-promise", "liveness", "exhaust-recover", P{{"bug", 101}, {"heap_kib", 512}, {"size", 1024}, {"threads", 8}},
         "a GROW refused after its promise was made keeps the promise: waiters wait for units nobody makes")
          .depth(0),
      mb("ualloc.refuse-ignores-chunk-bins", "fail-fast", "refuse-race", P{{"bug", 102}},
         "a chunk-class GROW is refused from TBuddy's recorded failure and a clean reclaim record alone, while the arena's "
         "chunk has a free bin: a request the chunk would serve gets nullptr")
          .depth(0)
          .equivalent("since the fallback borrows free chunk bins, its own arena's first (design.md §8.6, 2026-12-02), a refused "
                      "group takes the chunk's free bin there: the refusal costs a GROW's promise, not a nullptr (survived 10,000)"),
      // a superbin class's fallback refused at once (design.md §13.5): the stall after a chunk-class
      // GROW's take holds the window open in which another group's decision must see the promise
      mb("ualloc.at-once-ignores-promises", "fail-fast", "fallback-race", P{{"bug", 103}},
         "refused_at_once judges C alone, not C + E - R: a superbin class's fallback is sent to the scan while the units "
         "another group's GROW of the chunk's last bin promised would serve it")
          .with(pct)
          .faults(fault_bit(fault_site::stall_grow))
          .depth(1),
      mb("ualloc.at-once-unconfirmed", "fail-fast", "fallback-race", P{{"bug", 104}},
         "refused_at_once's refusal is not confirmed on the unchanged semaphore word: a snapshot without another "
         "group's promise and a chunk record with that group's take make the records say fail while promised units would "
         "serve the group")
          .weak()
          .faults(fault_bit(fault_site::stall_grow))
          .depth(0)
          .ci(),
      mb("ualloc.cas-refusal-unconfirmed", "fail-fast", "fallback-race", P{{"bug", 105}},
         "the CAS loop's refusal of a GROW known to fail is not confirmed on the unchanged semaphore word: a snapshot "
         "without another group's promise and a chunk record with its take make the records say fail")
          .weak()
          .faults(fault_bit(fault_site::stall_grow) | fault_bit(fault_site::stall_read_to_rmw)),
      // superbins (E6, design.md §11), in the scaled geometry of the superbins scenario
      mb("ualloc.superbin-tag-not-set", "routing", "superbins", P{{"bug", 21}},
         "a GROW makes a superbin without tagging its TBuddy node").depth(0).ci(),
      mb("ualloc.superbin-slot-past-end", "off-by-one", "superbins", P{{"bug", 22}},
         "a superbin counts one slot more than it holds: the last lies past its end").depth(0),
      mb("ualloc.superbin-returned-live", "reclamation", "superbins", P{{"bug", 23}},
         "a superbin with live slots is returned to TBuddy").depth(1),
      mb("ualloc.superbin-free-to-tbuddy", "routing", "superbins", P{{"bug", 24}},
         "a free of a 4 KiB-aligned superbin slot is routed to TBuddy without looking at the tag").depth(0),
      mb("ualloc.superbin-route-coarse", "routing", "superbins", P{{"bug", 44}},
         "a free looks at the superbin tag only on 256 B boundaries: a 64 B or 128 B slot off them is freed as a chunk slot").depth(0),
      // TBuddy groups (E7, design.md §10.4): carved runs and tile frees of warps asking one order
      mb("tbuddy.run-leftover-unsignalled", "liveness", "exhaust-recover", P{{"bug", 25}, {"threads", 4}, {"size", 8192}},
         "a carved run publishes its leftover nodes but never delivers their promised units").depth(0),
      mb("tbuddy.run-boundary-off-by-one", "off-by-one", "exhaust-recover", P{{"bug", 26}, {"threads", 3}, {"size", 8192}},
         "a carved run publishes its leftover from block g - 1 on (the last lane's block too)").depth(0),
      mb("tbuddy.tile-free-keeps-leaves", "reclamation", "exhaust-recover", P{{"bug", 27}, {"threads", 4}, {"size", 8192}},
         "a tile free frees the whole block but leaves the lanes' nodes ALLOCATED below it").depth(1),
      mb("ualloc.reclaim-gate-left-closed", "liveness", "exhaust-recover", P{{"bug", 28}, {"threads", 4}, {"size", 16}},
         "a reclaim ends without opening the heap's reclaim gate: the next lane that needs one waits forever").depth(0),
      // the fallback of 256 B .. 1 KiB to UAlloc's classes when no superbin can be had (lane 0's 16 B
      // anchor holds a chunk; the byte limit leaves room for it and one 8 KiB superbin)
      mb("ualloc.fallback-ignores-alignment", "routing", "superbins",
         P{{"bug", 29}, {"size", 1024}, {"align", 1024}, {"anchor", 16}, {"sms", 1}, {"sb_shift", 13}, {"heap_kib", 1024}, {"limit_kib", 520}},
         "a 1 KiB request aligned to 1 KiB falls back to a UAlloc slot (128 B aligned) when no superbin can be had").depth(0),
      // superbin arenas shared by SMs (heap_layout::sb_arenas): both SMs must use arena 0
      mb("ualloc.superbin-arena-ignores-sharing", "routing", "superbins", P{{"bug", 30}, {"sb_arenas", 1}},
         "with one superbin arena for two SMs, SM 1 still allocates from superbin arena 1 (outside the arenas in use)").depth(0),
      // stealing idle superbin units from another arena before a GROW (design.md §11.8)
      mb("ualloc.steal-searches-own-arena", "accounting", "superbins", P{{"bug", 31}},
         "a group that took another arena's units searches its own arena's superbins for its reservation").depth(0),
      // the views' resident copies that out-of-line members run on (design.md §8.8)
      mb("ualloc.resident-views-unpublished", "publication", "mixed-sizes", P{{"bug", 32}},
         "init_after_zero never writes the views' copies in the metadata: the out-of-line paths run on a zeroed view").depth(0),
      mb("ualloc.find-without-warp-barrier", "its", "adopt-race", P{{"bug", 33}},
         "find_reservation's leader reserves in (and re-pins) a bin that another lane acquired from a pin, without the "
         "__syncwarp that gives the leader that lane's view: a later fast path reads the superbin's tag stale")
          .gpu().weak()
          .faults(fault_bit(fault_site::stall_read_section))
          .depth(2)
          .note("at least 2 deviations on 2026-11-27's core: in adopt-race under --memory weak without faults the "
                "delay-bounded search with 1 is complete without a failure (2,631 schedules); the failure needs the third "
                "warp to hold its unit across the producer's signal (a stall in the fast path's read-side section) and a "
                "stale read; in rounds (32 lanes a warp) it shrank to 746 preemptions (simulator.md 16.6)"),
      // growable heaps (design.md §12)
      mb("ualloc.free-into-unmapped", "routing", "grow-while-alloc", P{{"bug", 34}},
         "a free of an address in an unmapped granule does not look at the tag and touches memory that is not there")
          .depth(0),
      mb("ualloc.trim-without-reclaim", "reclamation", "trim-after-churn", P{{"bug", 35}},
         "a trim withdraws granules without reclaiming UAlloc's empty bins, chunks and superbins first: memory stays mapped")
          .depth(0),
      mb("tbuddy.adopt-without-merge", "liveness", "grow-while-alloc", P{{"bug", 36}},
         "adopt publishes the granule AVAILABLE without merging it with its free buddy: larger blocks cannot be had")
          .depth(0),
      mb("tbuddy.adopt-uncharges-limit", "accounting", "grow-while-alloc", P{{"bug", 37}},
         "adopt frees the granule through the charging path: the byte count of handed-out blocks drops below zero")
          .depth(0),
      mb("tbuddy.withdraw-used-granule", "reclamation", "trim-after-churn", P{{"bug", 38}},
         "a trim withdraws a granule inside a chunk or a superbin, whose live slots are then unmapped under their owners")
          .depth(0),
      // failing fast (design.md §13): recorded TBuddy failures and clean reclaim walks
      mb("tbuddy.free-skips-generation", "fail-fast", "exhaust-recover", P{{"bug", 39}},
         "a TBuddy free does not count its publication: a failure recorded at exhaustion outlives every free, and the "
         "recovery request gets nullptr")
          .depth(0),
      mb("tbuddy.failure-read-late", "fail-fast", "failfast-race", P{{"bug", 40}},
         "a failed climb reads the publication count after the climb: a free that completed during the climb is lost, "
         "and later requests fail although its block is free")
          .depth(1),
      mb("tbuddy.failure-covers-smaller", "fail-fast", "failfast-race", P{{"bug", 41}},
         "a failed climb of order k records a failure for the orders below k too: a free smaller block is refused")
          .depth(0),
      // (2026-12-02: T8 at 8 KiB spent 43 ms in its exhausting launch, 2,149 of 2,386 climbs to the root
      // failing with a stale record; design.md §13.1) in the shape random shapes drew when they killed it
      // at schedule 6 (the default shape survives 3,000)
      mb("tbuddy.failure-record-overwritten", "fail-fast", "exhaust-recover",
         P{{"bug", 116}, {"anchor", 1031}, {"heap_kib", 128}, {"keep", 6}, {"leak", 1}, {"limit_kib", 2048}, {"ops", 2}, {"pins", 1}, {"presplit_kib", 512}, {"sb_arenas", 1}, {"sms", 3}, {"threads", 8}, {"warps", 3}},
         "a failed climb stores its failure record instead of moving it forward (fetch_max): a climb that began long "
         "ago replaces a current record with its stale one, and every climber after it climbs to the root again (F1)"),
      // refused waits (2026-12-02: T14 (b)'s exhausting fill, every waiter released by a withdrawal promising a climb
      // of its own; design.md §13.1). 117 needs a record to appear between a climb's stop test and its next wait:
      // the default shape survives 3,000 schedules, random shapes kill it at 6 (alloc-storm 21), the drawn shape at 1
      mb("tbuddy.climb-refusal-keeps-promises", "liveness", "exhaust-recover",
         P{{"bug", 117}, {"anchor", 1031}, {"heap_kib", 128}, {"keep", 6}, {"leak", 1}, {"limit_kib", 2048}, {"ops", 2}, {"pins", 1}, {"presplit_kib", 512}, {"sb_arenas", 1}, {"sms", 3}, {"threads", 8}, {"warps", 3}},
         "a climb whose wait is refused at a recorded failure, at a level above its order, does not withdraw the units "
         "it promised below: their waiters wait for blocks that never come"),
      mb("tbuddy.climb-refusal-ignores-generation", "fail-fast", "exhaust-recover", P{{"bug", 118}},
         "a climb's wait is refused at any failure ever recorded for its order, also one that frees have since made "
         "stale: the recovery request gets nullptr from an empty heap")
          .depth(0),
      mb("ualloc.empty-bin-unnoted", "fail-fast", "clean-race", P{{"bug", 42}},
         "a free that empties a bin does not count a reclaim change: a clean record outlives the empty bin")
          .depth(0),
      mb("ualloc.clean-read-late", "fail-fast", "clean-race", P{{"bug", 43}},
         "a reclaim walk reads the change count after walking: a bin emptied behind the walk is recorded clean")
          .depth(1),
      // (the correct core's behaviour until 2026-11-29: found by undo-race, design.md §13.2)
      mb("ualloc.undo-to-empty-unnoted", "fail-fast", "undo-race", P{{"bug", 90}},
         "an undone reservation that leaves its bin with every slot free counts no reclaim change: a clean record "
         "outlives the empty pinned bin")
          .with(pct, 3)
          .faults(fault_bit(fault_site::stall_read_to_rmw) | fault_bit(fault_site::stall_speculative_undo))
          .depth(2)
          .note("two stalls of one lane: between its look at a bin and its reservation, and before the undo; not killed "
                "in 10,000 schedules without the fault sites"),
      // the pre-split reserve (design.md §10.5)
      mb("tbuddy.presplit-no-drain", "exhaustion", "presplit-race", P{{"bug", 45}},
         "a climb that finds the tree empty fails without draining the pre-split reserve: a quarter of the heap is refused "
         "while the reserve's blocks are free")
          .depth(0),
      mb("tbuddy.presplit-take-racy", "atomicity", "exhaust-recover",
         P{{"bug", 46}, {"heap_kib", 1024}, {"sb_shift", 15}, {"presplit_kib", 512}, {"size", 4096}, {"sms", 2}, {"warps", 2}, {"threads", 1}},
         "a climb takes a block of the reserve by a load and a store, not one fetch_add: two arenas get the same superbin")
          .depth(1),
      mb("tbuddy.presplit-drain-charged", "accounting", "presplit-race", P{{"bug", 47}},
         "a drain frees the reserve's blocks through the charging path: the byte count of handed-out blocks drops below "
         "what the tree holds")
          .depth(0),
      // a climb stops at a recorded failure (design.md §13.1)
      mb("tbuddy.climb-stop-keeps-promises", "liveness", "exhaust-recover", P{{"bug", 53}, {"threads", 4}},
         "a climb that stops at a failure another climb recorded does not withdraw its promises: waiters below wait for "
         "blocks that never come, and the levels' E stays above zero")
          .depth(1),
      mb("tbuddy.climb-stop-ignores-generation", "fail-fast", "exhaust-recover", P{{"bug", 54}},
         "a climb stops at any failure ever recorded for its order, also one that frees have since made stale: the "
         "recovery request gets nullptr from an empty heap")
          .depth(0),
      // granules sized by demand (design.md §12.8)
      mb("tbuddy.withdraw-splits-run", "accounting", "trim-after-churn", P{{"bug", 55}, {"run_granules", 4}},
         "a trim withdraws the wholly free granules of a run whose other granules hold blocks: the host unmaps the run's "
         "one handle under live blocks (G8)")
          .depth(0),
      mb("tbuddy.adopt-run-keeps-tags", "accounting", "grow-while-alloc", P{{"bug", 56}, {"run_granules", 4}},
         "adopting a run of granules as one block leaves the granules tagged unmapped: a free of a block that covers a "
         "granule is dropped as a free of unmapped memory")
          .depth(0),
      mb("tbuddy.presplit-drain-unseen", "exhaustion", "presplit-race", P{{"bug", 48}},
         "a climb that fails at the root after another climb drained the reserve at levels it had passed does not climb "
         "again: a quarter of the heap is refused while the drained blocks are free")
          .depth(1),
      // the shared reclaim walk (design.md §9.4; also the deterministic test
      // Allocator.SharedReclaimWalkReportsItsLastItem)
      mb("ualloc.walk-claim-any-tag", "atomicity", "exhaust-recover", P{{"bug", 49}},
         "a lane walks the item its claim got while the cursor still has the last walk's tag: its count makes the walk "
         "end while an item is being walked")
          .depth(1),
      mb("ualloc.walk-ends-early", "liveness", "superbins", P{{"bug", 50}},
         "the lane that counts the next-to-last item ends the reclaim walk: the gate opens while the last item is walked")
          .depth(0),
      mb("ualloc.walk-flags-after-count", "atomicity", "clean-race", P{{"bug", 51}},
         "a lane counts its item of the reclaim walk before it adds what the item gave back: the walk's last item "
         "ends the walk with a result that misses it")
          .depth(0),
      // found by random shapes under weak memory (simulator.md §18.3): the GROW's hand-over of the
      // leader's bins to its members
      mb("ualloc.grow-bins-without-warp-barrier", "its", "grow-while-alloc", P{{"bug", 52}, {"sms", 3}, {"threads", 26}, {"warps", 2}, {"ops", 2}, {"keep", 1}, {"granule_kib", 128}, {"heap_kib", 4096}},
         "a chunk-class GROW's members init and pin the bins the leader broadcast, without the __syncwarp that gives "
         "them the leader's view: a lane that takes such a bin reads a granule's or a superbin's routing state stale "
         "and drops or misroutes a free")
          .gpu().weak(),
      // found by random shapes under weak memory (simulator.md §18.3): the members' pin-slot reads
      // in stage 2 after the leader entered its read-side section in the slow path
      mb("ualloc.find-before-section-barrier", "its", "mixed-sizes",
         P{{"bug", 57}, {"heap_kib", 1024}, {"keep", 2}, {"leak", 0}, {"ops", 3}, {"pins", 3}, {"sb_shift", 0}, {"sms", 1}, {"threads", 19}, {"warps", 3}},
         "a group whose leader entered its read-side section in the slow path (the CAS loop, a steal) searches the pin "
         "slots without the __syncwarp after it: a member reads a slot emptied before the epoch flip the leader saw and "
         "hands the leader a bin already released and reused by another class (overlapping blocks)")
          .gpu().weak(),
      // issue 34's yardstick (simulator.md §18.6): bugs the scenarios' default shapes miss in
      // 10,000 portfolio schedules; the shapes here are those random shapes drew when they killed them
      mb("ualloc.leave-findable-skips-last-slot", "reclamation", "exhaust-recover",
         P{{"bug", 58}, {"align", 512}, {"anchor", 1024}, {"heap_kib", 2048}, {"keep", 2}, {"leak", 1}, {"ops", 12}, {"pins", 3}, {"presplit_kib", 1024}, {"sb_shift", 16}, {"sms", 3}, {"threads", 1}, {"warps", 1}},
         "a retired bin leaves every pin slot but the last: after it is reused the last slot still offers it to its old class (U2' a pinned bin is DEAD)")
          .with(pct, 2),
      mb("ualloc.claim-hint-wraps-late", "off-by-one", "alloc-storm",
         P{{"bug", 59}, {"align", 2}, {"anchor", 256}, {"heap_kib", 64}, {"keep", 2}, {"limit_kib", 16}, {"ops", 5}, {"presplit_kib", 1024}, {"sb_shift", 14}, {"size", 77}, {"sms", 2}, {"threads", 16}, {"warps", 3}},
         "claim_bits wraps its hint to 0 only past the capacity: a hint equal to it reads the word after the class's and claims bits there (U1')")
          .note("re-shaped 2026-11-30 with the free hint (the fast path's guess moved the slow path's hints): the shape random "
                "shapes drew when they killed it at schedule 1,439 (alloc-storm, seed 1); the shape before (align=1024 "
                "anchor=9714 coalesced=1 heap_kib=4096 keep=3 ops=12 presplit_kib=64 sms=1 threads=6 warps=3, random "
                "strategy) survives 10,000 schedules since"),
      mb("ualloc.reclaim-inbox-drops-partial", "list-integrity", "alloc-storm",
         P{{"bug", 60}, {"align", 32}, {"coalesced", 1}, {"heap_kib", 512}, {"keep", 3}, {"leak", 1}, {"limit_kib", 1024}, {"ops", 7}, {"pins", 2}, {"presplit_kib", 128}, {"sb_arenas", 4}, {"sb_shift", 0}, {"size", 1024}, {"sms", 2}, {"threads", 8}, {"warps", 4}},
         "reclaim's inbox pass drops bins with free slots, neither pinned nor queued: their units stay signalled and no search finds them (livelock)")
          .with(random),
      mb("ualloc.grow-batches-floor", "off-by-one", "grow-while-alloc",
         P{{"bug", 61}, {"align", 4}, {"coalesced", 1}, {"granule_kib", 128}, {"heap_kib", 4096}, {"keep", 1}, {"ops", 2}, {"pins", 1}, {"presplit_kib", 256}, {"run_granules", 8}, {"sb_shift", 14}, {"size", 1024}, {"sms", 3}, {"threads", 32}, {"warps", 2}},
         "a GROW for a group larger than a bin makes floor(t / cap) bins: the group's leftover overflows the semaphore (S1)")
          .with(pct, 2),
      mb("ualloc.set-slot-dead-check-relaxed", "memory-order", "exhaust-recover",
         P{{"bug", 62}, {"align", 512}, {"heap_kib", 2048}, {"keep", 5}, {"leak", 1}, {"limit_kib", 512}, {"ops", 4}, {"pins", 4}, {"presplit_kib", 512}, {"sb_arenas", 3}, {"size", 16384}, {"sms", 1}, {"threads", 9}, {"warps", 2}},
         "set_slot checks for a retirement that raced with its CAS by a relaxed load: under weak memory it reads a stale count and the retired bin stays pinned (U2')")
          .with(random).weak(),
      mb("ualloc.alignment-limit-doubled", "routing", "grow-while-alloc",
         P{{"bug", 63}, {"align", 256}, {"anchor", 32768}, {"coalesced", 1}, {"granule_kib", 128}, {"heap_kib", 512}, {"keep", 3}, {"leak", 1}, {"ops", 7}, {"presplit_kib", 128}, {"run_granules", 8}, {"sb_shift", 0}, {"sms", 2}, {"threads", 8}, {"warps", 3}},
         "allocate(bytes, alignment) lets UAlloc's 128 B-aligned slots serve 256 B alignment (G4)")
          .with(pct, 3),
      mb("ualloc.free-or-over-group", "atomicity", "grow-while-alloc",
         P{{"bug", 65}, {"anchor", 1269}, {"coalesced", 1}, {"granule_kib", 512}, {"heap_kib", 4096}, {"keep", 3}, {"leak", 1}, {"limit_kib", 128}, {"ops", 8}, {"run_granules", 2}, {"sb_shift", 17}, {"size", 64}, {"sms", 2}, {"threads", 8}, {"warps", 3}},
         "a group free ORs the lanes' bits over the whole group, not per word: each word leader clears other words' positions in its word (G1)")
          .with(pct, 2),
      mb("ualloc.hold-queued-no-wait", "list-integrity", "superbins",
         P{{"bug", 66}, {"align", 4096}, {"coalesced", 1}, {"heap_kib", 256}, {"keep", 6}, {"ops", 7}, {"pins", 1}, {"sb_arenas", 2}, {"sms", 3}, {"threads", 32}, {"warps", 1}},
         "a taker holds a bin that a pusher or another taker still holds (state 2): two holders of one inbox bin (U5: a retired bin still in use)")
          .with(random),
      mb("tbuddy.group-run-floor-log2", "off-by-one", "alloc-storm",
         P{{"bug", 68}, {"align", 32}, {"anchor", 16384}, {"coalesced", 1}, {"heap_kib", 128}, {"keep", 5}, {"ops", 7}, {"sb_arenas", 3}, {"sb_shift", 14}, {"size", 32768}, {"sms", 4}, {"threads", 32}, {"warps", 1}},
         "a group's carved run has 2^floor(log2 g) TBuddy blocks, not 2^ceil: the lanes past it get blocks outside the run (S1 overflow)")
          .with(random),
      mb("tbuddy.group-charges-whole-run", "accounting", "alloc-storm",
         P{{"bug", 69}, {"align", 32}, {"anchor", 16384}, {"coalesced", 1}, {"heap_kib", 128}, {"keep", 5}, {"ops", 7}, {"sb_arenas", 3}, {"sb_shift", 14}, {"size", 32768}, {"sms", 4}, {"threads", 32}, {"warps", 1}},
         "a group that carves a run charges the byte limit for the whole run, not its g blocks (the byte count and the blocks disagree)")
          .with(random),
      mb("ualloc.grow-pins-from-two-left", "list-integrity", "alloc-storm",
         P{{"bug", 72}, {"align", 32}, {"coalesced", 1}, {"heap_kib", 512}, {"keep", 3}, {"leak", 1}, {"limit_kib", 1024}, {"ops", 7}, {"pins", 2}, {"presplit_kib", 128}, {"sb_arenas", 4}, {"sb_shift", 0}, {"size", 1024}, {"sms", 2}, {"threads", 8}, {"warps", 4}},
         "a GROW pins its new bin only when two or more slots are left: a bin with one free slot stays unfindable while its unit is signalled")
          .with(random),
      mb("ualloc.undo-crossing-from-zero-missed", "list-integrity", "grow-while-alloc",
         P{{"bug", 73}, {"align", 256}, {"anchor", 98}, {"coalesced", 1}, {"granule_kib", 64}, {"heap_kib", 256}, {"keep", 5}, {"limit_kib", 32}, {"ops", 7}, {"pins", 4}, {"presplit_kib", 128}, {"run_granules", 4}, {"sb_arenas", 4}, {"sb_shift", 13}, {"size", 1}, {"sms", 2}, {"threads", 8}, {"warps", 3}},
         "an undo of a reservation makes the bin findable only from a negative count, not from exactly 0: a bin with free slots can stay unfindable")
          .with(stall),
      mb("ualloc.claim-stays-on-full-word", "liveness", "exhaust-recover",
         P{{"bug", 75}, {"align", 4}, {"anchor", 32}, {"coalesced", 1}, {"heap_kib", 2048}, {"keep", 4}, {"limit_kib", 128}, {"ops", 4}, {"pins", 4}, {"presplit_kib", 1024}, {"sb_shift", 16}, {"size", 256}, {"sms", 3}, {"threads", 3}, {"warps", 1}},
         "claim_bits moves its hint to the last bit of a full word instead of to the next word")
          .with(stall),
      mb("ualloc.retire-queued-deferred-twice", "reclamation", "exhaust-recover",
         P{{"bug", 79}, {"align", 512}, {"anchor", 1024}, {"heap_kib", 2048}, {"keep", 2}, {"leak", 1}, {"ops", 12}, {"pins", 3}, {"presplit_kib", 1024}, {"sb_shift", 16}, {"sms", 3}, {"threads", 1}, {"warps", 1}},
         "a retirer that finds the bin queued (state 1) defers it itself while the taker that meets state 3 defers it too")
          .with(pct, 2),
      mb("ualloc.placement-race-pushed-back", "list-integrity", "alloc-storm",
         P{{"bug", 83}, {"align", 0}, {"anchor", 0}, {"heap_kib", 1024}, {"keep", 2}, {"limit_kib", 0}, {"ops", 4}, {"pins", 2}, {"presplit_kib", 0}, {"sb_arenas", 2}, {"sb_shift", 0}, {"size", 600}, {"sms", 1}, {"threads", 16}, {"warps", 3}},
         "a taker whose pin CAS lost while a set_slot displaced the bin's borrowed entry and queued it keeps the bin for its own push-back too: "
         "the bin is queued twice (the inbox's links form a cycle, or a chunk's bin count goes wrong: U3)")
          .with(stall),
      mb("ualloc.slow-take-not-flushed", "reclamation", "grow-while-alloc",
         P{{"bug", 84}, {"align", 0}, {"anchor", 0}, {"coalesced", 1}, {"granule_kib", 64}, {"heap_kib", 1024}, {"keep", 1}, {"leak", 1}, {"limit_kib", 0}, {"ops", 3}, {"pins", 1}, {"presplit_kib", 0}, {"run_granules", 1}, {"sb_arenas", 2}, {"sb_shift", 0}, {"size", 512}, {"sms", 1}, {"threads", 8}, {"warps", 3}},
         "the slow path drops take_inbox's deferral: a bin retired while queued waits in RCU for a flush that may never come (U5: a DEAD bin still in use)")
          .with(stall),
      // planted as yardstick members, found equivalent (simulator.md §18.6): no execution of the core
      // with them breaks what the scenarios check
      mb("ualloc.push-back-marks-before-link", "list-integrity", "alloc-storm", P{{"bug", 64}},
         "take_inbox marks a pushed-back bin queued before reading its link")
          .equivalent("a taker can relink the marked bin only after holding the next bin of the chain, which is still held "
                      "(state 2) until the pusher has read the link and marked it"),
      mb("ualloc.chunk-signal-after-unlock", "reclamation", "alloc-storm", P{{"bug", 67}},
         "release_bin signals the chunk's freed bin after releasing the chunk mutex")
          .equivalent("the late unit only lets another releaser's try_wait take a unit of the other free chunk, which the "
                      "signal gives back; a chunk stays cached to the next reclaim (and the shapes never have two free chunks in an arena)"),
      mb("ualloc.free-cold-no-reread", "reclamation", "alloc-storm", P{{"bug", 77}},
         "a cold free retires only when its own count made the bin empty")
          .equivalent("the re-read matters only after an undo brought the count to the capacity; the holder of those units "
                      "reserves again, and otherwise the next reclaim walk retires the bin (no check asks for prompt retirement)"),
      // the walk's batched loads (design.md §9.4): plausible mistakes of the batching that no check
      // sees (the walk's decisions are its RMWs')
      mb("ualloc.walk-batch-retries-twice", "reclamation", "exhaust-recover", P{{"bug", 106}},
         "the walk's batched pin scan tries a bin held by two slots of one batch twice")
          .equivalent("the second try_retire takes the class's units of a bin already retired, fails its CAS and gives them "
                      "back: the walk reports a skip it caused (never a false clean record), and a take that meets the "
                      "missing units waits or grows as it would behind any holder"),
      mb("ualloc.walk-pins-unacquired", "reclamation", "exhaust-recover", P{{"bug", 107}},
         "the walk's batched pin loads have no acquire fence before it reads the bins' counts")
          .weak()
          .equivalent("the count it reads is a hint: try_retire takes the units and CASes the count (acq_rel RMWs that read "
                      "the newest value), so a stale count only makes the try fail; the walk touches no plain field of the bin"),
      // the walk's per-class filter on the arena's bin counts (design.md §9.4): the shape random shapes
      // drew when they killed it (exhaust-recover, portfolio, seed 310)
      mb("ualloc.walk-filter-skips-chunks", "reclamation", "exhaust-recover",
         P{{"bug", 109}, {"align", 0}, {"anchor", 0}, {"coalesced", 1}, {"heap_kib", 512}, {"keep", 1}, {"limit_kib", 0}, {"ops", 2}, {"pins", 2}, {"presplit_kib", 0}, {"sb_shift", 0}, {"size", 1024}, {"sms", 1}, {"threads", 24}, {"warps", 2}},
         "the walk skips an arena whose every class count reads 0 whole: its cached free chunk never goes back to TBuddy (recovery)")
          .with(pct, 2),
      // the out-of-memory fallback's take in another arena as a group (design.md §8.6): the shape random
      // shapes drew when they killed both (superbins, seed 25); both fail without a preemption there
      mb("ualloc.fallback-group-overtakes", "accounting", "superbins", fallback_shape(110),
         "the fallback's take in another arena: every failed lane counts itself served when the leader took fewer units "
         "than lanes (stage 2 for slots nobody holds units of: livelock)")
          .depth(0),
      mb("ualloc.fallback-group-rank-off-by-one", "off-by-one", "superbins", fallback_shape(111),
         "the fallback's take in another arena: one lane more than the units taken runs stage 2 there (livelock)")
          .depth(0),
      // the fallback from the group's own arena (branch exp/own-arena-units): the shape in which the
      // exhaust scenario's strict check first showed the correct core's leftover unit (random, seed 49)
      mb("ualloc.fallback-skips-own-arena", "fail-fast", "exhaust-recover",
         P{{"bug", 112}, {"anchor", 64}, {"coalesced", 1}, {"heap_kib", 2048}, {"keep", 1}, {"ops", 2}, {"sb_arenas", 4}, {"sb_shift", 15}, {"sms", 1}, {"threads", 8}, {"walker", 1}, {"warps", 4}},
         "the out-of-memory fallback scans only the other arenas: a group larger than its own arena's units, refused a GROW "
         "known to fail, fails every lane while those units stay (nullptr with memory left)"),
      // the fallback borrows other arenas' free chunk bins (2026-12-02): shapes that random shapes of
      // exhaust-recover drew when they killed each (113 needs SM 0's arena left with a partly used
      // chunk while the other SMs exhaust the heap: sm0_ops)
      mb("ualloc.fallback-never-borrows", "fail-fast", "exhaust-recover",
         P{{"bug", 113}, {"anchor", 16}, {"heap_kib", 512}, {"keep", 3}, {"ops", 5}, {"presplit_kib", 64}, {"sb_arenas", 1}, {"size", 1024}, {"sm0_ops", 1}, {"sms", 4}, {"threads", 8}, {"warps", 2}},
         "chunk classes: the out-of-memory fallback takes no other arena's free chunk bins: lanes fail while bins of another "
         "arena's chunk are free (T8's kind of loss)"),
      mb("ualloc.borrowed-bin-to-bin-arena", "list-integrity", "exhaust-recover",
         P{{"bug", 114}, {"align", 32}, {"coalesced", 1}, {"heap_kib", 512}, {"keep", 3}, {"leak", 1}, {"limit_kib", 1024}, {"ops", 7}, {"pins", 2}, {"presplit_kib", 128}, {"sb_arenas", 4}, {"sb_shift", 0}, {"size", 1024}, {"sms", 2}, {"threads", 8}, {"walker", 1}, {"warps", 4}},
         "release_bin returns a borrowed bin to its class list's arena's chunk list, not to its chunk's arena (U3)"),
      mb("ualloc.borrowed-chunk-cached", "fail-fast", "exhaust-recover",
         P{{"bug", 115}, {"align", 32}, {"coalesced", 1}, {"heap_kib", 512}, {"keep", 3}, {"leak", 1}, {"limit_kib", 1024}, {"ops", 7}, {"pins", 2}, {"presplit_kib", 128}, {"sb_arenas", 4}, {"sb_shift", 0}, {"size", 1024}, {"sms", 2}, {"threads", 8}, {"walker", 1}, {"warps", 4}},
         "a chunk emptied by a borrowed bin's release stays cached in its arena: the walk that retired the bin leaves the "
         "chunk to a later walk (a request after every free gets nullptr)"),
      // planted with the yardstick's bugs but killed by a scenario's default shape (not yardstick members)
      mb("ualloc.super-fallback-bound-doubled", "routing", "superbins", P{{"bug", 70}},
         "a superbin request that gets no superbin falls back to UAlloc's classes up to 2 KiB, past the last class (livelock)"),
      mb("ualloc.retire-takes-one-unit-short", "accounting", "superbins", P{{"bug", 74}},
         "a retirement takes cap - 1 of the bin's units: one unit stays signalled for slots that are gone (livelock)"),
      mb("tbuddy.group-failure-keeps-charge", "accounting", "exhaust-recover", P{{"bug", 76}},
         "a group request that gets no TBuddy block keeps its byte-limit charge (the byte count and the blocks disagree)"),
      mb("ualloc.init-bin-keeps-queued", "list-integrity", "superbins", P{{"bug", 78}},
         "init_bin leaves the inbox state of the bin's previous life (3, retired): the new bin is never queued (U2')"),
      mb("ualloc.steal-locks-old-arena", "reclamation", "alloc-storm", P{{"bug", 80}},
         "a group that stole another arena's units enters its own arena's read-side section and leaves the other's (R4)"),
      mb("ualloc.more-claims-from-zero", "off-by-one", "grow-while-alloc", P{{"bug", 82}},
         "the fast path's second claim asks for t more bits, not t minus those it got: bits claimed for nobody (U1)"),
      mb("ualloc.overproduced-bin-unnoted", "fail-fast", "superbins",
         P{{"bug", 81}, {"heap_kib", 512}, {"keep", 3}, {"leak", 1}, {"ops", 2}, {"pins", 2}, {"presplit_kib", 64}, {"sb_arenas", 4}, {"sms", 3}, {"threads", 32}, {"warps", 2}},
         "a GROW that pins an over-produced empty bin counts no reclaim change: the heap is recorded clean while a walk would give it back")
          .with(pct, 3),
      // owned()'s batched scan (2026-11-29: eight pin slots a round trip)
      mb("ualloc.owned-scan-ends-true", "list-integrity", "exhaust-recover",
         P{{"bug", 87}, {"coalesced", 1}, {"heap_kib", 1024}, {"keep", 5}, {"leak", 1}, {"ops", 2}, {"pins", 2}, {"sb_shift", 17}, {"sms", 2}, {"threads", 1}, {"warps", 3}},
         "owned()'s batched scan answers yes when no slot holds the bin: a bin refilled from exhausted is never made findable (S5, or a livelock)"),
      // make_findable over the slots owned() saw open (2026-11-29: no second scan of the pin slots)
      mb("ualloc.open-slots-lost-no-enqueue", "list-integrity", "alloc-storm",
         P{{"bug", 88}, {"align", 1}, {"anchor", 256}, {"coalesced", 1}, {"heap_kib", 1024}, {"keep", 2}, {"limit_kib", 1024}, {"ops", 12}, {"sb_shift", 16}, {"size", 16384}, {"sms", 1}, {"threads", 4}, {"warps", 2}},
         "make_findable drops a refilled bin when every pin slot owned() saw open was taken before its CAS, instead of queuing it (U2': a bin with free slots neither pinned nor queued)"),
      // the first superbin before any steal (2026-11-29: an arena steals only once it has gone to GROW for the class)
      mb("ualloc.steal-grew-per-lane", "warp-mask", "alloc-storm",
         P{{"bug", 89}, {"align", 4096}, {"anchor", 6191}, {"coalesced", 1}, {"heap_kib", 256}, {"keep", 2}, {"ops", 3}, {"pins", 1}, {"presplit_kib", 1024}, {"sb_arenas", 2}, {"sb_shift", 16}, {"sms", 2}, {"threads", 16}, {"warps", 3}},
         "steal_units: each lane reads the arena's first-GROW flag itself; under weak memory lanes that disagree leave the collective steal apart (a warp collective over lanes that are not there)")
          .weak().gpu(),
      // ---- tenants inside one heap (toga/tenants.hpp, scenarios_tenants.cpp) -----------------------
      mb("tenant.free-credits-caller", "accounting", "tenants", P{{"bug", 1}},
         "a free credits the freeing handle's tenant instead of the block's (frees across tenants)")
          .depth(0),
      mb("tenant.quota-checked-before-charge", "atomicity", "tenants", P{{"bug", 2}},
         "the quota is checked with a load before the charge is added: two lanes of a tenant pass it together"),
      mb("tenant.charge-kept-on-heap-failure", "accounting", "tenants", P{{"bug", 3}},
         "a request the heap cannot serve keeps its charge to the tenant"),
      // ---- heaps shared by devices (toga/sharing.hpp's system_scoped, scenarios_sharing.cpp) ------------
      mb("sharing.device-scope-on-two-devices", "scope", "two-devices", P{{"bug", 1}},
         "the heap's words keep device scope (a one-device heap) while kernels of two devices use it: not morally strong")
          .depth(0),
      // ---- the growth service (toga/growth_service.hpp, scenarios_service.cpp) ------------------------
      mb("service.published-before-mapped", "publication", "grow-service", P{{"bug", 1}, {"budget", 1}},
         "the service publishes a granule's offset before mapping it: a granule whose mapping then fails is adopted")
          .depth(1),
      mb("service.adopt-lock-not-atomic", "atomicity", "grow-service", P{{"bug", 2}, {"warps", 3}, {"threads", 4}, {"ops", 3}},
         "the adopters' try-lock is a load and a store: two threads adopt one published granule")
          .note("one preemption between the load and the store suffices; shrinking stopped at 42 (2026-11-28)"),
      mb("service.lost-wakeup", "liveness", "grow-service", P{{"bug", 3}, {"warps", 2}, {"threads", 2}, {"ops", 3}},
         "a waiter waits for the service's round to change from a value read after it posted: a round that "
         "answered in between is missed and the waiter never wakes")
          .with(stall)
          .note("since the relay (2026-11-28) the answer must cross a courier, a round and a courier while the waiter is "
                "between its post and its read: the shape 3x4 lanes x 3 ops with the portfolio needed 35,916 schedules; "
                "2x2 lanes x 3 ops with stalls 879"),
      mb("service.refusal-not-published", "liveness", "grow-service", P{{"bug", 4}, {"budget", 1}, {"size", 65536}, {"ops", 4}},
         "a round that could map nothing does not say so: the waiters retry for memory that will not come")
          .depth(0),
      mb("service.relay-mirror-relaxed", "memory-order", "grow-service", P{{"bug", 5}, {"warps", 3}, {"threads", 4}, {"ops", 3}},
         "the courier reads the service's `answered` and mirrors `published` into device memory without acquire/release: "
         "an adopter reads a ring entry older than the offset the service wrote")
          .weak(),
      mb("service.relay-only-with-news", "liveness", "grow-service", P{{"bug", 6}},
         "the courier relays only when there is new demand to forward: the service's answer to the last demand is never "
         "mirrored into device memory and its waiters never wake")
          .depth(0),
      mb("service.adoption-overlap-ignored", "logic", "grow-service",
         P{{"bug", 7}, {"ahead", 300}, {"granule_kib", 1024}, {"heap_kib", 2048}, {"ops", 2}, {"size", 1024}, {"sb_shift", 0}, {"threads", 8}, {"warps", 2}},
         "a request whose failed attempt an adoption overlapped does not try again: it posts demand already served and, once "
         "every granule is mapped, gives up as exhausted with the heap nearly empty (S5)"),
      mb("service.refusal-ignores-adoptions", "logic", "grow-service",
         P{{"bug", 8}, {"budget", 2}, {"granule_kib", 1024}, {"heap_kib", 4096}, {"ops", 2}, {"size", 32}, {"threads", 4}, {"warps", 3}},
         "a refused waiter gives up without adopting what earlier rounds published and trying it: nullptr with the mapped "
         "memory nearly unused (S5)")
          .depth(0),
      mb("service.run-adopts-head-only", "accounting", "grow-service", P{{"bug", 9}, {"run", 4}, {"ahead", 100}},
         "adopting a ring entry adopts the first granule of its run only: the rest stays mapped and never serves a request "
         "(S3: mapped and adopted granules differ)")
          .depth(0),
      mb("service.give-up-without-walk", "liveness", "grow-service",
         P{{"bug", 10}, {"reuse", 1}, {"budget", 1}, {"threads", 1}, {"warps", 2}, {"heap_kib", 4096}, {"granule_kib", 128}, {"sb_shift", 17}, {"size", 256}},
         "a request that gives up on growth (refused, timed out, range full) returns nullptr without the reclaim walk its "
         "failed attempt left to growth: memory cached by UAlloc never serves it (S6)")
          .depth(0),
      mb("service.give-up-without-fallbacks", "liveness", "grow-service",
         P{{"bug", 11}, {"warps", 1}, {"threads", 2}, {"size", 16384}, {"first", 32768}, {"sb_shift", 16}, {"heap_kib", 1024}, {"granule_kib", 128},
           {"budget", 2}, {"ops", 20}},
         "a superbin-class request that skipped its fallbacks while growth came first gives up without trying them once the "
         "service refuses: nullptr beside a free TBuddy block of its size (S7)")
          .depth(0),
  };
  return c;
}

}  // namespace

const std::vector<mutant>& mutant_catalogue() {
  static const std::vector<mutant> c = build();
  return c;
}

mutant_result run_mutant(const mutant& m, std::uint64_t schedules, unsigned threads, bool do_shrink) {
  mutant_result r;
  r.m = &m;
  const scenario* sc = find_scenario(m.scenario);
  if (!sc) throw std::invalid_argument("mutant " + m.id + " names scenario '" + m.scenario + "', which does not exist");
  explore_options o;
  o.strategy = m.strategy;
  o.schedules = schedules;
  o.seed = 1;
  o.threads = threads;
  for (const auto& [k, v] : m.params) o.scenario_params.set(k, v);
  run_limits limits = sc->limits;
  limits.memory = m.memory;
  limits.faults = m.faults;
  o.limits = limits;
  const auto t0 = std::chrono::steady_clock::now();
  const explore_summary s = explore(*sc, o);
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  r.schedules = s.schedules;
  if (!s.first_failure) return r;
  const failure_report& f = *s.first_failure;
  r.killed = true;
  r.schedules = f.index + 1;
  r.verdict = f.result.kind;
  r.message = f.result.message;
  r.replay = f.replay_command;
  r.deterministic = f.deterministic;
  r.preemptions = f.result.preemptions;
  if (do_shrink) {
    const auto t1 = std::chrono::steady_clock::now();
    const shrink_report rep = shrink(*sc, o.scenario_params, limits, f.result);
    r.shrink_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t1).count();
    r.shrunk_preemptions = rep.shrunk.preemptions;
    replay_strategy again(rep.shrunk.decisions);
    const run_result back = run_one(*sc, o.scenario_params, again, 0, limits);
    r.shrunk_replays = back.kind == f.result.kind && back.trace_hash == rep.shrunk.trace_hash;
  }
  return r;
}

std::optional<std::uint64_t> mutant_baseline::find(const std::string& id) const {
  for (const auto& [k, v] : killed_at)
    if (k == id) return v;
  return std::nullopt;
}

mutant_baseline load_mutant_baseline(const std::string& path) {
  std::ifstream f(path);
  if (!f) throw input_error("cannot open mutant baseline '" + path + "'");
  mutant_baseline b;
  try {
    nlohmann::json j;
    f >> j;
    if (j.value("format", "") != "toga-sim mutants 1") throw std::invalid_argument("lacks \"format\": \"toga-sim mutants 1\"");
    b.schedules = j.at("schedules").get<std::uint64_t>();
    for (auto& [id, v] : j.at("killed_at").items()) b.killed_at.emplace_back(id, v.get<std::uint64_t>());
  } catch (const std::exception& e) {
    throw input_error("mutant baseline '" + path + "': " + e.what() + " (write it with toga-sim mutants --write-baseline)");
  }
  return b;
}

void save_mutant_baseline(const std::string& path, std::uint64_t schedules, const std::vector<mutant_result>& results) {
  nlohmann::ordered_json j;
  j["format"] = "toga-sim mutants 1";
  j["schedules"] = schedules;
  j["note"] = "schedules to the first failure per mutant (seed 1, the catalogue's strategy); 0 = survived";
  nlohmann::ordered_json k = nlohmann::ordered_json::object();
  for (const auto& r : results) k[r.m->id] = r.killed ? r.schedules : 0;
  j["killed_at"] = k;
  std::ofstream f(path);
  if (!f) throw std::runtime_error("cannot write mutant baseline '" + path + "'");
  f << j.dump(1) << "\n";
}

std::string default_mutant_baseline_path() { return std::string(TOGA_SIM_SOURCE_DIR) + "/sim/mutants-baseline.json"; }

}  // namespace toga::sim
