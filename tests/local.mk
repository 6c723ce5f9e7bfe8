# Unit tests (Check), one program per module. Integration tests live in
# tests/integration and run against a real Slurm on loopback.
TEST_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS) $(JSONC_CFLAGS) -DTEST_DATADIR='"$(abs_top_srcdir)/tests/data"' \
	-DPIPETTE_BIN='"$(abs_top_builddir)/pipette"'
TEST_LDADD = core/libpipette.la $(CHECK_LIBS) $(JSONC_LIBS) $(NETTLE_LIBS) -lm

check_PROGRAMS += tests/unit/test_model tests/unit/test_memory tests/unit/test_cli \
	tests/unit/test_timing
TESTS += tests/unit/test_model tests/unit/test_memory tests/unit/test_cli \
	tests/unit/test_timing

check_PROGRAMS += tests/unit/test_calib
TESTS += tests/unit/test_calib
tests_unit_test_calib_SOURCES = tests/unit/test_calib.c
tests_unit_test_calib_CFLAGS = $(TEST_CFLAGS)
tests_unit_test_calib_LDADD = $(TEST_LDADD)
tests_unit_test_model_SOURCES = tests/unit/test_model.c
tests_unit_test_model_CFLAGS = $(TEST_CFLAGS)
tests_unit_test_model_LDADD = $(TEST_LDADD)
tests_unit_test_memory_SOURCES = tests/unit/test_memory.c
tests_unit_test_memory_CFLAGS = $(TEST_CFLAGS)
tests_unit_test_memory_LDADD = $(TEST_LDADD)
tests_unit_test_cli_SOURCES = tests/unit/test_cli.c tests/unit/cli_run.h tests/unit/check_run.h
tests_unit_test_cli_CFLAGS = $(TEST_CFLAGS)
tests_unit_test_cli_LDADD = $(TEST_LDADD)
tests_unit_test_timing_SOURCES = tests/unit/test_timing.c
tests_unit_test_timing_CFLAGS = $(TEST_CFLAGS)
tests_unit_test_timing_LDADD = $(TEST_LDADD)

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
tests_bench_bench_schedule_LDADD = core/libpipette.la $(JSONC_LIBS) $(NETTLE_LIBS) -lm
tests_bench_bench_estimate_SOURCES = tests/bench/bench_estimate.c
tests_bench_bench_estimate_LDADD = core/libpipette.la $(JSONC_LIBS) $(NETTLE_LIBS) -lm

.PHONY: bench
bench: $(BENCH_BINS)
	@for b in $(BENCH_BINS); do echo "== $$b"; ./$$b || exit 1; done
	@echo "== tests/bench/plugin_load.sh"; $(PIPETTE_IT_ENV) bash '$(abs_top_srcdir)/tests/bench/plugin_load.sh'

# Integration tests: a real Slurm 22.05 cluster with fake GPUs on loopback
# (tests/integration/README.md).  Needs root.  `make check` runs it too,
# through run.sh in TESTS, so the README's one test command covers both.
# The whole directory is distributed, so later test_*.sh files come along.
EXTRA_DIST += tests/integration
TESTS += tests/integration/run.sh
# The cluster's place and ports come from configure (PIPETTE_SLURM_BASE=...,
# SLURM_LOCAL_CTLD_PORT=..., SLURM_LOCAL_PORT_BASE=...); unset, the
# environment's or the script's defaults hold.  distcheck uses its own, so
# that it never restarts or stops a cluster a developer has running.
# PIPETTE_SKIP_INTEGRATION=1 in the environment makes run.sh SKIP (exit 77):
# the Debian package build sets it (debian/rules); CI never does.
PIPETTE_IT_ENV = PIPETTE_BUILDDIR='$(abs_top_builddir)'; export PIPETTE_BUILDDIR; \
	for v in PIPETTE_SLURM_BASE='$(PIPETTE_SLURM_BASE)' \
		SLURM_LOCAL_CTLD_PORT='$(SLURM_LOCAL_CTLD_PORT)' \
		SLURM_LOCAL_PORT_BASE='$(SLURM_LOCAL_PORT_BASE)'; do \
		case $$v in *=) ;; *) export "$$v";; esac; done;
