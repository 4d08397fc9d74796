// Heaps shared by processes on the CPU (issue 32; toga/cpu/shared_heap.hpp, toga/sharing.hpp):
// two processes (fork; descriptors over a Unix socket with SCM_RIGHTS) allocate and free in one
// heap at once, free each other's blocks, outlive each other and a killed peer; every malformed
// descriptor is refused with a message naming what was wrong; the planted import bugs are killed.
#include <gtest/gtest.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "../../tools/examples/fd_passing.hpp"
#include "toga/cpu/shared_heap.hpp"

namespace {

using toga::cpu::basic_shared_heap;
using toga::cpu::share_bug;
using toga::cpu::shared_heap;
using P = toga::cpu::platform;

constexpr std::uint64_t heap_bytes = 64ull << 20;
constexpr unsigned ring_slots = 512;
constexpr std::uint64_t ring_bytes = 8 * (8 + ring_slots);
// words of the ring block's header
enum : unsigned { cross_frees = 0, corrupt = 2, failures = 4, live_blocks = 6 };

std::uint64_t* ring_at(char* base, std::uint64_t off) { return reinterpret_cast<std::uint64_t*>(base + off); }
std::uint64_t atomic_add(std::uint64_t* w, std::uint64_t v) { return std::atomic_ref<std::uint64_t>(*w).fetch_add(v); }

// A block's stamp: the role (process) and thread that made it, its size and a sequence number;
// every 8-byte word of the block holds it, so that two blocks over the same bytes show.
std::uint64_t make_stamp(unsigned role, unsigned t, std::uint64_t size, unsigned i) {
  return (std::uint64_t{role} << 62) | (std::uint64_t{t & 0xff} << 48) | ((size & 0xffff) << 32) | i;
}
void stamp(void* p, std::uint64_t size, std::uint64_t s) {
  auto* w = static_cast<std::uint64_t*>(p);
  for (std::uint64_t k = 0; k < size / 8; ++k) w[k] = s;
}
// The stamp if the block is whole, else 0.
std::uint64_t read_stamp(const void* p) {
  const auto* w = static_cast<const std::uint64_t*>(p);
  const std::uint64_t s = w[0], size = (s >> 32) & 0xffff;
  if (size < 16) return 0;
  for (std::uint64_t k = 1; k < size / 8; ++k)
    if (w[k] != s) return 0;
  return s;
}

//! One process's share of the two-process workload: `threads` threads allocate blocks of six
//! sizes, stamp them, keep some, publish some into the ring (as heap offsets + 1), and take
//! blocks from the ring (either process's), check their stamps and free them.
template <class Heap>
void run_role(Heap& h, std::uint64_t ring_off, unsigned role, unsigned threads, unsigned ops) {
  static constexpr std::uint64_t sizes[] = {16, 48, 256, 1024, 4096, 24576};
  std::uint64_t* ring = ring_at(h.base(), ring_off);
  toga::cpu::launch(threads, 1, 4, [&] {
    const unsigned t = P::global_thread_id();
    const auto& a = h.view();
    std::vector<std::pair<void*, std::uint64_t>> live;
    auto check_and_free = [&](void* p, std::uint64_t expect) {
      const std::uint64_t s = read_stamp(p);
      if (s == 0 || (expect != 0 && s != expect)) atomic_add(&ring[corrupt + role], 1);
      else if ((s >> 62) != role) atomic_add(&ring[cross_frees + role], 1);
      a.deallocate(p);
    };
    for (unsigned i = 0; i < ops; ++i) {
      const std::uint64_t size = sizes[(i * 7 + t * 3) % 6];
      // Every fourth request of 256 B and up names a 256 B alignment, which takes the out-of-line
      // path (allocate_above_small, on the process's resident view): since the superbin classes'
      // allocation and free run inline (design.md §11.10) it is what makes each process run
      // out-of-line members at all, which planted bug import_uses_exporter_view needs.
      void* p = i % 4 == 3 && size >= 256 ? a.allocate(size, 256) : a.allocate(size);
      if (p == nullptr) {
        atomic_add(&ring[failures + role], 1);
        continue;
      }
      const std::uint64_t s = make_stamp(role, t, size, i);
      stamp(p, size, s);
      bool published = false;
      if (i % 3 == 0) {
        std::uint64_t expected = 0;
        published = std::atomic_ref<std::uint64_t>(ring[8 + (i * 31 + t * 7 + role * 13) % ring_slots])
                        .compare_exchange_strong(expected, h.export_pointer(p) + 1);
      }
      if (!published) live.emplace_back(p, s);
      if (live.size() > 32) {
        check_and_free(live.front().first, live.front().second);
        live.erase(live.begin());
      }
      if (i % 2 == 0) {
        const std::uint64_t v = std::atomic_ref<std::uint64_t>(ring[8 + (i * 17 + t * 5 + role * 29) % ring_slots]).exchange(0);
        if (v != 0) check_and_free(h.import_pointer(v - 1), 0);
      }
    }
    for (auto& [p, s] : live) check_and_free(p, s);
  });
}

//! Takes every block left in the ring, checks and frees it (one thread of this process).
template <class Heap>
void drain_ring(Heap& h, std::uint64_t ring_off, unsigned role) {
  std::uint64_t* ring = ring_at(h.base(), ring_off);
  toga::cpu::launch(1, 1, 1, [&] {
    for (unsigned k = 0; k < ring_slots; ++k) {
      const std::uint64_t v = ring[8 + k];
      if (v == 0) continue;
      ring[8 + k] = 0;
      void* p = h.import_pointer(v - 1);
      if (read_stamp(p) == 0) ++ring[corrupt + role];
      h.view().deallocate(p);
    }
  });
}

std::uint64_t allocate_ring(shared_heap& h) {
  void* r = nullptr;
  toga::cpu::launch(1, 1, 1, [&] { r = h.view().allocate(ring_bytes); });
  if (r == nullptr) throw std::runtime_error("no ring");
  std::memset(r, 0, ring_bytes);
  return h.export_pointer(r);
}

void free_at(shared_heap& h, std::uint64_t off) {
  toga::cpu::launch(1, 1, 1, [&] { h.view().deallocate(h.import_pointer(off)); });
}

// Runs `f` in a forked child (which never returns into the test); returns its exit code, or
// 128 + the signal that ended it.
int wait_child(pid_t pid) {
  int st = 0;
  while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}
template <class F>
pid_t spawn(F&& f) {
  const pid_t pid = fork();
  if (pid == 0) {
    int rc = 99;
    try {
      rc = f();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "child: %s\n", e.what());
      rc = 98;
    }
    _exit(rc);
  }
  return pid;
}

