#include "args.h"
#include "tournament.h"

#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Default message sizes.  NCCL: 64 KiB fixes α, 4 MiB and 64 MiB fix β
 * (nvbandwidth's default --bufferSize is 64 MiB, NVIDIA/nvbandwidth
 * README; the original Pipette used a single 30 MiB message,
 * "sendrecv_perf -b 31457280 -e 31457280" in run_nccl_test.sh of
 * yimjinkyu1/date2024_pipette @a2b0683).  TCP: smaller, so that a shaped
 * 100 Mbit/s test link still finishes a pair in seconds. */
static const size_t nccl_sizes[] = { 64u << 10, 4u << 20, 64u << 20 };
static const size_t tcp_sizes[] = { 64u << 10, 1u << 20, 16u << 20 };

enum { OPT_TRANSPORT = 256, OPT_NODES, OPT_SIZES, OPT_REPS, OPT_TIMEOUT,
       OPT_PORT, OPT_GPU, OPT_SLOW, OPT_P2P_BYTES, OPT_HBM_BYTES,
       OPT_NCCL_PAIRS, OPT_KERNELS, OPT_KERNELS_BUDGET };

static const struct option longopts[] = {
	{ "help", no_argument, NULL, 'h' },
	{ "version", no_argument, NULL, 'V' },
	{ "local", no_argument, NULL, 'l' },
	{ "topology", no_argument, NULL, 'T' },
	{ "kernels", required_argument, NULL, OPT_KERNELS },
	{ "kernels-budget", required_argument, NULL, OPT_KERNELS_BUDGET },
	{ "p2p", no_argument, NULL, 'p' },
	{ "nccl", no_argument, NULL, OPT_NCCL_PAIRS },
	{ "gemm", no_argument, NULL, 'g' },
	{ "hbm", no_argument, NULL, 'm' },
	{ "transport", required_argument, NULL, OPT_TRANSPORT },
	{ "out", required_argument, NULL, 'o' },
	{ "json", required_argument, NULL, 'j' },
	{ "nodes", required_argument, NULL, OPT_NODES },
	{ "sizes", required_argument, NULL, OPT_SIZES },
	{ "reps", required_argument, NULL, OPT_REPS },
	{ "timeout", required_argument, NULL, OPT_TIMEOUT },
	{ "port", required_argument, NULL, OPT_PORT },
	{ "gpu", required_argument, NULL, OPT_GPU },
	{ "slow-fraction", required_argument, NULL, OPT_SLOW },
	{ "p2p-bytes", required_argument, NULL, OPT_P2P_BYTES },
	{ "hbm-bytes", required_argument, NULL, OPT_HBM_BYTES },
	{ NULL, 0, NULL, 0 }
};

void pipette_probe_usage(void *stream)
{
	fprintf((FILE *)stream,
"usage: srun -N NODES --ntasks-per-node=1 pipette-probe [--out CACHE] [OPTIONS]\n"
"       pipette-probe --local [--p2p] [--nccl] [--gemm] [--hbm] [--json FILE]\n"
"       pipette-probe --topology [--json FILE]\n"
"       pipette-probe --kernels FILE [--kernels-budget SEC]\n"
"\n"
"Between nodes (one task per node, started by srun):\n"
"  --transport nccl|tcp  NCCL send/recv between one GPU per node (default),\n"
"                        or TCP sockets (no GPU needed)\n"
"  --out FILE            merge the node x node matrix into this bandwidth\n"
"                        cache (pipette-bw/1), atomically, on rank 0\n"
"  --nodes HOSTLIST      measure only the links that touch these nodes\n"
"  --sizes LIST          2-8 message sizes, e.g. 64K,4M,64M\n"
"  --reps N              timed repetitions per size and direction (5)\n"
"  --timeout SEC         bound on every socket operation (60)\n"
"  --port N              rank 0's control port (default from the job id)\n"
"  --gpu N               CUDA device for NCCL (default: the first visible)\n"
"  --slow-fraction F     summary flags nodes below F x the median (0.8)\n"
"Inside one node:\n"
"  --local               GPU figures; pick parts with --p2p (CUDA peer\n"
"                        copies), --nccl (NCCL pairs), --gemm (cuBLAS BF16),\n"
"                        --hbm; all four when none is named\n"
"  --p2p-bytes SIZE      peer copy size (64M);  --hbm-bytes SIZE (1G)\n"
"  --topology            PCI tree, NUMA nodes, GPUs and NICs from hwloc\n"
"  --kernels FILE        time the GEMMs of Llama 3 layers (BF16; FP8 where the\n"
"                        GPU has it) on the first GPU and write the CSV that\n"
"                        `pipette kernels fit` reads; --kernels-budget SEC\n"
"                        stops starting new shapes after SEC (150)\n"
"  --json FILE           write the raw results as JSON ('-' = stdout)\n"
"Environment: SLURM_PROCID, SLURM_NTASKS, SLURMD_NODENAME, SLURM_JOB_ID,\n"
"SLURM_STEP_ID, SLURM_STEP_NODELIST; PIPETTE_PROBE_ROOT and\n"
"PIPETTE_PROBE_PORT override rank 0's host and port.\n");
}