AM_TESTS_ENVIRONMENT = $(PIPETTE_IT_ENV)
AM_DISTCHECK_CONFIGURE_FLAGS = PIPETTE_SLURM_BASE=/tmp/pipette-slurm-distcheck \
	SLURM_LOCAL_CTLD_PORT=23817 SLURM_LOCAL_PORT_BASE=23900
check-integration: all
	$(PIPETTE_IT_ENV) bash '$(abs_top_srcdir)/tests/integration/run.sh'
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
# The streaming reader, pipette-bw/2 and `pipette bandwidth convert`.
check_PROGRAMS += tests/unit/test_bwscan
TESTS += tests/unit/test_bwscan
tests_unit_test_bwscan_SOURCES = tests/unit/test_bwscan.c
tests_unit_test_bwscan_CFLAGS = $(TEST_CFLAGS)
tests_unit_test_bwscan_LDADD = $(TEST_LDADD)
EXTRA_tests_unit_test_bwscan_DEPENDENCIES = pipette$(EXEEXT)

# The storm's writer (tests/integration/test_plugin_concurrency.sh):
# replaces the bandwidth cache and the calibration at a fixed pace through
# the writers' library calls.  Built by `make`, not only `make check`: the
# plugin's sanitizer run (tests/sanitize-plugin.sh) runs the integration
# tests after a plain `make`.
noinst_PROGRAMS += tests/tools/replace_inputs
tests_tools_replace_inputs_SOURCES = tests/tools/replace_inputs.c
tests_tools_replace_inputs_CFLAGS = $(AM_CFLAGS) $(JSONC_CFLAGS)
tests_tools_replace_inputs_LDADD = core/libpipette.la $(JSONC_LIBS) $(NETTLE_LIBS) -lm

# make validate: predicted vs published iteration times (Narayanan et al.
# SC'21 Table 1, Korthikanti et al. MLSys'23 Table 5, the zero-bubble
# paper's Tables 4 and 6, llm-foundry's H100 benchmarks; validate.c).
noinst_PROGRAMS += tests/validate/validate
tests_validate_validate_SOURCES = tests/validate/validate.c tests/validate/validate.h \
	tests/validate/current.c tests/validate/moe.c tests/validate/lowp.c
tests_validate_validate_CFLAGS = $(AM_CFLAGS) $(JSONC_CFLAGS)
EXTRA_DIST += tests/validate/gpu
tests_validate_validate_LDADD = core/libpipette.la $(JSONC_LIBS) $(NETTLE_LIBS) -lm
.PHONY: validate
validate: tests/validate/validate$(EXEEXT)
	./tests/validate/validate$(EXEEXT) $(srcdir)/tests/validate/gpu/layers-*.jsonl
# The published tables validate.c checks, with their upstream sources.
EXTRA_DIST += tests/validate/README.md

# spank_pipette's SPANK-free parts (plugstack arguments, option values,
# PIPETTE_* inputs, step layout), linked from plugin/ directly.
check_PROGRAMS += tests/unit/test_plugin_args
TESTS += tests/unit/test_plugin_args
tests_unit_test_plugin_args_SOURCES = tests/unit/test_plugin_args.c \
	plugin/args.c plugin/parse.c
tests_unit_test_plugin_args_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/plugin
tests_unit_test_plugin_args_CFLAGS = $(TEST_CFLAGS)
tests_unit_test_plugin_args_LDADD = $(TEST_LDADD)

# spank_pipette's request building and plan-to-environment writing, on a
# real plan, through a fake env-ops table.
check_PROGRAMS += tests/unit/test_plugin_apply
TESTS += tests/unit/test_plugin_apply
tests_unit_test_plugin_apply_SOURCES = tests/unit/test_plugin_apply.c \
	plugin/args.c plugin/parse.c plugin/request.c plugin/apply.c \
	core/cli/hostlist.c
tests_unit_test_plugin_apply_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/plugin
tests_unit_test_plugin_apply_CFLAGS = $(TEST_CFLAGS)
tests_unit_test_plugin_apply_LDADD = $(TEST_LDADD) $(SLURM_LDFLAGS) $(SLURM_LIBS)

