/* pipette_cli_call: the commands of the `pipette` CLI as a library call
 * (api.h), for the Python binding.  It runs the CLI's own code paths, so a
 * binding returns the documents and error texts the command prints. */
#include "autoconf.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "api.h"

/* The commands whose answer is one JSON document. */
static const struct pipette_cmd api_commands[] = {
	{ "plan", cmd_plan, NULL },
	{ "estimate", cmd_estimate, NULL },
	{ "models", cmd_models, NULL },
	{ "stacks", cmd_stacks, NULL },
	{ "gpus", cmd_gpus, NULL },
};

/* Held while stdout and stderr are a call's memory streams. */
static pthread_mutex_t api_lock = PTHREAD_MUTEX_INITIALIZER;

/* A refusal as the CLI words its own: "pipette: " and fmt with name in
 * *err, *out empty; 2, or -1 when out of memory. */
static int refuse(char **out, char **err, const char *fmt, const char *name)
	__attribute__((format(printf, 3, 0)));
static int refuse(char **out, char **err, const char *fmt, const char *name)
{
	size_t len = strlen(fmt) + strlen(name) + 16;

	*out = strdup("");
	*err = malloc(len);
	if (!*out || !*err) {
		free(*out);
		free(*err);
		*out = *err = NULL;
		return -1;
	}
	memcpy(*err, "pipette: ", 10);
	snprintf(*err + 9, len - 9, fmt, name);
	strcat(*err, "\n");
	return PIPETTE_EXIT_USAGE;
}

/* The option an argument names, "--format" of "--format=json". */
static int is_option(const char *arg, const char *opt)
{
	size_t len = strlen(opt);

	return !strncmp(arg, opt, len) && (arg[len] == '\0' || arg[len] == '=');
}

/* The command's table entry, or NULL. */
static const struct pipette_cmd *api_command(const char *cmd)
{
	size_t i;

	for (i = 0; i < sizeof(api_commands) / sizeof(api_commands[0]); i++)
		if (!strcmp(cmd, api_commands[i].name))
			return &api_commands[i];
	return NULL;
}

/* Run c with argv, its stdout and stderr into the memory streams o and e. */
static int run_captured(const struct pipette_cmd *c, int argc, char **argv, FILE *o, FILE *e)
{
	FILE *saved_out, *saved_err;
	int rc;

	pthread_mutex_lock(&api_lock);
	fflush(stdout);
	fflush(stderr);
	saved_out = stdout;
	saved_err = stderr;
	stdout = o;
	stderr = e;
	rc = c->run(argc, argv);
	stdout = saved_out;
	stderr = saved_err;
	pthread_mutex_unlock(&api_lock);
	return rc;
}

int pipette_cli_call(const char *cmd, int n, const char *const *args, char **out, char **err)
{
	const struct pipette_cmd *c = api_command(cmd);
	char **argv = NULL;
	size_t out_len = 0, err_len = 0;
	FILE *o = NULL, *e = NULL;
	int i, argc = 0, rc = -1;

	*out = *err = NULL;
	if (!c)
		return refuse(out, err, "'%.64s': not a command of the API (plan, estimate, "
			      "models, stacks, gpus)", cmd);
	for (i = 0; i < n; i++) {
		if (is_option(args[i], "--format"))
			return refuse(out, err, "%s: the API always returns the JSON document "
				      "(the pipette command renders the other formats)", "--format");
		if (is_option(args[i], "--help") || !strcmp(args[i], "-h"))
			return refuse(out, err, "%s: see the pipette command's --help, or the "
				      "Python docstrings", "--help");
	}
	/* The commands take char **; they read their arguments only, but
	 * the copies keep the caller's strings out of their reach. */
	if (!(argv = calloc((size_t)n + 4, sizeof(*argv))) || !(argv[argc++] = strdup(cmd)))
		goto fail;
	for (i = 0; i < n; i++)
		if (!(argv[argc++] = strdup(args[i])))
			goto fail;
	if (!(argv[argc++] = strdup("--format")) || !(argv[argc++] = strdup("json")))
		goto fail;
	if (!(o = open_memstream(out, &out_len)) || !(e = open_memstream(err, &err_len)))
		goto fail;
	rc = run_captured(c, argc, argv, o, e);
	/* closing a memory stream leaves its NUL-terminated buffer */
	if (fclose(o) | fclose(e))
		rc = -1;
	o = e = NULL;
fail:
	if (o)
		fclose(o);
	if (e)
		fclose(e);
	if (rc < 0) {
		free(*out);
		free(*err);
		*out = *err = NULL;
	}
	for (i = 0; argv && i < argc; i++)
		free(argv[i]);
	free(argv);
	return rc;
}
