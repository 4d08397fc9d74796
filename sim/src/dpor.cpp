// Dynamic partial-order reduction over the simulator's schedules (toga/sim/dpor.hpp,
// docs/simulator.md §20).
#include "toga/sim/dpor.hpp"

#include <algorithm>
#include <bit>
#include <chrono>
#include <stdexcept>
#include <unordered_map>

#include "toga/sim/runner.hpp"
#include "toga/sim/strategy.hpp"
#include "toga/sim/world.hpp"

namespace toga::sim {

namespace {

using mask = std::uint64_t;
constexpr mask bit(unsigned i) { return mask{1} << i; }

// The seq_cst order as a word: seq_cst fences (and seq_cst operations) write it.
constexpr std::uintptr_t sc_order_word = ~std::uintptr_t{0};
// Invariant k's view as a word (--plain declared): every step that writes what it reads writes it.
constexpr std::uintptr_t invariant_word(std::size_t k) { return sc_order_word - 1 - k; }
// Warp w's rendezvous state as a word: arrivals at its intrinsics write it (arrivals at one
// rendezvous commute: see coll_sig), its lanes' exits read it (two exits commute: each only adds
// itself to the lanes the rendezvous does not wait for).
constexpr std::uintptr_t warp_word(unsigned w) { return sc_order_word - (std::uintptr_t{1} << 20) - w; }
// Lane l's result of a rendezvous: the step that completes it writes it, l's step after the
// intrinsic (it resumes) reads it.
constexpr std::uintptr_t result_word(unsigned l) { return sc_order_word - (std::uintptr_t{2} << 20) - l; }
// Warp w's activemask parking (which lanes are parked at which call site, and the groups closed):
// a lane parking writes it, a parked lane resuming (it closes its group, or finds it closed) writes it.
constexpr std::uintptr_t park_word(unsigned w) { return sc_order_word - (std::uintptr_t{3} << 20) - w; }

// Commuting writes. Two writes of one word with the same nonzero signature commute (they are not a
// conflict): two arrivals at a rendezvous of the same intrinsic and mask leave the same state in
// either order (each records itself; the last one completes it, with results that depend on the
// set of arrivals only, and since rendezvous_yield it does not run on), two activemask parks (each
// sets its own lane's bit), two resumes of parked lanes (the first of a group closes it for all;
// lanes parked at one site when both resume are one group). Anything else that touches the word
// conflicts with them: a park with a resume (whether the resuming lane's group contains the
// parking lane depends on their order), an arrival with an exit or with an arrival of another
// intrinsic or mask.
constexpr std::uint64_t coll_sig(op k, std::uint32_t mask) {
  return (std::uint64_t{1} << 63) | (static_cast<std::uint64_t>(k) << 32) | mask;
}
constexpr std::uint64_t park_sig = (std::uint64_t{1} << 62) | 1;
constexpr std::uint64_t close_sig = (std::uint64_t{1} << 62) | 2;
// Two adds to one declared plain integer word (ghost<T>'s +=, -=: world::plain_add) leave the
// same value in either order, and the step that adds reads nothing of the word: they commute.
// A read or an ordinary write of the word conflicts with them. An add to a word that an invariant
// other than a sum equality reads is an ordinary write (that invariant sees the intermediate
// values, which the order of the adds changes).
constexpr std::uint64_t add_sig = (std::uint64_t{1} << 61) | 1;
// Adds to a word that a word-bounds invariant reads (world::invariant_form::word_bounds): two adds
// of one direction pass the same bounds in either order; an add that raises the word and one that
// lowers it conflict (which of them comes first decides whether the word passes through the higher
// or the lower value). Over a run, the order of every raise against every lower is then fixed, so
// the word's value at the end of each run of raises (its local maxima) and of lowers (its minima)
// is the same in every equivalent execution (docs/simulator.md §20.1).
constexpr std::uint64_t add_up_sig = (std::uint64_t{1} << 61) | 2;
constexpr std::uint64_t add_down_sig = (std::uint64_t{1} << 61) | 3;

// One access of a step: the word (by ordinal), written, and its signature when the write commutes
// with the same signature's (0: an ordinary read or write).
struct acc_t {
  std::uintptr_t word;
  bool write;
  std::uint64_t sig;
};
constexpr bool conflict(bool w1, std::uint64_t s1, bool w2, std::uint64_t s2) { return (w1 || w2) && !(s1 != 0 && s1 == s2); }
// Two accesses of one word in one step: a write with a signature stays one only with the same.
inline void merge_acc(bool& w, std::uint64_t& sg, bool w2, std::uint64_t s2) {
  sg = (sg == s2) ? sg : 0;
  w = w || w2;
}

// What one step did: the words it read and wrote (by ordinal, see `stored`), or "dependent with
// everything".
struct summary {
  bool global = false;
  bool plain = false;  // may have written plain (non-atomic) shared state: see plain_writer
  std::vector<acc_t> acc;
  // The words touched and written, as bits (ordinal mod 64): two steps whose written bits miss
  // each other's touched bits share no word that one of them writes (a quick "independent").
  std::uint64_t touched = 0, written = 0;
  void add(std::uintptr_t a, bool w, std::uint64_t sig = 0) {
    touched |= std::uint64_t{1} << (a & 63);
    if (w) written |= std::uint64_t{1} << (a & 63);
    for (auto& x : acc)
      if (x.word == a) {
        merge_acc(x.write, x.sig, w, sig);
        return;
      }
    acc.push_back({a, w, sig});
  }
  void merge(const summary& o) {
    global = global || o.global;
    plain = plain || o.plain;
    for (const auto& x : o.acc) add(x.word, x.write, x.sig);
  }
};

// A step as another run remembers it (sleep sets). Addresses change from run to run (the scenario's
// state is allocated afresh), so words are named by the order in which the run first touched them
// (`ordinal`): the same on every run that shares the prefix up to the choice that recorded the
// step, for the words touched in that prefix (ordinal < prefix). A word first touched after it has
// no stable name: any such word counts as possibly the same (conservative).
struct stored {
  bool global = false;
  bool plain = false;
  bool new_read = false, new_write = false;  // touched words the prefix had not touched
  std::uint32_t prefix = 0;
  std::vector<acc_t> known;  // ordinal < prefix
  void merge(const summary& s, std::uint32_t pre) {
    prefix = pre;
    global = global || s.global;
    plain = plain || s.plain;
    for (const auto& a : s.acc) {
      if (a.word < pre) {
        bool found = false;
        for (auto& x : known)
          if (x.word == a.word) {
            merge_acc(x.write, x.sig, a.write, a.sig);
            found = true;
          }
        if (!found) known.push_back(a);
      } else {
        (a.write ? new_write : new_read) = true;
      }
    }
  }
};

// A remembered step against a step of this run (ordinals of this run).
// Plain state (dpor_options::plain): under plain_mode::all a step that may write it is dependent
// with every step; under writers only with another such step.
bool plain_dependent(bool a, bool b, plain_mode m) { return m == plain_mode::all ? (a || b) : (a && b); }

bool dependent(const stored& a, const summary& b, plain_mode m) {
  if (a.global || b.global || plain_dependent(a.plain, b.plain, m)) return true;
  for (const auto& y : b.acc) {
    if (y.word >= a.prefix) {
      if (a.new_write || (y.write && a.new_read)) return true;
      continue;
    }
    for (const auto& x : a.known)
      if (x.word == y.word && conflict(x.write, x.sig, y.write, y.sig)) return true;
  }
  return false;
}

// `skip`: words (by ordinal) not to count.
bool dependent(const summary& a, const summary& b, plain_mode m, const std::vector<bool>* skip = nullptr) {
  if (a.global || b.global || plain_dependent(a.plain, b.plain, m)) return true;
  if (!(a.written & b.touched) && !(b.written & a.touched)) return false;
  for (const auto& x : a.acc)
    for (const auto& y : b.acc)
      if (x.word == y.word && conflict(x.write, x.sig, y.write, y.sig) &&
          !(skip && x.word < skip->size() && (*skip)[x.word]))
        return true;
  return false;
}

struct event {
  unsigned lane;
  int node;          // the lane choice that started it (index into the stack), -1: forced or past a cut
  summary acc;
  int enabler = -1;  // the event that ended its lane's wait (the await rule), -1: none
  bool after_cut = false;
  // A lane's step after a rendezvous it waited in: the arrivals at that rendezvous and the step
  // that completed it. They happen before it (it cannot run before them in any execution), but
  // are no race with it: its lane was not runnable before the completion.
  std::vector<int> rendezvous;
  bool resumed = false;  // it began inside an intrinsic (a resume: all of it comes after the rendezvous)
};

struct node {
  bool data = false;
  // data choice
  std::uint32_t n = 0, value = 0;
  // lane choice
  mask enabled = 0, backtrack = 0, done = 0, sleep = 0;
  unsigned chosen = 0;
  std::uint32_t prefix = 0;           // words the run had touched when this choice was made
  std::vector<stored> sleep_acc;      // per lane in `sleep`: its step
  std::vector<stored> explored_acc;   // per lane explored here: its step (union over the runs)
};

}  // namespace

//! The strategy and step observer of one exploration (stateful across runs, like
//! exhaustive_strategy): begin / run / finish / advance.
class dpor_strategy final : public strategy, public step_observer {
 public:
  bool honour_forms = true;  // dpor_options::invariant_forms

