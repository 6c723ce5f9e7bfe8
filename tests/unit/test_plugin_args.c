/* Unit tests: the SPANK-free parts of spank_pipette.so — plugstack
 * arguments (plugin/args.c), option values, PIPETTE_* input variables and
 * the step layout (plugin/parse.c).  Linked directly against those files,
 * with a fake env-ops table; hostile strings included. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "inputs/config.h"
#include "plugin.h"
#include "check_run.h"

/* ---- a fake environment: NAME=VALUE pairs in an array ----------------- */
struct fake_env {
	const char *names[24];
	const char *values[24];
	int n;
};

static int fake_get(void *ctx, const char *name, char *buf, size_t len,
		    struct pipette_err *err)
{
	struct fake_env *e = ctx;
	int i;

	for (i = 0; i < e->n; i++)
		if (!strcmp(e->names[i], name)) {
			if (pipette_strlcpy(buf, e->values[i], len))
				return pipette_fail(err, "too long");
			return 0;
		}
	return 1;
}

static int fake_set(void *ctx, const char *name, const char *value, int overwrite,
		    struct pipette_err *err)
{
	(void)ctx; (void)name; (void)value; (void)overwrite; (void)err;
	return -1;
}

static struct pipette_env_ops fake_ops(struct fake_env *e)
{
	struct pipette_env_ops ops = { fake_get, fake_set, e };

	return ops;
}

static void env_put(struct fake_env *e, const char *name, const char *value)
{
	e->names[e->n] = name;
	e->values[e->n] = value;
	e->n++;
}

/* ---- plugstack arguments ---------------------------------------------- */
START_TEST(test_site_defaults)
{
	struct pipette_site s;
	struct pipette_err err;

	ck_assert_int_eq(pipette_site_parse(&s, 0, NULL, &err), 0);
	ck_assert_int_eq(s.master_port, 61000);
	ck_assert_int_eq(s.port_range, 4536);
	ck_assert_int_eq(s.default_on, 1);
	ck_assert_int_eq(s.fallback_block, 0);
	ck_assert_str_eq(s.bandwidth, "");
	ck_assert(s.mem_fraction == 0.0);
	ck_assert_int_eq(s.attention, PIPETTE_ATTN_FLASH);
	ck_assert(s.max_age_days == 0.0);	/* never warns about a cache's age */
	ck_assert_str_eq(s.plan_cache, "");	/* no plan cache: every step plans */
}
END_TEST

START_TEST(test_site_all_keys)
{
	char *av[] = { "bandwidth=/etc/pipette/bw.json", "gpu=H100", "mem_fraction=0.75",
		       "master_port=30000", "port_range=100", "models=/etc/pipette/models",
		       "budget=5000", "default=off", "fallback=block",
		       "emulate_nodes=node[1-128]", "attention=unfused", "max_age=30.5",
		       "plan_cache=/var/cache/pipette/plans", "plan_dir=/scratch/plans",
		       "calibration=/etc/pipette/site.json", "precision=fp8-current,bf16" };
	struct pipette_site s;
	struct pipette_err err;

	ck_assert_msg(pipette_site_parse(&s, 16, av, &err) == 0, "%s", err.msg);
	ck_assert_uint_eq(s.precision_set, PIPETTE_PREC_BIT(PIPETTE_PREC_FP8_CURRENT) |
					   PIPETTE_PREC_BIT(PIPETTE_PREC_BF16));
	ck_assert_str_eq(s.plan_cache, "/var/cache/pipette/plans");
	ck_assert_str_eq(s.plan_dir, "/scratch/plans");
	ck_assert_str_eq(s.calibration, "/etc/pipette/site.json");
	ck_assert(s.max_age_days == 30.5);
	ck_assert_int_eq(s.attention, PIPETTE_ATTN_UNFUSED);
	ck_assert_str_eq(s.bandwidth, "/etc/pipette/bw.json");
	ck_assert_str_eq(s.gpu, "H100");
	ck_assert(s.mem_fraction == 0.75);
	ck_assert_int_eq(s.master_port, 30000);
	ck_assert_int_eq(s.port_range, 100);
	ck_assert_str_eq(s.models, "/etc/pipette/models");
	ck_assert_int_eq(s.budget, 5000);
	ck_assert_int_eq(s.default_on, 0);
	ck_assert_int_eq(s.fallback_block, 1);
	ck_assert_str_eq(s.emulate_nodes, "node[1-128]");
}
END_TEST

START_TEST(test_site_booleans)
{
	static const char *const on[] = { "default=1", "default=true", "default=YES", "default=on" };
	static const char *const off[] = { "default=0", "default=false", "default=No", "default=off" };
	struct pipette_site s;
	struct pipette_err err;
	char *av[1];
	int i;

	for (i = 0; i < 4; i++) {
		av[0] = (char *)on[i];
		ck_assert_int_eq(pipette_site_parse(&s, 1, av, &err), 0);
		ck_assert_int_eq(s.default_on, 1);
		av[0] = (char *)off[i];
		ck_assert_int_eq(pipette_site_parse(&s, 1, av, &err), 0);
		ck_assert_int_eq(s.default_on, 0);
	}
}
END_TEST