// What the exporter sends: the descriptor and the ring's heap offset (and the two descriptors).
struct hello {
  toga::share_descriptor d;
  std::uint64_t ring_off;
};

void send_heap(int sock, const shared_heap& h, std::uint64_t ring_off) {
  const toga::cpu::shareable_heap e = h.export_shareable();
  const hello m{e.descriptor, ring_off};
  std::string err;
  const bool ok = toga_example::send_with_fds(sock, &m, sizeof m, {e.heap_fd, e.meta_fd}, err);
  close(e.heap_fd);  // (the caller's duplicates: the receiver got its own)
  close(e.meta_fd);
  if (!ok) throw std::runtime_error(err);
}

// Receives the heap in a child and imports it. The parent's mappings, inherited by fork, are
// made inaccessible first: the importer must work through its own mappings only (a use of the
// exporter's addresses is a segmentation fault, as it is an illegal address on a GPU).
template <class Heap>
std::unique_ptr<Heap> receive_heap(int sock, const shared_heap& inherited, std::uint64_t& ring_off) {
  for (auto [p, n] : {std::pair{inherited.base(), inherited.capacity()}, std::pair{inherited.metadata(), inherited.metadata_bytes()}})
    if (mmap(p, n, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1, 0) == MAP_FAILED) throw std::runtime_error("mmap");
  hello m{};
  std::size_t n = 0;
  std::vector<int> fds;
  std::string err;
  if (!toga_example::receive_with_fds(sock, &m, sizeof m, n, fds, err) || n != sizeof m || fds.size() != 2) throw std::runtime_error("receive: " + err);
  auto h = Heap::import(&m.d, sizeof m.d, fds[0], fds[1]);
  close(fds[0]);
  close(fds[1]);
  ring_off = m.ring_off;
  return h;
}

