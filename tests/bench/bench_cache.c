/* bench_cache: loading bandwidth caches (issue 17, item 3).
 *
 * For generated caches of 1024, 2048 and 4096 nodes x 8 GPUs (bench_plan's
 * figures: H100 nominal x 0.9, 5% slow pairs, 16-node leaf switches, one
 * slow switch, one degraded node; seed = nodes), in pipette-bw/1 (every
 * node pair), pipette-bw/2 (per switch, pairs more than 5% off their
 * switch pair's figure as links) and, at 4096 nodes, pipette-bw/3 (the
 * same with each switch's 16 nodes an NVLink domain: validated only, as
 * no H100 cluster has domains of 128 GPUs), each in a fresh child:
 *   load     pipette_bwcache_load and pipette_cluster_create over all its
 *            nodes: CPU time and peak RSS (wait4), the cache's own bytes;
 *   validate `pipette bandwidth validate FILE`: CPU time and peak RSS.
 * Targets: the 4096-node pipette-bw/1 cache validates within 1 s (issue
 * 17), the pipette-bw/2 and /3 ones within 0.5 s (issue 30); a load fits
 * the plan budgets of issue 17 (2048: 2 s, 256 MiB; 4096: 5 s, 512 MiB),
 * since a plan cannot meet them when loading alone does not.  Prints the
 * figures and the load average; exits 1 on a missed target when the load
 * average is below 1. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench_util.h"
#include "inputs/bwcache.h"
#include "inputs/cluster.h"
#include "inputs/hardware.h"

#ifndef PIPETTE_BIN
#define PIPETTE_BIN "./pipette"
#endif

/* A child's CPU time (user + system) and peak RSS. */
struct usage {
	double cpu_s, rss_mib;
};


static int wait_child(pid_t pid, struct usage *u)
{
	return bench_wait(pid, &u->cpu_s, &u->rss_mib);
}

/* Each switch's nodes (16, named as bench_gen names them) an NVLink
 * domain: 0, or 1 with the message in err. */
static int set_domains(struct pipette_bwcache *bw, int nodes, struct pipette_err *err)
{
	char node[32], dom[32];
	int i;

	for (i = 0; i < nodes; i++) {
		snprintf(node, sizeof(node), "node%d", i + 1);
		snprintf(dom, sizeof(dom), "rack%d", i / 16);
		if (pipette_bwcache_set_domain(bw, node, dom, 0, 0, err))
			return 1;
	}
	return 0;
}

/* In a child: the bench's generated cache of `nodes` x 8 GPUs to v1, and
 * restated per 16-node switch with tolerance 0.05 to v2 (above the
 * generator's 3% noise, pipette_bw_gen_init, so that the slow pairs are
 * what stays a link), and with each switch an NVLink domain to v3 (v3
 * NULL: not written). */
static int write_caches(int nodes, const char *v1, const char *v2, const char *v3)
{
	struct usage u;
	pid_t pid;

	fflush(stdout);		/* or the child's exit writes it again */
	pid = fork();
	if (pid == 0) {
		struct pipette_bw_gen g;
		struct pipette_bwcache *bw;
		struct pipette_err err;
		int *group_of = malloc((size_t)nodes * sizeof(int)), i, n_sw = nodes / 16;
		char **names = malloc((size_t)n_sw * sizeof(char *));

		bench_gen(&g, nodes);
		for (i = 0; i < nodes; i++)
			group_of[i] = i / 16;
		for (i = 0; i < n_sw; i++) {
			names[i] = malloc(16);
			snprintf(names[i], 16, "switch%d", i);
		}
		_exit(pipette_bwcache_generate(&g, &bw, &err) ||
		      pipette_bwcache_save(bw, v1, &err) ||
		      pipette_bwcache_set_groups(bw, n_sw, (const char *const *)names, group_of,
						 0.05, &err) ||
		      pipette_bwcache_save(bw, v2, &err) ||
		      (v3 && (set_domains(bw, nodes, &err) ||
			      pipette_bwcache_save(bw, v3, &err))));
	}
	return wait_child(pid, &u);
}

/* In a child: load the cache and make the cluster of all its nodes; its
 * usage, and the cache's own bytes through a pipe. */
static int child_load(const char *path, struct usage *u, size_t *bytes)
{
	int fd[2];
	pid_t pid;

	if (pipe(fd))
		return -1;
	fflush(stdout);
	pid = fork();
	if (pid == 0) {
		struct pipette_bwcache *bw;
		struct pipette_cluster *c;
		struct pipette_err err;
		const struct pipette_gpu_spec *gpu = pipette_gpu_lookup("H100", &err);
		const char **names;
		size_t b;
		int n, i;

		close(fd[0]);
		if (!gpu || pipette_bwcache_load(path, &bw, &err)) {
			fprintf(stderr, "bench_cache: %s\n", err.msg);
			_exit(1);
		}
		n = pipette_bwcache_node_count(bw);
		names = malloc((size_t)n * sizeof(char *));
		for (i = 0; i < n; i++)
			names[i] = pipette_bwcache_node_name(bw, i);
		if (!(c = pipette_cluster_create(names, n, 8, NULL, gpu, bw, 0, &err))) {
			fprintf(stderr, "bench_cache: %s\n", err.msg);
			_exit(1);
		}
		b = pipette_bwcache_bytes(bw);
		_exit(write(fd[1], &b, sizeof(b)) != sizeof(b));
	}
	close(fd[1]);
	if (wait_child(pid, u) || read(fd[0], bytes, sizeof(*bytes)) != sizeof(*bytes)) {
		close(fd[0]);
		return -1;
	}
	close(fd[0]);
	return 0;
}