# spank_pipette's planner child (limits, watchdog), its result text and
# the pinning of a step's inputs.
check_PROGRAMS += tests/unit/test_plugin_child
TESTS += tests/unit/test_plugin_child
tests_unit_test_plugin_child_SOURCES = tests/unit/test_plugin_child.c tests/unit/fake_env.h \
	plugin/args.c plugin/parse.c plugin/request.c plugin/apply.c \
	plugin/child.c plugin/outcome.c plugin/digest.c plugin/hooks.c \
	plugin/step.c plugin/stepbody.c plugin/plancache.c plugin/planfile.c \
	core/cli/hostlist.c
tests_unit_test_plugin_child_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/plugin
tests_unit_test_plugin_child_CFLAGS = $(TEST_CFLAGS)
tests_unit_test_plugin_child_LDADD = $(TEST_LDADD) $(SLURM_LDFLAGS) $(SLURM_LIBS)

# spank_pipette's plan cache: the per-user directory and its checks, the
# step's shared text, a node's result through the cache, the key.
check_PROGRAMS += tests/unit/test_plugin_cache
TESTS += tests/unit/test_plugin_cache
tests_unit_test_plugin_cache_SOURCES = tests/unit/test_plugin_cache.c tests/unit/fake_env.h \
	plugin/args.c plugin/parse.c plugin/request.c plugin/apply.c \
	plugin/outcome.c plugin/digest.c plugin/hooks.c \
	plugin/step.c plugin/stepbody.c plugin/plancache.c plugin/planfile.c \
	core/cli/hostlist.c
tests_unit_test_plugin_cache_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/plugin
tests_unit_test_plugin_cache_CFLAGS = $(TEST_CFLAGS)
tests_unit_test_plugin_cache_LDADD = $(TEST_LDADD) $(SLURM_LDFLAGS) $(SLURM_LIBS)

# spank_pipette's step barrier: the nodes of a step agree before any task
# starts, whichever node fails, is late or never comes (barrier.c).
check_PROGRAMS += tests/unit/test_plugin_barrier
TESTS += tests/unit/test_plugin_barrier
tests_unit_test_plugin_barrier_SOURCES = tests/unit/test_plugin_barrier.c \
	plugin/barrier.c plugin/plancache.c
tests_unit_test_plugin_barrier_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/plugin
tests_unit_test_plugin_barrier_CFLAGS = $(TEST_CFLAGS)
tests_unit_test_plugin_barrier_LDADD = $(TEST_LDADD)

# Launch output against the flags and rules of each stack's parser
# (tests/data/stacks), schedules per stack, the stacks' memory facts.
check_PROGRAMS += tests/unit/test_launch
TESTS += tests/unit/test_launch
tests_unit_test_launch_SOURCES = tests/unit/test_launch.c
tests_unit_test_launch_CFLAGS = $(TEST_CFLAGS)
tests_unit_test_launch_LDADD = $(TEST_LDADD)

# Search, mapping and plan: quality against the default order and brute
# force, and speed at 16 and 1024 nodes, and issue 30's hard cases: 8 and
# 16 nodes at global batch 2048 and 4096 for every stack (make bench).
BENCH_BINS += tests/bench/bench_plan
tests_bench_bench_plan_SOURCES = tests/bench/bench_plan.c tests/bench/bench_util.h
tests_bench_bench_plan_CFLAGS = $(AM_CFLAGS) -DEXAMPLES_DIR='"$(abs_top_srcdir)/etc/examples"' \
	-DPIPETTE_BIN='"$(abs_top_builddir)/pipette"'
