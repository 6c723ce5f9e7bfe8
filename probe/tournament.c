#include "tournament.h"

int pipette_probe_rounds(int n)
{
	if (n < 2 || n > PIPETTE_PROBE_MAX_NODES)
		return 0;
	return (n % 2 == 0) ? n - 1 : n;
}

/* Circle method on m = n rounded up to even.  Node m−1 stays fixed; the
 * other m−1 nodes sit on a circle.  In round r the fixed node meets r, and
 * every other node x meets the node mirrored about r on the circle:
 * (r+k, r−k) for k = 1 .. m/2−1, i.e. x ↔ (2r − x) mod (m−1). */
int pipette_probe_peer(int n, int round, int node)
{
	int m, c, p;

	if (n < 2 || n > PIPETTE_PROBE_MAX_NODES || node < 0 || node >= n ||
	    round < 0 || round >= pipette_probe_rounds(n))
		return -1;
	m = n + (n % 2);
	c = m - 1;
	if (node == c)
		p = round;
	else if (node == round)
		p = c;
	else
		p = (int)(((2L * round - node) % c + c) % c);
	return p < n ? p : -1;
}

int pipette_probe_round_pairs(int n, int round, int *pairs,
			      struct pipette_err *err)
{
	int x, k = 0;

	if (n < 2 || n > PIPETTE_PROBE_MAX_NODES)
		return pipette_fail(err, "node count %d is out of range [2, %d]",
				    n, PIPETTE_PROBE_MAX_NODES);
	if (round < 0 || round >= pipette_probe_rounds(n))
		return pipette_fail(err, "round %d is out of range [0, %d)",
				    round, pipette_probe_rounds(n));
	for (x = 0; x < n; x++) {
		int p = pipette_probe_peer(n, round, x);

		if (p > x) {
			pairs[2 * k] = x;
			pairs[2 * k + 1] = p;
			k++;
		}
	}
	return k;
}