  dpor_strategy(bool reduce, std::uint64_t step_bound, plain_mode plain, bool coarse_warps, std::vector<unsigned> warp_of,
                unsigned unsound_warps = 0)
      : reduce_(reduce),
        plain_rule_(plain == plain_mode::all || plain == plain_mode::writers),
        declared_(plain == plain_mode::declared),
        coarse_warps_(coarse_warps),
        unsound_warps_(unsound_warps),
        plain_(plain),
        step_bound_(step_bound),
        warp_of_(std::move(warp_of)) {}

  void begin(std::uint64_t, unsigned lanes) override {
    lanes_ = lanes;
    pos_ = 0;
    n_ev_ = 0;
    cur_ = -1;
    ended_ = -1;
    cut_ = redundant_ = truncated_ = false;
    spin_ = 0;
    stale_ = 0;
    exited_ = 0;
    pending_.assign(lanes, op::start);
    pending_open_.assign(lanes, false);
    enabler_next_.assign(lanes, -1);
    sleep_ = 0;
    sleep_acc_.assign(lanes, stored{});
    ord_words_.assign(1, sc_order_word);
    ord_map_.clear();
    warp_state_.assign(1, false);
    in_collective_.assign(lanes, 0);
    arrival_event_.assign(lanes, -1);
    rendezvous_.assign(lanes, {});
    inv_all_.clear();
    inv_ranges_.clear();
  }

