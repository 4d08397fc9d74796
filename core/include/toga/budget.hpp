//! @file toga/budget.hpp
//! Device memory budgets and the allocation registry (issue 31; docs/usage.md §12 "Budgets and
//! the allocation registry"): every piece of memory a toga heap holds (a fixed heap's memory, a growable heap's
//! granules, metadata, scratch buffers) is *recorded* in a process-wide `memory_ledger` before it
//! is obtained upstream, with its device, tier, bytes, owning heap and time of creation; and a
//! record that would take a device past its *budget* is refused before the upstream call is made.
//! The ledger is the idea of HAMi-core's allocator module (per-process allocation list checked
//! against a per-container limit before the request reaches the driver), kept inside toga: only
//! toga's own memory is counted, never the application's other cudaMalloc calls.
//!
//! Backend-agnostic and host-only (no device code ever reads it, so it costs the fast path
//! nothing). The CUDA heap (toga::cuda::set_device_budget, device_budget, memory_report) and the
//! CPU growable heap (toga::cpu, for CI) record into it; tests make ledgers of their own.
//!
//! Budgets come from the API (`set_budget`, highest priority), or the environment, read once per
//! device the first time the device is used: `TOGA_DEVICE_MEMORY_LIMIT_<n>` for CUDA device n,
//! else `TOGA_DEVICE_MEMORY_LIMIT` for every CUDA device (HAMi's CUDA_DEVICE_MEMORY_LIMIT[_n]
//! forms and units: `4g`, `512m`, `4096M`, `1024k`, plain bytes; see parse_memory_size). The CPU
//! backend reads no environment. A budget of 0 means none.
//!
//! Units: bytes. Thread-safety: every member of memory_ledger is safe to call from any number of
//! host threads (one mutex). Errors: std::invalid_argument (a malformed size, a budget below the
//! current usage, an unparsable environment variable), naming the value and what to do; nothing is
//! changed by a call that throws.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <iterator>
#include <limits>
#include <map>
#include <mutex>
#include <new>
#include <stdexcept>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

namespace toga {

//! A heap's memory could not be obtained: upstream refused it (cudaMalloc, a memory pool, the
//! VMM API, Linux), or it would take its device past its budget (the message says which, and
//! names the budget, the usage and the largest holders).
class bad_alloc : public std::bad_alloc {
 public:
  explicit bad_alloc(std::string what) : what_(std::move(what)) {}
  const char* what() const noexcept override { return what_.c_str(); }

