#include "app/serve/client_socket.h"

#include <dirent.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <cstdlib>

namespace specchat::serve {

int find_client_socket(const std::string& addr, int port) {
  DIR* d = opendir("/proc/self/fd");
  if (!d) return -1;
  int found = -1;
  while (dirent* e = readdir(d)) {
    char* end = nullptr;
    const long fd = std::strtol(e->d_name, &end, 10);
    if (end == e->d_name || *end != '\0' || fd == dirfd(d)) continue;
    struct stat st{};
    if (fstat(static_cast<int>(fd), &st) != 0 || !S_ISSOCK(st.st_mode)) continue;
    sockaddr_storage ss{};
    socklen_t len = sizeof ss;
    if (getpeername(static_cast<int>(fd), reinterpret_cast<sockaddr*>(&ss), &len) != 0) continue;
    char host[NI_MAXHOST], serv[NI_MAXSERV];
    if (getnameinfo(reinterpret_cast<sockaddr*>(&ss), len, host, sizeof host, serv, sizeof serv,
                    NI_NUMERICHOST | NI_NUMERICSERV) != 0) {
      continue;
    }
    if (addr == host && std::atoi(serv) == port) {
      found = static_cast<int>(fd);
      break;
    }
  }
  closedir(d);
  return found;
}

bool client_gone(int fd) {
  if (fd < 0) return false;
  pollfd p{fd, POLLRDHUP, 0};
  if (poll(&p, 1, 0) <= 0) return false;
  return (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)) != 0;
}

bool quick_ack(int fd) {
  if (fd < 0) return false;
  int yes = 1;
  return setsockopt(fd, IPPROTO_TCP, TCP_QUICKACK, &yes, sizeof(yes)) == 0;
}

bool raise_listen_backlog(int port) {
  DIR* d = opendir("/proc/self/fd");
  if (!d) return false;
  bool done = false;
  while (dirent* e = readdir(d)) {
    char* end = nullptr;
    const long fd = std::strtol(e->d_name, &end, 10);
    if (end == e->d_name || *end != '\0' || fd == dirfd(d)) continue;
    int listening = 0;
    socklen_t ol = sizeof listening;
    if (getsockopt(static_cast<int>(fd), SOL_SOCKET, SO_ACCEPTCONN, &listening, &ol) != 0 || !listening) continue;
    sockaddr_storage ss{};
    socklen_t len = sizeof ss;
    if (getsockname(static_cast<int>(fd), reinterpret_cast<sockaddr*>(&ss), &len) != 0) continue;
    char host[NI_MAXHOST], serv[NI_MAXSERV];
    if (getnameinfo(reinterpret_cast<sockaddr*>(&ss), len, host, sizeof host, serv, sizeof serv,
                    NI_NUMERICHOST | NI_NUMERICSERV) != 0) {
      continue;
    }
    if (std::atoi(serv) == port && listen(static_cast<int>(fd), SOMAXCONN) == 0) done = true;
  }
  closedir(d);
  return done;
}

}  // namespace specchat::serve