int pipette_probe_parse_size(const char *s, size_t *out, const char *what,
			     struct pipette_err *err)
{
	char *end = NULL;
	unsigned long long v, mul = 1;

	if (!s || !isdigit((unsigned char)*s))
		return pipette_fail(err, "%s: '%.32s' is not a size (e.g. 4M)",
				    what, s ? s : "");
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno)
		return pipette_fail(err, "%s: '%.32s' is out of range", what, s);
	switch (*end) {
	case 'K': case 'k': mul = 1ull << 10; end++; break;
	case 'M': case 'm': mul = 1ull << 20; end++; break;
	case 'G': case 'g': mul = 1ull << 30; end++; break;
	default: break;
	}
	if (*end == 'i' && end[1] == 'B')
		end += 2;
	else if (*end == 'B' && mul > 1)
		end++;
	if (*end)
		return pipette_fail(err, "%s: '%.32s' has an unknown suffix "
				    "(K, M or G)", what, s);
	if (v == 0 || v > (1ull << 34) / mul)
		return pipette_fail(err, "%s: '%.32s' is out of range [1, 16G]",
				    what, s);
	*out = (size_t)(v * mul);
	return 0;
}

static int parse_sizes(const char *s, struct pipette_probe_opts *o,
		       struct pipette_err *err)
{
	char buf[256], *tok, *save = NULL;
	int i, j;

	if (pipette_strlcpy(buf, s, sizeof(buf)))
		return pipette_fail(err, "--sizes: list too long");
	o->nsizes = 0;
	for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		if (o->nsizes == PIPETTE_PROBE_MAX_SIZES)
			return pipette_fail(err, "--sizes: more than %d sizes",
					    PIPETTE_PROBE_MAX_SIZES);
		if (pipette_probe_parse_size(tok, &o->sizes[o->nsizes], "--sizes",
					     err))
			return -1;
		o->nsizes++;
	}
	for (i = 0; i < o->nsizes; i++)
		for (j = 0; j < i; j++)
			if (o->sizes[i] == o->sizes[j])
				return pipette_fail(err, "--sizes: %zu bytes is "
						    "given twice", o->sizes[i]);
	if (o->nsizes < 2)
		return pipette_fail(err, "--sizes: need at least 2 distinct sizes "
				    "to fit latency and bandwidth, got %d",
				    o->nsizes);
	return 0;
}

/* What one run does: --local, --topology or --kernels, with the options
 * that apply to it. */
static int check_modes(struct pipette_probe_opts *o, int sizes_given, int budget_given,
		       struct pipette_err *err)
{
	if (o->local + o->topology + !!o->kernels > 1)
		return pipette_fail(err, "--local, --topology and --kernels: choose one");
	if (budget_given && !o->kernels)
		return pipette_fail(err, "--kernels-budget needs --kernels");
	if (o->kernels && (o->out || o->json || o->nodes || sizes_given))
		return pipette_fail(err, "--kernels writes its CSV only: no --out, --json, "
				    "--nodes or --sizes");
	if ((o->p2p || o->nccl_pairs || o->gemm || o->hbm) && !o->local)
		return pipette_fail(err, "--p2p, --nccl, --gemm and --hbm need --local");
	if (o->local && !(o->p2p || o->nccl_pairs || o->gemm || o->hbm))
		o->p2p = o->nccl_pairs = o->gemm = o->hbm = 1;
	if ((o->local || o->topology) && (o->nodes || sizes_given))
		return pipette_fail(err, "--nodes and --sizes apply to the "
				    "inter-node run, not to --%s",
				    o->local ? "local" : "topology");
	if (o->topology && o->out)
		return pipette_fail(err, "--out: --topology writes no bandwidth; "
				    "use --json");
	return 0;
}

