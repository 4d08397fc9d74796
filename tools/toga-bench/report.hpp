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

//! The second reference of each backend: cuda-malloc on the GPU; in the simulator, which has no
//! cuda-malloc, the per-thread bump-sim (one atomic per thread).
inline constexpr const char* second_gpu = "cuda-malloc";
inline constexpr const char* second_sim = "bump-sim";

//! A row with the ratios to the references of its backend, taken in the same run.
struct report_row {
  row r;
  std::optional<double> ratio_malloc;  //!< throughput / cuda-malloc's (>1: faster); GPU rows only
  std::optional<double> ratio_bump;    //!< throughput / bump-warp's (or bump-warp-sim's); <1: slower than the floor
  std::optional<double> ratio_second;  //!< throughput / the second reference's: = ratio_malloc on the
                                       //!< GPU, against bump-sim in the simulator (not in the JSON)
};

//! A row's repetitions spread more than this (max / min) is marked as noisy ("!").
inline constexpr double noisy_spread = 3.0;
//! max / min of the row's timed repetitions (nullopt: fewer than two, or a zero time), for
//! cases whose ms are repetitions; T9 and T11 record one entry per round (rounds differ by design).
std::optional<double> spread(const row& r);

//! The references each allocator is compared with: "cuda-malloc" and "bump-warp" for GPU
//! allocators, "bump-warp-sim" (and bump-sim for ratio_second) for simulator allocators. Rows
//! of op "init" (T12) get no ratio: the references' init only obtains the memory (a lazy mapping
//! in the simulator), so a throughput quotient would only restate toga's metadata set-up; the
//! summary compares the times instead.
std::vector<report_row> with_ratios(const std::vector<row>& rows);

//! Width of the per-row table (print_table): no line is wider.
inline constexpr std::size_t table_columns = 120;
//! The per-row table: allocator, case, op, size, threads, median ms, the spread of the
//! repetitions (max / min, "!" above noisy_spread), M ops/s, the two ratios, failures / corrupt
//! blocks, then param, metrics and note, wrapped onto indented lines so that no line is wider
//! than table_columns (min..max and every repetition are in the JSON).
void print_table(std::FILE* out, const std::vector<report_row>& rows);

//! A case that threw instead of adding rows (main's "errors").
struct case_error {
  std::string case_id;
  std::string backend;  //!< "gpu" or "sim"
  std::string what;
};

//! One line of the summary: how toga did in one case, against the references of its backend.
struct case_summary {
  std::string case_id;
  std::string name;                    //!< short case name ("alloc/free")
  std::optional<double> x_floor;       //!< geometric mean of toga's ratio_bump over the case's points
  std::optional<double> x_second;      //!< geometric mean of toga's ratio_second
  std::string result;                  //!< "pass", "FAIL", or "-" (nothing measured on this backend)
  bool noisy = false;                  //!< a timed row of the case spread more than noisy_spread
  std::string figure;                  //!< the figure that matters for the case, or why it failed
};

//! The summary of allocator `toga` ("toga" or "toga-sim") over `cases`: one entry per case, in
//! order. FAIL: toga returned nullptr where memory was expected (failures), any row of the case
//! on toga's backend saw a corrupt block, the case threw on that backend, or toga's row was not
//! measured while a reference's was (or toga has no row). "-": no allocator measured anything
//! (a GPU-only figure in the simulator, no graphs given).
std::vector<case_summary> summarise(const std::vector<report_row>& rows, const std::string& toga,
                                    const std::vector<std::string>& cases, const std::vector<case_error>& errors);

//! Width of the summary: no line is wider.
inline constexpr std::size_t summary_columns = 100;
//! Prints the summary of every toga allocator that has rows ("toga" and/or "toga-sim"): a heading
//! naming the references (and, in the simulator, that figures are host time, for trends only),
//! one line per case, a legend. Returns the number of FAIL lines.
unsigned print_summary(std::FILE* out, const std::vector<report_row>& rows, const std::vector<std::string>& cases,
                       const std::vector<case_error>& errors);

//! The summary as JSON (the document's "summary" array): case, name, allocator, result, x_floor,
//! x_second (null when absent), the names of the two references, noisy, figure.
nlohmann::json summary_json(const std::vector<report_row>& rows, const std::vector<std::string>& cases,
                            const std::vector<case_error>& errors);

//! The JSON document (schema "toga-bench/2": as /1, with ratio_bump taken against bump-warp
//! instead of bump, and a "references" object naming them; see docs/benchmarks.md).
nlohmann::json to_json(const std::vector<report_row>& rows, const nlohmann::json& header);

}  // namespace toga::bench
