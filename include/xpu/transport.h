/*
 * xpu/transport.h — hook <-> daemon handshake over a Unix socket, version 1.
 *
 * The daemon listens on a SOCK_SEQPACKET Unix socket (path: $XPU_DAEMON_SOCKET,
 * else $XDG_RUNTIME_DIR/xpu/daemon.sock, else /run/xpu/daemon.sock for root,
 * else /tmp/xpu-<uid>/daemon.sock; the directory is 0700, the socket 0600).
 * The hook's background thread connects (non-blocking, never from the launch
 * path) and sends one xpu_hello_v1 message carrying the ring memfd as
 * SCM_RIGHTS ancillary data. The daemon identifies the peer with SO_PEERCRED
 * (pid/uid/gid from the kernel, not from the message), rejects peers whose uid
 * differs from its own unless it runs as root, and answers one xpu_hello_ack_v1.
 * The connection then stays open: EOF tells the daemon the process is gone
 * (the ring stays mapped so records committed before a crash are still read).
 * Later messages on the same socket are xpu_ctl_v1 (daemon -> hook commands,
 * hook -> daemon replies), reserved for evidence collection.
 */
#ifndef XPU_TRANSPORT_H_
#define XPU_TRANSPORT_H_

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define XPU_HELLO_MAGIC 0x4f4c4c4548555058ull /* "XPUHELLO" */
#define XPU_TRANSPORT_VERSION 1u

typedef struct xpu_hello_v1 {
  uint64_t magic;          /* XPU_HELLO_MAGIC */
  uint32_t version;        /* XPU_TRANSPORT_VERSION */
  uint32_t abi_version;    /* XPU_RECORD_ABI_VERSION of the ring */
  uint64_t ring_file_size; /* size of the memfd sent alongside */
  int32_t pid;             /* informational; the daemon trusts SO_PEERCRED */
  uint32_t flags;          /* reserved, 0 */
} xpu_hello_v1;

enum xpu_hello_status {
  XPU_HELLO_OK = 0,
  XPU_HELLO_BAD_VERSION = 1,
  XPU_HELLO_BAD_RING = 2,
  XPU_HELLO_DENIED = 3,
  XPU_HELLO_BUSY = 4
};

typedef struct xpu_hello_ack_v1 {
  uint64_t magic;  /* XPU_HELLO_MAGIC */
  uint32_t status; /* xpu_hello_status */
  uint32_t daemon_pid;
} xpu_hello_ack_v1;

#ifdef __cplusplus
}
static_assert(sizeof(xpu_hello_v1) == 32, "hello is 32 bytes");
static_assert(sizeof(xpu_hello_ack_v1) == 16, "ack is 16 bytes");
#endif

#endif /* XPU_TRANSPORT_H_ */
