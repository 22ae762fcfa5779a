/* Preloaded (LD_PRELOAD) into a cluster task by estimator_trainer/listen.py.

   TensorFlow 2.15's gRPC server listens on "0.0.0.0:<port>" whatever host
   TF_CONFIG gives the task (grpc_server_lib.cc), and gRPC turns that into a
   dual-stack [::] socket: every interface. This bind() moves a wildcard bind
   of the task's port to the task's own address, and refuses any wildcard bind
   of that port it cannot move, so the server is never reachable elsewhere.
   Other sockets and ports are left alone. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dlfcn.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

typedef int (*bind_fn)(int, const struct sockaddr *, socklen_t);

int bind(int fd, const struct sockaddr *addr, socklen_t len) {
  static bind_fn real_bind;
  if (real_bind == NULL) real_bind = (bind_fn)dlsym(RTLD_NEXT, "bind");

  const char *host = getenv("ESTIMATOR_TRAINER_LISTEN_HOST");
  const char *port_text = getenv("ESTIMATOR_TRAINER_LISTEN_PORT");
  if (host == NULL || port_text == NULL || addr == NULL)
    return real_bind(fd, addr, len);
  in_port_t port = htons((in_port_t)atoi(port_text));

  struct in_addr host4;
  struct in6_addr host6;
  int is_v4 = inet_pton(AF_INET, host, &host4) == 1;
  int is_v6 = !is_v4 && inet_pton(AF_INET6, host, &host6) == 1;

  if (addr->sa_family == AF_INET && len >= sizeof(struct sockaddr_in)) {
    struct sockaddr_in moved;
    memcpy(&moved, addr, sizeof moved);
    if (moved.sin_port != port || moved.sin_addr.s_addr != htonl(INADDR_ANY))
      return real_bind(fd, addr, len);
    if (!is_v4) {
      errno = EADDRNOTAVAIL;
      return -1;
    }
    moved.sin_addr = host4;
    return real_bind(fd, (const struct sockaddr *)&moved, sizeof moved);
  }
  if (addr->sa_family == AF_INET6 && len >= sizeof(struct sockaddr_in6)) {
    struct sockaddr_in6 moved;
    memcpy(&moved, addr, sizeof moved);
    if (moved.sin6_port != port || !IN6_IS_ADDR_UNSPECIFIED(&moved.sin6_addr))
      return real_bind(fd, addr, len);
    if (is_v6) {
      moved.sin6_addr = host6;
    } else if (is_v4) {
      /* gRPC's dual-stack socket takes an IPv4 host as ::ffff:a.b.c.d. */
      memset(&moved.sin6_addr, 0, sizeof moved.sin6_addr);
      moved.sin6_addr.s6_addr[10] = 0xff;
      moved.sin6_addr.s6_addr[11] = 0xff;
      memcpy(&moved.sin6_addr.s6_addr[12], &host4, 4);
    } else {
      errno = EADDRNOTAVAIL;
      return -1;
    }
    return real_bind(fd, (const struct sockaddr *)&moved, sizeof moved);
  }
  return real_bind(fd, addr, len);
}
