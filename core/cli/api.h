/* pipette's commands as one library call, for bindings (python/): the JSON
 * document a command prints with --format json, or its exit status and
 * its error text, exactly as the `pipette` command would give them. */
#ifndef PIPETTE_CLI_API_H
#define PIPETTE_CLI_API_H

/* Run `pipette CMD ARGS... --format json` in this process.  CMD is one of
 * plan, estimate, models, stacks, gpus; args[0..n-1] are its options as on
 * the command line ("--seq-len", "4096", ...).  What the command printed
 * on standard output goes to *out, on standard error to *err: each
 * NUL-terminated and malloc'd, to be freed by the caller (NULL when the
 * call returns -1).  Returns the command's exit status (PIPETTE_EXIT_OK,
 * PIPETTE_EXIT_NOFIT, PIPETTE_EXIT_USAGE: cli.h), or -1 when out of
 * memory.  An unknown CMD, and --format or --help among args, are refused
 * with status 2 and a "pipette: ..." line in *err: the call always answers
 * with the JSON document.
 *
 * The commands print through stdio's stdout and stderr; for the call's
 * duration those are memory streams (open_memstream), which glibc lets a
 * program assign ("In the GNU C Library, stdin, stdout, and stderr are
 * normal variables which you can set just like any others": The GNU C
 * Library Reference Manual, 12.2 Standard Streams).  Calls are therefore
 * serialised by a lock, and another thread of the process that prints
 * through stdio during a call prints into the call's output. */
int pipette_cli_call(const char *cmd, int n, const char *const *args, char **out, char **err);

#endif