/* `pipette bandwidth validate path`, its output dropped. */
static int child_validate(const char *path, struct usage *u)
{
	pid_t pid;

	fflush(stdout);
	pid = fork();
	if (pid == 0) {
		if (!freopen("/dev/null", "w", stdout) || !freopen("/dev/null", "w", stderr))
			_exit(1);
		execl(PIPETTE_BIN, PIPETTE_BIN, "bandwidth", "validate", path, (char *)NULL);
		_exit(127);
	}
	return wait_child(pid, u);
}

/* One cache file: load (unless cpu_max < 0) and validate; 1 when a
 * target is missed. */
static int bench_file(const char *form, const char *path, int nodes, double cpu_max,
		      double mib_max, double validate_max, int *failed)
{
	struct usage lu = { 0, 0 }, vu;
	struct stat st;
	size_t bytes = 0;
	int miss = 0;

	if (stat(path, &st) || (cpu_max >= 0 && child_load(path, &lu, &bytes)) ||
	    child_validate(path, &vu)) {
		fprintf(stderr, "bench_cache: the %d-node %s run failed\n", nodes, form);
		*failed = 1;
		return 0;
	}
	printf("  %4d nodes %s: file %6.1f MiB", nodes, form, st.st_size / 1048576.0);
	if (cpu_max >= 0)
		printf("; load + cluster %.3f s, peak RSS %.0f MiB (cache %.1f MiB, %.2f B per "
		       "node pair)", lu.cpu_s, lu.rss_mib, bytes / 1048576.0,
		       (double)bytes / ((double)nodes * (nodes - 1)));
	if (cpu_max > 0) {
		printf(" (targets %.0f s, %.0f MiB: %s)", cpu_max, mib_max,
		       lu.cpu_s <= cpu_max && lu.rss_mib <= mib_max ? "met" : "MISSED");
		miss |= lu.cpu_s > cpu_max || lu.rss_mib > mib_max;
	}
	printf("; validate %.3f s, %.0f MiB", vu.cpu_s, vu.rss_mib);
	if (validate_max > 0) {
		printf(" (target %.2g s: %s)", validate_max,
		       vu.cpu_s <= validate_max ? "met" : "MISSED");
		miss |= vu.cpu_s > validate_max;
	}
	printf("\n");
	return miss;
}

int main(void)
{
	static const struct { int nodes; double cpu, mib, validate; } run[] = {
		{ 1024, 0, 0, 0 }, { 2048, 2, 256, 0 }, { 4096, 5, 512, 1 },
	};
	double load = bench_loadavg();
	size_t i;
	int miss = 0, failed = 0;

	printf("bandwidth caches (CPU time and peak RSS of a fresh process each):\n");
	for (i = 0; i < sizeof(run) / sizeof(run[0]) && !failed; i++) {
		char v1[] = "/tmp/bench_cache_XXXXXX", v2[64], v3[64];
		int fd = mkstemp(v1);

		if (fd < 0)
			return 1;
		close(fd);
		snprintf(v2, sizeof(v2), "%s.v2", v1);
		snprintf(v3, sizeof(v3), "%s.v3", v1);
		if (write_caches(run[i].nodes, v1, v2, run[i].validate ? v3 : NULL)) {
			fprintf(stderr, "bench_cache: generating %d nodes failed\n", run[i].nodes);
			failed = 1;
		} else {
			miss |= bench_file("pipette-bw/1", v1, run[i].nodes, run[i].cpu, run[i].mib,
					   run[i].validate, &failed);
			/* issue 30: the 4096-node pipette-bw/2 cache (compact
			 * already) validates within 0.5 s */
			miss |= bench_file("pipette-bw/2", v2, run[i].nodes, run[i].cpu, run[i].mib,
					   run[i].validate ? 0.5 : 0, &failed);
			if (run[i].validate)
				miss |= bench_file("pipette-bw/3", v3, run[i].nodes, -1, 0, 0.5,
						   &failed);
		}
		bench_remove_cache(v1);
		bench_remove_cache(v2);
		bench_remove_cache(v3);
	}
	if (failed)
		return 1;
	printf("  load average %.2f: %s\n", load, miss ? (load >= 0 && load < 1
		? "a target was missed on an idle machine (fails)"
		: "a target was missed on a loaded machine (not failed)") : "every target met");
	return miss && load >= 0 && load < 1;
}
