#include "toga/sim/runner.hpp"

#include <set>

#include <nlohmann/json.hpp>
#include <oneapi/tbb/blocked_range.h>
#include <oneapi/tbb/parallel_for.h>
#include <oneapi/tbb/enumerable_thread_specific.h>
#include <oneapi/tbb/task_arena.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>
#include <stdexcept>
#include <thread>
#include <csignal>
#include <cstdlib>
#include <unistd.h>

#include "toga/sim/faults.hpp"
#include "toga/sim/world.hpp"

namespace toga::sim {

bool params::parse(const std::string& item, std::string& error) {
  const auto eq = item.find('=');
  if (eq == std::string::npos || eq == 0) {
    error = "parameter '" + item + "' is not of the form name=value";
    return false;
  }
  try {
    std::size_t used = 0;
    const std::string v = item.substr(eq + 1);
    const long long x = std::stoll(v, &used, 0);
    if (used != v.size()) throw std::invalid_argument(v);
    values_[item.substr(0, eq)] = x;
  } catch (const std::exception&) {
    error = "parameter '" + item + "': the value must be an integer";
    return false;
  }
  return true;
}

std::optional<std::string> check_limits(const run_limits& l) {
  if (l.fair_after == 0 || l.max_steps == 0)
    return "the limits must be positive (fair_after " + std::to_string(l.fair_after) + ", max_steps " +
           std::to_string(l.max_steps) + ")";
  if (l.fair_after >= l.max_steps)
    return "fair_after (" + std::to_string(l.fair_after) + ") must be below max_steps (" + std::to_string(l.max_steps) +
           "): the fair tail must get some steps";
  if (l.max_steps > max_steps_bound)
    return "max_steps " + std::to_string(l.max_steps) + " exceeds the bound of " + std::to_string(max_steps_bound) +
           " scheduling points per schedule";
  return std::nullopt;
}

run_result run_one(const scenario& sc, const params& p, strategy& strat, std::uint64_t seed,
                   const run_limits& limits, world::tracer_fn tracer, memory_state::tracer_fn memory_tracer) {
  const launch_config cfg = sc.shape(p);
  strat.begin(seed, cfg.lanes());
  world w(cfg, strat, limits);
  if (tracer) w.set_tracer(std::move(tracer));
  if (memory_tracer) w.set_memory_tracer(std::move(memory_tracer));
  std::unique_ptr<instance> inst = sc.make(w, p);
  run_result r = w.run([&] { inst->lane(); });
  if (!r.failed())
    if (auto msg = inst->check_final()) {
      r.kind = verdict_kind::invariant;
      r.message = "final check failed: " + *msg;
    }
  r.metrics = inst->metrics();
  return r;
}

namespace {
std::string program = "toga-sim";
char program_c[256] = "toga-sim";  // the crash reporter's copy (no allocation in a signal handler)
}  // namespace

void set_program_name(const std::string& name) {
  program = name.empty() ? std::string("toga-sim") : name.substr(0, sizeof program_c - 1);
  std::memcpy(program_c, program.c_str(), program.size() + 1);
}
const std::string& program_name() { return program; }

namespace {
// The tail every command that reruns a schedule carries: the shape's --set values and the limits,
// memory model and faults that differ from the scenario's.
void append_shape_and_limits(std::ostringstream& c, const scenario& sc, const params& p, const run_limits& limits) {
  for (const auto& [k, v] : p.values()) c << " --set " << k << "=" << v;
  if (limits.fair_after != sc.limits.fair_after) c << " --fair-after " << limits.fair_after;
  if (limits.max_steps != sc.limits.max_steps) c << " --max-steps " << limits.max_steps;
  if (limits.memory != memory_model::sc) c << " --memory " << to_string(limits.memory);
  if (limits.faults) c << " --faults " << faults_to_string(limits.faults);
}
}  // namespace

std::string replay_command(const scenario& sc, const params& p, const strategy_config& s,
                           std::uint64_t seed, const run_limits& limits) {
  std::ostringstream c;
  c << program << " replay --scenario " << sc.name << " --strategy " << to_string(s.kind);
  if (s.kind == strategy_kind::pct) c << " --pct-depth " << s.pct_depth << " --pct-steps " << s.pct_steps;
  c << " --seed " << seed;
  append_shape_and_limits(c, sc, p, limits);
  return c.str();
}

// ---- crash reports -----------------------------------------------------------------------------

crash_context& this_thread_crash_context() {
  thread_local crash_context c;
  return c;
}

namespace {
int crash_fd = -1;
// async-signal-safe output
void put(int fd, const char* s) {
  std::size_t n = 0;
  while (s[n]) ++n;
  while (n > 0) {
    const ssize_t w = ::write(fd, s, n);
    if (w <= 0) return;
    s += w;
    n -= static_cast<std::size_t>(w);
  }
}
void put_u64(int fd, std::uint64_t v) {
  char buf[24];
  int i = 23;
  buf[i] = 0;
  do {
    buf[--i] = static_cast<char>('0' + v % 10);
    v /= 10;
  } while (v);
  put(fd, buf + i);
}
void on_crash(int sig) {
  const crash_context& c = this_thread_crash_context();
  put(2, "\ntoga-sim: the code under test crashed the simulator (signal ");
  put_u64(2, static_cast<std::uint64_t>(sig));
  if (c.active && c.calibration) {
    put(2, ", a wild memory access or the like) in the default-policy schedule that calibrates PCT (before schedule 0) of "
           "scenario ");
    put(2, c.scenario);
    if (c.replay != nullptr) {  // a random shape's calibration: the command fixes the drawn shape
      put(2, " (a random shape, schedule ");
      put_u64(2, c.index);
      put(2, "); it runs again first in:\n  ");
      put(2, c.replay);
      put(2, "\n");
    } else {
      put(2, "; it runs again first in:\n  ");
      put(2, program_c);
      put(2, " explore --scenario ");
      put(2, c.scenario);
      put(2, " --strategy portfolio --schedules 1 --threads 1 (with the same --set, --memory and --faults options)\n");
    }
    if (crash_fd >= 0) {  // CRASH 0 0 255 (calibration) 0 0 signal
      put(crash_fd, "CRASH 0 0 255 0 0 ");
      put_u64(crash_fd, static_cast<std::uint64_t>(sig));
      put(crash_fd, "\n");
    }
  } else if (c.active && c.replaying) {
    put(2, ", a wild memory access or the like) in the schedule this replay runs, of scenario ");
    put(2, c.scenario);
    put(2, ": the same command replays it again; run it under a debugger (gdb --args ...) to see where\n");
  } else if (c.active) {
    put(2, ", a wild memory access or the like) in schedule ");
    put_u64(2, c.index);
    put(2, " of scenario ");
    put(2, c.scenario);
    if (c.replay != nullptr) {  // a random shape: the whole command, with its drawn --set values
      put(2, " (a random shape); replay it alone (under a debugger) with:\n  ");
      put(2, c.replay);
      put(2, "\n");
    } else {
      put(2, "; replay it alone (under a debugger) with:\n  ");
      put(2, program_c);
      put(2, " replay --scenario ");
      put(2, c.scenario);
      put(2, " --strategy ");
      put(2, to_string(c.strategy));
      if (c.strategy == strategy_kind::pct) {
        put(2, " --pct-depth ");
        put_u64(2, c.pct_depth);
        put(2, " --pct-steps ");
        put_u64(2, c.pct_steps);
      }
      put(2, " --seed ");
      put_u64(2, c.seed);
      put(2, " (with the same --set, --memory and --faults options)\n");
    }
    if (crash_fd >= 0) {  // CRASH index seed strategy pct_depth pct_steps signal
      put(crash_fd, "CRASH ");
      put_u64(crash_fd, c.index);
      put(crash_fd, " ");
      put_u64(crash_fd, c.seed);
      put(crash_fd, " ");
      put_u64(crash_fd, static_cast<std::uint64_t>(c.strategy));
      put(crash_fd, " ");
      put_u64(crash_fd, c.pct_depth);
      put(crash_fd, " ");
      put_u64(crash_fd, c.pct_steps);
      put(crash_fd, " ");
      put_u64(crash_fd, static_cast<std::uint64_t>(sig));
      put(crash_fd, "\n");
    }
  } else {
    put(2, ")\n");
  }
  ::_exit(3);
}
}  // namespace

void install_crash_reporter(int fd) {
  crash_fd = fd;
  struct sigaction sa {};
  sa.sa_handler = on_crash;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_ONSTACK;
  for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL}) sigaction(sig, &sa, nullptr);
}

