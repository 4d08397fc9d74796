// toga-bench's command line fed bad input: every case asserts the exit status (2 usage, 1 bad
// input file) and the message, and that nothing ran (no table) when the input was refused.
// The binary is TOGA_BENCH_EXE (CMake passes $<TARGET_FILE:toga-bench>).
#include <gtest/gtest.h>
#include <pty.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#ifndef TOGA_BENCH_EXE
#error "TOGA_BENCH_EXE must name the toga-bench binary"
#endif

namespace {

namespace fs = std::filesystem;

struct outcome {
  int status = -1;  //!< exit status, or 128 + signal
  std::string out;  //!< stdout and stderr together
};

outcome run(const std::string& args) {
  const std::string cmd = std::string(TOGA_BENCH_EXE) + " " + args + " 2>&1 </dev/null";
  outcome o;
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return o;
  char buf[4096];
  std::size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) o.out.append(buf, n);
  const int st = pclose(p);
  o.status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  return o;
}

//! Runs toga-bench with `args` on a pseudo-terminal (stdout and stderr both), as a user at a
//! terminal would; returns everything it wrote.
outcome run_on_terminal(const std::string& args) {
  outcome o;
  int master = -1;
  const pid_t pid = forkpty(&master, nullptr, nullptr, nullptr);
  if (pid < 0) return o;
  if (pid == 0) {
    const std::string cmd = std::string(TOGA_BENCH_EXE) + " " + args + " </dev/null";
    execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  char buf[4096];
  for (;;) {
    const ssize_t n = ::read(master, buf, sizeof buf);
    if (n > 0) o.out.append(buf, static_cast<std::size_t>(n));
    else if (n < 0 && errno == EINTR) continue;
    else break;  // EIO: the child closed the terminal
  }
  ::close(master);
  int st = 0;
  waitpid(pid, &st, 0);
  o.status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  return o;
}

bool has(const outcome& o, const std::string& s) { return o.out.find(s) != std::string::npos; }

//! The table's header: present only when cases ran.
bool ran_cases(const outcome& o) { return has(o, "M ops/s"); }

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream ss(text);
  for (std::string l; std::getline(ss, l);) out.push_back(l);
  return out;
}

class BenchCli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("toga_bench_cli_" + std::to_string(::getpid()) + "_" + ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  std::string write(const std::string& name, const std::string& bytes) {
    const std::string path = (dir_ / name).string();
    std::ofstream(path, std::ios::binary) << bytes;
    return path;
  }
  fs::path dir_;
};

#define EXPECT_REFUSED(o, code, text)                                        \
  do {                                                                       \
    EXPECT_EQ((o).status, (code)) << (o).out;                                \
    EXPECT_TRUE(has((o), (text))) << "expected \"" << (text) << "\" in:\n" << (o).out; \
    EXPECT_FALSE(ran_cases(o)) << "a refused command must not run cases:\n" << (o).out; \
  } while (0)

// ---- usage errors: exit 2 (CLI11's own codes 105-109 used to leak out) ----

TEST_F(BenchCli, MissingSubcommand) { EXPECT_REFUSED(run(""), 2, "A subcommand is required"); }
TEST_F(BenchCli, UnknownFlag) { EXPECT_REFUSED(run("run --bogus"), 2, "--bogus"); }
TEST_F(BenchCli, RepsOutOfRange) { EXPECT_REFUSED(run("run --reps 0"), 2, "--reps: Value 0 not in range 1 to 1000"); }
TEST_F(BenchCli, UnknownProfile) { EXPECT_REFUSED(run("run --profile fast"), 2, "--profile: fast not in {quick,full}"); }
TEST_F(BenchCli, HelpIsNotAnError) {
  const outcome o = run("run --help");
  EXPECT_EQ(o.status, 0) << o.out;
  EXPECT_TRUE(has(o, "--allocators")) << o.out;
}

TEST_F(BenchCli, EmptyListsNameNothing) {
  EXPECT_REFUSED(run("run --cases ,"), 2, "toga-bench: --cases ',' names nothing");
  EXPECT_REFUSED(run("run --cases ''"), 2, "toga-bench: --cases '' names nothing");
  EXPECT_REFUSED(run("run --sizes ,,"), 2, "toga-bench: --sizes ',,' names nothing");
  EXPECT_REFUSED(run("run --threads ,"), 2, "toga-bench: --threads ',' names nothing");
  EXPECT_REFUSED(run("run --allocators ,"), 2, "toga-bench: --allocators ',' names nothing");
}

