/* spank_pipette: the submitting side, srun (LOCAL) and sbatch/salloc
 * (ALLOCATOR).  It knows neither the step's nodes nor its GPUs, so it
 * registers the options and checks them early (a typo fails the command at
 * once, with slurm_error, before any job exists), and srun pins what the
 * step's nodes must plan from (digest.c).  The plan itself is made in
 * slurmstepd (remote.c).
 *
 * srun's pin hashes the content of the files the step plans from: the
 * bandwidth cache of a large cluster is megabytes (8 MiB for 1024 nodes,
 * 9 ms of SHA-256; tests/bench/plugin_load.sh), which every step would
 * wait for.  So srun starts hashing in a thread of its own as soon as the
 * options are known (init_post_opt) and takes the digest once the step
 * exists (local_user_init): the hash runs while srun asks slurmctld for
 * the allocation and the step, which srun waits for anyway.  The digest
 * is the same (the same files, read by content); only when it is taken
 * moves, by the length of those requests. */
#include <pthread.h>
#include <signal.h>
#include <slurm/spank.h>

#include "spank_pipette.h"

/* srun's pin of the inputs, computed by a thread of the plugin's. */
static struct {
	pthread_t thread;
	int started;			/* the thread runs or has run, not joined */
	int rc;				/* pipette_input_digest's */
	char digest[PIPETTE_DIGEST_MAX];
} pin;

static void *pin_run(void *arg)
{
	const struct pipette_state *st = arg;

	pin.rc = pipette_input_digest(&st->opts, &st->site, pin.digest, sizeof(pin.digest));
	return NULL;
}

/* Start hashing.  The thread takes no signal: srun's handlers run where
 * srun expects them.  Failing to start is no error: local_user_init then
 * hashes itself. */
static void pin_start(struct pipette_state *st)
{
	sigset_t all, old;

	if (pin.started)
		return;
	sigfillset(&all);
	if (pthread_sigmask(SIG_SETMASK, &all, &old) != 0)
		return;
	pin.started = pthread_create(&pin.thread, NULL, pin_run, st) == 0;
	pthread_sigmask(SIG_SETMASK, &old, NULL);
}

/* The digest: the thread's when it was started (joined here, once), else
 * computed now.  0, or -1 with the reason in err. */
static int pin_take(const struct pipette_state *st, char *digest, size_t len,
		    struct pipette_err *err)
{
	int rc;

	if (!pin.started) {
		rc = pipette_input_digest(&st->opts, &st->site, digest, len);
	} else {
		pthread_join(pin.thread, NULL);
		pin.started = 0;
		rc = pin.rc || pipette_strlcpy(digest, pin.digest, len) ? -1 : 0;
	}
	return rc ? pipette_fail(err, PIPETTE_DIGEST_VAR ": too long") : 0;
}

int pipette_submit_init(spank_t sp, int ac, char **av)
{
	if (pipette_site_load(ac, av))
		return -1;
	return pipette_options_register(sp);
}

int pipette_submit_post_opt(spank_t sp)
{
	struct pipette_state *st = pipette_state();
	struct pipette_env_ops env;
	struct pipette_err err;

	pipette_env_spank(&env, sp);
	if (pipette_opts_fallback(&st->opts, &st->site, &env, &err)) {
		slurm_error("pipette: %s", err.msg);
		return -1;
	}
	if (!pipette_opts_wanted(&st->opts, &st->site))
		return 0;
	if (pipette_opts_check(&st->opts, &err)) {
		slurm_error("pipette: %s", err.msg);
		return -1;
	}
	if (spank_context() == S_CTX_LOCAL)
		pin_start(st);
	return 0;
}

/* srun's exit (slurm_spank_exit, from its atexit handler): the thread is
 * joined if nothing took its digest, as when slurmctld refused the
 * allocation, because srun unloads the plugin right after this callback
 * (Slurm's spank_fini then plugin_unload, src/common/spank.c and
 * src/common/plugin.c, SchedMD/slurm) and a thread still running the
 * plugin's code would fault. */
int pipette_submit_exit(void)
{
	if (pin.started) {
		pthread_join(pin.thread, NULL);
		pin.started = 0;
	}
	return 0;
}

/* srun, once the allocation exists and before the step is launched:
 * export the digest of the inputs, which reaches every task's environment
 * (and so every node's slurmstepd) unless --export=NONE drops it. */
int pipette_submit_local_user_init(spank_t sp)
{
	struct pipette_state *st = pipette_state();
	struct pipette_env_ops env;
	struct pipette_err err;
	char digest[PIPETTE_DIGEST_MAX];

	if (!pipette_opts_wanted(&st->opts, &st->site))
		return 0;
	pipette_env_spank(&env, sp);
	if (pin_take(st, digest, sizeof(digest), &err) ||
	    env.set(env.ctx, PIPETTE_DIGEST_VAR, digest, 1, &err) < 0) {
		slurm_error("pipette: could not pin the step's inputs: %s", err.msg);
		return -1;
	}
	return 0;
}