void signal_byte(int sock) {
  const char c = 1;
  if (write(sock, &c, 1) != 1) throw std::runtime_error("write");
}
void wait_byte(int sock) {
  char c;
  if (read(sock, &c, 1) != 1) throw std::runtime_error("read: the peer is gone");
}

struct socket_pair {
  int fd[2] = {-1, -1};
  socket_pair() {
    if (socketpair(AF_UNIX, SOCK_SEQPACKET, 0, fd) != 0) throw std::runtime_error("socketpair");
  }
  ~socket_pair() {
    for (int f : fd)
      if (f >= 0) close(f);
  }
};

//! The two-process run: the exporter and an importer of type `Importer` run the workload at once.
//! Returns the importer's exit code (0: its checks passed) and fills the exporter's figures.
struct two_process_result {
  int child = -1;
  std::uint64_t cross[2] = {}, corrupt_blocks = 0, failed = 0;
  bool other_base = false;
  std::optional<std::string> walk;
  toga::heap_statistics stats{};
};

template <class Importer>
two_process_result two_processes(unsigned threads, unsigned ops) {
  two_process_result r;
  shared_heap h(heap_bytes, 4);
  const std::uint64_t ring_off = allocate_ring(h);
  socket_pair s;
  const pid_t pid = spawn([&] {
    close(s.fd[0]);
    std::uint64_t off = 0;
    auto mine = receive_heap<Importer>(s.fd[1], h, off);
    const char* base = mine->base();
    if (write(s.fd[1], &base, sizeof base) != sizeof base) return 10;
    wait_byte(s.fd[1]);  // start together
    run_role(*mine, off, 1, threads, ops);
    const std::uint64_t* ring = ring_at(mine->base(), off);
    return ring[corrupt + 1] == 0 && ring[failures + 1] == 0 ? 0 : 11;
  });
  close(s.fd[1]);
  s.fd[1] = -1;
  send_heap(s.fd[0], h, ring_off);
  const char* child_base = nullptr;
  if (read(s.fd[0], &child_base, sizeof child_base) == sizeof child_base) {
    r.other_base = child_base != nullptr && child_base != h.base();
    signal_byte(s.fd[0]);
    run_role(h, ring_off, 0, threads, ops);
  }
  r.child = wait_child(pid);
  drain_ring(h, ring_off, 0);
  const std::uint64_t* ring = ring_at(h.base(), ring_off);
  r.cross[0] = ring[cross_frees];
  r.cross[1] = ring[cross_frees + 1];
  r.corrupt_blocks = ring[corrupt] + ring[corrupt + 1];
  r.failed = ring[failures] + ring[failures + 1];
  free_at(h, ring_off);
  h.trim();
  r.stats = h.stats();
  r.walk = h.check();
  return r;
}