TEST_F(BenchCli, UnknownNamesAndBadNumbers) {
  EXPECT_REFUSED(run("run --cases T1,T99"), 2, "unknown case 'T99'");
  EXPECT_REFUSED(run("run --allocators mimalloc"), 2, "unknown allocator 'mimalloc' (known: toga, cuda-malloc, bump-warp, bump");
  EXPECT_REFUSED(run("run --sizes 4X"), 2, "'4X' is not a number");
  EXPECT_REFUSED(run("run --sizes -16"), 2, "'-16' is not a number");
  EXPECT_REFUSED(run("run --threads 0"), 2, "--threads: 0 is outside 1 .. 16M");
  EXPECT_REFUSED(run("run --heap 1K"), 2, "--heap: 1K is outside 4 KiB .. 128 GiB");
  EXPECT_REFUSED(run("run --superbin-bytes 3K"), 2, "--superbin-bytes: 3K is not a power of two in 8K .. 2M");
  EXPECT_REFUSED(run("run --superbin-bytes 4M"), 2, "--superbin-bytes: 4M is not a power of two in 8K .. 2M");
  EXPECT_REFUSED(run("run --superbin-bytes x"), 2, "'x' is not a number");
  // the option sets the GPU heap's superbins; the simulator's heaps do not take it
  EXPECT_REFUSED(run("run --allocators toga-sim --superbin-bytes 1M"), 2, "--superbin-bytes sets the GPU heap's superbins");
  EXPECT_REFUSED(run("run --superbin-sharing 2000"), 2, "--superbin-sharing");
  EXPECT_REFUSED(run("run --superbin-sharing -1"), 2, "--superbin-sharing");
  EXPECT_REFUSED(run("run --allocators toga-sim --superbin-sharing 4"), 2, "--superbin-sharing sets the GPU heap's superbin arenas");
  EXPECT_REFUSED(run("run --presplit-bytes lots"), 2, "--presplit-bytes: lots is not a byte count (give e.g. 0, 512M or half)");
  EXPECT_REFUSED(run("run --allocators toga-sim --presplit-bytes 0"), 2, "--presplit-bytes sets the GPU heap's pre-split reserve");
}

// The --json path is checked before the run, not after it.
TEST_F(BenchCli, UnwritableJsonIsRefusedBeforeTheRun) {
  EXPECT_REFUSED(run("run --cases T1 --json " + (dir_ / "missing-folder" / "x.json").string()), 2,
                 "--json: cannot write '" + (dir_ / "missing-folder" / "x.json").string() + "' (No such file or directory)");
  EXPECT_REFUSED(run("run --cases T1 --json " + dir_.string()), 2, "(it is a directory)");
  EXPECT_FALSE(fs::exists(dir_ / "missing-folder"));
}

// A heap too small for a case point is a usage error before the run, naming the point and the fix
// (it used to run every case and exit 0 after 6,144 nullptrs).
TEST_F(BenchCli, HeapTooSmallForACase) {
  EXPECT_REFUSED(run("run --allocators toga-sim --cases T1 --heap 4K"), 2,
                 "toga-bench: T1 16 B x 1024 threads needs about 4.0 MiB of toga-sim heap");
  EXPECT_REFUSED(run("run --allocators toga-sim --cases T1 --heap 4K"), 2, "--heap 4 KiB gives 4 KiB: use --heap 8 MiB or more");
  EXPECT_REFUSED(run("run --allocators toga-sim --cases T5 --sizes 4K --heap 1M"), 2, "T5 4 KiB x 256 threads");
}

// ---- bad graph files: exit 1, before any case runs, naming the file and the limit ----

TEST_F(BenchCli, GraphHeaderDeclaringTwoToThe32Rows) {
  // Used to pass the loader and crash make_graph_plan (32-bit narrowing).
  const std::string g = write("big.mtx", "%%MatrixMarket matrix coordinate pattern symmetric\n4294967296 4294967296 1\n2 1\n");
  EXPECT_REFUSED(run("run --allocators toga-sim --cases T10 --graphs " + g), 1,
                 g + ":2: expected at most 67108864 rows (toga-bench's limit on vertices, graph_limits::max_vertices)");
}

TEST_F(BenchCli, GraphHeaderDeclaringThreeBillionVerticesOrEntries) {
  const std::string g = write("v.mtx", "%%MatrixMarket matrix coordinate pattern general\n3000000000 3000000000 1\n2 1\n");
  EXPECT_REFUSED(run("run --allocators toga-sim --cases T11 --graphs " + g), 1, g + ":2: expected at most 67108864 rows");
  const std::string e = write("e.mtx", "%%MatrixMarket matrix coordinate pattern general\n10 10 3000000000\n2 1\n");
  EXPECT_REFUSED(run("run --allocators toga-sim --cases T11 --graphs " + e), 1,
                 e + ":2: expected at most 67108864 entries (toga-bench's limit, graph_limits::max_entries)");
}

