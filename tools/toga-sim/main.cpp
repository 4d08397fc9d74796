// toga-sim: explore, replay and shrink schedules of the built-in simulator scenarios, and run
// the mutant suite.
//
//   toga-sim list [--keys]
//   toga-sim explore --scenario NAME --strategy random|pct|stall|exhaustive|portfolio --schedules N
//                    --seed S [--pct-depth D] [--pct-steps K] [--bound B] [--threads T]
//                    [--set name=value]... [--memory sc|weak] [--faults none|all|site,...]
//                    [--save-failure FILE] [--shrink] [--keep-going]
//   toga-sim replay  --scenario NAME --strategy random|pct|stall --seed S [...] | --decisions FILE
//                    [--trace] [--shrink] [--save FILE]
//   toga-sim mutants [--filter REGEX] [--schedules N] [--json FILE] [--baseline FILE] [--ci]
//   toga-sim demo    [--schedules N] [--threads T]
//
// Exit codes: 0 all schedules passed (mutants: no regression); 1 a schedule failed, or a bad
// input file (a decision file that cannot be used); 2 a usage error (unknown scenario or
// parameter, a value out of range, options that do not go together). Messages say what was
// wrong and what to do.
#include <CLI/CLI.hpp>
#include <fmt/core.h>

#include <cstdio>
#include <stdexcept>

#include "toga/sim/faults.hpp"
#include "toga/sim/litmus.hpp"
#include "toga/sim/runner.hpp"
#include "toga/sim/scenario.hpp"

namespace ts = toga::sim;

