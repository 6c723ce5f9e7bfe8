/* pipette CLI: one file per subcommand; shared option helpers in args.c. */
#ifndef PIPETTE_CLI_H
#define PIPETTE_CLI_H

#include <stdio.h>

#include "inputs/config.h"
#include "inputs/error.h"
#include "hostlist.h"

/* Exit codes: 0 ok, 1 the request is valid but has no answer (e.g. does
 * not fit), 2 bad usage or bad input. */
#define PIPETTE_EXIT_OK 0
#define PIPETTE_EXIT_NOFIT 1
#define PIPETTE_EXIT_USAGE 2

enum pipette_format { PIPETTE_FMT_TABLE, PIPETTE_FMT_JSON, PIPETTE_FMT_ENV,
		      PIPETTE_FMT_MEGATRON, PIPETTE_FMT_NEMO, PIPETTE_FMT_LAUNCH,
		      PIPETTE_FMT_TORCHTITAN, PIPETTE_FMT_SBATCH };

struct pipette_cmd {
	const char *name;
	int (*run)(int argc, char **argv);
	const char *summary;
};

int cmd_models(int argc, char **argv);
int cmd_gpus(int argc, char **argv);
int cmd_stacks(int argc, char **argv);
int cmd_estimate(int argc, char **argv);
int cmd_bandwidth(int argc, char **argv);
int cmd_plan(int argc, char **argv);
int cmd_experts(int argc, char **argv);
int cmd_calibrate(int argc, char **argv);
int cmd_observe(int argc, char **argv);
int cmd_kernels(int argc, char **argv);
int cmd_trial(int argc, char **argv);
struct pipette_observation;
/* pipette observe --report: the store's observations as one SVG page
 * (report_svg.c); -1 when out of memory or the write failed. */
int cli_obs_report_svg(const struct pipette_observation *obs, int n, FILE *out);
/* The observations of a store (--from, --report), the files left out
 * named on stderr; PIPETTE_EXIT_USAGE (printed) when there is none. */
int cli_obs_load(const char *opt, const char *dir, struct pipette_observation **obs, int *n);

/* A --nodes value: a count N means node1..nodeN (the names of the example
 * caches), anything else is a Slurm hostlist ("gpu[01-16]") expanded by
 * Slurm (hostlist.h).  At most PIPETTE_MAX_NODES names, in Slurm's order,
 * distinct; release them with pipette_hostlist_free. */
int cli_expand_nodes(const char *spec, char ***names, int *n,
		     struct pipette_err *err);

/* Print "pipette: <msg>" to stderr and return PIPETTE_EXIT_USAGE. */
int cli_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
int cli_parse_format(const char *s, unsigned allowed_mask, enum pipette_format *out);
/* The options a command has seen, so that one given twice is an error
 * (which of two values was meant?).  Zero-initialise. */
#define CLI_SEEN_MAX 64
struct cli_seen {
	char name[CLI_SEEN_MAX][32];
	int n;
};
/* 0 the first time `name` is given, else "NAME given twice" (printed;
 * PIPETTE_EXIT_USAGE). */
int cli_once(struct cli_seen *seen, const char *name);
/* The option at argv[*i], "--name VALUE" or "--name=VALUE", of command
 * `cmd`, whose options taking a value are known[] (NULL-terminated):
 * its name into name[len] and its value into *val (argv[*i] advances past
 * a separate value).  Errors, in this order, printed with
 * PIPETTE_EXIT_USAGE returned: "CMD: unknown option --name (see pipette
 * CMD --help)", "--name given twice", "--name needs a value" (none, or
 * the next argument is an option: "--model --gpu h100" names no model). */
int cli_option(int argc, char **argv, int *i, const char *cmd, const char *const *known,
	       struct cli_seen *seen, char *name, size_t len, const char **val);
/* Integer option "--name VALUE" in [min, max]. */
int cli_int(const char *opt, const char *val, long min, long max, long *out);
int cli_double(const char *opt, const char *val, double min, double max, double *out);

/* An input file given with option `opt`: refuse it at once, naming the
 * option and the path, when it cannot be read as a regular file (a FIFO, a
 * device, a directory, a missing file), before the work that reads it.
 * 0, or PIPETTE_EXIT_USAGE with the message printed.  The reader
 * (readfile.h) refuses the same files; this names the option. */
int cli_check_input(const char *opt, const char *path);
/* The same for the config.json that --model NAME|PATH (with --models-dir
 * DIR, may be NULL) would read, if any; a preset needs no file. */
int cli_check_model(const char *model, const char *models_dir);

/* The MoE options of estimate: --recompute-modules, --dispatcher,
 * --capacity-factor, --imbalance, --routing FILE (kept in *routing).
 * 0 when taken, PIPETTE_EXIT_USAGE after an error, CLI_NOT_MINE for
 * another option. */
#define CLI_NOT_MINE (-1)
struct pipette_config;
struct pipette_model;
int cli_moe_option(const char *name, const char *v, struct pipette_config *c,
		   const char **routing);
/* The MoE facts of a job, for estimate and plan alike: --capacity-factor F
 * in [0, 64] and --imbalance F in [1, 65536].  1 when name is one of
 * them, with *rc 0 or PIPETTE_EXIT_USAGE; 0 otherwise. */
struct pipette_moe_exec;
/* --bf16-layers FIRST,LAST: the layers a low-precision recipe keeps in
 * BF16 at the model's start and end. */
int cli_bf16_layers(const char *v, int *first, int *last);
int cli_moe_fact(const char *name, const char *v, struct pipette_moe_exec *x, int *rc);
/* What a stack always does, where the options left it unsaid: its fixed
 * recompute modules, its only dispatcher. */
void cli_stack_defaults(const struct pipette_model *m, struct pipette_config *c);
/* The load imbalance a routing trace (pipette-routing/1) measures on c's
 * EP ranks, Megatron's contiguous placement: the mean over MoE layers of
 * the busiest rank's tokens over the mean rank's.  0 or
 * PIPETTE_EXIT_USAGE with the message printed. */
int cli_routing_imbalance(const char *path, const struct pipette_model *m,
			  struct pipette_config *c);

/* Pretty byte counts: "12.34 GiB". */
const char *cli_gib(double bytes, char *buf, unsigned size);

#endif
