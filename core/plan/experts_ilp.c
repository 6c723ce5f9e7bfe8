/* pipette: the expert-placement integer program, solved with GLPK
 * (experts.h: pipette_experts_solve).
 *
 * Determinism: GLPK is single-threaded and deterministic for a given
 * problem, and its branch-and-bound is cut off by a node count (a callback
 * counting glp_ios_tree_size), not by time.  GLPK offers no node limit of
 * its own, only tm_lim (wall clock); that is kept as a safety net, and when
 * it fires the greedy result is returned and the status says so, so that
 * what is printed never depends on how far GLPK got in time.  The greedy
 * placement is handed to GLPK as its first incumbent (glp_ios_heur_sol),
 * so the result is never worse than the greedy's. */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <glpk.h>

#include "plan/experts.h"
#include "plan/experts_int.h"

/* ---- GLPK ------------------------------------------------------------------ */

struct cb_state {
	const double *heur;	/* 1-based start solution (the greedy) */
	int heur_given;
	long node_limit;
	int node_limit_hit;
	double bound;
};

static void glpk_callback(glp_tree *T, void *info)
{
	struct cb_state *cb = info;
	int total, best;

	switch (glp_ios_reason(T)) {
	case GLP_IHEUR:
		if (!cb->heur_given) {
			cb->heur_given = 1;
			glp_ios_heur_sol(T, cb->heur);
		}
		break;
	case GLP_ISELECT:
		best = glp_ios_best_node(T);
		if (best)
			cb->bound = glp_ios_node_bound(T, best);
		glp_ios_tree_size(T, NULL, NULL, &total);
		if (total >= cb->node_limit) {
			cb->node_limit_hit = 1;
			glp_ios_terminate(T);
		}
		break;
	default:
		break;
	}
}

/* Column and row layout of the integer program (1-based, GLPK's way):
 *   x[l][e][g]        binary: expert e of layer l on rank g
 *   lam[l]            >= 0: the busiest rank's load at layer l
 *   u[l][e][f][n]     in [0,1], for next[l][e][f] > 0: e (layer l) and f
 *                     (layer l+1) both on node n; u <= z(l,e,n) and
 *                     u <= z(l+1,f,n) with z = sum of x over n's ranks, so
 *                     at the optimum sum_n u = [same node].
 * minimise  sum_l wl*lam[l] + wc/k * sum next*(1 - sum_n u)
 * subject to sum_g x = 1 (each expert once), sum_e x = E/ep (capacity),
 *            lam[l] >= sum_e load*x for every rank. */
struct ilp {
	glp_prob *P;
	int L, E, ep, N, rpn, nx, nu;
	int *u_lef;		/* nu triples (l, e, f) * N columns each */
	double scale;		/* objective multiplier for GLPK's tolerances */
};

static int xcol(const struct ilp *p, int l, int e, int g)
{
	return 1 + (l * p->E + e) * p->ep + g;
}

/* The constraint matrix as GLPK's 1-based triplets, filled row by row. */
struct ilp_matrix {
	int *ia, *ja;
	double *ar;
	int nz;		/* entries so far */
	int row;	/* rows so far */
};

static void put(struct ilp_matrix *a, int col, double v)
{
	a->ia[++a->nz] = a->row;
	a->ja[a->nz] = col;
	a->ar[a->nz] = v;
}

/* Each expert exactly once; per rank, E/ep experts and lam[l] at least
 * its load. */
static void add_placement_rows(struct ilp *p, const struct pipette_routing *r,
			       struct ilp_matrix *a)
{
	int l, e, g, E = p->E, ep = p->ep;

	for (l = 0; l < p->L; l++)
		for (e = 0; e < E; e++) {
			glp_set_row_bnds(p->P, ++a->row, GLP_FX, 1, 1);
			for (g = 0; g < ep; g++)
				put(a, xcol(p, l, e, g), 1);
		}
	for (l = 0; l < p->L; l++)
		for (g = 0; g < ep; g++) {
			glp_set_row_bnds(p->P, ++a->row, GLP_FX, E / ep, E / ep);
			for (e = 0; e < E; e++)
				put(a, xcol(p, l, e, g), 1);
			glp_set_row_bnds(p->P, ++a->row, GLP_LO, 0, 0);
			put(a, p->nx + 1 + l, 1);
			for (e = 0; e < E; e++)
				put(a, xcol(p, l, e, g), -r->load[(size_t)l * E + e]);
		}
}

/* Co-location of expert e (layer l) and f (layer l+1), the t-th pair with
 * traffic v between them: on each node n, u <= z(l,e,n) and
 * u <= z(l+1,f,n), u rewarded by wc*v. */
