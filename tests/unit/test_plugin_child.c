/* Unit tests: the planner child (plugin/child.c), its result text
 * (plugin/outcome.c) and the pinning of a step's inputs (plugin/digest.c).
 *
 * The child must bound what slurmstepd can suffer: a planner that blocks
 * (a FIFO, a hung file system), spins, eats memory, crashes or writes
 * without end costs the step a clear error within the limits, and the
 * parent's own memory does not grow.  The result text must replay exactly
 * the environment apply.c writes directly, and a truncated or garbled text
 * must never be half-applied.  A node that read a cache other than the one
 * srun pinned must fail with PIPETTE_E_CHANGED. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "check_run.h"
#include "fake_env.h"
#include "plugin.h"
#include "inputs/readfile.h"

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* AddressSanitizer reserves terabytes of address space for its shadow
 * memory, so no RLIMIT_AS fits a sanitized child: under ASan (make
 * sanitize) the address-space limit is left out, and its own test only
 * runs in the plain build. */
#if defined(__SANITIZE_ADDRESS__)
#define UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define UNDER_ASAN 1
#endif
#endif
#ifndef UNDER_ASAN
#define UNDER_ASAN 0
#endif

static struct pipette_child_limits limits(long mem, long cpu, long timeout)
{
	struct pipette_child_limits l = {
		.memory_mib = UNDER_ASAN ? 0 : mem, .cpu_s = cpu, .timeout_s = timeout,
		.result_max = 1u << 20, .uid = (unsigned)geteuid(), .gid = (unsigned)getegid(),
	};

	return l;
}

/* ---- the child runner ---------------------------------------------------- */

static int write_hello(void *arg, FILE *out)
{
	return fprintf(out, "hello %s\n", (const char *)arg) < 0 ? -1 : 0;
}

START_TEST(test_child_result)
{
	struct pipette_child_limits l = limits(256, 10, 10);
	struct pipette_err err;
	char *text = NULL;
	size_t len = 0;

	ck_assert_msg(pipette_child_run(&l, write_hello, "world", &text, &len, &err) == 0, "%s",
		      err.msg);
	ck_assert_str_eq(text, "hello world\n");
	ck_assert_uint_eq(len, 12);
	free(text);
}
END_TEST

static int write_nice(void *arg, FILE *out)
{
	(void)arg;
	errno = 0;
	return fprintf(out, "%d", getpriority(PRIO_PROCESS, 0)) < 0 ? -1 : 0;
}

/* The child runs at the priority its limits name (the plugin's planner
 * yields the CPU to slurmd and slurmstepd: remote.c). */
START_TEST(test_child_priority)
{
	struct pipette_child_limits l = limits(256, 10, 10);
	struct pipette_err err;
	char *text = NULL;
	size_t len = 0;

	l.nice = 10;
	ck_assert_msg(pipette_child_run(&l, write_nice, NULL, &text, &len, &err) == 0, "%s",
		      err.msg);
	ck_assert_str_eq(text, "10");
	free(text);
}
END_TEST

static int block_on_fifo(void *arg, FILE *out)
{
	/* A plain blocking open of a FIFO nobody writes: what a reader
	 * without O_NONBLOCK did to slurmstepd. */
	int fd = open((const char *)arg, O_RDONLY);

	(void)out;
	if (fd >= 0)
		close(fd);
	return 0;
}

START_TEST(test_child_wall_clock)
{
	char dir[] = "/tmp/pipette-child-XXXXXX", fifo[64];
	struct pipette_child_limits l = limits(256, 10, 1);
	struct pipette_err err;
	char *text = NULL;
	size_t len;
	double t0;

	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(fifo, sizeof(fifo), "%s/fifo", dir);
	ck_assert_int_eq(mkfifo(fifo, 0600), 0);
	t0 = now_s();
	ck_assert_int_eq(pipette_child_run(&l, block_on_fifo, fifo, &text, &len, &err), -1);
	ck_assert_double_lt(now_s() - t0, 4.0);
	ck_assert_msg(strstr(err.msg, "did not finish within 1 s") &&
		      strstr(err.msg, "plan_timeout"), "%s", err.msg);
	ck_assert_ptr_null(text);
	unlink(fifo);
	rmdir(dir);
}
END_TEST