  unsigned pick_lane(const pick_context& c) override {
    end_event();
    // The await rule: a lane at a backoff waits until another lane writes, exits or blocks.
    if (c.current < lanes_ && c.current_runnable && c.yield && pending_[c.current] == op::backoff) spin_ |= bit(c.current);
    mask runnable = 0;
    for (unsigned i = c.runnable.first_from(0); i < c.runnable.size(); i = c.runnable.first_from(i + 1)) runnable |= bit(i);
    mask enabled = runnable & ~spin_;
    if (enabled == 0) {  // every runnable lane waits: all may run (the last step let them)
      for (mask m = runnable & spin_; m; m &= m - 1) enabler_next_[std::countr_zero(m)] = cur_;
      spin_ &= ~runnable;
      enabled = runnable;
    }
    if (c.step >= step_bound_) {
      if (!cut_) truncated_ = true;
      return start_forced(default_pick(c));
    }
    if (cut_) return start_forced(default_pick(c));
    if (pos_ == stack_.size()) {
      node nd;
      nd.enabled = enabled;
      if (reduce_) {
        nd.sleep = sleep_ & enabled;
        nd.sleep_acc = sleep_acc_;
      }
      nd.explored_acc.assign(lanes_, stored{});
      nd.prefix = static_cast<std::uint32_t>(ord_words_.size());
      const mask open = enabled & ~nd.sleep;
      if (open == 0) {  // every enabled lane is asleep: equivalent runs are explored elsewhere
        cut_ = redundant_ = true;
        return start_forced(default_pick(c));
      }
      const unsigned def = default_pick(c);
      nd.chosen = (open & bit(def)) ? def : static_cast<unsigned>(std::countr_zero(open));
      nd.backtrack = reduce_ ? bit(nd.chosen) : enabled;
      stack_.push_back(std::move(nd));
    }
    node& nd = stack_[pos_];
    if (nd.data || nd.enabled != enabled)
      throw std::runtime_error("dpor: the scenario is not deterministic (choice " + std::to_string(pos_) +
                               " found other runnable lanes than before on the same prefix)");
    const unsigned chosen = nd.chosen;
    if (reduce_) {  // the lanes explored before this one sleep while the steps after it are independent
      sleep_ = (nd.sleep | nd.done) & ~bit(chosen);
      for (mask m = sleep_; m; m &= m - 1) {
        const unsigned r = static_cast<unsigned>(std::countr_zero(m));
        sleep_acc_[r] = (nd.sleep & bit(r)) ? nd.sleep_acc[r] : nd.explored_acc[r];
      }
    }
    start_event(chosen, static_cast<int>(pos_++));
    return chosen;
  }

  bool enumerates_values() const override { return true; }
  std::uint32_t pick_value(std::uint32_t n, std::uint64_t step, unsigned lane) override {
    // The await rule for reads: a lane that backed off and saw no write since repeats its
    // iteration against the same stores; it reads the newest (the older ones it could read the
    // iteration before).
    if (lane < lanes_ && (stale_ & bit(lane))) return 0;
    if (step >= step_bound_) {
      if (!cut_) truncated_ = true;
      return 0;
    }
    if (cut_) return 0;
    if (pos_ == stack_.size()) {
      node nd;
      nd.data = true;
      nd.n = n;
      stack_.push_back(std::move(nd));
    }
    const node& nd = stack_[pos_++];
    if (!nd.data || nd.n != n)
      throw std::runtime_error("dpor: the scenario is not deterministic (data choice " + std::to_string(pos_ - 1) +
                               " changed on the same prefix)");
    return nd.value;
  }

