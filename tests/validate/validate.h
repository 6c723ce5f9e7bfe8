/* make validate: what validate.c shares with its other sections. */
#ifndef PIPETTE_VALIDATE_H
#define PIPETTE_VALIDATE_H

#include "inputs/config.h"
#include "inputs/hardware.h"
#include "inputs/model.h"
#include "plan/plan.h"
#include "estimate/timing.h"

/* Nominal links of g for `world` GPUs, per_node GPUs a node. */
struct pipette_cluster;
struct pipette_cluster *validate_cluster(int world, const struct pipette_gpu_spec *g, int per_node);
/* Estimate one configuration on nominal links of g (8 GPUs per node). */
int validate_estimate(struct pipette_timer *t, const struct pipette_model *m,
		      const struct pipette_gpu_spec *g, const struct pipette_config *c,
		      struct pipette_time *out);
/* The 1-based rank of configuration c among the plan's ranked ones, or 0. */
int validate_plan_rank(const struct pipette_plan *plan, const struct pipette_config *c);
/* The current-stack section (current.c); datadir holds tests/data/stacks. */
int validate_current(struct pipette_timer *t, const char *datadir);
/* The low-precision and Blackwell runs of Megatron-Bridge (lowp.c). */
int validate_lowp(struct pipette_timer *t, const char *path);
/* One line of the closing summary: a dataset of n cases with its stack and
 * GPU, its MAPE and bias (fractions; bias NAN: not a signed error), and
 * its leave-one-out MAPE where a parameter was fitted on it (loo < 0:
 * none was, so leave-one-out is the MAPE itself). */
void validate_summary(const char *dataset, const char *stack, const char *gpu, int n,
		      double mape, double bias, double loo);
/* The median of v[0..n) leaving index skip out (skip >= n: none); NAN
 * when n exceeds VALIDATE_MEDIAN_MAX or nothing is left. */
#define VALIDATE_MEDIAN_MAX 64
double validate_median(const double *v, size_t n, size_t skip);
/* One CSV line into at most max fields, in place (double quotes protect
 * commas; "" is a quote; the line ends at CR or LF); the field count. */
int validate_csv_split(char *line, char **f, int max);
/* DeepSeek-V3 against its technical report (moe.c). */
int validate_moe(struct pipette_timer *t);
/* The experts' GEMMs of MoE blocks timed on one H200 (moe.c). */
int validate_moe_block(const char *path);

#endif
