// toga-sim: explore, replay and shrink schedules of the built-in simulator scenarios, and run
// the mutant suite.
//
//   toga-sim list [--keys]
//   toga-sim explore --scenario NAME --strategy random|pct|stall|guided|exhaustive|portfolio --schedules N
//                    --seed S [--pct-depth D] [--pct-steps K] [--bound B] [--threads T]
//                    [--set name=value]... [--memory sc|weak] [--faults none|all|site,...]
//                    [--save-failure FILE] [--shrink] [--keep-going] [--shapes fixed|random]
//                    [--shard I/N] [--json FILE]
//   toga-sim merge   FILE... [--json FILE]      (the --json reports of one run's shards)
//   toga-sim coverage --scenario NAME [explore's options] [--list N]   (the core's site pairs)
//   toga-sim replay  --scenario NAME --strategy random|pct|stall|guided --seed S [...] | --decisions FILE
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

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>
#include <tuple>
#include <regex>
#include <set>
#include <sstream>
#include <stdexcept>
#include <sys/wait.h>
#include <unistd.h>

#include "toga/sim/dpor.hpp"
#include "toga/sim/faults.hpp"
#include "toga/sim/litmus.hpp"
#include "toga/sim/mutants.hpp"
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

// Unsigned options: CLI11 would wrap "-5" to 2^64 - 5; refuse anything but digits (exit 2).
const CLI::Validator whole_number(
    [](std::string& v) -> std::string {
      if (v.empty() || v.find_first_not_of("0123456789") != std::string::npos)
        return "'" + v + "' is not a whole number (0, 1, 2, ...)";
      return {};
    },
    "N", "whole number");

