// Noticing that an HTTP client went away while its request waits or decodes. cpp-httplib 0.11
// (Debian 12) does not expose a request's socket, so the socket is found once per request among
// this process's open descriptors by the client's address and port (Request::remote_addr /
// remote_port), then polled for a hang-up (POLLRDHUP/POLLHUP/POLLERR) without reading from it.
#pragma once

#include <string>

namespace specchat::serve {

// The descriptor of the connected TCP socket whose peer is `addr` (numeric, as getnameinfo
// writes it) : `port`; -1 when none is found.
int find_client_socket(const std::string& addr, int port);

// True when the peer of socket `fd` has closed its side or the socket failed. -1 → false.
bool client_gone(int fd);

// Sends the ACK the kernel holds back for socket `fd` now (TCP_QUICKACK). Called between a
// request's headers and its body: a client that writes the two separately with Nagle's algorithm
// on (Python's httpx, so the official `openai` package) waits for that ACK before it sends the
// body, and Linux delays it ~40 ms on a keep-alive connection; every request paid that before
// any work began. False when fd is -1 or the option is refused.
bool quick_ack(int fd);

// Raises the accept backlog of this process's listening TCP socket on `port` to SOMAXCONN
// (cpp-httplib 0.11 listens with a backlog of 5: a burst of clients overflowed it and saw
// connection resets). Returns false when no such socket is found.
bool raise_listen_backlog(int port);

}  // namespace specchat::serve