TEST_F(BenchCli, DevZeroIsNotAGraph) {
  EXPECT_REFUSED(run("run --allocators toga-sim --cases T10 --graphs /dev/zero"), 1,
                 "/dev/zero: expected a regular file or a pipe, found a character device");
}

// A 1 MiB gzip file that inflates to 1.1 GiB: refused while counting, without holding the text.
TEST_F(BenchCli, GzipBombIsRefusedAtTheLimit) {
  std::string zeros(1 << 20, '\0');
  z_stream zs{};
  ASSERT_EQ(deflateInit2(&zs, 9, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY), Z_OK);
  std::string member(deflateBound(&zs, zeros.size()), '\0');
  zs.next_in = reinterpret_cast<Bytef*>(zeros.data());
  zs.avail_in = static_cast<uInt>(zeros.size());
  zs.next_out = reinterpret_cast<Bytef*>(member.data());
  zs.avail_out = static_cast<uInt>(member.size());
  ASSERT_EQ(deflate(&zs, Z_FINISH), Z_STREAM_END);
  member.resize(zs.total_out);
  deflateEnd(&zs);
  std::string bomb;
  for (int i = 0; i < 1100; ++i) bomb += member;  // concatenated members: one 1.1 GiB stream
  const std::string g = write("bomb.txt.gz", bomb);
  EXPECT_REFUSED(run("run --allocators toga-sim --cases T10 --graphs " + g), 1,
                 g + ": expected at most 1 GiB of decompressed graph text (toga-bench's limit on input bytes, graph_limits::max_bytes)");
}

TEST_F(BenchCli, MalformedGraphNamesFileAndLine) {
  const std::string g = write("bad.txt", "0 1\n1 2\n2 x\n");
  EXPECT_REFUSED(run("run --allocators toga-sim --cases T1,T10 --graphs " + g), 1, g + ":3: expected two node ids, found \"2 x\"");
  const std::string empty = write("empty.mtx", "%%MatrixMarket matrix coordinate pattern general\n4 4 0\n");
  EXPECT_REFUSED(run("run --allocators toga-sim --cases T10 --graphs " + empty), 1, "graph empty: has no edges");
}

TEST_F(BenchCli, MissingGraphPathIsAUsageError) {
  EXPECT_REFUSED(run("run --allocators toga-sim --cases T10 --graphs " + (dir_ / "nope.txt").string()), 2, "does not exist");
  EXPECT_REFUSED(run("run --allocators toga-sim --cases T10 --graphs " + dir_.string()), 2, "T10/T11 need graphs, and none were found");
}

// Where the GPU backend is built but no GPU is present, a GPU allocator is a usage error.
// A GPU allocator where none can run: refused with exit 2 and the reason, whether the GPU backend
// is built (no CUDA device) or not (no nvcc, or no GPU visible at configure time). On a machine
// with a GPU the request is valid, and the test checks that list says "available".
TEST_F(BenchCli, GpuAllocatorWithoutAGpu) {
  const outcome l = run("list");
  ASSERT_EQ(l.status, 0) << l.out;
  if (has(l, "cannot run here: no CUDA device")) {
    EXPECT_REFUSED(run("run --allocators bump-warp --cases T1"), 2, "allocator 'bump-warp' cannot run here: no CUDA device");
  } else if (has(l, "not built (")) {
    EXPECT_REFUSED(run("run --allocators bump-warp --cases T1"), 2,
                   "allocator 'bump-warp' needs the GPU backend, but toga-bench was built without it");
  } else {
    EXPECT_TRUE(has(l, "available")) << l.out;
  }
}

// ---- a good run still passes, with the floor reference beside toga-sim ----

TEST_F(BenchCli, SmallRunExitsZeroWithTheFloorReference) {
  const std::string json = (dir_ / "r.json").string();
  const outcome o = run("run --allocators toga-sim --cases T1 --sizes 64 --threads 64 --reps 1 --no-progress --json " + json);
  ASSERT_EQ(o.status, 0) << o.out;
  EXPECT_TRUE(has(o, "x floor: throughput / bump-warp-sim's")) << o.out;
  std::ifstream f(json);
  const auto doc = nlohmann::json::parse(f);
  EXPECT_EQ(doc.at("schema"), "toga-bench/2");
  unsigned floor_rows = 0;
  for (const auto& r : doc.at("rows")) {
    if (r.at("allocator") == "bump-warp-sim") {
      ++floor_rows;
      EXPECT_DOUBLE_EQ(r.at("ratio_bump").get<double>(), 1.0);
    }
  }
  EXPECT_EQ(floor_rows, 2u) << "alloc and free";
}

// ---- what a user reads: the table, the summary, the progress -------------------------------------

