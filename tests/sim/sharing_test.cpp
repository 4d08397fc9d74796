// One heap used by two devices (issue 32; the `two-devices` scenario, sim/src/scenarios_sharing.cpp):
// the heap at system scope (toga::system_scoped) passes its schedules under sequential
// consistency and weak memory, fixed and random shapes; the heap at device scope (the planted bug:
// a one-device heap shared by two devices) is a scoped-race verdict, printed with its replay
// command. Label sim (soak: 10^5 random shapes of each memory model).
#include <gtest/gtest.h>

#include <cstdio>

#include "sim_test_support.hpp"
#include "toga/sim/runner.hpp"
#include "toga/sim/scenario.hpp"

namespace ts = toga::sim;
using toga::test::failure_text;
using toga::test::schedules;

namespace {

ts::explore_summary explore_two_devices(std::int64_t bug, std::uint64_t n, bool weak, bool random) {
  ts::register_builtin_scenarios();
  const ts::scenario* sc = ts::find_scenario("two-devices");
  EXPECT_NE(sc, nullptr);
  ts::explore_options o;
  o.strategy.kind = ts::strategy_kind::portfolio;
  o.schedules = n;
  o.threads = 1;
  o.random_shapes = random;
  o.scenario_params.set("bug", bug);
  ts::run_limits l = sc->limits;
  if (weak) l.memory = ts::memory_model::weak;
  o.limits = l;
  const auto s = ts::explore(*sc, o);
  std::printf("[ two-devices bug=%lld %s %s ] %llu schedules: %.0f schedules/s\n", static_cast<long long>(bug), weak ? "weak" : "sc  ",
              random ? "random" : "fixed ", static_cast<unsigned long long>(s.schedules), s.schedules_per_second());
  return s;
}

void passes(bool weak) {
  const auto f = explore_two_devices(0, 10'000, weak, false);
  EXPECT_FALSE(f.first_failure) << (weak ? "weak" : "sc") << " fixed shape: " << failure_text(f);
  const auto r = explore_two_devices(0, schedules(5'000, 100'000), weak, true);
  EXPECT_FALSE(r.first_failure) << (weak ? "weak" : "sc") << " random shapes: " << failure_text(r);
}

}  // namespace

TEST(TwoDevices, SystemScopedHeapPassesItsSchedulesUnderSequentialConsistency) { passes(false); }
TEST(TwoDevices, SystemScopedHeapPassesItsSchedulesUnderWeakMemory) { passes(true); }

TEST(TwoDevices, DeviceScopedHeapIsAScopedRace) {
  for (const bool weak : {false, true})
    for (const bool random : {false, true}) {
      const auto s = explore_two_devices(1, 10'000, weak, random);
      ASSERT_TRUE(s.first_failure) << "planted bug two-devices.device_scope survived 10,000 schedules";
      EXPECT_EQ(s.first_failure->result.kind, ts::verdict_kind::cuda_rule);
      EXPECT_NE(s.first_failure->result.message.find("a device-scope atomic is atomic only within its device"), std::string::npos)
          << s.first_failure->result.message;
      std::printf("[ mutant   ] two-devices.device_scope (%s, %s shapes): killed at schedule %llu\n  replay: %s\n", weak ? "weak" : "sc",
                  random ? "random" : "fixed", static_cast<unsigned long long>(s.first_failure->index),
                  s.first_failure->replay_command.c_str());
      EXPECT_TRUE(s.first_failure->deterministic);
    }
}
