// Checks the JSON that the smoke run (`toga-bench run --allocators toga-sim --profile quick`, the
// CTest fixture toga_bench.sim_smoke) wrote: the schema of docs/benchmarks.md, every case T1-T13
// present for toga-sim and its references bump-warp-sim (the floor of every ratio_bump) and
// bump-sim, no failure or corrupt block for toga-sim, figures that are consistent with their
// repetitions, and a summary that passes every case the simulator measures.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <map>
#include <set>

#include <nlohmann/json.hpp>

namespace {

nlohmann::json load() {
  const char* path = std::getenv("TOGA_BENCH_JSON");
  if (!path) throw std::runtime_error("TOGA_BENCH_JSON is not set (run through ctest: the fixture writes the file)");
  std::ifstream f(path);
  if (!f) throw std::runtime_error(std::string("cannot read ") + path + ": did the toga_bench.sim_smoke test run?");
  return nlohmann::json::parse(f);
}

const nlohmann::json& doc() {
  static const nlohmann::json d = load();
  return d;
}

TEST(BenchJson, Header) {
  const auto& d = doc();
  EXPECT_EQ(d.at("schema"), "toga-bench/2");
  EXPECT_EQ(d.at("references").at("floor_sim"), "bump-warp-sim");
  for (const char* k : {"command", "commit", "date", "profile", "seed", "reps", "seconds", "graphs", "errors", "rows"})
    EXPECT_TRUE(d.contains(k)) << "missing header field " << k;
  EXPECT_TRUE(d.at("command").get<std::string>().find("toga-bench") != std::string::npos);
  EXPECT_TRUE(d.at("environment").contains("sim"));
  EXPECT_TRUE(d.at("errors").empty()) << d.at("errors").dump(1);
}

TEST(BenchJson, RowSchema) {
  const auto& rows = doc().at("rows");
  ASSERT_FALSE(rows.empty());
  for (const auto& r : rows) {
    for (const char* k : {"allocator", "case", "op", "param", "note"}) ASSERT_TRUE(r.at(k).is_string()) << k << " in " << r.dump();
    for (const char* k : {"size", "threads", "ops_per_rep", "failures", "corrupt"})
      ASSERT_TRUE(r.at(k).is_number_unsigned()) << k << " in " << r.dump();
    ASSERT_TRUE(r.at("ms").is_array());
    ASSERT_TRUE(r.at("metrics").is_object());
    for (const char* k : {"median_ms", "min_ms", "max_ms", "ops_per_s", "ratio_cuda_malloc", "ratio_bump"})
      ASSERT_TRUE(r.contains(k)) << k;
    EXPECT_TRUE(r.at("ratio_cuda_malloc").is_null()) << "simulator rows have no cuda-malloc reference";
    if (!r.at("ms").empty()) {
      const double med = r.at("median_ms"), lo = r.at("min_ms"), hi = r.at("max_ms");
      EXPECT_LE(lo, med);
      EXPECT_LE(med, hi);
      for (const auto& m : r.at("ms")) EXPECT_GE(m.get<double>(), 0.0);
      if (r.at("ops_per_rep").get<std::uint64_t>() > 0 && med > 0) EXPECT_GT(r.at("ops_per_s").get<double>(), 0.0);
    } else {
      EXPECT_TRUE(r.at("median_ms").is_null());
    }
  }
}

TEST(BenchJson, EveryCaseForTogaSimAndItsReferences) {
  std::set<std::pair<std::string, std::string>> seen;
  for (const auto& r : doc().at("rows")) seen.insert({r.at("case").get<std::string>(), r.at("allocator").get<std::string>()});
  for (int t = 1; t <= 13; ++t) {
    const std::string c = "T" + std::to_string(t);
    for (const char* a : {"toga-sim", "bump-warp-sim", "bump-sim"}) EXPECT_TRUE(seen.count({c, a})) << c << " has no " << a << " row";
  }
}

// ratio_bump is taken against bump-warp-sim: its own rows are 1, and toga-sim's equal the
// throughput quotient with the bump-warp-sim row of the same point.
TEST(BenchJson, RatioBumpRefersToBumpWarpSim) {
  std::map<std::string, double> floor_ops;
  auto key = [](const nlohmann::json& r) {
    return r.at("case").get<std::string>() + "|" + r.at("op").get<std::string>() + "|" + std::to_string(r.at("size").get<std::uint64_t>()) +
           "|" + r.at("param").get<std::string>();
  };
  for (const auto& r : doc().at("rows"))
    if (r.at("allocator") == "bump-warp-sim" && r.at("ops_per_s").is_number() && r.at("failures") == 0) floor_ops[key(r)] = r.at("ops_per_s");
  unsigned checked = 0;
  for (const auto& r : doc().at("rows")) {
    if (r.at("ratio_bump").is_null()) continue;
    const auto it = floor_ops.find(key(r));
    ASSERT_NE(it, floor_ops.end()) << "a ratio_bump without a bump-warp-sim row: " << r.dump();
    if (r.at("ops_per_s").is_number() && r.at("ops_per_rep").get<std::uint64_t>() > 0) {
      EXPECT_NEAR(r.at("ratio_bump").get<double>(), r.at("ops_per_s").get<double>() / it->second, 1e-9 * r.at("ratio_bump").get<double>() + 1e-12);
      ++checked;
    }
  }
  EXPECT_GT(checked, 20u);
}

TEST(BenchJson, TogaSimNeverFailsNorCorrupts) {
  for (const auto& r : doc().at("rows")) {
    EXPECT_EQ(r.at("corrupt"), 0) << r.dump();
    if (r.at("allocator") == "toga-sim") EXPECT_EQ(r.at("failures"), 0) << r.dump();
  }
}

TEST(BenchJson, TimedTogaSimRowsHaveEveryRepetitionAndARatioToBump) {
  const unsigned reps = doc().at("reps");
  unsigned timed = 0, with_ratio = 0;
  for (const auto& r : doc().at("rows")) {
    if (r.at("allocator") != "toga-sim" || r.at("ms").empty()) continue;
    ++timed;
    const std::string c = r.at("case");
    if (c != "T9" && c != "T11") EXPECT_EQ(r.at("ms").size(), reps) << r.dump();  // T9/T11: one entry per round
    if (!r.at("ratio_bump").is_null()) {
      ++with_ratio;
      EXPECT_GT(r.at("ratio_bump").get<double>(), 0.0);
    }
  }
  EXPECT_GT(timed, 20u);
  EXPECT_GT(with_ratio, timed / 2);
}

TEST(BenchJson, CaseFigures) {
  bool util = false, range = false, graph = false;
  for (const auto& r : doc().at("rows")) {
    if (r.at("allocator") != "toga-sim") continue;
    const auto& m = r.at("metrics");
    if (r.at("case") == "T8") {
      ASSERT_TRUE(m.contains("utilisation")) << r.dump();
      EXPECT_GT(m.at("utilisation").get<double>(), 0.5);
      EXPECT_LE(m.at("utilisation").get<double>(), 1.0);
      util = true;
    }
    if (r.at("case") == "T9") {
      ASSERT_TRUE(m.contains("range_ratio")) << r.dump();
      EXPECT_GE(m.at("range_ratio").get<double>(), 1.0);
      range = true;
    }
    if ((r.at("case") == "T10" || r.at("case") == "T11") && !r.at("ms").empty()) {
      EXPECT_FALSE(r.at("param").get<std::string>().empty()) << "graph rows name their graph";
      graph = true;
    }
    if (r.at("case") == "T13") EXPECT_FALSE(r.at("note").get<std::string>().empty()) << "registers need the GPU: say so";
  }
  EXPECT_TRUE(util && range);
  // Without ../shared/data/graphs the fixture runs T10/T11 without a graph (the header's graph
  // list is empty and the rows say so); with graphs, they must have been measured.
  if (!doc().at("graphs").empty()) EXPECT_TRUE(graph) << "no T10/T11 row with a graph";
}

// The summary (the end of `toga-bench run`, and the JSON's "summary"): one entry per case for
// toga-sim, against bump-warp-sim and bump-sim; every case the simulator measures passes, with a
// ratio to both references where it times throughput; the GPU-only figures (T13 registers, T14
// edges) are "-" with their reason.
TEST(BenchJson, SummaryPassesEveryMeasuredCase) {
  const auto& sum = doc().at("summary");
  ASSERT_EQ(sum.size(), 14u) << sum.dump(1);
  for (std::size_t i = 0; i < sum.size(); ++i) {
    const auto& s = sum[i];
    const std::string c = s.at("case");
    EXPECT_EQ(c, "T" + std::to_string(i + 1));
    EXPECT_EQ(s.at("allocator"), "toga-sim");
    EXPECT_EQ(s.at("floor"), "bump-warp-sim");
    EXPECT_EQ(s.at("second"), "bump-sim");
    EXPECT_FALSE(s.at("figure").get<std::string>().empty()) << s.dump();
    if (c == "T13" || c == "T14") {
      EXPECT_EQ(s.at("result"), "-") << s.dump();
      EXPECT_NE(s.at("figure").get<std::string>().find("GPU"), std::string::npos) << s.dump();
      continue;
    }
    if ((c == "T10" || c == "T11") && doc().at("graphs").empty()) {
      EXPECT_EQ(s.at("result"), "-") << s.dump();
      continue;
    }
    EXPECT_EQ(s.at("result"), "pass") << s.dump();
    if (c == "T12") {
      EXPECT_TRUE(s.at("x_floor").is_null()) << "init compares times, not throughput: " << s.dump();
      EXPECT_NE(s.at("figure").get<std::string>().find("init 8 GiB heap"), std::string::npos) << s.dump();
    } else if (c != "T8" && c != "T9") {
      EXPECT_TRUE(s.at("x_floor").is_number()) << s.dump();
      EXPECT_TRUE(s.at("x_second").is_number()) << s.dump();
    }
  }
}

}  // namespace
