// Device budgets and the allocation registry (issue 31; toga/budget.hpp), without a GPU: the
// size parser (HAMi's forms), the environment (per-device over global, read once, an unparsable
// value an error that changes nothing), budgets below the usage refused, refusals that name the
// budget, the usage and the holders, the report, many host threads at once; and the CPU growable
// heap charged through it (a second heap refused, growth stopped at the budget, records released
// by trims and destructors). The planted bug growth.charge_kept_on_failed_map is in
// growable_cpu_test.cpp's table. Label `unit`.
#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "toga/budget.hpp"
#include "toga/cpu/growable_heap.hpp"

namespace {

using toga::memory_backend;
using toga::memory_ledger;
using toga::memory_tier;
using P = toga::cpu::platform;
constexpr std::uint64_t KiB = 1024, MiB = 1024 * KiB, GiB = 1024 * MiB;

//! An environment of its own for a ledger.
memory_ledger::env_reader env(std::map<std::string, std::string> vars) {
  return [vars = std::move(vars)](const char* n) -> const char* {
    const auto it = vars.find(n);
    return it == vars.end() ? nullptr : it->second.c_str();
  };
}

std::string what_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "(no exception)";
}

bool has(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

}  // namespace

TEST(Budget, ParsesHamiSizes) {
  using toga::parse_memory_size;
  EXPECT_EQ(parse_memory_size("4g", "X"), 4 * GiB);
  EXPECT_EQ(parse_memory_size("4G", "X"), 4 * GiB);
  EXPECT_EQ(parse_memory_size("4GiB", "X"), 4 * GiB);
  EXPECT_EQ(parse_memory_size("4gb", "X"), 4 * GiB);
  EXPECT_EQ(parse_memory_size("512m", "X"), 512 * MiB);
  EXPECT_EQ(parse_memory_size("40960m", "X"), 40 * GiB);
  EXPECT_EQ(parse_memory_size("1024k", "X"), MiB);
  EXPECT_EQ(parse_memory_size("2t", "X"), 2048 * GiB);
  EXPECT_EQ(parse_memory_size(" 1073741824 ", "X"), GiB);
  EXPECT_EQ(parse_memory_size("123b", "X"), 123u);
  EXPECT_EQ(parse_memory_size("0", "X"), 0u);
  EXPECT_EQ(parse_memory_size("8388608t", "X"), std::uint64_t{1} << 63);
  for (const char* bad : {"", "  ", "g", "-1", "+4g", "1.5g", "4x", "4gg", "4 g", "4gibs", "8388609t", "99999999999999999999"}) {
    const std::string m = what_of([&] { (void)parse_memory_size(bad, "TOGA_DEVICE_MEMORY_LIMIT"); });
    EXPECT_TRUE(has(m, "TOGA_DEVICE_MEMORY_LIMIT=\"" + std::string(bad) + "\"")) << bad << ": " << m;
    EXPECT_TRUE(has(m, "e.g. 4g")) << m;
  }
}

TEST(Budget, EnvironmentPerDeviceOverridesTheGlobalOne) {
  memory_ledger l(env({{"TOGA_DEVICE_MEMORY_LIMIT", "4g"}, {"TOGA_DEVICE_MEMORY_LIMIT_1", "512m"}}));
  EXPECT_EQ(l.budget(memory_backend::cuda, 0).budget, 4 * GiB);
  EXPECT_EQ(l.budget(memory_backend::cuda, 0).source, toga::budget_source::environment);
  EXPECT_EQ(l.budget(memory_backend::cuda, 1).budget, 512 * MiB);
  EXPECT_EQ(l.budget(memory_backend::cpu, 0).budget, 0u) << "the CPU backend reads no environment";
  // the API overrides the environment; 0 removes the budget
  l.set_budget(memory_backend::cuda, 1, GiB);
  EXPECT_EQ(l.budget(memory_backend::cuda, 1).budget, GiB);
  EXPECT_EQ(l.budget(memory_backend::cuda, 1).source, toga::budget_source::api);
  l.set_budget(memory_backend::cuda, 1, 0);
  EXPECT_EQ(l.budget(memory_backend::cuda, 1).budget, 0u);
  EXPECT_NE(l.charge(memory_backend::cuda, 1, memory_tier::device, "heap", 100 * GiB, 1, "h"), 0u);
}

