// Fuzz target for the simulator's decision-file reader, toga::sim::load_decisions (public API of
// sim/include/toga/sim/runner.hpp; the reader itself lives in sim/src/runner.cpp).
//
// The oracle: load_decisions either returns or throws. Its contract is toga::sim::input_error (a
// std::runtime_error naming the file); any other std::exception is a contract deviation, which
// this target reports once per kind (stderr, "contract:") and, with TOGA_FUZZ_STRICT=1, treats
// as a failure. Anything that is not a std::exception, a crash or a hang is always a failure.
#include <cstdint>
#include <cstdlib>
#include <set>
#include <stdexcept>
#include <string>
#include <typeinfo>

#include "fuzz_target.hpp"
#include "toga/sim/runner.hpp"

const toga::fuzz::target_info& toga::fuzz::toga_fuzz_info() {
  static const target_info info{
      "decisions",
      {"{", "}", "[", "]", ",", ":", "\"", "null", "true", "false", "0", "1", "-1", "1e999", "1.5", "4294967295",
       "4294967296", "18446744073709551615", "18446744073709551616", "\"format\"", "\"toga-sim decisions 1\"", "\"scenario\"",
       "\"params\"", "\"fair_after\"", "\"max_steps\"", "\"decisions\"", "\"verdict\"", "\"trace_hash\"", "\"memory\"",
       "\"weak\"", "\"sc\"", "\"faults\"", "\"none\"", "\"heap_kib\"", "\"threads\"", "\"lanes\"", "\\u0000", "\xff"},
      false};
  return info;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const bool strict = [] {
    const char* s = std::getenv("TOGA_FUZZ_STRICT");
    return s != nullptr && std::string(s) == "1";
  }();
  static std::set<std::string> reported;
  const std::string path = toga::fuzz::write_input(data, size, ".json");
  try {
    const toga::sim::decision_file d = toga::sim::load_decisions(path);
    (void)d;
  } catch (const toga::sim::input_error& e) {
    if (std::string(e.what()).find(path) == std::string::npos) toga::fuzz::fuzz_fail(std::string("input_error without the file name: ") + e.what());
  } catch (const std::exception& e) {
    const std::string kind = typeid(e).name();
    if (strict) toga::fuzz::fuzz_fail("load_decisions threw " + kind + " (not input_error): " + e.what());
    if (reported.insert(kind).second)
      std::fprintf(stderr, "contract: load_decisions threw %s, not toga::sim::input_error: %s\n", kind.c_str(), e.what());
  }
  return 0;
}
