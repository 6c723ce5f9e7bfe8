# The Python binding, `import pipette` (README, "Python API"): the package
# python/pipette/ and its extension pipette._pipette, which runs the
# commands of the `pipette` CLI in process (core/cli/api.c) and so is built
# from the CLI's own sources.  configure decides whether (HAVE_PYTHON), for
# which interpreter (PYTHON) and where it goes (PIPETTE_PYTHON_DIR).
PYTHON_PACKAGE = python/pipette/__init__.py python/pipette/adapters.py
EXTRA_DIST += $(PYTHON_PACKAGE) python/_pipette.c core/cli/api.c core/cli/api.h \
	tests/python/run.sh tests/python/test_api.py tests/python/test_adapters.py \
	tests/python/extract_fields.py
if HAVE_PYTHON
# "exec" in the name: installed by install-exec, before its hook below.
pipettepyexecdir = $(PIPETTE_PYTHON_DIR)/pipette
pipettepyexec_DATA = $(PYTHON_PACKAGE)
pipettepyexec_LTLIBRARIES = python/_pipette.la
python__pipette_la_SOURCES = python/_pipette.c core/cli/api.c core/cli/api.h $(pipette_SOURCES)
python__pipette_la_CFLAGS = $(AM_CFLAGS) $(JSONC_CFLAGS) $(SLURM_CPPFLAGS) $(PYTHON_CPPFLAGS)
python__pipette_la_LIBADD = core/libpipette_experts.la core/libpipette.la $(JSONC_LIBS) \
	$(NETTLE_LIBS) $(SLURM_LDFLAGS) $(SLURM_LIBS) $(GLPK_LIBS) -lm
# A Python module exports its init function only: libpipette's and the
# CLI's symbols (main.c's main among them) stay inside it.
python__pipette_la_LDFLAGS = $(AM_LDFLAGS) -module -avoid-version -shared \
	-export-symbols-regex '^PyInit__pipette$$'

# Installed under the name Python's importer prefers
# (_pipette.cpython-311-x86_64-linux-gnu.so: PEP 3149), without libtool's .la.
install-exec-hook:
	cd "$(DESTDIR)$(pipettepyexecdir)" && rm -f _pipette.la && \
	mv -f _pipette.so "_pipette$(PYTHON_EXT_SUFFIX)"
uninstall-local:
	rm -f "$(DESTDIR)$(pipettepyexecdir)/_pipette$(PYTHON_EXT_SUFFIX)"
	rm -rf "$(DESTDIR)$(pipettepyexecdir)/__pycache__"
	-rmdir "$(DESTDIR)$(pipettepyexecdir)"

endif

# make check: tests/python/ with that interpreter, on the package as built
# here (tests/python/run.sh assembles python/test-pkg/pipette from the
# sources and the built module); SKIP when the binding is not built.
TESTS += tests/python/run.sh
AM_TESTS_ENVIRONMENT += PIPETTE_PYTHON='$(PYTHON)'; export PIPETTE_PYTHON; \
	PIPETTE_PYTHON_SRC='$(abs_top_srcdir)/python'; export PIPETTE_PYTHON_SRC;
mostlyclean-local:
	rm -rf python/test-pkg
