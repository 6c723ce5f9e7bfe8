/* spank_pipette: the site configuration, from the plugstack.conf arguments
 * (the shape of pyxis config.c: defaults first, then key=value, an unknown
 * key is an error).  No SPANK calls: unit-tested directly. */
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "plugin.h"
#include "inputs/stack.h"

/* Linux's default ephemeral range is 32768-60999
 * (Documentation/networking/ip-sysctl.rst, ip_local_port_range), so ports
 * from 61000 up never collide with outgoing connections; enroot's PyTorch
 * hook uses 61000 + jobid % 4536 for the same reason (enroot
 * conf/hooks/extra/50-slurm-pytorch.sh; NVIDIA/enroot#243). */
#define DEFAULT_MASTER_PORT 61000
#define DEFAULT_PORT_RANGE 4536
/* The planner child's limits.  The largest plan of `make bench` (1024
 * nodes x 8 GPUs) peaks at 141 MiB and 4 s; 4096 x 8 at 2.1 GiB and 20 s
 * (measured on a 2-core machine, README "Performance").  The defaults
 * leave room for those and stop anything far beyond. */
#define DEFAULT_PLAN_MEMORY_MIB 4096
#define DEFAULT_PLAN_CPU_S 60
#define DEFAULT_PLAN_TIMEOUT_S 60

void pipette_site_init(struct pipette_site *s)
{
	memset(s, 0, sizeof(*s));
	s->master_port = DEFAULT_MASTER_PORT;
	s->port_range = DEFAULT_PORT_RANGE;
	s->default_on = 1;
	s->fallback_block = 0;
	s->plan_memory_mib = DEFAULT_PLAN_MEMORY_MIB;
	s->plan_cpu_s = DEFAULT_PLAN_CPU_S;
	s->plan_timeout_s = DEFAULT_PLAN_TIMEOUT_S;
}

static int copy_value(char *dst, size_t size, const char *key, const char *v,
		      struct pipette_err *err)
{
	if (!*v)
		return pipette_fail(err, "plugstack argument %s: empty value", key);
	if (pipette_strlcpy(dst, v, size))
		return pipette_fail(err, "plugstack argument %s: value longer than %zu bytes",
				    key, size - 1);
	return 0;
}

/* A directory the plugin writes below (plan_cache, plan_dir): an absolute
 * path with room for what is appended to it (size), none of whose
 * components is "." or "..", so that the directory messages and
 * PIPETTE_PLAN_FILE name is the one used. */
static int dir_value(char *dst, size_t size, const char *key, const char *v,
		     struct pipette_err *err)
{
	const char *p;

	if (copy_value(dst, size, key, v, err))
		return -1;
	if (v[0] != '/')
		return pipette_fail(err, "plugstack argument %s: '%.64s': expected an absolute "
				    "path", key, v);
	for (p = v; p; p = strchr(p + 1, '/'))
		if (!strncmp(p, "/./", 3) || !strncmp(p, "/../", 4) || !strcmp(p, "/.") ||
		    !strcmp(p, "/.."))
			return pipette_fail(err, "plugstack argument %s: '%.64s': a '.' or '..' "
					    "component", key, v);
	return 0;
}

