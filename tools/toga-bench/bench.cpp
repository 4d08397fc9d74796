// The case table and the row figures of toga-bench; see bench.hpp.
#include "bench.hpp"

#include <algorithm>
#include <cstdio>

namespace toga::bench {

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

std::string format_bytes(std::uint64_t b) {
  static const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  unsigned u = 0;
  while (u < 4 && b >= 1024 && b % 1024 == 0) {
    b /= 1024;
    ++u;
  }
  return std::to_string(b) + " " + units[u];
}

namespace {
std::uint64_t pow2_at_least(std::uint64_t x) {
  std::uint64_t p = 1;
  while (p < x) p <<= 1;
  return p;
}
}  // namespace

std::uint64_t toga_heap_needed(const heap_demand& d, unsigned arenas) {
  constexpr std::uint64_t chunk = 512 * 1024;
  if (d.blocks == 0) return 0;
  if (d.size <= 1024) {
    const std::uint64_t cls = std::max<std::uint64_t>(16, pow2_at_least(d.size));
    const std::uint64_t bins = d.blocks * cls * 4 / 3;
    return bins + bins * 4 / 124 + std::uint64_t{arenas} * chunk;
  }
  return d.blocks * std::max<std::uint64_t>(4096, pow2_at_least(d.size));
}

std::string check_heap(const std::vector<heap_demand>& demands, std::uint64_t heap_bytes, unsigned arenas,
                       const std::string& allocator, const std::string& heap_origin) {
  for (const heap_demand& d : demands) {
    const std::uint64_t need = toga_heap_needed(d, arenas);
    if (need <= heap_bytes) continue;
    const std::uint64_t suggest = pow2_at_least(need);
    char about[32];
    std::snprintf(about, sizeof about, "%.1f MiB", static_cast<double>(need) / (1024.0 * 1024.0));
    return d.what + " needs about " + about + " of " + allocator + " heap (" + std::to_string(d.blocks) +
           " live blocks of up to " + format_bytes(d.size) + ", " + std::to_string(arenas) +
           " arenas), but " + heap_origin + " gives " + format_bytes(heap_bytes) + ": use --heap " + format_bytes(suggest) +
           " or more" + (suggest > (std::uint64_t{1} << 37) ? " (more than toga's 128 GiB maximum: ask for fewer threads or smaller sizes)" : "") +
           ", or fewer --threads / smaller --sizes";
  }
  return "";
}

double row::median_ms() const { return median(ms); }
double row::min_ms() const { return ms.empty() ? 0 : *std::min_element(ms.begin(), ms.end()); }
double row::max_ms() const { return ms.empty() ? 0 : *std::max_element(ms.begin(), ms.end()); }
double row::ops_per_s() const {
  const double m = median_ms();
  return m > 0 ? static_cast<double>(ops_per_rep) / (m * 1e-3) : 0;
}

const std::vector<case_info>& all_cases() {
  static const std::vector<case_info> cases = {
      {"T1", "alloc / free", "2^20 threads each allocate S, a separate kernel frees; S in {16..8192}; alloc/free ms, allocations/s"},
      {"T2", "one allocation per warp", "32,768 warps, lane 0 allocates S in {16, 4096}; ms"},
      {"T3", "mixed sizes", "2^20 threads, S uniform in [16, hi] per thread, hi in {64, 512, 4096, 8192}; alloc/free ms"},
      {"T4", "scaling", "threads 2^0..2^20, S in {16, 256, 4096}; ms per thread count"},
      {"T5", "churn", "2^18 threads x 16 iterations of malloc + write + free, S in {16, 256, 4096}; pairs/s"},
      {"T6", "warp-cooperative", "T1 through the warp-aggregated API; allocations/s"},
      {"T7", "large blocks", "S in {16 KiB, 64 KiB, 512 KiB, 4 MiB}, threads sized to half the heap; ms, failures"},
      {"T8", "out-of-memory / utilisation", "1 GiB heap, rounds of 100,000 allocations until one fails; S in {16, 256, 4096, 8192, 16384} (GPU; the simulator: {16, 256, 4096}); bytes obtained / heap"},
      {"T9", "fragmentation", "100,000 live allocations, 100 rounds of random frees and re-allocations; address range / (N*S)"},
      {"T10", "dynamic graph: build", "per-vertex adjacency arrays (degree rounded to a power of two, >= 16 B) of real graphs; ms"},
      {"T11", "dynamic graph: updates", "rounds of 10,000 edge insertions (grow by reallocate-and-copy), then deletions (shrink); ms per round"},
      {"T12", "init", "construct and destroy an 8 GiB heap; ms"},
      {"T13", "registers", "registers of the alloc and free kernels (cudaFuncGetAttributes)"},
      {"T14", "edges", "toga only: an exactly full heap (2^20 x 8 KiB), 2^20 requests on a full heap (16 B, 256 B, 4 KiB), 4 KiB on a heap 80 % full, the first kernel on a fresh heap (T1 sizes); x its reference"},
  };
  return cases;
}

}  // namespace toga::bench
