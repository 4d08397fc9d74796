//! @file tests/fuzz/fuzz_target.hpp
//! What a fuzz target provides. Every target defines the libFuzzer entry point
//! `LLVMFuzzerTestOneInput` (so the same file also links with clang's -fsanitize=fuzzer for a
//! coverage-guided run) and `toga_fuzz_info` for the in-tree driver (fuzz_driver.cpp), which
//! CI uses because it needs nothing beyond g++.
//!
//! A target returns normally for every input it handles as documented (a result, or the
//! documented exception); for anything else (an invariant broken, an undocumented exception,
//! memory misuse caught by the sanitizers) it calls fuzz_fail, which aborts: the driver then
//! saves the input and prints the command that replays it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <unistd.h>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);

namespace toga::fuzz {

struct target_info {
  const char* name;                     //!< "graph-mtx"
  std::vector<std::string> dictionary;  //!< tokens the mutator inserts (keywords, edge numbers)
  bool gzip_aware = false;              //!< inputs are gzip data: the mutator also compresses mutated text
};
const target_info& toga_fuzz_info();

//! Reports what went wrong and aborts (the driver's handler saves the input).
[[noreturn]] inline void fuzz_fail(const std::string& what) {
  std::fprintf(stderr, "fuzz target failure: %s\n", what.c_str());
  std::fflush(stderr);
  std::abort();
}

//! Writes the input to a per-process file with extension `ext` (the loaders read files) and
//! returns its path.
inline std::string write_input(const std::uint8_t* data, std::size_t size, const char* ext) {
  static std::string path;
  if (path.empty() || path.find(ext) == std::string::npos) {
    const char* tmp = std::getenv("TMPDIR");
    path = std::string(tmp && *tmp ? tmp : "/tmp") + "/toga_fuzz_" + std::to_string(static_cast<long>(::getpid())) + ext;
  }
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) fuzz_fail("cannot write the input file " + path);
  if (size != 0 && std::fwrite(data, 1, size, f) != size) fuzz_fail("cannot write the input file " + path);
  std::fclose(f);
  return path;
}

}  // namespace toga::fuzz
