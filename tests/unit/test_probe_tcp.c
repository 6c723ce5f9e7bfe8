/* End-to-end test of pipette-probe's TCP transport on localhost, without
 * Slurm: several pipette-probe processes are told their rank, the task
 * count and their node name through the variables srun sets
 * (SLURM_PROCID, SLURM_NTASKS, SLURMD_NODENAME) and find rank 0 through
 * PIPETTE_PROBE_ROOT / PIPETTE_PROBE_PORT.  Rank 0 merges into a cache,
 * which must come out complete (or, with a missing node, complete for
 * the others). */
#include <arpa/inet.h>
#include <check.h>
#include <math.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>

#include <json-c/json.h>
#include <unistd.h>

#include "inputs/bwcache.h"
#include "check_run.h"

/* A port nobody listens on right now. */
static int free_port(void)
{
	struct sockaddr_in a;
	socklen_t len = sizeof(a);
	int s = socket(AF_INET, SOCK_STREAM, 0), port;

	memset(&a, 0, sizeof(a));
	a.sin_family = AF_INET;
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	ck_assert_int_eq(bind(s, (struct sockaddr *)&a, sizeof(a)), 0);
	ck_assert_int_eq(getsockname(s, (struct sockaddr *)&a, &len), 0);
	port = ntohs(a.sin_port);
	close(s);
	return port;
}

/* Each rank's NVLink domain (PIPETTE_PROBE_DOMAIN), NULL: none given. */
static const char *const *rank_domain;

/* Start rank `rank` of `n`; rank 0 gets the extra arguments.  When
 * err_fd >= 0 the child's stderr goes there (else ranks > 0 are quiet). */
static pid_t start_fd(int rank, int n, int port, const char *const *extra,
		      int err_fd)
{
	pid_t pid = fork();

	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		char buf[32];
		const char *argv[32];
		int argc = 0, i;

		snprintf(buf, sizeof(buf), "%d", rank);
		setenv("SLURM_PROCID", buf, 1);
		snprintf(buf, sizeof(buf), "%d", n);
		setenv("SLURM_NTASKS", buf, 1);
		snprintf(buf, sizeof(buf), "node%d", rank);
		setenv("SLURMD_NODENAME", buf, 1);
		snprintf(buf, sizeof(buf), "%d", port);
		setenv("PIPETTE_PROBE_PORT", buf, 1);
		setenv("PIPETTE_PROBE_ROOT", "127.0.0.1", 1);
		if (rank_domain && rank_domain[rank])
			setenv("PIPETTE_PROBE_DOMAIN", rank_domain[rank], 1);
		else
			unsetenv("PIPETTE_PROBE_DOMAIN");
		argv[argc++] = PIPETTE_PROBE_BIN;
		argv[argc++] = "--transport";
		argv[argc++] = "tcp";
		argv[argc++] = "--sizes";
		argv[argc++] = "16K,256K";
		argv[argc++] = "--reps";
		argv[argc++] = "3";
		argv[argc++] = "--timeout";
		argv[argc++] = "3";
		for (i = 0; extra && extra[i] && argc < 30; i++)
			argv[argc++] = extra[i];
		argv[argc] = NULL;
		if (err_fd >= 0)
			dup2(err_fd, 2);
		else if (rank != 0 && !freopen("/dev/null", "w", stderr))
			_exit(126);
		execv(PIPETTE_PROBE_BIN, (char *const *)argv);
		_exit(127);
	}
	return pid;
}

static pid_t start(int rank, int n, int port, const char *const *extra)
{
	return start_fd(rank, n, port, extra, -1);
}

/* Run ranks `first..n-1` except `skip` (-1 = none); return rank 0's
 * exit status. */
static int run(int n, int skip, const char *const *extra)
{
	pid_t pid[16];
	int port = free_port(), k, st, rc0 = -1;

	for (k = n - 1; k >= 0; k--)	/* rank 0 last: the others must wait */
		pid[k] = k == skip ? -1 : start(k, n, port, k == 0 ? extra : NULL);
	for (k = 0; k < n; k++) {
		if (pid[k] < 0)
			continue;
		ck_assert_int_eq(waitpid(pid[k], &st, 0), pid[k]);
		ck_assert_msg(WIFEXITED(st), "rank %d died", k);
		if (k == 0)
			rc0 = WEXITSTATUS(st);
		else
			ck_assert_msg(WEXITSTATUS(st) == 0, "rank %d exit %d", k,
				      WEXITSTATUS(st));
	}
	return rc0;
}

static void tmp_path(char *buf, size_t size, const char *leaf)
{
	snprintf(buf, size, "/tmp/test_probe_tcp_%d_%s", (int)getpid(), leaf);
	unlink(buf);
}

/* Remove a cache and the lock file the merge leaves next to it. */
static void cleanup(const char *out)
{
	char lock[300];

	snprintf(lock, sizeof(lock), "%s.lock", out);
	unlink(out);
	unlink(lock);
}