namespace {

using ts::usage_error;

struct common_args {
  std::string scenario;
  std::string strategy = "random";
  std::uint64_t seed = 1;
  unsigned pct_depth = 3;
  std::uint64_t pct_steps = 0;
  unsigned bound = 2;
  std::vector<std::string> sets;
  std::string fair_after = "0";
  std::string max_steps = "0";
  std::string memory = "sc";
  std::string faults = "none";
  // options given explicitly (replay --decisions refuses them)
  std::vector<CLI::Option*> schedule_options;
  CLI::Option* scenario_option = nullptr;
  CLI::Option* set_option = nullptr;
};

void add_common(CLI::App* c, common_args& a) {
  auto& o = a.schedule_options;
  o.push_back(c->add_option("--strategy", a.strategy, "random | pct | stall | exhaustive | portfolio")->capture_default_str());
  o.push_back(c->add_option("--seed", a.seed, "seed (schedule i uses seed + i)")->capture_default_str());
  o.push_back(c->add_option("--pct-depth", a.pct_depth, "PCT depth d (bug depth; d-1 priority changes)")->capture_default_str());
  o.push_back(c->add_option("--pct-steps", a.pct_steps, "PCT k, the expected schedule length (0: calibrate)"));
  o.push_back(c->add_option("--bound", a.bound, "exhaustive: deviations from the default policy")->capture_default_str());
  a.set_option = c->add_option("--set", a.sets, "scenario parameter name=value (repeatable; toga-sim list --keys names them)");
  o.push_back(c->add_option("--fair-after", a.fair_after, "scheduling points before the fair tail (0: scenario default)"));
  o.push_back(c->add_option("--max-steps", a.max_steps,
                            "scheduling points before a livelock verdict (0: scenario default; at most " +
                                std::to_string(ts::max_steps_bound) + ")"));
  o.push_back(c->add_option("--memory", a.memory, "memory model: sc (every load reads the latest store) or weak "
                                                   "(PTX-style relaxed loads, release/acquire, fences, scopes)")
                  ->capture_default_str());
  o.push_back(c->add_option("--faults", a.faults, "fault sites that may fire: none, all, or site,site,... (see "
                                                   "docs/simulator.md)")
                  ->capture_default_str());
}

const ts::scenario& need_scenario(const std::string& name) {
  const ts::scenario* s = ts::find_scenario(name);
  if (!s) {
    std::string names;
    for (const auto& x : ts::catalogue()) names += " " + x.name;
    throw usage_error("unknown scenario '" + name + "'; known:" + names + " (see toga-sim list)");
  }
  return *s;
}

ts::params parse_params(const ts::scenario& sc, const std::vector<std::string>& sets) {
  ts::params p;
  for (const auto& s : sets) {
    std::string err;
    if (!p.parse(s, err)) throw usage_error(err);
  }
  try {
    ts::validate_params(sc, p);
  } catch (const std::invalid_argument& e) {
    throw usage_error(e.what());
  }
  return p;
}

ts::strategy_config parse_config(const common_args& a) {
  ts::strategy_config c;
  if (!ts::parse_strategy(a.strategy, c.kind) || c.kind == ts::strategy_kind::replay)
    throw usage_error("unknown strategy '" + a.strategy + "'; use random, pct, stall, exhaustive or portfolio");
  if (a.pct_depth == 0) throw usage_error("--pct-depth must be at least 1");
  c.pct_depth = a.pct_depth;
  c.pct_steps = a.pct_steps;
  c.bound = a.bound;
  return c;
}

// A step count: a non-negative integer, also written as 1e6 (exact integers only).
std::uint64_t parse_steps(const std::string& option, const std::string& text) {
  std::size_t used = 0;
  long double v = -1;
  try {
    v = std::stold(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != text.size() || text.empty() || !(v >= 0) || v != static_cast<long double>(static_cast<std::uint64_t>(v)) ||
      v > 1e19L)
    throw usage_error(option + " " + text + ": want a whole number of scheduling points (at most " +
                      std::to_string(ts::max_steps_bound) + " for --max-steps)");
  return static_cast<std::uint64_t>(v);
}

ts::run_limits limits_of(const ts::scenario& sc, const common_args& a) {
  ts::run_limits l = sc.limits;
  if (const auto f = parse_steps("--fair-after", a.fair_after)) l.fair_after = f;
  if (const auto m = parse_steps("--max-steps", a.max_steps)) l.max_steps = m;
  if (!ts::parse_memory_model(a.memory, l.memory))
    throw usage_error("unknown memory model '" + a.memory + "'; use sc or weak");
  std::string err;
  if (!ts::parse_faults(a.faults, l.faults, err)) throw usage_error(err);
  if (auto msg = ts::check_limits(l)) throw usage_error(*msg + " (--fair-after / --max-steps)");
  return l;
}

void print_summary(const ts::explore_summary& s, const ts::strategy_config& cfg, const ts::run_limits& limits) {
  fmt::print("scenario {}  strategy {}", s.scenario, ts::to_string(cfg.kind));
  if (limits.memory != ts::memory_model::sc) fmt::print("  memory {}", ts::to_string(limits.memory));
  if (limits.faults) fmt::print("  faults {}", ts::faults_to_string(limits.faults));
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

int cmd_list(bool keys) {
  ts::register_builtin_scenarios();
  for (const auto& s : ts::catalogue()) {
    fmt::print("{:<20} {:<6} {}\n", s.name, s.expected == ts::expectation::fails ? "[bug]" : "", s.summary);
    if (keys) fmt::print("{:<27} keys: {}\n", "", ts::describe_keys(s));
  }
  return 0;
}

int cmd_explore(const common_args& a, std::uint64_t schedules, unsigned threads, bool keep_going,
                const std::string& save, bool do_shrink) {
  const ts::scenario& sc = need_scenario(a.scenario);
  if (schedules == 0) throw usage_error("--schedules 0 explores nothing; give at least 1");
  ts::explore_options o;
  o.strategy = parse_config(a);
  o.schedules = schedules;
  o.seed = a.seed;
  o.threads = threads;
  o.scenario_params = parse_params(sc, a.sets);
  o.limits = limits_of(sc, a);
  o.stop_on_failure = !keep_going;
  o.progress = true;
  const ts::explore_summary s = ts::explore(sc, o);
  print_summary(s, o.strategy, *o.limits);
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
  ts::memory_state::tracer_fn mtracer;
  if (trace) {
    tracer = [](std::uint64_t step, unsigned lane, ts::op k) { fmt::print("  step {:>7}  lane {:>4}  {}\n", step, lane, ts::to_string(k)); };
    mtracer = [](const char* what, unsigned lane, const void* addr, std::uint64_t value, unsigned pick, unsigned n) {
      fmt::print("                lane {:>4}  {} {} = {:#x}{}\n", lane, what, addr, value,
                 n > 1 ? fmt::format("  (store {} of {} it could read; 0 = newest)", pick, n) : std::string());
    };
  }
  ts::run_result r;
  const ts::scenario* sc = nullptr;
  ts::params p;
  ts::run_limits limits;
  if (!decisions.empty()) {
    for (const CLI::Option* o : a.schedule_options)
      if (o->count())
        throw usage_error(o->get_name() + " does not go with --decisions: the file names the schedule, its limits, "
                                          "memory model and faults");
    if (a.set_option->count())
      throw usage_error("--set does not go with --decisions: the file carries the scenario's parameters");
    const ts::decision_file d = ts::load_decisions(decisions);
    if (a.scenario_option->count() && a.scenario != d.scenario)
      throw usage_error("--scenario " + a.scenario + " does not match the decision file '" + decisions +
                        "', which replays scenario " + d.scenario + "; drop --scenario or give the matching file");
    const ts::scenario* found = ts::find_scenario(d.scenario);
    if (!found) throw ts::input_error("decision file '" + decisions + "' names scenario '" + d.scenario + "', which does not exist (toga-sim list)");
    sc = found;
    try {
      ts::validate_params(*sc, d.scenario_params);
    } catch (const std::invalid_argument& e) {
      throw ts::input_error("decision file '" + decisions + "' does not fit its scenario: " + e.what());
    }
    p = d.scenario_params;
    limits = d.limits;
    ts::replay_strategy rs(d.decisions);
    r = ts::run_one(*sc, p, rs, 0, limits, tracer, mtracer);
    print_run(r);
    if (!d.verdict.empty() && (d.verdict != ts::to_string(r.kind) || (d.trace_hash && d.trace_hash != r.trace_hash)))
      fmt::print("  note: the file recorded verdict {} with hash {:016x}\n", d.verdict, d.trace_hash);
  } else {
    if (a.scenario.empty()) throw usage_error("replay needs --scenario NAME (with --strategy and --seed) or --decisions FILE");
    sc = &need_scenario(a.scenario);
    p = parse_params(*sc, a.sets);
    limits = limits_of(*sc, a);
    ts::strategy_config cfg = parse_config(a);
    if (cfg.kind == ts::strategy_kind::exhaustive || cfg.kind == ts::strategy_kind::portfolio)
      throw usage_error("replay by seed takes --strategy random, pct or stall (the explore summary names the one to use)");
    if (cfg.kind == ts::strategy_kind::pct && cfg.pct_steps == 0)
      throw usage_error("replaying a pct schedule needs --pct-steps (the explore summary prints it)");
    auto strat = ts::make_strategy(cfg, 0);
    r = ts::run_one(*sc, p, *strat, a.seed, limits, tracer, mtracer);
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

// litmus: every litmus configuration, exhaustively, as the Markdown table of docs/simulator.md.
int cmd_litmus(const std::string& memory, unsigned bound, std::uint64_t max_schedules) {
  ts::memory_model m;
  if (!ts::parse_memory_model(memory, m)) throw usage_error("unknown memory model '" + memory + "'; use sc or weak");
  if (max_schedules == 0) throw usage_error("--schedules 0 explores nothing; give at least 1");
  ts::register_builtin_scenarios();
  fmt::print("| test | weak outcome | variant | placement | PTX | observed (schedules with it / explored) |\n");
  fmt::print("|---|---|---|---|---|---|\n");
  int bad = 0;
  for (unsigned t = 0; t < ts::litmus_test_count; ++t)
    for (unsigned pl = 0; pl < ts::litmus_placement_count; ++pl)
      for (unsigned v = 0; v < ts::litmus_variant_count; ++v) {
        const auto r = ts::run_litmus(static_cast<ts::litmus_test>(t), static_cast<ts::litmus_variant>(v),
                                      static_cast<ts::litmus_placement>(pl), m, bound, max_schedules);
        const bool forbidden_seen = r.weak && !r.ptx_allows;
        if (forbidden_seen) ++bad;
        fmt::print("| {} | {} | {} | {} | {} | {} ({} / {}{}) |\n", ts::litmus_test_name(r.test),
                   ts::litmus_weak_outcome(r.test), ts::litmus_variant_name(r.variant),
                   ts::litmus_placement_name(r.placement), r.ptx_allows ? "allowed" : "forbidden",
                   forbidden_seen ? "**FORBIDDEN OUTCOME SEEN**" : r.weak ? "observed" : "not observed", r.weak,
                   r.schedules, r.complete ? "" : ", bound not exhausted");
      }
  if (bad) fmt::print("\n{} configurations produced a forbidden outcome\n", bad);
  return bad ? 1 : 0;
}

// demo: the catalogue against its expectations; the planted bugs must be found.
int cmd_demo(std::uint64_t schedules, unsigned threads) {
  if (schedules == 0) throw usage_error("--schedules 0 explores nothing; give at least 1");
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
      print_summary(s, o.strategy, sc.limits);
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
  bool list_keys = false;
  app.add_subcommand("list", "name the built-in scenarios")->add_flag("--keys", list_keys, "also name each scenario's parameters and ranges");

  common_args ea;
  std::uint64_t schedules = 1000;
  unsigned threads = 0;
  bool keep_going = false, shrink_flag = false;
  std::string save;
  auto* ex = app.add_subcommand("explore", "run many schedules of a scenario");
  ea.scenario_option = ex->add_option("--scenario", ea.scenario, "scenario name (toga-sim list)")->required();
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
  ra.scenario_option = rp->add_option("--scenario", ra.scenario, "scenario name");
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

  std::string litmus_memory = "weak";
  unsigned litmus_bound = 6;
  std::uint64_t litmus_schedules = 200'000;
  auto* lt = app.add_subcommand("litmus", "run every litmus test of the memory model exhaustively; print the table");
  lt->add_option("--memory", litmus_memory, "memory model: weak or sc")->capture_default_str();
  lt->add_option("--bound", litmus_bound, "deviations from the default policy (scheduling and read choices)")->capture_default_str();
  lt->add_option("--schedules", litmus_schedules, "at most this many schedules per configuration")->capture_default_str();

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);
    return rc == 0 ? 0 : 2;
  }
  try {
    if (app.got_subcommand("list")) return cmd_list(list_keys);
    if (app.got_subcommand(ex)) return cmd_explore(ea, schedules, threads, keep_going, save, shrink_flag);
    if (app.got_subcommand(rp)) return cmd_replay(ra, decisions, rsave, rshrink, rtrace);
    if (app.got_subcommand(dm)) return cmd_demo(demo_schedules, demo_threads);
    if (app.got_subcommand(lt)) return cmd_litmus(litmus_memory, litmus_bound, litmus_schedules);
  } catch (const ts::input_error& e) {
    std::fprintf(stderr, "toga-sim: error: %s\n", e.what());
    return 1;
  } catch (const std::invalid_argument& e) {  // usage_error and the library's argument checks
    std::fprintf(stderr, "toga-sim: usage error: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "toga-sim: error: %s\n", e.what());
    return 1;
  }
  return 2;
}