void add_common(CLI::App* c, common_args& a) {
  auto& o = a.schedule_options;
  o.push_back(c->add_option("--strategy", a.strategy, "random | pct | stall | guided | exhaustive | portfolio")->capture_default_str());
  o.push_back(c->add_option("--seed", a.seed, "seed (schedule i uses seed + i)")->check(whole_number)->capture_default_str());
  o.push_back(c->add_option("--pct-depth", a.pct_depth, "PCT depth d (bug depth; d-1 priority changes)")->check(whole_number)->capture_default_str());
  o.push_back(c->add_option("--pct-steps", a.pct_steps, "PCT k, the expected schedule length (0: calibrate)")->check(whole_number));
  o.push_back(c->add_option("--bound", a.bound, "exhaustive: deviations from the default policy")->check(whole_number)->capture_default_str());
  a.set_option = c->add_option("--set", a.sets, "scenario parameter name=value (repeatable; toga-sim list --keys names them)");
  o.push_back(c->add_option("--fair-after", a.fair_after, "scheduling points before the fair tail (0: scenario default)"));
  o.push_back(c->add_option("--max-steps", a.max_steps,
                            "scheduling points before a livelock verdict (0: scenario default; at most " +
                                std::to_string(ts::max_steps_bound) + ")"));
  o.push_back(c->add_option("--memory", a.memory, "memory model: sc (every load reads the latest store) or weak "
                                                   "(PTX-style relaxed loads, release/acquire, fences, scopes)")
                  ->capture_default_str());
  o.push_back(c->add_option("--faults", a.faults, "fault sites that may fire: none, all, or site,site,... (see "
                                                   "docs/simulator.md section 6.8)")
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
  if (a.strategy == "dpor")
    throw usage_error("dpor is a command of its own: toga-sim dpor --scenario NAME [--memory weak] [--set ...] "
                      "(docs/simulator.md section 20)");
  if (!ts::parse_strategy(a.strategy, c.kind) || c.kind == ts::strategy_kind::replay)
    throw usage_error("unknown strategy '" + a.strategy + "'; use random, pct, stall, guided, exhaustive or portfolio");
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
    fmt::print(" (d={}, k={})", cfg.pct_depth, s.pct_steps ? std::to_string(s.pct_steps) : std::string("per shape"));
  if (cfg.kind == ts::strategy_kind::exhaustive) fmt::print(" (bound {}, {})", cfg.bound,
                                                          s.exhausted ? "complete"
                                                          : s.first_failure ? "stopped at the first failure"
                                                                            : "schedule limit reached");
  fmt::print("\n  schedules {}  in {:.2f} s  = {:.0f} schedules/s  ({:.1f} steps/schedule)\n", s.schedules,
             s.seconds, s.schedules_per_second(), s.schedules ? double(s.total_steps) / s.schedules : 0.0);
  if (s.time_limited && s.schedules > 0)
    fmt::print("  time limit (--seconds) reached: schedules {} .. {} counted, the rest not run\n", s.first_index,
               s.first_index + s.schedules - 1);
  fmt::print("  verdicts:");
  for (unsigned k = 0; k < ts::verdict_kind_count; ++k)
    if (s.counts[k]) fmt::print(" {}={}", ts::to_string(static_cast<ts::verdict_kind>(k)), s.counts[k]);
  fmt::print("\n");
  for (std::size_t n = 0; n < s.failures.size(); ++n) {
    const auto& f = s.failures[n];
    fmt::print("  {} at schedule {} (seed {}): {}\n    {}\n", n == 0 ? "FIRST FAILURE" : "FAILURE", f.index, f.seed,
               ts::to_string(f.result.kind), f.result.message);
    fmt::print("    {} preemptions, {} switches, {} steps, trace hash {:016x}{}\n", f.result.preemptions,
               f.result.switches, f.result.steps, f.result.trace_hash,
               f.deterministic ? " (re-run: same hash)" : "  ** NON-DETERMINISTIC: a re-run differed **");
    fmt::print("  replay: {}\n", f.replay_command);
  }
  if (s.failures_found > s.failures.size())
    fmt::print("  ({} failing schedules in all; the first {} are listed)\n", s.failures_found, s.failures.size());
}

// The JSON report of an exploration (explore --json; merge reads and writes the same format).
nlohmann::ordered_json summary_json(const ts::explore_summary& s, const ts::strategy_config& cfg, const ts::run_limits& limits,
                                    bool random_shapes, std::uint64_t seed, std::uint64_t run_schedules, std::uint64_t shard,
                                    std::uint64_t shards, const ts::params& fixed) {
  nlohmann::ordered_json j;
  j["format"] = "toga-sim explore 1";
  j["scenario"] = s.scenario;
  j["strategy"] = ts::to_string(cfg.kind);
  if (cfg.kind == ts::strategy_kind::pct || cfg.kind == ts::strategy_kind::portfolio) j["pct_depth"] = cfg.pct_depth;
  j["memory"] = ts::to_string(limits.memory);
  j["faults"] = ts::faults_to_string(limits.faults);
  j["shapes"] = random_shapes ? "random" : "fixed";
  nlohmann::ordered_json set = nlohmann::ordered_json::object();
  for (const auto& [k, v] : fixed.values()) set[k] = v;
  j["set"] = set;
  j["seed"] = seed;
  j["run_schedules"] = run_schedules;  // the whole run's schedules (all shards)
  j["shard"] = shard;
  j["shards"] = shards;
  j["first_index"] = s.first_index;
  j["schedules"] = s.schedules;  // run by this shard (up to its first failure unless --keep-going)
  j["seconds"] = s.seconds;
  j["time_limited"] = s.time_limited;  // --seconds ran out: "schedules" counts the first ones only
  j["steps"] = s.total_steps;
  std::map<std::string, std::uint64_t> by_name;  // by name, as merge writes them
  for (unsigned k = 0; k < ts::verdict_kind_count; ++k)
    if (s.counts[k]) by_name[ts::to_string(static_cast<ts::verdict_kind>(k))] = s.counts[k];
  nlohmann::ordered_json counts = nlohmann::ordered_json::object();
  for (const auto& [k, v] : by_name) counts[k] = v;
  j["verdicts"] = counts;
  j["failures_found"] = s.failures_found;
  auto& arr = j["failures"] = nlohmann::ordered_json::array();
  for (const auto& f : s.failures) {
    nlohmann::ordered_json x;
    x["index"] = f.index;
    x["seed"] = f.seed;
    x["verdict"] = ts::to_string(f.result.kind);
    x["message"] = f.result.message;
    x["deterministic"] = f.deterministic;
    x["replay"] = f.replay_command;
    arr.push_back(x);
  }
  return j;
}

void write_json(const std::string& path, const nlohmann::ordered_json& j) {
  std::ofstream f(path);
  if (!f) throw std::runtime_error("cannot write '" + path + "': check that its folder exists and is writable");
  f << j.dump(1) << "\n";
  if (!f) throw std::runtime_error("writing '" + path + "' failed");
}

// "I/N" (--shard): shard I of N, 0 <= I < N.
std::pair<std::uint64_t, std::uint64_t> parse_shard(const std::string& text) {
  const auto slash = text.find('/');
  const auto digits = [](const std::string& t) { return !t.empty() && t.size() <= 18 && t.find_first_not_of("0123456789") == std::string::npos; };
  if (slash == std::string::npos || !digits(text.substr(0, slash)) || !digits(text.substr(slash + 1)))
    throw usage_error("--shard '" + text + "': want I/N, shard I (0 .. N-1) of N, e.g. --shard 3/8");
  const std::uint64_t i = std::stoull(text.substr(0, slash)), n = std::stoull(text.substr(slash + 1));
  if (n == 0 || i >= n)
    throw usage_error("--shard " + text + ": shard I of N needs 0 <= I < N (shards are numbered from 0), e.g. --shard 0/" +
                      std::to_string(std::max<std::uint64_t>(n, 1)));
  return {i, n};
}

void print_run(const ts::run_result& r) {
  fmt::print("verdict {}{}{}\n  {} steps, {} preemptions, {} switches, {} decisions, trace hash {:016x}\n",
             ts::to_string(r.kind), r.message.empty() ? "" : ": ", r.message, r.steps, r.preemptions, r.switches,
             r.decisions.size(), r.trace_hash);
  for (const auto& [name, value] : r.metrics) fmt::print("  {} = {:.6g}\n", name, value);
}

// `text` in lines of at most `width` characters, every line after the first indented by `indent`.
std::string wrap(const std::string& text, std::size_t indent, std::size_t width) {
  std::string out, line;
  std::size_t at = 0;
  while (at < text.size()) {
    std::size_t end = text.find(' ', at);
    if (end == std::string::npos) end = text.size();
    const std::string word = text.substr(at, end - at);
    if (!line.empty() && indent + line.size() + 1 + word.size() > width) {
      out += line + "\n" + std::string(indent, ' ');
      line.clear();
    }
    line += (line.empty() ? "" : " ") + word;
    at = end + 1;
  }
  return out + line;
}

int cmd_list(bool keys, bool bugs) {
  ts::register_builtin_scenarios();
  if (bugs) {
    fmt::print("The allocator scenarios' planted bugs (--set bug=N; docs/simulator.md section 16 and toga-sim mutants):\n");
    for (const auto& b : ts::allocator_planted_bugs())
      fmt::print("{:>4}  {:<26} {}\n", b.number, b.area, wrap(b.what, 33, 100));
    return 0;
  }
  for (const auto& s : ts::catalogue()) {
    fmt::print("{:<20} {:<6} {}\n", s.name, s.expected == ts::expectation::fails ? "[bug]" : "", wrap(s.summary, 28, 100));
    if (keys) {
      fmt::print("{:<27} keys: {}\n", "", wrap(ts::describe_keys(s), 34, 100));
      if (ts::has_drawn_keys(s)) fmt::print("{:<27} random shapes draw: {}\n", "", wrap(ts::describe_draws(s), 47, 100));
    }
  }
  return 0;
}

struct explore_args {
  std::uint64_t schedules = 1000;
  double seconds = 0;
  unsigned threads = 0;
  bool keep_going = false, shrink = false;
  std::string save, shapes = "fixed", shard, json;
};

// explore's and coverage's options from the command line (usage errors for what does not fit).
ts::explore_options explore_options_of(const ts::scenario& sc, const common_args& a, const explore_args& x) {
  if (x.schedules == 0) throw usage_error("--schedules 0 explores nothing; give at least 1");
  if (x.shapes != "fixed" && x.shapes != "random")
    throw usage_error("--shapes " + x.shapes + ": use fixed or random (fixed: the --set values and the defaults, or random: a shape "
                                               "drawn per schedule)");
  ts::explore_options o;
  o.strategy = parse_config(a);
  o.schedules = x.schedules;
  if (!(x.seconds >= 0)) throw usage_error("--seconds " + std::to_string(x.seconds) + ": give 0 (no limit) or a positive number of seconds");
  o.seconds = x.seconds;
  o.seed = a.seed;
  o.threads = x.threads;
  o.scenario_params = parse_params(sc, a.sets);
  o.limits = limits_of(sc, a);
  o.stop_on_failure = !x.keep_going;
  o.progress = true;
  o.random_shapes = x.shapes == "random";
  if (o.random_shapes && !ts::has_drawn_keys(sc))
    throw usage_error("scenario " + sc.name + " has no parameter that random shapes draw (toga-sim list --keys); explore it with --shapes fixed");
  if (o.random_shapes && o.strategy.kind == ts::strategy_kind::exhaustive)
    throw usage_error("--shapes random does not go with --strategy exhaustive (it enumerates the schedules of one shape)");
  return o;
}

// ts::explore with the library's argument errors as usage errors.
ts::explore_summary explore_or_usage_error(const ts::scenario& sc, const ts::explore_options& o) {
  try {
    return ts::explore(sc, o);
  } catch (const std::invalid_argument& e) {
    throw usage_error(e.what());
  }
}

int cmd_explore(const common_args& a, const explore_args& x) {
  const ts::scenario& sc = need_scenario(a.scenario);
  ts::explore_options o = explore_options_of(sc, a, x);
  std::uint64_t shard = 0, shards = 1;
  if (!x.shard.empty()) {
    std::tie(shard, shards) = parse_shard(x.shard);
    if (o.strategy.kind == ts::strategy_kind::exhaustive)
      throw usage_error("--shard does not go with --strategy exhaustive (its schedules are enumerated one after another)");
    if (shards > x.schedules)
      throw usage_error("--shard " + x.shard + " of --schedules " + std::to_string(x.schedules) + ": more shards than schedules; give at most " +
                        std::to_string(x.schedules) + " shards");
    std::tie(o.first_index, o.schedules) = ts::shard_range(x.schedules, shard, shards);
  }
  const ts::explore_summary s = explore_or_usage_error(sc, o);
  if (s.time_limited && s.schedules == 0)
    throw ts::input_error("the time limit (--seconds " + fmt::format("{}", x.seconds) +
                          ") ended the run before its first schedule ended: give more seconds");
  if (shards > 1) fmt::print("shard {}/{}: schedules {} .. {} of {}\n", shard, shards, o.first_index, o.first_index + o.schedules - 1, x.schedules);
  print_summary(s, o.strategy, *o.limits);
  if (!x.json.empty()) {
    write_json(x.json, summary_json(s, o.strategy, *o.limits, o.random_shapes, o.seed, x.schedules, shard, shards, o.scenario_params));
    fmt::print("  report: {}\n", x.json);
  }
  if (s.first_failure) {
    ts::run_result r = s.first_failure->result;
    const ts::params& fp = s.first_failure->scenario_params;
    if (x.shrink) {
      const auto rep = ts::shrink(sc, fp, *o.limits, r);
      fmt::print("  shrunk in {} replays{}: {} -> {} preemptions, {} -> {} switches\n", rep.replays,
                 rep.search_replays ? fmt::format(" and {} searched schedules", rep.search_replays) : std::string(),
                 rep.original.preemptions, rep.shrunk.preemptions, rep.original.switches, rep.shrunk.switches);
      r = rep.shrunk;
    }
    if (!x.save.empty()) {
      ts::save_decisions(x.save, sc, fp, *o.limits, r);
      fmt::print("  decisions saved: toga-sim replay --decisions {}\n", x.save);
    }
    return 1;
  }
  return 0;
}

// coverage: the core's site pairs over an exploration (toga/sim/coverage.hpp): how many pairs
// of Platform operations that touch one location from two lanes ran in both orders, and the
// pairs that ran in one order only.
int cmd_coverage(const common_args& a, explore_args x, std::uint64_t list) {
  const ts::scenario& sc = need_scenario(a.scenario);
  x.keep_going = true;  // every schedule counts, so the figures do not depend on the threads
  ts::explore_options o = explore_options_of(sc, a, x);
  o.coverage = true;
  const ts::explore_summary s = explore_or_usage_error(sc, o);
  print_summary(s, o.strategy, *o.limits);
  const ts::coverage_summary c = ts::summarize(*s.coverage);
  fmt::print("coverage of the core's races ({} shapes): {} core sites ran; {} site pairs met on one location from two lanes "
             "(one a write)\n  both orders: {} ({:.1f}%), both with a preemption between: {}; one order only: {}\n",
             o.random_shapes ? "random" : "fixed", c.core_sites, c.unordered_pairs, c.both_orders,
             c.unordered_pairs ? 100.0 * c.both_orders / c.unordered_pairs : 0.0, c.adjacent_both, c.one_order.size());
  if (!c.one_order.empty() && list) {
    fmt::print("pairs run in one order only (first, then second; the other order never ran), most frequent first:\n");
    std::uint64_t n = 0;
    for (const auto& [p, times] : c.one_order) {
      if (n++ == list) {
        fmt::print("  ... {} more (--list N)\n", c.one_order.size() - list);
        break;
      }
      fmt::print("  {:<44} then {:<44} x{}\n", ts::site_name(p.first), ts::site_name(p.second), times);
    }
  }
  if (!x.json.empty()) {
    nlohmann::ordered_json j;
    j["format"] = "toga-sim coverage 1";
    j["scenario"] = sc.name;
    j["schedules"] = s.schedules;
    j["shapes"] = o.random_shapes ? "random" : "fixed";
    j["core_sites"] = c.core_sites;
    j["pairs"] = c.unordered_pairs;
    j["both_orders"] = c.both_orders;
    j["both_orders_adjacent"] = c.adjacent_both;
    auto& arr = j["one_order"] = nlohmann::ordered_json::array();
    for (const auto& [p, times] : c.one_order) arr.push_back({{"first", ts::site_name(p.first)}, {"second", ts::site_name(p.second)}, {"times", times}});
    write_json(x.json, j);
    fmt::print("  report: {}\n", x.json);
  }
  return s.failures_found ? 1 : 0;
}

// merge: the --json reports of one run's shards as one report. Every shard must be there once,
// from the same run (scenario, strategy, memory, faults, shapes, --set values, seed, schedules).
int cmd_merge(const std::vector<std::string>& files, const std::string& out) {
  if (files.empty()) throw usage_error("merge needs the shards' reports: toga-sim merge shard-*.json");
  const char* same[] = {"scenario", "strategy", "memory", "faults", "shapes", "set", "seed", "run_schedules", "shards"};
  nlohmann::ordered_json first;
  std::map<std::uint64_t, std::string> seen;  // shard -> file
  std::uint64_t schedules = 0, steps = 0, found = 0;
  std::string cut;  // shards that their --seconds limit cut short
  std::uint64_t n_cut = 0;
  double seconds = 0;
  std::map<std::string, std::uint64_t> verdicts;
  std::vector<nlohmann::ordered_json> failures;
  for (const auto& path : files) {
    std::ifstream f(path);
    if (!f) throw ts::input_error("cannot open '" + path + "': give the files that explore --json wrote");
    nlohmann::ordered_json j;
    try {
      j = nlohmann::ordered_json::parse(f);
    } catch (const std::exception& e) {
      throw ts::input_error("'" + path + "' is not JSON (" + std::string(e.what()) + "): give the files that explore --json wrote");
    }
    try {
      if (!j.is_object() || j.value("format", "") != "toga-sim explore 1")
        throw ts::input_error("'" + path + "' is not a toga-sim explore report (format \"toga-sim explore 1\")");
      if (first.is_null()) first = j;
      for (const char* k : same)
        if (j.at(k) != first.at(k))
          throw ts::input_error("'" + path + "' is from another run than '" + files.front() + "': " + k + " " + j.at(k).dump() + " against " +
                                first.at(k).dump() + "; merge the shards of one run only");
      const auto shard = j.at("shard").get<std::uint64_t>();
      if (shard >= j.at("shards").get<std::uint64_t>()) throw ts::input_error("'" + path + "' names shard " + std::to_string(shard) + " of " + j.at("shards").dump());
      if (auto it = seen.find(shard); it != seen.end())
        throw ts::input_error("shard " + std::to_string(shard) + " is given twice ('" + it->second + "' and '" + path + "'); give each shard once");
      seen[shard] = path;
      if (j.value("time_limited", false) && n_cut++ < 8) cut += (cut.empty() ? "" : ", ") + std::to_string(shard);
      schedules += j.at("schedules").get<std::uint64_t>();
      steps += j.at("steps").get<std::uint64_t>();
      seconds += j.at("seconds").get<double>();
      found += j.at("failures_found").get<std::uint64_t>();
      for (const auto& [k, v] : j.at("verdicts").items()) verdicts[k] += v.get<std::uint64_t>();
      for (const auto& x : j.at("failures")) failures.push_back(x);
    } catch (const nlohmann::json::exception& e) {
      throw ts::input_error("'" + path + "' lacks a field of a toga-sim explore report (" + std::string(e.what()) + ")");
    }
  }
  const auto shards = first.at("shards").get<std::uint64_t>();
  std::string missing;
  std::uint64_t n_missing = 0;
  for (std::uint64_t k = 0; k < shards; ++k)
    if (!seen.count(k) && n_missing++ < 8) missing += (missing.empty() ? "" : ", ") + std::to_string(k);
  std::sort(failures.begin(), failures.end(), [](const auto& a, const auto& b) { return a.at("index").template get<std::uint64_t>() < b.at("index").template get<std::uint64_t>(); });
  fmt::print("merged {} of {} shards: scenario {}  strategy {}  memory {}  shapes {}  seed {}\n", seen.size(), shards,
             first.at("scenario").get<std::string>(), first.at("strategy").get<std::string>(), first.at("memory").get<std::string>(),
             first.at("shapes").get<std::string>(), first.at("seed").get<std::uint64_t>());
  fmt::print("  schedules {} of {}  ({:.1f} s of exploration in all, {:.1f} steps/schedule)\n  verdicts:", schedules,
             first.at("run_schedules").get<std::uint64_t>(), seconds, schedules ? double(steps) / schedules : 0.0);
  for (const auto& [k, v] : verdicts) fmt::print(" {}={}", k, v);
  fmt::print("\n");
  for (const auto& x : failures)
    fmt::print("  FAILURE at schedule {} (seed {}): {}{}\n    {}\n  replay: {}\n", x.at("index").get<std::uint64_t>(), x.at("seed").get<std::uint64_t>(),
               x.at("verdict").get<std::string>(), x.at("deterministic").get<bool>() ? "" : "  ** NON-DETERMINISTIC **",
               x.at("message").get<std::string>(), x.at("replay").get<std::string>());
  if (found > failures.size()) fmt::print("  ({} failing schedules in all; the shards listed {})\n", found, failures.size());
  if (n_missing) fmt::print("  MISSING {} of {} shards: {}{}\n", n_missing, shards, missing, n_missing > 8 ? ", ..." : "");
  if (n_cut) fmt::print("  CUT SHORT by their time limit (--seconds): {} of {} shards: {}{}\n", n_cut, shards, cut, n_cut > 8 ? ", ..." : "");
  if (!out.empty()) {
    nlohmann::ordered_json j = first;
    j["shard"] = 0;
    j["shards"] = 1;
    j["first_index"] = 0;
    j["merged_shards"] = seen.size();
    j["missing_shards"] = n_missing;
    j["time_limited"] = n_cut > 0;
    j["time_limited_shards"] = n_cut;
    j["schedules"] = schedules;
    j["seconds"] = seconds;
    j["steps"] = steps;
    nlohmann::ordered_json v = nlohmann::ordered_json::object();
    for (const auto& [k, c] : verdicts) v[k] = c;
    j["verdicts"] = v;
    j["failures_found"] = found;
    j["failures"] = failures;
    write_json(out, j);
    fmt::print("  report: {}\n", out);
  }
  if (!failures.empty() || found) return 1;
  if (n_missing) {
    std::fprintf(stderr, "toga-sim: error: %llu of %llu shards are missing (%s); run them and merge again\n",
                 static_cast<unsigned long long>(n_missing), static_cast<unsigned long long>(shards), missing.c_str());
    return 1;
  }
  if (n_cut) {
    std::fprintf(stderr, "toga-sim: error: %llu of %llu shards stopped at their time limit before their last schedule (%s); "
                 "run them again with more --seconds and merge again\n",
                 static_cast<unsigned long long>(n_cut), static_cast<unsigned long long>(shards), cut.c_str());
    return 1;
  }
  return 0;
}

// run_one for `replay`, under a crash context that says a crash is this command's own schedule
// (else the crash reporter prints only the signal).
template <class... A>
ts::run_result replay_one(const ts::scenario& sc, A&&... args) {
  ts::crash_context& cc = ts::this_thread_crash_context();
  const ts::crash_context saved = cc;
  cc.active = true;
  cc.replaying = true;
  cc.scenario = sc.name.c_str();
  ts::run_result r = ts::run_one(sc, std::forward<A>(args)...);
  cc = saved;
  return r;
}

int cmd_replay(const common_args& a, const std::string& decisions, const std::string& save, bool do_shrink,
               bool trace) {
  ts::world::tracer_fn tracer;
  ts::memory_state::tracer_fn mtracer;
  if (trace) {
    tracer = [](std::uint64_t step, unsigned lane, ts::op k) {
      const ts::world* w = ts::world::current();
      const char* file = w ? w->site_file() : nullptr;
      if (file == nullptr) fmt::print("  step {:>7}  lane {:>4}  {}\n", step, lane, ts::to_string(k));
      else fmt::print("  step {:>7}  lane {:>4}  {:<14} {}\n", step, lane, ts::to_string(k), ts::site_name({file, w->site_line()}));
    };
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
    r = replay_one(*sc, p, rs, 0, limits, tracer, mtracer);
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
      throw usage_error("replay by seed takes --strategy random, pct, stall or guided (the explore summary names the one to use)");
    if (cfg.kind == ts::strategy_kind::pct && cfg.pct_steps == 0)
      throw usage_error("replaying a pct schedule needs --pct-steps (the explore summary prints it)");
    if (cfg.kind == ts::strategy_kind::guided) cfg.guided_sites = ts::guided_targets(*sc, limits);
    auto strat = ts::make_strategy(cfg, 0);
    r = replay_one(*sc, p, *strat, a.seed, limits, tracer, mtracer);
    print_run(r);
  }
  if (do_shrink && r.failed()) {
    const auto rep = ts::shrink(*sc, p, limits, r);
    fmt::print("shrunk in {} replays{}: {} -> {} preemptions, {} -> {} switches\n", rep.replays,
               rep.search_replays ? fmt::format(" and {} searched schedules", rep.search_replays) : std::string(),
               rep.original.preemptions,
               rep.shrunk.preemptions, rep.original.switches, rep.shrunk.switches);
    r = rep.shrunk;
  }
  if (!save.empty()) {
    ts::save_decisions(save, *sc, p, limits, r);
    fmt::print("decisions saved: toga-sim replay --decisions {}\n", save);
  }
  return r.failed() ? 1 : 0;
}

// dpor: every execution of a small scenario up to equivalence (docs/simulator.md §20), and with
// --compare the unreduced enumeration under the same await rule.
struct dpor_args {
  std::string scenario, memory = "sc", fair_after = "0", max_steps = "0", save, step_bound = "0", faults = "none";
  std::vector<std::string> sets;
  std::uint64_t schedules = 10'000'000;
  double seconds = 0;
  bool no_reduction = false, compare = false, keep_going = false, coarse_warps = false, all_reads = false, no_forms = false;
  std::string plain = "auto";
};

void print_dpor(const ts::dpor_summary& s, bool reduce) {
  fmt::print("  {} {}{}  in {:.2f} s  ({:.1f} steps/run, longest {})\n", reduce ? "executions" : "executions (unreduced)",
             s.executions, s.redundant ? fmt::format(" (+{} redundant runs cut by sleep sets)", s.redundant) : std::string(),
             s.seconds, (s.executions + s.redundant) ? double(s.total_steps) / double(s.executions + s.redundant) : 0.0,
             s.max_steps);
  fmt::print("  {}\n", s.complete ? std::string("complete: every execution explored (up to equivalence and the await rule)")
                                  : "INCOMPLETE (stopped: " + s.stopped + ")");
  fmt::print("  verdicts:");
  for (unsigned k = 0; k < ts::verdict_kind_count; ++k)
    if (s.counts[k]) fmt::print(" {}={}", ts::to_string(static_cast<ts::verdict_kind>(k)), s.counts[k]);
  fmt::print("\n");
}

int cmd_dpor(const dpor_args& d) {
  const ts::scenario& sc = need_scenario(d.scenario);
  const ts::params p = parse_params(sc, d.sets);
  common_args a;
  a.memory = d.memory;
  a.fair_after = d.fair_after;
  a.max_steps = d.max_steps;
  a.faults = d.faults;
  const ts::run_limits limits = limits_of(sc, a);
  if (auto why = ts::dpor_unsupported(sc, p, limits)) throw usage_error(*why);
  if (d.schedules == 0) throw usage_error("--schedules 0 explores nothing; give at least 1 (it is the limit on runs)");
  if (d.seconds < 0) throw usage_error("--seconds must be positive (0: no time limit)");
  if (d.no_reduction && d.compare) throw usage_error("--compare runs the unreduced enumeration after dpor; it does not go with --no-reduction");
  ts::dpor_options o;
  o.reduce = !d.no_reduction;
  o.max_executions = d.schedules;
  o.max_seconds = d.seconds;
  o.step_bound = parse_steps("--step-bound", d.step_bound);
  o.stop_on_failure = !d.keep_going;
  o.coarse_warps = d.coarse_warps;
  // The unreduced enumeration offers every store a load may read: it is the count without any reduction.
  o.skip_subsumed_reads = !d.all_reads && !d.no_reduction;
  o.invariant_forms = !d.no_forms;
  if (!ts::parse_plain_mode(d.plain, o.plain))
    throw usage_error("--plain " + d.plain + ": use auto (the default: declared where the scenario declares its plain state, "
                      "writers otherwise), declared, all (every step may read plain state: sound for any scenario), writers "
                      "or none (plain state ignored); docs/simulator.md section 20");
  if (o.plain == ts::plain_mode::declared && !sc.plain_declared)
    throw usage_error("--plain declared: scenario " + sc.name + " does not declare its plain state (toga/sim/plain.hpp); use "
                      "--plain writers (its default) or all");
  const ts::dpor_summary s = ts::explore_dpor(sc, p, limits, o);
  fmt::print("scenario {}  dpor{} --plain {}{}{}{}  memory {}", sc.name, o.reduce ? "" : " --no-reduction", ts::to_string(s.plain),
             o.coarse_warps ? " --coarse-warps" : "", d.all_reads && o.reduce ? " --all-reads" : "",
             d.no_forms ? " --no-invariant-forms" : "", ts::to_string(limits.memory));
  for (const auto& [k, v] : p.values()) fmt::print(" {}={}", k, v);
  fmt::print("\n");
  print_dpor(s, o.reduce);
  for (std::size_t n = 0; n < s.failures.size(); ++n) {
    const auto& f = s.failures[n];
    fmt::print("  {} at run {}: {}\n    {}\n", n == 0 ? "FIRST FAILURE" : "FAILURE", f.index, ts::to_string(f.result.kind),
               f.result.message);
    fmt::print("    {} preemptions, {} switches, {} steps, trace hash {:016x}{}\n", f.result.preemptions, f.result.switches,
               f.result.steps, f.result.trace_hash,
               f.deterministic ? " (replayed: same hash)" : "  ** NON-DETERMINISTIC: the replay differed **");
  }
  if (!s.failures.empty()) {
    if (!d.save.empty()) {
      ts::save_decisions(d.save, sc, p, ts::dpor_limits(limits, o), s.failures.front().result);
      fmt::print("  replay: {} replay --decisions {}\n", ts::program_name(), d.save);
    } else {
      fmt::print("  replay: {} replay --decisions FILE  (write FILE with --save-failure)\n", ts::program_name());
    }
  }
  if (d.compare) {
    ts::dpor_options u = o;
    u.reduce = false;
    u.skip_subsumed_reads = false;
    const ts::dpor_summary b = ts::explore_dpor(sc, p, limits, u);
    print_dpor(b, false);
    if (b.complete && s.complete && s.executions)
      fmt::print("  reduction: {} -> {} executions ({:.1f}x fewer), {:.2f} s -> {:.2f} s\n", b.executions, s.executions,
                 double(b.executions) / double(s.executions), b.seconds, s.seconds);
  }
  return s.failures_found ? 1 : 0;
}

// litmus: every litmus configuration, exhaustively, as the Markdown table of docs/simulator.md §4.4:
// one row per test and placement, one column per variant; each cell says whether PTX allows the
// weak outcome and in how many of the explored schedules the simulator produced it.
int cmd_litmus(const std::string& memory, unsigned bound, std::uint64_t max_schedules) {
  ts::memory_model m;
  if (!ts::parse_memory_model(memory, m)) throw usage_error("unknown memory model '" + memory + "'; use sc or weak");
  if (max_schedules == 0) throw usage_error("--schedules 0 explores nothing; give at least 1");
  ts::register_builtin_scenarios();
  fmt::print("| test (weak outcome) | threads placed | ");
  for (unsigned v = 0; v < ts::litmus_variant_count; ++v) fmt::print("{} | ", ts::litmus_variant_name(static_cast<ts::litmus_variant>(v)));
  fmt::print("\n|---|---|---|---|---|---|---|\n");
  int bad = 0, incomplete = 0;
  for (unsigned t = 0; t < ts::litmus_test_count; ++t)
    for (unsigned pl = 0; pl < ts::litmus_placement_count; ++pl) {
      const auto test = static_cast<ts::litmus_test>(t);
      fmt::print("| {} ({}) | {} |", ts::litmus_test_name(test), ts::litmus_weak_outcome(test),
                 ts::litmus_placement_name(static_cast<ts::litmus_placement>(pl)));
      for (unsigned v = 0; v < ts::litmus_variant_count; ++v) {
        const auto r = ts::run_litmus(test, static_cast<ts::litmus_variant>(v), static_cast<ts::litmus_placement>(pl), m,
                                      bound, max_schedules);
        const bool forbidden_seen = r.weak && !r.ptx_allows;
        bad += forbidden_seen;
        incomplete += !r.complete;
        fmt::print(" {}: {} {}/{}{} |", r.ptx_allows ? "allowed" : "forbidden",
                   forbidden_seen ? "**SEEN**" : r.weak ? "seen" : "not seen", r.weak, r.schedules, r.complete ? "" : "+");
      }
      fmt::print("\n");
    }
  fmt::print("\nCells: PTX's verdict on the weak outcome; whether the simulator produced it; schedules that ended in it / "
             "schedules explored (every schedule with at most {} deviations{}).\n",
             bound, incomplete ? "; + marks a search cut at --schedules" : "");
  if (bad) fmt::print("{} configurations produced a forbidden outcome\n", bad);
  return bad ? 1 : 0;
}

// mutants: the mutant suite (toga/sim/mutants.hpp).
struct mutants_args {
  std::string filter;
  std::uint64_t schedules = 10'000;
  unsigned threads = 0;
  std::string json;
  std::string baseline;
  std::string write_baseline;
  bool ci = false;
  bool shrink = false;
  bool list = false;
};

void add_mutants(CLI::App* c, mutants_args& a) {
  c->add_option("--filter", a.filter, "run the mutants whose id, class or scenario matches this regular expression");
  c->add_option("--schedules", a.schedules, "at most this many schedules per mutant")->check(whole_number)->capture_default_str();
  c->add_option("--threads", a.threads, "worker threads (0: all cores)")->check(whole_number);
  c->add_option("--json", a.json, "write the results to FILE");
  c->add_option("--baseline", a.baseline, "baseline of killed mutants (default: sim/mutants-baseline.json of the source "
                                          "tree; 'none': no comparison)");
  c->add_option("--write-baseline", a.write_baseline, "write this run's kills as the new baseline to FILE");
  c->add_flag("--ci", a.ci, "only the CI subset");
  c->add_flag("--shrink", a.shrink, "shrink every failure and report its preemptions (slow for livelocks)");
  c->add_flag("--list", a.list, "list the catalogue without running it");
}

std::string params_text(const ts::mutant& m) {
  std::string t;
  for (const auto& [k, v] : m.params) t += (t.empty() ? "" : " ") + k + "=" + std::to_string(v);
  return t;
}

std::string strategy_text(const ts::strategy_config& s) {
  if (s.kind == ts::strategy_kind::pct) return "pct d=" + std::to_string(s.pct_depth);
  return ts::to_string(s.kind);
}

// Runs one mutant in a child process, so that a planted bug that makes the code under test
// crash the simulator (a wild access) becomes a crash verdict instead of ending the suite.
ts::mutant_result run_isolated_once(const ts::mutant& m, const mutants_args& a, bool shrink) {
  int fds[2];
  if (::pipe(fds) != 0) throw std::runtime_error("pipe failed");
  std::fflush(stdout);
  std::fflush(stderr);
  const pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error("fork failed");
  if (pid == 0) {
    ::close(fds[0]);
    ts::install_crash_reporter(fds[1]);
    int rc = 0;
    try {
      const ts::mutant_result r = ts::run_mutant(m, a.schedules, a.threads, shrink);
      nlohmann::json j;
      j["killed"] = r.killed;
      j["schedules"] = r.schedules;
      j["verdict"] = static_cast<int>(r.verdict);
      j["message"] = r.message;
      j["replay"] = r.replay;
      j["deterministic"] = r.deterministic;
      j["preemptions"] = r.preemptions;
      if (r.shrunk_preemptions) j["shrunk_preemptions"] = *r.shrunk_preemptions;
      j["shrunk_replays"] = r.shrunk_replays;
      j["seconds"] = r.seconds;
      j["shrink_seconds"] = r.shrink_seconds;
      const std::string out = "RESULT " + j.dump() + "\n";
      if (::write(fds[1], out.data(), out.size()) < 0) rc = 4;
    } catch (const std::exception& e) {
      const std::string out = std::string("ERROR ") + e.what() + "\n";
      if (::write(fds[1], out.data(), out.size()) < 0) rc = 4;
    }
    ::_exit(rc);
  }
  ::close(fds[1]);
  std::string text;
  char buf[4096];
  for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) > 0;) text.append(buf, static_cast<std::size_t>(n));
  ::close(fds[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  ts::mutant_result r;
  r.m = &m;
  if (text.rfind("RESULT ", 0) == 0) {
    const auto j = nlohmann::json::parse(text.substr(7));
    r.killed = j.at("killed");
    r.schedules = j.at("schedules");
    r.verdict = static_cast<ts::verdict_kind>(j.at("verdict").get<int>());
    r.message = j.at("message");
    r.replay = j.at("replay");
    r.deterministic = j.at("deterministic");
    r.preemptions = j.at("preemptions");
    if (j.contains("shrunk_preemptions")) r.shrunk_preemptions = j.at("shrunk_preemptions").get<std::uint32_t>();
    r.shrunk_replays = j.at("shrunk_replays");
    r.seconds = j.at("seconds");
    r.shrink_seconds = j.at("shrink_seconds");
    return r;
  }
  if (text.rfind("ERROR ", 0) == 0) throw std::invalid_argument("mutant " + m.id + ": " + text.substr(6));
  if (text.rfind("CRASH ", 0) == 0) {
    std::istringstream in(text.substr(6));
    std::uint64_t index = 0, seed = 0, kind = 0, depth = 0, steps = 0;
    int sig = 0;
    in >> index >> seed >> kind >> depth >> steps >> sig;
    r.killed = true;
    r.schedules = index + 1;
    r.verdict = ts::verdict_kind::crash;
    r.message = "the code under test crashed the simulator (signal " + std::to_string(sig) + ")";
    if (kind == 255) {  // in the default-policy schedule that calibrates PCT, before schedule 0
      r.schedules = 1;
      r.message += " in the default-policy schedule (PCT's calibration)";
      std::string cmd = ts::program_name() + " explore --scenario " + m.scenario;
      for (const auto& [k, v] : m.params) cmd += " --set " + k + "=" + std::to_string(v);
      if (m.memory != ts::memory_model::sc) cmd += " --memory " + std::string(ts::to_string(m.memory));
      if (m.faults) cmd += " --faults " + ts::faults_to_string(m.faults);
      r.replay = cmd + " --strategy portfolio --schedules 1 --threads 1";
      return r;
    }
    const ts::scenario& sc = need_scenario(m.scenario);
    ts::params p;
    for (const auto& [k, v] : m.params) p.set(k, v);
    ts::strategy_config cfg;
    cfg.kind = static_cast<ts::strategy_kind>(kind);
    cfg.pct_depth = static_cast<unsigned>(depth);
    cfg.pct_steps = steps;
    ts::run_limits l = sc.limits;
    l.memory = m.memory;
    l.faults = m.faults;
    r.replay = ts::replay_command(sc, p, cfg, seed, l);
    return r;
  }
  throw std::runtime_error("mutant " + m.id + ": the child process ended without a result (status " + std::to_string(status) + ")");
}

// run_isolated_once; a child that dies while shrinking (a replay of a smaller schedule crashed the
// simulator: outside any explored schedule, so no crash report names it) is run again without
// shrinking, and the row says so, instead of ending the suite.
ts::mutant_result run_isolated(const ts::mutant& m, const mutants_args& a) {
  if (!a.shrink) return run_isolated_once(m, a, false);
  try {
    return run_isolated_once(m, a, true);
  } catch (const std::runtime_error& e) {
    fmt::print(stderr, "toga-sim: {} while shrinking; running it again without shrinking\n", e.what());
    ts::mutant_result r = run_isolated_once(m, a, false);
    r.message += " (not shrunk: a smaller schedule crashed the simulator while shrinking)";
    return r;
  }
}

int cmd_mutants(const mutants_args& a) {
  if (a.schedules == 0) throw usage_error("--schedules 0 explores nothing; give at least 1");
  std::optional<std::regex> re;
  if (!a.filter.empty()) {
    try {
      re.emplace(a.filter);
    } catch (const std::regex_error& e) {
      throw usage_error("--filter '" + a.filter + "' is not a regular expression: " + e.what());
    }
  }
  ts::register_builtin_scenarios();
  std::vector<const ts::mutant*> chosen;
  for (const auto& m : ts::mutant_catalogue()) {
    if (a.ci && !m.ci) continue;
    if (re && !std::regex_search(m.id, *re) && !std::regex_search(m.cls, *re) && !std::regex_search(m.scenario, *re)) continue;
    chosen.push_back(&m);
  }
  if (chosen.empty()) throw usage_error("no mutant matches --filter '" + a.filter + "' (toga-sim mutants --list)");
  if (a.list) {
    fmt::print("| mutant | class | GPU | scenario | params | memory | faults | strategy | depth | CI | what |\n|---|---|---|---|---|---|---|---|---|---|---|\n");
    for (const auto* m : chosen)
      fmt::print("| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {}{} |\n", m->id, m->cls, m->gpu_specific ? "yes" : "",
                 m->scenario, params_text(*m), ts::to_string(m->memory), ts::faults_to_string(m->faults),
                 strategy_text(m->strategy), m->depth, m->ci ? "yes" : "", m->what,
                 m->equivalent ? " (equivalent: " + m->note + ")" : "");
    return 0;
  }
  std::optional<ts::mutant_baseline> base;
  const std::string base_path = a.baseline.empty() ? ts::default_mutant_baseline_path() : a.baseline;
  if (a.baseline != "none") {
    std::ifstream probe(base_path);
    if (probe) base = ts::load_mutant_baseline(base_path);
    else if (!a.baseline.empty()) throw ts::input_error("cannot open mutant baseline '" + base_path + "'");
  }

  fmt::print("| mutant | class | scenario | memory | strategy | schedules to first failure | verdict | replay |\n");
  fmt::print("|---|---|---|---|---|---|---|---|\n");
  std::vector<ts::mutant_result> results;
  int regressions = 0, nondeterministic = 0;
  std::vector<std::string> notes;
  for (const auto* m : chosen) {
    ts::mutant_result r = run_isolated(*m, a);
    std::string killed = r.killed ? std::to_string(r.schedules) : "survived " + std::to_string(r.schedules);
    if (r.shrunk_preemptions) killed += fmt::format(" (shrunk to {} preemptions{})", *r.shrunk_preemptions, r.shrunk_replays ? "" : ", NOT REPLAYED");
    if (m->equivalent) killed += " (equivalent)";
    fmt::print("| {} | {} | {} {} | {} | {} | {} | {} | `{}` |\n", m->id, m->cls, m->scenario, params_text(*m),
               ts::to_string(m->memory) + (m->faults ? " faults " + ts::faults_to_string(m->faults) : ""),
               strategy_text(m->strategy), killed, r.killed ? ts::to_string(r.verdict) : "-", r.replay);
    std::fflush(stdout);
    if (r.killed && !r.deterministic) {
      ++nondeterministic;
      notes.push_back(m->id + ": NON-DETERMINISTIC: a re-run of the failing schedule differed");
    }
    if (base && !r.killed && !m->equivalent) {
      const auto was = base->find(m->id);
      if (was && *was > 0 && *was <= a.schedules) {
        ++regressions;
        notes.push_back(m->id + ": REGRESSION: killed at schedule " + std::to_string(*was) +
                        " in the baseline, survived " + std::to_string(a.schedules) + " schedules now");
      }
    }
    if (base && r.killed) {
      const auto was = base->find(m->id);
      if (!was) notes.push_back(m->id + ": not in the baseline (killed at " + std::to_string(r.schedules) + ")");
      else if (*was == 0) notes.push_back(m->id + ": killed now (" + std::to_string(r.schedules) + "), survived in the baseline");
    }
    results.push_back(std::move(r));
  }

  // summary over the counted (non-equivalent) mutants
  std::uint64_t counted = 0, killed = 0, gpu = 0, gpu_killed = 0, deep = 0, weak_mo = 0, weak_mo_killed = 0;
  std::set<std::string> classes;
  std::vector<std::uint64_t> to_kill;
  for (const auto& r : results) {
    const auto& m = *r.m;
    if (m.equivalent) continue;
    ++counted;
    classes.insert(m.cls);
    if (m.gpu_specific) ++gpu;
    if (m.depth >= 3) ++deep;
    if (m.cls == "memory-order" || m.cls == "scope") ++weak_mo;
    if (!r.killed) continue;
    ++killed;
    to_kill.push_back(r.schedules);
    if (m.gpu_specific) ++gpu_killed;
    if (m.cls == "memory-order" || m.cls == "scope") ++weak_mo_killed;
  }
  std::sort(to_kill.begin(), to_kill.end());
  const double median = to_kill.empty() ? 0.0
                        : to_kill.size() % 2 ? double(to_kill[to_kill.size() / 2])
                                             : (to_kill[to_kill.size() / 2 - 1] + to_kill[to_kill.size() / 2]) / 2.0;
  fmt::print("\n{} of {} mutants killed within {} schedules ({:.1f}%; {} equivalent mutants not counted); median schedules "
             "to the first failure {:.1f}\n",
             killed, counted, a.schedules, counted ? 100.0 * killed / counted : 0.0, results.size() - counted, median);
  fmt::print("{} classes; {} GPU-specific mutants ({} killed); memory-order and scope: {} of {} killed; {} need 3+ "
             "preemptions\n",
             classes.size(), gpu, gpu_killed, weak_mo_killed, weak_mo, deep);
  for (const auto& n : notes) fmt::print("  {}\n", n);
  if (!base) fmt::print("  (no baseline compared: {} not found)\n", base_path);

  if (!a.json.empty()) {
    nlohmann::ordered_json j;
    j["format"] = "toga-sim mutants results 1";
    j["schedules"] = a.schedules;
    j["killed"] = killed;
    j["counted"] = counted;
    j["median_schedules_to_kill"] = median;
    auto& arr = j["mutants"] = nlohmann::ordered_json::array();
    for (const auto& r : results) {
      nlohmann::ordered_json x;
      x["id"] = r.m->id;
      x["class"] = r.m->cls;
      x["gpu_specific"] = r.m->gpu_specific;
      x["scenario"] = r.m->scenario;
      x["params"] = params_text(*r.m);
      x["memory"] = ts::to_string(r.m->memory);
      x["faults"] = ts::faults_to_string(r.m->faults);
      x["strategy"] = strategy_text(r.m->strategy);
      x["depth"] = r.m->depth;
      x["equivalent"] = r.m->equivalent;
      x["killed"] = r.killed;
      x["schedules"] = r.schedules;
      x["verdict"] = r.killed ? ts::to_string(r.verdict) : "survived";
      x["message"] = r.message;
      x["replay"] = r.replay;
      x["deterministic"] = r.deterministic;
      x["preemptions"] = r.preemptions;
      if (r.shrunk_preemptions) x["shrunk_preemptions"] = *r.shrunk_preemptions;
      x["seconds"] = r.seconds;
      x["note"] = r.m->note;
      arr.push_back(x);
    }
    std::ofstream f(a.json);
    if (!f) throw std::runtime_error("cannot write '" + a.json + "'");
    f << j.dump(1) << "\n";
  }
  if (!a.write_baseline.empty()) {
    ts::save_mutant_baseline(a.write_baseline, a.schedules, results);
    fmt::print("baseline written: {}\n", a.write_baseline);
  }
  return regressions || nondeterministic ? 1 : 0;
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
  ts::install_crash_reporter();
  if (argc > 0) ts::set_program_name(argv[0]);  // replay lines name the binary as it was started
  CLI::App app{"toga-sim: the toga fiber simulator (schedules of simulated GPU lanes)"};
  app.require_subcommand(1);
  bool list_keys = false, list_bugs = false;
  auto* ls = app.add_subcommand("list", "name the built-in scenarios");
  ls->add_flag("--keys", list_keys, "also name each scenario's parameters and ranges");
  ls->add_flag("--bugs", list_bugs, "name the allocator scenarios' planted bugs (--set bug=N) instead");

  common_args ea;
  explore_args xa;
  auto* ex = app.add_subcommand("explore", "run many schedules of a scenario");
  ea.scenario_option = ex->add_option("--scenario", ea.scenario, "scenario name (toga-sim list)")->required();
  ex->add_option("--schedules", xa.schedules, "number of schedules (of the whole run when --shard is given)")->check(whole_number)->capture_default_str();
  ex->add_option("--threads", xa.threads, "worker threads (0: all cores)")->check(whole_number);
  ex->add_option("--seconds", xa.seconds, "start no schedule after this many seconds (0: no limit); then the first N schedules that all "
                                          "ended are counted and reported");
  ex->add_flag("--keep-going", xa.keep_going, "do not stop at the first failure (the first 10 failures are reported)");
  ex->add_option("--save-failure", xa.save, "write the first failure's decisions to FILE");
  ex->add_flag("--shrink", xa.shrink, "shrink the first failure before saving it");
  ex->add_option("--shapes", xa.shapes, "fixed: the --set values and the defaults; random: every schedule draws the parameters "
                                       "--set does not give (toga-sim list --keys names the ranges); replay lines carry the shape")
      ->capture_default_str();
  ex->add_option("--shard", xa.shard, "I/N: run only shard I (0 .. N-1) of the --schedules schedules (contiguous; merge the --json "
                                     "reports with toga-sim merge)");
  ex->add_option("--json", xa.json, "write the summary and the failures' replay lines to FILE (what merge reads)");
  add_common(ex, ea);

  common_args ca;
  explore_args cx;
  std::uint64_t cov_list = 30;
  auto* cv = app.add_subcommand("coverage", "explore a scenario and report which pairs of the core's Platform operations on one "
                                            "location ran in both orders (docs/simulator.md §19); exit 1 if a schedule failed");
  ca.scenario_option = cv->add_option("--scenario", ca.scenario, "scenario name (toga-sim list)")->required();
  cv->add_option("--schedules", cx.schedules, "number of schedules")->check(whole_number)->capture_default_str();
  cv->add_option("--threads", cx.threads, "worker threads (0: all cores)")->check(whole_number);
  cv->add_option("--shapes", cx.shapes, "fixed or random (explore --shapes)")->capture_default_str();
  cv->add_option("--list", cov_list, "print at most N pairs that ran in one order only (0: none)")->check(whole_number)->capture_default_str();
  cv->add_option("--json", cx.json, "write the figures and every one-order pair to FILE");
  add_common(cv, ca);

  std::vector<std::string> merge_files;
  std::string merge_json;
  auto* mg = app.add_subcommand("merge", "combine the --json reports of one run's shards into one report; exit 1 on a failure "
                                         "or a missing shard");
  mg->add_option("files", merge_files, "the shards' reports")->required();
  mg->add_option("--json", merge_json, "write the merged report to FILE");

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
  dm->add_option("--schedules", demo_schedules, "schedules per exploration")->check(whole_number)->capture_default_str();
  dm->add_option("--threads", demo_threads, "worker threads (0: all cores)")->check(whole_number);

  std::string litmus_memory = "weak";
  unsigned litmus_bound = 6;
  std::uint64_t litmus_schedules = 200'000;
  auto* lt = app.add_subcommand("litmus", "run every litmus test of the memory model exhaustively; print the table");
  lt->add_option("--memory", litmus_memory, "memory model: weak or sc")->capture_default_str();
  lt->add_option("--bound", litmus_bound, "deviations from the default policy (scheduling and read choices)")->check(whole_number)->capture_default_str();
  lt->add_option("--schedules", litmus_schedules, "at most this many schedules per configuration")->check(whole_number)->capture_default_str();

  dpor_args da;
  auto* dp = app.add_subcommand("dpor", "explore every execution of a small scenario (at most 8 lanes) up to equivalence, with "
                                        "dynamic partial-order reduction (docs/simulator.md section 20); exit 1 on a failure");
  dp->add_option("--scenario", da.scenario, "scenario name (toga-sim list)")->required();
  dp->add_option("--set", da.sets, "scenario parameter name=value (repeatable)");
  dp->add_option("--memory", da.memory, "memory model: sc or weak")->capture_default_str();
  dp->add_option("--fair-after", da.fair_after, "scheduling points before the fair tail (0: scenario default)");
  dp->add_option("--max-steps", da.max_steps, "scheduling points before a livelock verdict (0: scenario default)");
  dp->add_option("--faults", da.faults, "fault sites: only none (dpor does not reorder fault stalls)")->capture_default_str();
  dp->add_option("--step-bound", da.step_bound, "choices at or past this step are not enumerated (the run is then "
                                                "incomplete; 0: --fair-after)");
  dp->add_option("--schedules", da.schedules, "stop (incomplete) after this many runs")->check(whole_number)->capture_default_str();
  dp->add_option("--seconds", da.seconds, "stop (incomplete) after this many seconds (0: no limit)");
  dp->add_flag("--no-reduction", da.no_reduction, "every runnable lane at every choice: the unreduced count");
  dp->add_flag("--compare", da.compare, "then run the unreduced enumeration too and print the reduction");
  dp->add_flag("--keep-going", da.keep_going, "do not stop at the first failure");
  dp->add_option("--plain", da.plain, "plain (non-atomic) shared state: auto (declared for a scenario that declares it, "
                                       "writers otherwise), declared (the scenario's declared ghost words and invariant reads), "
                                       "all (a step that may write it is dependent with every step: sound for any scenario), "
                                       "writers (such steps are dependent with each other) or none (ignored); "
                                       "docs/simulator.md section 20")->capture_default_str();
  dp->add_flag("--coarse-warps", da.coarse_warps, "warp intrinsics dependent with every step (the rule before per-warp "
                                                  "dependence; for comparison)");
  dp->add_flag("--all-reads", da.all_reads, "under --memory weak, every store a load may read is a branch, also one "
                                            "that an older store of the same value subsumes (the count before "
                                            "2026-12-01; for comparison)");
  dp->add_flag("--no-invariant-forms", da.no_forms, "every invariant as one of form `any`: the steps that write what it "
                                                  "reads stay in one order, also for the sum equalities and word bounds a "
                                                  "scenario declares (for comparison; docs/simulator.md section 20.1)");
  dp->add_option("--save-failure", da.save, "write the first failure's decisions to FILE (toga-sim replay --decisions FILE)");

  mutants_args ma;
  auto* mu = app.add_subcommand("mutants", "run the mutant suite: every planted bug, schedules to its first failure, "
                                           "regressions against the baseline");
  add_mutants(mu, ma);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);
    return rc == 0 ? 0 : 2;
  }
  try {
    if (app.got_subcommand("list")) return cmd_list(list_keys, list_bugs);
    if (app.got_subcommand(ex)) return cmd_explore(ea, xa);
    if (app.got_subcommand(mg)) return cmd_merge(merge_files, merge_json);
    if (app.got_subcommand(cv)) return cmd_coverage(ca, cx, cov_list);
    if (app.got_subcommand(rp)) return cmd_replay(ra, decisions, rsave, rshrink, rtrace);
    if (app.got_subcommand(dm)) return cmd_demo(demo_schedules, demo_threads);
    if (app.got_subcommand(dp)) return cmd_dpor(da);
    if (app.got_subcommand(lt)) return cmd_litmus(litmus_memory, litmus_bound, litmus_schedules);
    if (app.got_subcommand(mu)) return cmd_mutants(ma);
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
