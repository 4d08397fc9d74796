// Random shapes and shards (docs/simulator.md §18): every drawn shape is valid, within its
// declared ranges and a function of the seed alone; shards partition a run and report what one
// run reports; every passing scenario passes its random shapes (CI budget below, soak 10x).
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <set>

#include "sim_test_support.hpp"
#include "toga/sim/runner.hpp"
#include "toga/sim/scenario.hpp"

namespace ts = toga::sim;
using toga::test::failure_text;
using toga::test::schedules;

namespace {

// Whether `v` is a value key `k` can take in a random shape: its fallback (not drawn, or drawn
// "off"), one of its choices, or within its drawing range.
bool drawable(const ts::param_spec& k, std::int64_t v) {
  if (v == k.fallback) return true;
  if (!k.draw_choices.empty()) return std::find(k.draw_choices.begin(), k.draw_choices.end(), v) != k.draw_choices.end();
  return k.drawn() && v >= k.draw_min && v <= k.draw_max;
}

}  // namespace

TEST(RandomShapes, DrawsAreDeterministicValidAndWithinTheirRanges) {
  ts::register_builtin_scenarios();
  unsigned scenarios = 0;
  for (const auto& sc : ts::catalogue()) {
    if (!ts::has_drawn_keys(sc)) continue;
    ++scenarios;
    std::map<std::string, std::set<std::int64_t>> seen;
    for (std::uint64_t seed = 1; seed <= 200; ++seed) {
      const ts::params p = ts::draw_shape(sc, {}, seed);
      EXPECT_EQ(p.values(), ts::draw_shape(sc, {}, seed).values()) << sc.name << " seed " << seed << ": not deterministic";
      EXPECT_NO_THROW(ts::validate_params(sc, p)) << sc.name << " seed " << seed;
      if (sc.shape_limit) EXPECT_FALSE(sc.shape_limit(p)) << sc.name << " seed " << seed << ": " << *sc.shape_limit(p);
      for (const auto& [name, v] : p.values()) {
        const auto it = std::find_if(sc.keys->begin(), sc.keys->end(), [&](const ts::param_spec& k) { return k.name == name; });
        ASSERT_NE(it, sc.keys->end()) << sc.name << ": drew an undeclared key " << name;
        EXPECT_TRUE(drawable(*it, v)) << sc.name << " seed " << seed << ": " << name << "=" << v << " is outside its drawing range";
      }
      for (const auto& k : *sc.keys) seen[k.name].insert(p.get(k.name, k.fallback));
    }
    // every drawn key takes more than one value over 200 shapes (the draws do vary the shape)
    for (const auto& k : *sc.keys)
      if (k.drawn()) EXPECT_GT(seen[k.name].size(), 1u) << sc.name << ": " << k.name << " never varied in 200 shapes";
  }
  EXPECT_GE(scenarios, 20u) << "the built-in scenarios with random shapes";
}

TEST(RandomShapes, FixedParametersStayAndImpossibleOnesAreRefused) {
  const ts::scenario* sc = ts::find_scenario("alloc-storm");
  ASSERT_NE(sc, nullptr);
  ts::params fixed;
  fixed.set("sms", 3);
  fixed.set("pins", 4);
  fixed.set("bug", 0);
  // 200 seeds: about 50 of them draw alloc-storm's contention focus, whose sms and pins --set overrides
  for (std::uint64_t seed = 1; seed <= 200; ++seed) {
    const ts::params p = ts::draw_shape(*sc, fixed, seed);
    EXPECT_EQ(p.get("sms", -1), 3);
    EXPECT_EQ(p.get("pins", -1), 4);
    EXPECT_EQ(p.get("bug", -1), 0);
  }
  // 16 B blocks exhausting a 64 MiB heap: more blocks than any drawn schedule may walk
  const ts::scenario* ex = ts::find_scenario("exhaust-recover");
  ASSERT_NE(ex, nullptr);
  ts::params heavy;
  heavy.set("size", 16);
  heavy.set("heap_kib", 65536);
  EXPECT_THROW((void)ts::draw_shape(*ex, heavy, 1), std::invalid_argument);
}