  // ---- step_observer --------------------------------------------------------------------------
  void point_op(unsigned lane, op k, bool) override {  // (views: told with each fence, fence below)
    ensure_lane(lane);
    if (pending_open_[lane]) apply(lane, pending_[lane]);  // no choice since: it ran in this step
    ran_on(lane);
    in_collective_[lane] = 0;  // the code after an intrinsic ends here
    if (k == op::start || k == op::exit) {
      if (plain_rule_) events_[static_cast<std::size_t>(cur_)].acc.plain = true;
      if (k == op::exit) {
        // the warp's rendezvous no longer waits for this lane
        if (!coarse_warps_) events_[static_cast<std::size_t>(cur_)].acc.add(ordinal(warp_word(warp_of_[lane])), false);
        exited_ |= bit(lane);
        wake_all();  // a lane that exits may be what the waiting lanes wait for
      }
      pending_open_[lane] = false;
      return;
    }
    if (k == op::backoff) stale_ |= bit(lane);
    pending_[lane] = k;
    pending_open_[lane] = true;
  }
  void access(unsigned lane, std::uintptr_t addr, bool write, bool sc_order) override {
    ensure_lane(lane);
    ran_on(lane);
    summary& s = events_[static_cast<std::size_t>(cur_)].acc;
    s.add(ordinal(addr), write);
    if (write && plain_rule_) s.plain = true;
    if (write && declared_) invariant_writes(s, addr);
    if (sc_order) s.add(0, true);
    if (write || sc_order) {
      stale_ &= ~bit(lane);
      wake_all();
    }
  }
  void global(unsigned lane) override {
    ensure_lane(lane);
    ran_on(lane);
    events_[static_cast<std::size_t>(cur_)].acc.global = true;
    wake_all();
  }
  // A seq_cst fence writes the seq_cst order (and may be what a waiting lane waits for); the
  // other orders change their own lane's views only (memory_state::fence): no other lane's step
  // reads what they change, so they commute with every step of another lane. Under --memory sc
  // without views every operation is seq_cst and fences order nothing.
  void fence(unsigned lane, memory_order o, bool views) override {
    ensure_lane(lane);
    ran_on(lane);
    if (views && o == memory_order::seq_cst) {
      events_[static_cast<std::size_t>(cur_)].acc.add(0, true);
      wake_all();
    }
  }
  void plain(unsigned lane, std::uintptr_t addr, bool write) override {
    if (!declared_) return;  // the other modes assume what plain state does
    ensure_lane(lane);
    ran_on(lane);
    summary& s = events_[static_cast<std::size_t>(cur_)].acc;
    s.add(ordinal(addr), write);
    if (write) invariant_writes(s, addr);
  }
  void plain_add(unsigned lane, std::uintptr_t addr, bool down) override {
    if (!declared_) return;
    ensure_lane(lane);
    ran_on(lane);
    summary& s = events_[static_cast<std::size_t>(cur_)].acc;
    const add_order o = invariant_writes(s, addr, true);
    s.add(ordinal(addr), true, o == add_order::ordered ? 0 : o == add_order::by_direction ? (down ? add_down_sig : add_up_sig) : add_sig);
  }
  void invariant_is_sum(std::size_t index) override { set_form(index, world::invariant_form::sum_equal); }
  void invariant_is_word_bounds(std::size_t index) override { set_form(index, world::invariant_form::word_bounds); }
  void set_form(std::size_t index, world::invariant_form f) {
    if (!honour_forms) return;  // every invariant as `any` (dpor_options::invariant_forms)
    if (inv_form_.size() <= index) inv_form_.resize(index + 1, world::invariant_form::any);
    inv_form_[index] = f;
  }
  void arrival(unsigned lane, op k, std::uint32_t m) override {
    ensure_lane(lane);
    if (pending_open_[lane]) apply(lane, pending_[lane]);
    if (coarse_warps_) return;  // apply made the step dependent with every step
    summary& s = events_[static_cast<std::size_t>(cur_)].acc;
    if (k == op::activemask) {
      s.add(ordinal(park_word(warp_of_[lane])), true, park_sig);
      in_collective_[lane] = 2;
    } else {
      s.add(ordinal(warp_word(warp_of_[lane])), true, coll_sig(k, m));
      in_collective_[lane] = 1;
    }
    arrival_event_[lane] = cur_;
  }
  void released(unsigned base, std::uint32_t rel) override {
    if (coarse_warps_ || cur_ < 0) return;
    summary& s = events_[static_cast<std::size_t>(cur_)].acc;
    std::vector<int> before{cur_};
    for (std::uint32_t q = rel; q; q &= q - 1) {
      const unsigned l = base + static_cast<unsigned>(std::countr_zero(q));
      if (l >= lanes_) continue;
      s.add(ordinal(result_word(l)), true);
      if (arrival_event_[l] >= 0 && arrival_event_[l] != cur_) before.push_back(arrival_event_[l]);
    }
    for (std::uint32_t q = rel; q; q &= q - 1) {
      const unsigned l = base + static_cast<unsigned>(std::countr_zero(q));
      if (l < lanes_) rendezvous_[l] = before;
    }
    // the completing step comes after every arrival (whichever lane arrives last completes)
    for (std::size_t k = 1; k < before.size(); ++k) events_[static_cast<std::size_t>(cur_)].rendezvous.push_back(before[k]);
  }
  void invariant_reads(std::size_t index, const std::vector<std::pair<std::uintptr_t, std::uintptr_t>>* reads) override {
    if (inv_ranges_.size() <= index) {
      inv_ranges_.resize(index + 1);
      inv_all_.resize(index + 1, false);
    }
    inv_all_[index] = reads == nullptr;
    if (index < inv_form_.size()) inv_form_[index] = world::invariant_form::any;  // (invariant_is_sum etc. follow)
    inv_ranges_[index] = reads ? *reads : std::vector<std::pair<std::uintptr_t, std::uintptr_t>>{};
  }

