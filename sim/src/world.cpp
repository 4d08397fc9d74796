#include "toga/sim/world.hpp"

#include <algorithm>

#include "toga/sim/faults.hpp"

#include <boost/fiber/algo/algorithm.hpp>
#include <boost/fiber/all.hpp>
#include <boost/context/pooled_fixedsize_stack.hpp>
#include <boost/context/protected_fixedsize_stack.hpp>

#include <bit>
#include <cstring>
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
    if (mask & (1u << i)) {
      if (!out.empty()) out += ',';
      out += toga::to_string(static_cast<toga::fault_site>(i));
    }
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
    li.device = cfg.devices > 1 ? li.sm % cfg.devices : 0;
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

namespace {
// Memory-model states, reused across the schedules that one OS thread runs (nested worlds, such
// as a scenario's check at quiescence, take their own).
std::vector<std::unique_ptr<memory_state>>& memory_pool() {
  thread_local std::vector<std::unique_ptr<memory_state>> pool;
  return pool;
}
}  // namespace

world::~world() {
  if (mem_) memory_pool().emplace_back(mem_);
}

void world::start_memory_tracking(memory_model m) {
  if (!mem_) {
    auto& pool = memory_pool();
    if (pool.empty()) pool.push_back(std::make_unique<memory_state>());
    mem_ = pool.back().release();
    pool.pop_back();
  }
  // (mem_ already set: the observer's shadow tracking, replaced by a fresh state here, as a world
  // without an observer starts one at its first block-scope access)
  shadow_memory_ = false;
  // The model's scope groups: blocks (block scope inside, device scope across); with several
  // devices, devices (device scope inside, system scope across; platform::model_scope).
  const bool by_device = cfg_.devices > 1;
  std::vector<unsigned> blocks(lanes_.size());
  for (std::size_t i = 0; i < lanes_.size(); ++i) blocks[i] = by_device ? lanes_[i].info.device : lanes_[i].info.block;
  mem_->reset(*this, m, blocks, by_device ? cfg_.devices : cfg_.blocks);
  mem_->set_group_names(by_device ? "device" : "block", by_device ? "system" : "device");
  if (observer_) {
    mem_->set_tracer([this](const char* what, unsigned lane, const void* addr, std::uint64_t value, unsigned pick,
                            unsigned candidates) {
      if (memory_tracer_) memory_tracer_(what, lane, addr, value, pick, candidates);
      observe_memory(what, lane, addr);
    });
  } else {
    mem_->set_tracer(memory_tracer_);
  }
}

void world::observe_memory(const char* what, unsigned lane, const void* addr) {
  // A seq_cst load or failed CAS advances its lane's epoch once (its seq_cst fence), a seq_cst
  // store or RMW twice (the fence and the release); weaker orders less (memory.cpp).
  const bool views = !shadow_memory_;
  const std::uint32_t delta = views && lane < epoch_at_point_.size() ? mem_->mark_here().epoch - epoch_at_point_[lane] : 0;
  const bool read = what[0] == 'l' || what[0] == 'c';  // "load", "cas-fail"
  observer_->access(lane, reinterpret_cast<std::uintptr_t>(addr), !read, views && delta >= (read ? 1u : 2u));
}

void world::add_invariant(std::string name, invariant_fn fn) {
  if (observer_) observer_->invariant_reads(invariants_.size(), nullptr);
  invariants_.emplace_back(std::move(name), std::move(fn));
  watched_.emplace_back();
}

void world::add_invariant_reading(std::string name, invariant_fn fn, const watched_ranges& reads) {
  add_invariant_reading(std::move(name), std::move(fn), reads, invariant_form::any);
}

void world::add_invariant_reading(std::string name, invariant_fn fn, const watched_ranges& reads, invariant_form form) {
  if (observer_) {
    std::vector<std::pair<std::uintptr_t, std::uintptr_t>> v;
    for (const auto& [b, e] : reads) v.emplace_back(reinterpret_cast<std::uintptr_t>(b), reinterpret_cast<std::uintptr_t>(e));
    observer_->invariant_reads(invariants_.size(), &v);
    if (form == invariant_form::sum_equal) observer_->invariant_is_sum(invariants_.size());
    if (form == invariant_form::word_bounds) observer_->invariant_is_word_bounds(invariants_.size());
  }
  invariants_.emplace_back(std::move(name), std::move(fn));
  watched_.emplace_back();
}