static void site_rejects(const char *arg, const char *expect)
{
	struct pipette_site s;
	struct pipette_err err = { .msg = "" };
	char *av[1] = { (char *)arg };

	ck_assert_msg(pipette_site_parse(&s, 1, av, &err) == -1, "accepted '%s'", arg);
	ck_assert_msg(strstr(err.msg, expect), "'%s': message '%s' lacks '%s'", arg, err.msg,
		      expect);
}

START_TEST(test_site_errors)
{
	char longv[2100];

	site_rejects("colour=blue", "unknown key 'colour'");
	site_rejects("bandwidth", "expected key=value");
	site_rejects("=x", "expected key=value");
	site_rejects("bandwidth=", "empty value");
	site_rejects("default=maybe", "expected on or off");
	site_rejects("fallback=retry", "expected fail or block");
	site_rejects("attention=sdpa", "plugstack argument attention 'sdpa': expected flash");
	site_rejects("master_port=80", "out of range");
	site_rejects("master_port=6x", "not an integer");
	site_rejects("port_range=0", "out of range");
	site_rejects("mem_fraction=1.5", "out of range");
	site_rejects("mem_fraction=nan", "not a number");
	site_rejects("budget=-1", "out of range");
	site_rejects("max_age=-1", "plugstack argument max_age (days): -1 is out of range "
		     "[0, 100000]");
	site_rejects("max_age=100001", "out of range");
	site_rejects("max_age=30d", "plugstack argument max_age (days): '30d' is not a number");
	site_rejects("max_age=inf", "not a number");
	site_rejects("max_age=", "empty value");
	site_rejects("gpu=H100\tx", "control character");
	site_rejects("a_very_long_key_name_that_is_not_known=1", "unknown key");
	memset(longv, 'a', sizeof(longv) - 1);
	longv[sizeof(longv) - 1] = '\0';
	memcpy(longv, "models=", 7);
	site_rejects(longv, "longer than");
	/* plan_cache: an absolute path that names itself, with room for
	 * UID/KEY.plan below it. */
	site_rejects("plan_cache=", "plugstack argument plan_cache: empty value");
	site_rejects("plan_cache=var/cache/pipette", "plugstack argument plan_cache: "
		     "'var/cache/pipette': expected an absolute path");
	site_rejects("plan_cache=/var/cache/../tmp", "plugstack argument plan_cache: "
		     "'/var/cache/../tmp': a '.' or '..' component");
	site_rejects("plan_cache=/var/./cache", "a '.' or '..' component");
	site_rejects("plan_cache=/var/cache/..", "a '.' or '..' component");
	site_rejects("plan_cache=/tmp\n/x", "control character");
	memcpy(longv, "plan_cache=/", 12);
	longv[12 + 950] = '\0';	/* 951 bytes: fits PIPETTE_PATH_MAX, not with UID/KEY */
	site_rejects(longv, "plugstack argument plan_cache: value longer than");
	/* plan_dir: the same rules; calibration: a value */
	site_rejects("plan_dir=", "plugstack argument plan_dir: empty value");
	site_rejects("plan_dir=spool", "plugstack argument plan_dir: 'spool': expected an "
		     "absolute path");
	site_rejects("plan_dir=/spool/../etc", "plugstack argument plan_dir: '/spool/../etc': "
		     "a '.' or '..' component");
	site_rejects("calibration=", "plugstack argument calibration: empty value");
	site_rejects("precision=fp6", "plugstack argument precision: precision 'fp6': "
		     "expected bf16");
	site_rejects("precision=bf16,,mxfp8", "plugstack argument precision: precision list "
		     "'bf16,,mxfp8': expected names separated by commas");
	site_rejects("calibration=/etc/x\n", "control character");
}

START_TEST(test_site_plan_cache_paths)
{
	static const char *const good[] = { "plan_cache=/", "plan_cache=/tmp",
					     "plan_cache=/var/cache/pipette/",
					     "plan_cache=/srv/..cache/.plans" };
	struct pipette_site s;
	struct pipette_err err;
	char *av[1];
	size_t i;

	for (i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		av[0] = (char *)good[i];
		ck_assert_msg(pipette_site_parse(&s, 1, av, &err) == 0, "%s: %s", good[i], err.msg);
		ck_assert_str_eq(s.plan_cache, good[i] + strlen("plan_cache="));
	}
}
END_TEST

