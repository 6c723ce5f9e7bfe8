# libpipette: the model, hardware, memory, timing, schedules, cluster, search,
# mapping and plan modules. C11 + json-c + GNU Nettle (SHA-256 of the
# inputs, core/inputs/readfile.c); no Slurm, no CUDA.  Libtool hands LIBADD on to
# whatever links the library (spank_pipette.so relies on that); the
# programs' link lines name the libraries as well.
noinst_LTLIBRARIES += core/libpipette.la
core_libpipette_la_CFLAGS = $(AM_CFLAGS) $(JSONC_CFLAGS) $(NETTLE_CFLAGS)
core_libpipette_la_LIBADD = $(JSONC_LIBS) $(NETTLE_LIBS) -lm
core_libpipette_la_SOURCES = \
	core/inputs/error.c core/inputs/error.h core/inputs/limits.h core/inputs/progress.h core/inputs/rng.h core/inputs/json.c core/inputs/json.h \
	core/inputs/readfile.c core/inputs/readfile.h core/inputs/versions.c core/inputs/versions.h \
	core/inputs/model.c core/inputs/model.h \
	core/inputs/hardware.c core/inputs/hardware.h \
	core/learn/calib.c core/learn/calib.h \
	core/inputs/knobs.c core/inputs/knobs.h \
	core/inputs/config.c core/inputs/config.h \
	core/inputs/stack.c core/inputs/stack.h \
	core/estimate/memory.c core/estimate/memory.h \
	core/estimate/schedule.c core/estimate/schedule.h \
	core/estimate/schedmemo.c core/estimate/schedmemo.h \
	core/estimate/timing.c core/estimate/timing.h \
	core/inputs/kernels.h core/estimate/kernels.c core/estimate/kernels.h \
	core/learn/kernelfit.c core/learn/kernelfit.h

# The `pipette` command: one file per subcommand under core/cli/.
bin_PROGRAMS += pipette
pipette_CFLAGS = $(AM_CFLAGS) $(JSONC_CFLAGS) $(SLURM_CPPFLAGS)
pipette_LDADD = core/libpipette.la $(JSONC_LIBS) $(NETTLE_LIBS) $(SLURM_LDFLAGS) $(SLURM_LIBS) -lm
pipette_SOURCES = \
	core/cli/main.c core/cli/cli.h core/cli/args.c \
	core/cli/cmd_list.c core/cli/cmd_estimate.c core/cli/progress.c core/cli/progress.h

# Pipeline schedule timeline as SVG (schedule.h).
core_libpipette_la_SOURCES += core/render/timeline_svg.c

# The cluster and the bandwidth cache (cluster.h, bwcache.h).
core_libpipette_la_SOURCES += core/inputs/bwcache.c core/inputs/bwcache.h core/inputs/bwcache_int.h \
	core/inputs/bwcache_io.c core/inputs/bwcache_parse.c core/inputs/bwmat.c core/inputs/bwscan.c \
	core/inputs/bwgroup.c core/inputs/bwimport.c core/inputs/bwgen.c \
	core/inputs/cluster.c core/inputs/cluster.h \
	core/inputs/topology.c core/inputs/topology.h
pipette_SOURCES += core/cli/cmd_bandwidth.c core/cli/hostlist.c core/cli/hostlist.h \
	core/cli/svg.c core/cli/svg.h

# Configuration search, GPU mapping and the plan (search.h, mapping.h, plan.h).
core_libpipette_la_SOURCES += core/plan/search.c core/plan/search.h core/plan/mapping.c \
	core/plan/mapping.h core/plan/mapping_int.h core/plan/mapping_links.c \
	core/plan/nodepairs.c core/plan/nodepairs.h core/plan/plan.c core/plan/plan.h core/plan/plan_int.h core/plan/request.c
pipette_SOURCES += core/cli/cmd_plan.c

# Renderers of a plan: the environment contract, Megatron-LM arguments,
# JSON and the table.
core_libpipette_la_SOURCES += core/render/env.c core/render/megatron.c \
	core/render/json.c core/render/table.c core/render/nemo.c \
	core/render/torchtitan.c core/render/launch.c \
	core/render/sbatch.c core/render/bridge.c

# Expert placement from routing traces (experts.h).  The trace, the cost
# model and the greedy are in libpipette; the GLPK integer program
# (experts_ilp.c) is a library of its own so that GLPK (GPL-3+, and one
# more runtime package) stays out of spank_pipette.so, which links
# libpipette whole.  It comes before libpipette on link lines (it uses it).
core_libpipette_la_SOURCES += core/plan/experts.c core/plan/experts.h core/plan/experts_int.h
noinst_LTLIBRARIES += core/libpipette_experts.la
core_libpipette_experts_la_CFLAGS = $(AM_CFLAGS) $(JSONC_CFLAGS)
core_libpipette_experts_la_SOURCES = core/plan/experts_ilp.c
pipette_SOURCES += core/cli/cmd_experts.c core/cli/cmd_kernels.c
pipette_SOURCES += core/cli/cmd_calibrate.c core/cli/cmd_observe.c core/cli/report_svg.c
pipette_LDADD += core/libpipette_experts.la core/libpipette.la $(GLPK_LIBS)

# Training logs of Megatron-LM, NeMo 2.0 and torchtitan: step times and
# memory peaks as the job measured them (trainlog.h).
core_libpipette_la_SOURCES += core/inputs/trainlog.c core/inputs/trainlog.h

# A saved plan read back with its configuration pinned (planfile.h), and
# `pipette trial`, which runs the top plans for a few steps on the job's
# own nodes and keeps the fastest.
core_libpipette_la_SOURCES += core/plan/planfile.c core/plan/planfile.h
pipette_SOURCES += core/cli/cmd_trial.c core/cli/trial_run.c core/cli/trial.h
