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

struct scenario {
  std::string name;
  std::string summary;
  expectation expected = expectation::pass;
  //! Machine shape for these parameters.
  std::function<launch_config(const params&)> shape;
  //! Builds the schedule's state; may register invariants on the world.
  std::function<std::unique_ptr<instance>(world&, const params&)> make;
  run_limits limits{};
};

//! The catalogue (built-in scenarios register themselves here; tests may add their own).
std::vector<scenario>& catalogue();
//! Looks a scenario up by name; nullptr if unknown.
const scenario* find_scenario(const std::string& name);
//! Adds a scenario to the catalogue (replacing one of the same name).
void add_scenario(scenario s);
//! Registers the built-in scenarios once (idempotent).
void register_builtin_scenarios();

}  // namespace toga::sim