static int spin(void *arg, FILE *out)
{
	volatile unsigned long x = 0;

	(void)arg;
	(void)out;
	for (;;)
		x++;
	return 0;
}

START_TEST(test_child_cpu_limit)
{
	/* The wall-clock limit well above the CPU limit: on a loaded machine
	 * a second of CPU can take tens of seconds, and the message says
	 * which limit stopped the child. */
	struct pipette_child_limits l = limits(256, 1, 50);
	struct pipette_err err;
	char *text = NULL;
	size_t len;

	ck_assert_int_eq(pipette_child_run(&l, spin, NULL, &text, &len, &err), -1);
	ck_assert_msg(strstr(err.msg, "more than 1 s of CPU time") &&
		      strstr(err.msg, "plan_cpu"), "%s", err.msg);
}
END_TEST

static int eat_memory(void *arg, FILE *out)
{
	size_t mib = 1024, i;
	char *p = malloc(mib << 20);

	(void)arg;
	(void)out;
	if (!p)
		abort();	/* what an unchecked allocation comes to */
	for (i = 0; i < (mib << 20); i += 4096)
		p[i] = 1;
	free(p);
	return 0;
}

static long max_rss_kib(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return ru.ru_maxrss;
}

START_TEST(test_child_memory_limit)
{
	struct pipette_child_limits l = limits(128, 10, 10);
	struct pipette_err err;
	char *text = NULL;
	size_t len;
	long before = max_rss_kib();

	if (UNDER_ASAN)
		return;	/* see limits() */
	ck_assert_int_eq(pipette_child_run(&l, eat_memory, NULL, &text, &len, &err), -1);
	ck_assert_msg(strstr(err.msg, "memory limit is 128 MiB") &&
		      strstr(err.msg, "plan_memory"), "%s", err.msg);
	/* The 1 GiB was asked for in the child: the parent did not grow. */
	ck_assert_int_lt(max_rss_kib() - before, 16 * 1024);
}
END_TEST

static int write_much(void *arg, FILE *out)
{
	size_t i;

	(void)arg;
	for (i = 0; i < (2u << 20) / 64; i++)
		if (fputs("J 1 PIPETTE_X=0123456789012345678901234567890123456789012345\n",
			  out) < 0)
			return -1;
	return 0;
}

START_TEST(test_child_result_bound)
{
	struct pipette_child_limits l = limits(256, 10, 10);
	struct pipette_err err;
	char *text = NULL;
	size_t len;

	ck_assert_int_eq(pipette_child_run(&l, write_much, NULL, &text, &len, &err), -1);
	ck_assert_msg(strstr(err.msg, "longer than 1048576 bytes"), "%s", err.msg);
}
END_TEST

/* abort(), not a SIGSEGV: AddressSanitizer reports a segfault as its own
 * error (make sanitize), an abort it lets through. */
static int crash(void *arg, FILE *out)
{
	(void)arg;
	(void)out;
	abort();
	return 0;
}

START_TEST(test_child_crash)
{
	struct pipette_child_limits l = limits(256, 10, 10);
	struct pipette_err err;
	char *text = NULL;
	size_t len;

	ck_assert_int_eq(pipette_child_run(&l, crash, NULL, &text, &len, &err), -1);
	ck_assert_msg(strstr(err.msg, "died of signal 6"), "%s", err.msg);
}
END_TEST

/* ---- the result text ----------------------------------------------------- */

START_TEST(test_outcome_parse_apply)
{
	char text[] = "W the cache is 40 days old\nL chosen: tp 2\n"
		      "J 1 PIPETTE_TP=2\nT 0 1 RANK=0\nT 1 1 RANK=1\nT 1 0 MASTER_PORT=61000\n"
		      "END\n";
	struct pipette_outcome o;
	struct fake_env e = { 0 };
	struct pipette_env_ops env = { fake_get, fake_set, &e };
	struct pipette_err err;

	ck_assert_msg(pipette_outcome_parse(text, &o, &err) == 0, "%s", err.msg);
	ck_assert_int_eq(o.failed, 0);
	ck_assert_int_eq(pipette_outcome_apply(&o, 1, &env, &err), 0);
	ck_assert_int_eq(e.n, 3);
	ck_assert_str_eq(fake_value(&e, "PIPETTE_TP"), "2");
	ck_assert_str_eq(fake_value(&e, "RANK"), "1");
	ck_assert_str_eq(fake_value(&e, "MASTER_PORT"), "61000");
	/* The job only (the batch step): no task variable. */
	memset(&e, 0, sizeof(e));
	ck_assert_int_eq(pipette_outcome_apply(&o, -1, &env, &err), 0);
	ck_assert_int_eq(e.n, 1);
	/* Applying twice walks the same intact text. */
	ck_assert_int_eq(pipette_outcome_apply(&o, 0, &env, &err), 0);
	ck_assert_str_eq(fake_value(&e, "RANK"), "0");
}
END_TEST

