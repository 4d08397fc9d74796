#include "toga/sim/world.hpp"

#include "toga/sim/faults.hpp"

#include <boost/fiber/algo/algorithm.hpp>
#include <boost/fiber/all.hpp>
#include <boost/context/pooled_fixedsize_stack.hpp>
#include <boost/context/protected_fixedsize_stack.hpp>

#include <bit>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <sstream>

namespace toga::sim {

thread_local world* world::tls_current_ = nullptr;

const char* to_string(op k) {
  switch (k) {
    case op::start: return "start";
    case op::load: return "load";
    case op::store: return "store";
    case op::exchange: return "exchange";
    case op::cas: return "compare_exchange";
    case op::fetch_add: return "fetch_add";
    case op::fetch_sub: return "fetch_sub";
    case op::fetch_and: return "fetch_and";
    case op::fetch_or: return "fetch_or";
    case op::fetch_max: return "fetch_max";
    case op::fence: return "fence";
    case op::backoff: return "backoff";
    case op::activemask: return "__activemask";
    case op::ballot: return "__ballot_sync";
    case op::shfl: return "__shfl_sync";
    case op::match_any: return "__match_any_sync";
    case op::syncwarp: return "__syncwarp";
    case op::reduce_or: return "__reduce_or_sync";
    case op::choice: return "choice";
    case op::exit: return "exit";
  }
  return "?";
}

const char* to_string(memory_model m) { return m == memory_model::weak ? "weak" : "sc"; }

bool parse_memory_model(const std::string& s, memory_model& out) {
  if (s == "sc") out = memory_model::sc;
  else if (s == "weak") out = memory_model::weak;
  else return false;
  return true;
}

std::string faults_to_string(std::uint32_t mask) {
  mask &= all_fault_sites;
  if (mask == 0) return "none";
  if (mask == all_fault_sites) return "all";
  std::string out;
  for (unsigned i = 0; i < toga::fault_site_count; ++i)
    if (mask & (1u << i)) out += (out.empty() ? "" : ",") + std::string(toga::to_string(static_cast<toga::fault_site>(i)));
  return out;
}

bool parse_faults(const std::string& s, std::uint32_t& mask, std::string& error) {
  if (s == "none" || s.empty()) {
    mask = 0;
    return true;
  }
  if (s == "all") {
    mask = all_fault_sites;
    return true;
  }
  std::uint32_t m = 0;
  std::size_t pos = 0;
  while (pos <= s.size()) {
    const std::size_t comma = s.find(',', pos);
    const std::string name = s.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    bool found = false;
    for (unsigned i = 0; i < toga::fault_site_count; ++i)
      if (name == toga::to_string(static_cast<toga::fault_site>(i))) {
        m |= 1u << i;
        found = true;
      }
    if (!found) {
      error = "unknown fault site '" + name + "'; use none, all, or a comma-separated list of:";
      for (unsigned i = 0; i < toga::fault_site_count; ++i)
        error += std::string(i ? ", " : " ") + toga::to_string(static_cast<toga::fault_site>(i));
      return false;
    }
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  mask = m;
  return true;
}

const char* to_string(verdict_kind k) {
  switch (k) {
    case verdict_kind::pass: return "pass";
    case verdict_kind::invariant: return "invariant";
    case verdict_kind::deadlock: return "deadlock";
    case verdict_kind::livelock: return "livelock";
    case verdict_kind::cuda_rule: return "cuda-rule";
    case verdict_kind::crash: return "crash";
  }
  return "?";
}

namespace {
constexpr unsigned no_lane = ~0u;
// Lane stacks: 128 KiB; guarded stacks in debug builds (the plain one has no guard page).
constexpr std::size_t lane_stack_bytes = 128 * 1024;

struct lane_props : boost::fibers::fiber_properties {
  using fiber_properties::fiber_properties;
  unsigned lane = no_lane;
};
}  // namespace

//! The Boost.Fiber scheduling algorithm installed on every thread that runs worlds. It does not
//! decide anything: the world names the lane to run (`next_lane_`) before every switch, and
//! pick_next() returns that lane's context. Main and dispatcher contexts run only when no lane
//! is named (before and after a schedule).
class fiber_algorithm final : public boost::fibers::algo::algorithm_with_properties<lane_props> {
 public:
  void awakened(boost::fibers::context* ctx, lane_props& props) noexcept override {
    world* w = world::tls_current_;
    if (w && ctx->is_context(boost::fibers::type::worker_context)) {
      if (props.lane == no_lane) props.lane = w->registered_++;  // creation order = lane order
      w->ready_[props.lane] = ctx;
      return;
    }
    others_.push_back(ctx);
  }
  boost::fibers::context* pick_next() noexcept override {
    world* w = world::tls_current_;
    if (w && w->next_lane_ != no_lane) {
      boost::fibers::context* ctx = w->ready_[w->next_lane_];
      if (ctx) {
        w->ready_[w->next_lane_] = nullptr;
        w->next_lane_ = no_lane;
        return ctx;
      }
    }
    if (others_.empty()) return nullptr;
    auto* ctx = others_.front();
    others_.pop_front();
    return ctx;
  }
  bool has_ready_fibers() const noexcept override {
    world* w = world::tls_current_;
    return !others_.empty() || (w && w->next_lane_ != no_lane);
  }
  void suspend_until(std::chrono::steady_clock::time_point const&) noexcept override {
    std::fputs("toga-sim internal error: the fiber scheduler has nothing to run\n", stderr);
    std::abort();
  }
  void notify() noexcept override {}

 private:
  std::deque<boost::fibers::context*> others_;
};

namespace {
void install_algorithm_once() {
  thread_local bool installed = false;
  if (!installed) {
    boost::fibers::use_scheduling_algorithm<fiber_algorithm>();
    installed = true;
  }
}
#ifdef NDEBUG
using stack_allocator = boost::context::pooled_fixedsize_stack;
#else
using stack_allocator = boost::context::protected_fixedsize_stack;
#endif
stack_allocator& thread_stacks() {
  thread_local stack_allocator alloc(lane_stack_bytes);
  return alloc;
}
}  // namespace

world::world(const launch_config& cfg, strategy& strat, run_limits limits)
    : cfg_(cfg), strategy_(&strat), limits_(limits), next_lane_(no_lane) {
  const unsigned n = cfg.lanes();
  lanes_.resize(n);
  const unsigned warps_per_block = (cfg.threads_per_block + 31) / 32;
  warps_.resize(static_cast<std::size_t>(cfg.blocks) * warps_per_block);
  for (unsigned i = 0; i < n; ++i) {
    lane_info& li = lanes_[i].info;
    li.index = i;
    li.block = i / cfg.threads_per_block;
    li.thread = i % cfg.threads_per_block;
    li.warp = li.thread / 32;
    li.lane = li.thread % 32;
    li.sm = cfg.sms ? li.block % cfg.sms : 0;
    li.warp_global = li.block * warps_per_block + li.warp;
  }
  for (unsigned b = 0; b < cfg.blocks; ++b)
    for (unsigned w = 0; w < warps_per_block; ++w) {
      warp_rec& wr = warps_[b * warps_per_block + w];
      wr.base = b * cfg.threads_per_block + w * 32;
      const unsigned width = std::min(32u, cfg.threads_per_block - w * 32);
      wr.exited = width == 32 ? 0u : ~((1u << width) - 1u);
    }
  runnable_.resize(n);
  ready_.assign(n, nullptr);
}

world::~world() = default;

void world::add_invariant(std::string name, invariant_fn fn) {
  invariants_.emplace_back(std::move(name), std::move(fn));
}

std::string world::describe(unsigned i) const {
  const lane_info& li = lanes_[i].info;
  std::ostringstream s;
  s << "lane " << i << " (block " << li.block << ", warp " << li.warp << ", lane " << li.lane
    << ", SM " << li.sm << ")";
  return s.str();
}

run_result world::run(const std::function<void()>& body) {
  const unsigned n = cfg_.lanes();
  result_ = run_result{};
  if (n == 0 || cfg_.sms == 0) {
    result_.kind = verdict_kind::cuda_rule;
    result_.message = "launch has no threads or no SMs";
    return result_;
  }
  const unsigned blocks_per_sm = (cfg_.blocks + cfg_.sms - 1) / cfg_.sms;
  if (cfg_.threads_per_block > 1024 || blocks_per_sm * cfg_.threads_per_block > max_threads_per_sm) {
    result_.kind = verdict_kind::cuda_rule;
    std::ostringstream s;
    s << "launch of " << cfg_.blocks << " blocks x " << cfg_.threads_per_block << " threads on "
      << cfg_.sms << " SMs puts " << blocks_per_sm * cfg_.threads_per_block
      << " threads on one SM; at most " << max_threads_per_sm
      << " may be resident (and at most 1024 per block): use more SMs or fewer threads";
    result_.message = s.str();
    return result_;
  }
  install_algorithm_once();
  tls_current_ = this;
  for (unsigned i = 0; i < n; ++i) runnable_.set(i);
  alive_ = n;
  aborting_ = false;
  // The first lane is the strategy's first decision.
  current_ = no_lane;
  current_ = n > 1 ? pick(false, false) : 0;
  next_lane_ = current_;
  {
    std::vector<boost::fibers::fiber> fibers;
    fibers.reserve(n);
    for (unsigned i = 0; i < n; ++i)
      fibers.emplace_back(std::allocator_arg, thread_stacks(), [this, i, &body] { lane_main(i, body); });
    for (auto& f : fibers) f.join();
  }
  tls_current_ = nullptr;
  if (!result_.failed()) {
    // quiescence: one last look at the invariants
    for (auto& [name, fn] : invariants_)
      if (auto msg = fn()) {
        result_.kind = verdict_kind::invariant;
        result_.message = "invariant '" + name + "' violated at quiescence: " + *msg;
        break;
      }
  }
  return std::move(result_);
}

void world::lane_main(unsigned i, const std::function<void()>& body) {
  // We run because the world named us; current_ == i.
  if (!aborting_) {
    try {
      note_step(op::start);
      body();
    } catch (const lane_abort&) {
    } catch (const lane_failure& f) {
      if (!aborting_) {
        result_.kind = f.kind;
        result_.message = describe(i) + ": " + f.message;
        aborting_ = true;
      }
    } catch (const std::exception& e) {
      if (!aborting_) {
        result_.kind = verdict_kind::crash;
        result_.message = describe(i) + " threw " + e.what();
        aborting_ = true;
      }
    } catch (...) {
      if (!aborting_) {
        result_.kind = verdict_kind::crash;
        result_.message = describe(i) + " threw a non-standard exception";
        aborting_ = true;
      }
    }
  }
  lane_exit(i);
}

void world::lane_exit(unsigned i) {
  lanes_[i].st = status::exited;
  runnable_.reset(i);
  --alive_;
  if (!aborting_) {
    note_step(op::exit);
    // Exited lanes are not waited for: collectives that waited only on us may complete now.
    warp_rec& w = warps_[lanes_[i].info.warp_global];
    w.exited |= 1u << lanes_[i].info.lane;
    try {
      for (std::uint32_t p = w.pending; p; p &= p - 1) {
        const unsigned l = static_cast<unsigned>(std::countr_zero(p));
        if (w.pending & (1u << l)) try_complete(w, l, no_lane);
      }
    } catch (const lane_abort&) {
    }
  }
  if (alive_ == 0) {
    next_lane_ = no_lane;  // main runs next
    return;
  }
  if (aborting_) {
    // Unwind the remaining lanes one after another: each resumes inside switch_to and throws.
    for (unsigned j = 0; j < lanes_.size(); ++j)
      if (lanes_[j].st != status::exited) {
        current_ = next_lane_ = j;
        return;
      }
  }
  if (runnable_.count() == 0) {
    try {
      report_stuck();
    } catch (const lane_abort&) {
    }
    for (unsigned j = 0; j < lanes_.size(); ++j)
      if (lanes_[j].st != status::exited) {
        current_ = next_lane_ = j;
        return;
      }
  }
  const unsigned next = runnable_.count() == 1 ? runnable_.nth(0) : pick(false, false);
  ++result_.switches;
  current_ = next_lane_ = next;
}

void world::note_step(op k) {
  ++result_.steps;
  if (tracer_) tracer_(result_.steps, current_, k);
  lanes_[current_].last_op = k;
  std::uint64_t h = result_.trace_hash ^ ((static_cast<std::uint64_t>(current_) << 8) | static_cast<std::uint64_t>(k));
  result_.trace_hash = mix64(h);
}

void world::check_invariants() {
  for (auto& [name, fn] : invariants_)
    if (auto msg = fn())
      abort_run(verdict_kind::invariant, "invariant '" + name + "' violated after step " +
                                             std::to_string(result_.steps) + ": " + *msg);
}

void world::abort_run(verdict_kind k, std::string message) {
  if (!aborting_) {
    result_.kind = k;
    result_.message = std::move(message);
    aborting_ = true;
  }
  throw lane_abort{};
}

unsigned world::pick(bool yield, bool current_runnable) {
  pick_context c{runnable_, current_, current_runnable, yield, result_.steps};
  if (result_.steps >= limits_.fair_after) return default_pick(c);  // fair tail: not recorded
  const unsigned next = strategy_->pick_lane(c);
  if (next >= runnable_.size() || !runnable_.test(next)) {
    std::fputs("toga-sim internal error: strategy picked a lane that cannot run\n", stderr);
    std::abort();
  }
  // Record deviations from the default policy as lane ids and everything else as the
  // `decision_default` marker: a list stays meaningful when shrinking removes one deviation.
  const unsigned def = default_pick(c);
  std::uint8_t flags = 0;
  if (next != def) flags |= (current_runnable && !yield && next != current_) ? 1 : 2;
  result_.decisions.push_back(next == def ? decision_default : next);
  result_.decision_flags.push_back(flags);
  return next;
}

std::uint32_t world::choose(std::uint32_t n) {
  if (n <= 1) return 0;
  std::uint32_t v = 0;
  if (result_.steps < limits_.fair_after) {
    v = strategy_->pick_value(n, result_.steps);
    if (v >= n) v = n - 1;
    result_.decisions.push_back(v);
    result_.decision_flags.push_back(4);
  }
  result_.trace_hash = mix64(result_.trace_hash ^ (0x5eedull << 32) ^ v);
  return v;
}

void world::switch_to(unsigned next) {
  current_ = next_lane_ = next;
  boost::this_fiber::yield();
  if (aborting_) throw lane_abort{};
}

void world::point(op k) {
  if (aborting_) throw lane_abort{};
  note_step(k);
  if (!invariants_.empty()) check_invariants();
  if (result_.steps > limits_.max_steps) {
    std::ostringstream s;
    s << "no progress: " << limits_.max_steps << " scheduling points exceeded ("
      << limits_.fair_after << " of them under the strategy, the rest under the fair tail); "
      << alive_ << " lanes still alive";
    unsigned shown = 0;
    for (unsigned j = 0; j < lanes_.size() && shown < 4; ++j)
      if (lanes_[j].st != status::exited) {
        s << (shown ? ", " : ": ") << describe(j) << " at " << to_string(lanes_[j].last_op);
        ++shown;
      }
    abort_run(verdict_kind::livelock, s.str());
  }
  if (runnable_.count() < 2) return;
  const bool yield = k == op::backoff;
  const unsigned next = pick(yield, true);
  if (next != current_) {
    ++result_.switches;
    if (!yield) ++result_.preemptions;
    switch_to(next);
  }
}

void world::make_runnable(unsigned i) {
  lanes_[i].st = status::runnable;
  runnable_.set(i);
}

void world::block_current() {
  const unsigned me = current_;
  lanes_[me].st = status::blocked;
  runnable_.reset(me);
  if (runnable_.count() == 0) report_stuck();
  const unsigned next = runnable_.count() == 1 ? runnable_.nth(0) : pick(false, false);
  ++result_.switches;
  switch_to(next);
}

void world::report_stuck() {
  // Every live lane is blocked in a warp intrinsic. Name one waiting lane and what it waits for.
  std::ostringstream s;
  verdict_kind kind = verdict_kind::deadlock;
  for (const warp_rec& w : warps_) {
    for (std::uint32_t p = w.pending; p; p &= p - 1) {
      const unsigned l = static_cast<unsigned>(std::countr_zero(p));
      const std::uint32_t need = w.mask[l] & ~w.exited;
      for (std::uint32_t q = need & ~(1u << l); q; q &= q - 1) {
        const unsigned o = static_cast<unsigned>(std::countr_zero(q));
        if (!(w.pending & (1u << o))) continue;
        if (w.kind[o] != w.kind[l] || w.mask[o] != w.mask[l]) {
          kind = verdict_kind::cuda_rule;
          s << describe(w.base + l) << " waits in " << w.name[l] << "(mask 0x" << std::hex
            << w.mask[l] << ") for lane " << std::dec << o << ", which waits in " << w.name[o]
            << "(mask 0x" << std::hex << w.mask[o] << std::dec
            << "): the lanes named in a mask must all call the same intrinsic with the same mask";
          abort_run(kind, s.str());
        }
      }
      if (s.tellp() == 0)
        s << describe(w.base + l) << " waits in " << w.name[l] << "(mask 0x" << std::hex
          << w.mask[l] << std::dec << ")";
    }
  }
  abort_run(kind, "deadlock: no lane can run; " + (s.tellp() ? s.str() : std::string("all lanes blocked")));
}

bool world::try_complete(warp_rec& w, unsigned l, unsigned self_lane) {
  const std::uint32_t need = w.mask[l] & ~w.exited;
  if ((w.pending & need) != need) return false;
  for (std::uint32_t q = need; q; q &= q - 1) {
    const unsigned j = static_cast<unsigned>(std::countr_zero(q));
    if (w.kind[j] != w.kind[l] || w.mask[j] != w.mask[l]) return false;  // mismatched: stuck
  }
  const op k = w.kind[l];
  if (k == op::ballot) {
    std::uint32_t vote = 0;
    for (std::uint32_t q = need; q; q &= q - 1) {
      const unsigned j = static_cast<unsigned>(std::countr_zero(q));
      if (w.value[j]) vote |= 1u << j;
    }
    for (std::uint32_t q = need; q; q &= q - 1) w.result[std::countr_zero(q)] = vote;
  } else if (k == op::reduce_or) {
    std::uint64_t acc = 0;
    for (std::uint32_t q = need; q; q &= q - 1) acc |= w.value[std::countr_zero(q)];
    for (std::uint32_t q = need; q; q &= q - 1) w.result[std::countr_zero(q)] = acc;
  } else if (k == op::match_any) {
    for (std::uint32_t q = need; q; q &= q - 1) {
      const unsigned j = static_cast<unsigned>(std::countr_zero(q));
      std::uint32_t m = 0;
      for (std::uint32_t r = need; r; r &= r - 1) {
        const unsigned i = static_cast<unsigned>(std::countr_zero(r));
        if (w.value[i] == w.value[j]) m |= 1u << i;
      }
      w.result[j] = m;
    }
  } else if (k == op::shfl) {
    for (std::uint32_t q = need; q; q &= q - 1) {
      const unsigned j = static_cast<unsigned>(std::countr_zero(q));
      const unsigned s = w.src[j] & 31u;
      if (!(need & (1u << s))) {
        std::ostringstream m;
        m << describe(w.base + j) << ": __shfl_sync reads lane " << s << ", which is "
          << ((w.mask[l] & (1u << s)) ? "exited" : "not in the mask") << " (mask 0x" << std::hex
          << w.mask[l] << "): the result is undefined on CUDA";
        abort_run(verdict_kind::cuda_rule, m.str());
      }
      w.result[j] = w.value[s];
    }
  } else {
    for (std::uint32_t q = need; q; q &= q - 1) w.result[std::countr_zero(q)] = 0;
  }
  w.pending &= ~need;
  for (std::uint32_t q = need; q; q &= q - 1) {
    const unsigned j = static_cast<unsigned>(std::countr_zero(q));
    if (w.base + j != self_lane) make_runnable(w.base + j);
  }
  return true;
}

std::uint64_t world::collective(op k, std::uint32_t mask, std::uint64_t value, unsigned src,
                                const char* name) {
  point(k);
  const lane_info& li = lanes_[current_].info;
  warp_rec& w = warps_[li.warp_global];
  const std::uint32_t bit = 1u << li.lane;
  if (!(mask & bit)) {
    std::ostringstream m;
    m << name << "(mask 0x" << std::hex << mask << std::dec << ") called by lane " << li.lane
      << ", which is not in the mask: the caller must be named in the mask";
    abort_run(verdict_kind::cuda_rule, m.str());
  }
  w.kind[li.lane] = k;
  w.name[li.lane] = name;
  w.mask[li.lane] = mask;
  w.value[li.lane] = value;
  w.src[li.lane] = src;
  w.pending |= bit;
  if (!try_complete(w, li.lane, current_)) block_current();
  return w.result[li.lane];
}

std::uint32_t world::activemask(std::uint64_t site) {
  point(op::activemask);
  const lane_info& li = lanes_[current_].info;
  warp_rec& w = warps_[li.warp_global];
  const std::uint32_t bit = 1u << li.lane;
  w.parked |= bit;
  w.site[li.lane] = site;
  // The strategy may let other lanes arrive at this call site before the group closes. This is
  // a yield: by default the other lanes run (and converge here, as lanes of a warp that reach
  // the same instruction tend to on a GPU); closing the group at once is the deviation.
  if (runnable_.count() >= 2) {
    const unsigned next = pick(true, true);
    if (next != current_) {
      ++result_.switches;
      switch_to(next);
    }
  }
  if (w.parked & bit) {
    // We close the group: every lane parked at the same site in this warp.
    std::uint32_t group = 0;
    for (std::uint32_t q = w.parked; q; q &= q - 1) {
      const unsigned j = static_cast<unsigned>(std::countr_zero(q));
      if (w.site[j] == site) group |= 1u << j;
    }
    for (std::uint32_t q = group; q; q &= q - 1) w.result[std::countr_zero(q)] = group;
    w.parked &= ~group;
  }
  return static_cast<std::uint32_t>(w.result[li.lane]);
}

}  // namespace toga::sim