static void add_colocation(struct ilp *p, struct ilp_matrix *a, int t, int l, int e, int f,
			   double wc, double v)
{
	int n, side, g;

	p->u_lef[3 * t] = l;
	p->u_lef[3 * t + 1] = e;
	p->u_lef[3 * t + 2] = f;
	for (n = 0; n < p->N; n++) {
		int col = p->nx + p->L + t * p->N + n + 1;

		glp_set_col_bnds(p->P, col, GLP_DB, 0, 1);
		glp_set_obj_coef(p->P, col, -wc * v);
		for (side = 0; side < 2; side++) {
			glp_set_row_bnds(p->P, ++a->row, GLP_UP, 0, 0);
			put(a, col, 1);
			for (g = n * p->rpn; g < (n + 1) * p->rpn && g < p->ep; g++)
				put(a, side ? xcol(p, l + 1, f, g) : xcol(p, l, e, g), -1);
		}
	}
}

/* The pairs (e, f) of consecutive layers with traffic between them, in
 * the order of their u columns; with a, their co-location rows too.
 * Returns the pairs' count; *cross (with a) the objective's constant,
 * wc times all their traffic. */
static int colocation_pairs(struct ilp *p, const struct pipette_routing *r, double wc,
			    struct ilp_matrix *a, double *cross)
{
	int l, e, f, t = 0;

	for (l = 0; l + 1 < p->L; l++)
		for (e = 0; e < p->E; e++)
			for (f = 0; f < p->E; f++) {
				double v = *pipette_routing_next_at_(r, l, e, f);

				if (!(v > 0))
					continue;
				if (a) {
					*cross += wc * v;
					add_colocation(p, a, t, l, e, f, wc, v);
				}
				t++;
			}
	return t;
}

/* Symmetry: relabelling ranks (within a node, or whole nodes when all hold
 * the same number of ranks) keeps the objective, so the heaviest expert of
 * the first layer may sit on rank 0. */
static void fix_symmetry(struct ilp *p, const struct pipette_routing *r,
			 const struct pipette_experts_opts *o)
{
	int heavy = 0, e;

	if (!(p->N == 1 || o->ep % o->ranks_per_node == 0))
		return;
	for (e = 1; e < p->E; e++)
		if (r->load[e] > r->load[heavy])
			heavy = e;
	glp_set_col_bnds(p->P, xcol(p, 0, heavy, 0), GLP_FX, 1, 1);
}

static int build_ilp(struct ilp *p, const struct pipette_routing *r,
		     const struct pipette_experts_opts *o, double scale)
{
	int L = r->L, E = r->E, ep = o->ep, N, g, l, cols, rows, triples = 0, rv = -1;
	double wl = o->load_weight * scale, wc = o->cross_weight * scale / r->k;
	double cross_const = 0;
	struct ilp_matrix a = { NULL, NULL, NULL, 0, 0 };
	size_t cap;

	memset(p, 0, sizeof(*p));
	N = (ep + o->ranks_per_node - 1) / o->ranks_per_node;
	p->L = L;
	p->E = E;
	p->ep = ep;
	p->N = N;
	p->rpn = o->ranks_per_node;
	p->nx = L * E * ep;
	p->scale = scale;
	if (N > 1 && wc > 0)
		triples = colocation_pairs(p, r, wc, NULL, NULL);
	p->nu = triples;
	cols = p->nx + L + triples * N;
	rows = L * E + 2 * L * ep + 2 * triples * N;
	cap = (size_t)2 * L * E * ep + (size_t)L * ep * (E + 1) +
	      (size_t)2 * triples * N * (1 + o->ranks_per_node) + 1;
	if (!(p->u_lef = malloc(sizeof(int) * 3 * (triples + 1))) ||
	    !(a.ia = malloc(sizeof(int) * cap)) || !(a.ja = malloc(sizeof(int) * cap)) ||
	    !(a.ar = malloc(sizeof(double) * cap)))
		goto out;
	p->P = glp_create_prob();
	glp_set_obj_dir(p->P, GLP_MIN);
	glp_add_cols(p->P, cols);
	glp_add_rows(p->P, rows);
	for (g = 1; g <= p->nx; g++)
		glp_set_col_kind(p->P, g, GLP_BV);
	for (l = 0; l < L; l++) {
		glp_set_col_bnds(p->P, p->nx + 1 + l, GLP_LO, 0, 0);
		glp_set_obj_coef(p->P, p->nx + 1 + l, wl);
	}
	add_placement_rows(p, r, &a);
	if (p->nu)
		colocation_pairs(p, r, wc, &a, &cross_const);
	glp_set_obj_coef(p->P, 0, cross_const);
	glp_load_matrix(p->P, a.nz, a.ia, a.ja, a.ar);
	fix_symmetry(p, r, o);
	rv = 0;
out:
	free(a.ia);
	free(a.ja);
	free(a.ar);
	return rv;
}

