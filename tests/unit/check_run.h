/* Shared by the unit test programs: run a Check suite and turn its result
 * into the program's exit status (what `make check` reads). */
#ifndef PIPETTE_TEST_CHECK_RUN_H
#define PIPETTE_TEST_CHECK_RUN_H

#include <check.h>
#include <stdlib.h>

static inline int check_run(Suite *s)
{
	SRunner *sr = srunner_create(s);
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

#endif
