// toga-bench: runs the benchmark protocol (docs/benchmarks.md; ../shared/docs/benchmarks.md) on
// the GPU (toga, cuda-malloc, bump-warp, bump) or in the fiber simulator (toga-sim, bump-warp-sim,
// bump-sim) and prints the per-row table (120 columns), then the summary (report.hpp: one line
// per case, toga's ratio to each reference, pass / FAIL, the figure that matters; 100 columns);
// --json writes every repetition, the summary, the GPU, driver, commit and command line. On a
// terminal, stderr shows the case running and the backend's last step (not with --no-progress,
// nor when stderr is a file or a pipe).
//
//   toga-bench list
//   toga-bench run [--allocators toga,cuda-malloc,bump-warp,bump,toga-sim] [--cases T1,T3]
//                  [--sizes 16,4K] [--threads 1024,1M] [--reps 5] [--heap 16G]
//                  [--profile quick|full] [--json F] [--graphs PATH...] [--sweep] [--seed N]
//
// The references are always measured in the same run: cuda-malloc, bump-warp (the floor every
// "x bump" ratio refers to) and bump (per-thread atomics, an extra row) with any GPU allocator;
// bump-warp-sim and bump-sim with toga-sim. Without --allocators, the GPU allocators run when a
// GPU is present, else the simulator's. Everything the command line names is checked before the
// first case runs: options, the --json path, the graph files (formats and limits of graph.hpp)
// and whether toga's heap can hold every case point asked for.
//
// Exit status: 0 every case ran, no block was corrupt and toga never returned nullptr where
// memory was available; 1 a case failed to run, or an input file (a graph) is bad; 2 a usage
// error (an unknown or malformed option, a value out of range, an allocator that cannot run
// here, a heap too small for a case, an unwritable --json path; CLI11's own parse errors too);
// 3 a corrupt or overlapping block was seen; 4 toga (or toga-sim) returned nullptr where memory
// was available. When several apply, the lowest of 3, 1, 4 wins.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "bench.hpp"
#include "graph.hpp"
#include "graph_plan.hpp"
#include "toga/allocator.hpp"
#include "report.hpp"

#ifndef TOGA_BENCH_SOURCE_DIR
#define TOGA_BENCH_SOURCE_DIR "."
#endif

#ifndef TOGA_BENCH_NO_GPU_REASON  // (set by tools/CMakeLists.txt: why the GPU backend is not built)
#define TOGA_BENCH_NO_GPU_REASON "not configured"
#endif

namespace fs = std::filesystem;
using namespace toga::bench;

#if !TOGA_BENCH_GPU
std::unique_ptr<backend> toga::bench::make_gpu_backend() { return nullptr; }
#endif
#if !TOGA_BENCH_SIM
std::unique_ptr<backend> toga::bench::make_sim_backend() { return nullptr; }
#endif

namespace {

// "16", "4K", "4KiB", "1M", "8G" -> bytes / counts (binary multiples).
std::uint64_t parse_quantity(std::string s) {
  std::string t;
  for (char c : s)
    if (c != '_' && c != ' ') t += c;
  if (t.ends_with("iB") || t.ends_with("ib")) t.resize(t.size() - 2);
  else if (t.ends_with("B") || t.ends_with("b")) t.resize(t.size() - 1);
  std::uint64_t mul = 1;
  if (!t.empty()) {
    switch (t.back()) {
      case 'k': case 'K': mul = 1ull << 10; t.pop_back(); break;
      case 'm': case 'M': mul = 1ull << 20; t.pop_back(); break;
      case 'g': case 'G': mul = 1ull << 30; t.pop_back(); break;
      default: break;
    }
  }
  std::size_t used = 0;
  std::uint64_t v = 0;
  try {
    if (!t.empty() && t[0] >= '0' && t[0] <= '9') v = std::stoull(t, &used);  // no sign, no blanks
  } catch (const std::exception&) {
    used = 0;
  }
  if (t.empty() || used != t.size()) throw CLI::ValidationError("'" + s + "' is not a number (examples: 256, 4K, 1M, 8G)");
  if (v > (std::uint64_t{1} << 62) / mul) throw CLI::ValidationError("'" + s + "' is too large");
  return v * mul;
}

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ','))
    if (!item.empty()) out.push_back(item);
  return out;
}