namespace {

// PCT's k: the length of a default-policy schedule (deterministic, so identical on every
// thread count).
// `shape`: schedule `index`'s drawn shape (random shapes): a crash report then gives the command
// that calibrates on that shape again (explore with the shape's --set values, one PCT schedule).
std::uint64_t calibrate_steps(const scenario& sc, const params& p, const run_limits& limits, bool shape = false,
                              std::uint64_t index = 0) {
  replay_strategy def({});
  crash_context& cc = this_thread_crash_context();
  const crash_context saved = cc;
  thread_local std::string command;  // (made here: the signal handler cannot allocate)
  if (shape) {
    std::ostringstream c;
    c << program << " explore --scenario " << sc.name << " --strategy pct --schedules 1 --threads 1";
    append_shape_and_limits(c, sc, p, limits);
    command = c.str();
  }
  cc.active = true;
  cc.calibration = true;
  cc.scenario = sc.name.c_str();
  cc.index = index;
  cc.replay = shape ? command.c_str() : nullptr;
  const run_result r = run_one(sc, p, def, 0, limits);
  cc = saved;
  return r.steps ? r.steps : 1;
}

class progress_line {
 public:
  progress_line(bool on, std::uint64_t total, const std::atomic<std::uint64_t>& done,
                const std::string& label)
      : on_(on && ::isatty(2)) {
    if (!on_) return;
    thread_ = std::thread([this, total, &done, label] {
      const auto t0 = std::chrono::steady_clock::now();
      while (!stop_.load()) {
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
        const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        const std::uint64_t d = done.load();
        std::fprintf(stderr, "\r%s: %llu/%llu schedules (%.0f/s)   ", label.c_str(),
                     static_cast<unsigned long long>(d), static_cast<unsigned long long>(total),
                     s > 0 ? d / s : 0.0);
      }
      std::fputs("\r\033[K", stderr);
    });
  }
  ~progress_line() {
    if (!on_) return;
    stop_ = true;
    thread_.join();
  }