  // ---- after a run ----------------------------------------------------------------------------
  //! The race analysis of the run just finished (reduce only): adds backtrack points.
  void finish(const run_result& r) {
    end_event();
    if (!reduce_) return;
    // An aborted run's lanes that did not exit had a pending step: unknown, so dependent with all.
    if (r.failed())
      for (unsigned l = 0; l < lanes_; ++l)
        if (!(exited_ & bit(l))) {
          new_event(l, -1, -1, true).acc.global = true;
        }
    // Past a cut only each lane's first step counts (the next steps at the cut).
    std::vector<std::size_t>& ev = ev_;
    ev.clear();
    mask seen_after = 0;
    for (std::size_t j = 0; j < n_ev_; ++j) {
      const event& e = events_[j];
      if (e.after_cut) {
        if (seen_after & bit(e.lane)) continue;
        seen_after |= bit(e.lane);
      }
      ev.push_back(j);
    }
    // Vector clocks over the trace's happens-before (program order, dependence, await edges).
    // (the vector clocks are rows of one buffer, kept with the other scratch vectors across runs)
    const std::size_t m = ev.size();
    const unsigned nl = lanes_;
    vc_buf_.assign(m * nl, 0);
    const auto vc = [this, nl](std::size_t row) { return vc_buf_.data() + row * nl; };
    count_.assign(nl, 0);
    seq_.assign(m, 0);
    last_.assign(nl, -1);
    auto &count = count_, &seq = seq_, &before = before_;
    auto& last = last_;
    auto& races = races_;
    auto& preds = preds_;
    races.clear();
    for (std::size_t jj = 0; jj < m; ++jj) {
      const event& ej = events_[ev[jj]];
      const unsigned p = ej.lane;
      seq[jj] = ++count[p];
      if (last[p] >= 0) std::copy_n(vc(static_cast<std::size_t>(last[p])), nl, vc(jj));
      before.assign(vc(jj), vc(jj) + nl);  // p's state before this step
      vc(jj)[p] = seq[jj];
      preds.clear();
      for (std::size_t ii = 0; ii < jj; ++ii) {
        const event& ei = events_[ev[ii]];
        if (ei.lane == p) continue;
        const bool enabling = ej.enabler >= 0 && static_cast<std::size_t>(ej.enabler) == ev[ii];
        // An edge of a rendezvous (an arrival before the step that completes it or resumes from
        // it) is no race unless the two steps also conflict on something else (a step can hold a
        // lane's code before its arrival, when it was the only lane that could run).
        const bool released =
            std::find(ej.rendezvous.begin(), ej.rendezvous.end(), static_cast<int>(ev[ii])) != ej.rendezvous.end() &&
            !dependent(ei.acc, ej.acc, plain_, &warp_state_);
        if (!enabling && !released && !dependent(ei.acc, ej.acc, plain_)) continue;
        preds.emplace_back(ii, released);
        for (unsigned l = 0; l < nl; ++l) vc(jj)[l] = std::max(vc(jj)[l], vc(ii)[l]);
      }
      // A race is an immediate predecessor: one that no other predecessor of e_j (nor e_j's own
      // previous step) happens after (Abdulla et al., POPL'14, def. of the race relation).
      for (const auto& [ii, released] : preds) {
        const event& ei = events_[ev[ii]];
        if (released || ei.node < 0 || before[ei.lane] >= seq[ii]) continue;
        bool covered = false;
        for (const auto& [kk, r2] : preds)  // (a rendezvous edge orders only the part of a completing step after its arrival)
          if (kk != ii && (!r2 || ej.resumed) && vc(kk)[ei.lane] >= seq[ii]) {
            covered = true;
            break;
          }
        if (!covered) races.emplace_back(ii, jj);
      }
      last[p] = static_cast<long>(jj);
    }
    // Each race e_i, e_j is reversed from the state before e_i by a lane that can start the
    // events after e_i that do not depend on it, followed by e_j: an *initial* of that sequence
    // (source sets, Abdulla, Aronis, Jonsson, Sagonas, POPL'14). Adding e_j's lane instead (the
    // rule of Flanagan and Godefroid) loses executions together with sleep sets.
    const auto hb = [&](std::size_t a, std::size_t b) { return vc(b)[events_[ev[a]].lane] >= seq[a]; };
    std::vector<std::size_t>& v = v_;
    for (const auto& [ii, jj] : races) {
      v.clear();
      mask lanes_seen = 0, initials = 0;
      const auto consider = [&](std::size_t kk) {
        const unsigned q = events_[ev[kk]].lane;
        if (!(lanes_seen & bit(q))) {
          bool first = true;
          for (std::size_t k2 : v)
            if (hb(k2, kk)) {
              first = false;
              break;
            }
          if (first) initials |= bit(q);
          lanes_seen |= bit(q);
        }
        v.push_back(kk);
      };
      for (std::size_t kk = ii + 1; kk < jj; ++kk)
        if (!hb(ii, kk)) consider(kk);
      consider(jj);
      add_backtrack(static_cast<std::size_t>(events_[ev[ii]].node), initials);
    }
  }

  //! Moves to the next run; false when the search is over.
  bool advance() {
    stack_.resize(std::min(stack_.size(), pos_));
    while (!stack_.empty()) {
      node& nd = stack_.back();
      if (nd.data) {
        if (nd.value + 1 < nd.n) {
          ++nd.value;
          return true;
        }
      } else {
        nd.done |= bit(nd.chosen);
        const mask cand = nd.backtrack & nd.enabled & ~nd.done & ~nd.sleep;
        if (cand) {
          nd.chosen = static_cast<unsigned>(std::countr_zero(cand));
          return true;
        }
      }
      stack_.pop_back();
    }
    return false;
  }