//! Why `path` cannot be written ("" when it can): checked before the run, so that a typo in
//! --json does not cost the whole run. Opens it for appending (creating it, and removing it
//! again when it did not exist), which finds a missing folder, a directory, a read-only file
//! system and missing permissions alike.
std::string unwritable(const std::string& path) {
  std::error_code ec;
  if (fs::is_directory(path, ec)) return "it is a directory";
  const bool existed = fs::exists(path, ec);
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0666);
  if (fd < 0) return std::strerror(errno);
  ::close(fd);
  if (!existed) fs::remove(path, ec);
  return "";
}

std::string shell(const std::string& cmd) {
  std::string out;
  if (FILE* p = popen(cmd.c_str(), "r")) {
    char buf[256];
    while (std::fgets(buf, sizeof buf, p)) out += buf;
    pclose(p);
  }
  while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
  return out;
}

bool is_graph_file(const fs::path& p) {
  const std::string n = p.filename().string();
  for (const char* ext : {".txt", ".txt.gz", ".mtx", ".mtx.gz", ".el", ".el.gz"})
    if (n.ends_with(ext)) return true;
  return false;
}

// Files and directories -> graph files, smallest first (directories: their graph files).
std::vector<std::string> expand_graphs(const std::vector<std::string>& paths) {
  std::vector<std::pair<std::uintmax_t, std::string>> found;
  for (const auto& p : paths) {
    std::error_code ec;
    if (fs::is_directory(p, ec)) {
      for (const auto& e : fs::directory_iterator(p, ec))
        if (e.is_regular_file() && is_graph_file(e.path())) found.emplace_back(e.file_size(), e.path().string());
    } else if (fs::exists(p, ec)) {
      found.emplace_back(fs::file_size(p, ec), p);
    } else {
      throw CLI::ValidationError("--graphs: '" + p + "' does not exist (give graph files or directories holding them)");
    }
  }
  std::sort(found.begin(), found.end());
  std::vector<std::string> out;
  for (auto& f : found) out.push_back(f.second);
  return out;
}

// Progress: on a terminal (stderr), one line rewritten in place, "[3/14 T5 0:42] T5 toga-sim
// 256 B" (case 3 of 14, 42 s into it, then the backend's last message); with --no-progress or
// when stderr is not a terminal (a log file, a pipe), nothing but the line per case that
// done_line prints.
class console_sink final : public sink {
 public:
  explicit console_sink(bool show) : tty_(show && isatty(fileno(stderr))) {}
  void add(row r) override { rows.push_back(std::move(r)); }
  //! The case now running: its place in the run and its start (for the elapsed time).
  void start_case(const std::string& id, std::size_t index, std::size_t total, const std::string& what) {
    case_ = "[" + std::to_string(index) + "/" + std::to_string(total) + " " + id;
    case_start_ = std::chrono::steady_clock::now();
    progress(what);
  }
  void progress(const std::string& what) override {
    if (!tty_) return;
    const auto now = std::chrono::steady_clock::now();
    const long s = static_cast<long>(std::chrono::duration<double>(now - case_start_).count());
    char elapsed[32];
    std::snprintf(elapsed, sizeof elapsed, " %ld:%02ld] ", s / 60, s % 60);
    std::string line = case_.empty() ? what : case_ + elapsed + what;
    if (line.size() > 110) line.resize(110);  // one terminal line, so that \r rewrites it
    std::fprintf(stderr, "\r\033[K%s", line.c_str());
    std::fflush(stderr);
    dirty_ = true;
  }
  void done_line(const std::string& line) {
    if (dirty_) std::fprintf(stderr, "\r\033[K");
    dirty_ = false;
    std::fprintf(stderr, "%s\n", line.c_str());
  }
  std::vector<row> rows;

 private:
  bool tty_;
  bool dirty_ = false;
  std::string case_;
  std::chrono::steady_clock::time_point case_start_{};
};

