/* spank_pipette: the option table (pyxis args.c's shape: one static table,
 * "[pipette]" usage strings, one callback that switches on `val`, and a
 * registration loop run in every context that sees options). */
#include <dirent.h>
#include <slurm/spank.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "inputs/model.h"
#include "spank_pipette.h"

static int option_cb(int val, const char *optarg, int remote);

static struct spank_option options[] = {
	{ "pipette-model", "NAME|PATH",
	  "[pipette] plan the job's parallelism for this model: a preset, a "
	  "config.json, or a site model ('help' lists them; 'none' turns off "
	  "an inherited request)", 1, PIPETTE_OPT_MODEL, option_cb },
	{ "pipette-global-batch", "N",
	  "[pipette] global batch size in sequences", 1, PIPETTE_OPT_GLOBAL_BATCH, option_cb },
	{ "pipette-seq-len", "N",
	  "[pipette] sequence length in tokens", 1, PIPETTE_OPT_SEQ_LEN, option_cb },
	{ "pipette-fix", "KNOB=V,...",
	  "[pipette] pin knobs: tp, pp, dp, cp, ep, etp, vpp, mb, schedule, "
	  "recompute, sp, do (e.g. tp=8,pp=4)", 1, PIPETTE_OPT_FIX, option_cb },
	{ "pipette-schedule", "NAME",
	  "[pipette] pipeline schedule: 1f1b, interleaved, zb-h1, v-min, v-half, v-zb",
	  1, PIPETTE_OPT_SCHEDULE, option_cb },
	{ "pipette-mem-fraction", "F",
	  "[pipette] usable fraction of GPU memory (0.05-1)", 1, PIPETTE_OPT_MEM_FRACTION,
	  option_cb },
	{ "pipette-mapping", "optimize|block",
	  "[pipette] place ranks on GPUs by predicted time, or in Slurm's order",
	  1, PIPETTE_OPT_MAPPING, option_cb },
	{ "pipette-bandwidth", "PATH",
	  "[pipette] bandwidth cache to use instead of the site's", 1, PIPETTE_OPT_BANDWIDTH,
	  option_cb },
	{ "pipette-explain", NULL,
	  "[pipette] print the ranked configurations and the reasons to stderr",
	  0, PIPETTE_OPT_EXPLAIN, option_cb },
	{ "pipette-dry-run", NULL,
	  "[pipette] print the plan and fail the step without starting tasks",
	  0, PIPETTE_OPT_DRY_RUN, option_cb },
	{ "pipette-stack", "NAME",
	  "[pipette] the training stack the job runs: megatron, nemo, megatron-zb, "
	  "megatron-2022 (default: the site's)", 1, PIPETTE_OPT_STACK, option_cb },
	{ "pipette-precision", "RECIPE[,RECIPE]",
	  "[pipette] the linear layers' precision recipe, or the set to choose from: bf16, "
	  "fp8-delayed, fp8-current, fp8-rowwise, fp8-blockwise, mxfp8, nvfp4 (default: the "
	  "site's, else the stack's)", 1, PIPETTE_OPT_PRECISION, option_cb },
	{ "pipette-plan-file", "PATH",
	  "[pipette] apply this saved plan (pipette trial, plan_dir) as is: refused when made "
	  "for other nodes, another model or stack", 1, PIPETTE_OPT_PLAN_FILE, option_cb },
};

/* --pipette-model=help: the presets, then the site's models. */
static void list_models(void)
{
	const char *dir = pipette_state()->site.models;
	DIR *d;
	size_t i;

	printf("pipette models (--pipette-model=NAME):\n");
	for (i = 0; i < pipette_model_preset_count(); i++) {
		const struct pipette_model *m = pipette_model_preset_at(i);

		printf("  %-24s %.1fB parameters\n", m->name,
		       pipette_model_params_total(m) / 1e9);
	}
	if (dir[0] && (d = opendir(dir))) {
		const struct dirent *de;

		printf("site models in %s:\n", dir);
		while ((de = readdir(d))) {
			size_t n = strlen(de->d_name);

			if (de->d_name[0] == '.')
				continue;
			if (n > 5 && !strcmp(de->d_name + n - 5, ".json"))
				printf("  %.*s\n", (int)(n - 5), de->d_name);
			else if (de->d_type == DT_DIR)
				printf("  %s\n", de->d_name);
		}
		closedir(d);
	}
	printf("or a path to a Hugging Face config.json\n");
}

static int option_cb(int val, const char *optarg, int remote)
{
	struct pipette_err err;

	if (!remote && val == PIPETTE_OPT_MODEL && optarg && !strcmp(optarg, "help")) {
		list_models();
		exit(0);
	}
	if (pipette_opts_set(&pipette_state()->opts, (enum pipette_opt_id)val, optarg, &err)) {
		slurm_error("pipette: %s", err.msg);
		return -1;
	}
	return 0;
}

int pipette_options_register(spank_t sp)
{
	size_t i;
	spank_err_t rc;

	for (i = 0; i < sizeof(options) / sizeof(options[0]); i++) {
		rc = spank_option_register(sp, &options[i]);
		if (rc != ESPANK_SUCCESS) {
			slurm_error("pipette: could not register --%s: %s", options[i].name,
				    spank_strerror(rc));
			return -1;
		}
	}
	return 0;
}