void world::add_invariant(std::string name, invariant_fn fn, watched_ranges watched) {
  invariants_.emplace_back(std::move(name), std::move(fn));
  std::vector<std::pair<std::uintptr_t, std::uintptr_t>> r;
  for (const auto& [b, e] : watched) r.emplace_back(reinterpret_cast<std::uintptr_t>(b), reinterpret_cast<std::uintptr_t>(e));
  // it sees what the watched writes (and ghost state updated with them) change
  if (observer_) observer_->invariant_reads(invariants_.size(), &r);
  std::sort(r.begin(), r.end());
  if (r.empty()) r.emplace_back(0, 0);  // watches nothing: checked at quiescence only
  watched_.push_back(std::move(r));
  watching_ = true;
}

std::string world::describe(unsigned i) const {
  const lane_info& li = lanes_[i].info;
  std::ostringstream s;
  s << "lane " << i << " (block " << li.block << ", warp " << li.warp << ", lane " << li.lane << ", SM " << li.sm;
  if (cfg_.devices > 1) s << " = SM " << li.sm / cfg_.devices << " of device " << li.device;
  s << ")";
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
  if (cfg_.devices == 0 || cfg_.sms % cfg_.devices != 0) {
    result_.kind = verdict_kind::cuda_rule;
    result_.message = "launch of " + std::to_string(cfg_.sms) + " SMs on " + std::to_string(cfg_.devices) +
                      " devices: the SMs must split evenly over at least one device";
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
  if (limits_.memory == memory_model::weak) {
    start_memory_tracking(memory_model::weak);
  } else if (observer_) {
    start_memory_tracking(memory_model::sc);
    mem_->set_race_check(false);
    shadow_memory_ = true;
  }
  if (observer_) epoch_at_point_.assign(n, 0);
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
  if (mem_) result_.stale_reads = mem_->stale_reads();
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

std::optional<std::string> world::exit_breaks_rendezvous(unsigned i) const {
  const warp_rec& w = warps_[lanes_[i].info.warp_global];
  const std::uint32_t bit = 1u << lanes_[i].info.lane;
  for (std::uint32_t p = w.pending; p; p &= p - 1) {
    const unsigned j = static_cast<unsigned>(std::countr_zero(p));
    if (!(w.mask[j] & bit)) continue;
    std::ostringstream m;
    m << describe(i) << " exits without executing " << w.name[j] << "(mask 0x" << std::hex << w.mask[j] << std::dec
      << "), which " << describe(w.base + j) << " waits in: every lane named in the mask that has not exited must "
      << "execute the same intrinsic with the same mask (CUDA leaves the result undefined otherwise)";
    return m.str();
  }
  return std::nullopt;
}

void world::lane_exit(unsigned i) {
  for (std::size_t k = 0; k < stalled_.size(); ++k)
    if (stalled_[k].lane == i) {
      stalled_.erase(stalled_.begin() + static_cast<std::ptrdiff_t>(k));
      break;
    }
  if (!aborting_)
    if (auto m = exit_breaks_rendezvous(i)) {
      result_.kind = verdict_kind::cuda_rule;
      result_.message = *m;
      aborting_ = true;
    }
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
  if (runnable_.count() == 0) wake_stalled(true);
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
  ++lanes_[current_].points;
  lanes_[current_].picks = 0;
  if (observer_) {
    if (mem_ && !shadow_memory_) epoch_at_point_[current_] = mem_->mark_here().epoch;
    observer_->point_op(current_, k, mem_ && !shadow_memory_);
  }
  std::uint64_t h = result_.trace_hash ^ ((static_cast<std::uint64_t>(current_) << 8) | static_cast<std::uint64_t>(k));
  result_.trace_hash = mix64(h);
}

void world::check_invariants() {
  // a watched invariant runs when a write since the last check fell in one of its ranges
  const auto hit = [this](const std::vector<std::pair<std::uintptr_t, std::uintptr_t>>& ranges) {
    for (const std::uintptr_t a : writes_) {
      auto it = std::upper_bound(ranges.begin(), ranges.end(), std::make_pair(a, ~std::uintptr_t{0}));
      if (it != ranges.begin() && a < std::prev(it)->second) return true;
    }
    return false;
  };
  for (std::size_t i = 0; i < invariants_.size(); ++i) {
    if (!watched_[i].empty() && !hit(watched_[i])) continue;
    checking_ = true;
    auto msg = invariants_[i].second();
    checking_ = false;
    if (msg)
      abort_run(verdict_kind::invariant, "invariant '" + invariants_[i].first + "' violated after step " +
                                             std::to_string(result_.steps) + ": " + *msg);
  }
  writes_.clear();
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
  std::uint64_t anchor = anchor_key(current_, 0, 0);  // the first choice: no lane ran yet
  if (current_ < lanes_.size()) {
    lane_rec& l = lanes_[current_];
    anchor = anchor_key(current_, l.points, l.picks++);
  }
  pick_context c{runnable_, current_, current_runnable, yield, result_.steps, anchor, current_runnable ? site_file_ : nullptr,
                 current_runnable ? site_line_ : 0u};
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
  result_.decision_lanes.push_back(current_);
  result_.decision_anchors.push_back(anchor);
  result_.decision_steps.push_back(result_.steps);
  return next;
}

std::uint32_t world::choose(std::uint32_t n) { return choose(n, n); }

std::uint32_t world::choose(std::uint32_t n, std::uint32_t distinct) {
  distinct = std::clamp<std::uint32_t>(distinct, 1, std::max<std::uint32_t>(n, 1));
  if (n <= 1 || distinct <= 1) return 0;
  std::uint32_t v = 0;
  if (result_.steps < limits_.fair_after) {
    const std::uint32_t asked = strategy_->enumerates_values() ? distinct : n;
    v = strategy_->pick_value(asked, result_.steps, current_);
    if (v >= asked) v = asked - 1;
    v = std::min(v, distinct - 1);
    result_.decisions.push_back(v);
    result_.decision_flags.push_back(4);
    result_.decision_lanes.push_back(current_);
    result_.decision_anchors.push_back(0);
    result_.decision_steps.push_back(result_.steps);
  }
  result_.trace_hash = mix64(result_.trace_hash ^ (0x5eedull << 32) ^ v);
  return v;
}

void world::switch_to(unsigned next) {
  current_ = next_lane_ = next;
  boost::this_fiber::yield();
  if (aborting_) throw lane_abort{};
}

void world::point(op k, const char* file, std::uint32_t line) {
  if (aborting_) throw lane_abort{};
  site_file_ = file;
  site_line_ = line;
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
  if (!stalled_.empty()) wake_stalled(false);
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
  if (runnable_.count() == 0) wake_stalled(true);
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
    if (k == op::syncwarp && mem_) {  // __syncwarp orders memory among its lanes
      unsigned who[32], n = 0;
      for (std::uint32_t q = need; q; q &= q - 1) who[n++] = w.base + static_cast<unsigned>(std::countr_zero(q));
      mem_->barrier(who, n);
    }
  }
  w.pending &= ~need;
  for (std::uint32_t q = need; q; q &= q - 1) {
    const unsigned j = static_cast<unsigned>(std::countr_zero(q));
    if (w.base + j != self_lane) make_runnable(w.base + j);
  }
  if (observer_) observer_->released(w.base, need);
  return true;
}

std::uint64_t world::collective(op k, std::uint32_t mask, std::uint64_t value, unsigned src,
                                const char* name) {
  point(k);
  if (observer_) observer_->arrival(current_, k, mask);
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
  if (!try_complete(w, li.lane, current_)) {
    check_wait_cycle(w, li.lane);
    block_current();
  } else if (limits_.rendezvous_yield && (mask & ~w.exited) != bit && runnable_.count() >= 2) {
    // dpor: the completing lane resumes like the lanes it released, when the strategy picks it
    // (limits::rendezvous_yield), so that the order of the arrivals does not matter (a group of
    // one has no other arrival to commute with: its lane runs on)
    const std::uint64_t r = w.result[li.lane];
    const unsigned next = pick(false, true);
    if (next != current_) {
      ++result_.switches;
      switch_to(next);
    }
    return r;
  }
  return w.result[li.lane];
}

// Lane a waits for lane b when b is named in a's mask, has not exited, and waits itself in a
// different intrinsic or with a different mask (so it cannot arrive at a's). A cycle of such waits
// through the lane that just blocked can never complete.
void world::check_wait_cycle(warp_rec& w, unsigned start) {
  auto waits_for = [&w](unsigned a) {
    std::uint32_t out = 0;
    for (std::uint32_t q = w.mask[a] & ~w.exited & w.pending & ~(1u << a); q; q &= q - 1) {
      const unsigned b = static_cast<unsigned>(std::countr_zero(q));
      if (w.kind[b] != w.kind[a] || w.mask[b] != w.mask[a]) out |= 1u << b;
    }
    return out;
  };
  // depth-first search for a path start -> ... -> start
  unsigned path[33], depth = 0;
  std::uint32_t todo[33], visited = 1u << start;
  path[0] = start;
  todo[0] = waits_for(start);
  for (;;) {
    if (todo[depth] == 0) {
      if (depth == 0) return;
      --depth;
      continue;
    }
    const unsigned b = static_cast<unsigned>(std::countr_zero(todo[depth]));
    todo[depth] &= todo[depth] - 1;
    if (b == start) {  // path[0] -> path[1] -> ... -> path[depth] -> start (depth >= 1: no self-waits)
      const unsigned next = path[1];
      std::ostringstream m;
      m << describe(w.base + start) << " waits in " << w.name[start] << "(mask 0x" << std::hex << w.mask[start]
        << std::dec << ") for lane " << next << ", which waits in " << w.name[next] << "(mask 0x" << std::hex
        << w.mask[next] << std::dec << ")"
        << (depth > 1 ? " (a cycle of " + std::to_string(depth + 1) + " lanes)" : std::string(" for it"))
        << ": the lanes named in a mask must all call the same intrinsic with the same mask, and these never will";
      abort_run(verdict_kind::cuda_rule, m.str());
    }
    if (visited & (1u << b)) continue;
    visited |= 1u << b;
    path[++depth] = b;
    todo[depth] = waits_for(b);
  }
}

std::uint32_t world::activemask(std::uint64_t site) {
  point(op::activemask);
  if (observer_) observer_->arrival(current_, op::activemask, 0);
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
    // Fault: a random subset only (each other lane with probability 1/2); the rest stay parked
    // and close their own groups when they resume.
    if (group != bit && (limits_.faults & fault_bit(toga::fault_site::partial_mask)) &&
        fault_fires(toga::fault_site::partial_mask)) {
      ++result_.faults_fired;
      std::uint32_t keep = bit;
      for (std::uint32_t q = group & ~bit; q; q &= q - 1)
        if (choose(2)) keep |= q & (~q + 1);
      group = keep;
    }
    for (std::uint32_t q = group; q; q &= q - 1) w.result[std::countr_zero(q)] = group;
    w.parked &= ~group;
  }
  return static_cast<std::uint32_t>(w.result[li.lane]);
}

