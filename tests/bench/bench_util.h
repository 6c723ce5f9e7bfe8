/* Shared by the bench programs: the machine's load, and a child's CPU
 * time and peak RSS (each figure is taken in a fresh process, wait4). */
#ifndef PIPETTE_BENCH_UTIL_H
#define PIPETTE_BENCH_UTIL_H

#include <stdio.h>
#include <sys/resource.h>
#include <sys/types.h>
#include <sys/wait.h>

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

#endif
