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

//! A row with the ratios to the two references of its backend, taken in the same run.
struct report_row {
  row r;
  std::optional<double> ratio_malloc;  //!< throughput / cuda-malloc's (>1: faster); GPU rows only
  std::optional<double> ratio_bump;    //!< throughput / bump's (or bump-sim's); <1: slower than the floor
};

//! The reference each allocator is compared with: "cuda-malloc" and "bump" for GPU allocators,
//! "bump-sim" (as bump) for simulator allocators.
std::vector<report_row> with_ratios(const std::vector<row>& rows);

//! The table the protocol asks for: allocator, case, size, median ms, allocations/s, ratios,
//! failures (and corrupt blocks, metrics, notes).
void print_table(std::FILE* out, const std::vector<report_row>& rows);

//! The JSON document (schema "toga-bench/1"; see docs/benchmarks.md).
nlohmann::json to_json(const std::vector<report_row>& rows, const nlohmann::json& header);

}  // namespace toga::bench