  bool redundant() const { return redundant_; }
  bool truncated() const { return truncated_; }

 private:
  // Makes one of `initials` run first at choice n (nothing to do when one is already in its
  // backtrack set); an initial that cannot run there (it waits) brings in every lane that can.
  void add_backtrack(std::size_t n, mask initials) {
    node& nd = stack_[n];
    if (initials & nd.backtrack) return;
    const mask ok = initials & nd.enabled & ~nd.sleep;
    if (ok) nd.backtrack |= ok & (~ok + 1);
    else if (initials & nd.enabled) nd.backtrack |= initials & nd.enabled & (~(initials & nd.enabled) + 1);
    else nd.backtrack |= nd.enabled;
  }
  void wake_all() {
    const unsigned me = cur_ >= 0 ? events_[static_cast<std::size_t>(cur_)].lane : ~0u;
    stale_ &= me < 64 ? bit(me) : 0;
    for (mask m = spin_ & ~(me < 64 ? bit(me) : 0); m; m &= m - 1) {
      const unsigned l = static_cast<unsigned>(std::countr_zero(m));
      enabler_next_[l] = cur_;
      spin_ &= ~bit(l);
    }
  }
  // What a pending operation does when it runs, beyond the accesses the memory model reports.
  void apply(unsigned lane, op k) {
    pending_open_[lane] = false;
    summary& s = events_[static_cast<std::size_t>(cur_)].acc;
    if (plain_rule_ && k != op::load && k != op::cas && k != op::backoff && k != op::choice) s.plain = true;
    switch (k) {
      case op::fence: break;  // its order is told when it runs (fence below)
      case op::activemask:
      case op::ballot:
      case op::shfl:
      case op::match_any:
      case op::syncwarp:
      case op::reduce_or:
        // warp intrinsics: what they touch is told by arrival() and released() (the warp's
        // rendezvous or parking, the results); --coarse-warps: dependent with every step
        if (coarse_warps_) s.global = true;
        wake_all();
        break;
      default: break;
    }
  }
  // A step of `lane` began without a lane choice (the only runnable lane after a block or exit).
  void ensure_lane(unsigned lane) {
    if (cur_ >= 0 && events_[static_cast<std::size_t>(cur_)].lane == lane) return;
    end_event();
    start_event(lane, -1);
  }
  // A lane choice that does not branch (past the step bound, or after a cut).
  unsigned start_forced(unsigned lane) {
    start_event(lane, -1);
    return lane;
  }
  void start_event(unsigned lane, int nd) {
    new_event(lane, nd, enabler_next_[lane], cut_);
    enabler_next_[lane] = -1;
    cur_ = static_cast<int>(n_ev_ - 1);
    if (pending_open_[lane]) apply(lane, pending_[lane]);
    // a lane resumed inside an intrinsic: it waited for the rendezvous (it reads its result), or
    // parked in activemask (it closes its group, or finds it closed)
    event& e = events_[static_cast<std::size_t>(cur_)];
    if (in_collective_[lane] == 1) {
      e.resumed = true;
      e.acc.add(ordinal(result_word(lane)), false);
      e.rendezvous = std::move(rendezvous_[lane]);
      rendezvous_[lane].clear();
    } else if (in_collective_[lane] == 2) {
      e.acc.add(ordinal(park_word(warp_of_[lane])), true, unsound_warps_ == 1 ? park_sig : close_sig);
    }
  }
  // The lane runs on in the step of its arrival at an intrinsic (nobody else could run, so it
  // did not wait, or it completed the rendezvous without a choice after it): what it did there is
  // an ordinary write of the warp's state, as the code after it reads its result.
  void ran_on(unsigned lane) {
    if (!in_collective_[lane] || arrival_event_[lane] != cur_) return;
    summary& s = events_[static_cast<std::size_t>(cur_)].acc;
    if (in_collective_[lane] == 2) s.add(ordinal(park_word(warp_of_[lane])), true);
    else {
      s.add(ordinal(warp_word(warp_of_[lane])), true);
      s.add(ordinal(result_word(lane)), true);
    }
    arrival_event_[lane] = -1;
    rendezvous_[lane].clear();
  }
  // Whether invariant k reads `addr`.
  bool invariant_reads_word(std::size_t k, std::uintptr_t addr) const {
    bool hit = inv_all_[k];
    for (std::size_t i = 0; !hit && i < inv_ranges_[k].size(); ++i) hit = addr >= inv_ranges_[k][i].first && addr < inv_ranges_[k][i].second;
    return hit;
  }
  world::invariant_form form(std::size_t k) const { return k < inv_form_.size() ? inv_form_[k] : world::invariant_form::any; }
  // How adds to a word must be ordered for the invariants that read it: not at all (add_sig),
  // an add that raises it against one that lowers it (word bounds), or every add (an ordinary write).
  enum class add_order : std::uint8_t { free, by_direction, ordered };
  // The invariants that read `addr` see this step's write (the invariant rule, 20.1): they see
  // the same sequence of values in every equivalent execution. Not a sum equality's: the first
  // step that changes its sum changes it in every linearisation; nor word bounds', which read
  // each word alone, whose writes are ordered among themselves (world::invariant_form).
  // `add`: the write is an add (plain_add); returns how such adds must be ordered.
  add_order invariant_writes(summary& s, std::uintptr_t addr, bool add = false) {
    add_order o = add_order::free;
    for (std::size_t k = 0; k < inv_ranges_.size(); ++k) {
      if (!invariant_reads_word(k, addr)) continue;
      switch (form(k)) {
        case world::invariant_form::sum_equal: break;
        case world::invariant_form::word_bounds:
          if (add && o == add_order::free) o = add_order::by_direction;
          break;
        case world::invariant_form::any:
          s.add(ordinal(invariant_word(k)), true);
          o = add_order::ordered;
          break;
      }
    }
    return o;
  }
  void end_event() {
    if (cur_ < 0 || ended_ == cur_) return;
    ended_ = cur_;
    const event& e = events_[static_cast<std::size_t>(cur_)];
    if (!reduce_) return;
    if (e.node >= 0) {
      node& nd = stack_[static_cast<std::size_t>(e.node)];
      nd.explored_acc[e.lane].merge(e.acc, nd.prefix);
    }
    // sleeping lanes wake when this step is dependent with theirs
    for (mask m = sleep_; m; m &= m - 1) {
      const unsigned r = static_cast<unsigned>(std::countr_zero(m));
      if (r == e.lane || dependent(sleep_acc_[r], e.acc, plain_)) sleep_ &= ~bit(r);
    }
  }