START_TEST(test_site_port_range_end)
{
	/* 65000 + 600 - 1 = 65599 > 65535: the range must fit the port space;
	 * 65000 + 536 - 1 = 65535 is the last that fits. */
	char *bad[] = { "master_port=65000", "port_range=600" };
	char *good[] = { "master_port=65000", "port_range=536" };
	struct pipette_site s;
	struct pipette_err err;

	ck_assert_int_eq(pipette_site_parse(&s, 2, bad, &err), -1);
	ck_assert_ptr_nonnull(strstr(err.msg, "65599"));
	ck_assert_int_eq(pipette_site_parse(&s, 2, good, &err), 0);
}
END_TEST

/* ---- --pipette-fix ---------------------------------------------------- */
START_TEST(test_fix_all_knobs)
{
	struct pipette_pins p;
	struct pipette_err err;

	ck_assert_msg(pipette_parse_fix("tp=8,pp=4,dp=2,cp=2,ep=8,etp=1,vpp=2,mb=1,"
					"schedule=zb-h1,recompute=selective,sp=1,do=0",
					&p, &err) == 0, "%s", err.msg);
	ck_assert_int_eq(p.tp, 8);
	ck_assert_int_eq(p.pp, 4);
	ck_assert_int_eq(p.dp, 2);
	ck_assert_int_eq(p.cp, 2);
	ck_assert_int_eq(p.ep, 8);
	ck_assert_int_eq(p.etp, 1);
	ck_assert_int_eq(p.vpp, 2);
	ck_assert_int_eq(p.micro_batch, 1);
	ck_assert_int_eq(p.schedule, PIPETTE_SCHED_ZB_H1);
	ck_assert_int_eq(p.recompute, PIPETTE_RECOMPUTE_SELECTIVE);
	ck_assert_int_eq(p.sequence_parallel, 1);
	ck_assert_int_eq(p.distributed_optimizer, 0);
	/* FSDP knobs (torchtitan) */
	ck_assert_msg(pipette_parse_fix("dp_shard=8,recompute_every=2,reshard=never", &p, &err) == 0,
		      "%s", err.msg);
	ck_assert_int_eq(p.dp_shard, 8);
	ck_assert_int_eq(p.recompute_every, 2);
	ck_assert_int_eq(p.reshard, PIPETTE_RESHARD_NEVER);
	ck_assert_int_eq(pipette_parse_fix("reshard=sometimes", &p, &err), -1);
	ck_assert_msg(strstr(err.msg, "expected default, always or never") != NULL, "%s", err.msg);
}
END_TEST

START_TEST(test_fix_partial_leaves_rest_unset)
{
	struct pipette_pins p;
	struct pipette_err err;

	ck_assert_int_eq(pipette_parse_fix("micro_batch=2,tp=4", &p, &err), 0);
	ck_assert_int_eq(p.tp, 4);
	ck_assert_int_eq(p.micro_batch, 2);
	ck_assert_int_eq(p.pp, -1);
	ck_assert_int_eq(p.schedule, -1);
	ck_assert_int_eq(p.sequence_parallel, -1);
	/* The largest degree a pin takes: PIPETTE_MAX_PIN (limits.h). */
	ck_assert_int_eq(pipette_parse_fix("pp=262144", &p, &err), 0);
	ck_assert_int_eq(p.pp, 262144);
}
END_TEST

static void fix_rejects(const char *s, const char *expect)
{
	struct pipette_pins p = { .tp = 77 };
	struct pipette_err err = { .msg = "" };

	ck_assert_msg(pipette_parse_fix(s, &p, &err) == -1, "accepted '%s'", s);
	ck_assert_msg(strstr(err.msg, expect), "'%s': message '%s' lacks '%s'", s, err.msg,
		      expect);
	ck_assert_int_eq(p.tp, 77);	/* untouched on failure */
}