TEST(Sharing, TwoProcessesAllocateAndFreeInOneHeapAtOnce) {
  const two_process_result r = two_processes<shared_heap>(4, 20000);
  EXPECT_EQ(r.child, 0) << "the importing process's checks failed (exit code; 128 + signal)";
  EXPECT_TRUE(r.other_base) << "the importer must map the heap at its own address (the exporter's range was inaccessible there)";
  EXPECT_EQ(r.corrupt_blocks, 0u) << "blocks whose stamps were overwritten: two blocks over the same bytes";
  EXPECT_EQ(r.failed, 0u);
  EXPECT_GT(r.cross[0], 100u) << "the exporter freed blocks the importer allocated";
  EXPECT_GT(r.cross[1], 100u) << "the importer freed blocks the exporter allocated";
  EXPECT_EQ(r.stats.allocations, r.stats.deallocations) << "statistics are shared: every allocation of both processes was freed";
  EXPECT_EQ(r.stats.used_bytes, 0u);
  EXPECT_FALSE(r.walk.has_value()) << *r.walk;
  std::printf("cross-process frees: exporter %llu, importer %llu; allocations %llu\n", static_cast<unsigned long long>(r.cross[0]),
              static_cast<unsigned long long>(r.cross[1]), static_cast<unsigned long long>(r.stats.allocations));
}

// The memory lives until the last process unmaps it: the exporter's heap is destroyed while the
// importer still uses the heap.
TEST(Sharing, TheImporterOutlivesTheExporter) {
  socket_pair s;
  auto h = std::make_unique<shared_heap>(heap_bytes, 4);
  const std::uint64_t ring_off = allocate_ring(*h);
  const pid_t pid = spawn([&] {
    close(s.fd[0]);
    std::uint64_t off = 0;
    auto mine = receive_heap<shared_heap>(s.fd[1], *h, off);
    signal_byte(s.fd[1]);
    wait_byte(s.fd[1]);  // the exporter is gone now
    run_role(*mine, off, 1, 4, 2000);
    drain_ring(*mine, off, 1);
    const std::uint64_t* ring = ring_at(mine->base(), off);
    if (ring[corrupt + 1] != 0 || ring[failures + 1] != 0) return 11;
    toga::cpu::launch(1, 1, 1, [&] { mine->view().deallocate(mine->import_pointer(off)); });
    mine->trim();
    const toga::heap_statistics st = mine->stats();
    if (st.used_bytes != 0 || st.allocations != st.deallocations) return 12;
    return mine->check() ? 13 : 0;
  });
  close(s.fd[1]);
  s.fd[1] = -1;
  send_heap(s.fd[0], *h, ring_off);
  wait_byte(s.fd[0]);
  h.reset();  // unmaps and closes everything of the exporter's
  signal_byte(s.fd[0]);
  EXPECT_EQ(wait_child(pid), 0) << "the importer could not go on alone (exit code; 128 + signal)";
}