  bool reduce_;
  bool plain_rule_;  // steps that may write plain shared state are marked (summary::plain)
  bool declared_;    // declared plain accesses and invariant reads count (plain_mode::declared)
  bool coarse_warps_;
  unsigned unsound_warps_ = 0;
  plain_mode plain_;
  std::uint64_t step_bound_;
  unsigned lanes_ = 0;
  std::vector<node> stack_;
  std::size_t pos_ = 0;
  std::vector<event> events_;  // the run's steps: the first n_ev_ (the slots after them are kept for their capacity)
  std::size_t n_ev_ = 0;
  // A step appended to the run, in a reused slot when there is one (its vectors keep their capacity).
  event& new_event(unsigned lane, int nd, int enabler, bool after_cut) {
    if (n_ev_ == events_.size()) events_.emplace_back();
    event& e = events_[n_ev_++];
    e.lane = lane;
    e.node = nd;
    e.acc.global = e.acc.plain = false;
    e.acc.acc.clear();
    e.acc.touched = e.acc.written = 0;
    e.enabler = enabler;
    e.after_cut = after_cut;
    e.rendezvous.clear();
    e.resumed = false;
    return e;
  }
  // finish()'s scratch, kept across runs
  std::vector<std::size_t> ev_, v_;
  std::vector<std::uint32_t> vc_buf_, count_, seq_, before_;
  std::vector<long> last_;
  std::vector<std::pair<std::size_t, std::size_t>> races_;
  std::vector<std::pair<std::size_t, bool>> preds_;
  int cur_ = -1;
  int ended_ = -1;
  bool cut_ = false, redundant_ = false, truncated_ = false;
  mask spin_ = 0, exited_ = 0, sleep_ = 0;
  mask stale_ = 0;  // lanes that backed off and have seen no other lane's write since
  std::vector<stored> sleep_acc_;
  // word -> order of first touch in this run (0: the seq_cst order). A small scenario touches few
  // words: the first ord_linear are searched in order, the rest through ord_map_.
  static constexpr std::size_t ord_linear = 32;
  std::vector<std::uintptr_t> ord_words_;
  std::unordered_map<std::uintptr_t, std::uint32_t> ord_map_;
  std::uintptr_t ordinal(std::uintptr_t a) {
    const std::size_t n = ord_words_.size();
    for (std::size_t i = 0, lim = std::min(n, ord_linear); i < lim; ++i)
      if (ord_words_[i] == a) return i;
    if (n > ord_linear)
      if (const auto it = ord_map_.find(a); it != ord_map_.end()) return it->second;
    const auto o = static_cast<std::uint32_t>(n);
    ord_words_.push_back(a);
    if (o >= ord_linear) ord_map_.emplace(a, o);
    if (warp_state_.size() <= o) warp_state_.resize(o + 1, false);
    warp_state_[o] = a >= park_word(1u << 16) && a <= warp_word(0);
    return o;
  }
  std::vector<bool> warp_state_;  // per ordinal: a word of a warp's rendezvous, parking or results
  std::vector<op> pending_;
  std::vector<bool> pending_open_;
  std::vector<unsigned> warp_of_;     // per lane: its warp in the launch
  std::vector<std::uint8_t> in_collective_;  // per lane: between an intrinsic and its next point (1: a rendezvous, 2: activemask)
  std::vector<int> arrival_event_;    // per lane: the step of its last arrival at an intrinsic
  std::vector<std::vector<int>> rendezvous_;  // per lane released from a rendezvous: event::rendezvous of its next step
  std::vector<bool> inv_all_;         // per invariant: undeclared (reads everything)
  std::vector<world::invariant_form> inv_form_;  // per invariant: its declared form (any by default)
  std::vector<std::vector<std::pair<std::uintptr_t, std::uintptr_t>>> inv_ranges_;  // per invariant: what it reads
  std::vector<int> enabler_next_;
};

const char* to_string(plain_mode m) {
  switch (m) {
    case plain_mode::all: return "all";
    case plain_mode::writers: return "writers";
    case plain_mode::none: return "none";
    case plain_mode::declared: return "declared";
    case plain_mode::automatic: return "auto";
  }
  return "?";
}

bool parse_plain_mode(const std::string& s, plain_mode& out) {
  for (auto m : {plain_mode::all, plain_mode::writers, plain_mode::none, plain_mode::declared, plain_mode::automatic})
    if (s == to_string(m)) {
      out = m;
      return true;
    }
  return false;
}

std::optional<std::string> dpor_unsupported(const scenario& sc, const params& p, const run_limits& limits) {
  const unsigned lanes = sc.shape(p).lanes();
  if (lanes > dpor_max_lanes)
    return "scenario " + sc.name + " has " + std::to_string(lanes) + " lanes with these parameters; dpor explores at most " +
           std::to_string(dpor_max_lanes) + " (shrink the shape with --set, e.g. lanes=, warps=, threads=: toga-sim list --keys)";
  if (limits.faults)
    return "dpor does not take fault sites (--faults): their stalls are not steps it can reorder; use --faults none";
  return std::nullopt;
}

run_limits dpor_limits(const run_limits& limits, const dpor_options& opt) {
  run_limits l = limits;
  l.rendezvous_yield = opt.rendezvous_yield;
  l.skip_subsumed_reads = opt.skip_subsumed_reads;
  return l;
}

dpor_summary explore_dpor(const scenario& sc, const params& p, const run_limits& limits_in, const dpor_options& opt) {
  const run_limits limits = dpor_limits(limits_in, opt);
  validate_params(sc, p);
  if (auto why = dpor_unsupported(sc, p, limits)) throw std::invalid_argument(*why);
  dpor_summary sum;
  sum.scenario = sc.name;
  sum.plain = opt.plain == plain_mode::automatic ? (sc.plain_declared ? plain_mode::declared : plain_mode::writers) : opt.plain;
  if (sum.plain == plain_mode::declared && !sc.plain_declared)
    throw std::invalid_argument("scenario " + sc.name + " does not declare its plain state (toga/sim/plain.hpp), so --plain "
                                "declared would ignore it: use --plain writers (its default) or all");
  const std::uint64_t bound = opt.step_bound ? std::min(opt.step_bound, limits.fair_after) : limits.fair_after;
  const launch_config cfg = sc.shape(p);
  std::vector<unsigned> warp_of(cfg.lanes());
  const unsigned tpb = cfg.threads_per_block, warps_per_block = (tpb + 31) / 32;
  for (unsigned i = 0; i < cfg.lanes(); ++i) warp_of[i] = (i / tpb) * warps_per_block + (i % tpb) / 32;  // as world numbers them
  dpor_strategy st(opt.reduce, bound, sum.plain, opt.coarse_warps, std::move(warp_of), opt.unsound_warps);
  st.honour_forms = opt.invariant_forms;
  const auto t0 = std::chrono::steady_clock::now();
  for (std::uint64_t i = 0;; ++i) {
    if (i >= opt.max_executions) {
      sum.stopped = "schedule limit (" + std::to_string(opt.max_executions) + " runs)";
      break;
    }
    if (opt.max_seconds > 0 && std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() > opt.max_seconds) {
      sum.stopped = "time limit";
      break;
    }
    st.begin(i, cfg.lanes());
    run_result r;
    {
      world w(cfg, st, limits);
      w.set_step_observer(&st);
      std::unique_ptr<instance> inst = sc.make(w, p);
      r = w.run([&] { inst->lane(); });
      if (!r.failed())
        if (auto msg = inst->check_final()) {
          r.kind = verdict_kind::invariant;
          r.message = "final check failed: " + *msg;
        }
      r.metrics = inst->metrics();
    }
    st.finish(r);
    const bool redundant = st.redundant();
    if (redundant) ++sum.redundant;
    else ++sum.executions;
    if (st.truncated()) ++sum.truncated;
    ++sum.counts[static_cast<unsigned>(r.kind)];
    sum.total_steps += r.steps;
    sum.max_steps = std::max(sum.max_steps, r.steps);
    if (opt.on_run) opt.on_run(r, redundant);
    const bool failed = r.failed();
    if (failed) {
      ++sum.failures_found;
      if (sum.failures.size() < 10) {
        dpor_failure f;
        f.index = i;
        // The determinism check: its decisions, replayed as `toga-sim replay --decisions` does.
        replay_strategy again(r.decisions);
        const run_result r2 = run_one(sc, p, again, 0, limits);
        f.deterministic = r2.kind == r.kind && r2.trace_hash == r.trace_hash;
        f.result = std::move(r);
        sum.failures.push_back(std::move(f));
      }
      if (opt.stop_on_failure) {
        sum.stopped = "first failure";
        break;
      }
    }
    if (!st.advance()) {
      if (sum.truncated) sum.stopped = std::to_string(sum.truncated) + " runs reached the step bound (" + std::to_string(bound) + ")";
      else sum.complete = true;
      break;
    }
  }
  sum.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return sum;
}

}  // namespace toga::sim
