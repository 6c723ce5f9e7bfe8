/* pipette-probe: TCP with a bounded timeout on every operation.
 *
 * All sockets are non-blocking and every wait goes through poll(2) with a
 * deadline, so a dead or partitioned peer costs at most `timeout_s` per
 * call: connect (retried while the peer is not listening yet), accept,
 * send and recv.  No MPI, no Slurm. */
#ifndef PIPETTE_PROBE_NET_H
#define PIPETTE_PROBE_NET_H

#include <stddef.h>
#include <stdint.h>

#include "inputs/error.h"

#define PIPETTE_PROBE_ADDR_MAX 64	/* numeric IPv4/IPv6 text */

/* Monotonic clock, seconds. */
double pipette_probe_now(void);

/* Listen on `port` (0: an ephemeral port) on every address; the bound
 * port is returned in *bound. */
int pipette_probe_listen(int port, int *fd, int *bound, struct pipette_err *err);

/* Connect to host:port within timeout_s, retrying refused connections
 * (the peer may not listen yet) every 50 ms. */
int pipette_probe_connect(const char *host, int port, double timeout_s,
			  int *fd, struct pipette_err *err);

/* Accept one connection within timeout_s; the peer's numeric address is
 * written to addr (PIPETTE_PROBE_ADDR_MAX bytes) when addr is not NULL. */
int pipette_probe_accept(int lfd, double timeout_s, int *fd, char *addr,
			 struct pipette_err *err);

/* Send or receive exactly n bytes within timeout_s (the whole call).
 * recv fails on EOF.  `what` names the operation in messages. */
int pipette_probe_send_all(int fd, const void *buf, size_t n, double timeout_s,
			   const char *what, struct pipette_err *err);
int pipette_probe_recv_all(int fd, void *buf, size_t n, double timeout_s,
			   const char *what, struct pipette_err *err);

/* The numeric local address of a connected socket (the address the peer
 * reached us on). */
int pipette_probe_local_addr(int fd, char *addr, struct pipette_err *err);

/* Big-endian encoding for the wire. */
void pipette_probe_put_u32(uint8_t *p, uint32_t v);
uint32_t pipette_probe_get_u32(const uint8_t *p);
void pipette_probe_put_f64(uint8_t *p, double v);
double pipette_probe_get_f64(const uint8_t *p);

#endif
