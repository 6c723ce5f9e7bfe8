/* spank_pipette: pinning a step's inputs, so that every node plans from
 * the same ones.
 *
 * Each node plans on its own; if the site cache is replaced while a step
 * starts (pipette-probe --out renames a new one in), nodes that read it
 * before and after would compute different plans and the training job
 * would hang or crash.  srun's local context cannot plan for the step (it
 * does not know which nodes the step gets), but it can say what it saw:
 * a digest of the options and of the content of the files they name,
 * exported to the step as PIPETTE_INPUT_DIGEST.  Each node then refuses to
 * apply a plan made from anything else (PIPETTE_E_CHANGED).
 *
 *   PIPETTE_INPUT_DIGEST=1:<options>:<bandwidth cache>:<model config>
 *
 * each field PIPETTE_HASH_HEX hex digits of a SHA-256, or "-" when srun
 * could not read the file (then that file is not pinned).  Launches
 * without srun's local context (the batch step, srun --export=NONE) carry
 * no digest and are not protected: spank-pipette(8) says so. */
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "bwcache.h"
#include "model.h"
#include "plugin.h"
#include "readfile.h"

/* The options in a canonical text: every field that changes the plan,
 * by name, so that srun and slurmstepd hash the same bytes whatever the
 * struct's layout.  explain and dry-run change no plan. */
static void opts_text(const struct pipette_opts *o, char *buf, size_t len)
{
	const struct pipette_pins *p = &o->pins;

	snprintf(buf, len,
		 "model=%s\nglobal_batch=%ld\nseq_len=%ld\nschedule=%d,%u\nmem_fraction=%.17g\n"
		 "mapping=%d\nbandwidth=%s\nstack=%s\npins=%d,%d,%d,%d,%d,%d,%d,%d,%d,%d,%d,%d\n",
		 o->model, o->global_batch, o->seq_len, o->schedule, o->schedule_set, o->mem_fraction,
		 o->mapping, o->bandwidth, o->stack, p->tp, p->pp, p->dp, p->cp, p->ep, p->etp, p->vpp,
		 p->micro_batch, p->schedule, p->recompute, p->sequence_parallel,
		 p->distributed_optimizer);
}

/* The content hash of a file, or "-" if it cannot be read here. */
static void file_hex(const char *path, size_t max, char out[PIPETTE_HASH_HEX + 1])
{
	struct pipette_file f;

	strcpy(out, "-");
	if (!path[0] || pipette_read_file(path, "pin", max, &f, NULL))
		return;
	pipette_hash_short(f.sha256, out);
	pipette_file_free(&f);
}

void pipette_opts_hash(const struct pipette_opts *o, char out[PIPETTE_HASH_HEX + 1])
{
	char text[4 * PIPETTE_PATH_MAX];
	unsigned char sha[PIPETTE_SHA256_LEN];

	opts_text(o, text, sizeof(text));
	pipette_sha256(text, strlen(text), sha);
	pipette_hash_short(sha, out);
}

int pipette_input_digest(const struct pipette_opts *o, const struct pipette_site *s,
			 char *out, size_t len)
{
	char opts[PIPETTE_HASH_HEX + 1], bw[PIPETTE_HASH_HEX + 1], model[PIPETTE_HASH_HEX + 1];
	char path[PATH_MAX];
	int w;

	pipette_opts_hash(o, opts);
	file_hex(o->bandwidth[0] ? o->bandwidth : s->bandwidth, PIPETTE_BW_MAX_FILE_BYTES, bw);
	strcpy(model, "-");
	if (pipette_model_config_path(o->model, s->models[0] ? s->models : NULL, path,
				      sizeof(path), NULL) >= 1)
		file_hex(path, PIPETTE_MODEL_MAX_FILE_BYTES, model);
	w = snprintf(out, len, "1:%s:%s:%s", opts, bw, model);
	return w < 0 || (size_t)w >= len ? -1 : 0;
}

static int field_ok(const char *f, size_t n)
{
	size_t i;

	if (n == 1 && f[0] == '-')
		return 1;
	if (n != PIPETTE_HASH_HEX)
		return 0;
	for (i = 0; i < n; i++)
		if (!strchr("0123456789abcdef", f[i]))
			return 0;
	return 1;
}

int pipette_pin_inputs(const char *digest, const struct pipette_opts *o,
		       struct pipette_request *req, struct pipette_err *err)
{
	const char *f[3], *p;
	size_t n[3];
	char mine[PIPETTE_HASH_HEX + 1];
	int i;

	if (!digest || !digest[0])
		return 0;
	if (strncmp(digest, "1:", 2))
		return pipette_fail(err, PIPETTE_DIGEST_VAR " '%.40s': not a digest of this "
				    "version of pipette (srun and the nodes run different "
				    "versions?)", digest);
	p = digest + 2;
	for (i = 0; i < 3; i++) {
		const char *end = strchr(p, ':');

		if (!end)
			end = p + strlen(p);
		f[i] = p;
		n[i] = (size_t)(end - p);
		if (!field_ok(f[i], n[i]) || (i < 2 && *end != ':') || (i == 2 && *end))
			return pipette_fail(err, PIPETTE_DIGEST_VAR " '%.40s': malformed", digest);
		p = end + 1;
	}
	pipette_opts_hash(o, mine);
	if (n[0] != PIPETTE_HASH_HEX || memcmp(f[0], mine, PIPETTE_HASH_HEX))
		return pipette_fail_code(err, PIPETTE_E_CHANGED, "the options this node "
					 "received differ from those srun saw (%.*s here, %.*s in "
					 "srun): is plugstack.conf the same on every node?",
					 PIPETTE_HASH_HEX, mine, (int)n[0], f[0]);
	if (f[1][0] != '-') {
		memcpy(req->pin_bandwidth_sha256, f[1], n[1]);
		req->pin_bandwidth_sha256[n[1]] = '\0';
	}
	if (f[2][0] != '-') {
		memcpy(req->pin_model_sha256, f[2], n[2]);
		req->pin_model_sha256[n[2]] = '\0';
	}
	return 0;
}
