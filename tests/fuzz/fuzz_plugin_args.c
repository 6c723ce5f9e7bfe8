/* Fuzz the plugstack.conf arguments parser, pipette_site_parse
 * (plugin/args.c).  The input is split at newlines into argv, as Slurm
 * splits the plugstack.conf line at blanks (a NUL byte inside a line ends
 * that argument early, as it would in C).
 *
 * Contract checked beyond "no crash": accepted arguments leave the site
 * configuration in range (the port range inside 1024..65535). */
#include <stdint.h>

#include "fuzz_util.h"
#include "plugin.h"

#define MAX_ARGS 64

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct pipette_err err = { { 0 } };
	struct pipette_site site;
	char *buf = fuzz_strdup(data, size), *av[MAX_ARGS], *p = buf, *nl;
	int ac = 0, rc;

	/* An empty input is an empty argv. */
	while (size && ac < MAX_ARGS) {
		av[ac++] = p;
		nl = memchr(p, '\n', size - (size_t)(p - buf));
		if (!nl)
			break;
		*nl = '\0';
		p = nl + 1;
		if ((size_t)(p - buf) >= size)
			break;
	}
	rc = pipette_site_parse(&site, ac, av, &err);
	fuzz_check_err(rc, &err, "pipette_site_parse");
	if (rc == 0) {
		fuzz_require(site.master_port >= 1024 && site.port_range >= 1 &&
			     site.master_port + site.port_range - 1 <= 65535,
			     "ports %ld + %ld", site.master_port, site.port_range);
		fuzz_require(site.mem_fraction == 0 ||
			     (site.mem_fraction >= 0.05 && site.mem_fraction <= 1),
			     "mem_fraction %g", site.mem_fraction);
		fuzz_require(site.default_on == 0 || site.default_on == 1, "default");
		fuzz_require(memchr(site.bandwidth, '\0', sizeof(site.bandwidth)) &&
			     memchr(site.models, '\0', sizeof(site.models)) &&
			     memchr(site.gpu, '\0', sizeof(site.gpu)) &&
			     memchr(site.emulate_nodes, '\0', sizeof(site.emulate_nodes)),
			     "unterminated value");
		pipette_master_port(site.master_port, site.port_range, 0xffffffffu, 0xffffffffu);
	}
	free(buf);
	return 0;
}
