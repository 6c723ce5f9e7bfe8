/* pipette: the input limits every front end shares.
 *
 * The pipette command, the SPANK plugin and the library check their inputs
 * against these same figures, so a request one of them accepts is never
 * refused by another for its size, and nothing is sized by an input before
 * it has been bounded.  Each is far above any real job; each bounds the
 * work (and, in the plugin, the work done inside slurmstepd). */
/* Not the C library's <limits.h>, and the build searches core/ for "..."
 * includes only (-iquote, Makefile.am).  But GCC's own <limits.h> reaches
 * the C library's through syslimits.h (GCC source gcc/gsyslimits.h), whose
 * "#include_next <limits.h>" is resolved from the "..." search path (the
 * file was itself found in the current directory) and so lands here: hand
 * that search on. */
#if defined(_GCC_NEXT_LIMITS_H)
#include_next <limits.h>
#elif !defined(PIPETTE_LIMITS_H)
#define PIPETTE_LIMITS_H

/* Nodes in one node list, one plan and one bandwidth cache: one figure for
 * all three, since a node list longer than a plan accepts would only be
 * expanded (inside slurmstepd, for the plugin) to fail later.  4096: the
 * cluster and the cache hold a dense node x node link matrix (16.7M
 * entries, about 270 MB at 4096 nodes), and a plan for 4096 nodes x 8 GPUs
 * already needs about 2 GiB of the plugin's default 4 GiB planner limit
 * (spank-pipette(8), plan_memory).  Larger sites keep one cache per
 * partition (pipette-bandwidth(5), LIMITS). */
#define PIPETTE_MAX_NODES 4096
/* GPUs per node: above any HGX/DGX board (8 GPUs, NVIDIA DGX H100/B200
 * datasheets) and GB200 NVL72 compute tray (4 GPUs, NVIDIA GB200 NVL72
 * product page) with margin. */
#define PIPETTE_MAX_GPUS 64
/* A pinned parallel degree or micro-batch size: no degree can exceed the
 * GPUs of the largest cluster, and the same bound keeps a micro-batch's
 * arithmetic small. */
#define PIPETTE_MAX_PIN ((long)PIPETTE_MAX_NODES * PIPETTE_MAX_GPUS)
/* Sequences per iteration (2^30) and tokens per sequence (2^24, 16M):
 * bounds on the arithmetic, orders of magnitude above published runs. */
#define PIPETTE_MAX_GLOBAL_BATCH (1L << 30)
#define PIPETTE_MAX_SEQ_LEN (1L << 24)
/* The usable fraction of HBM (--mem-fraction, mem_fraction=): below 5% no
 * model fits, above 100% is not memory. */
#define PIPETTE_MIN_MEM_FRACTION 0.05
#define PIPETTE_MAX_MEM_FRACTION 1.0
/* The age, in days, past which a cache's figures draw a warning
 * (--max-age, max_age=, --stale-days; 0 = never): 10^5 days (273 years)
 * is a bound on the arithmetic, not a policy. */
#define PIPETTE_MAX_AGE_DAYS 100000.0

#endif
