// In-tree fuzz driver: a deterministic mutation loop around one target's LLVMFuzzerTestOneInput
// (see fuzz_target.hpp). It needs only g++ (CI installs no clang); the fuzz executables are
// built with AddressSanitizer and UndefinedBehaviorSanitizer where the compiler has them.
//
//   fuzz_X [--seeds DIR_OR_FILE]... [--seed-filter SUBSTR] [--seed-gunzip] [--max-seed-bytes N]
//          [--regressions DIR] [--seconds S] [--runs N] [--seed K] [--timeout S] [--crash-dir DIR]
//   fuzz_X --replay FILE...
//
// Order: every regression input (a crash or hang found earlier, kept in tests/fuzz/regressions/
// <target>/), every seed, then mutants until --seconds or --runs is reached. A mutant is a seed
// or an earlier mutant from the pool with 1-4 edits: bit flips, interesting bytes, inserted or
// deleted or duplicated ranges, dictionary tokens, interesting numbers in place of a number,
// splices of two inputs, truncation. For a gzip-aware target a mutant is, at random, a mutated
// text compressed at a random level (possibly corrupted, truncated or followed by another
// member) or raw edits of a compressed seed. The sequence depends only on --seed, the seeds and
// the run count: a failure prints the seed and the run number, and the input itself is saved.
//
// A failure is an abort, a fatal signal, a sanitizer report or an input that runs longer than
// --timeout (default 10 s): the input is written to --crash-dir (default: the working directory)
// as crash-<target>-<hash>, with the command that replays it; exit status 1. Missing seed
// folders are skipped with a note (a fresh clone has no ../shared). Exit status 2: usage.
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "fuzz_target.hpp"

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/common_interface_defs.h>
#endif

