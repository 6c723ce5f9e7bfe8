# pipette-probe: GPU-GPU and node-node bandwidth, GEMM rate, topology.
# The parts live in a small internal library so that the unit tests link
# them without main.c; the CUDA/NCCL code is compiled in when configure
# found them (HAVE_CUDA / HAVE_NCCL in autoconf.h); NVML's fabric info
# when it found nvml.h (HAVE_NVML_FABRIC; libnvidia-ml is opened at run
# time, so only the header's directory is added).
noinst_LTLIBRARIES += probe/libprobe.la
probe_libprobe_la_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/probe $(CUDA_CPPFLAGS) $(NVML_CPPFLAGS)
probe_libprobe_la_CFLAGS = $(AM_CFLAGS) $(JSONC_CFLAGS) $(HWLOC_CFLAGS)
probe_libprobe_la_SOURCES = \
	probe/tournament.c probe/tournament.h \
	probe/fit.c probe/fit.h \
	probe/net.c probe/net.h \
	probe/args.c probe/args.h \
	probe/inter.c probe/inter.h \
	probe/results.c probe/results.h \
	probe/topo.c probe/topo.h \
	probe/gpu.c probe/gpu.h \
	probe/kgrid.c \
	probe/fabric.c probe/fabric.h \
	probe/nccl.c
probe_libprobe_la_LIBADD = $(HWLOC_LIBS) $(JSONC_LIBS) -lm
probe_libprobe_la_LDFLAGS = $(CUDA_LDFLAGS)
if HAVE_CUDA
probe_libprobe_la_LIBADD += $(CUDA_LIBS) -lcublasLt
endif
if HAVE_NCCL
probe_libprobe_la_LIBADD += $(NCCL_LIBS)
endif

bin_PROGRAMS += pipette-probe
pipette_probe_SOURCES = probe/main.c core/cli/hostlist.c core/cli/hostlist.h \
	core/cli/progress.c core/cli/progress.h
pipette_probe_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/probe -I$(top_srcdir)/core/cli $(SLURM_CPPFLAGS)
pipette_probe_CFLAGS = $(AM_CFLAGS) $(JSONC_CFLAGS)
pipette_probe_LDADD = probe/libprobe.la core/libpipette.la $(JSONC_LIBS) $(NETTLE_LIBS) $(SLURM_LDFLAGS) $(SLURM_LIBS) -lm
pipette_probe_LDFLAGS = $(AM_LDFLAGS) $(CUDA_LDFLAGS)

EXTRA_DIST += probe/README.md

# The batch script admins submit to refresh the cache.
probesbatchdir = $(pkgdatadir)
dist_probesbatch_DATA = etc/pipette-probe.sbatch