static void free_ilp(struct ilp *p)
{
	if (p->P)
		glp_delete_prob(p->P);
	free(p->u_lef);
}

/* The 1-based column vector of a placement, for glp_ios_heur_sol. */
static double *start_vector(const struct ilp *p, const struct pipette_routing *r,
			    const int *pl)
{
	int cols = p->nx + p->L + p->nu * p->N, l, e, t, n;
	double *x = calloc((size_t)cols + 1, sizeof(double));

	if (!x)
		return NULL;
	for (l = 0; l < p->L; l++) {
		double *lam = &x[p->nx + 1 + l];

		for (e = 0; e < p->E; e++)
			x[xcol(p, l, e, pl[(size_t)l * p->E + e])] = 1;
		for (t = 0; t < p->ep; t++) {
			double s = 0;

			for (e = 0; e < p->E; e++)
				if (pl[(size_t)l * p->E + e] == t)
					s += r->load[(size_t)l * p->E + e];
			*lam = fmax(*lam, s);
		}
	}
	for (t = 0; t < p->nu; t++) {
		int ll = p->u_lef[3 * t], a = p->u_lef[3 * t + 1], b = p->u_lef[3 * t + 2];
		int na = pl[(size_t)ll * p->E + a] / p->rpn;
		int nb = pl[(size_t)(ll + 1) * p->E + b] / p->rpn;

		for (n = 0; n < p->N; n++)
			x[p->nx + p->L + t * p->N + n + 1] = na == nb && na == n;
	}
	return x;
}

/* Relabel ranks so that the heaviest expert of layer 0 sits on rank 0, the
 * way the ILP's symmetry fix expects (a swap of two ranks, or of two whole
 * nodes slot by slot; the objective does not change). */
static void relabel_for_fix(const struct pipette_routing *r,
			    const struct pipette_experts_opts *o, int *pl)
{
	int E = r->E, heavy = 0, e, g0, *map, t, rpn = o->ranks_per_node;
	size_t i, n = (size_t)r->L * E;

	for (e = 1; e < E; e++)
		if (r->load[e] > r->load[heavy])
			heavy = e;
	g0 = pl[heavy];
	if (g0 == 0 || !(map = malloc(sizeof(int) * o->ep)))
		return;
	for (t = 0; t < o->ep; t++)
		map[t] = t;
	if (g0 / rpn == 0) {
		map[0] = g0;
		map[g0] = 0;
	} else {
		/* swap node 0 and node g0/rpn, then slots 0 and g0%rpn in node 0 */
		int nb = g0 / rpn, s = g0 % rpn;

		for (t = 0; t < rpn; t++) {
			map[t] = nb * rpn + t;
			map[nb * rpn + t] = t;
		}
		/* g0 is now rank s; swap slots 0 and s of node 0 */
		for (t = 0; t < o->ep; t++) {
			if (map[t] == s)
				map[t] = 0;
			else if (map[t] == 0)
				map[t] = s;
		}
	}
	for (i = 0; i < n; i++)
		pl[i] = map[pl[i]];
	free(map);
}

void pipette_experts_result_free(struct pipette_experts_result *res)
{
	if (!res)
		return;
	free(res->placement);
	res->placement = NULL;
}

/* The greedy placement into out, and whether GLPK may improve on it: 1
 * when it may, 0 when the greedy (or Megatron's contiguous placement, when
 * every placement scores the same) is the answer and out->status says
 * why, -1 on error.  *eg: the greedy's evaluation. */
static int greedy_first(const struct pipette_routing *r, const struct pipette_experts_opts *o,
			struct pipette_experts_result *out, struct pipette_experts_eval *eg,
			struct pipette_err *err)
{
	if (pipette_experts_greedy(r, o, out->placement, err) ||
	    pipette_experts_evaluate(r, o, out->placement, eg, NULL, NULL, err))
		return -1;
	out->eval = *eg;
	snprintf(out->solver, sizeof(out->solver), "greedy");
	if (o->solver == PIPETTE_EXPERTS_GREEDY) {
		snprintf(out->status, sizeof(out->status), "greedy requested");
		return 0;
	}
	if (o->ep == 1 || (o->ep == r->E && o->ranks_per_node >= o->ep)) {
		/* Every placement has the same objective: keep Megatron's. */
		pipette_experts_contiguous(r->L, r->E, o->ep, out->placement);
		if (pipette_experts_evaluate(r, o, out->placement, &out->eval, NULL, NULL, err))
			return -1;
		snprintf(out->solver, sizeof(out->solver), "trivial");
		snprintf(out->status, sizeof(out->status), "%s; every placement scores the same, "
			 "contiguous kept", o->ep == 1 ? "one EP rank hosts every expert"
			 : "one expert per rank on one node");
		return 0;
	}
	return 1;
}