START_TEST(test_outcome_error_record)
{
	char text[] = "E no configuration fits llama3-8b\nEND\n";
	struct pipette_outcome o;
	struct fake_env e = { 0 };
	struct pipette_env_ops env = { fake_get, fake_set, &e };
	struct pipette_err err;

	ck_assert_int_eq(pipette_outcome_parse(text, &o, &err), 0);
	ck_assert_int_eq(o.failed, 1);
	ck_assert_str_eq(o.error, "no configuration fits llama3-8b");
	ck_assert_int_eq(pipette_outcome_apply(&o, 0, &env, &err), -1);
	ck_assert_int_eq(e.n, 0);
}
END_TEST

START_TEST(test_outcome_refuses_partial)
{
	static const char *const bad[] = {
		"J 1 PIPETTE_TP=2\n",			/* no END: truncated */
		"J 1 PIPETTE_TP=2\nEND",		/* last line cut */
		"J 1 PIPETTE_TP=2\nEND\nJ 1 X=1\nEND\n", /* records after END */
		"J 2 PIPETTE_TP=2\nEND\n",		/* bad overwrite flag */
		"T 99 1 RANK=0\nEND\n",			/* task beyond the GPUs */
		"T x 1 RANK=0\nEND\n",
		"J 1 =2\nEND\n",
		"X hello\nEND\n",
		"",
	};
	size_t i;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char text[128];
		struct pipette_outcome o;
		struct pipette_err err;

		pipette_strlcpy(text, bad[i], sizeof(text));
		ck_assert_msg(pipette_outcome_parse(text, &o, &err) == -1, "accepted case %zu", i);
		ck_assert_msg(strstr(err.msg, "planner's result"), "%s", err.msg);
	}
}
END_TEST

#define NODES 2
#define GPUS 8
static const char *const node_names[NODES] = { "gpu-b", "gpu-a" };
static char *const slurm_gpus[GPUS] = { "10", "11", "12", "13", "14", "15", "16", "17" };

static struct pipette_plan *make_plan(void)
{
	struct pipette_site site;
	struct pipette_opts o;
	struct pipette_request req;
	struct pipette_cluster_spec cs = { NODES, node_names, GPUS, NULL };
	struct pipette_plan *plan = NULL;
	struct pipette_err err;

	pipette_site_init(&site);
	strcpy(site.gpu, "H100");
	pipette_opts_init(&o);
	ck_assert_int_eq(pipette_opts_set(&o, PIPETTE_OPT_MODEL, "llama3-8b", &err), 0);
	ck_assert_int_eq(pipette_opts_set(&o, PIPETTE_OPT_GLOBAL_BATCH, "64", &err), 0);
	ck_assert_int_eq(pipette_opts_set(&o, PIPETTE_OPT_SEQ_LEN, "2048", &err), 0);
	ck_assert_msg(pipette_request_build(&o, &site, PIPETTE_LAUNCH_SRUN, &req, &err) == 0,
		      "%s", err.msg);
	ck_assert_msg(pipette_plan_compute(&req, &cs, &plan, &err) == 0, "%s", err.msg);
	return plan;
}

/* Recording a plan and replaying the text gives each task exactly the
 * environment apply.c writes directly. */
