// The server's listening socket (ApiServer, exclusive_socket_options): a port another server
// listens on is refused, not shared. cpp-httplib's default sets SO_REUSEPORT, under which a second
// `specchat-cli serve` (or the app's server) bound the same port as a running one and the kernel
// split the clients between them.
#include <catch2/catch.hpp>

#include <httplib.h>

#include "app/serve/http_server.h"

using namespace specchat::serve;

TEST_CASE("serve socket: a second listener on the same port is refused", "[serve]") {
  httplib::Server first;
  first.set_socket_options(exclusive_socket_options);
  const int port = first.bind_to_any_port("127.0.0.1");
  REQUIRE(port > 0);
  httplib::Server second;
  second.set_socket_options(exclusive_socket_options);
  CHECK_FALSE(second.bind_to_port("127.0.0.1", port));
}

TEST_CASE("serve socket: a port held by a default cpp-httplib listener is refused too", "[serve]") {
  httplib::Server other;  // SO_REUSEPORT (cpp-httplib's default)
  const int port = other.bind_to_any_port("127.0.0.1");
  REQUIRE(port > 0);
  // What the default allows: another default listener shares the port.
  httplib::Server sharing;
  CHECK(sharing.bind_to_port("127.0.0.1", port));
  httplib::Server ours;
  ours.set_socket_options(exclusive_socket_options);
  CHECK_FALSE(ours.bind_to_port("127.0.0.1", port));
}
