// Tests that prove the simulator finds what it must find, passes what is correct, follows
// CUDA's warp rules, never hangs, and replays exactly. Every failure message names the seed and
// the replay command.
#include <gtest/gtest.h>

#include <bit>
#include <cstdio>
#include <filesystem>
#include <set>
#include <stdexcept>

#include "toga/sim/platform.hpp"
#include "toga/sim/runner.hpp"
#include "toga/sim/scenario.hpp"
#include "toga/sim/world.hpp"

namespace ts = toga::sim;
using P = ts::platform;

namespace {

const ts::scenario& builtin(const std::string& name) {
  const ts::scenario* s = ts::find_scenario(name);
  if (!s) throw std::runtime_error("no scenario " + name);
  return *s;
}

ts::explore_summary run(const ts::scenario& sc, ts::strategy_kind k, std::uint64_t schedules,
                        unsigned threads = 0, std::uint64_t seed = 1, unsigned depth = 3) {
  ts::explore_options o;
  o.strategy.kind = k;
  o.strategy.pct_depth = depth;
  o.schedules = schedules;
  o.seed = seed;
  o.threads = threads;
  return ts::explore(sc, o);
}

std::string describe(const ts::explore_summary& s) {
  if (!s.first_failure) return "no failure in " + std::to_string(s.schedules) + " schedules";
  const auto& f = *s.first_failure;
  return std::string(ts::to_string(f.result.kind)) + " at schedule " + std::to_string(f.index) + " (seed " +
         std::to_string(f.seed) + "): " + f.result.message + "\n  replay: " + f.replay_command;
}

// A scenario defined by a lambda kernel (and optional final check) over a given shape.
template <class State>
ts::scenario lambda_scenario(std::string name, ts::launch_config shape, ts::run_limits limits = {}) {
  ts::scenario s;
  s.name = std::move(name);
  s.shape = [shape](const ts::params&) { return shape; };
  s.make = [](ts::world& w, const ts::params&) { return std::make_unique<State>(w); };
  s.limits = limits;
  return s;
}

}  // namespace

// ---- planted bugs are found; correct code passes ------------------------------------------------

