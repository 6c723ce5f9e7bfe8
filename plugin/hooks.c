/* spank_pipette: the test hook of tests/integration/test_plugin_consistency.sh.
 *
 * To prove that the nodes of a step never apply different plans when the
 * site cache is replaced while the step starts, the test needs the swap to
 * fall between two nodes' reads, every time.  With the plugstack key
 * test_cache_swap=FILE, node 0 renames FILE over the site's cache once it
 * has planned, and every other node waits (up to WAIT_MS) for FILE to be
 * gone before it plans.  Without the key (production) nothing happens. */
#include <stdio.h>
#include <time.h>
#include <unistd.h>

#include "plugin.h"

#define WAIT_MS 10000

void pipette_test_hook_before(const struct pipette_site *s, uint32_t node_id)
{
	const struct timespec tick = { 0, 10 * 1000 * 1000 };
	int waited;

	if (!s->test_cache_swap[0] || node_id == 0)
		return;
	for (waited = 0; waited < WAIT_MS && access(s->test_cache_swap, F_OK) == 0; waited += 10)
		nanosleep(&tick, NULL);
}

void pipette_test_hook_after(const struct pipette_site *s, uint32_t node_id)
{
	if (s->test_cache_swap[0] && node_id == 0 && s->bandwidth[0])
		(void)rename(s->test_cache_swap, s->bandwidth);
}