tests_bench_bench_plan_LDADD = core/libpipette.la $(JSONC_LIBS) $(NETTLE_LIBS) -lm
EXTRA_tests_bench_bench_plan_DEPENDENCIES = pipette$(EXEEXT)
# Loading and validating 1024..4096-node caches in both forms (make bench).
BENCH_BINS += tests/bench/bench_cache
tests_bench_bench_cache_SOURCES = tests/bench/bench_cache.c tests/bench/bench_util.h
tests_bench_bench_cache_CFLAGS = $(AM_CFLAGS) -DPIPETTE_BIN='"$(abs_top_builddir)/pipette"'
tests_bench_bench_cache_LDADD = core/libpipette.la $(JSONC_LIBS) $(NETTLE_LIBS) -lm
EXTRA_tests_bench_bench_cache_DEPENDENCIES = pipette$(EXEEXT)

# spank_pipette's added launch time on the local Slurm cluster (root; starts
# the cluster if it is not running): 4 nodes, and 128 emulated nodes.
bench-plugin: all
	PIPETTE_BUILDDIR='$(abs_top_builddir)' bash '$(abs_top_srcdir)/tests/bench/plugin_launch.sh'
.PHONY: bench-plugin
EXTRA_DIST += tests/bench/plugin_launch.sh
# The added launch latency under load (50 concurrent steps; make bench runs
# it; it prints "skipped: ..." without root or a cluster).
EXTRA_DIST += tests/bench/plugin_load.sh

# Search, mapping and plan (core/plan/search.h, core/plan/mapping.h, core/plan/plan.h).
check_PROGRAMS += tests/unit/test_search tests/unit/test_mapping tests/unit/test_plan
TESTS += tests/unit/test_search tests/unit/test_mapping tests/unit/test_plan
tests_unit_test_search_SOURCES = tests/unit/test_search.c
tests_unit_test_search_CFLAGS = $(TEST_CFLAGS)
tests_unit_test_search_LDADD = $(TEST_LDADD)
tests_unit_test_mapping_SOURCES = tests/unit/test_mapping.c
tests_unit_test_mapping_CFLAGS = $(TEST_CFLAGS)
tests_unit_test_mapping_LDADD = $(TEST_LDADD)
tests_unit_test_plan_SOURCES = tests/unit/test_plan.c
tests_unit_test_plan_CFLAGS = $(TEST_CFLAGS)
tests_unit_test_plan_LDADD = $(TEST_LDADD)
EXTRA_tests_unit_test_plan_DEPENDENCIES = pipette$(EXEEXT)

# Fuzzing and sanitizers.  `make fuzz`: libFuzzer harnesses for every
# parser of outside input, built with clang (tests/fuzz/run.sh; FUZZ_SECONDS
# per harness, default 20).  `make sanitize`: the unit tests in a separate
# ASan+UBSan build, the integration tests against a gcc UBSan build (root;
# tests/sanitize-plugin.sh), then cppcheck (tests/sanitize.sh).  test_fuzz_regress
# replays the fuzz corpora and past findings in the ordinary build.
EXTRA_DIST += tests/fuzz tests/sanitize.sh tests/sanitize-plugin.sh tests/sanitize-src.sh \
	tests/lsan.supp
check_PROGRAMS += tests/unit/test_fuzz_regress
TESTS += tests/unit/test_fuzz_regress
tests_unit_test_fuzz_regress_SOURCES = tests/unit/test_fuzz_regress.c tests/fuzz/small_moe.h \
	plugin/args.c plugin/parse.c core/cli/hostlist.c
tests_unit_test_fuzz_regress_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/plugin \
	-I$(top_srcdir)/core/cli $(SLURM_CPPFLAGS)
tests_unit_test_fuzz_regress_CFLAGS = $(TEST_CFLAGS)
tests_unit_test_fuzz_regress_LDADD = $(TEST_LDADD) $(SLURM_LDFLAGS) $(SLURM_LIBS)
fuzz:
	FUZZ_BUILDDIR='$(abs_top_builddir)/tests/fuzz-build' \
		bash '$(abs_top_srcdir)/tests/fuzz/run.sh'
sanitize:
	SANITIZE_BUILDDIR='$(abs_top_builddir)/tests/sanitize-build' \
		bash '$(abs_top_srcdir)/tests/sanitize.sh'
.PHONY: fuzz sanitize
clean-local:
	rm -rf tests/fuzz-build tests/sanitize-build tests/sanitize-build-plugin tests/sanitize-src