// ---- fault sites ----------------------------------------------------------------------------------

bool world::fault_fires(toga::fault_site site) {
  std::uint8_t& st = fault_state_[static_cast<unsigned>(site)];
  if (st == 0) st = choose(4) == 3 ? 2 : 1;  // per schedule: active with probability 1/4
  return st == 2 && choose(4) == 3;          // per hit: fires with probability 1/4
}

bool world::inject(toga::fault_site site) {
  if (aborting_) throw lane_abort{};
  if (!(limits_.faults & fault_bit(site)) || site >= toga::fault_site::partial_mask) return false;
  if (!fault_fires(site)) return false;
  ++result_.faults_fired;
  if (toga::is_failure_site(site)) return true;
  std::uint32_t n = stall_steps_min + choose(stall_steps_max - stall_steps_min + 1);
  if (site == toga::fault_site::delay_grace_period) n *= delay_factor;
  stall_current(n);
  return false;
}

void world::poison(void* p, std::uint64_t bytes) {
  if (aborting_) throw lane_abort{};
  if (!(limits_.faults & fault_bit(toga::fault_site::poison_freed)) || bytes == 0) return;
  if (!fault_fires(toga::fault_site::poison_freed)) return;
  ++result_.faults_fired;
  std::memset(p, poison_byte, bytes);
}

