// Tenants inside one heap (issue 31; toga/tenants.hpp): the `tenants` scenario passes its
// schedules under sequential consistency and weak memory, fixed and random shapes; each planted
// bug of the tenant layer dies and prints its replay command. Label sim (soak: 10^5 schedules of
// each memory model).
#include <gtest/gtest.h>

#include <cstdio>

#include "sim_test_support.hpp"
#include "toga/sim/runner.hpp"
#include "toga/sim/scenario.hpp"

namespace ts = toga::sim;
using toga::test::failure_text;
using toga::test::schedules;

namespace {

ts::explore_summary explore_tenants(std::vector<std::pair<const char*, std::int64_t>> params, std::uint64_t n, bool weak, bool random) {
  ts::register_builtin_scenarios();
  const ts::scenario* sc = ts::find_scenario("tenants");
  EXPECT_NE(sc, nullptr);
  ts::explore_options o;
  o.strategy.kind = ts::strategy_kind::portfolio;
  o.schedules = n;
  o.threads = 1;
  o.random_shapes = random;
  for (const auto& [k, v] : params) o.scenario_params.set(k, v);
  ts::run_limits l = sc->limits;
  if (weak) l.memory = ts::memory_model::weak;
  o.limits = l;
  const auto s = ts::explore(*sc, o);
  std::printf("[ tenants %s %s ] %llu schedules: %.0f schedules/s\n", weak ? "weak" : "sc  ", random ? "random" : "fixed ",
              static_cast<unsigned long long>(s.schedules), s.schedules_per_second());
  return s;
}

}  // namespace

// 10^5 schedules of the default shape under each memory model (issue 31's CI target), and random
// shapes (soak: 10^5 of those too).
static void passes_both(bool weak) {
  const auto f = explore_tenants({}, 100'000, weak, false);
  EXPECT_FALSE(f.first_failure) << (weak ? "weak" : "sc") << " fixed shape: " << failure_text(f);
  const auto r = explore_tenants({}, schedules(5'000, 100'000), weak, true);
  EXPECT_FALSE(r.first_failure) << (weak ? "weak" : "sc") << " random shapes: " << failure_text(r);
}

TEST(Tenants, ScenarioPassesItsSchedulesUnderSequentialConsistency) { passes_both(false); }
TEST(Tenants, ScenarioPassesItsSchedulesUnderWeakMemory) {
  passes_both(true);
  // a quota changed between launches while blocks are live: lowered below the live blocks, then raised
  for (const std::int64_t q : {0, 5}) {
    const auto s = explore_tenants({{"requota", q}, {"quota0", 2}}, schedules(5'000, 50'000), false, false);
    EXPECT_FALSE(s.first_failure) << "requota=" << q << ": " << failure_text(s);
  }
}

TEST(Tenants, PlantedBugsDieWithTheirReplayCommand) {
  const char* names[] = {"", "free_credits_caller", "quota_checked_before_charge", "charge_kept_on_heap_failure"};
  for (std::int64_t bug = 1; bug <= 3; ++bug) {
    const auto s = explore_tenants({{"bug", bug}}, 10'000, false, false);
    ASSERT_TRUE(s.first_failure) << "planted bug tenant." << names[bug] << " survived 10,000 schedules";
    std::printf("[ mutant   ] tenant.%s: killed at schedule %llu: %s\n  replay: %s\n", names[bug],
                static_cast<unsigned long long>(s.first_failure->index), s.first_failure->result.message.c_str(),
                s.first_failure->replay_command.c_str());
    EXPECT_TRUE(s.first_failure->deterministic);
  }
}
