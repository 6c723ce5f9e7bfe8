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
 *   PIPETTE_INPUT_DIGEST=3:<options>:<bandwidth cache>:<model config>:<calibration>:<topology>
 *
 * (3: the site's topology.conf, whose blocks are the NVLink domains, is
 * pinned too, so that every node of a step plans on the same blocks)
 * each field PIPETTE_HASH_HEX hex digits of a SHA-256, or "-" when srun
 * could not read the file (then that file is not pinned).  Launches
 * without srun's local context (the batch step, srun --export=NONE) carry
 * no digest and are not protected: spank-pipette(8) says so.
 *
 * The same machinery keys the plan cache (plancache.c, step.c): the key
 * is the SHA-256 of a text naming every input of a step's result text,
 * the files by the content srun pinned.  A file srun did not pin (no
 * digest: the batch step, srun --export=NONE; or "-") is pinned by this
 * node to the content it hashes for the key (digest_complete),
 * and the planner is held to that pin like to srun's: a plan is only ever
 * stored under the key of the bytes it was planned from, even when the
 * file is replaced between the key and the planner's read. */
#define _GNU_SOURCE	/* dl_iterate_phdr */
#include <elf.h>
#include <limits.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "autoconf.h"
#include "inputs/bwcache.h"
#include "inputs/model.h"
#include "plugin.h"
#include "inputs/readfile.h"

/* The options in a canonical text: every field that changes the plan,
 * by name, so that srun and slurmstepd hash the same bytes whatever the
 * struct's layout.  explain and dry-run change no plan. */
static void opts_text(const struct pipette_opts *o, char *buf, size_t len)
{
	const struct pipette_pins *p = &o->pins;

	snprintf(buf, len,
		 "model=%s\nglobal_batch=%ld\nseq_len=%ld\nschedule=%d,%u\nmem_fraction=%.17g\n"
		 "mapping=%d\nbandwidth=%s\nstack=%s\nprecision=%u\n"
		 "pins=%d,%d,%d,%d,%d,%d,%d,%d,%d,%d,%d,%d\n%s%s%s",
		 o->model, o->global_batch, o->seq_len, o->schedule, o->schedule_set, o->mem_fraction,
		 o->mapping, o->bandwidth, o->stack, o->precision_set, p->tp, p->pp, p->dp, p->cp,
		 p->ep, p->etp, p->vpp,
		 p->micro_batch, p->schedule, p->recompute, p->sequence_parallel,
		 p->distributed_optimizer, o->plan_file[0] ? "plan_file=" : "", o->plan_file,
		 o->plan_file[0] ? "\n" : "");
}

/* A calibration file is a few kilobytes (calib.c reads at most 16 MiB). */
#define CALIBRATION_MAX (16u << 20)

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

/* The digest's fields, after the options': the files by content. */
enum { F_OPTS, F_BANDWIDTH, F_MODEL, F_CALIBRATION, F_TOPOLOGY, N_FIELDS };

/* The digest's field of the bandwidth cache, the model config, the
 * site's calibration or its topology.conf: the hash of the file's
 * content, "-" for none or unreadable. */
static void input_file_hex(const struct pipette_opts *o, const struct pipette_site *s,
			   int which, char out[PIPETTE_HASH_HEX + 1])
{
	char path[PATH_MAX];

	strcpy(out, "-");
	if (which == F_BANDWIDTH)
		file_hex(o->bandwidth[0] ? o->bandwidth : s->bandwidth, PIPETTE_BW_MAX_FILE_BYTES,
			 out);
	else if (which == F_CALIBRATION)
		file_hex(s->calibration, CALIBRATION_MAX, out);
	else if (which == F_TOPOLOGY)
		file_hex(s->topology, PIPETTE_TOPO_MAX_FILE_BYTES, out);
	else if (pipette_model_config_path(o->model, s->models[0] ? s->models : NULL, path,
					   sizeof(path), NULL) >= 1)
		file_hex(path, PIPETTE_MODEL_MAX_FILE_BYTES, out);
}