/* Whether an ILP of `cols` columns is over o->max_columns; if so out says
 * the greedy is used. */
static int too_large(int cols, const struct pipette_experts_opts *o,
		     struct pipette_experts_result *out)
{
	if (cols <= o->max_columns)
		return 0;
	snprintf(out->solver, sizeof(out->solver), "greedy");
	snprintf(out->status, sizeof(out->status), "ILP too large (%d > %ld columns); "
		 "greedy used", cols, o->max_columns);
	return 1;
}

/* GLPK's wall-clock safety net, in ms. */
static int glpk_time_limit(const struct pipette_experts_opts *o)
{
	return o->time_limit_s > 0 ? (int)fmin(fmax(o->time_limit_s * 1000, 1), INT_MAX) : INT_MAX;
}

/* The LP relaxation (branch and bound starts from it).  Returns 1 when it
 * is solved, else 0 with out->status saying why the greedy is used. */
static int solve_relaxation(struct ilp *p, const struct pipette_experts_opts *o,
			    struct pipette_experts_result *out)
{
	glp_smcp sm;
	int ret;

	glp_init_smcp(&sm);
	sm.msg_lev = GLP_MSG_OFF;
	sm.tm_lim = glpk_time_limit(o);
	sm.presolve = GLP_OFF;
	ret = glp_simplex(p->P, &sm);
	if (ret == GLP_ETMLIM) {
		snprintf(out->status, sizeof(out->status), "GLPK time limit (%g s) reached in "
			 "the LP relaxation; greedy used", o->time_limit_s);
		return 0;
	}
	if (ret || glp_get_status(p->P) != GLP_OPT) {
		snprintf(out->status, sizeof(out->status), "GLPK LP relaxation failed (code %d); "
			 "greedy used", ret);
		return 0;
	}
	return 1;
}

/* Branch and bound from the greedy's start vector, under the node limit.
 * Returns 1 when GLPK has an integer solution, with *ret and *st
 * (glp_intopt's code and the MIP status) and cb's best bound; else 0 with
 * out->status saying why the greedy is used. */
static int branch_and_bound(struct ilp *p, const double *start,
			    const struct pipette_experts_opts *o,
			    struct pipette_experts_result *out, struct cb_state *cb, int *ret,
			    int *st)
{
	glp_iocp io;

	memset(cb, 0, sizeof(*cb));
	cb->heur = start;
	cb->node_limit = o->node_limit > 0 ? o->node_limit : LONG_MAX;
	cb->bound = NAN;
	glp_init_iocp(&io);
	io.msg_lev = GLP_MSG_OFF;
	io.tm_lim = glpk_time_limit(o);
	io.presolve = GLP_OFF;
	io.mip_gap = 1e-9;
	/* Most-fractional branching: GLPK's default (Driebeck-Tomlin) spent
	 * ~1.5 s per node on Mixtral-sized instances (8 experts, 32 layers, 2
	 * nodes), most-fractional ~0.07 s on this 2-core box. */
	io.br_tech = GLP_BR_MFV;
	io.cb_func = glpk_callback;
	io.cb_info = cb;
	*ret = glp_intopt(p->P, &io);
	*st = glp_mip_status(p->P);
	if (*ret == GLP_ETMLIM) {
		/* Deterministic output: never what GLPK happened to reach in time. */
		snprintf(out->status, sizeof(out->status), "GLPK time limit (%g s) reached %s; "
			 "greedy used", o->time_limit_s,
			 *st == GLP_FEAS ? "with an integer solution" : "without an integer solution");
		return 0;
	}
	if ((*ret && *ret != GLP_ESTOP) || (*st != GLP_OPT && *st != GLP_FEAS)) {
		snprintf(out->status, sizeof(out->status), "GLPK found no integer solution "
			 "(code %d); greedy used", *ret);
		return 0;
	}
	return 1;
}