int pipette_probe_parse_args(int argc, char **argv, struct pipette_probe_opts *o,
			     struct pipette_err *err)
{
	int c, sizes_given = 0, budget_given = 0, i;
	long v;

	memset(o, 0, sizeof(*o));
	o->transport = PIPETTE_PROBE_NCCL;
	o->reps = 5;
	o->timeout_s = 60;
	o->gpu = -1;
	o->slow_fraction = 0.8;
	o->p2p_bytes = 64u << 20;	/* nvbandwidth's default bufferSize */
	o->hbm_bytes = 1u << 30;
	o->kernels_budget_s = 150;	/* kernels.py's KERNELS_BUDGET_S */
	optind = 0;	/* reset getopt, so the parser can run more than once */
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":hV", longopts, NULL)) != -1) {
		switch (c) {
		case 'h': o->help = 1; break;
		case 'V': o->version = 1; break;
		case 'l': o->local = 1; break;
		case 'T': o->topology = 1; break;
		case 'p': o->p2p = 1; break;
		case OPT_NCCL_PAIRS: o->nccl_pairs = 1; break;
		case 'g': o->gemm = 1; break;
		case 'm': o->hbm = 1; break;
		case 'o': o->out = optarg; break;
		case OPT_KERNELS:
			if (!*optarg)
				return pipette_fail(err, "--kernels: empty file name");
			o->kernels = optarg;
			break;
		case OPT_KERNELS_BUDGET:
			if (pipette_parse_double(optarg, 1, 86400, &o->kernels_budget_s,
						 "--kernels-budget", err))
				return -1;
			budget_given = 1;
			break;
		case 'j': o->json = optarg; break;
		case OPT_NODES:
			if (!*optarg)
				return pipette_fail(err, "--nodes: empty host list");
			o->nodes = optarg;
			break;
		case OPT_TRANSPORT:
			if (!strcmp(optarg, "nccl"))
				o->transport = PIPETTE_PROBE_NCCL;
			else if (!strcmp(optarg, "tcp"))
				o->transport = PIPETTE_PROBE_TCP;
			else
				return pipette_fail(err, "--transport: '%.32s' is "
						    "not one of nccl, tcp", optarg);
			break;
		case OPT_SIZES:
			if (parse_sizes(optarg, o, err))
				return -1;
			sizes_given = 1;
			break;
		case OPT_REPS:
			if (pipette_parse_long(optarg, 1, 1000, &v, "--reps", err))
				return -1;
			o->reps = (int)v;
			break;
		case OPT_TIMEOUT:
			if (pipette_parse_double(optarg, 0.01, 86400, &o->timeout_s,
						 "--timeout", err))
				return -1;
			break;
		case OPT_PORT:
			if (pipette_parse_long(optarg, 1, 65535, &v, "--port", err))
				return -1;
			o->port = (int)v;
			break;
		case OPT_GPU:
			if (pipette_parse_long(optarg, 0, 1023, &v, "--gpu", err))
				return -1;
			o->gpu = (int)v;
			break;
		case OPT_SLOW:
			if (pipette_parse_double(optarg, 0.01, 1.0, &o->slow_fraction,
						 "--slow-fraction", err))
				return -1;
			break;
		case OPT_P2P_BYTES:
			if (pipette_probe_parse_size(optarg, &o->p2p_bytes,
						     "--p2p-bytes", err))
				return -1;
			break;
		case OPT_HBM_BYTES:
			if (pipette_probe_parse_size(optarg, &o->hbm_bytes,
						     "--hbm-bytes", err))
				return -1;
			break;
		case ':':
			return pipette_fail(err, "%s: missing value", argv[optind - 1]);
		default:
			return pipette_fail(err, "unknown option '%.64s'",
					    argv[optind - 1]);
		}
	}
	if (optind < argc)
		return pipette_fail(err, "unexpected argument '%.64s'", argv[optind]);
	if (o->help || o->version)
		return 0;
	if (check_modes(o, sizes_given, budget_given, err))
		return -1;
	if (!sizes_given) {
		const size_t *d = o->transport == PIPETTE_PROBE_TCP ? tcp_sizes
								     : nccl_sizes;

		o->nsizes = 3;
		for (i = 0; i < 3; i++)
			o->sizes[i] = d[i];
	}
	return 0;
}

