//! @file toga/sim/scenario.hpp
//! Scenarios: a named kernel plus the machine shape it runs on and its invariants.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "toga/sim/types.hpp"

namespace toga::sim {

class world;

//! Integer parameters of a scenario (`--set name=value` on the command line).
class params {
 public:
  std::int64_t get(const std::string& name, std::int64_t fallback) const {
    auto it = values_.find(name);
    return it == values_.end() ? fallback : it->second;
  }
  void set(const std::string& name, std::int64_t v) { values_[name] = v; }
  const std::map<std::string, std::int64_t>& values() const { return values_; }
  //! Parses "name=value"; false (and a message) on a malformed item.
  bool parse(const std::string& item, std::string& error);

 private:
  std::map<std::string, std::int64_t> values_;
};

//! The state of one schedule of a scenario: built fresh for every schedule.
class instance {
 public:
  virtual ~instance() = default;
  //! The kernel: runs once in every lane, with toga::sim::platform as its Platform.
  virtual void lane() = 0;
  //! Checked after all lanes exited (quiescence); a message means failure.
  virtual std::optional<std::string> check_final() { return std::nullopt; }
  //! Figures of this schedule (after check_final), e.g. utilisation; printed by replay.
  virtual std::vector<std::pair<std::string, double>> metrics() const { return {}; }
};

//! What a scenario is expected to do (used by `toga-sim demo` and the tests).
enum class expectation : std::uint8_t { pass, fails };

//! One parameter a scenario reads: its name, the inclusive range it accepts, the value used
//! when it is not given, and a few words of help. Declared keys make `--set` strict.
struct param_spec {
  std::string name;
  std::int64_t min = 0;
  std::int64_t max = 0;
  std::int64_t fallback = 0;
  std::string help;
};

struct scenario {
  std::string name;
  std::string summary;
  expectation expected = expectation::pass;
  //! Machine shape for these parameters.
  std::function<launch_config(const params&)> shape;
  //! Builds the schedule's state; may register invariants on the world.
  std::function<std::unique_ptr<instance>(world&, const params&)> make;
  run_limits limits{};
  //! The parameters it reads. nullopt: not declared (any parameter is accepted unchecked; for
  //! scenarios built in tests). An empty list: the scenario takes no parameters. Every built-in
  //! scenario declares its keys.
  std::optional<std::vector<param_spec>> keys{};
  //! Constraints between parameters that ranges cannot say (e.g. readers < lanes): a message
  //! when `p` is invalid. Optional; called by validate_params after the range checks.
  std::function<std::optional<std::string>(const params&)> check{};
};

//! A planted bug of the allocator scenarios, selected by their parameter bug=N (the core's
//! toga::ualloc_bug / toga::tbuddy_bug value that the scenario instantiates).
struct planted_bug {
  int number;        //!< the value of bug=N
  const char* area;  //!< the mechanism it breaks ("fast path", "superbins", ...)
  const char* what;  //!< what the planted code does wrong
};
//! Every planted bug of the allocator scenarios, by number (1..43); `toga-sim list --bugs`.
const std::vector<planted_bug>& allocator_planted_bugs();

//! Checks `p` against `sc.keys` (when declared): every name must be a declared key and every
//! value within its range. Throws std::invalid_argument naming the scenario, the offending
//! parameter, and the valid keys with their ranges.
void validate_params(const scenario& sc, const params& p);
//! `s` with its keys declared (for building catalogue entries in one expression).
scenario with_keys(scenario s, std::vector<param_spec> keys);
//! "name=fallback [min..max]" for every declared key, comma-separated ("none" when the list is
//! empty, "undeclared" when it is nullopt).
std::string describe_keys(const scenario& sc);

//! The catalogue (built-in scenarios register themselves here; tests may add their own).
std::vector<scenario>& catalogue();
//! Looks a scenario up by name; nullptr if unknown.
const scenario* find_scenario(const std::string& name);
//! Adds a scenario to the catalogue (replacing one of the same name).
void add_scenario(scenario s);
//! Registers the built-in scenarios once (idempotent).
void register_builtin_scenarios();

}  // namespace toga::sim
