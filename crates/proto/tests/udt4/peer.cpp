// A UDT4 (libudt, Debian's libudt-dev) peer for longhaul's interop test
// (crates/proto/tests/udt4_interop.rs). It uses only UDT4's public API.
//
//   peer recv PORT BYTES        listen on 127.0.0.1:PORT, accept one connection,
//                               receive BYTES, print "ok <bytes> <fnv1a64 hex>"
//   peer send PORT BYTES        connect to 127.0.0.1:PORT, send BYTES of the test
//                               pattern, close, print "ok <bytes>"
//   peer sink PORT BYTES        as recv and send, without the hash and the pattern:
//   peer source PORT BYTES      UDT4's own throughput, for the benchmark beside
//                               `longhaul bench loopback` (docs/transfer.md)
//
// Either side prints "READY" once listening (recv) and exits non-zero on an error.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include <udt/udt.h>

// The same pattern as the Rust side: byte i is (i * 2654435761) >> 13, truncated.
static uint8_t pattern(uint64_t i) { return (uint8_t)((i * 2654435761ULL) >> 13); }

static int fail(const char* what) {
  std::fprintf(stderr, "udt4 peer: %s: %s\n", what, UDT::getlasterror().getErrorMessage());
  return 1;
}

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: %s recv|send PORT BYTES\n", argv[0]);
    return 2;
  }
  const bool receiving = std::strcmp(argv[1], "recv") == 0 || std::strcmp(argv[1], "sink") == 0;
  // Benchmark modes: no per-byte work of the peer's own to measure instead of UDT4.
  const bool bare = std::strcmp(argv[1], "sink") == 0 || std::strcmp(argv[1], "source") == 0;
  const int port = std::atoi(argv[2]);
  const int64_t total = std::atoll(argv[3]);
  UDT::startup();
  sockaddr_in addr;
  std::memset(&addr, 0, sizeof addr);
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
  UDTSOCKET s = UDT::socket(AF_INET, SOCK_STREAM, 0);
  if (receiving) {
    if (UDT::bind(s, (sockaddr*)&addr, sizeof addr) == UDT::ERROR) return fail("bind");
    if (UDT::listen(s, 1) == UDT::ERROR) return fail("listen");
    std::printf("READY\n");
    std::fflush(stdout);
    sockaddr_in peer;
    int len = sizeof peer;
    UDTSOCKET c = UDT::accept(s, (sockaddr*)&peer, &len);
    if (c == UDT::INVALID_SOCK) return fail("accept");
    std::vector<char> buf(1 << 16);
    int64_t got = 0;
    uint64_t hash = 0xcbf29ce484222325ULL;
    while (got < total) {
      int n = UDT::recv(c, buf.data(), (int)buf.size(), 0);
      if (n == UDT::ERROR) return fail("recv");
      for (int i = 0; i < n && !bare; i++) {
        hash ^= (uint8_t)buf[i];
        hash *= 0x100000001b3ULL;
      }
      got += n;
    }
    std::printf("ok %lld %016llx\n", (long long)got, (unsigned long long)hash);
    UDT::close(c);
  } else {
    if (UDT::connect(s, (sockaddr*)&addr, sizeof addr) == UDT::ERROR) return fail("connect");
    std::vector<char> buf(1 << 16);
    int64_t sent = 0;
    while (sent < total) {
      int64_t n = total - sent < (int64_t)buf.size() ? total - sent : (int64_t)buf.size();
      for (int64_t i = 0; i < n && !bare; i++) buf[i] = (char)pattern(sent + i);
      int64_t off = 0;
      while (off < n) {
        int k = UDT::send(s, buf.data() + off, (int)(n - off), 0);
        if (k == UDT::ERROR) return fail("send");
        off += k;
      }
      sent += n;
    }
    std::printf("ok %lld\n", (long long)sent);
  }
  std::fflush(stdout);
  UDT::close(s);
  UDT::cleanup();
  return 0;
}
