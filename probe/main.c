/* pipette-probe: measure the links and GPUs that pipette's plans rely on.
 *
 *   srun -N 64 --ntasks-per-node=1 --gpus-per-node=8 \
 *        pipette-probe --out /var/lib/pipette/bandwidth.json
 *   pipette-probe --local --json node.json      (one node's GPUs)
 *   pipette-probe --topology                    (hwloc, no GPU needed)
 *   pipette-probe --kernels kernels.csv         (the kernel grid, one GPU)
 *
 * Exit status: 0 everything measured; 1 the run finished but some nodes
 * were left out or some pairs failed (what was measured is still
 * written); 2 bad usage or input; 3 this process could not take part. */
#include "autoconf.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <slurm/slurm.h>

#include "args.h"
#include "fabric.h"
#include "hostlist.h"
#include "progress.h"
#include "gpu.h"
#include "inter.h"
#include "results.h"
#include "topo.h"
#include "inputs/readfile.h"

#define EXIT_PARTIAL 1
#define EXIT_USAGE 2
#define EXIT_FAILED 3

static const char *env_get(void *ctx, const char *name)
{
	(void)ctx;
	return getenv(name);
}

static int fail(int code, const struct pipette_err *e)
{
	fprintf(stderr, "pipette-probe: %s\n", e->msg);
	return code;
}

/* The command line, recorded as the cache's "generator". */
static void command_line(int argc, char **argv, char *buf, size_t size)
{
	size_t len = 0;
	int i;

	buf[0] = '\0';
	for (i = 0; i < argc && len + 1 < size; i++)
		len += (size_t)snprintf(buf + len, size - len, "%s%s", i ? " " : "",
					argv[i]);
}

static int run_topology(const struct pipette_probe_opts *o)
{
	struct pipette_err e;
	struct json_object *j;
	int rc;

	if (pipette_probe_topology(NULL, &j, &e))
		return fail(EXIT_FAILED, &e);
	rc = pipette_probe_write_json(j, o->json ? o->json : "-", &e);
	json_object_put(j);
	return rc ? fail(EXIT_FAILED, &e) : 0;
}

static void node_name(char *buf, size_t size)
{
	const char *s = getenv("SLURMD_NODENAME");
	char *dot;

	if (s && *s) {
		pipette_strlcpy(buf, s, size);
		return;
	}
	if (gethostname(buf, size) < 0)
		pipette_strlcpy(buf, "localhost", size);
	buf[size - 1] = '\0';
	dot = strchr(buf, '.');
	if (dot)
		*dot = '\0';
}

static int run_local(const struct pipette_probe_opts *o, const char *gen)
{
	struct pipette_probe_local *l = NULL;
	struct pipette_bwcache *bw = NULL;
	struct json_object *j;
	struct pipette_err e;
	char node[PIPETTE_PROBE_NAME_MAX];
	time_t when = time(NULL);
	int rc = 0;

	node_name(node, sizeof(node));
	if (pipette_probe_local_run(o, stderr, &l, &e))
		return fail(EXIT_FAILED, &e);
	j = pipette_probe_local_json(l, node);
	if (o->json || !o->out)
		rc = pipette_probe_write_json(j, o->json ? o->json : "-", &e);
	json_object_put(j);
	if (!rc && o->out && l->ngpu > 1 &&
	    (pipette_probe_local_to_cache(l, node, when, gen, &bw, &e) ||
	     pipette_bwcache_merge_file(o->out, bw, &e)))
		rc = -1;
	pipette_bwcache_destroy(bw);
	pipette_probe_local_destroy(l);
	return rc ? fail(EXIT_FAILED, &e) : 0;
}

/* The kernel grid into o->kernels, whole or not at all. */
static int run_kernels(const struct pipette_probe_opts *o)
{
	struct pipette_err e;
	char *buf = NULL;
	size_t len = 0;
	FILE *csv = open_memstream(&buf, &len);
	int rows = 0, rc;

	if (!csv) {
		pipette_fail(&e, "--kernels: out of memory");
		return fail(EXIT_FAILED, &e);
	}
	rc = pipette_probe_kernel_grid(csv, stderr, o->kernels_budget_s, &rows, &e);
	if (fclose(csv) && !rc)
		rc = pipette_fail(&e, "--kernels: out of memory");
	if (!rc && !rows)
		rc = pipette_fail(&e, "--kernels: no kernel could be timed");
	if (!rc)
		rc = pipette_write_file(o->kernels, "--kernels", buf, len, 0644, 1, &e);
	free(buf);
	if (rc)
		return fail(EXIT_FAILED, &e);
	fprintf(stderr, "pipette-probe: %d kernels timed into %s (pipette kernels fit %s "
		"--gpu TYPE -o site.json)\n", rows, o->kernels, o->kernels);
	return 0;
}