// A small simulator run ends with the summary: one line per case asked for, pass, both
// references named, host time said once; the table fits 120 columns and the summary 100; the
// JSON carries the summary too.
TEST_F(BenchCli, SummaryEndsTheRunAndFits) {
  const std::string json = (dir_ / "s.json").string();
  const outcome o = run("run --allocators toga-sim --cases T1,T12,T13 --sizes 64 --threads 64 --reps 2 --no-progress --json " + json);
  ASSERT_EQ(o.status, 0) << o.out;
  const auto lines = lines_of(o.out);
  std::size_t summary = lines.size(), widest_table = 0, widest_summary = 0;
  for (std::size_t i = 0; i < lines.size(); ++i)
    if (lines[i].rfind("Summary of toga-sim", 0) == 0) summary = i;
  ASSERT_LT(summary, lines.size()) << o.out;
  for (std::size_t i = 0; i < lines.size(); ++i) {
    std::size_t& widest = i < summary ? widest_table : widest_summary;
    widest = std::max(widest, lines[i].size());
  }
  EXPECT_LE(widest_table, 120u) << o.out;
  EXPECT_LE(widest_summary, 100u) << o.out;
  std::map<std::string, std::string> by_case;
  for (std::size_t i = summary; i < lines.size(); ++i)
    for (const char* c : {"T1 ", "T12 ", "T13 "})
      if (lines[i].rfind(c, 0) == 0) by_case[c] = lines[i];
  ASSERT_EQ(by_case.size(), 3u) << o.out;
  EXPECT_NE(by_case["T1 "].find(" pass "), std::string::npos) << by_case["T1 "];
  EXPECT_NE(by_case["T1 "].find("x floor"), std::string::npos) << "T1's figure: the alloc ratio, " << by_case["T1 "];
  EXPECT_NE(by_case["T12 "].find("init 8 GiB heap: "), std::string::npos) << by_case["T12 "];
  EXPECT_EQ(by_case["T12 "].find("e-0"), std::string::npos) << "T12 prints no 6e-05x ratio: " << by_case["T12 "];
  // T13: registers are not measured in the simulator: no ratio, result "-", the reason
  std::istringstream t13(by_case["T13 "]);
  std::vector<std::string> cells;
  for (std::string c; t13 >> c;) cells.push_back(c);
  ASSERT_GE(cells.size(), 6u) << by_case["T13 "];
  EXPECT_EQ(cells[2] + cells[3] + cells[4], "---") << by_case["T13 "];
  EXPECT_NE(by_case["T13 "].find("GPU"), std::string::npos) << by_case["T13 "];
  std::size_t host = 0;
  for (std::size_t p = o.out.find("host time, for"); p != std::string::npos; p = o.out.find("host time, for", p + 1)) ++host;
  EXPECT_EQ(host, 1u) << o.out;
  EXPECT_TRUE(has(o, "2 pass, 0 FAIL, 1 not measured on this backend (-)")) << o.out;
  std::ifstream f(json);
  const auto doc = nlohmann::json::parse(f);
  ASSERT_TRUE(doc.at("summary").is_array());
  ASSERT_EQ(doc.at("summary").size(), 3u);
  EXPECT_EQ(doc.at("summary")[0].at("result"), "pass");
  EXPECT_EQ(doc.at("summary")[0].at("second"), "bump-sim");
}

// Progress: on a terminal, a line per case rewritten in place ("[1/2 T1 0:00] ..."); with
// --no-progress, or when stderr is not a terminal (a log), none of it.
TEST_F(BenchCli, ProgressOnATerminalOnly) {
  const std::string args = "run --allocators toga-sim --cases T1,T12 --sizes 64 --threads 64 --reps 1";
  const outcome tty = run_on_terminal(args);
  ASSERT_EQ(tty.status, 0) << tty.out;
  EXPECT_TRUE(has(tty, "[1/2 T1 0:")) << tty.out;
  EXPECT_TRUE(has(tty, "[2/2 T12 0:")) << tty.out;
  EXPECT_TRUE(has(tty, "\r\033[K")) << "the progress line is rewritten in place";
  const outcome quiet = run_on_terminal(args + " --no-progress");
  ASSERT_EQ(quiet.status, 0) << quiet.out;
  EXPECT_FALSE(has(quiet, "[1/2 T1")) << quiet.out;
  EXPECT_FALSE(has(quiet, "\033[K")) << quiet.out;
  EXPECT_TRUE(has(quiet, "T1   alloc / free")) << "the line per case stays: " << quiet.out;
  const outcome log = run(args);  // stdout and stderr into a pipe
  ASSERT_EQ(log.status, 0) << log.out;
  EXPECT_FALSE(has(log, "[1/2 T1")) << log.out;
  EXPECT_EQ(log.out.find('\r'), std::string::npos) << "no carriage returns in a log";
  EXPECT_TRUE(has(log, "T12  init")) << log.out;
}

}  // namespace
