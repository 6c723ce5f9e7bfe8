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

#include "experts.h"
#include "experts_int.h"

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

static int build_ilp(struct ilp *p, const struct pipette_routing *r,
		     const struct pipette_experts_opts *o, double scale)
{
	int L = r->L, E = r->E, ep = o->ep, N, l, e, f, g, n, row = 0, cols;
	int *ia = NULL, *ja = NULL, nz = 0, rows, triples = 0, rv = -1;
	double *ar = NULL, wl = o->load_weight * scale, wc = o->cross_weight * scale / r->k;
	double cross_const = 0;
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
		for (l = 0; l + 1 < L; l++)
			for (e = 0; e < E; e++)
				for (f = 0; f < E; f++)
					triples += *pipette_routing_next_at_(r, l, e, f) > 0;
	p->nu = triples;
	cols = p->nx + L + triples * N;
	rows = L * E + 2 * L * ep + 2 * triples * N;
	cap = (size_t)2 * L * E * ep + (size_t)L * ep * (E + 1) +
	      (size_t)2 * triples * N * (1 + o->ranks_per_node) + 1;
	if (!(p->u_lef = malloc(sizeof(int) * 3 * (triples + 1))) ||
	    !(ia = malloc(sizeof(int) * cap)) || !(ja = malloc(sizeof(int) * cap)) ||
	    !(ar = malloc(sizeof(double) * cap)))
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
	/* each expert exactly once */
	for (l = 0; l < L; l++)
		for (e = 0; e < E; e++) {
			glp_set_row_bnds(p->P, ++row, GLP_FX, 1, 1);
			for (g = 0; g < ep; g++) {
				ia[++nz] = row;
				ja[nz] = xcol(p, l, e, g);
				ar[nz] = 1;
			}
		}
	/* capacity and load */
	for (l = 0; l < L; l++)
		for (g = 0; g < ep; g++) {
			glp_set_row_bnds(p->P, ++row, GLP_FX, E / ep, E / ep);
			for (e = 0; e < E; e++) {
				ia[++nz] = row;
				ja[nz] = xcol(p, l, e, g);
				ar[nz] = 1;
			}
			glp_set_row_bnds(p->P, ++row, GLP_LO, 0, 0);
			ia[++nz] = row;
			ja[nz] = p->nx + 1 + l;
			ar[nz] = 1;
			for (e = 0; e < E; e++) {
				ia[++nz] = row;
				ja[nz] = xcol(p, l, e, g);
				ar[nz] = -r->load[(size_t)l * E + e];
			}
		}
	/* co-location on a node */
	triples = 0;
	if (p->nu)
		for (l = 0; l + 1 < L; l++)
			for (e = 0; e < E; e++)
				for (f = 0; f < E; f++) {
					double v = *pipette_routing_next_at_(r, l, e, f);
					int t, side;

					if (!(v > 0))
						continue;
					cross_const += wc * v;
					p->u_lef[3 * triples] = l;
					p->u_lef[3 * triples + 1] = e;
					p->u_lef[3 * triples + 2] = f;
					for (n = 0; n < N; n++) {
						int col = p->nx + L + triples * N + n + 1;

						glp_set_col_bnds(p->P, col, GLP_DB, 0, 1);
						glp_set_obj_coef(p->P, col, -wc * v);
						for (side = 0; side < 2; side++) {
							glp_set_row_bnds(p->P, ++row, GLP_UP, 0, 0);
							ia[++nz] = row;
							ja[nz] = col;
							ar[nz] = 1;
							for (t = n * p->rpn; t < (n + 1) * p->rpn && t < ep; t++) {
								ia[++nz] = row;
								ja[nz] = side ? xcol(p, l + 1, f, t)
									      : xcol(p, l, e, t);
								ar[nz] = -1;
							}
						}
					}
					triples++;
				}
	glp_set_obj_coef(p->P, 0, cross_const);
	glp_load_matrix(p->P, nz, ia, ja, ar);
	/* Symmetry: relabelling ranks (within a node, or whole nodes when all
	 * hold the same number of ranks) keeps the objective, so the heaviest
	 * expert of the first layer may sit on rank 0. */
	if (N == 1 || ep % o->ranks_per_node == 0) {
		int heavy = 0;

		for (e = 1; e < E; e++)
			if (r->load[e] > r->load[heavy])
				heavy = e;
		glp_set_col_bnds(p->P, xcol(p, 0, heavy, 0), GLP_FX, 1, 1);
	}
	rv = 0;
out:
	free(ia);
	free(ja);
	free(ar);
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

int pipette_experts_solve(const struct pipette_routing *r,
			  const struct pipette_experts_opts *o,
			  struct pipette_experts_result *out, struct pipette_err *err)
{
	size_t n = (size_t)r->L * r->E;
	struct pipette_experts_eval eg, ei;
	struct ilp p;
	struct cb_state cb;
	glp_smcp sm;
	glp_iocp io;
	double *start = NULL;
	int *ilp_pl = NULL, ret, st, l, e, g, rv = -1, cols, tm;
	double scale;

	memset(out, 0, sizeof(*out));
	memset(&p, 0, sizeof(p));
	out->glpk_bound = NAN;
	if (pipette_experts_check_opts_(r, o, err))
		return -1;
	if (!(out->placement = malloc(n * sizeof(int))))
		return pipette_fail(err, "out of memory");
	if (pipette_experts_greedy(r, o, out->placement, err) ||
	    pipette_experts_evaluate(r, o, out->placement, &eg, NULL, NULL, err))
		goto out;
	out->eval = eg;
	snprintf(out->solver, sizeof(out->solver), "greedy");
	if (o->solver == PIPETTE_EXPERTS_GREEDY) {
		snprintf(out->status, sizeof(out->status), "greedy requested");
		rv = 0;
		goto out;
	}
	if (o->ep == 1 || (o->ep == r->E && o->ranks_per_node >= o->ep)) {
		/* Every placement has the same objective: keep Megatron's. */
		pipette_experts_contiguous(r->L, r->E, o->ep, out->placement);
		if (pipette_experts_evaluate(r, o, out->placement, &out->eval, NULL, NULL, err))
			goto out;
		snprintf(out->solver, sizeof(out->solver), "trivial");
		snprintf(out->status, sizeof(out->status), "%s; every placement scores the same, "
			 "contiguous kept", o->ep == 1 ? "one EP rank hosts every expert"
			 : "one expert per rank on one node");
		rv = 0;
		goto out;
	}
	cols = r->L * r->E * o->ep + r->L;
	if (cols > o->max_columns) {
		snprintf(out->solver, sizeof(out->solver), "greedy");
		snprintf(out->status, sizeof(out->status), "ILP too large (%d > %ld columns); "
			 "greedy used", cols, o->max_columns);
		rv = 0;
		goto out;
	}
	/* Scale the objective so the greedy's is 1: GLPK's tolerances are
	 * absolute in places. */
	scale = eg.objective > 0 ? 1.0 / eg.objective : 1.0;
	if (build_ilp(&p, r, o, scale)) {
		pipette_fail(err, "ILP: out of memory");
		goto out;
	}
	cols = p.nx + p.L + p.nu * p.N;
	if (cols > o->max_columns) {
		snprintf(out->solver, sizeof(out->solver), "greedy");
		snprintf(out->status, sizeof(out->status), "ILP too large (%d > %ld columns); "
			 "greedy used", cols, o->max_columns);
		rv = 0;
		goto out;
	}
	if (!(ilp_pl = malloc(n * sizeof(int)))) {
		pipette_fail(err, "out of memory");
		goto out;
	}
	memcpy(ilp_pl, out->placement, n * sizeof(int));
	if (p.N == 1 || o->ep % o->ranks_per_node == 0)
		relabel_for_fix(r, o, ilp_pl);
	if (!(start = start_vector(&p, r, ilp_pl))) {
		pipette_fail(err, "out of memory");
		goto out;
	}
	tm = o->time_limit_s > 0 ? (int)fmin(fmax(o->time_limit_s * 1000, 1), INT_MAX) : INT_MAX;
	glp_init_smcp(&sm);
	sm.msg_lev = GLP_MSG_OFF;
	sm.tm_lim = tm;
	sm.presolve = GLP_OFF;
	ret = glp_simplex(p.P, &sm);
	if (ret == GLP_ETMLIM) {
		snprintf(out->status, sizeof(out->status), "GLPK time limit (%g s) reached in "
			 "the LP relaxation; greedy used", o->time_limit_s);
		rv = 0;
		goto out;
	}
	if (ret || glp_get_status(p.P) != GLP_OPT) {
		snprintf(out->status, sizeof(out->status), "GLPK LP relaxation failed (code %d); "
			 "greedy used", ret);
		rv = 0;
		goto out;
	}
	memset(&cb, 0, sizeof(cb));
	cb.heur = start;
	cb.node_limit = o->node_limit > 0 ? o->node_limit : LONG_MAX;
	cb.bound = NAN;
	glp_init_iocp(&io);
	io.msg_lev = GLP_MSG_OFF;
	io.tm_lim = tm;
	io.presolve = GLP_OFF;
	io.mip_gap = 1e-9;
	/* Most-fractional branching: GLPK's default (Driebeck-Tomlin) spent
	 * ~1.5 s per node on Mixtral-sized instances (8 experts, 32 layers, 2
	 * nodes), most-fractional ~0.07 s on this 2-core box. */
	io.br_tech = GLP_BR_MFV;
	io.cb_func = glpk_callback;
	io.cb_info = &cb;
	ret = glp_intopt(p.P, &io);
	st = glp_mip_status(p.P);
	if (ret == GLP_ETMLIM) {
		/* Deterministic output: never what GLPK happened to reach in time. */
		snprintf(out->status, sizeof(out->status), "GLPK time limit (%g s) reached %s; "
			 "greedy used", o->time_limit_s,
			 st == GLP_FEAS ? "with an integer solution" : "without an integer solution");
		rv = 0;
		goto out;
	}
	if ((ret && ret != GLP_ESTOP) || (st != GLP_OPT && st != GLP_FEAS)) {
		snprintf(out->status, sizeof(out->status), "GLPK found no integer solution "
			 "(code %d); greedy used", ret);
		rv = 0;
		goto out;
	}
	for (l = 0; l < r->L; l++)
		for (e = 0; e < r->E; e++) {
			ilp_pl[(size_t)l * r->E + e] = -1;
			for (g = 0; g < o->ep; g++)
				if (glp_mip_col_val(p.P, xcol(&p, l, e, g)) > 0.5)
					ilp_pl[(size_t)l * r->E + e] = g;
		}
	if (pipette_experts_evaluate(r, o, ilp_pl, &ei, NULL, NULL, NULL)) {
		snprintf(out->status, sizeof(out->status), "GLPK returned an invalid placement; "
			 "greedy used");
		rv = 0;
		goto out;
	}
	snprintf(out->solver, sizeof(out->solver), "glpk");
	if (st == GLP_OPT && ret == 0) {
		out->glpk_bound = ei.objective;
		snprintf(out->status, sizeof(out->status), "optimal");
	} else {
		out->glpk_bound = isfinite(cb.bound) ? cb.bound / scale : NAN;
		snprintf(out->status, sizeof(out->status), "node limit %ld reached; best "
			 "integer solution (greedy-seeded)", o->node_limit);
	}
	if (ei.objective <= eg.objective) {
		size_t len = strlen(out->status);

		memcpy(out->placement, ilp_pl, n * sizeof(int));
		out->eval = ei;
		if (ei.objective < eg.objective)
			snprintf(out->status + len, sizeof(out->status) - len, "; %.2f%% below the "
				 "greedy", 100.0 * (1 - ei.objective / eg.objective));
		else
			snprintf(out->status + len, sizeof(out->status) - len, "; equals the "
				 "greedy's objective");
	} else {
		snprintf(out->solver, sizeof(out->solver), "greedy");
		strncat(out->status, "; the greedy was better and is used",
			sizeof(out->status) - strlen(out->status) - 1);
	}
	rv = 0;
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