START_TEST(test_outcome_replays_apply)
{
	struct pipette_plan *plan = make_plan();
	struct pipette_task_ctx t = { .gpus = slurm_gpus, .ngpus = GPUS, .master_port = 61234 };
	struct pipette_err err;
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);
	struct pipette_outcome o;
	int node, k;

	t.node = pipette_plan_node_index(plan, "gpu-a");
	ck_assert_int_eq(t.node, 0);	/* canonical order, not the listed one */
	ck_assert_int_eq(pipette_plan_node_index(plan, "gpu-b"), 1);
	ck_assert_int_eq(pipette_plan_node_index(plan, "gpu-c"), -1);
	for (node = 0; node < NODES; node++) {
		ck_assert_ptr_nonnull(f);
		t.node = node;
		ck_assert_int_eq(pipette_outcome_record_job(f, plan, &err), 0);
		for (k = 0; k < GPUS; k++) {
			t.local_task = k;
			ck_assert_msg(pipette_outcome_record_task(f, plan, &t, &err) == 0, "%s",
				      err.msg);
		}
		ck_assert_int_eq(pipette_outcome_end(f), 0);
		ck_assert_int_eq(fclose(f), 0);
		ck_assert_msg(pipette_outcome_parse(text, &o, &err) == 0, "%s", err.msg);
		for (k = 0; k < GPUS; k++) {
			struct fake_env direct = { 0 }, replayed = { 0 };
			struct pipette_env_ops de = { fake_get, fake_set, &direct };
			struct pipette_env_ops re = { fake_get, fake_set, &replayed };

			t.local_task = k;
			ck_assert_int_eq(pipette_apply_task(plan, &t, &de, &err), 0);
			ck_assert_int_eq(pipette_outcome_apply(&o, k, &re, &err), 0);
			fake_env_same(&direct, &replayed);
			ck_assert_ptr_nonnull(fake_value(&replayed, "PIPETTE_PLAN_HASH"));
			ck_assert_str_eq(fake_value(&replayed, "PIPETTE_PLAN_HASH"),
					 pipette_plan_hash(plan));
		}
		free(text);
		text = NULL;
		f = open_memstream(&text, &len);
	}
	fclose(f);
	free(text);
	pipette_plan_destroy(plan);
}
END_TEST

/* ---- pinning the inputs -------------------------------------------------- */

static void opts_for(struct pipette_opts *o, const char *bw)
{
	struct pipette_err err;

	pipette_opts_init(o);
	ck_assert_int_eq(pipette_opts_set(o, PIPETTE_OPT_MODEL, "llama3-8b", &err), 0);
	ck_assert_int_eq(pipette_opts_set(o, PIPETTE_OPT_GLOBAL_BATCH, "64", &err), 0);
	ck_assert_int_eq(pipette_opts_set(o, PIPETTE_OPT_SEQ_LEN, "2048", &err), 0);
	if (bw)
		ck_assert_int_eq(pipette_opts_set(o, PIPETTE_OPT_BANDWIDTH, bw, &err), 0);
}

static void copy_file(const char *from, const char *to)
{
	struct pipette_file f;
	struct pipette_err err;
	FILE *out;

	ck_assert_msg(pipette_read_file(from, "fixture", 1 << 24, &f, &err) == 0, "%s", err.msg);
	out = fopen(to, "w");
	ck_assert_ptr_nonnull(out);
	ck_assert_uint_eq(fwrite(f.data, 1, f.len, out), f.len);
	fclose(out);
	pipette_file_free(&f);
}

static const char *const pin_nodes[4] = { "node1", "node2", "node3", "node4" };
static const struct pipette_cluster_spec pin_cs = { 4, pin_nodes, 8, NULL };

/* The request of o under srun's digest, pinned, plans on 4 x 8 GPUs. */
static void plan_pinned(const struct pipette_opts *o, const struct pipette_site *site,
			const char *digest, struct pipette_request *req)
{
	struct pipette_plan *plan = NULL;
	struct pipette_err err;

	ck_assert_int_eq(pipette_request_build(o, site, PIPETTE_LAUNCH_SRUN, req, &err), 0);
	ck_assert_msg(pipette_pin_inputs(digest, o, req, &err) == 0, "%s", err.msg);
	ck_assert_msg(pipette_plan_compute(req, &pin_cs, &plan, &err) == 0, "%s", err.msg);
	pipette_plan_destroy(plan);
}

/* The same request after a pinned file changed: PIPETTE_E_CHANGED, the
 * message naming `what` and the file. */
static void assert_changed(const struct pipette_request *req, const char *what, const char *path)
{
	struct pipette_plan *plan = NULL;
	struct pipette_err err;

	ck_assert_int_eq(pipette_plan_compute(req, &pin_cs, &plan, &err), -1);
	ck_assert_int_eq(pipette_err_code(&err), PIPETTE_E_CHANGED);
	ck_assert_msg(strstr(err.msg, "changed while the step started") && strstr(err.msg, what) &&
		      strstr(err.msg, path), "%s", err.msg);
}