TEST(Budget, UnparsableEnvironmentIsAnErrorEveryTimeAndChangesNothing) {
  memory_ledger l(env({{"TOGA_DEVICE_MEMORY_LIMIT_0", "4 gigs"}}));
  for (int i = 0; i < 2; ++i) {
    const std::string m = what_of([&] { (void)l.charge(memory_backend::cuda, 0, memory_tier::device, "heap", MiB, 1, "h"); });
    EXPECT_TRUE(has(m, "TOGA_DEVICE_MEMORY_LIMIT_0=\"4 gigs\"")) << m;
    EXPECT_TRUE(has(m, "set_device_budget")) << m;
  }
  EXPECT_TRUE(l.records().empty());
  EXPECT_EQ(l.report().devices.size(), 0u);
  EXPECT_EQ(l.budget(memory_backend::cuda, 1).budget, 0u) << "other devices are unaffected";
  // the API overrides even a malformed variable
  l.set_budget(memory_backend::cuda, 0, GiB);
  EXPECT_EQ(l.budget(memory_backend::cuda, 0).budget, GiB);
  EXPECT_NE(l.charge(memory_backend::cuda, 0, memory_tier::device, "heap", MiB, 1, "h"), 0u);
}

TEST(Budget, RefusalNamesTheBudgetTheUsageAndTheHolders) {
  memory_ledger l(env({}));
  l.set_budget(memory_backend::cuda, 0, 2 * GiB);
  const std::uint64_t a = l.new_owner(), b = l.new_owner();
  const std::uint64_t r1 = l.charge(memory_backend::cuda, 0, memory_tier::device, "heap", GiB + 4 * KiB, a, "cuda heap #1");
  const std::uint64_t r2 = l.charge(memory_backend::cuda, 0, memory_tier::device, "metadata", 4 * MiB, a, "cuda heap #1");
  ASSERT_NE(r1, 0u);
  ASSERT_NE(r2, 0u);
  std::string why;
  EXPECT_EQ(l.charge(memory_backend::cuda, 0, memory_tier::device, "heap", GiB + 4 * KiB, b, "cuda heap #2", &why), 0u);
  EXPECT_TRUE(has(why, "2147483648 B (2.00 GiB, from set_budget)")) << why;
  EXPECT_TRUE(has(why, std::to_string(GiB + 4 * KiB + 4 * MiB) + " B in use")) << why;
  EXPECT_TRUE(has(why, "asked for the heap of cuda heap #2")) << why;
  EXPECT_TRUE(has(why, "largest holders: cuda heap #1 1.00 GiB")) << why;
  // host-tier records are never refused nor charged
  EXPECT_NE(l.charge(memory_backend::cuda, 0, memory_tier::host, "granule", 8 * GiB, b, "cuda heap #2"), 0u);
  const toga::budget_state s = l.budget(memory_backend::cuda, 0);
  EXPECT_EQ(s.used, GiB + 4 * KiB + 4 * MiB);
  EXPECT_EQ(s.host_bytes, 8 * GiB);
  EXPECT_EQ(s.refusals, 1u);
  // exactly at the budget is allowed, one byte more is not
  const std::uint64_t rest = 2 * GiB - s.used;
  EXPECT_EQ(l.charge(memory_backend::cuda, 0, memory_tier::device, "x", rest + 1, b, "cuda heap #2"), 0u);
  const std::uint64_t r3 = l.charge(memory_backend::cuda, 0, memory_tier::device, "x", rest, b, "cuda heap #2");
  EXPECT_NE(r3, 0u);
  EXPECT_EQ(l.budget(memory_backend::cuda, 0).used, 2 * GiB);
  l.release(r3);
  l.release(r3);  // twice: nothing
  l.release(0);
  EXPECT_EQ(l.budget(memory_backend::cuda, 0).used, s.used);
  EXPECT_EQ(l.budget(memory_backend::cuda, 0).high, 2 * GiB);
}

