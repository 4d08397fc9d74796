// toga-sim: explore, replay and shrink schedules of the built-in simulator scenarios.
//
//   toga-sim list
//   toga-sim explore --scenario NAME --strategy random|pct|exhaustive|portfolio --schedules N
//                    --seed S [--pct-depth D] [--pct-steps K] [--bound B] [--threads T]
//                    [--set name=value]... [--save-failure FILE] [--shrink] [--keep-going]
//   toga-sim replay  --scenario NAME --strategy random|pct --seed S [...] | --decisions FILE
//                    [--trace-hash] [--shrink] [--save FILE]
//   toga-sim demo    [--schedules N] [--threads T]
//
// explore exits 1 when any schedule fails (and prints the command that replays the first
// failure), 2 on a usage error. demo runs the catalogue against each scenario's expectation.
#include <CLI/CLI.hpp>
#include <fmt/core.h>

#include <cstdio>
#include <stdexcept>

#include "toga/sim/runner.hpp"
#include "toga/sim/scenario.hpp"

namespace ts = toga::sim;

namespace {

struct common_args {
  std::string scenario;
  std::string strategy = "random";
  std::uint64_t seed = 1;
  unsigned pct_depth = 3;
  std::uint64_t pct_steps = 0;
  unsigned bound = 2;
  std::vector<std::string> sets;
  std::uint64_t fair_after = 0;
  std::uint64_t max_steps = 0;
};

void add_common(CLI::App* c, common_args& a) {
  c->add_option("--strategy", a.strategy, "random | pct | stall | exhaustive | portfolio")->capture_default_str();
  c->add_option("--seed", a.seed, "seed (schedule i uses seed + i)")->capture_default_str();
  c->add_option("--pct-depth", a.pct_depth, "PCT depth d (bug depth; d-1 priority changes)")->capture_default_str();
  c->add_option("--pct-steps", a.pct_steps, "PCT k, the expected schedule length (0: calibrate)");
  c->add_option("--bound", a.bound, "exhaustive: deviations from the default policy")->capture_default_str();
  c->add_option("--set", a.sets, "scenario parameter name=value (repeatable)");
  c->add_option("--fair-after", a.fair_after, "scheduling points before the fair tail (0: scenario default)");
  c->add_option("--max-steps", a.max_steps, "scheduling points before a livelock verdict (0: scenario default)");
}

const ts::scenario& need_scenario(const std::string& name) {
  const ts::scenario* s = ts::find_scenario(name);
  if (!s) {
    std::string names;
    for (const auto& x : ts::catalogue()) names += " " + x.name;
    throw std::runtime_error("unknown scenario '" + name + "'; known:" + names + " (see toga-sim list)");
  }
  return *s;
}

ts::params parse_params(const std::vector<std::string>& sets) {
  ts::params p;
  for (const auto& s : sets) {
    std::string err;
    if (!p.parse(s, err)) throw std::runtime_error(err);
  }
  return p;
}

ts::strategy_config parse_config(const common_args& a) {
  ts::strategy_config c;
  if (!ts::parse_strategy(a.strategy, c.kind) || c.kind == ts::strategy_kind::replay)
    throw std::runtime_error("unknown strategy '" + a.strategy + "'; use random, pct, exhaustive or portfolio");
  c.pct_depth = a.pct_depth;
  c.pct_steps = a.pct_steps;
  c.bound = a.bound;
  return c;
}

ts::run_limits limits_of(const ts::scenario& sc, const common_args& a) {
  ts::run_limits l = sc.limits;
  if (a.fair_after) l.fair_after = a.fair_after;
  if (a.max_steps) l.max_steps = a.max_steps;
  return l;
}

void print_summary(const ts::explore_summary& s, const ts::strategy_config& cfg) {
  fmt::print("scenario {}  strategy {}", s.scenario, ts::to_string(cfg.kind));
  if (cfg.kind == ts::strategy_kind::pct || cfg.kind == ts::strategy_kind::portfolio)
    fmt::print(" (d={}, k={})", cfg.pct_depth, s.pct_steps);
  if (cfg.kind == ts::strategy_kind::exhaustive) fmt::print(" (bound {}, {})", cfg.bound,
                                                          s.exhausted ? "complete"
                                                          : s.first_failure ? "stopped at the first failure"
                                                                            : "schedule limit reached");
  fmt::print("\n  schedules {}  in {:.2f} s  = {:.0f} schedules/s  ({:.1f} steps/schedule)\n", s.schedules,
             s.seconds, s.schedules_per_second(), s.schedules ? double(s.total_steps) / s.schedules : 0.0);
  fmt::print("  verdicts:");
  for (unsigned k = 0; k < ts::verdict_kind_count; ++k)
    if (s.counts[k]) fmt::print(" {}={}", ts::to_string(static_cast<ts::verdict_kind>(k)), s.counts[k]);
  fmt::print("\n");
  if (s.first_failure) {
    const auto& f = *s.first_failure;
    fmt::print("  FIRST FAILURE at schedule {} (seed {}): {}\n    {}\n", f.index, f.seed,
               ts::to_string(f.result.kind), f.result.message);
    fmt::print("    {} preemptions, {} switches, {} steps, trace hash {:016x}{}\n", f.result.preemptions,
               f.result.switches, f.result.steps, f.result.trace_hash,
               f.deterministic ? " (re-run: same hash)" : "  ** NON-DETERMINISTIC: a re-run differed **");
    fmt::print("  replay: {}\n", f.replay_command);
  }
}

void print_run(const ts::run_result& r) {
  fmt::print("verdict {}{}{}\n  {} steps, {} preemptions, {} switches, {} decisions, trace hash {:016x}\n",
             ts::to_string(r.kind), r.message.empty() ? "" : ": ", r.message, r.steps, r.preemptions, r.switches,
             r.decisions.size(), r.trace_hash);
  for (const auto& [name, value] : r.metrics) fmt::print("  {} = {:.6g}\n", name, value);
}

int cmd_list() {
  ts::register_builtin_scenarios();
  for (const auto& s : ts::catalogue())
    fmt::print("{:<14} {:<6} {}\n", s.name, s.expected == ts::expectation::fails ? "[bug]" : "", s.summary);
  return 0;
}

int cmd_explore(const common_args& a, std::uint64_t schedules, unsigned threads, bool keep_going,
                const std::string& save, bool do_shrink) {
  const ts::scenario& sc = need_scenario(a.scenario);
  ts::explore_options o;
  o.strategy = parse_config(a);
  o.schedules = schedules;
  o.seed = a.seed;
  o.threads = threads;
  o.scenario_params = parse_params(a.sets);
  o.limits = limits_of(sc, a);
  o.stop_on_failure = !keep_going;
  o.progress = true;
  const ts::explore_summary s = ts::explore(sc, o);
  print_summary(s, o.strategy);
  if (s.first_failure) {
    ts::run_result r = s.first_failure->result;
    if (do_shrink) {
      const auto rep = ts::shrink(sc, o.scenario_params, *o.limits, r);
      fmt::print("  shrunk in {} replays: {} -> {} preemptions, {} -> {} switches\n", rep.replays,
                 rep.original.preemptions, rep.shrunk.preemptions, rep.original.switches, rep.shrunk.switches);
      r = rep.shrunk;
    }
    if (!save.empty()) {
      ts::save_decisions(save, sc, o.scenario_params, *o.limits, r);
      fmt::print("  decisions saved: toga-sim replay --decisions {}\n", save);
    }
    return 1;
  }
  return 0;
}

int cmd_replay(const common_args& a, const std::string& decisions, const std::string& save, bool do_shrink,
               bool trace) {
  ts::world::tracer_fn tracer;
  if (trace)
    tracer = [](std::uint64_t step, unsigned lane, ts::op k) { fmt::print("  step {:>7}  lane {:>4}  {}\n", step, lane, ts::to_string(k)); };
  ts::run_result r;
  const ts::scenario* sc = nullptr;
  ts::params p;
  ts::run_limits limits;
  if (!decisions.empty()) {
    const ts::decision_file d = ts::load_decisions(decisions);
    sc = &need_scenario(d.scenario);
    p = d.scenario_params;
    limits = d.limits;
    ts::replay_strategy rs(d.decisions);
    r = ts::run_one(*sc, p, rs, 0, limits, tracer);
    print_run(r);
    if (!d.verdict.empty() && (d.verdict != ts::to_string(r.kind) || (d.trace_hash && d.trace_hash != r.trace_hash)))
      fmt::print("  note: the file recorded verdict {} with hash {:016x}\n", d.verdict, d.trace_hash);
  } else {
    if (a.scenario.empty()) throw std::runtime_error("replay needs --scenario NAME (with --strategy and --seed) or --decisions FILE");
    sc = &need_scenario(a.scenario);
    p = parse_params(a.sets);
    limits = limits_of(*sc, a);
    ts::strategy_config cfg = parse_config(a);
    if (cfg.kind == ts::strategy_kind::exhaustive || cfg.kind == ts::strategy_kind::portfolio)
      throw std::runtime_error("replay by seed takes --strategy random, pct or stall (the explore summary names the one to use)");
    if (cfg.kind == ts::strategy_kind::pct && cfg.pct_steps == 0)
      throw std::runtime_error("replaying a pct schedule needs --pct-steps (the explore summary prints it)");
    auto strat = ts::make_strategy(cfg, 0);
    r = ts::run_one(*sc, p, *strat, a.seed, limits, tracer);
    print_run(r);
  }
  if (do_shrink && r.failed()) {
    const auto rep = ts::shrink(*sc, p, limits, r);
    fmt::print("shrunk in {} replays: {} -> {} preemptions, {} -> {} switches\n", rep.replays, rep.original.preemptions,
               rep.shrunk.preemptions, rep.original.switches, rep.shrunk.switches);
    r = rep.shrunk;
  }
  if (!save.empty()) {
    ts::save_decisions(save, *sc, p, limits, r);
    fmt::print("decisions saved: toga-sim replay --decisions {}\n", save);
  }
  return r.failed() ? 1 : 0;
}

// demo: the catalogue against its expectations; the planted bugs must be found.
int cmd_demo(std::uint64_t schedules, unsigned threads) {
  ts::register_builtin_scenarios();
  int bad = 0;
  fmt::print("toga-sim demo: every built-in scenario, random then pct (d=3), {} schedules each\n\n", schedules);
  for (const auto& sc : ts::catalogue()) {
    for (auto kind : {ts::strategy_kind::random, ts::strategy_kind::pct}) {
      ts::explore_options o;
      o.strategy.kind = kind;
      o.schedules = schedules;
      o.threads = threads;
      o.progress = true;
      const auto s = ts::explore(sc, o);
      print_summary(s, o.strategy);
      const bool found = s.first_failure.has_value();
      const bool ok = (sc.expected == ts::expectation::fails) == found;
      fmt::print("  => {} ({})\n\n", ok ? "as expected" : "UNEXPECTED",
                 sc.expected == ts::expectation::fails ? "planted bug: must be found" : "correct: must pass");
      if (!ok) ++bad;
    }
  }
  fmt::print("{} of {} explorations as expected\n", 2 * ts::catalogue().size() - bad, 2 * ts::catalogue().size());
  return bad ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"toga-sim: the toga fiber simulator (schedules of simulated GPU lanes)"};
  app.require_subcommand(1);
  app.add_subcommand("list", "name the built-in scenarios");

