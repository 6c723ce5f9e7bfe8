# Unit tests (Check), one program per module. Integration tests live in
# tests/integration and run against a real Slurm on loopback.
TEST_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS) $(JSONC_CFLAGS) -DTEST_DATADIR='"$(abs_top_srcdir)/tests/data"' \
	-DPIPETTE_BIN='"$(abs_top_builddir)/pipette"'
TEST_LDADD = core/libpipette.la $(CHECK_LIBS) $(JSONC_LIBS) -lm

check_PROGRAMS += tests/unit/test_model tests/unit/test_memory tests/unit/test_cli
TESTS += tests/unit/test_model tests/unit/test_memory tests/unit/test_cli

tests_unit_test_model_SOURCES = tests/unit/test_model.c
tests_unit_test_model_CFLAGS = $(TEST_CFLAGS)
tests_unit_test_model_LDADD = $(TEST_LDADD)
tests_unit_test_memory_SOURCES = tests/unit/test_memory.c
tests_unit_test_memory_CFLAGS = $(TEST_CFLAGS)
tests_unit_test_memory_LDADD = $(TEST_LDADD)
tests_unit_test_cli_SOURCES = tests/unit/test_cli.c
tests_unit_test_cli_CFLAGS = $(TEST_CFLAGS)
tests_unit_test_cli_LDADD = $(TEST_LDADD)

EXTRA_DIST += tests/data

# Pipeline schedules: operation lists and event simulation.
check_PROGRAMS += tests/unit/test_schedule
TESTS += tests/unit/test_schedule
tests_unit_test_schedule_SOURCES = tests/unit/test_schedule.c
tests_unit_test_schedule_CFLAGS = $(TEST_CFLAGS)
tests_unit_test_schedule_LDADD = $(TEST_LDADD)

# Benchmarks: built by `make`, run by `make bench`; not tests.  Add more
# programs to BENCH_BINS.
BENCH_BINS = tests/bench/bench_schedule tests/bench/bench_estimate
noinst_PROGRAMS += $(BENCH_BINS)
tests_bench_bench_schedule_SOURCES = tests/bench/bench_schedule.c
tests_bench_bench_schedule_LDADD = core/libpipette.la $(JSONC_LIBS) -lm
tests_bench_bench_estimate_SOURCES = tests/bench/bench_estimate.c
tests_bench_bench_estimate_LDADD = core/libpipette.la $(JSONC_LIBS) -lm

.PHONY: bench
bench: $(BENCH_BINS)
	@for b in $(BENCH_BINS); do echo "== $$b"; ./$$b || exit 1; done

# Integration tests: a real Slurm 22.05 cluster with fake GPUs on loopback
# (tests/integration/README.md).  Needs root.  `make check` runs it too,
# through run.sh in TESTS, so the README's one test command covers both.
# The whole directory is distributed, so later test_*.sh files come along.
EXTRA_DIST += tests/integration
TESTS += tests/integration/run.sh
AM_TESTS_ENVIRONMENT = PIPETTE_BUILDDIR='$(abs_top_builddir)'; export PIPETTE_BUILDDIR;
check-integration: all
	PIPETTE_BUILDDIR='$(abs_top_builddir)' bash '$(abs_top_srcdir)/tests/integration/run.sh'
integration: check-integration
.PHONY: check-integration integration

# pipette-probe: its parts (schedule, fits, arguments, cache merge) and an
# end-to-end run of the TCP transport with several processes on localhost.
check_PROGRAMS += tests/unit/test_probe tests/unit/test_probe_tcp
TESTS += tests/unit/test_probe tests/unit/test_probe_tcp
tests_unit_test_probe_SOURCES = tests/unit/test_probe.c
tests_unit_test_probe_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/probe
tests_unit_test_probe_CFLAGS = $(TEST_CFLAGS)
tests_unit_test_probe_LDADD = probe/libprobe.la $(TEST_LDADD)
tests_unit_test_probe_LDFLAGS = $(CUDA_LDFLAGS)
tests_unit_test_probe_tcp_SOURCES = tests/unit/test_probe_tcp.c
tests_unit_test_probe_tcp_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/probe \
	-DPIPETTE_PROBE_BIN='"$(abs_top_builddir)/pipette-probe"'
tests_unit_test_probe_tcp_CFLAGS = $(TEST_CFLAGS)
tests_unit_test_probe_tcp_LDADD = $(TEST_LDADD)
EXTRA_tests_unit_test_probe_tcp_DEPENDENCIES = pipette-probe$(EXEEXT)

# The bandwidth cache and the cluster (bwcache.h, cluster.h), and the
# `pipette bandwidth` command; fixtures in tests/data/bw.
check_PROGRAMS += tests/unit/test_bwcache
TESTS += tests/unit/test_bwcache
tests_unit_test_bwcache_SOURCES = tests/unit/test_bwcache.c
tests_unit_test_bwcache_CFLAGS = $(TEST_CFLAGS)
tests_unit_test_bwcache_LDADD = $(TEST_LDADD)
EXTRA_tests_unit_test_bwcache_DEPENDENCIES = pipette$(EXEEXT)

# make validate: predicted vs published iteration times (models.md §5).
noinst_PROGRAMS += tests/validate/validate
tests_validate_validate_SOURCES = tests/validate/validate.c
tests_validate_validate_LDADD = core/libpipette.la $(JSONC_LIBS) -lm
.PHONY: validate
validate: tests/validate/validate$(EXEEXT)
	./tests/validate/validate$(EXEEXT)