namespace {

namespace fs = std::filesystem;
using bytes = std::string;

// ---- crash capture (async-signal-safe: only open/write/close/_exit after setup) ----------------

const std::uint8_t* g_input = nullptr;
std::size_t g_size = 0;
char g_crash_path[4096];
char g_message[8192];
int g_timeout = 10;

void write_all(int fd, const void* p, std::size_t n) {
  const char* c = static_cast<const char*>(p);
  while (n > 0) {
    const ssize_t w = ::write(fd, c, n);
    if (w <= 0) return;
    c += w;
    n -= static_cast<std::size_t>(w);
  }
}

void save_current_input() {
  if (g_input == nullptr && g_size != 0) return;
  const int fd = ::open(g_crash_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd >= 0) {
    write_all(fd, g_input, g_size);
    ::close(fd);
  }
  write_all(2, g_message, std::strlen(g_message));
}

extern "C" void on_fatal(int sig) {
  const char* what = sig == SIGALRM ? "\nfuzz: HANG: the input ran longer than the timeout\n" : "\nfuzz: CRASH: fatal signal\n";
  write_all(2, what, std::strlen(what));
  save_current_input();
  ::_exit(1);
}

#if defined(__SANITIZE_ADDRESS__)
extern "C" void on_sanitizer_death() { save_current_input(); }
#endif

void install_handlers() {
  struct sigaction sa {};
  sa.sa_handler = on_fatal;
  sigemptyset(&sa.sa_mask);
  ::sigaction(SIGALRM, &sa, nullptr);
  ::sigaction(SIGABRT, &sa, nullptr);
#if defined(__SANITIZE_ADDRESS__)
  __sanitizer_set_death_callback(on_sanitizer_death);  // ASan reports SEGV and friends itself
#else
  for (int s : {SIGSEGV, SIGBUS, SIGFPE, SIGILL}) ::sigaction(s, &sa, nullptr);
#endif
}

std::uint64_t fnv1a(const bytes& b) {
  std::uint64_t h = 1469598103934665603ull;
  for (unsigned char c : b) h = (h ^ c) * 1099511628211ull;
  return h;
}

//! Runs one input with the crash file and the replay message prepared beforehand.
void run_one(const bytes& in, const std::string& target, const std::string& dir, const std::string& exe, const std::string& origin) {
  char name[64];
  std::snprintf(name, sizeof name, "crash-%s-%016llx", target.c_str(), static_cast<unsigned long long>(fnv1a(in)));
  const std::string path = (fs::path(dir) / name).string();
  std::snprintf(g_crash_path, sizeof g_crash_path, "%s", path.c_str());
  std::snprintf(g_message, sizeof g_message,
                "fuzz: target %s, input %s (%zu bytes) saved as %s\n"
                "fuzz: replay: %s --replay %s\n"
                "fuzz: keep it as a regression test: copy it to tests/fuzz/regressions/%s/ once fixed\n",
                target.c_str(), origin.c_str(), in.size(), path.c_str(), exe.c_str(), path.c_str(), target.c_str());
  g_input = reinterpret_cast<const std::uint8_t*>(in.data());
  g_size = in.size();
  ::alarm(static_cast<unsigned>(g_timeout));
  LLVMFuzzerTestOneInput(g_input, g_size);
  ::alarm(0);
  g_input = nullptr;
  g_size = 0;
}

// ---- inputs ----------------------------------------------------------------------------------

bytes read_file(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return bytes(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

bool is_gzip(const bytes& b) { return b.size() >= 2 && static_cast<unsigned char>(b[0]) == 0x1f && static_cast<unsigned char>(b[1]) == 0x8b; }

//! At most `limit` bytes of the decompressed text (a prefix is enough for a seed).
bytes gunzip_prefix(const bytes& in, std::size_t limit) {
  z_stream zs{};
  if (inflateInit2(&zs, 16 + MAX_WBITS) != Z_OK) return {};
  bytes out(limit, '\0');
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  zs.avail_in = static_cast<uInt>(std::min<std::size_t>(in.size(), 1u << 30));
  zs.next_out = reinterpret_cast<Bytef*>(out.data());
  zs.avail_out = static_cast<uInt>(out.size());
  inflate(&zs, Z_SYNC_FLUSH);
  out.resize(out.size() - zs.avail_out);
  inflateEnd(&zs);
  return out;
}

bytes gzip(const bytes& text, int level) {
  z_stream zs{};
  if (deflateInit2(&zs, level, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY) != Z_OK) return {};
  bytes out(deflateBound(&zs, text.size()), '\0');
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(text.data()));
  zs.avail_in = static_cast<uInt>(text.size());
  zs.next_out = reinterpret_cast<Bytef*>(out.data());
  zs.avail_out = static_cast<uInt>(out.size());
  deflate(&zs, Z_FINISH);
  out.resize(zs.total_out);
  deflateEnd(&zs);
  return out;
}

//! Cuts a text seed at the last line end within `limit` bytes.
bytes cut(bytes b, std::size_t limit) {
  if (b.size() <= limit) return b;
  b.resize(limit);
  const std::size_t nl = b.rfind('\n');
  if (nl != bytes::npos && nl > limit / 2) b.resize(nl + 1);
  return b;
}

// ---- the mutator -----------------------------------------------------------------------------

struct rng {
  std::uint64_t s;
  std::uint64_t next() {  // splitmix64
    std::uint64_t z = (s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  std::size_t below(std::size_t n) { return n == 0 ? 0 : static_cast<std::size_t>(next() % n); }
};

const char* const kNumbers[] = {"0", "1", "2", "-1", "255", "256", "65535", "65536", "65537", "2147483648", "4294967295",
                                "4294967296", "67108864", "67108865", "18446744073709551615", "18446744073709551616",
                                "99999999999999999999999", "1e18", "3000000000"};

void mutate_once(bytes& b, rng& r, const std::vector<std::string>& dict, const std::vector<bytes>& pool) {
  static const char interesting[] = {'\0', '\n', '\r', ' ', '\t', '0', '1', '9', '-', '+', '.', '%', '#', 'e', '"', '{', '}',
                                     '[', ']', ',', ':', '\x7f', '\x80', '\xff'};
  const std::size_t n = b.size();
  switch (r.below(10)) {
    case 0:  // flip a bit
      if (n) b[r.below(n)] ^= static_cast<char>(1u << r.below(8));
      break;
    case 1:  // an interesting byte
      if (n) b[r.below(n)] = interesting[r.below(sizeof interesting)];
      break;
    case 2: {  // insert random bytes
      bytes ins(1 + r.below(8), '\0');
      for (char& c : ins) c = static_cast<char>(r.next());
      b.insert(r.below(n + 1), ins);
      break;
    }
    case 3:  // delete a range
      if (n) {
        const std::size_t at = r.below(n);
        b.erase(at, 1 + r.below(std::min<std::size_t>(16, n - at)));
      }
      break;
    case 4:  // duplicate a range elsewhere
      if (n) {
        const std::size_t at = r.below(n);
        const bytes chunk = b.substr(at, 1 + r.below(std::min<std::size_t>(64, n - at)));
        b.insert(r.below(b.size() + 1), chunk);
      }
      break;
    case 5:
    case 6:  // a dictionary token
      if (!dict.empty()) b.insert(r.below(n + 1), dict[r.below(dict.size())]);
      break;
    case 7: {  // an interesting number in place of a run of digits
      if (!n) break;
      std::size_t at = r.below(n);
      while (at < n && !(b[at] >= '0' && b[at] <= '9')) ++at;
      if (at == n) break;
      std::size_t end = at;
      while (end < n && b[end] >= '0' && b[end] <= '9') ++end;
      b.replace(at, end - at, kNumbers[r.below(std::size(kNumbers))]);
      break;
    }
    case 8:  // splice with another input
      if (!pool.empty()) {
        const bytes& o = pool[r.below(pool.size())];
        b = b.substr(0, r.below(n + 1)) + o.substr(r.below(o.size() + 1));
      }
      break;
    default:  // truncate
      if (n) b.resize(r.below(n));
      break;
  }
  if (b.size() > (std::size_t{1} << 20)) b.resize(std::size_t{1} << 20);
}

int usage(const char* why) {
  std::fprintf(stderr, "fuzz: %s\nusage: fuzz_TARGET [--seeds DIR_OR_FILE]... [--seed-filter SUBSTR] [--seed-gunzip] "
                       "[--max-seed-bytes N] [--regressions DIR] [--seconds S] [--runs N] [--seed K] [--timeout S] "
                       "[--crash-dir DIR] | --replay FILE...\n", why);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  const toga::fuzz::target_info& info = toga::fuzz::toga_fuzz_info();
  std::vector<std::string> seed_paths, replay;
  std::string filter, regressions, crash_dir = ".";
  bool seed_gunzip = false;
  std::size_t max_seed = 16384;
  double seconds = 10;
  std::uint64_t runs = 0, seed = 1;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::exit(usage((a + " needs a value").c_str()));
      }
      return argv[++i];
    };
    try {
      if (a == "--seeds") seed_paths.push_back(value());
      else if (a == "--seed-filter") filter = value();
      else if (a == "--seed-gunzip") seed_gunzip = true;
      else if (a == "--max-seed-bytes") max_seed = std::stoull(value());
      else if (a == "--regressions") regressions = value();
      else if (a == "--seconds") seconds = std::stod(value());
      else if (a == "--runs") runs = std::stoull(value());
      else if (a == "--seed") seed = std::stoull(value());
      else if (a == "--timeout") g_timeout = std::stoi(value());
      else if (a == "--crash-dir") crash_dir = value();
      else if (a == "--replay") {
        while (i + 1 < argc) replay.push_back(argv[++i]);
      } else return usage(("unknown argument '" + a + "'").c_str());
    } catch (const std::exception&) {
      return usage(("'" + a + "' needs a number").c_str());
    }
  }
  if (g_timeout <= 0 || seconds < 0) return usage("--timeout and --seconds must be positive");
  install_handlers();
  const std::string exe = argv[0];

  if (!replay.empty()) {
    for (const auto& f : replay) {
      if (!fs::is_regular_file(f)) return usage(("--replay: '" + f + "' is not a file").c_str());
      run_one(read_file(f), info.name, crash_dir, exe, f);
      std::printf("fuzz: %s: %s passes\n", info.name, f.c_str());
    }
    return 0;
  }

  // Regressions first: each once, exactly as saved.
  std::size_t regression_count = 0;
  if (!regressions.empty() && fs::is_directory(regressions)) {
    std::vector<fs::path> files;
    for (const auto& e : fs::directory_iterator(regressions))
      if (e.is_regular_file()) files.push_back(e.path());
    std::sort(files.begin(), files.end());
    for (const auto& f : files) {
      run_one(read_file(f), info.name, crash_dir, exe, f.string());
      ++regression_count;
    }
  }

  // Seeds: texts for text targets; for gzip-aware targets the texts (compressed by the mutator)
  // and the compressed files as they are.
  std::vector<bytes> texts, raw;
  for (const auto& p : seed_paths) {
    std::vector<fs::path> files;
    if (fs::is_directory(p)) {
      for (const auto& e : fs::directory_iterator(p))
        if (e.is_regular_file()) files.push_back(e.path());
    } else if (fs::is_regular_file(p)) {
      files.push_back(p);
    } else {
      std::printf("fuzz: %s: no seeds at %s (skipped)\n", info.name, p.c_str());
      continue;
    }
    std::sort(files.begin(), files.end());
    for (const auto& f : files) {
      if (!filter.empty() && f.filename().string().find(filter) == std::string::npos) continue;
      bytes b = read_file(f);
      if (is_gzip(b)) {
        if (info.gzip_aware) raw.push_back(b.substr(0, max_seed));
        if (seed_gunzip || info.gzip_aware) texts.push_back(cut(gunzip_prefix(b, max_seed), max_seed));
      } else {
        texts.push_back(cut(std::move(b), max_seed));
      }
    }
  }
  if (texts.empty()) texts.push_back("");
  std::uint64_t executed = 0;
  for (const auto& t : texts) {
    run_one(info.gzip_aware ? gzip(t, 6) : t, info.name, crash_dir, exe, "seed");
    ++executed;
  }
  for (const auto& b : raw) {
    run_one(b, info.name, crash_dir, exe, "seed");
    ++executed;
  }

  // Mutants.
  rng r{seed * 0x9e3779b97f4a7c15ull + 1};
  std::vector<bytes> pool = texts;
  const auto start = std::chrono::steady_clock::now();
  const auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); };
  std::uint64_t mutants = 0;
  while ((runs == 0 || mutants < runs) && (runs != 0 || elapsed() < seconds)) {
    bytes in;
    if (info.gzip_aware && !raw.empty() && r.below(4) == 0) {
      in = raw[r.below(raw.size())];  // raw edits of a compressed seed
      for (std::size_t k = 1 + r.below(3); k > 0; --k) mutate_once(in, r, {}, {});
    } else {
      bytes t = pool[r.below(pool.size())];
      for (std::size_t k = 1 + r.below(4); k > 0; --k) mutate_once(t, r, info.dictionary, pool);
      if (r.below(10) == 0) {
        if (pool.size() < 512) pool.push_back(t);
        else pool[r.below(pool.size())] = t;
      }
      in = t;
      if (info.gzip_aware) {
        in = gzip(t, 1 + static_cast<int>(r.below(9)));
        switch (r.below(8)) {
          case 0: mutate_once(in, r, {}, {}); break;                            // corrupt
          case 1: if (!in.empty()) in.resize(r.below(in.size())); break;         // truncate
          case 2: in += gzip(pool[r.below(pool.size())], 6); break;             // another member
          case 3: in += "junk"; break;                                         // trailing data
          default: break;
        }
      }
    }
    char origin[96];
    std::snprintf(origin, sizeof origin, "mutant %llu of --seed %llu", static_cast<unsigned long long>(mutants),
                  static_cast<unsigned long long>(seed));
    run_one(in, info.name, crash_dir, exe, origin);
    ++mutants;
  }
  std::printf("fuzz: %s: %zu regression inputs, %llu seeds, %llu mutants in %.1f s (--seed %llu): no crash, no hang\n", info.name,
              regression_count, static_cast<unsigned long long>(executed), static_cast<unsigned long long>(mutants), elapsed(),
              static_cast<unsigned long long>(seed));
  return 0;
}