TEST(Budget, ABudgetBelowTheUsageIsRefusedAndChangesNothing) {
  memory_ledger l(env({{"TOGA_DEVICE_MEMORY_LIMIT", "3g"}}));
  const std::uint64_t o = l.new_owner();
  ASSERT_NE(l.charge(memory_backend::cuda, 0, memory_tier::device, "heap", GiB, o, "cuda heap #1"), 0u);
  const std::string m = what_of([&] { l.set_budget(memory_backend::cuda, 0, GiB - 1); });
  EXPECT_TRUE(has(m, "a budget of 1073741823 B")) << m;
  EXPECT_TRUE(has(m, "choose at least 1073741824 B")) << m;
  EXPECT_TRUE(has(m, "cuda heap #1 1.00 GiB")) << m;
  EXPECT_EQ(l.budget(memory_backend::cuda, 0).budget, 3 * GiB) << "nothing half-applied";
  EXPECT_EQ(l.budget(memory_backend::cuda, 0).source, toga::budget_source::environment);
  l.set_budget(memory_backend::cuda, 0, GiB);  // exactly the usage is allowed
  EXPECT_EQ(l.budget(memory_backend::cuda, 0).budget, GiB);
}

TEST(Budget, ReportListsEveryRecordAndTotalsPerOwner) {
  memory_ledger l(env({}));
  const std::uint64_t a = l.new_owner(), b = l.new_owner();
  int x = 0;
  const std::uint64_t r = l.charge(memory_backend::cuda, 0, memory_tier::device, "heap", 64 * MiB, a, "cuda heap #1");
  l.set_address(r, &x);
  (void)l.charge(memory_backend::cuda, 0, memory_tier::device, "granule", 2 * MiB, b, "cuda heap #2");
  (void)l.charge(memory_backend::cuda, 0, memory_tier::device, "granule", 2 * MiB, b, "cuda heap #2");
  (void)l.charge(memory_backend::cuda, 1, memory_tier::device, "heap", MiB, b, "cuda heap #2");
  const toga::memory_report rep = l.report();
  ASSERT_EQ(rep.records.size(), 4u);
  EXPECT_EQ(rep.records[0].address, reinterpret_cast<std::uintptr_t>(&x));
  EXPECT_EQ(rep.records[0].what, "heap");
  ASSERT_EQ(rep.devices.size(), 2u);
  EXPECT_EQ(rep.devices[0].device, 0);
  ASSERT_EQ(rep.devices[0].owners.size(), 2u);
  EXPECT_EQ(rep.devices[0].owners[0].owner, a) << "largest first";
  EXPECT_EQ(rep.devices[0].owners[1].device_bytes, 4 * MiB);
  EXPECT_EQ(rep.devices[0].owners[1].records, 2u);
  const std::string text = toga::to_string(rep, true);
  EXPECT_TRUE(has(text, "cuda device 0: used 68.00 MiB, no budget")) << text;
  EXPECT_TRUE(has(text, "cuda heap #2: 4.00 MiB device in 2 records")) << text;
  EXPECT_TRUE(has(text, "cuda:1 device heap")) << text;
  l.release_owner(b);
  EXPECT_EQ(l.records().size(), 1u);
  EXPECT_EQ(l.budget(memory_backend::cuda, 1).used, 0u);
}

TEST(Budget, ManyHostThreadsNeverPassTheBudget) {
  memory_ledger l(env({}));
  constexpr std::uint64_t unit = MiB, budget = 100 * unit;
  l.set_budget(memory_backend::cuda, 0, budget);
  std::atomic<std::uint64_t> held{0}, peak{0}, refused{0};
  std::vector<std::thread> ts;
  for (int t = 0; t < 8; ++t)
    ts.emplace_back([&, t] {
      std::vector<std::uint64_t> mine;
      for (int i = 0; i < 2000; ++i) {
        if ((i + t) % 3 != 2) {
          const std::uint64_t id = l.charge(memory_backend::cuda, 0, memory_tier::device, "granule", unit, 1 + t, "t");
          if (id == 0) {
            refused.fetch_add(1);
            continue;
          }
          const std::uint64_t h = held.fetch_add(unit) + unit;
          std::uint64_t p = peak.load();
          while (h > p && !peak.compare_exchange_weak(p, h)) {
          }
          mine.push_back(id);
        } else if (!mine.empty()) {
          held.fetch_sub(unit);
          l.release(mine.back());
          mine.pop_back();
        }
      }
      for (const std::uint64_t id : mine) {
        held.fetch_sub(unit);
        l.release(id);
      }
    });
  for (auto& t : ts) t.join();
  EXPECT_LE(peak.load(), budget);
  EXPECT_GT(refused.load(), 0u) << "the threads reached the budget";
  const toga::budget_state s = l.budget(memory_backend::cuda, 0);
  EXPECT_EQ(s.used, 0u);
  EXPECT_EQ(s.high, budget);
  EXPECT_EQ(s.refusals, refused.load());
  EXPECT_TRUE(l.records().empty());
}

