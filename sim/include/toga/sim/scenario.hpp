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

//! How a random shape draws a parameter (draw_shape): uniformly in [draw_min, draw_max]; a power
//! of two in that range (the exponent uniform; 0 too when in range); or near_pow2, a power of two
//! that one draw in four moves off by up to a quarter (sizes just above and below a class or
//! routing boundary, partial warps).
enum class draw_kind : std::uint8_t { uniform, pow2, near_pow2 };

//! One parameter a scenario reads: its name, the inclusive range it accepts, the value used
//! when it is not given, and a few words of help. Declared keys make `--set` strict.
//! The draw_* fields say how a random shape (`toga-sim explore --shapes random`) draws it: from
//! [draw_min, draw_max] (draw_max < draw_min: never drawn, the fallback stays); with draw_off,
//! half the draws keep the fallback (a feature that is off by default stays off half the time).
//! The drawing range is a subset of [min, max] chosen to keep one schedule short.
struct param_spec {
  std::string name;
  std::int64_t min = 0;
  std::int64_t max = 0;
  std::int64_t fallback = 0;
  std::string help;
  std::int64_t draw_min = 0;
  std::int64_t draw_max = -1;
  draw_kind draw = draw_kind::uniform;
  bool draw_off = false;
  std::vector<std::int64_t> draw_choices{};  //!< non-empty: one of these instead of the range
  bool drawn() const { return !draw_choices.empty() || draw_max >= draw_min; }
};
//! `s` with a drawing range (for catalogue entries).
param_spec drawn(param_spec s, std::int64_t lo, std::int64_t hi, draw_kind k = draw_kind::uniform, bool off = false);
//! `s` drawn from a list of values (for catalogue entries).
param_spec drawn_from(param_spec s, std::vector<std::int64_t> choices, bool off = false);

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
  //! Random shapes only: a message when a drawn shape is valid but too costly to explore (e.g.
  //! more blocks than a schedule should walk); draw_shape draws again. Optional.
  std::function<std::optional<std::string>(const params&)> shape_limit{};
  //! Random shapes only: the scenario's contention focus (docs/simulator.md §18.1). For one shape
  //! in four (decided from the shape's seed on a stream of its own), each of these keys that
  //! `--set` does not fix takes one of its values instead of its usual draw: a shape that crowds
  //! many lanes onto one object (one SM's arena, one size class, one pin slot), where the windows
  //! of a lock-free list open most often. Empty: no focus.
  std::vector<std::pair<std::string, std::vector<std::int64_t>>> focus{};
  //! Its plain (non-atomic) shared state is fully declared (toga/sim/plain.hpp): every plain
  //! word a lane reads and another writes, or an invariant reads, is reported, and every
  //! invariant declares what it reads. `toga-sim dpor` then uses `--plain declared` by default
  //! (docs/simulator.md §20.1); otherwise `--plain writers`.
  bool plain_declared = false;
};

//! A planted bug of the allocator scenarios, selected by their parameter bug=N (the core's
//! toga::ualloc_bug / toga::tbuddy_bug value that the scenario instantiates).
struct planted_bug {
  int number;        //!< the value of bug=N
  const char* area;  //!< the mechanism it breaks ("fast path", "superbins", ...)
  const char* what;  //!< what the planted code does wrong
};
//! Every planted bug of the allocator scenarios, by number (1..51); `toga-sim list --bugs`.
const std::vector<planted_bug>& allocator_planted_bugs();

//! Checks `p` against `sc.keys` (when declared): every name must be a declared key and every
//! value within its range. Throws std::invalid_argument naming the scenario, the offending
//! parameter, and the valid keys with their ranges.
void validate_params(const scenario& sc, const params& p);
//! `s` with its keys declared (for building catalogue entries in one expression).
scenario with_keys(scenario s, std::vector<param_spec> keys);
//! `s` marked as declaring its plain state (scenario::plain_declared).
inline scenario plain_declared(scenario s) {
  s.plain_declared = true;
  return s;
}
//! "name=fallback [min..max]" for every declared key, comma-separated ("none" when the list is
//! empty, "undeclared" when it is nullopt).
std::string describe_keys(const scenario& sc);

//! The catalogue (built-in scenarios register themselves here; tests may add their own).
std::vector<scenario>& catalogue();
//! Random shapes (docs/simulator.md §18): the parameters of schedule `seed` of a random-shape
//! exploration. Every drawn key (param_spec::drawn) that `fixed` does not name is drawn from a
//! generator seeded by `seed` alone; keys `fixed` names keep their values. A draw that fails
//! validate_params or the scenario's shape_limit is drawn again (at most 256 times). The result
//! names every drawn value explicitly, so that replaying it needs no drawing. Deterministic: the
//! same scenario, `fixed` and seed give the same shape on every machine. Throws
//! std::invalid_argument when no draw fits (the fixed parameters exclude every drawn shape).
params draw_shape(const scenario& sc, const params& fixed, std::uint64_t seed);
//! Whether `sc` declares any drawn key (random shapes change nothing otherwise).
bool has_drawn_keys(const scenario& sc);
//! "name in [lo..hi]" (pow2: "name in 2^k [lo..hi] +-"), ", "-separated; "none" without drawn keys.
std::string describe_draws(const scenario& sc);

//! Looks a scenario up by name; nullptr if unknown.
const scenario* find_scenario(const std::string& name);
//! Adds a scenario to the catalogue (replacing one of the same name).
void add_scenario(scenario s);
//! Registers the built-in scenarios once (idempotent).
void register_builtin_scenarios();

}  // namespace toga::sim