TEST(Simulator, LostUpdateIsFoundByRandomAndPct) {
  for (auto k : {ts::strategy_kind::random, ts::strategy_kind::pct}) {
    const auto s = run(builtin("lost-update"), k, 10'000);
    ASSERT_TRUE(s.first_failure) << ts::to_string(k) << ": " << describe(s);
    EXPECT_EQ(s.first_failure->result.kind, ts::verdict_kind::invariant);
    EXPECT_TRUE(s.first_failure->deterministic);
    std::printf("[ lost-update ] %-6s schedules to first failure: %llu\n", ts::to_string(k),
                static_cast<unsigned long long>(s.first_failure->index + 1));
  }
}

TEST(Simulator, CounterPasses100kSchedules) {
  for (auto k : {ts::strategy_kind::random, ts::strategy_kind::pct}) {
    const auto s = run(builtin("counter"), k, 100'000);
    EXPECT_FALSE(s.first_failure) << describe(s);
    EXPECT_EQ(s.counts[static_cast<unsigned>(ts::verdict_kind::pass)], 100'000u);
    std::printf("[ counter 4x50 ] %-6s %.0f schedules/s\n", ts::to_string(k), s.schedules_per_second());
  }
}

TEST(Simulator, AbaNeedingTwoPreemptionsIsFoundByPct) {
  const auto& sc = builtin("aba-stack");
  const auto s = run(sc, ts::strategy_kind::pct, 10'000, 0, 1, 3);
  ASSERT_TRUE(s.first_failure) << describe(s);
  std::printf("[ aba-stack ] pct d=3 schedules to first failure: %llu\n",
              static_cast<unsigned long long>(s.first_failure->index + 1));
  // It really needs two preemptions: every schedule with one deviation from the default policy
  // passes, and the search with two finds it.
  ts::explore_options o;
  o.strategy.kind = ts::strategy_kind::exhaustive;
  o.strategy.bound = 1;
  o.schedules = 100'000;
  const auto one = ts::explore(sc, o);
  EXPECT_TRUE(one.exhausted);
  EXPECT_FALSE(one.first_failure) << describe(one);
  o.strategy.bound = 2;
  const auto two = ts::explore(sc, o);
  ASSERT_TRUE(two.first_failure) << describe(two);
  EXPECT_GE(two.first_failure->result.preemptions, 2u);
}

TEST(Simulator, ShrinkingReachesTheMinimalPreemptionCount) {
  const auto& sc = builtin("aba-stack");
  const auto s = run(sc, ts::strategy_kind::random, 10'000);
  ASSERT_TRUE(s.first_failure) << describe(s);
  const auto rep = ts::shrink(sc, {}, sc.limits, s.first_failure->result);
  EXPECT_EQ(rep.shrunk.kind, s.first_failure->result.kind);
  EXPECT_EQ(rep.shrunk.preemptions, 2u) << "from " << rep.original.preemptions;
  // The shrunk decision list replays to the same failure.
  ts::replay_strategy again(rep.shrunk.decisions);
  const auto r = ts::run_one(sc, {}, again, 0, sc.limits);
  EXPECT_EQ(r.kind, rep.shrunk.kind);
  EXPECT_EQ(r.trace_hash, rep.shrunk.trace_hash);

  const auto& lu = builtin("lost-update");
  const auto l = run(lu, ts::strategy_kind::random, 100);
  ASSERT_TRUE(l.first_failure);
  const auto lr = ts::shrink(lu, {}, lu.limits, l.first_failure->result);
  EXPECT_EQ(lr.shrunk.preemptions, 1u) << "from " << lr.original.preemptions;
}

TEST(Simulator, OppositeOrderSpinLocksEndAsLivelockNotAHang) {
  const auto& sc = builtin("lock-order");
  const auto s = run(sc, ts::strategy_kind::random, 10'000);
  ASSERT_TRUE(s.first_failure) << describe(s);
  const auto k = s.first_failure->result.kind;
  EXPECT_TRUE(k == ts::verdict_kind::livelock || k == ts::verdict_kind::deadlock) << describe(s);
  EXPECT_LE(s.first_failure->result.steps, sc.limits.max_steps + 1);
  const auto p = run(sc, ts::strategy_kind::pct, 10'000);
  ASSERT_TRUE(p.first_failure) << describe(p);
}

TEST(Simulator, WarpTicketDispenserPassesOnManyShapes) {
  const auto& sc = builtin("warp-ticket");
  for (auto [warps, threads, sms] : {std::tuple{1, 32, 1}, std::tuple{4, 32, 1}, std::tuple{3, 20, 2}, std::tuple{2, 7, 2}}) {
    ts::explore_options o;
    o.strategy.kind = ts::strategy_kind::portfolio;
    o.schedules = 1'500;
    o.scenario_params.set("warps", warps);
    o.scenario_params.set("threads", threads);
    o.scenario_params.set("sms", sms);
    const auto s = ts::explore(sc, o);
    EXPECT_FALSE(s.first_failure) << warps << "x" << threads << ": " << describe(s);
  }
}

// ---- warp intrinsics follow CUDA ----------------------------------------------------------------

namespace {
// Even lanes call every intrinsic with the even mask; the results are compared with CUDA's
// documented semantics.
struct partial_mask_state final : ts::instance {
  explicit partial_mask_state(ts::world&) {}
  std::uint32_t ballot[32]{}, shfl32[32]{}, match[32]{}, lt[32]{}, ored[32]{};
  std::uint64_t shfl64[32]{};
  void lane() override {
    const unsigned l = P::lane_id();
    lt[l] = P::lanemask_lt();
    if (l % 2) return;  // odd lanes exit at once
    const std::uint32_t m = 0x55555555u;
    ballot[l] = P::ballot(m, l % 4 == 0);
    shfl32[l] = P::shfl(m, 1000u + l, static_cast<int>((l + 2) % 32));
    shfl64[l] = P::shfl(m, (std::uint64_t{l} << 40) | 7u, 4);
    match[l] = P::match_any(m, static_cast<std::uint32_t>(l % 3));
    ored[l] = P::reduce_or(m, 1u << (l / 2));
    P::syncwarp(m);
  }
  std::optional<std::string> check_final() override {
    for (unsigned l = 0; l < 32; ++l) {
      if (lt[l] != (1u << l) - 1u) return "lanemask_lt of lane " + std::to_string(l);
      if (l % 2) continue;
      if (ballot[l] != 0x11111111u) return "ballot of lane " + std::to_string(l) + " = " + std::to_string(ballot[l]);
      if (shfl32[l] != 1000u + (l + 2) % 32) return "shfl32 of lane " + std::to_string(l);
      if (shfl64[l] != ((std::uint64_t{4} << 40) | 7u)) return "shfl64 of lane " + std::to_string(l);
      std::uint32_t want = 0;
      for (unsigned j = 0; j < 32; j += 2)
        if (j % 3 == l % 3) want |= 1u << j;
      if (match[l] != want) return "match_any of lane " + std::to_string(l);
      if (ored[l] != 0xffffu) return "reduce_or of lane " + std::to_string(l) + " = " + std::to_string(ored[l]);
    }
    return std::nullopt;
  }
};

// Lanes 16..31 exit at once; lanes 0..15 sync and vote on their own half. In a partial warp (20
// threads) every lane takes part and the full mask works: the lanes the warp lacks are not
// waited for. (Lanes that exit while named in a pending mask are a CUDA-rule verdict: below.)
struct exited_lanes_state final : ts::instance {
  explicit exited_lanes_state(ts::world& w) : partial(w.config().threads_per_block < 32) {}
  bool partial;
  std::uint32_t vote[32]{};
  void lane() override {
    const unsigned l = P::lane_id();
    if (!partial && l >= 16) return;
    const std::uint32_t mask = partial ? 0xffffffffu : 0xffffu;
    P::syncwarp(mask);
    vote[l] = P::ballot(mask, true);
  }
  std::optional<std::string> check_final() override {
    const std::uint32_t want = partial ? 0xfffffu : 0xffffu;
    for (unsigned l = 0; l < (partial ? 20u : 16u); ++l)
      if (vote[l] != want) return "lane " + std::to_string(l) + " vote " + std::to_string(vote[l]);
    return std::nullopt;
  }
};

// activemask groups: with many seeds both singletons and larger groups must occur, and the
// group always contains the caller.
struct activemask_state final : ts::instance {
  explicit activemask_state(ts::world&) {}
  std::uint32_t got[32]{};
  void lane() override {
    const std::uint32_t m = P::activemask();
    if (!(m & (1u << P::lane_id()))) P::violated("activemask lacks the caller");
    got[P::lane_id()] = P::match_any(m, 1u);
  }
};
}  // namespace

TEST(Simulator, WarpIntrinsicsOverPartialMasksGiveCudaResults) {
  auto sc = lambda_scenario<partial_mask_state>("t-partial-mask", {1, 1, 32});
  const auto s = run(sc, ts::strategy_kind::portfolio, 3'000);
  EXPECT_FALSE(s.first_failure) << describe(s);
  for (unsigned threads : {32u, 20u}) {
    auto sc2 = lambda_scenario<exited_lanes_state>("t-exited", {1, 1, threads});
    const auto s2 = run(sc2, ts::strategy_kind::random, 3'000);
    EXPECT_FALSE(s2.first_failure) << threads << " threads: " << describe(s2);
  }
}

TEST(Simulator, ActivemaskGroupingIsAScheduleChoice) {
  std::set<unsigned> sizes;
  auto sc = lambda_scenario<activemask_state>("t-activemask", {1, 1, 8});
  for (std::uint64_t seed = 1; seed <= 300; ++seed) {
    ts::random_strategy rs;
    ts::world w(sc.shape({}), rs, sc.limits);
    rs.begin(seed, 8);
    activemask_state st(w);
    const auto r = w.run([&] { st.lane(); });
    ASSERT_FALSE(r.failed()) << "seed " << seed << ": " << r.message;
    for (unsigned l = 0; l < 8; ++l) sizes.insert(static_cast<unsigned>(std::popcount(st.got[l])));
  }
  EXPECT_TRUE(sizes.count(1)) << "no singleton group in 300 seeds";
  EXPECT_GE(*sizes.rbegin(), 3u) << "no group of 3+ lanes in 300 seeds";
}

TEST(Simulator, MaskRuleViolationsAreReported) {
  for (const char* name : {"warp-mask", "warp-mismatch"}) {
    const auto s = run(builtin(name), ts::strategy_kind::random, 100);
    ASSERT_TRUE(s.first_failure) << name;
    EXPECT_EQ(s.first_failure->result.kind, ts::verdict_kind::cuda_rule) << describe(s);
  }
}

namespace {
struct throwing_state final : ts::instance {
  explicit throwing_state(ts::world&) {}
  std::uint32_t x = 0;
  void lane() override {
    P::fetch_add(&x, 1u, toga::relaxed, toga::device_scope);
    if (P::lane_id() == 2) throw std::runtime_error("boom");
  }
};
struct failing_state final : ts::instance {
  explicit failing_state(ts::world&) {}
  std::uint32_t x = 0;
  void lane() override {
    const auto old = P::fetch_add(&x, 1u, toga::relaxed, toga::device_scope);
    TOGA_REQUIRE(P, old < 3, "x must stay below 3");
  }
};
// An invariant checked at every step catches a transient state that the end state hides.
struct transient_state final : ts::instance {
  std::uint32_t x = 0;
  explicit transient_state(ts::world& w) {
    w.add_invariant("x <= 1", [this]() -> std::optional<std::string> {
      if (x > 1) return "x is " + std::to_string(x);
      return std::nullopt;
    });
  }
  void lane() override {
    P::fetch_add(&x, 1u, toga::relaxed, toga::device_scope);
    P::fetch_sub(&x, 1u, toga::relaxed, toga::device_scope);
  }
};
// The same transient, with the invariant watching x (checked after writes to x only), watching
// a word nobody writes (checked at quiescence only: the transient is missed, the planted mistake
// of watching the wrong memory), and at every point; `checks` counts the evaluations.
struct watched_state final : ts::instance {
  std::uint32_t x = 0, y = 0;
  std::uint64_t checks = 0;
  watched_state(ts::world& w, int mode) {
    auto fn = [this]() -> std::optional<std::string> {
      ++checks;
      if (x > 1) return "x is " + std::to_string(x);
      return std::nullopt;
    };
    if (mode == 0) w.add_invariant("x <= 1", fn, {{&x, &x + 1}});
    else if (mode == 1) w.add_invariant("x <= 1", fn, {{&y, &y + 1}});
    else w.add_invariant("x <= 1", fn);
  }
  void lane() override {
    (void)P::load(&y, toga::relaxed, toga::device_scope);
    P::fetch_add(&x, 1u, toga::relaxed, toga::device_scope);
    (void)P::load(&y, toga::relaxed, toga::device_scope);
    P::fetch_sub(&x, 1u, toga::relaxed, toga::device_scope);
  }
};
template <int Mode>
struct watched_mode final : ts::instance {
  explicit watched_mode(ts::world& w) : s(w, Mode) {}
  watched_state s;
  void lane() override { s.lane(); }
};
}  // namespace

TEST(Simulator, WatchedInvariantsFailAtTheSameStepAndRunOnlyAfterTheirWrites) {
  // every seed: the watched invariant and the per-point one fail in the same schedules, at the
  // same step, with the same message; watching the wrong word misses the transient
  auto every = lambda_scenario<watched_mode<2>>("t-watch-every", {1, 1, 3});
  auto watch = lambda_scenario<watched_mode<0>>("t-watch-x", {1, 1, 3});
  auto wrong = lambda_scenario<watched_mode<1>>("t-watch-y", {1, 1, 3});
  const auto a = run(every, ts::strategy_kind::random, 300);
  const auto b = run(watch, ts::strategy_kind::random, 300);
  const auto c = run(wrong, ts::strategy_kind::random, 300);
  ASSERT_TRUE(a.first_failure);
  ASSERT_TRUE(b.first_failure);
  EXPECT_EQ(a.first_failure->index, b.first_failure->index);
  EXPECT_EQ(a.first_failure->result.message, b.first_failure->result.message);
  EXPECT_EQ(a.first_failure->result.steps, b.first_failure->result.steps);
  EXPECT_FALSE(c.first_failure) << "an invariant watching a word nobody writes runs at quiescence only";
}

TEST(Simulator, ExceptionsAssertionsAndInvariantsBecomeVerdicts) {
  auto t = lambda_scenario<throwing_state>("t-throw", {1, 1, 4});
  auto s = run(t, ts::strategy_kind::random, 10);
  ASSERT_TRUE(s.first_failure);
  EXPECT_EQ(s.first_failure->result.kind, ts::verdict_kind::crash);
  EXPECT_NE(s.first_failure->result.message.find("boom"), std::string::npos);

  auto f = lambda_scenario<failing_state>("t-fail", {1, 1, 4});
  s = run(f, ts::strategy_kind::random, 10);
  ASSERT_TRUE(s.first_failure);
  EXPECT_EQ(s.first_failure->result.kind, ts::verdict_kind::crash);
  EXPECT_NE(s.first_failure->result.message.find("x must stay below 3"), std::string::npos);

  auto i = lambda_scenario<transient_state>("t-transient", {1, 1, 3});
  s = run(i, ts::strategy_kind::random, 1000);
  ASSERT_TRUE(s.first_failure) << "the transient x == 2 must be seen";
  EXPECT_EQ(s.first_failure->result.kind, ts::verdict_kind::invariant);
  EXPECT_NE(s.first_failure->result.message.find("x <= 1"), std::string::npos);
}

TEST(Simulator, LaunchBeyondResidentThreadsPerSmIsRefused) {
  auto sc = lambda_scenario<transient_state>("t-too-big", {1, 3, 1024});
  const auto s = run(sc, ts::strategy_kind::random, 1);
  ASSERT_TRUE(s.first_failure);
  EXPECT_EQ(s.first_failure->result.kind, ts::verdict_kind::cuda_rule);
  EXPECT_NE(s.first_failure->result.message.find("2048"), std::string::npos);
}

// ---- determinism and replay ---------------------------------------------------------------------

TEST(Simulator, SameSeedSameTraceAcrossRunsAndThreadCounts) {
  for (const char* name : {"lost-update", "aba-stack", "warp-ticket"}) {
    const auto& sc = builtin(name);
    for (auto k : {ts::strategy_kind::random, ts::strategy_kind::pct}) {
      const auto a = run(sc, k, 400, 1, 7);
      const auto b = run(sc, k, 400, 2, 7);
      const auto c = run(sc, k, 400, 4, 7);
      for (const auto* x : {&b, &c}) {
        EXPECT_EQ(a.schedules, x->schedules) << name;
        for (unsigned v = 0; v < ts::verdict_kind_count; ++v) EXPECT_EQ(a.counts[v], x->counts[v]) << name;
        EXPECT_EQ(a.total_steps, x->total_steps) << name;
        ASSERT_EQ(a.first_failure.has_value(), x->first_failure.has_value()) << name;
        if (a.first_failure) {
          EXPECT_EQ(a.first_failure->index, x->first_failure->index) << name;
          EXPECT_EQ(a.first_failure->result.trace_hash, x->first_failure->result.trace_hash) << name;
        }
      }
      // One schedule twice: same hash.
      auto s1 = ts::make_strategy({k, 3, a.pct_steps, 2, {}}, 0);
      auto s2 = ts::make_strategy({k, 3, a.pct_steps, 2, {}}, 0);
      const auto r1 = ts::run_one(sc, {}, *s1, 12345, sc.limits);
      const auto r2 = ts::run_one(sc, {}, *s2, 12345, sc.limits);
      EXPECT_EQ(r1.trace_hash, r2.trace_hash) << name;
      EXPECT_EQ(r1.decisions, r2.decisions) << name;
    }
  }
}

TEST(Simulator, DecisionFilesReplayTheFailure) {
  const auto& sc = builtin("lost-update");
  const auto s = run(sc, ts::strategy_kind::pct, 1000);
  ASSERT_TRUE(s.first_failure);
  const auto path = (std::filesystem::temp_directory_path() / "toga-sim-test-decisions.json").string();
  ts::save_decisions(path, sc, {}, sc.limits, s.first_failure->result);
  const auto d = ts::load_decisions(path);
  EXPECT_EQ(d.scenario, "lost-update");
  ts::replay_strategy rs(d.decisions);
  const auto r = ts::run_one(*ts::find_scenario(d.scenario), d.scenario_params, rs, 0, d.limits);
  EXPECT_EQ(r.kind, s.first_failure->result.kind);
  EXPECT_EQ(r.trace_hash, s.first_failure->result.trace_hash);
  std::filesystem::remove(path);
  EXPECT_THROW(ts::load_decisions(path), std::runtime_error);
}
