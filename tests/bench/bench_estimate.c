/* make bench: configurations estimated per second (memory + time with the
 * schedule simulation), the figure the search depends on.  Target (issue
 * "time model"): under 1 ms per estimate at p = 64, m = 512, one core. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "inputs/cluster.h"
#include "estimate/memory.h"
#include "inputs/model.h"
#include "estimate/timing.h"

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void bench(const char *label, const char *model, struct pipette_config *c, int reps)
{
	const struct pipette_gpu_spec *g = pipette_gpu_lookup("a100", NULL);
	struct pipette_model m;
	struct pipette_memory mem;
	struct pipette_time tm;
	struct pipette_timer *t = pipette_timer_create();
	struct pipette_cluster *cl;
	int world = pipette_config_world(c), nodes = (world + 7) / 8, i;
	char **names = calloc((size_t)nodes, sizeof(char *));
	double best = 1e9, first = 0;

	pipette_model_preset(model, &m, NULL);
	for (i = 0; i < nodes; i++) {
		names[i] = malloc(16);
		snprintf(names[i], 16, "n%d", i);
	}
	cl = pipette_cluster_create((const char *const *)names, nodes, 8, NULL, g, NULL, 0, NULL);
	for (i = 0; i < reps; i++) {
		double t0 = now(), dt;

		if (pipette_time_estimate(t, &m, g, c, cl, NULL, 0, &tm, NULL)) {
			fprintf(stderr, "bench_estimate: %s failed\n", label);
			exit(1);
		}
		pipette_memory_estimate(&m, g, c, 0.8, pipette_timer_inflight(t), NULL, &mem);
		dt = now() - t0;
		if (i == 0)
			first = dt;	/* includes building the schedule's op lists */
		if (dt < best)
			best = dt;
	}
	printf("%-44s best %7.3f ms/estimate  (%6.0f estimates/s), first %.3f ms\n",
	       label, best * 1e3, 1.0 / best, first * 1e3);
	for (i = 0; i < nodes; i++)
		free(names[i]);
	free(names);
	pipette_cluster_destroy(cl);
	pipette_timer_destroy(t);
}

int main(void)
{
	struct pipette_config c;

	pipette_config_init(&c);
	c.tp = 8;
	c.pp = 64;
	c.global_batch = 512;
	c.recompute = PIPETTE_RECOMPUTE_SELECTIVE;
	c.sequence_parallel = 1;
	bench("gpt-1t tp8 pp64 m512 1f1b (512 GPUs)", "gpt-1t", &c, 50);
	c.schedule = PIPETTE_SCHED_ZB_H1;
	bench("gpt-1t tp8 pp64 m512 zb-h1", "gpt-1t", &c, 50);
	pipette_config_init(&c);
	c.tp = 8;
	c.pp = 4;
	c.dp = 4;
	c.global_batch = 512;
	c.seq_len = 4096;
	c.sequence_parallel = 1;
	c.distributed_optimizer = 1;
	bench("llama3-70b tp8 pp4 dp4 m128 1f1b (128 GPUs)", "llama3-70b", &c, 200);
	return 0;
}