static int env_int(pipette_probe_getenv_fn get, void *ctx, const char *name,
		   long min, long max, long *out, struct pipette_err *err)
{
	const char *s = get(ctx, name);

	if (!s)
		return pipette_fail(err, "%s is not set: start pipette-probe with "
				    "srun --ntasks-per-node=1 (or set it by hand)",
				    name);
	return pipette_parse_long(s, min, max, out, name, err);
}

int pipette_probe_task_read(pipette_probe_getenv_fn get, void *ctx, int port_opt,
			    struct pipette_probe_task *t, struct pipette_err *err)
{
	const char *s;
	long v = 0, job = 0, step = 0;

	memset(t, 0, sizeof(*t));
	if (env_int(get, ctx, "SLURM_NTASKS", 1, PIPETTE_PROBE_MAX_NODES, &v, err))
		return -1;
	t->size = (int)v;
	if (env_int(get, ctx, "SLURM_PROCID", 0, t->size - 1, &v, err))
		return -1;
	t->rank = (int)v;
	s = get(ctx, "SLURMD_NODENAME");
	if (s && *s) {
		if (pipette_strlcpy(t->name, s, sizeof(t->name)))
			return pipette_fail(err, "SLURMD_NODENAME: '%.64s...' is "
					    "longer than %d characters", s,
					    PIPETTE_PROBE_NAME_MAX - 1);
	} else if (gethostname(t->name, sizeof(t->name)) < 0) {
		return pipette_fail(err, "SLURMD_NODENAME is not set and "
				    "gethostname failed");
	} else {
		char *dot = strchr(t->name, '.');

		t->name[sizeof(t->name) - 1] = '\0';
		if (dot)
			*dot = '\0';
	}
	s = get(ctx, "PIPETTE_PROBE_ROOT");
	if (s && *s) {
		if (pipette_strlcpy(t->root, s, sizeof(t->root)))
			return pipette_fail(err, "PIPETTE_PROBE_ROOT: too long");
	} else {
		s = get(ctx, "SLURM_STEP_NODELIST");
		if (!s || !*s)
			s = get(ctx, "SLURM_JOB_NODELIST");
		if (!s || !*s) {
			if (t->size > 1)
				return pipette_fail(err, "neither PIPETTE_PROBE_ROOT "
						    "nor SLURM_STEP_NODELIST is "
						    "set: cannot find rank 0");
		} else if (pipette_strlcpy(t->nodelist, s, sizeof(t->nodelist))) {
			return pipette_fail(err, "SLURM_STEP_NODELIST: longer than "
					    "%zu characters", sizeof(t->nodelist) - 1);
		}
	}
	if (port_opt) {
		t->port = port_opt;
		return 0;
	}
	s = get(ctx, "PIPETTE_PROBE_PORT");
	if (s && *s) {
		if (pipette_parse_long(s, 1, 65535, &v, "PIPETTE_PROBE_PORT", err))
			return -1;
		t->port = (int)v;
		return 0;
	}
	if (get(ctx, "SLURM_JOB_ID") &&
	    env_int(get, ctx, "SLURM_JOB_ID", 0, 0x7fffffffL, &job, err))
		return -1;
	s = get(ctx, "SLURM_STEP_ID");
	/* The batch step reads "batch" in some versions: treat it as 0. */
	if (s && isdigit((unsigned char)*s) &&
	    pipette_parse_long(s, 0, 0x7fffffffL, &step, "SLURM_STEP_ID", err))
		return -1;
	t->port = 61000 + (int)((job * 16 + step % 16) % 4536);
	return 0;
}
