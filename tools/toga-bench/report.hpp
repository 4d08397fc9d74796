// toga-bench output: ratios to the references, the terminal table, the JSON document.
#pragma once

#include <cstdio>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench.hpp"

namespace toga::bench {

//! The floor reference of each backend: the warp-aggregated bump allocator (lanes of a warp sum
//! their sizes, one lane does one atomic add; no free). Every "x bump" ratio refers to it; the
//! per-thread "bump" / "bump-sim" rows are extra rows without ratios against them.
inline constexpr const char* floor_gpu = "bump-warp";
inline constexpr const char* floor_sim = "bump-warp-sim";

//! A row with the ratios to the two references of its backend, taken in the same run.
struct report_row {
  row r;
  std::optional<double> ratio_malloc;  //!< throughput / cuda-malloc's (>1: faster); GPU rows only
  std::optional<double> ratio_bump;    //!< throughput / bump-warp's (or bump-warp-sim's); <1: slower than the floor
};

//! The references each allocator is compared with: "cuda-malloc" and "bump-warp" for GPU
//! allocators, "bump-warp-sim" for simulator allocators.
std::vector<report_row> with_ratios(const std::vector<row>& rows);

//! The table the protocol asks for: allocator, case, size, median ms, allocations/s, ratios,
//! failures (and corrupt blocks, metrics, notes).
void print_table(std::FILE* out, const std::vector<report_row>& rows);

//! The JSON document (schema "toga-bench/2": as /1, with ratio_bump taken against bump-warp
//! instead of bump, and a "references" object naming them; see docs/benchmarks.md).
nlohmann::json to_json(const std::vector<report_row>& rows, const nlohmann::json& header);

}  // namespace toga::bench