static void write_file(const char *path, const char *mode, const char *text)
{
	FILE *f = fopen(path, mode);

	ck_assert_ptr_nonnull(f);
	fputs(text, f);
	fclose(f);
}

START_TEST(test_digest_pins_cache)
{
	char dir[] = "/tmp/pipette-pin-XXXXXX", cache[80], digest[PIPETTE_DIGEST_MAX];
	struct pipette_site site;
	struct pipette_opts o, other;
	struct pipette_request req;
	struct pipette_err err;

	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(cache, sizeof(cache), "%s/bw.json", dir);
	copy_file(TEST_DATADIR "/../../etc/examples/uniform-4x8-h100.json", cache);
	pipette_site_init(&site);
	strcpy(site.gpu, "H100");
	opts_for(&o, cache);
	ck_assert_int_eq(pipette_input_digest(&o, &site, digest, sizeof(digest)), 0);
	/* "3:" options ":" cache ":-:-:-": a preset model, no calibration, no
	 * topology */
	ck_assert_int_eq(strlen(digest), 2 + PIPETTE_HASH_HEX + 1 + PIPETTE_HASH_HEX + 6);
	ck_assert_msg(!strcmp(digest + strlen(digest) - 6, ":-:-:-"), "a preset model, no "
		      "calibration or no topology pinned: %s", digest);

	/* Same options, same file: the plan goes ahead. */
	plan_pinned(&o, &site, digest, &req);
	ck_assert_int_eq(strlen(req.pin_bandwidth_sha256), PIPETTE_HASH_HEX);

	/* The cache is replaced after srun read it: PIPETTE_E_CHANGED. */
	write_file(cache, "a", "\n");
	assert_changed(&req, "bandwidth cache", cache);

	/* Options that differ from srun's. */
	opts_for(&other, cache);
	ck_assert_int_eq(pipette_opts_set(&other, PIPETTE_OPT_GLOBAL_BATCH, "128", &err), 0);
	ck_assert_int_eq(pipette_request_build(&other, &site, PIPETTE_LAUNCH_SRUN, &req, &err), 0);
	ck_assert_int_eq(pipette_pin_inputs(digest, &other, &req, &err), -1);
	ck_assert_int_eq(pipette_err_code(&err), PIPETTE_E_CHANGED);

	/* No digest (batch step, --export=NONE): nothing pinned. */
	ck_assert_int_eq(pipette_request_build(&o, &site, PIPETTE_LAUNCH_SRUN, &req, &err), 0);
	ck_assert_int_eq(pipette_pin_inputs("", &o, &req, &err), 0);
	ck_assert_str_eq(req.pin_bandwidth_sha256, "");

	unlink(cache);
	rmdir(dir);
}
END_TEST

/* The site's calibration is pinned like the cache: srun hashes it into the
 * digest's last field, and a node that reads another fit fails the step
 * (PIPETTE_E_CHANGED) instead of planning with other factors than the
 * other nodes. */
START_TEST(test_digest_pins_calibration)
{
	char dir[] = "/tmp/pipette-pin-XXXXXX", cal[80], digest[PIPETTE_DIGEST_MAX];
	const char *field;
	int k;
	struct pipette_site site;
	struct pipette_opts o;
	struct pipette_request req;

	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(cal, sizeof(cal), "%s/cal.json", dir);
	write_file(cal, "w", "{\"site\": [{\"gpu\": \"H100-SXM-80GB\", \"stack\": \"megatron\", "
		   "\"compute_factor\": 1.1, \"comm_factor\": 1.0}]}\n");
	pipette_site_init(&site);
	strcpy(site.gpu, "H100");
	strcpy(site.calibration, cal);
	opts_for(&o, NULL);
	ck_assert_int_eq(pipette_input_digest(&o, &site, digest, sizeof(digest)), 0);
	/* the calibration's field (the fifth), before the topology's ("-") */
	for (k = 0, field = digest; k < 4; k++)
		field = strchr(field, ':') + 1;
	ck_assert_msg(strcspn(field, ":") == PIPETTE_HASH_HEX &&
		      !strcmp(field + PIPETTE_HASH_HEX, ":-"),
		      "the calibration is not pinned: %s", digest);
	plan_pinned(&o, &site, digest, &req);
	ck_assert_int_eq(strlen(req.pin_calibration_sha256), PIPETTE_HASH_HEX);

	/* A new fit lands after srun read the file. */
	write_file(cal, "w", "{\"site\": [{\"gpu\": \"H100-SXM-80GB\", \"stack\": \"megatron\", "
		   "\"compute_factor\": 1.2, \"comm_factor\": 1.0}]}\n");
	assert_changed(&req, "calibration", cal);
	unlink(cal);
	rmdir(dir);
}
END_TEST