/* Count the measured directed links among nodes 0..n-1 and check each is
 * a plausible loopback figure (> 0.1 MB/s: `make -j2 check` runs the Slurm
 * integration tests beside this one, and a loaded 2-core box has measured
 * loopback as low as 6.5 MB/s; latency >= 0). */
static int measured(const struct pipette_bwcache *bw, int n, int skip)
{
	int i, j, m = 0;
	char a[16], b[16];

	for (i = 0; i < n; i++)
		for (j = 0; j < n; j++) {
			struct pipette_bw_figure f;
			int ia, ib;

			if (i == j || i == skip || j == skip)
				continue;
			snprintf(a, sizeof(a), "node%d", i);
			snprintf(b, sizeof(b), "node%d", j);
			ia = pipette_bwcache_node_index(bw, a);
			ib = pipette_bwcache_node_index(bw, b);
			if (ia < 0 || ib < 0 || pipette_bwcache_inter(bw, ia, ib, &f) != 1)
				continue;
			ck_assert_msg(f.gbps > 1e-4 && isfinite(f.gbps), "%s->%s %g GB/s", a, b,
				      f.gbps);
			ck_assert_msg(!(f.lat_us < 0), "%s->%s lat %g", a, b, f.lat_us);
			ck_assert_str_eq(f.prov.tool, "pipette-probe tcp");
			m++;
		}
	return m;
}

static void full_matrix(int n)
{
	char out[256];
	const char *extra[] = { "--out", out, NULL };
	struct pipette_bwcache *bw;
	struct pipette_err err;

	tmp_path(out, sizeof(out), "full.json");
	ck_assert_int_eq(run(n, -1, extra), 0);
	ck_assert_int_eq(pipette_bwcache_load(out, &bw, &err), 0);
	ck_assert_int_eq(pipette_bwcache_node_count(bw), n);
	ck_assert_int_eq(measured(bw, n, -1), n * (n - 1));
	pipette_bwcache_destroy(bw);
	cleanup(out);
}

START_TEST(test_tcp_full_even)
{
	full_matrix(4);
}
END_TEST

START_TEST(test_tcp_full_odd)
{
	full_matrix(5);
}
END_TEST

/* Rank 2 of 4 never starts: it is left out after the join timeout, rank 0
 * exits 1 (partial), and the 3 others' 6 directed links are written. */
START_TEST(test_tcp_missing_node)
{
	char out[256];
	const char *extra[] = { "--out", out, NULL };
	struct pipette_bwcache *bw;
	struct pipette_err err;

	tmp_path(out, sizeof(out), "missing.json");
	ck_assert_int_eq(run(4, 2, extra), 1);
	ck_assert_int_eq(pipette_bwcache_load(out, &bw, &err), 0);
	ck_assert_int_eq(pipette_bwcache_node_index(bw, "node2"), -1);
	ck_assert_int_eq(measured(bw, 4, 2), 6);
	pipette_bwcache_destroy(bw);
	cleanup(out);
}
END_TEST

/* Rank 3 of 4 joins and is killed once rank 0 has started the rounds
 * (rank 0 prints "4 nodes, 3 rounds" after the rendezvous): rank 0 sees its
 * control socket close, leaves it out, and still writes the complete matrix
 * of the other three, exiting 1. */
START_TEST(test_tcp_node_dies)
{
	char out[256], line[512];
	const char *extra[] = { "--out", out, NULL };
	struct pipette_bwcache *bw;
	struct pipette_err err;
	int port = free_port(), fds[2], st, k, seen = 0, left = 0;
	pid_t pid[4];
	FILE *f;

	tmp_path(out, sizeof(out), "dies.json");
	ck_assert_int_eq(pipe(fds), 0);
	for (k = 3; k >= 1; k--)
		pid[k] = start(k, 4, port, NULL);
	pid[0] = start_fd(0, 4, port, extra, fds[1]);
	close(fds[1]);
	f = fdopen(fds[0], "r");
	while (fgets(line, sizeof(line), f)) {
		if (!seen && strstr(line, "4 nodes, 3 rounds")) {
			kill(pid[3], SIGKILL);
			seen = 1;
		}
		left |= strstr(line, "left out: node3") != NULL;
	}
	fclose(f);
	ck_assert(seen);
	ck_assert(left);
	ck_assert_int_eq(waitpid(pid[0], &st, 0), pid[0]);
	ck_assert(WIFEXITED(st));
	ck_assert_int_eq(WEXITSTATUS(st), 1);
	for (k = 1; k <= 3; k++)
		waitpid(pid[k], &st, 0);
	ck_assert_int_eq(pipette_bwcache_load(out, &bw, &err), 0);
	ck_assert_int_eq(measured(bw, 4, 3), 6);
	pipette_bwcache_destroy(bw);
	cleanup(out);
}
END_TEST