// The command line, shell-quoted where needed so that it can be pasted back. With `only_case`,
// --cases is replaced by that case: the command that replays one case (runs are deterministic
// in --seed and the other options).
std::string command_line(int argc, char** argv, const std::string& only_case) {
  std::string cmd;
  for (int i = 0; i < argc; ++i) {
    std::string a = argv[i];
    if (!only_case.empty() && (a == "--cases" || a.starts_with("--cases="))) {
      if (a == "--cases") ++i;  // skip its value too
      continue;
    }
    if (a.find_first_of(" \t'\"$`\\*?;&|<>()") != std::string::npos) {
      std::string q = "'";
      for (char c : a) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
      a = q + "'";
    }
    cmd += (i ? " " : "") + a;
  }
  if (!only_case.empty()) cmd += " --cases " + only_case;
  return cmd;
}

int cmd_list() {
  std::printf("cases (../shared/docs/benchmarks.md):\n");
  for (const auto& c : all_cases()) std::printf("  %-4s %-28s %s\n", c.id.c_str(), c.name.c_str(), c.what.c_str());
  std::printf("\nallocators:\n");
  auto gpu = make_gpu_backend();
  auto sim = make_sim_backend();
  auto show = [](const char* what, const std::unique_ptr<backend>& b, const char* missing) {
    if (!b) {
      std::printf("  %-32s not built (%s)\n", what, missing);
      return;
    }
    std::string names;
    for (const auto& a : b->allocators()) names += (names.empty() ? "" : ", ") + a;
    const auto why = b->unavailable();
    std::printf("  %-32s %s\n", names.c_str(), why ? ("cannot run here: " + *why).c_str() : "available");
  };
  show("gpu", gpu, TOGA_BENCH_NO_GPU_REASON);
  show("sim", sim, "Boost.Fiber 1.81 / oneTBB were not found when toga was configured");
  std::printf("\nreferences: bump-warp (the floor; every \"x bump\" ratio) and cuda-malloc on the GPU,\n"
              "bump-warp-sim in the simulator; bump / bump-sim (one atomic per thread) as extra rows\n");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"toga-bench: the toga benchmark protocol (cases T1-T14) on the GPU or in the simulator"};
  app.require_subcommand(1);
  auto* list = app.add_subcommand("list", "List the cases and which allocators can run here");
  auto* run = app.add_subcommand("run", "Run cases and print the table");

  std::string allocators_arg, cases_arg, sizes_arg, threads_arg, heap_arg, superbin_arg, presplit_arg, json_path, profile_arg = "quick";
  std::vector<std::string> graph_args;
  options opt;
  bool no_progress = false;
  run->add_option("--allocators", allocators_arg,
                  "Comma list of toga, cuda-malloc, bump-warp, bump (GPU) and toga-sim, bump-warp-sim, bump-sim "
                  "(simulator). Default: the GPU ones when a GPU is present, else the simulator's. References are "
                  "always added.");
  run->add_option("--cases", cases_arg, "Comma list of case ids (T1..T14); default: all");
  run->add_option("--sizes", sizes_arg, "Comma list of allocation sizes in bytes (suffixes K, M, G); overrides the case's");
  run->add_option("--threads", threads_arg, "Comma list of thread counts (T1-T6); overrides the case's");
  run->add_option("--reps", opt.reps, "Timed repetitions after one warm-up (median reported)")->check(CLI::Range(1u, 1000u));
  run->add_option("--heap", heap_arg, "toga heap in bytes for T1-T7 and T9 (suffixes K, M, G); default: the backend's");
  run->add_option("--superbin-bytes", superbin_arg,
                  "GPU toga heaps: bytes of one superbin (a power of two in 8K .. 2M; heap_options::superbin_bytes); "
                  "default: toga's choice. Heaps not larger than it keep toga's choice");
  run->add_option("--superbin-sharing", opt.superbin_sharing,
                  "GPU toga heaps: SMs that share one superbin arena, 0 .. 1024 (heap_options::superbin_sharing); "
                  "default 0: one per SM")
      ->check(CLI::Range(0u, 1024u));
  run->add_option("--presplit-bytes", presplit_arg,
                  "GPU toga heaps: bytes of the pre-split reserve (heap_options::presplit_bytes; suffixes K, M, G; 0: none, "
                  "'half': toga's choice, half the heap). Values above half a heap mean half of it");
  run->add_flag("--tenants", opt.tenants,
               "GPU toga heaps with tenants (heap_options::tenants): every toga kernel allocates as tenant 0, with the 16 B "
               "tenant header and its counters (docs/usage.md §12.4): what tenants cost per allocation");
  run->add_option("--profile", profile_arg, "quick (fewer points, two smallest graphs, 10 rounds) or full (the protocol)")
      ->check(CLI::IsMember({"quick", "full"}));
  run->add_option("--json", json_path, "Write every repetition, the environment and the command line to this file");
  run->add_option("--graphs", graph_args,
                  "Graph files or directories for T10/T11 (SNAP .txt[.gz], Matrix Market .mtx[.gz]); default: "
                  "$TOGA_GRAPHS or ../shared/data/graphs beside the source tree");
  run->add_flag("--sweep", opt.sweep, "T1: every size 4..8192 step 4");
  run->add_option("--seed", opt.seed, "Seed of sizes, frees, edges and simulator schedules");
  run->add_option("--slow-budget-ms", opt.slow_budget_ms,
                  "Cut the thread count of an allocator whose repetition would take longer than this (rows show the count used)");
  run->add_flag("--no-progress", no_progress, "No progress line on the terminal");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // CLI11 prints the message (and the help for --help); its own exit codes (105-109 for an
    // unknown option, a value out of range, a missing subcommand) become the usage status 2.
    const int rc = app.exit(e);
    return rc == 0 ? 0 : 2;
  }
  if (*list) return cmd_list();

  // A list option that was given must name something: "--cases ," would run nothing and pass.
  for (const auto& [name, value] : {std::pair<const char*, const std::string*>{"--cases", &cases_arg}, {"--sizes", &sizes_arg},
                                    {"--threads", &threads_arg}, {"--allocators", &allocators_arg}}) {
    if (run->count(name) > 0 && split(*value).empty()) {
      std::fprintf(stderr, "toga-bench: %s '%s' names nothing (give a comma list, e.g. %s)\n", name, value->c_str(),
                   std::string(name) == "--cases" ? "T1,T5 or all" : std::string(name) == "--sizes" ? "16,4K"
                   : std::string(name) == "--threads" ? "1024,1M" : "toga");
      return 2;
    }
  }
  if (!json_path.empty()) {
    if (const std::string why = unwritable(json_path); !why.empty()) {
      std::fprintf(stderr, "toga-bench: --json: cannot write '%s' (%s); give a file in a writable folder\n", json_path.c_str(),
                   why.c_str());
      return 2;
    }
  }

  try {
    opt.prof = profile_arg == "full" ? profile::full : profile::quick;
    // Bounds keep every product in range (threads x size < 2^57) and every heap constructible.
    for (const auto& s : split(sizes_arg)) {
      const auto v = parse_quantity(s);
      if (v == 0 || v > (std::uint64_t{1} << 33))
        throw CLI::ValidationError("--sizes: " + s + " is outside 1 B .. 8 GiB");
      opt.sizes.push_back(v);
    }
    for (const auto& s : split(threads_arg)) {
      const auto v = parse_quantity(s);
      if (v == 0 || v > (std::uint64_t{1} << 24))
        throw CLI::ValidationError("--threads: " + s + " is outside 1 .. 16M (the protocol's largest is 1M)");
      opt.threads.push_back(v);
    }
    if (!heap_arg.empty()) {
      opt.heap_bytes = parse_quantity(heap_arg);
      if (opt.heap_bytes < 4096 || opt.heap_bytes > toga::heap_layout::max_heap_bytes)
        throw CLI::ValidationError("--heap: " + heap_arg + " is outside 4 KiB .. 128 GiB (the largest toga heap)");
    }
    if (!superbin_arg.empty()) {
      opt.superbin_bytes = parse_quantity(superbin_arg);
      const std::uint64_t v = opt.superbin_bytes;
      if (v < 8192 || v > (std::uint64_t{1} << 21) || (v & (v - 1)) != 0)
        throw CLI::ValidationError("--superbin-bytes: " + superbin_arg + " is not a power of two in 8K .. 2M");
    }
    if (!presplit_arg.empty() && presplit_arg != "half") {
      try {
        opt.presplit_bytes = parse_quantity(presplit_arg);
      } catch (const std::exception&) {
        throw CLI::ValidationError("--presplit-bytes: " + presplit_arg + " is not a byte count (give e.g. 0, 512M or half)");
      }
    }
  } catch (const CLI::ValidationError& e) {
    std::fprintf(stderr, "toga-bench: %s\n", e.what());
    return 2;
  }

  // Cases.
  std::vector<std::string> cases;
  if (cases_arg.empty() || cases_arg == "all") {
    for (const auto& c : all_cases()) cases.push_back(c.id);
  } else {
    for (auto c : split(cases_arg)) {
      if (c[0] == 't') c[0] = 'T';
      if (std::none_of(all_cases().begin(), all_cases().end(), [&](const case_info& i) { return i.id == c; })) {
        std::fprintf(stderr, "toga-bench: unknown case '%s' (toga-bench list shows T1..T14)\n", c.c_str());
        return 2;
      }
      cases.push_back(c);
    }
  }

  // Backends and allocators.
  auto gpu = make_gpu_backend();
  auto sim = make_sim_backend();
  const std::set<std::string> gpu_names = {"toga", "cuda-malloc", "bump-warp", "bump"},
                              sim_names = {"toga-sim", "bump-warp-sim", "bump-sim"};
  std::vector<std::string> want = split(allocators_arg);
  if (want.empty()) {
    if (gpu && !gpu->unavailable()) want = {"toga"};
    else if (sim) want = {"toga-sim"};
    else {
      std::fprintf(stderr, "toga-bench: no backend can run here: %s, and the simulator was not built (install "
                           "libboost-fiber1.81-dev and libtbb-dev, then reconfigure)\n",
                   gpu ? gpu->unavailable()->c_str() : "built without CUDA");
      return 2;
    }
  }
  std::vector<std::string> gpu_allocs, sim_allocs;
  auto add = [](std::vector<std::string>& v, const std::string& a) {
    if (std::find(v.begin(), v.end(), a) == v.end()) v.push_back(a);
  };
  for (const auto& a : want) {
    if (gpu_names.count(a)) {
      if (!gpu) {
        std::fprintf(stderr, "toga-bench: allocator '%s' needs the GPU backend, but toga-bench was built without it "
                             "(%s). Use --allocators toga-sim to run in the simulator.\n", a.c_str(), TOGA_BENCH_NO_GPU_REASON);
        return 2;
      }
      if (auto why = gpu->unavailable()) {
        std::fprintf(stderr, "toga-bench: allocator '%s' cannot run here: %s\n", a.c_str(), why->c_str());
        return 2;
      }
      add(gpu_allocs, a);
    } else if (sim_names.count(a)) {
      if (!sim) {
        std::fprintf(stderr, "toga-bench: allocator '%s' needs the simulator, which was not built (Boost.Fiber 1.81 and "
                             "oneTBB were not found at configure time)\n", a.c_str());
        return 2;
      }
      add(sim_allocs, a);
    } else {
      std::fprintf(stderr,
                   "toga-bench: unknown allocator '%s' (known: toga, cuda-malloc, bump-warp, bump, toga-sim, bump-warp-sim, "
                   "bump-sim)\n",
                   a.c_str());
      return 2;
    }
  }
  if (opt.superbin_sharing > 1 && !sim_allocs.empty()) {
    std::fprintf(stderr, "toga-bench: --superbin-sharing sets the GPU heap's superbin arenas; the simulator's allocators (%s) keep "
                         "one per SM: run them without it\n", sim_allocs.front().c_str());
    return 2;
  }
  if (opt.tenants && !sim_allocs.empty()) {
    std::fprintf(stderr, "toga-bench: --tenants makes the GPU heaps with tenants; the simulator's allocators (%s) have none: run "
                         "them without it\n", sim_allocs.front().c_str());
    return 2;
  }
  if (!presplit_arg.empty() && !sim_allocs.empty()) {
    std::fprintf(stderr, "toga-bench: --presplit-bytes sets the GPU heap's pre-split reserve; the simulator's allocators (%s) have "
                         "none: run them without it\n", sim_allocs.front().c_str());
    return 2;
  }
  if (opt.superbin_bytes != 0 && !sim_allocs.empty()) {
    std::fprintf(stderr, "toga-bench: --superbin-bytes sets the GPU heap's superbins; the simulator's allocators (%s) keep "
                         "toga's choice: run them without it\n", sim_allocs.front().c_str());
    return 2;
  }
  // The references, always in the same run: the floor (bump-warp) beside every allocator, the
  // per-thread bump as an extra row.
  if (!gpu_allocs.empty()) {
    for (const char* r : {"cuda-malloc", "bump-warp", "bump"}) add(gpu_allocs, r);
    std::stable_partition(gpu_allocs.begin(), gpu_allocs.end(), [](const std::string& a) { return a == "toga"; });
  }
  if (!sim_allocs.empty()) {
    for (const char* r : {"bump-warp-sim", "bump-sim"}) add(sim_allocs, r);
    std::stable_partition(sim_allocs.begin(), sim_allocs.end(), [](const std::string& a) { return a == "toga-sim"; });
  }

  // A heap too small for a case point is a usage error now, not a run of nullptrs later.
  for (auto [b, allocs, me] : {std::tuple{gpu.get(), &gpu_allocs, "toga"}, std::tuple{sim.get(), &sim_allocs, "toga-sim"}}) {
    if (allocs->empty() || std::find(allocs->begin(), allocs->end(), me) == allocs->end()) continue;
    for (const auto& c : cases) {
      if (const std::string why = b->heap_problem(c, opt); !why.empty()) {
        std::fprintf(stderr, "toga-bench: %s\n", why.c_str());
        return 2;
      }
    }
  }

  // Graphs for T10/T11.
  const bool wants_graphs = std::any_of(cases.begin(), cases.end(), [](const std::string& c) { return c == "T10" || c == "T11"; });
  if (wants_graphs) {
    std::vector<std::string> paths = graph_args;
    const bool explicit_graphs = !paths.empty();
    if (paths.empty()) {
      if (const char* env = std::getenv("TOGA_GRAPHS"); env && *env) paths.push_back(env);
      else paths.push_back(std::string(TOGA_BENCH_SOURCE_DIR) + "/../shared/data/graphs");
    }
    if (!explicit_graphs && !fs::exists(paths.front())) {
      // The default location is missing (a copy of the repository without ../shared): run the
      // other cases; T10/T11 then report "no graph given" rows.
      std::fprintf(stderr, "toga-bench: no graphs at %s: T10/T11 are skipped (pass --graphs PATH or set TOGA_GRAPHS)\n",
                   paths.front().c_str());
      paths.clear();
    }
    try {
      opt.graphs = expand_graphs(paths);
    } catch (const CLI::ValidationError& e) {
      std::fprintf(stderr, "toga-bench: %s\n", e.what());
      return 2;
    }
    if (opt.graphs.empty() && explicit_graphs) {
      std::fprintf(stderr, "toga-bench: T10/T11 need graphs, and none were found in %s (pass --graphs PATH)\n",
                   paths.front().c_str());
      return 2;
    }
    if (!explicit_graphs && opt.prof == profile::quick && opt.graphs.size() > 2) opt.graphs.resize(2);
    // Every graph is read now (about 0.1 s per shared graph), so that a bad file stops the run
    // before the first case instead of failing T10 after the others ran.
    for (const auto& path : opt.graphs) {
      try {
        const graph g = load_graph(path);
        (void)make_graph_plan(g, 1, 1, opt.seed);  // its own checks: 2 vertices, an edge, 32-bit sizes
      } catch (const std::bad_alloc&) {
        std::fprintf(stderr, "toga-bench: graph %s: out of host memory while reading it (it is within toga-bench's "
                             "limits; see docs/benchmarks.md)\n", path.c_str());
        return 1;
      } catch (const std::exception& e) {
        std::fprintf(stderr, "toga-bench: bad graph file for T10/T11: %s\n", e.what());
        return 1;
      }
    }
  }

  // The header of the JSON document.
  nlohmann::json header;
  {
    header["command"] = command_line(argc, argv, "");
    header["profile"] = profile_arg;
    header["reps"] = opt.reps;
    header["seed"] = opt.seed;
    // The source tree's commit; where the binary was carried elsewhere, the working directory's.
    std::string commit, src;
    for (std::string dir : {std::string(TOGA_BENCH_SOURCE_DIR), std::string(".")}) {
      commit = shell("git -C '" + dir + "' rev-parse HEAD 2>/dev/null");
      if (!commit.empty()) {
        src = dir;
        break;
      }
    }
    if (!commit.empty() && !shell("git -C '" + src + "' status --porcelain --untracked-files=no 2>/dev/null").empty())
      commit += "-dirty";
    if (const char* c = std::getenv("TOGA_COMMIT"); c && *c) commit = c;  // a copy without .git (the GPU machine)
    header["commit"] = commit.empty() ? "unknown" : commit;
    const auto now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
    char when[64];
    std::strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
    header["date"] = when;
    header["graphs"] = opt.graphs;
    if (!gpu_allocs.empty() && gpu) header["environment"]["gpu"] = gpu->environment();
    if (!sim_allocs.empty() && sim) header["environment"]["sim"] = sim->environment();
  }

  console_sink out(!no_progress);
  int status = 0;
  nlohmann::json errors = nlohmann::json::array();
  std::vector<case_error> case_errors;
  const auto t_start = std::chrono::steady_clock::now();
  for (std::size_t ci = 0; ci < cases.size(); ++ci) {
    const std::string& c = cases[ci];
    for (auto [b, allocs] : {std::pair{gpu.get(), &gpu_allocs}, std::pair{sim.get(), &sim_allocs}}) {
      if (allocs->empty()) continue;
      const auto t0 = std::chrono::steady_clock::now();
      const std::size_t before = out.rows.size();
      out.start_case(c, ci + 1, cases.size(),
                     c + " " + std::find_if(all_cases().begin(), all_cases().end(), [&](const case_info& i) { return i.id == c; })->name +
                         " (" + b->name() + ")");
      try {
        b->run_case(c, *allocs, opt, out);
      } catch (const std::exception& e) {
        const std::string replay = command_line(argc, argv, c);
        out.done_line("toga-bench: " + c + " on the " + b->name() + " backend failed: " + e.what() + "\n  replay: " + replay);
        errors.push_back({{"case", c}, {"backend", b->name()}, {"error", e.what()}, {"replay", replay}});
        case_errors.push_back({c, b->name(), e.what()});
        status = 1;
        continue;
      }
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      char line[160];
      std::snprintf(line, sizeof line, "  %-4s %-28s %3zu rows  %7.1f s  (%s)", c.c_str(),
                    std::find_if(all_cases().begin(), all_cases().end(), [&](const case_info& i) { return i.id == c; })->name.c_str(),
                    out.rows.size() - before, s, b->name().c_str());
      out.done_line(line);
    }
  }
  const double total_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_start).count();

  const auto rows = with_ratios(out.rows);
  std::printf("\n");
  print_table(stdout, rows);
  std::printf("\n");
  print_summary(stdout, rows, cases, case_errors);
  std::uint64_t corrupt = 0, failures = 0;
  for (const auto& r : rows) {
    corrupt += r.r.corrupt;
    // T8 counts no failures by design (its nullptrs are the exhaustion it measures).
    if (r.r.allocator == "toga" || r.r.allocator == "toga-sim") failures += r.r.failures;
  }
  std::printf("%zu rows in %.1f s; toga's nullptrs where memory was available: %llu; corrupt blocks: %llu%s\n",
              rows.size(), total_s, static_cast<unsigned long long>(failures), static_cast<unsigned long long>(corrupt),
              errors.empty() ? "" : "; cases failed to run (above)");
  if (!json_path.empty()) {
    header["seconds"] = total_s;
    header["errors"] = errors;
    header["summary"] = summary_json(rows, cases, case_errors);
    std::ofstream f(json_path);
    f << to_json(rows, header).dump(1) << "\n";
    f.close();
    if (!f) {
      std::fprintf(stderr, "toga-bench: cannot write %s (%s)\n", json_path.c_str(), std::strerror(errno));
      return 1;
    }
    std::printf("JSON: %s\n", json_path.c_str());
  }
  if (corrupt) return 3;
  if (status != 0) return status;
  if (failures) {
    std::fprintf(stderr, "toga-bench: toga returned nullptr %llu times where memory was available (rows with fail > 0 "
                         "above); exit status 4\n", static_cast<unsigned long long>(failures));
    return 4;
  }
  return 0;
}