  common_args ea;
  std::uint64_t schedules = 1000;
  unsigned threads = 0;
  bool keep_going = false, shrink_flag = false;
  std::string save;
  auto* ex = app.add_subcommand("explore", "run many schedules of a scenario");
  ex->add_option("--scenario", ea.scenario, "scenario name (toga-sim list)")->required();
  ex->add_option("--schedules", schedules, "number of schedules")->capture_default_str();
  ex->add_option("--threads", threads, "worker threads (0: all cores)");
  ex->add_flag("--keep-going", keep_going, "do not stop at the first failure");
  ex->add_option("--save-failure", save, "write the first failure's decisions to FILE");
  ex->add_flag("--shrink", shrink_flag, "shrink the first failure before saving it");
  add_common(ex, ea);

  common_args ra;
  std::string decisions, rsave;
  bool rshrink = false, rtrace = false;
  auto* rp = app.add_subcommand("replay", "replay one schedule");
  rp->add_option("--scenario", ra.scenario, "scenario name");
  rp->add_option("--decisions", decisions, "decision file (from --save-failure or --save)");
  rp->add_option("--save", rsave, "write this schedule's decisions to FILE");
  rp->add_flag("--shrink", rshrink, "shrink a failing schedule");
  rp->add_flag("--trace", rtrace, "print every step: step number, lane, operation");
  add_common(rp, ra);

  std::uint64_t demo_schedules = 2000;
  unsigned demo_threads = 0;
  auto* dm = app.add_subcommand("demo", "explore every built-in scenario and check the expected verdicts");
  dm->add_option("--schedules", demo_schedules, "schedules per exploration")->capture_default_str();
  dm->add_option("--threads", demo_threads, "worker threads (0: all cores)");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);
    return rc == 0 ? 0 : 2;
  }
  try {
    if (app.got_subcommand("list")) return cmd_list();
    if (app.got_subcommand(ex)) return cmd_explore(ea, schedules, threads, keep_going, save, shrink_flag);
    if (app.got_subcommand(rp)) return cmd_replay(ra, decisions, rsave, rshrink, rtrace);
    if (app.got_subcommand(dm)) return cmd_demo(demo_schedules, demo_threads);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "toga-sim: error: %s\n", e.what());
    return 2;
  }
  return 2;
}
