// Coverage of the core's races (docs/simulator.md §19): the recorder's ordered pairs and
// adjacency, the platform's sites, and figures that do not depend on the thread count.
#include <gtest/gtest.h>

#include <source_location>

#include "toga/sim/coverage.hpp"
#include "toga/sim/runner.hpp"
#include "toga/sim/scenario.hpp"

namespace ts = toga::sim;

namespace {
std::source_location site_a() { return std::source_location::current(); }
std::source_location site_b() { return std::source_location::current(); }
std::source_location site_c() { return std::source_location::current(); }

ts::coverage_recorder::pair_count count(const ts::coverage_recorder& r, const std::source_location& x, const std::source_location& y) {
  const auto it = r.pairs().find(ts::coverage_pair{{x.file_name(), x.line()}, {y.file_name(), y.line()}});
  return it == r.pairs().end() ? ts::coverage_recorder::pair_count{} : it->second;
}
}  // namespace

TEST(Coverage, RecorderCountsOrderedPairsWithAWriteAndAdjacency) {
  ts::coverage_recorder r;
  int x = 0, y = 0;
  r.begin_schedule();
  r.access(&x, true, site_a(), 0);   // lane 0 writes x at A
  r.access(&x, false, site_b(), 1);  // lane 1 reads x at B right after: A then B, adjacent
  EXPECT_EQ(count(r, site_a(), site_b()).seen, 1u);
  EXPECT_EQ(count(r, site_a(), site_b()).adjacent, 1u);
  r.access(&y, false, site_c(), 0);  // lane 0 moves on
  r.access(&x, false, site_b(), 1);  // A then B again, but lane 0 has run since: not adjacent
  EXPECT_EQ(count(r, site_a(), site_b()).seen, 2u);
  EXPECT_EQ(count(r, site_a(), site_b()).adjacent, 1u);
  r.access(&y, false, site_b(), 1);  // two reads: no pair
  EXPECT_EQ(count(r, site_c(), site_b()).seen, 0u);
  EXPECT_EQ(count(r, site_b(), site_a()).seen, 0u);  // the other order has not run
  r.begin_schedule();                 // a new schedule forgets the locations
  r.access(&x, true, site_b(), 1);
  EXPECT_EQ(count(r, site_a(), site_b()).seen, 2u);
  r.access(&x, true, site_a(), 0);  // now B then A
  EXPECT_EQ(count(r, site_b(), site_a()).seen, 1u);
  ts::coverage_recorder other;
  other.merge(r);
  other.merge(r);
  EXPECT_EQ(count(other, site_a(), site_b()).seen, 4u);
}

// lost-update's load and store (sim/src/scenarios.cpp) meet in both orders in a few schedules:
// the platform reports every atomic with its call site.
TEST(Coverage, PlatformReportsTheCallSitesOfEveryAtomic) {
  const ts::scenario* sc = ts::find_scenario("lost-update");
  ASSERT_NE(sc, nullptr);
  ts::explore_options o;
  o.schedules = 50;
  o.stop_on_failure = false;
  o.coverage = true;
  const ts::explore_summary s = ts::explore(*sc, o);
  ASSERT_TRUE(s.coverage);
  unsigned scenario_pairs = 0, reversed = 0;
  for (const auto& [p, c] : s.coverage->pairs()) {
    if (ts::site_name(p.first).find("sim/src/scenarios.cpp") != 0 || ts::site_name(p.second).find("sim/src/scenarios.cpp") != 0) continue;
    ++scenario_pairs;
    if (!(p.first == p.second) && s.coverage->pairs().count(ts::coverage_pair{p.second, p.first})) ++reversed;
  }
  EXPECT_GE(scenario_pairs, 3u) << "load then store, store then load, store then store";
  EXPECT_GE(reversed, 2u) << "the load/store pair in both orders";
}

// alloc-storm's core sites: many pairs, some in both orders, and the same figures with one
// thread as with two (every schedule runs; the counts are sums).
TEST(Coverage, AllocStormFiguresDoNotDependOnTheThreads) {
  const ts::scenario* sc = ts::find_scenario("alloc-storm");
  ASSERT_NE(sc, nullptr);
  ts::coverage_summary sums[2];
  for (unsigned t : {1u, 2u}) {
    ts::explore_options o;
    o.strategy.kind = ts::strategy_kind::portfolio;
    o.schedules = 120;
    o.threads = t;
    o.stop_on_failure = false;
    o.coverage = true;
    o.random_shapes = true;
    const ts::explore_summary s = ts::explore(*sc, o);
    ASSERT_FALSE(s.first_failure);
    sums[t - 1] = ts::summarize(*s.coverage);
  }
  EXPECT_GE(sums[0].core_sites, 30u);
  EXPECT_GE(sums[0].unordered_pairs, 30u);
  EXPECT_GT(sums[0].both_orders, 0u);
  EXPECT_LE(sums[0].both_orders, sums[0].unordered_pairs);
  EXPECT_EQ(sums[0].core_sites, sums[1].core_sites);
  EXPECT_EQ(sums[0].unordered_pairs, sums[1].unordered_pairs);
  EXPECT_EQ(sums[0].both_orders, sums[1].both_orders);
  EXPECT_EQ(sums[0].adjacent_both, sums[1].adjacent_both);
  ASSERT_EQ(sums[0].one_order.size(), sums[1].one_order.size());
  for (std::size_t i = 0; i < sums[0].one_order.size(); ++i) EXPECT_EQ(sums[0].one_order[i].second, sums[1].one_order[i].second);
}