// The contention focus (scenario::focus, simulator.md §18.1): about one shape in four takes every
// focus key from the focus's values (unless --set fixes it); the other shapes are exactly those
// the scenario draws without a focus.
TEST(RandomShapes, TheFocusDrawsOneShapeInFourAndLeavesTheOthersAlone) {
  const ts::scenario* sc = ts::find_scenario("alloc-storm");
  ASSERT_NE(sc, nullptr);
  ASSERT_FALSE(sc->focus.empty());
  ts::scenario plain = *sc;
  plain.focus.clear();
  const auto in_focus = [&](const ts::params& p) {
    for (const auto& [name, values] : sc->focus)
      if (std::find(values.begin(), values.end(), p.get(name, -12345)) == values.end()) return false;
    return true;
  };
  ts::params fixed;
  fixed.set("bug", 0);
  unsigned focused = 0, same = 0;
  const unsigned n = 2000;
  for (std::uint64_t seed = 1; seed <= n; ++seed) {
    const ts::params p = ts::draw_shape(*sc, fixed, seed);
    if (p.values() == ts::draw_shape(plain, fixed, seed).values()) {
      ++same;
    } else {
      ++focused;
      EXPECT_TRUE(in_focus(p)) << "seed " << seed << ": a shape that differs from the unfocused draw must be a focused one";
      EXPECT_EQ(p.get("sms", -1), 1);
    }
  }
  EXPECT_GT(focused, n / 4 - n / 10) << focused << " focused shapes of " << n;
  EXPECT_LT(focused, n / 4 + n / 10) << focused << " focused shapes of " << n;
  EXPECT_EQ(focused + same, n);
  // (--set wins over the focus: FixedParametersStayAndImpossibleOnesAreRefused)
}

TEST(Sharding, ShardRangesPartitionTheRun) {
  for (std::uint64_t total : {1ull, 7ull, 1000ull, 1'000'003ull, ~0ull / 3})
    for (std::uint64_t shards : {1ull, 2ull, 3ull, 7ull}) {
      if (shards > total) continue;
      std::uint64_t next = 0, lo = ~0ull, hi = 0;
      for (std::uint64_t i = 0; i < shards; ++i) {
        const auto [first, count] = ts::shard_range(total, i, shards);
        EXPECT_EQ(first, next) << total << " / " << shards << " shard " << i;
        next = first + count;
        lo = std::min(lo, count);
        hi = std::max(hi, count);
      }
      EXPECT_EQ(next, total) << total << " / " << shards;
      EXPECT_LE(hi - lo, 1u) << total << " / " << shards;
    }
  EXPECT_THROW(ts::shard_range(10, 0, 0), std::invalid_argument);
  EXPECT_THROW(ts::shard_range(10, 3, 3), std::invalid_argument);
  EXPECT_THROW(ts::shard_range(2, 0, 3), std::invalid_argument);
}

// Three shards of a keep-going run of lost-update with random shapes report the verdict counts
// and failing schedules (same seeds, shapes and strategies) of one run.
TEST(Sharding, ShardsReportWhatOneRunReports) {
  const ts::scenario* sc = ts::find_scenario("lost-update");
  ASSERT_NE(sc, nullptr);
  ts::explore_options o;
  o.strategy.kind = ts::strategy_kind::portfolio;
  o.schedules = 90;
  o.threads = 2;
  o.stop_on_failure = false;
  o.random_shapes = true;
  o.max_failures = 100;
  const ts::explore_summary whole = ts::explore(*sc, o);
  ASSERT_GT(whole.failures_found, 0u);
  ASSERT_LT(whole.failures_found, 90u) << "some drawn shapes (one lane) cannot lose an update";
  std::uint64_t counts[ts::verdict_kind_count] = {};
  std::vector<std::pair<std::uint64_t, std::string>> failures;
  for (std::uint64_t i = 0; i < 3; ++i) {
    ts::explore_options s = o;
    std::tie(s.first_index, s.schedules) = ts::shard_range(90, i, 3);
    const ts::explore_summary part = ts::explore(*sc, s);
    EXPECT_EQ(part.schedules, s.schedules);
    for (unsigned k = 0; k < ts::verdict_kind_count; ++k) counts[k] += part.counts[k];
    for (const auto& f : part.failures) {
      EXPECT_GE(f.index, s.first_index);
      EXPECT_TRUE(f.deterministic) << f.replay_command;
      failures.emplace_back(f.index, f.replay_command);
    }
  }
  for (unsigned k = 0; k < ts::verdict_kind_count; ++k) EXPECT_EQ(counts[k], whole.counts[k]) << ts::to_string(static_cast<ts::verdict_kind>(k));
  ASSERT_EQ(failures.size(), whole.failures.size());
  for (std::size_t n = 0; n < failures.size(); ++n) {
    EXPECT_EQ(failures[n].first, whole.failures[n].index);
    EXPECT_EQ(failures[n].second, whole.failures[n].replay_command);
  }
}

