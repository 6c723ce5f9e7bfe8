# libpipette: the model, hardware, memory, timing, schedules, cluster, search,
# mapping and plan modules. C11 + json-c + GNU Nettle (SHA-256 of the
# inputs, core/readfile.c); no Slurm, no CUDA.  Libtool hands LIBADD on to
# whatever links the library (spank_pipette.so relies on that); the
# programs' link lines name the libraries as well.
noinst_LTLIBRARIES += core/libpipette.la
core_libpipette_la_CFLAGS = $(AM_CFLAGS) $(JSONC_CFLAGS) $(NETTLE_CFLAGS)
core_libpipette_la_LIBADD = $(JSONC_LIBS) $(NETTLE_LIBS) -lm
core_libpipette_la_SOURCES = \
	core/error.c core/error.h core/limits.h core/rng.h core/json.c core/json.h \
	core/readfile.c core/readfile.h \
	core/model.c core/model.h \
	core/hardware.c core/hardware.h \
	core/calib.c core/calib.h \
	core/config.c core/config.h \
	core/stack.c core/stack.h \
	core/memory.c core/memory.h \
	core/schedule.c core/schedule.h \
	core/timing.c core/timing.h

# The `pipette` command: one file per subcommand under core/cli/.
bin_PROGRAMS += pipette
pipette_CFLAGS = $(AM_CFLAGS) $(JSONC_CFLAGS) $(SLURM_CPPFLAGS)
pipette_LDADD = core/libpipette.la $(JSONC_LIBS) $(NETTLE_LIBS) $(SLURM_LDFLAGS) $(SLURM_LIBS) -lm
pipette_SOURCES = \
	core/cli/main.c core/cli/cli.h core/cli/args.c \
	core/cli/cmd_list.c core/cli/cmd_estimate.c

# Pipeline schedule timeline as SVG (schedule.h).
core_libpipette_la_SOURCES += core/timeline_svg.c

# The cluster and the bandwidth cache (cluster.h, bwcache.h).
core_libpipette_la_SOURCES += core/bwcache.c core/bwcache.h core/bwcache_int.h \
	core/bwcache_io.c core/bwcache_parse.c core/bwmat.c core/bwscan.c \
	core/bwgroup.c core/bwimport.c core/bwgen.c \
	core/cluster.c core/cluster.h
pipette_SOURCES += core/cli/cmd_bandwidth.c core/cli/hostlist.c core/cli/hostlist.h

# Configuration search, GPU mapping and the plan (search.h, mapping.h, plan.h).
core_libpipette_la_SOURCES += core/search.c core/search.h core/mapping.c \
	core/mapping.h core/mapping_int.h core/mapping_links.c core/plan.c core/plan.h core/plan_int.h core/request.c
pipette_SOURCES += core/cli/cmd_plan.c

# Renderers of a plan: the environment contract, Megatron-LM arguments,
# JSON and the table.
core_libpipette_la_SOURCES += core/render/env.c core/render/megatron.c \
	core/render/json.c core/render/table.c core/render/nemo.c \
	core/render/torchtitan.c

# Expert placement from routing traces (experts.h).  The trace, the cost
# model and the greedy are in libpipette; the GLPK integer program
# (experts_ilp.c) is a library of its own so that GLPK (GPL-3+, and one
# more runtime package) stays out of spank_pipette.so, which links
# libpipette whole.  It comes before libpipette on link lines (it uses it).
core_libpipette_la_SOURCES += core/experts.c core/experts.h core/experts_int.h
noinst_LTLIBRARIES += core/libpipette_experts.la
core_libpipette_experts_la_CFLAGS = $(AM_CFLAGS) $(JSONC_CFLAGS)
core_libpipette_experts_la_SOURCES = core/experts_ilp.c
pipette_SOURCES += core/cli/cmd_experts.c
pipette_SOURCES += core/cli/cmd_calibrate.c core/cli/cmd_observe.c core/cli/report_svg.c
pipette_LDADD += core/libpipette_experts.la core/libpipette.la $(GLPK_LIBS)

# Training logs of Megatron-LM, NeMo 2.0 and torchtitan: step times and
# memory peaks as the job measured them (trainlog.h).
core_libpipette_la_SOURCES += core/trainlog.c core/trainlog.h