 private:
  std::string what_;
};

//! Which backend's device numbering a record's device index is in.
enum class memory_backend : std::uint8_t { cuda = 0, cpu = 1 };
//! Where the bytes live: the device's own memory, or host memory mapped for it (the host tier).
enum class memory_tier : std::uint8_t { device = 0, host = 1 };
//! Where a budget came from.
enum class budget_source : std::uint8_t { none = 0, environment = 1, api = 2 };

inline const char* to_string(memory_backend b) noexcept { return b == memory_backend::cuda ? "cuda" : "cpu"; }
inline const char* to_string(memory_tier t) noexcept { return t == memory_tier::device ? "device" : "host"; }
inline const char* to_string(budget_source s) noexcept {
  return s == budget_source::api ? "api" : s == budget_source::environment ? "environment" : "none";
}

//! `bytes` as a short human figure: "512 B", "3.00 KiB", "1.50 GiB".
inline std::string format_bytes(std::uint64_t bytes) {
  static constexpr const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  if (bytes < 1024) return std::to_string(bytes) + " B";
  double v = static_cast<double>(bytes);
  unsigned u = 0;
  while (v >= 1024.0 && u + 1 < std::size(units)) {
    v /= 1024.0;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f %s", v, units[u]);
  return buf;
}

//! Parses a memory size as HAMi-core's CUDA_DEVICE_MEMORY_LIMIT writes them: decimal digits,
//! then optionally one unit letter k, m, g, t (either case; powers of 1024), optionally followed
//! by "i" and/or "b" ("4g", "512M", "4GiB", "4gb", "4294967296"). Surrounding spaces are allowed.
//! Returns the bytes (0 is allowed and means "no budget" where budgets are concerned). Throws
//! std::invalid_argument naming `what` (the option or variable) and the text for anything else:
//! an empty value, a sign, a fraction, an unknown unit, or a value above 2^63 B.
inline std::uint64_t parse_memory_size(std::string_view text, std::string_view what) {
  const auto fail = [&](const char* why) -> std::uint64_t {
    throw std::invalid_argument("toga: " + std::string(what) + "=\"" + std::string(text) + "\" is not a memory size (" + why +
                                "); write bytes, or a number with k, m, g or t (powers of 1024), e.g. 4g, 512m, 1073741824");
  };
  std::size_t i = 0, n = text.size();
  while (i < n && (text[i] == ' ' || text[i] == '\t')) ++i;
  while (n > i && (text[n - 1] == ' ' || text[n - 1] == '\t')) --n;
  if (i == n) return fail("empty");
  std::uint64_t v = 0;
  const std::size_t digits_at = i;
  for (; i < n && text[i] >= '0' && text[i] <= '9'; ++i) {
    const std::uint64_t d = static_cast<std::uint64_t>(text[i] - '0');
    if (v > (std::numeric_limits<std::uint64_t>::max() - d) / 10) return fail("too large");
    v = v * 10 + d;
  }
  if (i == digits_at) return fail("it does not start with a digit");
  unsigned shift = 0;
  if (i < n) {
    switch (text[i]) {
      case 'k': case 'K': shift = 10; break;
      case 'm': case 'M': shift = 20; break;
      case 'g': case 'G': shift = 30; break;
      case 't': case 'T': shift = 40; break;
      case 'b': case 'B': break;
      default: return fail("unknown unit");
    }
    if (shift != 0) {
      ++i;
      if (i < n && (text[i] == 'i' || text[i] == 'I')) ++i;
    }
    if (i < n && (text[i] == 'b' || text[i] == 'B')) ++i;
    if (i != n) return fail("unexpected characters after the unit");
  }
  constexpr std::uint64_t max = std::uint64_t{1} << 63;
  if (shift != 0 && v > (max >> shift)) return fail("above 2^63 B");
  v <<= shift;
  if (v > max) return fail("above 2^63 B");
  return v;
}

//! One piece of memory a heap holds (the allocation registry's row).
struct memory_record {
  std::uint64_t id = 0;         //!< unique in its ledger, from 1
  memory_backend backend = memory_backend::cuda;
  int device = 0;               //!< device index in the backend's numbering
  memory_tier tier = memory_tier::device;
  std::string what;             //!< "heap" (a fixed heap's memory), "granule", "metadata", "granule list", ...
  std::uint64_t address = 0;    //!< its address (0 until the upstream call returned it)
  std::uint64_t bytes = 0;      //!< bytes charged: what was asked of upstream
  std::uint64_t owner = 0;      //!< the owning heap's id (memory_ledger::new_owner)
  std::string owner_name;       //!< e.g. "cuda heap #3 (growable, 8 GiB range)"
  std::chrono::system_clock::time_point created{};
};

//! A device's budget and what toga holds on it.
struct budget_state {
  std::uint64_t budget = 0;  //!< bytes; 0: none
  budget_source source = budget_source::none;
  std::uint64_t used = 0;        //!< bytes of every record on this device (device tier only)
  std::uint64_t host_bytes = 0;  //!< bytes of host-tier records on its behalf (not charged)
  std::uint64_t high = 0;        //!< the highest `used` since the ledger was made
  std::uint64_t refusals = 0;    //!< records refused because of the budget
};

//! What memory_ledger::report returns: every record, and per device its budget state and the
//! bytes of each owner.
struct memory_report {
  struct owner_total {
    std::uint64_t owner = 0;
    std::string name;
    std::uint64_t device_bytes = 0, host_bytes = 0;
    std::uint64_t records = 0;
  };
  struct device_total {
    memory_backend backend = memory_backend::cuda;
    int device = 0;
    budget_state state;
    std::vector<owner_total> owners;  //!< largest first
  };
  std::vector<device_total> devices;  //!< every device with a budget or a record, by backend and index
  std::vector<memory_record> records;  //!< oldest first
};

//! A printable summary for logs: per device its budget, use and high-water mark, then each owner
//! with its device and host bytes; `with_records` adds one line per record.
inline std::string to_string(const memory_report& r, bool with_records = false) {
  std::string s = "toga memory report: " + std::to_string(r.records.size()) + " records\n";
  for (const auto& d : r.devices) {
    s += "  " + std::string(to_string(d.backend)) + " device " + std::to_string(d.device) + ": used " + format_bytes(d.state.used);
    s += d.state.budget ? " of budget " + format_bytes(d.state.budget) + " (" + to_string(d.state.source) + ")" : std::string(", no budget");
    s += ", high " + format_bytes(d.state.high);
    if (d.state.host_bytes) s += ", host tier " + format_bytes(d.state.host_bytes);
    if (d.state.refusals) s += ", " + std::to_string(d.state.refusals) + " refused";
    s += "\n";
    for (const auto& o : d.owners) {
      s += "    " + o.name + ": " + format_bytes(o.device_bytes) + " device";
      if (o.host_bytes) s += ", " + format_bytes(o.host_bytes) + " host";
      s += " in " + std::to_string(o.records) + " records\n";
    }
  }
  if (with_records)
    for (const auto& m : r.records) {
      char addr[32];
      std::snprintf(addr, sizeof addr, "0x%llx", static_cast<unsigned long long>(m.address));
      s += "    #" + std::to_string(m.id) + " " + to_string(m.backend) + ":" + std::to_string(m.device) + " " + to_string(m.tier) + " " +
           m.what + " " + addr + " " + format_bytes(m.bytes) + " (" + m.owner_name + ")\n";
    }
  return s;
}

//! The budgets and the registry (see the file comment). Thread-safe.
class memory_ledger {
 public:
  //! Reads environment variables through `getenv` (tests pass their own).
  using env_reader = std::function<const char*(const char*)>;
  explicit memory_ledger(env_reader getenv = [](const char* n) -> const char* { return std::getenv(n); }) : getenv_(std::move(getenv)) {}
  memory_ledger(const memory_ledger&) = delete;
  memory_ledger& operator=(const memory_ledger&) = delete;

  //! A fresh owner id for a heap (never 0).
  std::uint64_t new_owner() {
    std::lock_guard<std::mutex> lock(m_);
    return ++last_owner_;
  }

  //! Sets the budget of a device (bytes; 0 removes it), overriding the environment's. Throws
  //! std::invalid_argument, changing nothing, when `bytes` is below what toga holds there now
  //! (the message names the usage, the largest holders and the least valid budget).
  void set_budget(memory_backend b, int device, std::uint64_t bytes) {
    std::lock_guard<std::mutex> lock(m_);
    dev& d = device_locked(b, device, false);  // (the API overrides the environment, even a malformed one)
    if (bytes != 0 && bytes < d.state.used)
      throw std::invalid_argument("toga: a budget of " + std::to_string(bytes) + " B (" + format_bytes(bytes) + ") for " + name(b, device) +
                                  " is below what toga holds there now, " + std::to_string(d.state.used) + " B (" + holders_locked(b, device) +
                                  "); choose at least " + std::to_string(d.state.used) + " B, or free or trim heaps first");
    d.state.budget = bytes;
    d.state.source = bytes ? budget_source::api : budget_source::none;
  }
  //! The device's budget state (reads the environment the first time, and may throw as charge).
  budget_state budget(memory_backend b, int device) {
    std::lock_guard<std::mutex> lock(m_);
    return device_locked(b, device).state;
  }

  //! Records `bytes` of `tier` on a device for `owner` before they are obtained upstream.
  //! Returns the record's id, or 0 when a device-tier record would take the device past its
  //! budget: then `refusal` (when given) says so, naming the budget, the usage, the request and
  //! the largest holders, and nothing is recorded. Host-tier records are never refused. Throws
  //! std::invalid_argument when the device's environment variable cannot be parsed.
  std::uint64_t charge(memory_backend b, int device, memory_tier tier, std::string what, std::uint64_t bytes, std::uint64_t owner,
                       std::string owner_name, std::string* refusal = nullptr) {
    std::lock_guard<std::mutex> lock(m_);
    dev& d = device_locked(b, device);
    if (tier == memory_tier::device && d.state.budget != 0 && (bytes > d.state.budget || d.state.used > d.state.budget - bytes)) {
      ++d.state.refusals;
      if (refusal)
        *refusal = "the budget of " + name(b, device) + ", " + std::to_string(d.state.budget) + " B (" + format_bytes(d.state.budget) + ", from " +
                   (d.state.source == budget_source::api ? std::string("set_budget") : d.env) + "), would be exceeded: " +
                   std::to_string(d.state.used) + " B in use + " + std::to_string(bytes) + " B asked for the " + what + " of " + owner_name +
                   "; largest holders: " + holders_locked(b, device) + "; raise the budget or free or trim heaps";
      return 0;
    }
    memory_record r;
    r.id = ++last_id_;
    r.backend = b;
    r.device = device;
    r.tier = tier;
    r.what = std::move(what);
    r.bytes = bytes;
    r.owner = owner;
    r.owner_name = std::move(owner_name);
    r.created = std::chrono::system_clock::now();
    (tier == memory_tier::device ? d.state.used : d.state.host_bytes) += bytes;
    d.state.high = std::max(d.state.high, d.state.used);
    const std::uint64_t id = r.id;
    records_.emplace(id, std::move(r));
    return id;
  }
  //! Sets a record's address once upstream returned it (nothing for an unknown id).
  void set_address(std::uint64_t id, const void* address) {
    std::lock_guard<std::mutex> lock(m_);
    if (const auto it = records_.find(id); it != records_.end()) it->second.address = reinterpret_cast<std::uintptr_t>(address);
  }
  //! Removes a record (its memory went back upstream, or was never obtained); 0 and unknown ids: nothing.
  void release(std::uint64_t id) noexcept {
    std::lock_guard<std::mutex> lock(m_);
    release_locked(id);
  }
  //! Removes every record of `owner` (a heap's destructor).
  void release_owner(std::uint64_t owner) noexcept {
    std::lock_guard<std::mutex> lock(m_);
    for (auto it = records_.begin(); it != records_.end();) {
      const auto next = std::next(it);
      if (it->second.owner == owner) release_locked(it->first);
      it = next;
    }
  }
  //! A copy of every record, oldest first.
  std::vector<memory_record> records() const {
    std::lock_guard<std::mutex> lock(m_);
    std::vector<memory_record> out;
    out.reserve(records_.size());
    for (const auto& [id, r] : records_) out.push_back(r);
    return out;
  }
  //! Every record and per-device totals (see memory_report).
  memory_report report() const {
    std::lock_guard<std::mutex> lock(m_);
    memory_report rep;
    for (const auto& [id, r] : records_) rep.records.push_back(r);
    for (const auto& [key, d] : devices_) {
      memory_report::device_total t;
      t.backend = std::get<0>(key);
      t.device = std::get<1>(key);
      t.state = d.state;
      t.owners = owners_locked(t.backend, t.device);
      rep.devices.push_back(std::move(t));
    }
    return rep;
  }

 private:
  struct dev {
    budget_state state;
    std::string env;  // the variable the budget came from
  };
  using key = std::tuple<memory_backend, int>;

  static std::string name(memory_backend b, int device) { return std::string(to_string(b)) + " device " + std::to_string(device); }

  //! The device's entry; the first time, its budget from the environment (CUDA devices).
  dev& device_locked(memory_backend b, int device, bool read_environment = true) {
    const key k{b, device};
    if (const auto it = devices_.find(k); it != devices_.end()) return it->second;
    dev d;
    if (b == memory_backend::cuda && read_environment) {
      const std::string per = "TOGA_DEVICE_MEMORY_LIMIT_" + std::to_string(device);
      for (const std::string& var : {per, std::string("TOGA_DEVICE_MEMORY_LIMIT")}) {
        const char* v = getenv_ ? getenv_(var.c_str()) : nullptr;
        if (v == nullptr) continue;
        try {
          d.state.budget = parse_memory_size(v, var);  // throws before anything is inserted
        } catch (const std::invalid_argument& e) {
          throw std::invalid_argument(std::string(e.what()) + "; or set the budget with toga::cuda::set_device_budget, which overrides it");
        }
        d.state.source = d.state.budget ? budget_source::environment : budget_source::none;
        d.env = var;
        break;
      }
    }
    return devices_.emplace(k, d).first->second;
  }
  void release_locked(std::uint64_t id) noexcept {
    const auto it = records_.find(id);
    if (it == records_.end()) return;
    const memory_record& r = it->second;
    dev& d = devices_.at(key{r.backend, r.device});
    (r.tier == memory_tier::device ? d.state.used : d.state.host_bytes) -= r.bytes;
    records_.erase(it);
  }
  std::vector<memory_report::owner_total> owners_locked(memory_backend b, int device) const {
    std::map<std::uint64_t, memory_report::owner_total> by;
    for (const auto& [id, r] : records_) {
      if (r.backend != b || r.device != device) continue;
      auto& o = by[r.owner];
      o.owner = r.owner;
      o.name = r.owner_name;
      (r.tier == memory_tier::device ? o.device_bytes : o.host_bytes) += r.bytes;
      ++o.records;
    }
    std::vector<memory_report::owner_total> out;
    for (auto& [k, o] : by) out.push_back(std::move(o));
    std::stable_sort(out.begin(), out.end(), [](const auto& x, const auto& y) { return x.device_bytes > y.device_bytes; });
    return out;
  }
  //! "cuda heap #1: 1.00 GiB, cuda heap #2: 8.00 MiB" (the three largest), or "none".
  std::string holders_locked(memory_backend b, int device) const {
    const auto owners = owners_locked(b, device);
    std::string s;
    for (std::size_t i = 0; i < owners.size() && i < 3; ++i) {
      if (owners[i].device_bytes == 0) break;
      s += (s.empty() ? "" : ", ") + owners[i].name + " " + format_bytes(owners[i].device_bytes);
    }
    if (owners.size() > 3) s += " and " + std::to_string(owners.size() - 3) + " more";
    return s.empty() ? "none" : s;
  }

  env_reader getenv_;
  mutable std::mutex m_;
  std::map<key, dev> devices_;
  std::map<std::uint64_t, memory_record> records_;
  std::uint64_t last_id_ = 0, last_owner_ = 0;
};

//! The process's ledger, which toga's heaps record into (constructed on first use).
inline memory_ledger& process_memory_ledger() {
  static memory_ledger l;
  return l;
}

//! Where a heap records its memory: a ledger (nullptr: nowhere), a device, and the heap's owner id
//! and name. Records are released by the heap (release_owner) when it is destroyed.
struct ledger_account {
  memory_ledger* ledger = nullptr;
  memory_backend backend = memory_backend::cuda;
  int device = 0;
  std::uint64_t owner = 0;
  std::string owner_name;

  //! Records `bytes` (see memory_ledger::charge): the record's id; 0 when the budget refused it
  //! (then `refusal` says why); `unaccounted` when there is no ledger.
  std::uint64_t charge(memory_tier tier, std::string what, std::uint64_t bytes, std::string* refusal = nullptr) const {
    if (ledger == nullptr) return unaccounted;
    return ledger->charge(backend, device, tier, std::move(what), bytes, owner, owner_name, refusal);
  }
  void set_address(std::uint64_t id, const void* p) const {
    if (ledger && id != unaccounted) ledger->set_address(id, p);
  }
  void release(std::uint64_t id) const noexcept {
    if (ledger && id != unaccounted) ledger->release(id);
  }
  void release_all() const noexcept {
    if (ledger && owner) ledger->release_owner(owner);
  }
  static constexpr std::uint64_t unaccounted = ~std::uint64_t{0};
};

}  // namespace toga