// A process killed while it holds blocks (between its launches) leaves the other's blocks and the
// heap intact; the survivor can check and free the dead process's blocks.
TEST(Sharing, AKilledProcessLeavesTheOthersBlocksIntact) {
  shared_heap h(heap_bytes, 4);
  const std::uint64_t ring_off = allocate_ring(h);
  // the exporter's own blocks, held across the importer's life and death
  std::vector<std::pair<void*, std::uint64_t>> mine(256);
  toga::cpu::launch(1, 1, 1, [&] {
    for (unsigned i = 0; i < mine.size(); ++i) {
      const std::uint64_t size = 16u << (i % 10);
      void* p = h.view().allocate(size);
      ASSERT_NE(p, nullptr);
      stamp(p, size, make_stamp(0, 0, size, i));
      mine[i] = {p, make_stamp(0, 0, size, i)};
    }
  });
  socket_pair s;
  const pid_t pid = spawn([&] {
    close(s.fd[0]);
    std::uint64_t off = 0;
    auto imp = receive_heap<shared_heap>(s.fd[1], h, off);
    std::uint64_t* ring = ring_at(imp->base(), off);
    toga::cpu::launch(4, 1, 4, [&] {  // 4 threads x 100 blocks, published into the ring
      const unsigned t = P::global_thread_id();
      for (unsigned i = 0; i < 100; ++i) {
        const std::uint64_t size = 16u << ((i + t) % 11);
        void* p = imp->view().allocate(size);
        if (!p) continue;
        stamp(p, size, make_stamp(1, t, size, i));
        std::atomic_ref<std::uint64_t>(ring[8 + t * 100 + i]).store(imp->export_pointer(p) + 1);
      }
    });
    signal_byte(s.fd[1]);
    pause();  // killed here
    return 0;
  });
  close(s.fd[1]);
  s.fd[1] = -1;
  send_heap(s.fd[0], h, ring_off);
  wait_byte(s.fd[0]);
  kill(pid, SIGKILL);
  EXPECT_EQ(wait_child(pid), 128 + SIGKILL);
  for (auto& [p, st] : mine) EXPECT_EQ(read_stamp(p), st) << "a block of the surviving process changed";
  std::uint64_t dead = 0;  // the dead process's blocks, intact
  for (unsigned k = 0; k < 400; ++k) {
    const std::uint64_t v = ring_at(h.base(), ring_off)[8 + k];
    dead += v != 0 && read_stamp(h.import_pointer(v - 1)) >> 62 == 1;
  }
  EXPECT_EQ(dead, 400u);
  run_role(h, ring_off, 0, 4, 2000);  // the survivor goes on allocating and freeing (and frees some of the dead's)
  drain_ring(h, ring_off, 0);  // checks and frees the dead process's blocks (and any left by the run)
  EXPECT_EQ(ring_at(h.base(), ring_off)[corrupt], 0u);
  for (auto& [p, st] : mine) EXPECT_EQ(read_stamp(p), st);
  toga::cpu::launch(1, 1, 1, [&] {
    for (auto& [p, st] : mine) h.view().deallocate(p);
  });
  free_at(h, ring_off);
  h.trim();
  EXPECT_EQ(h.stats().used_bytes, 0u);
  EXPECT_EQ(h.stats().allocations, h.stats().deallocations);
  const auto walk = h.check();
  EXPECT_FALSE(walk.has_value()) << *walk;
}

// ---- malformed descriptors -------------------------------------------------------------------

std::size_t mapping_count() {
  std::ifstream f("/proc/self/maps");
  std::size_t n = 0;
  for (std::string line; std::getline(f, line);) ++n;
  return n;
}

