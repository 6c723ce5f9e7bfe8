#include "autoconf.h"

#include "net.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

double pipette_probe_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int set_nonblock(int fd)
{
	int fl = fcntl(fd, F_GETFL);

	return (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0) ? -1 : 0;
}

static void tune(int fd)
{
	int one = 1;

	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

/* Wait for `events` on fd until `deadline`; 1 ready, 0 timed out, -1 error. */
static int wait_fd(int fd, short events, double deadline)
{
	for (;;) {
		struct pollfd p = { .fd = fd, .events = events };
		double left = deadline - pipette_probe_now();
		int ms, rc;

		if (left <= 0)
			return 0;
		ms = (int)(left * 1000.0) + 1;
		rc = poll(&p, 1, ms);
		if (rc > 0)
			return 1;
		if (rc < 0 && errno != EINTR)
			return -1;
	}
}

int pipette_probe_listen(int port, int *fd, int *bound, struct pipette_err *err)
{
	struct sockaddr_in6 a6;
	struct sockaddr_in a4;
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	int s, one = 1, zero = 0;

	memset(&a6, 0, sizeof(a6));
	a6.sin6_family = AF_INET6;
	a6.sin6_addr = in6addr_any;
	a6.sin6_port = htons((uint16_t)port);
	s = socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (s >= 0) {
		/* Dual stack: IPv4 peers arrive as ::ffff:a.b.c.d. */
		setsockopt(s, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero));
		setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (bind(s, (struct sockaddr *)&a6, sizeof(a6)) < 0) {
			close(s);
			s = -1;
		}
	}
	if (s < 0) {
		memset(&a4, 0, sizeof(a4));
		a4.sin_family = AF_INET;
		a4.sin_addr.s_addr = htonl(INADDR_ANY);
		a4.sin_port = htons((uint16_t)port);
		s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (s < 0)
			return pipette_fail(err, "socket: %s", strerror(errno));
		setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (bind(s, (struct sockaddr *)&a4, sizeof(a4)) < 0) {
			int e = errno;

			close(s);
			return pipette_fail(err, "bind to port %d: %s", port,
					    strerror(e));
		}
	}
	if (listen(s, 128) < 0 || set_nonblock(s) < 0 ||
	    getsockname(s, (struct sockaddr *)&ss, &len) < 0) {
		int e = errno;

		close(s);
		return pipette_fail(err, "listen on port %d: %s", port, strerror(e));
	}
	*bound = ntohs(ss.ss_family == AF_INET6 ?
		       ((struct sockaddr_in6 *)&ss)->sin6_port :
		       ((struct sockaddr_in *)&ss)->sin_port);
	*fd = s;
	return 0;
}

/* One non-blocking connect attempt to one address: 0 connected, 1 refused
 * (retry), -1 failed or timed out (errno-like code in *e). */
static int try_connect(const struct addrinfo *ai, double deadline, int *fd,
		       int *e)
{
	int s, rc, soerr = 0;
	socklen_t len = sizeof(soerr);

	s = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
	if (s < 0 || set_nonblock(s) < 0) {
		*e = errno;
		if (s >= 0)
			close(s);
		return -1;
	}
	rc = connect(s, ai->ai_addr, ai->ai_addrlen);
	if (rc < 0 && errno != EINPROGRESS) {
		*e = errno;
		close(s);
		return (*e == ECONNREFUSED) ? 1 : -1;
	}
	if (rc < 0) {
		rc = wait_fd(s, POLLOUT, deadline);
		if (rc <= 0) {
			*e = rc == 0 ? ETIMEDOUT : errno;
			close(s);
			return -1;
		}
		if (getsockopt(s, SOL_SOCKET, SO_ERROR, &soerr, &len) < 0 || soerr) {
			*e = soerr ? soerr : errno;
			close(s);
			return (*e == ECONNREFUSED) ? 1 : -1;
		}
	}
	tune(s);
	*fd = s;
	return 0;
}

int pipette_probe_connect(const char *host, int port, double timeout_s,
			  int *fd, struct pipette_err *err)
{
	struct addrinfo hints, *res = NULL, *ai;
	char svc[16];
	double deadline = pipette_probe_now() + timeout_s;
	int rc, e = ETIMEDOUT;

	memset(&hints, 0, sizeof(hints));
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	snprintf(svc, sizeof(svc), "%d", port);
	rc = getaddrinfo(host, svc, &hints, &res);
	if (rc)
		return pipette_fail(err, "connect to %s:%d: cannot resolve: %s",
				    host, port, gai_strerror(rc));
	for (;;) {
		int refused = 0;

		for (ai = res; ai; ai = ai->ai_next) {
			rc = try_connect(ai, deadline, fd, &e);
			if (rc == 0) {
				freeaddrinfo(res);
				return 0;
			}
			refused |= (rc == 1);
		}
		if (!refused || pipette_probe_now() + 0.05 >= deadline)
			break;
		usleep(50000);
	}
	freeaddrinfo(res);
	return pipette_fail(err, "connect to %s:%d: %s (timeout %.3g s)", host,
			    port, strerror(e == ECONNREFUSED ? ETIMEDOUT : e),
			    timeout_s);
}