 private:
  bool on_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace

std::pair<std::uint64_t, std::uint64_t> shard_range(std::uint64_t schedules, std::uint64_t shard, std::uint64_t shards) {
  if (shards == 0) throw std::invalid_argument("a run needs at least one shard (--shard i/N with N >= 1)");
  if (shard >= shards)
    throw std::invalid_argument("shard " + std::to_string(shard) + " of " + std::to_string(shards) + " does not exist: shards are numbered 0 .. " +
                                std::to_string(shards - 1));
  if (shards > schedules)
    throw std::invalid_argument(std::to_string(shards) + " shards of " + std::to_string(schedules) +
                                " schedules would leave some empty: give at most as many shards as schedules");
  // floor(shard * schedules / shards) without overflow for any 64-bit counts
  const auto at = [&](std::uint64_t k) {
    return static_cast<std::uint64_t>((static_cast<unsigned __int128>(k) * schedules) / shards);
  };
  return {at(shard), at(shard + 1) - at(shard)};
}

std::shared_ptr<const std::vector<std::string>> guided_targets(const scenario& sc, const run_limits& limits) {
  coverage_recorder rec;
  {
    coverage_recorder::scope on(&rec);
    for (std::uint64_t seed = 1; seed <= 256; ++seed) {
      stall_strategy st;
      rec.begin_schedule();
      (void)run_one(sc, params{}, st, seed, limits);
    }
  }
  auto out = std::make_shared<std::vector<std::string>>();
  std::set<std::string> seen;
  for (const auto& [pair, count] : summarize(rec).one_order)
    if (seen.insert(site_name(pair.first)).second) out->push_back(site_name(pair.first));
  return out;
}

explore_summary explore(const scenario& sc, const explore_options& opt) {
  validate_params(sc, opt.scenario_params);
  if (opt.schedules == 0) throw std::invalid_argument("an exploration needs at least one schedule");
  explore_summary sum;
  sum.scenario = sc.name;
  sum.first_index = opt.first_index;
  const run_limits limits = opt.limits.value_or(sc.limits);
  strategy_config cfg = opt.strategy;
  if (cfg.kind == strategy_kind::exhaustive && opt.random_shapes)
    throw std::invalid_argument("random shapes do not go with the exhaustive strategy (it enumerates the schedules of one shape)");
  if (cfg.kind == strategy_kind::exhaustive && opt.first_index)
    throw std::invalid_argument("a shard does not go with the exhaustive strategy (its schedules are enumerated one after another)");
  if (!(opt.seconds >= 0)) throw std::invalid_argument("a time limit must be 0 (none) or a positive number of seconds");
  const auto t0 = std::chrono::steady_clock::now();
  // (the time limit: no schedule starts after it)
  const auto deadline = t0 + std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(opt.seconds));
  const auto out_of_time = [&] { return opt.seconds > 0 && std::chrono::steady_clock::now() >= deadline; };
  const bool pct_like = cfg.kind == strategy_kind::pct || cfg.kind == strategy_kind::portfolio;
  if (opt.random_shapes) (void)draw_shape(sc, opt.scenario_params, opt.seed + opt.first_index);  // throws if none fits
  else if (pct_like && cfg.pct_steps == 0)
    cfg.pct_steps = calibrate_steps(sc, opt.scenario_params, limits);
  sum.pct_steps = cfg.pct_steps;
  if (cfg.kind == strategy_kind::guided && !cfg.guided_sites) cfg.guided_sites = guided_targets(sc, limits);

  // Schedule i's parameters and concrete strategy (a random shape's PCT k is calibrated on it).
  const auto setup = [&](std::uint64_t i, strategy_config& eff) {
    params p = opt.random_shapes ? draw_shape(sc, opt.scenario_params, opt.seed + i) : opt.scenario_params;
    eff = resolve_strategy(cfg, i);
    if (eff.kind == strategy_kind::pct && eff.pct_steps == 0) eff.pct_steps = calibrate_steps(sc, p, limits, opt.random_shapes, i);
    return p;
  };

  std::atomic<std::uint64_t> done{0};
  std::vector<std::uint8_t> verdicts;      // per schedule (index - first_index)
  std::vector<std::uint64_t> steps;
  std::vector<std::uint64_t> hashes;       // per schedule, as the worker thread saw it
  std::vector<failure_report> found;

  oneapi::tbb::enumerable_thread_specific<coverage_recorder> recorders;
  // Schedule i under the thread's coverage recorder when asked for.
  const auto run_schedule = [&](const params& p, strategy& st, std::uint64_t seed) {
    if (!opt.coverage) return run_one(sc, p, st, seed, limits);
    coverage_recorder& rec = recorders.local();
    rec.begin_schedule();
    coverage_recorder::scope on(&rec);
    return run_one(sc, p, st, seed, limits);
  };