static int parse_one(struct pipette_site *s, const char *arg, struct pipette_err *err)
{
	char key[32];
	const char *eq = strchr(arg, '='), *v;
	size_t klen;
	int b;

	if (!eq || eq == arg)
		return pipette_fail(err, "plugstack argument '%.64s': expected key=value", arg);
	klen = (size_t)(eq - arg);
	if (klen >= sizeof(key))
		return pipette_fail(err, "plugstack argument '%.64s': unknown key", arg);
	memcpy(key, arg, klen);
	key[klen] = '\0';
	v = eq + 1;

	if (!strcmp(key, "bandwidth"))
		return copy_value(s->bandwidth, sizeof(s->bandwidth), key, v, err);
	if (!strcmp(key, "topology"))
		return copy_value(s->topology, sizeof(s->topology), key, v, err);
	if (!strcmp(key, "models"))
		return copy_value(s->models, sizeof(s->models), key, v, err);
	if (!strcmp(key, "gpu"))
		return copy_value(s->gpu, sizeof(s->gpu), key, v, err);
	if (!strcmp(key, "emulate_nodes"))
		return copy_value(s->emulate_nodes, sizeof(s->emulate_nodes), key, v, err);
	if (!strcmp(key, "mem_fraction"))
		return pipette_parse_double(v, PIPETTE_MIN_MEM_FRACTION, PIPETTE_MAX_MEM_FRACTION,
					    &s->mem_fraction, "plugstack argument mem_fraction",
					    err);
	if (!strcmp(key, "master_port"))
		return pipette_parse_long(v, 1024, 65535, &s->master_port,
					  "plugstack argument master_port", err);
	if (!strcmp(key, "port_range"))
		return pipette_parse_long(v, 1, 64512, &s->port_range,
					  "plugstack argument port_range", err);
	if (!strcmp(key, "test_cache_swap"))
		return copy_value(s->test_cache_swap, sizeof(s->test_cache_swap), key, v, err);
	if (!strcmp(key, "plan_cache"))	/* room for "/UID/KEY.plan" and temporaries */
		return dir_value(s->plan_cache, sizeof(s->plan_cache) - 128, key, v, err);
	if (!strcmp(key, "calibration"))
		return copy_value(s->calibration, sizeof(s->calibration), key, v, err);
	if (!strcmp(key, "step_barrier"))	/* room for "/UID/barrier-KEY.N" */
		return dir_value(s->step_barrier, sizeof(s->step_barrier) - 128, key, v, err);
	if (!strcmp(key, "plan_dir"))
		return dir_value(s->plan_dir, sizeof(s->plan_dir) - 64, key, v, err);
	if (!strcmp(key, "plan_memory"))
		return pipette_parse_long(v, 64, 1048576, &s->plan_memory_mib,
					  "plugstack argument plan_memory (MiB)", err);
	if (!strcmp(key, "plan_cpu"))
		return pipette_parse_long(v, 1, 86400, &s->plan_cpu_s,
					  "plugstack argument plan_cpu (seconds)", err);
	if (!strcmp(key, "plan_timeout"))
		return pipette_parse_long(v, 1, 86400, &s->plan_timeout_s,
					  "plugstack argument plan_timeout (seconds)", err);
	if (!strcmp(key, "budget"))
		return pipette_parse_long(v, 1, 1000000000L, &s->budget,
					  "plugstack argument budget", err);
	if (!strcmp(key, "max_age"))
		return pipette_parse_double(v, 0, PIPETTE_MAX_AGE_DAYS, &s->max_age_days,
					    "plugstack argument max_age (days)", err);
	if (!strcmp(key, "attention")) {
		if (pipette_attention_parse(v, &s->attention, err))
			return pipette_fail_prefix(err, "plugstack argument ");
		s->attention_given = 1;
		return 0;
	}
	if (!strcmp(key, "stack") || !strcmp(key, "stack_option")) {
		struct pipette_stack st;
		int opt = key[5] == '_';

		if (copy_value(opt ? s->stack_options : s->stack,
			       opt ? sizeof(s->stack_options) : sizeof(s->stack), key, v, err))
			return -1;
		/* Check now: a typo in plugstack.conf is found at srun. */
		if (pipette_stack_resolve(s->stack, s->stack_options, &st, err))
			return pipette_fail_prefix(err, "plugstack argument %s: ", key);
		return 0;
	}
	if (!strcmp(key, "precision")) {
		if (pipette_precision_set_parse(v, &s->precision_set, err))
			return pipette_fail_prefix(err, "plugstack argument precision: ");
		return 0;
	}
	if (!strcmp(key, "default")) {
		if (pipette_parse_bool(v, &b))
			return pipette_fail(err, "plugstack argument default: '%.32s': expected on or off", v);
		s->default_on = b;
		return 0;
	}
	if (!strcmp(key, "fallback")) {
		if (!strcmp(v, "fail"))
			s->fallback_block = 0;
		else if (!strcmp(v, "block"))
			s->fallback_block = 1;
		else
			return pipette_fail(err, "plugstack argument fallback: '%.32s': expected fail or block", v);
		return 0;
	}
	return pipette_fail(err, "plugstack argument '%.64s': unknown key '%s' (known: bandwidth, "
			    "gpu, mem_fraction, master_port, port_range, models, budget, max_age, "
			    "attention, stack, stack_option, precision, default, fallback, "
			    "plan_memory, plan_cpu, plan_timeout, "
			    "plan_cache, calibration, plan_dir, step_barrier, emulate_nodes, test_cache_swap)", arg, key);
}

int pipette_site_parse(struct pipette_site *s, int ac, char **av, struct pipette_err *err)
{
	int i;

	pipette_site_init(s);
	for (i = 0; i < ac; i++) {
		if (!av[i])
			return pipette_fail(err, "plugstack argument %d is missing", i + 1);
		if (pipette_value_check("plugstack argument", av[i], PIPETTE_VALUE_MAX, err))
			return -1;
		if (parse_one(s, av[i], err))
			return -1;
	}
	if (s->master_port + s->port_range - 1 > 65535)
		return pipette_fail(err, "plugstack arguments master_port=%ld port_range=%ld: the "
				    "range ends at %ld, past 65535", s->master_port, s->port_range,
				    s->master_port + s->port_range - 1);
	return 0;
}