int pipette_input_digest(const struct pipette_opts *o, const struct pipette_site *s,
			 char *out, size_t len)
{
	char f[N_FIELDS][PIPETTE_HASH_HEX + 1];
	int i, w;

	pipette_opts_hash(o, f[F_OPTS]);
	for (i = F_BANDWIDTH; i < N_FIELDS; i++)
		input_file_hex(o, s, i, f[i]);
	w = snprintf(out, len, "3:%s:%s:%s:%s:%s", f[F_OPTS], f[F_BANDWIDTH], f[F_MODEL],
		     f[F_CALIBRATION], f[F_TOPOLOGY]);
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

/* The fields of a digest, checked: options, bandwidth cache, model
 * config, calibration, topology; each PIPETTE_HASH_HEX hex digits or
 * "-". */
static int digest_fields(const char *digest, const char *f[N_FIELDS], size_t n[N_FIELDS],
			 struct pipette_err *err)
{
	const char *p;
	int i;

	if (strncmp(digest, "3:", 2))
		return pipette_fail(err, PIPETTE_DIGEST_VAR " '%.40s': not a digest of this "
				    "version of pipette (srun and the nodes run different "
				    "versions?)", digest);
	p = digest + 2;
	for (i = 0; i < N_FIELDS; i++) {
		const char *end = strchr(p, ':');

		if (!end)
			end = p + strlen(p);
		f[i] = p;
		n[i] = (size_t)(end - p);
		if (!field_ok(f[i], n[i]) || (i < N_FIELDS - 1 && *end != ':') ||
		    (i == N_FIELDS - 1 && *end))
			return pipette_fail(err, PIPETTE_DIGEST_VAR " '%.40s': malformed", digest);
		p = end + 1;
	}
	return 0;
}

int pipette_pin_inputs(const char *digest, const struct pipette_opts *o,
		       struct pipette_request *req, struct pipette_err *err)
{
	const char *f[N_FIELDS];
	size_t n[N_FIELDS];
	char mine[PIPETTE_HASH_HEX + 1];
	char *pins[N_FIELDS] = { NULL, req->pin_bandwidth_sha256, req->pin_model_sha256,
				 req->pin_calibration_sha256, req->pin_topology_sha256 };
	int i;

	for (i = F_BANDWIDTH; i < N_FIELDS; i++)
		pins[i][0] = '\0';
	if (!digest || !digest[0])
		return 0;
	if (digest_fields(digest, f, n, err))
		return -1;
	pipette_opts_hash(o, mine);
	if (n[0] != PIPETTE_HASH_HEX || memcmp(f[0], mine, PIPETTE_HASH_HEX))
		return pipette_fail_code(err, PIPETTE_E_CHANGED, "the options this node "
					 "received differ from those srun saw (%.*s here, %.*s in "
					 "srun): is plugstack.conf the same on every node?",
					 PIPETTE_HASH_HEX, mine, (int)n[0], f[0]);
	for (i = F_BANDWIDTH; i < N_FIELDS; i++)
		if (f[i][0] != '-') {
			memcpy(pins[i], f[i], n[i]);
			pins[i][n[i]] = '\0';
		}
	return 0;
}

/* The pins of the plan cache: srun's digest with every file it did not
 * pin ("-", or no digest at all) pinned to the content this node reads
 * now; srun's digest as is when it pinned every file. */
static int digest_complete(const char *digest, const struct pipette_opts *o,
			   const struct pipette_site *s, char out[PIPETTE_DIGEST_MAX],
			   struct pipette_err *err)
{
	char mine[N_FIELDS][PIPETTE_HASH_HEX + 1];
	const char *f[N_FIELDS];
	size_t n[N_FIELDS];
	int i, w;

	if (!digest || !digest[0]) {
		if (pipette_input_digest(o, s, out, PIPETTE_DIGEST_MAX))
			return pipette_fail(err, "the digest of this node's inputs: too long");
		return 0;
	}
	if (digest_fields(digest, f, n, err))
		return -1;
	/* Only the files srun did not pin are read (the bandwidth cache of a
	 * large cluster is megabytes: tests/bench/plugin_load.sh). */
	for (i = F_BANDWIDTH; i < N_FIELDS; i++)
		if (f[i][0] == '-') {
			input_file_hex(o, s, i, mine[i]);
			f[i] = mine[i];
			n[i] = strlen(mine[i]);
		}
	w = snprintf(out, PIPETTE_DIGEST_MAX, "3:%.*s:%.*s:%.*s:%.*s:%.*s", (int)n[0], f[0],
		     (int)n[1], f[1], (int)n[2], f[2], (int)n[3], f[3], (int)n[4], f[4]);
	if (w < 0 || w >= PIPETTE_DIGEST_MAX)
		return pipette_fail(err, PIPETTE_DIGEST_VAR ": too long");
	return 0;
}

/* ---- the plan cache's key ------------------------------------------------ */

struct build_id {
	const void *addr;	/* an address inside the object */
	char hex[2 * 64 + 1];
};

/* The GNU build ID of the loaded object that holds b->addr: it changes
 * with every change of the code, the planner's included (libpipette is
 * linked into the plugin), where the version number may not. */
static int find_build_id(struct dl_phdr_info *info, size_t size, void *data)
{
	struct build_id *b = data;
	uintptr_t a = (uintptr_t)b->addr;
	int i, mine = 0;

	(void)size;
	for (i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		uintptr_t lo = info->dlpi_addr + ph->p_vaddr;

		if (ph->p_type == PT_LOAD && a >= lo && a < lo + ph->p_memsz)
			mine = 1;
	}
	for (i = 0; mine && i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		const char *p = (const char *)(info->dlpi_addr + ph->p_vaddr);
		const char *end = p + ph->p_memsz;

		while (ph->p_type == PT_NOTE && p + sizeof(ElfW(Nhdr)) <= end) {
			const ElfW(Nhdr) *nh = (const ElfW(Nhdr) *)(const void *)p;
			const unsigned char *desc = (const unsigned char *)p + sizeof(*nh) +
						    ((nh->n_namesz + 3) & ~3u);
			unsigned k;

			if (nh->n_type == NT_GNU_BUILD_ID && nh->n_namesz == 4 &&
			    !memcmp(p + sizeof(*nh), "GNU", 4) && nh->n_descsz <= 64) {
				for (k = 0; k < nh->n_descsz; k++)
					sprintf(b->hex + 2 * k, "%02x", desc[k]);
				return 1;
			}
			p = (const char *)desc + ((nh->n_descsz + 3) & ~3u);
		}
	}
	return mine;
}

/* The hash a file has in the key: srun's pin when it has one, else the
 * content read here (never parsed). */
static int key_file(FILE *t, const char *what, const char *path, const char *pin, size_t pin_n,
		    size_t max, struct pipette_err *err)
{
	struct pipette_file f;
	char hex[PIPETTE_HASH_HEX + 1];

	if (pin && pin_n == PIPETTE_HASH_HEX) {
		fprintf(t, "%s=%zu:%s\nsha=%.*s\n", what, strlen(path), path, (int)pin_n, pin);
		return 0;
	}
	if (pipette_read_file(path, what, max, &f, err))
		return -1;
	pipette_hash_short(f.sha256, hex);
	pipette_file_free(&f);
	fprintf(t, "%s=%zu:%s\nsha=%s\n", what, strlen(path), path, hex);
	return 0;
}

/* Every field of the site's configuration, by name. */
static void site_text(FILE *t, const struct pipette_site *s)
{
	/* the calibration's content is in the digest (files_text) */
	fprintf(t, "site.bandwidth=%zu:%s\nsite.gpu=%s\nsite.mem_fraction=%.17g\n"
		"site.master_port=%ld\nsite.port_range=%ld\nsite.models=%zu:%s\n"
		"site.budget=%ld\nsite.max_age=%.17g\nsite.attention=%d,%d\nsite.stack=%s\n"
		"site.stack_options=%s\nsite.precision=%u\nsite.default=%d\nsite.fallback_block=%d\n"
		"site.plan_limits=%ld,%ld,%ld\nsite.emulate_nodes=%zu:%s\n"
		"site.plan_cache=%zu:%s\nsite.test_cache_swap=%zu:%s\n"
		"site.calibration=%zu:%s\nsite.plan_dir=%zu:%s\nsite.step_barrier=%zu:%s\n",
		strlen(s->bandwidth), s->bandwidth, s->gpu, s->mem_fraction, s->master_port,
		s->port_range, strlen(s->models), s->models, s->budget, s->max_age_days,
		(int)s->attention, s->attention_given, s->stack, s->stack_options,
		s->precision_set, s->default_on,
		s->fallback_block, s->plan_memory_mib, s->plan_cpu_s, s->plan_timeout_s,
		strlen(s->emulate_nodes), s->emulate_nodes, strlen(s->plan_cache), s->plan_cache,
		strlen(s->test_cache_swap), s->test_cache_swap, strlen(s->calibration),
		s->calibration, strlen(s->plan_dir), s->plan_dir, strlen(s->step_barrier),
		s->step_barrier);
	/* its content is the digest's (files_text), as srun pinned it */
	if (s->topology[0])
		fprintf(t, "site.topology=%zu:%s\n", strlen(s->topology), s->topology);
}

/* The files of the step by the pins of digest: the digest itself (which
 * holds the calibration's and the topology's), the bandwidth cache and
 * the model config. */
static int files_text(FILE *t, const struct pipette_step *st, const char *digest,
		      struct pipette_err *err)
{
	const struct pipette_opts *o = st->opts;
	const struct pipette_site *s = st->site;
	const char *f[N_FIELDS] = { NULL }, *bw = o->bandwidth[0] ? o->bandwidth : s->bandwidth;
	size_t n[N_FIELDS] = { 0 };
	char path[PATH_MAX];
	int r;

	if (digest_fields(digest, f, n, err))
		return -1;
	fprintf(t, "digest=%s\n", digest);
	if (!bw[0])
		fputs("bandwidth=none\n", t);
	else if (key_file(t, "bandwidth cache", bw, f[1], n[1], PIPETTE_BW_MAX_FILE_BYTES, err))
		return -1;
	r = pipette_model_config_path(o->model, s->models[0] ? s->models : NULL, path,
				      sizeof(path), err);
	if (r < 0)
		return -1;
	if (r == 0) {
		fprintf(t, "model=preset:%s\n", o->model);
		return 0;
	}
	return key_file(t, "model config", path, f[2], n[2], PIPETTE_MODEL_MAX_FILE_BYTES, err);
}

int pipette_plan_key(const struct pipette_step *st, char out[PIPETTE_PLAN_KEY_HEX + 1],
		     char pin[PIPETTE_DIGEST_MAX], struct pipette_err *err)
{
	struct build_id b = { .addr = (const void *)pipette_plan_key, .hex = "none" };
	unsigned char sha[PIPETTE_SHA256_LEN];
	char opts[4 * PIPETTE_PATH_MAX], *text = NULL, mine[PIPETTE_DIGEST_MAX];
	size_t len = 0;
	FILE *t;
	int i, rv = -1;

	if (!pin)
		pin = mine;
	if (digest_complete(st->digest, st->opts, st->site, pin, err))
		return -1;
	t = open_memstream(&text, &len);
	if (!t)
		return pipette_fail(err, "plan cache key: out of memory");
	dl_iterate_phdr(find_build_id, &b);
	opts_text(st->opts, opts, sizeof(opts));
	fprintf(t, "pipette plan cache key 1\nversion=%s\nbuild=%s\n%sexplain=%d\n"
		"dry_run=%d\n", PACKAGE_VERSION, b.hex, opts, st->opts->explain,
		st->opts->dry_run);
	site_text(t, st->site);
	if (files_text(t, st, pin, err))
		goto out;
	fprintf(t, "nodes=%d\n", st->nnodes);
	for (i = 0; i < st->nnodes; i++)
		fprintf(t, "%zu:%s\n", strlen(st->nodes[i]), st->nodes[i]);
	fprintf(t, "gpus_per_node=%d\nlaunch=%d\nbatch=%d\n", st->ngpus, (int)st->launch,
		st->batch);
	/* max_age's warning depends on the time: entries last the hour. */
	if (st->site->max_age_days > 0)
		fprintf(t, "hour=%lld\n", (long long)(st->now / 3600));
	if (fflush(t) != 0 || ferror(t)) {
		pipette_fail(err, "plan cache key: out of memory");
		goto out;
	}
	pipette_sha256(text, len, sha);
	pipette_sha256_hex(sha, out);
	rv = 0;
out:
	fclose(t);
	free(text);
	return rv;
}
