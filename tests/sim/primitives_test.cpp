// The core synchronisation primitives in the simulator: the correct versions pass 100,000
// schedules per scenario; every planted bug is caught within 10,000 schedules. The table of
// schedules-to-first-failure (random and PCT) is printed.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <vector>

#include "toga/rcu.hpp"
#include "toga/sim/platform.hpp"
#include "sim_test_support.hpp"
#include "toga/sim/runner.hpp"
#include "toga/sim/scenario.hpp"
#include "toga/sim/world.hpp"

namespace ts = toga::sim;

namespace {

struct setting {
  const char* scenario;
  std::vector<std::pair<const char*, std::int64_t>> params;
  const char* what;
};

ts::explore_summary explore(const setting& s, ts::strategy_kind k, std::uint64_t schedules, unsigned depth = 3,
                            std::int64_t bug = 0) {
  const ts::scenario* sc = ts::find_scenario(s.scenario);
  if (!sc) throw std::runtime_error(std::string("no scenario ") + s.scenario);
  ts::explore_options o;
  o.strategy.kind = k;
  o.strategy.pct_depth = depth;
  o.schedules = schedules;
  for (auto& [n, v] : s.params) o.scenario_params.set(n, v);
  if (bug) o.scenario_params.set("bug", bug);
  return ts::explore(*sc, o);
}

using toga::test::failure_text;

}  // namespace

TEST(Primitives, CorrectVersionsPass100kSchedules) {
  const std::vector<setting> correct = {
      {"semaphore", {}, "bulk semaphore, producers/consumers"},
      {"semaphore", {{"capacity", 1}, {"keep", 1}}, "bulk semaphore, out of memory reaches every waiter"},
      {"semaphore", {{"lanes", 6}, {"batch", 2}, {"capacity", 2}}, "bulk semaphore, partial out of memory"},
      {"semaphore-collective", {}, "collective waits over partial warps"},
      {"collective-mutex", {}, "collective mutex across warps"},
      {"pop-k", {}, "collective pop-k"},
      {"pop-k", {{"nodes", 5}}, "pop-k with too few elements"},
      {"rcu", {}, "RCU readers and retiring writers"},
      {"rcu", {{"lanes", 3}, {"readers", 1}, {"passes", 3}}, "RCU, one reader, two writers"},
  };
  for (const auto& s : correct) {
    const auto r = explore(s, ts::strategy_kind::portfolio, 100'000);
    EXPECT_FALSE(r.first_failure) << s.scenario << " (" << s.what << "): " << failure_text(r);
    EXPECT_EQ(r.counts[0], 100'000u) << s.scenario;
    std::printf("[ %-20s ] %-48s 100000 schedules, %.0f schedules/s, %.0f steps/schedule\n", s.scenario, s.what,
                r.schedules_per_second(), double(r.total_steps) / r.schedules);
  }
}

TEST(Primitives, PlantedBugsAreCaughtWithin10kSchedules) {
  struct planted {
    setting s;
    std::int64_t bug;
    unsigned pct_depth;
  };
  const std::vector<planted> bugs = {
      {{"semaphore", {}, "C decremented by fetch_sub and undone (C < 0 briefly)"}, 1, 3},
      {{"semaphore", {{"capacity", 1}, {"keep", 1}}, "waiter ignores R >= C + E"}, 2, 3},
      {{"semaphore", {}, "GROW promises B instead of B - N"}, 3, 3},
      {{"semaphore", {{"capacity", 1}, {"keep", 1}}, "failing producer keeps its promise"}, 4, 3},
      {{"collective-mutex", {}, "members enter before the leader's acquire"}, 1, 3},
      {{"collective-mutex", {}, "lock count 1: first member out frees it"}, 2, 3},
      {{"collective-mutex", {}, "leader frees the lock for all"}, 3, 3},
      {{"pop-k", {}, "pop-k without the read barrier"}, 1, 3},
      {{"pop-k", {}, "pop-k head off by one"}, 2, 3},
      {{"pop-k", {}, "pop-k under a lock-count-1 mutex"}, 3, 3},
      {{"rcu", {{"lanes", 3}, {"readers", 1}, {"passes", 3}}, "reader without the epoch re-check"}, 1, 4},
      {{"rcu", {}, "barrier that does not wait for readers"}, 2, 3},
      {{"rcu", {}, "collect before clearing pending"}, 3, 3},
  };
  std::printf("\nplanted bug                                          | random   | pct (d)\n");
  for (const auto& b : bugs) {
    const auto r = explore(b.s, ts::strategy_kind::random, 10'000, 3, b.bug);
    const auto p = explore(b.s, ts::strategy_kind::pct, 10'000, b.pct_depth, b.bug);
    auto first = [](const ts::explore_summary& x) {
      return x.first_failure ? std::to_string(x.first_failure->index + 1) : std::string("not found");
    };
    std::printf("%-20s %-32s | %-8s | %s (d=%u)\n", b.s.scenario, b.s.what, first(r).c_str(), first(p).c_str(),
                b.pct_depth);
    EXPECT_TRUE(r.first_failure || p.first_failure)
        << b.s.scenario << " bug=" << b.bug << " (" << b.s.what << ") was not caught in 10,000 random or pct schedules";
    for (const auto* x : {&r, &p})
      if (x->first_failure) EXPECT_TRUE(x->first_failure->deterministic) << failure_text(*x);
  }
}

// Delegation actually happens: concurrent writers retire into one domain; some hand their item
// to a pending barrier and return at once, and every item is still reclaimed exactly once.
namespace {
struct delegation_state final : ts::instance {
  toga::rcu_domain<ts::platform> d;
  std::uint64_t link[8] = {};
  unsigned reclaimed[8] = {};
  unsigned delegated = 0;
  void lane() override {
    const std::uint64_t item = 1 + ts::platform::thread_id();
    const auto r = d.retire(item, [this](std::uint64_t i) { return &link[i]; },
                            [this](std::uint64_t i) { ++reclaimed[i]; });
    delegated += r.delegated;
  }
  std::optional<std::string> check_final() override {
    for (unsigned i = 1; i <= 4; ++i)
      if (reclaimed[i] != 1) return "item " + std::to_string(i) + " reclaimed " + std::to_string(reclaimed[i]) + " times";
    return std::nullopt;
  }
};
}  // namespace

TEST(Primitives, RcuDelegationHappensAndEveryCallbackRunsOnce) {
  ts::scenario sc;
  sc.name = "t-delegation";
  sc.shape = [](const ts::params&) { return ts::launch_config{1, 1, 4}; };
  unsigned delegated = 0, schedules_with = 0;
  for (std::uint64_t seed = 1; seed <= 3000; ++seed) {
    ts::random_strategy rs;
    rs.begin(seed, 4);
    ts::world w(sc.shape({}), rs, sc.limits);
    delegation_state st;
    const auto r = w.run([&] { st.lane(); });
    ASSERT_FALSE(r.failed()) << "seed " << seed << ": " << r.message;
    const auto fin = st.check_final();
    ASSERT_FALSE(fin) << "seed " << seed << ": " << *fin;
    delegated += st.delegated;
    schedules_with += st.delegated > 0;
  }
  std::printf("[ rcu delegation ] %u delegated retires in %u of 3000 schedules (4 writers)\n", delegated, schedules_with);
  EXPECT_GT(schedules_with, 0u);
}
