# plugin: spank_pipette.so, a libtool module loaded by srun, sbatch, salloc,
# slurmd and slurmstepd.  It links libpipette (a PIC convenience library)
# and json-c, never libslurm: the spank_* and slurm_hostlist_* symbols come
# from the host process (plugin/README.md, "Slurm facts it relies on"),
# hence no -Wl,--no-undefined.  The
# version script exports only plugin_* and slurm_spank_*.
slurmplugindir = $(SLURM_PLUGINDIR)
slurmplugin_LTLIBRARIES = plugin/spank_pipette.la
plugin_spank_pipette_la_SOURCES = \
	plugin/spank_pipette.c plugin/spank_pipette.h plugin/state.c plugin/plugin.h \
	plugin/options.c plugin/submit.c plugin/remote.c plugin/env.c \
	plugin/args.c plugin/parse.c plugin/request.c plugin/apply.c \
	plugin/child.c plugin/outcome.c plugin/digest.c plugin/hooks.c \
	plugin/step.c plugin/stepbody.c plugin/plancache.c plugin/barrier.c
# --pipette-plan-file: a saved plan applied as is (planfile.c).
plugin_spank_pipette_la_SOURCES += plugin/planfile.c
# Node lists: the helper the pipette command uses too (core/cli/hostlist.h),
# compiled into the plugin against the host process's slurm_hostlist_*.
plugin_spank_pipette_la_SOURCES += core/cli/hostlist.c core/cli/hostlist.h
plugin_spank_pipette_la_CPPFLAGS = $(AM_CPPFLAGS) $(SLURM_CPPFLAGS)
# -pthread: srun hashes the pinned inputs in a thread (submit.c).
plugin_spank_pipette_la_CFLAGS = $(AM_CFLAGS) $(JSONC_CFLAGS) -pthread
plugin_spank_pipette_la_LDFLAGS = $(AM_LDFLAGS) -module -avoid-version -shared -pthread \
	-Wl,--version-script=$(srcdir)/plugin/pipette.lds
plugin_spank_pipette_la_LIBADD = core/libpipette.la $(JSONC_LIBS) -lm
EXTRA_plugin_spank_pipette_la_DEPENDENCIES = plugin/pipette.lds
EXTRA_DIST += plugin/pipette.lds plugin/README.md

# Slurm loads spank_pipette.so by path; the libtool archive (.la) has no use
# in Slurm's plugin directory (Debian ships none there), so it is removed
# after install, and uninstall, which finds no .la to read the library names
# from, removes the .so itself.
install-data-hook:
	rm -f '$(DESTDIR)$(slurmplugindir)/spank_pipette.la'
uninstall-hook:
	rm -f '$(DESTDIR)$(slurmplugindir)/spank_pipette.so'