  if (cfg.kind == strategy_kind::exhaustive) {
    progress_line pl(opt.progress, opt.schedules, done, sc.name);
    exhaustive_strategy ex(cfg.bound);
    for (std::uint64_t i = 0; i < opt.schedules; ++i) {
      if (out_of_time()) {
        sum.time_limited = true;
        break;
      }
      run_result r = run_schedule(opt.scenario_params, ex, opt.seed + i);
      ++sum.schedules;
      ++sum.counts[static_cast<unsigned>(r.kind)];
      sum.total_steps += r.steps;
      done.store(i + 1);
      const bool more = ex.advance();
      if (r.failed()) {
        ++sum.failures_found;
        if (found.size() < std::max(1u, opt.max_failures)) {
          failure_report f;
          f.index = i;
          f.seed = opt.seed + i;
          f.strategy = cfg;
          f.strategy.kind = strategy_kind::replay;
          f.strategy.decisions = r.decisions;
          f.scenario_params = opt.scenario_params;
          f.result = std::move(r);
          found.push_back(std::move(f));
        }
        if (opt.stop_on_failure) break;
      }
      if (!more) {
        sum.exhausted = true;
        break;
      }
    }
  } else {
    const std::uint64_t first = opt.first_index;
    verdicts.assign(opt.schedules, 0xff);
    steps.assign(opt.schedules, 0);
    hashes.assign(opt.schedules, 0);
    std::atomic<std::uint64_t> lowest_fail{~std::uint64_t{0}};
    progress_line pl(opt.progress, opt.schedules, done, sc.name);
    auto body = [&](const oneapi::tbb::blocked_range<std::uint64_t>& range) {
      for (std::uint64_t k = range.begin(); k != range.end(); ++k) {
        const std::uint64_t i = first + k;
        if (opt.stop_on_failure && k > lowest_fail.load(std::memory_order_relaxed)) return;
        if (out_of_time()) return;  // (this schedule stays unrun: 0xff)
        strategy_config eff;
        const params p = setup(i, eff);
        auto strat = make_strategy(eff, i);
        crash_context& cc = this_thread_crash_context();
        cc.active = true;
        cc.scenario = sc.name.c_str();
        cc.index = i;
        cc.seed = opt.seed + i;
        cc.strategy = eff.kind;
        cc.pct_depth = eff.pct_depth;
        cc.pct_steps = eff.pct_steps;
        // a random shape's report needs the drawn --set values: the whole command, made here
        // (the signal handler cannot allocate)
        thread_local std::string shape_replay;
        if (opt.random_shapes) shape_replay = replay_command(sc, p, eff, opt.seed + i, limits);
        cc.replay = opt.random_shapes ? shape_replay.c_str() : nullptr;
        const run_result r = run_schedule(p, *strat, opt.seed + i);
        cc.active = false;
        verdicts[k] = static_cast<std::uint8_t>(r.kind);
        steps[k] = r.steps;
        hashes[k] = r.trace_hash;
        done.fetch_add(1, std::memory_order_relaxed);
        if (r.failed()) {
          std::uint64_t cur = lowest_fail.load();
          while (k < cur && !lowest_fail.compare_exchange_weak(cur, k)) {
          }
        }
      }
    };
    const unsigned threads = opt.threads ? opt.threads : std::max(1u, std::thread::hardware_concurrency());
    oneapi::tbb::task_arena arena(static_cast<int>(threads));
    arena.execute([&] {
      oneapi::tbb::parallel_for(oneapi::tbb::blocked_range<std::uint64_t>(0, opt.schedules, 8), body,
                                oneapi::tbb::simple_partitioner());
    });
    const std::uint64_t lf = lowest_fail.load();
    std::uint64_t counted = (opt.stop_on_failure && lf != ~std::uint64_t{0}) ? lf + 1 : opt.schedules;
    // Out of time: only the schedules before the first one left unrun count (those after it ran
    // in whatever order the threads took them; counting them would make the result depend on it).
    for (std::uint64_t k = 0; k < counted; ++k)
      if (verdicts[k] == 0xff) {
        counted = k;
        sum.time_limited = true;
        break;
      }
    for (std::uint64_t k = 0; k < counted; ++k) {
      ++sum.counts[verdicts[k]];
      sum.total_steps += steps[k];
      if (static_cast<verdict_kind>(verdicts[k]) != verdict_kind::pass) {
        ++sum.failures_found;
        if (found.size() >= std::max(1u, opt.max_failures)) continue;
        failure_report f;
        f.index = first + k;
        f.seed = opt.seed + f.index;
        f.scenario_params = setup(f.index, f.strategy);
        auto strat = make_strategy(f.strategy, f.index);
        f.result = run_one(sc, f.scenario_params, *strat, f.seed, limits);
        found.push_back(std::move(f));
      }
    }
    sum.schedules = counted;
  }
  sum.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  for (failure_report& f : found) {
    // Determinism check: the same schedule again must give the same verdict and trace hash.
    strategy_config again_cfg = f.strategy;
    auto again = make_strategy(again_cfg, f.index);
    const run_result r2 = run_one(sc, f.scenario_params, *again, f.seed, limits);
    // Compare with the worker thread's run too: same seed, another thread, same trace.
    const bool worker_same = hashes.empty() || hashes[f.index - opt.first_index] == f.result.trace_hash;
    f.deterministic = worker_same && r2.kind == f.result.kind && r2.trace_hash == f.result.trace_hash;
    if (f.strategy.kind == strategy_kind::replay) {
      std::ostringstream c;
      c << program << " replay --decisions FILE  (write FILE with --save-failure; " << sc.name << ", exhaustive schedule "
        << f.index << ")";
      f.replay_command = c.str();
    } else {
      f.replay_command = replay_command(sc, f.scenario_params, f.strategy, f.seed, limits);
    }
  }
  if (opt.coverage) {
    sum.coverage = std::make_shared<coverage_recorder>();
    for (const coverage_recorder& r : recorders) sum.coverage->merge(r);
  }
  if (!found.empty()) sum.first_failure = found.front();
  sum.failures = std::move(found);
  return sum;
}

// ---- shrinking -------------------------------------------------------------------------------

namespace {
bool is_data(const run_result& r, std::size_t i) { return i < r.decision_flags.size() && (r.decision_flags[i] & 4); }
bool is_deviation(const run_result& r, std::size_t i) {
  return is_data(r, i) ? r.decisions[i] != 0 : r.decisions[i] != decision_default;
}
std::size_t deviations(const run_result& r) {
  std::size_t n = 0;
  for (std::size_t i = 0; i < r.decisions.size(); ++i) n += is_deviation(r, i);
  return n;
}
// Lexicographic: fewer preemptions, then fewer deviations, then fewer switches (every accepted
// step makes progress, so shrinking terminates).
bool better(const run_result& a, const run_result& b) {
  if (a.preemptions != b.preemptions) return a.preemptions < b.preemptions;
  const std::size_t da = deviations(a), db = deviations(b);
  if (da != db) return da < db;
  return a.switches < b.switches;
}
// The global step of the last deviation (0: none): past it the schedule is the default policy's.
std::uint64_t last_deviation_step(const run_result& r) {
  for (std::size_t i = r.decisions.size(); i-- > 0;)
    if (is_deviation(r, i)) return i < r.decision_steps.size() ? r.decision_steps[i] : r.steps;
  return 0;
}
// Trailing entries that ask for what the default gives anyway go (no replay needed: a list
// replays alike with or without them).
void strip_default_tail(run_result& r) {
  std::size_t n = r.decisions.size();
  while (n > 0 && !is_deviation(r, n - 1)) --n;
  r.decisions.resize(n);
  r.decision_flags.resize(std::min(r.decision_flags.size(), n));
  r.decision_lanes.resize(std::min(r.decision_lanes.size(), n));
  r.decision_anchors.resize(std::min(r.decision_anchors.size(), n));
  r.decision_steps.resize(std::min(r.decision_steps.size(), n));
}

// The default policy with a switch to a random runnable lane at each lane choice with
// probability ppm / 10^6, and random data choices: over k steps about k * ppm / 10^6 preemptions,
// placed anywhere. The shrinker's sampler of schedules that preempt a given few times (PCT
// places its few priority changes, but a spin loop's backoffs and a warp's blocking let its
// schedules preempt often).
class sparse_random_strategy final : public strategy {
 public:
  explicit sparse_random_strategy(std::uint64_t ppm) : ppm_(ppm) {}
  void begin(std::uint64_t seed, unsigned) override { rng_.reseed(seed); }
  unsigned pick_lane(const pick_context& c) override {
    if (rng_.below(1'000'000) < ppm_) return c.runnable.nth(static_cast<unsigned>(rng_.below(c.runnable.count())));
    return default_pick(c);
  }
  std::uint32_t pick_value(std::uint32_t n, std::uint64_t, unsigned) override {
    return static_cast<std::uint32_t>(rng_.below(n));
  }