void world::stall_current(std::uint32_t steps) {
  const unsigned me = current_;
  if (runnable_.count() < 2) return;  // nobody else could run meanwhile
  runnable_.reset(me);
  stalled_.push_back({me, result_.steps + steps});
  const unsigned next = runnable_.count() == 1 ? runnable_.nth(0) : pick(false, false);
  ++result_.switches;
  ++result_.preemptions;  // a fired stall takes a runnable lane off at an ordinary point
  switch_to(next);
}

void world::wake_stalled(bool force) {
  // Wake every lane whose stall is over; with `force` (nobody can run), the one due first.
  for (std::size_t i = 0; i < stalled_.size();) {
    if (stalled_[i].until <= result_.steps) {
      runnable_.set(stalled_[i].lane);
      stalled_.erase(stalled_.begin() + static_cast<std::ptrdiff_t>(i));
    } else {
      ++i;
    }
  }
  if (force && runnable_.count() == 0 && !stalled_.empty()) {
    std::size_t first = 0;
    for (std::size_t i = 1; i < stalled_.size(); ++i)
      if (stalled_[i].until < stalled_[first].until) first = i;
    runnable_.set(stalled_[first].lane);
    stalled_.erase(stalled_.begin() + static_cast<std::ptrdiff_t>(first));
  }
}

}  // namespace toga::sim
