/* pipette: show what the SPANK plugin would choose, without Slurm. */
#include "autoconf.h"

#include <stdio.h>
#include <string.h>

#include "cli.h"

static const struct pipette_cmd commands[] = {
	{ "models", cmd_models, "list the built-in model presets" },
	{ "gpus", cmd_gpus, "list the known GPU types and their specifications" },
	{ "stacks", cmd_stacks, "list the training stacks a plan can be made for, with what each assumes" },
	{ "estimate", cmd_estimate, "memory (and time) of one configuration" },
	{ "bandwidth", cmd_bandwidth, "validate, show, import, merge or generate bandwidth caches" },
	{ "plan", cmd_plan, "search the configuration and GPU mapping for a job" },
	{ "experts", cmd_experts, "place MoE experts on EP ranks from a routing trace" },
	{ "observe", cmd_observe, "compare a plan with what its job measured, and record it" },
	{ "calibrate", cmd_calibrate, "fit the site's factors from its jobs' observations" },
	{ "kernels", cmd_kernels, "fit a site's kernel table from kernels its GPUs ran" },
	{ "trial", cmd_trial, "run the top plans for a few steps on the job's nodes, keep the fastest" },
};

static void usage(FILE *f)
{
	size_t i;

	fprintf(f, "usage: pipette COMMAND [OPTIONS]\n\ncommands:\n");
	for (i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		fprintf(f, "  %-10s %s\n", commands[i].name, commands[i].summary);
	fprintf(f, "\n'pipette COMMAND --help' describes each command; "
		   "man pipette has the details.\n");
}

int main(int argc, char **argv)
{
	size_t i;

	if (argc < 2) {
		usage(stderr);
		return PIPETTE_EXIT_USAGE;
	}
	if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") ||
	    !strcmp(argv[1], "help")) {
		usage(stdout);
		return PIPETTE_EXIT_OK;
	}
	if (!strcmp(argv[1], "--version")) {
		printf("pipette %s\n", PACKAGE_VERSION);
		return PIPETTE_EXIT_OK;
	}
	for (i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		if (!strcmp(argv[1], commands[i].name))
			return commands[i].run(argc - 1, argv + 1);
	fprintf(stderr, "pipette: unknown command '%.64s'\n", argv[1]);
	usage(stderr);
	return PIPETTE_EXIT_USAGE;
}
