// toga example helper: passing a shared heap's descriptor and file descriptors to another
// process over a Unix domain socket (SCM_RIGHTS). toga does not do this itself: how processes
// find each other is the application's business (docs/usage.md §13). Used by the two-process
// examples and by the sharing tests. Linux; every function returns false and sets `error` on
// failure, never throws.
#pragma once

#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstring>
#include <string>
#include <vector>

namespace toga_example {

//! Sends `n` bytes and `fds` (at most 8) in one message on socket `sock`. The receiver gets
//! duplicates of the descriptors; the sender keeps its own.
inline bool send_with_fds(int sock, const void* data, std::size_t n, const std::vector<int>& fds, std::string& error) {
  if (fds.size() > 8 || n == 0) {
    error = "send_with_fds: 1 or more bytes and at most 8 descriptors";
    return false;
  }
  iovec iov{const_cast<void*>(data), n};
  alignas(cmsghdr) char control[CMSG_SPACE(8 * sizeof(int))] = {};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  if (!fds.empty()) {
    msg.msg_control = control;
    msg.msg_controllen = CMSG_SPACE(fds.size() * sizeof(int));
    cmsghdr* c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(fds.size() * sizeof(int));
    std::memcpy(CMSG_DATA(c), fds.data(), fds.size() * sizeof(int));
  }
  const ssize_t r = sendmsg(sock, &msg, MSG_NOSIGNAL);
  if (r != static_cast<ssize_t>(n)) {
    error = std::string("sendmsg: ") + (r < 0 ? std::strerror(errno) : "short write");
    return false;
  }
  return true;
}

//! Receives one message of at most `cap` bytes into `data` (its length in `n`) and the
//! descriptors sent with it (appended to `fds`, close-on-exec).
inline bool receive_with_fds(int sock, void* data, std::size_t cap, std::size_t& n, std::vector<int>& fds, std::string& error) {
  iovec iov{data, cap};
  alignas(cmsghdr) char control[CMSG_SPACE(8 * sizeof(int))] = {};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  const ssize_t r = recvmsg(sock, &msg, MSG_CMSG_CLOEXEC);
  if (r <= 0) {
    error = std::string("recvmsg: ") + (r < 0 ? std::strerror(errno) : "the peer closed the socket");
    return false;
  }
  n = static_cast<std::size_t>(r);
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    const std::size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (std::size_t i = 0; i < k; ++i) {
      int fd;
      std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof fd);
      fds.push_back(fd);
    }
  }
  if (msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) {
    for (int fd : fds) close(fd);
    fds.clear();
    error = "recvmsg: the message or its descriptors were truncated";
    return false;
  }
  return true;
}

}  // namespace toga_example
