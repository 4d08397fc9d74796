// The shared conformance body (tests/conformance/conformance.hpp) in the simulator: many
// schedules, machine shapes with partial warps, per-thread and warp-cooperative allocation.
// The same body runs on the GPU in tests/gpu/conformance_gpu_test.cu.
#include <gtest/gtest.h>

#include <cstdlib>
#include <memory>

#include "conformance.hpp"
#include "toga/heap_walk.hpp"
#include "toga/sim/platform.hpp"
#include "toga/sim/runner.hpp"
#include "toga/sim/world.hpp"

namespace ts = toga::sim;
namespace tc = toga::conformance;

namespace {

struct conformance_inst final : ts::instance {
  using A = toga::allocator<ts::platform>;
  toga::heap_layout layout;
  char* heap;
  std::vector<std::uint64_t> meta;
  A a;
  std::vector<std::uint64_t> block, out;
  std::vector<std::uint32_t> round, acked;
  tc::state s{};
  conformance_inst(ts::world& w, const ts::params& p) {
    const unsigned lanes = w.config().lanes();
    layout = toga::heap_layout::make<ts::platform>(toga::heap_layout::levels_for(4u << 20), w.config().sms);
    heap = static_cast<char*>(std::aligned_alloc(4096, 4u << 20));
    meta.assign(layout.bytes / 8 + 1, 0);
    a = A::make(heap, reinterpret_cast<char*>(meta.data()), layout);
    a.init_after_zero(0);
    block.assign(lanes, 0);
    round.assign(lanes, 0);
    acked.assign(lanes, 0);
    out.assign(tc::counters, 0);
    s = {block.data(), round.data(), acked.data(), out.data(), lanes,
         static_cast<unsigned>(p.get("rounds", 3)), p.get("coalesced", 0) != 0};
  }
  ~conformance_inst() override { std::free(heap); }
  void lane() override {
    tc::lane_body<ts::platform>(a, s, ts::platform::block_id() * ts::platform::block_dim() + ts::platform::thread_id());
  }
  std::optional<std::string> check_final() override {
    if (out[tc::corrupted]) return std::to_string(out[tc::corrupted]) + " corrupted blocks (overlap)";
    if (out[tc::misaligned]) return std::to_string(out[tc::misaligned]) + " misaligned blocks";
    if (out[tc::null_results]) return std::to_string(out[tc::null_results]) + " nullptr results with a heap that cannot be full";
    if (out[tc::allocations] != std::uint64_t{s.lanes} * s.rounds) return "allocation count";
    if (auto e = toga::check_quiescent(a)) return *e;
    if (toga::collect_statistics(a).used_bytes != 0) return "bytes still in use";
    return std::nullopt;
  }
};

const ts::scenario& conformance_scenario() {
  static const ts::scenario sc = [] {
    ts::scenario s;
    s.name = "conformance";
    s.summary = "the shared conformance body (tests/conformance): paired lanes allocate, fill, verify and free "
                "each other's blocks; params warps threads sms rounds coalesced";
    s.shape = [](const ts::params& p) {
      return ts::launch_config{static_cast<unsigned>(p.get("sms", 2)), static_cast<unsigned>(p.get("warps", 2)),
                               static_cast<unsigned>(p.get("threads", 4))};
    };
    s.make = [](ts::world& w, const ts::params& p) { return std::make_unique<conformance_inst>(w, p); };
    s.limits = {50'000, 2'000'000};
    ts::add_scenario(s);
    return s;
  }();
  return sc;
}

}  // namespace

TEST(Conformance, SharedBodyPassesInTheSimulator) {
  const auto& sc = conformance_scenario();
  struct run {
    std::int64_t sms, warps, threads, coalesced;
  };
  for (const run& r : {run{2, 2, 4, 0}, run{2, 2, 4, 1}, run{1, 1, 8, 1}, run{2, 3, 3, 0}, run{3, 2, 5, 1}}) {
    ts::explore_options o;
    o.strategy.kind = ts::strategy_kind::portfolio;
    o.schedules = 3'000;
    o.scenario_params.set("sms", r.sms);
    o.scenario_params.set("warps", r.warps);
    o.scenario_params.set("threads", r.threads);
    o.scenario_params.set("coalesced", r.coalesced);
    const auto s = ts::explore(sc, o);
    EXPECT_FALSE(s.first_failure) << r.sms << " SMs x " << r.warps << " x " << r.threads << (r.coalesced ? " coalesced" : "")
                                  << ": " << (s.first_failure ? s.first_failure->result.message + "\n  replay: " + s.first_failure->replay_command : "");
  }
}