/* The placement of GLPK's integer solution (-1 where no x is set). */
static void read_placement(const struct ilp *p, int *pl)
{
	int l, e, g;

	for (l = 0; l < p->L; l++)
		for (e = 0; e < p->E; e++) {
			pl[(size_t)l * p->E + e] = -1;
			for (g = 0; g < p->ep; g++)
				if (glp_mip_col_val(p->P, xcol(p, l, e, g)) > 0.5)
					pl[(size_t)l * p->E + e] = g;
		}
}

/* Report GLPK's solution (optimal, or the best within the node limit with
 * the bound) and keep it unless the greedy's objective is lower. */
static void adopt_ilp(struct pipette_experts_result *out, const int *ilp_pl, size_t n,
		      const struct pipette_experts_eval *ei, const struct pipette_experts_eval *eg,
		      int ret, int st, double bound, double scale, long node_limit)
{
	snprintf(out->solver, sizeof(out->solver), "glpk");
	if (st == GLP_OPT && ret == 0) {
		out->glpk_bound = ei->objective;
		snprintf(out->status, sizeof(out->status), "optimal");
	} else {
		out->glpk_bound = isfinite(bound) ? bound / scale : NAN;
		snprintf(out->status, sizeof(out->status), "node limit %ld reached; best "
			 "integer solution (greedy-seeded)", node_limit);
	}
	if (ei->objective <= eg->objective) {
		size_t len = strlen(out->status);

		memcpy(out->placement, ilp_pl, n * sizeof(int));
		out->eval = *ei;
		if (ei->objective < eg->objective)
			snprintf(out->status + len, sizeof(out->status) - len, "; %.2f%% below the "
				 "greedy", 100.0 * (1 - ei->objective / eg->objective));
		else
			snprintf(out->status + len, sizeof(out->status) - len, "; equals the "
				 "greedy's objective");
	} else {
		snprintf(out->solver, sizeof(out->solver), "greedy");
		strncat(out->status, "; the greedy was better and is used",
			sizeof(out->status) - strlen(out->status) - 1);
	}
}

int pipette_experts_solve(const struct pipette_routing *r,
			  const struct pipette_experts_opts *o,
			  struct pipette_experts_result *out, struct pipette_err *err)
{
	size_t n = (size_t)r->L * r->E;
	struct pipette_experts_eval eg, ei;
	struct ilp p;
	struct cb_state cb;
	double *start = NULL;
	int *ilp_pl = NULL, ret, st, rv = -1;
	double scale;

	memset(out, 0, sizeof(*out));
	memset(&p, 0, sizeof(p));
	out->glpk_bound = NAN;
	if (pipette_experts_check_opts_(r, o, err))
		return -1;
	if (!(out->placement = malloc(n * sizeof(int))))
		return pipette_fail(err, "out of memory");
	if ((rv = greedy_first(r, o, out, &eg, err)) <= 0)
		goto out;
	/* From here on every way out but an error keeps a placement. */
	rv = 0;
	if (too_large(r->L * r->E * o->ep + r->L, o, out))
		goto out;
	/* Scale the objective so the greedy's is 1: GLPK's tolerances are
	 * absolute in places. */
	scale = eg.objective > 0 ? 1.0 / eg.objective : 1.0;
	if (build_ilp(&p, r, o, scale)) {
		rv = pipette_fail(err, "ILP: out of memory");
		goto out;
	}
	if (too_large(p.nx + p.L + p.nu * p.N, o, out))
		goto out;
	if (!(ilp_pl = malloc(n * sizeof(int)))) {
		rv = pipette_fail(err, "out of memory");
		goto out;
	}
	memcpy(ilp_pl, out->placement, n * sizeof(int));
	if (p.N == 1 || o->ep % o->ranks_per_node == 0)
		relabel_for_fix(r, o, ilp_pl);
	if (!(start = start_vector(&p, r, ilp_pl))) {
		rv = pipette_fail(err, "out of memory");
		goto out;
	}
	if (!solve_relaxation(&p, o, out) ||
	    !branch_and_bound(&p, start, o, out, &cb, &ret, &st))
		goto out;
	read_placement(&p, ilp_pl);
	if (pipette_experts_evaluate(r, o, ilp_pl, &ei, NULL, NULL, NULL)) {
		snprintf(out->status, sizeof(out->status), "GLPK returned an invalid placement; "
			 "greedy used");
		goto out;
	}
	adopt_ilp(out, ilp_pl, n, &ei, &eg, ret, st, cb.bound, scale, o->node_limit);
out:
	free(start);
	free(ilp_pl);
	free_ilp(&p);
	if (rv) {
		free(out->placement);
		out->placement = NULL;
	}
	return rv;
}
