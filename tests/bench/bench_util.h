/* Shared by the bench programs: the machine's load, and a child's CPU
 * time and peak RSS (each figure is taken in a fresh process, wait4). */
#ifndef PIPETTE_BENCH_UTIL_H
#define PIPETTE_BENCH_UTIL_H

#include <dirent.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <sys/resource.h>
#include <sys/types.h>
#include <sys/wait.h>

#include "inputs/bwcache.h"

/* The 1-minute load average, or -1. */
static inline double bench_loadavg(void)
{
	double l = -1;
	FILE *f = fopen("/proc/loadavg", "r");

	if (f) {
		if (fscanf(f, "%lf", &l) != 1)
			l = -1;
		fclose(f);
	}
	return l;
}

/* Wait for child pid: 0 when it exited 0, with its CPU time (user +
 * system, s) and peak RSS (MiB). */
static inline int bench_wait(pid_t pid, double *cpu_s, double *rss_mib)
{
	struct rusage ru;
	int status;

	if (pid < 0 || wait4(pid, &status, 0, &ru) != pid || !WIFEXITED(status) ||
	    WEXITSTATUS(status))
		return -1;
	*cpu_s = (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec * 1e-6 +
		 (double)ru.ru_stime.tv_sec + ru.ru_stime.tv_usec * 1e-6;
	*rss_mib = ru.ru_maxrss / 1024.0;
	return 0;
}

/* The benches' generated cluster of `nodes` x 8 GPUs (the examples'
 * figures: H100 nominal x 0.9, 5% slow pairs, 16-node leaf switches, one
 * slow switch, one degraded node; seed = nodes). */
static inline void bench_gen(struct pipette_bw_gen *g, int nodes)
{
	pipette_bw_gen_init(g);
	g->seed = (unsigned long long)nodes;
	g->nodes = nodes;
	g->gpus_per_node = 8;
	g->prefix = "node";
	g->inter_gbps = 45;
	g->intra_gbps = 405;
	g->slow_frac = 0.05;
	g->switch_size = 16;
	g->cross_factor = 0.9;
	g->slow_switch = 5;
	g->slow_switch_factor = 0.6;
	g->degraded_node = 77;
}

/* A cache file written by the benches and what its save leaves beside it:
 * its lock and the versions kept in FILE.versions/ (inputs/versions.h). */
static inline void bench_remove_cache(const char *file)
{
	char dir[512], path[1024];
	struct dirent *e;
	DIR *d;

	unlink(file);
	snprintf(path, sizeof(path), "%s.lock", file);
	unlink(path);
	snprintf(dir, sizeof(dir), "%s.versions", file);
	if (!(d = opendir(dir)))
		return;
	while ((e = readdir(d)))
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
			snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
			unlink(path);
		}
	closedir(d);
	rmdir(dir);
}

#endif