START_TEST(test_fix_hostile)
{
	char big[4096];

	fix_rejects("", "empty");
	fix_rejects("tp", "expected knob=value");
	fix_rejects("tp=", "expected knob=value");
	fix_rejects("=8", "expected knob=value");
	fix_rejects("tp=8,tp=8", "given twice");
	fix_rejects("tp=0", "out of range");
	fix_rejects("tp=-8", "not an integer");
	fix_rejects("tp= 8", "not an integer");
	fix_rejects("tp=8x", "not an integer");
	fix_rejects("tp=99999999999999999999", "not an integer");
	/* PIPETTE_MAX_PIN = 4096 nodes x 64 GPUs = 262144 (limits.h). */
	fix_rejects("pp=262145", "out of range");
	fix_rejects("zz=1", "unknown knob 'zz'");
	fix_rejects("schedule=pipedream", "expected 1f1b");
	fix_rejects("recompute=some", "expected none");
	fix_rejects("sp=2", "expected 0 or 1");
	fix_rejects("tp=8\n,pp=2", "control character");
	fix_rejects("tp=8\033[2J", "control character");
	memset(big, '1', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	memcpy(big, "tp=", 3);
	fix_rejects(big, "longer than");
}
END_TEST

/* ---- options ---------------------------------------------------------- */
START_TEST(test_opts_set_values)
{
	struct pipette_opts o;
	struct pipette_err err;

	pipette_opts_init(&o);
	ck_assert_int_eq(pipette_opts_set(&o, PIPETTE_OPT_MODEL, "llama3-70b", &err), 0);
	ck_assert_int_eq(pipette_opts_set(&o, PIPETTE_OPT_GLOBAL_BATCH, "1024", &err), 0);
	ck_assert_int_eq(pipette_opts_set(&o, PIPETTE_OPT_SEQ_LEN, "8192", &err), 0);
	ck_assert_int_eq(pipette_opts_set(&o, PIPETTE_OPT_FIX, "tp=8", &err), 0);
	ck_assert_int_eq(pipette_opts_set(&o, PIPETTE_OPT_SCHEDULE, "interleaved", &err), 0);
	ck_assert_int_eq(pipette_opts_set(&o, PIPETTE_OPT_MEM_FRACTION, "0.9", &err), 0);
	ck_assert_int_eq(pipette_opts_set(&o, PIPETTE_OPT_MAPPING, "block", &err), 0);
	ck_assert_int_eq(pipette_opts_set(&o, PIPETTE_OPT_BANDWIDTH, "/tmp/bw.json", &err), 0);
	ck_assert_int_eq(pipette_opts_set(&o, PIPETTE_OPT_EXPLAIN, NULL, &err), 0);
	ck_assert_int_eq(pipette_opts_set(&o, PIPETTE_OPT_DRY_RUN, NULL, &err), 0);
	ck_assert_int_eq(pipette_opts_set(&o, PIPETTE_OPT_STACK, "nemo", &err), 0);
	ck_assert_int_eq(pipette_opts_set(&o, PIPETTE_OPT_STACK, "bogus", &err), -1);
	ck_assert_msg(strstr(err.msg, "--pipette-stack: stack 'bogus'"), "%s", err.msg);
	ck_assert_str_eq(o.stack, "nemo");
	ck_assert_int_eq(pipette_opts_set(&o, PIPETTE_OPT_PRECISION, "mxfp8,nvfp4", &err), 0);
	ck_assert_uint_eq(o.precision_set, PIPETTE_PREC_BIT(PIPETTE_PREC_MXFP8) |
					   PIPETTE_PREC_BIT(PIPETTE_PREC_NVFP4));
	ck_assert_int_eq(pipette_opts_set(&o, PIPETTE_OPT_PRECISION, "fp8", &err), -1);
	ck_assert_msg(strstr(err.msg, "--pipette-precision: precision 'fp8'"), "%s", err.msg);
	ck_assert_str_eq(o.model, "llama3-70b");
	ck_assert_int_eq(o.global_batch, 1024);
	ck_assert_int_eq(o.seq_len, 8192);
	ck_assert_int_eq(o.pins.tp, 8);
	ck_assert_int_eq(o.schedule, PIPETTE_SCHED_INTERLEAVED);
	ck_assert(o.mem_fraction == 0.9);
	ck_assert_int_eq(o.mapping, PIPETTE_MAP_BLOCK);
	ck_assert_str_eq(o.bandwidth, "/tmp/bw.json");
	ck_assert_int_eq(o.explain, 1);
	ck_assert_int_eq(o.dry_run, 1);
	/* a plan file: every node's planner reads it, from no particular directory */
	ck_assert_int_eq(pipette_opts_set(&o, PIPETTE_OPT_PLAN_FILE, "plan.json", &err), -1);
	ck_assert_str_eq(err.msg, "--pipette-plan-file: 'plan.json': expected an absolute path");
	ck_assert_int_eq(pipette_opts_set(&o, PIPETTE_OPT_PLAN_FILE, "/tmp/plan.json", &err), 0);
	ck_assert_str_eq(o.plan_file, "/tmp/plan.json");
	ck_assert_uint_eq(o.set, (1u << PIPETTE_OPT_COUNT) - 1);
}
END_TEST

START_TEST(test_opts_repeat_and_override)
{
	/* Slurm calls twice with the same value on the remote side, and gives
	 * the inherited value before the command line's: the last one wins. */
	struct pipette_opts o;
	struct pipette_err err;

	pipette_opts_init(&o);
	ck_assert_int_eq(pipette_opts_set(&o, PIPETTE_OPT_MODEL, "llama3-8b", &err), 0);
	ck_assert_int_eq(pipette_opts_set(&o, PIPETTE_OPT_MODEL, "llama3-8b", &err), 0);
	ck_assert_int_eq(pipette_opts_set(&o, PIPETTE_OPT_MODEL, "gpt3-175b", &err), 0);
	ck_assert_str_eq(o.model, "gpt3-175b");
	ck_assert_int_eq(pipette_opts_set(&o, PIPETTE_OPT_FIX, "tp=8,pp=2", &err), 0);
	ck_assert_int_eq(pipette_opts_set(&o, PIPETTE_OPT_FIX, "tp=4", &err), 0);
	ck_assert_int_eq(o.pins.tp, 4);
	ck_assert_int_eq(o.pins.pp, -1);	/* a new --pipette-fix replaces the old */
}
END_TEST

static void opt_rejects(enum pipette_opt_id id, const char *arg, const char *expect)
{
	struct pipette_opts o;
	struct pipette_err err = { .msg = "" };

	pipette_opts_init(&o);
	ck_assert_msg(pipette_opts_set(&o, id, arg, &err) == -1, "accepted '%s'", arg);
	ck_assert_msg(strstr(err.msg, expect), "'%s': message '%s' lacks '%s'", arg, err.msg,
		      expect);
	ck_assert_uint_eq(o.set, 0);
}

START_TEST(test_opts_hostile)
{
	char big[1100];

	opt_rejects(PIPETTE_OPT_MODEL, NULL, "missing value");
	opt_rejects(PIPETTE_OPT_MODEL, "", "empty value");
	opt_rejects(PIPETTE_OPT_MODEL, "llama\n70b", "control character");
	opt_rejects(PIPETTE_OPT_MODEL, "llama\x7f", "control character");
	opt_rejects(PIPETTE_OPT_BANDWIDTH, "/tmp/a\rb", "control character");
	opt_rejects(PIPETTE_OPT_GLOBAL_BATCH, "0", "out of range");
	opt_rejects(PIPETTE_OPT_GLOBAL_BATCH, "1e3", "not an integer");
	opt_rejects(PIPETTE_OPT_GLOBAL_BATCH, "2147483648", "out of range");
	opt_rejects(PIPETTE_OPT_SEQ_LEN, " 4096", "not a number");
	opt_rejects(PIPETTE_OPT_SEQ_LEN, "+4096", "not a number");
	opt_rejects(PIPETTE_OPT_MEM_FRACTION, "0", "out of range");
	opt_rejects(PIPETTE_OPT_MEM_FRACTION, "inf", "not a number");
	opt_rejects(PIPETTE_OPT_MAPPING, "random", "expected optimize or block");
	opt_rejects(PIPETTE_OPT_SCHEDULE, "pipedream", "--pipette-schedule");
	opt_rejects(PIPETTE_OPT_EXPLAIN, "perhaps", "expected 0 or 1");
	opt_rejects(PIPETTE_OPT_FIX, "tp=8;rm -rf", "not an integer");
	memset(big, 'm', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	opt_rejects(PIPETTE_OPT_MODEL, big, "longer than 1023");
}
END_TEST

START_TEST(test_opts_check_conflict)
{
	struct pipette_opts o;
	struct pipette_err err;

	pipette_opts_init(&o);
	pipette_opts_set(&o, PIPETTE_OPT_MODEL, "llama3-8b", &err);
	pipette_opts_set(&o, PIPETTE_OPT_FIX, "schedule=1f1b", &err);
	ck_assert_int_eq(pipette_opts_check(&o, &err), -1);
	ck_assert_ptr_nonnull(strstr(err.msg, "--pipette-global-batch=N is required"));
	pipette_opts_set(&o, PIPETTE_OPT_GLOBAL_BATCH, "16", &err);
	ck_assert_int_eq(pipette_opts_check(&o, &err), 0);
	pipette_opts_set(&o, PIPETTE_OPT_SCHEDULE, "1f1b", &err);
	ck_assert_int_eq(pipette_opts_check(&o, &err), 0);
	pipette_opts_set(&o, PIPETTE_OPT_SCHEDULE, "v-half", &err);
	ck_assert_int_eq(pipette_opts_check(&o, &err), -1);
	ck_assert_ptr_nonnull(strstr(err.msg, "conflicts"));
}
END_TEST

/* ---- PIPETTE_* input variables --------------------------------------- */
START_TEST(test_fallback_fills_unset)
{
	struct fake_env e = { .n = 0 };
	struct pipette_env_ops ops = fake_ops(&e);
	struct pipette_site site;
	struct pipette_opts o;
	struct pipette_err err;

	pipette_site_init(&site);
	env_put(&e, "PIPETTE_MODEL", "llama3-8b");
	env_put(&e, "PIPETTE_SEQ_LEN", "2048");
	env_put(&e, "PIPETTE_GLOBAL_BATCH", "64");
	env_put(&e, "PIPETTE_SCHEDULE", "zb-h1");
	env_put(&e, "PIPETTE_EXPLAIN", "1");
	env_put(&e, "PIPETTE_FIX", "pp=2");
	pipette_opts_init(&o);
	/* The command line gave the sequence length: it wins. */
	pipette_opts_set(&o, PIPETTE_OPT_SEQ_LEN, "4096", &err);
	ck_assert_msg(pipette_opts_fallback(&o, &site, &ops, &err) == 0, "%s", err.msg);
	ck_assert_str_eq(o.model, "llama3-8b");
	ck_assert_int_eq(o.seq_len, 4096);
	ck_assert_int_eq(o.global_batch, 64);
	ck_assert_int_eq(o.schedule, PIPETTE_SCHED_ZB_H1);
	ck_assert_int_eq(o.explain, 1);
	ck_assert_int_eq(o.pins.pp, 2);
	/* Input variables do not count as options given. */
	ck_assert_uint_eq(o.set, 1u << PIPETTE_OPT_SEQ_LEN);
	ck_assert_int_eq(pipette_opts_wanted(&o, &site), 1);
	site.default_on = 0;
	ck_assert_int_eq(pipette_opts_wanted(&o, &site), 0);
}
END_TEST

START_TEST(test_fallback_outputs_not_inputs)
{
	/* In a step inside a pipette batch job, PIPETTE_SCHEDULE is the batch
	 * step's output (PIPETTE_TP shows it), not a pin; PIPETTE_GLOBAL_BATCH
	 * is an output too, equal to the input, and still read. */
	struct fake_env e = { .n = 0 };
	struct pipette_env_ops ops = fake_ops(&e);
	struct pipette_site site;
	struct pipette_opts o;
	struct pipette_err err;

	pipette_site_init(&site);
	env_put(&e, "PIPETTE_MODEL", "llama3-8b");
	env_put(&e, "PIPETTE_TP", "8");
	env_put(&e, "PIPETTE_SCHEDULE", "1f1b");
	env_put(&e, "PIPETTE_PRECISION", "fp8-current");
	env_put(&e, "PIPETTE_GLOBAL_BATCH", "512");
	env_put(&e, "PIPETTE_SEQ_LEN", "2048");
	pipette_opts_init(&o);
	ck_assert_int_eq(pipette_opts_fallback(&o, &site, &ops, &err), 0);
	ck_assert_int_eq(o.schedule, -1);
	ck_assert_uint_eq(o.precision_set, 0);	/* the plan's output, not a pin */
	ck_assert_int_eq(o.global_batch, 512);
	ck_assert_int_eq(o.seq_len, 2048);
}
END_TEST

START_TEST(test_fallback_untouched_without_model)
{
	/* Garbage in other PIPETTE_* variables must not affect a job that
	 * does not ask for pipette. */
	struct fake_env e = { .n = 0 };
	struct pipette_env_ops ops = fake_ops(&e);
	struct pipette_site site;
	struct pipette_opts o;
	struct pipette_err err;

	pipette_site_init(&site);
	env_put(&e, "PIPETTE_SEQ_LEN", "garbage");
	env_put(&e, "PIPETTE_FIX", "tp=\001");
	pipette_opts_init(&o);
	ck_assert_int_eq(pipette_opts_fallback(&o, &site, &ops, &err), 0);
	ck_assert_int_eq(pipette_opts_wanted(&o, &site), 0);
	ck_assert_int_eq(o.seq_len, 0);
	/* "none" turns an inherited request off, and then nothing is read. */
	env_put(&e, "PIPETTE_MODEL", "none");
	ck_assert_int_eq(pipette_opts_fallback(&o, &site, &ops, &err), 0);
	ck_assert_int_eq(pipette_opts_wanted(&o, &site), 0);
}
END_TEST

START_TEST(test_fallback_bad_input_named)
{
	struct fake_env e = { .n = 0 };
	struct pipette_env_ops ops = fake_ops(&e);
	struct pipette_site site;
	struct pipette_opts o;
	struct pipette_err err;

	pipette_site_init(&site);
	env_put(&e, "PIPETTE_MODEL", "llama3-8b");
	env_put(&e, "PIPETTE_MAPPING", "sideways");
	pipette_opts_init(&o);
	ck_assert_int_eq(pipette_opts_fallback(&o, &site, &ops, &err), -1);
	ck_assert_msg(strstr(err.msg, "PIPETTE_MAPPING") && strstr(err.msg, "sideways"),
		      "%s", err.msg);
}
END_TEST

START_TEST(test_fallback_option_variables)
{
	/* Slurm's option variables count as options: they beat PIPETTE_* and
	 * make default=off act; a flag's variable is empty. */
	struct fake_env e = { .n = 0 };
	struct pipette_env_ops ops = fake_ops(&e);
	struct pipette_site site;
	struct pipette_opts o;
	struct pipette_err err;

	pipette_site_init(&site);
	site.default_on = 0;
	env_put(&e, "SLURM_SPANK__SLURM_SPANK_OPTION_pipette_pipette_model", "llama3-70b");
	env_put(&e, "PIPETTE_MODEL", "llama3-8b");
	env_put(&e, "SLURM_SPANK__SLURM_SPANK_OPTION_pipette_pipette_global_batch", "512");
	env_put(&e, "PIPETTE_GLOBAL_BATCH", "8");
	env_put(&e, "SLURM_SPANK__SLURM_SPANK_OPTION_pipette_pipette_dry_run", "");
	env_put(&e, "PIPETTE_SEQ_LEN", "1024");
	pipette_opts_init(&o);
	ck_assert_msg(pipette_opts_fallback(&o, &site, &ops, &err) == 0, "%s", err.msg);
	ck_assert_str_eq(o.model, "llama3-70b");
	ck_assert_int_eq(o.global_batch, 512);
	ck_assert_int_eq(o.dry_run, 1);
	ck_assert_int_eq(o.seq_len, 1024);
	ck_assert_uint_eq(o.set, (1u << PIPETTE_OPT_MODEL) | (1u << PIPETTE_OPT_GLOBAL_BATCH) |
			  (1u << PIPETTE_OPT_DRY_RUN));
	ck_assert_int_eq(pipette_opts_wanted(&o, &site), 1);
	/* A command-line value (already set) is not replaced. */
	pipette_opts_init(&o);
	pipette_opts_set(&o, PIPETTE_OPT_GLOBAL_BATCH, "64", &err);
	ck_assert_int_eq(pipette_opts_fallback(&o, &site, &ops, &err), 0);
	ck_assert_int_eq(o.global_batch, 64);
}
END_TEST

/* ---- step layout ------------------------------------------------------ */
START_TEST(test_tasks_per_node)
{
	struct pipette_err err;
	long per, nodes;

	ck_assert_int_eq(pipette_tasks_per_node("8(x4)", &per, &nodes, &err), 0);
	ck_assert_int_eq(per, 8);
	ck_assert_int_eq(nodes, 4);
	ck_assert_int_eq(pipette_tasks_per_node("1", &per, &nodes, &err), 0);
	ck_assert_int_eq(per, 1);
	ck_assert_int_eq(nodes, 1);
	ck_assert_int_eq(pipette_tasks_per_node("8,8(x2),8", &per, &nodes, &err), 0);
	ck_assert_int_eq(per, 8);
	ck_assert_int_eq(nodes, 4);
	/* srun -N4 -n16 on 8-CPU nodes packs 8+6+1+1 (harness README). */
	ck_assert_int_eq(pipette_tasks_per_node("8,6,1(x2)", &per, &nodes, &err), 0);
	ck_assert_int_eq(per, 0);
	ck_assert_int_eq(nodes, 4);
	ck_assert_int_eq(pipette_tasks_per_node("", &per, &nodes, &err), -1);
	ck_assert_int_eq(pipette_tasks_per_node("8(x", &per, &nodes, &err), -1);
	ck_assert_int_eq(pipette_tasks_per_node("8(y2)", &per, &nodes, &err), -1);
	ck_assert_int_eq(pipette_tasks_per_node("8(x0)", &per, &nodes, &err), -1);
	ck_assert_int_eq(pipette_tasks_per_node("8,", &per, &nodes, &err), -1);
	ck_assert_int_eq(pipette_tasks_per_node("8(x99999999999)", &per, &nodes, &err), -1);
	/* At most PIPETTE_MAX_NODES = 4096 nodes (limits.h). */
	ck_assert_int_eq(pipette_tasks_per_node("8(x4096)", &per, &nodes, &err), 0);
	ck_assert_int_eq(nodes, 4096);
	ck_assert_int_eq(pipette_tasks_per_node("8(x4096),1", &per, &nodes, &err), -1);
	ck_assert_msg(strstr(err.msg, "more than 4096 nodes"), "%s", err.msg);
	ck_assert_int_eq(pipette_tasks_per_node("-1", &per, &nodes, &err), -1);
}
END_TEST

START_TEST(test_launch_decide)
{
	enum pipette_launch_mode m;
	struct pipette_err err;

	ck_assert_int_eq(pipette_launch_decide(8, 8, &m, &err), 0);
	ck_assert_int_eq(m, PIPETTE_LAUNCH_SRUN);
	ck_assert_int_eq(pipette_launch_decide(1, 8, &m, &err), 0);
	ck_assert_int_eq(m, PIPETTE_LAUNCH_TORCHRUN);
	/* One GPU per node: one task is one task per GPU (srun mode). */
	ck_assert_int_eq(pipette_launch_decide(1, 1, &m, &err), 0);
	ck_assert_int_eq(m, PIPETTE_LAUNCH_SRUN);
	ck_assert_int_eq(pipette_launch_decide(4, 8, &m, &err), -1);
	ck_assert_ptr_nonnull(strstr(err.msg, "--ntasks-per-node=8"));
	ck_assert_ptr_nonnull(strstr(err.msg, "--ntasks-per-node=1"));
	ck_assert_int_eq(pipette_launch_decide(0, 8, &m, &err), -1);
	ck_assert_ptr_nonnull(strstr(err.msg, "different task counts"));
	ck_assert_int_eq(pipette_launch_decide(8, 0, &m, &err), -1);
	ck_assert_ptr_nonnull(strstr(err.msg, "--gpus-per-node"));
}
END_TEST

START_TEST(test_split_gpus)
{
	char a[] = "3,1,0,2", b[] = "GPU-5f1c2a,GPU-77aa", c[] = "0,,1", d[] = "0,1;id",
	     e[] = "", f[] = "0,1,2";
	char *tok[4];
	struct pipette_err err;
	int n;

	ck_assert_int_eq(pipette_split_gpus(a, tok, 4, &n, &err), 0);
	ck_assert_int_eq(n, 4);
	ck_assert_str_eq(tok[0], "3");
	ck_assert_str_eq(tok[3], "2");
	ck_assert_int_eq(pipette_split_gpus(b, tok, 4, &n, &err), 0);
	ck_assert_int_eq(n, 2);
	ck_assert_str_eq(tok[1], "GPU-77aa");
	ck_assert_int_eq(pipette_split_gpus(c, tok, 4, &n, &err), -1);
	ck_assert_int_eq(pipette_split_gpus(d, tok, 4, &n, &err), -1);
	ck_assert_int_eq(pipette_split_gpus(e, tok, 4, &n, &err), -1);
	ck_assert_int_eq(pipette_split_gpus(f, tok, 2, &n, &err), -1);
	ck_assert_ptr_nonnull(strstr(err.msg, "more than 2"));
}
END_TEST

START_TEST(test_master_port)
{
	/* offset = (job + 1009 * step) mod range:
	 * job 1000, step 0, range 4536 -> 1000; step 3 -> 1000 + 3027 = 4027;
	 * step 4 -> 1000 + 4036 = 5036 - 4536 = 500. */
	ck_assert_int_eq(pipette_master_port(61000, 4536, 1000, 0), 62000);
	ck_assert_int_eq(pipette_master_port(61000, 4536, 1000, 3), 65027);
	ck_assert_int_eq(pipette_master_port(61000, 4536, 1000, 4), 61500);
	/* Largest ids stay inside the range. */
	ck_assert_int_ge(pipette_master_port(61000, 4536, 0xffffffffu, 0xfffffffeu), 61000);
	ck_assert_int_lt(pipette_master_port(61000, 4536, 0xffffffffu, 0xfffffffeu), 65536);
	ck_assert_int_eq(pipette_master_port(30000, 1, 12345, 678), 30000);
}
END_TEST

START_TEST(test_master_port_concurrent_steps_distinct)
{
	/* 20 concurrent steps of one job, and steps 0 of 50 consecutive jobs:
	 * all distinct (the integration test runs 20 concurrent steps). */
	char seen[4536] = { 0 };
	uint32_t s, j;
	long p;

	for (s = 0; s < 20; s++) {
		p = pipette_master_port(61000, 4536, 777, s) - 61000;
		ck_assert_int_eq(seen[p], 0);
		seen[p] = 1;
	}
	memset(seen, 0, sizeof(seen));
	for (j = 100; j < 150; j++) {
		p = pipette_master_port(61000, 4536, j, 0) - 61000;
		ck_assert_int_eq(seen[p], 0);
		seen[p] = 1;
	}
}
END_TEST

int main(void)
{
	Suite *s = suite_create("plugin_args");
	TCase *tc = tcase_create("core");

	tcase_add_test(tc, test_site_defaults);
	tcase_add_test(tc, test_site_all_keys);
	tcase_add_test(tc, test_site_booleans);
	tcase_add_test(tc, test_site_errors);
	tcase_add_test(tc, test_site_port_range_end);
	tcase_add_test(tc, test_site_plan_cache_paths);
	tcase_add_test(tc, test_fix_all_knobs);
	tcase_add_test(tc, test_fix_partial_leaves_rest_unset);
	tcase_add_test(tc, test_fix_hostile);
	tcase_add_test(tc, test_opts_set_values);
	tcase_add_test(tc, test_opts_repeat_and_override);
	tcase_add_test(tc, test_opts_hostile);
	tcase_add_test(tc, test_opts_check_conflict);
	tcase_add_test(tc, test_fallback_fills_unset);
	tcase_add_test(tc, test_fallback_outputs_not_inputs);
	tcase_add_test(tc, test_fallback_untouched_without_model);
	tcase_add_test(tc, test_fallback_bad_input_named);
	tcase_add_test(tc, test_fallback_option_variables);
	tcase_add_test(tc, test_tasks_per_node);
	tcase_add_test(tc, test_launch_decide);
	tcase_add_test(tc, test_split_gpus);
	tcase_add_test(tc, test_master_port);
	tcase_add_test(tc, test_master_port_concurrent_steps_distinct);
	suite_add_tcase(s, tc);
	return check_run(s);
}