template <class Heap = shared_heap>
std::string import_error(const void* d, std::size_t n, int heap_fd, int meta_fd) {
  try {
    auto h = Heap::import(d, n, heap_fd, meta_fd);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

toga::share_descriptor resealed(toga::share_descriptor d) {
  d.checksum = toga::share_checksum(d);
  return d;
}

std::size_t open_fds() {
  std::size_t n = 0;
  for (int fd = 0; fd < 4096; ++fd) n += fcntl(fd, F_GETFD) != -1;
  return n;
}

TEST(Sharing, EveryMalformedDescriptorIsRefusedAndMapsNothing) {
  const std::size_t fds_before = open_fds();
  {
    shared_heap a(heap_bytes, 4), b(heap_bytes, 4);
    const auto e = a.export_shareable();
    const auto eb = b.export_shareable();
    const std::size_t maps = mapping_count();
    struct bad {
      const char* name;
      std::function<std::string()> attempt;
      const char* says;
    };
    int pipe_fd[2];
    ASSERT_EQ(pipe(pipe_fd), 0);
    const int unsealed = memfd_create("not-toga", MFD_CLOEXEC);  // the right size, no seals
    ASSERT_GE(unsealed, 0);
    ASSERT_EQ(ftruncate(unsealed, static_cast<off_t>(e.descriptor.heap_alloc_bytes)), 0);
    // an import of e's descriptor changed by `change` (and its checksum made right again unless `reseal` is false)
    const auto forged = [&](auto change, bool reseal = true) {
      return [&e, change, reseal] {
        toga::share_descriptor d = e.descriptor;
        change(d);
        if (reseal) d = resealed(d);
        return import_error(&d, sizeof d, e.heap_fd, e.meta_fd);
      };
    };
    const std::vector<bad> cases = {
        {"truncated", [&] { return import_error(&e.descriptor, 100, e.heap_fd, e.meta_fd); }, "truncated"},
        {"null", [&] { return import_error(nullptr, sizeof e.descriptor, e.heap_fd, e.meta_fd); }, "truncated"},
        {"not toga's", forged([](auto& d) { d.magic[0] = 'x'; }, false), "magic"},
        {"other version", forged([](auto& d) { d.version = 2; }), "version 2"},
        {"corrupted", forged([](auto& d) { d.heap_id ^= 1; }, false), "checksum"},
        {"other backend", forged([](auto& d) { d.backend = static_cast<std::uint32_t>(toga::memory_backend::cuda); }), "cuda heap"},
        {"forged geometry", forged([](auto& d) { d.levels += 1; }), "do not follow from its geometry"},
        {"absurd geometry", forged([](auto& d) { d.levels = 200; }), "not one toga makes"},
        {"heap file of the wrong size", [&] { return import_error(&e.descriptor, sizeof e.descriptor, e.meta_fd, e.meta_fd); }, "heap file holds"},
        {"another heap's heap file", [&] { return import_error(&e.descriptor, sizeof e.descriptor, eb.heap_fd, e.meta_fd); },
         "heap handle belongs to another heap"},
        {"an unsealed file", [&] { return import_error(&e.descriptor, sizeof e.descriptor, unsealed, e.meta_fd); }, "not a sealed toga memfd"},
        {"closed descriptor", [&] { return import_error(&e.descriptor, sizeof e.descriptor, 1000, e.meta_fd); }, "is not open"},
        {"not a file", [&] { return import_error(&e.descriptor, sizeof e.descriptor, e.heap_fd, pipe_fd[0]); }, "is not a regular file"},
        {"another heap's handles (foreign or stale)", [&] { return import_error(&e.descriptor, sizeof e.descriptor, eb.heap_fd, eb.meta_fd); },
         "metadata handle belongs to another heap"},
    };
    for (const bad& c : cases) {
      const std::string msg = c.attempt();
      EXPECT_NE(msg.find(c.says), std::string::npos) << c.name << ": got \"" << msg << "\"";
      EXPECT_NE(msg.find("toga::cpu::shared_heap::import"), std::string::npos) << c.name;
      EXPECT_EQ(mapping_count(), maps) << c.name << ": a refused import left a mapping";
    }
    for (int fd : {pipe_fd[0], pipe_fd[1], unsealed, eb.heap_fd, eb.meta_fd}) close(fd);
    // the good one still imports (in this process: a second mapping of the same files) and sees a's blocks
    void* p = nullptr;
    toga::cpu::launch(1, 1, 1, [&] { p = a.view().allocate(4096); });
    ASSERT_NE(p, nullptr);
    stamp(p, 4096, make_stamp(0, 0, 4096, 7));
    auto c = shared_heap::import(&e.descriptor, sizeof e.descriptor, e.heap_fd, e.meta_fd);
    EXPECT_EQ(read_stamp(c->import_pointer(a.export_pointer(p))), make_stamp(0, 0, 4096, 7));
    EXPECT_EQ(c->stats().allocations, 1u);
    toga::cpu::launch(1, 1, 1, [&] { c->view().deallocate(c->import_pointer(a.export_pointer(p))); });
    EXPECT_EQ(a.stats().deallocations, 1u);
    close(e.heap_fd);
    close(e.meta_fd);
  }
  EXPECT_EQ(open_fds(), fds_before) << "a refused or finished import, or an export, left a file descriptor open";
}

TEST(Sharing, PointersTravelAsOffsetsAndBadOnesAreRefused) {
  shared_heap h(1 << 20, 1);
  int x = 0;
  EXPECT_THROW((void)h.export_pointer(&x), std::invalid_argument);
  EXPECT_THROW((void)h.import_pointer(h.capacity()), std::invalid_argument);
  EXPECT_EQ(h.import_pointer(h.export_pointer(h.base() + 4096)), h.base() + 4096);
  EXPECT_THROW(shared_heap(0), std::invalid_argument);
  EXPECT_THROW(shared_heap(1 << 20, 0), std::invalid_argument);
}

// ---- planted bugs ----------------------------------------------------------------------------

TEST(SharingPlantedBugs, ImportUsesExporterViewIsKilled) {
  // The importer's out-of-line members run on the view the exporter left in the metadata, whose
  // addresses are the exporter's: in the importer they are inaccessible.
  const two_process_result r = two_processes<basic_shared_heap<share_bug::import_uses_exporter_view>>(2, 2000);
  EXPECT_NE(r.child, 0) << "planted bug import_uses_exporter_view survived the two-process run "
                           "(replay: toga_sharing_tests --gtest_filter=SharingPlantedBugs.ImportUsesExporterViewIsKilled)";
  std::printf("import_uses_exporter_view: the importer ended with %d (128 + signal)\n", r.child);
}

TEST(SharingPlantedBugs, TrustDescriptorIsKilled) {
  shared_heap a(heap_bytes, 4);
  const auto e = a.export_shareable();
  auto d = e.descriptor;
  d.levels += 1;  // a heap twice as large over the same files
  d = resealed(d);
  EXPECT_FALSE(import_error<shared_heap>(&d, sizeof d, e.heap_fd, e.meta_fd).empty());
  EXPECT_TRUE(import_error<basic_shared_heap<share_bug::trust_descriptor>>(&d, sizeof d, e.heap_fd, e.meta_fd).empty())
      << "planted bug trust_descriptor was not killed: the forged descriptor was refused anyway";
  close(e.heap_fd);
  close(e.meta_fd);
}

}  // namespace

namespace {
// A measurement, not a test (design.md §23.4): the importer is killed while its threads are inside
// allocate and deallocate, 200 times at different moments; the survivor then runs the workload
// (a hang: no progress in 5 s) and walks the heap. A kill mid-operation can leave a lock held, a
// reservation unclaimed or an RCU reader counted: this prints how often each outcome came.
//   toga_sharing_tests --gtest_also_run_disabled_tests --gtest_filter='*KillMidRun*'
TEST(SharingMeasurement, DISABLED_KillMidRun) {
  int hangs = 0, ok = 0, walks = 0;
  for (int it = 0; it < 200; ++it) {
    const pid_t outer = spawn([&] {
      shared_heap h(heap_bytes, 4);
      const std::uint64_t ring_off = allocate_ring(h);
      socket_pair s;
      const pid_t pid = spawn([&] {
        close(s.fd[0]);
        std::uint64_t off = 0;
        auto mine = receive_heap<shared_heap>(s.fd[1], h, off);
        signal_byte(s.fd[1]);
        run_role(*mine, off, 1, 4, 1000000);
        return 0;
      });
      close(s.fd[1]);
      s.fd[1] = -1;
      send_heap(s.fd[0], h, ring_off);
      wait_byte(s.fd[0]);
      usleep(500 + (it * 997) % 3000);
      kill(pid, SIGKILL);
      wait_child(pid);
      alarm(5);
      run_role(h, ring_off, 0, 4, 20000);
      drain_ring(h, ring_off, 0);
      h.trim();
      const auto w = h.check();
      if (w) { std::printf("walk: %s\n", w->substr(0, 200).c_str()); std::fflush(stdout); return 7; }
      return 0;
    });
    const int rc = wait_child(outer);
    if (rc == 128 + SIGALRM) ++hangs;
    else if (rc == 0) ++ok;
    else if (rc == 7) ++walks;
    else std::printf("iteration %d: rc %d\n", it, rc);
  }
  std::printf("kill mid-run, of 200: %d clean, %d with a heap walk failing, %d hangs of the survivor\n", ok, walks, hangs);
}
}  // namespace