namespace {

toga::growth_options gopts(std::uint64_t max, std::uint64_t granule, std::uint64_t initial = 0) {
  toga::growth_options o;
  o.max_bytes = max;
  o.granule_bytes = granule;
  o.initial_bytes = initial;
  return o;
}

std::uint64_t bytes_of(const memory_ledger& l, std::uint64_t owner, const std::string& what) {
  std::uint64_t n = 0;
  for (const auto& r : l.records())
    if (r.owner == owner && r.what == what) n += r.bytes;
  return n;
}

}  // namespace

TEST(Budget, CpuHeapsAreChargedAndStopAtTheBudget) {
  memory_ledger l(env({}));
  const toga::cpu::cpu_accounting acc{&l, 0};
  // how much one heap's metadata costs: one heap without a budget
  std::uint64_t meta = 0;
  {
    toga::cpu::growable_heap probe(gopts(64 * MiB, MiB), 4, 0, acc);
    meta = l.budget(memory_backend::cpu, 0).used;
    ASSERT_GT(meta, 0u);
  }
  EXPECT_TRUE(l.records().empty()) << "the destructor releases every record";
  // budget: one heap's metadata, 4 MiB initial and 2 MiB more
  l.set_budget(memory_backend::cpu, 0, meta + 6 * MiB);
  toga::cpu::growable_heap h(gopts(64 * MiB, MiB, 4 * MiB), 4, 0, acc);
  const std::uint64_t owner = l.records().front().owner;
  EXPECT_EQ(bytes_of(l, owner, "granule"), 4 * MiB);
  // a second heap does not fit: construction fails and leaves nothing recorded
  const std::string m = what_of([&] { toga::cpu::growable_heap second(gopts(64 * MiB, MiB, 4 * MiB), 4, 0, acc); });
  EXPECT_TRUE(has(m, "the budget of cpu device 0")) << m;
  EXPECT_TRUE(has(m, "largest holders: cpu growable heap #")) << m;
  EXPECT_EQ(l.budget(memory_backend::cpu, 0).used, meta + 4 * MiB);
  // 64 threads x 256 KiB = 16 MiB of demand: growth maps the 2 MiB that fit, then stops
  std::vector<void*> out(64, nullptr);
  std::atomic<unsigned> got{0};
  const auto round = [&] {
    toga::cpu::launch(64, 16, 4, [&] {
      const unsigned i = P::block_id() * P::block_dim() + P::thread_id();
      if (out[i] == nullptr && (out[i] = h.view().allocate(256 * KiB)) != nullptr) got.fetch_add(1);
    });
  };
  round();
  EXPECT_EQ(h.grow_if_needed(), 2 * MiB);
  EXPECT_EQ(h.counters().budget_refusals, 1u);
  EXPECT_EQ(h.counters().growth_failures, 1u);
  round();
  EXPECT_EQ(h.grow_if_needed(), 0u) << "nothing more fits";
  EXPECT_EQ(h.mapped_bytes(), 6 * MiB);
  EXPECT_EQ(l.budget(memory_backend::cpu, 0).used, meta + 6 * MiB);
  EXPECT_EQ(l.budget(memory_backend::cpu, 0).used, l.budget(memory_backend::cpu, 0).high);
  EXPECT_GE(got.load(), 16u);
  toga::cpu::launch(64, 16, 4, [&] {
    const unsigned i = P::block_id() * P::block_dim() + P::thread_id();
    if (out[i]) h.view().deallocate(out[i]);
  });
  // a trim gives granules back to the budget
  EXPECT_EQ(h.trim_to(0), 6 * MiB);
  EXPECT_EQ(l.budget(memory_backend::cpu, 0).used, meta);
  EXPECT_EQ(bytes_of(l, owner, "granule"), 0u);
  // every granule record had its address
  const auto err = h.check();
  ASSERT_FALSE(err.has_value()) << *err;
}

TEST(Budget, CpuHeapWithoutALedgerRecordsNothing) {
  memory_ledger l(env({}));
  toga::cpu::growable_heap h(gopts(16 * MiB, MiB, 2 * MiB), 4, 0, toga::cpu::cpu_accounting{nullptr, 0});
  EXPECT_EQ(h.mapped_bytes(), 2 * MiB);
  EXPECT_TRUE(l.records().empty());
}