static int run_inter(const struct pipette_probe_opts *o, const char *gen)
{
	struct pipette_probe_task t;
	struct pipette_probe_inter_cfg cfg;
	struct pipette_probe_link_ops *nccl = NULL;
	struct pipette_probe_result *r = NULL;
	struct pipette_bwcache *bw = NULL;
	struct pipette_err e;
	struct cli_progress tty;
	char **only = NULL;
	int n_only = 0, rc = EXIT_FAILED, i;

	if (pipette_probe_task_read(env_get, NULL, o->port, &t, &e))
		return fail(EXIT_USAGE, &e);
	/* This node's NVLink domain (NVML's fabric info): without one the
	 * links are still measured, and rank 0 says why it saw none. */
	if (pipette_probe_node_domain(env_get, NULL, t.domain, &e))
		fprintf(stderr, "pipette-probe: %s: NVLink domain unknown: %s\n", t.name, e.msg);
	else if (!t.domain[0] && t.rank == 0)
		fprintf(stderr, "pipette-probe: %s: no NVLink domain: %s\n", t.name, e.msg);
	if (!t.root[0] && t.nodelist[0]) {
		int n;
		char **hosts;

		if (pipette_hostlist_expand(t.nodelist, &hosts, &n, &e))
			return fail(EXIT_USAGE, &e);
		/* Block distribution: task 0 runs on the first node. */
		pipette_strlcpy(t.root, hosts[0], sizeof(t.root));
		pipette_hostlist_free(hosts, n);
	}
	if (o->nodes && pipette_hostlist_expand(o->nodes, &only, &n_only, &e))
		return fail(EXIT_USAGE, &e);
	memset(&cfg, 0, sizeof(cfg));
	cfg.task = &t;
	cfg.opts = o;
	cfg.only = (const char *const *)only;
	cfg.n_only = n_only;
	cfg.progress = t.rank == 0 ? stderr : NULL;
	if (o->transport == PIPETTE_PROBE_TCP) {
		cfg.ops = &pipette_probe_tcp_ops;
	} else {
		nccl = pipette_probe_nccl_ops(o->gpu, &e);
		if (!nccl) {
			fail(EXIT_FAILED, &e);
			goto out;
		}
		cfg.ops = nccl;
	}
	if (t.rank == 0)
		cli_progress_start(&tty, "pipette-probe", &cfg.tty);
	i = pipette_probe_inter_run(&cfg, &r, &e);
	if (t.rank == 0)
		cli_progress_end(&tty);
	if (i) {
		fail(EXIT_FAILED, &e);
		goto out;
	}
	rc = 0;
	if (!r)		/* not rank 0 */
		goto out;
	for (i = 0; i < n_only; i++) {
		int k, seen = 0;

		for (k = 0; k < r->n; k++)
			seen |= !strcmp(r->names[k], only[i]);
		if (!seen)
			fprintf(stderr, "pipette-probe: --nodes: %s is not in this "
				"step; its links were not measured\n", only[i]);
	}
	pipette_probe_result_summary(r, o->slow_fraction, stderr);
	if (o->json) {
		struct json_object *j = pipette_probe_result_json(r);

		if (pipette_probe_write_json(j, o->json, &e))
			rc = fail(EXIT_FAILED, &e);
		json_object_put(j);
	}
	if (o->out) {
		if (pipette_probe_result_to_cache(r, gen, &bw, &e) ||
		    pipette_bwcache_merge_file(o->out, bw, &e))
			rc = fail(EXIT_FAILED, &e);
		else
			fprintf(stderr, "pipette-probe: merged into %s\n", o->out);
	}
	if (!rc) {
		for (i = 0; i < r->n; i++)
			if (r->left_out[i])
				rc = EXIT_PARTIAL;
		if (r->link_failures)
			rc = EXIT_PARTIAL;
	}
out:
	pipette_probe_result_destroy(r);
	pipette_bwcache_destroy(bw);
	pipette_probe_nccl_ops_free(nccl);
	pipette_hostlist_free(only, n_only);
	return rc;
}

int main(int argc, char **argv)
{
	struct pipette_probe_opts o;
	struct pipette_err e;
	char gen[1024];

	if (pipette_probe_parse_args(argc, argv, &o, &e)) {
		fprintf(stderr, "pipette-probe: %s\n", e.msg);
		fprintf(stderr, "Try 'pipette-probe --help'.\n");
		return EXIT_USAGE;
	}
	if (o.help) {
		pipette_probe_usage(stdout);
		return 0;
	}
	if (o.version) {
		printf("pipette-probe %s (CUDA %s, NCCL %s)\n", PACKAGE_VERSION,
#ifdef HAVE_CUDA
		       "yes",
#else
		       "no",
#endif
#ifdef HAVE_NCCL
		       "yes"
#else
		       "no"
#endif
		       );
		return 0;
	}
	command_line(argc, argv, gen, sizeof(gen));
	if (o.topology)
		return run_topology(&o);
	if (o.kernels)
		return run_kernels(&o);
	if (o.local)
		return run_local(&o, gen);
	return run_inter(&o, gen);
}