// A time limit (explore_options::seconds) counts the first schedules that all ended, and what it
// counts is what a run of just that many schedules reports.
TEST(TimeLimit, CountsTheFirstSchedulesThatEndedAndReportsThemAsARunOfThatMany) {
  const ts::scenario* sc = ts::find_scenario("alloc-storm");
  ASSERT_NE(sc, nullptr);
  ts::explore_options o;
  o.strategy.kind = ts::strategy_kind::portfolio;
  o.schedules = 1'000'000;  // far more than 0.3 s holds (about 3,000 schedules/s a thread)
  o.threads = 2;
  o.random_shapes = true;
  o.seconds = 0.3;
  const auto t0 = std::chrono::steady_clock::now();
  const ts::explore_summary cut = ts::explore(*sc, o);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_TRUE(cut.time_limited);
  EXPECT_GT(cut.schedules, 0u);
  EXPECT_LT(cut.schedules, o.schedules);
  EXPECT_LT(s, 30.0) << "the run went on long past its limit";
  ts::explore_options whole = o;
  whole.seconds = 0;
  whole.schedules = cut.schedules;
  const ts::explore_summary same = ts::explore(*sc, whole);
  EXPECT_FALSE(same.time_limited);
  EXPECT_EQ(same.schedules, cut.schedules);
  EXPECT_EQ(same.total_steps, cut.total_steps);
  for (unsigned k = 0; k < ts::verdict_kind_count; ++k) EXPECT_EQ(same.counts[k], cut.counts[k]) << ts::to_string(static_cast<ts::verdict_kind>(k));
  ts::explore_options bad = o;
  bad.seconds = -1;
  EXPECT_THROW(ts::explore(*sc, bad), std::invalid_argument);
}

// Every scenario that must pass passes random shapes: the allocator's and the primitives'. The
// budget is per scenario (CI / soak); a failure prints its replay line, which names the shape.
TEST(RandomShapes, EveryPassingScenarioPassesItsRandomShapes) {
  ts::register_builtin_scenarios();
  for (const auto& sc : ts::catalogue()) {
    if (sc.expected != ts::expectation::pass || !ts::has_drawn_keys(sc)) continue;
    const bool heavy = sc.name == "exhaust-grow-recover";
    const bool heap = sc.keys && std::any_of(sc.keys->begin(), sc.keys->end(), [](const ts::param_spec& k) { return k.name == "heap_kib"; });
    ts::explore_options o;
    o.strategy.kind = ts::strategy_kind::portfolio;
    o.schedules = heavy ? schedules(60, 600) : heap ? schedules(300, 3'000) : schedules(2'000, 20'000);
    o.random_shapes = true;
    o.seed = 1;
    const ts::explore_summary s = ts::explore(sc, o);
    EXPECT_FALSE(s.first_failure) << sc.name << " with random shapes: " << failure_text(s);
  }
}

// The guided strategy (coverage-guided stalls, docs/simulator.md §19): its targets come from a
// pre-pass of the scenario's default shape alone, so a failing schedule replays by its seed with
// the same trace (the explorer's re-run) and the replay verb recomputes them; it kills planted
// bug 40 (a failure read late) in mixed-sizes with random shapes within 10,000 schedules (194
// guided against 1,984 plain stall on 2026-11-28; 5,384 guided against 3,918 stall since the free
// hint's load and stores moved the schedules, 2026-11-30).
TEST(GuidedStalls, TargetsAreDeterministicAndAFailureReplaysBySeed) {
  ts::register_builtin_scenarios();
  const ts::scenario* sc = ts::find_scenario("mixed-sizes");
  ASSERT_NE(sc, nullptr);
  const auto a = ts::guided_targets(*sc, sc->limits), b = ts::guided_targets(*sc, sc->limits);
  ASSERT_TRUE(a && b);
  EXPECT_EQ(*a, *b) << "the pre-pass is deterministic";
  EXPECT_FALSE(a->empty()) << "mixed-sizes' default shape leaves race pairs in one order";
  for (const std::string& t : *a) EXPECT_NE(t.find("core/include/toga/"), std::string::npos) << t;
  ts::explore_options o;
  o.strategy.kind = ts::strategy_kind::guided;
  o.schedules = 10'000;
  o.random_shapes = true;
  o.seed = 1;
  o.scenario_params.set("bug", 40);
  const ts::explore_summary s = ts::explore(*sc, o);
  ASSERT_TRUE(s.first_failure) << "planted bug 40 survived 10,000 guided random-shape schedules";
  EXPECT_TRUE(s.first_failure->deterministic) << s.first_failure->replay_command;
  EXPECT_NE(s.first_failure->replay_command.find("--strategy guided"), std::string::npos) << s.first_failure->replay_command;
  std::printf("guided: bug 40 killed at schedule %llu of mixed-sizes (random shapes); %zu target sites\n",
              static_cast<unsigned long long>(s.first_failure->index + 1), a->size());
}