# Expert placement (experts.h) and `pipette experts`; fixtures in
# tests/data/routing.
check_PROGRAMS += tests/unit/test_experts
TESTS += tests/unit/test_experts
tests_unit_test_experts_SOURCES = tests/unit/test_experts.c
tests_unit_test_experts_CFLAGS = $(TEST_CFLAGS)
tests_unit_test_experts_LDADD = core/libpipette_experts.la $(TEST_LDADD) $(GLPK_LIBS)
EXTRA_tests_unit_test_experts_DEPENDENCIES = pipette$(EXEEXT)

# EXTRA_DIST names whole directories: leave out what an in-tree `make
# check` wrote into them (the integration suite's log and result), which a
# tarball's read-only tree would otherwise take as up to date.
dist-hook:
	rm -f $(distdir)/tests/integration/*.log $(distdir)/tests/integration/*.trs

# The one reader of input files (readfile.h): limits, file types, SHA-256.
# The measured kernel model, its fit and the H100's table (kernels.h,
# kernelfit.h; tests/data/kernels).
check_PROGRAMS += tests/unit/test_kernels
TESTS += tests/unit/test_kernels
tests_unit_test_kernels_SOURCES = tests/unit/test_kernels.c tests/unit/check_run.h
tests_unit_test_kernels_CFLAGS = $(TEST_CFLAGS)
tests_unit_test_kernels_LDADD = $(TEST_LDADD)

# The versions a replaced input keeps for the steps that pinned it (versions.h).
check_PROGRAMS += tests/unit/test_versions
TESTS += tests/unit/test_versions
tests_unit_test_versions_SOURCES = tests/unit/test_versions.c tests/unit/check_run.h
tests_unit_test_versions_CFLAGS = $(TEST_CFLAGS)
tests_unit_test_versions_LDADD = $(TEST_LDADD)

check_PROGRAMS += tests/unit/test_readfile
TESTS += tests/unit/test_readfile
tests_unit_test_readfile_SOURCES = tests/unit/test_readfile.c tests/unit/check_run.h
tests_unit_test_readfile_CFLAGS = $(TEST_CFLAGS)
tests_unit_test_readfile_LDADD = $(TEST_LDADD)

# The shape of the code: core/'s includes only run downwards through its
# layers (README, "Architecture"), and no function is longer than 120
# lines.  `make graph` redraws doc/core-layers.svg (Graphviz: dot and tred,
# Debian package graphviz; not needed to build or test).
# Every SVG rendered by librsvg (tests/svg.sh), and the progress line on
# terminals only (tests/progress.sh, under util-linux's script).
TESTS += tests/svg.sh tests/progress.sh
EXTRA_DIST += tests/svg.sh tests/progress.sh
TESTS += tests/layers.sh tests/funclen.sh
EXTRA_DIST += tests/layers.sh tests/funclen.sh tests/golden/run.sh doc/core-layers.svg
graph:
	bash '$(srcdir)/tests/layers.sh' --dot | tred | dot -Tsvg -o '$(srcdir)/doc/core-layers.svg'
.PHONY: graph

# Training logs of Megatron-LM, NeMo 2.0 and torchtitan (trainlog.h);
# fixtures in tests/data/trainlogs (make_fixtures.py there writes them).
check_PROGRAMS += tests/unit/test_trainlog
TESTS += tests/unit/test_trainlog
tests_unit_test_trainlog_SOURCES = tests/unit/test_trainlog.c tests/unit/check_run.h
tests_unit_test_trainlog_CFLAGS = $(TEST_CFLAGS)
tests_unit_test_trainlog_LDADD = $(TEST_LDADD)

# A saved plan read back and pinned (planfile.h): pipette trial and the
# plugin's --pipette-plan-file.
check_PROGRAMS += tests/unit/test_planfile
TESTS += tests/unit/test_planfile
tests_unit_test_planfile_SOURCES = tests/unit/test_planfile.c tests/unit/check_run.h
tests_unit_test_planfile_CFLAGS = $(TEST_CFLAGS)
tests_unit_test_planfile_LDADD = $(TEST_LDADD)
