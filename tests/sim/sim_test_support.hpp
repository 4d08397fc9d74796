//! @file tests/sim/sim_test_support.hpp
//! Shared helpers of the simulator tests.
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>

#include "toga/sim/runner.hpp"

namespace toga::test {
//! True when the environment sets TOGA_SOAK to anything but "" or "0": the soak label's run
//! (`ctest --preset soak`; tests/CMakeLists.txt registers the soak tests with TOGA_SOAK=1).
inline bool soak_run() {
  const char* e = std::getenv("TOGA_SOAK");
  return e && *e && std::strcmp(e, "0") != 0;
}
//! The number of schedules a test explores: `ci` in the README's test command (label sim), `soak`
//! in the soak run. The CI counts are at least the schedule at which the planted bugs of the same
//! scenario die (sim/mutants-baseline.json; docs/simulator.md "What CI runs and what the soak runs").
inline std::uint64_t schedules(std::uint64_t ci, std::uint64_t soak) { return soak_run() ? soak : ci; }

//! The first failure of an exploration with its replay command, or "none in N".
inline std::string failure_text(const toga::sim::explore_summary& s) {
  if (!s.first_failure) return "none in " + std::to_string(s.schedules);
  return std::string(toga::sim::to_string(s.first_failure->result.kind)) + ": " + s.first_failure->result.message +
         "\n  replay: " + s.first_failure->replay_command;
}

//! What a child process made of `work` (run_in_child): crashed (killed by a signal: a planted bug
//! whose wild access crashes the simulator is then a verdict, as toga-sim's crash verdict, not the
//! end of the test binary) or the text `work` returned.
struct child_outcome {
  bool crashed = false;
  int signal = 0;
  std::string text;
};
//! Runs `work` (returns std::string) in a forked child and reads its text back through a pipe.
template <class Work>
child_outcome run_in_child(Work&& work) {
  int fd[2];
  if (pipe(fd) != 0) throw std::runtime_error("pipe failed");
  std::fflush(nullptr);
  const pid_t pid = fork();
  if (pid < 0) throw std::runtime_error("fork failed");
  if (pid == 0) {
    close(fd[0]);
    const std::string out = work();
    for (std::size_t done = 0; done < out.size();) {
      const ssize_t n = write(fd[1], out.data() + done, out.size() - done);
      if (n <= 0) break;
      done += static_cast<std::size_t>(n);
    }
    _exit(0);
  }
  close(fd[1]);
  child_outcome r;
  char buf[4096];
  for (ssize_t n; (n = read(fd[0], buf, sizeof buf)) > 0;) r.text.append(buf, static_cast<std::size_t>(n));
  close(fd[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  if (WIFSIGNALED(status)) {
    r.crashed = true;
    r.signal = WTERMSIG(status);
  }
  return r;
}
}  // namespace toga::test