/* The site's topology.conf (its blocks are the NVLink domains) is pinned
 * like the cache: srun hashes it into the digest's last field, and a node
 * that reads other blocks fails the step instead of planning other
 * domains than the other nodes. */
START_TEST(test_digest_pins_topology)
{
	char dir[] = "/tmp/pipette-pin-XXXXXX", topo[80], digest[PIPETTE_DIGEST_MAX];
	struct pipette_site site;
	struct pipette_opts o;
	struct pipette_request req;
	const char *last;

	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(topo, sizeof(topo), "%s/topology.conf", dir);
	/* H100 boards: a block is one node (the GPU type's NVLink domain) */
	write_file(topo, "w", "BlockName=b1 Nodes=node1\nBlockName=b2 Nodes=node2\n");
	pipette_site_init(&site);
	strcpy(site.gpu, "H100");
	strcpy(site.topology, topo);
	opts_for(&o, NULL);
	ck_assert_int_eq(pipette_input_digest(&o, &site, digest, sizeof(digest)), 0);
	last = strrchr(digest, ':') + 1;
	ck_assert_msg(strlen(last) == PIPETTE_HASH_HEX, "the topology is not pinned: %s", digest);
	plan_pinned(&o, &site, digest, &req);
	ck_assert_str_eq(req.pin_topology_sha256, last);

	/* The blocks change after srun read the file. */
	write_file(topo, "w", "BlockName=b1 Nodes=node3\nBlockName=b2 Nodes=node4\n");
	assert_changed(&req, "topology", topo);
	/* Without srun's digest nothing is pinned, and the new blocks plan. */
	plan_pinned(&o, &site, "", &req);
	ck_assert_str_eq(req.pin_topology_sha256, "");
	unlink(topo);
	rmdir(dir);
}
END_TEST

START_TEST(test_digest_malformed)
{
	static const char *const bad[] = {
		"2:0123456789abcdef:-:-:-", "4:0123456789abcdef:-:-:-:-",
		"3:0123456789abcdef:-:-:-", "3:0123456789abcdeg:-:-:-:-",
		"3:0123456789abcdef:-:-:-:-:", "3:01234:-:-:-:-",
		"3:0123456789abcdef:-:-:-:0123", "garbage",
	};
	struct pipette_opts o;
	struct pipette_request req;
	struct pipette_err err;
	size_t i;

	opts_for(&o, NULL);
	pipette_request_init(&req);
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		ck_assert_msg(pipette_pin_inputs(bad[i], &o, &req, &err) == -1, "accepted %s",
			      bad[i]);
		ck_assert_msg(strstr(err.msg, PIPETTE_DIGEST_VAR), "%s", err.msg);
	}
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("plugin_child");
	TCase *tc = tcase_create("child");

	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_child_result);
	tcase_add_test(tc, test_child_priority);
	tcase_add_test(tc, test_child_wall_clock);
	tcase_add_test(tc, test_child_cpu_limit);
	tcase_add_test(tc, test_child_memory_limit);
	tcase_add_test(tc, test_child_result_bound);
	tcase_add_test(tc, test_child_crash);
	suite_add_tcase(s, tc);
	tc = tcase_create("outcome");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_outcome_parse_apply);
	tcase_add_test(tc, test_outcome_error_record);
	tcase_add_test(tc, test_outcome_refuses_partial);
	tcase_add_test(tc, test_outcome_replays_apply);
	suite_add_tcase(s, tc);
	tc = tcase_create("digest");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_digest_pins_cache);
	tcase_add_test(tc, test_digest_pins_calibration);
	tcase_add_test(tc, test_digest_pins_topology);
	tcase_add_test(tc, test_digest_malformed);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return check_run(suite());
}