 private:
  std::uint64_t ppm_;
  rng rng_;
};

// Runs `inner` and notes the site (file, line) of every preemption it makes: a switch away from
// a runnable lane at a point that is not a backoff (shrink step 2b).
class preemption_site_recorder final : public strategy {
 public:
  explicit preemption_site_recorder(strategy& inner) : inner_(inner) {}
  void begin(std::uint64_t seed, unsigned lanes) override { inner_.begin(seed, lanes); }
  unsigned pick_lane(const pick_context& c) override {
    const unsigned next = inner_.pick_lane(c);
    if (c.current_runnable && !c.yield && next != c.current && c.site_file != nullptr) {
      const std::pair<const char*, std::uint32_t> site{c.site_file, c.site_line};
      if (std::find(sites.begin(), sites.end(), site) == sites.end()) sites.push_back(site);
    }
    return next;
  }
  std::uint32_t pick_value(std::uint32_t n, std::uint64_t step, unsigned lane) override { return inner_.pick_value(n, step, lane); }
  bool enumerates_values() const override { return inner_.enumerates_values(); }
  std::vector<std::pair<const char*, std::uint32_t>> sites;

 private:
  strategy& inner_;
};

class shrinker {
 public:
  shrinker(const scenario& sc, const params& p, const run_limits& limits, const run_result& failing,
           unsigned max_replays, std::uint64_t max_steps_total)
      : sc_(sc), p_(p), real_(limits), kind_(failing.kind), max_replays_(max_replays), max_steps_(max_steps_total) {
    capped_ = limits;
    if (kind_ == verdict_kind::livelock) {
      capped_.max_steps = std::min(limits.max_steps, limits.fair_after + livelock_window);
    } else {
      capped_.max_steps = std::min(limits.max_steps, std::max(2 * failing.steps + 1'000, limits.fair_after + 1'000));
    }
  }
  bool budget_left() const { return rep.replays < max_replays_ && rep.steps < max_steps_; }  // search replays apart
  // The samplers (steps 1b and 1c) together get at most 2,000 replays and an eighth of the steps:
  // the rest is the reduction's.
  bool sampler_budget_left() const {
    return rep.replays < std::min(max_replays_ / 4, 2'000u) && rep.steps < max_steps_ / 8;
  }
  // The limits of a candidate derived from `base`. A livelock's candidates hand over to the fair
  // tail soon after base's last deviation (past it base ran the default policy, which is what the
  // fair tail runs too, so the schedule is the same) and then get livelock_window steps to finish:
  // a candidate costs that many steps, not fair_after's tens of thousands.
  run_limits limits_for(const run_result& base) const { return sampling_limits(last_deviation_step(base)); }
  // The limits of a schedule whose choices matter up to step k (a sample: the default schedule's
  // length). A livelock's hand over to the fair tail past 2k (+2,000) steps.
  run_limits sampling_limits(std::uint64_t k) const {
    if (kind_ != verdict_kind::livelock) return capped_;
    run_limits l = capped_;
    l.fair_after = std::min(real_.fair_after, 2 * k + 2'000);
    l.max_steps = std::min(real_.max_steps, l.fair_after + livelock_window);
    if (l.fair_after >= l.max_steps) l = capped_;
    return l;
  }
  // One schedule, counted in the budget.
  run_result run_counted(strategy& st, std::uint64_t seed, const run_limits& lim) {
    run_result r = run_one(sc_, p_, st, seed, lim);
    ++rep.replays;
    rep.steps += r.steps;
    return r;
  }
  // One sampled schedule: counted, and made the current one if it gives the verdict kind and is
  // smaller (true then).
  bool sample(strategy& st, std::uint64_t seed, const run_limits& lim, run_result& cur) {
    run_result r = run_counted(st, seed, lim);
    if (r.kind != kind_ || !better(r, cur)) return false;
    take(std::move(r), cur);
    return true;
  }
  // The length of the default policy's schedule (PCT's k, the samplers' horizon), counted.
  std::uint64_t default_length(std::uint64_t cap) {
    replay_strategy def({});
    const run_result calib = run_counted(def, 0, capped_);
    return std::max<std::uint64_t>(1, std::min(calib.steps, std::max<std::uint64_t>(cap, 1)));
  }
  // Replays `base` with the deviations that `keep` marks, in the anchored reading: each kept lane
  // choice at its anchor, each lane's kept data choices in its order (reset ones read 0); true
  // (and `out`) when it keeps the verdict kind.
  // The anchored reading of `base` with the deviations that `keep` marks (all when null): each
  // kept lane choice at its anchor, each lane's kept data choices in its order (reset ones read 0).
  static anchored_strategy anchored(const run_result& base, const std::vector<char>* keep) {
    std::vector<std::pair<std::uint64_t, std::uint32_t>> anchors;
    std::vector<std::vector<std::uint32_t>> data;
    for (std::size_t i = 0; i < base.decisions.size(); ++i) {
      const bool k = keep == nullptr || (i < keep->size() && (*keep)[i]);
      if (is_data(base, i)) {
        const unsigned lane = i < base.decision_lanes.size() ? base.decision_lanes[i] : 0;
        if (lane >= data.size()) data.resize(lane + 1);
        data[lane].push_back(k ? base.decisions[i] : 0);
      } else if (k && base.decisions[i] != decision_default && i < base.decision_anchors.size()) {
        anchors.emplace_back(base.decision_anchors[i], base.decisions[i]);
      }
    }
    return anchored_strategy(anchors, std::move(data));
  }
  bool attempt(const std::vector<char>& keep, const run_result& base, run_result& out) {
    if (positional_) {
      std::vector<std::uint32_t> d = base.decisions;
      for (std::size_t i = 0; i < d.size(); ++i)
        if (!(i < keep.size() && keep[i])) d[i] = is_data(base, i) ? 0u : decision_default;
      replay_strategy rs(d, base.decision_flags, base.decision_lanes);
      out = run_counted(rs, 0, limits_for(base));
      return out.kind == kind_;
    }
    anchored_strategy as = anchored(base, &keep);
    out = run_counted(as, 0, limits_for(base));
    return out.kind == kind_;
  }
  bool accept_if_better(const std::vector<char>& keep, run_result& cur) {
    run_result r;
    if (attempt(keep, cur, r) && better(r, cur)) {
      take(std::move(r), cur);
      return true;
    }
    return false;
  }
  // Makes `r` the current schedule and remembers its list (the final confirmation under the real
  // limits falls back to the latest remembered list that confirms).
  void take(run_result r, run_result& cur) {
    strip_default_tail(r);
    if (std::getenv("TOGA_SHRINK_DEBUG"))
      std::fprintf(stderr, "shrink: replay %u (%llu steps so far): %u preemptions, %zu deviations, %llu steps\n",
                   rep.replays, static_cast<unsigned long long>(rep.steps), r.preemptions, deviations(r),
                   static_cast<unsigned long long>(r.steps));
    accepted_.push_back(r.decisions);
    cur = std::move(r);
  }
  // Delta debugging (Zeller's ddmin) over the deviations of `cur` that `sel` selects: reset a
  // chunk of them; on success keep the granularity (the set shrank), else try the next chunk,
  // then halve the chunks.
  template <class Sel>
  void ddmin(run_result& cur, Sel sel) {
    {  // all of them at once first: a schedule that needs none of them is the best outcome
      std::vector<char> keep(cur.decisions.size(), 1);
      bool any = false;
      for (std::size_t i = 0; i < cur.decisions.size(); ++i)
        if (is_deviation(cur, i) && sel(cur, i)) keep[i] = 0, any = true;
      if (any && budget_left()) accept_if_better(keep, cur);
    }
    for (std::size_t chunks = 2; budget_left();) {
      std::vector<std::size_t> dev;
      for (std::size_t i = 0; i < cur.decisions.size(); ++i)
        if (is_deviation(cur, i) && sel(cur, i)) dev.push_back(i);
      if (dev.size() < 2) break;
      chunks = std::min(chunks, dev.size());
      bool progress = false;
      for (std::size_t c = 0; c < chunks && budget_left(); ++c) {
        const std::size_t lo = dev.size() * c / chunks, hi = dev.size() * (c + 1) / chunks;
        std::vector<char> keep(cur.decisions.size(), 1);
        for (std::size_t k = lo; k < hi; ++k) keep[dev[k]] = 0;
        if (accept_if_better(keep, cur)) {
          progress = true;
          chunks = std::max<std::size_t>(chunks - 1, 2);
          break;
        }
      }
      if (!progress) {
        if (chunks >= dev.size()) break;
        chunks = std::min(dev.size(), chunks * 2);
      }
    }
  }
  shrink_report rep;
  const scenario& sc_;
  const params& p_;
  run_limits real_, capped_;
  verdict_kind kind_;
  unsigned max_replays_;
  std::uint64_t max_steps_;
  std::vector<std::vector<std::uint32_t>> accepted_;
  bool positional_ = false;  // candidates in the positional (per-lane data) reading, not the anchored one
};
}  // namespace

shrink_report shrink(const scenario& sc, const params& p, const run_limits& limits, const run_result& failing,
                     unsigned max_replays, std::uint64_t max_steps_total) {
  shrinker s(sc, p, limits, failing, max_replays, max_steps_total);
  s.rep.original = failing;
  run_result cur;
  {
    const std::vector<char> all(failing.decisions.size(), 1);
    if (!s.attempt(all, failing, cur)) {  // the list does not reproduce it (under the cap)
      s.rep.shrunk = failing;
      return s.rep;
    }
    s.take(std::move(cur), cur);
  }
  // 1. Search: delay-bounded exploration with bound 1, 2, ... finds a schedule with the fewest
  // deviations when one exists within a step budget of its own, max_steps_total (small scenarios
  // only: their schedules are cheap, so this may run a million of them in a few seconds).
  const std::size_t dev0 = deviations(cur);
  bool searched = false;  // the bounded search found a schedule with the fewest deviations
  if (failing.steps <= search_steps_max) {
    std::uint64_t searched_replays = 0, searched_steps = 0;
    for (unsigned b = 1; b < dev0 && b <= 4 && searched_steps < max_steps_total; ++b) {
      exhaustive_strategy ex(b);
      bool found = false;
      while (searched_steps < max_steps_total) {
        run_result r = run_one(sc, p, ex, 0, s.capped_);
        ++searched_replays;
        searched_steps += r.steps;
        const bool more = ex.advance();
        if (r.kind == failing.kind) {
          if (better(r, cur)) s.take(std::move(r), cur);
          found = searched = true;
          break;
        }
        if (!more) break;
      }
      if (found) break;
    }
    s.rep.search_replays = searched_replays;
    s.rep.search_steps = searched_steps;
  }
  // 1b. (More than 3 preemptions left.) A search among schedules that preempt little by construction, PCT with
  // depth 1, 2, 3, 4 (d - 1 priority changes; backoffs switch without preempting), a few hundred
  // seeds each, within the samplers' budget (sampler_budget_left). The first depth that fails again wins.
  if (!searched && cur.preemptions > 3) {
    const unsigned seeds = std::max(1u, std::min(max_replays, 4'000u) / 16);
    // PCT's k: the length of a default-policy schedule, as explore calibrates it
    const std::uint64_t k = s.default_length(failing.steps);
    const run_limits lim = s.sampling_limits(k);
    for (unsigned d = 1; d <= 4 && s.sampler_budget_left(); ++d) {
      bool found = false;
      for (unsigned seed = 1; seed <= seeds && s.sampler_budget_left() && !found; ++seed) {
        pct_strategy ps(d, k);
        found = s.sample(ps, seed, lim, cur);
      }
      if (found || cur.preemptions < d) break;
    }
  }
  // 1c. (Still more than 3 preemptions.) Sparse random schedules: the default policy with about
  // p random preemptions over the default schedule's length, p = 1, 2, 3, 4, 6, 8, 12, 16, a few
  // hundred seeds each; the first p that fails again wins. Meant for long random failures whose
  // ddmin stalls (removing any chunk of their thousands of preemptions loses the failure) while a
  // schedule with a few preemptions fails too (PCT's priorities preempt at every unblock).
  if (cur.preemptions > 3 && s.budget_left()) {
    const std::uint64_t k = s.default_length(failing.steps);
    const run_limits lim = s.sampling_limits(k);
    const unsigned seeds = std::max(1u, std::min(max_replays, 4'000u) / 32);
    for (const unsigned target : {1u, 2u, 3u, 4u, 6u, 8u, 12u, 16u}) {
      if (target + 1 >= cur.preemptions || !s.sampler_budget_left()) break;
      const std::uint64_t ppm = std::min<std::uint64_t>(1'000'000, target * 1'000'000 / k + 1);
      bool found = false;
      for (unsigned seed = 1; seed <= seeds && s.sampler_budget_left() && !found; ++seed) {
        sparse_random_strategy sr(ppm);
        found = s.sample(sr, seed, lim, cur);
      }
      if (found) break;
    }
  }
  // 2. Reduction, in rounds that alternate the two readings of a candidate (anchored, then
  // positional with per-lane data): each gets stuck in other local minima. A round: ddmin over
  // all deviations (chunks of time), over the lane choices only (data kept), over the data
  // choices only (lane choices kept); then single deviations (preemptions first, from the end)
  // and pairs of consecutive lane deviations (an excursion to another lane and back). Rounds go
  // on while one improves the schedule (at least two).
  for (unsigned round = 0; s.budget_left(); ++round) {
    s.positional_ = round % 2 == 1;
    const run_result before_round = cur;
    s.ddmin(cur, [](const run_result&, std::size_t) { return true; });
    s.ddmin(cur, [](const run_result& r, std::size_t i) { return !is_data(r, i); });
    s.ddmin(cur, [](const run_result& r, std::size_t i) { return is_data(r, i); });
    for (int pass = 0; pass < 2; ++pass)
      for (bool improved = true; improved && s.budget_left();) {
        improved = false;
        for (std::size_t i = cur.decisions.size(); i-- > 0 && s.budget_left();) {
          if (!is_deviation(cur, i)) continue;
          const bool preempt = i < cur.decision_flags.size() && (cur.decision_flags[i] & 1);
          if ((pass == 0) != preempt) continue;
          std::vector<char> keep(cur.decisions.size(), 1);
          keep[i] = 0;
          if (s.accept_if_better(keep, cur)) {
            improved = true;
            break;
          }
        }
      }
    for (bool improved = true; improved && s.budget_left();) {
      improved = false;
      std::vector<std::size_t> dev;
      for (std::size_t i = 0; i < cur.decisions.size(); ++i)
        if (is_deviation(cur, i) && !is_data(cur, i)) dev.push_back(i);
      for (std::size_t k = dev.size(); k-- > 1 && s.budget_left();) {
        std::vector<char> keep(cur.decisions.size(), 1);
        keep[dev[k]] = keep[dev[k - 1]] = 0;
        if (s.accept_if_better(keep, cur)) {
          improved = true;
          break;
        }
      }
    }
    if (round >= 1 && !better(cur, before_round)) break;
  }
  s.positional_ = false;
  // 2b. (More than 1 preemption left, at most focus_preemptions_max of them.) Focused search: the
  // delay-bounded search with bound 1, 2 from the default policy, where a lane choice may deviate
  // only at a preemption whose lane's next operation is at a site where the current schedule
  // preempts (and data choices anywhere). A failure that reduction cannot bring below a handful
  // of preemptions usually still preempts at its window; the search places one or two
  // preemptions there instead of everywhere, a few hundred to a few thousand schedules where the
  // unfocused search of step 1 needs up to millions (alloc-storm with bug 11: 11 preemptions ->
  // 1, where step 1's bound 2 fails first at schedule 1,115,283). Within a quarter of the step
  // budget.
  if (cur.preemptions > 1 && cur.preemptions <= focus_preemptions_max && failing.steps <= search_steps_max) {
    std::vector<std::pair<const char*, std::uint32_t>> sites;
    {
      anchored_strategy as = shrinker::anchored(cur, nullptr);
      preemption_site_recorder rec(as);
      const run_result again = s.run_counted(rec, 0, s.limits_for(cur));
      if (again.kind == failing.kind) sites = std::move(rec.sites);
    }
    std::uint64_t searched_steps = 0;
    const std::uint64_t focus_budget = max_steps_total / 4;
    for (unsigned b = 1; !sites.empty() && b < cur.preemptions && b <= 2 && searched_steps < focus_budget; ++b) {
      exhaustive_strategy ex(b);
      ex.focus(sites);
      bool found = false;
      while (searched_steps < focus_budget) {
        run_result r = run_one(sc, p, ex, 0, s.capped_);
        ++s.rep.search_replays;
        searched_steps += r.steps;
        const bool more = ex.advance();
        if (r.kind == failing.kind && better(r, cur)) {
          s.take(std::move(r), cur);
          found = true;
          break;
        }
        if (!more) break;
      }
      if (found) break;
    }
    s.rep.search_steps += searched_steps;
  }
  // 3. (More than 1 preemption left, and the failure's prefix, up to its last deviation, short.)
  // The delay-bounded search of step 1 over that prefix only: bound 1, 2, 3 deviations within
  // the prefix, the default policy past it; a livelock's runs get a shorter fair tail (4x the
  // default schedule's length) and a hit is re-run with the full window before it counts.
  const std::uint64_t horizon = last_deviation_step(cur) + 1;
  if (cur.preemptions > 1 && horizon <= search_steps_max) {
    run_limits lim = s.limits_for(cur);
    if (failing.kind == verdict_kind::livelock)
      lim.max_steps = std::min(lim.max_steps, lim.fair_after + 4 * s.default_length(~std::uint64_t{0}) + 2'000);
    std::uint64_t searched_steps = 0;
    const std::uint64_t prefix_budget = max_steps_total / 4;  // a quarter: shrinking stays near 2 minutes
    for (unsigned b = 1; b < cur.preemptions && b <= 3 && searched_steps < prefix_budget; ++b) {
      exhaustive_strategy ex(b, horizon);
      bool found = false;
      while (searched_steps < prefix_budget) {
        run_result r = run_one(sc, p, ex, 0, lim);
        ++s.rep.search_replays;
        searched_steps += r.steps;
        const bool more = ex.advance();
        if (r.kind == failing.kind && better(r, cur)) {
          run_result full;
          const std::vector<char> all(r.decisions.size(), 1);
          if (failing.kind != verdict_kind::livelock || (s.attempt(all, r, full) && better(full, cur))) {
            s.take(failing.kind == verdict_kind::livelock ? std::move(full) : std::move(r), cur);
            found = true;
            break;
          }
        }
        if (!more) break;
      }
      if (found) break;
    }
    s.rep.search_steps += searched_steps;
  }
  // Confirm under the real limits (the cap only cut candidates short, and a livelock's
  // candidates handed over to the fair tail early): the latest accepted list that gives the
  // verdict there wins. A recorded list replays its schedule positionally: past its end, and
  // in the fair tail, both take the default policy and data choice 0.
  for (std::size_t j = s.accepted_.size(); j-- > 0;) {
    replay_strategy positional(s.accepted_[j]);
    run_result confirmed = s.run_counted(positional, 0, limits);
    if (confirmed.kind != failing.kind) continue;
    s.rep.shrunk = std::move(confirmed);
    s.rep.shrunk.decisions = s.accepted_[j];  // the (trimmed) list that replays it
    strip_default_tail(s.rep.shrunk);
    return s.rep;
  }
  s.rep.shrunk = failing;
  return s.rep;
}

// ---- decision files -------------------------------------------------------------------------

void save_decisions(const std::string& path, const scenario& sc, const params& p,
                    const run_limits& limits, const run_result& r) {
  nlohmann::json j;
  j["format"] = "toga-sim decisions 1";
  j["scenario"] = sc.name;
  j["params"] = p.values();
  j["fair_after"] = limits.fair_after;
  j["max_steps"] = limits.max_steps;
  j["memory"] = to_string(limits.memory);
  j["faults"] = faults_to_string(limits.faults);
  if (limits.rendezvous_yield) j["rendezvous_yield"] = true;
  if (limits.skip_subsumed_reads) j["skip_subsumed_reads"] = true;
  j["verdict"] = to_string(r.kind);
  j["message"] = r.message;
  j["trace_hash"] = r.trace_hash;
  j["preemptions"] = r.preemptions;
  j["switches"] = r.switches;
  j["decisions"] = r.decisions;
  std::ofstream f(path);
  if (!f) throw std::runtime_error("cannot write decision file '" + path + "'");
  f << j.dump(1) << "\n";
}

decision_file load_decisions(const std::string& path) {
  std::ifstream f(path);
  if (!f) throw input_error("cannot open decision file '" + path + "'");
  nlohmann::json j;
  try {
    f >> j;
  } catch (const std::exception& e) {
    throw input_error("decision file '" + path + "' is not valid JSON: " + e.what());
  }
  if (!j.is_object() || j.value("format", "") != "toga-sim decisions 1")
    throw input_error("decision file '" + path +
                      "' lacks \"format\": \"toga-sim decisions 1\"; write it with "
                      "toga-sim explore --save-failure or replay --save");
  decision_file d;
  try {
    d.scenario = j.at("scenario").get<std::string>();
    for (auto& [k, v] : j.at("params").items()) d.scenario_params.set(k, v.get<std::int64_t>());
    d.limits.fair_after = j.at("fair_after").get<std::uint64_t>();
    d.limits.max_steps = j.at("max_steps").get<std::uint64_t>();
    d.limits.rendezvous_yield = j.value("rendezvous_yield", false);
    d.limits.skip_subsumed_reads = j.value("skip_subsumed_reads", false);
    d.decisions = j.at("decisions").get<std::vector<std::uint32_t>>();
    d.verdict = j.value("verdict", "");
    d.trace_hash = j.value("trace_hash", std::uint64_t{0});
    const std::string memory = j.value("memory", "sc");
    if (!parse_memory_model(memory, d.limits.memory))
      throw std::invalid_argument("\"memory\" is '" + memory + "'; want \"sc\" or \"weak\"");
    std::string err;
    if (!parse_faults(j.value("faults", "none"), d.limits.faults, err)) throw std::invalid_argument("\"faults\": " + err);
  } catch (const std::exception& e) {
    throw input_error("decision file '" + path + "': " + e.what());
  }
  if (auto msg = check_limits(d.limits))
    throw input_error("decision file '" + path + "': " + *msg + "; it was not written by toga-sim, or was edited");
  return d;
}

}  // namespace toga::sim