static void numeric(const struct sockaddr *sa, socklen_t len, char *addr)
{
	char host[NI_MAXHOST];

	if (getnameinfo(sa, len, host, sizeof(host), NULL, 0, NI_NUMERICHOST))
		snprintf(host, sizeof(host), "?");
	/* Strip the IPv4-mapped prefix so that addresses read naturally. */
	if (!strncmp(host, "::ffff:", 7) && strchr(host + 7, '.'))
		memmove(host, host + 7, strlen(host + 7) + 1);
	pipette_strlcpy(addr, host, PIPETTE_PROBE_ADDR_MAX);
}

int pipette_probe_accept(int lfd, double timeout_s, int *fd, char *addr,
			 struct pipette_err *err)
{
	double deadline = pipette_probe_now() + timeout_s;

	for (;;) {
		struct sockaddr_storage ss;
		socklen_t len = sizeof(ss);
		int s, rc = wait_fd(lfd, POLLIN, deadline);

		if (rc == 0)
			return pipette_fail(err, "accept: no connection within "
					    "%.3g s", timeout_s);
		if (rc < 0)
			return pipette_fail(err, "accept: poll: %s", strerror(errno));
		s = accept4(lfd, (struct sockaddr *)&ss, &len,
			    SOCK_CLOEXEC | SOCK_NONBLOCK);
		if (s < 0) {
			if (errno == EAGAIN || errno == EINTR ||
			    errno == ECONNABORTED)
				continue;
			return pipette_fail(err, "accept: %s", strerror(errno));
		}
		tune(s);
		if (addr)
			numeric((struct sockaddr *)&ss, len, addr);
		*fd = s;
		return 0;
	}
}

int pipette_probe_local_addr(int fd, char *addr, struct pipette_err *err)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);

	if (getsockname(fd, (struct sockaddr *)&ss, &len) < 0)
		return pipette_fail(err, "getsockname: %s", strerror(errno));
	numeric((struct sockaddr *)&ss, len, addr);
	return 0;
}

int pipette_probe_send_all(int fd, const void *buf, size_t n, double timeout_s,
			   const char *what, struct pipette_err *err)
{
	const char *p = buf;
	double deadline = pipette_probe_now() + timeout_s;

	while (n > 0) {
		ssize_t k = send(fd, p, n, MSG_NOSIGNAL);

		if (k > 0) {
			p += k;
			n -= (size_t)k;
			continue;
		}
		if (k < 0 && errno != EAGAIN && errno != EINTR)
			return pipette_fail(err, "%s: send: %s", what, strerror(errno));
		k = wait_fd(fd, POLLOUT, deadline);
		if (k == 0)
			return pipette_fail(err, "%s: send timed out after %.3g s "
					    "(%zu bytes left)", what, timeout_s, n);
		if (k < 0)
			return pipette_fail(err, "%s: poll: %s", what, strerror(errno));
	}
	return 0;
}

int pipette_probe_recv_all(int fd, void *buf, size_t n, double timeout_s,
			   const char *what, struct pipette_err *err)
{
	char *p = buf;
	double deadline = pipette_probe_now() + timeout_s;

	while (n > 0) {
		ssize_t k = recv(fd, p, n, 0);

		if (k > 0) {
			p += k;
			n -= (size_t)k;
			continue;
		}
		if (k == 0)
			return pipette_fail(err, "%s: peer closed the connection "
					    "(%zu bytes missing)", what, n);
		if (errno != EAGAIN && errno != EINTR)
			return pipette_fail(err, "%s: recv: %s", what, strerror(errno));
		k = wait_fd(fd, POLLIN, deadline);
		if (k == 0)
			return pipette_fail(err, "%s: recv timed out after %.3g s "
					    "(%zu bytes missing)", what, timeout_s, n);
		if (k < 0)
			return pipette_fail(err, "%s: poll: %s", what, strerror(errno));
	}
	return 0;
}

void pipette_probe_put_u32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}

uint32_t pipette_probe_get_u32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 |
	       (uint32_t)p[2] << 8 | (uint32_t)p[3];
}

void pipette_probe_put_f64(uint8_t *p, double v)
{
	uint64_t u;

	memcpy(&u, &v, sizeof(u));
	pipette_probe_put_u32(p, (uint32_t)(u >> 32));
	pipette_probe_put_u32(p + 4, (uint32_t)u);
}

double pipette_probe_get_f64(const uint8_t *p)
{
	uint64_t u = (uint64_t)pipette_probe_get_u32(p) << 32 |
		     pipette_probe_get_u32(p + 4);
	double v;

	memcpy(&v, &u, sizeof(v));
	return v;
}