/* --nodes node1: only the links that touch node1 (2·3 = 6 directed). */
START_TEST(test_tcp_only_some_nodes)
{
	char out[256];
	const char *extra[] = { "--out", out, "--nodes", "node1", NULL };
	struct pipette_bwcache *bw;
	struct pipette_bw_figure f;
	struct pipette_err err;

	tmp_path(out, sizeof(out), "only.json");
	ck_assert_int_eq(run(4, -1, extra), 0);
	ck_assert_int_eq(pipette_bwcache_load(out, &bw, &err), 0);
	ck_assert_int_eq(measured(bw, 4, -1), 6);
	ck_assert_int_eq(pipette_bwcache_inter(bw,
		pipette_bwcache_node_index(bw, "node1"),
		pipette_bwcache_node_index(bw, "node3"), &f), 1);
	ck_assert_int_eq(pipette_bwcache_inter(bw,
		pipette_bwcache_node_index(bw, "node0"),
		pipette_bwcache_node_index(bw, "node2"), &f), 0);
	pipette_bwcache_destroy(bw);
	cleanup(out);
}
END_TEST

/* Five nodes, two NVLink domains of two and one node in none (each task
 * names its own, as NVML would): rank 0 learns them in the hellos, writes
 * them into the cache (pipette-bw/3, nodes grouped by domain), and labels
 * the pairs inside a domain NVLink in its report and its summary. */
START_TEST(test_tcp_domains)
{
	static const char *const dom[] = { "9f1c0a2e-5b7d-4c3a-8e21-0d6f4b9a7c15:32766",
					   "9f1c0a2e-5b7d-4c3a-8e21-0d6f4b9a7c15:32766",
					   "rackB:7", "rackB:7", NULL };
	char out[256], json[256], line[512];
	const char *extra[] = { "--out", out, "--json", json, NULL };
	struct pipette_bwcache *bw;
	struct pipette_err err;
	struct json_object *rep, *nv, *d;
	int port = free_port(), fds[2], st, k, labelled = 0, listed = 0;
	pid_t pid[5];
	FILE *f;

	tmp_path(out, sizeof(out), "domains.json");
	tmp_path(json, sizeof(json), "domains-report.json");
	rank_domain = dom;
	ck_assert_int_eq(pipe(fds), 0);
	for (k = 4; k >= 1; k--)
		pid[k] = start(k, 5, port, NULL);
	pid[0] = start_fd(0, 5, port, extra, fds[1]);
	rank_domain = NULL;
	close(fds[1]);
	f = fdopen(fds[0], "r");
	while (fgets(line, sizeof(line), f)) {
		listed |= strstr(line, "NVLink domain rackB:7: node2 node3") != NULL;
		labelled |= strstr(line, "4 measured links inside NVLink domains") != NULL;
	}
	fclose(f);
	for (k = 0; k < 5; k++) {
		ck_assert_int_eq(waitpid(pid[k], &st, 0), pid[k]);
		ck_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	}
	ck_assert(listed);
	ck_assert(labelled);
	ck_assert_int_eq(pipette_bwcache_load(out, &bw, &err), 0);
	ck_assert_str_eq(pipette_bwcache_schema(bw), "pipette-bw/3");
	ck_assert_int_eq(pipette_bwcache_domain_count(bw), 2);
	for (k = 0; k < 5; k++) {
		char name[16];
		int i, dd;

		snprintf(name, sizeof(name), "node%d", k);
		i = pipette_bwcache_node_index(bw, name);
		ck_assert_int_ge(i, 0);
		dd = pipette_bwcache_node_domain(bw, i);
		if (!dom[k])
			ck_assert_int_eq(dd, -1);
		else
			ck_assert_str_eq(pipette_bwcache_domain_name(bw, dd), dom[k]);
	}
	ck_assert_int_eq(pipette_bwcache_domain_measured(bw), 4);
	ck_assert_int_eq(measured(bw, 5, -1), 20);
	pipette_bwcache_destroy(bw);
	rep = json_object_from_file(json);
	ck_assert_ptr_nonnull(rep);
	ck_assert(json_object_object_get_ex(rep, "nvlink", &nv));
	ck_assert(json_object_get_boolean(json_object_array_get_idx(
		json_object_array_get_idx(nv, 0), 1)));
	ck_assert(!json_object_get_boolean(json_object_array_get_idx(
		json_object_array_get_idx(nv, 1), 2)));
	ck_assert(!json_object_get_boolean(json_object_array_get_idx(
		json_object_array_get_idx(nv, 4), 4)));
	ck_assert(json_object_object_get_ex(rep, "domain", &d));
	ck_assert_ptr_null(json_object_array_get_idx(d, 4));
	ck_assert_str_eq(json_object_get_string(json_object_array_get_idx(d, 2)), "rackB:7");
	json_object_put(rep);
	unlink(json);
	cleanup(out);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("probe_tcp");
	TCase *tc = tcase_create("tcp");

	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_tcp_full_even);
	tcase_add_test(tc, test_tcp_full_odd);
	tcase_add_test(tc, test_tcp_missing_node);
	tcase_add_test(tc, test_tcp_only_some_nodes);
	tcase_add_test(tc, test_tcp_node_dies);
	tcase_add_test(tc, test_tcp_domains);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	signal(SIGPIPE, SIG_IGN);
	return check_run(suite());
}
