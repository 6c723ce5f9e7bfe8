/* pipette: bandwidth cache internals shared by bwcache*.c, bwimport.c,
 * bwgen.c and cluster.c.  Not installed; not part of the API. */
#ifndef PIPETTE_BWCACHE_INT_H
#define PIPETTE_BWCACHE_INT_H

#include <time.h>

#include "bwcache.h"
#include "readfile.h"

/* One directed figure: gbps NaN = unmeasured, lat NaN = no latency. */
struct bw_entry {
	double gbps;
	float lat;
	int prov;	/* index into pipette_bwcache.prov, -1 = unknown */
};

struct bw_prov_rec {
	char *tool;
	char *metric;
	double bytes;
	time_t when;
};

struct bw_node {
	char *name;
	int ngpus;		/* intra is ngpus x ngpus, 0 = none */
	struct bw_entry *intra;
	char *gpus_json;	/* "gpus" and "topo", kept verbatim */
	char *topo_json;
};

struct pipette_bwcache {
	int n, cap;
	struct bw_node *node;
	struct bw_entry *inter;	/* cap x cap, row-major */
	struct bw_prov_rec *prov;
	int n_prov, cap_prov;
	int *prov_slots;	/* open-addressing hash of prov */
	int n_slots;
	int *name_slots;	/* open-addressing hash of node names */
	int n_name_slots;
	struct pipette_bw_defaults def;
	time_t generated;
	char *generator;
	unsigned char sha256[PIPETTE_SHA256_LEN];	/* of the file loaded */
	int has_sha256;
};

#define BW_INTER(bw, a, b) (&(bw)->inter[(size_t)(a) * (bw)->cap + (b)])

void bw_entry_clear(struct bw_entry *e);
int bw_prov_intern(struct pipette_bwcache *bw, const struct pipette_bw_prov *p,
		   struct pipette_err *err);
time_t bw_entry_when(const struct pipette_bwcache *bw, const struct bw_entry *e);
int bw_reserve(struct pipette_bwcache *bw, int want, struct pipette_err *err);
int bw_intra_reserve(struct bw_node *nd, int ng, struct pipette_err *err);

#endif
